//! Threads kept for connections and scan control loops.
//!
//! Every query opens a connection, and every scan on it a control thread: two new
//! threads per query, each with a fresh stack (an `mmap`, a guard page, page faults) and
//! a thread exit. A thread that finishes its job parks here for [`IDLE_EXIT`] and takes
//! the next job instead. Threads are spawned when none is parked, so a burst of
//! clients is never queued behind a busy pool; the connection limit bounds them.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// A parked thread exits after this long without a job.
const IDLE_EXIT: Duration = Duration::from_secs(60);

type Job = Box<dyn FnOnce() + Send + 'static>;

/// A parked thread: its id and the channel it waits on.
type Parked = (u64, crossbeam_channel::Sender<Job>);

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct ThreadPool {
    parked: Arc<Mutex<ParkedThreads>>,
}

#[derive(Debug, Default)]
struct ParkedThreads {
    threads: Vec<Parked>,
    next_id: u64,
}

impl ThreadPool {
    /// Runs `job` on a parked thread, or on a new one named `name`.
    pub(crate) fn execute(
        &self,
        name: &str,
        job: impl FnOnce() + Send + 'static,
    ) -> io::Result<()> {
        let mut job: Job = Box::new(job);
        loop {
            let parked = self
                .parked
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .threads
                .pop();
            let Some((_, to_thread)) = parked else {
                break;
            };
            match to_thread.send(job) {
                Ok(()) => return Ok(()),
                // It exited between parking and now (cannot happen: it leaves the list
                // under the lock before exiting), so take the job back and go on.
                Err(crossbeam_channel::SendError(back)) => job = back,
            }
        }
        let parked = Arc::clone(&self.parked);
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || worker(job, &parked))
            .map(drop)
    }
}

fn worker(first: Job, parked: &Mutex<ParkedThreads>) {
    let (tx, rx) = crossbeam_channel::bounded::<Job>(1);
    let mut job = first;
    loop {
        job();
        let id = {
            let mut p = parked.lock().unwrap_or_else(PoisonError::into_inner);
            p.next_id += 1;
            let id = p.next_id;
            p.threads.push((id, tx.clone()));
            id
        };
        job = match rx.recv_timeout(IDLE_EXIT) {
            Ok(next) => next,
            Err(_) => {
                let mut p = parked.lock().unwrap_or_else(PoisonError::into_inner);
                match p.threads.iter().position(|(i, _)| *i == id) {
                    Some(at) => {
                        p.threads.swap_remove(at);
                        return;
                    }
                    // Taken off the list by `execute`, whose job is on its way.
                    None => {
                        drop(p);
                        match rx.recv() {
                            Ok(next) => next,
                            Err(_) => return,
                        }
                    }
                }
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn jobs_run_on_parked_threads_and_bursts_get_new_ones() {
        let pool = ThreadPool::default();
        let (done_tx, done_rx) = crossbeam_channel::unbounded::<std::thread::ThreadId>();
        // One at a time: every job after the first runs on the same parked thread.
        let mut ids = Vec::new();
        for _ in 0..20 {
            let done = done_tx.clone();
            pool.execute("t", move || done.send(std::thread::current().id()).unwrap())
                .unwrap();
            ids.push(done_rx.recv().unwrap());
            // Let it park before the next job.
            while pool.parked.lock().unwrap().threads.is_empty() {
                std::thread::yield_now();
            }
        }
        ids.dedup();
        assert_eq!(ids.len(), 1, "{ids:?}");
        // Eight jobs that all block at once: eight threads, none queued behind another.
        let running = Arc::new(AtomicUsize::new(0));
        let (release_tx, release_rx) = crossbeam_channel::unbounded::<()>();
        for _ in 0..8 {
            let (running, release) = (Arc::clone(&running), release_rx.clone());
            pool.execute("t", move || {
                running.fetch_add(1, Ordering::SeqCst);
                let _ = release.recv();
            })
            .unwrap();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while running.load(Ordering::SeqCst) < 8 {
            assert!(std::time::Instant::now() < deadline, "jobs were queued");
            std::thread::yield_now();
        }
        drop(release_tx);
    }
}
