//! Unit and property tests of the executor against the reference interpreter.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use proptest::prelude::*;

use super::reference::{self, approx_eq, Row, V};
use super::*;
use crate::{plan_sql, MemoryCatalog};

const T0: i64 = 1_704_187_800_000_000; // 2024-01-02 09:30:00

fn table() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int64, true),
        Field::new("b", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("t", DataType::Timestamp(TimeUnit::Microsecond, None), true),
    ]))
}

type Data = (Option<i64>, Option<f64>, Option<String>, Option<i64>);

fn batch(rows: &[Data]) -> RecordBatch {
    let a: Int64Array = rows.iter().map(|r| r.0).collect();
    let b: Float64Array = rows.iter().map(|r| r.1).collect();
    let s: StringArray = rows.iter().map(|r| r.2.clone()).collect();
    let t: TimestampMicrosecondArray = rows.iter().map(|r| r.3).collect();
    let cols: Vec<ArrayRef> = vec![Arc::new(a), Arc::new(b), Arc::new(s), Arc::new(t)];
    RecordBatch::try_new(table(), cols).unwrap()
}

fn plan(sql: &str) -> Result<PhysicalPlan, crate::PlanError> {
    let mut c = MemoryCatalog::default();
    c.insert("t", table());
    plan_sql(sql, &c)
}

/// The plan with the whole WHERE applied by the executor over full-table batches
/// (there is no daemon here to apply the pushed part).
fn executor_only(mut p: PhysicalPlan) -> PhysicalPlan {
    p.scan.projection = None;
    p.operators.retain(|o| !matches!(o, Operator::Filter(_)));
    if let Some(f) = &p.logical.filter {
        p.operators.insert(0, Operator::Filter(f.clone()));
    }
    // A pushed offset is the daemon's to apply: without one, the executor applies it.
    let offset = std::mem::take(&mut p.scan.offset);
    p.scan.limit = None;
    if offset > 0 {
        match p.operators.iter_mut().find_map(|o| match o {
            Operator::Limit { offset, .. } => Some(offset),
            _ => None,
        }) {
            Some(o) => *o = offset,
            None => p.operators.push(Operator::Limit {
                offset,
                limit: None,
            }),
        }
    }
    p
}

fn run_split(p: &PhysicalPlan, rows: &[Data], sizes: &[usize]) -> Result<QueryResult, ExecError> {
    let p = &executor_only(p.clone());
    let mut batches = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while start < rows.len() {
        let n = sizes.get(i).copied().unwrap_or(rows.len()).max(1);
        let end = (start + n).min(rows.len());
        batches.push(Ok::<_, ExecError>(batch(&rows[start..end])));
        start = end;
        i += 1;
    }
    execute(p, table(), batches)
}

fn result_rows(r: &QueryResult) -> Vec<Row> {
    let mut out = Vec::new();
    for b in &r.batches {
        for i in 0..b.num_rows() {
            out.push(reference::row_of(b, i));
        }
    }
    out
}

fn reference_rows(p: &PhysicalPlan, rows: &[Data]) -> Result<Vec<Row>, reference::RefError> {
    let names: Vec<String> = table().fields().iter().map(|f| f.name().clone()).collect();
    let data: Vec<Row> = rows
        .iter()
        .map(|r| {
            let b = batch(std::slice::from_ref(r));
            reference::row_of(&b, 0)
        })
        .collect();
    reference::run(&p.logical, &names, &data)
}

fn same_rows(a: &[Row], b: &[Row]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.len() == y.len() && x.iter().zip(y).all(|(u, v)| approx_eq(u, v)))
}

fn data(v: &[(i64, f64, &str, i64)]) -> Vec<Data> {
    v.iter()
        .map(|(a, b, s, t)| (Some(*a), Some(*b), Some((*s).to_owned()), Some(*t)))
        .collect()
}

fn sample() -> Vec<Data> {
    let mut d = data(&[
        (1, 10.0, "x", T0),
        (2, 20.0, "y", T0 + 60_000_000),
        (3, 30.0, "x", T0 + 3_600_000_000),
        (4, f64::NAN, "z", T0 + 86_400_000_000),
    ]);
    d.push((None, None, None, None));
    d
}

#[test]
fn vwap_style_aggregate() {
    let p = plan(
        "SELECT s, sum(b * a) / sum(a) AS vwap, count(*) AS n, avg(a) FROM t GROUP BY s ORDER BY s",
    )
    .unwrap();
    let r = run_split(&p, &sample(), &[2]).unwrap();
    assert_eq!(r.schema, p.logical.output_schema);
    let rows = result_rows(&r);
    assert_eq!(rows.len(), 4);
    assert!(approx_eq(&rows[0][1], &V::Float((10.0 + 90.0) / 4.0)));
    assert!(approx_eq(&rows[0][2], &V::Int(2)));
    assert!(matches!(rows[3][0], V::Null)); // NULLS LAST
    assert!(matches!(rows[3][1], V::Null)); // sum of no values / sum of no values
}

#[test]
fn empty_input_aggregates() {
    let p = plan("SELECT count(*), count(a), sum(a), avg(b), min(s) FROM t").unwrap();
    let r = run_split(&p, &[], &[]).unwrap();
    let rows = result_rows(&r);
    assert_eq!(rows.len(), 1);
    assert!(matches!(rows[0][0], V::Int(0)) && matches!(rows[0][1], V::Int(0)));
    assert!(rows[0][2..].iter().all(|v| matches!(v, V::Null)));
}

#[test]
fn integer_overflow_is_an_error() {
    let p = plan("SELECT a * 9223372036854775807 FROM t").unwrap();
    let err = run_split(&p, &sample(), &[]).unwrap_err();
    assert!(matches!(err, ExecError::Overflow { .. }), "{err}");
    assert!(
        err.to_string().contains("(a * 9223372036854775807)"),
        "{err}"
    );
    let p = plan("SELECT sum(a) FROM t").unwrap();
    let big = data(&[(i64::MAX, 0.0, "", 0), (1, 0.0, "", 0)]);
    let err = run_split(&p, &big, &[]).unwrap_err();
    assert!(err.to_string().contains("sum(a)"), "{err}");
}

#[test]
fn division_follows_ieee_like_duckdb() {
    let p = plan("SELECT a / 0, 7 / 2, b / 0.0 FROM t WHERE a = 1").unwrap();
    let rows = result_rows(&run_split(&executor_only(p), &sample(), &[]).unwrap());
    assert!(matches!(rows[0][0], V::Float(f) if f == f64::INFINITY));
    assert!(matches!(rows[0][1], V::Float(f) if f == 3.5));
}

#[test]
fn limit_without_order_stops_the_scan() {
    let p = plan("SELECT a FROM t LIMIT 2").unwrap();
    let mut e = Execution::new(&p, scan_schema(&p)).unwrap();
    let b = batch(&sample()).project(&[0]).unwrap();
    assert_eq!(e.push(b.clone()).unwrap(), Flow::Done);
    assert_eq!(e.push(b).unwrap(), Flow::Done);
    assert_eq!(e.finish().unwrap().rows, 2);
}

#[test]
fn schema_mismatch_names_columns() {
    let p = plan("SELECT a, s FROM t").unwrap();
    let err = Execution::new(&p, table()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("a: Int64, s: Utf8") && msg.contains("b: Float64"),
        "{msg}"
    );
    let mut e = Execution::new(&p, scan_schema(&p)).unwrap();
    let err = e.push(batch(&sample())).unwrap_err();
    assert!(matches!(err, ExecError::SchemaMismatch { .. }));
}

#[test]
fn empty_projection_counts_rows() {
    let p = plan("SELECT count(*) FROM t").unwrap();
    let input = scan_schema(&p);
    assert!(input.fields().is_empty());
    let opts = arrow_array::RecordBatchOptions::new().with_row_count(Some(7));
    let b = RecordBatch::try_new_with_options(input.clone(), vec![], &opts).unwrap();
    let r = execute(&p, input, [Ok::<_, ExecError>(b.clone()), Ok(b)]).unwrap();
    assert!(matches!(result_rows(&r)[0][0], V::Int(14)));
}

#[test]
fn topk_holds_bounded_rows_and_publishes_a_dynamic_filter() {
    let p = plan("SELECT a FROM t ORDER BY a DESC LIMIT 3").unwrap();
    let mut e = Execution::new(&p, scan_schema(&p)).unwrap();
    assert!(e.dynamic_filter().is_none());
    for chunk in 0..50 {
        let rows: Vec<Data> = (0..1000)
            .map(|i| (Some(chunk * 1000 + i), None, None, None))
            .collect();
        e.push(batch(&rows).project(&[0]).unwrap()).unwrap();
        let held = e.stages.iter().find_map(|s| match s {
            Stage::TopK(t) => Some(t.held_rows()),
            _ => None,
        });
        assert!(held.unwrap() <= 4096 + 1000);
    }
    let f = e.dynamic_filter().expect("k rows held");
    assert_eq!(crate::format_predicate(&f), "(a > 49997)");
    let rows = result_rows(&e.finish().unwrap());
    let got: Vec<i128> = rows
        .iter()
        .map(|r| match r[0] {
            V::Int(i) => i,
            _ => -1,
        })
        .collect();
    assert_eq!(got, vec![49_999, 49_998, 49_997]);
}

#[test]
fn distinct_and_temporal() {
    let p = plan("SELECT DISTINCT date_trunc('day', t) AS d FROM t ORDER BY d").unwrap();
    let rows = result_rows(&run_split(&p, &sample(), &[1]).unwrap());
    assert_eq!(rows.len(), 3);
    let p = plan("SELECT t + INTERVAL '1 day' FROM t WHERE t > '2024-01-02 09:45:00'").unwrap();
    let rows = result_rows(&run_split(&executor_only(p), &sample(), &[]).unwrap());
    assert!(matches!(rows[0][0], V::Ts(x) if x == T0 + 3_600_000_000 + 86_400_000_000));
}

// ---------------------------------------------------------------- property tests

fn arb_row() -> impl Strategy<Value = Data> {
    let a = prop_oneof![
        3 => (-20i64..20).prop_map(Some),
        1 => Just(None),
        1 => prop_oneof![Just(i64::MAX), Just(i64::MIN), Just(1i64 << 40)].prop_map(Some),
    ];
    let b = prop_oneof![
        4 => (-100i32..100).prop_map(|v| Some(f64::from(v) / 4.0)),
        1 => Just(None),
        1 => prop_oneof![Just(f64::NAN), Just(0.0), Just(-0.0), Just(f64::INFINITY), Just(f64::NEG_INFINITY)].prop_map(Some),
    ];
    let s = prop_oneof![
        4 => prop_oneof![Just("x"), Just("y"), Just("z"), Just(""), Just("a,b")].prop_map(|v| Some(v.to_owned())),
        1 => Just(None),
    ];
    let t = prop_oneof![
        4 => (0i64..200).prop_map(|k| Some(T0 + k * 1_800_000_000)),
        1 => Just(None),
    ];
    (a, b, s, t)
}

fn num_expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("a".to_owned()),
        Just("b".to_owned()),
        (-5i64..50).prop_map(|v| v.to_string()),
        (-8i32..8).prop_map(|v| format!("{}", f64::from(v) / 2.0 + 0.25)),
    ];
    leaf.prop_recursive(3, 12, 2, |inner| {
        prop_oneof![
            (
                inner.clone(),
                prop_oneof![Just("+"), Just("-"), Just("*"), Just("/")],
                inner.clone()
            )
                .prop_map(|(l, op, r)| format!("({l} {op} {r})")),
            inner.clone().prop_map(|x| format!("(-{x})")),
            inner.clone().prop_map(|x| format!("CAST({x} AS DOUBLE)")),
        ]
    })
}

fn bool_expr() -> impl Strategy<Value = String> {
    let cmp = prop_oneof![
        Just("="),
        Just("<>"),
        Just("<"),
        Just("<="),
        Just(">"),
        Just(">=")
    ];
    let leaf = prop_oneof![
        (num_expr(), cmp.clone(), num_expr()).prop_map(|(l, o, r)| format!("{l} {o} {r}")),
        (cmp.clone(), prop_oneof![Just("x"), Just("y"), Just("")])
            .prop_map(|(o, v)| format!("s {o} '{v}'")),
        (cmp, 0i64..200).prop_map(|(o, k)| format!(
            "t {o} TIMESTAMP '2024-01-0{} {:02}:00:00'",
            2 + k / 48,
            k % 24
        )),
        prop_oneof![Just("a"), Just("b"), Just("s"), Just("t")]
            .prop_map(|c| format!("{c} IS NULL")),
        prop_oneof![Just("a"), Just("b")].prop_map(|c| format!("{c} IS NOT NULL")),
        (-10i64..10, 0i64..10).prop_map(|(l, w)| format!("a BETWEEN {l} AND {}", l + w)),
        (-4i64..4).prop_map(|l| format!("b NOT BETWEEN {l} AND {}", l + 3)),
        proptest::collection::vec(-5i64..5, 1..4).prop_map(|v| {
            let items: Vec<String> = v.iter().map(ToString::to_string).collect();
            format!("a IN ({})", items.join(", "))
        }),
        Just("s NOT IN ('x', NULL)".to_owned()),
    ];
    leaf.prop_recursive(2, 6, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(l, r)| format!("({l} AND {r})")),
            (inner.clone(), inner.clone()).prop_map(|(l, r)| format!("({l} OR {r})")),
            inner.prop_map(|x| format!("(NOT {x})")),
        ]
    })
}

fn order_item(n: usize) -> impl Strategy<Value = String> {
    (1..=n, any::<bool>(), prop::option::of(any::<bool>())).prop_map(|(pos, desc, nulls)| {
        let d = if desc { " DESC" } else { "" };
        let nl = match nulls {
            Some(true) => " NULLS FIRST",
            Some(false) => " NULLS LAST",
            None => "",
        };
        format!("{pos}{d}{nl}")
    })
}

fn tail() -> impl Strategy<Value = (Option<u64>, Option<u64>)> {
    (prop::option::of(0u64..8), prop::option::of(0u64..5))
}

fn plain_query() -> impl Strategy<Value = String> {
    let item = prop_oneof![
        Just("a".to_owned()),
        Just("b".to_owned()),
        Just("s".to_owned()),
        Just("t".to_owned()),
        Just("date_trunc('hour', t)".to_owned()),
        num_expr(),
        bool_expr(),
    ];
    (
        proptest::collection::vec(item, 1..4),
        any::<bool>(),
        prop::option::of(bool_expr()),
        proptest::collection::vec(order_item(3), 0..3),
        tail(),
    )
        .prop_map(|(items, distinct, filter, order, (limit, offset))| {
            let n = items.len();
            let order: Vec<String> = order
                .into_iter()
                .filter(|o| o[..1].parse::<usize>().map(|p| p <= n).unwrap_or(false))
                .collect();
            sql(&items, distinct, filter, "", "", &order, limit, offset)
        })
}

fn agg_query() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("s"),
        Just("a"),
        Just("date_trunc('hour', t)"),
        Just("b")
    ];
    let agg = prop_oneof![
        Just("count(*)"),
        Just("count(b)"),
        Just("count(DISTINCT a)"),
        Just("count(DISTINCT b)"),
        Just("sum(a)"),
        Just("sum(b)"),
        Just("avg(a)"),
        Just("avg(b)"),
        Just("min(s)"),
        Just("max(t)"),
        Just("min(b)"),
        Just("max(a)"),
        Just("sum(b * a) / sum(a)"),
        Just("max(a) - min(a)"),
    ];
    (
        proptest::collection::vec(key, 0..3),
        proptest::collection::vec(agg, 1..4),
        prop::option::of(bool_expr()),
        prop::option::of(0i64..3),
        proptest::collection::vec(order_item(4), 0..3),
        tail(),
    )
        .prop_map(|(mut keys, aggs, filter, having, order, (limit, offset))| {
            keys.dedup();
            let mut items: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
            items.extend(aggs.iter().map(|a| (*a).to_owned()));
            let n = items.len();
            let order: Vec<String> = order
                .into_iter()
                .filter(|o| o[..1].parse::<usize>().map(|p| p <= n).unwrap_or(false))
                .collect();
            let group = if keys.is_empty() {
                String::new()
            } else {
                format!(" GROUP BY {}", keys.join(", "))
            };
            let having = having.map_or(String::new(), |h| format!(" HAVING count(*) > {h}"));
            sql(
                &items, false, filter, &group, &having, &order, limit, offset,
            )
        })
}

#[allow(clippy::too_many_arguments)]
fn sql(
    items: &[String],
    distinct: bool,
    filter: Option<String>,
    group: &str,
    having: &str,
    order: &[String],
    limit: Option<u64>,
    offset: Option<u64>,
) -> String {
    let mut q = format!(
        "SELECT {}{} FROM t",
        if distinct { "DISTINCT " } else { "" },
        items.join(", ")
    );
    if let Some(f) = filter {
        q += &format!(" WHERE {f}");
    }
    q += group;
    q += having;
    if !order.is_empty() {
        q += &format!(" ORDER BY {}", order.join(", "));
    }
    if let Some(l) = limit {
        q += &format!(" LIMIT {l}");
    }
    if let Some(o) = offset {
        q += &format!(" OFFSET {o}");
    }
    q
}

fn check(q: &str, rows: &[Data], sizes: &[usize]) -> Result<(), TestCaseError> {
    let Ok(p) = plan(q) else {
        return Ok(()); // outside the subset or refused by the binder
    };
    let p = executor_only(p);
    let expected = reference_rows(&p, rows);
    let got = run_split(&p, rows, sizes);
    match (expected, got) {
        (Ok(e), Ok(g)) => {
            prop_assert_eq!(&g.schema, &p.logical.output_schema);
            let g = result_rows(&g);
            prop_assert!(
                same_rows(&e, &g),
                "query {}\nexpected {:?}\ngot {:?}",
                q,
                e,
                g
            );
        }
        (Err(_), Err(_)) => {}
        // With LIMIT/OFFSET the executor evaluates the select list only on the rows it
        // needs (top-k, early stop), so an error on a row outside the page may or may
        // not be met; without them, both must agree.
        _ if p.logical.limit.is_some() || p.logical.offset > 0 => {}
        (e, g) => prop_assert!(
            false,
            "query {}\nreference {:?}\nexecutor {:?}",
            q,
            e,
            g.map(|r| result_rows(&r))
        ),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn plain_queries_match_reference(
        q in plain_query(),
        rows in proptest::collection::vec(arb_row(), 0..40),
        sizes in proptest::collection::vec(1usize..9, 0..8),
    ) {
        check(&q, &rows, &sizes)?;
    }

    #[test]
    fn aggregate_queries_match_reference(
        q in agg_query(),
        rows in proptest::collection::vec(arb_row(), 0..40),
        sizes in proptest::collection::vec(1usize..9, 0..8),
    ) {
        check(&q, &rows, &sizes)?;
    }

    #[test]
    fn topk_matches_full_sort(
        rows in proptest::collection::vec(arb_row(), 0..300),
        k in 0u64..20,
        offset in 0u64..5,
        desc in any::<bool>(),
        sizes in proptest::collection::vec(1usize..64, 0..8),
    ) {
        let d = if desc { "DESC" } else { "ASC" };
        check(&format!("SELECT a, b, s FROM t ORDER BY b {d}, s LIMIT {k} OFFSET {offset}"), &rows, &sizes)?;
    }
}

/// Whether any buffer of `b` lies inside one of `a`'s buffers (an alias).
fn shares_memory(a: &RecordBatch, b: &RecordBatch) -> bool {
    fn ranges(batch: &RecordBatch) -> Vec<(usize, usize)> {
        fn walk(d: &arrow_data::ArrayData, out: &mut Vec<(usize, usize)>) {
            for buf in d.buffers() {
                out.push((buf.as_ptr() as usize, buf.len()));
            }
            if let Some(n) = d.nulls() {
                let b = n.buffer();
                out.push((b.as_ptr() as usize, b.len()));
            }
            for c in d.child_data() {
                walk(c, out);
            }
        }
        let mut out = Vec::new();
        for c in batch.columns() {
            walk(&c.to_data(), &mut out);
        }
        out
    }
    let theirs = ranges(a);
    ranges(b)
        .iter()
        .any(|&(p, n)| n > 0 && theirs.iter().any(|&(q, m)| m > 0 && p < q + m && q < p + n))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// `owned_copy` (what `Execution::unpin` uses to hand ring space back) equals
    /// `concat_batches` of its input, slices included, and aliases none of it.
    #[test]
    fn owned_copy_equals_concat_and_aliases_nothing(
        rows in proptest::collection::vec(arb_row(), 1..60),
        cuts in proptest::collection::vec(0usize..60, 0..4),
        offset in 0usize..5,
    ) {
        let whole = batch(&rows);
        let mut parts = Vec::new();
        let mut start = offset.min(whole.num_rows());
        let mut cuts = cuts;
        cuts.sort_unstable();
        for c in cuts.into_iter().chain([whole.num_rows()]) {
            let end = c.clamp(start, whole.num_rows());
            parts.push(whole.slice(start, end - start));
            start = end;
        }
        let expected = arrow_select::concat::concat_batches(&table(), &parts).unwrap();
        let got = owned_copy(table(), &parts).unwrap();
        prop_assert_eq!(&got, &expected);
        prop_assert!(!shares_memory(&whole, &got), "the copy points into its input");
    }
}

#[test]
fn owned_copy_of_nothing_is_empty() {
    let got = owned_copy(table(), &[]).unwrap();
    assert_eq!(got.num_rows(), 0);
    assert_eq!(got.schema(), table());
}
