//! The split between the IO daemon and the executor: which WHERE conjuncts, columns and
//! limit go into the [`ScanRequest`], and which operators stay in the executor.
//!
//! Rules:
//! - WHERE is split into conjuncts (`a AND b AND c`); a conjunct is pushed when it maps
//!   onto [`Predicate`] exactly: column-vs-literal comparisons, column-vs-column
//!   comparisons of one type, BETWEEN / IN with literal bounds, IS [NOT] NULL, and
//!   AND / OR / NOT of those. A literal is pushed only when the column's type holds it
//!   exactly (no `int_col > 1.5`, no NULL literal, no date-vs-timestamp except a date
//!   against a µs timestamp column). Everything else is the residual filter.
//! - Projection: the table columns the executor needs after the scan (select list,
//!   residual, GROUP BY, aggregates, HAVING, ORDER BY), in schema order; columns used
//!   only by pushed conjuncts are not returned (the daemon reads them to filter).
//! - Limit and offset: pushed as they are only with no ORDER BY, no aggregation, no
//!   DISTINCT and no residual filter (the daemon's scan order is the query's order
//!   then). The daemon skips the offset's rows without sending them, and skips whole
//!   row groups of an unfiltered scan by their row counts without reading them (deep
//!   pagination); the executor's Limit keeps only the limit.

use std::fmt::Write as _;

use arrow_schema::{DataType, TimeUnit};
use ringscan_ipc::msg::{CmpOp, Literal, Operand, Predicate, ScanRequest, ScanSource};

use crate::bind::{LogicalPlan, OutputColumn, SortKey};
use crate::expr::{BinaryOp, Expr, ScalarValue};

/// One executor operator, in execution order after the scan.
#[derive(Debug, Clone, PartialEq)]
pub enum Operator {
    /// Keep rows where the expression is true (the residual WHERE).
    Filter(Expr),
    /// Hash aggregation.
    Aggregate {
        /// Group keys (empty: one group).
        group_by: Vec<Expr>,
        /// Aggregate calls.
        aggregates: Vec<Expr>,
    },
    /// Keep groups where the expression is true.
    Having(Expr),
    /// Full sort.
    Sort(Vec<SortKey>),
    /// ORDER BY + LIMIT: keep the first `k` rows by `keys` (`k` = limit + offset).
    TopK {
        /// Sort keys.
        keys: Vec<SortKey>,
        /// Rows kept.
        k: u64,
    },
    /// Compute the select list.
    Project(Vec<OutputColumn>),
    /// Remove duplicate rows.
    Distinct,
    /// Skip `offset` rows, then keep at most `limit`.
    Limit {
        /// Rows skipped.
        offset: u64,
        /// Rows kept (`None`: all).
        limit: Option<u64>,
    },
}

/// A planned query: the scan to request and the work left to the executor.
#[derive(Debug, Clone, PartialEq)]
pub struct PhysicalPlan {
    /// The bound query.
    pub logical: LogicalPlan,
    /// What to ask the daemon for.
    pub scan: ScanRequest,
    /// WHERE conjuncts pushed into `scan.predicate`.
    pub pushed: Vec<Expr>,
    /// WHERE conjuncts evaluated by the executor.
    pub residual: Vec<Expr>,
    /// Why the limit was not pushed (`None` when pushed or when there is no limit).
    pub limit_kept_because: Option<&'static str>,
    /// Executor operators after the scan, in order.
    pub operators: Vec<Operator>,
}

/// Splits `plan` between the daemon and the executor.
pub fn physical_plan(plan: LogicalPlan) -> PhysicalPlan {
    let mut pushed = Vec::new();
    let mut residual = Vec::new();
    let mut predicates = Vec::new();
    if let Some(filter) = &plan.filter {
        for c in filter.conjuncts() {
            match to_predicate(c, &plan) {
                Some(p) => {
                    predicates.push(p);
                    pushed.push(c.clone());
                }
                None => residual.push(c.clone()),
            }
        }
    }
    let page_kept_because = if !plan.order_by.is_empty() {
        Some("ORDER BY")
    } else if plan.is_aggregate() {
        Some("aggregation")
    } else if plan.distinct {
        Some("DISTINCT")
    } else if !residual.is_empty() {
        Some("residual filter")
    } else {
        None
    };
    let limit_kept_because = if plan.limit.is_some() || plan.offset > 0 {
        page_kept_because
    } else {
        None
    };
    let page_pushed = page_kept_because.is_none();
    let mut scan = ScanRequest::new(plan.source.clone());
    scan.projection = Some(needed_columns(&plan, &residual));
    scan.predicate = match predicates.len() {
        0 => None,
        1 => predicates.pop(),
        _ => Some(Predicate::And(predicates)),
    };
    if page_pushed {
        scan.limit = plan.limit;
        scan.offset = plan.offset;
    }
    // Dropping a scan row equal to one already sent never changes the distinct rows of
    // anything computed from the rows one by one (the residual filter, the projection):
    // the daemon drops them where it reads, and DISTINCT here still decides.
    scan.distinct = plan.distinct && !plan.is_aggregate();
    let operators = operators(&plan, &residual, page_pushed);
    PhysicalPlan {
        logical: plan,
        scan,
        pushed,
        residual,
        limit_kept_because,
        operators,
    }
}

/// The executor's operators; `page_pushed`: the daemon applies the offset (and limit).
fn operators(plan: &LogicalPlan, residual: &[Expr], page_pushed: bool) -> Vec<Operator> {
    let mut ops = Vec::new();
    if let Some(f) = Expr::and_all(residual.to_vec()) {
        ops.push(Operator::Filter(f));
    }
    if plan.is_aggregate() {
        ops.push(Operator::Aggregate {
            group_by: plan.group_by.clone(),
            aggregates: plan.aggregates.clone(),
        });
    }
    if let Some(h) = &plan.having {
        ops.push(Operator::Having(h.clone()));
    }
    let sort = if plan.order_by.is_empty() {
        None
    } else if let Some(limit) = plan.limit {
        Some(Operator::TopK {
            keys: plan.order_by.clone(),
            k: limit.saturating_add(plan.offset),
        })
    } else {
        Some(Operator::Sort(plan.order_by.clone()))
    };
    // Sort keys are expressions over the pre-projection row; after DISTINCT they are
    // select items (checked by the binder), so the sort can follow it.
    if !plan.distinct {
        ops.extend(sort.clone());
    }
    ops.push(Operator::Project(plan.projection.clone()));
    if plan.distinct {
        ops.push(Operator::Distinct);
        ops.extend(sort);
    }
    let offset = if page_pushed { 0 } else { plan.offset };
    if plan.limit.is_some() || offset > 0 {
        // With the page pushed, still the cut that ends the scan once the page is full.
        ops.push(Operator::Limit {
            offset,
            limit: plan.limit,
        });
    }
    ops
}

fn needed_columns<'a>(plan: &'a LogicalPlan, residual: &'a [Expr]) -> Vec<String> {
    let mut used: Vec<&str> = Vec::new();
    let mut add = |e: &'a Expr| {
        for c in e.columns() {
            if !used.contains(&c) {
                used.push(c);
            }
        }
    };
    plan.projection.iter().for_each(|c| add(&c.expr));
    residual.iter().for_each(&mut add);
    plan.group_by.iter().for_each(&mut add);
    plan.aggregates.iter().for_each(&mut add);
    plan.having.iter().for_each(&mut add);
    plan.order_by.iter().for_each(|k| add(&k.expr));
    plan.table_schema
        .fields()
        .iter()
        .filter(|f| used.contains(&f.name().as_str()))
        .map(|f| f.name().clone())
        .collect()
}

fn column_type<'a>(plan: &'a LogicalPlan, e: &Expr) -> Option<(&'a str, &'a DataType)> {
    match e {
        Expr::Column(c) => plan
            .table_schema
            .field_with_name(c)
            .ok()
            .map(|f| (f.name().as_str(), f.data_type())),
        _ => None,
    }
}

fn cmp_op(op: BinaryOp) -> Option<CmpOp> {
    Some(match op {
        BinaryOp::Eq => CmpOp::Eq,
        BinaryOp::NotEq => CmpOp::NotEq,
        BinaryOp::Lt => CmpOp::Lt,
        BinaryOp::LtEq => CmpOp::LtEq,
        BinaryOp::Gt => CmpOp::Gt,
        BinaryOp::GtEq => CmpOp::GtEq,
        _ => return None,
    })
}

/// The literal as the daemon will see it, when `column_type` holds it exactly.
pub(crate) fn exact_literal(column_type: &DataType, v: &ScalarValue) -> Option<Literal> {
    use DataType as D;
    const F64_EXACT: i64 = 1 << 53;
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
            D::Float64 => (-i128::from(F64_EXACT), i128::from(F64_EXACT)),
            _ => return false,
        };
        (lo..=hi).contains(&i)
    };
    match (column_type, v) {
        (_, ScalarValue::Int64(i)) if int_fits((*i).into()) => Some(Literal::Int(*i)),
        (_, ScalarValue::UInt64(u)) if int_fits((*u).into()) => Some(Literal::UInt(*u)),
        (D::Float64, ScalarValue::Float64(f)) => Some(Literal::Float(*f)),
        (D::Float32, ScalarValue::Float64(f)) if f64::from(*f as f32) == *f => {
            Some(Literal::Float(*f))
        }
        (D::Utf8 | D::LargeUtf8 | D::Utf8View, ScalarValue::Utf8(s)) => {
            Some(Literal::Utf8(s.clone()))
        }
        (D::Boolean, ScalarValue::Bool(b)) => Some(Literal::Bool(*b)),
        (D::Date32, ScalarValue::Date32(d)) => Some(Literal::Date32(*d)),
        (D::Timestamp(TimeUnit::Microsecond, _), ScalarValue::TimestampMicros(t)) => {
            Some(Literal::TimestampMicros(*t))
        }
        (D::Timestamp(TimeUnit::Microsecond, _), ScalarValue::Date32(d)) => {
            Some(Literal::TimestampMicros(i64::from(*d) * 86_400_000_000))
        }
        _ => None,
    }
}

fn literal_for(plan: &LogicalPlan, column: &Expr, e: &Expr) -> Option<Literal> {
    let (_, t) = column_type(plan, column)?;
    match e {
        Expr::Literal(v) => exact_literal(t, v),
        _ => None,
    }
}

/// Maps a bound boolean expression onto the daemon's predicate tree, exactly or not at all.
pub(crate) fn to_predicate(e: &Expr, plan: &LogicalPlan) -> Option<Predicate> {
    match e {
        Expr::Binary {
            left,
            op: BinaryOp::And,
            right,
        } => {
            let mut v = Vec::new();
            for c in [left, right] {
                match to_predicate(c, plan)? {
                    Predicate::And(inner) => v.extend(inner),
                    p => v.push(p),
                }
            }
            Some(Predicate::And(v))
        }
        Expr::Binary {
            left,
            op: BinaryOp::Or,
            right,
        } => {
            let mut v = Vec::new();
            for c in [left, right] {
                match to_predicate(c, plan)? {
                    Predicate::Or(inner) => v.extend(inner),
                    p => v.push(p),
                }
            }
            Some(Predicate::Or(v))
        }
        Expr::Binary { left, op, right } => {
            let op = cmp_op(*op)?;
            match (column_type(plan, left), column_type(plan, right)) {
                (Some((l, lt)), Some((r, rt))) if lt == rt => Some(Predicate::Compare {
                    left: Operand::Column(l.to_owned()),
                    op,
                    right: Operand::Column(r.to_owned()),
                }),
                (Some((l, _)), None) => {
                    Some(Predicate::compare(l, op, literal_for(plan, left, right)?))
                }
                (None, Some((r, _))) => Some(Predicate::compare(
                    r,
                    op.flipped(),
                    literal_for(plan, right, left)?,
                )),
                _ => None,
            }
        }
        Expr::Not(inner) => Some(Predicate::Not(Box::new(to_predicate(inner, plan)?))),
        Expr::Between {
            expr,
            low,
            high,
            negated,
        } => {
            let (c, _) = column_type(plan, expr)?;
            Some(Predicate::Between {
                expr: Operand::Column(c.to_owned()),
                low: literal_for(plan, expr, low)?,
                high: literal_for(plan, expr, high)?,
                negated: *negated,
            })
        }
        Expr::InList {
            expr,
            list,
            negated,
        } => {
            let (c, _) = column_type(plan, expr)?;
            let list = list
                .iter()
                .map(|i| literal_for(plan, expr, i))
                .collect::<Option<Vec<_>>>()?;
            Some(Predicate::InList {
                expr: Operand::Column(c.to_owned()),
                list,
                negated: *negated,
            })
        }
        Expr::IsNull { expr, negated } => {
            let (c, _) = column_type(plan, expr)?;
            Some(Predicate::IsNull {
                expr: Operand::Column(c.to_owned()),
                negated: *negated,
            })
        }
        _ => None,
    }
}

fn fmt_literal(l: &Literal) -> String {
    let scalar = match l {
        Literal::Null => ScalarValue::Null,
        Literal::Bool(b) => ScalarValue::Bool(*b),
        Literal::Int(i) => ScalarValue::Int64(*i),
        Literal::UInt(u) => ScalarValue::UInt64(*u),
        Literal::Float(f) => ScalarValue::Float64(*f),
        Literal::Utf8(s) => ScalarValue::Utf8(s.clone()),
        Literal::Date32(d) => ScalarValue::Date32(*d),
        Literal::TimestampMicros(t) => ScalarValue::TimestampMicros(*t),
    };
    scalar.to_string()
}

fn fmt_operand(o: &Operand) -> String {
    match o {
        Operand::Column(c) => c.clone(),
        Operand::Literal(l) => fmt_literal(l),
    }
}

/// Renders a pushed predicate as SQL-like text.
pub fn format_predicate(p: &Predicate) -> String {
    let join = |v: &[Predicate], sep: &str| {
        let parts: Vec<String> = v.iter().map(format_predicate).collect();
        format!("({})", parts.join(sep))
    };
    let not = |n: bool| if n { "NOT " } else { "" };
    match p {
        Predicate::Compare { left, op, right } => {
            let op = match op {
                CmpOp::Eq => "=",
                CmpOp::NotEq => "<>",
                CmpOp::Lt => "<",
                CmpOp::LtEq => "<=",
                CmpOp::Gt => ">",
                CmpOp::GtEq => ">=",
            };
            format!("({} {op} {})", fmt_operand(left), fmt_operand(right))
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

fn fmt_keys(keys: &[SortKey]) -> String {
    let parts: Vec<String> = keys
        .iter()
        .map(|k| {
            let dir = if k.descending { "DESC" } else { "ASC" };
            let nulls = if k.nulls_first { "FIRST" } else { "LAST" };
            format!("{} {dir} NULLS {nulls}", k.expr)
        })
        .collect();
    parts.join(", ")
}

fn fmt_list(v: &[Expr]) -> String {
    let parts: Vec<String> = v.iter().map(ToString::to_string).collect();
    format!("[{}]", parts.join(", "))
}

impl PhysicalPlan {
    /// The text `EXPLAIN` prints: the scan with what is pushed, then executor operators.
    pub fn explain(&self) -> String {
        let mut s = String::new();
        let source = match &self.scan.source {
            ScanSource::Table { name } => format!("table {name}"),
            ScanSource::Files { paths } => {
                let p: Vec<String> = paths.iter().map(|p| format!("'{}'", p.display())).collect();
                format!("files {}", p.join(", "))
            }
        };
        let _ = writeln!(s, "Scan {source} (IO daemon)");
        let projection = self.scan.projection.as_deref().unwrap_or_default();
        let _ = writeln!(s, "  pushed projection: [{}]", projection.join(", "));
        let predicate = self
            .scan
            .predicate
            .as_ref()
            .map_or("none".into(), format_predicate);
        let _ = writeln!(s, "  pushed predicate: {predicate}");
        let limit = match (self.scan.limit, self.limit_kept_because) {
            (Some(l), _) => l.to_string(),
            (None, Some(why)) => format!("none (kept in executor: {why})"),
            (None, None) => "none".into(),
        };
        let _ = writeln!(s, "  pushed limit: {limit}");
        if self.scan.offset > 0 {
            let _ = writeln!(s, "  pushed offset: {}", self.scan.offset);
        }
        if self.scan.distinct {
            let _ = writeln!(s, "  pushed distinct: duplicate rows dropped per row group");
        }
        let _ = writeln!(s, "Executor");
        for op in &self.operators {
            let line = match op {
                Operator::Filter(e) => format!("Filter (residual): {e}"),
                Operator::Aggregate {
                    group_by,
                    aggregates,
                } => format!(
                    "HashAggregate: group_by={} aggregates={}",
                    fmt_list(group_by),
                    fmt_list(aggregates)
                ),
                Operator::Having(e) => format!("Filter (HAVING): {e}"),
                Operator::Sort(keys) => format!("Sort: {}", fmt_keys(keys)),
                Operator::TopK { keys, k } => format!("TopK: k={k} by {}", fmt_keys(keys)),
                Operator::Project(cols) => {
                    let parts: Vec<String> = cols
                        .iter()
                        .map(|c| format!("{} AS \"{}\" ({})", c.expr, c.name, c.data_type))
                        .collect();
                    format!("Project: {}", parts.join(", "))
                }
                Operator::Distinct => "Distinct".into(),
                Operator::Limit { offset, limit } => {
                    let l = limit.map_or("all".into(), |l| l.to_string());
                    format!("Limit: offset={offset} limit={l}")
                }
            };
            let _ = writeln!(s, "  {line}");
        }
        s
    }

    /// The `EXPLAIN` lines of top-k late materialization ([`topk_prepass`]), when the
    /// plan qualifies.
    ///
    /// [`topk_prepass`]: Self::topk_prepass
    pub fn explain_topk_late(&self) -> Option<String> {
        let first = self.topk_prepass()?;
        let key = match first.operators.last() {
            Some(Operator::TopK { keys, .. }) => fmt_keys(keys),
            _ => String::new(),
        };
        let columns = first.scan.projection.as_deref().unwrap_or_default();
        Some(format!(
            "Top-k late materialization\n  first scan: [{}] only, to find the k-th row by \
             {key}\n  then the scan above, with the k-th key pushed as a bound\n",
            columns.join(", ")
        ))
    }

    /// Top-k late materialization: for `ORDER BY c ... LIMIT k` (no aggregation, no
    /// DISTINCT before the top-k, `c` a table column) over rows with more than twice as
    /// many columns as `c` and the residual filter need, the plan of a first scan that
    /// reads only those columns and keeps the top `k` by `c` alone. Its k-th value `t`
    /// then bounds the real scan (`c >= t` descending, `c <= t` ascending; see
    /// [`Execution::topk_threshold`](crate::exec::Execution::topk_threshold)), so the
    /// daemon prunes row groups and pages by it and decodes the other columns only for
    /// rows that can be in the result. `None` when the plan does not qualify.
    pub fn topk_prepass(&self) -> Option<PhysicalPlan> {
        let mut operators = Vec::new();
        let (keys, k) = loop {
            match self.operators.get(operators.len())? {
                Operator::Filter(e) => operators.push(Operator::Filter(e.clone())),
                Operator::TopK { keys, k } => break (keys, *k),
                _ => return None,
            }
        };
        if k == 0 || k > TOPK_PREPASS_MAX_K {
            return None;
        }
        let first = keys.first()?;
        let Expr::Column(key) = &first.expr else {
            return None;
        };
        self.logical.table_schema.field_with_name(key).ok()?;
        let mut columns = vec![key.clone()];
        for c in self.residual.iter().flat_map(Expr::columns) {
            if !columns.iter().any(|x| x == c) {
                columns.push(c.to_owned());
            }
        }
        let all = self
            .scan
            .projection
            .as_ref()
            .map_or(self.logical.table_schema.fields().len(), Vec::len);
        if columns.len() * 2 >= all {
            return None;
        }
        let mut scan = self.scan.clone();
        scan.projection = Some(
            self.logical
                .table_schema
                .fields()
                .iter()
                .map(|f| f.name())
                .filter(|n| columns.contains(n))
                .cloned()
                .collect(),
        );
        scan.limit = None;
        scan.offset = 0;
        operators.push(Operator::TopK {
            keys: vec![first.clone()],
            k,
        });
        Some(PhysicalPlan {
            logical: self.logical.clone(),
            scan,
            pushed: self.pushed.clone(),
            residual: self.residual.clone(),
            limit_kept_because: self.limit_kept_because,
            operators,
        })
    }

    /// Whether the executor keeps only a bounded part of what the scan sends (an
    /// aggregation's groups, a top-k's candidates) rather than the rows themselves: the
    /// scan then needs only a small ring, which it wraps around, instead of one large
    /// enough to hold a result zero-copy.
    pub fn consumes_scan(&self) -> bool {
        self.operators
            .iter()
            .any(|op| matches!(op, Operator::Aggregate { .. } | Operator::TopK { .. }))
    }
}

/// Largest `k` for which a top-k first finds its k-th key in a scan of its own
/// ([`PhysicalPlan::topk_prepass`]).
pub(crate) const TOPK_PREPASS_MAX_K: u64 = 65_536;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_push_only_when_exact() {
        let int = ScalarValue::Int64;
        assert_eq!(
            exact_literal(&DataType::Int32, &int(7)),
            Some(Literal::Int(7))
        );
        assert_eq!(exact_literal(&DataType::Int32, &int(1 << 40)), None);
        assert_eq!(exact_literal(&DataType::UInt64, &int(-1)), None);
        assert_eq!(
            exact_literal(&DataType::Int64, &ScalarValue::Float64(1.5)),
            None
        );
        assert_eq!(exact_literal(&DataType::Float64, &int(1 << 54)), None);
        assert_eq!(exact_literal(&DataType::Utf8, &ScalarValue::Null), None);
        assert_eq!(
            exact_literal(&DataType::Date32, &ScalarValue::TimestampMicros(0)),
            None
        );
        let us = DataType::Timestamp(TimeUnit::Microsecond, None);
        let day = ScalarValue::Date32(1);
        assert_eq!(
            exact_literal(&us, &day),
            Some(Literal::TimestampMicros(86_400_000_000))
        );
        let ns = DataType::Timestamp(TimeUnit::Nanosecond, None);
        assert_eq!(exact_literal(&ns, &ScalarValue::TimestampMicros(0)), None);
    }
}
