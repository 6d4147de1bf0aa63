//! Waiting for the peer: a bounded spin, then a futex sleep, and wake-ups that cost a
//! system call only when the peer really sleeps.
//!
//! Each direction of the ring (data: the producer publishes, the consumer waits;
//! space: the consumer releases, the producer waits) has a futex word and a "waiting"
//! flag in the shared header; one thread at a time waits on each.
//!
//! - **Waiter** ([`wait_until`]): first spins, re-checking its condition (an atomic
//!   load of the peer's position), for at most the [`Spinner`]'s budget. Only then
//!   does it set its flag, fence, read the futex word, check the condition once more
//!   and sleep on the word (bounded by a timeout, so that it can look at the peer's
//!   liveness).
//! - **Notifier** ([`notify`]): after publishing (a Release store of its position),
//!   a fence and one load of the flag. A peer that is awake or spinning costs nothing
//!   more: no atomic read-modify-write, no system call. A sleeping peer's flag is
//!   taken (swapped to 0) by the first notifier that sees it, which bumps the word and
//!   wakes it; later publishes before the peer is back find the flag clear, so one
//!   sleep costs one wake-up however many records arrive meanwhile (batched wake-ups).
//!
//! **No lost wake-up.** The waiter does `flag = 1; fence(SeqCst); seen = word; check`,
//! the notifier `publish; fence(SeqCst); load flag`. With two SeqCst fences, either
//! the notifier's flag load sees 1, or the waiter's check (after its fence) sees the
//! publication (Dekker). In the first case the notifier bumps the word before it
//! wakes: a waiter that read the word before the bump finds it changed in
//! `futex_wait` and returns at once; one that read it after the bump (Acquire,
//! partner: the Release bump) also sees the publication and does not sleep. A flag
//! the notifier finds already taken (swapped) belongs to a waiter that is being woken,
//! or that woke by itself (a timeout) and clears its own flag: in both cases it checks
//! the condition again before it sleeps again, after setting the flag again.
//!
//! The space direction carries a target: the producer stores the read position it
//! needs before it raises its flag (Release, so that a notifier that sees the flag
//! sees the target), and a release that does not reach it does not wake the producer
//! (it would only find too little room and sleep again).
//!
//! **The spin.** [`wait_spin`] (`RINGSCAN_RING_SPIN_US`, default [`DEFAULT_SPIN_US`])
//! bounds one spin. It pays when the peer answers within it: a hand-off then costs no
//! wake-up, no context switch, and the notifier makes no system call. On the 2-core
//! KVM machine this was measured on (`ringscan bench ring`), waking a thread whose
//! CPU went idle costs 15 to 25 µs (the hypervisor wakes the halted vCPU), so an
//! active hand-off between processes on two CPUs took ~20 µs without a spin and ~2 µs
//! with one. A spin is wasted when the peer runs on the waiter's own CPU (it cannot
//! run until the waiter sleeps; the scheduler keeps a ping-pong of two processes on
//! one CPU): each side records the CPU it last published or released from in the
//! header, and a waiter that finds the peer's CPU equal to its own sleeps at once
//! ([`peer_on_this_cpu`]). Before that check a 20 µs spin made such a hand-off 5 µs
//! instead of 3.8. Each waiter adapts too ([`Spinner`]): after [`MISSES_BEFORE_SHORT`]
//! waits in a row that a full spin did not end, it spins a sixteenth of the bound,
//! with a full spin every [`PROBE_EVERY`]th wait to notice a peer that has sped up
//! again, so that a peer that takes long (a scan reading its next row group) costs
//! little spinning. `RINGSCAN_RING_SPIN_US=0` turns spinning off.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::sys;

/// Default spin bound, µs (see the module docs; `ringscan bench ring` measures it).
pub const DEFAULT_SPIN_US: u64 = 20;

/// Consecutive waits that a full spin did not end before the spin gets short.
const MISSES_BEFORE_SHORT: u32 = 4;
/// While short, every this many waits spins the full bound once more.
const PROBE_EVERY: u32 = 16;
/// The short spin is this fraction of the bound.
const SHORT_SHIFT: u32 = 4;
/// Spin iterations between two reads of the clock (a read costs ~25 ns; a check of the
/// condition a few).
const CHECKS_PER_CLOCK_READ: u32 = 16;

/// Process-wide spin bound in ns; `u64::MAX` until first read (then from the
/// environment).
static SPIN_NS: AtomicU64 = AtomicU64::new(u64::MAX);

/// The longest a waiter spins before it sleeps on its futex word: `RINGSCAN_RING_SPIN_US`
/// µs if set (0 turns spinning off), else [`DEFAULT_SPIN_US`] µs, unless
/// [`set_wait_spin`] changed it. Process-wide.
pub fn wait_spin() -> Duration {
    let ns = SPIN_NS.load(Ordering::Relaxed);
    if ns != u64::MAX {
        return Duration::from_nanos(ns);
    }
    let us = std::env::var("RINGSCAN_RING_SPIN_US")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(DEFAULT_SPIN_US)
        .min(MAX_SPIN_US);
    // Relaxed: a plain setting; racing first readers store the same value.
    let _ = SPIN_NS.compare_exchange(u64::MAX, us * 1000, Ordering::Relaxed, Ordering::Relaxed);
    Duration::from_nanos(SPIN_NS.load(Ordering::Relaxed))
}

/// Longest spin bound accepted (a bound, like every wait): 10 ms.
pub const MAX_SPIN_US: u64 = 10_000;

/// Sets the process-wide spin bound (clamped to [`MAX_SPIN_US`]) for waits that start
/// from now on; `Duration::ZERO` turns spinning off (every wait sleeps at once).
pub fn set_wait_spin(spin: Duration) {
    let ns = (spin.as_nanos() as u64).min(MAX_SPIN_US * 1000);
    SPIN_NS.store(ns, Ordering::Relaxed);
}

/// One waiter's adaptive spin budget (not shared: each side keeps its own).
#[derive(Debug, Default)]
pub(crate) struct Spinner {
    /// Waits in a row that the spin did not end (the waiter had to sleep).
    misses: u32,
    /// Waits while the spin is short, for the periodic full probe.
    short_waits: u32,
}

impl Spinner {
    /// The spin budget for the next wait, given the bound.
    fn budget_ns(&mut self, bound_ns: u64) -> u64 {
        if self.misses < MISSES_BEFORE_SHORT {
            return bound_ns;
        }
        self.short_waits = self.short_waits.wrapping_add(1);
        if self.short_waits.is_multiple_of(PROBE_EVERY) {
            bound_ns
        } else {
            bound_ns >> SHORT_SHIFT
        }
    }

    fn record(&mut self, spin_ended_it: bool) {
        if spin_ended_it {
            self.misses = 0;
            self.short_waits = 0;
        } else {
            self.misses = self.misses.saturating_add(1);
        }
    }
}

/// Whether the peer whose last CPU is in `peer_cpu` (plus one, 0: not known; see
/// [`sys::current_cpu`]) last ran on the CPU we run on now. Then a spin is wasted: the
/// peer cannot run there until we sleep (a ping-pong that the scheduler keeps on one
/// CPU), so the waiter sleeps at once.
pub(crate) fn peer_on_this_cpu(peer_cpu: &AtomicU32) -> bool {
    // Relaxed: a hint; a stale value costs one spin too many or too few.
    let peer = peer_cpu.load(Ordering::Relaxed);
    peer != 0 && peer == sys::current_cpu()
}

/// How a [`wait_until`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waited {
    /// The condition held during the spin: no system call.
    Spun,
    /// The waiter slept on the futex word (woken, timed out, or a spurious wake-up:
    /// the caller re-checks).
    Slept,
    /// The condition held at the last check before sleeping.
    Ready,
}

/// Blocks until `ready()` holds or about `timeout` passes, spinning first (budget from
/// `spinner`, `None`: no spin). `waiting` is this side's flag, `word` the futex word
/// the notifier bumps. `before_sleep` runs after the flag is raised and the final
/// check failed, right before the sleep (the producer nudges a sleeping consumer there:
/// [`notify`] ordering holds for it too).
pub(crate) fn wait_until(
    spinner: Option<&mut Spinner>,
    waiting: &AtomicU32,
    word: &AtomicU32,
    timeout: Duration,
    mut ready: impl FnMut() -> bool,
    before_sleep: impl FnOnce(),
) -> Waited {
    if let Some(spinner) = spinner {
        let bound_ns = wait_spin().as_nanos() as u64;
        let budget_ns = spinner.budget_ns(bound_ns);
        let spun = budget_ns > 0 && spin(budget_ns, &mut ready);
        if budget_ns > 0 {
            spinner.record(spun);
        }
        if spun {
            return Waited::Spun;
        }
    }
    // Release: a notifier that sees the flag (Acquire) sees what we stored before it
    // (the producer's space target).
    waiting.store(1, Ordering::Release);
    // Partner: the fence in `notify` (store-load ordering, Dekker style): our flag
    // before our re-check, its publication before its flag load.
    fence(Ordering::SeqCst);
    // Acquire, partner: the Release `fetch_add` in `notify`. If we read the bumped
    // value, the update it follows (a position or state store) is visible to `ready`.
    let seen = word.load(Ordering::Acquire);
    let outcome = if ready() {
        Waited::Ready
    } else {
        before_sleep();
        sys::futex_wait(word, seen, timeout);
        Waited::Slept
    };
    // Relaxed: only ever lowers the flag; a notifier that still sees 1 wakes a waiter
    // that is awake, which is harmless.
    waiting.store(0, Ordering::Relaxed);
    outcome
}

/// Spins until `ready()` or `budget_ns` pass; true if ready.
fn spin(budget_ns: u64, ready: &mut impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    let budget = Duration::from_nanos(budget_ns);
    loop {
        for _ in 0..CHECKS_PER_CLOCK_READ {
            if ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        if start.elapsed() >= budget {
            return ready();
        }
    }
}

/// The notifier side: call after publishing an update (position or state) with a
/// Release store. Wakes the waiter if it sleeps (or is about to) and `wanted()` says
/// the update is enough for it (always true but for the space target).
pub(crate) fn notify_if(waiting: &AtomicU32, word: &AtomicU32, wanted: impl FnOnce() -> bool) {
    // Partner: the fence in `wait_until` (store-load ordering, Dekker style).
    fence(Ordering::SeqCst);
    // Acquire, partner: the Release store of the flag in `wait_until`: a waiter's
    // target, stored before its flag, is visible to `wanted`. The swap takes the flag,
    // so that one sleep costs one wake-up.
    if waiting.load(Ordering::Acquire) != 0 && wanted() && waiting.swap(0, Ordering::Acquire) != 0 {
        // Release, partner: the Acquire load of `word` in `wait_until`.
        word.fetch_add(1, Ordering::Release);
        sys::futex_wake_all(word);
    }
}

/// [`notify_if`] with no target.
pub(crate) fn notify(waiting: &AtomicU32, word: &AtomicU32) {
    notify_if(waiting, word, || true);
}

/// Bumps `word` and wakes unconditionally (state changes: rare, must never be missed).
pub(crate) fn notify_always(word: &AtomicU32) {
    // Release, partner: the Acquire load of `word` in `wait_until`.
    word.fetch_add(1, Ordering::Release);
    sys::futex_wake_all(word);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_spin_gets_short_after_misses_and_probes_in_full() {
        let mut s = Spinner::default();
        let bound = 16_000;
        for _ in 0..MISSES_BEFORE_SHORT {
            assert_eq!(s.budget_ns(bound), bound);
            s.record(false);
        }
        let budgets: Vec<u64> = (0..PROBE_EVERY).map(|_| s.budget_ns(bound)).collect();
        assert_eq!(budgets.iter().filter(|&&b| b == bound).count(), 1);
        assert_eq!(
            budgets
                .iter()
                .filter(|&&b| b == bound >> SHORT_SHIFT)
                .count(),
            PROBE_EVERY as usize - 1
        );
        s.record(true);
        assert_eq!(s.budget_ns(bound), bound, "one spin that pays restores it");
    }

    /// The handshake alone, on threads, with the spin off and on: a waiter never
    /// sleeps through a publication. Most publications come within a few µs, so that
    /// they land while the waiter is between its flag and its sleep; a lost wake-up
    /// would end only at the wait's timeout, which fails the round.
    #[test]
    fn a_publication_always_ends_the_wait() {
        const TIMEOUT: Duration = Duration::from_millis(200);
        // Process-wide; other tests only get slower or faster with it.
        set_wait_spin(Duration::from_micros(200));
        for spin_on in [false, true] {
            let waiting = Arc::new(AtomicU32::new(0));
            let word = Arc::new(AtomicU32::new(0));
            let pos = Arc::new(AtomicU64::new(0));
            let arrived = Arc::new(AtomicU64::new(0));
            let rounds = 20_000u64;
            let waiter = {
                let (waiting, word, pos, arrived) =
                    (waiting.clone(), word.clone(), pos.clone(), arrived.clone());
                std::thread::spawn(move || {
                    let mut spinner = Spinner::default();
                    for round in 1..=rounds {
                        arrived.store(round, Ordering::Release);
                        let started = Instant::now();
                        while pos.load(Ordering::Acquire) < round {
                            wait_until(
                                spin_on.then_some(&mut spinner),
                                &waiting,
                                &word,
                                TIMEOUT,
                                || pos.load(Ordering::Acquire) >= round,
                                || {},
                            );
                        }
                        if started.elapsed() >= TIMEOUT * 3 / 4 {
                            return Err(round);
                        }
                    }
                    Ok(())
                })
            };
            let mut x = 0x9E37_79B9_7F4A_7C15u64;
            for round in 1..=rounds {
                // Each publication meets a waiter that has started on its round: on
                // its way to sleep, spinning, or asleep.
                while arrived.load(Ordering::Acquire) < round {
                    if waiter.is_finished() {
                        break; // it failed: stop publishing
                    }
                    std::hint::spin_loop();
                }
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if x.is_multiple_of(64) {
                    std::thread::sleep(Duration::from_micros(x % 300));
                } else {
                    let until = Instant::now() + Duration::from_nanos(x % 5_000);
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                }
                pos.store(round, Ordering::Release);
                notify(&waiting, &word);
            }
            assert_eq!(
                waiter.join().unwrap(),
                Ok(()),
                "spin {spin_on}: wake-ups were lost (the round that failed)"
            );
        }
    }

    /// A waiter spins for a peer on another CPU or of unknown CPU, and sleeps at once
    /// for one that last ran on its own CPU.
    #[test]
    fn a_peer_on_our_cpu_is_not_spun_for() {
        let peer = AtomicU32::new(0);
        assert!(!peer_on_this_cpu(&peer), "unknown CPU: spin");
        peer.store(u32::MAX, Ordering::Relaxed);
        assert!(!peer_on_this_cpu(&peer), "another CPU: spin");
        // The thread may move between the store and the check: one agreement in a few
        // tries is enough (sched_getcpu never fails on Linux, so 0 never shows here).
        let same = (0..1000).any(|_| {
            let cpu = sys::current_cpu();
            peer.store(cpu, Ordering::Relaxed);
            cpu != 0 && peer_on_this_cpu(&peer)
        });
        assert!(same, "a peer on our CPU: no spin");
    }
}
