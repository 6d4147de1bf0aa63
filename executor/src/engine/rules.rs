//! Analyzer rules that keep DuckDB's answers where DataFusion's differ.
//!
//! - [`IntegerDivision`]: `/` of two integers is a double in DuckDB (`7 / 2` is 3.5);
//!   DataFusion truncates. The rule casts both operands to `Float64` after type
//!   coercion, keeping each rewritten expression's name (so `sum(a) / count(*)` is still
//!   called that in the output and in the plan nodes above).

use arrow_schema::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, Result};
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{BinaryExpr, Cast, Expr, ExprSchemable, LogicalPlan, Operator};
use datafusion::optimizer::AnalyzerRule;

/// `int / int` → `CAST(int AS DOUBLE) / CAST(int AS DOUBLE)`, as DuckDB computes it.
#[derive(Debug, Default)]
pub(crate) struct IntegerDivision;

impl AnalyzerRule for IntegerDivision {
    fn name(&self) -> &str {
        "ringscan_integer_division"
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
                expr.transform_up(|e| divide_as_double(e, &schema))
                    .map(|t| t.update_data(|e| name.restore(e)))
            })?
            .map_data(|node| node.recompute_schema())
        })
        .map(|t| t.data)
    }
}

fn divide_as_double(e: Expr, schema: &DFSchema) -> Result<Transformed<Expr>> {
    let Expr::BinaryExpr(BinaryExpr {
        left,
        op: Operator::Divide,
        right,
    }) = e
    else {
        return Ok(Transformed::no(e));
    };
    let integer = |side: &Expr| side.get_type(schema).is_ok_and(|t| t.is_integer());
    if !(integer(&left) && integer(&right)) {
        return Ok(Transformed::no(Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Divide,
            right,
        })));
    }
    let double = |side: Box<Expr>| Box::new(Expr::Cast(Cast::new(side, DataType::Float64)));
    Ok(Transformed::yes(Expr::BinaryExpr(BinaryExpr {
        left: double(left),
        op: Operator::Divide,
        right: double(right),
    })))
}
