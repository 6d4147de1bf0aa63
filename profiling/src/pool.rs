//! Counters kept open per thread and reused run after run.
//!
//! Opening the perf events and closing them again is most of what counting a short run
//! costs: on a machine without a PMU, four `perf_event_open` calls, four enabling
//! `ioctl`s and four `close`s, and closing the last software event of a kind makes the
//! kernel patch its jump labels (an interrupt to every CPU), which the next open undoes.
//! [`Counters::pooled`] hands out the calling thread's counters, opened at the thread's
//! first use; dropping the [`PooledCounters`] gives them back. Each run then pays only
//! its two snapshots ([`Counters::snapshot`], [`Counters::since`]): the counters are
//! never reset, an interval is the difference of two reads, so the values stay right
//! for hardware groups too (each member's enabled/running times are subtracted and the
//! interval rescaled on its own).
//!
//! A perf event counts the thread that opened it (and, with
//! [`CounterScope::Process`], the threads spawned after it was opened). So counters
//! dropped on another thread than the one that took them are closed, never pooled
//! there: they would count the wrong thread.

use std::cell::RefCell;
use std::thread::ThreadId;

use crate::counters::{CounterScope, Counters};

thread_local! {
    /// This thread's idle counters, one slot per scope.
    static POOL: RefCell<[Option<Counters>; 2]> = const { RefCell::new([None, None]) };
}

fn slot(scope: CounterScope) -> usize {
    match scope {
        CounterScope::Process => 0,
        CounterScope::Thread => 1,
    }
}

/// The calling thread's counters, on loan; see [`Counters::pooled`]. Dereferences to
/// [`Counters`]; dropped, they go back to the thread's pool.
#[derive(Debug)]
pub struct PooledCounters {
    /// Always `Some` until drop.
    counters: Option<Counters>,
    /// The thread the counters observe (the one that opened them).
    owner: ThreadId,
}

impl Counters {
    /// The calling thread's counters of `scope`: the ones an earlier
    /// [`PooledCounters`] of this thread gave back, else freshly opened. Read them with
    /// [`Counters::start`] or [`Counters::snapshot`]: they have been counting since
    /// they were first opened, so [`Counters::read`] is not this run's figure.
    ///
    /// While one loan is out, another on the same thread opens its own counters (which
    /// close when dropped, unless the pool's slot is free again by then).
    pub fn pooled(scope: CounterScope) -> PooledCounters {
        let kept = POOL
            .try_with(|p| p.borrow_mut()[slot(scope)].take())
            .ok()
            .flatten();
        PooledCounters {
            counters: Some(kept.unwrap_or_else(|| Counters::open(scope))),
            owner: std::thread::current().id(),
        }
    }
}

impl std::ops::Deref for PooledCounters {
    type Target = Counters;
    fn deref(&self) -> &Counters {
        self.counters
            .as_ref()
            .expect("pooled counters are held until drop")
    }
}

impl std::ops::DerefMut for PooledCounters {
    fn deref_mut(&mut self) -> &mut Counters {
        self.counters
            .as_mut()
            .expect("pooled counters are held until drop")
    }
}

impl Drop for PooledCounters {
    fn drop(&mut self) {
        let Some(counters) = self.counters.take() else {
            return;
        };
        if std::thread::current().id() != self.owner {
            return; // Closed: they observe another thread.
        }
        let scope = counters.scope();
        // A thread being torn down has no pool left: the counters close.
        let _ = POOL.try_with(|p| {
            let mut pool = p.borrow_mut();
            let slot = &mut pool[slot(scope)];
            if slot.is_none() {
                *slot = Some(counters);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::tests::busy_work;
    use crate::counters::CounterKind;

    /// The pooled counters' interval agrees with fresh counters opened around the same
    /// work (the naive reference), and a later interval does not carry the earlier one.
    #[test]
    fn pooled_intervals_match_fresh_counters() {
        // Count something first, so the pool's counters have a large running total.
        {
            let mut c = Counters::pooled(CounterScope::Thread);
            let (_, s) = c.measure(|| busy_work(20_000_000));
            assert!(s.value(CounterKind::TaskClock).is_some_and(|ns| ns > 0));
        }
        let mut pooled = Counters::pooled(CounterScope::Thread);
        let mut fresh = Counters::open(CounterScope::Thread);
        let start = pooled.snapshot();
        let (_, reference) = fresh.measure(|| busy_work(5_000_000));
        let sample = pooled.since(&start);
        let ns = sample.value(CounterKind::TaskClock).expect("task clock");
        let reference_ns = reference.value(CounterKind::TaskClock).expect("task clock");
        // The pooled interval holds the reference's, plus two reads of the fresh set.
        assert!(
            ns >= reference_ns,
            "pooled {ns} ns < fresh {reference_ns} ns"
        );
        assert!(
            ns < reference_ns + reference_ns / 2 + 1_000_000,
            "pooled {ns} ns carries an earlier interval (fresh {reference_ns} ns)"
        );
        assert_eq!(sample.values.len(), CounterKind::ALL.len());
    }

    fn pooled_here(scope: CounterScope) -> bool {
        POOL.with(|p| p.borrow()[slot(scope)].is_some())
    }

    #[test]
    fn a_returned_loan_is_reused_and_a_nested_one_is_not_shared() {
        drop(Counters::pooled(CounterScope::Thread));
        assert!(pooled_here(CounterScope::Thread));
        assert!(!pooled_here(CounterScope::Process));
        let a = Counters::pooled(CounterScope::Thread);
        assert!(
            !pooled_here(CounterScope::Thread),
            "the loan took the kept set"
        );
        // The slot is empty while `a` is out: `b` opens its own set.
        let mut b = Counters::pooled(CounterScope::Thread);
        let (_, s) = b.measure(|| busy_work(1_000_000));
        assert!(s.value(CounterKind::TaskClock).is_some_and(|ns| ns > 0));
        drop(a);
        assert!(pooled_here(CounterScope::Thread));
        drop(b); // The slot is taken again: `b` closes.
        assert!(pooled_here(CounterScope::Thread));
    }

    #[test]
    fn counters_dropped_on_another_thread_are_not_pooled_there() {
        let loan = Counters::pooled(CounterScope::Thread);
        std::thread::spawn(move || {
            drop(loan);
            POOL.with(|p| assert!(p.borrow()[slot(CounterScope::Thread)].is_none()));
        })
        .join()
        .expect("thread");
    }
}
