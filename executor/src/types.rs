//! Type rules of the subset, following DuckDB where it matters for results.
//!
//! Deviations, on purpose: integer arithmetic (`+ - *`) is always `Int64` (DuckDB keeps
//! the wider operand type and widens on overflow only for literals), or `UInt64` when
//! both sides are unsigned (or one is a non-negative integer literal); `sum` of integers
//! is `Int64` where DuckDB returns `HUGEINT`: the executor accumulates in `i128` and
//! fails with an overflow error naming the call when the sum does not fit `i64`, never
//! wrapping (values within `i64` are the same as DuckDB's).

use arrow_schema::{DataType, TimeUnit};

use crate::error::PlanError;
use crate::expr::{BinaryOp, Expr, ScalarValue};
use crate::temporal;

pub(crate) fn is_integer(t: &DataType) -> bool {
    t.is_integer()
}

pub(crate) fn is_unsigned(t: &DataType) -> bool {
    t.is_unsigned_integer()
}

pub(crate) fn is_numeric(t: &DataType) -> bool {
    t.is_numeric()
}

pub(crate) fn is_string(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

pub(crate) fn is_temporal(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Date32 | DataType::Date64 | DataType::Timestamp(..)
    )
}

fn is_interval(t: &DataType) -> bool {
    matches!(t, DataType::Interval(_))
}

fn timestamp_like(t: &DataType) -> DataType {
    match t {
        DataType::Timestamp(_, tz) => DataType::Timestamp(TimeUnit::Microsecond, tz.clone()),
        _ => DataType::Timestamp(TimeUnit::Microsecond, None),
    }
}

/// True for an integer literal `>= 0`: it adopts an unsigned partner's type.
fn nonneg_int_literal(e: &Expr) -> bool {
    matches!(
        e,
        Expr::Literal(ScalarValue::Int64(v)) if *v >= 0
    ) || matches!(e, Expr::Literal(ScalarValue::UInt64(_)))
}

/// Result type of `left op right` for `+ - * /`.
pub(crate) fn arithmetic(
    op: BinaryOp,
    (l, lt): (&Expr, &DataType),
    (r, rt): (&Expr, &DataType),
) -> Result<DataType, PlanError> {
    use DataType as D;
    let mismatch = || PlanError::TypeMismatch {
        op: op.as_str().into(),
        left: lt.clone(),
        right: rt.clone(),
    };
    match (lt, rt) {
        (D::Null, D::Null) => Ok(if op == BinaryOp::Divide {
            D::Float64
        } else {
            D::Null
        }),
        (D::Null, t) | (t, D::Null) if is_numeric(t) && op == BinaryOp::Divide => Ok(D::Float64),
        (D::Null, t) | (t, D::Null) if is_numeric(t) || is_temporal(t) || is_interval(t) => {
            Ok(t.clone())
        }
        (a, b) if is_numeric(a) && is_numeric(b) => Ok(
            if op == BinaryOp::Divide || !is_integer(a) || !is_integer(b) {
                D::Float64
            } else if (is_unsigned(a) || nonneg_int_literal(l))
                && (is_unsigned(b) || nonneg_int_literal(r))
                && (is_unsigned(a) || is_unsigned(b))
            {
                D::UInt64
            } else {
                D::Int64
            },
        ),
        (a, b)
            if is_temporal(a)
                && is_interval(b)
                && matches!(op, BinaryOp::Plus | BinaryOp::Minus) =>
        {
            Ok(timestamp_like(a))
        }
        (a, b) if is_interval(a) && is_temporal(b) && op == BinaryOp::Plus => Ok(timestamp_like(b)),
        (D::Date32, b) if is_integer(b) && matches!(op, BinaryOp::Plus | BinaryOp::Minus) => {
            Ok(D::Date32)
        }
        (D::Date32, D::Date32) if op == BinaryOp::Minus => Ok(D::Int64),
        (a, b)
            if is_interval(a)
                && is_interval(b)
                && matches!(op, BinaryOp::Plus | BinaryOp::Minus) =>
        {
            Ok(a.clone())
        }
        _ => Err(mismatch()),
    }
}

/// Checks that `left` and `right` can be compared (`=`, `<`, BETWEEN, IN...).
pub(crate) fn comparable(op: &str, lt: &DataType, rt: &DataType) -> Result<(), PlanError> {
    let ok = matches!(lt, DataType::Null)
        || matches!(rt, DataType::Null)
        || (is_numeric(lt) && is_numeric(rt))
        || (is_string(lt) && is_string(rt))
        || (is_temporal(lt) && is_temporal(rt))
        || (is_interval(lt) && is_interval(rt))
        || (lt == &DataType::Boolean && rt == &DataType::Boolean);
    if ok {
        Ok(())
    } else {
        Err(PlanError::TypeMismatch {
            op: op.into(),
            left: lt.clone(),
            right: rt.clone(),
        })
    }
}

/// A string literal compared with a date or timestamp becomes a literal of that type
/// (DuckDB's implicit cast), so `ts > '2024-01-02'` types and pushes down.
pub(crate) fn coerce_literal(e: Expr, target: &DataType) -> Result<Expr, PlanError> {
    let Expr::Literal(ScalarValue::Utf8(s)) = &e else {
        return Ok(e);
    };
    let bad = |kind: &str, reason: String| PlanError::InvalidLiteral {
        kind: kind.into(),
        value: s.clone(),
        reason,
    };
    Ok(match target {
        DataType::Date32 => Expr::Literal(ScalarValue::Date32(
            temporal::parse_date(s).map_err(|r| bad("DATE", r))?,
        )),
        DataType::Timestamp(..) => Expr::Literal(ScalarValue::TimestampMicros(
            temporal::parse_timestamp(s).map_err(|r| bad("TIMESTAMP", r))?,
        )),
        _ => e,
    })
}

/// Constant-folds `timestamp ± interval` and `date ± interval` literals (so they push).
pub(crate) fn fold_temporal(left: &Expr, op: BinaryOp, right: &Expr) -> Option<ScalarValue> {
    let sign = match op {
        BinaryOp::Plus => 1,
        BinaryOp::Minus => -1,
        _ => return None,
    };
    let (Expr::Literal(l), Expr::Literal(ScalarValue::Interval { months, micros })) = (left, right)
    else {
        return None;
    };
    let ts = match l {
        ScalarValue::TimestampMicros(t) => *t,
        ScalarValue::Date32(d) => i64::from(*d) * 86_400_000_000,
        _ => return None,
    };
    temporal::add_interval(ts, *months, *micros, sign).map(ScalarValue::TimestampMicros)
}

/// Whether a CAST from `from` to `to` is allowed.
pub(crate) fn castable(from: &DataType, to: &DataType) -> bool {
    let scalar =
        |t: &DataType| is_numeric(t) || is_string(t) || is_temporal(t) || t == &DataType::Boolean;
    from == &DataType::Null || (scalar(from) && scalar(to))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col() -> Expr {
        Expr::Column("c".into())
    }

    #[test]
    fn duckdb_result_types() {
        let i = DataType::Int64;
        let f = DataType::Float64;
        let u = DataType::UInt64;
        let c = col();
        let two = Expr::Literal(ScalarValue::Int64(2));
        assert_eq!(
            arithmetic(BinaryOp::Plus, (&c, &i), (&c, &DataType::Int32)).unwrap(),
            i
        );
        assert_eq!(arithmetic(BinaryOp::Divide, (&c, &i), (&c, &i)).unwrap(), f);
        assert_eq!(
            arithmetic(BinaryOp::Multiply, (&c, &f), (&c, &u)).unwrap(),
            f
        );
        assert_eq!(
            arithmetic(BinaryOp::Multiply, (&c, &u), (&two, &i)).unwrap(),
            u
        );
        let err = arithmetic(BinaryOp::Plus, (&c, &DataType::Utf8), (&c, &f)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "type mismatch: cannot apply '+' to Utf8 and Float64"
        );
    }
}
