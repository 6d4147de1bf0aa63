//! An analyzer rule that keeps DuckDB's answers where DataFusion's differ.
//!
//! [`DuckDbSemantics`] runs before DataFusion's type coercion (so whatever it rewrites is
//! coerced like any other expression) and keeps each rewritten expression's name (so
//! `sum(a) / count(*)` is still called that in the output and in the nodes above):
//!
//! - `/` of two exact numbers (integers or decimals) is a `DOUBLE` in DuckDB (`7 / 2` is
//!   3.5, `l_extendedprice / 2` is a double); DataFusion truncates integers and keeps
//!   decimals. Both operands are cast to `Float64`.
//! - `avg` of a decimal is a `DOUBLE` in DuckDB; DataFusion keeps a decimal at a scale of
//!   its own. The argument is cast to `Float64`.
//! - `CAST(x AS <integer>)` rounds in DuckDB (floats half to even, decimals half away
//!   from zero); Arrow's cast truncates. The operand is rounded first by
//!   [`RoundForCast`].
//! - Integer `+`, `-` and `*` fail on overflow in DuckDB; DataFusion wraps (silently
//!   wrong answers). They become [`CheckedIntegerOp`] calls, Arrow's checked kernels.
//! - `sum` of integers never overflows in DuckDB (a `HUGEINT`); DataFusion's wraps. The
//!   argument is cast to `DECIMAL(38,0)` (128-bit, exact): the sum is a `DECIMAL(38,0)`.
//! - A float meeting a decimal (`close > 450.5`, where `450.5` is a decimal literal;
//!   `coalesce(f, 0.5)`, `CASE`, `IN`, `BETWEEN`) is a `DOUBLE` in DuckDB; DataFusion
//!   casts the float to `DECIMAL(30,15)`, which fails on NaN, infinities and values
//!   past 10^15, and costs a decimal conversion per row. The decimal side is cast to
//!   `Float64`; so is a decimal column of a `UNION` whose other inputs give a float.
//! - Date text (`DATE ' 2024-1-5'`, `CAST('2024/01/05' AS DATE)`, `day = '2024-1-5'`) is
//!   read by the workspace's one date parser ([`ringscan_values::date::parse_date`], the
//!   one that types hive directories), which takes DuckDB's forms; Arrow's cast refuses
//!   spaces, `/` and short years. Text it does not read is left to DataFusion's cast.

use std::sync::Arc;

use arrow_arith::numeric;
use arrow_array::cast::AsArray;
use arrow_array::types::{Decimal128Type, Float32Type, Float64Type};
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{exec_err, DFSchema, DataFusionError, Result, ScalarValue};
use datafusion::logical_expr::expr::{ScalarFunction, WindowFunctionDefinition};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::type_coercion::binary::BinaryTypeCoercer;
use datafusion::logical_expr::{
    AggregateUDF, BinaryExpr, Cast, ColumnarValue, Expr, ExprSchemable, LogicalPlan, Operator,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TryCast, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use super::decimal_avg::{decimal_avg, is_decimal_avg};

/// DuckDB's division, `avg` and integer casts (see the module documentation).
#[derive(Debug)]
pub(crate) struct DuckDbSemantics {
    round: Arc<ScalarUDF>,
    add: Arc<ScalarUDF>,
    sub: Arc<ScalarUDF>,
    mul: Arc<ScalarUDF>,
    avg: Arc<AggregateUDF>,
}

impl Default for DuckDbSemantics {
    fn default() -> Self {
        let checked = |op| Arc::new(ScalarUDF::new_from_impl(CheckedIntegerOp::new(op)));
        Self {
            round: Arc::new(ScalarUDF::new_from_impl(RoundForCast::default())),
            add: checked(Operator::Plus),
            sub: checked(Operator::Minus),
            mul: checked(Operator::Multiply),
            avg: decimal_avg(),
        }
    }
}

impl AnalyzerRule for DuckDbSemantics {
    fn name(&self) -> &str {
        "ringscan_duckdb_semantics"
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| {
            let node = match double_union(node)? {
                Transformed {
                    data,
                    transformed: true,
                    ..
                } => return Ok(Transformed::yes(data)),
                t => t.data,
            };
            let mut schema = DFSchema::empty();
            for input in node.inputs() {
                schema.merge(input.schema());
            }
            let names = NamePreserver::new(&node);
            let rewritten = node.map_expressions(|expr| {
                let name = names.save(&expr);
                expr.transform_up(|e| self.rewrite(e, &schema))
                    .map(|t| t.update_data(|e| name.restore(e)))
            })?;
            if rewritten.transformed {
                rewritten.map_data(|node| node.recompute_schema())
            } else {
                Ok(rewritten)
            }
        })
        .map(|t| t.data)
    }
}

impl DuckDbSemantics {
    fn rewrite(&self, e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
        let type_of = |x: &Expr| x.get_type(schema).ok();
        match e {
            Expr::BinaryExpr(BinaryExpr {
                left,
                op: Operator::Divide,
                right,
            }) if exact_number(type_of(&left)) && exact_number(type_of(&right)) => {
                Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr {
                    left: Box::new(as_double(*left)),
                    op: Operator::Divide,
                    right: Box::new(as_double(*right)),
                })))
            }
            Expr::BinaryExpr(BinaryExpr { left, op, right })
                if matches!(op, Operator::Plus | Operator::Minus)
                    && (at_scale_of(&left, type_of(&right)).is_some()
                        || at_scale_of(&right, type_of(&left)).is_some()) =>
            {
                let (left, right) = match at_scale_of(&left, type_of(&right)) {
                    Some(l) => (l, *right),
                    None => {
                        let r = at_scale_of(&right, type_of(&left));
                        (*left, r.unwrap_or(*right))
                    }
                };
                Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr {
                    left: Box::new(left),
                    op,
                    right: Box::new(right),
                })))
            }
            Expr::BinaryExpr(BinaryExpr { left, op, right })
                if matches!(op, Operator::Plus | Operator::Minus | Operator::Multiply)
                    && is_integer(type_of(&left))
                    && is_integer(type_of(&right)) =>
            {
                let udf = match op {
                    Operator::Plus => &self.add,
                    Operator::Minus => &self.sub,
                    _ => &self.mul,
                };
                Ok(Transformed::yes(Expr::ScalarFunction(
                    ScalarFunction::new_udf(Arc::clone(udf), vec![*left, *right]),
                )))
            }
            Expr::BinaryExpr(BinaryExpr { left, op, right })
                if !matches!(op, Operator::And | Operator::Or)
                    && mixes_float_and_decimal(&[type_of(&left), type_of(&right)]) =>
            {
                Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr {
                    left: Box::new(decimal_as_double(*left, &type_of)),
                    op,
                    right: Box::new(decimal_as_double(*right, &type_of)),
                })))
            }
            Expr::Between(mut b)
                if mixes_float_and_decimal(&[
                    type_of(&b.expr),
                    type_of(&b.low),
                    type_of(&b.high),
                ]) =>
            {
                b.expr = Box::new(decimal_as_double(*b.expr, &type_of));
                b.low = Box::new(decimal_as_double(*b.low, &type_of));
                b.high = Box::new(decimal_as_double(*b.high, &type_of));
                Ok(Transformed::yes(Expr::Between(b)))
            }
            Expr::InList(mut l)
                if mixes_float_and_decimal(
                    &std::iter::once(&*l.expr)
                        .chain(&l.list)
                        .map(&type_of)
                        .collect::<Vec<_>>(),
                ) =>
            {
                l.expr = Box::new(decimal_as_double(*l.expr, &type_of));
                l.list = decimals_as_double(l.list, &type_of);
                Ok(Transformed::yes(Expr::InList(l)))
            }
            Expr::Case(mut c)
                if mixes_float_and_decimal(
                    &c.when_then_expr
                        .iter()
                        .map(|(_, then)| &**then)
                        .chain(c.else_expr.as_deref())
                        .map(&type_of)
                        .collect::<Vec<_>>(),
                ) =>
            {
                c.when_then_expr = c
                    .when_then_expr
                    .into_iter()
                    .map(|(when, then)| (when, Box::new(decimal_as_double(*then, &type_of))))
                    .collect();
                c.else_expr = c
                    .else_expr
                    .map(|e| Box::new(decimal_as_double(*e, &type_of)));
                Ok(Transformed::yes(Expr::Case(c)))
            }
            Expr::ScalarFunction(mut f)
                if matches!(
                    f.func.name(),
                    "coalesce" | "nullif" | "greatest" | "least" | "nvl" | "ifnull"
                ) && mixes_float_and_decimal(
                    &f.args.iter().map(&type_of).collect::<Vec<_>>(),
                ) =>
            {
                f.args = decimals_as_double(f.args, &type_of);
                Ok(Transformed::yes(Expr::ScalarFunction(f)))
            }
            Expr::AggregateFunction(mut agg)
                if agg.func.name() == "avg"
                    && !agg.params.distinct
                    && !is_decimal_avg(&agg.func)
                    && matches!(
                        agg.params.args.as_slice(),
                        [arg] if matches!(type_of(arg), Some(DataType::Decimal128(..)))
                    ) =>
            {
                agg.func = Arc::clone(&self.avg);
                Ok(Transformed::yes(Expr::AggregateFunction(agg)))
            }
            Expr::AggregateFunction(mut agg) => {
                match aggregate_argument(agg.func.name(), &agg.params.args, &type_of) {
                    Some(arg) => {
                        agg.params.args = vec![arg];
                        Ok(Transformed::yes(Expr::AggregateFunction(agg)))
                    }
                    None => Ok(Transformed::no(Expr::AggregateFunction(agg))),
                }
            }
            Expr::WindowFunction(mut w) => {
                let arg = match &w.fun {
                    WindowFunctionDefinition::AggregateUDF(f) => {
                        aggregate_argument(f.name(), &w.params.args, &type_of)
                    }
                    WindowFunctionDefinition::WindowUDF(_) => None,
                };
                match arg {
                    Some(arg) => {
                        w.params.args = vec![arg];
                        Ok(Transformed::yes(Expr::WindowFunction(w)))
                    }
                    None => Ok(Transformed::no(Expr::WindowFunction(w))),
                }
            }
            Expr::Cast(Cast { expr, field }) if *field.data_type() == DataType::Date32 => {
                match date_literal(&expr) {
                    Some(day) => Ok(Transformed::yes(day)),
                    None => Ok(Transformed::no(Expr::Cast(Cast { expr, field }))),
                }
            }
            Expr::BinaryExpr(BinaryExpr { left, op, right })
                if matches!(
                    op,
                    Operator::Eq
                        | Operator::NotEq
                        | Operator::Lt
                        | Operator::LtEq
                        | Operator::Gt
                        | Operator::GtEq
                        | Operator::IsDistinctFrom
                        | Operator::IsNotDistinctFrom
                ) && ((type_of(&left) == Some(DataType::Date32)
                    && date_literal(&right).is_some())
                    || (type_of(&right) == Some(DataType::Date32)
                        && date_literal(&left).is_some())) =>
            {
                let left = date_literal(&left).unwrap_or(*left);
                let right = date_literal(&right).unwrap_or(*right);
                Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr {
                    left: Box::new(left),
                    op,
                    right: Box::new(right),
                })))
            }
            Expr::Cast(Cast { expr, field })
                if field.data_type().is_integer() && rounds(type_of(&expr)) =>
            {
                Ok(Transformed::yes(Expr::Cast(Cast {
                    expr: Box::new(self.rounded(*expr)),
                    field,
                })))
            }
            Expr::TryCast(TryCast { expr, field })
                if field.data_type().is_integer() && rounds(type_of(&expr)) =>
            {
                Ok(Transformed::yes(Expr::TryCast(TryCast {
                    expr: Box::new(self.rounded(*expr)),
                    field,
                })))
            }
            other => Ok(Transformed::no(other)),
        }
    }

    fn rounded(&self, e: Expr) -> Expr {
        Expr::ScalarFunction(ScalarFunction::new_udf(Arc::clone(&self.round), vec![e]))
    }
}

/// `e`, an integer or decimal literal, as a decimal literal at the scale of `other`
/// (a `DECIMAL128` of a larger scale) with as many digits before the point as the
/// coercion would give it (20 for a `BIGINT`): `1 - l_discount` then subtracts at one
/// scale, where Arrow otherwise multiplies both sides by a power of ten per row
/// (checked 128-bit multiplies: a sixth of the executor's time on TPC-H Q1). The
/// result's type is the same either way.
fn at_scale_of(e: &Expr, other: Option<DataType>) -> Option<Expr> {
    let Some(DataType::Decimal128(_, to)) = other else {
        return None;
    };
    let Expr::Literal(value, _) = e else {
        return None;
    };
    let (unscaled, precision, scale) = match value {
        ScalarValue::Int64(Some(v)) => (i128::from(*v), 20u8, 0i8),
        ScalarValue::Decimal128(Some(v), p, s) => (*v, *p, *s),
        _ => return None,
    };
    let up = to.checked_sub(scale).filter(|&d| d > 0)?;
    let precision = precision.checked_add(u8::try_from(up).ok()?)?;
    if precision > 38 {
        return None;
    }
    let unscaled = unscaled.checked_mul(10i128.checked_pow(u32::try_from(up).ok()?)?)?;
    Some(Expr::Literal(
        ScalarValue::Decimal128(Some(unscaled), precision, to),
        None,
    ))
}

/// The argument that gives aggregate `name` over `args` DuckDB's answer, where it
/// needs another: integer sums exact in 128 bits, averages of decimals as doubles.
fn aggregate_argument(
    name: &str,
    args: &[Expr],
    type_of: &dyn Fn(&Expr) -> Option<DataType>,
) -> Option<Expr> {
    let [arg] = args else {
        return None;
    };
    let to = match name {
        "sum" if is_integer(type_of(arg)) => DataType::Decimal128(38, 0),
        "avg" if is_decimal(type_of(arg)) => DataType::Float64,
        _ => return None,
    };
    Some(Expr::Cast(Cast::new(Box::new(arg.clone()), to)))
}

/// A `UNION` whose column is a float in one input and a decimal in another, with the
/// decimal inputs' column cast to `Float64` (DuckDB's type; DataFusion's would be a
/// decimal that NaN and large floats do not fit).
fn double_union(node: LogicalPlan) -> Result<Transformed<LogicalPlan>> {
    use datafusion::logical_expr::{LogicalPlanBuilder, Union};
    let LogicalPlan::Union(union) = &node else {
        return Ok(Transformed::no(node));
    };
    let width = union.schema.fields().len();
    let to_double: Vec<bool> = (0..width)
        .map(|i| {
            let types: Vec<Option<DataType>> = union
                .inputs
                .iter()
                .map(|input| {
                    input
                        .schema()
                        .fields()
                        .get(i)
                        .map(|f| f.data_type().clone())
                })
                .collect();
            mixes_float_and_decimal(&types)
        })
        .collect();
    if !to_double.contains(&true) {
        return Ok(Transformed::no(node));
    }
    let inputs = union
        .inputs
        .iter()
        .map(|input| {
            let exprs: Vec<Expr> = input
                .schema()
                .iter()
                .zip(&to_double)
                .map(|((qualifier, field), &cast)| {
                    let column = Expr::Column(datafusion::common::Column::new(
                        qualifier.cloned(),
                        field.name(),
                    ));
                    if cast && is_decimal(Some(field.data_type().clone())) {
                        as_double(column).alias(field.name())
                    } else {
                        column
                    }
                })
                .collect();
            LogicalPlanBuilder::from(input.as_ref().clone())
                .project(exprs)?
                .build()
                .map(Arc::new)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Transformed::yes(LogicalPlan::Union(
        Union::try_new_with_loose_types(inputs)?,
    )))
}

/// Whether a float and a decimal meet among `types`.
fn mixes_float_and_decimal(types: &[Option<DataType>]) -> bool {
    let float = types.iter().any(|t| {
        matches!(
            t,
            Some(DataType::Float16 | DataType::Float32 | DataType::Float64)
        )
    });
    float && types.iter().any(|t| is_decimal(t.clone()))
}

/// `e` as a `DOUBLE` when it is a decimal, else `e`.
fn decimal_as_double(e: Expr, type_of: &dyn Fn(&Expr) -> Option<DataType>) -> Expr {
    if is_decimal(type_of(&e)) {
        as_double(e)
    } else {
        e
    }
}

/// Each of `exprs` as a `DOUBLE` where it is a decimal.
fn decimals_as_double(exprs: Vec<Expr>, type_of: &dyn Fn(&Expr) -> Option<DataType>) -> Vec<Expr> {
    exprs
        .into_iter()
        .map(|e| decimal_as_double(e, type_of))
        .collect()
}

fn is_integer(t: Option<DataType>) -> bool {
    t.is_some_and(|t| t.is_integer())
}

fn exact_number(t: Option<DataType>) -> bool {
    t.is_some_and(|t| t.is_integer() || is_decimal(Some(t)))
}

fn is_decimal(t: Option<DataType>) -> bool {
    matches!(
        t,
        Some(DataType::Decimal32(..) | DataType::Decimal64(..) | DataType::Decimal128(..))
    )
}

fn rounds(t: Option<DataType>) -> bool {
    matches!(
        t,
        Some(DataType::Float32 | DataType::Float64 | DataType::Decimal128(..))
    )
}

/// A text literal that [`parse_date`](ringscan_values::date::parse_date) reads, as a
/// `Date32` literal.
fn date_literal(e: &Expr) -> Option<Expr> {
    match e {
        Expr::Literal(
            ScalarValue::Utf8(Some(s))
            | ScalarValue::Utf8View(Some(s))
            | ScalarValue::LargeUtf8(Some(s)),
            _,
        ) => {
            let day = ringscan_values::date::parse_date(s)?;
            Some(Expr::Literal(ScalarValue::Date32(Some(day)), None))
        }
        _ => None,
    }
}

fn as_double(e: Expr) -> Expr {
    Expr::Cast(Cast::new(Box::new(e), DataType::Float64))
}

/// Integer `+`, `-` or `*` that fails on overflow (Arrow's checked kernels), typed and
/// coerced as DataFusion's operator is.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct CheckedIntegerOp {
    op: Operator,
    signature: Signature,
}

impl CheckedIntegerOp {
    fn new(op: Operator) -> Self {
        Self {
            op,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for CheckedIntegerOp {
    fn name(&self) -> &str {
        match self.op {
            Operator::Plus => "ringscan_checked_add",
            Operator::Minus => "ringscan_checked_sub",
            _ => "ringscan_checked_mul",
        }
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let [l, r] = arg_types else {
            return exec_err!("{} takes two arguments", self.name());
        };
        let (l, r) = BinaryTypeCoercer::new(l, &self.op, r).get_input_types()?;
        Ok(vec![l, r])
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        let [l, r] = arg_types else {
            return exec_err!("{} takes two arguments", self.name());
        };
        BinaryTypeCoercer::new(l, &self.op, r).get_result_type()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [l, r] = args.args.as_slice() else {
            return exec_err!("{} takes two arguments", self.name());
        };
        let kernel = match self.op {
            Operator::Plus => numeric::add,
            Operator::Minus => numeric::sub,
            _ => numeric::mul,
        };
        let result = match (l, r) {
            (ColumnarValue::Array(a), ColumnarValue::Array(b)) => kernel(a, b),
            (ColumnarValue::Array(a), ColumnarValue::Scalar(b)) => kernel(a, &b.to_scalar()?),
            (ColumnarValue::Scalar(a), ColumnarValue::Array(b)) => kernel(&a.to_scalar()?, b),
            (ColumnarValue::Scalar(a), ColumnarValue::Scalar(b)) => {
                let out = kernel(&a.to_scalar()?, &b.to_scalar()?)
                    .map_err(|e| DataFusionError::ArrowError(Box::new(e), None))?;
                return Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?));
            }
        };
        Ok(ColumnarValue::Array(result.map_err(|e| {
            DataFusionError::ArrowError(Box::new(e), None)
        })?))
    }
}

/// Rounds a number to an integral value of its own type, as DuckDB does before casting
/// to an integer: floats half to even, decimals half away from zero.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct RoundForCast {
    signature: Signature,
}

impl Default for RoundForCast {
    fn default() -> Self {
        Self {
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for RoundForCast {
    fn name(&self) -> &str {
        "ringscan_round_for_cast"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        match arg_types {
            [t] => Ok(t.clone()),
            _ => exec_err!("ringscan_round_for_cast takes one argument"),
        }
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [arg] = args.args.as_slice() else {
            return exec_err!("ringscan_round_for_cast takes one argument");
        };
        match arg {
            ColumnarValue::Array(a) => Ok(ColumnarValue::Array(round_array(a)?)),
            ColumnarValue::Scalar(s) => {
                let rounded = round_array(&s.to_array()?)?;
                Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(
                    &rounded, 0,
                )?))
            }
        }
    }
}

fn round_array(a: &ArrayRef) -> Result<ArrayRef> {
    Ok(match a.data_type() {
        DataType::Float64 => Arc::new(
            a.as_primitive::<Float64Type>()
                .unary::<_, Float64Type>(f64::round_ties_even),
        ),
        DataType::Float32 => Arc::new(
            a.as_primitive::<Float32Type>()
                .unary::<_, Float32Type>(f32::round_ties_even),
        ),
        DataType::Decimal128(precision, scale) => {
            let unit = 10i128.checked_pow(u32::try_from(*scale).unwrap_or(0));
            let Some(unit) = unit.filter(|_| *scale > 0) else {
                return Ok(Arc::clone(a));
            };
            let rounded = a
                .as_primitive::<Decimal128Type>()
                .unary::<_, Decimal128Type>(|v| round_half_away(v, unit));
            Arc::new(rounded.with_precision_and_scale(*precision, *scale)?)
        }
        _ => Arc::clone(a),
    })
}

/// `v` (a decimal's unscaled value) rounded half away from zero to a multiple of `unit`.
fn round_half_away(v: i128, unit: i128) -> i128 {
    let whole = v / unit;
    let rest = v % unit;
    let carry = if rest.unsigned_abs() * 2 >= unit.unsigned_abs() {
        rest.signum()
    } else {
        0
    };
    whole.saturating_add(carry).saturating_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Decimal128Array, Float64Array};

    #[test]
    fn floats_round_half_to_even() {
        let a: ArrayRef = Arc::new(Float64Array::from(vec![
            Some(2.5),
            Some(3.5),
            Some(-2.5),
            Some(0.49),
            None,
        ]));
        let r = round_array(&a).unwrap();
        let r = r.as_primitive::<Float64Type>();
        assert_eq!(r.value(0), 2.0);
        assert_eq!(r.value(1), 4.0);
        assert_eq!(r.value(2), -2.0);
        assert_eq!(r.value(3), 0.0);
        assert!(r.is_null(4));
    }

    #[test]
    fn decimals_round_half_away_from_zero() {
        let a: ArrayRef = Arc::new(
            Decimal128Array::from(vec![25, 35, -25, -24, 149, 0])
                .with_precision_and_scale(5, 1)
                .unwrap(),
        );
        let r = round_array(&a).unwrap();
        let r = r.as_primitive::<Decimal128Type>();
        let got: Vec<i128> = (0..r.len()).map(|i| r.value(i)).collect();
        assert_eq!(got, vec![30, 40, -30, -20, 150, 0]);
        assert_eq!(r.data_type(), &DataType::Decimal128(5, 1));
    }
}
