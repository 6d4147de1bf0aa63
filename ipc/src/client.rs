//! The executor's side of the control socket: [`DaemonClient`] talks to a running IO
//! daemon, [`ScanStream`] is one scan (its control connection and its ring), and
//! [`ensure_daemon`] connects to the daemon of a data directory, starting one if needed.
//!
//! Every read has a deadline and is made in slices of [`POLL_INTERVAL`]: a daemon that
//! died closes the socket, which is an error at once; one that hangs is an error at the
//! deadline. The ring's own waits check the producer's liveness (see
//! [`LIVENESS_INTERVAL`](crate::LIVENESS_INTERVAL)).
//!
//! ```no_run
//! use std::time::Duration;
//! use ringscan_ipc::client::{ensure_daemon, DaemonClient};
//! use ringscan_ipc::msg::{ScanRequest, ScanSource};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let data = std::path::Path::new("ringscan-data");
//! let client = ensure_daemon(data, &|| Ok(()), Duration::from_secs(5))?;
//! let mut stream = client.scan(&ScanRequest::new(ScanSource::Table { name: "ohlcv".into() }))?;
//! while let Some(batch) = stream.next_batch()? {
//!     println!("{} rows", batch.num_rows());
//! }
//! let summary = stream.finish()?;
//! println!("{} rows emitted", summary.rows_emitted);
//! # Ok(())
//! # }
//! ```

use std::io::{self, Write};
use std::net::Shutdown;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use crate::msg::{
    write_frame, ClientMessage, DaemonMessage, DaemonStatus, MessageError, Predicate, ScanMessage,
    ScanRequest, ScanSource, ScanSummary, TableInfo, TableStatistics, MAX_FRAME_BYTES,
};
use crate::{Consumer, RingError};

/// Granularity of blocking reads on the control socket.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// Default deadline of one request (describe parses every footer of a table: generous).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The control socket of the daemon serving `data_dir`.
pub fn socket_path(data_dir: &Path) -> PathBuf {
    data_dir.join(".ringscan").join("io.sock")
}

/// What can go wrong talking to the daemon.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// No daemon listens on the socket.
    #[error("cannot connect to the IO daemon at {}", .path.display())]
    Connect {
        /// The socket.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Reading or writing the socket failed.
    #[error("control socket I/O failed while {op}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A frame could not be encoded or decoded.
    #[error("control protocol error while {op}")]
    Protocol {
        /// What was being done.
        op: &'static str,
        /// The cause.
        #[source]
        source: MessageError,
    },
    /// The daemon closed the connection (it exited or died).
    #[error("the IO daemon closed the connection while {op}")]
    Closed {
        /// What was being done.
        op: &'static str,
    },
    /// The daemon did not answer in time.
    #[error("the IO daemon did not answer within {waited_ms} ms while {op}")]
    TimedOut {
        /// What was being done.
        op: &'static str,
        /// How long we waited.
        waited_ms: u64,
    },
    /// The daemon answered with an error.
    #[error("{message}")]
    Daemon {
        /// The daemon's text.
        message: String,
    },
    /// The daemon answered something that does not fit the request.
    #[error("unexpected answer from the IO daemon while {op}: {got}")]
    Unexpected {
        /// What was being done.
        op: &'static str,
        /// What came.
        got: String,
    },
    /// The scan's ring failed (daemon died, corrupt record...).
    #[error(transparent)]
    Ring(#[from] RingError),
    /// Starting a daemon failed.
    #[error("cannot start the IO daemon")]
    Spawn(#[source] io::Error),
    /// A daemon was started but did not answer in time.
    #[error("no IO daemon answered at {} within {waited_ms} ms", .path.display())]
    NotStarted {
        /// The socket.
        path: PathBuf,
        /// How long we waited.
        waited_ms: u64,
        /// The last connection error.
        #[source]
        last: Box<ClientError>,
    },
}

/// A connection to the IO daemon for requests (ping, describe, status, stop). A scan
/// runs on a connection of its own ([`scan`](Self::scan)), so one client can run
/// several at once; the connection and ring of a scan that ended well are kept for the
/// client's next scan (see [`scan`](Self::scan)).
#[derive(Debug)]
pub struct DaemonClient {
    path: PathBuf,
    stream: UnixStream,
    timeout: Duration,
    kept: Arc<Mutex<Vec<Kept>>>,
}

/// Kept scan connections at most: one per ring capacity of the last scans (the executor
/// asks for a small ring when it keeps only an aggregate or a top-k, a large one when
/// it keeps the rows, so a mixed workload alternates).
const KEPT_MAX: usize = 2;

/// A finished scan's connection and ring, kept for the next scan.
#[derive(Debug)]
struct Kept {
    conn: Conn,
    /// The connection's ring: none while every scan on it was answered inline.
    consumer: Option<Consumer>,
    /// The ring was rearmed for a scan the daemon then answered inline: it is ready
    /// for the next stream as it stands (a second rearm would find no terminal record).
    armed: bool,
    /// The ring capacity the scan asked for (the daemon may have given less: its
    /// budget's share per scan).
    asked: u64,
}

/// A scan connection, shut down when dropped (unless taken out to be kept).
#[derive(Debug)]
struct Conn(Option<UnixStream>);

impl Conn {
    fn stream(&mut self, op: &'static str) -> Result<&mut UnixStream, ClientError> {
        self.0.as_mut().ok_or(ClientError::Closed { op })
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(stream) = &self.0 {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

impl DaemonClient {
    /// Connects to the daemon listening at `socket_path` (see [`socket_path`]).
    pub fn connect(socket_path: impl AsRef<Path>) -> Result<Self, ClientError> {
        let path = socket_path.as_ref().to_path_buf();
        let stream = open(&path)?;
        Ok(Self {
            path,
            stream,
            timeout: DEFAULT_REQUEST_TIMEOUT,
            kept: Arc::new(Mutex::new(Vec::new())),
        })
    }

    /// Sets the deadline of each request (default [`DEFAULT_REQUEST_TIMEOUT`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The socket this client talks to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Round trip: `Ok` if the daemon answers.
    pub fn ping(&mut self) -> Result<(), ClientError> {
        match self.request(&ClientMessage::Ping, "pinging")? {
            DaemonMessage::Pong => Ok(()),
            other => Err(unexpected("pinging", &other)),
        }
    }

    /// The schema and data version of `source`.
    pub fn describe(&mut self, source: &ScanSource) -> Result<TableInfo, ClientError> {
        let message = ClientMessage::Describe {
            source: source.clone(),
        };
        match self.request(&message, "describing a table")? {
            DaemonMessage::Table(info) => Ok(info),
            other => Err(unexpected("describing a table", &other)),
        }
    }

    /// Per-column statistics of `source` from its Parquet footers (see
    /// [`TableStatistics`]).
    pub fn statistics(
        &mut self,
        source: &ScanSource,
        columns: &[String],
    ) -> Result<TableStatistics, ClientError> {
        let message = ClientMessage::Statistics {
            source: source.clone(),
            columns: columns.to_vec(),
        };
        match self.request(&message, "reading statistics")? {
            DaemonMessage::Statistics(stats) => Ok(stats),
            other => Err(unexpected("reading statistics", &other)),
        }
    }

    /// The daemon's state.
    pub fn status(&mut self) -> Result<DaemonStatus, ClientError> {
        match self.request(&ClientMessage::Status, "asking for the status")? {
            DaemonMessage::Status(status) => Ok(status),
            other => Err(unexpected("asking for the status", &other)),
        }
    }

    /// The root's table names, sorted (see [`ClientMessage::ListTables`]).
    pub fn list_tables(&mut self) -> Result<Vec<String>, ClientError> {
        match self.request(&ClientMessage::ListTables, "listing the tables")? {
            DaemonMessage::Tables { names } => Ok(names),
            other => Err(unexpected("listing the tables", &other)),
        }
    }

    /// Asks the daemon to exit; returns once it acknowledged (it may still be winding
    /// down its scans).
    pub fn stop(mut self) -> Result<(), ClientError> {
        match self.request(&ClientMessage::Stop, "stopping the daemon")? {
            DaemonMessage::Stopping => Ok(()),
            other => Err(unexpected("stopping the daemon", &other)),
        }
    }

    /// Starts a scan and attaches to its ring: on the connection and ring of this
    /// client's last scan when that one ended well and none of its batches is alive
    /// any more (the daemon writes the new stream into the same ring, whose pages both
    /// processes have mapped already), else on a new connection.
    pub fn scan(&self, request: &ScanRequest) -> Result<ScanStream, ClientError> {
        const OP: &str = "starting a scan";
        let capacity = crate::RingOptions::new(request.ring_capacity_bytes).capacity_bytes() as u64;
        let kept = {
            let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
            let i = kept.iter().position(|k| k.asked == capacity);
            i.map(|i| kept.remove(i))
        };
        if let Some(mut kept) = kept {
            let ready = match &mut kept.consumer {
                None => true,
                Some(_) if kept.armed => true,
                Some(c) => c.held_bytes() == 0 && c.rearm(),
            };
            if ready {
                kept.armed = kept.consumer.is_some();
                if let Some(stream) = self.scan_on(kept, request)? {
                    return Ok(stream);
                }
            }
        }
        let mut conn = Conn(Some(open(&self.path)?));
        let stream = conn.stream(OP)?;
        send(stream, &ScanMessage::Scan(request), OP)?;
        match read_answer(stream, Instant::now() + self.timeout, OP)? {
            DaemonMessage::RingReady { ring_name } => {
                let consumer = Consumer::attach(&ring_name)?;
                Ok(self.stream_of(conn, Some(consumer), false, None, capacity))
            }
            DaemonMessage::Rows { summary, bytes } => {
                let answer = read_rows(stream, summary, bytes, self.timeout)?;
                Ok(self.stream_of(conn, None, false, Some(answer), capacity))
            }
            other => Err(unexpected(OP, &other)),
        }
    }

    /// The scan on a kept connection: `None` when the connection turned out dead (the
    /// daemon restarted, say) before the daemon answered, so that a new one may try.
    fn scan_on(
        &self,
        kept: Kept,
        request: &ScanRequest,
    ) -> Result<Option<ScanStream>, ClientError> {
        const OP: &str = "starting a scan";
        let Kept {
            mut conn,
            consumer,
            armed,
            asked,
        } = kept;
        let stream = conn.stream(OP)?;
        match send(stream, &ScanMessage::Scan(request), OP) {
            Ok(()) => {}
            Err(ClientError::Closed { .. } | ClientError::Io { .. }) => return Ok(None),
            Err(e) => return Err(e),
        }
        let ring_name = match read_answer(stream, Instant::now() + self.timeout, OP) {
            Ok(DaemonMessage::RingReady { ring_name }) => ring_name,
            Ok(DaemonMessage::Rows { summary, bytes }) => {
                // The ring (if any) stays as the request left it: rearmed.
                let answer = read_rows(stream, summary, bytes, self.timeout)?;
                return Ok(Some(self.stream_of(
                    conn,
                    consumer,
                    armed,
                    Some(answer),
                    asked,
                )));
            }
            Ok(other) => return Err(unexpected(OP, &other)),
            Err(ClientError::Closed { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let consumer = match consumer {
            Some(mut consumer) if ring_name == consumer.name() => {
                consumer.begin_stream()?;
                consumer
            }
            // The daemon made a new ring (another capacity, or the first on this
            // connection): the old one goes.
            _ => Consumer::attach(&ring_name)?,
        };
        Ok(Some(self.stream_of(
            conn,
            Some(consumer),
            false,
            None,
            asked,
        )))
    }

    fn stream_of(
        &self,
        conn: Conn,
        consumer: Option<Consumer>,
        armed: bool,
        answer: Option<Answer>,
        asked: u64,
    ) -> ScanStream {
        ScanStream {
            asked,
            unpinned_before: consumer.as_ref().map_or((0, 0), Consumer::unpinned),
            conn,
            consumer,
            armed,
            answer,
            timeout: self.timeout,
            ended: false,
            home: Arc::clone(&self.kept),
        }
    }

    fn request(
        &mut self,
        message: &ClientMessage,
        op: &'static str,
    ) -> Result<DaemonMessage, ClientError> {
        let answer = send(&mut self.stream, message, op)
            .and_then(|()| read_answer(&mut self.stream, Instant::now() + self.timeout, op));
        let Err(ClientError::Closed { .. }) = answer else {
            return answer;
        };
        // The daemon closed this connection: it went idle and the daemon made room for
        // others, or the daemon is gone. Requests have no side effect a second try could
        // repeat (a `Stop` twice is one stop): a daemon that answers a new connection
        // gets the request again; one that does not is dead or dying.
        // A dying daemon can still accept (its listening socket closes last), so the
        // second try failing the same way also means it is gone.
        let answer = match open(&self.path) {
            Ok(stream) => {
                self.stream = stream;
                send(&mut self.stream, message, op)
                    .and_then(|()| read_answer(&mut self.stream, Instant::now() + self.timeout, op))
            }
            Err(_) => answer,
        };
        if let Err(ClientError::Closed { .. }) = answer {
            if let Some(pid) = crate::sys::peer_pid(&self.stream) {
                remove_rings_of_dead_daemon(pid);
            }
        }
        answer
    }
}

/// How long a client whose ring was cut short waits for the daemon's reason.
const CUT_SHORT_REASON_WAIT: Duration = Duration::from_millis(500);

/// A scan the daemon answered on the socket ([`DaemonMessage::Rows`]).
#[derive(Debug)]
struct Answer {
    schema: SchemaRef,
    batches: std::vec::IntoIter<RecordBatch>,
    summary: ScanSummary,
}

/// Reads the Arrow IPC stream of `bytes` bytes that follows a [`DaemonMessage::Rows`].
fn read_rows(
    stream: &mut UnixStream,
    summary: ScanSummary,
    bytes: u64,
    timeout: Duration,
) -> Result<Answer, ClientError> {
    const OP: &str = "reading a scan's rows";
    summary
        .validate()
        .map_err(|source| ClientError::Protocol { op: OP, source })?;
    if bytes > crate::msg::MAX_INLINE_BYTES {
        return Err(ClientError::Protocol {
            op: OP,
            source: MessageError::Oversized {
                len_bytes: bytes,
                max_bytes: crate::msg::MAX_INLINE_BYTES as usize,
            },
        });
    }
    let started = Instant::now();
    let mut payload = vec![0u8; bytes as usize];
    read_exact_until(stream, &mut payload, started + timeout, started, OP)?;
    let (schema, batches) =
        crate::msg::read_ipc_stream(&payload).map_err(|e| ClientError::Daemon {
            message: format!("the daemon's rows are not a readable Arrow IPC stream: {e}"),
        })?;
    Ok(Answer {
        schema: Arc::new(schema),
        batches: batches.into_iter(),
        summary,
    })
}

/// One scan: batches from the ring, then the daemon's summary from the socket; or,
/// for a scan the daemon answered inline, its batches and summary as they came.
#[derive(Debug)]
pub struct ScanStream {
    conn: Conn,
    /// The connection's ring: this scan's stream, unless it was answered inline.
    consumer: Option<Consumer>,
    /// The ring is rearmed and unused (this scan was answered inline).
    armed: bool,
    /// The inline answer.
    answer: Option<Answer>,
    timeout: Duration,
    ended: bool,
    /// Where the connection and ring go when the scan ended well.
    home: Arc<Mutex<Vec<Kept>>>,
    /// The ring's unpin counts when this scan started (a kept ring carries many scans).
    unpinned_before: (u64, u64),
    /// The ring capacity the scan asked for.
    asked: u64,
}

impl ScanStream {
    /// The stream's schema.
    pub fn schema(&self) -> SchemaRef {
        match (&self.answer, &self.consumer) {
            (Some(answer), _) => Arc::clone(&answer.schema),
            (None, Some(consumer)) => consumer.schema(),
            (None, None) => Arc::new(arrow_schema::Schema::empty()),
        }
    }

    /// Whether the scan was answered on the socket, not through a ring.
    pub fn is_inline(&self) -> bool {
        self.answer.is_some()
    }

    /// Whether the batches this stream handed out and that are still alive hold more
    /// than half of the ring: a caller that keeps batches (a result, a sort) should then
    /// copy them out, or the daemon will wait for space that never comes. Never for an
    /// inline answer (its batches are the caller's own memory).
    pub fn ring_under_pressure(&self) -> bool {
        match (&self.answer, &self.consumer) {
            (None, Some(c)) => c.held_bytes().saturating_mul(2) > c.capacity_bytes(),
            _ => false,
        }
    }

    /// The ring, for callers that want to drive it themselves (`try_next`); `None` for
    /// a scan answered inline.
    pub fn consumer(&mut self) -> Option<&mut Consumer> {
        match self.answer {
            Some(_) => None,
            None => self.consumer.as_mut(),
        }
    }

    /// The next batch (blocking); `None` at the end of the stream. A scan that failed
    /// in the daemon is [`ClientError::Daemon`] with the daemon's text.
    pub fn next_batch(&mut self) -> Result<Option<RecordBatch>, ClientError> {
        if self.ended {
            return Ok(None);
        }
        if let Some(answer) = &mut self.answer {
            let next = answer.batches.next();
            self.ended = next.is_none();
            return Ok(next);
        }
        let Some(consumer) = self.consumer.as_mut() else {
            self.ended = true;
            return Ok(None);
        };
        match consumer.next() {
            Some(Ok(batch)) => Ok(Some(batch)),
            None => {
                self.ended = true;
                Ok(None)
            }
            Some(Err(RingError::ProducerFailed { message })) => {
                self.ended = true;
                Err(ClientError::Daemon { message })
            }
            Some(Err(e)) => {
                self.ended = true;
                // A stream cut short without an error record (the daemon could not
                // write one into a full ring): its reason may be on the socket.
                if matches!(
                    e,
                    RingError::ProducerGone { .. }
                        | RingError::PeerDied {
                            peer: crate::Peer::Producer,
                            ..
                        }
                ) {
                    remove_rings_of_dead_daemon(consumer.producer_pid());
                    const OP: &str = "reading why the scan ended";
                    if let Ok(stream) = self.conn.stream(OP) {
                        let deadline = Instant::now() + CUT_SHORT_REASON_WAIT;
                        if let Ok(DaemonMessage::Error { message }) =
                            read_message(stream, deadline, OP)
                        {
                            return Err(ClientError::Daemon { message });
                        }
                    }
                }
                Err(e.into())
            }
        }
    }

    /// Hands the daemon a tighter filter for the rest of the scan (nothing to do for a
    /// scan answered inline: it is over).
    pub fn refine(&mut self, predicate: &Predicate) -> Result<(), ClientError> {
        const OP: &str = "refining a scan";
        if self.answer.is_some() {
            return Ok(());
        }
        let message = ClientMessage::Refine {
            predicate: predicate.clone(),
        };
        send(self.conn.stream(OP)?, &message, OP)
    }

    /// Stops the scan: the ring is cancelled (the daemon sees it at its next push) and
    /// the daemon is told on the socket. Batches already received stay valid.
    pub fn cancel(&mut self) {
        self.ended = true;
        if self.answer.is_some() {
            // The daemon is done with it already.
            return;
        }
        if let Some(consumer) = &mut self.consumer {
            consumer.cancel();
        }
        // The daemon may have finished and closed already: nothing to tell then.
        const OP: &str = "cancelling a scan";
        if let Ok(stream) = self.conn.stream(OP) {
            let _ = send(stream, &ClientMessage::Cancel, OP);
        }
    }

    /// Waits for the daemon's summary (cancelling the scan first if the stream was not
    /// read to its end). A scan that failed gives the daemon's error. After a summary
    /// the connection and ring are kept for the client's next scan.
    pub fn finish(mut self) -> Result<ScanSummary, ClientError> {
        const OP: &str = "waiting for the scan summary";
        if let Some(answer) = self.answer.take() {
            self.keep();
            return Ok(answer.summary);
        }
        if !self.ended {
            self.cancel();
        }
        let deadline = Instant::now() + self.timeout;
        match read_message(self.conn.stream(OP)?, deadline, OP)? {
            DaemonMessage::Summary(mut summary) => {
                summary
                    .validate()
                    .map_err(|source| ClientError::Protocol { op: OP, source })?;
                // This side's part of the ring's story: batches it kept so long that the
                // daemon waited on them and they were copied out (`Consumer::unpin`).
                if let Some(consumer) = &self.consumer {
                    let (unpins, bytes) = consumer.unpinned();
                    summary.counters.executor_unpins = Some(crate::msg::Unpins {
                        count: unpins - self.unpinned_before.0,
                        bytes: bytes - self.unpinned_before.1,
                    });
                }
                self.armed = false;
                self.keep();
                Ok(summary)
            }
            other => Err(unexpected(OP, &other)),
        }
    }

    /// Puts the connection and ring where the client's next scan finds them.
    fn keep(self) {
        let ScanStream {
            conn,
            consumer,
            armed,
            home,
            asked,
            ..
        } = self;
        let mut kept = home.lock().unwrap_or_else(PoisonError::into_inner);
        kept.retain(|k| k.asked != asked);
        kept.insert(
            0,
            Kept {
                conn,
                consumer,
                armed,
                asked,
            },
        );
        kept.truncate(KEPT_MAX);
    }
}

/// Connects to the daemon serving `data_dir`; if none answers, calls `spawn` once (it
/// should start one, detached) and retries with backoff until `wait` has passed.
///
/// Two clients racing here both end up connected to the one daemon that won the data
/// directory's lock: the loser's daemon exits, and its client's retries reach the
/// winner.
pub fn ensure_daemon(
    data_dir: &Path,
    spawn: &dyn Fn() -> io::Result<()>,
    wait: Duration,
) -> Result<DaemonClient, ClientError> {
    let path = socket_path(data_dir);
    let try_once = || -> Result<DaemonClient, ClientError> {
        let mut client = DaemonClient::connect(&path)?.with_timeout(Duration::from_secs(2));
        client.ping()?;
        Ok(client.with_timeout(DEFAULT_REQUEST_TIMEOUT))
    };
    if let Ok(client) = try_once() {
        return Ok(client);
    }
    spawn().map_err(ClientError::Spawn)?;
    let start = Instant::now();
    let mut spawned = start;
    let mut backoff = Duration::from_millis(5);
    loop {
        match try_once() {
            Ok(client) => return Ok(client),
            // The one spawned found the old daemon still winding down (holding the
            // lock) and left: start another once the old one may be gone. A spare one
            // finds the lock taken and exits at once.
            Err(_) if spawned.elapsed() >= RESPAWN_AFTER && start.elapsed() < wait => {
                spawn().map_err(ClientError::Spawn)?;
                spawned = Instant::now();
            }
            Err(last) if start.elapsed() >= wait => {
                return Err(ClientError::NotStarted {
                    path,
                    waited_ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
                    last: Box::new(last),
                });
            }
            Err(_) => {
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_millis(100));
            }
        }
    }
}

/// How long [`ensure_daemon`] waits for a daemon it started before it starts another.
const RESPAWN_AFTER: Duration = Duration::from_millis(700);

/// Sends a write ([`ClientMessage::CreateTable`], [`ClientMessage::DropTable`],
/// [`ClientMessage::Truncate`], [`ClientMessage::Flush`], or [`ClientMessage::Insert`]
/// with `payload`, its Arrow IPC stream) to the daemon listening at `socket_path`, and
/// waits up to `timeout` for it to say it is durable; returns the rows written.
///
/// On a connection of its own, and never sent twice: unlike a read, a write whose
/// answer was lost may have been applied, so a closed connection is an error here
/// ("…whether it was applied is unknown"), not a reason to try again.
pub fn write_request(
    socket_path: &Path,
    message: &ClientMessage,
    payload: &[u8],
    timeout: Duration,
) -> Result<u64, ClientError> {
    let mut stream = open(socket_path)?;
    write_on(&mut stream, message, payload, timeout)
}

/// A connection for writes, kept between them (a write is one round trip on it, or,
/// for a staged part, half of one: see [`WriteConnection::send`]).
#[derive(Debug)]
pub struct WriteConnection {
    path: PathBuf,
    stream: Option<UnixStream>,
    /// A write sent whose answer is not read yet, and how long to wait for it.
    pending: Option<Duration>,
}

impl WriteConnection {
    /// Writes go to the daemon listening at `socket_path` (connected on the first).
    pub fn new(socket_path: &Path) -> Self {
        Self {
            path: socket_path.to_path_buf(),
            stream: None,
            pending: None,
        }
    }

    /// [`write_request`] on the kept connection: reconnected first when the daemon
    /// closed it while it was idle (which no write was sent on, so nothing can be
    /// sent twice). The answer of a write [`Self::send`] sent is read first: if the
    /// daemon refused that one, this one is not sent and that refusal is the answer.
    pub fn write(
        &mut self,
        message: &ClientMessage,
        payload: &[u8],
        timeout: Duration,
    ) -> Result<u64, ClientError> {
        let mut stream = self.ready()?;
        let result = write_on(&mut stream, message, payload, timeout);
        self.keep(stream, &result);
        result
    }

    /// Sends a write without waiting for its answer, which the next [`Self::write`]
    /// or [`Self::send`] reads (or [`Self::collect`]): a client sends a COPY's staged
    /// part and parses the next one while the daemon writes this one.
    pub fn send(
        &mut self,
        message: &ClientMessage,
        payload: &[u8],
        timeout: Duration,
    ) -> Result<(), ClientError> {
        let mut stream = self.ready()?;
        let result = send_with_payload(&mut stream, message, payload, timeout);
        self.keep(stream, &result);
        if result.is_ok() {
            self.pending = Some(timeout);
        }
        result
    }

    /// The answer of the write [`Self::send`] sent (`Ok(None)`: none is awaited).
    pub fn collect(&mut self) -> Result<Option<u64>, ClientError> {
        let Some(timeout) = self.pending.take() else {
            return Ok(None);
        };
        let mut stream = self
            .stream
            .take()
            .ok_or(ClientError::Closed { op: "writing" })?;
        let result = read_written(&mut stream, timeout);
        self.keep(stream, &result);
        result.map(Some)
    }

    /// The connection, ready for a write: an answer awaited read first, a closed
    /// connection replaced.
    fn ready(&mut self) -> Result<UnixStream, ClientError> {
        self.collect()?;
        match self.stream.take() {
            Some(s) if crate::sys::still_open(&s) => Ok(s),
            _ => open(&self.path),
        }
    }

    fn keep<T>(&mut self, stream: UnixStream, result: &Result<T, ClientError>) {
        // The daemon answers a refused write and reads the next: the connection is in
        // step after either answer.
        if matches!(result, Ok(_) | Err(ClientError::Daemon { .. })) {
            self.stream = Some(stream);
        } else {
            self.pending = None;
        }
    }
}

fn write_on(
    stream: &mut UnixStream,
    message: &ClientMessage,
    payload: &[u8],
    timeout: Duration,
) -> Result<u64, ClientError> {
    send_with_payload(stream, message, payload, timeout)?;
    read_written(stream, timeout)
}

/// Sends a write's frame and its payload.
fn send_with_payload(
    stream: &mut UnixStream,
    message: &ClientMessage,
    payload: &[u8],
    timeout: Duration,
) -> Result<(), ClientError> {
    const OP: &str = "writing";
    send(stream, message, OP)?;
    if !payload.is_empty() {
        let timeout_error = |source| ClientError::Io { op: OP, source };
        stream
            .set_write_timeout(Some(timeout))
            .map_err(timeout_error)?;
        stream.write_all(payload).map_err(|source| match source {
            e if is_closed(&e) => ClientError::Closed { op: OP },
            source => ClientError::Io { op: OP, source },
        })?;
        stream
            .set_write_timeout(Some(SEND_TIMEOUT))
            .map_err(timeout_error)?;
    }
    Ok(())
}

/// Reads a write's answer: the rows it wrote.
fn read_written(stream: &mut UnixStream, timeout: Duration) -> Result<u64, ClientError> {
    const OP: &str = "writing";
    match read_answer(stream, Instant::now() + timeout, OP) {
        Ok(DaemonMessage::Written { rows, .. }) => Ok(rows),
        Ok(other) => Err(unexpected(OP, &other)),
        Err(ClientError::Closed { .. }) => Err(ClientError::Daemon {
            message: "the daemon closed the connection before it answered a write: \
                      whether it was applied is unknown (the daemon may have stopped)"
                .into(),
        }),
        Err(e) => Err(e),
    }
}

/// Whether the peer of `stream` is still there: no end of stream (nor anything it did
/// not ask for) waiting on it. Does not block. A daemon busy on a request (fetching
/// footers from object storage) asks it to give up when its client went away.
pub fn connection_open(stream: &UnixStream) -> bool {
    crate::sys::still_open(stream)
}

/// How long a request's write may block (the daemon not reading its socket).
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

fn open(path: &Path) -> Result<UnixStream, ClientError> {
    let connect_error = |source| ClientError::Connect {
        path: path.to_path_buf(),
        source,
    };
    let stream = UnixStream::connect(path).map_err(connect_error)?;
    // Set once for the connection's life, not before each request (a system call in
    // every point lookup); a write with a payload sets its own and puts this back.
    stream
        .set_write_timeout(Some(SEND_TIMEOUT))
        .map_err(connect_error)?;
    Ok(stream)
}

/// Writes `message` on `stream` (opened by [`open`], which set its write timeout).
fn send<T: serde::Serialize>(
    stream: &mut UnixStream,
    message: &T,
    op: &'static str,
) -> Result<(), ClientError> {
    write_frame(stream, message).map_err(|source| match source {
        MessageError::Io(source) if is_closed(&source) => ClientError::Closed { op },
        MessageError::Io(source) => ClientError::Io { op, source },
        source => ClientError::Protocol { op, source },
    })
}

/// How long a client whose daemon is gone waits for it to exit before it looks for
/// the rings the daemon left (a daemon closing in good order removes its own). The
/// wait ends as soon as the process does (a SIGKILLed daemon's sockets close before
/// its memory is torn down, which takes a while on a loaded machine).
const DEAD_DAEMON_GRACE: Duration = Duration::from_secs(2);

/// Removes the rings no scan attached to of daemon `pid` once it has exited: a daemon
/// killed with SIGKILL cannot, and the next daemon to start may be far away.
fn remove_rings_of_dead_daemon(pid: u32) {
    crate::remove_rings_of(crate::RING_PREFIX, pid, DEAD_DAEMON_GRACE);
}

fn is_closed(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset | io::ErrorKind::UnexpectedEof
    )
}

/// Reads the daemon's answer to a request just sent. It cannot be there yet: the
/// thread waits for it before its first read (a read finding nothing first was a
/// system call for nothing in every point lookup).
fn read_answer(
    stream: &mut UnixStream,
    deadline: Instant,
    op: &'static str,
) -> Result<DaemonMessage, ClientError> {
    let slice = (deadline.saturating_duration_since(Instant::now()))
        .clamp(Duration::from_millis(1), POLL_INTERVAL);
    crate::sys::wait_readable(stream.as_fd(), Some(slice))
        .map_err(|source| ClientError::Io { op, source })?;
    read_message(stream, deadline, op)
}

/// Reads one daemon message, giving up at `deadline`.
fn read_message(
    stream: &mut UnixStream,
    deadline: Instant,
    op: &'static str,
) -> Result<DaemonMessage, ClientError> {
    let started = Instant::now();
    let mut len = [0u8; 4];
    read_exact_until(stream, &mut len, deadline, started, op)?;
    let len_bytes = u32::from_le_bytes(len) as usize;
    if len_bytes > MAX_FRAME_BYTES {
        return Err(ClientError::Protocol {
            op,
            source: MessageError::Oversized {
                len_bytes: len_bytes as u64,
                max_bytes: MAX_FRAME_BYTES,
            },
        });
    }
    let mut body = vec![0u8; len_bytes];
    read_exact_until(stream, &mut body, deadline, started, op)?;
    serde_json::from_slice(&body).map_err(|e| ClientError::Protocol {
        op,
        source: MessageError::Malformed(e),
    })
}

fn read_exact_until(
    stream: &mut UnixStream,
    buf: &mut [u8],
    deadline: Instant,
    started: Instant,
    op: &'static str,
) -> Result<(), ClientError> {
    let mut got = 0;
    while got < buf.len() {
        // What has arrived is taken at once; the thread sleeps in `poll` only when
        // nothing has (see `sys::wait_readable` for why not in a blocking read).
        match crate::sys::recv_now(stream, &mut buf[got..]) {
            Ok(0) => return Err(ClientError::Closed { op }),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let now = Instant::now();
                if now >= deadline {
                    return Err(ClientError::TimedOut {
                        op,
                        waited_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    });
                }
                let slice = (deadline - now).clamp(Duration::from_millis(1), POLL_INTERVAL);
                crate::sys::wait_readable(stream.as_fd(), Some(slice))
                    .map_err(|source| ClientError::Io { op, source })?;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if is_closed(&e) => return Err(ClientError::Closed { op }),
            Err(source) => return Err(ClientError::Io { op, source }),
        }
    }
    Ok(())
}

fn unexpected(op: &'static str, got: &DaemonMessage) -> ClientError {
    match got {
        DaemonMessage::Error { message } => ClientError::Daemon {
            message: message.clone(),
        },
        other => {
            let mut text = format!("{other:?}");
            text.truncate(200);
            ClientError::Unexpected { op, got: text }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::os::unix::net::UnixListener;

    use super::*;
    use crate::msg::read_frame;

    #[test]
    fn a_silent_daemon_times_out_and_a_dead_one_is_closed() {
        let dir = std::env::temp_dir().join(crate::unique_name("client-test").replace('/', ""));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("io.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            // First connection: read the ping, never answer, hold it open a while.
            let (mut a, _) = listener.accept().unwrap();
            let _: Option<ClientMessage> = read_frame(&mut a).unwrap();
            // Second: read the ping, then close without answering.
            let (mut b, _) = listener.accept().unwrap();
            let _: Option<ClientMessage> = read_frame(&mut b).unwrap();
            drop(b);
            std::thread::sleep(Duration::from_millis(500));
            drop(a);
        });
        let mut silent = DaemonClient::connect(&path)
            .unwrap()
            .with_timeout(Duration::from_millis(300));
        let t = Instant::now();
        let err = silent.ping().unwrap_err();
        assert!(matches!(err, ClientError::TimedOut { .. }), "{err}");
        assert!(t.elapsed() < Duration::from_secs(2));
        let mut dead = DaemonClient::connect(&path).unwrap();
        let t = Instant::now();
        let err = dead.ping().unwrap_err();
        assert!(matches!(err, ClientError::Closed { .. }), "{err}");
        assert!(t.elapsed() < Duration::from_secs(1));
        server.join().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn ensure_daemon_gives_up_after_wait() {
        let dir = std::env::temp_dir().join(crate::unique_name("client-none").replace('/', ""));
        let spawned = std::sync::atomic::AtomicU32::new(0);
        let t = Instant::now();
        let err = ensure_daemon(
            &dir,
            &|| {
                spawned.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            },
            Duration::from_millis(200),
        )
        .unwrap_err();
        assert!(matches!(err, ClientError::NotStarted { .. }), "{err}");
        assert_eq!(spawned.load(std::sync::atomic::Ordering::Relaxed), 1);
        assert!(t.elapsed() < Duration::from_secs(2));
    }

    /// This thread's voluntary context switches so far (Linux).
    fn voluntary_switches() -> u64 {
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .map(|v| v.trim().parse().unwrap())
            .unwrap()
    }

    #[test]
    fn a_client_waiting_for_an_answer_sleeps_while_the_daemon_takes_its_request() {
        // The daemon's read of the request is the moment a client blocked in `recv`
        // would be woken for nothing: once per request, on top of the answer's wake-up.
        const ROUNDS: u64 = 40;
        let (mut client, mut daemon) = UnixStream::pair().unwrap();
        let waiter = std::thread::spawn(move || {
            let before = voluntary_switches();
            for _ in 0..ROUNDS {
                client.write_all(b"request!").unwrap();
                let mut answer = [0u8; 6];
                let now = Instant::now();
                read_exact_until(
                    &mut client,
                    &mut answer,
                    now + Duration::from_secs(10),
                    now,
                    "t",
                )
                .unwrap();
                assert_eq!(&answer, b"answer");
            }
            voluntary_switches() - before
        });
        for _ in 0..ROUNDS {
            // Each side gets time to be asleep in its wait before the other acts.
            std::thread::sleep(Duration::from_millis(2));
            let mut request = [0u8; 8];
            daemon.read_exact(&mut request).unwrap();
            std::thread::sleep(Duration::from_millis(2));
            daemon.write_all(b"answer").unwrap();
        }
        let switches = waiter.join().unwrap();
        // One sleep per answer; a woken-for-nothing client sleeps twice per round. A
        // few extra are the machine's (a descheduled thread).
        assert!(
            switches < ROUNDS * 3 / 2,
            "the client slept {switches} times in {ROUNDS} requests: woken for nothing"
        );
    }
}
