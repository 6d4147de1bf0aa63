//! One scan on its connection: resolve, create the ring, stream, summarize.
//!
//! After [`RingReady`](DaemonMessage::RingReady) a control thread reads the client's
//! frames ([`Refine`](ClientMessage::Refine), [`Cancel`](ClientMessage::Cancel), or the
//! connection closing) while this thread runs the scan; the sink checks those flags
//! (and the daemon's stop flag) before every push, and the ring reports a consumer that
//! cancelled or died.

use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use arrow_array::{RecordBatch, RecordBatchOptions};
use arrow_schema::{ArrowError, Schema, SchemaRef};
use ringscan_ipc::msg::{
    read_frame, write_frame, ClientMessage, DaemonCounters, DaemonMessage, MessageError,
    ScanRequest, ScanSource, ScanSummary,
};
use ringscan_ipc::{Producer, RingError, RingOptions};
use ringscan_profiling::{CounterScope, Counters};

use ringscan_ipc::error_chain as chain;

use super::reply::reply_error;
use super::{Activity, Shared};
use crate::scan::{scan_files, DynamicFilter, ScanError, ScanSpec};
use crate::table::{self, ResolvedTable};

/// How long the producer waits for the client to attach to the ring.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(5);
/// Read slice of the control thread (it checks whether the scan is over between reads).
const CONTROL_POLL: Duration = Duration::from_millis(100);

/// What the client said on the scan's connection.
#[derive(Debug, Default)]
struct ControlState {
    /// The client sent `Cancel`.
    cancelled: AtomicBool,
    /// The connection closed (or broke).
    closed: AtomicBool,
    /// The scan failed: the control thread should return (the connection closes).
    done: AtomicBool,
    /// The scan ended well and its summary is on its way: the connection may carry
    /// another scan, which the control thread takes (see [`ControlState::next`]).
    finished: AtomicBool,
    /// `Shared::reclaim_rings` when the scan finished: a later raise asks this
    /// connection, idle from then, to give its ring up.
    reclaim_seen: std::sync::atomic::AtomicU64,
    /// The next scan's request, read by the control thread after `finished`.
    next: Mutex<Option<ScanRequest>>,
    /// A bad frame, reported instead of the summary.
    bad_frame: Mutex<Option<String>>,
    /// The tightest filter the client sent so far (top-k's bound): the scan skips row
    /// groups whose statistics cannot beat it.
    refine: DynamicFilter,
}

/// Runs the control loop on a pooled thread; the receiver says when it has returned.
fn spawn_control(
    shared: &Arc<Shared>,
    stream: UnixStream,
    state: Arc<ControlState>,
    activity: Arc<Activity>,
) -> io::Result<crossbeam_channel::Receiver<()>> {
    let (done_tx, done_rx) = crossbeam_channel::bounded(1);
    let thread_shared = Arc::clone(shared);
    shared.threads.execute("scan-control", move || {
        control_loop(&thread_shared, &stream, &state, &activity);
        let _ = done_tx.send(());
    })?;
    Ok(done_rx)
}

/// A scan runs this long before a control thread starts reading the client's frames
/// (cancel, refine, close). A shorter scan (a point lookup) never has one: its
/// connection's next request is read by the scan's own thread after the summary, one
/// thread and one wake-up fewer on each query's path.
const CONTROL_AFTER: Duration = Duration::from_millis(2);

/// How long a scan that asked for an inline answer may hold its rows back before it
/// opens a ring: the client waits for a first answer meanwhile, and cannot cancel.
const INLINE_WINDOW: Duration = Duration::from_millis(50);

impl crate::scan::Cancel for Control<'_> {
    fn cancelled(&self) -> bool {
        Control::cancelled(self)
    }
}

/// Where a scan's batches go.
enum Output {
    /// Held back for an inline answer ([`DaemonMessage::Rows`]): the scan asked for one
    /// and has been short and small so far. The connection's kept ring waits unused.
    Held {
        batches: Vec<RecordBatch>,
        bytes: usize,
        kept: Option<Producer>,
    },
    /// Into the scan's ring, which the client reads.
    Ring {
        producer: Producer,
        /// The ring's blocked time before this scan (a kept ring carries many).
        blocked_before: Duration,
    },
    /// Taken at the end, or lost to a failure.
    Gone,
}

/// A scan's control state, its control thread once the scan has run for
/// [`CONTROL_AFTER`], and its output.
struct Control<'a> {
    shared: Arc<Shared>,
    activity: Arc<Activity>,
    state: Arc<ControlState>,
    due: Instant,
    thread: Mutex<ControlThread>,
    output: Mutex<Output>,
    /// The end of the inline window.
    inline_until: Instant,
    /// The output is still held (a check without the lock).
    holding: AtomicBool,
    /// The most bytes of batches held for an inline answer.
    inline_bytes: usize,
    /// What opening the ring needs: the connection, the capacity asked, the schema.
    stream: &'a UnixStream,
    ring_bytes: usize,
    schema: SchemaRef,
    /// Opening the ring between row groups failed: the scan's error.
    failure: Mutex<Option<String>>,
}

/// Before the thread starts: nothing (the connection is duplicated for it when it
/// starts: most scans end first, and a `dup` and `close` per point lookup are two
/// system calls of its ~20). After: the channel that says it has returned.
enum ControlThread {
    Pending,
    Running(crossbeam_channel::Receiver<()>),
    /// It could not start: the scan goes on without hearing from the client.
    None,
}

impl<'a> Control<'a> {
    fn new(
        shared: &Arc<Shared>,
        activity: &Arc<Activity>,
        stream: &'a UnixStream,
        output: Output,
        inline_bytes: usize,
        ring_bytes: usize,
        schema: SchemaRef,
    ) -> Self {
        Self {
            shared: Arc::clone(shared),
            activity: Arc::clone(activity),
            state: Arc::new(ControlState::default()),
            due: Instant::now() + CONTROL_AFTER,
            inline_until: Instant::now() + INLINE_WINDOW,
            thread: Mutex::new(ControlThread::Pending),
            holding: AtomicBool::new(matches!(output, Output::Held { .. })),
            output: Mutex::new(output),
            inline_bytes,
            stream,
            ring_bytes,
            schema,
            failure: Mutex::new(None),
        }
    }

    /// Starts the control thread if the scan has run long enough, then says why the
    /// scan should stop, if it should.
    fn check(&self) -> Option<String> {
        if Instant::now() >= self.due {
            self.start();
        }
        stop_reason(&self.shared, &self.state)
    }

    fn start(&self) {
        let mut thread = self.thread.lock().unwrap_or_else(PoisonError::into_inner);
        let ControlThread::Pending = &*thread else {
            return;
        };
        let started = self.stream.try_clone().and_then(|stream| {
            spawn_control(
                &self.shared,
                stream,
                Arc::clone(&self.state),
                Arc::clone(&self.activity),
            )
        });
        *thread = match started {
            Ok(done) => ControlThread::Running(done),
            Err(e) => {
                self.shared.log.line(&format!(
                    "cannot start a scan's control thread (the scan goes on, deaf to \
                     cancels): {e}"
                ));
                ControlThread::None
            }
        };
    }

    /// Whether the client cancelled (or left), or the scan cannot go on; starts the
    /// control thread when due, so that a scan that runs long without sending a row
    /// still hears the client, and opens the ring of a scan that held its rows for an
    /// inline answer that long (the client waits for a first answer meanwhile, and
    /// cannot cancel before it).
    fn cancelled(&self) -> bool {
        let now = Instant::now();
        if now >= self.due {
            self.start();
        }
        if now >= self.inline_until && self.holding.load(Ordering::Acquire) {
            // Busy means a push is opening it already.
            if let Ok(mut output) = self.output.try_lock() {
                if let Err(message) = self.open_ring(&mut output) {
                    *self.failure.lock().unwrap_or_else(PoisonError::into_inner) = Some(message);
                }
            }
        }
        self.state.cancelled.load(Ordering::Acquire)
            || self
                .failure
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some()
    }

    /// Sends `batch` where the output goes: held while the scan is young and its rows
    /// few, else into the ring (opened first if need be). `Ok(false)`: the client
    /// ended the scan.
    fn push(&self, batch: RecordBatch) -> Result<bool, ScanError> {
        let mut output = self.output.lock().unwrap_or_else(PoisonError::into_inner);
        if let Output::Held { batches, bytes, .. } = &mut *output {
            let size = batch_bytes(&batch);
            if bytes.saturating_add(size) <= self.inline_bytes && Instant::now() < self.inline_until
            {
                *bytes += size;
                batches.push(batch);
                return Ok(true);
            }
            self.open_ring(&mut output).map_err(ScanError::Sink)?;
        }
        let Output::Ring { producer, .. } = &mut *output else {
            return Err(ScanError::Sink("the scan's output is gone".into()));
        };
        push_into(producer, &batch, &mut || self.check())
    }

    /// Replaces held batches by the scan's ring: made (or the connection's kept one
    /// restarted), named to the client, attached to by it, and given the batches held.
    fn open_ring(&self, output: &mut Output) -> Result<(), String> {
        let Some((batches, kept)) = take_held(output) else {
            return Ok(());
        };
        self.holding.store(false, Ordering::Release);
        let mut producer = open_ring(
            &self.shared,
            kept,
            self.ring_bytes,
            &self.schema,
            self.stream,
        )?;
        let blocked_before = producer.blocked_time();
        for batch in batches {
            match push_into(&mut producer, &batch, &mut || self.check()) {
                Ok(true) => {}
                // The next push sees the same.
                Ok(false) => break,
                Err(e) => return Err(chain(&e)),
            }
        }
        *output = Output::Ring {
            producer,
            blocked_before,
        };
        Ok(())
    }

    /// The output, for the end of the scan.
    fn take_output(&self) -> Output {
        self.holding.store(false, Ordering::Release);
        std::mem::replace(
            &mut *self.output.lock().unwrap_or_else(PoisonError::into_inner),
            Output::Gone,
        )
    }

    /// Ends the control thread's part: tells a running one to return (`done`) or
    /// waits for it to see the next request (after `finished`), and says whether one
    /// ran.
    fn join(&self) -> bool {
        let thread = std::mem::replace(
            &mut *self.thread.lock().unwrap_or_else(PoisonError::into_inner),
            ControlThread::None,
        );
        match thread {
            ControlThread::Running(done) => {
                // A closed channel means it has returned already.
                let _ = done.recv();
                true
            }
            ControlThread::Pending | ControlThread::None => false,
        }
    }
}

/// The bytes of `batch`'s rows (of the slices it holds, not of the buffers under them).
fn batch_bytes(batch: &RecordBatch) -> usize {
    batch
        .columns()
        .iter()
        .map(|c| ringscan_ipc::msg::array_slice_bytes(c.as_ref()).unwrap_or(usize::MAX / 2))
        .fold(0usize, usize::saturating_add)
}

/// Pushes `batch` into `producer`, waiting while the ring is full until `stop` gives a
/// reason: `Ok(false)` when the client ended the scan.
fn push_into(
    producer: &mut Producer,
    batch: &RecordBatch,
    stop: &mut dyn FnMut() -> Option<String>,
) -> Result<bool, ScanError> {
    match producer.push_until(batch, stop) {
        Ok(()) => Ok(true),
        Err(RingError::Cancelled { .. }) => Ok(false),
        Err(RingError::Stopped { reason, .. }) => stopped(reason),
        Err(e) => Err(ScanError::Sink(chain(&e))),
    }
}

/// A scan's end when told to stop: the client's cancel or close ends the stream
/// normally (it asked), the daemon stopping ends it with an error (the rows are not
/// all there).
fn stopped(reason: String) -> Result<bool, ScanError> {
    if reason == DAEMON_STOPPING {
        Err(ScanError::Sink(format!("{reason}: the scan was cut short")))
    } else {
        Ok(false)
    }
}

/// The batches and kept ring of an output still held, leaving it `Gone`; `None`, and the
/// output as it is, otherwise. The check between row groups decides to open the ring
/// from `holding`, read before it takes the lock: a push may have opened the ring in
/// between, and replacing that output unconditionally dropped the scan's ring (the
/// next push failed with "the scan's output is gone"; once in a 10-minute soak of 16
/// clients).
fn take_held(output: &mut Output) -> Option<(Vec<RecordBatch>, Option<Producer>)> {
    if !matches!(output, Output::Held { .. }) {
        return None;
    }
    match std::mem::replace(output, Output::Gone) {
        Output::Held { batches, kept, .. } => Some((batches, kept)),
        _ => None,
    }
}

/// Makes a scan's ring (the connection's kept one when it has the capacity), tells the
/// client its name and waits for the client to attach.
fn open_ring(
    shared: &Shared,
    kept: Option<Producer>,
    asked: usize,
    schema: &SchemaRef,
    stream: &UnixStream,
) -> Result<Producer, String> {
    // A kept ring of the size asked for costs nothing new; any other ring must fit the
    // daemon's shared-memory budget (it may come out smaller than asked).
    let capacity = match &kept {
        Some(p) if p.capacity_bytes() == asked => asked,
        _ => ring_capacity(shared, asked)?,
    };
    let options = RingOptions::new(capacity).with_attach_timeout(ATTACH_TIMEOUT);
    let mut producer = ring_for(shared, kept, &options, Arc::clone(schema))
        .map_err(|e| format!("cannot create the scan's ring: {}", chain(&e)))?;
    let ready = DaemonMessage::RingReady {
        ring_name: producer.name().to_owned(),
    };
    write_frame(&mut &*stream, &ready)
        .map_err(|e| format!("the client is gone (before the ring): {}", chain(&e)))?;
    producer.wait_for_consumer().map_err(|e| chain(&e))?;
    Ok(producer)
}

/// Reads the client's frames during and after a scan, in reads that time out after
/// [`CONTROL_POLL`] ([`serve`] sets that once per connection).
fn control_loop(shared: &Shared, stream: &UnixStream, state: &ControlState, activity: &Activity) {
    let mut idle_since: Option<(Instant, u64)> = None;
    while !state.done.load(Ordering::Acquire) {
        if state.finished.load(Ordering::Acquire) {
            // Waiting for the session's next scan: not forever, and not holding a ring
            // another scan needs.
            activity.idle();
            let (since, reclaim) = *idle_since.get_or_insert_with(|| {
                (Instant::now(), state.reclaim_seen.load(Ordering::Acquire))
            });
            let reclaimed = shared.reclaim_rings.load(Ordering::Acquire) != reclaim;
            let idle = shared.config.session_idle_limit();
            if reclaimed || idle.is_some_and(|idle| since.elapsed() >= idle) {
                let counter = if reclaimed {
                    &shared.rings_reclaimed
                } else {
                    &shared.idle_closed
                };
                counter.fetch_add(1, Ordering::Relaxed);
                state.closed.store(true, Ordering::Release);
                return;
            }
        }
        // In `poll`, not in the read: see `conn::serve` (a poll error leaves the wait
        // to the read's timeout).
        if let Ok(false) = ringscan_ipc::wait_readable(stream.as_fd(), Some(CONTROL_POLL)) {
            continue;
        }
        match read_frame::<_, ClientMessage>(&mut &*stream) {
            Ok(Some(ClientMessage::Cancel)) => state.cancelled.store(true, Ordering::Release),
            Ok(Some(ClientMessage::Refine { predicate })) => match predicate.validate_tree() {
                Ok(()) => state.refine.set(predicate),
                Err(e) => return bad(state, format!("invalid refine predicate: {}", chain(&e))),
            },
            Ok(Some(ClientMessage::Scan(request))) if state.finished.load(Ordering::Acquire) => {
                activity.busy();
                let message = ClientMessage::Scan(request);
                if let Err(e) = message.validate() {
                    return bad(state, chain(&e));
                }
                if let ClientMessage::Scan(request) = message {
                    *state.next.lock().unwrap_or_else(PoisonError::into_inner) = Some(request);
                }
                return;
            }
            Ok(Some(other)) => {
                let mut text = format!("{other:?}");
                text.truncate(100);
                return bad(state, format!("unexpected message during a scan: {text}"));
            }
            Ok(None) => {
                state.closed.store(true, Ordering::Release);
                state.cancelled.store(true, Ordering::Release);
                return;
            }
            Err(MessageError::Io(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(MessageError::Io(_)) => {
                state.closed.store(true, Ordering::Release);
                state.cancelled.store(true, Ordering::Release);
                return;
            }
            Err(e) => return bad(state, format!("bad frame during a scan: {}", chain(&e))),
        }
    }
}

fn bad(state: &ControlState, message: String) {
    *state
        .bad_frame
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Some(message);
    state.cancelled.store(true, Ordering::Release);
}

/// The source in a log line.
fn source_text(source: &ScanSource) -> String {
    match source {
        ScanSource::Table { name } => format!("table {name:?}"),
        ScanSource::Files { paths } => format!("files {paths:?}"),
    }
}

/// A resolved request: what to scan and the stream's schema.
struct Prepared {
    table: ResolvedTable,
    /// A written table's rows in memory, scanned before its files.
    memtable: Vec<RecordBatch>,
    projection: Vec<String>,
    output: SchemaRef,
}

fn prepare(shared: &Shared, request: &ScanRequest) -> Result<Prepared, String> {
    let written = match (&request.source, &shared.ingest) {
        (ScanSource::Table { name }, Ok(ingest)) => {
            ingest.snapshot_for(name, false, request.predicate.as_ref())
        }
        _ => None,
    };
    let (table, memtable) = match written {
        Some(snapshot) => (snapshot.table, snapshot.rows),
        None => (
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                shared
                    .resolved
                    .resolve(&shared.data_dir, &request.source, &shared.cache)
            }))
            .map_err(|_| "internal error: resolving the table panicked".to_owned())?
            .map_err(|e| chain(&e))?,
            Vec::new(),
        ),
    };
    let schema = &table.schema;
    let columns = || {
        schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let projection: Vec<String> = match &request.projection {
        Some(names) => names.clone(),
        None => schema.fields().iter().map(|f| f.name().clone()).collect(),
    };
    let mut fields = Vec::with_capacity(projection.len());
    let mut at = crate::scan::Lookup::default();
    for name in &projection {
        let field = at
            .find(schema, name)
            .map(|i| &schema.fields()[i])
            .ok_or_else(|| {
                format!(
                    "unknown column {name:?} in {} (columns: {})",
                    source_text(&request.source),
                    columns()
                )
            })?;
        fields.push(field.clone());
    }
    if let Some(predicate) = &request.predicate {
        for name in predicate.columns() {
            if schema.index_of(name).is_err() {
                return Err(format!(
                    "unknown column {name:?} in the predicate on {} (columns: {})",
                    source_text(&request.source),
                    columns()
                ));
            }
        }
    }
    let output = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
    Ok(Prepared {
        table,
        memtable,
        projection,
        output,
    })
}

/// `batch` with exactly the stream's schema: dictionary or plain, nullability and field
/// metadata as the table says (files of one table may differ in those).
fn conform(batch: RecordBatch, schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
    if batch.schema_ref().fields() == schema.fields() {
        return Ok(batch);
    }
    let rows = batch.num_rows();
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(column, field)| {
            if column.data_type() == field.data_type() {
                Ok(Arc::clone(column))
            } else {
                arrow_cast::cast(column, field.data_type())
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new_with_options(
        Arc::clone(schema),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Serves scan requests on `stream`: the first, then each the client sends after the
/// summary of the last (its session's next query), on the same ring when the client
/// is ready for that (it rearmed its consumer) and the capacity is the same. A session
/// thus maps its ring once and keeps writing to pages already present on both sides:
/// faulting in a fresh ring's pages was a third of a selective query's daemon time.
pub(crate) fn serve(
    shared: &Arc<Shared>,
    stream: UnixStream,
    request: ScanRequest,
    activity: &Arc<Activity>,
) {
    // Every read of the connection from here is a control loop's (the duplicate a
    // control thread reads shares the socket and its options).
    let _ = stream.set_read_timeout(Some(CONTROL_POLL));
    let (mut stream, mut request, mut kept) = (stream, request, None);
    loop {
        let Some((s, producer, next)) = serve_one(shared, stream, request, kept, activity) else {
            return;
        };
        match next {
            Some(next) => {
                (stream, request, kept) = (s, next, producer);
            }
            None => {
                if let Some(producer) = producer {
                    shared.rings.retire(producer);
                }
                return;
            }
        }
    }
}

/// How long a scan waits for the rings kept by idle connections to be given up when
/// the budget has no room for its own.
const RECLAIM_WAIT: Duration = Duration::from_secs(2);

/// The capacity of a new ring for a scan that asked for `asked` bytes, within the
/// budget. When the budget is taken, the rings that idle connections keep for their
/// next scan are given up (they see [`Shared::reclaim_rings`] within a control poll
/// and close; their clients open a new connection for their next scan) and this scan
/// waits for the room, up to [`RECLAIM_WAIT`]: busy only when running scans hold it.
fn ring_capacity(shared: &Shared, asked: usize) -> Result<usize, String> {
    let within = || {
        super::rings::capacity_within(
            asked,
            shared.config.max_ring_bytes,
            shared.ring_budget,
            ringscan_ipc::live_ring_bytes(),
        )
    };
    let first = within();
    if first.is_ok() {
        return first;
    }
    // The rings made ahead go first, then those kept idle.
    shared.rings.drop_ready();
    let second = within();
    if second.is_ok() {
        return second;
    }
    shared.log.line(&format!(
        "the rings' budget is taken ({}): idle connections give up their kept rings",
        first.as_ref().err().map_or("", String::as_str)
    ));
    let deadline = Instant::now() + RECLAIM_WAIT;
    let mut raised = Instant::now();
    shared.reclaim_rings.fetch_add(1, Ordering::AcqRel);
    loop {
        std::thread::sleep(Duration::from_millis(5));
        let now = within();
        if now.is_ok() || Instant::now() >= deadline {
            return now;
        }
        // Again for the connections that went idle since (they heed only a raise
        // after their scan finished).
        if raised.elapsed() >= CONTROL_POLL {
            shared.reclaim_rings.fetch_add(1, Ordering::AcqRel);
            raised = Instant::now();
        }
    }
}

/// A reused ring restarted for `schema`, or a ready one from the stock.
fn ring_for(
    shared: &Shared,
    kept: Option<Producer>,
    options: &RingOptions,
    schema: SchemaRef,
) -> Result<Producer, RingError> {
    if let Some(mut producer) = kept {
        if producer.capacity_bytes() == options.capacity_bytes()
            && producer.restart(Arc::clone(&schema)).is_ok()
        {
            shared.rings_reused.fetch_add(1, Ordering::Relaxed);
            return Ok(producer);
        }
        shared.rings.retire(producer);
    }
    shared.rings.take(options, schema)
}

/// Serves one scan; when it ended well and the client sent another request on the
/// connection, returns the connection, its ring (if it has one yet) and that request
/// (`None` for the request when the client closed instead).
fn serve_one(
    shared: &Arc<Shared>,
    stream: UnixStream,
    request: ScanRequest,
    kept: Option<Producer>,
    activity: &Arc<Activity>,
) -> Option<(UnixStream, Option<Producer>, Option<ScanRequest>)> {
    let started = Instant::now();
    let source = source_text(&request.source);
    let refuse = |message: String, kept: Option<Producer>| {
        shared.log.line(&format!("scan {source}: {message}"));
        reply_error(&mut &stream, message);
        if let Some(producer) = kept {
            shared.rings.retire(producer);
        }
        None
    };
    let slot = match shared.try_start_scan() {
        Ok(slot) => slot,
        Err(message) => return refuse(format!("refused, {message}"), kept),
    };
    let prepared = match prepare(shared, &request) {
        Ok(p) => p,
        Err(message) => return refuse(format!("error: {message}"), kept),
    };
    // At most an equal share of the budget per scan: as many scans as may run at once
    // all get a ring (asking 256 MiB each, 16 scans took more than a 3 GiB budget, and
    // a 16-client host told clients "busy").
    let share = (shared.ring_budget / shared.config.max_concurrent_scans.max(1) as u64) >> 20 << 20;
    let asked = request
        .ring_capacity_bytes
        .min(usize::try_from(share.max(super::rings::MIN_RING_BYTES)).unwrap_or(usize::MAX));
    let inline_bytes = usize::try_from(request.inline_bytes).unwrap_or(usize::MAX);
    let output = if inline_bytes > 0 {
        Output::Held {
            batches: Vec::new(),
            bytes: 0,
            kept,
        }
    } else {
        match open_ring(shared, kept, asked, &prepared.output, &stream) {
            Ok(producer) => Output::Ring {
                blocked_before: producer.blocked_time(),
                producer,
            },
            Err(message) => return refuse(format!("error: {message}"), None),
        }
    };
    let control = Control::new(
        shared,
        activity,
        &stream,
        output,
        inline_bytes,
        asked,
        Arc::clone(&prepared.output),
    );
    let result = run_scan(shared, &prepared, &request, &control, slot.memory_bytes);
    let state = Arc::clone(&control.state);
    let bad_frame = state
        .bad_frame
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    let elapsed_ms = started.elapsed().as_millis();
    let (summary, output) = match (result, bad_frame) {
        (Ok(summary), None) => (summary, control.take_output()),
        (Err(message), _) | (Ok(_), Some(message)) => {
            state.done.store(true, Ordering::Release);
            shared.log.line(&format!(
                "scan {source}: error after {elapsed_ms} ms: {message}"
            ));
            match control.take_output() {
                Output::Ring { producer, .. } => {
                    let _ = producer.fail_until(&message, &mut || control.check());
                }
                Output::Held {
                    kept: Some(producer),
                    ..
                } => shared.rings.retire(producer),
                Output::Held { kept: None, .. } | Output::Gone => {}
            }
            reply_error(&mut &stream, message);
            // The control loop sees `done` within one poll and returns.
            control.join();
            return None;
        }
    };
    // The answer: the held rows on the socket, or the ring's end.
    let (answer, payload, kept) = match output {
        Output::Held { batches, kept, .. } => {
            match ringscan_ipc::msg::encode_ipc_stream(&prepared.output, &batches) {
                Ok(payload) => (
                    DaemonMessage::Rows {
                        summary,
                        bytes: payload.len() as u64,
                    },
                    payload,
                    kept,
                ),
                Err(e) => {
                    let message = format!("cannot encode the scan's rows: {e}");
                    shared.log.line(&format!("scan {source}: error: {message}"));
                    state.done.store(true, Ordering::Release);
                    reply_error(&mut &stream, message);
                    control.join();
                    if let Some(producer) = kept {
                        shared.rings.retire(producer);
                    }
                    return None;
                }
            }
        }
        Output::Ring { mut producer, .. } => {
            // A consumer that cancelled or left makes finish fail: nothing to tell it.
            let _ = producer.end_until(&mut || control.check());
            (DaemonMessage::Summary(summary), Vec::new(), Some(producer))
        }
        Output::Gone => {
            state.done.store(true, Ordering::Release);
            reply_error(
                &mut &stream,
                "internal error: the scan's output is gone".into(),
            );
            control.join();
            return None;
        }
    };
    // Scans quicker than this are not logged one by one (a point-lookup host runs
    // thousands a second; the status report counts them).
    const LOGGED_FROM_MS: u128 = 10;
    let cancelled = state.cancelled.load(Ordering::Acquire) || state.closed.load(Ordering::Acquire);
    if elapsed_ms >= LOGGED_FROM_MS || cancelled {
        let summary = match &answer {
            DaemonMessage::Rows { summary, .. } | DaemonMessage::Summary(summary) => summary,
            _ => unreachable!("the answer is rows or a summary"),
        };
        shared.log.line(&format!(
            "scan {source}: {} rows, {} bytes read, {} files ({} pruned), {elapsed_ms} ms{}",
            summary.rows_emitted,
            summary.bytes_read,
            summary.files_considered,
            summary.files_pruned,
            if cancelled {
                ", cancelled by the client"
            } else {
                ""
            }
        ));
    }
    drop(slot);
    // From here the control thread takes the client's next request (or sees it close):
    // set before the answer goes, which the client waits for first.
    state.reclaim_seen.store(
        shared.reclaim_rings.load(Ordering::Acquire),
        Ordering::Release,
    );
    state.finished.store(true, Ordering::Release);
    if state.closed.load(Ordering::Acquire) || send_answer(&stream, &answer, &payload).is_err() {
        state.done.store(true, Ordering::Release);
        control.join();
        if let Some(producer) = kept {
            shared.rings.retire(producer);
        }
        return None;
    }
    let joined = control.join();
    drop(control);
    if !joined {
        // No control thread: this one waits for the next request.
        control_loop(shared, &stream, &state, activity);
    }
    if let Some(message) = state
        .bad_frame
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
    {
        shared.log.line(&format!("scan connection: {message}"));
        reply_error(&mut &stream, message);
        if let Some(producer) = kept {
            shared.rings.retire(producer);
        }
        return None;
    }
    let next = state
        .next
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    Some((stream, kept, next))
}

/// Writes a scan's last frame, and the rows that follow an inline answer, in one write.
fn send_answer(stream: &UnixStream, answer: &DaemonMessage, payload: &[u8]) -> io::Result<()> {
    let mut frame = Vec::with_capacity(64 + payload.len());
    write_frame(&mut frame, answer).map_err(io::Error::other)?;
    frame.extend_from_slice(payload);
    (&mut &*stream).write_all(&frame)
}

/// Why a scan cut short by the daemon's own stop fails.
const DAEMON_STOPPING: &str = "the daemon is stopping";

/// Why a scan's writes into its ring should stop waiting: the daemon is stopping, or
/// the client cancelled or closed the scan.
fn stop_reason(shared: &Shared, control: &ControlState) -> Option<String> {
    if shared.stopping.load(Ordering::Acquire) {
        Some(DAEMON_STOPPING.to_owned())
    } else if control.cancelled.load(Ordering::Acquire) || control.closed.load(Ordering::Acquire) {
        Some("the client ended the scan".to_owned())
    } else {
        None
    }
}

thread_local! {
    /// This pooled thread's counters, opened at its first scan and kept open: opening
    /// and closing the perf events cost a point lookup about a fifth of the daemon's
    /// time (the kernel patches its jump labels when the last software event of a kind
    /// closes and again when the next opens, an interrupt to every CPU each time).
    static SCAN_COUNTERS: std::cell::RefCell<Option<Counters>> = const { std::cell::RefCell::new(None) };
}

/// The thread's kept counters for the length of one scan, put back when dropped.
struct ThreadCounters(Option<Counters>);

impl ThreadCounters {
    fn take() -> Self {
        let kept = SCAN_COUNTERS.with(|c| c.borrow_mut().take());
        Self(Some(
            kept.unwrap_or_else(|| Counters::open(CounterScope::Process)),
        ))
    }
}

impl std::ops::Deref for ThreadCounters {
    type Target = Counters;
    fn deref(&self) -> &Counters {
        self.0.as_ref().expect("counters are held until drop")
    }
}

impl std::ops::DerefMut for ThreadCounters {
    fn deref_mut(&mut self) -> &mut Counters {
        self.0.as_mut().expect("counters are held until drop")
    }
}

impl Drop for ThreadCounters {
    fn drop(&mut self) {
        let counters = self.0.take();
        // A thread being torn down has no slot left to return them to: they close.
        let _ = SCAN_COUNTERS.try_with(|c| *c.borrow_mut() = counters);
    }
}

/// The versions of a local listing's files by the path the scan opens them at: a
/// `stat` showed them while the table was resolved for this scan (listed, or a kept
/// listing checked), so the scan does not `stat` them again. `None` where the listing
/// does not pair each file with its version (a written table's snapshot carries
/// none; an object-storage listing has no open files).
fn seen_versions(listing: &crate::table::Listing) -> Option<crate::scan::SeenVersions> {
    let paired = listing.files.len() == listing.file_versions.len()
        && !crate::storage::is_object_url(&listing.root)
        && listing
            .files
            .iter()
            .zip(&listing.file_versions)
            .all(|(file, version)| version.path.ends_with(file));
    paired.then(|| {
        listing
            .files
            .iter()
            .zip(&listing.file_versions)
            .map(|(file, version)| (listing.root.join(file), version.clone()))
            .collect()
    })
}

/// Runs the scan into the ring; a panic anywhere inside is this scan's error.
fn run_scan(
    shared: &Shared,
    prepared: &Prepared,
    request: &ScanRequest,
    control: &Control<'_>,
    memory_bytes: u64,
) -> Result<ScanSummary, String> {
    let state = &control.state;
    let mut offset = request.offset;
    let mut limit = request.limit;
    let seen = seen_versions(&prepared.table.listing);
    let spec = ScanSpec::new(&prepared.table.listing.root, &prepared.table.listing.files)
        .with_projection(Some(&prepared.projection))
        .with_predicate(request.predicate.as_ref())
        .with_distinct(request.distinct)
        .with_batch_size(request.batch_size)
        .with_dynamic_filter(Some(&state.refine))
        .with_cancel(Some(control))
        .with_io(shared.config.io_mode)
        .with_prefetch(
            crate::scan::DEFAULT_PREFETCH_ROW_GROUPS,
            usize::try_from(memory_bytes).unwrap_or(usize::MAX),
        )
        .with_partition_types(Some(&prepared.table.partition_types))
        .with_seen(seen.as_ref());
    // Counters of this thread and the scan's worker threads (spawned after the open, so
    // they inherit them; they exit before the scan returns, which folds their counts in).
    let mut counters = ThreadCounters::take();
    let span = counters.start();
    let mut rows_pushed = 0u64;
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut sink = |batch: RecordBatch| -> Result<bool, ScanError> {
            if let Some(reason) = control.check() {
                return stopped(reason);
            }
            let batch = conform(batch, &prepared.output).map_err(|e| {
                ScanError::Sink(format!(
                    "a batch does not fit the table schema: {}",
                    chain(&e)
                ))
            })?;
            let rows = batch.num_rows() as u64;
            // A push into the ring waits while the executor keeps it full; the daemon
            // stopping or the client ending the scan ends that wait, so that a client
            // that stopped reading cannot hold a scan slot.
            let more = control.push(batch)?;
            if more {
                rows_pushed += rows;
            }
            Ok(more)
        };
        // A written table's rows in memory first, then its files with what offset and
        // limit the rows left.
        let (from_memory, stopped) = crate::scan::scan_rows(
            &prepared.memtable,
            &prepared.projection,
            request.predicate.as_ref(),
            &mut offset,
            &mut limit,
            request.batch_size,
            &mut sink,
        )?;
        if stopped || limit == Some(0) || prepared.table.listing.files.is_empty() {
            return Ok(ScanSummary {
                rows_emitted: from_memory,
                ..ScanSummary::default()
            });
        }
        let spec = spec.with_limit(limit).with_offset(offset);
        let mut summary = scan_files(&spec, &shared.cache, &mut sink)?;
        summary.rows_emitted += from_memory;
        Ok(summary)
    }));
    if let Some(message) = control
        .failure
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
    {
        return Err(message);
    }
    let mut summary = match outcome {
        Ok(Ok(summary)) => summary,
        // The client's cancel, seen by the scan between row groups rather than by the
        // sink: as much a normal end as the sink's. Which of the two sees it first is
        // timing, so the client must get a summary either way (what was sent).
        Ok(Err(ScanError::Cancelled)) if state.cancelled.load(Ordering::Acquire) => ScanSummary {
            rows_emitted: rows_pushed,
            ..ScanSummary::default()
        },
        Ok(Err(e)) => {
            return Err(match table::encrypted_error(&e) {
                Some(encrypted) => chain(&encrypted),
                None => chain(&e),
            })
        }
        Err(payload) => {
            let text = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            return Err(format!("internal error: the scan panicked: {text}"));
        }
    };
    let sample = span.stop();
    let (ring_wait, ring_waits) = match &*control
        .output
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
    {
        Output::Ring {
            producer,
            blocked_before,
        } => (
            producer.blocked_time().saturating_sub(*blocked_before),
            producer.blocked_waits(),
        ),
        Output::Held { .. } | Output::Gone => (Duration::ZERO, 0),
    };
    summary.timings.ring_wait_us = micros(ring_wait);
    summary.counters = DaemonCounters {
        scan: Some(sample),
        hardware_unavailable: counters.hardware_unavailable().map(str::to_owned),
        ring_blocked_waits: ring_waits,
        metadata_cache: Some(super::report::metadata_cache_status(shared)),
        column_cache: Some(super::report::column_cache_status(shared)),
        ..DaemonCounters::default()
    };
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use arrow_array::types::Int32Type;
    use arrow_array::{Array, DictionaryArray, StringArray};
    use arrow_schema::{DataType, Field};

    use super::*;

    /// Only a held output is taken: a scan's ring already open stays (the check
    /// between row groups and a push may both try to open it).
    #[test]
    fn only_a_held_output_is_taken() {
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int32, false)]));
        let options = RingOptions::new(1 << 20);
        let name = ringscan_ipc::unique_name(ringscan_ipc::RING_PREFIX);
        let producer = ringscan_ipc::FreshRing::create(&name, &options, 0)
            .and_then(|ring| ring.start(Arc::clone(&schema)))
            .expect("a ring");
        let mut ring = Output::Ring {
            producer,
            blocked_before: Duration::ZERO,
        };
        assert!(take_held(&mut ring).is_none());
        assert!(
            matches!(ring, Output::Ring { .. }),
            "the open ring was dropped"
        );
        let mut gone = Output::Gone;
        assert!(take_held(&mut gone).is_none());
        let batch = RecordBatch::new_empty(schema);
        let mut held = Output::Held {
            batches: vec![batch],
            bytes: 0,
            kept: None,
        };
        let (batches, kept) = take_held(&mut held).expect("held");
        assert_eq!((batches.len(), kept.is_none()), (1, true));
        assert!(matches!(held, Output::Gone));
    }

    #[test]
    fn dictionary_batches_are_cast_to_the_table_type() {
        let dict: DictionaryArray<Int32Type> = vec!["a", "b", "a"].into_iter().collect();
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new(
                "s",
                dict.data_type().clone(),
                false,
            )])),
            vec![Arc::new(dict)],
        )
        .unwrap();
        let table = Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8, true)]));
        let out = conform(batch, &table).unwrap();
        assert_eq!(out.schema(), table);
        let s = out
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        assert_eq!(s.iter().flatten().collect::<Vec<_>>(), ["a", "b", "a"]);
    }
}
