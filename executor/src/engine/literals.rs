//! Literal parameterization: a query sent as text with its values inline (the simple
//! protocol, `psql -c`) planned once per shape, not once per value.
//!
//! `SELECT * FROM t WHERE id = 1234` and `... WHERE id = 5678` differ only in a literal,
//! yet each was parsed, planned and optimized anew: four times the host CPU of the same
//! lookup prepared. [`sites`] finds the literals the `WHERE` of a plain `SELECT` over
//! one table compares a column with (`=`, `<>`, `<`, `<=`, `>`, `>=`, either side; `IN` lists; `BETWEEN`
//! bounds), [`render`] writes the statement with chosen ones as `$1`, `$2`..., and the
//! session plans that text once (its plan cache) and binds the values as a prepared
//! statement's.
//!
//! The answer must be the one the literal gives. The session replaces a literal only
//! where the parameter's type, as the plan infers it from the column, takes the value
//! exactly ([`takes`]): an integer into an integer type (checked for range when bound)
//! or a float type within 2^53, a string into a string type. Anything else (dates,
//! decimals, a string compared with a number) stays a literal in the text, where the
//! planner coerces it as before; and a statement whose parameterized form fails in any
//! way runs as written.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr, SetExpr, Statement, TableFactor, UnaryOperator, Value,
};

/// A statement's text with its literals as parameters, and those literals in order.
pub(crate) type Shape = (String, Vec<Literal>);

/// A literal replaced by a parameter.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Literal {
    Int(i64),
    Text(String),
}

impl Literal {
    pub(crate) fn value(&self) -> ScalarValue {
        match self {
            Literal::Int(v) => ScalarValue::Int64(Some(*v)),
            Literal::Text(s) => ScalarValue::Utf8(Some(s.clone())),
        }
    }
}

/// Whether a parameter of type `ty` takes `literal` exactly, so that binding it gives
/// the answer the literal gives.
pub(crate) fn takes(literal: &Literal, ty: Option<&DataType>) -> bool {
    const EXACT_F64: i64 = 1 << 53;
    match (literal, ty) {
        (Literal::Int(_), Some(t)) if t.is_integer() => true,
        (Literal::Int(v), Some(DataType::Float64)) => (-EXACT_F64..=EXACT_F64).contains(v),
        (Literal::Text(_), Some(DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)) => true,
        _ => false,
    }
}

/// The literals of `statement` that may become parameters, in the order `render`
/// numbers them; empty for a statement other than a plain `SELECT` (no set operation),
/// or one that has parameters already.
pub(crate) fn sites(statement: &Statement) -> Vec<Literal> {
    let mut found = Vec::new();
    if let Some(selection) = selection(statement) {
        let mut placeholders = false;
        walk(
            selection,
            &mut |e| {
                if let Some(lit) = literal_of(e) {
                    found.push(lit);
                }
            },
            &mut placeholders,
        );
        if placeholders {
            found.clear();
        }
    }
    found
}

/// `statement` written with the literals `keep[i] == false` left as they are and the
/// others as `$1`, `$2`... in order; `None` when it has no literal to replace.
pub(crate) fn render(statement: &Statement, replace: &[bool]) -> Option<String> {
    selection(statement)?;
    let mut statement = statement.clone();
    let selection = selection_mut(&mut statement)?;
    let mut i = 0;
    let mut n = 0;
    walk_mut(selection, &mut |e| {
        if literal_of(e).is_some() {
            if replace.get(i).copied().unwrap_or(false) {
                n += 1;
                *e = Expr::value(Value::Placeholder(format!("${n}")));
            }
            i += 1;
        }
    });
    (n > 0).then(|| statement.to_string())
}

/// The `WHERE` of a plain `SELECT` over one table (no join, no derived table, no
/// `INTO`): a join's plan uses its literals (the probe side filtered by the build
/// side's keys), which a parameter would lose.
fn selection(statement: &Statement) -> Option<&Expr> {
    let Statement::Query(query) = statement else {
        return None;
    };
    let SetExpr::Select(select) = query.body.as_ref() else {
        return None;
    };
    // `SELECT .. INTO` writes: run as written, once.
    if select.into.is_some() {
        return None;
    }
    let [from] = &select.from[..] else {
        return None;
    };
    if !from.joins.is_empty() || !matches!(from.relation, TableFactor::Table { .. }) {
        return None;
    }
    select.selection.as_ref()
}

fn selection_mut(statement: &mut Statement) -> Option<&mut Expr> {
    let Statement::Query(query) = statement else {
        return None;
    };
    let SetExpr::Select(select) = query.body.as_mut() else {
        return None;
    };
    select.selection.as_mut()
}

/// `e` as a literal a parameter may stand for: an integer that fits 64 bits (with its
/// sign) or a plain single-quoted string.
fn literal_of(e: &Expr) -> Option<Literal> {
    match e {
        Expr::Value(v) => match &v.value {
            Value::Number(n, false) => n.to_string().parse().ok().map(Literal::Int),
            Value::SingleQuotedString(s) => Some(Literal::Text(s.clone())),
            _ => None,
        },
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => match expr.as_ref() {
            Expr::Value(v) => match &v.value {
                Value::Number(n, false) => format!("-{n}").parse().ok().map(Literal::Int),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

fn is_column(e: &Expr) -> bool {
    matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_))
}

fn is_comparison(op: &BinaryOperator) -> bool {
    use BinaryOperator as B;
    matches!(op, B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq)
}

/// Calls `visit` on each literal site of the predicate `e` in textual order; sets
/// `placeholders` when `e` holds a parameter already anywhere it looks.
fn walk(e: &Expr, visit: &mut dyn FnMut(&Expr), placeholders: &mut bool) {
    match e {
        Expr::BinaryOp { left, op, right } => match op {
            BinaryOperator::And | BinaryOperator::Or => {
                walk(left, visit, placeholders);
                walk(right, visit, placeholders);
            }
            op if is_comparison(op) => {
                for (side, other) in [(left, right), (right, left)] {
                    if is_column(other) {
                        note_placeholder(side, placeholders);
                        visit(side);
                    }
                }
            }
            _ => {}
        },
        Expr::Nested(inner) => walk(inner, visit, placeholders),
        Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr,
        } => walk(expr, visit, placeholders),
        Expr::InList { expr, list, .. } if is_column(expr) => {
            for item in list {
                note_placeholder(item, placeholders);
                visit(item);
            }
        }
        Expr::Between {
            expr, low, high, ..
        } if is_column(expr) => {
            for bound in [low, high] {
                note_placeholder(bound, placeholders);
                visit(bound);
            }
        }
        _ => {}
    }
}

fn note_placeholder(e: &Expr, placeholders: &mut bool) {
    if let Expr::Value(v) = e {
        *placeholders |= matches!(v.value, Value::Placeholder(_));
    }
}

/// [`walk`] with the sites to change in place, in the same order.
fn walk_mut(e: &mut Expr, visit: &mut dyn FnMut(&mut Expr)) {
    match e {
        Expr::BinaryOp { left, op, right } => match op {
            BinaryOperator::And | BinaryOperator::Or => {
                walk_mut(left, visit);
                walk_mut(right, visit);
            }
            op if is_comparison(op) => {
                // The same order as `walk`: the left side (if the right is a column),
                // then the right side (if the left is a column), each judged on the
                // statement as written.
                let (left_col, right_col) = (is_column(right), is_column(left));
                if left_col {
                    visit(left);
                }
                if right_col {
                    visit(right);
                }
            }
            _ => {}
        },
        Expr::Nested(inner) => walk_mut(inner, visit),
        Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr,
        } => walk_mut(expr, visit),
        Expr::InList { expr, list, .. } if is_column(expr) => {
            for item in list {
                visit(item);
            }
        }
        Expr::Between {
            expr, low, high, ..
        } if is_column(expr) => {
            visit(low);
            visit(high);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn parse(sql: &str) -> Statement {
        Parser::parse_sql(&PostgreSqlDialect {}, sql)
            .unwrap()
            .remove(0)
    }

    #[test]
    fn where_comparisons_become_parameters_in_order() {
        let s = parse(
            "SELECT a, 7 FROM t WHERE a = 5 AND 'x' <> b AND (c BETWEEN -3 AND 9 OR d IN (1, 'y')) \
             AND e LIKE 'z%' AND f + 1 = 2 ORDER BY 1 LIMIT 10",
        );
        let lits = sites(&s);
        assert_eq!(
            lits,
            [
                Literal::Int(5),
                Literal::Text("x".into()),
                Literal::Int(-3),
                Literal::Int(9),
                Literal::Int(1),
                Literal::Text("y".into()),
            ]
        );
        let all = render(&s, &[true; 6]).unwrap();
        assert_eq!(
            all,
            "SELECT a, 7 FROM t WHERE a = $1 AND $2 <> b AND (c BETWEEN $3 AND $4 OR d IN ($5, $6)) \
             AND e LIKE 'z%' AND f + 1 = 2 ORDER BY 1 LIMIT 10"
        );
        let some = render(&s, &[false, true, false, false, true, false]).unwrap();
        assert_eq!(
            some,
            "SELECT a, 7 FROM t WHERE a = 5 AND $1 <> b AND (c BETWEEN -3 AND 9 OR d IN ($2, 'y')) \
             AND e LIKE 'z%' AND f + 1 = 2 ORDER BY 1 LIMIT 10"
        );
        assert!(render(&s, &[false; 6]).is_none());
    }

    #[test]
    fn other_statements_have_no_sites() {
        for sql in [
            "SELECT * FROM t WHERE a = $1 AND b = 2",
            "SELECT a FROM t WHERE a = 1 UNION SELECT a FROM u WHERE a = 2",
            "INSERT INTO t VALUES (1)",
            "EXPLAIN SELECT * FROM t WHERE a = 1",
            "SELECT * FROM t JOIN u ON t.a = u.a WHERE t.b = 1",
            "SELECT * FROM t, u WHERE t.b = 1",
            "SELECT * FROM (SELECT * FROM t) AS q WHERE q.b = 1",
            "SELECT * INTO u FROM t WHERE a = 1",
            "SELECT * FROM t WHERE a = 1.5 OR b = 1e3 OR c = DATE '2024-01-01' OR 1 = 1",
            "SELECT * FROM t WHERE a = 99999999999999999999",
        ] {
            assert!(sites(&parse(sql)).is_empty(), "{sql}");
        }
    }

    #[test]
    fn only_exact_types_take_a_literal() {
        let int = Literal::Int(5);
        let big = Literal::Int(1 << 60);
        let text = Literal::Text("5".into());
        assert!(takes(&int, Some(&DataType::Int32)));
        assert!(takes(&int, Some(&DataType::UInt8)));
        assert!(takes(&int, Some(&DataType::Float64)));
        assert!(!takes(&big, Some(&DataType::Float64)));
        assert!(!takes(&int, Some(&DataType::Float32)));
        assert!(!takes(&int, Some(&DataType::Utf8)));
        assert!(!takes(&int, Some(&DataType::Decimal128(10, 2))));
        assert!(!takes(&int, None));
        assert!(takes(&text, Some(&DataType::Utf8View)));
        assert!(!takes(&text, Some(&DataType::Int64)));
        assert!(!takes(&text, Some(&DataType::Date32)));
    }
}
