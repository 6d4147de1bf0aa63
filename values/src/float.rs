//! How floats compare, as DuckDB compares them (ringscan's answers are checked against
//! DuckDB's):
//!
//! - `-0.0 = 0.0`: one value, neither below the other;
//! - every NaN equals every other NaN (whatever its sign bit or payload), and is greater
//!   than every other value, +infinity included;
//! - an integer compared with a float compares by value, a NaN above every integer
//!   (`int_col < 'NaN'::DOUBLE` is TRUE for every non-NULL row).
//!
//! Arrow's comparison kernels (what DataFusion and the daemon's filter run) order floats
//! by `total_cmp`: `-0.0 < 0.0`, and a NaN with its sign bit set (what x86 arithmetic
//! makes of `0.0 / 0.0`) below -infinity. Both agree with the rules above on values made
//! [`canonical_f64`] first, so every producer of float values (the daemon's scan, the
//! engine's scan of its batches) canonicalizes, and every comparison of values with
//! statistics or literals (pruning, the row filter) goes through [`cmp_f64`].

use std::cmp::Ordering;

/// `v` as DuckDB sees it: `-0.0` made `0.0`, every NaN the positive quiet NaN.
pub fn canonical_f64(v: f64) -> f64 {
    if v.is_nan() {
        f64::NAN
    } else {
        // `v + 0.0` turns `-0.0` into `+0.0` and leaves every other number as it is.
        v + 0.0
    }
}

/// [`canonical_f64`] for `f32`.
pub fn canonical_f32(v: f32) -> f32 {
    if v.is_nan() {
        f32::NAN
    } else {
        v + 0.0
    }
}

/// Whether [`canonical_f64`] changes `v`'s bits (`-0.0`, a NaN with its sign bit set;
/// a positive NaN with another payload compares the same and is left alone).
pub fn needs_canonical_f64(v: f64) -> bool {
    v.is_sign_negative() && (v.is_nan() || v == 0.0)
}

/// [`needs_canonical_f64`] for `f32`.
pub fn needs_canonical_f32(v: f32) -> bool {
    v.is_sign_negative() && (v.is_nan() || v == 0.0)
}

/// Whether any of `values` [`needs_canonical_f64`]: the same answer, in blocks the
/// compiler vectorizes (a negative value needs it when it is `-0.0` or a NaN, whose bits
/// are above -infinity's). The engine checks every float column of every batch with it:
/// value by value, the check was a tenth of the host's CPU in a 10k-row scan.
pub fn any_needs_canonical_f64(values: &[f64]) -> bool {
    const NEG_ZERO: u64 = 0x8000_0000_0000_0000;
    const NEG_INF: u64 = 0xFFF0_0000_0000_0000;
    values.chunks(64).any(|block| {
        block.iter().fold(false, |found, v| {
            let bits = v.to_bits();
            found | (bits == NEG_ZERO) | (bits > NEG_INF)
        })
    })
}

/// [`any_needs_canonical_f64`] for `f32`.
pub fn any_needs_canonical_f32(values: &[f32]) -> bool {
    const NEG_ZERO: u32 = 0x8000_0000;
    const NEG_INF: u32 = 0xFF80_0000;
    values.chunks(64).any(|block| {
        block.iter().fold(false, |found, v| {
            let bits = v.to_bits();
            found | (bits == NEG_ZERO) | (bits > NEG_INF)
        })
    })
}

/// `a` against `b` in DuckDB's order (module docs): a total order.
pub fn cmp_f64(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        // Neither is NaN: IEEE order, in which -0.0 == 0.0.
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// Integer `i` against float `f` by value, in DuckDB's order (NaN above every integer).
/// Exact for every `i128` and `f64`: no rounding of either side.
pub fn cmp_int_f64(i: i128, f: f64) -> Ordering {
    if f.is_nan() || f == f64::INFINITY {
        return Ordering::Less;
    }
    if f == f64::NEG_INFINITY {
        return Ordering::Greater;
    }
    // `floor` is an integer-valued float; beyond i128 `as` saturates, which keeps the
    // order (every i128 is then below or above it).
    let floor = f.floor();
    let whole = floor as i128;
    if floor >= 2f64.powi(127) {
        return Ordering::Less;
    }
    if floor < -(2f64.powi(127)) {
        return Ordering::Greater;
    }
    match i.cmp(&whole) {
        Ordering::Equal if f > floor => Ordering::Less,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Values where a check could slip: both zeros, both infinities, NaNs of either
    /// sign and any payload, the largest and smallest of each sign, and anything.
    fn edgy_f64() -> impl Strategy<Value = f64> {
        prop_oneof![
            Just(0.0),
            Just(-0.0),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(f64::MAX),
            Just(f64::MIN),
            Just(f64::MIN_POSITIVE),
            Just(-f64::MIN_POSITIVE),
            any::<u64>()
                .prop_map(|payload| f64::from_bits(0x7FF0_0000_0000_0001 | (payload >> 12))),
            any::<u64>()
                .prop_map(|payload| f64::from_bits(0xFFF0_0000_0000_0001 | (payload >> 12))),
            any::<u64>().prop_map(f64::from_bits),
            -1e9..1e9f64,
        ]
    }

    fn edgy_f32() -> impl Strategy<Value = f32> {
        prop_oneof![
            Just(0.0f32),
            Just(-0.0f32),
            Just(f32::INFINITY),
            Just(f32::NEG_INFINITY),
            Just(f32::MIN),
            any::<u32>().prop_map(|payload| f32::from_bits(0x7F80_0001 | (payload >> 9))),
            any::<u32>().prop_map(|payload| f32::from_bits(0xFF80_0001 | (payload >> 9))),
            any::<u32>().prop_map(f32::from_bits),
            -1e6..1e6f32,
        ]
    }

    proptest! {
        /// The block check against the value-by-value one, on columns of every length
        /// around the block size, mostly clean (the check's usual case) or not.
        #[test]
        fn block_checks_agree_with_each_value(
            clean in proptest::collection::vec(0.0..1e6f64, 0..200),
            edgy in proptest::collection::vec(edgy_f64(), 0..3),
            at in any::<prop::sample::Index>(),
            clean32 in proptest::collection::vec(0.0..1e6f32, 0..200),
            edgy32 in proptest::collection::vec(edgy_f32(), 0..3),
        ) {
            let mut values = clean.clone();
            for v in &edgy {
                values.insert(at.index(values.len() + 1), *v);
            }
            prop_assert_eq!(
                any_needs_canonical_f64(&values),
                values.iter().any(|v| needs_canonical_f64(*v))
            );
            let mut values = clean32.clone();
            for v in &edgy32 {
                values.insert(at.index(values.len() + 1), *v);
            }
            prop_assert_eq!(
                any_needs_canonical_f32(&values),
                values.iter().any(|v| needs_canonical_f32(*v))
            );
        }
    }

    fn negative_nan() -> f64 {
        f64::from_bits(f64::NAN.to_bits() | (1 << 63))
    }

    #[test]
    fn nan_is_greatest_and_equal_to_itself() {
        for nan in [
            f64::NAN,
            negative_nan(),
            f64::from_bits(0x7ff0_0000_0000_0001),
        ] {
            assert_eq!(cmp_f64(nan, f64::NAN), Ordering::Equal);
            assert_eq!(cmp_f64(nan, f64::INFINITY), Ordering::Greater);
            assert_eq!(cmp_f64(f64::NEG_INFINITY, nan), Ordering::Less);
            assert_eq!(cmp_int_f64(i128::MAX, nan), Ordering::Less);
            assert!(canonical_f64(nan).is_sign_positive());
        }
    }

    #[test]
    fn zeros_are_one_value() {
        assert_eq!(cmp_f64(-0.0, 0.0), Ordering::Equal);
        assert_eq!(cmp_int_f64(0, -0.0), Ordering::Equal);
        assert_eq!(canonical_f64(-0.0).to_bits(), 0.0f64.to_bits());
        assert!(needs_canonical_f64(-0.0) && needs_canonical_f64(negative_nan()));
        assert!(!needs_canonical_f64(f64::NAN) && !needs_canonical_f64(-1.0));
        assert_eq!(canonical_f32(-0.0).to_bits(), 0.0f32.to_bits());
    }

    #[test]
    fn integers_against_floats_are_exact() {
        assert_eq!(cmp_int_f64(2, 2.5), Ordering::Less);
        assert_eq!(cmp_int_f64(3, 2.5), Ordering::Greater);
        assert_eq!(cmp_int_f64(-3, -2.5), Ordering::Less);
        assert_eq!(cmp_int_f64(-2, -2.5), Ordering::Greater);
        // 2^53 + 1 is not a double: a cast would call it equal to 2^53.
        let big = (1i128 << 53) + 1;
        assert_eq!(cmp_int_f64(big, (1u64 << 53) as f64), Ordering::Greater);
        assert_eq!(cmp_int_f64(i128::MIN, -1e300), Ordering::Greater);
        assert_eq!(cmp_int_f64(i128::MAX, 1e300), Ordering::Less);
        assert_eq!(cmp_int_f64(i128::MAX, f64::NEG_INFINITY), Ordering::Greater);
    }

    fn any_float() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<f64>(),
            Just(f64::NAN),
            Just(negative_nan()),
            Just(0.0),
            Just(-0.0),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            (-5i32..5).prop_map(f64::from),
        ]
    }

    proptest! {
        /// On canonical values DuckDB's order is Arrow's total order (`total_cmp`), which
        /// is why canonicalizing scanned values is enough for the engine's kernels.
        #[test]
        fn canonical_values_compare_by_total_order(a in any_float(), b in any_float()) {
            let (ca, cb) = (canonical_f64(a), canonical_f64(b));
            prop_assert_eq!(cmp_f64(a, b), ca.total_cmp(&cb));
            prop_assert_eq!(cmp_f64(a, b), cmp_f64(ca, cb));
            prop_assert_eq!(cmp_f64(b, a), cmp_f64(a, b).reverse());
        }

        /// For integers a double holds exactly, comparing by value is comparing as doubles.
        #[test]
        fn int_float_matches_float_float(i in -(1i64 << 53)..(1i64 << 53), f in any_float()) {
            prop_assert_eq!(cmp_int_f64(i128::from(i), f), cmp_f64(i as f64, f));
        }
    }
}
