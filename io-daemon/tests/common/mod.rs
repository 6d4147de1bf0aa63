//! Shared helpers for the pruning tests: a naive row-by-row SQL evaluator, Parquet writing
//! and the "no matching row was pruned" check.
#![allow(dead_code, reason = "each test binary uses a subset")]

use std::cmp::Ordering;
use std::fs::File;

use parquet::arrow::arrow_reader::RowSelection;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};
use proptest::prelude::*;
use ringscan_io_daemon::prune::FilePruner;
use ringscan_ipc::msg::{CmpOp, Literal, Operand, Predicate};

/// One cell.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Int(i128),
    Float(f64),
    Str(String),
    /// A timestamp in milliseconds.
    TsMillis(i64),
}

/// How NaN and signed zeros compare: IEEE (NaN unordered, -0 = +0) or DuckDB's order
/// (`Total`: -0 = +0 and every NaN equal and above +infinity, integers included), the
/// workspace's one rule (`ringscan_values::float`) that pruning and filtering follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FloatSemantics {
    Ieee,
    Total,
}

fn compare(v: &Value, lit: &Literal, sem: FloatSemantics) -> Option<Option<Ordering>> {
    // Outer None: NULL. Inner None: unordered (NaN under IEEE).
    let lit_f = |l: &Literal| match l {
        Literal::Int(i) => Some(*i as f64),
        Literal::UInt(u) => Some(*u as f64),
        Literal::Float(f) => Some(*f),
        _ => None,
    };
    match (v, lit) {
        (Value::Null, _) | (_, Literal::Null) => None,
        (Value::Int(x), Literal::Int(c)) => Some(Some(x.cmp(&i128::from(*c)))),
        (Value::Int(x), Literal::UInt(c)) => Some(Some(x.cmp(&i128::from(*c)))),
        (Value::Int(x), Literal::Float(c)) => Some(match sem {
            FloatSemantics::Ieee => (*x as f64).partial_cmp(c),
            FloatSemantics::Total => Some(ringscan_values::float::cmp_int_f64(*x, *c)),
        }),
        (Value::Int(x), Literal::Date32(c)) => Some(Some(x.cmp(&i128::from(*c)))),
        (Value::TsMillis(x), Literal::TimestampMicros(c)) => {
            Some(Some((i128::from(*x) * 1000).cmp(&i128::from(*c))))
        }
        (Value::Float(x), l) => {
            let c = lit_f(l)?;
            Some(match sem {
                FloatSemantics::Ieee => x.partial_cmp(&c),
                FloatSemantics::Total => Some(ringscan_values::float::cmp_f64(*x, c)),
            })
        }
        (Value::Str(x), Literal::Utf8(c)) => Some(Some(x.as_bytes().cmp(c.as_bytes()))),
        _ => panic!("the generator makes no {v:?} vs {lit:?}"),
    }
}

fn cmp_op(v: &Value, op: CmpOp, lit: &Literal, sem: FloatSemantics) -> Option<bool> {
    let ord = compare(v, lit, sem)?;
    Some(match ord {
        None => op == CmpOp::NotEq,
        Some(o) => match op {
            CmpOp::Eq => o.is_eq(),
            CmpOp::NotEq => o.is_ne(),
            CmpOp::Lt => o.is_lt(),
            CmpOp::LtEq => o.is_le(),
            CmpOp::Gt => o.is_gt(),
            CmpOp::GtEq => o.is_ge(),
        },
    })
}

fn and(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

fn not(a: Option<bool>) -> Option<bool> {
    a.map(|x| !x)
}

fn or(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    not(and(not(a), not(b)))
}

/// SQL evaluation of `pred` on one row; `row(column)` gives the cell.
#[expect(
    clippy::manual_try_fold,
    reason = "Kleene folds: NULL (None) must not short-circuit, a later FALSE still wins"
)]
pub(crate) fn eval_row(
    pred: &Predicate,
    row: &dyn Fn(&str) -> Value,
    sem: FloatSemantics,
) -> Option<bool> {
    let operand_cmp = |left: &Operand, op: CmpOp, right: &Operand| -> Option<bool> {
        match (left, right) {
            (Operand::Column(c), Operand::Literal(l)) => cmp_op(&row(c), op, l, sem),
            (Operand::Literal(l), Operand::Column(c)) => {
                let flipped = match op {
                    CmpOp::Lt => CmpOp::Gt,
                    CmpOp::LtEq => CmpOp::GtEq,
                    CmpOp::Gt => CmpOp::Lt,
                    CmpOp::GtEq => CmpOp::LtEq,
                    o => o,
                };
                cmp_op(&row(c), flipped, l, sem)
            }
            _ => panic!("the generator makes column-vs-literal comparisons only"),
        }
    };
    match pred {
        Predicate::Compare { left, op, right } => operand_cmp(left, *op, right),
        Predicate::And(v) => v
            .iter()
            .fold(Some(true), |acc, p| and(acc, eval_row(p, row, sem))),
        Predicate::Or(v) => v
            .iter()
            .fold(Some(false), |acc, p| or(acc, eval_row(p, row, sem))),
        Predicate::Not(p) => not(eval_row(p, row, sem)),
        Predicate::InList {
            expr,
            list,
            negated,
        } => {
            let r = list.iter().fold(Some(false), |acc, l| {
                or(
                    acc,
                    operand_cmp(expr, CmpOp::Eq, &Operand::Literal(l.clone())),
                )
            });
            if *negated {
                not(r)
            } else {
                r
            }
        }
        Predicate::Between {
            expr,
            low,
            high,
            negated,
        } => {
            let r = and(
                operand_cmp(expr, CmpOp::GtEq, &Operand::Literal(low.clone())),
                operand_cmp(expr, CmpOp::LtEq, &Operand::Literal(high.clone())),
            );
            if *negated {
                not(r)
            } else {
                r
            }
        }
        Predicate::IsNull { expr, negated } => {
            let Operand::Column(c) = expr else {
                panic!("IS NULL on a column only")
            };
            Some((row(c) == Value::Null) != *negated)
        }
    }
}

/// Read the metadata with the page index (when the file has one).
pub(crate) fn read_metadata(file: &File) -> ParquetMetaData {
    ParquetMetaDataReader::new()
        .with_page_index_policy(PageIndexPolicy::Optional)
        .parse_and_finish(file)
        .expect("metadata")
}

/// Selected flags, one per row of a row group of `num_rows` rows.
pub(crate) fn selection_mask(selection: &RowSelection, num_rows: usize) -> Vec<bool> {
    let mut mask = Vec::with_capacity(num_rows);
    for s in selection.iter() {
        mask.extend(std::iter::repeat_n(!s.skip, s.row_count));
    }
    assert!(
        mask.len() <= num_rows,
        "selection longer than the row group"
    );
    mask.resize(num_rows, false);
    mask
}

/// What pruning kept for one file, as per-row flags (row group kept by statistics AND by
/// bloom filters AND selected by the page index).
#[derive(Debug)]
pub(crate) struct Kept {
    pub(crate) rows: Vec<bool>,
    pub(crate) row_groups_pruned: usize,
    pub(crate) bloom_pruned: usize,
    pub(crate) pages_skipped: usize,
}

/// Run every pruning level on a file and report which rows survive.
pub(crate) fn prune_file(file: &File, meta: &ParquetMetaData, pred: &Predicate) -> Kept {
    let pruner = FilePruner::try_new(meta, "test.parquet").expect("pruner");
    let by_stats = pruner.row_groups(pred);
    assert_eq!(by_stats.considered, meta.num_row_groups());
    assert_eq!(by_stats.kept.len() + by_stats.pruned, by_stats.considered);
    let by_bloom = pruner
        .bloom_filters(file, pred, &by_stats.kept)
        .expect("bloom");
    assert!(by_bloom.kept.iter().all(|g| by_stats.kept.contains(g)));
    let mut rows = Vec::new();
    let mut pages_skipped = 0;
    for g in 0..meta.num_row_groups() {
        let n = usize::try_from(meta.row_group(g).num_rows()).expect("rows");
        if !by_bloom.kept.contains(&g) {
            rows.extend(std::iter::repeat_n(false, n));
            continue;
        }
        let pages = pruner.pages(pred, g).expect("pages");
        assert_eq!(pages.row_group, g);
        let mask = selection_mask(&pages.selection, n);
        assert_eq!(
            mask.iter().filter(|m| **m).count() as u64,
            pages.rows_selected
        );
        assert!(pages.pages_skipped <= pages.pages_considered);
        pages_skipped += pages.pages_skipped;
        rows.extend(mask);
    }
    Kept {
        rows,
        row_groups_pruned: by_stats.pruned,
        bloom_pruned: by_bloom.pruned,
        pages_skipped,
    }
}

/// Any comparison operator.
pub(crate) fn op() -> impl Strategy<Value = CmpOp> {
    prop::sample::select(vec![
        CmpOp::Eq,
        CmpOp::NotEq,
        CmpOp::Lt,
        CmpOp::LtEq,
        CmpOp::Gt,
        CmpOp::GtEq,
    ])
}

/// One leaf predicate on one of `columns`, with literals from `literal_for(column)`:
/// comparisons (either side), IN lists, BETWEEN, IS [NOT] NULL.
fn leaf(
    columns: Vec<&'static str>,
    literal_for: fn(&'static str) -> BoxedStrategy<Literal>,
) -> impl Strategy<Value = Predicate> {
    prop::sample::select(columns).prop_flat_map(move |c| {
        let col = Operand::Column(c.to_owned());
        prop_oneof![
            4 => (op(), literal_for(c), any::<bool>()).prop_map({
                let col = col.clone();
                move |(op, lit, flip)| {
                    let lit = Operand::Literal(lit);
                    if flip {
                        Predicate::Compare { left: lit, op, right: col.clone() }
                    } else {
                        Predicate::Compare { left: col.clone(), op, right: lit }
                    }
                }
            }),
            1 => (prop::collection::vec(literal_for(c), 0..4), any::<bool>()).prop_map({
                let col = col.clone();
                move |(list, negated)| Predicate::InList { expr: col.clone(), list, negated }
            }),
            1 => (literal_for(c), literal_for(c), any::<bool>()).prop_map({
                let col = col.clone();
                move |(low, high, negated)| Predicate::Between { expr: col.clone(), low, high, negated }
            }),
            1 => any::<bool>().prop_map(move |negated| Predicate::IsNull { expr: col.clone(), negated }),
        ]
    })
}

/// Random predicate trees up to three levels of AND / OR / NOT over `leaf`s.
pub(crate) fn predicate_over(
    columns: Vec<&'static str>,
    literal_for: fn(&'static str) -> BoxedStrategy<Literal>,
) -> impl Strategy<Value = Predicate> {
    leaf(columns, literal_for).prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Predicate::And),
            prop::collection::vec(inner.clone(), 0..3).prop_map(Predicate::Or),
            inner.prop_map(|p| Predicate::Not(Box::new(p))),
        ]
    })
}
