//! Hash aggregation: group keys encoded with [`RowConverter`], one accumulator per
//! aggregate call and group.
//!
//! Result types (DuckDB's, except `sum` of integers): `count` → `Int64`; `avg` →
//! `Float64`; `sum` of floats → `Float64`; `sum` of integers → `Int64`, accumulated in
//! `i128` and checked when the group is finished (DuckDB returns `HUGEINT`; a sum
//! outside `i64` is an [`ExecError::Overflow`] here, never a wrapped value); `min` /
//! `max` keep the input type. NULLs are skipped; `sum`/`avg`/`min`/`max` of no values
//! are NULL, `count` is 0.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type, UInt64Type};
use arrow_array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch};
use arrow_row::{RowConverter, SortField};
use arrow_schema::{DataType, Field, Schema, SchemaRef, SortOptions};

use super::error::ExecError;
use super::eval::{cast, eval_array, normalize_float, Ctx};
use crate::expr::{AggFunc, Expr};

fn row_err(context: &str) -> impl FnOnce(arrow_schema::ArrowError) -> ExecError + '_ {
    move |e| ExecError::arrow(context, e)
}

/// What one aggregate call accumulates per group.
#[derive(Debug)]
enum State {
    Count(Vec<i64>),
    SumInt(Vec<Option<i128>>),
    SumFloat(Vec<Option<f64>>),
    AvgInt(Vec<(i128, i64)>),
    AvgFloat(Vec<(f64, i64)>),
    /// Row-encoded extreme value (the encoding sorts like the values).
    MinMax {
        conv: RowConverter,
        max: bool,
        best: Vec<Option<Box<[u8]>>>,
    },
}

/// The encoder of the argument and each group's set of distinct encoded values.
type DistinctSets = (RowConverter, Vec<HashSet<Box<[u8]>>>);

#[derive(Debug)]
struct Acc {
    expr: Expr,
    arg: Option<Expr>,
    /// `DISTINCT`: the distinct values per group, fed to `state` when finishing.
    distinct: Option<DistinctSets>,
    state: State,
    out_type: DataType,
}

fn int_kind(t: &DataType) -> Option<bool> {
    // Some(unsigned) for integer types.
    t.is_integer().then(|| t.is_unsigned_integer())
}

impl Acc {
    fn new(expr: &Expr, arg_type: Option<&DataType>) -> Result<Self, ExecError> {
        let Expr::Aggregate {
            func,
            arg,
            distinct,
        } = expr
        else {
            return Err(ExecError::Unsupported {
                what: format!("{expr} is not an aggregate call"),
            });
        };
        let t = arg_type.cloned().unwrap_or(DataType::Null);
        let (state, out_type) = match func {
            AggFunc::Count => (State::Count(Vec::new()), DataType::Int64),
            AggFunc::Sum if t.is_integer() => (State::SumInt(Vec::new()), DataType::Int64),
            AggFunc::Sum => (State::SumFloat(Vec::new()), DataType::Float64),
            AggFunc::Avg if t.is_integer() => (State::AvgInt(Vec::new()), DataType::Float64),
            AggFunc::Avg => (State::AvgFloat(Vec::new()), DataType::Float64),
            AggFunc::Min | AggFunc::Max => (
                State::MinMax {
                    conv: RowConverter::new(vec![SortField::new(t.clone())])
                        .map_err(row_err("min/max encoding"))?,
                    max: *func == AggFunc::Max,
                    best: Vec::new(),
                },
                t.clone(),
            ),
        };
        let distinct = if *distinct && arg.is_some() {
            Some((
                RowConverter::new(vec![SortField::new(t)]).map_err(row_err("DISTINCT encoding"))?,
                Vec::new(),
            ))
        } else {
            None
        };
        Ok(Self {
            expr: expr.clone(),
            arg: arg.as_deref().cloned(),
            distinct,
            state,
            out_type,
        })
    }

    fn resize(&mut self, groups: usize) {
        if let Some((_, sets)) = &mut self.distinct {
            sets.resize_with(groups, HashSet::new);
        }
        match &mut self.state {
            State::Count(v) => v.resize(groups, 0),
            State::SumInt(v) => v.resize(groups, None),
            State::SumFloat(v) => v.resize(groups, None),
            State::AvgInt(v) => v.resize(groups, (0, 0)),
            State::AvgFloat(v) => v.resize(groups, (0.0, 0)),
            State::MinMax { best, .. } => best.resize(groups, None),
        }
    }

    /// Adds `values` (None: `count(*)`) row `i` into group `ids[i]`.
    fn update(&mut self, ids: &[usize], values: Option<&ArrayRef>) -> Result<(), ExecError> {
        let Some(values) = values else {
            if let State::Count(v) = &mut self.state {
                for &g in ids {
                    v[g] += 1;
                }
            }
            return Ok(());
        };
        if let Some((conv, sets)) = &mut self.distinct {
            let norm = normalize_float(values.clone());
            let rows = conv
                .convert_columns(&[norm])
                .map_err(row_err("DISTINCT encoding"))?;
            for (i, &g) in ids.iter().enumerate() {
                if values.is_valid(i) {
                    let r = rows.row(i);
                    if !sets[g].contains(r.as_ref()) {
                        sets[g].insert(r.as_ref().into());
                    }
                }
            }
            return Ok(());
        }
        self.update_state(ids, values)
    }

    fn update_state(&mut self, ids: &[usize], values: &ArrayRef) -> Result<(), ExecError> {
        let e = &self.expr;
        let valid = |i: usize| values.is_valid(i);
        match &mut self.state {
            State::Count(v) => {
                for (i, &g) in ids.iter().enumerate() {
                    if valid(i) {
                        v[g] += 1;
                    }
                }
            }
            State::SumInt(_) | State::AvgInt(_) => {
                let unsigned = int_kind(values.data_type()) == Some(true);
                let ints: Vec<Option<i128>> = if unsigned {
                    let a = cast(e, values, &DataType::UInt64)?;
                    a.as_primitive::<UInt64Type>()
                        .iter()
                        .map(|v| v.map(i128::from))
                        .collect()
                } else {
                    let a = cast(e, values, &DataType::Int64)?;
                    a.as_primitive::<Int64Type>()
                        .iter()
                        .map(|v| v.map(i128::from))
                        .collect()
                };
                let overflow = || ExecError::Overflow {
                    expr: e.to_string(),
                    detail: "sum exceeds 128 bits".into(),
                };
                match &mut self.state {
                    State::SumInt(v) => {
                        for (x, &g) in ints.iter().zip(ids) {
                            if let Some(x) = x {
                                let s = v[g].unwrap_or(0).checked_add(*x).ok_or_else(overflow)?;
                                v[g] = Some(s);
                            }
                        }
                    }
                    State::AvgInt(v) => {
                        for (x, &g) in ints.iter().zip(ids) {
                            if let Some(x) = x {
                                v[g].0 = v[g].0.checked_add(*x).ok_or_else(overflow)?;
                                v[g].1 += 1;
                            }
                        }
                    }
                    _ => {}
                }
            }
            State::SumFloat(v) => {
                if values.data_type() == &DataType::Null {
                    return Ok(());
                }
                let a = cast(e, values, &DataType::Float64)?;
                for (x, &g) in a.as_primitive::<Float64Type>().iter().zip(ids) {
                    if let Some(x) = x {
                        v[g] = Some(v[g].unwrap_or(0.0) + x);
                    }
                }
            }
            State::AvgFloat(v) => {
                if values.data_type() == &DataType::Null {
                    return Ok(());
                }
                let a = cast(e, values, &DataType::Float64)?;
                for (x, &g) in a.as_primitive::<Float64Type>().iter().zip(ids) {
                    if let Some(x) = x {
                        v[g].0 += x;
                        v[g].1 += 1;
                    }
                }
            }
            State::MinMax { conv, max, best } => {
                if values.data_type() == &DataType::Null {
                    return Ok(());
                }
                // -0.0 is 0.0 and every NaN the greatest value, as in grouping (and as
                // the statistics path answers).
                let values = &normalize_float(values.clone());
                let rows = conv
                    .convert_columns(std::slice::from_ref(values))
                    .map_err(row_err("min/max encoding"))?;
                for (i, &g) in ids.iter().enumerate() {
                    if !valid(i) {
                        continue;
                    }
                    let r = rows.row(i);
                    let better = match &best[g] {
                        None => true,
                        Some(b) => {
                            if *max {
                                r.as_ref() > &b[..]
                            } else {
                                r.as_ref() < &b[..]
                            }
                        }
                    };
                    if better {
                        best[g] = Some(r.as_ref().into());
                    }
                }
            }
        }
        Ok(())
    }

    fn finish(mut self, groups: usize) -> Result<ArrayRef, ExecError> {
        self.resize(groups);
        if let Some((conv, sets)) = self.distinct.take() {
            let parser = conv.parser();
            for (g, set) in sets.iter().enumerate() {
                if set.is_empty() {
                    continue;
                }
                let cols = conv
                    .convert_rows(set.iter().map(|b| parser.parse(b)))
                    .map_err(row_err("DISTINCT decoding"))?;
                let ids = vec![g; set.len()];
                self.update_state(&ids, &cols[0])?;
            }
        }
        let e = &self.expr;
        Ok(match self.state {
            State::Count(v) => Arc::new(Int64Array::from(v)),
            State::SumInt(v) => {
                let out: Result<Vec<Option<i64>>, ExecError> = v
                    .into_iter()
                    .map(|s| {
                        s.map(|s| {
                            i64::try_from(s).map_err(|_| ExecError::Overflow {
                                expr: e.to_string(),
                                detail: format!("sum {s} does not fit BIGINT"),
                            })
                        })
                        .transpose()
                    })
                    .collect();
                Arc::new(Int64Array::from(out?))
            }
            State::SumFloat(v) => Arc::new(Float64Array::from(v)),
            State::AvgInt(v) => Arc::new(
                v.into_iter()
                    .map(|(s, n)| (n > 0).then(|| s as f64 / n as f64))
                    .collect::<Float64Array>(),
            ),
            State::AvgFloat(v) => Arc::new(
                v.into_iter()
                    .map(|(s, n)| (n > 0).then(|| s / n as f64))
                    .collect::<Float64Array>(),
            ),
            State::MinMax { conv, best, .. } => {
                if self.out_type == DataType::Null {
                    return Ok(arrow_array::new_null_array(&DataType::Null, groups));
                }
                // Decode the present values, then scatter them with NULLs for the rest.
                let parser = conv.parser();
                let present: Vec<&Box<[u8]>> = best.iter().flatten().collect();
                let cols = conv
                    .convert_rows(present.iter().map(|b| parser.parse(b)))
                    .map_err(row_err("min/max decoding"))?;
                let mut idx = Vec::with_capacity(groups);
                let mut k = 0u32;
                for b in &best {
                    if b.is_some() {
                        idx.push(Some(k));
                        k += 1;
                    } else {
                        idx.push(None);
                    }
                }
                let idx = arrow_array::UInt32Array::from(idx);
                arrow_select::take::take(&cols[0], &idx, None)
                    .map_err(row_err("min/max decoding"))?
            }
        })
    }
}

/// The hash aggregation operator. Memory: the groups and their accumulators.
#[derive(Debug)]
pub(crate) struct HashAggregate {
    group_by: Vec<Expr>,
    aggregates: Vec<Expr>,
    key_conv: Option<RowConverter>,
    groups: HashMap<Box<[u8]>, usize>,
    /// Group keys in first-seen order.
    keys: Vec<Box<[u8]>>,
    accs: Vec<Acc>,
    subst: Vec<Expr>,
    out_schema: SchemaRef,
}

impl HashAggregate {
    /// `input` is the schema of the batches it will see (for the key and argument types).
    pub(crate) fn new(
        group_by: &[Expr],
        aggregates: &[Expr],
        subst: &[Expr],
        input: &SchemaRef,
    ) -> Result<Self, ExecError> {
        let empty = RecordBatch::new_empty(input.clone());
        let ctx = Ctx {
            batch: &empty,
            subst,
        };
        let mut fields = Vec::new();
        let mut key_fields = Vec::new();
        for (i, k) in group_by.iter().enumerate() {
            let t = eval_array(k, ctx)?.data_type().clone();
            key_fields.push(SortField::new_with_options(
                t.clone(),
                SortOptions::default(),
            ));
            fields.push(Field::new(format!("#g{i}"), t, true));
        }
        let mut accs = Vec::new();
        for (i, a) in aggregates.iter().enumerate() {
            let arg_type = match a {
                Expr::Aggregate { arg: Some(arg), .. } => {
                    Some(eval_array(arg, ctx)?.data_type().clone())
                }
                _ => None,
            };
            let acc = Acc::new(a, arg_type.as_ref())?;
            fields.push(Field::new(format!("#a{i}"), acc.out_type.clone(), true));
            accs.push(acc);
        }
        let key_conv = if group_by.is_empty() {
            None
        } else {
            Some(RowConverter::new(key_fields).map_err(row_err("group key encoding"))?)
        };
        Ok(Self {
            group_by: group_by.to_vec(),
            aggregates: aggregates.to_vec(),
            key_conv,
            groups: HashMap::new(),
            keys: Vec::new(),
            accs,
            subst: subst.to_vec(),
            out_schema: Arc::new(Schema::new(fields)),
        })
    }

    /// The schema of [`HashAggregate::finish`]'s batch.
    pub(crate) fn finish_schema(&self) -> SchemaRef {
        self.out_schema.clone()
    }

    /// No GROUP BY: exactly one output row.
    pub(crate) fn is_ungrouped(&self) -> bool {
        self.group_by.is_empty()
    }

    /// The expressions the output batch's columns hold, in order.
    pub(crate) fn output_exprs(&self) -> Vec<Expr> {
        self.group_by
            .iter()
            .chain(&self.aggregates)
            .cloned()
            .collect()
    }

    pub(crate) fn push(&mut self, batch: &RecordBatch) -> Result<(), ExecError> {
        let ctx = Ctx {
            batch,
            subst: &self.subst,
        };
        let n = batch.num_rows();
        let ids: Vec<usize> = match &self.key_conv {
            None => {
                if self.keys.is_empty() {
                    self.keys.push(Box::new([]));
                }
                vec![0; n]
            }
            Some(conv) => {
                let cols = self
                    .group_by
                    .iter()
                    .map(|k| Ok(normalize_float(eval_array(k, ctx)?)))
                    .collect::<Result<Vec<_>, ExecError>>()?;
                let rows = conv
                    .convert_columns(&cols)
                    .map_err(row_err("group key encoding"))?;
                let mut ids = Vec::with_capacity(n);
                for r in rows.iter() {
                    let id = match self.groups.get(r.as_ref()) {
                        Some(id) => *id,
                        None => {
                            let id = self.keys.len();
                            let key: Box<[u8]> = r.as_ref().into();
                            self.keys.push(key.clone());
                            self.groups.insert(key, id);
                            id
                        }
                    };
                    ids.push(id);
                }
                ids
            }
        };
        let groups = self.keys.len();
        for acc in &mut self.accs {
            acc.resize(groups);
            let values = match &acc.arg {
                Some(a) => Some(eval_array(a, ctx)?),
                None => None,
            };
            acc.update(&ids, values.as_ref())?;
        }
        Ok(())
    }

    pub(crate) fn finish(self) -> Result<RecordBatch, ExecError> {
        let groups = if self.key_conv.is_none() {
            1
        } else {
            self.keys.len()
        };
        let mut cols: Vec<ArrayRef> = Vec::new();
        if let Some(conv) = &self.key_conv {
            let parser = conv.parser();
            cols = conv
                .convert_rows(self.keys.iter().map(|k| parser.parse(k)))
                .map_err(row_err("group key decoding"))?;
        }
        for acc in self.accs {
            cols.push(acc.finish(groups)?);
        }
        let opts = arrow_array::RecordBatchOptions::new().with_row_count(Some(groups));
        RecordBatch::try_new_with_options(self.out_schema, cols, &opts)
            .map_err(|e| ExecError::arrow("building the aggregate result", e))
    }
}
