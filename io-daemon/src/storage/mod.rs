//! Where a data root's bytes come from: one interface ([`ByteRangeSource`]) over local
//! files (positional reads or memory maps, [`local`]) and objects in S3-compatible
//! storage ([`object`]: ranged GETs through the `object_store` crate, configured from
//! the environment and AWS profiles, [`aws_profile`]), optionally
//! through an on-disk cache of the ranges fetched ([`range_cache`], `--cache-dir`).
//!
//! The scan never asks for "the file": it plans byte ranges from the footer (one column
//! chunk of one row group is the unit) and reads them through this trait, so a remote
//! object costs the same requests a local file costs reads, coalesced where close.

pub mod aws_profile;
pub mod local;
#[allow(
    unsafe_code,
    reason = "memory maps and the SIGBUS handler that guards them"
)]
mod mmap_guard;
pub mod object;
pub mod range_cache;

use std::io;
use std::ops::Range;

use bytes::Bytes;

pub use local::{IoMode, LocalFile, MappedFile, OpenFiles};
pub use object::{
    is_object_url, object_root, ObjectRoot, ObjectSource, ObjectVersion, PendingReads,
    StorageError, StoreStats,
};
pub use range_cache::RangeCache;

/// Random access to the bytes of one file.
pub trait ByteRangeSource: Send + Sync + std::fmt::Debug {
    /// The file's length in bytes (as seen when it was opened).
    fn len(&self) -> u64;

    /// Whether the file is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of `range`, all of them: a range past the end is an error (never a short
    /// answer, never an allocation larger than the file).
    fn read_range(&self, range: Range<u64>) -> io::Result<Bytes>;

    /// The bytes of each of `ranges` (sorted, disjoint: coalesced by the caller), in
    /// order, all of them or an error. One [`read_range`](Self::read_range) after the
    /// other by default; an object store sends its requests concurrently.
    fn read_ranges(&self, ranges: &[Range<u64>]) -> io::Result<Vec<Bytes>> {
        ranges.iter().map(|r| self.read_range(r.clone())).collect()
    }

    /// [`read_ranges`](Self::read_ranges), giving up (an `Interrupted` error) once
    /// `stop` says so: a source whose reads can take long (remote requests) asks it
    /// while it waits and aborts its requests, so a cancelled scan leaves none behind.
    /// Local reads are quick and ignore it.
    fn read_ranges_until(
        &self,
        ranges: &[Range<u64>],
        _stop: &dyn Fn() -> bool,
    ) -> io::Result<Vec<Bytes>> {
        self.read_ranges(ranges)
    }

    /// Starts reading `ranges` (sorted, disjoint) without waiting, where that pays: a
    /// remote source sends its requests now, so that the caller can read ahead of its
    /// decoders and hide the store's latency. `None`: reads are quick here (local
    /// files), read them when needed.
    fn start_reads(&self, _ranges: Vec<Range<u64>>) -> Option<io::Result<PendingReads>> {
        None
    }

    /// Ranges closer than this are read as one (the gap read and dropped): fewer system
    /// calls or requests for a few wasted bytes. Local positional reads are cheap, so
    /// the default merges only touching ranges; an object store says more (tens of KiB).
    fn coalesce_gap(&self) -> u64 {
        0
    }

    /// Whether every byte handed out so far was the file's: an error when the file was
    /// truncated while being read and a read may have returned zeros (a mapped source;
    /// a positional read reports a short read itself). Callers check it after decoding
    /// and before trusting what they decoded.
    fn verify_intact(&self) -> io::Result<()> {
        Ok(())
    }

    /// A cheap (no system call) part of [`verify_intact`](Self::verify_intact): whether a
    /// read is already known to have returned bytes that are not the file's.
    fn poisoned(&self) -> bool {
        false
    }
}

/// Sorted, merged `ranges` (gaps up to `gap` bridged).
pub(crate) fn coalesce(mut ranges: Vec<Range<u64>>, gap: u64) -> Vec<Range<u64>> {
    ranges.retain(|r| r.start < r.end);
    ranges.sort_unstable_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if r.start <= last.end.saturating_add(gap) => {
                last.end = last.end.max(r.end);
            }
            _ => out.push(r),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesces_close_ranges() {
        assert_eq!(
            coalesce(vec![10..20, 0..5, 25..30, 100..110, 3..4], 5),
            vec![0..30, 100..110]
        );
        assert_eq!(coalesce(vec![5..5, 7..7], 0), Vec::<Range<u64>>::new());
    }
}
