//! Cleanup of rings whose producer died before any consumer attached.
//!
//! Once a consumer has attached, the name is already gone; the only crash that can
//! leave a segment in `/dev/shm` is a producer dying between `create` and the
//! consumer's `attach` (the daemon keeps a ring ready for the next scan, so a killed
//! daemon always leaves one). Whoever outlives the producer removes them: a client
//! that sees its daemon die calls [`remove_rings_of`] with the daemon's pid, and the
//! daemon calls [`remove_stale_rings`] at start-up for its prefix (and the benchmark
//! after killing a peer) for those nobody was there to see.

use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use crate::layout::{HEADER_BYTES, RING_MAGIC};
use crate::sys::{self, Mapping, ProcessWatch};

/// A segment that never got its magic is considered abandoned after this long.
const UNINITIALISED_GRACE: Duration = Duration::from_secs(10);

/// Removes the names of rings in `/dev/shm` whose name starts with `prefix` (no
/// leading slash), that belong to this user, that no consumer attached to, and whose
/// producer process is gone. Returns how many were removed. Best effort: entries that
/// cannot be inspected are left alone.
pub fn remove_stale_rings(prefix: &str) -> usize {
    let Ok(entries) = std::fs::read_dir("/dev/shm") else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(file_name) = file_name.to_str() else {
            continue;
        };
        if !file_name.starts_with(prefix) {
            continue;
        }
        let name = format!("/{file_name}");
        if is_stale(&name, entry.metadata().ok()) && sys::shm_unlink(&name).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Removes the unattached rings `/<prefix>-<pid>-…` of process `pid` once it has
/// ended, waiting up to `grace` for it to end (a peer whose socket just closed may
/// still be exiting). Returns how many were removed; 0 if the process is still alive.
pub fn remove_rings_of(prefix: &str, pid: u32, grace: Duration) -> usize {
    if pid == 0 || pid == std::process::id() || !ProcessWatch::new(pid).wait_gone(grace) {
        return 0;
    }
    remove_stale_rings(&format!("{prefix}-{pid}-"))
}

fn is_stale(name: &str, meta: Option<std::fs::Metadata>) -> bool {
    let Ok((fd, stat)) = sys::shm_open_existing(name) else {
        return false;
    };
    if stat.uid != sys::current_uid() {
        return false;
    }
    let old = meta
        .and_then(|m| m.modified().ok())
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .is_some_and(|age| age > UNINITIALISED_GRACE);
    if stat.size_bytes < HEADER_BYTES as u64 {
        return old;
    }
    let Ok(header) = Mapping::map(&fd, 0, HEADER_BYTES, false) else {
        return false;
    };
    let h = header.header();
    // Acquire, partner: the Release store of `magic` in `Producer::create_with`.
    match h.magic.load(Ordering::Acquire) {
        0 => old,
        RING_MAGIC => {
            // Acquire, partner: the consumer's CAS in `Consumer::attach`.
            let attached = h.consumer_pid.load(Ordering::Acquire) != 0;
            let producer = h.producer_pid.load(Ordering::Relaxed);
            !attached && !ProcessWatch::new(producer).is_alive()
        }
        _ => false, // not a ringscan segment: not ours to remove
    }
}
