//! SQL text to an unbound [`SelectStatement`]: parses with `sqlparser` (DuckDB dialect)
//! and translates the supported subset to the planner's own [`Expr`], refusing every
//! other construct by name.

use std::path::PathBuf;

use ringscan_ipc::msg::ScanSource;
use sqlparser::ast;
use sqlparser::dialect::DuckDbDialect;
use sqlparser::parser::Parser;

use crate::error::PlanError;
use crate::expr::{Expr, ScalarValue};
use crate::sql_terms::{
    convert_function, convert_interval, convert_op, convert_type, convert_typed_string,
    convert_value,
};

/// One item of the select list, before binding.
#[derive(Debug, Clone, PartialEq)]
pub enum SelectItem {
    /// `*`: every column of the table.
    Wildcard,
    /// An expression with an optional `AS` alias.
    Expr {
        /// The expression.
        expr: Expr,
        /// The alias, if written.
        alias: Option<String>,
        /// The expression as written (the output column name when there is no alias).
        text: String,
    },
}

/// One `ORDER BY` key, before binding.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderItem {
    /// The key (an expression, a select alias, or a 1-based position literal).
    pub expr: Expr,
    /// `DESC`.
    pub descending: bool,
    /// `NULLS FIRST` / `NULLS LAST`, when written.
    pub nulls_first: Option<bool>,
}

/// A parsed statement of the supported subset, not yet checked against a schema.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectStatement {
    /// `EXPLAIN SELECT ...`.
    pub explain: bool,
    /// `SELECT DISTINCT`.
    pub distinct: bool,
    /// Select list.
    pub items: Vec<SelectItem>,
    /// The table or files.
    pub source: ScanSource,
    /// The table name or path as written (for messages).
    pub source_name: String,
    /// The table alias, if any (accepted as a column qualifier).
    pub source_alias: Option<String>,
    /// `WHERE`.
    pub filter: Option<Expr>,
    /// `GROUP BY` keys (expressions, aliases or positions).
    pub group_by: Vec<Expr>,
    /// `HAVING`.
    pub having: Option<Expr>,
    /// `ORDER BY` keys.
    pub order_by: Vec<OrderItem>,
    /// `LIMIT n`.
    pub limit: Option<u64>,
    /// `OFFSET m`.
    pub offset: Option<u64>,
}

/// Parses one statement: `SELECT ...` or `EXPLAIN SELECT ...`.
pub fn parse_sql(sql: &str) -> Result<SelectStatement, PlanError> {
    let statements = Parser::parse_sql(&DuckDbDialect {}, sql).map_err(|e| PlanError::Parse {
        message: e.to_string(),
    })?;
    let statement = match statements.as_slice() {
        [one] => one,
        [] => return Err(PlanError::unsupported("empty statement")),
        _ => return Err(PlanError::unsupported("multiple statements")),
    };
    match statement {
        ast::Statement::Query(q) => convert_query(q, false),
        ast::Statement::Explain {
            statement, analyze, ..
        } => {
            if *analyze {
                return Err(PlanError::unsupported("EXPLAIN ANALYZE"));
            }
            match &**statement {
                ast::Statement::Query(q) => convert_query(q, true),
                other => Err(PlanError::unsupported(format!(
                    "EXPLAIN of {}",
                    statement_kind(other)
                ))),
            }
        }
        other => Err(PlanError::unsupported(format!(
            "{} statement",
            statement_kind(other)
        ))),
    }
}

/// The SQL keyword(s) a statement starts with, e.g. `INSERT` or `CREATE TABLE`.
fn statement_kind(s: &ast::Statement) -> String {
    let text = s.to_string();
    let words: Vec<&str> = text.split_whitespace().take(2).collect();
    match words.as_slice() {
        [a, b] if b.chars().all(|c| c.is_ascii_uppercase()) => format!("{a} {b}"),
        [a, ..] => (*a).to_owned(),
        [] => "empty".to_owned(),
    }
}

fn convert_query(q: &ast::Query, explain: bool) -> Result<SelectStatement, PlanError> {
    if q.with.is_some() {
        return Err(PlanError::unsupported("WITH clause (CTE)"));
    }
    if q.fetch.is_some() {
        return Err(PlanError::unsupported("FETCH clause"));
    }
    if !q.locks.is_empty() || q.for_clause.is_some() {
        return Err(PlanError::unsupported("FOR clause"));
    }
    if q.settings.is_some() || q.format_clause.is_some() || !q.pipe_operators.is_empty() {
        return Err(PlanError::unsupported(
            "query settings, FORMAT or pipe operators",
        ));
    }
    let select = match &*q.body {
        ast::SetExpr::Select(s) => s,
        ast::SetExpr::SetOperation { op, .. } => {
            return Err(PlanError::unsupported(format!("{op} (set operation)")))
        }
        ast::SetExpr::Query(_) => return Err(PlanError::unsupported("parenthesized subquery")),
        ast::SetExpr::Values(_) => return Err(PlanError::unsupported("VALUES")),
        _ => return Err(PlanError::unsupported("non-SELECT query body")),
    };
    let mut out = convert_select(select, explain)?;
    if let Some(order_by) = &q.order_by {
        match &order_by.kind {
            ast::OrderByKind::All(_) => return Err(PlanError::unsupported("ORDER BY ALL")),
            ast::OrderByKind::Expressions(keys) => {
                for key in keys {
                    out.order_by.push(convert_order_item(key)?);
                }
            }
        }
        if order_by.interpolate.is_some() {
            return Err(PlanError::unsupported("INTERPOLATE"));
        }
    }
    match &q.limit_clause {
        None => {}
        Some(ast::LimitClause::LimitOffset {
            limit,
            offset,
            limit_by,
        }) => {
            if !limit_by.is_empty() {
                return Err(PlanError::unsupported("LIMIT BY"));
            }
            out.limit = limit
                .as_ref()
                .map(|e| count_literal(e, "LIMIT"))
                .transpose()?;
            out.offset = offset
                .as_ref()
                .map(|o| count_literal(&o.value, "OFFSET"))
                .transpose()?;
        }
        Some(ast::LimitClause::OffsetCommaLimit { .. }) => {
            return Err(PlanError::unsupported("LIMIT offset, count (MySQL syntax)"))
        }
    }
    Ok(out)
}

fn count_literal(e: &ast::Expr, kind: &str) -> Result<u64, PlanError> {
    match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => n.parse().map_err(|_| PlanError::InvalidLiteral {
                kind: kind.into(),
                value: n.clone(),
                reason: "expected a non-negative integer".into(),
            }),
            _ => Err(PlanError::unsupported(format!("non-integer {kind}"))),
        },
        _ => Err(PlanError::unsupported(format!("{kind} expression"))),
    }
}

fn convert_select(s: &ast::Select, explain: bool) -> Result<SelectStatement, PlanError> {
    let refuse = |cond: bool, what: &str| {
        if cond {
            Err(PlanError::unsupported(what))
        } else {
            Ok(())
        }
    };
    refuse(s.top.is_some(), "TOP")?;
    refuse(s.into.is_some(), "SELECT INTO")?;
    refuse(!s.lateral_views.is_empty(), "LATERAL VIEW")?;
    refuse(s.prewhere.is_some(), "PREWHERE")?;
    refuse(!s.connect_by.is_empty(), "CONNECT BY")?;
    refuse(!s.cluster_by.is_empty(), "CLUSTER BY")?;
    refuse(!s.distribute_by.is_empty(), "DISTRIBUTE BY")?;
    refuse(!s.sort_by.is_empty(), "SORT BY")?;
    refuse(!s.named_window.is_empty(), "WINDOW clause")?;
    refuse(s.qualify.is_some(), "QUALIFY")?;
    refuse(s.exclude.is_some(), "EXCLUDE")?;
    refuse(s.value_table_mode.is_some(), "SELECT AS STRUCT/VALUE")?;
    let distinct = match &s.distinct {
        None | Some(ast::Distinct::All) => false,
        Some(ast::Distinct::Distinct) => true,
        Some(_) => return Err(PlanError::unsupported("DISTINCT ON")),
    };
    let (source, source_name, source_alias) = convert_from(&s.from)?;
    let mut items = Vec::with_capacity(s.projection.len());
    for item in &s.projection {
        items.push(match item {
            ast::SelectItem::UnnamedExpr(e) => SelectItem::Expr {
                expr: convert_expr(e)?,
                alias: None,
                text: output_name(e),
            },
            ast::SelectItem::ExprWithAlias { expr, alias } => SelectItem::Expr {
                expr: convert_expr(expr)?,
                alias: Some(alias.value.clone()),
                text: output_name(expr),
            },
            ast::SelectItem::Wildcard(opts) => {
                let text = opts.to_string();
                refuse(
                    !text.trim().is_empty(),
                    "wildcard options (EXCLUDE/REPLACE)",
                )?;
                SelectItem::Wildcard
            }
            ast::SelectItem::QualifiedWildcard(..) => SelectItem::Wildcard,
            _ => {
                return Err(PlanError::unsupported(
                    "multiple aliases for one select item",
                ))
            }
        });
    }
    let group_by = match &s.group_by {
        ast::GroupByExpr::All(_) => return Err(PlanError::unsupported("GROUP BY ALL")),
        ast::GroupByExpr::Expressions(exprs, modifiers) => {
            refuse(
                !modifiers.is_empty(),
                "GROUP BY modifiers (ROLLUP/CUBE/TOTALS)",
            )?;
            exprs.iter().map(convert_expr).collect::<Result<_, _>>()?
        }
    };
    Ok(SelectStatement {
        explain,
        distinct,
        items,
        source,
        source_name,
        source_alias,
        filter: s.selection.as_ref().map(convert_expr).transpose()?,
        group_by,
        having: s.having.as_ref().map(convert_expr).transpose()?,
        order_by: Vec::new(),
        limit: None,
        offset: None,
    })
}

/// DuckDB names an unaliased column by its text; a plain column by its bare name.
fn output_name(e: &ast::Expr) -> String {
    match e {
        ast::Expr::Identifier(id) => id.value.clone(),
        ast::Expr::CompoundIdentifier(ids) => {
            ids.last().map(|i| i.value.clone()).unwrap_or_default()
        }
        other => other.to_string(),
    }
}

fn convert_from(
    from: &[ast::TableWithJoins],
) -> Result<(ScanSource, String, Option<String>), PlanError> {
    let table = match from {
        [] => return Err(PlanError::unsupported("SELECT without FROM")),
        [one] => one,
        _ => return Err(PlanError::unsupported("multiple tables in FROM clause")),
    };
    if !table.joins.is_empty() {
        return Err(PlanError::unsupported("JOIN in FROM clause"));
    }
    match &table.relation {
        ast::TableFactor::Table {
            name, alias, args, ..
        } => {
            let alias = alias.as_ref().map(|a| a.name.value.clone());
            let parts: Vec<&ast::Ident> = name.0.iter().filter_map(|p| p.as_ident()).collect();
            if parts.len() != name.0.len() || parts.is_empty() {
                return Err(PlanError::unsupported("computed table name"));
            }
            if let Some(args) = args {
                let fname = parts[parts.len() - 1].value.to_ascii_lowercase();
                if fname != "read_parquet" {
                    return Err(PlanError::unsupported(format!("table function {fname}")));
                }
                let path = match args.args.as_slice() {
                    [ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(ast::Expr::Value(v)))] => {
                        match &v.value {
                            ast::Value::SingleQuotedString(s) => s.clone(),
                            _ => {
                                return Err(PlanError::unsupported("read_parquet of a non-string"))
                            }
                        }
                    }
                    _ => return Err(PlanError::unsupported("read_parquet with options")),
                };
                return Ok((files(&path), path, alias));
            }
            let full: Vec<&str> = parts.iter().map(|i| i.value.as_str()).collect();
            let full = full.join(".");
            let quoted = parts.len() == 1 && parts[0].quote_style.is_some();
            if quoted && (full.contains(['/', '*', '?']) || full.ends_with(".parquet")) {
                return Ok((files(&full), full, alias));
            }
            if parts.len() > 1 {
                return Err(PlanError::unsupported(format!(
                    "qualified table name {full}"
                )));
            }
            Ok((ScanSource::Table { name: full.clone() }, full, alias))
        }
        ast::TableFactor::Derived { .. } => Err(PlanError::unsupported("subquery in FROM clause")),
        ast::TableFactor::TableFunction { .. } | ast::TableFactor::Function { .. } => {
            Err(PlanError::unsupported("table function in FROM clause"))
        }
        ast::TableFactor::NestedJoin { .. } => Err(PlanError::unsupported("JOIN in FROM clause")),
        ast::TableFactor::UNNEST { .. } => Err(PlanError::unsupported("UNNEST in FROM clause")),
        ast::TableFactor::Pivot { .. } => Err(PlanError::unsupported("PIVOT")),
        ast::TableFactor::Unpivot { .. } => Err(PlanError::unsupported("UNPIVOT")),
        _ => Err(PlanError::unsupported("this kind of FROM item")),
    }
}

fn files(path: &str) -> ScanSource {
    ScanSource::Files {
        paths: vec![PathBuf::from(path)],
    }
}

fn convert_order_item(o: &ast::OrderByExpr) -> Result<OrderItem, PlanError> {
    if o.with_fill.is_some() {
        return Err(PlanError::unsupported("WITH FILL"));
    }
    let descending = o.options.asc == Some(false);
    Ok(OrderItem {
        expr: convert_expr(&o.expr)?,
        descending,
        nulls_first: o.options.nulls_first,
    })
}

/// Translates one expression of the subset.
pub(crate) fn convert_expr(e: &ast::Expr) -> Result<Expr, PlanError> {
    let boxed = |e: &ast::Expr| convert_expr(e).map(Box::new);
    Ok(match e {
        ast::Expr::Identifier(id) => Expr::Column(id.value.clone()),
        ast::Expr::CompoundIdentifier(ids) => match ids.as_slice() {
            // The qualifier is checked against the table name when binding.
            [q, c] => Expr::Column(format!("{}.{}", q.value, c.value)),
            _ => return Err(PlanError::unsupported("column name with more than 2 parts")),
        },
        ast::Expr::Value(v) => Expr::Literal(convert_value(&v.value)?),
        ast::Expr::Nested(inner) => convert_expr(inner)?,
        ast::Expr::BinaryOp { left, op, right } => {
            Expr::binary(convert_expr(left)?, convert_op(op)?, convert_expr(right)?)
        }
        ast::Expr::UnaryOp { op, expr } => match op {
            ast::UnaryOperator::Not => Expr::Not(boxed(expr)?),
            ast::UnaryOperator::Plus => convert_expr(expr)?,
            ast::UnaryOperator::Minus => match convert_expr(expr)? {
                Expr::Literal(ScalarValue::Int64(v)) => Expr::Literal(ScalarValue::Int64(-v)),
                Expr::Literal(ScalarValue::UInt64(v)) if v == 1u64 << 63 => {
                    Expr::Literal(ScalarValue::Int64(i64::MIN))
                }
                Expr::Literal(ScalarValue::Float64(v)) => Expr::Literal(ScalarValue::Float64(-v)),
                other => Expr::Negative(Box::new(other)),
            },
            other => return Err(PlanError::unsupported(format!("unary operator {other}"))),
        },
        ast::Expr::Between {
            expr,
            negated,
            low,
            high,
        } => Expr::Between {
            expr: boxed(expr)?,
            low: boxed(low)?,
            high: boxed(high)?,
            negated: *negated,
        },
        ast::Expr::InList {
            expr,
            list,
            negated,
        } => Expr::InList {
            expr: boxed(expr)?,
            list: list.iter().map(convert_expr).collect::<Result<_, _>>()?,
            negated: *negated,
        },
        ast::Expr::IsNull(inner) => Expr::IsNull {
            expr: boxed(inner)?,
            negated: false,
        },
        ast::Expr::IsNotNull(inner) => Expr::IsNull {
            expr: boxed(inner)?,
            negated: true,
        },
        ast::Expr::Cast {
            kind,
            expr,
            data_type,
            format,
            array,
        } => {
            if *array {
                return Err(PlanError::unsupported("CAST of an array"));
            }
            if matches!(kind, ast::CastKind::TryCast | ast::CastKind::SafeCast) {
                return Err(PlanError::unsupported("TRY_CAST"));
            }
            if format.is_some() {
                return Err(PlanError::unsupported("CAST with FORMAT"));
            }
            Expr::Cast {
                expr: boxed(expr)?,
                to: convert_type(data_type)?,
            }
        }
        ast::Expr::TypedString(ts) => convert_typed_string(ts)?,
        ast::Expr::Interval(iv) => convert_interval(iv)?,
        ast::Expr::Function(f) => convert_function(f)?,
        ast::Expr::Subquery(_) | ast::Expr::Exists { .. } | ast::Expr::InSubquery { .. } => {
            return Err(PlanError::unsupported("subquery"))
        }
        ast::Expr::Case { .. } => return Err(PlanError::unsupported("CASE expression")),
        ast::Expr::Like { .. } | ast::Expr::ILike { .. } => {
            return Err(PlanError::unsupported("LIKE"))
        }
        ast::Expr::Extract { .. } => return Err(PlanError::unsupported("EXTRACT")),
        other => return Err(PlanError::unsupported(format!("expression {other}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::BinaryOp;

    #[test]
    fn translates_clauses() {
        let s = parse_sql(
            "SELECT DISTINCT symbol AS s FROM ohlcv t WHERE -close < -1.5 \
             ORDER BY 1 DESC NULLS FIRST LIMIT 3 OFFSET 4",
        )
        .unwrap();
        assert!(s.distinct && !s.explain);
        assert_eq!(s.source_alias.as_deref(), Some("t"));
        assert_eq!((s.limit, s.offset), (Some(3), Some(4)));
        assert_eq!(s.order_by[0].nulls_first, Some(true));
        let want = Expr::binary(
            Expr::Negative(Box::new(Expr::Column("close".into()))),
            BinaryOp::Lt,
            Expr::Literal(ScalarValue::Float64(-1.5)),
        );
        assert_eq!(s.filter, Some(want));
        let e = parse_sql("SELECT * FROM t LIMIT -1").unwrap_err();
        assert!(e.to_string().contains("LIMIT"), "{e}");
    }
}
