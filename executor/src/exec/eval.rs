//! Vectorised evaluation of bound expressions on a [`RecordBatch`] with Arrow kernels.
//!
//! Literals stay length-1 [`Scalar`]s (Arrow `Datum`s) until a kernel needs a full
//! array. Integer arithmetic uses the checked kernels (overflow is an error naming the
//! expression); `/` is always floating point with IEEE results for a zero divisor
//! (`1/0 = inf`, `0/0 = NaN`), as DuckDB 2.0 does; comparisons treat `-0.0 = 0.0` and
//! NaN as equal to itself and greater than every other number (DuckDB's order).

use std::sync::Arc;

use arrow_arith::boolean::{and_kleene, is_not_null, is_null, not, or_kleene};
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Float32Type, Float64Type, Int64Type, IntervalMonthDayNanoType,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType,
};
use arrow_array::{
    new_null_array, Array, ArrayRef, BooleanArray, Date32Array, Datum, Float64Array, Int64Array,
    IntervalMonthDayNanoArray, NullArray, PrimitiveArray, RecordBatch, Scalar, StringArray,
    TimestampMicrosecondArray, UInt64Array,
};
use arrow_buffer::IntervalMonthDayNano;
use arrow_cast::cast::{cast_with_options, CastOptions};
use arrow_schema::{DataType, TimeUnit};

use super::error::ExecError;
use crate::expr::{BinaryOp, Expr, ScalarValue, TruncUnit};
use crate::temporal;
use crate::types;

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// An evaluated expression: a full column, or a constant (a length-1 array).
#[derive(Debug, Clone)]
pub(crate) enum Val {
    /// One value per row.
    Array(ArrayRef),
    /// The same value for every row.
    Scalar(ArrayRef),
}

impl Val {
    pub(crate) fn data_type(&self) -> &DataType {
        match self {
            Val::Array(a) | Val::Scalar(a) => a.data_type(),
        }
    }

    fn is_scalar(&self) -> bool {
        matches!(self, Val::Scalar(_))
    }

    fn inner(&self) -> &ArrayRef {
        match self {
            Val::Array(a) | Val::Scalar(a) => a,
        }
    }

    /// A full column of `rows` values.
    pub(crate) fn into_array(self, rows: usize) -> Result<ArrayRef, ExecError> {
        match self {
            Val::Array(a) => Ok(a),
            Val::Scalar(s) => {
                if s.is_null(0) {
                    return Ok(new_null_array(s.data_type(), rows));
                }
                let idx = arrow_array::UInt32Array::from(vec![0u32; rows]);
                arrow_select::take::take(&s, &idx, None)
                    .map_err(|e| ExecError::arrow("expanding a constant", e))
            }
        }
    }

    fn map(
        &self,
        f: impl FnOnce(&ArrayRef) -> Result<ArrayRef, ExecError>,
    ) -> Result<Val, ExecError> {
        Ok(match self {
            Val::Array(a) => Val::Array(f(a)?),
            Val::Scalar(a) => Val::Scalar(f(a)?),
        })
    }
}

fn datum_call<R>(l: &Val, r: &Val, f: impl FnOnce(&dyn Datum, &dyn Datum) -> R) -> R {
    match (l, r) {
        (Val::Array(a), Val::Array(b)) => f(a, b),
        (Val::Array(a), Val::Scalar(b)) => f(a, &Scalar::new(b.clone())),
        (Val::Scalar(a), Val::Array(b)) => f(&Scalar::new(a.clone()), b),
        // Two constants: plain length-1 arrays give a length-1 result.
        (Val::Scalar(a), Val::Scalar(b)) => f(a, b),
    }
}

fn wrap(scalar: bool, a: ArrayRef) -> Val {
    if scalar {
        Val::Scalar(a)
    } else {
        Val::Array(a)
    }
}

/// Where expressions find their inputs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ctx<'a> {
    /// The batch.
    pub(crate) batch: &'a RecordBatch,
    /// Expressions that are already columns of `batch`, by position (group keys and
    /// aggregates after aggregation, select items after projection). Empty: columns
    /// are found by name.
    pub(crate) subst: &'a [Expr],
}

impl Ctx<'_> {
    fn rows(&self) -> usize {
        self.batch.num_rows()
    }
}

/// Evaluates `e` to a full column of `ctx.batch.num_rows()` values.
pub(crate) fn eval_array(e: &Expr, ctx: Ctx<'_>) -> Result<ArrayRef, ExecError> {
    eval(e, ctx)?.into_array(ctx.rows())
}

/// Evaluates a boolean expression into a filter mask (NULL counts as false later).
pub(crate) fn eval_predicate(e: &Expr, ctx: Ctx<'_>) -> Result<BooleanArray, ExecError> {
    let a = eval_array(e, ctx)?;
    to_bool(e, &a)
}

fn to_bool(e: &Expr, a: &ArrayRef) -> Result<BooleanArray, ExecError> {
    match a.data_type() {
        DataType::Boolean => Ok(a.as_boolean().clone()),
        DataType::Null => Ok(BooleanArray::new_null(a.len())),
        other => Err(ExecError::Type {
            expr: e.to_string(),
            detail: format!("expected a boolean, got {other}"),
        }),
    }
}

/// Evaluates `e`.
pub(crate) fn eval(e: &Expr, ctx: Ctx<'_>) -> Result<Val, ExecError> {
    if !ctx.subst.is_empty() {
        if let Some(i) = ctx.subst.iter().position(|s| s == e) {
            return Ok(Val::Array(ctx.batch.column(i).clone()));
        }
    }
    match e {
        Expr::Column(name) => ctx
            .batch
            .column_by_name(name)
            .cloned()
            .map(Val::Array)
            .ok_or_else(|| ExecError::MissingColumn { name: name.clone() }),
        Expr::Literal(v) => Ok(Val::Scalar(literal_array(v))),
        Expr::Binary { left, op, right } => {
            let l = eval(left, ctx)?;
            let r = eval(right, ctx)?;
            match op {
                BinaryOp::And | BinaryOp::Or => {
                    let scalar = l.is_scalar() && r.is_scalar();
                    let n = if scalar { 1 } else { ctx.rows() };
                    let la = to_bool(left, &l.into_array(n)?)?;
                    let ra = to_bool(right, &r.into_array(n)?)?;
                    let out = if *op == BinaryOp::And {
                        and_kleene(&la, &ra)
                    } else {
                        or_kleene(&la, &ra)
                    }
                    .map_err(|err| ExecError::kernel(e, err))?;
                    Ok(wrap(scalar, Arc::new(out)))
                }
                op if op.is_comparison() => compare(e, *op, &l, &r),
                op => arithmetic(e, *op, (left, &l), (right, &r)),
            }
        }
        Expr::Not(inner) => {
            let v = eval(inner, ctx)?;
            v.map(|a| {
                let b = to_bool(inner, a)?;
                Ok(Arc::new(not(&b).map_err(|err| ExecError::kernel(e, err))?) as ArrayRef)
            })
        }
        Expr::Negative(inner) => {
            let v = eval(inner, ctx)?;
            v.map(|a| {
                let a = if a.data_type().is_unsigned_integer() {
                    cast(e, a, &DataType::Int64)?
                } else {
                    a.clone()
                };
                match a.data_type() {
                    DataType::Null => Ok(a),
                    t if t.is_numeric() => {
                        arrow_arith::numeric::neg(&a).map_err(|err| ExecError::kernel(e, err))
                    }
                    t => Err(ExecError::Type {
                        expr: e.to_string(),
                        detail: format!("cannot negate {t}"),
                    }),
                }
            })
        }
        Expr::Between {
            expr,
            low,
            high,
            negated,
        } => {
            let x = eval(expr, ctx)?;
            let lo = eval(low, ctx)?;
            let hi = eval(high, ctx)?;
            let a = compare(e, BinaryOp::GtEq, &x, &lo)?;
            let b = compare(e, BinaryOp::LtEq, &x, &hi)?;
            let scalar = a.is_scalar() && b.is_scalar();
            let n = if scalar { 1 } else { ctx.rows() };
            let (a, b) = (a.into_array(n)?, b.into_array(n)?);
            let mut out = and_kleene(a.as_boolean(), b.as_boolean())
                .map_err(|err| ExecError::kernel(e, err))?;
            if *negated {
                out = not(&out).map_err(|err| ExecError::kernel(e, err))?;
            }
            Ok(wrap(scalar, Arc::new(out)))
        }
        Expr::InList {
            expr,
            list,
            negated,
        } => {
            let x = eval(expr, ctx)?;
            let mut acc: Option<Val> = None;
            for item in list {
                let v = eval(item, ctx)?;
                let hit = compare(e, BinaryOp::Eq, &x, &v)?;
                acc = Some(match acc {
                    None => hit,
                    Some(prev) => {
                        let scalar = prev.is_scalar() && hit.is_scalar();
                        let n = if scalar { 1 } else { ctx.rows() };
                        let (p, h) = (prev.into_array(n)?, hit.into_array(n)?);
                        let o = or_kleene(p.as_boolean(), h.as_boolean())
                            .map_err(|err| ExecError::kernel(e, err))?;
                        wrap(scalar, Arc::new(o))
                    }
                });
            }
            let acc = acc.unwrap_or_else(|| Val::Scalar(Arc::new(BooleanArray::from(vec![false]))));
            if *negated {
                acc.map(|a| {
                    Ok(
                        Arc::new(not(a.as_boolean()).map_err(|err| ExecError::kernel(e, err))?)
                            as ArrayRef,
                    )
                })
            } else {
                Ok(acc)
            }
        }
        Expr::IsNull { expr, negated } => {
            let v = eval(expr, ctx)?;
            v.map(|a| {
                let out = if *negated { is_not_null(a) } else { is_null(a) };
                Ok(Arc::new(out.map_err(|err| ExecError::kernel(e, err))?) as ArrayRef)
            })
        }
        Expr::Cast { expr, to } => {
            let v = eval(expr, ctx)?;
            v.map(|a| sql_cast(e, a, to))
        }
        Expr::DateTrunc { unit, expr } => {
            let v = eval(expr, ctx)?;
            v.map(|a| date_trunc(e, *unit, a))
        }
        Expr::Aggregate { .. } => Err(ExecError::Unsupported {
            what: format!("aggregate {e} outside an aggregation"),
        }),
    }
}

/// A length-1 array holding `v`.
pub(crate) fn literal_array(v: &ScalarValue) -> ArrayRef {
    match v {
        ScalarValue::Null => Arc::new(NullArray::new(1)),
        ScalarValue::Bool(b) => Arc::new(BooleanArray::from(vec![*b])),
        ScalarValue::Int64(i) => Arc::new(Int64Array::from(vec![*i])),
        ScalarValue::UInt64(u) => Arc::new(UInt64Array::from(vec![*u])),
        ScalarValue::Float64(f) => Arc::new(Float64Array::from(vec![*f])),
        ScalarValue::Utf8(s) => Arc::new(StringArray::from(vec![s.as_str()])),
        ScalarValue::Date32(d) => Arc::new(Date32Array::from(vec![*d])),
        ScalarValue::TimestampMicros(t) => Arc::new(TimestampMicrosecondArray::from(vec![*t])),
        ScalarValue::Interval { months, micros } => {
            Arc::new(IntervalMonthDayNanoArray::from(vec![
                IntervalMonthDayNano::new(*months, 0, micros.saturating_mul(1000)),
            ]))
        }
    }
}

pub(crate) fn cast(e: &Expr, a: &ArrayRef, to: &DataType) -> Result<ArrayRef, ExecError> {
    if a.data_type() == to {
        return Ok(a.clone());
    }
    let opts = CastOptions {
        safe: false,
        ..Default::default()
    };
    cast_with_options(a, to, &opts).map_err(|err| ExecError::kernel(e, err))
}

/// CAST with DuckDB's rules where they differ from Arrow's: floats round half away
/// from zero into integers; dates, timestamps and floats print as DuckDB prints them.
fn sql_cast(e: &Expr, a: &ArrayRef, to: &DataType) -> Result<ArrayRef, ExecError> {
    let from = a.data_type();
    if from == to {
        return Ok(a.clone());
    }
    if to.is_integer() && from.is_floating() {
        let f = cast(e, a, &DataType::Float64)?;
        let rounded: Float64Array = f.as_primitive::<Float64Type>().unary(f64::round);
        return cast(e, &(Arc::new(rounded) as ArrayRef), to);
    }
    if types::is_string(to) && (types::is_temporal(from) || from.is_floating()) {
        let strings: StringArray = (0..a.len())
            .map(|i| crate::format::cell(a.as_ref(), i))
            .collect();
        return cast(e, &(Arc::new(strings) as ArrayRef), to);
    }
    cast(e, a, to)
}

/// Replaces `-0.0` by `0.0` and every NaN by the positive quiet NaN, so that equality,
/// grouping and ordering treat them as one value each (DuckDB: NaN is the greatest
/// float whatever its sign bit; a NaN with the sign bit set would otherwise sort first
/// in the row encoding's total order).
pub(crate) fn normalize_float(a: ArrayRef) -> ArrayRef {
    match a.data_type() {
        DataType::Float64 => {
            let p = a.as_primitive::<Float64Type>();
            if !p
                .values()
                .iter()
                .any(|v| v.is_sign_negative() && (*v == 0.0 || v.is_nan()))
            {
                return a;
            }
            Arc::new(p.unary::<_, Float64Type>(|v| {
                if v == 0.0 {
                    0.0
                } else if v.is_nan() {
                    f64::NAN
                } else {
                    v
                }
            }))
        }
        DataType::Float32 => {
            let p = a.as_primitive::<Float32Type>();
            Arc::new(p.unary::<_, Float32Type>(|v| {
                if v == 0.0 {
                    0.0
                } else if v.is_nan() {
                    f32::NAN
                } else {
                    v
                }
            }))
        }
        _ => a,
    }
}

/// Micros since the epoch of a date or timestamp column (any unit), as `Int64`.
pub(crate) fn temporal_micros(e: &Expr, a: &ArrayRef) -> Result<Int64Array, ExecError> {
    let overflow = || ExecError::Overflow {
        expr: e.to_string(),
        detail: "timestamp out of range".into(),
    };
    Ok(match a.data_type() {
        DataType::Date32 => a
            .as_primitive::<Date32Type>()
            .try_unary::<_, Int64Type, _>(|d| Ok(i64::from(d) * MICROS_PER_DAY))
            .map_err(|_: ExecError| overflow())?,
        DataType::Date64 => {
            let ms = cast(e, a, &DataType::Int64)?;
            ms.as_primitive::<Int64Type>()
                .try_unary::<_, Int64Type, _>(|v| v.checked_mul(1000).ok_or_else(overflow))?
        }
        DataType::Timestamp(TimeUnit::Second, _) => {
            a.as_primitive::<TimestampSecondType>()
                .try_unary::<_, Int64Type, _>(|v| v.checked_mul(1_000_000).ok_or_else(overflow))?
        }
        DataType::Timestamp(TimeUnit::Millisecond, _) => a
            .as_primitive::<TimestampMillisecondType>()
            .try_unary::<_, Int64Type, _>(|v| v.checked_mul(1000).ok_or_else(overflow))?,
        DataType::Timestamp(TimeUnit::Microsecond, _) => a
            .as_primitive::<TimestampMicrosecondType>()
            .reinterpret_cast::<Int64Type>(),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => a
            .as_primitive::<TimestampNanosecondType>()
            .unary::<_, Int64Type>(|v| v.div_euclid(1000)),
        other => {
            return Err(ExecError::Type {
                expr: e.to_string(),
                detail: format!("expected a date or timestamp, got {other}"),
            })
        }
    })
}

/// Brings both sides of a comparison to one type.
fn coerce_pair(e: &Expr, l: &Val, r: &Val) -> Result<Option<(Val, Val)>, ExecError> {
    let (lt, rt) = (l.data_type().clone(), r.data_type().clone());
    if lt == DataType::Null || rt == DataType::Null {
        return Ok(None);
    }
    let to = |v: &Val, t: &DataType| v.map(|a| cast(e, a, t));
    let both = |t: DataType| -> Result<Option<(Val, Val)>, ExecError> {
        Ok(Some((to(l, &t)?, to(r, &t)?)))
    };
    if types::is_numeric(&lt) && types::is_numeric(&rt) {
        let t = if lt.is_integer() && rt.is_integer() {
            match (lt.is_unsigned_integer(), rt.is_unsigned_integer()) {
                (false, false) => DataType::Int64,
                (true, true) => DataType::UInt64,
                _ => DataType::Decimal128(20, 0),
            }
        } else {
            DataType::Float64
        };
        let (a, b) = both(t)?.unwrap_or((l.clone(), r.clone()));
        return Ok(Some((
            a.map(|x| Ok(normalize_float(x.clone())))?,
            b.map(|x| Ok(normalize_float(x.clone())))?,
        )));
    }
    if types::is_string(&lt) && types::is_string(&rt) {
        return both(DataType::Utf8);
    }
    if types::is_temporal(&lt) && types::is_temporal(&rt) {
        let m = |v: &Val| v.map(|a| Ok(Arc::new(temporal_micros(e, a)?) as ArrayRef));
        return Ok(Some((m(l)?, m(r)?)));
    }
    if lt == rt {
        return Ok(Some((l.clone(), r.clone())));
    }
    Err(ExecError::Type {
        expr: e.to_string(),
        detail: format!("cannot compare {lt} with {rt}"),
    })
}

fn compare(e: &Expr, op: BinaryOp, l: &Val, r: &Val) -> Result<Val, ExecError> {
    let scalar = l.is_scalar() && r.is_scalar();
    let Some((l, r)) = coerce_pair(e, l, r)? else {
        let n = if l.is_scalar() {
            r.inner().len()
        } else {
            l.inner().len()
        };
        return Ok(wrap(
            scalar,
            Arc::new(BooleanArray::new_null(if scalar { 1 } else { n })),
        ));
    };
    use arrow_ord::cmp;
    let out = datum_call(&l, &r, |a, b| match op {
        BinaryOp::Eq => cmp::eq(a, b),
        BinaryOp::NotEq => cmp::neq(a, b),
        BinaryOp::Lt => cmp::lt(a, b),
        BinaryOp::LtEq => cmp::lt_eq(a, b),
        BinaryOp::Gt => cmp::gt(a, b),
        _ => cmp::gt_eq(a, b),
    })
    .map_err(|err| ExecError::kernel(e, err))?;
    Ok(wrap(scalar, Arc::new(out)))
}

fn interval_of(e: &Expr, v: &Val) -> Result<(i32, i64), ExecError> {
    match v {
        Val::Scalar(a)
            if a.data_type() == &DataType::Interval(arrow_schema::IntervalUnit::MonthDayNano) =>
        {
            let p = a.as_primitive::<IntervalMonthDayNanoType>();
            let iv = p.value(0);
            let micros = i64::from(iv.days)
                .checked_mul(MICROS_PER_DAY)
                .and_then(|d| d.checked_add(iv.nanoseconds / 1000));
            micros
                .map(|m| (iv.months, m))
                .ok_or_else(|| ExecError::Overflow {
                    expr: e.to_string(),
                    detail: "interval out of range".into(),
                })
        }
        _ => Err(ExecError::Unsupported {
            what: format!("{e}: only constant intervals are supported"),
        }),
    }
}

fn arithmetic(
    e: &Expr,
    op: BinaryOp,
    (le, l): (&Expr, &Val),
    (re, r): (&Expr, &Val),
) -> Result<Val, ExecError> {
    let (lt, rt) = (l.data_type().clone(), r.data_type().clone());
    let scalar = l.is_scalar() && r.is_scalar();
    let len = if l.is_scalar() {
        r.inner().len()
    } else {
        l.inner().len()
    };
    let out_t = types::arithmetic(op, (le, &lt), (re, &rt)).map_err(|err| ExecError::Type {
        expr: e.to_string(),
        detail: err.to_string(),
    })?;
    if lt == DataType::Null || rt == DataType::Null {
        return Ok(wrap(
            scalar,
            new_null_array(&out_t, if scalar { 1 } else { len }),
        ));
    }
    if types::is_numeric(&lt) && types::is_numeric(&rt) {
        let t = if op == BinaryOp::Divide {
            DataType::Float64
        } else {
            out_t
        };
        let a = l.map(|x| cast(e, x, &t))?;
        let b = r.map(|x| cast(e, x, &t))?;
        use arrow_arith::numeric;
        let out = datum_call(&a, &b, |x, y| match op {
            BinaryOp::Plus => numeric::add(x, y),
            BinaryOp::Minus => numeric::sub(x, y),
            BinaryOp::Multiply => numeric::mul(x, y),
            _ => numeric::div(x, y),
        })
        .map_err(|err| ExecError::kernel(e, err))?;
        return Ok(wrap(scalar, out));
    }
    // Temporal arithmetic, row by row.
    let n = if scalar { 1 } else { len };
    let overflow = || ExecError::Overflow {
        expr: e.to_string(),
        detail: "date or timestamp out of range".into(),
    };
    let out: ArrayRef = match (&lt, &rt) {
        (a, _) if types::is_temporal(a) && matches!(rt, DataType::Interval(_)) => {
            let (months, micros) = interval_of(e, r)?;
            let sign = if op == BinaryOp::Minus { -1 } else { 1 };
            let ts = temporal_micros(e, &l.clone().into_array(n)?)?;
            let v: PrimitiveArray<TimestampMicrosecondType> = ts.try_unary(|t| {
                temporal::add_interval(t, months, micros, sign).ok_or_else(overflow)
            })?;
            Arc::new(v.with_data_type(out_t))
        }
        (DataType::Interval(_), b) if types::is_temporal(b) => {
            let (months, micros) = interval_of(e, l)?;
            let ts = temporal_micros(e, &r.clone().into_array(n)?)?;
            let v: PrimitiveArray<TimestampMicrosecondType> = ts
                .try_unary(|t| temporal::add_interval(t, months, micros, 1).ok_or_else(overflow))?;
            Arc::new(v.with_data_type(out_t))
        }
        (DataType::Date32, b) if b.is_integer() => {
            let d = l.clone().into_array(n)?;
            let k = cast(e, &r.clone().into_array(n)?, &DataType::Int64)?;
            let sign = if op == BinaryOp::Minus { -1 } else { 1 };
            let v: Date32Array = arrow_arith::arity::try_binary(
                d.as_primitive::<Date32Type>(),
                k.as_primitive::<Int64Type>(),
                |d, k| {
                    k.checked_mul(sign)
                        .and_then(|k| i64::from(d).checked_add(k))
                        .and_then(|v| i32::try_from(v).ok())
                        .ok_or_else(|| {
                            arrow_schema::ArrowError::ArithmeticOverflow("date out of range".into())
                        })
                },
            )
            .map_err(|err| ExecError::kernel(e, err))?;
            Arc::new(v)
        }
        (DataType::Date32, DataType::Date32) => {
            let a = cast(e, &l.clone().into_array(n)?, &DataType::Int64)?;
            let b = cast(e, &r.clone().into_array(n)?, &DataType::Int64)?;
            arrow_arith::numeric::sub(&a, &b).map_err(|err| ExecError::kernel(e, err))?
        }
        _ => {
            return Err(ExecError::Unsupported {
                what: format!("{e} on {lt} and {rt}"),
            })
        }
    };
    Ok(wrap(scalar, out))
}

/// Truncates µs since the epoch to the start of `unit`.
pub(crate) fn trunc_micros(t: i64, unit: TruncUnit) -> Option<i64> {
    let day = t.div_euclid(MICROS_PER_DAY);
    let in_day = t.rem_euclid(MICROS_PER_DAY);
    let at_day = |d: i64| d.checked_mul(MICROS_PER_DAY);
    match unit {
        TruncUnit::Second => Some(t - t.rem_euclid(1_000_000)),
        TruncUnit::Minute => Some(t - t.rem_euclid(60_000_000)),
        TruncUnit::Hour => Some(t - t.rem_euclid(3_600_000_000)),
        TruncUnit::Day => Some(t - in_day),
        // 1970-01-01 was a Thursday; ISO weeks start on Monday.
        TruncUnit::Week => at_day(day - (day + 3).rem_euclid(7)),
        TruncUnit::Month | TruncUnit::Quarter | TruncUnit::Year => {
            let (y, m, _) = temporal::civil_from_days(day);
            let m = match unit {
                TruncUnit::Month => m,
                TruncUnit::Quarter => (m - 1) / 3 * 3 + 1,
                _ => 1,
            };
            at_day(temporal::days_from_civil(y, m, 1))
        }
    }
}

fn date_trunc(e: &Expr, unit: TruncUnit, a: &ArrayRef) -> Result<ArrayRef, ExecError> {
    let overflow = || ExecError::Overflow {
        expr: e.to_string(),
        detail: "timestamp out of range".into(),
    };
    let t = a.data_type().clone();
    let a = if types::is_string(&t) {
        cast(e, a, &DataType::Timestamp(TimeUnit::Microsecond, None))?
    } else {
        a.clone()
    };
    let micros = temporal_micros(e, &a)?;
    let truncated: Int64Array = micros.try_unary(|v| trunc_micros(v, unit).ok_or_else(overflow))?;
    let back: ArrayRef = match a.data_type() {
        DataType::Date32 => {
            Arc::new(truncated.unary::<_, Date32Type>(|v| (v.div_euclid(MICROS_PER_DAY)) as i32))
        }
        DataType::Timestamp(unit, tz) => {
            let scale: i64 = match unit {
                TimeUnit::Second => -1_000_000,
                TimeUnit::Millisecond => -1000,
                TimeUnit::Microsecond => 1,
                TimeUnit::Nanosecond => 1000,
            };
            let v: Int64Array = truncated.try_unary(|v| {
                if scale < 0 {
                    Ok(v / -scale)
                } else {
                    v.checked_mul(scale).ok_or_else(overflow)
                }
            })?;
            int64_to_timestamp(v, *unit, tz.clone())
        }
        other => {
            return Err(ExecError::Type {
                expr: e.to_string(),
                detail: format!("date_trunc of {other}"),
            })
        }
    };
    Ok(back)
}

/// Reinterprets `Int64` values as timestamps of `unit` and time zone `tz`.
pub(crate) fn int64_to_timestamp(v: Int64Array, unit: TimeUnit, tz: Option<Arc<str>>) -> ArrayRef {
    match unit {
        TimeUnit::Second => Arc::new(
            v.reinterpret_cast::<TimestampSecondType>()
                .with_timezone_opt(tz),
        ),
        TimeUnit::Millisecond => Arc::new(
            v.reinterpret_cast::<TimestampMillisecondType>()
                .with_timezone_opt(tz),
        ),
        TimeUnit::Microsecond => Arc::new(
            v.reinterpret_cast::<TimestampMicrosecondType>()
                .with_timezone_opt(tz),
        ),
        TimeUnit::Nanosecond => Arc::new(
            v.reinterpret_cast::<TimestampNanosecondType>()
                .with_timezone_opt(tz),
        ),
    }
}
