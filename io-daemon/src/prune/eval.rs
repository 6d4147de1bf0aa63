//! Three-valued evaluation of a [`Predicate`] over a *set* of rows described only by
//! summaries (min, max, null count, row count).
//!
//! Each sub-expression evaluates to the set of SQL outcomes ([`Outcomes`]: TRUE, FALSE,
//! NULL) that *some* row of the set might produce. Leaves over-approximate; AND, OR and
//! NOT combine the sets as if the operands were independent, which can only add outcomes.
//! A set is pruned when TRUE is not among its outcomes. NOT needs the FALSE and NULL
//! outcomes too, which is why a plain "may match" bit is not enough.

use ringscan_ipc::scan_data::{CmpOp, Literal, Operand, Predicate};

/// The SQL outcomes a predicate may take on some row of a set of rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Outcomes(u8);

impl Outcomes {
    pub(crate) const NONE: Self = Self(0);
    pub(crate) const TRUE: Self = Self(1);
    pub(crate) const FALSE: Self = Self(2);
    pub(crate) const NULL: Self = Self(4);
    pub(crate) const ALL: Self = Self(7);
    /// TRUE or FALSE: a non-null value of unknown effect.
    pub(crate) const BOOL: Self = Self(3);

    pub(crate) fn has(self, other: Self) -> bool {
        self.0 & other.0 != 0
    }
    pub(crate) fn can_be_true(self) -> bool {
        self.has(Self::TRUE)
    }
    pub(crate) fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
    pub(crate) fn without(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }
    pub(crate) fn not(self) -> Self {
        let mut out = self.without(Self::BOOL);
        if self.has(Self::TRUE) {
            out = out.union(Self::FALSE);
        }
        if self.has(Self::FALSE) {
            out = out.union(Self::TRUE);
        }
        out
    }
    /// SQL AND (Kleene) of two independent operands.
    pub(crate) fn and(self, b: Self) -> Self {
        let a = self;
        if a == Self::NONE || b == Self::NONE {
            return Self::NONE;
        }
        let mut out = Self::NONE;
        if a.has(Self::TRUE) && b.has(Self::TRUE) {
            out = out.union(Self::TRUE);
        }
        if a.has(Self::FALSE) || b.has(Self::FALSE) {
            out = out.union(Self::FALSE);
        }
        let tn = Self::TRUE.union(Self::NULL);
        if (a.has(Self::NULL) && b.has(tn)) || (b.has(Self::NULL) && a.has(tn)) {
            out = out.union(Self::NULL);
        }
        out
    }
    /// SQL OR (Kleene) of two independent operands.
    pub(crate) fn or(self, b: Self) -> Self {
        self.not().and(b.not()).not()
    }
}

/// Where leaves get their facts: a row group, a page segment, a partition directory.
pub(crate) trait Stats {
    /// Outcomes of `column op lit` (lit may be NULL).
    fn compare(&self, column: &str, op: CmpOp, lit: &Literal) -> Outcomes;
    /// Outcomes of `column IS NULL`.
    fn is_null(&self, column: &str) -> Outcomes;
}

fn compare_operands(stats: &impl Stats, left: &Operand, op: CmpOp, right: &Operand) -> Outcomes {
    match (left, right) {
        (Operand::Column(c), Operand::Literal(l)) => stats.compare(c, op, l),
        (Operand::Literal(l), Operand::Column(c)) => stats.compare(c, op.flipped(), l),
        (Operand::Literal(Literal::Null), _) | (_, Operand::Literal(Literal::Null)) => {
            Outcomes::NULL
        }
        // Column vs column, or constant vs constant: not worth being clever about.
        _ => Outcomes::ALL,
    }
}

/// The outcomes `pred` may take on some row described by `stats`.
pub(crate) fn evaluate(pred: &Predicate, stats: &impl Stats) -> Outcomes {
    match pred {
        Predicate::Compare { left, op, right } => compare_operands(stats, left, *op, right),
        Predicate::And(v) => v
            .iter()
            .fold(Outcomes::TRUE, |acc, p| acc.and(evaluate(p, stats))),
        Predicate::Or(v) => v
            .iter()
            .fold(Outcomes::FALSE, |acc, p| acc.or(evaluate(p, stats))),
        Predicate::Not(p) => evaluate(p, stats).not(),
        Predicate::InList {
            expr,
            list,
            negated,
        } => {
            let out = if list.is_empty() {
                // Engines disagree on `NULL IN ()`; it is never TRUE.
                Outcomes::FALSE.union(Outcomes::NULL)
            } else {
                list.iter().fold(Outcomes::FALSE, |acc, lit| {
                    acc.or(compare_operands(
                        stats,
                        expr,
                        CmpOp::Eq,
                        &Operand::Literal(lit.clone()),
                    ))
                })
            };
            if *negated {
                out.not()
            } else {
                out
            }
        }
        Predicate::Between {
            expr,
            low,
            high,
            negated,
        } => {
            let low = compare_operands(stats, expr, CmpOp::GtEq, &Operand::Literal(low.clone()));
            let high = compare_operands(stats, expr, CmpOp::LtEq, &Operand::Literal(high.clone()));
            let out = low.and(high);
            if *negated {
                out.not()
            } else {
                out
            }
        }
        Predicate::IsNull { expr, negated } => {
            let out = match expr {
                Operand::Column(c) => stats.is_null(c),
                Operand::Literal(Literal::Null) => Outcomes::TRUE,
                Operand::Literal(_) => Outcomes::FALSE,
            };
            if *negated {
                out.not()
            } else {
                out
            }
        }
    }
}

#[cfg(test)]
#[cfg(test)]
mod tests {
    use super::*;
    use crate::prune::range::{ColumnKind, ColumnRange, Scalar};

    /// Kleene logic on single values, the reference for the set operations.
    fn kleene_and(a: Option<bool>, b: Option<bool>) -> Option<bool> {
        match (a, b) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (Some(true), Some(true)) => Some(true),
            _ => None,
        }
    }

    fn single(v: Option<bool>) -> Outcomes {
        match v {
            Some(true) => Outcomes::TRUE,
            Some(false) => Outcomes::FALSE,
            None => Outcomes::NULL,
        }
    }

    const VALUES: [Option<bool>; 3] = [Some(true), Some(false), None];

    #[test]
    fn set_operations_are_exact_on_singletons() {
        for a in VALUES {
            assert_eq!(single(a).not(), single(a.map(|x| !x)));
            for b in VALUES {
                assert_eq!(
                    single(a).and(single(b)),
                    single(kleene_and(a, b)),
                    "{a:?} AND {b:?}"
                );
                let or = kleene_and(a.map(|x| !x), b.map(|x| !x)).map(|x| !x);
                assert_eq!(single(a).or(single(b)), single(or), "{a:?} OR {b:?}");
            }
        }
    }

    #[test]
    fn set_operations_cover_every_combination() {
        for sa in 0..8u8 {
            for sb in 0..8u8 {
                let (a, b) = (Outcomes(sa), Outcomes(sb));
                for x in VALUES.iter().filter(|v| a.has(single(**v))) {
                    for y in VALUES.iter().filter(|v| b.has(single(**v))) {
                        assert!(a.and(b).has(single(kleene_and(*x, *y))));
                    }
                }
            }
        }
    }

    fn int_range(lo: i128, hi: i128) -> ColumnRange {
        ColumnRange {
            kind: ColumnKind::Int {
                min: i64::MIN.into(),
                max: i64::MAX.into(),
            },
            min: Some(Scalar::Int(lo)),
            max: Some(Scalar::Int(hi)),
            null_count: Some(0),
            row_count: Some(10),
            nan_count: None,
        }
    }

    struct One(ColumnRange);
    impl Stats for One {
        fn compare(&self, column: &str, op: CmpOp, lit: &Literal) -> Outcomes {
            if column == "x" {
                self.0.compare(op, lit)
            } else {
                Outcomes::ALL
            }
        }
        fn is_null(&self, column: &str) -> Outcomes {
            if column == "x" {
                self.0.is_null()
            } else {
                Outcomes::BOOL
            }
        }
    }

    #[test]
    fn tree_shapes() {
        let x = || Operand::Column("x".into());
        let lit = |v: i64| Literal::Int(v);
        let s = One(int_range(10, 20));
        let never = |p: &Predicate| !evaluate(p, &s).can_be_true();
        assert!(never(&Predicate::compare("x", CmpOp::Gt, lit(20))));
        assert!(!never(&Predicate::Not(Box::new(Predicate::compare(
            "x",
            CmpOp::Gt,
            lit(20)
        )))));
        // literal on the left: 25 < x  <=>  x > 25
        assert!(never(&Predicate::Compare {
            left: Operand::Literal(lit(25)),
            op: CmpOp::Lt,
            right: x()
        }));
        assert!(never(&Predicate::InList {
            expr: x(),
            list: vec![lit(1), lit(30)],
            negated: false
        }));
        assert!(!never(&Predicate::InList {
            expr: x(),
            list: vec![lit(1), lit(15)],
            negated: false
        }));
        // NOT IN with a NULL in the list is never true.
        let not_in_null = Predicate::InList {
            expr: x(),
            list: vec![lit(1), Literal::Null],
            negated: true,
        };
        assert!(never(&not_in_null));
        assert!(never(&Predicate::Between {
            expr: x(),
            low: lit(21),
            high: lit(30),
            negated: false
        }));
        assert!(never(&Predicate::Between {
            expr: x(),
            low: lit(0),
            high: lit(30),
            negated: true
        }));
        assert!(never(&Predicate::IsNull {
            expr: x(),
            negated: false
        }));
        assert!(never(&Predicate::Or(vec![])));
        assert!(!never(&Predicate::And(vec![])));
        assert!(never(&Predicate::And(vec![
            Predicate::compare("y", CmpOp::Eq, lit(1)),
            Predicate::compare("x", CmpOp::Lt, lit(0))
        ])));
        assert!(!never(&Predicate::Or(vec![
            Predicate::compare("y", CmpOp::Eq, lit(1)),
            Predicate::compare("x", CmpOp::Lt, lit(0))
        ])));
        // NOT(x = NULL) is still NULL, never true.
        assert!(never(&Predicate::Not(Box::new(Predicate::compare(
            "x",
            CmpOp::Eq,
            Literal::Null
        )))));
    }
}
