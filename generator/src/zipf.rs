//! Zipfian sampling in O(1) per draw with Vose's alias method.
//!
//! Seed 002 generates "Zipfian-like" values and list lengths; a binary search over a CDF
//! costs ~log2(n) unpredictable branches per draw, the alias table one multiply, one
//! compare and two loads.

/// A table that samples ranks `0..n` with probability proportional to `1 / (rank+1)^s`.
#[derive(Debug, Clone)]
pub struct Zipf {
    /// Per column: the probability of keeping the column index, scaled to `u32::MAX`,
    /// and the alias taken otherwise. Interleaved so that a draw touches one cache line,
    /// not two: with the phone table (16 Ki ranks) the two loads of separate arrays were
    /// 19% of `Contacts::batch`'s samples.
    columns: Vec<(u32, u32)>,
}

impl Zipf {
    /// Builds the table for `n` ranks (at least 1, at most 2^24) with exponent `s >= 0`.
    pub fn new(n: usize, s: f64) -> Self {
        assert!(
            (1..=1 << 24).contains(&n),
            "zipf table size {n} out of range"
        );
        assert!(s.is_finite() && s >= 0.0, "zipf exponent {s} out of range");
        let weights: Vec<f64> = (0..n).map(|k| 1.0 / ((k + 1) as f64).powf(s)).collect();
        Self::from_weights(&weights)
    }

    /// Builds an alias table for arbitrary non-negative weights (not all zero).
    pub fn from_weights(weights: &[f64]) -> Self {
        let n = weights.len();
        let total: f64 = weights.iter().sum();
        assert!(
            n > 0 && total > 0.0,
            "weights must be non-empty with a positive sum"
        );
        let mut scaled: Vec<f64> = weights.iter().map(|w| w * n as f64 / total).collect();
        let mut keep = vec![u32::MAX; n];
        let mut alias: Vec<u32> = (0..n as u32).collect();
        let (mut small, mut large): (Vec<usize>, Vec<usize>) =
            (0..n).partition(|&i| scaled[i] < 1.0);
        while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
            keep[s] = (scaled[s] * f64::from(u32::MAX)) as u32;
            alias[s] = l as u32;
            scaled[l] -= 1.0 - scaled[s];
            if scaled[l] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        // What remains (in either list, through rounding) keeps itself with probability 1.
        Self {
            columns: keep.into_iter().zip(alias).collect(),
        }
    }

    /// Number of ranks.
    pub fn len(&self) -> usize {
        self.columns.len()
    }

    /// Always false: a table has at least one rank.
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// Draws a rank from 64 random bits: the high half picks the column, the low half
    /// decides between the column and its alias.
    #[inline]
    pub fn sample(&self, bits: u64) -> usize {
        // Both factors are below 2^32: the product cannot overflow.
        let column = ((bits >> 32).wrapping_mul(self.columns.len() as u64) >> 32) as usize;
        let (keep, alias) = self.columns[column];
        if (bits as u32) < keep {
            column
        } else {
            alias as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::RowRng;

    /// The alias table against the exact distribution: every rank's observed frequency
    /// lies within 5 standard deviations of its expected one.
    fn check_against_weights(weights: &[f64], draws: usize) {
        let table = Zipf::from_weights(weights);
        let total: f64 = weights.iter().sum();
        let mut counts = vec![0usize; weights.len()];
        let mut rng = RowRng::for_row(42, 0, 0);
        for _ in 0..draws {
            counts[table.sample(rng.next_u64())] += 1;
        }
        for (k, (&c, &w)) in counts.iter().zip(weights).enumerate() {
            let p = w / total;
            let mean = p * draws as f64;
            let sd = (draws as f64 * p * (1.0 - p)).sqrt().max(1.0);
            assert!(
                (c as f64 - mean).abs() <= 5.0 * sd,
                "rank {k}: {c} draws, expected {mean:.0} ± {sd:.0}"
            );
        }
    }

    #[test]
    fn zipf_matches_its_distribution() {
        let weights: Vec<f64> = (0..50).map(|k| 1.0 / ((k + 1) as f64).powf(1.1)).collect();
        check_against_weights(&weights, 200_000);
        assert_eq!(Zipf::new(50, 1.1).len(), 50);
    }

    #[test]
    fn zero_weights_are_never_drawn() {
        let weights = [0.0, 3.0, 0.0, 1.0];
        let table = Zipf::from_weights(&weights);
        let mut rng = RowRng::for_row(1, 1, 1);
        for _ in 0..10_000 {
            let k = table.sample(rng.next_u64());
            assert!(k == 1 || k == 3, "drew zero-weight rank {k}");
        }
        check_against_weights(&weights, 100_000);
    }

    #[test]
    fn single_rank() {
        let table = Zipf::new(1, 1.0);
        assert_eq!(table.sample(u64::MAX), 0);
        assert_eq!(table.sample(0), 0);
    }
}
