//! Runs a [`PhysicalPlan`]'s executor operators on the batches the daemon sends.
//!
//! [`Execution`] is a push-based pipeline: residual filter → aggregate → HAVING → sort
//! or top-k → projection → DISTINCT → limit, as the plan lists them. Streaming stages
//! (filter, projection, DISTINCT, limit) pass batches on at once; blocking stages
//! (aggregate, sort, top-k) hold only what they must: the groups, the whole input for
//! a full sort, at most `max(2k, 4096)` rows (plus one batch) for a top-k.

mod agg;
mod error;
mod eval;
#[cfg(test)]
mod reference;
mod sort;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use ringscan_ipc::msg::{CmpOp, Literal, Operand, Predicate};

pub use error::ExecError;
pub(crate) use eval::normalize_float;

use self::agg::HashAggregate;
use self::eval::{cast, eval_array, eval_predicate, Ctx};
use self::sort::{Distinct, Sort, TopK};
use crate::bind::{OutputColumn, SortKey};
use crate::expr::Expr;
use crate::pushdown::{Operator, PhysicalPlan};

/// A finished query's rows.
#[derive(Debug, Clone)]
pub struct QueryResult {
    /// Equal to the plan's `logical.output_schema`.
    pub schema: SchemaRef,
    /// The rows, in order.
    pub batches: Vec<RecordBatch>,
    /// Total number of rows.
    pub rows: usize,
}

impl QueryResult {
    /// Approximate memory held by the batches, in bytes (for cache accounting).
    pub fn approx_size_bytes(&self) -> usize {
        let data: usize = self
            .batches
            .iter()
            .map(RecordBatch::get_array_memory_size)
            .sum();
        data + std::mem::size_of::<Self>() + self.schema.fields().len() * 64
    }
}

/// What the caller may do after [`Execution::push`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Send more batches.
    Continue,
    /// The result is complete (a LIMIT with no ordering or aggregation is satisfied):
    /// the scan may be cancelled; further batches are ignored.
    Done,
}

#[derive(Debug)]
enum Stage {
    Filter {
        expr: Expr,
        subst: Vec<Expr>,
    },
    Aggregate(Box<HashAggregate>),
    Sort(Sort),
    TopK(TopK),
    Project {
        columns: Vec<OutputColumn>,
        subst: Vec<Expr>,
        schema: SchemaRef,
    },
    Distinct(Distinct),
    Limit {
        skip: u64,
        left: Option<u64>,
    },
}

/// One running query: push the scan's batches, then [`Execution::finish`].
#[derive(Debug)]
pub struct Execution {
    input: SchemaRef,
    stages: Vec<Stage>,
    output: Vec<RecordBatch>,
    /// `output[..output_owned]` holds no ring memory (see [`Execution::unpin`]).
    output_owned: usize,
    output_schema: SchemaRef,
    done: bool,
    /// The first sort key when it is a plain table column and a top-k runs before any
    /// aggregation: `(column, its type, key)`.
    dynamic_key: Option<(String, DataType, SortKey)>,
    multi_key: bool,
}

fn describe(fields: &[Arc<Field>]) -> String {
    let parts: Vec<String> = fields
        .iter()
        .map(|f| format!("{}: {}", f.name(), f.data_type()))
        .collect();
    parts.join(", ")
}

/// The schema the daemon's batches have for `plan`: its projection of the table.
pub fn scan_schema(plan: &PhysicalPlan) -> SchemaRef {
    let table = &plan.logical.table_schema;
    match &plan.scan.projection {
        None => table.clone(),
        Some(cols) => {
            let fields: Vec<Arc<Field>> = cols
                .iter()
                .filter_map(|c| table.field_with_name(c).ok())
                .map(|f| Arc::new(f.clone()))
                .collect();
            Arc::new(Schema::new(fields))
        }
    }
}

fn same_columns(a: &Schema, b: &Schema) -> bool {
    a.fields().len() == b.fields().len()
        && a.fields()
            .iter()
            .zip(b.fields())
            .all(|(x, y)| x.name() == y.name() && x.data_type() == y.data_type())
}

impl Execution {
    /// Prepares `plan` for batches of `input` (the scan's projection of the table).
    pub fn new(plan: &PhysicalPlan, input: SchemaRef) -> Result<Self, ExecError> {
        let expected = scan_schema(plan);
        if !same_columns(&expected, &input) {
            return Err(ExecError::SchemaMismatch {
                expected: describe(expected.fields()),
                got: describe(input.fields()),
            });
        }
        let mut stages = Vec::new();
        let mut schema = input.clone();
        let mut subst: Vec<Expr> = Vec::new();
        let mut aggregated = false;
        let mut dynamic_key = None;
        let mut multi_key = false;
        for op in &plan.operators {
            match op {
                Operator::Filter(e) | Operator::Having(e) => stages.push(Stage::Filter {
                    expr: e.clone(),
                    subst: subst.clone(),
                }),
                Operator::Aggregate {
                    group_by,
                    aggregates,
                } => {
                    let a = HashAggregate::new(group_by, aggregates, &subst, &schema)?;
                    let out = a.finish_schema();
                    subst = a.output_exprs();
                    schema = out;
                    aggregated = true;
                    stages.push(Stage::Aggregate(Box::new(a)));
                }
                Operator::Sort(keys) => stages.push(Stage::Sort(Sort::new(keys, &subst, &schema)?)),
                Operator::TopK { keys, k } => {
                    if !aggregated && subst.is_empty() {
                        if let Some(first) = keys.first() {
                            if let Expr::Column(c) = &first.expr {
                                if let Ok(f) = plan.logical.table_schema.field_with_name(c) {
                                    dynamic_key =
                                        Some((c.clone(), f.data_type().clone(), first.clone()));
                                    multi_key = keys.len() > 1;
                                }
                            }
                        }
                    }
                    stages.push(Stage::TopK(TopK::new(keys, *k, &subst, &schema)?));
                }
                Operator::Project(columns) => {
                    let fields: Vec<Field> = columns
                        .iter()
                        .map(|c| Field::new(&c.name, c.data_type.clone(), true))
                        .collect();
                    let out: SchemaRef = plan.logical.output_schema.clone();
                    let out = if out.fields().len() == fields.len() {
                        out
                    } else {
                        Arc::new(Schema::new(fields))
                    };
                    stages.push(Stage::Project {
                        columns: columns.clone(),
                        subst: subst.clone(),
                        schema: out.clone(),
                    });
                    subst = columns.iter().map(|c| c.expr.clone()).collect();
                    schema = out;
                }
                Operator::Distinct => stages.push(Stage::Distinct(Distinct::new(&schema)?)),
                Operator::Limit { offset, limit } => stages.push(Stage::Limit {
                    skip: *offset,
                    left: *limit,
                }),
            }
        }
        Ok(Self {
            input,
            stages,
            output: Vec::new(),
            output_owned: 0,
            output_schema: plan.logical.output_schema.clone(),
            done: false,
            dynamic_key,
            multi_key,
        })
    }

    /// Feeds one batch of the scan.
    pub fn push(&mut self, batch: RecordBatch) -> Result<Flow, ExecError> {
        if self.done {
            return Ok(Flow::Done);
        }
        if !Arc::ptr_eq(&batch.schema(), &self.input) && !same_columns(&batch.schema(), &self.input)
        {
            return Err(ExecError::SchemaMismatch {
                expected: describe(self.input.fields()),
                got: describe(batch.schema().fields()),
            });
        }
        let out = run_from(&mut self.stages, 0, batch, &mut self.done)?;
        self.output.extend(out);
        Ok(if self.done {
            Flow::Done
        } else {
            Flow::Continue
        })
    }

    /// The schema of the aggregate's output row, when the plan's first operator is an
    /// aggregation without GROUP BY (one row whatever the input): what
    /// [`push_aggregated`](Self::push_aggregated) takes.
    pub fn aggregate_output_schema(&self) -> Option<SchemaRef> {
        match self.stages.first() {
            Some(Stage::Aggregate(a)) if a.is_ungrouped() => Some(a.finish_schema()),
            _ => None,
        }
    }

    /// Feeds the aggregate's output row computed elsewhere (from Parquet statistics):
    /// the aggregation is skipped, and the operators after it (HAVING, projection,
    /// sort, limit) run on `row`. Only for a plan with an
    /// [`aggregate_output_schema`](Self::aggregate_output_schema), before any
    /// [`push`](Self::push).
    pub fn push_aggregated(&mut self, row: RecordBatch) -> Result<Flow, ExecError> {
        let Some(expected) = self.aggregate_output_schema() else {
            return Err(ExecError::Unsupported {
                what: "an aggregate row for a plan that does not start with an ungrouped \
                       aggregation"
                    .into(),
            });
        };
        if row.num_rows() != 1 || !same_columns(&expected, &row.schema()) {
            return Err(ExecError::SchemaMismatch {
                expected: describe(expected.fields()),
                got: describe(row.schema().fields()),
            });
        }
        // The aggregation is answered: a pass-through stage takes its place, so that
        // `finish` does not emit its (empty-input) row as well.
        self.stages[0] = Stage::Limit {
            skip: 0,
            left: None,
        };
        let row = RecordBatch::try_new(expected, row.columns().to_vec())
            .map_err(|e| ExecError::arrow("building the aggregate row", e))?;
        let out = run_from(&mut self.stages, 1, row, &mut self.done)?;
        self.output.extend(out);
        Ok(if self.done {
            Flow::Done
        } else {
            Flow::Continue
        })
    }

    /// For a top-k on a plain column: a predicate that a row must satisfy to enter the
    /// current top k (on the first sort key only), once k rows are held. The daemon may
    /// use it to skip row groups; rows failing it could never change the result.
    pub fn dynamic_filter(&self) -> Option<Predicate> {
        let (col, col_type, key) = self.dynamic_key.as_ref()?;
        let topk = self.stages.iter().find_map(|s| match s {
            Stage::TopK(t) => Some(t),
            _ => None,
        })?;
        let kth = topk.kth_values()?.first()?;
        let column = || Operand::Column(col.clone());
        let is_null = |negated| Predicate::IsNull {
            expr: column(),
            negated,
        };
        if kth.is_null(0) {
            // The k-th key is NULL: with NULLS LAST any value beats it; with NULLS FIRST
            // only NULLs (ties) could, and only through later keys.
            return Some(if key.nulls_first {
                if self.multi_key {
                    is_null(false)
                } else {
                    Predicate::Or(vec![])
                }
            } else {
                is_null(true)
            });
        }
        let lit = dynamic_literal(kth, col_type)?;
        let op = match (key.descending, self.multi_key) {
            (false, false) => CmpOp::Lt,
            (false, true) => CmpOp::LtEq,
            (true, false) => CmpOp::Gt,
            (true, true) => CmpOp::GtEq,
        };
        let cmp = Predicate::Compare {
            left: column(),
            op,
            right: Operand::Literal(lit),
        };
        Some(if key.nulls_first {
            Predicate::Or(vec![cmp, is_null(false)])
        } else {
            cmp
        })
    }

    /// After the whole input, for a plan whose first top-k sorts on a plain table column
    /// (as [`dynamic_filter`](Self::dynamic_filter) needs): the condition on that
    /// column that every row of the top k satisfies, from the exact k-th key `t`:
    /// `c >= t` descending or `c <= t` ascending (ties included, unlike the dynamic
    /// filter: a later sort key may still order them), or'ed with `c IS NULL` when
    /// NULLs sort first; `c IS NULL` alone when the k-th key is NULL and NULLs sort
    /// first. `None` when fewer than k rows came or no predicate says it (a NaN k-th
    /// key, or a NULL one with NULLS LAST). A zero `t` needs no care: the daemon
    /// compares both zeros equal, as DuckDB and the sort do.
    pub fn topk_threshold(&mut self) -> Result<Option<Predicate>, ExecError> {
        let Some((col, col_type, key)) = self.dynamic_key.clone() else {
            return Ok(None);
        };
        let Some(topk) = self.stages.iter_mut().find_map(|s| match s {
            Stage::TopK(t) => Some(t),
            _ => None,
        }) else {
            return Ok(None);
        };
        let Some(kth) = topk.exact_kth_values()?.and_then(|v| v.first().cloned()) else {
            return Ok(None);
        };
        let column = || Operand::Column(col.clone());
        let is_null = Predicate::IsNull {
            expr: column(),
            negated: false,
        };
        if kth.is_null(0) {
            return Ok(key.nulls_first.then_some(is_null));
        }
        let Some(lit) = dynamic_literal(&kth, &col_type) else {
            return Ok(None);
        };
        let cmp = Predicate::Compare {
            left: column(),
            op: if key.descending {
                CmpOp::GtEq
            } else {
                CmpOp::LtEq
            },
            right: Operand::Literal(lit),
        };
        Ok(Some(if key.nulls_first {
            Predicate::Or(vec![cmp, is_null])
        } else {
            cmp
        }))
    }

    /// Whether the plan's first top-k saw at least k rows (true without a top-k).
    pub fn topk_saw_k_rows(&self) -> bool {
        self.stages
            .iter()
            .find_map(|s| match s {
                Stage::TopK(t) => Some(t.saw_k_rows()),
                _ => None,
            })
            .unwrap_or(true)
    }

    /// Copies every batch this execution keeps (result rows, a sort's input, top-k's
    /// candidates) that still points into the scan's ring into memory of its own, so
    /// the ring space goes back to the daemon. The session calls it when the ring is
    /// under pressure ([`ScanStream::ring_under_pressure`]); without it, a result larger
    /// than the ring would leave the daemon waiting for space forever. Batches copied
    /// once are not copied again.
    ///
    /// [`ScanStream::ring_under_pressure`]: ringscan_ipc::client::ScanStream::ring_under_pressure
    pub fn unpin(&mut self) -> Result<(), ExecError> {
        for stage in &mut self.stages {
            match stage {
                Stage::Sort(s) => s.unpin()?,
                Stage::TopK(t) => t.unpin()?,
                _ => {}
            }
        }
        unpin_tail(&mut self.output, &mut self.output_owned)
    }

    /// Flushes the blocking stages and returns the result.
    pub fn finish(mut self) -> Result<QueryResult, ExecError> {
        let mut i = 0;
        while i < self.stages.len() {
            let flushed = finish_stage(&mut self.stages[i])?;
            for b in flushed {
                let out = run_from(&mut self.stages, i + 1, b, &mut self.done)?;
                self.output.extend(out);
            }
            i += 1;
        }
        let mut batches = Vec::with_capacity(self.output.len());
        for b in self.output {
            if b.num_rows() == 0 {
                continue;
            }
            let cols: Vec<ArrayRef> = b.columns().to_vec();
            let opts = RecordBatchOptions::new().with_row_count(Some(b.num_rows()));
            let b = RecordBatch::try_new_with_options(self.output_schema.clone(), cols, &opts)
                .map_err(|e| ExecError::arrow("building the result", e))?;
            batches.push(b);
        }
        let rows = batches.iter().map(RecordBatch::num_rows).sum();
        Ok(QueryResult {
            schema: self.output_schema,
            batches,
            rows,
        })
    }
}

/// Replaces `batches[*owned..]` by one copy with buffers of its own; `*owned` becomes
/// the new length.
pub(crate) fn unpin_tail(
    batches: &mut Vec<RecordBatch>,
    owned: &mut usize,
) -> Result<(), ExecError> {
    if *owned < batches.len() {
        let tail = batches.split_off(*owned);
        batches.push(owned_copy(tail[0].schema(), &tail)?);
    }
    *owned = batches.len();
    Ok(())
}

/// `batches` (of `schema`) concatenated into one batch whose buffers are freshly
/// allocated: unlike `concat_batches`, even a single batch is copied, so nothing of the
/// result points into the ring any more.
pub fn owned_copy(schema: SchemaRef, batches: &[RecordBatch]) -> Result<RecordBatch, ExecError> {
    use arrow_data::transform::MutableArrayData;
    if batches.is_empty() {
        return Ok(RecordBatch::new_empty(schema));
    }
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let mut columns = Vec::with_capacity(schema.fields().len());
    for i in 0..schema.fields().len() {
        let data: Vec<arrow_data::ArrayData> =
            batches.iter().map(|b| b.column(i).to_data()).collect();
        let mut copy = MutableArrayData::new(data.iter().collect(), false, rows);
        for (j, d) in data.iter().enumerate() {
            copy.try_extend(j, 0, d.len())
                .map_err(|e| ExecError::arrow("copying batches out of the ring", e))?;
        }
        columns.push(arrow_array::make_array(copy.freeze()));
    }
    let opts = RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(schema, columns, &opts)
        .map_err(|e| ExecError::arrow("copying batches out of the ring", e))
}

fn dynamic_literal(v: &ArrayRef, t: &DataType) -> Option<Literal> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::*;
    Some(match v.data_type() {
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
            let c = arrow_cast::cast(v, &DataType::Int64).ok()?;
            Literal::Int(c.as_primitive::<Int64Type>().value(0))
        }
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => {
            let c = arrow_cast::cast(v, &DataType::UInt64).ok()?;
            let u = c.as_primitive::<UInt64Type>().value(0);
            i64::try_from(u).map_or(Literal::UInt(u), Literal::Int)
        }
        DataType::Float32 | DataType::Float64 => {
            let c = arrow_cast::cast(v, &DataType::Float64).ok()?;
            let f = c.as_primitive::<Float64Type>().value(0);
            if f.is_nan() {
                return None;
            }
            Literal::Float(f)
        }
        DataType::Utf8 => Literal::Utf8(v.as_string::<i32>().value(0).to_owned()),
        DataType::LargeUtf8 => Literal::Utf8(v.as_string::<i64>().value(0).to_owned()),
        DataType::Date32 => Literal::Date32(v.as_primitive::<Date32Type>().value(0)),
        DataType::Timestamp(TimeUnit::Microsecond, _) if t == v.data_type() => {
            Literal::TimestampMicros(v.as_primitive::<TimestampMicrosecondType>().value(0))
        }
        DataType::Boolean => Literal::Bool(v.as_boolean().value(0)),
        _ => return None,
    })
}

fn finish_stage(stage: &mut Stage) -> Result<Vec<RecordBatch>, ExecError> {
    let taken = std::mem::replace(
        stage,
        Stage::Limit {
            skip: 0,
            left: None,
        },
    );
    let out = match taken {
        Stage::Aggregate(a) => vec![a.finish()?],
        Stage::Sort(s) => s.finish()?.into_iter().collect(),
        Stage::TopK(t) => t.finish()?.into_iter().collect(),
        other => {
            *stage = other;
            vec![]
        }
    };
    Ok(out)
}

/// Runs `batch` through `stages[from..]`; returns what comes out of the last stage.
fn run_from(
    stages: &mut [Stage],
    from: usize,
    batch: RecordBatch,
    done: &mut bool,
) -> Result<Vec<RecordBatch>, ExecError> {
    let mut cur = batch;
    for stage in stages.iter_mut().skip(from) {
        match stage {
            Stage::Filter { expr, subst } => {
                let mask = eval_predicate(expr, Ctx { batch: &cur, subst })?;
                cur = filter_batch(&cur, &mask)?;
                if cur.num_rows() == 0 {
                    return Ok(vec![]);
                }
            }
            Stage::Aggregate(a) => {
                a.push(&cur)?;
                return Ok(vec![]);
            }
            Stage::Sort(s) => {
                s.push(cur);
                return Ok(vec![]);
            }
            Stage::TopK(t) => {
                t.push(cur)?;
                return Ok(vec![]);
            }
            Stage::Project {
                columns,
                subst,
                schema,
            } => {
                let ctx = Ctx { batch: &cur, subst };
                let mut cols = Vec::with_capacity(columns.len());
                for (c, f) in columns.iter().zip(schema.fields()) {
                    let a = eval_array(&c.expr, ctx)?;
                    cols.push(cast(&c.expr, &a, f.data_type())?);
                }
                let opts = RecordBatchOptions::new().with_row_count(Some(cur.num_rows()));
                cur = RecordBatch::try_new_with_options(schema.clone(), cols, &opts)
                    .map_err(|e| ExecError::arrow("computing the select list", e))?;
            }
            Stage::Distinct(d) => match d.push(&cur)? {
                Some(b) => cur = b,
                None => return Ok(vec![]),
            },
            Stage::Limit { skip, left } => {
                if *left == Some(0) {
                    *done = true;
                    return Ok(vec![]);
                }
                let n = cur.num_rows() as u64;
                if *skip >= n {
                    *skip -= n;
                    return Ok(vec![]);
                }
                let start = *skip;
                *skip = 0;
                let mut len = n - start;
                if let Some(l) = left {
                    len = len.min(*l);
                    *l -= len;
                    if *l == 0 {
                        *done = true;
                    }
                }
                cur = cur.slice(start as usize, len as usize);
            }
        }
    }
    Ok(vec![cur])
}

fn filter_batch(
    batch: &RecordBatch,
    mask: &arrow_array::BooleanArray,
) -> Result<RecordBatch, ExecError> {
    if batch.num_columns() == 0 {
        let n = mask.iter().filter(|v| *v == Some(true)).count();
        let opts = RecordBatchOptions::new().with_row_count(Some(n));
        return RecordBatch::try_new_with_options(batch.schema(), vec![], &opts)
            .map_err(|e| ExecError::arrow("filtering", e));
    }
    arrow_select::filter::filter_record_batch(batch, mask)
        .map_err(|e| ExecError::arrow("filtering", e))
}

/// Runs `plan` over `batches` (of schema `input`) to completion, stopping early when
/// the result is complete.
pub fn execute<E>(
    plan: &PhysicalPlan,
    input: SchemaRef,
    batches: impl IntoIterator<Item = Result<RecordBatch, E>>,
) -> Result<QueryResult, ExecError>
where
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut exec = Execution::new(plan, input)?;
    for b in batches {
        let b = b.map_err(|e| ExecError::Input(e.into()))?;
        if exec.push(b)? == Flow::Done {
            break;
        }
    }
    exec.finish()
}
