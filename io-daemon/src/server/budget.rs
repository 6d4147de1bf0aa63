//! The daemon's one memory budget, split between what it holds for long (the footer and
//! column caches, the scans' shared-memory rings) and what each running scan may have
//! in flight (its prefetch: the compressed column chunks read ahead of the decoder).
//!
//! Every scan gets the same share, reserved when it starts and returned when it ends,
//! so the shares of all scans that can run at once fit the budget by construction: a
//! budget too small for `max_concurrent_scans` shares of [`MIN_SCAN_BYTES`] runs fewer
//! scans at once (the others are told "busy"), never more memory. Batches handed to
//! the ring are slices of the decoded row group (no copy per batch), and a batch too
//! wide for the ring is split by the producer, so a request's batch size adds no
//! memory of its own beyond the ring.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::scan::DEFAULT_PREFETCH_BYTES;

/// The footer cache's budget when the memory budget has room for it.
pub(crate) const DEFAULT_METADATA_CACHE_BYTES: u64 = 256 << 20;
/// The column cache's budget when the memory budget has room for it.
pub(crate) const DEFAULT_COLUMN_CACHE_BYTES: u64 = 256 << 20;

/// The least a scan may have in flight: below this, prefetch cannot overlap reading
/// one column chunk with decoding the last, and scans get slower than running fewer.
pub(crate) const MIN_SCAN_BYTES: u64 = 16 << 20;

/// How the budget is split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemoryPlan {
    /// The whole budget.
    pub(crate) budget_bytes: u64,
    /// The footer cache.
    pub(crate) metadata_cache_bytes: u64,
    /// The column cache.
    pub(crate) column_cache_bytes: u64,
    /// All rings together.
    pub(crate) ring_bytes: u64,
    /// What one running scan may have in flight.
    pub(crate) scan_bytes: u64,
    /// Scans that may run at once (at most the configured limit).
    pub(crate) max_scans: u64,
}

/// What the operator asked for; `None` is "the default share of the budget".
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asked {
    pub(crate) budget_bytes: u64,
    pub(crate) metadata_cache_bytes: Option<u64>,
    pub(crate) column_cache_bytes: Option<u64>,
    pub(crate) ring_bytes: Option<u64>,
    /// Half of `/dev/shm` (the most rings may take whatever the budget).
    pub(crate) shm_half_bytes: u64,
    pub(crate) max_scans: u64,
}

impl MemoryPlan {
    /// Splits the budget: rings a quarter (at most half of `/dev/shm`), the caches a
    /// quarter (as asked when that fits), the rest for scans. Explicit sizes that leave
    /// the scans less than a quarter of the budget are an error that names them.
    pub(crate) fn new(asked: &Asked) -> Result<Self, String> {
        const MIB: u64 = 1 << 20;
        let budget = asked.budget_bytes;
        let quarter = budget / 4;
        let ring_bytes = asked
            .ring_bytes
            .unwrap_or_else(|| quarter.min(asked.shm_half_bytes));
        // Default cache sizes shrink together to fit their quarter; explicit ones stand.
        let mut metadata = asked
            .metadata_cache_bytes
            .unwrap_or(DEFAULT_METADATA_CACHE_BYTES);
        let mut column = asked
            .column_cache_bytes
            .unwrap_or(DEFAULT_COLUMN_CACHE_BYTES);
        let defaults = [
            asked.metadata_cache_bytes.is_none(),
            asked.column_cache_bytes.is_none(),
        ];
        let explicit: u64 = [(defaults[0], metadata), (defaults[1], column)]
            .iter()
            .filter(|(default, _)| !default)
            .map(|(_, b)| b)
            .sum();
        let room = quarter.saturating_sub(explicit);
        let defaulted: u64 = [(defaults[0], metadata), (defaults[1], column)]
            .iter()
            .filter(|(default, _)| *default)
            .map(|(_, b)| b)
            .sum();
        if defaulted > room {
            let scale = |b: u64| (u128::from(b) * u128::from(room) / u128::from(defaulted)) as u64;
            if defaults[0] {
                metadata = scale(metadata);
            }
            if defaults[1] {
                column = scale(column);
            }
        }
        let held = ring_bytes.saturating_add(metadata).saturating_add(column);
        let scans_total = budget.saturating_sub(held);
        if scans_total < quarter || scans_total < MIN_SCAN_BYTES {
            return Err(format!(
                "the memory budget of {} MiB leaves too little for scans: rings {} MiB, \
                 footer cache {} MiB and column cache {} MiB take {} MiB \
                 (raise --memory-budget-mib or lower those)",
                budget / MIB,
                ring_bytes / MIB,
                metadata / MIB,
                column / MIB,
                held / MIB
            ));
        }
        let max_scans = asked.max_scans.max(1);
        let fair = scans_total / max_scans;
        let (scan_bytes, max_scans) = if fair >= MIN_SCAN_BYTES {
            (fair.min(DEFAULT_PREFETCH_BYTES as u64), max_scans)
        } else {
            (MIN_SCAN_BYTES, (scans_total / MIN_SCAN_BYTES).max(1))
        };
        Ok(Self {
            budget_bytes: budget,
            metadata_cache_bytes: metadata,
            column_cache_bytes: column,
            ring_bytes,
            scan_bytes,
            max_scans,
        })
    }
}

/// The daemon's default budget: half of the machine's memory.
pub(crate) fn default_budget_bytes() -> u64 {
    physical_memory_bytes().map_or(4 << 30, |b| b / 2)
}

#[allow(unsafe_code, reason = "sysconf: two integer queries")]
fn physical_memory_bytes() -> Option<u64> {
    // SAFETY: sysconf takes a constant and returns a number or -1.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let pages = u64::try_from(pages).ok()?;
    let page = u64::try_from(page).ok()?;
    pages.checked_mul(page)
}

/// Scan memory in use: the shares of the running scans.
#[derive(Debug)]
pub(crate) struct ScanMemory {
    plan: MemoryPlan,
    used_bytes: AtomicU64,
}

impl ScanMemory {
    pub(crate) fn new(plan: MemoryPlan) -> Self {
        Self {
            plan,
            used_bytes: AtomicU64::new(0),
        }
    }

    pub(crate) fn plan(&self) -> &MemoryPlan {
        &self.plan
    }

    /// Reserves one scan's share; `None` when the running scans hold the budget.
    pub(crate) fn reserve(&self) -> Option<u64> {
        let share = self.plan.scan_bytes;
        let limit = share.saturating_mul(self.plan.max_scans);
        self.used_bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                let after = used.checked_add(share)?;
                (after <= limit).then_some(after)
            })
            .ok()
            .map(|_| share)
    }

    /// Returns a share [`reserve`](Self::reserve) gave.
    pub(crate) fn release(&self, bytes: u64) {
        self.used_bytes.fetch_sub(bytes, Ordering::AcqRel);
    }

    pub(crate) fn used_bytes(&self) -> u64 {
        self.used_bytes.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    fn asked(budget_bytes: u64) -> Asked {
        Asked {
            budget_bytes,
            metadata_cache_bytes: None,
            column_cache_bytes: None,
            ring_bytes: None,
            shm_half_bytes: 6 * GIB,
            max_scans: 16,
        }
    }

    fn total(p: &MemoryPlan) -> u64 {
        p.metadata_cache_bytes + p.column_cache_bytes + p.ring_bytes + p.scan_bytes * p.max_scans
    }

    /// Issue 17, item 13: 16 scans × 256 MiB of prefetch, 512 MiB of caches and the
    /// rings added up to over 5 GiB whatever the machine had; now they fit the budget.
    #[test]
    fn everything_the_daemon_holds_fits_its_budget() {
        for budget in [64 * MIB, 256 * MIB, GIB, 12 * GIB, 64 * GIB] {
            let p = MemoryPlan::new(&asked(budget)).unwrap();
            assert!(total(&p) <= budget, "{p:?}");
            assert!(
                p.scan_bytes >= MIN_SCAN_BYTES && p.scan_bytes <= 256 * MIB,
                "{p:?}"
            );
            assert!(p.max_scans >= 1 && p.max_scans <= 16, "{p:?}");
        }
        // A large machine keeps the old defaults.
        let big = MemoryPlan::new(&asked(64 * GIB)).unwrap();
        assert_eq!(
            (
                big.metadata_cache_bytes,
                big.column_cache_bytes,
                big.scan_bytes,
                big.max_scans
            ),
            (256 * MIB, 256 * MIB, 256 * MIB, 16)
        );
        // A small one runs fewer scans at once rather than starving each.
        let small = MemoryPlan::new(&asked(64 * MIB)).unwrap();
        assert_eq!(small.scan_bytes, MIN_SCAN_BYTES);
        assert!(small.max_scans < 16, "{small:?}");
    }

    #[test]
    fn explicit_sizes_that_starve_scans_are_refused_with_their_names() {
        let mut a = asked(GIB);
        a.metadata_cache_bytes = Some(900 * MIB);
        let err = MemoryPlan::new(&a).unwrap_err();
        assert!(err.contains("footer cache 900 MiB"), "{err}");
        // Explicit sizes that fit stand as given; the defaulted one shrinks around them.
        let mut a = asked(GIB);
        a.metadata_cache_bytes = Some(200 * MIB);
        let p = MemoryPlan::new(&a).unwrap();
        assert_eq!(p.metadata_cache_bytes, 200 * MIB);
        assert!(p.column_cache_bytes <= 56 * MIB, "{p:?}");
    }

    #[test]
    fn reservations_stop_at_the_plan_and_come_back() {
        let p = MemoryPlan::new(&asked(64 * MIB)).unwrap();
        let memory = ScanMemory::new(p);
        let shares: Vec<u64> = std::iter::from_fn(|| memory.reserve()).take(100).collect();
        assert_eq!(shares.len() as u64, p.max_scans);
        assert!(memory.used_bytes() <= p.scan_bytes * p.max_scans);
        memory.release(shares[0]);
        assert_eq!(memory.reserve(), Some(p.scan_bytes));
        assert_eq!(memory.reserve(), None);
    }
}
