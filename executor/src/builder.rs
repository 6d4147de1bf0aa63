//! A typed query builder that produces the same [`SelectStatement`] (and so the same
//! [`LogicalPlan`](crate::LogicalPlan)) as the equivalent SQL.
//!
//! ```
//! use std::sync::Arc;
//! use arrow_schema::{DataType, Field, Schema};
//! use ringscan_executor::builder::{col, lit, Query};
//! use ringscan_executor::{plan_sql, MemoryCatalog};
//!
//! let mut catalog = MemoryCatalog::default();
//! catalog.insert("ohlcv", Arc::new(Schema::new(vec![
//!     Field::new("symbol", DataType::Utf8, false),
//!     Field::new("close", DataType::Float64, false),
//! ])));
//! let q = Query::from("ohlcv")
//!     .filter(col("close").gt(lit(450)))
//!     .select([col("symbol")])
//!     .order_by_desc(col("close"))
//!     .limit(10);
//! let sql = "SELECT symbol FROM ohlcv WHERE close > 450 ORDER BY close DESC LIMIT 10";
//! assert_eq!(q.plan(&catalog).unwrap(), plan_sql(sql, &catalog).unwrap());
//! ```
//!
//! Output column names: an unaliased item is named by the expression's text as the
//! builder renders it (`(close * volume)`), which differs from SQL text written without
//! parentheses; use [`Query::select_as`] for stable names.

use ringscan_ipc::msg::ScanSource;

use crate::error::PlanError;
use crate::expr::{AggFunc, BinaryOp, Expr, ScalarValue, TruncUnit};
use crate::pushdown::PhysicalPlan;
use crate::sql::{OrderItem, SelectItem, SelectStatement};
use crate::{bind, physical_plan, Catalog};

/// A column of the table.
pub fn col(name: &str) -> Expr {
    Expr::Column(name.to_owned())
}

/// A constant.
pub fn lit(v: impl Into<ScalarValue>) -> Expr {
    Expr::Literal(v.into())
}

/// `NOT e`.
pub fn not(e: Expr) -> Expr {
    Expr::Not(Box::new(e))
}

/// `date_trunc('unit', e)`.
pub fn date_trunc(unit: TruncUnit, e: Expr) -> Expr {
    Expr::DateTrunc {
        unit,
        expr: Box::new(e),
    }
}

fn agg(func: AggFunc, arg: Option<Expr>, distinct: bool) -> Expr {
    Expr::Aggregate {
        func,
        arg: arg.map(Box::new),
        distinct,
    }
}

/// `count(*)`.
pub fn count_star() -> Expr {
    agg(AggFunc::Count, None, false)
}

/// `count(e)`.
pub fn count(e: Expr) -> Expr {
    agg(AggFunc::Count, Some(e), false)
}

/// `count(DISTINCT e)`.
pub fn count_distinct(e: Expr) -> Expr {
    agg(AggFunc::Count, Some(e), true)
}

/// `sum(e)`.
pub fn sum(e: Expr) -> Expr {
    agg(AggFunc::Sum, Some(e), false)
}

/// `avg(e)`.
pub fn avg(e: Expr) -> Expr {
    agg(AggFunc::Avg, Some(e), false)
}

/// `min(e)`.
pub fn min(e: Expr) -> Expr {
    agg(AggFunc::Min, Some(e), false)
}

/// `max(e)`.
pub fn max(e: Expr) -> Expr {
    agg(AggFunc::Max, Some(e), false)
}

impl From<i64> for ScalarValue {
    fn from(v: i64) -> Self {
        Self::Int64(v)
    }
}

impl From<f64> for ScalarValue {
    fn from(v: f64) -> Self {
        Self::Float64(v)
    }
}

impl From<bool> for ScalarValue {
    fn from(v: bool) -> Self {
        Self::Bool(v)
    }
}

impl From<&str> for ScalarValue {
    fn from(v: &str) -> Self {
        Self::Utf8(v.to_owned())
    }
}

impl Expr {
    fn bin(self, op: BinaryOp, other: Expr) -> Expr {
        Expr::binary(self, op, other)
    }
    /// `self = other`.
    pub fn eq(self, other: Expr) -> Expr {
        self.bin(BinaryOp::Eq, other)
    }
    /// `self <> other`.
    pub fn not_eq(self, other: Expr) -> Expr {
        self.bin(BinaryOp::NotEq, other)
    }
    /// `self < other`.
    pub fn lt(self, other: Expr) -> Expr {
        self.bin(BinaryOp::Lt, other)
    }
    /// `self <= other`.
    pub fn lt_eq(self, other: Expr) -> Expr {
        self.bin(BinaryOp::LtEq, other)
    }
    /// `self > other`.
    pub fn gt(self, other: Expr) -> Expr {
        self.bin(BinaryOp::Gt, other)
    }
    /// `self >= other`.
    pub fn gt_eq(self, other: Expr) -> Expr {
        self.bin(BinaryOp::GtEq, other)
    }
    /// `self AND other`.
    pub fn and(self, other: Expr) -> Expr {
        self.bin(BinaryOp::And, other)
    }
    /// `self OR other`.
    pub fn or(self, other: Expr) -> Expr {
        self.bin(BinaryOp::Or, other)
    }
    /// `self + other`.
    pub fn plus(self, other: Expr) -> Expr {
        self.bin(BinaryOp::Plus, other)
    }
    /// `self - other`.
    pub fn minus(self, other: Expr) -> Expr {
        self.bin(BinaryOp::Minus, other)
    }
    /// `self * other`.
    pub fn times(self, other: Expr) -> Expr {
        self.bin(BinaryOp::Multiply, other)
    }
    /// `self / other`.
    pub fn divide(self, other: Expr) -> Expr {
        self.bin(BinaryOp::Divide, other)
    }
    /// `self IS NULL`.
    pub fn is_null(self) -> Expr {
        Expr::IsNull {
            expr: Box::new(self),
            negated: false,
        }
    }
    /// `self IS NOT NULL`.
    pub fn is_not_null(self) -> Expr {
        Expr::IsNull {
            expr: Box::new(self),
            negated: true,
        }
    }
    /// `self BETWEEN low AND high`.
    pub fn between(self, low: Expr, high: Expr) -> Expr {
        Expr::Between {
            expr: Box::new(self),
            low: Box::new(low),
            high: Box::new(high),
            negated: false,
        }
    }
    /// `self IN (list)`.
    pub fn in_list(self, list: Vec<Expr>) -> Expr {
        Expr::InList {
            expr: Box::new(self),
            list,
            negated: false,
        }
    }
}

/// A query under construction; see the module documentation.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    stmt: SelectStatement,
}

impl Query {
    /// `SELECT * FROM table` (until [`Query::select`] says otherwise).
    #[allow(clippy::should_implement_trait)]
    pub fn from(table: &str) -> Self {
        Self {
            stmt: SelectStatement {
                explain: false,
                distinct: false,
                items: vec![SelectItem::Wildcard],
                source: ScanSource::Table {
                    name: table.to_owned(),
                },
                source_name: table.to_owned(),
                source_alias: None,
                filter: None,
                group_by: vec![],
                having: None,
                order_by: vec![],
                limit: None,
                offset: None,
            },
        }
    }

    fn items(&mut self) -> &mut Vec<SelectItem> {
        if self.stmt.items == [SelectItem::Wildcard] {
            self.stmt.items.clear();
        }
        &mut self.stmt.items
    }

    /// Adds select items, each named by its text.
    pub fn select(mut self, exprs: impl IntoIterator<Item = Expr>) -> Self {
        for e in exprs {
            let text = e.to_string();
            self.items().push(SelectItem::Expr {
                expr: e,
                alias: None,
                text,
            });
        }
        self
    }

    /// Adds `expr AS alias`.
    pub fn select_as(mut self, expr: Expr, alias: &str) -> Self {
        let text = expr.to_string();
        self.items().push(SelectItem::Expr {
            expr,
            alias: Some(alias.to_owned()),
            text,
        });
        self
    }

    /// `WHERE e` (ANDed with an earlier filter).
    pub fn filter(mut self, e: Expr) -> Self {
        self.stmt.filter = Some(match self.stmt.filter.take() {
            Some(f) => f.and(e),
            None => e,
        });
        self
    }

    /// `GROUP BY keys`.
    pub fn group_by(mut self, keys: impl IntoIterator<Item = Expr>) -> Self {
        self.stmt.group_by.extend(keys);
        self
    }

    /// `HAVING e`.
    pub fn having(mut self, e: Expr) -> Self {
        self.stmt.having = Some(e);
        self
    }

    /// `SELECT DISTINCT`.
    pub fn distinct(mut self) -> Self {
        self.stmt.distinct = true;
        self
    }

    fn order(mut self, expr: Expr, descending: bool) -> Self {
        self.stmt.order_by.push(OrderItem {
            expr,
            descending,
            nulls_first: None,
        });
        self
    }

    /// `ORDER BY e ASC` (NULLS LAST).
    pub fn order_by(self, e: Expr) -> Self {
        self.order(e, false)
    }

    /// `ORDER BY e DESC` (NULLS LAST).
    pub fn order_by_desc(self, e: Expr) -> Self {
        self.order(e, true)
    }

    /// `LIMIT n`.
    pub fn limit(mut self, n: u64) -> Self {
        self.stmt.limit = Some(n);
        self
    }

    /// `OFFSET n`.
    pub fn offset(mut self, n: u64) -> Self {
        self.stmt.offset = Some(n);
        self
    }

    /// The unbound statement.
    pub fn statement(&self) -> &SelectStatement {
        &self.stmt
    }

    /// Binds and plans against `catalog`, as [`crate::plan_sql`] does for SQL.
    pub fn plan(&self, catalog: &dyn Catalog) -> Result<PhysicalPlan, PlanError> {
        let schema = catalog
            .schema(&self.stmt.source)
            .ok_or_else(|| PlanError::UnknownTable {
                name: self.stmt.source_name.clone(),
            })?;
        Ok(physical_plan(bind(&self.stmt, schema)?))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_schema::{DataType, Field, Schema};

    use super::*;
    use crate::{plan_sql, MemoryCatalog};

    fn catalog() -> MemoryCatalog {
        let mut c = MemoryCatalog::default();
        c.insert(
            "ohlcv",
            Arc::new(Schema::new(vec![
                Field::new("symbol", DataType::Utf8, false),
                Field::new("close", DataType::Float64, true),
                Field::new("volume", DataType::Int64, true),
            ])),
        );
        c
    }

    fn same(q: Query, sql: &str) {
        let c = catalog();
        assert_eq!(q.plan(&c).unwrap(), plan_sql(sql, &c).unwrap(), "{sql}");
    }

    #[test]
    fn builder_plans_equal_sql_plans() {
        same(
            Query::from("ohlcv")
                .filter(col("close").gt(lit(450)))
                .select([col("symbol")])
                .order_by_desc(col("close"))
                .limit(10),
            "SELECT symbol FROM ohlcv WHERE close > 450 ORDER BY close DESC LIMIT 10",
        );
        let vwap = sum(col("close").times(col("volume"))).divide(sum(col("volume")));
        same(
            Query::from("ohlcv")
                .select([col("symbol")])
                .select_as(vwap.clone(), "vwap")
                .select_as(count_star(), "n")
                .filter(col("volume").gt(lit(0)))
                .filter(col("symbol").in_list(vec![lit("A"), lit("B")]))
                .group_by([col("symbol")])
                .having(count_star().gt(lit(1)))
                .order_by_desc(vwap)
                .limit(5)
                .offset(1),
            "SELECT symbol, sum(close * volume) / sum(volume) AS vwap, count(*) AS n \
             FROM ohlcv WHERE volume > 0 AND symbol IN ('A', 'B') GROUP BY symbol \
             HAVING count(*) > 1 ORDER BY vwap DESC LIMIT 5 OFFSET 1",
        );
        same(
            Query::from("ohlcv")
                .distinct()
                .select([col("symbol")])
                .filter(
                    col("close")
                        .between(lit(1), lit(2))
                        .or(col("volume").is_null()),
                ),
            "SELECT DISTINCT symbol FROM ohlcv WHERE close BETWEEN 1 AND 2 OR volume IS NULL",
        );
        same(Query::from("ohlcv").limit(3), "SELECT * FROM ohlcv LIMIT 3");
        same(
            Query::from("ohlcv").select_as(max(col("close")).minus(min(col("close"))), "range"),
            "SELECT max(close) - min(close) AS range FROM ohlcv",
        );
    }

    #[test]
    fn builder_errors_like_sql() {
        let err = Query::from("ohlcv")
            .select([col("clsoe")])
            .plan(&catalog())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown column 'clsoe'; did you mean 'close'?"
        );
        assert!(Query::from("nope").plan(&catalog()).is_err());
    }
}
