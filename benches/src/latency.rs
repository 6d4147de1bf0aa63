//! Latency summaries: mean and nearest-rank percentiles.

use serde::{Deserialize, Serialize};

/// Summary of a set of latency samples, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Number of samples.
    pub n: usize,
    /// Arithmetic mean.
    pub mean_us: f64,
    /// Median (nearest rank).
    pub p50_us: f64,
    /// 95th percentile (nearest rank).
    pub p95_us: f64,
    /// 99th percentile (nearest rank).
    pub p99_us: f64,
    /// Fastest sample.
    pub min_us: f64,
    /// Slowest sample.
    pub max_us: f64,
}

/// The nearest-rank `q`-quantile (0 < q <= 1) of sorted samples: the smallest sample
/// with at least `q` of the samples at or below it.
pub fn nearest_rank(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl LatencySummary {
    /// Summarizes `samples_us`; `None` when there are none.
    pub fn from_samples(samples_us: &[f64]) -> Option<Self> {
        if samples_us.is_empty() {
            return None;
        }
        let mut sorted = samples_us.to_vec();
        sorted.sort_by(f64::total_cmp);
        Some(Self {
            n: sorted.len(),
            mean_us: sorted.iter().sum::<f64>() / sorted.len() as f64,
            p50_us: nearest_rank(&sorted, 0.50),
            p95_us: nearest_rank(&sorted, 0.95),
            p99_us: nearest_rank(&sorted, 0.99),
            min_us: sorted[0],
            max_us: sorted[sorted.len() - 1],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn percentiles_of_one_to_hundred() {
        let samples: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        let s = LatencySummary::from_samples(&samples).expect("samples");
        assert_eq!((s.p50_us, s.p95_us, s.p99_us), (50.0, 95.0, 99.0));
        assert_eq!((s.min_us, s.max_us, s.mean_us), (1.0, 100.0, 50.5));
        assert!(LatencySummary::from_samples(&[]).is_none());
    }

    proptest! {
        #[test]
        fn nearest_rank_is_a_sample_with_enough_below(
            samples in prop::collection::vec(0.0f64..1e6, 1..200),
            q in 0.01f64..=1.0,
        ) {
            let mut sorted = samples.clone();
            sorted.sort_by(f64::total_cmp);
            let v = nearest_rank(&sorted, q);
            prop_assert!(samples.contains(&v));
            let at_or_below = sorted.iter().filter(|x| **x <= v).count();
            prop_assert!(at_or_below as f64 >= q * sorted.len() as f64 - 1e-9);
            let below = sorted.iter().filter(|x| **x < v).count();
            prop_assert!((below as f64) < q * sorted.len() as f64 + 1e-9);
        }
    }
}
