//! Translation of SQL terms (literals, operators, type names, typed strings, intervals,
//! function calls) from `sqlparser`'s AST; the clause-level translation is in `sql`.

use arrow_schema::{DataType, TimeUnit};
use sqlparser::ast;

use crate::error::PlanError;
use crate::expr::{AggFunc, BinaryOp, Expr, ScalarValue, TruncUnit};
use crate::sql::convert_expr;
use crate::temporal;

pub(crate) fn convert_value(v: &ast::Value) -> Result<ScalarValue, PlanError> {
    Ok(match v {
        ast::Value::Number(n, _) => {
            if let Ok(i) = n.parse::<i64>() {
                ScalarValue::Int64(i)
            } else if let Ok(u) = n.parse::<u64>() {
                ScalarValue::UInt64(u)
            } else {
                ScalarValue::Float64(n.parse().map_err(|_| PlanError::InvalidLiteral {
                    kind: "numeric".into(),
                    value: n.clone(),
                    reason: "not a number".into(),
                })?)
            }
        }
        ast::Value::SingleQuotedString(s) => ScalarValue::Utf8(s.clone()),
        ast::Value::Boolean(b) => ScalarValue::Bool(*b),
        ast::Value::Null => ScalarValue::Null,
        other => return Err(PlanError::unsupported(format!("literal {other}"))),
    })
}

pub(crate) fn convert_op(op: &ast::BinaryOperator) -> Result<BinaryOp, PlanError> {
    use ast::BinaryOperator as B;
    Ok(match op {
        B::Plus => BinaryOp::Plus,
        B::Minus => BinaryOp::Minus,
        B::Multiply => BinaryOp::Multiply,
        B::Divide => BinaryOp::Divide,
        B::Eq => BinaryOp::Eq,
        B::NotEq => BinaryOp::NotEq,
        B::Lt => BinaryOp::Lt,
        B::LtEq => BinaryOp::LtEq,
        B::Gt => BinaryOp::Gt,
        B::GtEq => BinaryOp::GtEq,
        B::And => BinaryOp::And,
        B::Or => BinaryOp::Or,
        other => return Err(PlanError::unsupported(format!("operator {other}"))),
    })
}

/// Maps a SQL type name to the Arrow type CAST produces.
pub(crate) fn convert_type(t: &ast::DataType) -> Result<DataType, PlanError> {
    use ast::DataType as T;
    Ok(match t {
        T::Bool | T::Boolean => DataType::Boolean,
        T::TinyInt(_) | T::Int2(_) | T::SmallInt(_) | T::Int(_) | T::Int4(_) | T::Integer(_) => {
            DataType::Int32
        }
        T::Int8(_) | T::BigInt(_) | T::Int64 => DataType::Int64,
        T::UBigInt | T::UInt64 | T::BigIntUnsigned(_) => DataType::UInt64,
        T::Float4 | T::Real => DataType::Float32,
        T::Float(_) | T::Float8 | T::Float64 | T::Double(_) | T::DoublePrecision => {
            DataType::Float64
        }
        T::Varchar(_) | T::Text | T::String(_) => DataType::Utf8,
        T::Date => DataType::Date32,
        T::Timestamp(_, ast::TimezoneInfo::WithTimeZone) => {
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        }
        T::Timestamp(..) => DataType::Timestamp(TimeUnit::Microsecond, None),
        other => return Err(PlanError::unsupported(format!("CAST to {other}"))),
    })
}

fn string_of(v: &ast::ValueWithSpan) -> Option<&str> {
    match &v.value {
        ast::Value::SingleQuotedString(s) => Some(s),
        _ => None,
    }
}

pub(crate) fn convert_typed_string(ts: &ast::TypedString) -> Result<Expr, PlanError> {
    let text = string_of(&ts.value).ok_or_else(|| PlanError::unsupported("typed literal"))?;
    let bad = |kind: &str, reason: String| PlanError::InvalidLiteral {
        kind: kind.into(),
        value: text.to_owned(),
        reason,
    };
    let value = match &ts.data_type {
        ast::DataType::Date => {
            ScalarValue::Date32(temporal::parse_date(text).map_err(|r| bad("DATE", r))?)
        }
        ast::DataType::Timestamp(..) | ast::DataType::Datetime(_) => ScalarValue::TimestampMicros(
            temporal::parse_timestamp(text).map_err(|r| bad("TIMESTAMP", r))?,
        ),
        other => return Err(PlanError::unsupported(format!("{other} literal"))),
    };
    Ok(Expr::Literal(value))
}

pub(crate) fn convert_interval(iv: &ast::Interval) -> Result<Expr, PlanError> {
    if iv.last_field.is_some() || iv.fractional_seconds_precision.is_some() {
        return Err(PlanError::unsupported("INTERVAL ... TO ..."));
    }
    let text = match &*iv.value {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) | ast::Value::Number(s, _) => s.clone(),
            _ => return Err(PlanError::unsupported("non-literal INTERVAL")),
        },
        _ => return Err(PlanError::unsupported("non-literal INTERVAL")),
    };
    let unit = iv.leading_field.as_ref().map(ToString::to_string);
    let (months, micros) = temporal::parse_interval(&text, unit.as_deref()).map_err(|reason| {
        PlanError::InvalidLiteral {
            kind: "INTERVAL".into(),
            value: text.clone(),
            reason,
        }
    })?;
    Ok(Expr::Literal(ScalarValue::Interval { months, micros }))
}

pub(crate) fn convert_function(f: &ast::Function) -> Result<Expr, PlanError> {
    let name = f.name.to_string().to_ascii_lowercase();
    if f.over.is_some() {
        return Err(PlanError::unsupported(format!(
            "window function {name}(...) OVER"
        )));
    }
    if f.filter.is_some() {
        return Err(PlanError::unsupported(format!("FILTER clause on {name}")));
    }
    if !f.within_group.is_empty() || f.null_treatment.is_some() {
        return Err(PlanError::unsupported(format!(
            "WITHIN GROUP / NULLS clause on {name}"
        )));
    }
    let func = match name.as_str() {
        "count" => Some(AggFunc::Count),
        "sum" => Some(AggFunc::Sum),
        "avg" | "mean" => Some(AggFunc::Avg),
        "min" => Some(AggFunc::Min),
        "max" => Some(AggFunc::Max),
        "date_trunc" => None,
        _ => return Err(PlanError::unsupported(format!("function {name}"))),
    };
    let list = match &f.args {
        ast::FunctionArguments::List(list) => list,
        ast::FunctionArguments::None => {
            return Err(PlanError::unsupported(format!("{name} without arguments")))
        }
        ast::FunctionArguments::Subquery(_) => return Err(PlanError::unsupported("subquery")),
    };
    if !list.clauses.is_empty() {
        return Err(PlanError::unsupported(format!(
            "clauses inside {name}(...)"
        )));
    }
    let distinct = matches!(
        list.duplicate_treatment,
        Some(ast::DuplicateTreatment::Distinct)
    );
    let mut args = Vec::with_capacity(list.args.len());
    for a in &list.args {
        args.push(match a {
            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => Some(convert_expr(e)?),
            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard) => None,
            _ => {
                return Err(PlanError::unsupported(format!(
                    "named or qualified argument to {name}"
                )))
            }
        });
    }
    let Some(func) = func else {
        if distinct {
            return Err(PlanError::unsupported("DISTINCT in date_trunc"));
        }
        return match args.as_slice() {
            [Some(Expr::Literal(ScalarValue::Utf8(unit))), Some(e)] => {
                let unit = TruncUnit::parse(unit).ok_or_else(|| PlanError::InvalidLiteral {
                    kind: "date_trunc unit".into(),
                    value: unit.clone(),
                    reason: "expected second, minute, hour, day, week, month, quarter or year"
                        .into(),
                })?;
                Ok(Expr::DateTrunc {
                    unit,
                    expr: Box::new(e.clone()),
                })
            }
            _ => Err(PlanError::unsupported(
                "date_trunc with arguments other than ('<unit>', expr)",
            )),
        };
    };
    let arg = match (func, args.as_slice()) {
        (AggFunc::Count, [None]) if !distinct => None,
        (_, [Some(e)]) => Some(Box::new(e.clone())),
        _ => {
            return Err(PlanError::unsupported(format!(
                "{name} with {} arguments or *",
                args.len()
            )))
        }
    };
    Ok(Expr::Aggregate {
        func,
        arg,
        distinct,
    })
}
