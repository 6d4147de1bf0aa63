//! The consuming side of a ring (the executor): attaches, imports batches zero-copy.

use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long `attach` waits for a just-created segment to be initialised.
const INIT_WAIT: Duration = Duration::from_secs(1);

/// How long a consumer with nothing to read waits while the producer waits for space
/// that only batches it handed out can free, before it copies those batches out of the
/// ring ([`Consumer::unpin`]). Its caller may be keeping them until it gets the next
/// one (a collect, a sort, an operator that coalesces), and then nobody else would.
const STALL_GRACE: Duration = Duration::from_millis(10);

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use crate::codec::{decode_schema_cached, BatchDecoder, DecodeError};
use crate::error::{Peer, RingError};
use crate::layout::{
    state, RecordHeader, RecordKind, HEADER_BYTES, MAX_CAPACITY_BYTES, MIN_CAPACITY_BYTES,
    RECORD_HEADER_BYTES, RING_MAGIC, RING_VERSION,
};
use crate::release::ReleaseTracker;
use crate::ring::{validate_name, LIVENESS_INTERVAL};
use crate::sys::{self, HoldsMapping, Mapping, ProcessWatch};
use crate::wait::{notify_always, notify_if, peer_on_this_cpu, wait_until, Spinner, Waited};

/// What [`Consumer::try_next`] found.
#[derive(Debug)]
pub enum TryNext {
    /// The next batch.
    Batch(RecordBatch),
    /// Nothing published yet; try again later.
    Empty,
    /// The stream ended (end of stream, or the producer acknowledged a cancel).
    End,
}

/// State shared by the consumer and every lease (zero-copy buffer owner).
#[derive(Debug)]
struct Shared {
    name: String,
    /// The header page, read-write (the consumer writes its pid, state, read position).
    header: Mapping,
    tracker: Mutex<ReleaseTracker>,
}

impl Shared {
    /// Releases record `seq`; publishes the read position if the released prefix grew.
    fn release(&self, seq: u64) {
        // A panic while holding the lock cannot leave the tracker inconsistent (each
        // method either completes or panics before mutating), so poisoning is ignored.
        let mut tracker = self.tracker.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(read_pos) = tracker.release(seq) {
            let h = self.header.header();
            // Release, partner: the producer's Acquire load of `read_pos` (free_bytes):
            // our reads of the released records happen before it overwrites them.
            // Stored under the lock so concurrent releases publish monotonically.
            h.read_pos.store(read_pos, Ordering::Release);
            // Relaxed: a hint for the producer's spin, read with no ordering.
            h.consumer_cpu.store(sys::current_cpu(), Ordering::Relaxed);
            wake_producer(h, read_pos);
        }
    }
}

/// Wakes the producer if it sleeps waiting for space that `read_pos` (just published)
/// gives it: a release that does not reach its target would only wake it to find too
/// little room.
fn wake_producer(h: &crate::layout::RingHeader, read_pos: u64) {
    notify_if(&h.producer_waiting, &h.space_word, || {
        // Relaxed: the Acquire load of the flag in `notify_if` orders it after the
        // producer's store (partner: its Release store of the flag in `wait_until`).
        read_pos >= h.space_wanted_pos.load(Ordering::Relaxed)
    });
}

/// A mapping of the data area, read-only: the consumer can never scribble over
/// records. Leases keep the one their batch was read from; after an
/// [`unpin`](Consumer::unpin) that one holds private copies of their pages.
type DataMapping = Arc<Mapping>;

/// Owner of one record's ring space; the zero-copy buffers of a batch hold it, and
/// dropping the last of them gives the space back.
#[derive(Debug)]
struct Lease {
    shared: Arc<Shared>,
    data: DataMapping,
    seq: u64,
}

impl HoldsMapping for Lease {
    fn mapping(&self) -> &Mapping {
        &self.data
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.shared.release(self.seq);
    }
}

/// How long a consumer with nothing to read sleeps ([`Consumer::stalled_for`]).
#[derive(Debug, Clone, Copy)]
struct Pause {
    timeout: Duration,
    /// End the sleep when the producer starts waiting for space.
    watch_producer: bool,
}

/// Attaches to a ring by name and yields its batches.
///
/// Iterating yields `Ok(batch)` per record, then ends (`None`) at end of stream. A
/// producer error, a dead producer, or a corrupt segment yields one `Err` and then the
/// iterator ends. Each batch's buffers point into the shared mapping; its ring space is
/// given back when the batch (and every array or slice taken from it) is dropped, in
/// any order.
#[derive(Debug)]
pub struct Consumer {
    shared: Arc<Shared>,
    /// Where records are read from now.
    data: DataMapping,
    /// The segment, to map the data area again after an unpin.
    fd: OwnedFd,
    capacity: u64,
    schema: SchemaRef,
    decoder: BatchDecoder,
    /// Position of the next unread record.
    cursor: u64,
    next_seq: u64,
    /// Last validated write position.
    write_pos: u64,
    producer: ProcessWatch,
    last_liveness_check: Instant,
    done: bool,
    finished: bool,
    /// Futex sleeps while the ring was empty.
    blocked_waits: u64,
    /// Waits for data that a spin ended (no system call).
    spun_waits: u64,
    /// Since when, and at which read position, the producer has been waiting for space
    /// held by our batches while we had nothing to read.
    stall: Option<(Instant, u64)>,
    /// Unpins done, and the ring bytes they copied out.
    unpins: u64,
    unpinned_bytes: u64,
    /// How long to spin for data before sleeping.
    spinner: Spinner,
    /// Start of the last batch record handed out (the model test checks positions).
    #[cfg(test)]
    pub(crate) last_batch_start: u64,
}

/// Maps the data pages of a ring (a test can make it fail, as a full address space
/// or a `vm.max_map_count` limit would).
fn map_data(fd: &OwnedFd, capacity: u64) -> std::io::Result<Mapping> {
    #[cfg(test)]
    if FAIL_DATA_MAP.with(std::cell::Cell::get) {
        return Err(std::io::Error::from_raw_os_error(libc::ENOMEM));
    }
    Mapping::map(fd, HEADER_BYTES as u64, capacity as usize, false)
}

#[cfg(test)]
thread_local! {
    /// Makes this thread's next attaches fail to map the ring's data pages.
    pub(crate) static FAIL_DATA_MAP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl Consumer {
    /// Attaches to ring `name`: maps it, unlinks the name (both sides have it mapped
    /// now), and reads the schema record.
    pub fn attach(name: &str) -> Result<Self, RingError> {
        validate_name(name)?;
        // The producer creates the object, sizes it, then initialises the header. A
        // consumer that polls for the name can get in between: wait (bounded) for the
        // magic, which the producer stores last.
        let started = Instant::now();
        let (fd, stat, header) = loop {
            let (fd, stat) =
                sys::shm_open_existing(name).map_err(|e| RingError::os("shm_open", name, e))?;
            let header = if stat.size_bytes >= HEADER_BYTES as u64 {
                let map = Mapping::map(&fd, 0, HEADER_BYTES, true);
                Some(map.map_err(|e| RingError::os("mmap", name, e))?)
            } else {
                None
            };
            // Acquire, partner: the Release store of `magic` in `Producer::create_with`.
            let initialising =
                (header.as_ref()).is_none_or(|m| m.header().magic.load(Ordering::Acquire) == 0);
            if initialising && started.elapsed() < INIT_WAIT {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            break (fd, stat, header);
        };
        let corrupt = |detail: String| RingError::corrupt(name, detail);
        if stat.uid != sys::current_uid() {
            return Err(corrupt(format!(
                "segment is owned by uid {}, not by us ({})",
                stat.uid,
                sys::current_uid()
            )));
        }
        if stat.mode & 0o077 != 0 {
            return Err(corrupt(format!(
                "segment mode {:o} is not private",
                stat.mode
            )));
        }
        let capacity = stat.size_bytes.saturating_sub(HEADER_BYTES as u64);
        let header = match header {
            Some(h)
                if capacity >= MIN_CAPACITY_BYTES as u64
                    && capacity <= MAX_CAPACITY_BYTES as u64
                    && capacity.is_multiple_of(4096) =>
            {
                h
            }
            _ => {
                return Err(corrupt(format!(
                    "segment size {} is invalid",
                    stat.size_bytes
                )))
            }
        };
        let h = header.header();
        // Acquire, partner: the Release store of `magic` in `Producer::create_with`.
        let magic = h.magic.load(Ordering::Acquire);
        if magic != RING_MAGIC {
            return Err(corrupt(format!("bad magic {magic:#018x}")));
        }
        let version = h.version.load(Ordering::Relaxed);
        if version != RING_VERSION {
            return Err(corrupt(format!(
                "version {version}, expected {RING_VERSION}"
            )));
        }
        let header_bytes = h.header_bytes.load(Ordering::Relaxed);
        if header_bytes as usize != HEADER_BYTES {
            return Err(corrupt(format!("header size {header_bytes}")));
        }
        let declared = h.capacity_bytes.load(Ordering::Relaxed);
        if declared != capacity {
            return Err(corrupt(format!(
                "header capacity {declared} disagrees with segment size {}",
                stat.size_bytes
            )));
        }
        let producer_pid = h.producer_pid.load(Ordering::Relaxed);
        if producer_pid == 0 {
            return Err(corrupt("producer pid 0".to_owned()));
        }
        // AcqRel, partner: the producer's Acquire loads of `consumer_pid`. Exactly one
        // consumer can win this.
        if let Err(pid) = h.consumer_pid.compare_exchange(
            0,
            std::process::id(),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            return Err(RingError::AlreadyAttached {
                name: name.to_owned(),
                pid,
            });
        }
        let data = match map_data(&fd, capacity) {
            Ok(data) => data,
            Err(e) => {
                // We own the ring now and nobody else will attach: tell the producer we
                // are gone and remove the name, or the segment outlives both of us.
                // Release, partner: the producer's Acquire loads of `consumer_state`.
                h.consumer_state.store(state::GONE, Ordering::Release);
                notify_always(&h.space_word);
                let _ = sys::shm_unlink(name);
                return Err(RingError::os("mmap", name, e));
            }
        };
        // Both sides have it mapped: remove the name so that no crash can leave it behind.
        // ENOENT means the producer already removed it (it gave up on us); harmless.
        let _ = sys::shm_unlink(name);
        // Release, partner: the producer's Acquire loads of `consumer_state`.
        h.consumer_state.store(state::RUNNING, Ordering::Release);
        notify_always(&h.space_word);

        let shared = Arc::new(Shared {
            name: name.to_owned(),
            header,
            tracker: Mutex::new(ReleaseTracker::new(0, 0)),
        });
        let mut consumer = Self {
            shared,
            data: Arc::new(data),
            fd,
            capacity,
            schema: Arc::new(arrow_schema::Schema::empty()),
            decoder: BatchDecoder::new(Arc::new(arrow_schema::Schema::empty())),
            cursor: 0,
            next_seq: 0,
            write_pos: 0,
            producer: ProcessWatch::new(producer_pid),
            last_liveness_check: Instant::now(),
            done: false,
            finished: false,
            blocked_waits: 0,
            spun_waits: 0,
            stall: None,
            unpins: 0,
            unpinned_bytes: 0,
            spinner: Spinner::default(),
            #[cfg(test)]
            last_batch_start: 0,
        };
        consumer.read_schema()?;
        Ok(consumer)
    }

    /// Reads the stream's schema record (blocking), padding before it skipped.
    fn read_schema(&mut self) -> Result<(), RingError> {
        loop {
            let Some((header, offset)) = self.next_record(true)? else {
                unreachable!("blocking next_record returns a record or an error");
            };
            match header.kind {
                RecordKind::Padding => self.consume(header),
                RecordKind::Schema => {
                    let payload = self.copy_payload(offset, header.payload_bytes)?;
                    self.consume(header);
                    let schema =
                        decode_schema_cached(&payload).map_err(|e| self.decode_error(e))?;
                    self.schema = schema.clone();
                    self.decoder = BatchDecoder::new(schema);
                    return Ok(());
                }
                other => {
                    return Err(RingError::corrupt(
                        self.name(),
                        format!("first record is {other:?}, not a schema"),
                    ))
                }
            }
        }
    }

    /// Gets ready for another stream on this ring once this one is over (the producer
    /// has written all of it: the daemon said the scan ended). Reads past what is left
    /// of this stream up to its terminal record without decoding it (batches handed out
    /// before stay valid) and tells the producer it may start the next one. `false`
    /// when that is not possible (no terminal record: the producer never acknowledged a
    /// cancel, or the stream failed); the ring must then not be reused.
    pub fn rearm(&mut self) -> bool {
        if !self.finished {
            loop {
                match self.next_record(false) {
                    Ok(Some((header, _))) => match header.kind {
                        RecordKind::Padding | RecordKind::Batch => self.consume(header),
                        RecordKind::EndOfStream | RecordKind::Cancel => {
                            self.consume(header);
                            break;
                        }
                        RecordKind::Error | RecordKind::Schema => return false,
                    },
                    Ok(None) | Err(_) => return false,
                }
            }
        }
        self.done = false;
        self.finished = false;
        let h = self.shared.header.header();
        // Release, partner: the Acquire load of `consumer_state` in `Producer::restart`.
        h.consumer_state.store(state::RUNNING, Ordering::Release);
        notify_always(&h.space_word);
        true
    }

    /// Starts reading the next stream after [`rearm`](Self::rearm) and the producer's
    /// restart: reads its schema record.
    pub fn begin_stream(&mut self) -> Result<(), RingError> {
        let result = self.read_schema();
        if result.is_err() {
            self.done = true;
        }
        result
    }

    /// The stream's schema.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// The ring's name (already removed from `/dev/shm`).
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The pid of the ring's producer.
    pub fn producer_pid(&self) -> u32 {
        self.producer.pid()
    }

    pub(crate) fn shared_read_pos(&self) -> u64 {
        self.shared.header.header().read_pos.load(Ordering::Acquire)
    }

    #[cfg(test)]
    pub(crate) fn cursor(&self) -> u64 {
        self.cursor
    }

    #[cfg(test)]
    pub(crate) fn points_into_ring(&self, addr: usize) -> bool {
        self.data.contains(addr)
    }

    /// Ring bytes read but not yet released: the records of batches still alive (or
    /// released out of order behind one that is). The producer blocks once this and the
    /// unread bytes fill [`capacity_bytes`](Self::capacity_bytes), so a caller that keeps
    /// batches must copy them out before then.
    pub fn held_bytes(&self) -> u64 {
        self.cursor.saturating_sub(self.shared_read_pos())
    }

    /// The ring's data area, in bytes.
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity
    }

    /// Records handed out whose space is not yet covered by the read position
    /// (batches still alive, or released out of order behind one that is).
    pub fn outstanding_records(&self) -> usize {
        self.shared
            .tracker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .outstanding()
    }

    /// How many times this consumer went to sleep on an empty ring (a measure of how
    /// often the executor waited for the daemon).
    pub fn blocked_waits(&self) -> u64 {
        self.blocked_waits
    }

    /// How many times a wait for data ended while spinning, before any sleep (the
    /// producer published within the spin bound: no system call on either side).
    pub fn spun_waits(&self) -> u64 {
        self.spun_waits
    }

    /// How many times batches still held were copied out of the ring
    /// ([`unpin`](Self::unpin)), and how many ring bytes that copied.
    pub fn unpinned(&self) -> (u64, u64) {
        (self.unpins, self.unpinned_bytes)
    }

    /// Copies every batch handed out and still alive out of the ring, and gives their
    /// space back to the producer: their buffers keep their addresses and contents (the
    /// pages under them become private copies) and the stream goes on in a fresh
    /// mapping of the segment. Returns the ring bytes freed. The consumer does this by
    /// itself when it has nothing to read and the producer has waited
    /// [`STALL_GRACE`] for space only those batches hold; a caller that is about to
    /// keep batches for long may call it sooner.
    ///
    /// An error ([`RingError::Stalled`]: out of memory or mappings) ends the stream.
    pub fn unpin(&mut self) -> Result<u64, RingError> {
        let result = self.unpin_inner();
        if result.is_err() {
            self.done = true;
        }
        result
    }

    fn unpin_inner(&mut self) -> Result<u64, RingError> {
        let shared = Arc::clone(&self.shared);
        // Held across the copy: a lease dropped meanwhile waits, then finds its record
        // already given back.
        let mut tracker = shared
            .tracker
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let held = self.cursor - tracker.read_pos();
        if held == 0 {
            return Ok(0);
        }
        let stalled = |source| RingError::Stalled {
            name: self.shared.name.clone(),
            held_bytes: held,
            capacity_bytes: self.capacity,
            source,
        };
        let fresh = Mapping::map(&self.fd, HEADER_BYTES as u64, self.capacity as usize, false)
            .map_err(stalled)?;
        let cap = self.capacity as usize;
        let (from, to) = (
            (tracker.read_pos() % self.capacity) as usize,
            (self.cursor % self.capacity) as usize,
        );
        // The held span, as one range of the data area or two when it wraps.
        let keep = if from < to {
            [from..to, 0..0]
        } else {
            [from..cap, 0..to]
        };
        self.data.detach(&keep).map_err(stalled)?;
        self.data = Arc::new(fresh);
        if let Some(read_pos) = tracker.detach_all() {
            let h = self.shared.header.header();
            // Release, partner: the producer's Acquire load of `read_pos`: our copy of
            // the records happened before it overwrites them.
            h.read_pos.store(read_pos, Ordering::Release);
            wake_producer(h, read_pos);
        }
        self.unpins += 1;
        self.unpinned_bytes += held;
        Ok(held)
    }

    /// Called with nothing to read: whether the producer has been waiting for space
    /// that only batches we handed out hold for [`STALL_GRACE`] (then unpin them), or
    /// else how long to sleep before looking again, and whether that sleep must end
    /// when the producer starts waiting (we hold space and it is not waiting yet).
    fn stalled_for(&mut self) -> Result<Pause, RingError> {
        let read_pos = self
            .shared
            .tracker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .read_pos();
        // Relaxed: only a hint; the grace period absorbs a stale read, and a producer
        // that starts waiting after this read ends our sleep (`watch_producer`).
        let producer_waits = self
            .shared
            .header
            .header()
            .producer_waiting
            .load(Ordering::Relaxed)
            != 0;
        if read_pos == self.cursor || !producer_waits {
            self.stall = None;
            return Ok(Pause {
                timeout: LIVENESS_INTERVAL,
                watch_producer: read_pos != self.cursor,
            });
        }
        let timeout = match self.stall {
            Some((since, at)) if at == read_pos => {
                let waited = since.elapsed();
                if waited < STALL_GRACE {
                    STALL_GRACE - waited
                } else {
                    self.stall = None;
                    self.unpin_inner()?;
                    Duration::ZERO
                }
            }
            _ => {
                self.stall = Some((Instant::now(), read_pos));
                STALL_GRACE
            }
        };
        Ok(Pause {
            timeout,
            watch_producer: false,
        })
    }

    /// Tells the producer to stop; it sees this at its next push. Iteration ends.
    pub fn cancel(&mut self) {
        if !self.done {
            self.done = true;
            let h = self.shared.header.header();
            // Release, partner: the producer's Acquire load in `is_cancelled`.
            h.consumer_state.store(state::CANCELLED, Ordering::Release);
            notify_always(&h.space_word);
        }
    }

    /// The next batch, without blocking.
    pub fn try_next(&mut self) -> Result<TryNext, RingError> {
        self.step(false)
    }

    fn step(&mut self, blocking: bool) -> Result<TryNext, RingError> {
        if self.done {
            return Ok(TryNext::End);
        }
        let result = self.step_inner(blocking);
        if !matches!(result, Ok(TryNext::Batch(_) | TryNext::Empty)) {
            self.done = true;
        }
        result
    }

    fn step_inner(&mut self, blocking: bool) -> Result<TryNext, RingError> {
        loop {
            let Some((header, offset)) = self.next_record(blocking)? else {
                return Ok(TryNext::Empty);
            };
            match header.kind {
                RecordKind::Padding => self.consume(header),
                RecordKind::Batch => return self.import_batch(header, offset).map(TryNext::Batch),
                RecordKind::EndOfStream | RecordKind::Cancel => {
                    self.consume(header);
                    self.finished = true;
                    return Ok(TryNext::End);
                }
                RecordKind::Error => {
                    let text = self.copy_payload(offset, header.payload_bytes)?;
                    self.consume(header);
                    return Err(RingError::ProducerFailed {
                        message: String::from_utf8_lossy(&text).into_owned(),
                    });
                }
                RecordKind::Schema => {
                    return Err(RingError::corrupt(self.name(), "a second schema record"));
                }
            }
        }
    }

    /// Registers the record at the cursor as handed out, advances past it and releases
    /// it at once (records that are not batches hold no lease).
    fn consume(&mut self, header: RecordHeader) {
        let seq = self.advance(&header);
        self.shared.release(seq);
    }

    /// Moves the cursor past the record and registers it with the release tracker as
    /// handed out; returns its sequence number.
    fn advance(&mut self, header: &RecordHeader) -> u64 {
        let seq = header.seq;
        self.cursor += header.record_bytes();
        self.next_seq += 1;
        self.shared
            .tracker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(seq, self.cursor);
        seq
    }

    fn import_batch(
        &mut self,
        header: RecordHeader,
        offset: usize,
    ) -> Result<RecordBatch, RingError> {
        #[cfg(test)]
        {
            self.last_batch_start = self.cursor;
        }
        let seq = self.advance(&header);
        let lease = Arc::new(Lease {
            shared: self.shared.clone(),
            data: Arc::clone(&self.data),
            seq,
        });
        // The payload starts after the record header; validated in next_record to lie
        // inside the data area. If the buffer cannot be built, dropping `lease` releases.
        let payload = sys::zero_copy_buffer(
            lease,
            offset + RECORD_HEADER_BYTES,
            header.payload_bytes as usize,
        )
        .ok_or_else(|| RingError::corrupt(self.name(), "payload past the data area"))?;
        self.decoder
            .decode(&payload)
            .map_err(|e| self.decode_error(e))
    }

    fn decode_error(&self, e: DecodeError) -> RingError {
        let name = self.shared.name.clone();
        match e {
            DecodeError::Corrupt(detail) => RingError::Corrupt { name, detail },
            DecodeError::Misaligned(detail) => RingError::Misaligned { name, detail },
            DecodeError::Arrow(source) => RingError::Arrow {
                op: "decode",
                name,
                source,
            },
        }
    }

    /// Copies a (small) payload out of the ring.
    fn copy_payload(&self, offset: usize, len: u64) -> Result<Vec<u8>, RingError> {
        let mut out = vec![0u8; len as usize];
        self.data
            .read_into(offset + RECORD_HEADER_BYTES, &mut out)
            .ok_or_else(|| RingError::corrupt(self.name(), "payload past the data area"))?;
        Ok(out)
    }

    /// Loads and validates the producer's write position.
    fn load_write_pos(&mut self) -> Result<u64, RingError> {
        // Acquire, partner: the Release store of `write_pos` in `Producer::publish`:
        // the record bytes before that position are visible once we see it.
        let wp = self
            .shared
            .header
            .header()
            .write_pos
            .load(Ordering::Acquire);
        // The producer may run at most a ring ahead of the oldest record still held
        // (our own count, not the header's, which the peer can write): past it, it
        // would have overwritten a batch a caller still reads zero-copy.
        let read_pos = self
            .shared
            .tracker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .read_pos();
        let limit = read_pos + self.capacity;
        if wp < self.write_pos || wp > limit || !wp.is_multiple_of(64) {
            return Err(RingError::corrupt(
                self.name(),
                format!(
                    "write position {wp} outside [{}, {limit}] or unaligned",
                    self.write_pos
                ),
            ));
        }
        self.write_pos = wp;
        Ok(wp)
    }

    /// Waits for the next record and validates its header. Returns the header and the
    /// record's byte offset in the data area; `None` only when not `blocking`.
    fn next_record(&mut self, blocking: bool) -> Result<Option<(RecordHeader, usize)>, RingError> {
        let mut producer_dead = false;
        loop {
            if self.cursor < self.write_pos || self.cursor < self.load_write_pos()? {
                let offset = self.cursor % self.capacity;
                let available = (self.write_pos - self.cursor).min(self.capacity - offset);
                let mut raw = [0u8; RECORD_HEADER_BYTES];
                self.data
                    .read_into(offset as usize, &mut raw)
                    .ok_or_else(|| {
                        RingError::corrupt(self.name(), "record header past the data area")
                    })?;
                let header = RecordHeader::decode(&raw, available, self.next_seq)
                    .map_err(|detail| RingError::corrupt(self.name(), detail))?;
                return Ok(Some((header, offset as usize)));
            }
            // Empty. The producer's state is stored (Release) after its last publish, so
            // after an Acquire load of it, re-checking the position sees everything.
            let shared = self.shared.clone();
            let h = shared.header.header();
            let producer_state = h.producer_state.load(Ordering::Acquire);
            if self.cursor < self.load_write_pos()? {
                continue;
            }
            match producer_state {
                state::RUNNING => {}
                state::GONE => {
                    return Err(RingError::ProducerGone {
                        name: self.name().to_owned(),
                    });
                }
                other => {
                    return Err(RingError::corrupt(
                        self.name(),
                        format!("producer state {other} with no terminal record"),
                    ));
                }
            }
            if producer_dead {
                return Err(RingError::PeerDied {
                    name: self.name().to_owned(),
                    peer: Peer::Producer,
                    pid: self.producer.pid(),
                });
            }
            if !blocking {
                return Ok(None);
            }
            let pause = self.stalled_for()?;
            if pause.timeout.is_zero() {
                continue;
            }
            let seen = self.write_pos;
            let watch = pause.watch_producer;
            // No spin while the producer waits for space we hold: it cannot publish;
            // nor when it last ran on our CPU: it cannot run while we spin there.
            let spin = self.stall.is_none() && !peer_on_this_cpu(&h.producer_cpu);
            let spinner = spin.then_some(&mut self.spinner);
            let waited = wait_until(
                spinner,
                &h.consumer_waiting,
                &h.data_word,
                pause.timeout,
                || {
                    // Acquire, partner: the Release store of `write_pos` in `publish`,
                    // or of `producer_state` in `set_state`.
                    h.write_pos.load(Ordering::Acquire) != seen
                        || h.producer_state.load(Ordering::Acquire) != state::RUNNING
                        // Relaxed, partner: the producer's flag, raised and fenced
                        // before it nudges us (`write_record`): either it sees our flag
                        // and wakes us, or this sees its flag (Dekker, as in `wait`).
                        || (watch && h.producer_waiting.load(Ordering::Relaxed) != 0)
                },
                || {},
            );
            self.blocked_waits += u64::from(waited == Waited::Slept);
            self.spun_waits += u64::from(waited == Waited::Spun);
            let now = Instant::now();
            if now.duration_since(self.last_liveness_check) >= LIVENESS_INTERVAL {
                self.last_liveness_check = now;
                // Checked once more for records published just before it died.
                producer_dead = !self.producer.is_alive();
            }
        }
    }
}

impl Iterator for Consumer {
    type Item = Result<RecordBatch, RingError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.step(true) {
            Ok(TryNext::Batch(batch)) => Some(Ok(batch)),
            Ok(TryNext::End | TryNext::Empty) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        let h = self.shared.header.header();
        let new_state = if self.finished {
            state::FINISHED
        } else {
            // Dropped before the end: the producer must stop (it sees Cancelled).
            state::CANCELLED
        };
        // Release, partner: the producer's Acquire load in `is_cancelled`.
        h.consumer_state.store(new_state, Ordering::Release);
        notify_always(&h.space_word);
    }
}
