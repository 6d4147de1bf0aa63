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
pub use crate::info::{
    decode_schema, encode_schema, CacheStatus, ColumnCacheStatus, DaemonStatus, FileVersion,
    MemoryStatus, TableInfo,
};

/// Version of the control protocol; bumped on incompatible changes.
pub const PROTOCOL_VERSION: u32 = 1;
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

/// A literal value in a predicate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "snake_case")]
pub enum Literal {
    /// SQL NULL.
    Null,
    /// A boolean.
    Bool(bool),
    /// A signed integer (any width; compared after casting to the column's type).
    Int(i64),
    /// An unsigned integer above `i64::MAX`.
    UInt(u64),
    /// A float.
    Float(f64),
    /// A string.
    Utf8(String),
    /// A date, days since the Unix epoch.
    Date32(i32),
    /// A timestamp, microseconds since the Unix epoch (UTC).
    TimestampMicros(i64),
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CmpOp {
    /// `=`
    Eq,
    /// `<>`
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    LtEq,
    /// `>`
    Gt,
    /// `>=`
    GtEq,
}

impl CmpOp {
    /// The operator as SQL writes it.
    pub fn sql(self) -> &'static str {
        match self {
            Self::Eq => "=",
            Self::NotEq => "<>",
            Self::Lt => "<",
            Self::LtEq => "<=",
            Self::Gt => ">",
            Self::GtEq => ">=",
        }
    }

    /// The operator with its operands swapped: `a < b` is `b > a`.
    pub fn flipped(self) -> Self {
        match self {
            Self::Lt => Self::Gt,
            Self::LtEq => Self::GtEq,
            Self::Gt => Self::Lt,
            Self::GtEq => Self::LtEq,
            Self::Eq | Self::NotEq => self,
        }
    }

    /// Whether `a op b` holds when `a.cmp(b)` is `ordering`.
    pub fn holds(self, ordering: std::cmp::Ordering) -> bool {
        match self {
            Self::Eq => ordering.is_eq(),
            Self::NotEq => ordering.is_ne(),
            Self::Lt => ordering.is_lt(),
            Self::LtEq => ordering.is_le(),
            Self::Gt => ordering.is_gt(),
            Self::GtEq => ordering.is_ge(),
        }
    }
}

/// A leaf operand: a column or a literal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operand {
    /// A column of the table, by name.
    Column(String),
    /// A constant.
    Literal(Literal),
}

/// The predicate tree the daemon uses to prune and filter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Predicate {
    /// `left op right`.
    Compare {
        /// Left operand.
        left: Operand,
        /// Operator.
        op: CmpOp,
        /// Right operand.
        right: Operand,
    },
    /// All of these (an empty list is true).
    And(Vec<Predicate>),
    /// Any of these (an empty list is false).
    Or(Vec<Predicate>),
    /// Negation.
    Not(Box<Predicate>),
    /// `expr [NOT] IN (list)`.
    InList {
        /// The tested operand.
        expr: Operand,
        /// The values.
        list: Vec<Literal>,
        /// `NOT IN`.
        negated: bool,
    },
    /// `expr [NOT] BETWEEN low AND high` (inclusive).
    Between {
        /// The tested operand.
        expr: Operand,
        /// Lower bound.
        low: Literal,
        /// Upper bound.
        high: Literal,
        /// `NOT BETWEEN`.
        negated: bool,
    },
    /// `expr IS [NOT] NULL`.
    IsNull {
        /// The tested operand.
        expr: Operand,
        /// `IS NOT NULL`.
        negated: bool,
    },
}

impl Predicate {
    /// `column op literal`, the shape the daemon can prune with.
    pub fn compare(column: &str, op: CmpOp, value: Literal) -> Self {
        Self::Compare {
            left: Operand::Column(column.to_owned()),
            op,
            right: Operand::Literal(value),
        }
    }

    /// Depth of the tree (a leaf is 1).
    pub fn depth(&self) -> usize {
        match self {
            Self::And(v) | Self::Or(v) => 1 + v.iter().map(Self::depth).max().unwrap_or(0),
            Self::Not(p) => 1 + p.depth(),
            _ => 1,
        }
    }

    /// The column names referenced, in order of first appearance, without duplicates.
    pub fn columns(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.collect_columns(&mut out);
        out
    }

    fn collect_columns<'a>(&'a self, out: &mut Vec<&'a str>) {
        let mut add = |o: &'a Operand| {
            if let Operand::Column(c) = o {
                if !out.contains(&c.as_str()) {
                    out.push(c);
                }
            }
        };
        match self {
            Self::Compare { left, right, .. } => {
                add(left);
                add(right);
            }
            Self::InList { expr, .. } | Self::Between { expr, .. } | Self::IsNull { expr, .. } => {
                add(expr)
            }
            Self::And(v) | Self::Or(v) => v.iter().for_each(|p| p.collect_columns(out)),
            Self::Not(p) => p.collect_columns(out),
        }
    }

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
}

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
        }
    }

    /// Checks the version and bounds (what the daemon does before acting on a request).
    pub fn validate(&self) -> Result<(), MessageError> {
        check_version(self.version)?;
        if self.batch_size == 0 || self.batch_size > Self::MAX_BATCH_SIZE {
            return Err(MessageError::Invalid(format!(
                "batch size {} outside 1..={}",
                self.batch_size,
                Self::MAX_BATCH_SIZE
            )));
        }
        crate::RingOptions::new(self.ring_capacity_bytes)
            .validate()
            .map_err(|e| MessageError::Invalid(e.to_string()))?;
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

/// Time spent in the daemon's stages of one scan, in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ScanTimings {
    /// Whole scan, request to end of stream.
    pub total_us: u64,
    /// Listing files, reading footers, pruning.
    pub plan_us: u64,
    /// Waiting for reads.
    pub io_us: u64,
    /// Decompressing and decoding.
    pub decode_us: u64,
    /// Evaluating the predicate on decoded rows.
    pub filter_us: u64,
    /// Blocked on a full ring (back-pressure from the executor).
    pub ring_wait_us: u64,
    /// The scan's coordinator waiting for the next row group to be decoded.
    #[serde(default)]
    pub wait_us: u64,
}

/// What the daemon did for one scan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScanSummary {
    /// Protocol version ([`PROTOCOL_VERSION`]).
    pub version: u32,
    /// Files matching the source.
    #[serde(default)]
    pub files_considered: u64,
    /// Files skipped by partition values or statistics.
    #[serde(default)]
    pub files_pruned: u64,
    /// Row groups in the remaining files.
    #[serde(default)]
    pub row_groups_considered: u64,
    /// Row groups skipped by statistics or bloom filters.
    #[serde(default)]
    pub row_groups_pruned: u64,
    /// Pages skipped thanks to the page index.
    #[serde(default)]
    pub pages_skipped: u64,
    /// Files skipped by their hive partition values (part of `files_pruned`).
    #[serde(default)]
    pub files_pruned_by_partition: u64,
    /// Row groups skipped by column-chunk statistics (part of `row_groups_pruned`).
    #[serde(default)]
    pub row_groups_pruned_by_stats: u64,
    /// Row groups skipped by bloom filters (part of `row_groups_pruned`).
    #[serde(default)]
    pub row_groups_pruned_by_bloom: u64,
    /// Row groups none of whose pages survived the page index (part of
    /// `row_groups_pruned`).
    #[serde(default)]
    pub row_groups_pruned_by_page_index: u64,
    /// Row groups skipped by the scan's dynamic filter (part of `row_groups_pruned`).
    #[serde(default)]
    pub row_groups_pruned_by_dynamic_filter: u64,
    /// Pages of the predicate's columns that the page index covered.
    #[serde(default)]
    pub pages_considered: u64,
    /// Row groups whose non-predicate columns were decoded only for passing rows.
    #[serde(default)]
    pub row_groups_late_materialized: u64,
    /// Reads (one row group's columns for one phase of a task) served decoded from the
    /// daemon's column cache: no IO, no decompression, no decoding.
    #[serde(default)]
    pub column_cache_hits: u64,
    /// Row groups of an unfiltered scan skipped whole by the request's offset (never
    /// read); also counted in `row_groups_pruned`.
    #[serde(default)]
    pub row_groups_skipped_by_offset: u64,
    /// Rows the offset skipped (never sent through the ring).
    #[serde(default)]
    pub rows_skipped_by_offset: u64,
    /// Bytes read from storage.
    #[serde(default)]
    pub bytes_read: u64,
    /// Of `bytes_read`, page index bytes (column and offset indexes).
    #[serde(default)]
    pub page_index_bytes_read: u64,
    /// Column indexes (one per row group and predicate column) read and decoded.
    #[serde(default)]
    pub column_indexes_loaded: u64,
    /// Offset indexes (one per row group and read column) read and decoded.
    #[serde(default)]
    pub offset_indexes_loaded: u64,
    /// Page indexes (either kind, per row group and column) served by the daemon's
    /// metadata cache.
    #[serde(default)]
    pub page_index_cache_hits: u64,
    /// Rows decoded.
    #[serde(default)]
    pub rows_decoded: u64,
    /// Rows sent through the ring.
    #[serde(default)]
    pub rows_emitted: u64,
    /// Stage timings.
    #[serde(default)]
    pub timings: ScanTimings,
    /// The daemon's counters (perf events, cache hits...), as recorded by `profiling`.
    #[serde(default)]
    pub counters: serde_json::Value,
}

impl Default for ScanSummary {
    fn default() -> Self {
        Self {
            version: PROTOCOL_VERSION,
            files_considered: 0,
            files_pruned: 0,
            row_groups_considered: 0,
            row_groups_pruned: 0,
            pages_skipped: 0,
            files_pruned_by_partition: 0,
            row_groups_pruned_by_stats: 0,
            row_groups_pruned_by_bloom: 0,
            row_groups_pruned_by_page_index: 0,
            row_groups_pruned_by_dynamic_filter: 0,
            pages_considered: 0,
            row_groups_late_materialized: 0,
            column_cache_hits: 0,
            row_groups_skipped_by_offset: 0,
            rows_skipped_by_offset: 0,
            bytes_read: 0,
            page_index_bytes_read: 0,
            column_indexes_loaded: 0,
            offset_indexes_loaded: 0,
            page_index_cache_hits: 0,
            rows_decoded: 0,
            rows_emitted: 0,
            timings: ScanTimings::default(),
            counters: serde_json::Value::Null,
        }
    }
}

impl ScanSummary {
    /// Checks the version.
    pub fn validate(&self) -> Result<(), MessageError> {
        check_version(self.version)
    }

    /// Adds another scan's whole summary to this one: planning counts (files, row
    /// groups, what pruned them) and work alike. For totals over separate scans.
    pub fn absorb(&mut self, other: &ScanSummary) {
        self.files_considered += other.files_considered;
        self.files_pruned += other.files_pruned;
        self.files_pruned_by_partition += other.files_pruned_by_partition;
        self.row_groups_considered += other.row_groups_considered;
        self.row_groups_pruned += other.row_groups_pruned;
        self.row_groups_pruned_by_stats += other.row_groups_pruned_by_stats;
        self.row_groups_pruned_by_bloom += other.row_groups_pruned_by_bloom;
        self.row_groups_pruned_by_page_index += other.row_groups_pruned_by_page_index;
        self.row_groups_pruned_by_dynamic_filter += other.row_groups_pruned_by_dynamic_filter;
        self.row_groups_skipped_by_offset += other.row_groups_skipped_by_offset;
        self.absorb_work(other);
    }

    /// Adds the work of `earlier`, a scan that ran before this one for the same query
    /// (a top-k's first pass over its sort key): bytes, pages, rows and times are
    /// summed; what the source is (files and row groups considered, and what pruning
    /// made of them) stays this scan's.
    pub fn absorb_work(&mut self, earlier: &ScanSummary) {
        self.pages_considered += earlier.pages_considered;
        self.pages_skipped += earlier.pages_skipped;
        self.row_groups_late_materialized += earlier.row_groups_late_materialized;
        self.column_cache_hits += earlier.column_cache_hits;
        self.rows_skipped_by_offset += earlier.rows_skipped_by_offset;
        self.bytes_read += earlier.bytes_read;
        self.page_index_bytes_read += earlier.page_index_bytes_read;
        self.column_indexes_loaded += earlier.column_indexes_loaded;
        self.offset_indexes_loaded += earlier.offset_indexes_loaded;
        self.page_index_cache_hits += earlier.page_index_cache_hits;
        self.rows_decoded += earlier.rows_decoded;
        self.rows_emitted += earlier.rows_emitted;
        let (t, e) = (&mut self.timings, &earlier.timings);
        t.total_us += e.total_us;
        t.plan_us += e.plan_us;
        t.io_us += e.io_us;
        t.decode_us += e.decode_us;
        t.filter_us += e.filter_us;
        t.ring_wait_us += e.ring_wait_us;
        t.wait_us += e.wait_us;
    }
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
}

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
    /// Answer to [`ClientMessage::Stop`]: the daemon is exiting.
    Stopping,
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
    let mut body = Vec::new();
    let read_bytes = reader.take(len_bytes as u64).read_to_end(&mut body)?;
    if read_bytes != len_bytes {
        return Err(MessageError::Truncated {
            read_bytes,
            len_bytes,
        });
    }
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
            counters: serde_json::json!({"cycles": 123, "cache": {"hits": 1}}),
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
        let mut r = full_request();
        r.ring_capacity_bytes = 1000;
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
