//! [`Daemon`]: the engine's shared handle on the IO daemon of one data directory, and
//! what it remembers about each table ([`TableEntry`]).
//!
//! Requests (describe, statistics) go over one control connection behind a mutex; each
//! scan runs on a connection and ring of its own ([`DaemonClient::scan`]), so several
//! scans of one query (both sides of a join) stream at once.
//!
//! A table's entry is its schema and data version (every file and directory with its
//! size and mtime, as the daemon listed them). Before a query uses an entry, the files
//! are stat-ed again: a rewritten, added or removed file makes the entry stale and the
//! table is described anew, so neither a plan nor a cached result outlives its data.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use arrow_array::ArrayRef;
use arrow_schema::SchemaRef;
use ringscan_ipc::client::{ClientError, DaemonClient, ScanStream};
use ringscan_ipc::msg::{FileVersion, ScanRequest, ScanSource, TableInfo, TableStatistics};
use ringscan_ipc::watch::{table_paths, WatchToken};

use crate::result_cache::DataVersion;

/// Most tables whose entries are remembered (the map is cleared when full).
const TABLES_MAX: usize = 4096;

/// The engine's handle on one data directory's daemon.
#[derive(Debug)]
pub(crate) struct Daemon {
    data_dir: PathBuf,
    client: Mutex<DaemonClient>,
    tables: Mutex<HashMap<ScanSource, Arc<TableEntry>>>,
    /// The connection writes go on, kept between them.
    writer: Mutex<ringscan_ipc::client::WriteConnection>,
}

/// A table as the daemon described it.
#[derive(Debug)]
pub(crate) struct TableEntry {
    pub(crate) source: ScanSource,
    pub(crate) schema: SchemaRef,
    pub(crate) info: TableInfo,
    /// Every column's footer statistics, asked for once per entry (data version).
    statistics: OnceLock<Option<TableStatistics>>,
    /// Their minimums and maximums decoded (each column's pair as an array), once.
    min_max: OnceLock<Option<Vec<ArrayRef>>>,
    /// Where the watches of its files stood when they last stat-ed the same.
    watched: Mutex<Option<WatchToken>>,
}

impl TableEntry {
    /// The data version as recorded: every file and directory with its size and mtime.
    pub(crate) fn version(&self) -> DataVersion {
        self.info
            .files
            .iter()
            .chain(&self.info.dirs)
            .map(|v| {
                let identity = (v.device, v.inode, v.changed_ns);
                (v.path.clone(), v.size_bytes, v.modified_ns, identity)
            })
            .collect()
    }

    /// Whether every recorded file and directory still stats the same: a file rewritten,
    /// added or removed (which moves its directory's mtime) makes it false.
    ///
    /// While the inotify watches of the files and their directories saw no change since
    /// they last stat-ed the same, that is the answer, without stat-ing (a point lookup
    /// stat-ed its table's files before every query: 6% of the host's CPU).
    pub(crate) fn still_current(&self, data_dir: &Path) -> bool {
        let Some(watch) = ringscan_ipc::watch::shared() else {
            return self.stats_current(data_dir);
        };
        let lock = || self.watched.lock().unwrap_or_else(PoisonError::into_inner);
        if lock().as_ref().is_some_and(|token| watch.unchanged(token)) {
            return true;
        }
        // The token is taken before the stat: a change racing the stat makes it stale.
        let paths = table_paths(data_dir, self.info.files.iter().chain(&self.info.dirs));
        let token = watch.token(paths.iter().map(PathBuf::as_path));
        let current = self.stats_current(data_dir);
        *lock() = token.filter(|_| current);
        current
    }

    fn stats_current(&self, data_dir: &Path) -> bool {
        self.info
            .files
            .iter()
            .chain(&self.info.dirs)
            .all(|recorded| stat_version(data_dir, recorded).as_ref() == Some(recorded))
    }
}

impl Daemon {
    pub(crate) fn new(data_dir: &Path, client: DaemonClient) -> Self {
        Self {
            data_dir: data_dir.to_path_buf(),
            writer: Mutex::new(ringscan_ipc::client::WriteConnection::new(client.path())),
            client: Mutex::new(client),
            tables: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The root's table names, as the daemon lists them (for an object-storage root
    /// the data is not in `data_dir`).
    pub(crate) fn table_names(&self) -> Result<Vec<String>, ClientError> {
        self.client().list_tables()
    }

    fn client(&self) -> std::sync::MutexGuard<'_, DaemonClient> {
        self.client.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current entry of `source`: the remembered one while its files stat the same,
    /// else a new description from the daemon.
    pub(crate) fn table(&self, source: &ScanSource) -> Result<Arc<TableEntry>, ClientError> {
        let known = self
            .tables
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(source)
            .cloned();
        if let Some(entry) = known {
            if entry.still_current(&self.data_dir) {
                return Ok(entry);
            }
        }
        let info = self.client().describe(source)?;
        let schema = info.schema().map_err(|e| ClientError::Daemon {
            message: format!(
                "the daemon sent an unreadable schema for {}: {e}",
                source_label(source)
            ),
        })?;
        // The files' key-value metadata (the generator's seed, row totals...) is not the
        // table's: two tables' would clash where a plan unions or joins them.
        let schema = schema.with_metadata(Default::default());
        let entry = Arc::new(TableEntry {
            source: source.clone(),
            schema: Arc::new(schema),
            info,
            statistics: OnceLock::new(),
            min_max: OnceLock::new(),
            watched: Mutex::new(None),
        });
        let mut tables = self.tables.lock().unwrap_or_else(PoisonError::into_inner);
        if tables.len() >= TABLES_MAX {
            tables.clear();
        }
        tables.insert(source.clone(), Arc::clone(&entry));
        Ok(entry)
    }

    /// Every column's footer statistics of `entry`, when the daemon answers for the
    /// same data version (`None`: unknown, plan without them).
    pub(crate) fn statistics<'e>(&self, entry: &'e TableEntry) -> Option<&'e TableStatistics> {
        entry
            .statistics
            .get_or_init(|| {
                let columns: Vec<String> = entry
                    .schema
                    .fields()
                    .iter()
                    .take(ringscan_ipc::msg::MAX_STATISTICS_COLUMNS)
                    .map(|f| f.name().clone())
                    .collect();
                let stats = self.client().statistics(&entry.source, &columns).ok()?;
                (stats.files == entry.info.files && stats.dirs == entry.info.dirs).then_some(stats)
            })
            .as_ref()
    }

    /// The minimums and maximums of [`Self::statistics`], decoded once per entry:
    /// each column's pair as an array, in the statistics' column order.
    pub(crate) fn min_max<'e>(&self, entry: &'e TableEntry) -> Option<&'e [ArrayRef]> {
        entry
            .min_max
            .get_or_init(|| self.statistics(entry)?.min_max().ok())
            .as_deref()
    }

    /// Sends a write to the daemon and waits until it is durable; the rows written.
    /// The daemon's refusal (a duplicate key, a NULL in a `NOT NULL` column...) comes
    /// back in its own words.
    pub(crate) fn write(
        &self,
        message: &ringscan_ipc::msg::ClientMessage,
        payload: &[u8],
    ) -> datafusion::common::Result<u64> {
        // A table made, dropped or emptied: what is remembered of it is stale (rows
        // inserted change its data version, which a use checks anyway).
        self.tables
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|source, _| !writes(message, source));
        self.writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .write(message, payload, super::write::WRITE_TIMEOUT)
            .map_err(write_error)
    }

    /// Writes `batches` into table `name` as one statement (one Arrow IPC stream, all
    /// durable or none); the rows written.
    pub(crate) fn insert(
        &self,
        name: &str,
        batches: &[arrow_array::RecordBatch],
    ) -> datafusion::common::Result<u64> {
        let Some(first) = batches.first() else {
            return Ok(0);
        };
        let payload = ringscan_ipc::msg::encode_ipc_stream(first.schema_ref(), batches)?;
        let message = ringscan_ipc::msg::ClientMessage::Insert {
            table: name.to_owned(),
            bytes: payload.len() as u64,
        };
        self.write(&message, &payload)
    }

    /// Sends `batches` as part `part` of the large statement `statement` into table
    /// `name`: the daemon checks them and writes them ahead, not yet visible (see
    /// [`super::BulkInsert`]). Its answer comes with the next write: a refused part
    /// fails that one.
    pub(crate) fn stage(
        &self,
        name: &str,
        (statement, part): (u64, u64),
        batches: &[arrow_array::RecordBatch],
    ) -> datafusion::common::Result<()> {
        let payload = match batches.first() {
            Some(first) => ringscan_ipc::msg::encode_ipc_stream(first.schema_ref(), batches)?,
            None => Vec::new(),
        };
        let message = ringscan_ipc::msg::ClientMessage::Stage {
            table: name.to_owned(),
            statement,
            part,
            bytes: payload.len() as u64,
        };
        // Not waiting for the daemon to write it: the caller parses the next part
        // meanwhile, and the next write (a part, the commit) collects this answer.
        self.writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .send(&message, &payload, super::write::WRITE_TIMEOUT)
            .map_err(write_error)
    }

    /// Commits the large statement `statement` of `parts` staged parts: all of its rows
    /// visible at once, or none. Its rows.
    pub(crate) fn adopt(
        &self,
        name: &str,
        (statement, parts): (u64, u64),
    ) -> datafusion::common::Result<u64> {
        let message = ringscan_ipc::msg::ClientMessage::Adopt {
            table: name.to_owned(),
            statement,
            parts,
        };
        self.write(&message, &[])
    }

    /// Drops the staged parts of this session's large statement.
    pub(crate) fn discard(&self) -> datafusion::common::Result<u64> {
        self.write(&ringscan_ipc::msg::ClientMessage::Discard, &[])
    }

    /// Starts a scan on a connection and ring of its own.
    pub(crate) fn scan(&self, request: &ScanRequest) -> Result<ScanStream, ClientError> {
        self.client().scan(request)
    }
}

/// A write's failure as DataFusion's error: the daemon's refusal in its own words.
fn write_error(e: ClientError) -> datafusion::common::DataFusionError {
    match e {
        ClientError::Daemon { message } => datafusion::common::DataFusionError::Execution(message),
        other => datafusion::common::DataFusionError::External(Box::new(other)),
    }
}

/// Whether `message` writes the table `source`.
fn writes(message: &ringscan_ipc::msg::ClientMessage, source: &ScanSource) -> bool {
    use ringscan_ipc::msg::ClientMessage as M;
    let ScanSource::Table { name } = source else {
        return false;
    };
    match message {
        M::CreateTable { name: n, .. } | M::DropTable { name: n, .. } | M::Truncate { name: n } => {
            n == name
        }
        _ => false,
    }
}

/// The table or path as a user named it.
pub(crate) fn source_label(source: &ScanSource) -> String {
    match source {
        ScanSource::Table { name } => name.clone(),
        ScanSource::Files { paths } => paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// `recorded`'s file as it stats now.
fn stat_version(data_dir: &Path, recorded: &FileVersion) -> Option<FileVersion> {
    let meta = std::fs::metadata(data_dir.join(&recorded.path)).ok()?;
    Some(FileVersion::from_metadata(recorded.path.clone(), &meta))
}
