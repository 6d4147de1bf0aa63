//! The ring's wire format: the header page and the record header.
//!
//! Shared memory is treated like a network peer: the header is `#[repr(C)]`, fixed-size
//! and pointer-free, made only of atomics (so a concurrent or hostile writer in the other
//! process can never cause a data race in ours), and every value read from it or from a
//! record header is validated before use.

use std::sync::atomic::{AtomicU32, AtomicU64};

/// `"RINGSCAN"` little-endian: the first word of a ringscan segment.
pub(crate) const RING_MAGIC: u64 = u64::from_le_bytes(*b"RINGSCAN");
/// Bumped on any change of the header or record layout, or of the wait protocol.
/// Version 2: the producer's space target (`space_wanted_pos`) and the wake-up protocol
/// of [`wait`](crate::wait) (notifiers take the waiter's flag); a peer of another
/// version is refused at attach. Version 3: each side's last CPU (`producer_cpu`,
/// `consumer_cpu`), which the other reads to decide whether to spin.
pub(crate) const RING_VERSION: u32 = 3;
/// Size of the header page; the data area starts right after it.
pub(crate) const HEADER_BYTES: usize = 4096;
/// Records start on, and are padded to, this alignment (Arrow's preferred buffer alignment).
pub(crate) const RECORD_ALIGN: usize = 64;
/// A record header occupies a whole alignment unit so that the payload starts 64-aligned.
pub(crate) const RECORD_HEADER_BYTES: usize = 64;
/// `"RSCR"`: the first word of every record header.
pub(crate) const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"RSCR");

/// Smallest data area: one page.
pub const MIN_CAPACITY_BYTES: usize = 4096;
/// Largest data area (64 GiB): bounds what a (possibly hostile) header may claim.
pub const MAX_CAPACITY_BYTES: usize = 1 << 36;

/// Peer states (`producer_state`, `consumer_state`).
pub(crate) mod state {
    // 0: not yet attached (consumer) / header being initialised (producer).
    /// Attached and working.
    pub(crate) const RUNNING: u32 = 1;
    /// Producer: wrote end of stream. Consumer: read to the end.
    pub(crate) const FINISHED: u32 = 2;
    /// Producer: wrote an error record.
    pub(crate) const FAILED: u32 = 3;
    /// Consumer: asked the producer to stop.
    pub(crate) const CANCELLED: u32 = 4;
    /// Dropped without a clean end (producer: no terminal record).
    pub(crate) const GONE: u32 = 5;
}

/// The header page of a ring segment.
///
/// Cache-line plan: line 0 is written once (identity) plus the rare state words;
/// each position shares a line only with the futex word its owner bumps at the same
/// moment; the "waiting" flags that the other side reads on every publish/release sit
/// on lines of their own so that position traffic does not evict them.
#[repr(C, align(64))]
#[derive(Debug)]
pub(crate) struct RingHeader {
    // -- line 0: identity (written once by the creator) and peer states
    pub(crate) magic: AtomicU64,
    pub(crate) version: AtomicU32,
    pub(crate) header_bytes: AtomicU32,
    pub(crate) capacity_bytes: AtomicU64,
    pub(crate) producer_pid: AtomicU32,
    pub(crate) consumer_pid: AtomicU32,
    pub(crate) producer_state: AtomicU32,
    pub(crate) consumer_state: AtomicU32,
    _pad0: [u8; 24],
    // -- line 1: producer-owned
    /// Bytes published by the producer (monotonic; offset = pos % capacity).
    pub(crate) write_pos: AtomicU64,
    /// Futex word the consumer sleeps on; the producer bumps it after publishing.
    pub(crate) data_word: AtomicU32,
    /// The CPU the producer last published from, plus one (0: not known): a hint
    /// ([`crate::sys::current_cpu`]); the consumer does not spin when it runs there.
    pub(crate) producer_cpu: AtomicU32,
    _pad1: [u8; 48],
    // -- line 2: consumer-owned
    /// Bytes released by the consumer (monotonic, contiguous released prefix).
    pub(crate) read_pos: AtomicU64,
    /// Futex word the producer sleeps on; the consumer bumps it after releasing.
    pub(crate) space_word: AtomicU32,
    /// The CPU the consumer last released from, plus one (0: not known): a hint; the
    /// producer does not spin when it runs there.
    pub(crate) consumer_cpu: AtomicU32,
    _pad2: [u8; 48],
    // -- line 3: set by the consumer just before it sleeps
    pub(crate) consumer_waiting: AtomicU32,
    _pad3: [u8; 60],
    // -- line 4: set by the producer just before it sleeps
    pub(crate) producer_waiting: AtomicU32,
    _pad4a: [u8; 4],
    /// The read position the sleeping producer needs (room for its next record):
    /// a release that does not reach it does not wake the producer. Stored before
    /// `producer_waiting` is raised.
    pub(crate) space_wanted_pos: AtomicU64,
    _pad4: [u8; 48],
    _reserved: [u8; HEADER_BYTES - 5 * 64],
}

const _: () = assert!(size_of::<RingHeader>() == HEADER_BYTES);
const _: () = assert!(align_of::<RingHeader>() == 64);
const _: () = assert!(std::mem::offset_of!(RingHeader, write_pos) == 64);
const _: () = assert!(std::mem::offset_of!(RingHeader, read_pos) == 128);
const _: () = assert!(std::mem::offset_of!(RingHeader, consumer_waiting) == 192);
const _: () = assert!(std::mem::offset_of!(RingHeader, producer_waiting) == 256);
const _: () = assert!(std::mem::offset_of!(RingHeader, space_wanted_pos) == 264);

/// What a record carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum RecordKind {
    /// Fills the tail of the data area so that no record wraps.
    Padding = 1,
    /// The Arrow IPC schema message (always the first record).
    Schema = 2,
    /// Arrow IPC messages: dictionary batches (if any) then one record batch.
    Batch = 3,
    /// Clean end of stream; empty payload.
    EndOfStream = 4,
    /// The producer failed; payload is its UTF-8 error text.
    Error = 5,
    /// The producer acknowledges the consumer's cancel and stops; empty payload.
    Cancel = 6,
}

impl RecordKind {
    fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            1 => Self::Padding,
            2 => Self::Schema,
            3 => Self::Batch,
            4 => Self::EndOfStream,
            5 => Self::Error,
            6 => Self::Cancel,
            _ => return None,
        })
    }
}

/// A decoded, validated record header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordHeader {
    pub(crate) kind: RecordKind,
    pub(crate) payload_bytes: u64,
    pub(crate) seq: u64,
}

/// Rounds `n` up to [`RECORD_ALIGN`]; `None` on overflow.
pub(crate) fn align_up(n: u64) -> Option<u64> {
    let mask = RECORD_ALIGN as u64 - 1;
    n.checked_add(mask).map(|v| v & !mask)
}

impl RecordHeader {
    /// Total bytes the record occupies in the data area (header + padded payload).
    pub(crate) fn record_bytes(&self) -> u64 {
        // Validated headers have payload <= capacity <= 2^36, so this cannot overflow.
        RECORD_HEADER_BYTES as u64 + align_up(self.payload_bytes).unwrap_or(u64::MAX)
    }

    pub(crate) fn encode(&self) -> [u8; RECORD_HEADER_BYTES] {
        let mut out = [0u8; RECORD_HEADER_BYTES];
        out[0..4].copy_from_slice(&RECORD_MAGIC.to_le_bytes());
        out[4..8].copy_from_slice(&(self.kind as u32).to_le_bytes());
        out[8..16].copy_from_slice(&self.payload_bytes.to_le_bytes());
        out[16..24].copy_from_slice(&self.seq.to_le_bytes());
        out[24..32].copy_from_slice(&self.record_bytes().to_le_bytes());
        out
    }

    /// Parses and validates a header copied out of the ring. `available` is how many
    /// bytes the record may span (published bytes ahead and room before the end of the
    /// data area, whichever is smaller); `expected_seq` the next sequence number.
    pub(crate) fn decode(
        raw: &[u8; RECORD_HEADER_BYTES],
        available: u64,
        expected_seq: u64,
    ) -> Result<Self, String> {
        let word = |at: usize| u64::from_le_bytes(raw[at..at + 8].try_into().unwrap_or([0; 8]));
        let magic = u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]);
        if magic != RECORD_MAGIC {
            return Err(format!("bad record magic {magic:#010x}"));
        }
        let kind_raw = u32::from_le_bytes([raw[4], raw[5], raw[6], raw[7]]);
        let kind = RecordKind::from_u32(kind_raw)
            .ok_or_else(|| format!("unknown record kind {kind_raw}"))?;
        let payload_bytes = word(8);
        let seq = word(16);
        let record_bytes = word(24);
        if seq != expected_seq {
            return Err(format!("record sequence {seq}, expected {expected_seq}"));
        }
        let header = Self {
            kind,
            payload_bytes,
            seq,
        };
        let expected_len = align_up(payload_bytes)
            .and_then(|p| p.checked_add(RECORD_HEADER_BYTES as u64))
            .ok_or_else(|| format!("record payload length {payload_bytes} overflows"))?;
        if record_bytes != expected_len {
            return Err(format!(
                "record length {record_bytes} disagrees with payload length {payload_bytes}"
            ));
        }
        if record_bytes > available {
            return Err(format!(
                "record of {record_bytes} bytes overruns the {available} bytes available"
            ));
        }
        Ok(header)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_rejects_garbage() {
        let h = RecordHeader {
            kind: RecordKind::Batch,
            payload_bytes: 100,
            seq: 7,
        };
        assert_eq!(h.record_bytes(), 64 + 128);
        let raw = h.encode();
        assert_eq!(RecordHeader::decode(&raw, 1 << 20, 7), Ok(h));
        assert!(
            RecordHeader::decode(&raw, 1 << 20, 8).is_err(),
            "sequence checked"
        );
        assert!(
            RecordHeader::decode(&raw, 191, 7).is_err(),
            "length bounded"
        );
        let mut bad = raw;
        bad[0] ^= 1;
        assert!(
            RecordHeader::decode(&bad, 1 << 20, 7).is_err(),
            "magic checked"
        );
        let mut bad = raw;
        bad[4] = 99;
        assert!(
            RecordHeader::decode(&bad, 1 << 20, 7).is_err(),
            "kind checked"
        );
        let mut bad = raw;
        bad[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(
            RecordHeader::decode(&bad, u64::MAX, 7).is_err(),
            "overflow checked"
        );
        let mut bad = raw;
        bad[24] = 0;
        assert!(
            RecordHeader::decode(&bad, 1 << 20, 7).is_err(),
            "redundant length checked"
        );
    }
}
