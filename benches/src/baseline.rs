//! The in-memory baseline: seed 000's and seed 001's anti-pattern, written honestly and
//! efficiently.
//!
//! Every query reads every needed column (projection, filter and sort columns) of every
//! file of the table into memory with parquet's arrow reader (projection mask, 64 Ki-row
//! batches, no row-group pruning, no predicate pushdown), then filters with arrow's
//! comparison kernels, sorts with `lexsort_to_indices` (bounded by OFFSET + LIMIT when
//! there is a LIMIT), pages, and projects. No work is skipped because of the LIMIT: the
//! pattern loads first and thinks later, which is what the benchmarks measure.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_arith::boolean::{and_kleene, is_not_null, is_null, not, or_kleene};
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Float64Type, Int32Type, Int64Type, TimestampMicrosecondType, UInt64Type,
};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Date32Array, Float64Array, Int32Array, Int64Array, RecordBatch,
    Scalar, StringArray, TimestampMicrosecondArray, UInt32Array, UInt64Array,
};
use arrow_ord::cmp;
use arrow_ord::sort::{lexsort_to_indices, SortColumn, SortOptions};
use arrow_schema::{DataType, TimeUnit};
use arrow_select::concat::concat_batches;
use arrow_select::filter::filter_record_batch;
use arrow_select::take::take_record_batch;
use ringscan_ipc::msg::{CmpOp, Literal, Operand, Predicate};

use crate::engine::{Engine, RunOutcome};
use crate::error::BenchError;
use crate::load::load;
pub use crate::load::{parquet_files, read_column_f64, BATCH_ROWS};
use crate::suites::{Output, Scenario, Shape};

/// The in-memory baseline over a data directory of tables.
#[derive(Debug, Clone)]
pub struct Baseline {
    data_dir: PathBuf,
}

/// What the baseline computed: the result rows and the Parquet bytes it read.
#[derive(Debug)]
pub struct BaselineResult {
    /// The result (for `count(*)`, one row with column `count_star`; for DISTINCT, the
    /// distinct values).
    pub batch: RecordBatch,
    /// Compressed bytes of the column chunks read.
    pub bytes_read: u64,
}

impl Baseline {
    /// A baseline over `data_dir` (tables are its subdirectories).
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
        }
    }

    /// Runs `shape`: load, filter, sort, page, project.
    pub fn execute(&self, shape: &Shape) -> Result<BaselineResult, BenchError> {
        let table_dir = self.data_dir.join(&shape.table);
        let needed = needed_columns(shape);
        let (batches, bytes_read) = load(&table_dir, &shape.table, needed.as_deref())?;
        let schema = match batches.first() {
            Some(b) => b.schema(),
            None => return Err(BenchError::NoFiles(table_dir)),
        };
        // Filter every loaded batch: the whole table is in memory before this line.
        let mut kept = Vec::with_capacity(batches.len());
        for batch in batches {
            let batch = match &shape.filter {
                Some(pred) => {
                    let mask = evaluate(pred, &batch, &shape.table)?;
                    filter_record_batch(&batch, &mask)
                        .map_err(|e| BenchError::arrow("filtering", e))?
                }
                None => batch,
            };
            if batch.num_rows() > 0 {
                kept.push(batch);
            }
        }
        let concat = |batches: &[RecordBatch]| {
            concat_batches(&schema, batches).map_err(|e| BenchError::arrow("concatenating", e))
        };
        let batch = match &shape.output {
            Output::CountStar => {
                let rows: usize = kept.iter().map(RecordBatch::num_rows).sum();
                let count = Int64Array::from(vec![rows as i64]);
                RecordBatch::try_from_iter([("count_star", Arc::new(count) as ArrayRef)])
                    .map_err(|e| BenchError::arrow("count(*)", e))?
            }
            Output::Distinct(column) => distinct(&concat(&kept)?, column, &shape.table)?,
            // Unsorted pages: slice the loaded batches, copy only the page.
            Output::Rows if shape.sort.is_empty() => project(
                &concat(&page_slices(&kept, shape.offset, shape.limit))?,
                shape,
            )?,
            Output::Rows => {
                let filtered = concat(&kept)?;
                drop(kept);
                let paged = sort_and_page(&filtered, shape)?;
                project(&paged, shape)?
            }
        };
        Ok(BaselineResult { batch, bytes_read })
    }
}

impl Engine for Baseline {
    fn name(&self) -> &str {
        "baseline"
    }

    fn prepare(&mut self, scenario: &Scenario) -> Result<(), BenchError> {
        // Nothing is kept between runs (that is the pattern); only check the table exists.
        parquet_files(&self.data_dir.join(&scenario.shape.table)).map(drop)
    }

    fn run(&mut self, scenario: &Scenario) -> Result<RunOutcome, BenchError> {
        let result = self.execute(&scenario.shape)?;
        Ok(RunOutcome {
            rows: result.batch.num_rows() as u64,
            bytes_read: Some(result.bytes_read),
        })
    }
}

/// The columns to read: `None` is all of them.
fn needed_columns(shape: &Shape) -> Option<Vec<String>> {
    let mut cols: Vec<String> = match (&shape.output, &shape.projection) {
        (Output::Rows, None) => return None,
        (Output::Rows, Some(p)) => p.clone(),
        (Output::CountStar, _) => Vec::new(),
        (Output::Distinct(c), _) => vec![c.clone()],
    };
    if let Some(pred) = &shape.filter {
        cols.extend(pred.columns().into_iter().map(str::to_owned));
    }
    cols.extend(shape.sort.iter().map(|k| k.column.clone()));
    let mut seen = HashSet::new();
    cols.retain(|c| seen.insert(c.clone()));
    Some(cols)
}

fn column<'a>(batch: &'a RecordBatch, name: &str, table: &str) -> Result<&'a ArrayRef, BenchError> {
    batch
        .column_by_name(name)
        .ok_or_else(|| BenchError::UnknownColumn {
            table: table.to_owned(),
            column: name.to_owned(),
        })
}

/// `literal` as a one-element array of `data_type`, the column's type.
fn literal_array(literal: &Literal, data_type: &DataType) -> Result<ArrayRef, BenchError> {
    let bad = || {
        BenchError::Unsupported(format!(
            "literal {literal:?} against a column of type {data_type}"
        ))
    };
    let exact_i64 = |f: f64| (f.fract() == 0.0 && f.abs() < 9.0e15).then_some(f as i64);
    Ok(match (data_type, literal) {
        (DataType::Int64, Literal::Int(v)) => Arc::new(Int64Array::from(vec![*v])),
        (DataType::Int64, Literal::Float(f)) => {
            Arc::new(Int64Array::from(vec![exact_i64(*f).ok_or_else(bad)?]))
        }
        (DataType::Int32, Literal::Int(v)) => Arc::new(Int32Array::from(vec![i32::try_from(*v)
            .map_err(|_| {
            bad()
        })?])),
        (DataType::UInt64, Literal::Int(v)) => Arc::new(UInt64Array::from(vec![
            u64::try_from(*v).map_err(|_| bad())?
        ])),
        (DataType::UInt64, Literal::UInt(v)) => Arc::new(UInt64Array::from(vec![*v])),
        (DataType::Float64, Literal::Float(v)) => Arc::new(Float64Array::from(vec![*v])),
        (DataType::Float64, Literal::Int(v)) => Arc::new(Float64Array::from(vec![*v as f64])),
        (DataType::Utf8, Literal::Utf8(s)) => Arc::new(StringArray::from(vec![s.as_str()])),
        (DataType::Date32, Literal::Date32(d)) => Arc::new(Date32Array::from(vec![*d])),
        (DataType::Timestamp(TimeUnit::Microsecond, tz), Literal::TimestampMicros(t)) => {
            Arc::new(TimestampMicrosecondArray::from(vec![*t]).with_timezone_opt(tz.clone()))
        }
        (DataType::Boolean, Literal::Bool(b)) => Arc::new(BooleanArray::from(vec![*b])),
        _ => return Err(bad()),
    })
}

fn compare(lhs: &ArrayRef, op: CmpOp, rhs: &ArrayRef) -> Result<BooleanArray, BenchError> {
    let rhs = Scalar::new(Arc::clone(rhs));
    let out = match op {
        CmpOp::Eq => cmp::eq(lhs, &rhs),
        CmpOp::NotEq => cmp::neq(lhs, &rhs),
        CmpOp::Lt => cmp::lt(lhs, &rhs),
        CmpOp::LtEq => cmp::lt_eq(lhs, &rhs),
        CmpOp::Gt => cmp::gt(lhs, &rhs),
        CmpOp::GtEq => cmp::gt_eq(lhs, &rhs),
    };
    out.map_err(|e| BenchError::arrow("comparing", e))
}

fn operand_column<'a>(
    operand: &'a Operand,
    batch: &'a RecordBatch,
    table: &str,
) -> Result<&'a ArrayRef, BenchError> {
    match operand {
        Operand::Column(c) => column(batch, c, table),
        Operand::Literal(l) => Err(BenchError::Unsupported(format!(
            "a literal ({l:?}) where a column was expected"
        ))),
    }
}

/// Evaluates `pred` over `batch` with SQL three-valued logic (NULL is not TRUE).
pub fn evaluate(
    pred: &Predicate,
    batch: &RecordBatch,
    table: &str,
) -> Result<BooleanArray, BenchError> {
    let kleene = |e| BenchError::arrow("combining predicates", e);
    match pred {
        Predicate::Compare { left, op, right } => match (left, right) {
            (Operand::Column(c), Operand::Literal(l)) => {
                let col = column(batch, c, table)?;
                compare(col, *op, &literal_array(l, col.data_type())?)
            }
            (Operand::Literal(l), Operand::Column(c)) => {
                let col = column(batch, c, table)?;
                compare(col, op.flipped(), &literal_array(l, col.data_type())?)
            }
            (Operand::Column(a), Operand::Column(b)) => {
                let (a, b) = (column(batch, a, table)?, column(batch, b, table)?);
                let out = match op {
                    CmpOp::Eq => cmp::eq(a, b),
                    CmpOp::NotEq => cmp::neq(a, b),
                    CmpOp::Lt => cmp::lt(a, b),
                    CmpOp::LtEq => cmp::lt_eq(a, b),
                    CmpOp::Gt => cmp::gt(a, b),
                    CmpOp::GtEq => cmp::gt_eq(a, b),
                };
                out.map_err(|e| BenchError::arrow("comparing columns", e))
            }
            (Operand::Literal(_), Operand::Literal(_)) => Err(BenchError::Unsupported(
                "a comparison of two literals".to_owned(),
            )),
        },
        Predicate::And(parts) => {
            let mut acc = BooleanArray::from(vec![true; batch.num_rows()]);
            for p in parts {
                acc = and_kleene(&acc, &evaluate(p, batch, table)?).map_err(kleene)?;
            }
            Ok(acc)
        }
        Predicate::Or(parts) => {
            let mut acc = BooleanArray::from(vec![false; batch.num_rows()]);
            for p in parts {
                acc = or_kleene(&acc, &evaluate(p, batch, table)?).map_err(kleene)?;
            }
            Ok(acc)
        }
        Predicate::Not(p) => not(&evaluate(p, batch, table)?).map_err(kleene),
        Predicate::InList {
            expr,
            list,
            negated,
        } => {
            let col = operand_column(expr, batch, table)?;
            let mut acc = BooleanArray::from(vec![false; batch.num_rows()]);
            for l in list {
                let eq = compare(col, CmpOp::Eq, &literal_array(l, col.data_type())?)?;
                acc = or_kleene(&acc, &eq).map_err(kleene)?;
            }
            if *negated {
                not(&acc).map_err(kleene)
            } else {
                Ok(acc)
            }
        }
        Predicate::Between {
            expr,
            low,
            high,
            negated,
        } => {
            let col = operand_column(expr, batch, table)?;
            let lo = compare(col, CmpOp::GtEq, &literal_array(low, col.data_type())?)?;
            let hi = compare(col, CmpOp::LtEq, &literal_array(high, col.data_type())?)?;
            let both = and_kleene(&lo, &hi).map_err(kleene)?;
            if *negated {
                not(&both).map_err(kleene)
            } else {
                Ok(both)
            }
        }
        Predicate::IsNull { expr, negated } => {
            let col = operand_column(expr, batch, table)?;
            let out = if *negated {
                is_not_null(col)
            } else {
                is_null(col)
            };
            out.map_err(kleene)
        }
    }
}

/// OFFSET / LIMIT over a sequence of batches, as zero-copy slices.
fn page_slices(batches: &[RecordBatch], offset: usize, limit: Option<usize>) -> Vec<RecordBatch> {
    let mut skip = offset;
    let mut left = limit.unwrap_or(usize::MAX);
    let mut out = Vec::new();
    for b in batches {
        if left == 0 {
            break;
        }
        if skip >= b.num_rows() {
            skip -= b.num_rows();
            continue;
        }
        let take = (b.num_rows() - skip).min(left);
        out.push(b.slice(skip, take));
        left -= take;
        skip = 0;
    }
    out
}

/// ORDER BY (bounded by OFFSET + LIMIT), then OFFSET / LIMIT.
fn sort_and_page(batch: &RecordBatch, shape: &Shape) -> Result<RecordBatch, BenchError> {
    let end = shape
        .limit
        .map(|l| shape.offset.saturating_add(l))
        .unwrap_or(usize::MAX)
        .min(batch.num_rows());
    let start = shape.offset.min(end);
    if shape.sort.is_empty() {
        return Ok(batch.slice(start, end - start));
    }
    let keys = shape
        .sort
        .iter()
        .map(|k| {
            Ok(SortColumn {
                values: Arc::clone(column(batch, &k.column, &shape.table)?),
                options: Some(SortOptions {
                    descending: k.descending,
                    // DuckDB's default: NULLs last in both directions.
                    nulls_first: false,
                }),
            })
        })
        .collect::<Result<Vec<_>, BenchError>>()?;
    let limit = (end < batch.num_rows()).then_some(end);
    let indices = lexsort_to_indices(&keys, limit).map_err(|e| BenchError::arrow("sorting", e))?;
    let page: UInt32Array = indices.slice(start, end - start);
    take_record_batch(batch, &page).map_err(|e| BenchError::arrow("taking the page", e))
}

fn project(batch: &RecordBatch, shape: &Shape) -> Result<RecordBatch, BenchError> {
    let Some(columns) = &shape.projection else {
        return Ok(batch.clone());
    };
    let schema = batch.schema();
    let indices = columns
        .iter()
        .map(|c| {
            schema.index_of(c).map_err(|_| BenchError::UnknownColumn {
                table: shape.table.clone(),
                column: c.clone(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    batch
        .project(&indices)
        .map_err(|e| BenchError::arrow("projecting", e))
}

/// The distinct values of `name` (NULL counts once), in first-seen order.
fn distinct(batch: &RecordBatch, name: &str, table: &str) -> Result<RecordBatch, BenchError> {
    let col = column(batch, name, table)?;
    let mut keep: Vec<u32> = Vec::new();
    let mut seen_null = false;
    let first = |i: usize, is_new: bool, keep: &mut Vec<u32>| {
        if is_new {
            keep.push(i as u32);
        }
    };
    macro_rules! by_key {
        ($arr:expr, $key:expr) => {{
            let arr = $arr;
            let mut seen = HashSet::new();
            for i in 0..arr.len() {
                if arr.is_null(i) {
                    first(i, !std::mem::replace(&mut seen_null, true), &mut keep);
                } else {
                    first(i, seen.insert($key(arr.value(i))), &mut keep);
                }
            }
        }};
    }
    match col.data_type() {
        DataType::Utf8 => by_key!(col.as_string::<i32>(), |v: &str| v.to_owned()),
        DataType::Int64 => by_key!(col.as_primitive::<Int64Type>(), |v| v),
        DataType::Int32 => by_key!(col.as_primitive::<Int32Type>(), |v| v),
        DataType::UInt64 => by_key!(col.as_primitive::<UInt64Type>(), |v| v),
        DataType::Date32 => by_key!(col.as_primitive::<Date32Type>(), |v| v),
        DataType::Float64 => by_key!(col.as_primitive::<Float64Type>(), |v: f64| v.to_bits()),
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            by_key!(col.as_primitive::<TimestampMicrosecondType>(), |v| v)
        }
        DataType::Boolean => by_key!(col.as_boolean(), |v| v),
        other => {
            return Err(BenchError::Unsupported(format!(
                "DISTINCT over a column of type {other}"
            )))
        }
    }
    let projected = batch
        .project(&[batch
            .schema()
            .index_of(name)
            .map_err(|e| BenchError::arrow("DISTINCT", e))?])
        .map_err(|e| BenchError::arrow("DISTINCT", e))?;
    take_record_batch(&projected, &UInt32Array::from(keep))
        .map_err(|e| BenchError::arrow("DISTINCT", e))
}

#[cfg(test)]
mod tests {
    //! The baseline against a naive, row-at-a-time reference on a small `wide` table.

    use std::sync::OnceLock;

    use proptest::prelude::*;
    use ringscan_generator::{generate, DatasetKind, GenerateOptions};

    use super::*;
    use crate::suites::{derive_params, scenarios, Params, SortKey, SuiteKind};

    /// One row of `wide`, the columns the scenarios touch.
    #[derive(Debug, Clone)]
    struct Row {
        order_id: i64,
        status: String,
        country: String,
        category: String,
        order_date: i32,
        total: f64,
    }

    struct Fixture {
        dir: tempfile::TempDir,
        rows: Vec<Row>,
    }

    fn fixture() -> &'static Fixture {
        static FIXTURE: OnceLock<Fixture> = OnceLock::new();
        FIXTURE.get_or_init(|| {
            let dir = tempfile::tempdir().expect("temp dir");
            let mut opts = GenerateOptions::new(DatasetKind::Wide, dir.path().join("wide"));
            opts.rows = 6_000;
            opts.writers = 2;
            opts.producers = 2;
            opts.batch_rows = 700;
            opts.row_group_rows = 1_000;
            generate(&opts, &|_| {}).expect("generate wide");
            let (batches, _) = load(&dir.path().join("wide"), "wide", None).expect("load");
            let mut rows = Vec::new();
            for b in &batches {
                let s = |n: &str| b.column_by_name(n).expect(n).as_string::<i32>().clone();
                let (status, country, category) = (s("status"), s("country"), s("category"));
                let id = b
                    .column_by_name("order_id")
                    .expect("id")
                    .as_primitive::<Int64Type>()
                    .clone();
                let date = b
                    .column_by_name("order_date")
                    .expect("d")
                    .as_primitive::<Date32Type>()
                    .clone();
                let total = b
                    .column_by_name("total")
                    .expect("t")
                    .as_primitive::<Float64Type>()
                    .clone();
                for i in 0..b.num_rows() {
                    rows.push(Row {
                        order_id: id.value(i),
                        status: status.value(i).to_owned(),
                        country: country.value(i).to_owned(),
                        category: category.value(i).to_owned(),
                        order_date: date.value(i),
                        total: total.value(i),
                    });
                }
            }
            Fixture { dir, rows }
        })
    }

    fn lit_f64(l: &Literal) -> f64 {
        match l {
            Literal::Float(f) => *f,
            Literal::Int(i) => *i as f64,
            Literal::Date32(d) => f64::from(*d),
            other => panic!("not a number: {other:?}"),
        }
    }

    fn value(row: &Row, column: &str) -> Result<f64, String> {
        Ok(match column {
            "order_id" => row.order_id as f64,
            "order_date" => f64::from(row.order_date),
            "total" => row.total,
            "status" => return Err(row.status.clone()),
            "country" => return Err(row.country.clone()),
            "category" => return Err(row.category.clone()),
            other => panic!("column {other} not in the reference"),
        })
    }

    fn cmp_lit(row: &Row, column: &str, l: &Literal) -> std::cmp::Ordering {
        match (value(row, column), l) {
            (Err(s), Literal::Utf8(t)) => s.as_str().cmp(t.as_str()),
            (Ok(v), l) => v.total_cmp(&lit_f64(l)),
            (Err(_), l) => panic!("string column against {l:?}"),
        }
    }

    fn naive_eval(pred: &Predicate, row: &Row) -> bool {
        let col = |o: &Operand| match o {
            Operand::Column(c) => c.clone(),
            Operand::Literal(_) => panic!("reference handles column-first operands only"),
        };
        match pred {
            Predicate::Compare {
                left,
                op,
                right: Operand::Literal(l),
            } => CmpOp::holds(*op, cmp_lit(row, &col(left), l)),
            Predicate::And(v) => v.iter().all(|p| naive_eval(p, row)),
            Predicate::Or(v) => v.iter().any(|p| naive_eval(p, row)),
            Predicate::Not(p) => !naive_eval(p, row),
            Predicate::InList {
                expr,
                list,
                negated,
            } => list.iter().any(|l| cmp_lit(row, &col(expr), l).is_eq()) != *negated,
            Predicate::Between {
                expr,
                low,
                high,
                negated,
            } => {
                let c = col(expr);
                (cmp_lit(row, &c, low).is_ge() && cmp_lit(row, &c, high).is_le()) != *negated
            }
            other => panic!("reference does not handle {other:?}"),
        }
    }

    /// The shape computed row by row: the order_ids of the answer (count(*): the count).
    fn naive(shape: &Shape, rows: &[Row]) -> Vec<i64> {
        let mut kept: Vec<&Row> = rows
            .iter()
            .filter(|r| shape.filter.as_ref().is_none_or(|p| naive_eval(p, r)))
            .collect();
        if shape.output == Output::CountStar {
            return vec![kept.len() as i64];
        }
        kept.sort_by(|a, b| {
            for SortKey { column, descending } in &shape.sort {
                let ord = match (value(a, column), value(b, column)) {
                    (Ok(x), Ok(y)) => x.total_cmp(&y),
                    (Err(x), Err(y)) => x.cmp(&y),
                    _ => unreachable!("one column, one type"),
                };
                let ord = if *descending { ord.reverse() } else { ord };
                if ord.is_ne() {
                    return ord;
                }
            }
            std::cmp::Ordering::Equal
        });
        kept.into_iter()
            .skip(shape.offset)
            .take(shape.limit.unwrap_or(usize::MAX))
            .map(|r| r.order_id)
            .collect()
    }

    fn answer(shape: &Shape) -> Vec<i64> {
        let f = fixture();
        let result = Baseline::new(f.dir.path())
            .execute(shape)
            .expect("baseline");
        let col = if shape.output == Output::CountStar {
            "count_star"
        } else {
            "order_id"
        };
        let ids = result.batch.column_by_name(col).expect("column");
        ids.as_primitive::<Int64Type>().values().to_vec()
    }

    #[test]
    fn every_pages_scenario_equals_the_naive_answer() {
        let f = fixture();
        let params = derive_params(SuiteKind::Pages, f.dir.path()).expect("params");
        for s in scenarios(SuiteKind::Pages, &params) {
            let expected = naive(&s.shape, &f.rows);
            assert_eq!(answer(&s.shape), expected, "scenario {}: {}", s.name, s.sql);
        }
    }

    #[test]
    fn projection_and_distinct_return_what_was_asked() {
        let f = fixture();
        let mut shape = scenarios(SuiteKind::Pages, &Params::new())
            .into_iter()
            .find(|s| s.name == "filter_sort")
            .expect("filter_sort")
            .shape;
        shape.projection = Some(vec!["total".into(), "order_id".into()]);
        let result = Baseline::new(f.dir.path())
            .execute(&shape)
            .expect("baseline");
        assert_eq!(result.batch.num_columns(), 2);
        assert_eq!(result.batch.schema().field(0).name(), "total");
        let whole = Baseline::new(f.dir.path()).execute(&Shape {
            projection: None,
            ..shape.clone()
        });
        assert!(
            result.bytes_read < whole.expect("whole").bytes_read,
            "projection reads less"
        );

        shape.output = Output::Distinct("status".into());
        shape.filter = None;
        let distinct = Baseline::new(f.dir.path())
            .execute(&shape)
            .expect("distinct");
        let mut expected: Vec<&str> = f.rows.iter().map(|r| r.status.as_str()).collect();
        expected.sort_unstable();
        expected.dedup();
        assert_eq!(distinct.batch.num_rows(), expected.len());
    }

    #[test]
    fn a_missing_table_or_column_is_an_error_not_a_panic() {
        let f = fixture();
        let mut shape = scenarios(SuiteKind::Pages, &Params::new())[0].shape.clone();
        shape.table = "nope".into();
        assert!(Baseline::new(f.dir.path()).execute(&shape).is_err());
        shape.table = "wide".into();
        shape.filter = Some(Predicate::compare("no_such", CmpOp::Eq, Literal::Int(1)));
        assert!(matches!(
            Baseline::new(f.dir.path()).execute(&shape),
            Err(BenchError::UnknownColumn { .. })
        ));
        shape.filter = Some(Predicate::compare("status", CmpOp::Eq, Literal::Int(1)));
        assert!(matches!(
            Baseline::new(f.dir.path()).execute(&shape),
            Err(BenchError::Unsupported(_))
        ));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn filter_sort_page_equals_naive(
            lo in 0.0f64..400.0,
            width in 0.0f64..800.0,
            use_status in any::<bool>(),
            sort_total in any::<bool>(),
            descending in any::<bool>(),
            offset in 0usize..3_000,
            limit in prop::option::of(0usize..200),
        ) {
            let mut parts = vec![Predicate::Between {
                expr: Operand::Column("total".into()),
                low: Literal::Float(lo),
                high: Literal::Float(lo + width),
                negated: false,
            }];
            if use_status {
                parts.push(Predicate::InList {
                    expr: Operand::Column("status".into()),
                    list: vec![Literal::Utf8("shipped".into()), Literal::Utf8("pending".into())],
                    negated: true,
                });
            }
            let mut sort = Vec::new();
            if sort_total {
                sort.push(SortKey { column: "total".into(), descending });
            }
            // Half the cases unsorted: file order, paged over the loaded batches.
            if sort_total || descending {
                sort.push(SortKey { column: "order_id".into(), descending: false });
            }
            let shape = Shape {
                table: "wide".into(),
                projection: None,
                filter: Some(Predicate::And(parts)),
                sort,
                offset,
                limit,
                output: Output::Rows,
            };
            prop_assert_eq!(answer(&shape), naive(&shape, &fixture().rows));
        }
    }
}
