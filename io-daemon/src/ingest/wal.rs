//! The write-ahead log: a commit is answered only once its record is durable.
//!
//! **Invariant**: a commit answered `Ok(lsn)` is in the log, and is replayed by every
//! later [`Wal::open`] (until [`Wal::remove_through`] drops its segment), whatever the
//! power or the disk did after the answer. A commit answered with an error was not
//! applied; see [`WalError::Failed`] for the one case where it may still come back.
//!
//! ## Format
//! A record is `[u32 LE payload length][u32 LE CRC32C of (LSN bytes ++ payload)]
//! [u64 LE LSN][payload]`: the checksum covers the LSN, so a record copied or left
//! over from another position does not pass. LSNs are consecutive from 1. Records live
//! in segments named `wal-<first LSN, 20 digits>.log`; [`Wal::rotate`] starts the next
//! one. The payload is opaque to the log, at most [`MAX_RECORD_BYTES`].
//!
//! ## Recovery
//! [`Wal::open`] reads the segments in LSN order and hands each valid record to the
//! caller. The first record that is short, fails its checksum or does not carry the
//! next LSN ends the log: in the last segment that is a torn tail (a crash mid-write;
//! nothing there was acknowledged, since an acknowledgement follows the sync of every
//! byte before it), cut off; in any earlier segment it is corruption, an error naming
//! the segment and the byte offset (the later segments hold acknowledged commits).
//!
//! ## Writing
//! One writer thread owns the current segment. [`Wal::commit`] queues the caller's item
//! and blocks; the writer takes every queued commit (up to [`MAX_GROUP_RECORDS`] and
//! [`MAX_GROUP_BYTES`]), asks the [`Committer`] for each record, appends the whole group
//! with one write and makes it durable with one `fdatasync`, applies the group through
//! the committer in LSN order, and then answers everyone: N concurrent committers pay
//! for far fewer than N syncs.
//!
//! ## Failures
//! PostgreSQL's lesson (2018, "fsyncgate"): after a failed `fdatasync` the kernel may
//! have dropped the dirty pages and will report success next time, so a retry proves
//! nothing. A failed sync therefore fails the log for good ([`WalError::Failed`]): that
//! group and every later commit fail until the daemon restarts and recovers from what
//! is durable. A failed write (a full disk, a torn write) is different: the file is cut
//! back to its last good length (a truncate that syncs), those commits fail
//! ([`WalError::Write`]), and the next ones go on; only if the cut fails too is the log
//! failed.

use std::fmt;
use std::io;
use std::mem;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};

use super::file::{LogDir, LogFile};

/// A log sequence number: the position of a record in the log, from 1.
pub type Lsn = u64;

/// The largest payload one record may carry (1 GiB): a larger commit is refused before
/// anything is written, and a length above it in a segment is corruption (never an
/// allocation).
pub const MAX_RECORD_BYTES: usize = 1 << 30;

/// The bytes before each payload: length, checksum, LSN.
pub const RECORD_HEADER_BYTES: usize = 16;

/// The most commits one group takes (one write, one sync).
pub const MAX_GROUP_RECORDS: usize = 1024;

/// A group stops taking commits once its records reach this many bytes (16 MiB).
pub const MAX_GROUP_BYTES: usize = 16 << 20;

/// A payload of at least this many bytes (1 MiB) is written from its own buffer rather
/// than copied into the group's: a large COPY's record is not copied twice more.
const OWN_WRITE_BYTES: usize = 1 << 20;

/// How many requests may wait for the writer; a committer beyond it blocks until there
/// is room.
pub const QUEUE_CAPACITY: usize = 4096;

/// The largest first LSN a segment name may carry: far beyond any real log, and low
/// enough that counting on from it cannot overflow.
const MAX_SEGMENT_LSN: Lsn = u64::MAX >> 1;

/// The name of the segment whose first record has LSN `first_lsn`.
pub fn segment_name(first_lsn: Lsn) -> String {
    format!("wal-{first_lsn:020}.log")
}

/// The first LSN of a segment name; `None` for a name that is not a segment's (other
/// files may share the directory), an error for one that looks like a segment's but
/// is not valid.
fn parse_segment_name(name: &str) -> Option<Result<Lsn, String>> {
    let digits = name.strip_prefix("wal-")?.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Err("not a segment name (wal-<20 digits>.log)".to_owned()));
    }
    match digits.parse::<Lsn>() {
        Ok(lsn) if (1..=MAX_SEGMENT_LSN).contains(&lsn) => Some(Ok(lsn)),
        _ => Some(Err(format!(
            "first LSN out of range (1 to {MAX_SEGMENT_LSN})"
        ))),
    }
}

/// The checksum of a record: CRC32C of its LSN's bytes and its payload.
fn record_crc(lsn: Lsn, payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&lsn.to_le_bytes()), payload)
}

/// Appends the record `(lsn, payload)` to `buf`. The caller checked the payload's size.
fn encode_record(buf: &mut Vec<u8>, lsn: Lsn, payload: &[u8]) {
    buf.reserve(RECORD_HEADER_BYTES + payload.len());
    encode_header(buf, lsn, payload);
    buf.extend_from_slice(payload);
}

/// Appends the header of the record `(lsn, payload)` to `buf` (the payload follows).
fn encode_header(buf: &mut Vec<u8>, lsn: Lsn, payload: &[u8]) {
    debug_assert!(payload.len() <= MAX_RECORD_BYTES);
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    buf.reserve(RECORD_HEADER_BYTES);
    buf.extend_from_slice(&len.to_le_bytes());
    buf.extend_from_slice(&record_crc(lsn, payload).to_le_bytes());
    buf.extend_from_slice(&lsn.to_le_bytes());
}

/// A group's bytes: `buf`, with each large payload of `own` written after
/// `buf[..offset]` (its header ends there) from its own buffer.
struct GroupBytes<P> {
    buf: Vec<u8>,
    own: Vec<(usize, P)>,
    /// `buf` and the payloads of `own`, in bytes.
    len: usize,
}

/// What [`RecordReader::next`] found.
#[derive(Debug, PartialEq, Eq)]
enum Next<'a> {
    /// A valid record.
    Record(Lsn, &'a [u8]),
    /// The bytes ended exactly after a record.
    End,
    /// The record at `offset` is not valid; the log ends before it.
    Bad { offset: usize, reason: String },
}

/// Reads the records of one segment, checking each before handing it out.
#[derive(Debug)]
struct RecordReader<'a> {
    bytes: &'a [u8],
    offset: usize,
    next_lsn: Lsn,
}

impl<'a> RecordReader<'a> {
    fn new(bytes: &'a [u8], first_lsn: Lsn) -> Self {
        Self {
            bytes,
            offset: 0,
            next_lsn: first_lsn,
        }
    }

    fn next(&mut self) -> Next<'a> {
        let rest = &self.bytes[self.offset..];
        if rest.is_empty() {
            return Next::End;
        }
        let bad = |reason: String| Next::Bad {
            offset: self.offset,
            reason,
        };
        let Some((header, body)) = rest.split_first_chunk::<RECORD_HEADER_BYTES>() else {
            return bad(format!(
                "a record header needs {RECORD_HEADER_BYTES} bytes, {} remain",
                rest.len()
            ));
        };
        let [l0, l1, l2, l3, c0, c1, c2, c3, lsn_bytes @ ..] = *header;
        let len = u32::from_le_bytes([l0, l1, l2, l3]) as usize;
        let stored_crc = u32::from_le_bytes([c0, c1, c2, c3]);
        let lsn = Lsn::from_le_bytes(lsn_bytes);
        if len > MAX_RECORD_BYTES {
            return bad(format!(
                "payload length {len} is above the limit of {MAX_RECORD_BYTES} bytes"
            ));
        }
        let Some(payload) = body.get(..len) else {
            return bad(format!(
                "the record says {len} payload bytes, {} remain",
                body.len()
            ));
        };
        let crc = record_crc(lsn, payload);
        if crc != stored_crc {
            return bad(format!(
                "checksum mismatch (stored {stored_crc:#010x}, computed {crc:#010x})"
            ));
        }
        if lsn != self.next_lsn {
            return bad(format!("LSN {lsn} where {} was expected", self.next_lsn));
        }
        self.offset += RECORD_HEADER_BYTES + len;
        // No overflow: segment names start at most at MAX_SEGMENT_LSN, and one more per
        // record read from memory.
        self.next_lsn += 1;
        Next::Record(lsn, payload)
    }
}

/// The caller's side of a commit, run on the writer thread.
///
/// The hooks run with the committer's lock held (the one
/// [`Wal::with_committer`] takes), one commit group at a time:
/// 1. [`prepare`](Self::prepare), for each commit of the group in queue order;
/// 2. the group is written and synced, without the lock (readers get in here, and see
///    what `prepare` set);
/// 3. then, in LSN order, either [`apply`](Self::apply) for every prepared commit (the
///    sync succeeded) or [`abandon`](Self::abandon) for every one (it failed);
/// 4. then the committers are answered: a caller that got `Ok(lsn)` finds its commit
///    applied, one that got an error finds it abandoned.
///
/// An item whose `prepare` refused, or that never reached `prepare` (the log had
/// failed), is dropped without another call.
pub trait Committer: Send + 'static {
    /// What a caller commits.
    type Item: Send + 'static;

    /// A record's payload: its bytes, owned or shared (a large one is written from
    /// where it lies, not copied into the group's buffer).
    type Payload: AsRef<[u8]>;

    /// The record's payload for `item`, or a refusal (the caller gets
    /// [`WalError::Refused`] with the message; nothing is written, and a refusing
    /// prepare must leave the committer's state as it found it). Sees the earlier
    /// prepared but not yet applied commits of the same group only through the state
    /// their `prepare` set (so a duplicate key within one group is caught here). May
    /// take what it needs out of `item` (the payload, rather than a copy of it).
    fn prepare(&mut self, item: &mut Self::Item) -> Result<Self::Payload, String>;

    /// The record of `item` is durable at `lsn`: make the commit visible. In LSN
    /// order, before its caller is answered.
    fn apply(&mut self, lsn: Lsn, item: Self::Item);

    /// `item` was prepared but will not be applied (its group's write or sync failed,
    /// or its payload was too large): undo what `prepare` set.
    fn abandon(&mut self, item: Self::Item);
}

/// What went wrong in the log, naming the segment and the cause.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WalError {
    /// A file operation outside the commit path failed (listing the directory, opening,
    /// reading, creating, truncating or removing a segment).
    #[error("write-ahead log: cannot {action} {file}: {error}")]
    Io {
        /// What was being done ("read", "create", ...).
        action: &'static str,
        /// The segment (or what else was acted on).
        file: String,
        /// The OS error.
        error: io::Error,
    },
    /// A segment that is not the last one holds an invalid record (or a segment is
    /// missing or misnamed): acknowledged commits follow it, so the log cannot just end
    /// there.
    #[error("write-ahead log {segment}: corrupt at byte {offset}: {reason}")]
    Corrupt {
        /// The segment.
        segment: String,
        /// Where in it the invalid record starts.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// The caller's replay refused a record.
    #[error("write-ahead log {segment}: cannot replay the record of LSN {lsn}: {message}")]
    Replay {
        /// The segment.
        segment: String,
        /// The record.
        lsn: Lsn,
        /// The replay's message.
        message: String,
    },
    /// [`Committer::prepare`] refused the commit: nothing was written.
    #[error("{0}")]
    Refused(String),
    /// The commit's record is larger than [`MAX_RECORD_BYTES`]: nothing was written.
    #[error(
        "commit refused: its record of {bytes} bytes is larger than the write-ahead log's \
         limit of {max} bytes; nothing was written to {segment}"
    )]
    TooLarge {
        /// The current segment.
        segment: String,
        /// The payload's size.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// Writing the group failed (a full disk, a torn write) and the segment was cut
    /// back to its last good length: the commit was not made, later ones may succeed.
    #[error("write-ahead log: writing to {segment} failed, so the commit was not made: {error}")]
    Write {
        /// The segment.
        segment: String,
        /// The OS error.
        error: Arc<io::Error>,
    },
    /// The log failed for good: an `fdatasync` (or a directory `fsync`, or the cut
    /// after a failed write) failed. Every commit from then on fails with this error;
    /// restarting recovers from what is durable.
    ///
    /// A commit answered with this error was abandoned, never applied, and is cut off
    /// the segment if that still works; if even that failed, its record may reappear
    /// when the log is replayed after a restart without a power cut: its outcome is
    /// unknown, as after any I/O error on commit.
    #[error(
        "the write-ahead log cannot be trusted after {what} failed on {segment}: {error}; \
         restart the daemon to recover from the log"
    )]
    Failed {
        /// The segment.
        segment: String,
        /// What failed ("fdatasync", ...).
        what: String,
        /// The OS error.
        error: Arc<io::Error>,
    },
    /// A committer hook panicked: the writer answers every request with this error
    /// from then on (the items in flight are dropped without `abandon`).
    #[error("the write-ahead log's writer thread stopped (a committer hook panicked)")]
    WriterGone,
}

/// What [`Wal::open`] found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Records handed to the replay.
    pub records_replayed: u64,
    /// The last LSN in the log (0 for a log without records); the next commit gets the
    /// one after it.
    pub last_lsn: Lsn,
    /// The bytes cut off the last segment (0 when it ended cleanly).
    pub bytes_truncated: u64,
    /// The torn tail that was cut off, if any.
    pub torn_tail: Option<TornTail>,
    /// The segments, oldest first (the last is the one written next).
    pub segments: Vec<String>,
}

/// Where the last segment was cut, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// The segment.
    pub segment: String,
    /// Its new length: where the first invalid record started.
    pub offset: u64,
    /// What was wrong with that record.
    pub reason: String,
}

/// Counters of the writer, since [`Wal::open`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WalStats {
    /// Commits answered, successfully or not.
    pub commits: u64,
    /// Records made durable (commits answered `Ok`).
    pub records: u64,
    /// `fdatasync` calls (failed ones included).
    pub syncs: u64,
    /// Bytes made durable, headers included.
    pub bytes: u64,
    /// Groups made durable (one write and one sync each).
    pub groups: u64,
    /// The most records one group held.
    pub group_records_max: u64,
    /// Time spent in `fdatasync`, in microseconds.
    pub sync_us_total: u64,
}

/// What the caller and the writer share.
struct Shared<C> {
    committer: Mutex<C>,
    stats: Mutex<WalStats>,
    /// The last durable LSN. Stored (Release) by the writer after a group's sync and
    /// before its apply; loaded (Acquire) by [`Wal::last_lsn`].
    last_lsn: AtomicU64,
}

/// Locks `mutex` even if a hook panicked while holding it: the writer is gone then
/// (commits report [`WalError::WriterGone`]), and readers get the state as it was.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

type Reply<T> = Oneshot<Result<T, WalError>>;

/// The answer to one request: the writer sends it once, the requester waits for it.
///
/// A mutex and a condition variable, not a channel: crossbeam's (and std's) blocking
/// receive spins and then calls `sched_yield` several times before it sleeps, and 16
/// committers waiting out an `fdatasync` of a millisecond or more did that all the
/// time (22% of the daemon's CPU under 16 clients of single-row inserts, in the
/// kernel's task switches). Here a waiter sleeps at once.
#[derive(Debug)]
struct Oneshot<T>(Arc<OneshotSlot<T>>);

#[derive(Debug)]
struct OneshotSlot<T> {
    /// `None` while waiting; the answer, or `Err(())` once the sender is gone
    /// without one.
    value: Mutex<Option<Result<T, ()>>>,
    ready: std::sync::Condvar,
}

impl<T> Oneshot<T> {
    /// A sender and its receiver.
    fn pair() -> (Self, OneshotReceiver<T>) {
        let slot = Arc::new(OneshotSlot {
            value: Mutex::new(None),
            ready: std::sync::Condvar::new(),
        });
        (Self(Arc::clone(&slot)), OneshotReceiver(slot))
    }

    /// Sends the answer (a receiver gone is no error: the answer is dropped).
    fn send(self, value: T) {
        self.set(Ok(value));
    }

    fn set(&self, value: Result<T, ()>) {
        let mut slot = lock(&self.0.value);
        if slot.is_none() {
            *slot = Some(value);
            self.0.ready.notify_one();
        }
    }
}

impl<T> Drop for Oneshot<T> {
    fn drop(&mut self) {
        // Without an answer (the writer stopped): the receiver learns so.
        self.set(Err(()));
    }
}

/// The waiting side of a [`Oneshot`].
struct OneshotReceiver<T>(Arc<OneshotSlot<T>>);

impl<T> OneshotReceiver<T> {
    /// The answer, or `Err` when the sender went without one.
    fn recv(self) -> Result<T, ()> {
        let mut slot = lock(&self.0.value);
        loop {
            if let Some(value) = slot.take() {
                return value;
            }
            slot = self
                .0
                .ready
                .wait(slot)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

enum Request<I> {
    Commit { item: I, reply: Reply<Lsn> },
    Rotate { reply: Reply<Lsn> },
    RemoveThrough { lsn: Lsn, reply: Reply<()> },
}

/// Why the log failed; every later request is answered with it.
#[derive(Debug, Clone)]
struct Failure {
    segment: String,
    what: String,
    error: Arc<io::Error>,
}

impl Failure {
    fn to_error(&self) -> WalError {
        WalError::Failed {
            segment: self.segment.clone(),
            what: self.what.clone(),
            error: Arc::clone(&self.error),
        }
    }
}

/// The write-ahead log. Commits from any number of threads (`&self`); dropping it
/// answers what is queued and stops the writer thread.
pub struct Wal<C: Committer> {
    /// `None` only while dropping: closing the queue is what stops the writer.
    requests: Option<Sender<Request<C::Item>>>,
    shared: Arc<Shared<C>>,
    writer: Option<JoinHandle<()>>,
}

impl<C: Committer> fmt::Debug for Wal<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wal")
            .field("last_lsn", &self.last_lsn())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl<C: Committer> Wal<C> {
    /// Opens the log in `dir` (an empty directory starts a new log): replays every
    /// record through `replay`, in LSN order, cuts a torn tail off the last segment,
    /// and starts the writer thread with `committer`.
    ///
    /// `replay` sees every record of the surviving segments, including those the
    /// caller has since made durable elsewhere (segments are removed only by
    /// [`remove_through`](Self::remove_through)): it skips by LSN what it already has.
    /// On an error, `replay` may have seen part of the log: drop what it built.
    pub fn open(
        dir: Arc<dyn LogDir>,
        committer: C,
        replay: impl FnMut(Lsn, &[u8]) -> Result<(), String>,
    ) -> Result<(Self, Recovery), WalError> {
        Self::open_after(dir, committer, replay, 0)
    }

    /// [`open`](Self::open) for a log whose records up to `floor` were made durable
    /// elsewhere (the tables' manifests cover them): a new log (an empty directory)
    /// starts after `floor`, so that no new record reuses a position those cover; a log
    /// that ends before `floor` lost segments, and is refused.
    pub fn open_after(
        dir: Arc<dyn LogDir>,
        committer: C,
        mut replay: impl FnMut(Lsn, &[u8]) -> Result<(), String>,
        floor: Lsn,
    ) -> Result<(Self, Recovery), WalError> {
        let mut segments = Vec::new();
        let names = dir.list().map_err(|error| WalError::Io {
            action: "list",
            file: "the log directory".to_owned(),
            error,
        })?;
        for name in names {
            match parse_segment_name(&name) {
                None => {}
                Some(Ok(first_lsn)) => segments.push(Segment { first_lsn, name }),
                Some(Err(reason)) => {
                    return Err(WalError::Corrupt {
                        segment: name,
                        offset: 0,
                        reason,
                    })
                }
            }
        }
        segments.sort_by_key(|s| s.first_lsn);

        let mut recovery = Recovery::default();
        let (file, file_len, next_lsn) = if segments.is_empty() {
            let first_lsn = floor + 1;
            let name = segment_name(first_lsn);
            let file = create_segment(dir.as_ref(), &name)?;
            dir.sync_dir().map_err(|error| WalError::Io {
                action: "fsync the directory after creating",
                file: name.clone(),
                error,
            })?;
            segments.push(Segment { first_lsn, name });
            (file, 0, first_lsn)
        } else {
            let recovered = recover(dir.as_ref(), &segments, &mut recovery, &mut replay)?;
            if recovered.2 <= floor {
                return Err(WalError::Corrupt {
                    segment: segments.last().map(|s| s.name.clone()).unwrap_or_default(),
                    offset: 0,
                    reason: format!(
                        "the log ends at LSN {} but the tables' manifests cover up to LSN \
                         {floor}: segments after it were lost",
                        recovered.2 - 1
                    ),
                });
            }
            recovered
        };
        recovery.last_lsn = next_lsn - 1;
        recovery.segments = segments.iter().map(|s| s.name.clone()).collect();

        let shared = Arc::new(Shared {
            committer: Mutex::new(committer),
            stats: Mutex::new(WalStats::default()),
            last_lsn: AtomicU64::new(next_lsn - 1),
        });
        let (requests, queue) = crossbeam_channel::bounded(QUEUE_CAPACITY);
        let current = segments.last().map(|s| s.name.clone()).unwrap_or_default();
        let writer = Writer {
            shared: Arc::clone(&shared),
            dir,
            queue,
            segments,
            file,
            file_len,
            next_lsn,
            failed: None,
            buf: Vec::new(),
        };
        let handle = std::thread::Builder::new()
            .name("ringscan-wal".to_owned())
            .spawn(move || writer.run())
            .map_err(|error| WalError::Io {
                action: "start the writer thread of",
                file: current,
                error,
            })?;
        let wal = Self {
            requests: Some(requests),
            shared,
            writer: Some(handle),
        };
        Ok((wal, recovery))
    }

    fn request<T>(&self, make: impl FnOnce(Reply<T>) -> Request<C::Item>) -> Result<T, WalError> {
        let (reply, answer) = Oneshot::pair();
        let requests = self.requests.as_ref().ok_or(WalError::WriterGone)?;
        requests
            .send(make(reply))
            .map_err(|_| WalError::WriterGone)?;
        answer.recv().map_err(|_| WalError::WriterGone)?
    }

    /// Commits `item`: blocks until its record is durable and applied
    /// ([`Committer::apply`]), and returns its LSN; or until it was refused or failed
    /// (and abandoned). There is no timeout: a disk that hangs hangs the commit, as
    /// the answer must wait for the sync.
    pub fn commit(&self, item: C::Item) -> Result<Lsn, WalError> {
        self.request(|reply| Request::Commit { item, reply })
    }

    /// Closes the current segment and starts the next, making the directory durable;
    /// returns the last LSN of the closed segment. A current segment without records
    /// is kept (nothing to close), and its last LSN before it returned. Runs on the
    /// writer between two groups.
    pub fn rotate(&self) -> Result<Lsn, WalError> {
        self.request(|reply| Request::Rotate { reply })
    }

    /// Removes every segment, oldest first, whose records all have LSN `lsn` or less
    /// (never the current one), making the directory durable after each, so that a
    /// power cut leaves the log without a gap.
    pub fn remove_through(&self, lsn: Lsn) -> Result<(), WalError> {
        self.request(|reply| Request::RemoveThrough { lsn, reply })
    }

    /// The writer's counters.
    pub fn stats(&self) -> WalStats {
        *lock(&self.shared.stats)
    }

    /// The last durable LSN (0 before the first record).
    pub fn last_lsn(&self) -> Lsn {
        // Acquire: pairs with the writer's Release store after a group's sync.
        self.shared.last_lsn.load(Ordering::Acquire)
    }

    /// Runs `f` with the committer, under the lock its hooks run under: never during a
    /// hook, but possibly while a group is being written (after its `prepare`s, before
    /// its `apply`s).
    pub fn with_committer<R>(&self, f: impl FnOnce(&mut C) -> R) -> R {
        f(&mut lock(&self.shared.committer))
    }
}

impl<C: Committer> Drop for Wal<C> {
    fn drop(&mut self) {
        // Closing the queue ends the writer's loop once it has answered what is queued.
        drop(self.requests.take());
        if let Some(writer) = self.writer.take() {
            // The writer catches a hook's panic, so this join does not fail.
            let _ = writer.join();
        }
    }
}

#[derive(Debug, Clone)]
struct Segment {
    first_lsn: Lsn,
    name: String,
}

fn create_segment(dir: &dyn LogDir, name: &str) -> Result<Box<dyn LogFile>, WalError> {
    dir.create(name).map_err(|error| WalError::Io {
        action: "create",
        file: name.to_owned(),
        error,
    })
}

/// What recovery hands each record to.
type Replay<'a> = dyn FnMut(Lsn, &[u8]) -> Result<(), String> + 'a;

/// Replays `segments` (sorted, not empty); returns the last one, open, with its good
/// length and the next LSN.
fn recover(
    dir: &dyn LogDir,
    segments: &[Segment],
    recovery: &mut Recovery,
    replay: &mut Replay<'_>,
) -> Result<(Box<dyn LogFile>, u64, Lsn), WalError> {
    let mut next_lsn = segments.first().map_or(1, |s| s.first_lsn);
    let mut current = None;
    for (i, segment) in segments.iter().enumerate() {
        let name = &segment.name;
        let is_last = i + 1 == segments.len();
        if segment.first_lsn != next_lsn {
            return Err(WalError::Corrupt {
                segment: name.clone(),
                offset: 0,
                reason: format!(
                    "the segment starts at LSN {}, but the log before it ends at LSN {}",
                    segment.first_lsn,
                    next_lsn - 1
                ),
            });
        }
        let io_error = |action: &'static str| {
            move |error| WalError::Io {
                action,
                file: name.clone(),
                error,
            }
        };
        let mut file = dir.open(name).map_err(io_error("open"))?;
        let bytes = file.read_all().map_err(io_error("read"))?;
        let mut reader = RecordReader::new(&bytes, next_lsn);
        let good_len = loop {
            match reader.next() {
                Next::Record(lsn, payload) => {
                    replay(lsn, payload).map_err(|message| WalError::Replay {
                        segment: name.clone(),
                        lsn,
                        message,
                    })?;
                    recovery.records_replayed += 1;
                }
                Next::End => break bytes.len(),
                Next::Bad { offset, reason } if is_last => {
                    file.truncate(offset as u64)
                        .map_err(io_error("truncate the torn tail of"))?;
                    recovery.bytes_truncated = (bytes.len() - offset) as u64;
                    recovery.torn_tail = Some(TornTail {
                        segment: name.clone(),
                        offset: offset as u64,
                        reason,
                    });
                    break offset;
                }
                Next::Bad { offset, reason } => {
                    return Err(WalError::Corrupt {
                        segment: name.clone(),
                        offset: offset as u64,
                        reason: format!(
                            "{reason} (later segments exist, so this is not a torn tail)"
                        ),
                    });
                }
            }
        };
        next_lsn = reader.next_lsn;
        if is_last {
            current = Some((file, good_len as u64));
        }
    }
    match current {
        Some((file, len)) => Ok((file, len, next_lsn)),
        None => Err(WalError::Corrupt {
            segment: "the log directory".to_owned(),
            offset: 0,
            reason: "no segment to recover".to_owned(),
        }),
    }
}

/// A prepared commit of the group being written.
struct Prepared<I> {
    lsn: Lsn,
    item: I,
    reply: Reply<Lsn>,
}

/// The writer thread's state: it alone touches the files.
struct Writer<C: Committer> {
    shared: Arc<Shared<C>>,
    dir: Arc<dyn LogDir>,
    queue: Receiver<Request<C::Item>>,
    /// Oldest first; the last is the current one, open as `file`.
    segments: Vec<Segment>,
    file: Box<dyn LogFile>,
    /// The current segment's good length: whole, durable records up to here.
    file_len: u64,
    /// The LSN of the next record.
    next_lsn: Lsn,
    failed: Option<Failure>,
    /// The group's records, reused across groups.
    buf: Vec<u8>,
}

impl<C: Committer> Writer<C> {
    fn current(&self) -> String {
        self.segments
            .last()
            .map(|s| s.name.clone())
            .unwrap_or_default()
    }

    fn run(mut self) {
        let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.serve()));
        if served.is_err() {
            // A hook panicked (the panic hook printed it). Answer every request until the
            // Wal is dropped: a channel keeps what is queued while a sender lives, so a
            // request queued while the panic unwound would otherwise wait forever.
            for request in self.queue.iter() {
                match request {
                    Request::Commit { reply, .. } | Request::Rotate { reply } => {
                        reply.send(Err(WalError::WriterGone));
                    }
                    Request::RemoveThrough { reply, .. } => {
                        reply.send(Err(WalError::WriterGone));
                    }
                }
            }
        }
    }

    fn serve(&mut self) {
        let mut held = None;
        loop {
            let request = match held.take() {
                Some(request) => request,
                // Disconnected: the Wal was dropped and everything queued is answered.
                None => match self.queue.recv() {
                    Ok(request) => request,
                    Err(_) => return,
                },
            };
            match request {
                Request::Commit { item, reply } => held = self.commit_group(item, reply),
                Request::Rotate { reply } => {
                    reply.send(self.rotate());
                }
                Request::RemoveThrough { lsn, reply } => {
                    reply.send(self.remove_through(lsn));
                }
            }
        }
    }

    fn count_commit(&self) {
        lock(&self.shared.stats).commits += 1;
    }

    /// Writes the group that starts with `item` and takes what is queued behind it;
    /// returns a rotate or remove request that ended the group, to run next.
    fn commit_group(&mut self, item: C::Item, reply: Reply<Lsn>) -> Option<Request<C::Item>> {
        if let Some(failure) = &self.failed {
            self.count_commit();
            reply.send(Err(failure.to_error()));
            return None;
        }
        let mut buf = mem::take(&mut self.buf);
        buf.clear();
        let mut bytes = GroupBytes {
            buf,
            own: Vec::new(),
            len: 0,
        };
        let mut group: Vec<Prepared<C::Item>> = Vec::new();
        let mut held = None;
        let shared = Arc::clone(&self.shared);
        {
            let mut committer = lock(&shared.committer);
            let mut next = Some((item, reply));
            while let Some((item, reply)) = next.take() {
                self.prepare(&mut committer, item, reply, &mut bytes, &mut group);
                if group.len() >= MAX_GROUP_RECORDS || bytes.len >= MAX_GROUP_BYTES {
                    break;
                }
                match self.queue.try_recv() {
                    Ok(Request::Commit { item, reply }) => next = Some((item, reply)),
                    Ok(other) => held = Some(other),
                    Err(_) => {}
                }
            }
        }
        if !group.is_empty() {
            self.write_group(&bytes, group);
        }
        // Keep the buffer's capacity, but not a huge one.
        if bytes.buf.capacity() <= MAX_GROUP_BYTES * 2 {
            self.buf = bytes.buf;
        }
        held
    }

    /// Asks the committer for the record of `item`; a prepared one joins `group`.
    fn prepare(
        &self,
        committer: &mut C,
        mut item: C::Item,
        reply: Reply<Lsn>,
        bytes: &mut GroupBytes<C::Payload>,
        group: &mut Vec<Prepared<C::Item>>,
    ) {
        match committer.prepare(&mut item) {
            Err(message) => {
                self.count_commit();
                reply.send(Err(WalError::Refused(message)));
            }
            Ok(payload) if payload.as_ref().len() > MAX_RECORD_BYTES => {
                committer.abandon(item);
                self.count_commit();
                reply.send(Err(WalError::TooLarge {
                    segment: self.current(),
                    bytes: payload.as_ref().len(),
                    max: MAX_RECORD_BYTES,
                }));
            }
            Ok(payload) => {
                let lsn = self.next_lsn + group.len() as Lsn;
                let size = payload.as_ref().len();
                if size >= OWN_WRITE_BYTES {
                    encode_header(&mut bytes.buf, lsn, payload.as_ref());
                    bytes.own.push((bytes.buf.len(), payload));
                } else {
                    encode_record(&mut bytes.buf, lsn, payload.as_ref());
                }
                bytes.len += RECORD_HEADER_BYTES + size;
                group.push(Prepared { lsn, item, reply });
            }
        }
    }

    /// Appends and syncs the group, then applies or abandons it and answers.
    fn write_group(&mut self, bytes: &GroupBytes<C::Payload>, group: Vec<Prepared<C::Item>>) {
        let outcome = self.append_and_sync(bytes);
        let mut committer = lock(&self.shared.committer);
        match outcome {
            Ok(()) => {
                self.file_len += bytes.len as u64;
                self.next_lsn += group.len() as Lsn;
                // Release: pairs with the Acquire in `Wal::last_lsn`.
                self.shared
                    .last_lsn
                    .store(self.next_lsn - 1, Ordering::Release);
                let mut answers = Vec::with_capacity(group.len());
                for Prepared { lsn, item, reply } in group {
                    committer.apply(lsn, item);
                    answers.push((lsn, reply));
                }
                drop(committer);
                {
                    let mut stats = lock(&self.shared.stats);
                    stats.commits += answers.len() as u64;
                    stats.records += answers.len() as u64;
                    stats.bytes += bytes.len as u64;
                    stats.groups += 1;
                    stats.group_records_max = stats.group_records_max.max(answers.len() as u64);
                }
                for (lsn, reply) in answers {
                    reply.send(Ok(lsn));
                }
            }
            Err(write_error) => {
                let mut replies = Vec::with_capacity(group.len());
                for Prepared { item, reply, .. } in group {
                    committer.abandon(item);
                    replies.push(reply);
                }
                drop(committer);
                lock(&self.shared.stats).commits += replies.len() as u64;
                let segment = self.current();
                for reply in replies {
                    let error = match (&self.failed, &write_error) {
                        (Some(failure), _) => failure.to_error(),
                        (None, error) => WalError::Write {
                            segment: segment.clone(),
                            error: Arc::clone(error),
                        },
                    };
                    reply.send(Err(error));
                }
            }
        }
    }

    /// One write, one sync. A failed write is undone (the file cut back) or fails the
    /// log; a failed sync fails the log. The error is the one the commits report
    /// unless the log failed (then [`Writer::failed`] is set).
    fn append_and_sync(&mut self, bytes: &GroupBytes<C::Payload>) -> Result<(), Arc<io::Error>> {
        let mut appended = Ok(());
        let mut at = 0;
        for (offset, payload) in &bytes.own {
            appended = appended
                .and_then(|()| self.file.append(&bytes.buf[at..*offset]))
                .and_then(|()| self.file.append(payload.as_ref()));
            at = *offset;
        }
        appended = appended.and_then(|()| self.file.append(&bytes.buf[at..]));
        if let Err(error) = appended {
            let error = Arc::new(error);
            if let Err(cut_error) = self.file.truncate(self.file_len) {
                self.failed = Some(Failure {
                    segment: self.current(),
                    what: format!("the truncate that undoes a failed write ({error})"),
                    error: Arc::new(cut_error),
                });
            }
            return Err(error);
        }
        let started = Instant::now();
        let synced = self.file.sync();
        {
            let mut stats = lock(&self.shared.stats);
            stats.syncs += 1;
            stats.sync_us_total += u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        }
        if let Err(error) = synced {
            let error = Arc::new(error);
            self.failed = Some(Failure {
                segment: self.current(),
                what: "fdatasync".to_owned(),
                error: Arc::clone(&error),
            });
            // Best effort, and no retry of the sync: cut this group's records off, so
            // that a restart without a power cut does not replay commits answered with
            // an error. The log stays failed either way.
            let _ = self.file.truncate(self.file_len);
            return Err(error);
        }
        Ok(())
    }

    fn rotate(&mut self) -> Result<Lsn, WalError> {
        if let Some(failure) = &self.failed {
            return Err(failure.to_error());
        }
        let last_lsn = self.next_lsn - 1;
        if self.segments.last().map(|s| s.first_lsn) == Some(self.next_lsn) {
            return Ok(last_lsn);
        }
        let name = segment_name(self.next_lsn);
        let file = create_segment(self.dir.as_ref(), &name)?;
        if let Err(error) = self.dir.sync_dir() {
            // The new name may or may not survive a power cut, and a segment left
            // behind the records written next would read as corruption: stop here.
            let failure = Failure {
                segment: name,
                what: "the fsync of the directory after creating it".to_owned(),
                error: Arc::new(error),
            };
            let error = failure.to_error();
            self.failed = Some(failure);
            return Err(error);
        }
        // Every byte of the old segment was synced with its group.
        self.file = file;
        self.file_len = 0;
        self.segments.push(Segment {
            first_lsn: self.next_lsn,
            name,
        });
        Ok(last_lsn)
    }

    fn remove_through(&mut self, lsn: Lsn) -> Result<(), WalError> {
        if let Some(failure) = &self.failed {
            return Err(failure.to_error());
        }
        while let [oldest, following, ..] = self.segments.as_slice() {
            if following.first_lsn - 1 > lsn {
                break;
            }
            let name = oldest.name.clone();
            match self.dir.remove(&name) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(error) => {
                    return Err(WalError::Io {
                        action: "remove",
                        file: name,
                        error,
                    })
                }
            }
            self.segments.remove(0);
            if let Err(error) = self.dir.sync_dir() {
                // Without it, a power cut could bring this segment back behind a newer
                // removal that did persist: a gap. Fail rather than guess.
                let failure = Failure {
                    segment: name,
                    what: "the fsync of the directory after removing it".to_owned(),
                    error: Arc::new(error),
                };
                let error = failure.to_error();
                self.failed = Some(failure);
                return Err(error);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::ingest::file::testing::{CountingDir, PowerCutDir};
    use crate::ingest::file::FsDir;

    /// A committer that keeps what it was told.
    #[derive(Debug, Default)]
    struct Log {
        applied: Vec<(Lsn, Vec<u8>)>,
        abandoned: Vec<Vec<u8>>,
        /// Refuse items whose first byte is even.
        refuse_even: bool,
        /// `apply` panics (a buggy caller).
        panic_on_apply: bool,
    }

    const HUGE: &[u8] = b"huge";

    impl Committer for Log {
        type Item = Vec<u8>;
        type Payload = Vec<u8>;

        fn prepare(&mut self, item: &mut Vec<u8>) -> Result<Vec<u8>, String> {
            match item.first() {
                // A zeroed allocation: its pages are never touched.
                _ if item == HUGE => Ok(vec![0; MAX_RECORD_BYTES + 1]),
                Some(b) if self.refuse_even && b % 2 == 0 => Err(format!("even: {b}")),
                _ => Ok(item.clone()),
            }
        }

        fn apply(&mut self, lsn: Lsn, item: Vec<u8>) {
            assert!(!self.panic_on_apply, "apply panics as asked");
            self.applied.push((lsn, item));
        }

        fn abandon(&mut self, item: Vec<u8>) {
            self.abandoned.push(item);
        }
    }

    type Records = Vec<(Lsn, Vec<u8>)>;

    fn try_open_with(
        dir: &Arc<dyn LogDir>,
        log: Log,
    ) -> Result<(Wal<Log>, Recovery, Records), WalError> {
        let mut replayed = Vec::new();
        let (wal, recovery) = Wal::open(Arc::clone(dir), log, |lsn, payload| {
            replayed.push((lsn, payload.to_vec()));
            Ok(())
        })?;
        Ok((wal, recovery, replayed))
    }

    fn open(dir: &Arc<dyn LogDir>) -> (Wal<Log>, Recovery, Records) {
        try_open_with(dir, Log::default()).unwrap()
    }

    fn shared(disk: &PowerCutDir) -> Arc<dyn LogDir> {
        Arc::new(disk.clone())
    }

    /// A disk holding exactly `files`, durably.
    fn disk_with(files: &[(&str, &[u8])]) -> PowerCutDir {
        let disk = PowerCutDir::new();
        for (name, bytes) in files {
            let mut f = disk.create(name).unwrap();
            f.append(bytes).unwrap();
            f.sync().unwrap();
        }
        disk.sync_dir().unwrap();
        disk
    }

    fn numbered(records: &[&[u8]]) -> Records {
        records
            .iter()
            .enumerate()
            .map(|(i, r)| (i as Lsn + 1, r.to_vec()))
            .collect()
    }

    #[test]
    fn segment_names_round_trip_and_strangers_are_told_apart() {
        assert_eq!(segment_name(1), "wal-00000000000000000001.log");
        assert_eq!(parse_segment_name(&segment_name(42)), Some(Ok(42)));
        assert_eq!(parse_segment_name("manifest.json"), None);
        assert_eq!(parse_segment_name("wal-1.tmp"), None);
        for bad in [
            "wal-1.log",
            "wal-0000000000000000000x.log",
            "wal-00000000000000000000.log",
            "wal-99999999999999999999.log",
        ] {
            assert!(matches!(parse_segment_name(bad), Some(Err(_))), "{bad}");
        }
    }

    #[test]
    fn round_trip_over_a_real_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir: Arc<dyn LogDir> = Arc::new(FsDir::new(tmp.path()));
        let payloads: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; usize::from(i) * 37]).collect();
        {
            let (wal, recovery, replayed) = open(&dir);
            assert!(replayed.is_empty());
            assert_eq!(
                recovery,
                Recovery {
                    segments: vec![segment_name(1)],
                    ..Recovery::default()
                }
            );
            for (i, p) in payloads.iter().enumerate() {
                assert_eq!(wal.commit(p.clone()).unwrap(), i as Lsn + 1);
            }
            assert_eq!(wal.last_lsn(), 10);
            let stats = wal.stats();
            assert_eq!(
                (stats.commits, stats.records, stats.syncs, stats.groups),
                (10, 10, 10, 10)
            );
            let bytes: usize = payloads.iter().map(|p| RECORD_HEADER_BYTES + p.len()).sum();
            assert_eq!(stats.bytes, bytes as u64);
            wal.with_committer(|c| {
                assert_eq!(
                    c.applied,
                    numbered(&payloads.iter().map(Vec::as_slice).collect::<Vec<_>>())
                );
            });
        }

        // The format, byte for byte: an empty payload, then 37 bytes of 1.
        let bytes = std::fs::read(tmp.path().join(segment_name(1))).unwrap();
        assert_eq!(bytes[..4], 0u32.to_le_bytes());
        assert_eq!(
            bytes[4..8],
            crc32c::crc32c(&1u64.to_le_bytes()).to_le_bytes()
        );
        assert_eq!(bytes[8..16], 1u64.to_le_bytes());
        let second = &bytes[16..16 + 16 + 37];
        assert_eq!(second[..4], 37u32.to_le_bytes());
        let mut covered = 2u64.to_le_bytes().to_vec();
        covered.extend([1u8; 37]);
        assert_eq!(second[4..8], crc32c::crc32c(&covered).to_le_bytes());
        assert_eq!(second[8..16], 2u64.to_le_bytes());
        assert_eq!(second[16..], [1u8; 37]);

        let (wal, recovery, replayed) = open(&dir);
        assert_eq!(
            replayed,
            numbered(&payloads.iter().map(Vec::as_slice).collect::<Vec<_>>())
        );
        assert_eq!(
            (
                recovery.records_replayed,
                recovery.last_lsn,
                recovery.bytes_truncated
            ),
            (10, 10, 0)
        );
        assert_eq!(recovery.torn_tail, None);
        assert_eq!(wal.commit(b"more".to_vec()).unwrap(), 11);
        drop(wal);
        let (_, recovery, replayed) = open(&dir);
        assert_eq!(recovery.last_lsn, 11);
        assert_eq!(replayed.last(), Some(&(11, b"more".to_vec())));
    }

    #[test]
    fn large_payloads_written_from_their_own_buffers_replay_byte_for_byte() {
        let disk = PowerCutDir::new();
        let dir = shared(&disk);
        let big = |seed: u8| -> Vec<u8> {
            (0..OWN_WRITE_BYTES + 3)
                .map(|i| (i as u8).wrapping_mul(31) ^ seed)
                .collect()
        };
        let payloads = vec![b"small".to_vec(), big(1), big(2), b"tail".to_vec()];
        {
            let (wal, _, _) = open(&dir);
            for p in &payloads {
                wal.commit(p.clone()).unwrap();
            }
            let bytes: usize = payloads.iter().map(|p| RECORD_HEADER_BYTES + p.len()).sum();
            assert_eq!(wal.stats().bytes, bytes as u64);
        }
        // Only what was synced survives the cut: every acknowledged record, whole.
        disk.power_cut();
        let (_, recovery, replayed) = open(&dir);
        assert_eq!(recovery.torn_tail, None);
        assert_eq!(
            replayed,
            numbered(&payloads.iter().map(Vec::as_slice).collect::<Vec<_>>())
        );
    }

    #[test]
    fn a_torn_tail_at_every_offset_of_the_last_record_is_cut_off() {
        let name = segment_name(1);
        let payloads: [&[u8]; 3] = [b"first", b"second record", b"the third and last record"];
        let disk = PowerCutDir::new();
        {
            let (wal, ..) = open(&shared(&disk));
            for p in payloads {
                wal.commit(p.to_vec()).unwrap();
            }
        }
        let full = disk.file_bytes(&name).unwrap();
        let last_start = full.len() - RECORD_HEADER_BYTES - payloads[2].len();
        let check = |bytes: &[u8], survivors: &[&[u8]], cut_bytes: usize| {
            let disk = disk_with(&[(&name, bytes)]);
            let dir = shared(&disk);
            let (wal, recovery, replayed) = open(&dir);
            assert_eq!(replayed, numbered(survivors));
            assert_eq!(recovery.bytes_truncated, cut_bytes as u64);
            assert_eq!(recovery.torn_tail.is_some(), cut_bytes > 0);
            assert_eq!(
                disk.file_bytes(&name).unwrap().len(),
                bytes.len() - cut_bytes
            );
            // The log goes on from the right LSN, and what it writes survives.
            let next = survivors.len() as Lsn + 1;
            assert_eq!(wal.commit(b"after".to_vec()).unwrap(), next);
            drop(wal);
            disk.power_cut();
            let (_, _, replayed) = open(&dir);
            assert_eq!(replayed.len() as Lsn, next);
            assert_eq!(replayed.last(), Some(&(next, b"after".to_vec())));
        };
        for cut in last_start..full.len() {
            check(&full[..cut], &payloads[..2], cut - last_start);
        }
        // Any damaged byte of the last record reads as a torn tail too.
        for at in last_start..full.len() {
            let mut bytes = full.clone();
            bytes[at] ^= 0x5a;
            check(&bytes, &payloads[..2], full.len() - last_start);
        }
        // A zero-filled tail (preallocation, or what a file system leaves after a crash).
        let mut bytes = full.clone();
        bytes.extend([0; 100]);
        check(&bytes, &payloads, 100);
    }

    /// Three segments of two records each: LSNs 1-2, 3-4, 5-6.
    fn three_segments(disk: &PowerCutDir) -> Vec<String> {
        let (wal, ..) = open(&shared(disk));
        for lsn in 1..=6u8 {
            wal.commit(vec![lsn; 10]).unwrap();
            if lsn % 2 == 0 && lsn < 6 {
                assert_eq!(wal.rotate().unwrap(), Lsn::from(lsn));
            }
        }
        vec![segment_name(1), segment_name(3), segment_name(5)]
    }

    #[test]
    fn a_damaged_byte_in_an_earlier_segment_is_an_error_naming_it() {
        let disk = PowerCutDir::new();
        let names = three_segments(&disk);
        assert_eq!(disk.names(), names);
        let record_bytes = RECORD_HEADER_BYTES + 10;
        for name in &names[..2] {
            let good = disk.file_bytes(name).unwrap();
            for at in 0..good.len() {
                let mut bytes = good.clone();
                bytes[at] ^= 0xff;
                assert!(disk.set_file_bytes(name, bytes));
                let err = try_open_with(&shared(&disk), Log::default()).unwrap_err();
                let offset = (at / record_bytes * record_bytes) as u64;
                match &err {
                    WalError::Corrupt {
                        segment, offset: o, ..
                    } => {
                        assert_eq!((segment, *o), (name, offset), "{err}");
                    }
                    other => panic!("{other}"),
                }
                let message = err.to_string();
                assert!(
                    message.contains(name.as_str()) && message.contains(&format!("byte {offset}")),
                    "{message}"
                );
            }
            assert!(disk.set_file_bytes(name, good));
        }
        // Cut short (not a torn tail: a later segment exists).
        let good = disk.file_bytes(&names[1]).unwrap();
        disk.set_file_bytes(&names[1], good[..good.len() - 1].to_vec());
        let err = try_open_with(&shared(&disk), Log::default()).unwrap_err();
        assert!(err.to_string().contains("not a torn tail"), "{err}");
        disk.set_file_bytes(&names[1], good);
        let (_, recovery, replayed) = open(&shared(&disk));
        assert_eq!(replayed.len(), 6);
        assert_eq!(recovery.segments, names);
    }

    #[test]
    fn a_missing_or_misnamed_segment_is_an_error() {
        let disk = PowerCutDir::new();
        let names = three_segments(&disk);
        let middle = disk.file_bytes(&names[1]).unwrap();
        disk.remove(&names[1]).unwrap();
        let err = try_open_with(&shared(&disk), Log::default()).unwrap_err();
        assert!(
            matches!(&err, WalError::Corrupt { segment, offset: 0, .. } if *segment == names[2]),
            "{err}"
        );
        assert!(err.to_string().contains("ends at LSN 2"), "{err}");

        let disk = disk_with(&[
            (&names[0], &disk.file_bytes(&names[0]).unwrap()),
            (&names[1], &middle),
            ("wal-12.log", b""),
        ]);
        let err = try_open_with(&shared(&disk), Log::default()).unwrap_err();
        assert!(err.to_string().contains("wal-12.log"), "{err}");
        disk.remove("wal-12.log").unwrap();
        // Files that are not segments are left alone.
        disk.create("notes.txt").unwrap();
        let (_, recovery, replayed) = open(&shared(&disk));
        assert_eq!(replayed.len(), 4);
        assert_eq!(recovery.segments, names[..2]);
        assert!(disk.names().contains(&"notes.txt".to_owned()));
    }

    /// Wraps a directory and runs a hook before every file sync.
    struct HookDir {
        inner: Arc<dyn LogDir>,
        before_sync: Arc<dyn Fn() + Send + Sync>,
    }

    struct HookFile {
        inner: Box<dyn LogFile>,
        before_sync: Arc<dyn Fn() + Send + Sync>,
    }

    impl LogDir for HookDir {
        fn create(&self, name: &str) -> io::Result<Box<dyn LogFile>> {
            Ok(Box::new(HookFile {
                inner: self.inner.create(name)?,
                before_sync: Arc::clone(&self.before_sync),
            }))
        }
        fn open(&self, name: &str) -> io::Result<Box<dyn LogFile>> {
            Ok(Box::new(HookFile {
                inner: self.inner.open(name)?,
                before_sync: Arc::clone(&self.before_sync),
            }))
        }
        fn remove(&self, name: &str) -> io::Result<()> {
            self.inner.remove(name)
        }
        fn list(&self) -> io::Result<Vec<String>> {
            self.inner.list()
        }
        fn sync_dir(&self) -> io::Result<()> {
            self.inner.sync_dir()
        }
    }

    impl LogFile for HookFile {
        fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
            self.inner.append(bytes)
        }
        fn sync(&mut self) -> io::Result<()> {
            (self.before_sync)();
            self.inner.sync()
        }
        fn len(&self) -> u64 {
            self.inner.len()
        }
        fn read_all(&mut self) -> io::Result<Vec<u8>> {
            self.inner.read_all()
        }
        fn truncate(&mut self, len: u64) -> io::Result<()> {
            self.inner.truncate(len)
        }
    }

    /// A directory over `disk` whose power goes during the `cut_at_sync`-th file sync
    /// (counting from 1), after the group was written and before it is durable.
    fn cut_during_sync(disk: &PowerCutDir, cut_at_sync: u64) -> Arc<dyn LogDir> {
        let syncs = AtomicU64::new(0);
        let power = disk.clone();
        Arc::new(HookDir {
            inner: shared(disk),
            before_sync: Arc::new(move || {
                if syncs.fetch_add(1, Ordering::SeqCst) + 1 == cut_at_sync {
                    power.power_cut();
                }
            }),
        })
    }

    #[test]
    fn a_power_cut_loses_no_acknowledged_commit() {
        let disk = PowerCutDir::new();
        let dir = cut_during_sync(&disk, 6);
        let (wal, ..) = open(&dir);
        for i in 1..=5u8 {
            assert_eq!(wal.commit(vec![i]).unwrap(), Lsn::from(i));
        }
        // The power goes while this commit's group is being synced.
        let err = wal.commit(vec![6]).unwrap_err();
        assert!(matches!(err, WalError::Failed { .. }), "{err}");
        assert!(wal.commit(vec![7]).is_err());
        drop(wal);
        let (wal, recovery, replayed) = open(&shared(&disk));
        assert_eq!(replayed, numbered(&[&[1], &[2], &[3], &[4], &[5]]));
        assert_eq!(recovery.bytes_truncated, 0);
        assert_eq!(wal.commit(vec![8]).unwrap(), 6);
    }

    #[test]
    fn a_power_cut_under_concurrent_commits_keeps_exactly_the_acknowledged_ones() {
        let disk = PowerCutDir::new();
        let dir = cut_during_sync(&disk, 20);
        let (wal, ..) = open(&dir);
        let mut acked: Records = std::thread::scope(|s| {
            let threads: Vec<_> = (0..4u8)
                .map(|t| {
                    let wal = &wal;
                    s.spawn(move || {
                        (0..50u8)
                            .filter_map(|i| {
                                wal.commit(vec![t, i]).ok().map(|lsn| (lsn, vec![t, i]))
                            })
                            .collect::<Records>()
                    })
                })
                .collect();
            threads
                .into_iter()
                .flat_map(|t| t.join().unwrap())
                .collect()
        });
        acked.sort();
        assert!(!acked.is_empty() && acked.len() < 200, "{}", acked.len());
        wal.with_committer(|c| assert_eq!(c.applied, acked));
        drop(wal);
        let (_, _, replayed) = open(&shared(&disk));
        assert_eq!(replayed, acked);
    }

    #[test]
    fn a_failed_fdatasync_fails_the_log_for_good() {
        let disk = PowerCutDir::new();
        let counting = CountingDir::new(shared(&disk));
        let syncs = counting.syncs();
        let dir: Arc<dyn LogDir> = Arc::new(counting);
        let (wal, ..) = open(&dir);
        for i in 1..=3u8 {
            wal.commit(vec![i]).unwrap();
        }
        disk.fail_next_sync();
        let err = wal.commit(vec![4]).unwrap_err();
        let message = err.to_string();
        assert!(
            message.starts_with(
                "the write-ahead log cannot be trusted after fdatasync failed on \
                 wal-00000000000000000001.log: Input/output error"
            ),
            "{message}"
        );
        assert!(
            message.ends_with("; restart the daemon to recover from the log"),
            "{message}"
        );
        let syncs_then = syncs.load(Ordering::Relaxed);
        assert_eq!(syncs_then, 4);
        // Every later commit, from any thread, fails the same way, and nothing syncs again.
        std::thread::scope(|s| {
            for t in 0..4u8 {
                let (wal, message) = (&wal, &message);
                s.spawn(move || {
                    for i in 0..10 {
                        let err = wal.commit(vec![t, i]).unwrap_err();
                        assert_eq!(err.to_string(), *message);
                    }
                });
            }
        });
        assert!(matches!(wal.rotate(), Err(WalError::Failed { .. })));
        assert!(matches!(
            wal.remove_through(1),
            Err(WalError::Failed { .. })
        ));
        assert_eq!(syncs.load(Ordering::Relaxed), syncs_then);
        assert_eq!(wal.last_lsn(), 3);
        let stats = wal.stats();
        assert_eq!((stats.commits, stats.records, stats.syncs), (44, 3, 4));
        wal.with_committer(|c| {
            assert_eq!(c.applied, numbered(&[&[1], &[2], &[3]]));
            assert_eq!(c.abandoned, [vec![4]]);
        });
        drop(wal);

        // A restart without a power cut: the failed group was cut off, nothing of it
        // replays, and the log goes on.
        let (wal, _, replayed) = open(&dir);
        assert_eq!(replayed, numbered(&[&[1], &[2], &[3]]));
        assert_eq!(wal.commit(vec![5]).unwrap(), 4);
        drop(wal);
        disk.power_cut();
        let (_, _, replayed) = open(&dir);
        assert_eq!(replayed, numbered(&[&[1], &[2], &[3], &[5]]));
    }

    /// Regression guard for what `WalError::Failed` documents: when even the cut after
    /// a failed sync fails, the failed commit's record is still in the file, and a
    /// restart without a power cut replays it (its outcome is unknown); a power cut
    /// takes it away.
    #[test]
    fn a_failed_commit_that_could_not_be_cut_off_has_an_unknown_outcome() {
        let disk = PowerCutDir::new();
        let (wal, ..) = open(&shared(&disk));
        wal.commit(vec![1]).unwrap();
        disk.fail_next_sync();
        disk.fail_next_truncate();
        assert!(matches!(wal.commit(vec![2]), Err(WalError::Failed { .. })));
        drop(wal);
        let (_, _, replayed) = open(&shared(&disk));
        assert_eq!(replayed, numbered(&[&[1], &[2]]));
        disk.power_cut();
        let (_, _, replayed) = open(&shared(&disk));
        assert_eq!(replayed, numbered(&[&[1]]));
    }

    #[test]
    fn a_full_disk_fails_those_commits_and_later_ones_succeed() {
        let disk = PowerCutDir::new();
        let (wal, ..) = open(&shared(&disk));
        wal.commit(vec![1]).unwrap();
        wal.commit(vec![2]).unwrap();
        disk.fail_next_append_with(io::Error::from_raw_os_error(libc::ENOSPC));
        let err = wal.commit(vec![3]).unwrap_err();
        assert!(matches!(err, WalError::Write { .. }), "{err}");
        let message = err.to_string();
        assert!(
            message.contains("wal-00000000000000000001.log")
                && message.contains("No space left on device"),
            "{message}"
        );
        assert_eq!(wal.commit(vec![4]).unwrap(), 3);
        wal.with_committer(|c| {
            assert_eq!(c.applied, numbered(&[&[1], &[2], &[4]]));
            assert_eq!(c.abandoned, [vec![3]]);
        });
        drop(wal);
        disk.power_cut();
        let (_, _, replayed) = open(&shared(&disk));
        assert_eq!(replayed, numbered(&[&[1], &[2], &[4]]));
    }

    #[test]
    fn a_torn_append_is_cut_off_and_the_log_goes_on() {
        let name = segment_name(1);
        let disk = PowerCutDir::new();
        let (wal, ..) = open(&shared(&disk));
        wal.commit(vec![1]).unwrap();
        wal.commit(vec![2]).unwrap();
        let good_len = disk.file_bytes(&name).unwrap().len();
        disk.tear_next_append(7);
        let err = wal.commit(vec![3; 40]).unwrap_err();
        assert!(
            matches!(err, WalError::Write { .. }) && err.to_string().contains("torn write"),
            "{err}"
        );
        assert_eq!(disk.file_bytes(&name).unwrap().len(), good_len);
        assert_eq!(wal.commit(vec![4]).unwrap(), 3);
        drop(wal);
        let (wal, recovery, replayed) = open(&shared(&disk));
        assert_eq!(replayed, numbered(&[&[1], &[2], &[4]]));
        assert_eq!(recovery.torn_tail, None);

        // If the cut fails too, the log fails; the restart cuts the torn tail.
        disk.tear_next_append(5);
        disk.fail_next_truncate();
        let err = wal.commit(vec![5; 40]).unwrap_err();
        assert!(
            err.to_string()
                .contains("the truncate that undoes a failed write (torn write"),
            "{err}"
        );
        assert!(matches!(wal.commit(vec![6]), Err(WalError::Failed { .. })));
        drop(wal);
        let (wal, recovery, replayed) = open(&shared(&disk));
        assert_eq!(replayed, numbered(&[&[1], &[2], &[4]]));
        assert_eq!(recovery.bytes_truncated, 5);
        assert_eq!(wal.commit(vec![7]).unwrap(), 4);
    }

    #[test]
    fn group_commit_makes_many_commits_durable_with_few_syncs() {
        const THREADS: usize = 8;
        const COMMITS_PER_THREAD: usize = 200;
        let tmp = tempfile::tempdir().unwrap();
        let counting = CountingDir::new(Arc::new(FsDir::new(tmp.path())));
        let syncs = counting.syncs();
        let dir: Arc<dyn LogDir> = Arc::new(counting);
        let (wal, ..) = open(&dir);
        let started = Instant::now();
        let mut acked: Records = std::thread::scope(|s| {
            let threads: Vec<_> = (0..THREADS)
                .map(|t| {
                    let wal = &wal;
                    s.spawn(move || {
                        (0..COMMITS_PER_THREAD)
                            .map(|i| {
                                let payload = format!("thread {t} commit {i}").into_bytes();
                                (wal.commit(payload.clone()).unwrap(), payload)
                            })
                            .collect::<Records>()
                    })
                })
                .collect();
            threads
                .into_iter()
                .flat_map(|t| t.join().unwrap())
                .collect()
        });
        let elapsed = started.elapsed();
        let commits = (THREADS * COMMITS_PER_THREAD) as u64;
        let syncs = syncs.load(Ordering::Relaxed);
        let stats = wal.stats();
        println!(
            "group commit: {commits} commits from {THREADS} threads, {syncs} fdatasyncs \
             ({:.1} commits per sync), largest group {}, {:.0} µs per sync, {:.0} ms in all",
            commits as f64 / syncs as f64,
            stats.group_records_max,
            stats.sync_us_total as f64 / syncs as f64,
            elapsed.as_secs_f64() * 1e3,
        );
        assert!(syncs < commits, "{syncs} syncs for {commits} commits");
        assert_eq!(
            (stats.syncs, stats.records, stats.groups),
            (syncs, commits, syncs)
        );
        acked.sort();
        assert_eq!(
            acked.iter().map(|(lsn, _)| *lsn).collect::<Vec<_>>(),
            (1..=commits).collect::<Vec<_>>()
        );
        // Applied in LSN order.
        wal.with_committer(|c| assert_eq!(c.applied, acked));
        drop(wal);
        let (_, _, replayed) = open(&dir);
        assert_eq!(replayed, acked);
    }

    #[test]
    fn a_refused_or_oversized_commit_writes_nothing() {
        let name = segment_name(1);
        let disk = PowerCutDir::new();
        let log = Log {
            refuse_even: true,
            ..Log::default()
        };
        let (wal, ..) = try_open_with(&shared(&disk), log).unwrap();
        assert_eq!(wal.commit(vec![1]).unwrap(), 1);
        let len = disk.file_bytes(&name).unwrap().len();
        let err = wal.commit(vec![2]).unwrap_err();
        assert!(
            matches!(&err, WalError::Refused(m) if m == "even: 2"),
            "{err}"
        );
        let err = wal.commit(HUGE.to_vec()).unwrap_err();
        assert!(matches!(err, WalError::TooLarge { .. }), "{err}");
        assert!(
            err.to_string().contains("limit of 1073741824 bytes"),
            "{err}"
        );
        assert_eq!(disk.file_bytes(&name).unwrap().len(), len);
        assert_eq!(wal.commit(vec![3]).unwrap(), 2);
        wal.with_committer(|c| assert_eq!(c.abandoned, [HUGE.to_vec()]));
        let stats = wal.stats();
        assert_eq!((stats.commits, stats.records, stats.syncs), (4, 2, 2));
        drop(wal);
        let (_, _, replayed) = open(&shared(&disk));
        assert_eq!(replayed, numbered(&[&[1], &[3]]));
    }

    #[test]
    fn rotation_and_removal_survive_a_power_cut() {
        let disk = PowerCutDir::new();
        let (wal, ..) = open(&shared(&disk));
        for i in 1..=3u8 {
            wal.commit(vec![i]).unwrap();
        }
        assert_eq!(wal.rotate().unwrap(), 3);
        // Nothing to close: the empty segment stays.
        assert_eq!(wal.rotate().unwrap(), 3);
        wal.commit(vec![4]).unwrap();
        wal.commit(vec![5]).unwrap();
        assert_eq!(wal.rotate().unwrap(), 5);
        wal.commit(vec![6]).unwrap();
        assert_eq!(
            disk.names(),
            [segment_name(1), segment_name(4), segment_name(6)]
        );

        wal.remove_through(2).unwrap();
        assert_eq!(disk.names().len(), 3);
        wal.remove_through(3).unwrap();
        assert_eq!(disk.names(), [segment_name(4), segment_name(6)]);
        drop(wal);
        disk.power_cut();
        let (wal, recovery, replayed) = open(&shared(&disk));
        assert_eq!(replayed, vec![(4, vec![4]), (5, vec![5]), (6, vec![6])]);
        assert_eq!(recovery.segments, [segment_name(4), segment_name(6)]);

        // The current segment is never removed, whatever the LSN.
        wal.remove_through(100).unwrap();
        assert_eq!(disk.names(), [segment_name(6)]);
        assert_eq!(wal.commit(vec![7]).unwrap(), 7);
        drop(wal);
        disk.power_cut();
        let (wal, _, replayed) = open(&shared(&disk));
        assert_eq!(replayed, vec![(6, vec![6]), (7, vec![7])]);

        // A rotation right before a restart: the empty segment names the next LSN.
        assert_eq!(wal.rotate().unwrap(), 7);
        wal.remove_through(7).unwrap();
        drop(wal);
        disk.power_cut();
        let (wal, recovery, replayed) = open(&shared(&disk));
        assert!(replayed.is_empty());
        assert_eq!(
            (recovery.last_lsn, recovery.segments.clone()),
            (7, vec![segment_name(8)])
        );
        assert_eq!(wal.commit(vec![8]).unwrap(), 8);
    }

    #[test]
    fn a_failed_directory_sync_on_rotation_fails_the_log() {
        let disk = PowerCutDir::new();
        let (wal, ..) = open(&shared(&disk));
        wal.commit(vec![1]).unwrap();
        disk.fail_next_sync_dir();
        let err = wal.rotate().unwrap_err();
        assert!(err.to_string().contains("fsync of the directory"), "{err}");
        assert!(matches!(wal.commit(vec![2]), Err(WalError::Failed { .. })));
        drop(wal);
        // With or without the new segment's name, the log reads back whole.
        let (wal, _, replayed) = open(&shared(&disk));
        assert_eq!(replayed, numbered(&[&[1]]));
        drop(wal);
        disk.power_cut();
        let (wal, recovery, replayed) = open(&shared(&disk));
        assert_eq!(replayed, numbered(&[&[1]]));
        assert_eq!(recovery.segments, [segment_name(1)]);
        assert_eq!(wal.commit(vec![3]).unwrap(), 2);
    }

    #[test]
    fn a_panicking_hook_stops_the_writer_without_hanging_anyone() {
        let disk = PowerCutDir::new();
        let log = Log {
            panic_on_apply: true,
            ..Log::default()
        };
        let (wal, ..) = try_open_with(&shared(&disk), log).unwrap();
        assert!(matches!(wal.commit(vec![1]), Err(WalError::WriterGone)));
        assert!(matches!(wal.commit(vec![2]), Err(WalError::WriterGone)));
        assert!(matches!(wal.rotate(), Err(WalError::WriterGone)));
        drop(wal);
    }

    #[test]
    fn a_replay_error_names_the_record() {
        let disk = PowerCutDir::new();
        {
            let (wal, ..) = open(&shared(&disk));
            wal.commit(vec![1]).unwrap();
            wal.commit(vec![2]).unwrap();
        }
        let err = Wal::open(shared(&disk), Log::default(), |lsn, _| {
            if lsn == 2 {
                Err("no such table".to_owned())
            } else {
                Ok(())
            }
        })
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "write-ahead log wal-00000000000000000001.log: cannot replay the record of LSN 2: no such table"
        );
    }

    /// One step of the model test.
    #[derive(Debug, Clone)]
    enum Op {
        Commit(Vec<u8>),
        FullDisk,
        Tear(usize),
        FailSync,
        Rotate,
        RemoveThrough(u8),
        Reopen,
        PowerCut,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => proptest::collection::vec(any::<u8>(), 0..40).prop_map(Op::Commit),
            1 => Just(Op::FullDisk),
            1 => (0usize..80).prop_map(Op::Tear),
            1 => Just(Op::FailSync),
            1 => Just(Op::Rotate),
            1 => any::<u8>().prop_map(Op::RemoveThrough),
            1 => Just(Op::Reopen),
            1 => Just(Op::PowerCut),
        ]
    }

    /// The naive model: the acknowledged payloads by LSN, what may have been removed,
    /// and the faults armed.
    #[derive(Debug, Default)]
    struct Model {
        acked: BTreeMap<Lsn, Vec<u8>>,
        removed_through: Lsn,
        failed: bool,
        full_disk: bool,
        tear: bool,
        fail_sync: bool,
    }

    impl Model {
        fn next_lsn(&self) -> Lsn {
            self.acked.last_key_value().map_or(1, |(lsn, _)| lsn + 1)
        }

        /// A reopened log replays every acknowledged record above what was removed, and
        /// perhaps some below (segments go whole), never anything else.
        fn check_replay(&self, replayed: &Records) {
            let expected: Records = self
                .acked
                .range(self.removed_through + 1..)
                .map(|(lsn, p)| (*lsn, p.clone()))
                .collect();
            let first = replayed.len() - expected.len();
            assert_eq!(replayed[first..], expected);
            for (lsn, payload) in &replayed[..first] {
                assert!(*lsn <= self.removed_through);
                assert_eq!(self.acked.get(lsn), Some(payload));
            }
        }
    }

    fn run_model(ops: Vec<Op>) {
        let disk = PowerCutDir::new();
        let mut model = Model::default();
        let (mut wal, _, replayed) = open(&shared(&disk));
        assert!(replayed.is_empty());
        for op in ops {
            match op {
                Op::Commit(payload) => {
                    let got = wal.commit(payload.clone());
                    if model.failed {
                        assert!(matches!(got, Err(WalError::Failed { .. })), "{got:?}");
                    } else if std::mem::take(&mut model.full_disk)
                        || std::mem::take(&mut model.tear)
                    {
                        assert!(matches!(got, Err(WalError::Write { .. })), "{got:?}");
                    } else if std::mem::take(&mut model.fail_sync) {
                        assert!(matches!(got, Err(WalError::Failed { .. })), "{got:?}");
                        model.failed = true;
                    } else {
                        let lsn = model.next_lsn();
                        assert_eq!(got.unwrap(), lsn);
                        model.acked.insert(lsn, payload);
                    }
                }
                Op::FullDisk => {
                    disk.fail_next_append_with(io::Error::from_raw_os_error(libc::ENOSPC));
                    model.full_disk = true;
                }
                Op::Tear(keep) => {
                    // Both append faults armed: the full disk comes first.
                    disk.tear_next_append(keep);
                    model.tear = true;
                }
                Op::FailSync => {
                    disk.fail_next_sync();
                    model.fail_sync = true;
                }
                Op::Rotate => {
                    let got = wal.rotate();
                    if model.failed {
                        assert!(got.is_err());
                    } else {
                        assert_eq!(got.unwrap(), model.next_lsn() - 1);
                    }
                }
                Op::RemoveThrough(share) => {
                    let lsn = model.next_lsn() * Lsn::from(share) / 255;
                    let got = wal.remove_through(lsn);
                    if model.failed {
                        assert!(got.is_err());
                    } else {
                        got.unwrap();
                        model.removed_through = model.removed_through.max(lsn);
                    }
                }
                Op::Reopen | Op::PowerCut => {
                    drop(wal);
                    if matches!(op, Op::PowerCut) {
                        disk.power_cut();
                        (model.full_disk, model.tear, model.fail_sync) = (false, false, false);
                    }
                    let (reopened, recovery, replayed) = open(&shared(&disk));
                    model.check_replay(&replayed);
                    assert_eq!(recovery.last_lsn, model.next_lsn() - 1);
                    model.failed = false;
                    wal = reopened;
                }
            }
            wal.with_committer(|c| {
                let applied: BTreeMap<Lsn, Vec<u8>> = c.applied.iter().cloned().collect();
                for (lsn, payload) in &applied {
                    assert_eq!(model.acked.get(lsn), Some(payload));
                }
            });
        }
        drop(wal);
        disk.power_cut();
        let (_, _, replayed) = open(&shared(&disk));
        model.check_replay(&replayed);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn the_log_matches_a_naive_model(ops in proptest::collection::vec(op(), 1..60)) {
            run_model(ops);
        }

        /// Garbage in a segment, last or not, is an error or a cut tail: never a panic.
        #[test]
        fn garbage_segments_never_panic(
            garbage in proptest::collection::vec(any::<u8>(), 0..200),
            header_like in any::<bool>(),
            last in any::<bool>(),
        ) {
            let mut bytes = garbage;
            if header_like && bytes.len() >= RECORD_HEADER_BYTES {
                // A plausible length and the right LSN, so that parsing goes further.
                let len = (bytes.len() - RECORD_HEADER_BYTES) as u32;
                bytes[..4].copy_from_slice(&len.to_le_bytes());
                bytes[8..16].copy_from_slice(&1u64.to_le_bytes());
            }
            let first = segment_name(1);
            let disk = if last {
                disk_with(&[(&first, &bytes)])
            } else {
                disk_with(&[(&first, &bytes), (&segment_name(2), b"")])
            };
            match try_open_with(&shared(&disk), Log::default()) {
                Ok((wal, recovery, replayed)) => {
                    prop_assert!(replayed.len() <= 1);
                    prop_assert_eq!(recovery.last_lsn, replayed.len() as Lsn);
                    drop(wal);
                }
                Err(err) => {
                    prop_assert!(!last || bytes.is_empty(), "{}", err);
                    prop_assert!(matches!(err, WalError::Corrupt { .. }), "{}", err);
                }
            }
        }
    }
}
