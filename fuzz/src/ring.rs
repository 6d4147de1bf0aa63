//! Ring target: a [`Consumer`] reading a segment whose header and records the input
//! writes, over time, as a hostile or confused producer would.
//!
//! The segment is a file in `/dev/shm` (what `shm_open` opens), created 0600 by the
//! target and written with plain file writes: the input plays the producer without
//! [`Producer`](ringscan_ipc::Producer) and its invariants. The header offsets below
//! restate `ipc/src/layout.rs` (a wire format, pinned by that file's compile-time
//! asserts); `tests/corpus.rs` checks that the seed corpus still yields batches through
//! them, so a layout change that forgets this file fails a test.
//!
//! Input: `[flags u8][write_pos u64][n u16][n bytes of data area]` for the segment as
//! the consumer attaches, then operations until the input ends, one byte each
//! (`op % 8`) followed by its operands:
//!
//! | op | operands | what |
//! |----|----------|------|
//! | 0 | | `try_next`; a batch is checked (`validate_full`) and kept |
//! | 1 | `i u8` | drop kept batch `i % kept` (out-of-order release) |
//! | 2 | `offset u16, n u16, n bytes` | write into the data area at `offset % capacity` |
//! | 3 | `write_pos u32` | store the write position |
//! | 4 | `state u8` | store the producer's state |
//! | 5 | | `unpin` (copy the kept batches out of the ring) |
//! | 6 | | `rearm`, then `begin_stream` (with the producer not "running": it would wait) |
//! | 7 | | `cancel` |

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;

use arrow_array::RecordBatch;
use ringscan_ipc::{unique_name, Consumer, TryNext};

/// Data area of the fuzzed ring: small, so records wrap after a few batches.
pub(crate) const CAPACITY_BYTES: u64 = 8192;
/// Most batches the target keeps alive (out-of-order release, unpin).
const MAX_HELD: usize = 16;

/// Byte offsets in the header page (`RingHeader` in `ipc/src/layout.rs`).
pub(crate) mod at {
    pub(crate) const MAGIC: u64 = 0;
    pub(crate) const VERSION: u64 = 8;
    pub(crate) const HEADER_BYTES: u64 = 12;
    pub(crate) const CAPACITY: u64 = 16;
    pub(crate) const PRODUCER_PID: u64 = 24;
    pub(crate) const CONSUMER_PID: u64 = 28;
    pub(crate) const PRODUCER_STATE: u64 = 32;
    pub(crate) const WRITE_POS: u64 = 64;
    /// The data area.
    pub(crate) const DATA: u64 = 4096;
}
const MAGIC: u64 = u64::from_le_bytes(*b"RINGSCAN");
const VERSION: u32 = 3;
/// Producer states (`layout::state`).
pub(crate) const RUNNING: u32 = 1;
pub(crate) const FINISHED: u32 = 2;
const GONE: u32 = 5;

/// Reads the input front to back; past its end everything is zero.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let (head, tail) = self.0.split_at(n.min(self.0.len()));
        self.0 = tail;
        head
    }
    fn u8(&mut self) -> u8 {
        self.take(1).first().copied().unwrap_or(0)
    }
    fn le<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let head = self.take(N);
        out[..head.len()].copy_from_slice(head);
        out
    }
}

/// The segment file; removed on drop (already gone once the consumer attached).
struct Segment {
    file: File,
    path: PathBuf,
}

impl Segment {
    fn put(&self, offset: u64, bytes: &[u8]) {
        self.file
            .write_all_at(bytes, offset)
            .expect("write to the fuzzed ring segment");
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Attaches a [`Consumer`] to a segment laid out from `bytes`, then runs the operations
/// that follow (writes, publishes, state changes, reads, releases, unpins, rearms).
pub fn fuzz_ring(bytes: &[u8]) {
    ring_batches(bytes);
}

/// [`fuzz_ring`], returning how many batches the consumer handed out: a test checks
/// that the seeds still get through to the decoder (the header offsets here restate the
/// ring's layout).
pub fn ring_batches(bytes: &[u8]) -> usize {
    let mut batches = 0;
    let mut input = Input(bytes);
    let flags = input.u8();
    let write_pos = u64::from_le_bytes(input.le());
    let n = usize::from(u16::from_le_bytes(input.le()));
    let data = input.take(n);

    let name = unique_name("ringscan-fuzz");
    let path = PathBuf::from("/dev/shm").join(&name[1..]);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .expect("create the fuzzed ring segment in /dev/shm");
    let segment = Segment { file, path };
    segment
        .file
        .set_len(at::DATA + CAPACITY_BYTES)
        .expect("size the fuzzed ring segment");

    // The high nibble of `flags` breaks one identity field, the low one is the
    // producer's state (never "running" while attaching: the consumer would wait for
    // the schema record forever, its producer being alive).
    let mut state = u32::from(flags & 0x0f);
    if state == RUNNING {
        state = GONE;
    }
    let broken = flags >> 4;
    let pick = |field: u8, good: u64, bad: u64| if broken == field { bad } else { good };
    segment.put(at::MAGIC, &pick(1, MAGIC, MAGIC ^ 0x100).to_le_bytes());
    segment.put(
        at::VERSION,
        &(pick(2, VERSION.into(), u64::from(VERSION) + 1) as u32).to_le_bytes(),
    );
    segment.put(
        at::HEADER_BYTES,
        &(pick(3, at::DATA, 64) as u32).to_le_bytes(),
    );
    segment.put(
        at::CAPACITY,
        &pick(4, CAPACITY_BYTES, CAPACITY_BYTES * 2).to_le_bytes(),
    );
    segment.put(
        at::PRODUCER_PID,
        &(pick(5, std::process::id().into(), 0) as u32).to_le_bytes(),
    );
    segment.put(at::CONSUMER_PID, &(pick(6, 0, 1) as u32).to_le_bytes());
    segment.put(at::PRODUCER_STATE, &state.to_le_bytes());
    segment.put(at::WRITE_POS, &write_pos.to_le_bytes());
    segment.put(at::DATA, &data[..data.len().min(CAPACITY_BYTES as usize)]);

    let Ok(mut consumer) = Consumer::attach(&name) else {
        return batches;
    };
    let mut kept: Vec<RecordBatch> = Vec::new();
    while !input.0.is_empty() {
        match input.u8() % 8 {
            0 => match consumer.try_next() {
                Ok(TryNext::Batch(batch)) => {
                    check(&batch);
                    batches += 1;
                    if kept.len() == MAX_HELD {
                        kept.remove(0);
                    }
                    kept.push(batch);
                }
                Ok(TryNext::Empty | TryNext::End) | Err(_) => {}
            },
            1 => {
                let i = usize::from(input.u8());
                if !kept.is_empty() {
                    kept.remove(i % kept.len());
                }
            }
            2 => {
                let offset = u64::from(u16::from_le_bytes(input.le())) % CAPACITY_BYTES;
                let n = usize::from(u16::from_le_bytes(input.le()));
                let bytes = input.take(n);
                let room = (CAPACITY_BYTES - offset) as usize;
                segment.put(at::DATA + offset, &bytes[..bytes.len().min(room)]);
            }
            3 => {
                let wp = u32::from_le_bytes(input.le());
                segment.put(at::WRITE_POS, &u64::from(wp).to_le_bytes());
            }
            4 => {
                let state = u32::from(input.u8());
                segment.put(at::PRODUCER_STATE, &state.to_le_bytes());
            }
            5 => {
                let _ = consumer.unpin();
            }
            6 => {
                if consumer.rearm() {
                    let mut state = [0u8; 4];
                    segment
                        .file
                        .read_exact_at(&mut state, at::PRODUCER_STATE)
                        .expect("read the fuzzed ring segment");
                    if u32::from_le_bytes(state) == RUNNING {
                        segment.put(at::PRODUCER_STATE, &GONE.to_le_bytes());
                    }
                    let _ = consumer.begin_stream();
                }
            }
            _ => consumer.cancel(),
        }
    }
    batches
}

/// A batch the consumer handed out is valid by arrow's own full check, done now, before
/// the input can write over its bytes (the ring validates in place and trusts a peer of
/// the same user not to rewrite a payload afterwards: see `ipc`'s trust model).
fn check(batch: &RecordBatch) {
    for column in batch.columns() {
        if let Err(e) = column.to_data().validate_full() {
            panic!("the consumer handed out an invalid batch: {e}");
        }
    }
}
