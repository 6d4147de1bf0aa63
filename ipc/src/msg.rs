//! Control-socket messages: what the executor asks the daemon, and what it answers.
//!
//! Frames on the Unix socket (`<data>/.ringscan/io.sock`) are a 4-byte little-endian
//! length followed by that many bytes of JSON. A frame longer than the reader's limit
//! ([`MAX_FRAME_BYTES`] by default) is rejected *before* anything is allocated for it,
//! malformed JSON is an error, and every top-level message carries a protocol
//! [`PROTOCOL_VERSION`] that [`ScanRequest::validate`] checks, so a hostile or
//! confused client gets an error reply and never crashes the daemon.
//!
//! ```
//! use std::os::unix::net::UnixStream;
//! use ringscan_ipc::msg::{ClientMessage, ScanRequest, ScanSource, read_frame, write_frame};
//!
//! let (mut client, mut daemon) = UnixStream::pair().unwrap();
//! let request = ScanRequest::new(ScanSource::Table { name: "ohlcv".into() });
//! write_frame(&mut client, &ClientMessage::Scan(request.clone())).unwrap();
//! let got: Option<ClientMessage> = read_frame(&mut daemon).unwrap();
//! assert_eq!(got, Some(ClientMessage::Scan(request)));
//! ```

use std::io::{self, Read, Write};
use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

pub use crate::column_stats::{
    decode_min_max, encode_min_max, ColumnStatistics, TableStatistics, MAX_STATISTICS_COLUMNS,
};
pub use crate::scan_data::{
    CmpOp, DaemonCounters, Literal, Operand, Predicate, ScanSummary, ScanTimings, Unpins,
};
pub use crate::PROTOCOL_VERSION;

pub use crate::info::{
    array_slice_bytes, decode_schema, encode_ipc_stream, encode_schema, read_ipc_buffer,
    read_ipc_stream, CacheStatus, ColumnCacheStatus, DaemonStatus, FileVersion, IngestStatus,
    MemoryStatus, TableInfo,
};

/// Largest frame [`read_frame`] accepts (1 MiB): requests and summaries are small.
pub const MAX_FRAME_BYTES: usize = 1 << 20;
/// Deepest predicate tree [`ScanRequest::validate`] accepts.
pub const MAX_PREDICATE_DEPTH: usize = 64;
/// Longest IN list [`ScanRequest::validate`] accepts.
pub const MAX_IN_LIST: usize = 100_000;

/// Errors of the control protocol.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MessageError {
    /// Reading or writing the socket failed.
    #[error("control socket I/O failed")]
    Io(#[from] io::Error),
    /// The frame's declared length exceeds the limit.
    #[error("frame of {len_bytes} bytes exceeds the limit of {max_bytes} bytes")]
    Oversized {
        /// Declared length.
        len_bytes: u64,
        /// The limit.
        max_bytes: usize,
    },
    /// The connection ended in the middle of a frame.
    #[error("connection closed after {read_bytes} of {len_bytes} frame bytes")]
    Truncated {
        /// Bytes received.
        read_bytes: usize,
        /// Bytes announced.
        len_bytes: usize,
    },
    /// The frame is not valid JSON for the expected message.
    #[error("malformed message")]
    Malformed(#[source] serde_json::Error),
    /// The message has a protocol version this build does not speak.
    #[error("protocol version {got} is not supported (this build speaks {supported})")]
    UnsupportedVersion {
        /// The message's version.
        got: u32,
        /// Ours.
        supported: u32,
    },
    /// The message is well-formed but its content is invalid.
    #[error("invalid scan request: {0}")]
    Invalid(String),
}

impl Predicate {
    /// Checks the tree's bounds (depth, IN-list length), as for a scan request's.
    pub fn validate_tree(&self) -> Result<(), MessageError> {
        self.validate(1)
    }

    fn validate(&self, depth: usize) -> Result<(), MessageError> {
        if depth > MAX_PREDICATE_DEPTH {
            return Err(MessageError::Invalid(format!(
                "predicate deeper than {MAX_PREDICATE_DEPTH} levels"
            )));
        }
        match self {
            Self::And(v) | Self::Or(v) => v.iter().try_for_each(|p| p.validate(depth + 1)),
            Self::Not(p) => p.validate(depth + 1),
            Self::InList { list, .. } if list.len() > MAX_IN_LIST => Err(MessageError::Invalid(
                format!("IN list of {} values (limit {MAX_IN_LIST})", list.len()),
            )),
            _ => Ok(()),
        }
    }
}

/// What to scan.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScanSource {
    /// A table (a directory under the data directory).
    Table {
        /// Table name.
        name: String,
    },
    /// Explicit files or globs, relative to the data directory.
    Files {
        /// Paths or glob patterns.
        paths: Vec<PathBuf>,
    },
}

/// The executor's request for one scan stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScanRequest {
    /// Protocol version ([`PROTOCOL_VERSION`]).
    pub version: u32,
    /// Table or files.
    pub source: ScanSource,
    /// Columns to return, in order; `None` means all.
    #[serde(default)]
    pub projection: Option<Vec<String>>,
    /// Rows must satisfy this (the daemon prunes with it and filters decoded rows).
    #[serde(default)]
    pub predicate: Option<Predicate>,
    /// Stop after this many rows have been emitted.
    #[serde(default)]
    pub limit: Option<u64>,
    /// Skip this many matching rows (in scan order: files in listing order, rows in
    /// file order) before emitting any; `limit` counts the rows after them. An
    /// unfiltered scan skips whole row groups by their row counts without reading them.
    #[serde(default)]
    pub offset: u64,
    /// Rows per batch.
    pub batch_size: usize,
    /// Data area of the ring for this stream, in bytes.
    pub ring_capacity_bytes: usize,
    /// The client keeps only distinct rows (`SELECT DISTINCT`): the daemon may drop a
    /// row equal (bit for bit) to one it already sent, and does so within each row
    /// group. The rows it sends are the first occurrences, in scan order.
    #[serde(default)]
    pub distinct: bool,
    /// The client takes the answer on the socket instead of a ring when the scan ends
    /// quickly with at most this many bytes of rows ([`DaemonMessage::Rows`]); 0: always
    /// a ring. A point lookup then costs one round trip, not a ring's set-up, wake-ups
    /// and terminal records.
    #[serde(default)]
    pub inline_bytes: u64,
}

/// Largest inline answer a scan may ask for (16 MiB).
pub const MAX_INLINE_BYTES: u64 = 16 << 20;

impl ScanRequest {
    /// Default rows per batch.
    pub const DEFAULT_BATCH_SIZE: usize = 8192;
    /// Default ring capacity (256 MiB).
    ///
    /// Virtual size: only the pages a scan writes are ever allocated. Large enough that a
    /// full-table result of a few hundred thousand rows stays zero-copy in the ring rather
    /// than being copied out under pressure (`SELECT * FROM wide`, 357,814 rows: executor
    /// peak RSS 269 MiB with a 64 MiB ring, 109 MiB with 256 MiB).
    pub const DEFAULT_RING_CAPACITY_BYTES: usize = 256 << 20;
    /// Largest batch size accepted.
    pub const MAX_BATCH_SIZE: usize = 1 << 24;

    /// A request for all columns and rows of `source`, with default sizes.
    pub fn new(source: ScanSource) -> Self {
        Self {
            version: PROTOCOL_VERSION,
            source,
            projection: None,
            predicate: None,
            limit: None,
            offset: 0,
            batch_size: Self::DEFAULT_BATCH_SIZE,
            ring_capacity_bytes: Self::DEFAULT_RING_CAPACITY_BYTES,
            distinct: false,
            inline_bytes: 0,
        }
    }

    /// Checks the version and bounds (what the daemon does before acting on a request).
    /// The ring's capacity is the ring's to check, when the daemon creates it.
    pub fn validate(&self) -> Result<(), MessageError> {
        check_version(self.version)?;
        if self.batch_size == 0 || self.batch_size > Self::MAX_BATCH_SIZE {
            return Err(MessageError::Invalid(format!(
                "batch size {} outside 1..={}",
                self.batch_size,
                Self::MAX_BATCH_SIZE
            )));
        }
        if self.inline_bytes > MAX_INLINE_BYTES {
            return Err(MessageError::Invalid(format!(
                "inline answers of {} bytes (limit {MAX_INLINE_BYTES})",
                self.inline_bytes
            )));
        }
        if let ScanSource::Files { paths } = &self.source {
            if paths.is_empty() {
                return Err(MessageError::Invalid("no files given".into()));
            }
        }
        match &self.predicate {
            Some(p) => p.validate(1),
            None => Ok(()),
        }
    }
}

fn check_version(got: u32) -> Result<(), MessageError> {
    if got == PROTOCOL_VERSION {
        Ok(())
    } else {
        Err(MessageError::UnsupportedVersion {
            got,
            supported: PROTOCOL_VERSION,
        })
    }
}

impl ScanSummary {
    /// Checks the version.
    pub fn validate(&self) -> Result<(), MessageError> {
        check_version(self.version)
    }
}

/// [`ClientMessage::Scan`] borrowing its request, for writing: the same JSON without
/// cloning the request (and its projection's names) for every scan.
#[derive(Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScanMessage<'a> {
    /// As [`ClientMessage::Scan`].
    Scan(&'a ScanRequest),
}

/// Executor → daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientMessage {
    /// Start a scan stream.
    Scan(ScanRequest),
    /// Liveness probe; answered with [`DaemonMessage::Pong`].
    Ping,
    /// The schema and data version of a table or file set; answered with
    /// [`DaemonMessage::Table`].
    Describe {
        /// What to describe.
        source: ScanSource,
    },
    /// Per column, the minimum, maximum and null count over every file and row group
    /// of `source`, from the Parquet footers (no data is read); answered with
    /// [`DaemonMessage::Statistics`].
    Statistics {
        /// What to summarize.
        source: ScanSource,
        /// The columns, by name (at most [`MAX_STATISTICS_COLUMNS`]).
        columns: Vec<String>,
    },
    /// The daemon's state; answered with [`DaemonMessage::Status`].
    Status,
    /// The root's table names (what `\dt` lists); answered with
    /// [`DaemonMessage::Tables`]. For an object-storage root only the daemon can list
    /// them: the client's local directory is not the data.
    ListTables,
    /// Ask the daemon to exit: it answers [`DaemonMessage::Stopping`], cancels running
    /// scans and exits.
    Stop,
    /// On a scan connection, after [`DaemonMessage::RingReady`]: a tighter filter found
    /// while the scan runs (top-k's current threshold). Only ever tightens: rows it
    /// rejects may still be sent.
    Refine {
        /// Rows failing it are no longer needed.
        predicate: Predicate,
    },
    /// On a scan connection, after [`DaemonMessage::RingReady`]: stop the scan (the
    /// summary still follows).
    Cancel,
    /// Create a table the daemon writes: a directory with a manifest, its rows taken by
    /// [`ClientMessage::Insert`]. Answered with [`DaemonMessage::Written`] once the
    /// manifest is durable.
    CreateTable {
        /// Table name (one path component).
        name: String,
        /// Its columns as an Arrow IPC schema message ([`encode_schema`]); a field not
        /// nullable is `NOT NULL`.
        schema_ipc: Vec<u8>,
        /// The primary key's columns (none: no key).
        #[serde(default)]
        primary_key: Vec<String>,
        /// An existing table of that name is not an error.
        #[serde(default)]
        if_not_exists: bool,
    },
    /// Drop a table the daemon created, its files and its rows in memory.
    DropTable {
        /// Table name.
        name: String,
        /// A missing table is not an error.
        #[serde(default)]
        if_exists: bool,
    },
    /// Remove every row of a table the daemon created.
    Truncate {
        /// Table name.
        name: String,
    },
    /// Append rows to a table the daemon created: the frame is followed on the socket
    /// by `bytes` raw bytes, an Arrow IPC stream (schema, then batches) of rows with
    /// the table's columns. All or nothing: answered with [`DaemonMessage::Written`]
    /// only once the rows are durable in the write-ahead log (and then visible to every
    /// scan), or with an error and none of them applied.
    Insert {
        /// Table name.
        table: String,
        /// Length of the Arrow IPC stream that follows (at most [`MAX_INSERT_BYTES`]).
        bytes: u64,
    },
    /// Write the rows held in memory to Parquet now (every table); answered with
    /// [`DaemonMessage::Written`].
    Flush,
    /// One part of a statement too large to hold in memory (a long COPY): the frame is
    /// followed by `bytes` raw bytes, an Arrow IPC stream of rows of the table, as for
    /// [`ClientMessage::Insert`]. The daemon checks the rows (types, `NOT NULL`, the
    /// primary key against the table's files and the statement's earlier parts) and
    /// writes them as a synced Parquet file that no scan sees yet. Answered with
    /// [`DaemonMessage::Written`] (the statement's rows so far, LSN 0). Parts belong to
    /// this connection: a part of another `statement` discards the parts before it, and
    /// so does the connection's end.
    Stage {
        /// Table name.
        table: String,
        /// The statement's number, chosen by the client (the same for all its parts).
        statement: u64,
        /// This part's number, from 0: a part whose earlier ones this connection does
        /// not hold (they went with an earlier connection) is refused.
        part: u64,
        /// Length of the Arrow IPC stream that follows (at most [`MAX_INSERT_BYTES`]).
        bytes: u64,
    },
    /// Commit the parts of `statement` ([`ClientMessage::Stage`]): their keys are
    /// checked against the rows in memory, then their files join the table in one
    /// durable manifest update, visible to every scan at once. Answered with
    /// [`DaemonMessage::Written`] (the statement's rows, LSN 0), or an error and none
    /// of them applied.
    Adopt {
        /// Table name.
        table: String,
        /// The statement's number.
        statement: u64,
        /// How many parts the client staged: fewer here refuses the statement.
        parts: u64,
    },
    /// Drop this connection's staged parts (a COPY that failed or was cancelled).
    Discard,
}

/// Largest Arrow IPC stream one [`ClientMessage::Insert`] may carry (1 GiB).
pub const MAX_INSERT_BYTES: u64 = 1 << 30;

impl ClientMessage {
    /// Checks what can be checked without the data: versions and bounds.
    pub fn validate(&self) -> Result<(), MessageError> {
        match self {
            Self::Scan(request) => request.validate(),
            Self::Refine { predicate } => predicate.validate_tree(),
            Self::Describe {
                source: ScanSource::Files { paths },
            }
            | Self::Statistics {
                source: ScanSource::Files { paths },
                ..
            } if paths.is_empty() => Err(MessageError::Invalid("no files given".into())),
            Self::Insert { bytes, .. } | Self::Stage { bytes, .. } if *bytes > MAX_INSERT_BYTES => {
                Err(MessageError::Invalid(format!(
                    "an insert of {bytes} bytes (limit {MAX_INSERT_BYTES}; split the rows)"
                )))
            }
            Self::Statistics { columns, .. } if columns.len() > MAX_STATISTICS_COLUMNS => {
                Err(MessageError::Invalid(format!(
                    "statistics for {} columns (limit {MAX_STATISTICS_COLUMNS})",
                    columns.len()
                )))
            }
            _ => Ok(()),
        }
    }
}

/// Daemon → executor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DaemonMessage {
    /// The ring for the requested scan was created; attach to it.
    RingReady {
        /// The ring's shared-memory name.
        ring_name: String,
    },
    /// The scan finished; what it did.
    Summary(ScanSummary),
    /// The scan finished without a ring (it asked for [`ScanRequest::inline_bytes`]):
    /// its rows follow this frame as an Arrow IPC stream of `bytes` bytes.
    Rows {
        /// What the scan did.
        summary: ScanSummary,
        /// Length of the Arrow IPC stream that follows.
        bytes: u64,
    },
    /// The request failed (malformed, invalid, or the scan failed before streaming).
    Error {
        /// Human-readable cause.
        message: String,
    },
    /// Answer to [`ClientMessage::Ping`].
    Pong,
    /// Answer to [`ClientMessage::Describe`].
    Table(TableInfo),
    /// Answer to [`ClientMessage::Statistics`].
    Statistics(TableStatistics),
    /// Answer to [`ClientMessage::Status`].
    Status(DaemonStatus),
    /// Answer to [`ClientMessage::ListTables`]: sorted, at most 10,000.
    Tables {
        /// The table names.
        names: Vec<String>,
    },
    /// Answer to [`ClientMessage::Stop`]: the daemon is exiting.
    Stopping,
    /// A write is durable: [`ClientMessage::Insert`], [`ClientMessage::CreateTable`],
    /// [`ClientMessage::DropTable`], [`ClientMessage::Truncate`],
    /// [`ClientMessage::Flush`], [`ClientMessage::Stage`], [`ClientMessage::Adopt`] or
    /// [`ClientMessage::Discard`].
    Written {
        /// Rows it wrote (inserted, or flushed to Parquet).
        rows: u64,
        /// The write-ahead log position that holds it (0 for what the log does not
        /// carry: a table's creation, a flush).
        lsn: u64,
    },
}

/// Writes one frame: 4-byte little-endian length, then the JSON of `message`.
pub fn write_frame<W: Write, T: Serialize>(
    writer: &mut W,
    message: &T,
) -> Result<(), MessageError> {
    let body = serde_json::to_vec(message).map_err(MessageError::Malformed)?;
    if body.len() > MAX_FRAME_BYTES {
        return Err(MessageError::Oversized {
            len_bytes: body.len() as u64,
            max_bytes: MAX_FRAME_BYTES,
        });
    }
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
    frame.extend_from_slice(&body);
    writer.write_all(&frame)?;
    writer.flush()?;
    Ok(())
}

/// Reads one frame with the default limit; `Ok(None)` on a clean end of stream (the
/// peer closed the connection between frames).
pub fn read_frame<R: Read, T: DeserializeOwned>(reader: &mut R) -> Result<Option<T>, MessageError> {
    read_frame_limited(reader, MAX_FRAME_BYTES)
}

/// The first part of a frame's body read into a buffer of its announced size: a peer
/// that announces a large frame and sends less does not make the reader allocate all
/// of it up front.
const BODY_FIRST_READ: usize = 64 << 10;

/// A frame's body of `len_bytes`: read straight into a buffer of that size, in as few
/// reads as the peer's writes allow (`read_to_end` probed with 32 bytes and doubled,
/// seven system calls for a 530-byte scan request), grown by doubling past
/// [`BODY_FIRST_READ`].
fn read_body<R: Read>(reader: &mut R, len_bytes: usize) -> Result<Vec<u8>, MessageError> {
    let mut body = vec![0u8; len_bytes.min(BODY_FIRST_READ)];
    let mut got = 0;
    loop {
        while got < body.len() {
            match reader.read(&mut body[got..]) {
                Ok(0) => {
                    return Err(MessageError::Truncated {
                        read_bytes: got,
                        len_bytes,
                    })
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        if got == len_bytes {
            return Ok(body);
        }
        body.resize(len_bytes.min(body.len() * 2), 0);
    }
}

/// [`read_frame`] with an explicit size limit.
pub fn read_frame_limited<R: Read, T: DeserializeOwned>(
    reader: &mut R,
    max_bytes: usize,
) -> Result<Option<T>, MessageError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match reader.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => {
                return Err(MessageError::Truncated {
                    read_bytes: got,
                    len_bytes: 4,
                });
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let len_bytes = u32::from_le_bytes(len) as usize;
    if len_bytes > max_bytes {
        return Err(MessageError::Oversized {
            len_bytes: len_bytes as u64,
            max_bytes,
        });
    }
    let body = read_body(reader, len_bytes)?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(MessageError::Malformed)
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;
    use std::os::unix::net::UnixStream;

    use super::*;

    fn full_request() -> ScanRequest {
        let mut r = ScanRequest::new(ScanSource::Files {
            paths: vec!["ohlcv/symbol=SPY/*.parquet".into()],
        });
        r.projection = Some(vec!["ts".into(), "close".into()]);
        r.limit = Some(10);
        r.predicate = Some(Predicate::And(vec![
            Predicate::compare("close", CmpOp::Gt, Literal::Float(100.5)),
            Predicate::Or(vec![
                Predicate::InList {
                    expr: Operand::Column("symbol".into()),
                    list: vec![Literal::Utf8("SPY".into()), Literal::Utf8("QQQ".into())],
                    negated: false,
                },
                Predicate::Not(Box::new(Predicate::IsNull {
                    expr: Operand::Column("volume".into()),
                    negated: true,
                })),
            ]),
            Predicate::Between {
                expr: Operand::Column("ts".into()),
                low: Literal::TimestampMicros(0),
                high: Literal::TimestampMicros(1_000_000),
                negated: false,
            },
            Predicate::Compare {
                left: Operand::Column("a".into()),
                op: CmpOp::LtEq,
                right: Operand::Column("b".into()),
            },
        ]));
        r
    }

    /// A sample with measured events (one multiplexed, one user-only), unmeasured ones
    /// under the shared reason and one with its own.
    fn sample() -> ringscan_profiling::CounterSample {
        use ringscan_profiling::{CounterKind, CounterValue};
        let shared = "no PMU exposed (perf_event_open: ENOENT)".to_owned();
        let values = CounterKind::ALL
            .iter()
            .enumerate()
            .map(|(i, &kind)| {
                let i = i as u64;
                match i % 4 {
                    0 | 1 => CounterValue {
                        kind,
                        measured: true,
                        value: Some(1_000 * i + 7),
                        raw: if i.is_multiple_of(4) {
                            500 * i
                        } else {
                            1_000 * i + 7
                        },
                        time_enabled_ns: 2_000 + i,
                        time_running_ns: 1_000 + i,
                        unavailable: None,
                        user_only: i % 4 == 1,
                    },
                    2 => CounterValue::unmeasured(kind, Some(shared.clone())),
                    _ => CounterValue::unmeasured(kind, Some(format!("event {i} not supported"))),
                }
            })
            .collect();
        ringscan_profiling::CounterSample {
            values,
            hardware_unavailable: Some(shared),
        }
    }

    #[test]
    fn a_borrowed_scan_message_writes_what_the_owned_one_does() {
        let request = full_request();
        let owned = serde_json::to_string(&ClientMessage::Scan(request.clone())).unwrap();
        let borrowed = serde_json::to_string(&ScanMessage::Scan(&request)).unwrap();
        assert_eq!(borrowed, owned);
    }

    #[test]
    fn timings_cross_as_an_array_and_still_read_as_an_object() {
        let summary = ScanSummary {
            timings: ScanTimings {
                total_us: 1,
                plan_us: 2,
                io_us: 3,
                decode_us: 4,
                filter_us: 5,
                ring_wait_us: 6,
                wait_us: 7,
            },
            ..ScanSummary::default()
        };
        let wire = serde_json::to_string(&summary).unwrap();
        assert!(wire.contains(r#""timings":[1,2,3,4,5,6,7]"#), "{wire}");
        let back: ScanSummary = serde_json::from_str(&wire).unwrap();
        assert_eq!(back, summary);
        // As a daemon of an earlier build writes them (and without `wait_us`).
        let old = r#"{"version":1,"timings":{"total_us":1,"plan_us":2,"io_us":3,
            "decode_us":4,"filter_us":5,"ring_wait_us":6}}"#;
        let back: ScanSummary = serde_json::from_str(old).unwrap();
        assert_eq!(back.timings.ring_wait_us, 6);
        assert_eq!(back.timings.wait_us, 0);
        // Their own form, for people, stays named.
        let named = serde_json::to_value(&summary.timings).unwrap();
        assert_eq!(named["decode_us"], 4);
    }

    #[test]
    fn counter_samples_cross_in_their_compact_form_and_the_full_one_still_reads() {
        let counters = DaemonCounters {
            scan: Some(sample()),
            ring_blocked_waits: 3,
            ..DaemonCounters::default()
        };
        let wire = serde_json::to_string(&counters).unwrap();
        assert!(wire.contains(r#""sample":["#), "{wire}");
        assert!(!wire.contains("time_enabled_ns"), "{wire}");
        let back: DaemonCounters = serde_json::from_str(&wire).unwrap();
        assert_eq!(back, counters);
        // Without a sample, and with every event measured and no shared reason.
        let none = DaemonCounters::default();
        let back: DaemonCounters =
            serde_json::from_str(&serde_json::to_string(&none).unwrap()).unwrap();
        assert_eq!(back, none);
        let mut all = sample();
        all.hardware_unavailable = None;
        for v in &mut all.values {
            v.measured = true;
            v.value = Some(9);
            v.unavailable = None;
        }
        let counters = DaemonCounters {
            scan: Some(all),
            ..DaemonCounters::default()
        };
        let back: DaemonCounters =
            serde_json::from_str(&serde_json::to_string(&counters).unwrap()).unwrap();
        assert_eq!(back, counters);
        // The object form, as a daemon of an earlier build sends it under `scan`.
        let full = serde_json::json!({
            "scan": serde_json::to_value(sample()).unwrap(),
            "ring_blocked_waits": 3,
        });
        let back: DaemonCounters = serde_json::from_value(full).unwrap();
        assert_eq!(back.scan, Some(sample()));
        assert_eq!(back.ring_blocked_waits, 3);
        let null: DaemonCounters = serde_json::from_str(r#"{"sample":null}"#).unwrap();
        assert_eq!(null.scan, None);
        // Hostile forms: an error each, no panic.
        for bad in [
            r#"{"sample":[null,[[11,1,1,1,1,false]],[]]}"#,
            r#"{"sample":[null,[[255,1,1,1,1,false]],[]]}"#,
            r#"{"sample":[null,[[0,1,1,1,1,false]],[[0,null]]]}"#,
            r#"{"sample":[null,[],[[3,null],[3,null]]]}"#,
            r#"{"sample":[null,[]]}"#,
            r#"{"sample":[null,[],[],[]]}"#,
            r#"{"sample":["x",[[0,-1,1,1,1,false]],[]]}"#,
            r#"{"sample":7}"#,
        ] {
            let got = serde_json::from_str::<DaemonCounters>(bad);
            assert!(got.is_err(), "{bad} read as {got:?}");
        }
    }

    #[test]
    fn messages_round_trip_over_a_unix_socket() {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let request = full_request();
        request.validate().unwrap();
        assert_eq!(
            request.predicate.as_ref().unwrap().columns(),
            ["close", "symbol", "volume", "ts", "a", "b"]
        );
        write_frame(&mut a, &ClientMessage::Scan(request.clone())).unwrap();
        write_frame(&mut a, &ClientMessage::Ping).unwrap();
        let summary = ScanSummary {
            rows_emitted: 42,
            counters: DaemonCounters {
                ring_blocked_waits: 123,
                metadata_cache: Some(CacheStatus {
                    hits: 1,
                    ..CacheStatus::default()
                }),
                ..DaemonCounters::default()
            },
            ..ScanSummary::default()
        };
        write_frame(&mut b, &DaemonMessage::Summary(summary.clone())).unwrap();
        assert_eq!(
            read_frame::<_, DaemonMessage>(&mut a).unwrap(),
            Some(DaemonMessage::Summary(summary))
        );
        drop(a);
        assert_eq!(
            read_frame::<_, ClientMessage>(&mut b).unwrap(),
            Some(ClientMessage::Scan(request))
        );
        assert_eq!(
            read_frame::<_, ClientMessage>(&mut b).unwrap(),
            Some(ClientMessage::Ping)
        );
        assert!(
            read_frame::<_, ClientMessage>(&mut b).unwrap().is_none(),
            "clean EOF"
        );
    }

    #[test]
    fn summary_round_trips_and_old_fields_default() {
        let summary = ScanSummary {
            files_considered: 3,
            timings: ScanTimings {
                total_us: 9,
                ..ScanTimings::default()
            },
            ..ScanSummary::default()
        };
        let mut buf = Vec::new();
        write_frame(&mut buf, &DaemonMessage::Summary(summary.clone())).unwrap();
        let got: DaemonMessage = read_frame(&mut Cursor::new(buf)).unwrap().unwrap();
        assert_eq!(got, DaemonMessage::Summary(summary));
        let minimal: ScanSummary = serde_json::from_str(r#"{"version":1}"#).unwrap();
        assert_eq!(minimal, ScanSummary::default());
    }

    /// A point lookup's summary is mostly zeros: they stay off the wire and read back
    /// as zeros, and an unmeasured event carries its kind and reason only.
    #[test]
    fn zero_counts_stay_off_the_wire() {
        let mut counters =
            ringscan_profiling::Counters::open(ringscan_profiling::CounterScope::Thread);
        let summary = ScanSummary {
            row_groups_considered: 16,
            row_groups_pruned: 15,
            rows_emitted: 1,
            counters: DaemonCounters {
                scan: Some(counters.measure(|| ()).1),
                ..DaemonCounters::default()
            },
            ..ScanSummary::default()
        };
        let text = serde_json::to_string(&summary).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let top = value.as_object().unwrap();
        for (key, v) in top {
            assert!(v.as_u64() != Some(0), "{key} is written as a zero: {text}");
        }
        for key in [
            "row_groups_considered",
            "row_groups_pruned",
            "rows_emitted",
            "version",
        ] {
            assert!(top.contains_key(key), "{key} is missing: {text}");
        }
        // Unmeasured events name their kind alone: the reason is the sample's, said once.
        // (Where no hardware event is counted, as on a VM without a PMU.)
        let sample = &value["counters"]["sample"];
        if sample[0].is_string() {
            for v in sample[2].as_array().unwrap() {
                assert_eq!(v[1], serde_json::Value::Null, "{text}");
            }
        }
        let back: ScanSummary = serde_json::from_str(&text).unwrap();
        assert_eq!(back, summary);
    }

    /// The typed counters read the JSON the daemon wrote as a value (and any record
    /// of it) and write it back the same, keys the host adds included.
    #[test]
    fn daemon_counters_keep_their_json() {
        let written = serde_json::json!({
            "scan": {"values": [{"kind": "task-clock", "measured": true, "value": 5,
                "raw": 5, "time_enabled_ns": 9, "time_running_ns": 9}]},
            "hardware_unavailable": "no PMU exposed (perf_event_open: ENOENT)",
            "ring_blocked_waits": 2,
            "metadata_cache": {"hits": 1, "misses": 2, "evictions": 0, "entries": 3,
                "bytes": 4, "capacity_bytes": 5, "page_index_hits": 6,
                "page_index_misses": 7, "page_indexes": 8},
            "column_cache": {"hits": 1, "misses": 0, "admitted": 0, "evictions": 0,
                "invalidated": 0, "entries": 2, "bytes": 3, "capacity_bytes": 4},
            "scans_counted": 1,
            "executor_unpins": {"count": 0, "bytes": 0},
        });
        let counters: DaemonCounters = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(counters.ring_blocked_waits, 2);
        assert_eq!(counters.metadata_cache.as_ref().unwrap().page_indexes, 8);
        assert_eq!(counters.scan.as_ref().unwrap().values[0].value, Some(5));
        assert_eq!(counters.readable(), written);
        // The wire form reads back the same.
        let wire = serde_json::to_string(&counters).unwrap();
        assert!(
            wire.contains(r#""metadata_cache":[1,2,0,3,4,5,6,7,8]"#),
            "{wire}"
        );
        assert!(
            wire.contains(r#""column_cache":[1,0,0,0,0,2,3,4]"#),
            "{wire}"
        );
        let back: DaemonCounters = serde_json::from_str(&wire).unwrap();
        assert_eq!(back, counters);
        // A summary without counters (an older daemon) reads as none.
        for text in [r#"{"version":1,"counters":null}"#, r#"{"version":1}"#] {
            let none: ScanSummary = serde_json::from_str(text).unwrap();
            assert_eq!(none.counters, DaemonCounters::default(), "{text}");
        }
    }

    #[test]
    fn oversized_frames_are_rejected_before_allocation() {
        let mut frame = (u32::MAX).to_le_bytes().to_vec();
        frame.extend_from_slice(b"{}");
        let err = read_frame::<_, ClientMessage>(&mut Cursor::new(frame)).unwrap_err();
        assert!(matches!(err, MessageError::Oversized { .. }), "{err}");
        let big = ScanRequest {
            projection: Some(vec!["x".repeat(1000); 2000]),
            ..full_request()
        };
        let err = write_frame(&mut Vec::new(), &big).unwrap_err();
        assert!(matches!(err, MessageError::Oversized { .. }), "{err}");
    }

    #[test]
    fn malformed_and_truncated_frames_are_errors() {
        let cases: Vec<Vec<u8>> = vec![
            vec![1, 0],                                                // truncated length
            vec![10, 0, 0, 0, b'{'],                                   // truncated body
            [5u32.to_le_bytes().to_vec(), b"nope!".to_vec()].concat(), // not JSON
            [2u32.to_le_bytes().to_vec(), b"{}".to_vec()].concat(),    // wrong shape
        ];
        for case in cases {
            let r = read_frame::<_, ClientMessage>(&mut Cursor::new(case.clone()));
            assert!(r.is_err(), "{case:?} gave {r:?}");
        }
    }

    /// A reader that hands out at most 7 bytes per read, as a socket may.
    struct Trickle(Cursor<Vec<u8>>);

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(7);
            self.0.read(&mut buf[..n])
        }
    }

    #[test]
    fn bodies_of_every_size_are_read_whole_and_short_ones_are_truncated() {
        // Around the first read's size and past two doublings of it.
        for len in [
            1,
            530,
            BODY_FIRST_READ - 1,
            BODY_FIRST_READ,
            BODY_FIRST_READ + 1,
            300_000,
        ] {
            let request = ScanRequest {
                projection: Some(vec!["c".repeat(len)]),
                ..full_request()
            };
            let mut buf = Vec::new();
            write_frame(&mut buf, &ClientMessage::Scan(request.clone())).unwrap();
            let got: ClientMessage = read_frame(&mut Trickle(Cursor::new(buf.clone())))
                .unwrap()
                .unwrap();
            assert_eq!(got, ClientMessage::Scan(request));
            let body_len = buf.len() - 4;
            for cut in [body_len - 1, body_len / 2, 0] {
                let err = read_frame::<_, ClientMessage>(&mut Trickle(Cursor::new(
                    buf[..4 + cut].to_vec(),
                )))
                .unwrap_err();
                assert!(
                    matches!(
                        err,
                        MessageError::Truncated { read_bytes, len_bytes }
                            if read_bytes == cut && len_bytes == body_len
                    ),
                    "{len} cut at {cut}: {err}"
                );
            }
        }
    }

    #[test]
    fn statistics_requests_round_trip_and_are_bounded() {
        let request = ClientMessage::Statistics {
            source: ScanSource::Table { name: "t".into() },
            columns: vec!["a".into(), "b".into()],
        };
        request.validate().unwrap();
        let mut buf = Vec::new();
        write_frame(&mut buf, &request).unwrap();
        let got: ClientMessage = read_frame(&mut Cursor::new(buf)).unwrap().unwrap();
        assert_eq!(got, request);
        let too_many = ClientMessage::Statistics {
            source: ScanSource::Table { name: "t".into() },
            columns: vec!["a".into(); MAX_STATISTICS_COLUMNS + 1],
        };
        assert!(matches!(too_many.validate(), Err(MessageError::Invalid(_))));
        let no_files = ClientMessage::Statistics {
            source: ScanSource::Files { paths: vec![] },
            columns: vec![],
        };
        assert!(no_files.validate().is_err());
    }

    #[test]
    fn invalid_requests_are_rejected() {
        let mut r = full_request();
        r.version = 99;
        assert!(matches!(
            r.validate(),
            Err(MessageError::UnsupportedVersion { got: 99, .. })
        ));
        let mut r = full_request();
        r.batch_size = 0;
        assert!(r.validate().is_err());
        let mut deep = Predicate::IsNull {
            expr: Operand::Column("x".into()),
            negated: false,
        };
        for _ in 0..MAX_PREDICATE_DEPTH {
            deep = Predicate::Not(Box::new(deep));
        }
        let mut r = full_request();
        r.predicate = Some(deep);
        assert!(r.validate().is_err());
        // Deeply nested JSON is refused by serde_json's recursion limit, not a stack
        // overflow.
        let nested = format!("{}{}", r#"{"not":"#.repeat(10_000), "}".repeat(10_000));
        assert!(serde_json::from_str::<Predicate>(&nested).is_err());
    }
}
