//! Out-of-order release of ring space, in-order advance of the read position.
//!
//! The consumer hands out records in ring order; they may be dropped in any order
//! (batches live as long as the executor needs them). The read position, which the
//! producer uses to compute free space, advances only over the contiguous prefix of
//! released records. This is the pure, sequential core of that protocol (no atomics, no
//! shared memory), so it can be checked exhaustively against a model; the consumer
//! wraps it in a mutex and publishes each advance to the header.

use std::collections::VecDeque;

/// Tracks handed-out records `[base_seq, base_seq + len)` and which are released.
#[derive(Debug)]
pub(crate) struct ReleaseTracker {
    /// End of the contiguous released prefix (the ring's read position).
    read_pos: u64,
    /// Sequence number of `entries[0]`.
    base_seq: u64,
    /// For each outstanding record: its end position and whether it was released.
    entries: VecDeque<(u64, bool)>,
    /// Records below this sequence number were given back all at once
    /// ([`detach_all`](Self::detach_all)) while their leases lived on in private copies;
    /// those leases' releases are no-ops.
    detached_below: u64,
}

impl ReleaseTracker {
    pub(crate) fn new(read_pos: u64, next_seq: u64) -> Self {
        Self {
            read_pos,
            base_seq: next_seq,
            entries: VecDeque::new(),
            detached_below: 0,
        }
    }

    /// The end of the released prefix: everything before it is free to overwrite.
    pub(crate) fn read_pos(&self) -> u64 {
        self.read_pos
    }

    /// Number of records handed out and not yet covered by the read position.
    pub(crate) fn outstanding(&self) -> usize {
        self.entries.len()
    }

    /// Registers the next record, `seq`, which ends at `end_pos`.
    ///
    /// # Panics
    /// If records are not registered in order (a bug in the consumer, not peer input:
    /// sequence numbers from the ring are validated before they get here).
    pub(crate) fn push(&mut self, seq: u64, end_pos: u64) {
        let expected = self.base_seq + self.entries.len() as u64;
        assert_eq!(seq, expected, "records must be registered in ring order");
        let last_end = self.entries.back().map_or(self.read_pos, |e| e.0);
        assert!(end_pos > last_end, "record end positions must increase");
        self.entries.push_back((end_pos, false));
    }

    /// Gives back the space of every record handed out, released or not (their bytes
    /// were copied out of the ring); returns the new read position if it advanced.
    pub(crate) fn detach_all(&mut self) -> Option<u64> {
        let before = self.read_pos;
        if let Some(&(end, _)) = self.entries.back() {
            self.read_pos = end;
        }
        self.base_seq += self.entries.len() as u64;
        self.entries.clear();
        self.detached_below = self.base_seq;
        (self.read_pos != before).then_some(self.read_pos)
    }

    /// Marks `seq` released; returns the new read position if it advanced.
    ///
    /// # Panics
    /// If `seq` was never registered or is released twice (each lease releases once).
    pub(crate) fn release(&mut self, seq: u64) -> Option<u64> {
        if seq < self.detached_below {
            return None;
        }
        let idx = seq
            .checked_sub(self.base_seq)
            .and_then(|i| usize::try_from(i).ok())
            .filter(|&i| i < self.entries.len())
            .expect("released record is outstanding");
        let entry = &mut self.entries[idx];
        assert!(!entry.1, "record {seq} released twice");
        entry.1 = true;
        let before = self.read_pos;
        while let Some(&(end, true)) = self.entries.front() {
            self.read_pos = end;
            self.entries.pop_front();
            self.base_seq += 1;
        }
        (self.read_pos != before).then_some(self.read_pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn advances_over_released_prefix_only() {
        let mut t = ReleaseTracker::new(0, 0);
        t.push(0, 64);
        t.push(1, 192);
        t.push(2, 256);
        assert_eq!(t.release(1), None, "a hole at record 0 blocks the advance");
        assert_eq!(t.read_pos(), 0);
        assert_eq!(t.release(0), Some(192), "0 and 1 are now a released prefix");
        assert_eq!(t.outstanding(), 1);
        assert_eq!(t.release(2), Some(256));
        assert_eq!(t.outstanding(), 0);
    }

    #[test]
    fn detaching_gives_back_everything_and_later_releases_are_no_ops() {
        let mut t = ReleaseTracker::new(0, 0);
        t.push(0, 64);
        t.push(1, 192);
        t.push(2, 256);
        assert_eq!(t.release(1), None);
        assert_eq!(t.detach_all(), Some(256));
        assert_eq!(t.outstanding(), 0);
        assert_eq!(t.release(0), None, "a detached record's lease drops later");
        assert_eq!(t.release(2), None);
        t.push(3, 320);
        assert_eq!(
            t.release(3),
            Some(320),
            "records after the detach track as before"
        );
    }

    #[test]
    #[should_panic(expected = "released twice")]
    fn double_release_is_a_bug() {
        let mut t = ReleaseTracker::new(0, 0);
        t.push(0, 64);
        t.push(1, 128);
        t.release(1);
        t.release(1);
    }

    proptest! {
        /// Against the naive model: the read position is the end of the longest prefix
        /// of records whose released flag is set, whatever the release order.
        #[test]
        fn matches_sequential_model(
            lens in prop::collection::vec(1u64..8, 1..40),
            order in prop::collection::vec(any::<prop::sample::Index>(), 0..40),
        ) {
            let mut t = ReleaseTracker::new(0, 0);
            let mut ends = Vec::new();
            let mut pos = 0;
            for (seq, len) in lens.iter().enumerate() {
                pos += len * 64;
                ends.push(pos);
                t.push(seq as u64, pos);
            }
            let mut released = vec![false; lens.len()];
            let mut pending: Vec<usize> = (0..lens.len()).collect();
            for ix in order {
                if pending.is_empty() { break; }
                let seq = pending.swap_remove(ix.index(pending.len()));
                released[seq] = true;
                t.release(seq as u64);
                let prefix = released.iter().take_while(|r| **r).count();
                let model = if prefix == 0 { 0 } else { ends[prefix - 1] };
                prop_assert_eq!(t.read_pos(), model);
                prop_assert_eq!(t.outstanding(), lens.len() - prefix);
            }
        }
    }
}
