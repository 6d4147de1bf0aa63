//! Typed errors of the ring. Each says what failed and on which ring.

use std::fmt;
use std::io;

use arrow_schema::ArrowError;

/// Which side of a ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// The side that creates the ring and pushes batches (the IO daemon).
    Producer,
    /// The side that attaches and imports batches (the executor).
    Consumer,
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Peer::Producer => "producer",
            Peer::Consumer => "consumer",
        })
    }
}

/// Everything that can go wrong on a ring.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RingError {
    /// The name is not a valid POSIX shared-memory name.
    #[error("invalid ring name {name:?}: {reason}")]
    InvalidName {
        /// The rejected name.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// The requested capacity is out of range.
    #[error("invalid ring capacity of {capacity_bytes} bytes: {reason}")]
    InvalidCapacity {
        /// The rejected capacity.
        capacity_bytes: usize,
        /// Why.
        reason: &'static str,
    },
    /// A system call failed.
    #[error("{op} of ring {name:?} failed")]
    Os {
        /// The operation (`shm_open`, `mmap`, ...).
        op: &'static str,
        /// The ring.
        name: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A value read from the segment failed validation (corrupt or hostile peer).
    #[error("ring {name:?} is corrupt: {detail}")]
    Corrupt {
        /// The ring.
        name: String,
        /// What was wrong.
        detail: String,
    },
    /// Another consumer already attached.
    #[error("ring {name:?} already has a consumer (pid {pid})")]
    AlreadyAttached {
        /// The ring.
        name: String,
        /// The attached consumer.
        pid: u32,
    },
    /// The other process died (or exited without closing the ring).
    #[error("the {peer} process (pid {pid}) of ring {name:?} died")]
    PeerDied {
        /// The ring.
        name: String,
        /// Which side died.
        peer: Peer,
        /// Its process id.
        pid: u32,
    },
    /// No consumer attached in time.
    #[error("no consumer attached to ring {name:?} within {waited_ms} ms")]
    NotAttached {
        /// The ring.
        name: String,
        /// How long the producer waited.
        waited_ms: u64,
    },
    /// The producer dropped the ring without end of stream or error.
    #[error("the producer of ring {name:?} closed it without an end of stream")]
    ProducerGone {
        /// The ring.
        name: String,
    },
    /// The producer reported an error (the daemon's error text).
    #[error("the producer failed: {message}")]
    ProducerFailed {
        /// The producer's error text.
        message: String,
    },
    /// The consumer cancelled the stream (seen by the producer at its next push).
    #[error("the consumer of ring {name:?} cancelled the stream")]
    Cancelled {
        /// The ring.
        name: String,
    },
    /// A record is larger than the ring can ever hold.
    #[error(
        "a record of {record_bytes} bytes does not fit ring {name:?} of {capacity_bytes} bytes"
    )]
    RecordTooLarge {
        /// The ring.
        name: String,
        /// Size of the record, header included.
        record_bytes: u64,
        /// Ring capacity.
        capacity_bytes: u64,
    },
    /// `/dev/shm` (a tmpfs) has no room for the ring's pages: an error for this ring,
    /// where writing to a page the file system cannot provide would kill the process.
    #[error("/dev/shm has no room for {bytes} more bytes of ring {name:?}: free space there, or use smaller rings")]
    NoSpace {
        /// The ring.
        name: String,
        /// The bytes asked for.
        bytes: u64,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The producer waits for space that only batches the consumer's caller still holds
    /// can free, and copying those batches out of the ring failed.
    #[error(
        "ring {name:?} stalled: batches still held fill {held_bytes} of its {capacity_bytes} \
         bytes, the producer waits for room, and copying them out of the ring failed"
    )]
    Stalled {
        /// The ring.
        name: String,
        /// Ring bytes the held batches pin.
        held_bytes: u64,
        /// Ring capacity.
        capacity_bytes: u64,
        /// Why the copy failed.
        #[source]
        source: io::Error,
    },
    /// The producer's caller asked it to stop while it waited for space (the daemon is
    /// stopping, or the client went away).
    #[error("the producer of ring {name:?} stopped waiting for space: {reason}")]
    Stopped {
        /// The ring.
        name: String,
        /// What the caller said.
        reason: String,
    },
    /// A batch would need its buffers copied to be aligned; rejected instead.
    #[error("a batch in ring {name:?} has misaligned buffers: {detail}")]
    Misaligned {
        /// The ring.
        name: String,
        /// Which buffer.
        detail: String,
    },
    /// Arrow IPC encoding or decoding failed.
    #[error("Arrow IPC {op} failed on ring {name:?}")]
    Arrow {
        /// `encode` or `decode`.
        op: &'static str,
        /// The ring.
        name: String,
        /// Arrow's error.
        #[source]
        source: ArrowError,
    },
}

impl RingError {
    pub(crate) fn os(op: &'static str, name: &str, source: io::Error) -> Self {
        Self::Os {
            op,
            name: name.to_owned(),
            source,
        }
    }

    pub(crate) fn corrupt(name: &str, detail: impl Into<String>) -> Self {
        Self::Corrupt {
            name: name.to_owned(),
            detail: detail.into(),
        }
    }
}
