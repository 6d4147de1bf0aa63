//! The producing side of a ring (the IO daemon): creates the segment, pushes batches.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_schema::{ArrowError, DataType, SchemaRef};

use crate::codec::BatchEncoder;
use crate::error::{Peer, RingError};
use crate::layout::{
    align_up, state, RecordHeader, RecordKind, HEADER_BYTES, RECORD_HEADER_BYTES, RING_MAGIC,
    RING_VERSION,
};
use crate::ring::{validate_name, RingOptions, LIVENESS_INTERVAL, MAX_ERROR_TEXT_BYTES};
use crate::sys::{self, Mapping, ProcessWatch};
use crate::wait::{notify, notify_always, peer_on_this_cpu, wait_until, Spinner, Waited};

/// Creates a ring and pushes Arrow batches into it.
///
/// The first record is the schema; then one record per [`push`](Self::push); then end of
/// stream ([`finish`](Self::finish)) or an error text ([`fail`](Self::fail)). Dropping a
/// producer without either tells the consumer the stream was cut short.
#[derive(Debug)]
pub struct Producer {
    name: String,
    /// Header page and data area, read-write.
    mapping: Mapping,
    /// The segment, to reserve its pages ahead of the writes.
    fd: OwnedFd,
    /// Bytes at the start of the data area whose pages are reserved.
    reserved: u64,
    capacity: u64,
    /// Bytes published (local truth; the header copy is only ever set from this).
    write_pos: u64,
    /// Last validated read position from the header (monotonic).
    read_pos: u64,
    next_seq: u64,
    encoder: BatchEncoder,
    schema: SchemaRef,
    consumer: Option<ProcessWatch>,
    created_at: Instant,
    last_liveness_check: Instant,
    attach_timeout: Duration,
    /// A terminal record (end of stream, error, cancel acknowledgement) was written.
    closed: bool,
    /// Futex sleeps on a full ring, and the time spent waiting for space.
    blocked_waits: u64,
    /// Waits for space that a spin ended (no system call).
    spun_waits: u64,
    blocked_time: Duration,
    /// The name was removed from `/dev/shm` (by us or, after attaching, the consumer).
    unlinked: bool,
    /// How long to spin for space before sleeping.
    spinner: Spinner,
}

impl Producer {
    /// Creates ring `name` (e.g. from [`unique_name`](crate::unique_name)) with a data
    /// area of `capacity_bytes` and writes the schema record.
    pub fn create(name: &str, schema: SchemaRef, capacity_bytes: usize) -> Result<Self, RingError> {
        Self::create_with(name, schema, &RingOptions::new(capacity_bytes))
    }

    /// [`create`](Self::create) with all options.
    pub fn create_with(
        name: &str,
        schema: SchemaRef,
        options: &RingOptions,
    ) -> Result<Self, RingError> {
        FreshRing::create(name, options, 0)?.start(schema)
    }

    /// The ring's name, to hand to the consumer.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The schema every pushed batch must have.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Data area size in bytes.
    pub fn capacity_bytes(&self) -> usize {
        self.capacity as usize
    }

    /// How many times a push slept on a full ring (back-pressure from the consumer).
    pub fn blocked_waits(&self) -> u64 {
        self.blocked_waits
    }

    /// How many times a wait for space ended while spinning, before any sleep.
    pub fn spun_waits(&self) -> u64 {
        self.spun_waits
    }

    /// Bytes written to the ring so far (records and padding).
    pub fn bytes_written(&self) -> u64 {
        self.write_pos
    }

    /// True once the consumer asked to stop (or went away before the end).
    pub fn is_cancelled(&self) -> bool {
        matches!(
            // Acquire, partner: the Release store in `Consumer::cancel` / its drop.
            self.mapping.header().consumer_state.load(Ordering::Acquire),
            state::CANCELLED | state::GONE
        )
    }

    /// Encodes `batch` straight into ring space, blocking while the ring is full. A
    /// batch of more than an eighth of the ring goes in as several records of
    /// consecutive rows (the consumer yields them as separate batches), so that wide
    /// rows fit and the consumer can hold a few records while the producer writes.
    ///
    /// Errors: [`RingError::Cancelled`] if the consumer cancelled (checked first, on
    /// every push), [`RingError::PeerDied`] if it died, [`RingError::NotAttached`] if
    /// none attached within the attach timeout, [`RingError::RecordTooLarge`] if a
    /// single row can never fit.
    pub fn push(&mut self, batch: &RecordBatch) -> Result<(), RingError> {
        self.push_until(batch, &mut || None)
    }

    /// [`push`](Self::push) that gives up waiting for space when `stop` says why
    /// ([`RingError::Stopped`]): the caller's own reasons to end the stream (its
    /// client went away, the process is stopping) are seen within
    /// [`LIVENESS_INTERVAL`] even while the consumer keeps the ring full.
    pub fn push_until(
        &mut self,
        batch: &RecordBatch,
        stop: &mut dyn FnMut() -> Option<String>,
    ) -> Result<(), RingError> {
        let limit = self.capacity / SPLIT_FRACTION;
        // Estimated only where a split is possible: it clones every column's ArrayData.
        let bytes = if batch.num_rows() > 1 {
            estimated_bytes(batch)
        } else {
            0
        };
        if bytes > limit {
            let parts = bytes.div_ceil(limit.max(1)).min(batch.num_rows() as u64) as usize;
            let rows = batch.num_rows().div_ceil(parts);
            let mut at = 0;
            while at < batch.num_rows() {
                let len = rows.min(batch.num_rows() - at);
                let part =
                    compact_views(&batch.slice(at, len)).map_err(|source| RingError::Arrow {
                        op: "encode",
                        name: self.name.clone(),
                        source,
                    })?;
                self.push_inner(&part, Wait::Until(stop))?;
                at += len;
            }
            return Ok(());
        }
        self.push_inner(batch, Wait::Until(stop)).map(|_| ())
    }

    /// Like [`push`](Self::push) but never blocks and never splits: `Ok(false)` if the
    /// ring has no room right now (the batch was not pushed; try again later).
    pub fn try_push(&mut self, batch: &RecordBatch) -> Result<bool, RingError> {
        self.push_inner(batch, Wait::No)
    }

    /// Time spent waiting for space (back-pressure from the consumer), in total.
    pub fn blocked_time(&self) -> Duration {
        self.blocked_time
    }

    fn push_inner(&mut self, batch: &RecordBatch, wait: Wait<'_>) -> Result<bool, RingError> {
        self.check_consumer(false)?;
        if self.closed {
            // After end of stream (`end`) the consumer reads nothing more.
            return Err(RingError::corrupt(
                &self.name,
                "push after the end of the stream",
            ));
        }
        let encoded = self
            .encoder
            .encode(batch)
            .map_err(|source| RingError::Arrow {
                op: "encode",
                name: self.name.clone(),
                source,
            })?;
        let parts: Vec<&[u8]> = encoded.parts.iter().map(|b| b.as_slice()).collect();
        debug_assert_eq!(parts.iter().map(|p| p.len()).sum::<usize>(), encoded.len);
        self.write_record(RecordKind::Batch, &parts, wait)
    }

    /// Tests: the shared header, to corrupt it.
    #[cfg(test)]
    pub(crate) fn header(&self) -> &crate::layout::RingHeader {
        self.mapping.header()
    }

    /// Tests: writes raw bytes at the next record position and publishes them as if they
    /// were a record of `len` bytes (a hostile or buggy producer).
    #[cfg(test)]
    pub(crate) fn publish_raw(&mut self, bytes: &[u8], len: u64) {
        let offset = self.write_pos % self.capacity;
        self.write_at(offset, &[bytes]).unwrap();
        self.publish(len);
    }

    /// Blocks until a consumer has attached (or the attach timeout passes).
    pub fn wait_for_consumer(&mut self) -> Result<(), RingError> {
        loop {
            if self.consumer_pid() != 0 {
                return Ok(());
            }
            let h = self.mapping.header();
            // No spin: attaching takes a process start or a request round trip.
            wait_until(
                None,
                &h.producer_waiting,
                &h.space_word,
                LIVENESS_INTERVAL,
                || {
                    // Acquire, partner: the CAS of `consumer_pid` in `Consumer::attach`.
                    h.consumer_pid.load(Ordering::Acquire) != 0
                },
                || {},
            );
            self.check_consumer(true)?;
        }
    }

    /// Writes end of stream and waits (bounded by the attach timeout) until the
    /// consumer has attached, so that the name outlives the producer long enough.
    pub fn finish(mut self) -> Result<(), RingError> {
        self.end()
    }

    /// [`finish`](Self::finish) that keeps the producer, for a caller that drops it
    /// elsewhere (its `munmap` off the stream's path). Pushing after it is an error.
    pub fn end(&mut self) -> Result<(), RingError> {
        self.end_until(&mut || None)
    }

    /// [`end`](Self::end) that gives up waiting for room for the end record when
    /// `stop` says why ([`RingError::Stopped`]; the consumer then sees the stream cut
    /// short).
    pub fn end_until(&mut self, stop: &mut dyn FnMut() -> Option<String>) -> Result<(), RingError> {
        // A consumer's cancel is reported as such, whether or not it was acknowledged.
        self.check_consumer(false)?;
        if self.closed {
            return Err(RingError::corrupt(&self.name, "stream already ended"));
        }
        self.close(RecordKind::EndOfStream, &[], state::FINISHED, stop)
    }

    /// Whether the stream ended with a terminal record, so that the ring can carry
    /// another ([`restart`](Self::restart)).
    pub fn is_ended(&self) -> bool {
        self.closed
    }

    /// Starts another stream on this ring, of `schema`, after the last one ended (a
    /// terminal record written) and the consumer read past it and said it is ready for
    /// more (`Consumer::rearm`). When every byte of the ring has been released, the new
    /// stream starts at the beginning of the data area (the tail is padded), so that a
    /// session's streams keep writing to the same, already present, pages.
    ///
    /// On an error the ring must not be used again.
    pub fn restart(&mut self, schema: SchemaRef) -> Result<(), RingError> {
        if !self.closed {
            return Err(RingError::corrupt(
                &self.name,
                "restart before the end of the stream",
            ));
        }
        // Acquire, partner: the Release store of `consumer_state` in `Consumer::rearm`.
        let consumer_state = self.mapping.header().consumer_state.load(Ordering::Acquire);
        if consumer_state != state::RUNNING || self.consumer_pid() == 0 {
            return Err(RingError::corrupt(
                &self.name,
                format!("restart with the consumer in state {consumer_state}"),
            ));
        }
        self.check_consumer(true)?;
        let (encoder, schema_bytes) = encoder_for(&self.name, &schema)?;
        // Running again before any record of the new stream is visible: a consumer that
        // finds the ring empty waits instead of reporting a missing terminal record.
        self.closed = false;
        self.set_state(state::RUNNING);
        let offset = self.write_pos % self.capacity;
        if offset != 0 && self.free_bytes()? == self.capacity {
            self.pad_to_end(offset)?;
        }
        self.encoder = encoder;
        self.schema = schema;
        if !self.write_record(RecordKind::Schema, &[&schema_bytes], Wait::No)? {
            return Err(RingError::RecordTooLarge {
                name: self.name.clone(),
                record_bytes: RECORD_HEADER_BYTES as u64 + schema_bytes.len() as u64,
                capacity_bytes: self.capacity,
            });
        }
        Ok(())
    }

    /// Sends `message` (the producer's error text, truncated to
    /// [`MAX_ERROR_TEXT_BYTES`]) to the consumer, which yields it as
    /// [`RingError::ProducerFailed`], and ends the stream.
    pub fn fail(self, message: &str) -> Result<(), RingError> {
        self.fail_until(message, &mut || None)
    }

    /// [`fail`](Self::fail) that gives up waiting for room for the error record when
    /// `stop` says why ([`RingError::Stopped`]; the consumer then sees the stream cut
    /// short, and the caller must tell it why another way).
    pub fn fail_until(
        mut self,
        message: &str,
        stop: &mut dyn FnMut() -> Option<String>,
    ) -> Result<(), RingError> {
        let limit = MAX_ERROR_TEXT_BYTES.min(self.capacity as usize - RECORD_HEADER_BYTES);
        let mut end = message.len().min(limit);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let text = &message.as_bytes()[..end];
        self.close(RecordKind::Error, &[text], state::FAILED, stop)
    }

    fn close(
        &mut self,
        kind: RecordKind,
        payload: &[&[u8]],
        final_state: u32,
        stop: &mut dyn FnMut() -> Option<String>,
    ) -> Result<(), RingError> {
        self.write_record(kind, payload, Wait::Until(stop))?;
        self.closed = true;
        self.set_state(final_state);
        self.wait_for_consumer()
    }

    fn set_state(&self, new_state: u32) {
        let h = self.mapping.header();
        // Release, partner: the Acquire load of `producer_state` in the consumer's
        // empty-ring check; every record published before is visible with it.
        h.producer_state.store(new_state, Ordering::Release);
        notify_always(&h.data_word);
    }

    fn consumer_pid(&self) -> u32 {
        // Acquire, partner: the CAS of `consumer_pid` in `Consumer::attach`.
        self.mapping.header().consumer_pid.load(Ordering::Acquire)
    }

    /// Cancel and liveness checks. Cheap (one atomic load) unless a liveness interval
    /// has passed or `force` is set, then it probes the consumer's process.
    fn check_consumer(&mut self, force: bool) -> Result<(), RingError> {
        if self.is_cancelled() {
            if !self.closed {
                // Acknowledge, best effort (the ring may be full): the consumer ends
                // its iteration cleanly when it reads this.
                if self
                    .write_record(RecordKind::Cancel, &[], Wait::No)
                    .unwrap_or(false)
                {
                    self.closed = true;
                    self.set_state(state::FINISHED);
                }
            }
            return Err(RingError::Cancelled {
                name: self.name.clone(),
            });
        }
        let now = Instant::now();
        if !force && now.duration_since(self.last_liveness_check) < LIVENESS_INTERVAL {
            return Ok(());
        }
        self.last_liveness_check = now;
        let pid = self.consumer_pid();
        if pid == 0 {
            let waited = now.duration_since(self.created_at);
            if waited > self.attach_timeout {
                return Err(RingError::NotAttached {
                    name: self.name.clone(),
                    waited_ms: waited.as_millis() as u64,
                });
            }
            return Ok(());
        }
        // The consumer unlinks the name right after mapping it.
        self.unlinked = true;
        let watch = self.consumer.get_or_insert_with(|| ProcessWatch::new(pid));
        if watch.pid() != pid {
            return Err(RingError::corrupt(&self.name, "consumer pid changed"));
        }
        if !watch.is_alive() {
            return Err(RingError::PeerDied {
                name: self.name.clone(),
                peer: Peer::Consumer,
                pid,
            });
        }
        Ok(())
    }

    /// Loads and validates the consumer's read position; returns the free bytes.
    fn free_bytes(&mut self) -> Result<u64, RingError> {
        // Acquire, partner: the Release store of `read_pos` in the consumer's release:
        // the consumer's last reads of the space it released happen before we overwrite it.
        let rp = self.mapping.header().read_pos.load(Ordering::Acquire);
        if rp < self.read_pos || rp > self.write_pos || !rp.is_multiple_of(64) {
            return Err(RingError::corrupt(
                &self.name,
                format!(
                    "read position {rp} outside [{}, {}] or unaligned",
                    self.read_pos, self.write_pos
                ),
            ));
        }
        self.read_pos = rp;
        Ok(self.capacity - (self.write_pos - rp))
    }

    /// Writes one record (header + `parts` concatenated) and publishes it. With
    /// [`Wait::No`], returns `Ok(false)` instead of waiting for space.
    fn write_record(
        &mut self,
        kind: RecordKind,
        parts: &[&[u8]],
        mut wait: Wait<'_>,
    ) -> Result<bool, RingError> {
        let payload_bytes: usize = parts.iter().map(|p| p.len()).sum();
        let payload_bytes = payload_bytes as u64;
        let need = align_up(payload_bytes)
            .and_then(|p| p.checked_add(RECORD_HEADER_BYTES as u64))
            .filter(|&n| n <= self.capacity)
            .ok_or_else(|| RingError::RecordTooLarge {
                name: self.name.clone(),
                record_bytes: payload_bytes.saturating_add(RECORD_HEADER_BYTES as u64),
                capacity_bytes: self.capacity,
            })?;
        loop {
            let offset = self.write_pos % self.capacity;
            let tail = self.capacity - offset;
            let free = self.free_bytes()?;
            if need > tail {
                // The record would wrap: fill the tail with padding and publish that
                // alone, so a record of up to the whole capacity can still go in once
                // the consumer has caught up.
                if free >= tail {
                    self.pad_to_end(offset)?;
                    continue;
                }
            } else if free >= need {
                let header = RecordHeader {
                    kind,
                    payload_bytes,
                    seq: self.next_seq,
                };
                let mut pieces = Vec::with_capacity(parts.len() + 1);
                let encoded = header.encode();
                pieces.push(&encoded[..]);
                pieces.extend_from_slice(parts);
                self.reserve_upto(offset + RECORD_HEADER_BYTES as u64 + payload_bytes)?;
                self.write_at(offset, &pieces)?;
                self.publish(need);
                return Ok(true);
            }
            let stop = match &mut wait {
                Wait::No => return Ok(false),
                Wait::Until(stop) => stop,
            };
            if let Some(reason) = stop() {
                return Err(RingError::Stopped {
                    name: self.name.clone(),
                    reason,
                });
            }
            let started = Instant::now();
            let h = self.mapping.header();
            let (write_pos, capacity, wanted) = (self.write_pos, self.capacity, need.min(tail));
            let seen = self.read_pos;
            // The read position at which `wanted` bytes are free: releases short of it
            // do not wake us. Relaxed: published by the Release store of our flag in
            // `wait_until` (partner: the Acquire load of the flag in `notify_if`).
            let target = (write_pos + wanted).saturating_sub(capacity);
            h.space_wanted_pos.store(target, Ordering::Relaxed);
            // No spin when the consumer last released from our CPU: it cannot run
            // there while we spin.
            let spinner = (!peer_on_this_cpu(&h.consumer_cpu)).then_some(&mut self.spinner);
            let waited = wait_until(
                spinner,
                &h.producer_waiting,
                &h.space_word,
                LIVENESS_INTERVAL,
                || {
                    // Acquire, partner: the consumer's Release store of `read_pos`.
                    let rp = h.read_pos.load(Ordering::Acquire);
                    rp != seen && rp >= target
                    // A cancel must wake us too.
                    || h.consumer_state.load(Ordering::Acquire) >= state::CANCELLED
                },
                // A consumer asleep with nothing to read while we wait for space holds
                // that space in batches it handed out: wake it so that it sees us
                // waiting (our flag is up and fenced: it cannot miss it; see
                // `Consumer::next_record`) and copies them out after its grace period.
                || notify(&h.consumer_waiting, &h.data_word),
            );
            self.blocked_waits += u64::from(waited == Waited::Slept);
            self.spun_waits += u64::from(waited == Waited::Spun);
            self.blocked_time += started.elapsed();
            self.check_consumer(false)?;
        }
    }

    /// Publishes a padding record from `offset` to the end of the data area (the next
    /// record starts at the beginning).
    fn pad_to_end(&mut self, offset: u64) -> Result<(), RingError> {
        let tail = self.capacity - offset;
        let pad = RecordHeader {
            kind: RecordKind::Padding,
            payload_bytes: tail - RECORD_HEADER_BYTES as u64,
            seq: self.next_seq,
        };
        self.reserve_upto(offset + RECORD_HEADER_BYTES as u64)?;
        self.write_at(offset, &[&pad.encode()])?;
        self.publish(tail);
        Ok(())
    }

    /// Makes sure the pages of the data area up to `end` have backing store (in steps
    /// of [`RESERVE_STEP`]), so that a full `/dev/shm` is [`RingError::NoSpace`] for
    /// this ring rather than a `SIGBUS` at the write.
    fn reserve_upto(&mut self, end: u64) -> Result<(), RingError> {
        if end <= self.reserved {
            return Ok(());
        }
        let upto = end.max(self.reserved + RESERVE_STEP).min(self.capacity);
        let bytes = upto - self.reserved;
        sys::reserve(&self.fd, HEADER_BYTES as u64 + self.reserved, bytes).map_err(|source| {
            RingError::NoSpace {
                name: self.name.clone(),
                bytes,
                source,
            }
        })?;
        self.reserved = upto;
        Ok(())
    }

    /// Copies `pieces` back to back into the data area at `offset`.
    fn write_at(&self, offset: u64, pieces: &[&[u8]]) -> Result<(), RingError> {
        let mut at = HEADER_BYTES + offset as usize;
        for piece in pieces {
            self.mapping
                .write_from(at, piece)
                .ok_or_else(|| RingError::corrupt(&self.name, "record past the data area"))?;
            at += piece.len();
        }
        Ok(())
    }

    fn publish(&mut self, record_bytes: u64) {
        self.write_pos += record_bytes;
        self.next_seq += 1;
        let h = self.mapping.header();
        // Release, partner: the consumer's Acquire load of `write_pos`: the record bytes
        // written above are visible to it once it sees the new position.
        h.write_pos.store(self.write_pos, Ordering::Release);
        // Relaxed: a hint for the consumer's spin, read with no ordering.
        h.producer_cpu.store(sys::current_cpu(), Ordering::Relaxed);
        notify(&h.consumer_waiting, &h.data_word);
    }
}

/// Bytes of the rings this process has made and not yet dropped (header pages
/// included): what its rings may take of `/dev/shm`.
static LIVE_RING_BYTES: AtomicU64 = AtomicU64::new(0);

/// The shared memory of this process's live rings (made with [`FreshRing::create`] or
/// [`Producer::create`] and not yet dropped), in bytes: a daemon budgets new rings
/// with it.
pub fn live_ring_bytes() -> u64 {
    LIVE_RING_BYTES.load(Ordering::Relaxed)
}

/// Pages of the data area are reserved this many bytes ahead of the writes.
const RESERVE_STEP: u64 = 4 << 20;

/// A batch larger than `capacity / SPLIT_FRACTION` is pushed as several records.
const SPLIT_FRACTION: u64 = 8;

/// Whether a write may wait for space, and until what.
enum Wait<'a> {
    /// Never: report no room.
    No,
    /// Until there is room, the consumer goes away, or this says why to stop.
    Until(&'a mut dyn FnMut() -> Option<String>),
}

/// About how many bytes `batch`'s rows take in a record: its buffers' bytes for those
/// rows (a slice counts only its own rows; a string view column its views and the
/// out-of-line bytes they point at).
fn estimated_bytes(batch: &RecordBatch) -> u64 {
    batch
        .columns()
        .iter()
        .map(|column| {
            let data = column.to_data();
            let bytes = match data.data_type() {
                DataType::Utf8View | DataType::BinaryView => {
                    let views = data.buffers()[0].typed_data::<u128>();
                    let views = &views[data.offset()..data.offset() + data.len()];
                    let outside: usize = views
                        .iter()
                        .map(|v| *v as u32 as usize)
                        .filter(|&len| len > 12)
                        .sum();
                    16 * data.len() + outside
                }
                _ => data
                    .get_slice_memory_size()
                    .unwrap_or_else(|_| column.get_array_memory_size()),
            };
            bytes as u64
        })
        .sum()
}

/// `batch` with its string and binary view columns holding only the bytes their rows
/// use: a slice of a view column shares every data buffer of the whole column, and the
/// encoder would write them all into each part.
fn compact_views(batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    let columns = batch
        .columns()
        .iter()
        .map(|column| match column.data_type() {
            DataType::Utf8View => Arc::new(column.as_string_view().gc()) as ArrayRef,
            DataType::BinaryView => Arc::new(column.as_binary_view().gc()) as ArrayRef,
            _ => Arc::clone(column),
        })
        .collect();
    RecordBatch::try_new_with_options(
        batch.schema(),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )
}

/// The batch encoder of a stream of `schema` on ring `name`, and its schema record.
fn encoder_for(name: &str, schema: &SchemaRef) -> Result<(BatchEncoder, Vec<u8>), RingError> {
    BatchEncoder::new(Arc::clone(schema)).map_err(|source| RingError::Arrow {
        op: "encode",
        name: name.to_owned(),
        source,
    })
}

/// A ring made ahead of its stream: the segment created and mapped, the header written
/// (it is a live producer's ring to [`remove_stale_rings`](crate::remove_stale_rings)),
/// and, if asked, the first bytes of the data area faulted in. Making one is a few
/// system calls; the daemon makes the next scan's ring ahead so that a scan does not pay
/// for them (it does not fault pages in ahead: measured, that only moved the faults to a
/// thread competing for the same cores). [`start`](Self::start) writes the schema record and
/// returns the producer; dropping an unstarted ring removes its name.
#[derive(Debug)]
pub struct FreshRing {
    name: String,
    /// `None` once started.
    mapping: Option<Mapping>,
    fd: Option<OwnedFd>,
    /// Data-area bytes reserved at creation.
    reserved: u64,
    capacity: u64,
    attach_timeout: Duration,
}

impl FreshRing {
    /// Creates ring `name` with the data area and attach timeout of `options`, and
    /// writes to the first `touch_bytes` of the data area (one byte per page) so that
    /// the stream's first records find their pages present.
    pub fn create(
        name: &str,
        options: &RingOptions,
        touch_bytes: usize,
    ) -> Result<Self, RingError> {
        validate_name(name)?;
        options.validate()?;
        let capacity = options.capacity_bytes();
        let total = HEADER_BYTES + capacity;
        let fd =
            sys::shm_create(name, total as u64).map_err(|e| RingError::os("shm_open", name, e))?;
        // The header page and the pages touched below get their backing store now.
        let touch = touch_bytes.min(capacity);
        if let Err(source) = sys::reserve(&fd, 0, (HEADER_BYTES + touch) as u64) {
            let _ = sys::shm_unlink(name);
            return Err(RingError::NoSpace {
                name: name.to_owned(),
                bytes: (HEADER_BYTES + touch) as u64,
                source,
            });
        }
        let mapping = match Mapping::map(&fd, 0, total, true) {
            Ok(m) => m,
            Err(e) => {
                let _ = sys::shm_unlink(name);
                return Err(RingError::os("mmap", name, e));
            }
        };
        let h = mapping.header();
        // ftruncate zero-filled the segment: positions, pids and words start at 0.
        h.version.store(RING_VERSION, Ordering::Relaxed);
        h.header_bytes.store(HEADER_BYTES as u32, Ordering::Relaxed);
        h.capacity_bytes.store(capacity as u64, Ordering::Relaxed);
        h.producer_pid.store(std::process::id(), Ordering::Relaxed);
        h.producer_state.store(state::RUNNING, Ordering::Relaxed);
        // Release, partner: the Acquire load of `magic` in `Consumer::attach`: a consumer
        // that sees the magic sees every identity field above. (No consumer knows the
        // name before the ring is started and handed out.)
        h.magic.store(RING_MAGIC, Ordering::Release);
        // The data area is zero already: writing a zero per page only faults it in.
        for page in (0..touch).step_by(PAGE_BYTES) {
            if mapping.write_from(HEADER_BYTES + page, &[0]).is_none() {
                break;
            }
        }
        LIVE_RING_BYTES.fetch_add(total as u64, Ordering::Relaxed);
        Ok(Self {
            name: name.to_owned(),
            mapping: Some(mapping),
            fd: Some(fd),
            reserved: touch as u64,
            capacity: capacity as u64,
            attach_timeout: options.attach_timeout(),
        })
    }

    /// The ring's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Size of the data area.
    pub fn capacity_bytes(&self) -> usize {
        self.capacity as usize
    }

    /// Starts the stream: writes the schema record and returns the producer (its attach
    /// timeout counts from now).
    pub fn start(mut self, schema: SchemaRef) -> Result<Producer, RingError> {
        let (encoder, schema_bytes) = encoder_for(&self.name, &schema)?;
        let (Some(mapping), Some(fd)) = (self.mapping.take(), self.fd.take()) else {
            return Err(RingError::corrupt(&self.name, "ring started twice"));
        };
        let now = Instant::now();
        let mut producer = Producer {
            name: std::mem::take(&mut self.name),
            mapping,
            fd,
            reserved: self.reserved,
            capacity: self.capacity,
            write_pos: 0,
            read_pos: 0,
            next_seq: 0,
            encoder,
            schema,
            consumer: None,
            created_at: now,
            last_liveness_check: now,
            attach_timeout: self.attach_timeout,
            closed: false,
            blocked_waits: 0,
            spun_waits: 0,
            blocked_time: Duration::ZERO,
            unlinked: false,
            spinner: Spinner::default(),
        };
        // The ring is empty, so the schema record fits unless the ring is tiny.
        if !producer.write_record(RecordKind::Schema, &[&schema_bytes], Wait::No)? {
            return Err(RingError::RecordTooLarge {
                name: producer.name.clone(),
                record_bytes: RECORD_HEADER_BYTES as u64 + schema_bytes.len() as u64,
                capacity_bytes: producer.capacity,
            });
        }
        Ok(producer)
    }
}

impl Drop for FreshRing {
    fn drop(&mut self) {
        if self.mapping.is_some() {
            let _ = sys::shm_unlink(&self.name);
            LIVE_RING_BYTES.fetch_sub(HEADER_BYTES as u64 + self.capacity, Ordering::Relaxed);
        }
    }
}

/// The page size the data area is touched by (4 KiB; a larger page only means fewer
/// faults than writes).
const PAGE_BYTES: usize = 4096;

impl Drop for Producer {
    fn drop(&mut self) {
        LIVE_RING_BYTES.fetch_sub(HEADER_BYTES as u64 + self.capacity, Ordering::Relaxed);
        if !self.closed {
            // Tell the consumer the stream was cut short (it reports ProducerGone).
            self.set_state(state::GONE);
        }
        // The consumer unlinks the name once it has mapped it; if none attached, no one
        // ever will, so remove the name now: nothing may be left in /dev/shm.
        if !self.unlinked && self.consumer_pid() == 0 {
            let _ = sys::shm_unlink(&self.name);
        }
    }
}
