//! `ringscan-ipc`: the types and transport that cross the process boundary between the
//! IO daemon and the executor.
//!
//! - **The ring** ([`Producer`], [`Consumer`]): a named POSIX shared-memory segment
//!   (mode 0600) with a 4 KiB header page and a data area of variable-length, 64-byte
//!   aligned records that never wrap. The producer encodes each Arrow
//!   [`RecordBatch`](arrow_array::RecordBatch) as an Arrow IPC message straight into
//!   ring space (one copy of the column data); the consumer imports it zero-copy, its
//!   buffers pointing into the mapping, and the space is given back when the batch is
//!   dropped (in any order). A wait may spin a bounded few µs ([`wait_spin`]; not
//!   when the peer last ran on the waiter's CPU, where it cannot run until the waiter
//!   sleeps), then blocks on a futex and
//!   wakes every [`LIVENESS_INTERVAL`] to check the peer, so a dead peer is an error
//!   within a second; publishing costs a system call only when the peer sleeps, one
//!   per sleep. The name is unlinked as soon as both sides have mapped it.
//! - **Progress.** A batch larger than an eighth of the ring is pushed as several
//!   records, so wide rows fit. A consumer whose caller keeps batches (a collect, a
//!   sort, an operator that waits for more input) would leave the producer waiting for
//!   space only those batches hold: when it has nothing to read and the producer has
//!   waited a short grace period, the consumer copies the held pages out of the ring
//!   ([`Consumer::unpin`]; the batches keep their addresses) and gives the space back.
//!   A push can be told when to stop waiting ([`Producer::push_until`]).
//! - **Memory.** Pages of a segment are reserved ahead of the writes, so a full
//!   `/dev/shm` is [`RingError::NoSpace`] for that ring, never a `SIGBUS`;
//!   [`live_ring_bytes`] lets a daemon budget its rings.
//! - **Control-socket messages** ([`msg`]): [`ScanRequest`](msg::ScanRequest), the
//!   [`Predicate`](msg::Predicate) tree, [`ScanSummary`](msg::ScanSummary), and
//!   length-prefixed framing with size limits.
//! - **Benchmark** ([`bench`]): the cross-process throughput and hand-off latency
//!   measurement behind `ringscan bench ring`.
//!
//! All `unsafe` code lives in one private module (`sys`: libc calls and the zero-copy
//! buffer constructor); everything read from the segment is validated before use.
//!
//! **Trust model.** A segment is created 0600 and shared with one process of the same
//! user (the daemon and the executor are the same program). Record framing and
//! positions are checked against the consumer's own state (the write position may not
//! pass the oldest record the consumer still holds plus the capacity), so a confused
//! or dead peer is an error, never a read out of bounds. Batch payloads, though, are
//! validated once, in place, in memory the peer can still write: a hostile same-user
//! peer that rewrites a payload after validation could make a reader see invalid
//! offsets. The ring trusts a same-uid peer not to; anything that needs more (another
//! user, another trust domain) must copy the payload out before validating it.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use arrow_array::{Int64Array, RecordBatch};
//! use arrow_schema::{DataType, Field, Schema};
//! use ringscan_ipc::{Consumer, Producer, unique_name};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
//! let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(vec![1, 2, 3]))])?;
//!
//! // Normally the daemon creates the ring and the executor (another process) attaches.
//! let name = unique_name("doc");
//! let mut producer = Producer::create(&name, schema, 1 << 20)?;
//! let consumer = Consumer::attach(&name)?; // the name is gone from /dev/shm from here on
//! producer.push(&batch)?;
//! producer.finish()?;
//!
//! let batches: Vec<RecordBatch> = consumer.collect::<Result<_, _>>()?;
//! assert_eq!(batches, vec![batch]);
//! # Ok(())
//! # }
//! ```
#![deny(unsafe_op_in_unsafe_fn)]

pub mod bench;
pub mod client;
mod codec;
mod column_stats;
mod consumer;
mod error;
mod info;
mod layout;
pub mod msg;
pub mod names;
mod producer;
mod release;
mod report;
mod ring;
pub mod scan_data;
mod stale;
mod sys;
mod wait;
pub mod watch;

/// Version of the control protocol; bumped on incompatible changes.
pub const PROTOCOL_VERSION: u32 = 1;

pub use consumer::{Consumer, TryNext};
pub use error::{Peer, RingError};
pub use layout::{MAX_CAPACITY_BYTES, MIN_CAPACITY_BYTES};
pub use producer::{live_ring_bytes, FreshRing, Producer};
pub use report::{causes, error_chain};
pub use ring::{unique_name, RingOptions, LIVENESS_INTERVAL, MAX_ERROR_TEXT_BYTES, RING_PREFIX};
pub use stale::{remove_rings_of, remove_stale_rings};
pub use sys::{monotonic_ns, shm_size_bytes, wait_readable};
pub use wait::{set_wait_spin, wait_spin, DEFAULT_SPIN_US, MAX_SPIN_US};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_wake;
