//! Rings made ahead of the scans that use them, and unmapped after them, on a thread of
//! their own.
//!
//! Creating a scan's ring (`shm_open`, `ftruncate`, `mmap`) and unmapping it afterwards
//! were about 17% of a fully pruned query's daemon time. The stock keeps one ring ready
//! for each of the two capacities last asked for (the executor asks for a small ring
//! when it keeps only an aggregation or a top-k, a large one when it keeps the rows) and
//! takes finished producers off the scan's thread to drop. Every ring is still used by one scan only: nothing a consumer may still map is
//! ever written again.
//!
//! Tried and not kept: faulting in the ready ring's first pages ahead (as many as the
//! largest of the last 8 scans wrote). It took the scan's own page faults from 241 to
//! 106 on the 90%-filtered seed-000 query, but with queries back to back the faults
//! only moved to a thread competing for the same two cores: p50 over 6 interleaved
//! rounds was 2.90 ms without it and 3.00 ms with it (unfiltered: 11.4 vs 11.9 ms).

use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use arrow_schema::SchemaRef;
use ringscan_ipc::{unique_name, FreshRing, Producer, RingError, RingOptions};

/// The smallest ring a scan is given when the budget is short (smaller ones would
/// split batches into many small records); below it the scan is refused as busy.
pub(crate) const MIN_RING_BYTES: u64 = 1 << 20;

/// The default ring budget: half of `/dev/shm` (a container's is often 64 MiB), or
/// 1 GiB when its size cannot be read.
pub(crate) fn default_budget() -> u64 {
    ringscan_ipc::shm_size_bytes().map_or(1 << 30, |size| size / 2)
}

/// The capacity a scan's ring gets: what it asked for, at most `max_ring` and what is
/// left of `budget` after the rings alive now (`live`); `Err` with the reason when
/// less than a useful ring is left.
pub(crate) fn capacity_within(
    asked: usize,
    max_ring: u64,
    budget: u64,
    live: u64,
) -> Result<usize, String> {
    let header = 4096;
    let asked = (asked as u64).min(max_ring);
    let left = budget.saturating_sub(live).saturating_sub(header) / 4096 * 4096;
    let capacity = asked.min(left);
    if capacity < asked.min(MIN_RING_BYTES) {
        return Err(format!(
            "busy: the scans' shared-memory rings take {} of their {} MiB budget; try again later",
            live >> 20,
            budget >> 20
        ));
    }
    Ok(capacity as usize)
}

/// Rings kept ready per capacity.
const READY: usize = 1;
/// Capacities kept ready, the most recently asked for.
const CAPACITIES: usize = 2;
/// Jobs queued for the stock's thread at most; beyond that the caller does the work.
const JOB_QUEUE: usize = 64;

enum Job {
    /// Make rings until [`READY`] are ready.
    Refill,
    /// Drop a finished producer (its `munmap`).
    Retire(Box<Producer>),
    Stop,
}

#[derive(Default)]
struct State {
    ready: Vec<FreshRing>,
    /// The capacities the last scans asked for (at most [`CAPACITIES`], the latest
    /// first), with the options to make rings of each.
    wanted: Vec<(usize, RingOptions)>,
}

impl State {
    fn ready_of(&self, capacity: usize) -> usize {
        self.ready
            .iter()
            .filter(|r| r.capacity_bytes() == capacity)
            .count()
    }
}

/// The stock of ready rings and the thread that fills it.
pub(crate) struct RingStock {
    state: Arc<Mutex<State>>,
    jobs: crossbeam_channel::Sender<Job>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for RingStock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingStock").finish_non_exhaustive()
    }
}

impl RingStock {
    /// Starts the stock's thread; without one (spawn failed) every ring is made on
    /// demand and dropped in place. Rings are made ahead only within `budget` (see
    /// [`refill`]), so that a ready ring never takes the room a scan needs.
    pub(crate) fn start(budget: u64) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let (jobs, rx) = crossbeam_channel::bounded::<Job>(JOB_QUEUE);
        let thread_state = Arc::clone(&state);
        let thread = std::thread::Builder::new()
            .name("ring-stock".into())
            .spawn(move || {
                for job in rx {
                    match job {
                        Job::Retire(producer) => drop(producer),
                        Job::Refill => refill(&thread_state, budget),
                        Job::Stop => break,
                    }
                }
            })
            .ok();
        Self {
            state,
            jobs,
            thread: Mutex::new(thread),
        }
    }

    /// Drops the ready rings: a scan needs their room.
    pub(crate) fn drop_ready(&self) {
        let ready = std::mem::take(
            &mut self
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .ready,
        );
        drop(ready);
    }

    /// A started ring for a stream of `schema`: a ready one of the same capacity, or a
    /// new one. Either way the stock is refilled behind it.
    pub(crate) fn take(
        &self,
        options: &RingOptions,
        schema: SchemaRef,
    ) -> Result<Producer, RingError> {
        let capacity = options.capacity_bytes();
        let ready = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.wanted.retain(|(c, _)| *c != capacity);
            state.wanted.insert(0, (capacity, options.clone()));
            state.wanted.truncate(CAPACITIES);
            // Rings of a size no longer among the latest will not be asked for.
            let State { ready, wanted } = &mut *state;
            ready.retain(|r| wanted.iter().any(|(c, _)| *c == r.capacity_bytes()));
            let i = ready.iter().position(|r| r.capacity_bytes() == capacity);
            i.map(|i| ready.swap_remove(i))
        };
        // A full queue already holds work that will refill the stock.
        let _ = self.jobs.try_send(Job::Refill);
        match ready {
            Some(ring) => ring.start(schema),
            None => FreshRing::create(&unique_name(ringscan_ipc::RING_PREFIX), options, 0)?
                .start(schema),
        }
    }

    /// A scan is over: drop its producer on the stock's thread.
    pub(crate) fn retire(&self, producer: Producer) {
        // A full queue (the thread cannot keep up) or none: unmap it here.
        if let Err(
            crossbeam_channel::TrySendError::Full(Job::Retire(producer))
            | crossbeam_channel::TrySendError::Disconnected(Job::Retire(producer)),
        ) = self.jobs.try_send(Job::Retire(Box::new(producer)))
        {
            drop(producer);
        }
    }

    /// Stops the thread and removes the ready rings' names.
    pub(crate) fn stop(&self) {
        let _ = self.jobs.send(Job::Stop);
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(t) = thread {
            let _ = t.join();
        }
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .ready
            .clear();
    }
}

impl Drop for RingStock {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Makes rings (outside the lock) until [`READY`] are ready for each wanted capacity,
/// as long as the rings alive leave half of `budget` free after the new one.
fn refill(state: &Mutex<State>, budget: u64) {
    loop {
        let options = {
            let state = state.lock().unwrap_or_else(PoisonError::into_inner);
            match state
                .wanted
                .iter()
                .find(|(c, _)| state.ready_of(*c) < READY)
            {
                Some((_, options)) => options.clone(),
                None => return,
            }
        };
        let after = ringscan_ipc::live_ring_bytes() + options.capacity_bytes() as u64 + 4096;
        if after > budget / 2 {
            return;
        }
        let Ok(ring) = FreshRing::create(&unique_name(ringscan_ipc::RING_PREFIX), &options, 0)
        else {
            return; // the scan that needs one makes it and reports the error
        };
        let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
        let capacity = ring.capacity_bytes();
        if state.wanted.iter().any(|(c, _)| *c == capacity) && state.ready_of(capacity) < READY {
            state.ready.push(ring);
        } else {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_shrink_to_the_budget_and_are_refused_below_a_useful_size() {
        const MIB: u64 = 1 << 20;
        // Room: as asked, at most the cap.
        assert_eq!(
            capacity_within(256 << 20, 1 << 30, 12 << 30, 0),
            Ok(256 << 20)
        );
        assert_eq!(capacity_within(4 << 30, 1 << 30, 12 << 30, 0), Ok(1 << 30));
        // A 64 MiB /dev/shm (budget 32 MiB) with 20 MiB of rings alive: what is left,
        // less the header page, in whole pages.
        assert_eq!(
            capacity_within(256 << 20, 1 << 30, 32 * MIB, 20 * MIB),
            Ok((12 * MIB - 4096) as usize)
        );
        // Small rings need only their own size.
        assert_eq!(
            capacity_within(64 << 10, 1 << 30, 32 * MIB, 32 * MIB - (128 << 10)),
            Ok(64 << 10)
        );
        // Less than a useful ring left: busy.
        let err = capacity_within(256 << 20, 1 << 30, 32 * MIB, 31 * MIB + 512 * 1024).unwrap_err();
        assert!(err.starts_with("busy: "), "{err}");
        assert!(err.contains("32 MiB budget"), "{err}");
    }
}
