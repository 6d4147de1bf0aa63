//! Column ranges: what statistics say about one column over a set of rows, and the
//! outcomes of `column op literal` over every value such a range admits.
//!
//! Floats compare by the workspace's one rule ([`ringscan_values::float`], DuckDB's):
//! `-0.0 = 0.0`, every NaN equal to every other and above +infinity. Statistics leave
//! NaNs out of min/max (and parquet 59 reads no NaN counts), so a range of a float column
//! stands for its min..max *and*, unless a NaN count of zero says otherwise, NaN rows:
//! a row group whose NaNs the predicate selects is never pruned.

use arrow_schema::TimeUnit;
use ringscan_ipc::scan_data::{CmpOp, Literal};
use ringscan_values::float::cmp_f64;

use super::eval::Outcomes;

/// A statistics value, already decoded to the column's logical meaning.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scalar {
    Bool(bool),
    /// Any integer, signed or unsigned, or a date / timestamp in the column's unit.
    Int(i128),
    Float(f64),
    /// Strings, compared bytewise (unsigned), as Parquet and Arrow both order them.
    Bytes(Vec<u8>),
}

/// How literals are converted to compare with a column's statistics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ColumnKind {
    Bool,
    /// An integer type with the inclusive range of its values.
    Int {
        min: i128,
        max: i128,
    },
    Float32,
    Float64,
    Utf8,
    Date32,
    Timestamp(TimeUnit),
    /// Anything else (decimals, binary, nested, INT96...): never pruned on.
    Other,
}

/// Exact conversion of a literal to a value comparable with a column's statistics;
/// `None` when the conversion is not exact (or not defined), so the caller says "maybe".
pub(crate) fn literal_to_scalar(kind: ColumnKind, lit: &Literal) -> Option<Scalar> {
    // Beyond 2^53 (2^24 for f32) float <-> int casts round, and the executor could compare
    // in either domain.
    const F64_EXACT: i128 = 1 << 53;
    const F32_EXACT: i128 = 1 << 24;
    let int_lit = match lit {
        Literal::Int(v) => Some(i128::from(*v)),
        Literal::UInt(v) => Some(i128::from(*v)),
        _ => None,
    };
    match (kind, lit) {
        (ColumnKind::Bool, Literal::Bool(b)) => Some(Scalar::Bool(*b)),
        (ColumnKind::Int { min, max }, _) => {
            let v = match (int_lit, lit) {
                (Some(v), _) => v,
                (None, Literal::Float(f))
                    if f.is_finite() && f.fract() == 0.0 && f.abs() < F64_EXACT as f64 =>
                {
                    *f as i128
                }
                _ => return None,
            };
            (min..=max).contains(&v).then_some(Scalar::Int(v))
        }
        (ColumnKind::Float64 | ColumnKind::Float32, Literal::Float(f)) if f.is_nan() => {
            Some(Scalar::Float(f64::NAN))
        }
        (ColumnKind::Float64, Literal::Float(f)) => Some(Scalar::Float(*f)),
        (ColumnKind::Float32, Literal::Float(f)) => {
            (f64::from(*f as f32) == *f).then_some(Scalar::Float(*f))
        }
        (ColumnKind::Float64 | ColumnKind::Float32, _) => {
            let limit = if kind == ColumnKind::Float64 {
                F64_EXACT
            } else {
                F32_EXACT
            };
            let v = int_lit?;
            (v.abs() <= limit).then_some(Scalar::Float(v as f64))
        }
        (ColumnKind::Utf8, Literal::Utf8(s)) => Some(Scalar::Bytes(s.as_bytes().to_vec())),
        (ColumnKind::Date32, Literal::Date32(d)) => Some(Scalar::Int(i128::from(*d))),
        (ColumnKind::Timestamp(unit), Literal::TimestampMicros(us)) => {
            let us = i128::from(*us);
            let v = match unit {
                TimeUnit::Second => (us % 1_000_000 == 0).then_some(us / 1_000_000)?,
                TimeUnit::Millisecond => (us % 1_000 == 0).then_some(us / 1_000)?,
                TimeUnit::Microsecond => us,
                TimeUnit::Nanosecond => us * 1_000,
            };
            // The column stores i64; a literal outside it cannot be cast to the column.
            (i128::from(i64::MIN)..=i128::from(i64::MAX))
                .contains(&v)
                .then_some(Scalar::Int(v))
        }
        _ => None,
    }
}

/// What is known about one column over a set of rows. Bounds are bounds, not
/// necessarily values present (truncated byte-array statistics are only bounds).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ColumnRange {
    pub(crate) kind: ColumnKind,
    pub(crate) min: Option<Scalar>,
    pub(crate) max: Option<Scalar>,
    pub(crate) null_count: Option<u64>,
    pub(crate) row_count: Option<u64>,
    /// Float columns only: NaNs are outside min/max; `Some(0)` is the only useful value.
    pub(crate) nan_count: Option<u64>,
}

impl ColumnRange {
    /// Nothing known.
    pub(crate) fn unknown(kind: ColumnKind) -> Self {
        Self {
            kind,
            min: None,
            max: None,
            null_count: None,
            row_count: None,
            nan_count: None,
        }
    }

    fn may_be_null(&self) -> bool {
        self.null_count != Some(0)
    }

    fn may_be_non_null(&self) -> bool {
        match (self.null_count, self.row_count) {
            (Some(nulls), Some(rows)) => nulls < rows,
            (_, Some(0)) => false,
            _ => true,
        }
    }

    /// Outcomes of `column IS NULL`.
    pub(crate) fn is_null(&self) -> Outcomes {
        let mut out = Outcomes::NONE;
        if self.may_be_null() {
            out = out.union(Outcomes::TRUE);
        }
        if self.may_be_non_null() {
            out = out.union(Outcomes::FALSE);
        }
        out
    }

    /// Outcomes of `column op lit`.
    pub(crate) fn compare(&self, op: CmpOp, lit: &Literal) -> Outcomes {
        if *lit == Literal::Null {
            return Outcomes::NULL;
        }
        let mut out = Outcomes::NONE;
        if self.may_be_null() {
            out = out.union(Outcomes::NULL);
        }
        if self.may_be_non_null() {
            out = out.union(self.compare_values(op, lit));
        }
        out
    }

    fn compare_values(&self, op: CmpOp, lit: &Literal) -> Outcomes {
        let Some(c) = literal_to_scalar(self.kind, lit) else {
            return Outcomes::BOOL;
        };
        let is_float = matches!(self.kind, ColumnKind::Float32 | ColumnKind::Float64);
        let mut out = match (&self.min, &self.max) {
            (Some(lo), Some(hi)) => range_outcomes(lo, hi, op, &c).unwrap_or(Outcomes::BOOL),
            _ => Outcomes::BOOL,
        };
        if let (true, Scalar::Float(c)) = (is_float, &c) {
            if self.nan_count != Some(0) {
                // NaN rows, outside min/max: the one rule says what they make of `op c`.
                out = out.union(if op.holds(cmp_f64(f64::NAN, *c)) {
                    Outcomes::TRUE
                } else {
                    Outcomes::FALSE
                });
            }
        }
        out
    }
}

/// The ordering of `x` vs `c`, as a one-hot set.
fn orderings(x: &Scalar, c: &Scalar) -> Option<[bool; 3]> {
    let ord = match (x, c) {
        (Scalar::Bool(a), Scalar::Bool(b)) => a.cmp(b),
        (Scalar::Int(a), Scalar::Int(b)) => a.cmp(b),
        (Scalar::Bytes(a), Scalar::Bytes(b)) => a.cmp(b),
        (Scalar::Float(a), Scalar::Float(b)) => cmp_f64(*a, *b),
        _ => return None,
    };
    let mut set = [false; 3];
    set[(ord as i8 + 1) as usize] = true;
    Some(set)
}

const LT: usize = 0;
const EQ: usize = 1;
const GT: usize = 2;

/// Outcomes of `x op c` for non-null `x` with `lo <= x <= hi`; `None` if unusable
/// (NaN bounds, which writers order differently, mismatched types, `lo > hi`).
fn range_outcomes(lo: &Scalar, hi: &Scalar, op: CmpOp, c: &Scalar) -> Option<Outcomes> {
    let nan = |s: &Scalar| matches!(s, Scalar::Float(f) if f.is_nan());
    if nan(lo) || nan(hi) {
        return None;
    }
    if orderings(lo, hi)? == [false, false, true] {
        return None; // min > max: corrupt statistics
    }
    let l = orderings(lo, c)?;
    let h = orderings(hi, c)?;
    let (t, f) = match op {
        CmpOp::Lt => (l[LT], h[EQ] || h[GT]),
        CmpOp::LtEq => (l[LT] || l[EQ], h[GT]),
        CmpOp::Gt => (h[GT], l[LT] || l[EQ]),
        CmpOp::GtEq => (h[GT] || h[EQ], l[LT]),
        CmpOp::Eq | CmpOp::NotEq => {
            let t = (l[LT] || l[EQ]) && (h[GT] || h[EQ]);
            let all_equal = l == [false, true, false] && h == [false, true, false];
            if op == CmpOp::Eq {
                (t, !all_equal)
            } else {
                (!all_equal, t)
            }
        }
    };
    let mut out = Outcomes::NONE;
    if t {
        out = out.union(Outcomes::TRUE);
    }
    if f {
        out = out.union(Outcomes::FALSE);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering;

    fn single(v: bool) -> Outcomes {
        if v {
            Outcomes::TRUE
        } else {
            Outcomes::FALSE
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

    const OPS: [CmpOp; 6] = [
        CmpOp::Eq,
        CmpOp::NotEq,
        CmpOp::Lt,
        CmpOp::LtEq,
        CmpOp::Gt,
        CmpOp::GtEq,
    ];

    fn apply(op: CmpOp, o: Ordering) -> bool {
        match op {
            CmpOp::Eq => o.is_eq(),
            CmpOp::NotEq => o.is_ne(),
            CmpOp::Lt => o.is_lt(),
            CmpOp::LtEq => o.is_le(),
            CmpOp::Gt => o.is_gt(),
            CmpOp::GtEq => o.is_ge(),
        }
    }

    #[test]
    fn int_ranges_are_exact_for_every_value_in_them() {
        for lo in -3..=3i128 {
            for hi in lo..=3 {
                for c in -4..=4i64 {
                    for op in OPS {
                        let got = int_range(lo, hi).compare(op, &Literal::Int(c));
                        let mut want = Outcomes::NONE;
                        for x in lo..=hi {
                            want = want.union(single(apply(op, x.cmp(&c.into()))));
                        }
                        assert_eq!(got, want, "[{lo},{hi}] {op:?} {c}");
                    }
                }
            }
        }
    }

    #[test]
    fn nulls_and_null_literals() {
        let mut r = int_range(1, 5);
        assert_eq!(r.compare(CmpOp::Eq, &Literal::Null), Outcomes::NULL);
        r.null_count = None;
        assert!(r.compare(CmpOp::Gt, &Literal::Int(9)).has(Outcomes::NULL));
        assert!(!r.compare(CmpOp::Gt, &Literal::Int(9)).can_be_true());
        r.null_count = Some(10);
        assert_eq!(r.compare(CmpOp::Lt, &Literal::Int(9)), Outcomes::NULL);
        assert_eq!(r.is_null(), Outcomes::TRUE);
        r.row_count = None;
        assert_eq!(r.is_null(), Outcomes::BOOL);
    }

    #[test]
    fn missing_or_unusable_statistics_are_maybe() {
        let mut r = int_range(1, 5);
        r.max = None;
        assert!(r.compare(CmpOp::Gt, &Literal::Int(9)).can_be_true());
        let mut r = int_range(5, 1); // corrupt: min > max
        r.null_count = Some(0);
        assert!(r.compare(CmpOp::Eq, &Literal::Int(3)).can_be_true());
        let r = int_range(1, 5);
        assert!(r
            .compare(CmpOp::Gt, &Literal::Utf8("9".into()))
            .can_be_true());
    }

    fn float_range(lo: f64, hi: f64, nan_count: Option<u64>) -> ColumnRange {
        ColumnRange {
            kind: ColumnKind::Float64,
            min: Some(Scalar::Float(lo)),
            max: Some(Scalar::Float(hi)),
            null_count: Some(0),
            row_count: Some(10),
            nan_count,
        }
    }

    #[test]
    fn floats_nan_and_signed_zeros() {
        let gt = |r: &ColumnRange, c: f64| r.compare(CmpOp::Gt, &Literal::Float(c)).can_be_true();
        let can = |r: &ColumnRange, op: CmpOp, c: f64| r.compare(op, &Literal::Float(c));
        // NaN rows are outside min/max and above every number: `>` is true for them
        // unless none exist, `<` and `=` never are.
        assert!(gt(&float_range(1.0, 2.0, None), 5.0));
        assert!(!gt(&float_range(1.0, 2.0, Some(0)), 5.0));
        assert!(!can(&float_range(1.0, 2.0, None), CmpOp::Eq, 5.0).can_be_true());
        assert!(!can(&float_range(1.0, 2.0, None), CmpOp::Lt, 0.5).can_be_true());
        assert_eq!(
            can(&float_range(1.0, 2.0, None), CmpOp::NotEq, 5.0),
            Outcomes::TRUE
        );
        // NaN literals: every number is below NaN, NaN rows equal it.
        let nan = f64::NAN;
        assert_eq!(
            can(&float_range(1.0, 2.0, Some(0)), CmpOp::Lt, nan),
            Outcomes::TRUE
        );
        assert!(!can(&float_range(1.0, 2.0, Some(0)), CmpOp::Eq, nan).can_be_true());
        assert!(can(&float_range(1.0, 2.0, None), CmpOp::Eq, nan).can_be_true());
        assert!(!can(&float_range(1.0, 2.0, None), CmpOp::Gt, nan).can_be_true());
        // NaN bounds are unusable.
        assert!(gt(&float_range(f64::NAN, 2.0, Some(0)), 5.0));
        // -0.0 and +0.0 are one value.
        let zero = float_range(-0.0, 0.0, Some(0));
        assert_eq!(can(&zero, CmpOp::Lt, 0.0), Outcomes::FALSE);
        assert_eq!(can(&zero, CmpOp::Gt, -0.0), Outcomes::FALSE);
        assert_eq!(can(&zero, CmpOp::Eq, -0.0), Outcomes::TRUE);
        assert!(!can(&zero, CmpOp::Gt, 1.0).can_be_true());
    }

    fn special_float() -> impl proptest::strategy::Strategy<Value = f64> {
        use proptest::prelude::*;
        prop_oneof![
            Just(f64::NAN),
            Just(f64::from_bits(f64::NAN.to_bits() | (1 << 63))),
            Just(0.0),
            Just(-0.0),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(2.5),
            (-3i32..4).prop_map(f64::from),
        ]
    }

    proptest::proptest! {
        /// Statistics as Parquet writers make them (NaN left out of min/max, no NaN
        /// count, `-0.0` the minimum of a zero and `+0.0` the maximum) never prune a row
        /// group holding a row the predicate selects under the one rule, and say FALSE
        /// only when no row is TRUE.
        #[test]
        fn float_ranges_never_prune_a_selected_row(
            values in proptest::collection::vec(special_float(), 1..12),
            lit in special_float(),
            op in proptest::sample::select(OPS.to_vec()),
        ) {
            let numbers: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
            let bound = |pick: fn(f64, f64) -> bool, zero: f64| {
                let v = numbers.iter().copied().reduce(|a, b| if pick(b, a) { b } else { a })?;
                Some(Scalar::Float(if v == 0.0 { zero } else { v }))
            };
            let range = ColumnRange {
                kind: ColumnKind::Float64,
                min: bound(|b, a| b < a, -0.0),
                max: bound(|b, a| b > a, 0.0),
                null_count: Some(0),
                row_count: Some(values.len() as u64),
                nan_count: None,
            };
            let got = range.compare(op, &Literal::Float(lit));
            for v in &values {
                let want = single(op.holds(ringscan_values::float::cmp_f64(*v, lit)));
                proptest::prop_assert!(got.has(want), "{:?} {:?} {} -> {:?}", values, op, lit, got);
            }
        }
    }

    #[test]
    fn literal_conversion_is_exact_or_nothing() {
        let i8k = ColumnKind::Int {
            min: -128,
            max: 127,
        };
        assert_eq!(literal_to_scalar(i8k, &Literal::Int(300)), None);
        assert_eq!(
            literal_to_scalar(i8k, &Literal::Float(3.0)),
            Some(Scalar::Int(3))
        );
        assert_eq!(literal_to_scalar(i8k, &Literal::Float(3.5)), None);
        let u64k = ColumnKind::Int {
            min: 0,
            max: u64::MAX.into(),
        };
        assert_eq!(
            literal_to_scalar(u64k, &Literal::UInt(u64::MAX)),
            Some(Scalar::Int(u64::MAX.into()))
        );
        assert_eq!(literal_to_scalar(u64k, &Literal::Int(-1)), None);
        assert_eq!(
            literal_to_scalar(ColumnKind::Float32, &Literal::Float(0.1)),
            None
        );
        assert_eq!(
            literal_to_scalar(ColumnKind::Float32, &Literal::Float(0.5)),
            Some(Scalar::Float(0.5))
        );
        assert_eq!(
            literal_to_scalar(ColumnKind::Float64, &Literal::Int(1 << 60)),
            None
        );
        assert_eq!(
            literal_to_scalar(ColumnKind::Float64, &Literal::Int(7)),
            Some(Scalar::Float(7.0))
        );
        let ms = ColumnKind::Timestamp(TimeUnit::Millisecond);
        assert_eq!(
            literal_to_scalar(ms, &Literal::TimestampMicros(5_000)),
            Some(Scalar::Int(5))
        );
        assert_eq!(
            literal_to_scalar(ms, &Literal::TimestampMicros(5_001)),
            None
        );
        let ns = ColumnKind::Timestamp(TimeUnit::Nanosecond);
        assert_eq!(
            literal_to_scalar(ns, &Literal::TimestampMicros(i64::MAX)),
            None
        );
        assert_eq!(
            literal_to_scalar(ColumnKind::Date32, &Literal::Int(3)),
            None
        );
        assert_eq!(literal_to_scalar(ColumnKind::Other, &Literal::Int(3)), None);
        assert_eq!(literal_to_scalar(ColumnKind::Utf8, &Literal::Int(3)), None);
    }
}
