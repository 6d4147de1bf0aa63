//! Binding: checks an unbound [`SelectStatement`] against the table's schema and
//! produces a typed [`LogicalPlan`].

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef};
use ringscan_ipc::msg::ScanSource;

use crate::error::PlanError;
use crate::expr::{AggFunc, BinaryOp, Expr, ScalarValue};
use crate::sql::{SelectItem, SelectStatement};
use crate::types;

/// One output column.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputColumn {
    /// The bound expression (over table columns, and aggregates in grouped queries).
    pub expr: Expr,
    /// Output name (alias, or the expression's text).
    pub name: String,
    /// Result type.
    pub data_type: DataType,
}

/// One sort key, an expression over the same inputs as the select list.
#[derive(Debug, Clone, PartialEq)]
pub struct SortKey {
    /// The key.
    pub expr: Expr,
    /// `DESC`.
    pub descending: bool,
    /// NULLs sort first (DuckDB's default is NULLS LAST in both directions).
    pub nulls_first: bool,
}

/// A bound, type-checked query of the subset.
///
/// Evaluation order: scan `source` → `filter` → (if [`LogicalPlan::is_aggregate`])
/// group by `group_by` computing `aggregates` → `having` → `projection` → `distinct`
/// → `order_by` → `offset`/`limit`. After aggregation, expressions refer to group keys
/// and aggregates by structural equality with entries of `group_by` / `aggregates`.
#[derive(Debug, Clone, PartialEq)]
pub struct LogicalPlan {
    /// `EXPLAIN` was asked for.
    pub explain: bool,
    /// The table or files.
    pub source: ScanSource,
    /// The scanned table's schema.
    pub table_schema: SchemaRef,
    /// `WHERE`, bound and boolean.
    pub filter: Option<Expr>,
    /// `GROUP BY` keys (positions and aliases replaced by their expressions).
    pub group_by: Vec<Expr>,
    /// Distinct aggregate calls used anywhere in the query.
    pub aggregates: Vec<Expr>,
    /// `HAVING`.
    pub having: Option<Expr>,
    /// The select list.
    pub projection: Vec<OutputColumn>,
    /// `SELECT DISTINCT`.
    pub distinct: bool,
    /// `ORDER BY` keys.
    pub order_by: Vec<SortKey>,
    /// `LIMIT`.
    pub limit: Option<u64>,
    /// `OFFSET` (0 when absent).
    pub offset: u64,
    /// The result's schema.
    pub output_schema: SchemaRef,
}

impl LogicalPlan {
    /// True when the query aggregates (GROUP BY or an aggregate call).
    pub fn is_aggregate(&self) -> bool {
        !self.group_by.is_empty() || !self.aggregates.is_empty()
    }
}

struct Binder<'a> {
    schema: &'a Schema,
    qualifiers: Vec<String>,
}

#[derive(Clone, Copy)]
struct Scope {
    clause: &'static str,
    aggregates_allowed: bool,
    in_aggregate: bool,
}

impl Scope {
    fn plain(clause: &'static str) -> Self {
        Self {
            clause,
            aggregates_allowed: false,
            in_aggregate: false,
        }
    }
    fn with_aggregates(clause: &'static str) -> Self {
        Self {
            aggregates_allowed: true,
            ..Self::plain(clause)
        }
    }
}

/// Binds `stmt` against `schema`.
pub fn bind(stmt: &SelectStatement, schema: SchemaRef) -> Result<LogicalPlan, PlanError> {
    let mut qualifiers = vec![stmt.source_name.to_ascii_lowercase()];
    qualifiers.extend(stmt.source_alias.iter().map(|a| a.to_ascii_lowercase()));
    let b = Binder {
        schema: &schema,
        qualifiers,
    };
    let filter = match &stmt.filter {
        Some(f) => Some(b.bind_predicate(f, Scope::plain("WHERE clause"))?),
        None => None,
    };
    let mut projection = Vec::new();
    for item in &stmt.items {
        match item {
            SelectItem::Wildcard => {
                for f in schema.fields() {
                    projection.push(OutputColumn {
                        expr: Expr::Column(f.name().clone()),
                        name: f.name().clone(),
                        data_type: f.data_type().clone(),
                    });
                }
            }
            SelectItem::Expr { expr, alias, text } => {
                let (expr, data_type) = b.bind(expr, Scope::with_aggregates("SELECT list"))?;
                projection.push(OutputColumn {
                    expr,
                    name: alias.clone().unwrap_or_else(|| text.clone()),
                    data_type,
                });
            }
        }
    }
    let mut group_by = Vec::new();
    for key in &stmt.group_by {
        let bound = match b.select_reference(key, &projection, &stmt.items, "GROUP BY")? {
            Some(e) => e,
            None => b.bind(key, Scope::plain("GROUP BY clause"))?.0,
        };
        if let Some(agg) = first_aggregate(&bound) {
            return Err(PlanError::MisplacedAggregate {
                function: agg.into(),
                clause: "GROUP BY clause".into(),
            });
        }
        group_by.push(bound);
    }
    let having = match &stmt.having {
        Some(h) => Some(b.bind_predicate(h, Scope::with_aggregates("HAVING clause"))?),
        None => None,
    };
    let mut order_by = Vec::new();
    for item in &stmt.order_by {
        let expr = match b.select_reference(&item.expr, &projection, &stmt.items, "ORDER BY")? {
            Some(e) => e,
            None => {
                b.bind(&item.expr, Scope::with_aggregates("ORDER BY clause"))?
                    .0
            }
        };
        order_by.push(SortKey {
            expr,
            descending: item.descending,
            nulls_first: item.nulls_first.unwrap_or(false),
        });
    }
    let mut aggregates: Vec<Expr> = Vec::new();
    let all = projection
        .iter()
        .map(|c| &c.expr)
        .chain(having.iter())
        .chain(order_by.iter().map(|k| &k.expr));
    for e in all {
        collect_aggregates(e, &mut aggregates);
    }
    if !group_by.is_empty() || !aggregates.is_empty() {
        for c in &projection {
            check_grouped(&c.expr, &group_by, "SELECT list")?;
        }
        if let Some(h) = &having {
            check_grouped(h, &group_by, "HAVING clause")?;
        }
        for k in &order_by {
            check_grouped(&k.expr, &group_by, "ORDER BY clause")?;
        }
    } else if having.is_some() {
        return Err(PlanError::unsupported(
            "HAVING without GROUP BY or aggregates",
        ));
    }
    if stmt.distinct {
        for k in &order_by {
            if !projection.iter().any(|c| c.expr == k.expr) {
                return Err(PlanError::DistinctOrderBy {
                    expr: k.expr.to_string(),
                });
            }
        }
    }
    let fields: Vec<Field> = projection
        .iter()
        .map(|c| Field::new(&c.name, c.data_type.clone(), b.nullable(&c.expr)))
        .collect();
    Ok(LogicalPlan {
        explain: stmt.explain,
        source: stmt.source.clone(),
        table_schema: schema.clone(),
        filter,
        group_by,
        aggregates,
        having,
        projection,
        distinct: stmt.distinct,
        order_by,
        limit: stmt.limit,
        offset: stmt.offset.unwrap_or(0),
        output_schema: Arc::new(Schema::new(fields)),
    })
}

fn first_aggregate(e: &Expr) -> Option<&'static str> {
    let mut found = None;
    e.walk(&mut |n| {
        if let (None, Expr::Aggregate { func, .. }) = (found, n) {
            found = Some(func.name());
        }
    });
    found
}

fn collect_aggregates(e: &Expr, out: &mut Vec<Expr>) {
    if let Expr::Aggregate { .. } = e {
        if !out.contains(e) {
            out.push(e.clone());
        }
        return;
    }
    for c in e.children() {
        collect_aggregates(c, out);
    }
}

/// Every column outside an aggregate must be (inside) a group key.
fn check_grouped(e: &Expr, group_by: &[Expr], clause: &str) -> Result<(), PlanError> {
    if group_by.contains(e) {
        return Ok(());
    }
    match e {
        Expr::Aggregate { .. } => Ok(()),
        Expr::Column(c) => Err(PlanError::Grouping {
            column: c.clone(),
            clause: clause.into(),
        }),
        other => other
            .children()
            .into_iter()
            .try_for_each(|c| check_grouped(c, group_by, clause)),
    }
}

/// Levenshtein distance, case-insensitive.
fn edit_distance(a: &str, b: &str) -> usize {
    ringscan_ipc::names::edit_distance(&a.to_lowercase(), &b.to_lowercase())
}

/// The nearest name within a third of the name's length (at least 2 edits).
pub(crate) fn nearest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<String> {
    let limit = (name.chars().count() / 3).max(2);
    candidates
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.to_owned())
}

impl Binder<'_> {
    fn resolve_column(&self, written: &str) -> Result<&Field, PlanError> {
        let name = match written.split_once('.') {
            Some((q, c)) if self.schema.field_with_name(written).is_err() => {
                if !self.qualifiers.contains(&q.to_ascii_lowercase()) {
                    return Err(PlanError::UnknownTable { name: q.into() });
                }
                c
            }
            _ => written,
        };
        if let Ok(f) = self.schema.field_with_name(name) {
            return Ok(f);
        }
        let mut folded = self
            .schema
            .fields()
            .iter()
            .filter(|f| f.name().eq_ignore_ascii_case(name));
        match (folded.next(), folded.next()) {
            (Some(f), None) => Ok(f),
            _ => Err(PlanError::UnknownColumn {
                name: name.into(),
                suggestion: nearest(name, self.schema.fields().iter().map(|f| f.name().as_str())),
            }),
        }
    }

    /// A GROUP BY / ORDER BY key naming a select item: a position or an alias.
    fn select_reference(
        &self,
        key: &Expr,
        projection: &[OutputColumn],
        items: &[SelectItem],
        clause: &str,
    ) -> Result<Option<Expr>, PlanError> {
        match key {
            Expr::Literal(ScalarValue::Int64(pos)) => {
                let idx = usize::try_from(*pos)
                    .ok()
                    .filter(|p| (1..=projection.len()).contains(p));
                match idx {
                    Some(p) => Ok(Some(projection[p - 1].expr.clone())),
                    None => Err(PlanError::BadPosition {
                        clause: clause.into(),
                        position: u64::try_from(*pos).unwrap_or(0),
                        len: projection.len(),
                    }),
                }
            }
            // An alias; in GROUP BY a table column of the same name wins (as in DuckDB).
            Expr::Column(name) if clause == "ORDER BY" || self.resolve_column(name).is_err() => {
                let has_wildcard = items.iter().any(|i| matches!(i, SelectItem::Wildcard));
                let aliased = items.iter().filter_map(|i| match i {
                    SelectItem::Expr { alias: Some(a), .. } => Some(a),
                    _ => None,
                });
                let hit = aliased.clone().any(|a| a == name);
                if !hit || has_wildcard && clause == "GROUP BY" {
                    return Ok(None);
                }
                Ok(projection
                    .iter()
                    .find(|c| &c.name == name)
                    .map(|c| c.expr.clone()))
            }
            _ => Ok(None),
        }
    }

    fn bind_predicate(&self, e: &Expr, scope: Scope) -> Result<Expr, PlanError> {
        let (bound, t) = self.bind(e, scope)?;
        expect_bool(&t, scope.clause)?;
        Ok(bound)
    }

    /// Resolves columns, checks types, coerces literals; returns the expression and its type.
    fn bind(&self, e: &Expr, scope: Scope) -> Result<(Expr, DataType), PlanError> {
        Ok(match e {
            Expr::Column(name) => {
                let f = self.resolve_column(name)?;
                (Expr::Column(f.name().clone()), f.data_type().clone())
            }
            Expr::Literal(v) => (e.clone(), v.data_type()),
            Expr::Binary { left, op, right } => {
                let (l, lt) = self.bind(left, scope)?;
                let (r, rt) = self.bind(right, scope)?;
                match op {
                    BinaryOp::And | BinaryOp::Or => {
                        expect_bool(&lt, op.as_str())?;
                        expect_bool(&rt, op.as_str())?;
                        (Expr::binary(l, *op, r), DataType::Boolean)
                    }
                    op if op.is_comparison() => {
                        let l = types::coerce_literal(l, &rt)?;
                        let r = types::coerce_literal(r, &lt)?;
                        let (lt2, rt2) = (self.type_of(&l, &lt), self.type_of(&r, &rt));
                        types::comparable(op.as_str(), &lt2, &rt2)?;
                        (Expr::binary(l, *op, r), DataType::Boolean)
                    }
                    op => {
                        let t = types::arithmetic(*op, (&l, &lt), (&r, &rt))?;
                        match types::fold_temporal(&l, *op, &r) {
                            Some(v) => (Expr::Literal(v), t),
                            None => (Expr::binary(l, *op, r), t),
                        }
                    }
                }
            }
            Expr::Not(inner) => {
                let (i, t) = self.bind(inner, scope)?;
                expect_bool(&t, "NOT")?;
                (Expr::Not(Box::new(i)), DataType::Boolean)
            }
            Expr::Negative(inner) => {
                let (i, t) = self.bind(inner, scope)?;
                let t = match t {
                    t if types::is_unsigned(&t) => DataType::Int64,
                    t if types::is_numeric(&t) || matches!(t, DataType::Interval(_)) => t,
                    t => {
                        return Err(PlanError::InvalidType {
                            context: "unary -".into(),
                            expected: "a number".into(),
                            got: t,
                        })
                    }
                };
                (Expr::Negative(Box::new(i)), t)
            }
            Expr::Between {
                expr,
                low,
                high,
                negated,
            } => {
                let (x, xt) = self.bind(expr, scope)?;
                let (lo, lot) = self.bind(low, scope)?;
                let (hi, hit) = self.bind(high, scope)?;
                let lo = types::coerce_literal(lo, &xt)?;
                let hi = types::coerce_literal(hi, &xt)?;
                types::comparable("BETWEEN", &xt, &self.type_of(&lo, &lot))?;
                types::comparable("BETWEEN", &xt, &self.type_of(&hi, &hit))?;
                let e = Expr::Between {
                    expr: Box::new(x),
                    low: Box::new(lo),
                    high: Box::new(hi),
                    negated: *negated,
                };
                (e, DataType::Boolean)
            }
            Expr::InList {
                expr,
                list,
                negated,
            } => {
                let (x, xt) = self.bind(expr, scope)?;
                let mut items = Vec::with_capacity(list.len());
                for item in list {
                    let (i, it) = self.bind(item, scope)?;
                    let i = types::coerce_literal(i, &xt)?;
                    types::comparable("IN", &xt, &self.type_of(&i, &it))?;
                    items.push(i);
                }
                let e = Expr::InList {
                    expr: Box::new(x),
                    list: items,
                    negated: *negated,
                };
                (e, DataType::Boolean)
            }
            Expr::IsNull { expr, negated } => {
                let (x, _) = self.bind(expr, scope)?;
                let e = Expr::IsNull {
                    expr: Box::new(x),
                    negated: *negated,
                };
                (e, DataType::Boolean)
            }
            Expr::Cast { expr, to } => {
                let (x, t) = self.bind(expr, scope)?;
                if !types::castable(&t, to) {
                    return Err(PlanError::InvalidType {
                        context: format!("CAST to {to}"),
                        expected: "a number, string, boolean, date or timestamp".into(),
                        got: t,
                    });
                }
                let folded = types::coerce_literal(x.clone(), to)?;
                if folded != x || t == *to {
                    (folded, to.clone())
                } else {
                    (
                        Expr::Cast {
                            expr: Box::new(x),
                            to: to.clone(),
                        },
                        to.clone(),
                    )
                }
            }
            Expr::DateTrunc { unit, expr } => {
                let (x, t) = self.bind(expr, scope)?;
                let x = types::coerce_literal(
                    x,
                    &DataType::Timestamp(arrow_schema::TimeUnit::Microsecond, None),
                )?;
                let t = match t {
                    DataType::Utf8 => {
                        DataType::Timestamp(arrow_schema::TimeUnit::Microsecond, None)
                    }
                    t if types::is_temporal(&t) => t,
                    t => {
                        return Err(PlanError::InvalidType {
                            context: "date_trunc".into(),
                            expected: "a date or timestamp".into(),
                            got: t,
                        })
                    }
                };
                (
                    Expr::DateTrunc {
                        unit: *unit,
                        expr: Box::new(x),
                    },
                    t,
                )
            }
            Expr::Aggregate {
                func,
                arg,
                distinct,
            } => {
                if !scope.aggregates_allowed || scope.in_aggregate {
                    let clause = if scope.in_aggregate {
                        "an aggregate argument"
                    } else {
                        scope.clause
                    };
                    return Err(PlanError::MisplacedAggregate {
                        function: func.name().into(),
                        clause: clause.into(),
                    });
                }
                let inner = Scope {
                    in_aggregate: true,
                    ..scope
                };
                let (arg, at) = match arg {
                    Some(a) => {
                        let (a, t) = self.bind(a, inner)?;
                        (Some(Box::new(a)), t)
                    }
                    None => (None, DataType::Null),
                };
                let t = aggregate_type(*func, &at)?;
                (
                    Expr::Aggregate {
                        func: *func,
                        arg,
                        distinct: *distinct,
                    },
                    t,
                )
            }
        })
    }

    /// The type of an expression that [`types::coerce_literal`] may have rewritten.
    fn type_of(&self, e: &Expr, before: &DataType) -> DataType {
        match e {
            Expr::Literal(v) => v.data_type(),
            _ => before.clone(),
        }
    }

    fn nullable(&self, e: &Expr) -> bool {
        match e {
            Expr::Column(c) => self
                .schema
                .field_with_name(c)
                .map_or(true, |f| f.is_nullable()),
            Expr::Literal(v) => *v == ScalarValue::Null,
            Expr::Aggregate {
                func: AggFunc::Count,
                ..
            } => false,
            Expr::Aggregate { .. } => true,
            Expr::Binary {
                op: BinaryOp::Divide,
                ..
            } => true,
            other => other.children().into_iter().any(|c| self.nullable(c)),
        }
    }
}

fn expect_bool(t: &DataType, context: &str) -> Result<(), PlanError> {
    match t {
        DataType::Boolean | DataType::Null => Ok(()),
        other => Err(PlanError::InvalidType {
            context: context.into(),
            expected: "a boolean".into(),
            got: other.clone(),
        }),
    }
}

fn aggregate_type(func: AggFunc, arg: &DataType) -> Result<DataType, PlanError> {
    let invalid = |expected: &str| PlanError::InvalidType {
        context: func.name().into(),
        expected: expected.into(),
        got: arg.clone(),
    };
    Ok(match func {
        AggFunc::Count => DataType::Int64,
        AggFunc::Sum if types::is_integer(arg) => DataType::Int64,
        AggFunc::Sum if types::is_numeric(arg) || arg == &DataType::Null => DataType::Float64,
        AggFunc::Sum => return Err(invalid("a number")),
        AggFunc::Avg if types::is_numeric(arg) || arg == &DataType::Null => DataType::Float64,
        AggFunc::Avg => return Err(invalid("a number")),
        AggFunc::Min | AggFunc::Max => arg.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_name_by_edit_distance() {
        assert_eq!(edit_distance("clsoe", "close"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
        let names = ["symbol", "close", "volume"];
        assert_eq!(
            nearest("clsoe", names.into_iter()).as_deref(),
            Some("close")
        );
        assert_eq!(
            nearest("VOLUME", names.into_iter()).as_deref(),
            Some("volume")
        );
        assert_eq!(nearest("zzzzzz", names.into_iter()), None);
    }
}
