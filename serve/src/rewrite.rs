//! PostgreSQL's catalog dialect, made plannable: clients' catalog queries (psql's
//! `\d`, drivers' metadata calls) use spellings the engine does not plan —
//! `pg_catalog.`-qualified functions, `OPERATOR(pg_catalog.~)`, `COLLATE
//! pg_catalog.default`, casts to `regclass` / `regtype` — and subqueries over
//! catalog relations that ringscan never fills ([`crate::catalog::EMPTY`]).
//!
//! Only a query that names a catalog relation or type is rewritten; any other query
//! goes to the engine as written.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    AccessExpr, BinaryOperator, DataType, Expr, FunctionArg, FunctionArgExpr, FunctionArguments,
    Ident, ObjectName, ObjectNamePart, Query, Select, SelectItem, SetExpr, SetOperator, Statement,
    Subscript, TableFactor, Value,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;

use crate::catalog::EMPTY;

/// What the engine is given for a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Rewritten {
    /// The query as written.
    Same,
    /// The query in the engine's spelling.
    Sql(String),
    /// The query reads a relation ringscan never fills: no rows, these columns.
    Empty(Vec<String>),
}

/// Whether `sql` may be a catalog query (cheap: no parsing).
/// Runs on every statement: a scan of the bytes, no allocation.
fn mentions_catalog(sql: &str) -> bool {
    let has = |needle: &[u8]| {
        sql.as_bytes()
            .windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle))
    };
    has(b"pg_") || has(b"::reg") || has(b"information_schema")
}

pub(crate) fn rewrite(sql: &str) -> Rewritten {
    if !mentions_catalog(sql) {
        return Rewritten::Same;
    }
    let Ok(mut statements) = Parser::parse_sql(&PostgreSqlDialect {}, sql) else {
        // The engine gives the syntax error in its words.
        return Rewritten::Same;
    };
    let [Statement::Query(query)] = statements.as_mut_slice() else {
        return Rewritten::Same;
    };
    if empty_query(query) {
        return Rewritten::Empty(column_names(&query.body));
    }
    let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(query, |e| {
        rewrite_expr(e);
        ControlFlow::<()>::Continue(())
    });
    // PostgreSQL searches pg_catalog before any other schema.
    let _ = datafusion::sql::sqlparser::ast::visit_relations_mut(query, |name| {
        match name.0.as_slice() {
            [ObjectNamePart::Identifier(table)] => {
                let lower = table.value.to_ascii_lowercase();
                if crate::catalog::is_catalog_table(&lower) {
                    *name = ObjectName::from(vec![Ident::new("pg_catalog"), Ident::new(lower)]);
                }
            }
            // The columns with PostgreSQL's type names (the engine's own view names
            // Arrow's types).
            [ObjectNamePart::Identifier(schema), ObjectNamePart::Identifier(table)]
                if schema.value.eq_ignore_ascii_case("information_schema")
                    && table.value.eq_ignore_ascii_case("columns") =>
            {
                *name = ObjectName::from(vec![
                    Ident::new("pg_catalog"),
                    Ident::new(crate::catalog::INFORMATION_SCHEMA_COLUMNS),
                ]);
            }
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
    Rewritten::Sql(statements[0].to_string())
}

/// `name` without a `pg_catalog.` qualifier, lower-cased, if it had at most that one.
fn catalog_name(name: &ObjectName) -> Option<String> {
    let parts: Vec<&Ident> = name
        .0
        .iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(i) => Some(i),
            ObjectNamePart::Function(_) => None,
        })
        .collect::<Option<_>>()?;
    match parts.as_slice() {
        [one] => Some(one.value.to_ascii_lowercase()),
        [schema, one] if schema.value.eq_ignore_ascii_case("pg_catalog") => {
            Some(one.value.to_ascii_lowercase())
        }
        _ => None,
    }
}

/// Whether `e` names a `reloptions` column (of `pg_class`), which ringscan never
/// fills: no table has storage options.
fn is_reloptions(e: &Expr) -> bool {
    match e {
        Expr::Identifier(i) => i.value.eq_ignore_ascii_case("reloptions"),
        Expr::CompoundIdentifier(parts) => parts
            .last()
            .is_some_and(|i| i.value.eq_ignore_ascii_case("reloptions")),
        _ => false,
    }
}

fn is_empty_relation(factor: &TableFactor) -> bool {
    match factor {
        // `unnest(tc.reloptions)` (psql's \d+ lists a table's TOAST options so).
        TableFactor::Table {
            name,
            args: Some(args),
            ..
        } if catalog_name(name).as_deref() == Some("unnest") => !args.args.is_empty()
            && args.args.iter().all(
                |a| matches!(a, FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) if is_reloptions(e)),
            ),
        TableFactor::UNNEST { array_exprs, .. } => {
            !array_exprs.is_empty() && array_exprs.iter().all(is_reloptions)
        }
        TableFactor::Table { name, .. } => {
            catalog_name(name).is_some_and(|n| EMPTY.contains(&n.as_str()))
        }
        TableFactor::Derived { subquery, .. } => empty_query(subquery),
        _ => false,
    }
}

/// Whether `query` returns no rows whatever the data: every way to a row goes through
/// an empty relation joined without an outer join.
fn empty_query(query: &Query) -> bool {
    empty_set(&query.body)
}

fn empty_set(body: &SetExpr) -> bool {
    match body {
        SetExpr::Select(select) => empty_select(select),
        SetExpr::Query(q) => empty_query(q),
        SetExpr::SetOperation {
            left, op, right, ..
        } => match op {
            SetOperator::Union => empty_set(left) && empty_set(right),
            SetOperator::Intersect => empty_set(left) || empty_set(right),
            SetOperator::Except | SetOperator::Minus => empty_set(left),
        },
        _ => false,
    }
}

fn empty_select(select: &Select) -> bool {
    // An aggregate without GROUP BY answers one row even over nothing.
    let aggregates = select.projection.iter().any(|item| {
        let mut expr = match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e.clone(),
            _ => return false,
        };
        // An aggregate inside a subquery is the subquery's.
        let _ = datafusion::sql::sqlparser::ast::visit_expressions_mut(&mut expr, |e| {
            if matches!(
                e,
                Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. }
            ) {
                *e = Expr::value(Value::Null);
            }
            ControlFlow::<()>::Continue(())
        });
        let mut found = false;
        let _ = datafusion::sql::sqlparser::ast::visit_expressions(&expr, |e| {
            if let Expr::Function(f) = e {
                let name = f.name.to_string().to_ascii_lowercase();
                found |= matches!(
                    name.rsplit('.').next().unwrap_or(""),
                    "count"
                        | "sum"
                        | "min"
                        | "max"
                        | "avg"
                        | "string_agg"
                        | "array_agg"
                        | "bool_and"
                        | "bool_or"
                        | "every"
                );
            }
            ControlFlow::<()>::Continue(())
        });
        found
    });
    if aggregates {
        return false;
    }
    select.from.iter().any(|from| {
        use datafusion::sql::sqlparser::ast::JoinOperator as J;
        is_empty_relation(&from.relation)
            || from.joins.iter().any(|join| {
                matches!(
                    join.join_operator,
                    J::Join(_) | J::Inner(_) | J::CrossJoin(_)
                ) && is_empty_relation(&join.relation)
            })
    })
}

/// The column names of a query's result, as PostgreSQL names them.
fn column_names(body: &SetExpr) -> Vec<String> {
    match body {
        SetExpr::Select(select) => select
            .projection
            .iter()
            .map(|item| match item {
                SelectItem::ExprWithAlias { alias, .. } => alias.value.clone(),
                SelectItem::UnnamedExpr(e) => expr_name(e),
                _ => "?column?".into(),
            })
            .collect(),
        SetExpr::Query(q) => column_names(&q.body),
        SetExpr::SetOperation { left, .. } => column_names(left),
        _ => Vec::new(),
    }
}

fn expr_name(e: &Expr) -> String {
    match e {
        Expr::Identifier(i) => i.value.clone(),
        Expr::CompoundIdentifier(parts) => {
            parts.last().map_or("?column?".into(), |i| i.value.clone())
        }
        Expr::Function(f) => f
            .name
            .0
            .last()
            .map_or("?column?".into(), |p| p.to_string().to_ascii_lowercase()),
        Expr::Cast { expr, .. } => expr_name(expr),
        _ => "?column?".into(),
    }
}

/// `current_schemas(true)`: the search path with its implicit schema, as the catalog's
/// function gives it.
const SEARCH_PATH: [&str; 2] = ["pg_catalog", "public"];

fn is_current_schemas(e: &Expr) -> bool {
    match e {
        Expr::Nested(inner) => is_current_schemas(inner),
        Expr::Function(f) => f
            .name
            .0
            .last()
            .is_some_and(|p| p.to_string().eq_ignore_ascii_case("current_schemas")),
        _ => false,
    }
}

/// One expression in the engine's spelling (children are rewritten first).
fn rewrite_expr(e: &mut Expr) {
    match e {
        // ARRAY(subquery) over nothing: an empty array, shown as PostgreSQL shows it.
        Expr::Function(f)
            if f.name.to_string().eq_ignore_ascii_case("array")
                && matches!(&f.args, FunctionArguments::Subquery(q) if empty_query(q)) =>
        {
            *e = Expr::value(Value::SingleQuotedString("{}".into()));
        }
        // `(current_schemas(true))[n]`: the engine has no subscript, the list is fixed.
        Expr::CompoundFieldAccess { root, access_chain }
            if access_chain.len() == 1 && is_current_schemas(root) =>
        {
            if let AccessExpr::Subscript(Subscript::Index { index }) = &access_chain[0] {
                let schema = index
                    .to_string()
                    .parse::<usize>()
                    .ok()
                    .and_then(|n| n.checked_sub(1))
                    .and_then(|i| SEARCH_PATH.get(i));
                *e = match schema {
                    Some(s) => Expr::value(Value::SingleQuotedString((*s).into())),
                    None => Expr::value(Value::Null),
                };
            }
        }
        Expr::Function(f) => {
            if let Some(name) = catalog_name(&f.name) {
                f.name = ObjectName::from(vec![Ident::new(name)]);
            }
        }
        Expr::BinaryOp { op, .. } => {
            if let BinaryOperator::PGCustomBinaryOperator(parts) = op {
                let plain = match parts.last().map(String::as_str) {
                    Some("~") => Some(BinaryOperator::PGRegexMatch),
                    Some("~*") => Some(BinaryOperator::PGRegexIMatch),
                    Some("!~") => Some(BinaryOperator::PGRegexNotMatch),
                    Some("!~*") => Some(BinaryOperator::PGRegexNotIMatch),
                    Some("=") => Some(BinaryOperator::Eq),
                    Some("<>") => Some(BinaryOperator::NotEq),
                    Some("<") => Some(BinaryOperator::Lt),
                    Some(">") => Some(BinaryOperator::Gt),
                    Some("<=") => Some(BinaryOperator::LtEq),
                    Some(">=") => Some(BinaryOperator::GtEq),
                    _ => None,
                };
                if let Some(plain) = plain {
                    *op = plain;
                }
            }
        }
        Expr::Collate { expr, .. } => *e = (**expr).clone(),
        Expr::Cast {
            expr, data_type, ..
        } => {
            if let Some(replacement) = cast(expr, data_type) {
                *e = replacement;
            }
        }
        Expr::Subquery(q) if empty_query(q) => *e = Expr::value(Value::Null),
        Expr::Exists { subquery, negated } if empty_query(subquery) => {
            *e = Expr::value(Value::Boolean(*negated));
        }
        Expr::InSubquery {
            subquery, negated, ..
        } if empty_query(subquery) => *e = Expr::value(Value::Boolean(*negated)),
        _ => {}
    }
}

/// A cast to a catalog type in the engine's terms: `'t'::regclass` is the table's
/// OID, `oid::regtype` its type's name, `x::pg_catalog.text` a cast to text.
fn cast(expr: &Expr, data_type: &DataType) -> Option<Expr> {
    let name = match data_type {
        DataType::Regclass => "regclass".to_owned(),
        DataType::Custom(name, _) => catalog_name(name)?,
        _ => return None,
    };
    let call = |function: &str, args: Vec<Expr>| {
        let sql = format!(
            "{function}({})",
            args.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        Parser::new(&PostgreSqlDialect {})
            .try_with_sql(&sql)
            .and_then(|mut p| p.parse_expr())
            .ok()
    };
    let retyped = |t: DataType| {
        Some(Expr::Cast {
            kind: datafusion::sql::sqlparser::ast::CastKind::DoubleColon,
            expr: Box::new(expr.clone()),
            data_type: t,
            array: false,
            format: None,
        })
    };
    match name.as_str() {
        "regclass" => match expr {
            Expr::Value(v) => {
                let Value::SingleQuotedString(table) = &v.value else {
                    return Some(expr.clone());
                };
                let relname = table.rsplit('.').next().unwrap_or(table).trim_matches('"');
                let sql = format!(
                    "(SELECT oid FROM pg_catalog.pg_class WHERE relname = '{}')",
                    relname.replace('\'', "''")
                );
                Parser::new(&PostgreSqlDialect {})
                    .try_with_sql(&sql)
                    .and_then(|mut p| p.parse_expr())
                    .ok()
            }
            _ => Some(expr.clone()),
        },
        "regtype" => call("format_type", vec![expr.clone(), Expr::value(Value::Null)]),
        "regnamespace" | "regproc" | "regprocedure" | "regrole" | "oid" => Some(expr.clone()),
        "text" | "name" | "char" | "bpchar" | "varchar" => retyped(DataType::Text),
        "int2" => retyped(DataType::SmallInt(None)),
        "int4" => retyped(DataType::Int(None)),
        "int8" => retyped(DataType::BigInt(None)),
        "bool" => retyped(DataType::Boolean),
        "float8" => retyped(DataType::Double(
            datafusion::sql::sqlparser::ast::ExactNumberInfo::None,
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sql(q: &str) -> String {
        match rewrite(q) {
            Rewritten::Sql(s) => s,
            other => panic!("{q}: {other:?}"),
        }
    }

    #[test]
    fn a_subscript_of_the_search_path_is_its_schema() {
        let got = sql(
            "SELECT nspname FROM pg_catalog.pg_namespace WHERE nspname = \
             (pg_catalog.current_schemas(true))[1] OR nspname = (current_schemas(true))[2] \
             OR nspname = (current_schemas(true))[3]",
        );
        assert!(
            got.contains("nspname = 'pg_catalog'")
                && got.contains("nspname = 'public'")
                && got.contains("nspname = NULL"),
            "{got}"
        );
    }

    #[test]
    fn psql_spellings_become_the_engines() {
        let got = sql(
            "SELECT c.oid, n.nspname, c.relname FROM pg_catalog.pg_class c \
             LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relname OPERATOR(pg_catalog.~) '^(ohlcv)$' COLLATE pg_catalog.default \
             AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY 2, 3",
        );
        assert!(got.contains("c.relname ~ '^(ohlcv)$'"), "{got}");
        assert!(got.contains(" pg_table_is_visible(c.oid)"), "{got}");
        assert!(!got.contains("COLLATE"), "{got}");
        let got = sql(
            "SELECT c.reloftype::pg_catalog.regtype::pg_catalog.text FROM pg_catalog.pg_class c",
        );
        assert!(
            got.contains("format_type(c.reloftype, NULL)::TEXT"),
            "{got}"
        );
        let got = sql("SELECT attname FROM pg_attribute WHERE attrelid = 'ohlcv'::regclass");
        assert!(
            got.contains("(SELECT oid FROM pg_catalog.pg_class WHERE relname = 'ohlcv')"),
            "{got}"
        );
    }

    #[test]
    fn queries_over_relations_never_filled_are_empty() {
        assert_eq!(
            rewrite(
                "SELECT c.oid::pg_catalog.regclass, inhseqno AS n FROM pg_catalog.pg_class c, \
                 pg_catalog.pg_inherits i WHERE c.oid = i.inhparent ORDER BY inhseqno"
            ),
            Rewritten::Empty(vec!["oid".into(), "n".into()])
        );
        // A union is empty only if each side is.
        assert!(matches!(
            rewrite(
                "SELECT pubname FROM pg_catalog.pg_publication UNION SELECT relname FROM pg_class"
            ),
            Rewritten::Sql(_)
        ));
        // An outer join to an empty relation keeps the rows; a subquery over one is NULL.
        let got = sql(
            "SELECT a.attname, (SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid, true) \
             FROM pg_catalog.pg_attrdef d WHERE d.adrelid = a.attrelid) FROM pg_catalog.pg_attribute a \
             LEFT JOIN pg_catalog.pg_attrdef x ON true",
        );
        assert!(got.starts_with("SELECT a.attname, NULL FROM"), "{got}");
        // count(*) over nothing is one row; an aggregate in a subquery is not the
        // query's.
        assert_eq!(
            rewrite(
                "SELECT pubname, (SELECT string_agg(attname, ', ') FROM pg_attribute) \
                 FROM pg_catalog.pg_publication p"
            ),
            Rewritten::Empty(vec!["pubname".into(), "?column?".into()])
        );
        assert!(matches!(
            rewrite("SELECT count(*) FROM pg_catalog.pg_index"),
            Rewritten::Sql(_)
        ));
        assert_eq!(rewrite("SELECT * FROM ohlcv"), Rewritten::Same);
        assert_eq!(
            sql("SELECT relname FROM pg_class"),
            "SELECT relname FROM pg_catalog.pg_class"
        );
    }
}
