//! An analyzer rule, after type coercion: local times made instants as DuckDB makes them.
//!
//! A cast to `TIMESTAMPTZ` from something without a zone — a `TIMESTAMP`, a `DATE`, a
//! string without an offset — reads it as wall-clock time in the session zone. Arrow's
//! casts differ from DuckDB's in three ways: a date becomes midnight UTC (DuckDB: local
//! midnight), and a wall time that happens twice or never (the nights the clocks
//! change) becomes NULL or an error (DuckDB: the later instant; the offset before the
//! change). Every such cast, written or added by coercion (`ts >= '2024-03-31'`,
//! `ts = naive_ts`), becomes a [`ToInstant`] call, which resolves local times with
//! [`crate::zone::local_offset`]. On a literal it is folded to a literal before the
//! filter reaches the daemon, so it prunes like any other. The other way,
//! `instant::TIMESTAMP` is the zone's wall time in DuckDB and UTC's in Arrow: it
//! becomes a [`ToLocal`] call.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, ArrayRef, Int64Array};
use arrow_schema::{DataType, TimeUnit};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{exec_err, DFSchema, DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{
    Cast, ColumnarValue, Expr, ExprSchemable, LogicalPlan, ScalarFunctionArgs, ScalarUDF,
    ScalarUDFImpl, Signature, TryCast, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

/// See the module documentation.
#[derive(Debug, Default)]
pub(crate) struct LocalTimes;

impl AnalyzerRule for LocalTimes {
    fn name(&self) -> &str {
        "ringscan_local_times"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| {
            let mut schema = DFSchema::empty();
            for input in node.inputs() {
                schema.merge(input.schema());
            }
            let names = NamePreserver::new(&node);
            node.map_expressions(|expr| {
                let name = names.save(&expr);
                expr.transform_up(|e| rewrite(e, &schema))
                    .map(|t| t.update_data(|e| name.restore(e)))
            })
        })
        .map(|t| t.data)
    }
}

/// Whether a cast from `from` to `to` reads local time in a zone.
fn reads_local_time(from: Option<DataType>, to: &DataType) -> bool {
    let local = matches!(
        from,
        Some(
            DataType::Date32
                | DataType::Date64
                | DataType::Timestamp(_, None)
                | DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
        )
    );
    local && matches!(to, DataType::Timestamp(_, Some(_)))
}

/// Whether a cast from `from` to `to` makes an instant a wall time (`ts::TIMESTAMP`):
/// DuckDB's is the session zone's wall clock, Arrow's UTC's.
fn to_wall_clock(from: Option<DataType>, to: &DataType) -> bool {
    matches!(from, Some(DataType::Timestamp(_, Some(_))))
        && matches!(to, DataType::Timestamp(_, None))
}

fn rewrite(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let type_of = |x: &Expr| x.get_type(schema).ok();
    let call = |expr: Box<Expr>, to: DataType, safe: bool| {
        let udf = ScalarUDF::new_from_impl(ToInstant::new(to, safe));
        Expr::ScalarFunction(ScalarFunction::new_udf(Arc::new(udf), vec![*expr]))
    };
    Ok(match e {
        Expr::Cast(Cast { expr, field }) if to_wall_clock(type_of(&expr), field.data_type()) => {
            let udf = ScalarUDF::new_from_impl(ToLocal::new(field.data_type().clone()));
            Transformed::yes(Expr::ScalarFunction(ScalarFunction::new_udf(
                Arc::new(udf),
                vec![*expr],
            )))
        }
        Expr::Cast(Cast { expr, field }) if reads_local_time(type_of(&expr), field.data_type()) => {
            Transformed::yes(call(expr, field.data_type().clone(), false))
        }
        Expr::TryCast(TryCast { expr, field })
            if reads_local_time(type_of(&expr), field.data_type()) =>
        {
            Transformed::yes(call(expr, field.data_type().clone(), true))
        }
        other => Transformed::no(other),
    })
}

/// `CAST(x AS TIMESTAMPTZ)` of a local time: see the module documentation. `safe`: a
/// string that is no timestamp is NULL (`TRY_CAST`), else an error.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct ToInstant {
    signature: Signature,
    /// `Timestamp(unit, Some(zone))`.
    to: DataType,
    safe: bool,
}

impl ToInstant {
    fn new(to: DataType, safe: bool) -> Self {
        Self {
            signature: Signature::any(1, Volatility::Immutable),
            to,
            safe,
        }
    }
}

impl ScalarUDFImpl for ToInstant {
    fn name(&self) -> &str {
        "ringscan_to_instant"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(self.to.clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [arg] = args.args.as_slice() else {
            return exec_err!("ringscan_to_instant takes one argument");
        };
        match arg {
            ColumnarValue::Array(a) => Ok(ColumnarValue::Array(self.convert(a)?)),
            ColumnarValue::Scalar(s) => {
                let out = self.convert(&s.to_array()?)?;
                Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
            }
        }
    }
}

impl ToInstant {
    fn convert(&self, a: &ArrayRef) -> Result<ArrayRef> {
        let DataType::Timestamp(unit, Some(tz)) = &self.to else {
            return exec_err!("ringscan_to_instant makes a timestamp with a zone");
        };
        let zone = crate::zone::parse_time_zone(tz)
            .map_err(|e| DataFusionError::Execution(e.to_string()))?;
        let per_second: i64 = match unit {
            TimeUnit::Second => 1,
            TimeUnit::Millisecond => 1_000,
            TimeUnit::Microsecond => 1_000_000,
            TimeUnit::Nanosecond => 1_000_000_000,
        };
        // Local time `v` (in `unit`) as the instant DuckDB reads it.
        let instant = |v: i64| -> Option<i64> {
            let local_us = match unit {
                TimeUnit::Nanosecond => Some(v.div_euclid(1_000)),
                _ => v.checked_mul(1_000_000 / per_second),
            }?;
            let offset = crate::zone::local_offset(&zone, local_us)?;
            v.checked_sub(i64::from(offset).checked_mul(per_second)?)
        };
        let values: Int64Array = match a.data_type() {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                let strings = arrow_cast::cast(a, &DataType::Utf8)?;
                let mut out = Vec::with_capacity(strings.len());
                for s in strings.as_string::<i32>() {
                    let v = match s {
                        None => None,
                        Some(s) => match self.parse(s, &zone, *unit, &instant) {
                            Some(v) => Some(v),
                            None if self.safe => None,
                            None => {
                                return exec_err!(
                                    "cannot read {s:?} as a timestamp with time zone {tz}"
                                )
                            }
                        },
                    };
                    out.push(v);
                }
                Int64Array::from(out)
            }
            _ => {
                let naive = arrow_cast::cast(a, &DataType::Timestamp(*unit, None))?;
                let locals = arrow_cast::cast(&naive, &DataType::Int64)?;
                locals.as_primitive::<Int64Type>().unary_opt(instant)
            }
        };
        Ok(arrow_cast::cast(&values, &self.to)?)
    }

    /// A string with an offset (`+05:30`, `Z`) is that instant; one without is local
    /// time in `zone`.
    fn parse(
        &self,
        s: &str,
        zone: &arrow_array::timezone::Tz,
        unit: TimeUnit,
        instant: &dyn Fn(i64) -> Option<i64>,
    ) -> Option<i64> {
        use arrow_cast::parse::string_to_datetime;
        let in_unit = |t: chrono::DateTime<chrono::Utc>| match unit {
            TimeUnit::Second => Some(t.timestamp()),
            TimeUnit::Millisecond => Some(t.timestamp_millis()),
            TimeUnit::Microsecond => Some(t.timestamp_micros()),
            TimeUnit::Nanosecond => t.timestamp_nanos_opt(),
        };
        // Arrow reads offsets, and local times that happen exactly once.
        if let Ok(t) = string_to_datetime(zone, s) {
            return in_unit(t.to_utc());
        }
        // The rest is a wall time read as if in UTC, resolved in `zone`.
        let wall = string_to_datetime(&chrono::Utc, s).ok()?;
        instant(in_unit(wall)?)
    }
}

/// `CAST(instant AS TIMESTAMP)`: the wall time in the instant's zone (the session's, as
/// tables and literals show it), as DuckDB gives it.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct ToLocal {
    signature: Signature,
    /// `Timestamp(unit, None)`.
    to: DataType,
}

impl ToLocal {
    fn new(to: DataType) -> Self {
        Self {
            signature: Signature::any(1, Volatility::Immutable),
            to,
        }
    }
}

impl ScalarUDFImpl for ToLocal {
    fn name(&self) -> &str {
        "ringscan_to_local"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(self.to.clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [arg] = args.args.as_slice() else {
            return exec_err!("ringscan_to_local takes one argument");
        };
        match arg {
            ColumnarValue::Array(a) => Ok(ColumnarValue::Array(self.convert(a)?)),
            ColumnarValue::Scalar(s) => {
                let out = self.convert(&s.to_array()?)?;
                Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
            }
        }
    }
}

impl ToLocal {
    fn convert(&self, a: &ArrayRef) -> Result<ArrayRef> {
        let (DataType::Timestamp(_, Some(tz)), DataType::Timestamp(unit, None)) =
            (a.data_type(), &self.to)
        else {
            return Ok(arrow_cast::cast(a, &self.to)?);
        };
        let zone = crate::zone::parse_time_zone(tz)
            .map_err(|e| DataFusionError::Execution(e.to_string()))?;
        let per_second: i64 = match unit {
            TimeUnit::Second => 1,
            TimeUnit::Millisecond => 1_000,
            TimeUnit::Microsecond => 1_000_000,
            TimeUnit::Nanosecond => 1_000_000_000,
        };
        // The instants in the target unit, then each moved by its zone's offset.
        let instants = arrow_cast::cast(a, &DataType::Timestamp(*unit, Some(tz.clone())))?;
        let values = arrow_cast::cast(&instants, &DataType::Int64)?;
        let local: Int64Array = values.as_primitive::<Int64Type>().unary_opt(|v| {
            let us = match unit {
                TimeUnit::Nanosecond => Some(v.div_euclid(1_000)),
                _ => v.checked_mul(1_000_000 / per_second),
            }?;
            let offset = crate::zone::offset_at(&zone, us);
            v.checked_add(i64::from(offset).checked_mul(per_second)?)
        });
        Ok(arrow_cast::cast(&local, &self.to)?)
    }
}
