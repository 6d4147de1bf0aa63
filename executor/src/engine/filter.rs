//! DataFusion filter expressions → the daemon's [`Predicate`] tree, exactly or not at all.
//!
//! The provider reports a filter `Exact` only when [`to_predicate`] maps all of it: the
//! daemon then drops exactly the rows the expression does not select (three-valued
//! logic: a NULL comparison selects nothing), so DataFusion adds no filter above the
//! scan. A filter that maps only in part (a conjunction with one mappable side) is
//! `Inexact`: its mappable conjuncts prune and filter in the daemon, and DataFusion
//! filters again. Anything else stays in DataFusion.
//!
//! By the time filters reach the provider, DataFusion's type coercion and expression
//! simplifier have run: literals compared with a column carry the column's type where
//! that is exact (`int32_col > 5` arrives as `int32_col > Int32(5)`), and a comparison
//! that needs the column cast (`int_col > 1.5`) arrives with the cast, which is not
//! mapped. A literal is mapped only where the column's type holds it exactly.

use arrow_schema::{DataType, Schema, TimeUnit};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::expr::Placeholder;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator};
use datafusion::physical_expr::PhysicalExpr;
use ringscan_ipc::msg::{CmpOp, Literal, Operand, Predicate};

/// How much of a filter the daemon can apply.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Pushed {
    /// All of it, exactly.
    Exact(Predicate),
    /// A part: the daemon may return rows the whole filter drops.
    Part(Predicate),
    /// None of it.
    No,
}

/// Whether `e` holds a prepared statement's parameter (`$1`).
pub(crate) fn has_placeholder(e: &Expr) -> bool {
    use datafusion::common::tree_node::TreeNode;
    e.exists(|e| Ok(matches!(e, Expr::Placeholder(_))))
        .unwrap_or(true)
}

/// `e` with each parameter replaced by its value in `values`.
pub(crate) fn fill_placeholders(
    e: &Expr,
    values: &datafusion::common::ParamValues,
) -> datafusion::common::Result<Expr> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    e.clone()
        .transform(|e| match e {
            Expr::Placeholder(p) => {
                let (value, metadata) = values.get_placeholders_with_values(&p.id)?.into_inner();
                Ok(Transformed::yes(Expr::Literal(value, metadata)))
            }
            other => Ok(Transformed::no(other)),
        })
        .map(|t| t.data)
}

/// Maps `filter` (one conjunct of a WHERE) for a table of `schema`.
pub(crate) fn push_filter(filter: &Expr, schema: &Schema) -> Pushed {
    if let Some(p) = to_predicate(filter, schema) {
        return Pushed::Exact(p);
    }
    let mut conjuncts = Vec::new();
    split_and(filter, &mut conjuncts);
    let parts: Vec<Predicate> = conjuncts
        .iter()
        .filter_map(|c| to_predicate(c, schema))
        .collect();
    match parts.len() {
        0 => Pushed::No,
        1 => Pushed::Part(parts.into_iter().next().expect("one part")),
        _ => Pushed::Part(Predicate::And(parts)),
    }
}

fn split_and<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::And,
            right,
        }) => {
            split_and(left, out);
            split_and(right, out);
        }
        other => out.push(other),
    }
}

/// The column `e` names, with its type, when `e` is a bare column of `schema`.
fn column<'a>(e: &Expr, schema: &'a Schema) -> Option<(&'a str, &'a DataType)> {
    match e {
        Expr::Column(c) => schema
            .field_with_name(&c.name)
            .ok()
            .map(|f| (f.name().as_str(), f.data_type())),
        _ => None,
    }
}

fn cmp_op(op: Operator) -> Option<CmpOp> {
    Some(match op {
        Operator::Eq => CmpOp::Eq,
        Operator::NotEq => CmpOp::NotEq,
        Operator::Lt => CmpOp::Lt,
        Operator::LtEq => CmpOp::LtEq,
        Operator::Gt => CmpOp::Gt,
        Operator::GtEq => CmpOp::GtEq,
        _ => return None,
    })
}

/// The literal as the daemon compares it, when a column of `column_type` holds `v`
/// exactly (the daemon casts the literal to the column's type).
pub(crate) fn exact_literal(column_type: &DataType, v: &ScalarValue) -> Option<Literal> {
    use DataType as D;
    const F64_EXACT: i128 = 1 << 53;
    let int_fits = |i: i128| -> bool {
        let (lo, hi): (i128, i128) = match column_type {
            D::Int8 => (i8::MIN.into(), i8::MAX.into()),
            D::Int16 => (i16::MIN.into(), i16::MAX.into()),
            D::Int32 => (i32::MIN.into(), i32::MAX.into()),
            D::Int64 => (i64::MIN.into(), i64::MAX.into()),
            D::UInt8 => (0, u8::MAX.into()),
            D::UInt16 => (0, u16::MAX.into()),
            D::UInt32 => (0, u32::MAX.into()),
            D::UInt64 => (0, u64::MAX.into()),
            D::Float32 => (-(1 << 24), 1 << 24),
            D::Float64 => (-F64_EXACT, F64_EXACT),
            _ => return false,
        };
        (lo..=hi).contains(&i)
    };
    let int = |i: i128| -> Option<Literal> {
        if !int_fits(i) {
            return None;
        }
        match i64::try_from(i) {
            Ok(i) => Some(Literal::Int(i)),
            Err(_) => u64::try_from(i).ok().map(Literal::UInt),
        }
    };
    match v {
        ScalarValue::Int8(Some(i)) => int((*i).into()),
        ScalarValue::Int16(Some(i)) => int((*i).into()),
        ScalarValue::Int32(Some(i)) => int((*i).into()),
        ScalarValue::Int64(Some(i)) => int((*i).into()),
        ScalarValue::UInt8(Some(i)) => int((*i).into()),
        ScalarValue::UInt16(Some(i)) => int((*i).into()),
        ScalarValue::UInt32(Some(i)) => int((*i).into()),
        ScalarValue::UInt64(Some(i)) => int((*i).into()),
        // NaN and the infinities cannot travel: the control messages are JSON, which
        // has no such numbers (they would arrive as null and fail the scan). The plan
        // filters with them instead.
        ScalarValue::Float64(Some(f)) if !f.is_finite() => None,
        ScalarValue::Float32(Some(f)) if !f.is_finite() => None,
        ScalarValue::Float64(Some(f)) => match column_type {
            D::Float64 => Some(Literal::Float(*f)),
            D::Float32 if f64::from(*f as f32) == *f => Some(Literal::Float(*f)),
            _ => None,
        },
        ScalarValue::Float32(Some(f)) => match column_type {
            D::Float32 | D::Float64 => Some(Literal::Float(f64::from(*f))),
            _ => None,
        },
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => match column_type {
            D::Utf8 | D::LargeUtf8 | D::Utf8View => Some(Literal::Utf8(s.clone())),
            D::Dictionary(_, value) if value.is_string() => Some(Literal::Utf8(s.clone())),
            _ => None,
        },
        ScalarValue::Boolean(Some(b)) if *column_type == D::Boolean => Some(Literal::Bool(*b)),
        ScalarValue::Date32(Some(d)) => match column_type {
            D::Date32 => Some(Literal::Date32(*d)),
            D::Timestamp(TimeUnit::Microsecond, None) => {
                Some(Literal::TimestampMicros(i64::from(*d) * 86_400_000_000))
            }
            _ => None,
        },
        // An instant against an instant column compares instants, whatever zones their
        // types name (the daemon compares the stored UTC values); a naive timestamp
        // only against a naive column.
        ScalarValue::TimestampMicrosecond(Some(t), tz) => match column_type {
            D::Timestamp(TimeUnit::Microsecond, column_tz)
                if column_tz.is_some() == tz.is_some() =>
            {
                Some(Literal::TimestampMicros(*t))
            }
            _ => None,
        },
        _ => None,
    }
}

fn literal_of(e: &Expr, column_type: &DataType) -> Option<Literal> {
    match e {
        Expr::Literal(v, _) => exact_literal(column_type, v),
        // A prepared statement's parameter, when its plan is optimized before it has a
        // value: pushed as a value of its type would be. Only the verdict (exact, part,
        // none) is used; a binding whose value gets another verdict is planned on its
        // own (see the engine's generic plans), and a scan is planned only with values.
        Expr::Placeholder(Placeholder {
            field: Some(field), ..
        }) => exact_literal(
            column_type,
            &ScalarValue::new_default(field.data_type()).ok()?,
        ),
        _ => None,
    }
}

fn flatten(
    kind: fn(Vec<Predicate>) -> Predicate,
    parts: impl IntoIterator<Item = Predicate>,
) -> Predicate {
    let mut all = Vec::new();
    for p in parts {
        match (kind(Vec::new()), p) {
            (Predicate::And(_), Predicate::And(inner))
            | (Predicate::Or(_), Predicate::Or(inner)) => all.extend(inner),
            (_, p) => all.push(p),
        }
    }
    kind(all)
}

/// Maps a boolean expression onto the predicate tree, exactly or not at all.
pub(crate) fn to_predicate(e: &Expr, schema: &Schema) -> Option<Predicate> {
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
            Operator::And | Operator::Or => {
                let parts = [to_predicate(left, schema)?, to_predicate(right, schema)?];
                let kind = if *op == Operator::And {
                    Predicate::And
                } else {
                    Predicate::Or
                };
                Some(flatten(kind, parts))
            }
            _ => {
                let op = cmp_op(*op)?;
                match (column(left, schema), column(right, schema)) {
                    (Some((l, lt)), Some((r, rt))) if lt == rt => Some(Predicate::Compare {
                        left: Operand::Column(l.to_owned()),
                        op,
                        right: Operand::Column(r.to_owned()),
                    }),
                    (Some((l, lt)), None) => {
                        Some(Predicate::compare(l, op, literal_of(right, lt)?))
                    }
                    (None, Some((r, rt))) => {
                        Some(Predicate::compare(r, op.flipped(), literal_of(left, rt)?))
                    }
                    _ => None,
                }
            }
        },
        Expr::Not(inner) => Some(Predicate::Not(Box::new(to_predicate(inner, schema)?))),
        Expr::Column(_) => {
            // A boolean column as a condition: `WHERE flag` selects the rows where it is
            // true (NULL selects nothing), as `flag = true` does.
            let (c, t) = column(e, schema)?;
            (*t == DataType::Boolean).then(|| Predicate::compare(c, CmpOp::Eq, Literal::Bool(true)))
        }
        Expr::Between(Between {
            expr,
            negated,
            low,
            high,
        }) => {
            let (c, t) = column(expr, schema)?;
            Some(Predicate::Between {
                expr: Operand::Column(c.to_owned()),
                low: literal_of(low, t)?,
                high: literal_of(high, t)?,
                negated: *negated,
            })
        }
        Expr::InList(list) => {
            let (c, t) = column(&list.expr, schema)?;
            let values = list
                .list
                .iter()
                .map(|i| literal_of(i, t))
                .collect::<Option<Vec<_>>>()?;
            Some(Predicate::InList {
                expr: Operand::Column(c.to_owned()),
                list: values,
                negated: list.negated,
            })
        }
        Expr::IsNull(inner) | Expr::IsNotNull(inner) => {
            let (c, _) = column(inner, schema)?;
            Some(Predicate::IsNull {
                expr: Operand::Column(c.to_owned()),
                negated: matches!(e, Expr::IsNotNull(_)),
            })
        }
        _ => None,
    }
}

/// Maps a physical boolean expression (a top-k's dynamic filter, as it stands now) onto
/// the predicate tree, exactly or not at all. Dynamic filters are read at their current
/// value.
pub(crate) fn physical_to_predicate(e: &dyn PhysicalExpr, schema: &Schema) -> Option<Predicate> {
    use datafusion::physical_expr::expressions as px;
    if let Some(dynamic) = e.downcast_ref::<px::DynamicFilterPhysicalExpr>() {
        let current = dynamic.current().ok()?;
        return physical_to_predicate(current.as_ref(), schema);
    }
    let column = |e: &dyn PhysicalExpr| -> Option<(String, DataType)> {
        let c = e.downcast_ref::<px::Column>()?;
        let f = schema.field_with_name(c.name()).ok()?;
        Some((f.name().clone(), f.data_type().clone()))
    };
    let literal = |e: &dyn PhysicalExpr, t: &DataType| -> Option<Literal> {
        exact_literal(t, e.downcast_ref::<px::Literal>()?.value())
    };
    if let Some(b) = e.downcast_ref::<px::BinaryExpr>() {
        let (left, right) = (b.left().as_ref(), b.right().as_ref());
        return match b.op() {
            Operator::And | Operator::Or => {
                let parts = [
                    physical_to_predicate(left, schema)?,
                    physical_to_predicate(right, schema)?,
                ];
                let kind = if *b.op() == Operator::And {
                    Predicate::And
                } else {
                    Predicate::Or
                };
                Some(flatten(kind, parts))
            }
            op => {
                let op = cmp_op(*op)?;
                match (column(left), column(right)) {
                    (Some((l, lt)), None) => Some(Predicate::compare(&l, op, literal(right, &lt)?)),
                    (None, Some((r, rt))) => {
                        Some(Predicate::compare(&r, op.flipped(), literal(left, &rt)?))
                    }
                    _ => None,
                }
            }
        };
    }
    if let Some(c) = e.downcast_ref::<px::CaseExpr>() {
        // A partitioned hash join's filter: `CASE hash(key) % n WHEN i THEN <partition
        // i's keys> ...`. A row passes one branch at most, so the OR of all branches
        // (and the ELSE) lets through at least the rows the CASE does.
        let branches = c
            .when_then_expr()
            .iter()
            .map(|(_, then)| then)
            .chain(c.else_expr())
            .map(|b| physical_to_predicate(b.as_ref(), schema))
            .collect::<Option<Vec<_>>>()?;
        return Some(flatten(Predicate::Or, branches));
    }
    if let Some(l) = e.downcast_ref::<px::InListExpr>() {
        // A hash join's keys (DataFusion pushes a small build side as a list).
        let (c, t) = column(l.expr().as_ref())?;
        if l.len() > ringscan_ipc::msg::MAX_IN_LIST {
            return None;
        }
        let list: Option<Vec<Literal>> = l.list().iter().map(|v| literal(v.as_ref(), &t)).collect();
        return Some(Predicate::InList {
            expr: Operand::Column(c),
            list: list?,
            negated: l.negated(),
        });
    }
    if let Some(n) = e.downcast_ref::<px::IsNullExpr>() {
        let (c, _) = column(n.arg().as_ref())?;
        return Some(Predicate::IsNull {
            expr: Operand::Column(c),
            negated: false,
        });
    }
    if let Some(n) = e.downcast_ref::<px::IsNotNullExpr>() {
        let (c, _) = column(n.arg().as_ref())?;
        return Some(Predicate::IsNull {
            expr: Operand::Column(c),
            negated: true,
        });
    }
    if let Some(n) = e.downcast_ref::<px::NotExpr>() {
        return Some(Predicate::Not(Box::new(physical_to_predicate(
            n.arg().as_ref(),
            schema,
        )?)));
    }
    match e.downcast_ref::<px::Literal>()?.value() {
        // A dynamic filter before its first update is `true`.
        ScalarValue::Boolean(Some(true)) => Some(Predicate::And(Vec::new())),
        // A hash join partition without build rows.
        ScalarValue::Boolean(Some(false)) => Some(Predicate::Or(Vec::new())),
        _ => None,
    }
}

/// Renders a pushed predicate as SQL-like text (EXPLAIN).
pub(crate) fn format_predicate(p: &Predicate) -> String {
    let join = |v: &[Predicate], sep: &str| {
        let parts: Vec<String> = v.iter().map(format_predicate).collect();
        format!("({})", parts.join(sep))
    };
    let not = |n: bool| if n { "NOT " } else { "" };
    match p {
        Predicate::Compare { left, op, right } => {
            format!(
                "({} {} {})",
                fmt_operand(left),
                op.sql(),
                fmt_operand(right)
            )
        }
        Predicate::And(v) => join(v, " AND "),
        Predicate::Or(v) => join(v, " OR "),
        Predicate::Not(inner) => format!("(NOT {})", format_predicate(inner)),
        Predicate::InList {
            expr,
            list,
            negated,
        } => {
            let items: Vec<String> = list.iter().map(fmt_literal).collect();
            format!(
                "({} {}IN ({}))",
                fmt_operand(expr),
                not(*negated),
                items.join(", ")
            )
        }
        Predicate::Between {
            expr,
            low,
            high,
            negated,
        } => format!(
            "({} {}BETWEEN {} AND {})",
            fmt_operand(expr),
            not(*negated),
            fmt_literal(low),
            fmt_literal(high)
        ),
        Predicate::IsNull { expr, negated } => {
            format!("({} IS {}NULL)", fmt_operand(expr), not(*negated))
        }
    }
}

fn fmt_literal(l: &Literal) -> String {
    match l {
        Literal::Null => "NULL".into(),
        Literal::Bool(b) => (if *b { "TRUE" } else { "FALSE" }).into(),
        Literal::Int(v) => v.to_string(),
        Literal::UInt(v) => v.to_string(),
        Literal::Float(v) => format!("{v:?}"),
        Literal::Utf8(s) => format!("'{}'", s.replace('\'', "''")),
        Literal::Date32(d) => format!("DATE '{}'", crate::temporal::format_date(*d)),
        Literal::TimestampMicros(t) => {
            format!("TIMESTAMP '{}'", crate::temporal::format_timestamp(*t))
        }
    }
}

fn fmt_operand(o: &Operand) -> String {
    match o {
        Operand::Column(c) => c.clone(),
        Operand::Literal(l) => fmt_literal(l),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::Field;
    use datafusion::logical_expr::{col, lit};

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("i", DataType::Int32, true),
            Field::new("f", DataType::Float64, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("b", DataType::Boolean, true),
        ])
    }

    #[test]
    fn comparisons_map_when_the_literal_fits_the_column() {
        let s = schema();
        assert_eq!(
            to_predicate(&col("i").gt(lit(5i32)), &s),
            Some(Predicate::compare("i", CmpOp::Gt, Literal::Int(5)))
        );
        // Literal on the left: the operator flips.
        assert_eq!(
            to_predicate(&lit(5i32).lt(col("i")), &s),
            Some(Predicate::compare("i", CmpOp::Gt, Literal::Int(5)))
        );
        // A value the column cannot hold exactly is not pushed.
        assert_eq!(to_predicate(&col("i").gt(lit(1i64 << 40)), &s), None);
        assert_eq!(to_predicate(&col("i").gt(lit(1.5f64)), &s), None);
        assert_eq!(to_predicate(&col("s").eq(lit(1i32)), &s), None);
        // A cast column is not a column.
        let cast = Expr::Cast(datafusion::logical_expr::Cast::new(
            Box::new(col("i")),
            DataType::Float64,
        ));
        assert_eq!(to_predicate(&cast.gt(lit(1.5f64)), &s), None);
        // NaN and the infinities have no JSON form: the plan filters with them.
        assert_eq!(
            to_predicate(&col("f").gt(lit(0.5f64)), &s),
            Some(Predicate::compare("f", CmpOp::Gt, Literal::Float(0.5)))
        );
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(to_predicate(&col("f").lt(lit(v)), &s), None, "{v}");
            assert_eq!(to_predicate(&col("f").eq(lit(v as f32)), &s), None, "{v}");
        }
    }

    #[test]
    fn conjunctions_push_the_parts_they_can() {
        let s = schema();
        let upper = datafusion::functions::string::expr_fn::upper(col("s")).eq(lit("A"));
        let both = col("f").gt_eq(lit(1.0f64)).and(upper.clone());
        assert_eq!(
            push_filter(&both, &s),
            Pushed::Part(Predicate::compare("f", CmpOp::GtEq, Literal::Float(1.0)))
        );
        assert_eq!(push_filter(&upper, &s), Pushed::No);
        let or = col("f").gt(lit(1.0f64)).or(col("b"));
        assert!(matches!(push_filter(&or, &s), Pushed::Exact(Predicate::Or(v)) if v.len() == 2));
        // OR with an unmappable side cannot be pushed at all.
        assert_eq!(push_filter(&col("b").or(upper), &s), Pushed::No);
    }

    #[test]
    fn null_tests_between_and_in_lists() {
        let s = schema();
        assert_eq!(
            to_predicate(&col("s").is_not_null(), &s),
            Some(Predicate::IsNull {
                expr: Operand::Column("s".into()),
                negated: true
            })
        );
        let between = col("i").between(lit(1i32), lit(9i32));
        assert!(matches!(
            to_predicate(&between, &s),
            Some(Predicate::Between { negated: false, .. })
        ));
        let list = col("s").in_list(vec![lit("a"), lit("b")], true);
        assert!(matches!(
            to_predicate(&list, &s),
            Some(Predicate::InList { negated: true, ref list, .. }) if list.len() == 2
        ));
        // A NULL in the list is not pushed (NOT IN with NULL selects nothing).
        let with_null = col("s").in_list(vec![lit("a"), lit(ScalarValue::Utf8(None))], true);
        assert_eq!(to_predicate(&with_null, &s), None);
    }
}

#[cfg(test)]
mod physical_tests {
    use std::sync::Arc;

    use arrow_schema::{DataType, Field, Schema};
    use datafusion::common::ScalarValue;
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{
        binary, is_null, lit, Column, DynamicFilterPhysicalExpr,
    };
    use datafusion::physical_expr::PhysicalExpr;
    use ringscan_ipc::msg::{CmpOp, Literal, Operand, Predicate};

    use super::physical_to_predicate;

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
        ])
    }

    #[test]
    fn a_top_k_filter_maps_as_it_tightens() {
        let s = schema();
        let k: Arc<dyn PhysicalExpr> = Arc::new(Column::new("k", 0));
        let dynamic = DynamicFilterPhysicalExpr::new(vec![Arc::clone(&k)], lit(true));
        // Before the top-k has a threshold: true, nothing to prune with.
        assert_eq!(
            physical_to_predicate(&dynamic, &s),
            Some(Predicate::And(Vec::new()))
        );
        // NULLs first, ascending: `k IS NULL OR k < 3`.
        let lt = binary(Arc::clone(&k), Operator::Lt, lit(3i64), &s).unwrap();
        let tightened = binary(is_null(Arc::clone(&k)).unwrap(), Operator::Or, lt, &s).unwrap();
        dynamic.update(tightened).unwrap();
        assert_eq!(
            physical_to_predicate(&dynamic, &s),
            Some(Predicate::Or(vec![
                Predicate::IsNull {
                    expr: Operand::Column("k".into()),
                    negated: false,
                },
                Predicate::compare("k", CmpOp::Lt, Literal::Int(3)),
            ]))
        );
    }

    #[test]
    fn a_partitioned_hash_join_filter_maps_to_the_or_of_its_partitions() {
        use datafusion::physical_expr::expressions::{case, in_list};
        let s = schema();
        let k: Arc<dyn PhysicalExpr> = Arc::new(Column::new("k", 0));
        let keys = |v: &[i64]| {
            let list = v.iter().map(|&x| lit(x)).collect();
            in_list(Arc::clone(&k), list, &false, &s).unwrap()
        };
        let partition = binary(Arc::clone(&k), Operator::Modulo, lit(2i64), &s).unwrap();
        let filter = case(
            Some(partition),
            vec![(lit(0i64), keys(&[2, 4, 6])), (lit(1i64), lit(false))],
            Some(keys(&[7])),
        )
        .unwrap();
        let int_list = |v: &[i64]| Predicate::InList {
            expr: Operand::Column("k".into()),
            list: v.iter().map(|&x| Literal::Int(x)).collect(),
            negated: false,
        };
        assert_eq!(
            physical_to_predicate(filter.as_ref(), &s),
            // The empty partition's `false` adds nothing to the OR.
            Some(Predicate::Or(vec![int_list(&[2, 4, 6]), int_list(&[7])]))
        );
        // A branch the daemon cannot evaluate leaves the whole filter unmapped.
        let upper = binary(
            Arc::new(Column::new("s", 1)),
            Operator::LikeMatch,
            lit("a%"),
            &s,
        )
        .unwrap();
        let partition = binary(Arc::clone(&k), Operator::Modulo, lit(2i64), &s).unwrap();
        let filter = case(Some(partition), vec![(lit(0i64), upper)], None).unwrap();
        assert_eq!(physical_to_predicate(filter.as_ref(), &s), None);
    }

    #[test]
    fn what_the_daemon_cannot_evaluate_is_not_mapped() {
        let s = schema();
        let k: Arc<dyn PhysicalExpr> = Arc::new(Column::new("k", 0));
        // k + 1 < 3: arithmetic stays in DataFusion.
        let plus = binary(Arc::clone(&k), Operator::Plus, lit(1i64), &s).unwrap();
        let e = binary(plus, Operator::Lt, lit(3i64), &s).unwrap();
        assert_eq!(physical_to_predicate(e.as_ref(), &s), None);
        // A literal of another type than the column's is not compared as is.
        let e = binary(
            Arc::new(Column::new("s", 1)),
            Operator::Eq,
            lit(ScalarValue::Int64(Some(1))),
            &s,
        );
        if let Ok(e) = e {
            assert_eq!(physical_to_predicate(e.as_ref(), &s), None);
        }
    }
}
