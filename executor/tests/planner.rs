//! End-to-end tests of the SQL front end and planner: parsing, binding, refusal of
//! unsupported constructs, pushdown decisions, EXPLAIN and the plan cache.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use proptest::prelude::*;
use ringscan_executor::{
    parse_sql, plan_sql, Catalog, Expr, MemoryCatalog, Operator, PhysicalPlan, PlanError, Planner,
    Predicate, ScanSource,
};
use ringscan_ipc::msg::{CmpOp, Literal};

fn ohlcv() -> SchemaRef {
    let utc = Some("UTC".into());
    Arc::new(Schema::new(vec![
        Field::new("symbol", DataType::Utf8, false),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, utc), false),
        Field::new("open", DataType::Float64, false),
        Field::new("high", DataType::Float64, false),
        Field::new("low", DataType::Float64, false),
        Field::new("close", DataType::Float64, false),
        Field::new("volume", DataType::UInt64, false),
    ]))
}

/// The generator's `wide` schema (generator/src/datasets/wide.rs).
fn wide() -> SchemaRef {
    let utc = Some("UTC".into());
    let s = |n: &str, nullable| Field::new(n, DataType::Utf8, nullable);
    Arc::new(Schema::new(vec![
        Field::new("order_id", DataType::Int64, false),
        Field::new("customer_id", DataType::Int64, false),
        Field::new("product_id", DataType::Int32, false),
        s("region", false),
        s("country", false),
        s("status", false),
        s("channel", false),
        s("category", false),
        Field::new("order_date", DataType::Date32, false),
        Field::new("ship_date", DataType::Date32, true),
        Field::new(
            "created_at",
            DataType::Timestamp(TimeUnit::Microsecond, utc),
            false,
        ),
        Field::new("quantity", DataType::Int32, false),
        Field::new("unit_price", DataType::Float64, false),
        Field::new("discount", DataType::Float64, false),
        Field::new("tax", DataType::Float64, false),
        Field::new("total", DataType::Float64, false),
        s("currency", false),
        Field::new("is_priority", DataType::Boolean, false),
        Field::new("is_gift", DataType::Boolean, false),
        s("sales_rep", true),
        s("notes", true),
    ]))
}

/// Tables by name, and any file glob gets the ohlcv schema.
struct TestCatalog(MemoryCatalog);

impl Catalog for TestCatalog {
    fn schema(&self, source: &ScanSource) -> Option<SchemaRef> {
        match source {
            ScanSource::Files { .. } => Some(ohlcv()),
            table => self.0.schema(table),
        }
    }
}

fn catalog() -> TestCatalog {
    let mut c = MemoryCatalog::default();
    c.insert("ohlcv", ohlcv());
    c.insert("wide", wide());
    TestCatalog(c)
}

fn plan(sql: &str) -> PhysicalPlan {
    plan_sql(sql, &catalog()).unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn err(sql: &str) -> String {
    match plan_sql(sql, &catalog()) {
        Ok(p) => panic!("{sql} planned:\n{}", p.explain()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn every_supported_construct_binds() {
    let queries = [
        "SELECT * FROM ohlcv",
        "SELECT DISTINCT symbol FROM ohlcv",
        "SELECT symbol AS s, close FROM ohlcv WHERE close > 450",
        "SELECT * FROM 'data/ohlcv/*.parquet' LIMIT 5",
        "SELECT * FROM read_parquet('data/ohlcv/*.parquet')",
        "SELECT o.close FROM ohlcv o WHERE ohlcv.close > 1 OR o.open < 2",
        "SELECT close + 1, close - 1.5, close * 2, close / 2, -close FROM ohlcv",
        "SELECT * FROM ohlcv WHERE NOT (close >= 1 AND close <= 2) OR close <> 3",
        "SELECT * FROM ohlcv WHERE close BETWEEN 1 AND 2 AND volume NOT BETWEEN 3 AND 4",
        "SELECT * FROM ohlcv WHERE symbol IN ('SPY', 'QQQ') AND symbol NOT IN ('X')",
        "SELECT * FROM ohlcv WHERE symbol IS NULL OR symbol IS NOT NULL",
        "SELECT CAST(close AS BIGINT), CAST(volume AS DOUBLE), close::VARCHAR FROM ohlcv",
        "SELECT * FROM ohlcv WHERE ts > TIMESTAMP '2024-01-02 09:30:00'",
        "SELECT * FROM ohlcv WHERE ts > '2024-01-02' AND ts < DATE '2024-02-01'",
        "SELECT * FROM ohlcv WHERE ts > TIMESTAMP '2024-01-02' - INTERVAL '1 day'",
        "SELECT date_trunc('minute', ts) AS m, count(*) FROM ohlcv GROUP BY 1",
        "SELECT date_trunc('hour', ts), max(high) FROM ohlcv GROUP BY date_trunc('hour', ts)",
        "SELECT symbol, count(*), count(close), count(DISTINCT volume), sum(volume), \
         avg(close), min(low), max(high) FROM ohlcv GROUP BY symbol",
        "SELECT symbol, sum(close * volume) / sum(volume) AS vwap FROM ohlcv GROUP BY symbol \
         HAVING sum(volume) > 1000 ORDER BY vwap DESC NULLS FIRST LIMIT 10 OFFSET 2",
        "SELECT symbol, close FROM ohlcv ORDER BY symbol ASC, 2 DESC NULLS LAST",
        "SELECT count(*) FROM ohlcv",
        "EXPLAIN SELECT * FROM ohlcv WHERE close > 450",
        "SELECT order_date, sum(quantity), avg(total) FROM wide \
         WHERE ship_date IS NULL AND is_gift = TRUE AND order_date >= DATE '2022-03-01' \
         GROUP BY order_date ORDER BY order_date",
        "SELECT region AS r, count(*) FROM wide GROUP BY r",
    ];
    for sql in queries {
        plan(sql);
    }
}

#[test]
fn result_types_follow_duckdb() {
    let types = |sql: &str| -> Vec<DataType> {
        let p = plan(sql);
        let fields = p.logical.output_schema.fields().clone();
        fields.iter().map(|f| f.data_type().clone()).collect()
    };
    use DataType::*;
    // `volume + 1` stays unsigned (the literal adopts the column's type).
    assert_eq!(
        types("SELECT volume + 1, volume / 2, close * volume FROM ohlcv"),
        vec![UInt64, Float64, Float64]
    );
    assert_eq!(
        types("SELECT quantity * product_id, quantity - 1 FROM wide"),
        vec![Int64, Int64]
    );
    // sum(int) is Int64 where DuckDB says HUGEINT.
    assert_eq!(
        types("SELECT count(*), avg(volume), sum(volume), sum(close), min(symbol) FROM ohlcv"),
        vec![Int64, Float64, Int64, Float64, Utf8]
    );
    let p = plan("SELECT sum(close * volume) / sum(volume) FROM ohlcv");
    assert_eq!(
        p.logical.output_schema.field(0).name(),
        "sum(close * volume) / sum(volume)"
    );
}

#[test]
fn unsupported_constructs_are_named() {
    let cases = [
        (
            "SELECT * FROM ohlcv a JOIN ohlcv b ON a.ts = b.ts",
            "JOIN in FROM clause",
        ),
        (
            "SELECT * FROM ohlcv, wide",
            "multiple tables in FROM clause",
        ),
        (
            "SELECT * FROM (SELECT * FROM ohlcv)",
            "subquery in FROM clause",
        ),
        ("SELECT * FROM ohlcv WHERE close > (SELECT 1)", "subquery"),
        (
            "SELECT * FROM ohlcv WHERE symbol IN (SELECT symbol FROM ohlcv)",
            "subquery",
        ),
        ("WITH t AS (SELECT 1) SELECT * FROM t", "WITH clause"),
        ("SELECT * FROM ohlcv UNION SELECT * FROM ohlcv", "UNION"),
        ("SELECT upper(symbol) FROM ohlcv", "function upper"),
        (
            "SELECT row_number() OVER () FROM ohlcv",
            "window function row_number",
        ),
        (
            "SELECT sum(close) OVER (PARTITION BY symbol) FROM ohlcv",
            "window function sum",
        ),
        ("INSERT INTO ohlcv VALUES (1)", "INSERT"),
        ("DELETE FROM ohlcv", "DELETE"),
        ("CREATE TABLE t (a INT)", "CREATE TABLE"),
        ("SELECT 1", "SELECT without FROM"),
        ("SELECT * FROM ohlcv WHERE symbol LIKE 'S%'", "LIKE"),
        (
            "SELECT CASE WHEN close > 1 THEN 1 END FROM ohlcv",
            "CASE expression",
        ),
        ("SELECT close % 2 FROM ohlcv", "operator %"),
        ("SELECT symbol || 'x' FROM ohlcv", "operator ||"),
        (
            "SELECT DISTINCT ON (symbol) symbol FROM ohlcv",
            "DISTINCT ON",
        ),
        (
            "SELECT * FROM generate_series(1, 10)",
            "table function generate_series",
        ),
        ("SELECT TRY_CAST(close AS INT) FROM ohlcv", "TRY_CAST"),
        (
            "SELECT symbol FROM ohlcv GROUP BY ROLLUP (symbol)",
            "ROLLUP",
        ),
        (
            "SELECT * FROM ohlcv; SELECT * FROM ohlcv",
            "multiple statements",
        ),
        ("SELECT * FROM ohlcv WHERE EXISTS (SELECT 1)", "subquery"),
    ];
    for (sql, construct) in cases {
        let msg = err(sql);
        assert!(msg.contains("unsupported"), "{sql}: {msg}");
        assert!(
            msg.contains(construct),
            "{sql}: '{msg}' does not name '{construct}'"
        );
    }
}

#[test]
fn binding_errors_name_the_culprit() {
    assert_eq!(
        err("SELECT clsoe FROM ohlcv"),
        "unknown column 'clsoe'; did you mean 'close'?"
    );
    assert_eq!(
        err("SELECT * FROM wide WHERE custmer_id = 1"),
        "unknown column 'custmer_id'; did you mean 'customer_id'?"
    );
    assert_eq!(err("SELECT zzzzzz FROM ohlcv"), "unknown column 'zzzzzz'");
    assert_eq!(err("SELECT * FROM nope"), "unknown table 'nope'");
    assert_eq!(
        err("SELECT * FROM ohlcv WHERE symbol > 5"),
        "type mismatch: cannot apply '>' to Utf8 and Int64"
    );
    assert_eq!(
        err("SELECT close + symbol FROM ohlcv"),
        "type mismatch: cannot apply '+' to Float64 and Utf8"
    );
    assert!(err("SELECT sum(symbol) FROM ohlcv").contains("sum expects a number, got Utf8"));
    assert!(err("SELECT * FROM ohlcv WHERE close").contains("WHERE clause expects a boolean"));
    assert_eq!(
        err("SELECT symbol, close, sum(volume) FROM ohlcv GROUP BY symbol"),
        "column 'close' must appear in the GROUP BY clause or be used in an aggregate \
         function (SELECT list)"
    );
    assert!(err("SELECT symbol, sum(volume) FROM ohlcv").contains("column 'symbol' must appear"));
    assert!(err("SELECT * FROM ohlcv WHERE sum(close) > 1").contains("not allowed in WHERE"));
    assert!(err("SELECT sum(max(close)) FROM ohlcv").contains("an aggregate argument"));
    assert!(err("SELECT * FROM ohlcv WHERE ts > TIMESTAMP '2024-13-01'").contains("TIMESTAMP"));
    assert!(err("SELECT symbol FROM ohlcv ORDER BY 3").contains("position 3"));
    assert!(err("SELECT DISTINCT symbol FROM ohlcv ORDER BY close").contains("DISTINCT"));
    assert!(err("SELECT * FROM ohlcv WHERE x.close > 1").contains("unknown table 'x'"));
    assert!(matches!(
        plan_sql("SELEC * FROM ohlcv", &catalog()),
        Err(PlanError::Parse { .. })
    ));
}

/// (sql, pushed predicate text or "none", residual count, pushed limit, projection)
type PushdownCase = (
    &'static str,
    &'static str,
    usize,
    Option<u64>,
    &'static [&'static str],
);

#[test]
fn pushdown_decisions() {
    let cases: &[PushdownCase] = &[
        (
            "SELECT * FROM ohlcv WHERE close > 450 AND symbol = 'SPY' LIMIT 10",
            "((close > 450) AND (symbol = 'SPY'))",
            0,
            Some(10),
            &["symbol", "ts", "open", "high", "low", "close", "volume"],
        ),
        (
            "SELECT close FROM ohlcv WHERE close > 450 ORDER BY close LIMIT 10",
            "(close > 450)",
            0,
            None,
            &["close"],
        ),
        (
            "SELECT symbol FROM ohlcv WHERE close * 2 > 900 LIMIT 10",
            "none",
            1,
            None,
            &["symbol", "close"],
        ),
        (
            "SELECT symbol FROM ohlcv WHERE close > 1 AND close * 2 > 900",
            "(close > 1)",
            1,
            None,
            &["symbol", "close"],
        ),
        (
            "SELECT symbol FROM ohlcv WHERE close > 1 LIMIT 10 OFFSET 5",
            "(close > 1)",
            0,
            Some(10),
            &["symbol"],
        ),
        (
            "SELECT symbol, count(*) FROM ohlcv WHERE volume > 0 GROUP BY symbol LIMIT 3",
            "(volume > 0)",
            0,
            None,
            &["symbol"],
        ),
        (
            "SELECT DISTINCT symbol FROM ohlcv LIMIT 3",
            "none",
            0,
            None,
            &["symbol"],
        ),
        (
            "SELECT count(*) FROM ohlcv WHERE symbol IN ('SPY', 'QQQ')",
            "(symbol IN ('SPY', 'QQQ'))",
            0,
            None,
            &[],
        ),
        (
            "SELECT close FROM ohlcv WHERE 450 < close",
            "(close > 450)",
            0,
            None,
            &["close"],
        ),
        (
            "SELECT close FROM ohlcv WHERE close BETWEEN 400 AND 500.5",
            "(close BETWEEN 400 AND 500.5)",
            0,
            None,
            &["close"],
        ),
        (
            "SELECT close FROM ohlcv WHERE NOT (symbol = 'A' OR close IS NULL)",
            "(NOT ((symbol = 'A') OR (close IS NULL)))",
            0,
            None,
            &["close"],
        ),
        (
            "SELECT close FROM ohlcv WHERE volume > 1.5",
            "none",
            1,
            None,
            &["close", "volume"],
        ),
        (
            "SELECT close FROM ohlcv WHERE volume > -1",
            "none",
            1,
            None,
            &["close", "volume"],
        ),
        (
            "SELECT close FROM ohlcv WHERE high > low",
            "(high > low)",
            0,
            None,
            &["close"],
        ),
        (
            "SELECT close FROM ohlcv WHERE ts >= '2024-01-02'",
            "(ts >= TIMESTAMP '2024-01-02 00:00:00')",
            0,
            None,
            &["close"],
        ),
        (
            "SELECT close FROM ohlcv WHERE ts > TIMESTAMP '2024-01-02' - INTERVAL '1 day'",
            "(ts > TIMESTAMP '2024-01-01 00:00:00')",
            0,
            None,
            &["close"],
        ),
        (
            "SELECT close FROM ohlcv WHERE date_trunc('day', ts) = DATE '2024-01-02'",
            "none",
            1,
            None,
            &["ts", "close"],
        ),
        (
            "SELECT close FROM ohlcv WHERE symbol = NULL",
            "none",
            1,
            None,
            &["symbol", "close"],
        ),
        (
            "SELECT order_id FROM wide WHERE product_id = 5000000000",
            "none",
            1,
            None,
            &["order_id", "product_id"],
        ),
        (
            "SELECT order_id FROM wide WHERE order_date = DATE '2022-01-01' AND is_gift",
            "(order_date = DATE '2022-01-01')",
            1,
            None,
            &["order_id", "is_gift"],
        ),
        (
            "SELECT order_id FROM wide WHERE is_gift = TRUE AND created_at < DATE '2022-02-01'",
            "((is_gift = TRUE) AND (created_at < TIMESTAMP '2022-02-01 00:00:00'))",
            0,
            None,
            &["order_id"],
        ),
    ];
    for (sql, pred, residual, limit, projection) in cases {
        let p = plan(sql);
        let got = p
            .scan
            .predicate
            .as_ref()
            .map_or("none".into(), ringscan_executor::format_predicate);
        assert_eq!(&got, pred, "{sql}");
        assert_eq!(
            p.residual.len(),
            *residual,
            "{sql}: residual {:?}",
            p.residual
        );
        assert_eq!(p.scan.limit, *limit, "{sql}");
        assert_eq!(
            p.scan.projection.as_deref().unwrap_or_default(),
            *projection,
            "{sql}"
        );
        p.scan.validate().unwrap();
    }
    // The offset goes to the daemon with the limit, and only where the limit could go.
    for (sql, pushed) in [
        (
            "SELECT symbol FROM ohlcv WHERE close > 1 LIMIT 10 OFFSET 5",
            (Some(10), 5),
        ),
        ("SELECT symbol FROM ohlcv OFFSET 7", (None, 7)),
        (
            "SELECT symbol FROM ohlcv ORDER BY close LIMIT 10 OFFSET 5",
            (None, 0),
        ),
        (
            "SELECT symbol FROM ohlcv ORDER BY close OFFSET 5",
            (None, 0),
        ),
        ("SELECT DISTINCT symbol FROM ohlcv OFFSET 5", (None, 0)),
        (
            "SELECT symbol FROM ohlcv WHERE close * 2 > 1 OFFSET 5",
            (None, 0),
        ),
    ] {
        let p = plan(sql);
        assert_eq!((p.scan.limit, p.scan.offset), pushed, "{sql}");
        let executor_offset = p.operators.iter().find_map(|op| match op {
            ringscan_executor::Operator::Limit { offset, .. } => Some(*offset),
            _ => None,
        });
        if pushed.1 > 0 {
            assert_eq!(
                executor_offset.unwrap_or(0),
                0,
                "{sql}: offset applied twice"
            );
        } else {
            assert_eq!(executor_offset, Some(5), "{sql}: offset lost");
        }
    }
    // A bare boolean column (`AND is_gift`) is not a Predicate; the date comparison is.
    let p = plan("SELECT order_id FROM wide WHERE order_date = DATE '2022-01-01' AND is_gift");
    let want = Predicate::compare("order_date", CmpOp::Eq, Literal::Date32(18_993));
    assert_eq!(p.scan.predicate, Some(want));
}

#[test]
fn explain_shows_pushed_and_kept_work() {
    let p = plan(
        "EXPLAIN SELECT symbol, sum(volume) AS v FROM ohlcv WHERE close > 450 AND close * 2 > 1 \
         GROUP BY symbol HAVING sum(volume) > 10 ORDER BY v DESC LIMIT 5 OFFSET 1",
    );
    assert!(p.logical.explain);
    let text = p.explain();
    let expected = "\
Scan table ohlcv (IO daemon)
  pushed projection: [symbol, close, volume]
  pushed predicate: (close > 450)
  pushed limit: none (kept in executor: ORDER BY)
Executor
  Filter (residual): ((close * 2) > 1)
  HashAggregate: group_by=[symbol] aggregates=[sum(volume)]
  Filter (HAVING): (sum(volume) > 10)
  TopK: k=6 by sum(volume) DESC NULLS LAST
  Project: symbol AS \"symbol\" (Utf8), sum(volume) AS \"v\" (Int64)
  Limit: offset=1 limit=5
";
    assert_eq!(text, expected);
    let p = plan("SELECT * FROM 'data/*.parquet' WHERE symbol = 'SPY' LIMIT 3");
    assert!(p
        .explain()
        .starts_with("Scan files 'data/*.parquet' (IO daemon)"));
    assert!(p.explain().contains("pushed limit: 3"));
    assert!(matches!(
        p.operators.as_slice(),
        [
            Operator::Project(_),
            Operator::Limit {
                offset: 0,
                limit: Some(3)
            }
        ]
    ));
}

#[test]
fn plan_cache_counts_hits_and_stays_bounded() {
    let mut planner = Planner::new(catalog(), 64 << 10);
    let a = planner.plan("SELECT * FROM ohlcv").unwrap();
    let b = planner.plan("SELECT * FROM ohlcv").unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    assert!(planner.plan("SELECT nope FROM ohlcv").is_err());
    let s = planner.cache_stats();
    assert_eq!((s.hits, s.misses, s.entries), (1, 2, 1));
    for i in 0..500 {
        planner
            .plan(&format!("SELECT close FROM ohlcv WHERE close > {i}"))
            .unwrap();
    }
    let s = planner.cache_stats();
    assert!(s.bytes <= 64 << 10 && s.evictions > 0, "{s:?}");
    planner.invalidate();
    assert_eq!(planner.cache_stats().entries, 0);
}

#[test]
fn parse_keeps_explain_and_source() {
    let s = parse_sql("EXPLAIN SELECT * FROM 'a/b*.parquet'").unwrap();
    assert!(s.explain);
    assert!(matches!(s.source, ScanSource::Files { .. }));
}

/// One generated conjunct: `col op v` (pushable) or `col * 2 op v` (residual).
#[derive(Debug, Clone)]
enum Conj {
    Pushable(&'static str, i64),
    Residual(&'static str, i64),
}

fn conj() -> impl Strategy<Value = (Conj, &'static str)> {
    let col = prop_oneof![Just("close"), Just("open"), Just("volume"), Just("high")];
    let op = prop_oneof![
        Just(">"),
        Just("<="),
        Just("="),
        Just("<>"),
        Just("<"),
        Just(">=")
    ];
    let c = prop_oneof![
        (col.clone(), 0i64..1000).prop_map(|(c, v)| Conj::Pushable(c, v)),
        (col, 0i64..1000).prop_map(|(c, v)| Conj::Residual(c, v)),
    ];
    (c, op)
}

proptest! {
    /// pushed ∧ residual is exactly the original conjunct set: nothing lost or duplicated.
    #[test]
    fn split_preserves_conjuncts(conjs in proptest::collection::vec(conj(), 1..8)) {
        let texts: Vec<String> = conjs
            .iter()
            .map(|(c, op)| match c {
                Conj::Pushable(col, v) => format!("{col} {op} {v}"),
                Conj::Residual(col, v) => format!("{col} * 2 {op} {v}"),
            })
            .collect();
        let sql = format!("SELECT * FROM ohlcv WHERE {}", texts.join(" AND "));
        let p = plan(&sql);
        let original: Vec<Expr> = p.logical.filter.as_ref().unwrap().conjuncts().into_iter().cloned().collect();
        let mut rebuilt: Vec<Expr> = p.pushed.clone();
        rebuilt.extend(p.residual.iter().cloned());
        prop_assert_eq!(rebuilt.len(), original.len());
        for e in &original {
            let want = original.iter().filter(|x| *x == e).count();
            let got = rebuilt.iter().filter(|x| *x == e).count();
            prop_assert_eq!(want, got);
        }
        let n_push = conjs.iter().filter(|(c, _)| matches!(c, Conj::Pushable(..))).count();
        prop_assert_eq!(p.pushed.len(), n_push);
        let n_pred = match &p.scan.predicate {
            None => 0,
            Some(Predicate::And(v)) if n_push > 1 => v.len(),
            Some(_) => 1,
        };
        prop_assert_eq!(n_pred, n_push);
        prop_assert_eq!(p.scan.limit, None);
    }
}

#[test]
fn distinct_is_pushed_unless_it_follows_an_aggregation() {
    let p = plan("SELECT DISTINCT symbol FROM ohlcv WHERE close > 1");
    assert!(p.scan.distinct);
    assert!(p.explain().contains("pushed distinct:"), "{}", p.explain());
    // DISTINCT here still decides (the daemon only drops duplicates per row group).
    assert!(p.operators.iter().any(|o| matches!(o, Operator::Distinct)));
    let p = plan("SELECT DISTINCT close * 2 FROM ohlcv ORDER BY 1 LIMIT 3");
    assert!(p.scan.distinct);
    for sql in [
        "SELECT DISTINCT count(*) FROM ohlcv GROUP BY symbol",
        "SELECT count(DISTINCT symbol) FROM ohlcv",
        "SELECT symbol FROM ohlcv",
    ] {
        let p = plan(sql);
        assert!(!p.scan.distinct, "{sql}");
        assert!(!p.explain().contains("pushed distinct"), "{sql}");
    }
}
