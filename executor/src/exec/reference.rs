//! A dead-simple row-at-a-time interpreter of a [`LogicalPlan`], for property tests.
//!
//! It works on plain values, follows the plan's clause order directly (not the
//! operator list) and shares nothing with the vectorised path except `date_trunc`'s
//! calendar arithmetic and the binder's result types.

use std::cmp::Ordering;

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, TimeUnit};

use crate::bind::LogicalPlan;
use crate::expr::{AggFunc, BinaryOp, Expr, ScalarValue};

/// A plain value.
#[derive(Debug, Clone)]
pub(crate) enum V {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    /// Micros since the epoch.
    Ts(i64),
    Date(i32),
}

pub(crate) type Row = Vec<V>;

/// The error marker: the reference refuses the same inputs the executor must refuse.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RefError(pub(crate) String);

type R<T> = Result<T, RefError>;

fn norm(f: f64) -> f64 {
    if f == 0.0 {
        0.0
    } else if f.is_nan() {
        f64::NAN
    } else {
        f
    }
}

/// SQL comparison: None when either side is NULL. NaN is the greatest float, `-0 = 0`.
pub(crate) fn cmp_values(a: &V, b: &V) -> Option<Ordering> {
    Some(match (a, b) {
        (V::Null, _) | (_, V::Null) => return None,
        (V::Bool(x), V::Bool(y)) => x.cmp(y),
        (V::Int(x), V::Int(y)) => x.cmp(y),
        (V::Int(x), V::Float(y)) => norm(*x as f64).total_cmp(&norm(*y)),
        (V::Float(x), V::Int(y)) => norm(*x).total_cmp(&norm(*y as f64)),
        (V::Float(x), V::Float(y)) => norm(*x).total_cmp(&norm(*y)),
        (V::Str(x), V::Str(y)) => x.as_bytes().cmp(y.as_bytes()),
        (V::Ts(x), V::Ts(y)) => x.cmp(y),
        (V::Date(x), V::Date(y)) => x.cmp(y),
        (V::Date(x), V::Ts(y)) => (i64::from(*x) * 86_400_000_000).cmp(y),
        (V::Ts(x), V::Date(y)) => x.cmp(&(i64::from(*y) * 86_400_000_000)),
        _ => return None,
    })
}

/// Total order for sorting and grouping: NULL last, then [`cmp_values`].
fn total(a: &V, b: &V) -> Ordering {
    match (a, b) {
        (V::Null, V::Null) => Ordering::Equal,
        (V::Null, _) => Ordering::Greater,
        (_, V::Null) => Ordering::Less,
        _ => cmp_values(a, b).unwrap_or(Ordering::Equal),
    }
}

fn same(a: &V, b: &V) -> bool {
    total(a, b) == Ordering::Equal
}

/// Reads row `i` of `batch`.
pub(crate) fn row_of(batch: &RecordBatch, i: usize) -> Row {
    batch
        .columns()
        .iter()
        .map(|c| value_of(c.as_ref(), i))
        .collect()
}

pub(crate) fn value_of(a: &dyn Array, i: usize) -> V {
    if a.is_null(i) {
        return V::Null;
    }
    match a.data_type() {
        DataType::Boolean => V::Bool(a.as_boolean().value(i)),
        DataType::Int32 => V::Int(a.as_primitive::<Int32Type>().value(i).into()),
        DataType::Int64 => V::Int(a.as_primitive::<Int64Type>().value(i).into()),
        DataType::UInt64 => V::Int(a.as_primitive::<UInt64Type>().value(i).into()),
        DataType::Float64 => V::Float(a.as_primitive::<Float64Type>().value(i)),
        DataType::Utf8 => V::Str(a.as_string::<i32>().value(i).to_owned()),
        DataType::Date32 => V::Date(a.as_primitive::<Date32Type>().value(i)),
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            V::Ts(a.as_primitive::<TimestampMicrosecondType>().value(i))
        }
        DataType::Null => V::Null,
        other => panic!("reference: unsupported type {other}"),
    }
}

struct Env<'a> {
    names: &'a [String],
    row: &'a Row,
    /// Post-aggregation: expressions already computed.
    subst: &'a [(Expr, V)],
}

fn lit(v: &ScalarValue) -> V {
    match v {
        ScalarValue::Null => V::Null,
        ScalarValue::Bool(b) => V::Bool(*b),
        ScalarValue::Int64(i) => V::Int((*i).into()),
        ScalarValue::UInt64(u) => V::Int((*u).into()),
        ScalarValue::Float64(f) => V::Float(*f),
        ScalarValue::Utf8(s) => V::Str(s.clone()),
        ScalarValue::Date32(d) => V::Date(*d),
        ScalarValue::TimestampMicros(t) => V::Ts(*t),
        ScalarValue::Interval { .. } => panic!("reference: intervals"),
    }
}

fn as_f64(v: &V) -> Option<f64> {
    match v {
        V::Int(i) => Some(*i as f64),
        V::Float(f) => Some(*f),
        _ => None,
    }
}

fn and3(a: &V, b: &V) -> V {
    match (a, b) {
        (V::Bool(false), _) | (_, V::Bool(false)) => V::Bool(false),
        (V::Bool(true), V::Bool(true)) => V::Bool(true),
        _ => V::Null,
    }
}

fn or3(a: &V, b: &V) -> V {
    match (a, b) {
        (V::Bool(true), _) | (_, V::Bool(true)) => V::Bool(true),
        (V::Bool(false), V::Bool(false)) => V::Bool(false),
        _ => V::Null,
    }
}

fn not3(a: &V) -> V {
    match a {
        V::Bool(b) => V::Bool(!b),
        _ => V::Null,
    }
}

fn cmp_op(op: BinaryOp, a: &V, b: &V) -> V {
    match cmp_values(a, b) {
        None => V::Null,
        Some(o) => V::Bool(match op {
            BinaryOp::Eq => o == Ordering::Equal,
            BinaryOp::NotEq => o != Ordering::Equal,
            BinaryOp::Lt => o == Ordering::Less,
            BinaryOp::LtEq => o != Ordering::Greater,
            BinaryOp::Gt => o == Ordering::Greater,
            _ => o != Ordering::Less,
        }),
    }
}

fn ty(e: &Expr, plan: &LogicalPlan) -> DataType {
    // The type the binder gave: integer arithmetic stays integer unless a float or a
    // division is involved.
    match e {
        Expr::Column(c) => plan
            .table_schema
            .field_with_name(c)
            .map(|f| f.data_type().clone())
            .unwrap_or(DataType::Null),
        Expr::Literal(v) => v.data_type(),
        Expr::Binary { left, op, right } if op.is_arithmetic() => {
            let (l, r) = (ty(left, plan), ty(right, plan));
            crate::types::arithmetic(*op, (left, &l), (right, &r)).unwrap_or(DataType::Null)
        }
        Expr::Negative(x) => ty(x, plan),
        Expr::Cast { to, .. } => to.clone(),
        Expr::Aggregate { func, arg, .. } => match (func, arg) {
            (AggFunc::Count, _) => DataType::Int64,
            (AggFunc::Avg, _) => DataType::Float64,
            (AggFunc::Sum, Some(a)) if ty(a, plan).is_integer() => DataType::Int64,
            (AggFunc::Sum, _) => DataType::Float64,
            (_, Some(a)) => ty(a, plan),
            _ => DataType::Null,
        },
        Expr::DateTrunc { expr, .. } => ty(expr, plan),
        _ => DataType::Boolean,
    }
}

fn overflow(e: &Expr) -> RefError {
    RefError(format!("overflow in {e}"))
}

fn eval(e: &Expr, env: &Env<'_>, plan: &LogicalPlan) -> R<V> {
    if let Some((_, v)) = env.subst.iter().find(|(x, _)| x == e) {
        return Ok(v.clone());
    }
    Ok(match e {
        Expr::Column(c) => {
            let i = env.names.iter().position(|n| n == c).expect("column");
            env.row[i].clone()
        }
        Expr::Literal(v) => lit(v),
        Expr::Binary { left, op, right } => {
            let l = eval(left, env, plan)?;
            let r = eval(right, env, plan)?;
            match op {
                BinaryOp::And => and3(&l, &r),
                BinaryOp::Or => or3(&l, &r),
                op if op.is_comparison() => cmp_op(*op, &l, &r),
                op => {
                    if matches!(l, V::Null) || matches!(r, V::Null) {
                        return Ok(V::Null);
                    }
                    let t = ty(e, plan);
                    if t == DataType::Int64 {
                        let (V::Int(x), V::Int(y)) = (&l, &r) else {
                            return Err(RefError(format!("bad operands in {e}")));
                        };
                        let v = match op {
                            BinaryOp::Plus => x + y,
                            BinaryOp::Minus => x - y,
                            _ => x * y,
                        };
                        if i64::try_from(v).is_err() {
                            return Err(overflow(e));
                        }
                        V::Int(v)
                    } else {
                        let (x, y) = (as_f64(&l).expect("num"), as_f64(&r).expect("num"));
                        V::Float(match op {
                            BinaryOp::Plus => x + y,
                            BinaryOp::Minus => x - y,
                            BinaryOp::Multiply => x * y,
                            _ => x / y,
                        })
                    }
                }
            }
        }
        Expr::Not(x) => not3(&eval(x, env, plan)?),
        Expr::Negative(x) => match eval(x, env, plan)? {
            V::Int(i) if i == i128::from(i64::MIN) => return Err(overflow(e)),
            V::Int(i) => V::Int(-i),
            V::Float(f) => V::Float(-f),
            other => other,
        },
        Expr::Between {
            expr,
            low,
            high,
            negated,
        } => {
            let x = eval(expr, env, plan)?;
            let lo = eval(low, env, plan)?;
            let hi = eval(high, env, plan)?;
            let v = and3(
                &cmp_op(BinaryOp::GtEq, &x, &lo),
                &cmp_op(BinaryOp::LtEq, &x, &hi),
            );
            if *negated {
                not3(&v)
            } else {
                v
            }
        }
        Expr::InList {
            expr,
            list,
            negated,
        } => {
            let x = eval(expr, env, plan)?;
            let mut acc = V::Bool(false);
            for i in list {
                acc = or3(&acc, &cmp_op(BinaryOp::Eq, &x, &eval(i, env, plan)?));
            }
            if *negated {
                not3(&acc)
            } else {
                acc
            }
        }
        Expr::IsNull { expr, negated } => {
            V::Bool(matches!(eval(expr, env, plan)?, V::Null) != *negated)
        }
        Expr::Cast { expr, to } => {
            let v = eval(expr, env, plan)?;
            match (v, to) {
                (V::Null, _) => V::Null,
                (V::Int(i), DataType::Float64) => V::Float(i as f64),
                (V::Float(f), DataType::Int64) => {
                    let r = f.round();
                    if r.is_nan()
                        || !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&r)
                    {
                        return Err(RefError(format!("cast {e}")));
                    }
                    V::Int(r as i64 as i128)
                }
                (V::Int(i), DataType::Utf8) => V::Str(i.to_string()),
                (v, _) => v,
            }
        }
        Expr::DateTrunc { unit, expr } => match eval(expr, env, plan)? {
            V::Ts(t) => V::Ts(super::eval::trunc_micros(t, *unit).ok_or_else(|| overflow(e))?),
            other => other,
        },
        Expr::Aggregate { .. } => return Err(RefError(format!("aggregate {e} unbound"))),
    })
}

fn truthy(v: &V) -> bool {
    matches!(v, V::Bool(true))
}

fn aggregate(e: &Expr, rows: &[&Row], names: &[String], plan: &LogicalPlan) -> R<V> {
    let Expr::Aggregate {
        func,
        arg,
        distinct,
    } = e
    else {
        unreachable!()
    };
    let Some(arg) = arg else {
        return Ok(V::Int(rows.len() as i128));
    };
    let mut vals = Vec::new();
    for r in rows {
        let env = Env {
            names,
            row: r,
            subst: &[],
        };
        let v = eval(arg, &env, plan)?;
        let dup = *distinct && vals.iter().any(|x| same(x, &v));
        if !matches!(v, V::Null) && !dup {
            vals.push(v);
        }
    }
    let integer = vals.iter().all(|v| matches!(v, V::Int(_)));
    Ok(match func {
        AggFunc::Count => V::Int(vals.len() as i128),
        _ if vals.is_empty() => V::Null,
        AggFunc::Sum if integer && ty(arg, plan).is_integer() => {
            let s: i128 = vals
                .iter()
                .map(|v| if let V::Int(i) = v { *i } else { 0 })
                .sum();
            if i64::try_from(s).is_err() {
                return Err(overflow(e));
            }
            V::Int(s)
        }
        AggFunc::Sum => V::Float(vals.iter().filter_map(as_f64).fold(0.0, |a, b| a + b)),
        AggFunc::Avg if integer => {
            let s: i128 = vals
                .iter()
                .map(|v| if let V::Int(i) = v { *i } else { 0 })
                .sum();
            V::Float(s as f64 / vals.len() as f64)
        }
        AggFunc::Avg => {
            V::Float(vals.iter().filter_map(as_f64).fold(0.0, |a, b| a + b) / vals.len() as f64)
        }
        AggFunc::Min | AggFunc::Max => {
            // Extremes by the raw total order (so -0.0 < 0.0, like the row encoding).
            let key = |v: &V| match v {
                V::Float(f) => V::Float(*f),
                o => o.clone(),
            };
            let raw = |a: &V, b: &V| match (a, b) {
                (V::Float(x), V::Float(y)) => x.total_cmp(y),
                _ => total(a, b),
            };
            let mut best = key(&vals[0]);
            for v in &vals[1..] {
                let o = raw(v, &best);
                if (*func == AggFunc::Min && o == Ordering::Less)
                    || (*func == AggFunc::Max && o == Ordering::Greater)
                {
                    best = key(v);
                }
            }
            best
        }
    })
}

fn sort_cmp(a: &[V], b: &[V], plan: &LogicalPlan) -> Ordering {
    for ((x, y), k) in a.iter().zip(b).zip(&plan.order_by) {
        let o = match (x, y) {
            (V::Null, V::Null) => Ordering::Equal,
            (V::Null, _) => {
                if k.nulls_first {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            }
            (_, V::Null) => {
                if k.nulls_first {
                    Ordering::Greater
                } else {
                    Ordering::Less
                }
            }
            _ => {
                let o = cmp_values(x, y).unwrap_or(Ordering::Equal);
                if k.descending {
                    o.reverse()
                } else {
                    o
                }
            }
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// Runs `plan` over `rows` (columns named `names`, the whole table).
pub(crate) fn run(plan: &LogicalPlan, names: &[String], rows: &[Row]) -> R<Vec<Row>> {
    // WHERE
    let mut kept: Vec<&Row> = Vec::new();
    for r in rows {
        let env = Env {
            names,
            row: r,
            subst: &[],
        };
        let keep = match &plan.filter {
            Some(f) => truthy(&eval(f, &env, plan)?),
            None => true,
        };
        if keep {
            kept.push(r);
        }
    }
    // Each "unit" is what later clauses evaluate against: a row, or a group's values.
    struct Unit<'a> {
        row: &'a Row,
        subst: Vec<(Expr, V)>,
    }
    let empty: Row = Vec::new();
    let mut units: Vec<Unit<'_>> = Vec::new();
    if plan.is_aggregate() {
        let mut groups: Vec<(Vec<V>, Vec<&Row>)> = Vec::new();
        for r in &kept {
            let env = Env {
                names,
                row: r,
                subst: &[],
            };
            let key: Vec<V> = plan
                .group_by
                .iter()
                .map(|g| eval(g, &env, plan))
                .collect::<R<_>>()?;
            match groups
                .iter_mut()
                .find(|(k, _)| k.iter().zip(&key).all(|(a, b)| same(a, b)))
            {
                Some((_, members)) => members.push(r),
                None => groups.push((key, vec![r])),
            }
        }
        if plan.group_by.is_empty() && groups.is_empty() {
            groups.push((vec![], vec![]));
        }
        for (key, members) in groups {
            let mut subst: Vec<(Expr, V)> = plan.group_by.iter().cloned().zip(key).collect();
            for a in &plan.aggregates {
                subst.push((a.clone(), aggregate(a, &members, names, plan)?));
            }
            units.push(Unit { row: &empty, subst });
        }
        if let Some(h) = &plan.having {
            let mut out = Vec::new();
            for u in units {
                let env = Env {
                    names,
                    row: u.row,
                    subst: &u.subst,
                };
                if truthy(&eval(h, &env, plan)?) {
                    out.push(u);
                }
            }
            units = out;
        }
    } else {
        units = kept
            .into_iter()
            .map(|r| Unit {
                row: r,
                subst: vec![],
            })
            .collect();
    }
    let project = |u: &Unit<'_>| -> R<Row> {
        let env = Env {
            names,
            row: u.row,
            subst: &u.subst,
        };
        plan.projection
            .iter()
            .map(|c| eval(&c.expr, &env, plan))
            .collect()
    };
    let page = |n: usize| -> (usize, usize) {
        let start = usize::try_from(plan.offset).unwrap_or(usize::MAX).min(n);
        let end = match plan.limit {
            Some(l) => start
                .saturating_add(usize::try_from(l).unwrap_or(usize::MAX))
                .min(n),
            None => n,
        };
        (start, end)
    };
    if plan.distinct {
        let mut out: Vec<Row> = Vec::new();
        for u in &units {
            let r = project(u)?;
            if !out
                .iter()
                .any(|o| o.iter().zip(&r).all(|(a, b)| same(a, b)))
            {
                out.push(r);
            }
        }
        // Sort keys are select items.
        let mut keyed: Vec<(Vec<V>, Row)> = out
            .into_iter()
            .map(|r| {
                let subst: Vec<(Expr, V)> = plan
                    .projection
                    .iter()
                    .map(|c| c.expr.clone())
                    .zip(r.iter().cloned())
                    .collect();
                let env = Env {
                    names,
                    row: &empty,
                    subst: &subst,
                };
                let k = plan
                    .order_by
                    .iter()
                    .map(|k| eval(&k.expr, &env, plan))
                    .collect::<R<Vec<V>>>()?;
                Ok((k, r))
            })
            .collect::<R<_>>()?;
        keyed.sort_by(|a, b| sort_cmp(&a.0, &b.0, plan));
        let (s, e) = page(keyed.len());
        return Ok(keyed.drain(s..e).map(|(_, r)| r).collect());
    }
    let mut keyed: Vec<(Vec<V>, Unit<'_>)> = Vec::new();
    for u in units {
        let env = Env {
            names,
            row: u.row,
            subst: &u.subst,
        };
        let k = plan
            .order_by
            .iter()
            .map(|k| eval(&k.expr, &env, plan))
            .collect::<R<Vec<V>>>()?;
        keyed.push((k, u));
    }
    keyed.sort_by(|a, b| sort_cmp(&a.0, &b.0, plan));
    let (s, e) = page(keyed.len());
    keyed[s..e].iter().map(|(_, u)| project(u)).collect()
}

/// Equality for test results: floats within 1e-9 relative (NaN equals NaN).
pub(crate) fn approx_eq(a: &V, b: &V) -> bool {
    match (a, b) {
        (V::Float(x), V::Float(y)) => {
            (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs())
        }
        (V::Null, V::Null) => true,
        (V::Int(x), V::Int(y)) => x == y,
        (V::Bool(x), V::Bool(y)) => x == y,
        (V::Str(x), V::Str(y)) => x == y,
        (V::Ts(x), V::Ts(y)) => x == y,
        (V::Date(x), V::Date(y)) => x == y,
        _ => false,
    }
}
