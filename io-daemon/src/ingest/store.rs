//! The tables the daemon writes: created by `CREATE TABLE`, filled by `INSERT` and
//! `COPY`, read by every scan at once.
//!
//! A write goes: rows checked against the table (types, `NOT NULL`) on the connection's
//! thread → the write-ahead log's writer thread checks the primary key and appends the
//! record, one `fdatasync` for every commit waiting → the rows join the table's
//! memtable → the client is answered. A scan takes a snapshot of the table (its
//! manifest's files and its memtable) under one lock, so that a flush moving rows from
//! the memtable into a file is seen entirely or not at all.
//!
//! A flush writes a table's memtable as one Parquet file sorted by the primary key
//! (statistics, page index, a bloom filter on the key), syncs it, commits it by the
//! manifest ([`Manifest::store`]), then drops those rows from the memtable; once no
//! memtable needs the oldest log segments, they are removed.
//!
//! The tables' data version: scans' clients cache results while every file of a table
//! stats the same. Rows in memory change no file, so every change to a memtable also
//! grows `<data>/.ringscan/ingest.version` by one byte (a sparse extension: it needs
//! no disk space), under the same lock the change takes; a table's version names that
//! file too.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::{self, File};
use std::hash::BuildHasher;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arrow_array::{Array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_buffer::Buffer;
use arrow_row::{RowConverter, Rows, SortField};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::SortingColumn;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use ringscan_ipc::msg::{CmpOp, FileVersion, Literal, Operand, Predicate};

use super::file::{FsDir, LogDir};
use super::file_keys::{self, FileKeys};
use super::key_index::KeyIndex;
use super::manifest::{sync_dir, Manifest, ManifestFile, MANIFEST_FILE};
use super::memtable::Memtable;
use super::wal::{Committer, Lsn, Wal};
use crate::hive::PartitionTypes;
use crate::table::{Listing, ResolvedTable};

mod merge;
mod row_groups;
mod staged;
pub use staged::Staged;

/// When a table's memtable is written to Parquet.
#[derive(Debug, Clone)]
pub struct IngestConfig {
    /// A memtable holding this many bytes is flushed.
    pub flush_bytes: u64,
    /// A memtable whose oldest rows are this old is flushed.
    pub flush_age: Duration,
}

impl Default for IngestConfig {
    fn default() -> Self {
        Self {
            flush_bytes: 64 << 20,
            flush_age: Duration::from_secs(60),
        }
    }
}

/// Rows of a data file per row group, and per page: small enough that a point lookup
/// on the key reads one page.
const ROW_GROUP_ROWS: usize = 64 * 1024;
const PAGE_ROWS: usize = 2048;

/// The daemon's written tables and their log.
#[derive(Debug)]
pub struct Ingest {
    tables: Arc<Tables>,
    wal: Wal<Writer>,
    flushing: Mutex<()>,
    config: IngestConfig,
    /// Files a compaction replaced, removed once no scan can still be about to open
    /// them (a scan's snapshot names its files before it opens them).
    retired: Mutex<Vec<(Instant, PathBuf)>>,
}

/// Files smaller than this are compacted together...
const COMPACT_FILE_BYTES: u64 = 64 << 20;
/// ...once a table has this many of them.
const COMPACT_MIN_FILES: usize = 8;
/// A compaction reads at most this much.
const COMPACT_MAX_BYTES: u64 = 512 << 20;
/// How long a replaced file stays after the manifest stopped naming it.
const RETIRE_AFTER: Duration = Duration::from_secs(60);

/// What recovery found.
#[derive(Debug, Clone, Default)]
pub struct Recovered {
    /// Tables with a manifest.
    pub tables: usize,
    /// Log records replayed into memtables.
    pub records: u64,
    /// Rows those records held.
    pub rows: u64,
    /// Files of flushes that never committed, removed.
    pub orphans_removed: usize,
    /// The log's torn tail, cut off: what and where.
    pub torn_tail: Option<String>,
}

#[derive(Debug)]
struct Tables {
    data_dir: PathBuf,
    map: RwLock<HashMap<String, Arc<Table>>>,
    /// The last log position applied to a memtable (commits apply in log order).
    applied_lsn: AtomicU64,
    version: Version,
}

/// A table the daemon writes.
#[derive(Debug)]
pub(crate) struct Table {
    name: String,
    id: u64,
    dir: PathBuf,
    schema: SchemaRef,
    /// The primary key's column indexes.
    key: Vec<usize>,
    /// Encodes the key's columns into comparable bytes (made once: making one per
    /// commit was a visible part of a single-row insert's cost).
    converter: Option<RowConverter>,
    /// Hashes an encoded key to its fingerprint in [`TableState::keys`] (seeded per
    /// process; foldhash: SipHash was a third of a large COPY's daemon time).
    key_hasher: foldhash::quality::RandomState,
    /// The bits of a hash a fingerprint keeps: all of them, but for tests that make
    /// keys share fingerprints to reach the exact check (Relaxed: read alone, and set
    /// before the keys it bears on are hashed).
    fingerprint_mask: AtomicU64,
    state: RwLock<TableState>,
}

#[derive(Debug)]
struct TableState {
    manifest: Manifest,
    /// Rows not yet in a file.
    mem: Memtable,
    /// The keys of the memtable's rows and of the commits being written, by
    /// fingerprint, with the row's id. A flush moves its rows' keys out, into the new
    /// file's [`FileKeys`].
    keys: KeyIndex,
    /// The rows of the commits prepared and not yet applied, with the id of each one's
    /// first row, oldest first: a key of the index is checked against its row here
    /// until the memtable has it.
    pending: VecDeque<(u64, Vec<RecordBatch>)>,
    /// The keys of the manifest's files, in brief, by file name.
    file_keys: HashMap<String, Arc<FileKeys>>,
    /// Grows by one with each file added to the table: a statement whose keys were
    /// checked against the files of an older generation is checked again, in the log's
    /// writer, against the files flushed since.
    file_gen: u64,
    /// The id the next prepared commit's first row gets.
    next_id: u64,
    dropped: bool,
    /// Commits abandoned so far: their ids are handed back, so a row id no longer tells
    /// whether its commit came before or after a given moment (see `staged`).
    abandoned: u64,
}

/// The row with id `id`, in the memtable or in a commit prepared and not yet applied
/// (see [`TableState::pending`]).
fn held_row(
    mem: &Memtable,
    pending: &VecDeque<(u64, Vec<RecordBatch>)>,
    id: u64,
) -> Option<RecordBatch> {
    if let Some(row) = mem.row(id) {
        return Some(row);
    }
    let at = pending.partition_point(|(first, _)| *first <= id);
    let (first, batches) = pending.get(at.checked_sub(1)?)?;
    row_at(*first, batches, id)
}

/// The row with id `id` of `batches`, whose first row's id is `first`.
fn row_at(first: u64, batches: &[RecordBatch], id: u64) -> Option<RecordBatch> {
    let mut offset = usize::try_from(id.checked_sub(first)?).ok()?;
    for batch in batches {
        if offset < batch.num_rows() {
            return Some(batch.slice(offset, 1));
        }
        offset -= batch.num_rows();
    }
    None
}

/// A statement's primary keys, in row order: encoded (one [`Rows`] per batch) and
/// their fingerprints.
#[derive(Debug, Default)]
struct StatementKeys {
    rows: Vec<Rows>,
    /// The row count of the batches up to and including each one.
    ends: Vec<usize>,
    fingerprints: Vec<u64>,
}

impl StatementKeys {
    fn len(&self) -> usize {
        self.fingerprints.len()
    }

    /// (batch, row) of the statement's `i`th row.
    fn at(&self, i: usize) -> (usize, usize) {
        let b = self.ends.partition_point(|&end| end <= i);
        (b, i - b.checked_sub(1).map_or(0, |p| self.ends[p]))
    }

    /// The `i`th row's encoded key.
    fn key(&self, i: usize) -> &[u8] {
        let (b, r) = self.at(i);
        self.rows[b].row(r).data()
    }

    /// Every encoded key, in row order.
    fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.rows
            .iter()
            .flat_map(|rows| rows.iter().map(|row| row.data()))
    }
}

/// Whether a float column's first values (up to 64Ki) take at most half as many
/// distinct values as rows: then a dictionary is smaller than the values and its
/// pages can be filtered by their dictionary. Near-unique floats make big dictionaries
/// that every read pays for.
fn floats_repeat(column: &dyn Array) -> bool {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float32Type, Float64Type};
    let bits: Vec<u64> = match column.data_type() {
        DataType::Float64 => column
            .as_primitive::<Float64Type>()
            .values()
            .iter()
            .take(1 << 16)
            .map(|v| v.to_bits())
            .collect(),
        DataType::Float32 => column
            .as_primitive::<Float32Type>()
            .values()
            .iter()
            .take(1 << 16)
            .map(|v| u64::from(v.to_bits()))
            .collect(),
        _ => return false,
    };
    let distinct: HashSet<u64, foldhash::fast::RandomState> = bits.iter().copied().collect();
    bits.len() >= 64 && distinct.len() * 2 <= bits.len()
}

/// Whether a float column holds no NaN (`None`: not a float column).
fn no_nan(column: &dyn Array) -> Option<bool> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float32Type, Float64Type};
    match column.data_type() {
        DataType::Float64 => Some(
            !column
                .as_primitive::<Float64Type>()
                .iter()
                .flatten()
                .any(f64::is_nan),
        ),
        DataType::Float32 => Some(
            !column
                .as_primitive::<Float32Type>()
                .iter()
                .flatten()
                .any(f32::is_nan),
        ),
        _ => None,
    }
}

/// One statement's rows on their way through the log.
#[derive(Debug)]
pub struct Commit {
    table: Arc<Table>,
    batches: Vec<RecordBatch>,
    /// Their primary keys.
    keys: StatementKeys,
    /// Its log record (the rows' arrays may be slices of it).
    payload: Buffer,
    /// The id its first row gets (set when its keys are checked).
    first_id: u64,
    /// The table's file generation its keys were checked against.
    file_gen: u64,
}

/// A record's bytes for the log, shared with the rows' arrays.
#[derive(Debug)]
struct LogBytes(Buffer);

impl AsRef<[u8]> for LogBytes {
    fn as_ref(&self) -> &[u8] {
        self.0.as_slice()
    }
}

/// The log's committer: keys checked in log order, rows applied after the sync.
#[derive(Debug)]
struct Writer {
    tables: Arc<Tables>,
}

/// A snapshot of a table for one scan.
#[derive(Debug)]
pub struct Snapshot {
    /// Its files and schema, as a table listed from the directory would be.
    pub table: ResolvedTable,
    /// Its rows in memory.
    pub rows: Vec<RecordBatch>,
}

fn lock_read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn lock_write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

impl Ingest {
    /// Opens the written tables of `data_dir` (those with a manifest) and the log under
    /// `state_dir/wal`, replaying into memtables what the manifests do not cover.
    pub fn open(
        data_dir: &Path,
        state_dir: &Path,
        config: IngestConfig,
    ) -> Result<(Self, Recovered), String> {
        let wal_dir = state_dir.join("wal");
        fs::create_dir_all(&wal_dir).map_err(|e| {
            format!(
                "{}: cannot create the log directory: {e}",
                wal_dir.display()
            )
        })?;
        let log_dir: Arc<dyn LogDir> = Arc::new(FsDir::new(&wal_dir));
        Self::open_with(data_dir, state_dir, log_dir, config)
    }

    /// [`Self::open`] with the log in `log_dir` (tests wrap it).
    pub fn open_with(
        data_dir: &Path,
        state_dir: &Path,
        log_dir: Arc<dyn LogDir>,
        config: IngestConfig,
    ) -> Result<(Self, Recovered), String> {
        let mut recovered = Recovered::default();
        let mut map = HashMap::new();
        let entries = fs::read_dir(data_dir).map_err(|e| {
            format!(
                "{}: cannot list the data directory: {e}",
                data_dir.display()
            )
        })?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let dir = entry.path();
            let Some(manifest) = Manifest::load(&dir).map_err(|e| e.to_string())? else {
                continue;
            };
            recovered.orphans_removed += remove_orphans(&dir, &manifest);
            let table = Table::open(name.clone(), dir, manifest)?;
            map.insert(name, Arc::new(table));
        }
        recovered.tables = map.len();
        let version = Version::create(&state_dir.join("ingest.version"))?;
        let tables = Arc::new(Tables {
            data_dir: data_dir.to_path_buf(),
            map: RwLock::new(map),
            applied_lsn: AtomicU64::new(0),
            version,
        });
        let writer = Writer {
            tables: Arc::clone(&tables),
        };
        let replay_tables = Arc::clone(&tables);
        let (mut records, mut rows) = (0u64, 0u64);
        // Every record up to the newest manifest's position is in files: a log found
        // empty (removed by hand) starts after it.
        let floor = lock_read(&tables.map)
            .values()
            .map(|t| lock_read(&t.state).manifest.flushed_lsn)
            .max()
            .unwrap_or(0);
        let (wal, recovery) = Wal::open_after(
            log_dir,
            writer,
            |lsn, payload| {
                replay_tables.applied_lsn.store(lsn, Ordering::Release);
                let record = Record::decode(payload)?;
                let map = lock_read(&replay_tables.map);
                let Some(table) = map.get(&record.table).filter(|t| t.id == record.id) else {
                    // A table dropped (or dropped and made anew) since.
                    return Ok(());
                };
                let mut state = lock_write(&table.state);
                if lsn <= state.manifest.flushed_lsn {
                    return Ok(());
                }
                let batches = table
                    .conform(record.rows)
                    .map_err(|e| format!("log record {lsn} for table {}: {e}", table.name))?;
                let keys = table.keys_of(&batches)?;
                records += 1;
                rows += batches.iter().map(|b| b.num_rows() as u64).sum::<u64>();
                let first = state.mem.next_row();
                state.keys.reserve(keys.len());
                for (i, &fingerprint) in keys.fingerprints.iter().enumerate() {
                    state.keys.insert(fingerprint, first + i as u64);
                }
                state.mem.append(lsn, batches);
                Ok(())
            },
            floor,
        )
        .map_err(|e| e.to_string())?;
        recovered.torn_tail = recovery.torn_tail.map(|t| {
            format!(
                "{} bytes of {} from offset {} ({})",
                recovery.bytes_truncated, t.segment, t.offset, t.reason
            )
        });
        recovered.records = records;
        recovered.rows = rows;
        let ingest = Self {
            tables,
            wal,
            flushing: Mutex::new(()),
            config,
            retired: Mutex::new(Vec::new()),
        };
        Ok((ingest, recovered))
    }

    /// The written table `name`, if it is one.
    pub(crate) fn table(&self, name: &str) -> Option<Arc<Table>> {
        lock_read(&self.tables.map).get(name).cloned()
    }

    /// Creates table `name`; `Ok(false)` when it exists and `if_not_exists`.
    pub fn create_table(
        &self,
        name: &str,
        schema: &Schema,
        primary_key: &[String],
        if_not_exists: bool,
    ) -> Result<bool, String> {
        check_name(name)?;
        check_schema(schema, primary_key)?;
        let mut map = lock_write(&self.tables.map);
        let dir = self.tables.data_dir.join(name);
        if map.contains_key(name) || dir.exists() {
            if if_not_exists {
                return Ok(false);
            }
            return Err(if map.contains_key(name) {
                format!("relation \"{name}\" already exists")
            } else {
                format!(
                    "relation \"{name}\" already exists (a directory of the data directory, \
                     not written by ringscan)"
                )
            });
        }
        // The id only has to differ from every table's whose records the log may still
        // hold: the clock in nanoseconds, past the largest id known.
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let id = map.values().map(|t| t.id + 1).max().unwrap_or(0).max(now);
        let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        for field in &mut fields {
            if primary_key.iter().any(|k| k == field.name()) {
                *field = field.clone().with_nullable(false);
            }
        }
        let schema = Schema::new(fields);
        let manifest = Manifest::new(id, &schema, primary_key.to_vec())?;
        fs::create_dir(&dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
        let stored = manifest
            .store(&dir)
            .map_err(|e| e.to_string())
            .and_then(|()| sync_dir(&self.tables.data_dir).map_err(|e| e.to_string()));
        if let Err(e) = stored {
            let _ = fs::remove_dir_all(&dir);
            return Err(e);
        }
        let table = Table::open(name.to_owned(), dir, manifest)?;
        map.insert(name.to_owned(), Arc::new(table));
        self.tables.version.bump();
        Ok(true)
    }

    /// Drops table `name` (its files too); `Ok(false)` when there is none and
    /// `if_exists`.
    pub fn drop_table(&self, name: &str, if_exists: bool) -> Result<bool, String> {
        let mut map = lock_write(&self.tables.map);
        let Some(table) = map.get(name).cloned() else {
            if if_exists {
                return Ok(false);
            }
            return Err(self.no_table(name));
        };
        let mut state = lock_write(&table.state);
        // The manifest goes first: a crash after it leaves files no manifest names,
        // which nothing reads and the directory's removal below (or a later drop of the
        // leftover directory by hand) clears.
        let manifest = table.dir.join(MANIFEST_FILE);
        fs::remove_file(&manifest)
            .map_err(|e| format!("{}: cannot remove: {e}", manifest.display()))?;
        let _ = sync_dir(&table.dir);
        state.dropped = true;
        state.mem.clear();
        state.keys.clear();
        state.pending.clear();
        state.file_keys.clear();
        map.remove(name);
        let _ = fs::remove_dir_all(&table.dir);
        let _ = sync_dir(&self.tables.data_dir);
        self.tables.version.bump();
        Ok(true)
    }

    /// Removes every row of table `name`.
    pub fn truncate(&self, name: &str) -> Result<(), String> {
        let table = self.table(name).ok_or_else(|| self.no_table(name))?;
        let _flush = self.flushing.lock().unwrap_or_else(PoisonError::into_inner);
        let mut state = lock_write(&table.state);
        let old_files = std::mem::take(&mut state.manifest.files);
        let mut manifest = state.manifest.clone();
        // Every commit applied so far is older than this; every later one is newer
        // (commits apply in log order), and recovery replays only those.
        manifest.flushed_lsn = self.tables.applied_lsn.load(Ordering::Acquire);
        if let Err(e) = manifest.store(&table.dir) {
            state.manifest.files = old_files;
            return Err(e.to_string());
        }
        state.manifest = manifest;
        // The keys of commits prepared and not yet applied stay: they apply after the
        // truncate (the log replays them after it too), and a key of theirs is taken.
        let applied_end = state.mem.next_row();
        state.keys.retain(|row| row >= applied_end);
        state.mem.clear();
        state.file_keys.clear();
        self.tables.version.bump();
        drop(state);
        for file in old_files {
            let _ = fs::remove_file(table.dir.join(&file.name));
        }
        Ok(())
    }

    fn no_table(&self, name: &str) -> String {
        if self.tables.data_dir.join(name).is_dir() {
            format!(
                "table \"{name}\" was not created by ringscan: its files are read-only \
                 (CREATE TABLE makes a table that INSERT and COPY write)"
            )
        } else {
            format!("relation \"{name}\" does not exist")
        }
    }

    /// Checks `batches` against table `name` (columns, types, `NOT NULL`) and makes a
    /// commit of them, `payload` being their Arrow IPC stream as received (what the log
    /// stores).
    pub fn prepare(
        &self,
        name: &str,
        batches: Vec<RecordBatch>,
        payload: &[u8],
    ) -> Result<Commit, String> {
        let table = self.table(name).ok_or_else(|| self.no_table(name))?;
        let mut record = Vec::with_capacity(payload.len() + name.len() + 16);
        Record::encode_head(&mut record, table.id, name);
        record.extend_from_slice(payload);
        Self::prepare_rows(table, batches, Buffer::from_vec(record))
    }

    /// [`Self::prepare`] of an insert read off the socket into `record`: its rows are
    /// decoded where they lie, and the memtable and the log share their bytes (a large
    /// COPY's rows are not copied again).
    pub fn prepare_insert(&self, name: &str, record: InsertRecord) -> Result<Commit, String> {
        let table = self.table(name).ok_or_else(|| self.no_table(name))?;
        let InsertRecord {
            mut buf,
            start,
            stream,
        } = record;
        buf[start..start + 8].copy_from_slice(&table.id.to_le_bytes());
        let buf = Buffer::from_vec(buf);
        let (_, batches) = ringscan_ipc::msg::read_ipc_buffer(buf.slice(stream))
            .map_err(|e| format!("insert into {name}: the rows do not decode: {e}"))?;
        Self::prepare_rows(table, batches, buf.slice(start))
    }

    fn prepare_rows(
        table: Arc<Table>,
        batches: Vec<RecordBatch>,
        record: Buffer,
    ) -> Result<Commit, String> {
        let batches = table.conform(batches)?;
        let keys = table.keys_of(&batches)?;
        // Against the files here, on the statement's thread (a read, where the filters
        // cannot rule a key out, must not hold up the log's writer).
        let (files, file_gen) = table.files_now();
        if let Some(i) = table.first_in(&files, &keys)? {
            return Err(table.duplicate(&batches, keys.at(i)));
        }
        Ok(Commit {
            table,
            batches,
            keys,
            payload: record,
            first_id: 0,
            file_gen,
        })
    }

    /// Writes `commit` durably and applies it; returns its rows and log position.
    pub fn commit(&self, commit: Commit) -> Result<(u64, Lsn), String> {
        let rows = commit.batches.iter().map(|b| b.num_rows() as u64).sum();
        let lsn = self.wal.commit(commit).map_err(|e| e.to_string())?;
        Ok((rows, lsn))
    }

    /// The snapshot of table `name` a scan reads, if it is a written table.
    pub fn snapshot(&self, name: &str, with_versions: bool) -> Option<Snapshot> {
        self.snapshot_for(name, with_versions, None)
    }

    /// [`Self::snapshot`] for a scan with `predicate`: where it fixes the whole primary
    /// key (`id = 5`, with any other conditions), the key's place answers where the one
    /// row can be: that row of the memtable alone, the files alone, or nowhere (no IO
    /// at all).
    pub fn snapshot_for(
        &self,
        name: &str,
        with_versions: bool,
        predicate: Option<&Predicate>,
    ) -> Option<Snapshot> {
        let table = self.table(name)?;
        let state = lock_read(&table.state);
        let hit = predicate.and_then(|p| table.key_lookup(&state, p));
        let mut snapshot = self.snapshot_of(&table, &state, with_versions);
        match hit {
            None => {}
            Some(KeyHit::Absent) => {
                snapshot.rows.clear();
                snapshot.table.listing.files.clear();
            }
            Some(KeyHit::Memory(row)) => {
                snapshot.rows = vec![row];
                snapshot.table.listing.files.clear();
            }
            Some(KeyHit::Files) => snapshot.rows.clear(),
        }
        Some(snapshot)
    }

    fn snapshot_of(&self, table: &Table, state: &TableState, with_versions: bool) -> Snapshot {
        let files: Vec<PathBuf> = state
            .manifest
            .files
            .iter()
            .map(|f| PathBuf::from(&f.name))
            .collect();
        let (file_versions, dirs) = if with_versions {
            let rel = |p: &Path| {
                p.strip_prefix(&self.tables.data_dir)
                    .unwrap_or(p)
                    .to_path_buf()
            };
            let stat = |full: &Path| {
                fs::metadata(full)
                    .ok()
                    .map(|m| FileVersion::from_metadata(rel(full), &m))
            };
            let files = files
                .iter()
                .filter_map(|f| stat(&table.dir.join(f)))
                .collect();
            let dirs = [table.dir.clone(), self.tables.version.path.clone()]
                .iter()
                .filter_map(|p| stat(p))
                .collect();
            (files, dirs)
        } else {
            (Vec::new(), Vec::new())
        };
        let rows = state.mem.batches();
        Snapshot {
            table: ResolvedTable {
                listing: Listing {
                    root: table.dir.clone(),
                    files,
                    file_versions,
                    dirs,
                },
                schema: Arc::clone(&table.schema),
                partition_types: PartitionTypes::default(),
            },
            rows,
        }
    }

    /// Flushes every table whose memtable is due (`force`: every non-empty one), then
    /// removes the log segments no memtable needs. Returns the rows flushed.
    pub fn flush(&self, force: bool) -> Result<u64, String> {
        let _flush = self.flushing.lock().unwrap_or_else(PoisonError::into_inner);
        let tables: Vec<Arc<Table>> = lock_read(&self.tables.map).values().cloned().collect();
        let mut rows = 0;
        let mut failed = None;
        for table in &tables {
            let due = {
                let state = lock_read(&table.state);
                !state.mem.is_empty()
                    && (force
                        || state.mem.bytes() >= self.config.flush_bytes
                        || state
                            .mem
                            .oldest()
                            .is_some_and(|t| t.elapsed() >= self.config.flush_age))
            };
            if due {
                match self.flush_table(table) {
                    Ok(n) => rows += n,
                    Err(e) => failed = Some(e),
                }
            }
        }
        if rows > 0 {
            self.trim_log()?;
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(rows),
        }
    }

    /// Removes the log segments whose records every table has in its files.
    fn trim_log(&self) -> Result<(), String> {
        let tables: Vec<Arc<Table>> = lock_read(&self.tables.map).values().cloned().collect();
        let last = self.wal.rotate().map_err(|e| e.to_string())?; // Each table's records up to its manifest's position are in its files; a table
                                                                  // with rows in memory needs the log from there on.
        let needed = tables
            .iter()
            .filter_map(|t| {
                let state = lock_read(&t.state);
                (!state.mem.is_empty()).then_some(state.manifest.flushed_lsn)
            })
            .min();
        let through = needed.unwrap_or(last).min(last);
        self.wal.remove_through(through).map_err(|e| e.to_string())
    }

    fn flush_table(&self, table: &Arc<Table>) -> Result<u64, String> {
        let (batches, through, end) = {
            let state = lock_read(&table.state);
            let Some(taken) = state.mem.to_flush() else {
                return Ok(0);
            };
            taken
        };
        let name = format!("part-{through:020}.parquet");
        let written = table.write_file(&name, &batches)?;
        let keys = match table.file_keys(&name, false) {
            Ok(keys) => keys,
            Err(e) => {
                let _ = fs::remove_file(table.dir.join(&name));
                return Err(e);
            }
        };
        let mut state = lock_write(&table.state);
        if state.dropped || state.manifest.flushed_lsn >= through {
            // Dropped or truncated meanwhile: the rows are gone, so is the file.
            drop(state);
            let _ = fs::remove_file(table.dir.join(&name));
            return Ok(0);
        }
        let mut manifest = state.manifest.clone();
        manifest.files.push(written.clone());
        manifest.flushed_lsn = through;
        if let Err(e) = manifest.store(&table.dir) {
            drop(state);
            let _ = fs::remove_file(table.dir.join(&name));
            return Err(e.to_string());
        }
        state.manifest = manifest;
        state.mem.drop_before(end);
        // The flushed rows' keys now answer from the file (the ids from `end` on are
        // rows still in memory, or of commits on their way).
        table.add_file(&mut state, name, keys);
        state.keys.retain(|row| row >= end);
        self.tables.version.bump();
        Ok(written.rows)
    }

    /// Flushes every table (a clean stop), and removes the files compactions replaced.
    pub fn close(&self) -> Result<u64, String> {
        let rows = self.flush(true)?;
        self.remove_retired(Duration::ZERO);
        Ok(rows)
    }

    /// Merges each table's small files (those under 64 MiB, once there are 8) into one,
    /// sorted by the key; returns the files replaced. The manifest swaps them at once;
    /// the old files are removed a minute later.
    pub fn compact(&self) -> Result<usize, String> {
        self.remove_retired(RETIRE_AFTER);
        let _flush = self.flushing.lock().unwrap_or_else(PoisonError::into_inner);
        let tables: Vec<Arc<Table>> = lock_read(&self.tables.map).values().cloned().collect();
        let mut replaced = 0;
        for table in &tables {
            replaced += self.compact_table(table)?;
        }
        Ok(replaced)
    }

    fn compact_table(&self, table: &Arc<Table>) -> Result<usize, String> {
        let (inputs, flushed) = {
            let state = lock_read(&table.state);
            let mut total = 0;
            let small: Vec<ManifestFile> = state
                .manifest
                .files
                .iter()
                .filter(|f| f.bytes < COMPACT_FILE_BYTES)
                .take_while(|f| {
                    total += f.bytes;
                    total <= COMPACT_MAX_BYTES
                })
                .cloned()
                .collect();
            (small, state.manifest.flushed_lsn)
        };
        if inputs.len() < COMPACT_MIN_FILES {
            return Ok(0);
        }
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let name = format!("part-{flushed:020}-c{stamp}.parquet");
        // Merged a batch at a time: every input is sorted by the key.
        let paths: Vec<PathBuf> = inputs.iter().map(|f| table.dir.join(&f.name)).collect();
        let mut merged = merge::Merge::open(table, &paths)?;
        let written = table.publish(table.write_sorted(&name, &mut merged)?)?;
        let keys = match table.file_keys(&name, true) {
            Ok(keys) => keys,
            Err(e) => {
                let _ = fs::remove_file(table.dir.join(&name));
                return Err(e);
            }
        };
        let mut state = lock_write(&table.state);
        let names: HashSet<&str> = inputs.iter().map(|f| f.name.as_str()).collect();
        let still = state
            .manifest
            .files
            .iter()
            .filter(|f| names.contains(f.name.as_str()))
            .count();
        if state.dropped || still != inputs.len() {
            // Truncated or dropped meanwhile.
            drop(state);
            let _ = fs::remove_file(table.dir.join(&name));
            return Ok(0);
        }
        let mut manifest = state.manifest.clone();
        let at = manifest
            .files
            .iter()
            .position(|f| names.contains(f.name.as_str()))
            .unwrap_or(0);
        manifest.files.retain(|f| !names.contains(f.name.as_str()));
        manifest.files.insert(at.min(manifest.files.len()), written);
        if let Err(e) = manifest.store(&table.dir) {
            drop(state);
            let _ = fs::remove_file(table.dir.join(&name));
            return Err(e.to_string());
        }
        state.manifest = manifest;
        state.file_keys.retain(|f, _| !names.contains(f.as_str()));
        table.add_file(&mut state, name, keys);
        self.tables.version.bump();
        drop(state);
        let now = Instant::now();
        self.retired
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(inputs.iter().map(|f| (now, table.dir.join(&f.name))));
        Ok(inputs.len())
    }

    /// Removes the replaced files retired at least `age` ago.
    fn remove_retired(&self, age: Duration) {
        let mut retired = self.retired.lock().unwrap_or_else(PoisonError::into_inner);
        retired.retain(|(when, path)| {
            if when.elapsed() >= age {
                let _ = fs::remove_file(path);
                false
            } else {
                true
            }
        });
    }

    /// Rows held in memtables, and their bytes.
    pub fn memory(&self) -> (u64, u64) {
        lock_read(&self.tables.map)
            .values()
            .map(|t| {
                let s = lock_read(&t.state);
                (s.mem.rows(), s.mem.bytes())
            })
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    }

    /// The log's counters.
    pub fn wal_stats(&self) -> super::wal::WalStats {
        self.wal.stats()
    }
}

impl Table {
    fn open(name: String, dir: PathBuf, manifest: Manifest) -> Result<Self, String> {
        let schema = manifest
            .schema()
            .map_err(|e| format!("{}: {e}", dir.join(MANIFEST_FILE).display()))?;
        let key = manifest
            .primary_key
            .iter()
            .map(|k| {
                schema.index_of(k).map_err(|_| {
                    format!(
                        "{}: the primary key names column {k:?}, which the table lacks",
                        dir.join(MANIFEST_FILE).display()
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let converter = if key.is_empty() {
            None
        } else {
            let fields = key
                .iter()
                .map(|&i| SortField::new(schema.field(i).data_type().clone()))
                .collect();
            Some(RowConverter::new(fields).map_err(|e| format!("table {name}: its key: {e}"))?)
        };
        let table = Self {
            name,
            id: manifest.id,
            dir,
            schema,
            key,
            converter,
            key_hasher: foldhash::quality::RandomState::default(),
            fingerprint_mask: AtomicU64::new(u64::MAX),
            state: RwLock::new(TableState {
                manifest,
                mem: Memtable::default(),
                keys: KeyIndex::default(),
                pending: VecDeque::new(),
                file_keys: HashMap::new(),
                file_gen: 0,
                next_id: 0,
                dropped: false,
                abandoned: 0,
            }),
        };
        table.load_keys()?;
        Ok(table)
    }

    /// Reads the key columns of the table's files into their [`FileKeys`].
    fn load_keys(&self) -> Result<(), String> {
        if self.key.is_empty() {
            return Ok(());
        }
        let names: Vec<String> = lock_read(&self.state)
            .manifest
            .files
            .iter()
            .map(|f| f.name.clone())
            .collect();
        for name in names {
            let keys = self.file_keys(&name, false)?;
            self.add_file(&mut lock_write(&self.state), name, keys);
        }
        Ok(())
    }

    /// The keys of the table's file `name`, in brief (`merged`: a compaction's output).
    fn file_keys(&self, name: &str, merged: bool) -> Result<Option<FileKeys>, String> {
        match &self.converter {
            None => Ok(None),
            Some(converter) => {
                FileKeys::load(&self.dir.join(name), &self.key, converter, 0, merged).map(Some)
            }
        }
    }

    /// Puts the keys of a file that joined the manifest where checks find them.
    fn add_file(&self, state: &mut TableState, name: String, keys: Option<FileKeys>) {
        state.file_gen += 1;
        if let Some(mut keys) = keys {
            keys.added = state.file_gen;
            state.file_keys.insert(name, Arc::new(keys));
        }
    }

    /// The keys of the files as they stand, and their generation.
    fn files_now(&self) -> (Vec<Arc<FileKeys>>, u64) {
        let state = lock_read(&self.state);
        (state.file_keys.values().cloned().collect(), state.file_gen)
    }

    /// The first of `keys` (its index) that one of `files` holds.
    fn first_in(
        &self,
        files: &[Arc<FileKeys>],
        keys: &StatementKeys,
    ) -> Result<Option<usize>, String> {
        match &self.converter {
            Some(converter) if !files.is_empty() && keys.len() > 0 => {
                file_keys::first_in_files(files, keys.iter().enumerate(), &self.key, converter)
            }
            _ => Ok(None),
        }
    }

    /// Where the row of the key `predicate` fixes is (`None`: it fixes no whole key, or
    /// a value that is not exactly one of the key column's).
    fn key_lookup(&self, state: &TableState, predicate: &Predicate) -> Option<KeyHit> {
        if self.key.is_empty() {
            return None;
        }
        let conjuncts: Vec<&Predicate> = match predicate {
            Predicate::And(all) => all.iter().collect(),
            one => vec![one],
        };
        let mut values = Vec::with_capacity(self.key.len());
        for &i in &self.key {
            let field = self.schema.field(i);
            let literal = conjuncts.iter().find_map(|p| match p {
                Predicate::Compare {
                    left: Operand::Column(c),
                    op: CmpOp::Eq,
                    right: Operand::Literal(l),
                }
                | Predicate::Compare {
                    left: Operand::Literal(l),
                    op: CmpOp::Eq,
                    right: Operand::Column(c),
                } if c == field.name() => Some(l),
                _ => None,
            })?;
            values.push(key_value(field.data_type(), literal)?);
        }
        let rows = self.key_converter().ok()?.convert_columns(&values).ok()?;
        let key = rows.row(0);
        // Rows of commits not yet applied are not in a snapshot: only the memtable's.
        let in_memory = state.keys.find(self.fingerprint(key.data()), |id| {
            state
                .mem
                .row(id)
                .is_some_and(|row| self.row_has_key(&row, key.data()))
        });
        Some(match in_memory {
            Some(id) => KeyHit::Memory(state.mem.row(id)?),
            None if state
                .file_keys
                .values()
                .any(|f| f.may_contain(key.as_ref())) =>
            {
                KeyHit::Files
            }
            None => KeyHit::Absent,
        })
    }

    fn key_converter(&self) -> Result<&RowConverter, String> {
        self.converter
            .as_ref()
            .ok_or_else(|| format!("table {} has no primary key", self.name))
    }

    /// `batches` with exactly the table's schema: same columns in order, each cast to
    /// the column's type where it differs (losing nothing), no NULL in a `NOT NULL`
    /// column.
    fn conform(&self, batches: Vec<RecordBatch>) -> Result<Vec<RecordBatch>, String> {
        self.conform_from(batches, 0)
    }

    /// [`Self::conform`] of rows that follow `before` rows of the statement (a staged
    /// part: an error names the row's number in the whole statement).
    fn conform_from(
        &self,
        batches: Vec<RecordBatch>,
        before: u64,
    ) -> Result<Vec<RecordBatch>, String> {
        let fields = self.schema.fields();
        let mut seen = usize::try_from(before).unwrap_or(usize::MAX / 2);
        let mut out = Vec::with_capacity(batches.len());
        for batch in batches.into_iter().filter(|b| b.num_rows() > 0) {
            if batch.num_columns() != fields.len() {
                return Err(format!(
                    "rows of {} columns for table \"{}\" of {}",
                    batch.num_columns(),
                    self.name,
                    fields.len()
                ));
            }
            let options = arrow_cast::CastOptions {
                safe: false,
                ..Default::default()
            };
            let mut columns = Vec::with_capacity(fields.len());
            for (column, field) in batch.columns().iter().zip(fields) {
                let column: ArrayRef = if column.data_type() == field.data_type() {
                    Arc::clone(column)
                } else {
                    arrow_cast::cast_with_options(column, field.data_type(), &options).map_err(
                        |e| {
                            format!(
                                "column \"{}\" is {}: a {} value does not fit: {e}",
                                field.name(),
                                field.data_type(),
                                column.data_type()
                            )
                        },
                    )?
                };
                if !field.is_nullable() && column.null_count() > 0 {
                    let row = (0..column.len()).find(|&i| column.is_null(i)).unwrap_or(0);
                    return Err(format!(
                        "null value in column \"{}\" of relation \"{}\" violates not-null \
                         constraint (row {} of the statement)",
                        field.name(),
                        self.name,
                        seen + row + 1
                    ));
                }
                columns.push(column);
            }
            seen += batch.num_rows();
            let batch = RecordBatch::try_new_with_options(
                Arc::clone(&self.schema),
                columns,
                &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
            )
            .map_err(|e| format!("rows for table \"{}\": {e}", self.name))?;
            out.push(batch);
        }
        Ok(out)
    }

    /// The fingerprint of an encoded key in [`TableState::keys`].
    fn fingerprint(&self, key: &[u8]) -> u64 {
        self.key_hasher.hash_one(key) & self.fingerprint_mask.load(Ordering::Relaxed)
    }

    /// The encoded keys of `batch`'s rows.
    fn encode_keys(&self, batch: &RecordBatch) -> Result<Rows, String> {
        let columns: Vec<ArrayRef> = self
            .key
            .iter()
            .map(|&i| Arc::clone(batch.column(i)))
            .collect();
        self.key_converter()?
            .convert_columns(&columns)
            .map_err(|e| format!("table {}: its key: {e}", self.name))
    }

    /// Whether the one row of `row` has the encoded key `key` (the exact check behind
    /// a fingerprint's match).
    fn row_has_key(&self, row: &RecordBatch, key: &[u8]) -> bool {
        // A row once encoded encodes again; were it not to, a fingerprint's match is
        // taken as the key's (refusing a new key rather than taking a duplicate).
        self.encode_keys(row).map_or(true, |rows| {
            rows.num_rows() == 1 && rows.row(0).data() == key
        })
    }

    /// The primary keys of `batches`, encoded, with their fingerprints.
    fn keys_of(&self, batches: &[RecordBatch]) -> Result<StatementKeys, String> {
        let mut keys = StatementKeys::default();
        if self.key.is_empty() {
            return Ok(keys);
        }
        keys.fingerprints
            .reserve(batches.iter().map(RecordBatch::num_rows).sum());
        for batch in batches {
            let rows = self.encode_keys(batch)?;
            keys.fingerprints
                .extend(rows.iter().map(|row| self.fingerprint(row.data())));
            keys.ends
                .push(keys.ends.last().copied().unwrap_or(0) + rows.num_rows());
            keys.rows.push(rows);
        }
        Ok(keys)
    }

    /// PostgreSQL's words for a duplicate key.
    fn duplicate(&self, batches: &[RecordBatch], (b, r): (usize, usize)) -> String {
        let columns: Vec<&dyn Array> = self
            .key
            .iter()
            .map(|&i| batches[b].column(i).as_ref())
            .collect();
        self.duplicate_key(&columns, r)
    }

    /// [`Self::duplicate`] of row `r` of the key's columns `columns` (in key order).
    fn duplicate_key(&self, columns: &[&dyn Array], r: usize) -> String {
        let names: Vec<&str> = self
            .key
            .iter()
            .map(|&i| self.schema.field(i).name().as_str())
            .collect();
        let options = arrow_cast::display::FormatOptions::default();
        let values: Vec<String> = columns
            .iter()
            .map(|column| {
                arrow_cast::display::ArrayFormatter::try_new(*column, &options)
                    .map(|f| f.value(r).to_string())
                    .unwrap_or_else(|_| "?".into())
            })
            .collect();
        format!(
            "duplicate key value violates unique constraint \"{}_pkey\": Key ({})=({}) already \
             exists",
            self.name,
            names.join(", "),
            values.join(", ")
        )
    }

    /// Writes `batches` sorted by the key as the table's Parquet file `name`, synced.
    fn write_file(&self, name: &str, batches: &[RecordBatch]) -> Result<ManifestFile, String> {
        let written = self.write_temp(name, batches)?;
        self.publish(written)
    }

    /// Gives a file written under its temporary name ([`Self::write_temp`],
    /// [`Self::write_sorted`]) its name, durably (the directory synced).
    fn publish(&self, (temp, written): (PathBuf, ManifestFile)) -> Result<ManifestFile, String> {
        let path = self.dir.join(&written.name);
        let published = fs::rename(&temp, &path)
            .map_err(|e| format!("{}: cannot write: {e}", path.display()))
            .and_then(|()| sync_dir(&self.dir).map_err(|e| e.to_string()));
        if let Err(e) = published {
            let _ = fs::remove_file(&temp);
            return Err(e);
        }
        Ok(written)
    }

    /// The temporary name under which file `name` is written (a hidden file that no
    /// reader of the directory takes for data; removed by recovery if left).
    fn temp_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!(".{name}.tmp"))
    }

    /// Writes `batches` sorted by the key as a Parquet file under `name`'s temporary
    /// name, its bytes synced (its name not yet: see [`Self::write_file`]). Returns
    /// the temporary path and what the manifest will say of the file.
    fn write_temp(
        &self,
        name: &str,
        batches: &[RecordBatch],
    ) -> Result<(PathBuf, ManifestFile), String> {
        let path = self.dir.join(name);
        let err = |e: &dyn std::fmt::Display| format!("{}: cannot write: {e}", path.display());
        let all =
            arrow_select::concat::concat_batches(&self.schema, batches).map_err(|e| err(&e))?;
        let sorted = if self.key.is_empty() {
            all
        } else {
            let columns: Vec<arrow_ord::sort::SortColumn> = self
                .key
                .iter()
                .map(|&i| arrow_ord::sort::SortColumn {
                    values: Arc::clone(all.column(i)),
                    options: None,
                })
                .collect();
            let order = arrow_ord::sort::lexsort_to_indices(&columns, None).map_err(|e| err(&e))?;
            arrow_select::take::take_record_batch(&all, &order).map_err(|e| err(&e))?
        };
        self.write_sorted(name, &mut std::iter::once(Ok(sorted)))
    }

    /// Writes `batches`, already in key order, as a Parquet file under `name`'s
    /// temporary name, its bytes synced; a batch at a time (the writer holds one row
    /// group). Returns the temporary path and what the manifest will say of the file.
    fn write_sorted(
        &self,
        name: &str,
        batches: &mut dyn Iterator<Item = Result<RecordBatch, String>>,
    ) -> Result<(PathBuf, ManifestFile), String> {
        let path = self.dir.join(name);
        let err = |e: &dyn std::fmt::Display| format!("{}: cannot write: {e}", path.display());
        // The first batch tells which float columns repeat their values enough for a
        // dictionary (prices in cents do; measurements rarely).
        let mut batches = batches.peekable();
        let repeating: Vec<bool> = match batches.peek() {
            Some(Ok(first)) => first
                .columns()
                .iter()
                .map(|c| floats_repeat(c.as_ref()))
                .collect(),
            _ => Vec::new(),
        };
        let mut props = WriterProperties::builder()
            .set_created_by(format!(
                "ringscan ingest {} (parquet-rs)",
                env!("CARGO_PKG_VERSION")
            ))
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .set_data_page_row_count_limit(PAGE_ROWS)
            .set_write_batch_size(PAGE_ROWS);
        for (i, field) in self.schema.fields().iter().enumerate() {
            let column = parquet::schema::types::ColumnPath::from(field.name().as_str());
            match field.data_type() {
                // Near-unique floats make big dictionaries that every read pays for.
                DataType::Float32 | DataType::Float64
                    if !repeating.get(i).copied().unwrap_or(false) =>
                {
                    props = props.set_column_dictionary_enabled(column, false);
                }
                // Times and dates, and integer keys, rise through a file sorted by the
                // key (or within each value of the key's first column): their deltas
                // pack in a few bits, where a dictionary of near-unique values was
                // most of the file (an ingested ohlcv's `ts`: 495 KB a row group, 4.5
                // KB as the generator writes it).
                DataType::Timestamp(_, _) | DataType::Date32 | DataType::Date64 => {
                    props = props
                        .set_column_dictionary_enabled(column.clone(), false)
                        .set_column_encoding(column, Encoding::DELTA_BINARY_PACKED);
                }
                DataType::Int32 | DataType::Int64 if self.key.contains(&i) => {
                    props = props
                        .set_column_dictionary_enabled(column.clone(), false)
                        .set_column_encoding(column, Encoding::DELTA_BINARY_PACKED);
                }
                _ => {}
            }
        }
        if !self.key.is_empty() {
            let sorting = self
                .key
                .iter()
                .map(|&i| SortingColumn {
                    column_idx: i as i32,
                    descending: false,
                    nulls_first: false,
                })
                .collect();
            props = props.set_sorting_columns(Some(sorting));
            for &i in &self.key {
                let column = self.schema.field(i).name().as_str();
                props = props
                    .set_column_bloom_filter_enabled(column.into(), true)
                    .set_column_bloom_filter_fpp(column.into(), 0.01);
            }
        }
        let temp = self.temp_path(name);
        let file = File::create(&temp).map_err(|e| err(&e))?;
        let result = (|| {
            let mut writer =
                ArrowWriter::try_new(file, Arc::clone(&self.schema), Some(props.build()))
                    .map_err(|e| err(&e))?;
            // Per column: whether a NaN was seen (only float columns are counted).
            let mut nan = vec![false; self.schema.fields().len()];
            let mut rows = 0u64;
            // A key of several columns: row groups end early where its first column
            // changes (see `row_groups`).
            let mut cuts = (self.key.len() > 1)
                .then(|| row_groups::GroupCuts::new(ROW_GROUP_ROWS, ROW_GROUP_ROWS / 16));
            for batch in batches {
                let batch = batch?;
                for (seen, column) in nan.iter_mut().zip(batch.columns()) {
                    *seen |= no_nan(column.as_ref()) == Some(false);
                }
                rows += batch.num_rows() as u64;
                let Some(cuts) = cuts.as_mut() else {
                    writer.write(&batch).map_err(|e| err(&e))?;
                    continue;
                };
                let mut start = 0;
                for cut in cuts.cuts(batch.column(self.key[0])).map_err(|e| err(&e))? {
                    if cut > start {
                        writer
                            .write(&batch.slice(start, cut - start))
                            .map_err(|e| err(&e))?;
                    }
                    writer.flush().map_err(|e| err(&e))?;
                    start = cut;
                }
                if start < batch.num_rows() {
                    writer
                        .write(&batch.slice(start, batch.num_rows() - start))
                        .map_err(|e| err(&e))?;
                }
            }
            // Float columns without a NaN are named so: the daemon then prunes their
            // pages by min/max for every comparison (`prune::column`, which trusts the
            // promise in files whose `created_by` is ringscan's).
            let nan_free: Vec<&str> = self
                .schema
                .fields()
                .iter()
                .zip(&nan)
                .filter(|(field, seen)| {
                    matches!(field.data_type(), DataType::Float32 | DataType::Float64) && !**seen
                })
                .map(|(field, _)| field.name().as_str())
                .collect();
            writer.append_key_value_metadata(parquet::file::metadata::KeyValue::new(
                "ringscan.nan_free".into(),
                nan_free.join(","),
            ));
            let file = writer.into_inner().map_err(|e| err(&e))?;
            file.sync_all().map_err(|e| err(&e))?;
            let bytes = file.metadata().map_err(|e| err(&e))?.len();
            Ok(ManifestFile {
                name: name.to_owned(),
                rows,
                bytes,
            })
        })();
        match result {
            Ok(written) => Ok((temp, written)),
            Err(e) => {
                let _ = fs::remove_file(&temp);
                Err(e)
            }
        }
    }
}

impl Committer for Writer {
    type Item = Commit;
    type Payload = LogBytes;

    fn prepare(&mut self, commit: &mut Commit) -> Result<LogBytes, String> {
        let table = Arc::clone(&commit.table);
        let mut state = lock_write(&table.state);
        if state.dropped {
            return Err(format!("relation \"{}\" was dropped", table.name));
        }
        // The ids its rows will have: commits apply in the order they are prepared
        // (or are abandoned, which hands the ids back), so the memtable gives the
        // same ones when it appends them.
        if state.file_gen != commit.file_gen {
            // Files flushed since the statement checked its keys hold keys that were in
            // memory then (a compaction's output holds none that its inputs did not).
            let newer: Vec<Arc<FileKeys>> = state
                .file_keys
                .values()
                .filter(|f| f.added > commit.file_gen && !f.merged)
                .cloned()
                .collect();
            if let Some(i) = table.first_in(&newer, &commit.keys)? {
                return Err(table.duplicate(&commit.batches, commit.keys.at(i)));
            }
        }
        state.next_id = state.next_id.max(state.mem.next_row());
        let first = state.next_id;
        let keys = &commit.keys;
        let TableState {
            keys: index,
            mem,
            pending,
            ..
        } = &mut *state;
        // The row a fingerprint's match names: of this statement, of a commit on its
        // way, or of the memtable.
        let same = |i: usize, id: u64| {
            let row = if id >= first {
                row_at(first, &commit.batches, id)
            } else {
                held_row(mem, pending, id)
            };
            row.is_some_and(|row| table.row_has_key(&row, keys.key(i)))
        };
        if let Err((i, _)) = index.insert_new_all(&keys.fingerprints, first, same) {
            for (j, &taken) in keys.fingerprints[..i].iter().enumerate() {
                index.remove(taken, first + j as u64);
            }
            return Err(table.duplicate(&commit.batches, keys.at(i)));
        }
        pending.push_back((first, commit.batches.clone()));
        let rows: u64 = commit.batches.iter().map(|b| b.num_rows() as u64).sum();
        state.next_id = first + rows;
        commit.first_id = first;
        Ok(LogBytes(std::mem::replace(
            &mut commit.payload,
            Buffer::from_vec(Vec::<u8>::new()),
        )))
    }

    fn apply(&mut self, lsn: Lsn, commit: Commit) {
        let mut state = lock_write(&commit.table.state);
        self.tables.applied_lsn.store(lsn, Ordering::Release);
        let applied = state.pending.pop_front();
        debug_assert!(
            state.dropped || applied.is_some_and(|(first, _)| first == commit.first_id),
            "commits apply in the order prepared"
        );
        if state.dropped {
            return;
        }
        let Commit {
            batches, first_id, ..
        } = commit;
        let first = state.mem.append(lsn, batches);
        debug_assert_eq!(first, first_id, "rows are appended in the order prepared");
        // Under the table's lock: a describe that stats the version sees this change
        // exactly when it sees these rows.
        self.tables.version.bump();
    }

    fn abandon(&mut self, commit: Commit) {
        let mut state = lock_write(&commit.table.state);
        // Its keys went into the index when it was prepared (a truncate since keeps
        // them; a drop cleared them, and then there is nothing to remove).
        for (j, &fingerprint) in commit.keys.fingerprints.iter().enumerate() {
            state.keys.remove(fingerprint, commit.first_id + j as u64);
        }
        // Its ids (and those of any commit prepared after it, abandoned with it) are
        // handed back.
        state.pending.retain(|(first, _)| *first < commit.first_id);
        state.next_id = state.next_id.min(commit.first_id);
        state.abandoned += 1;
    }
}

/// Where the row of a whole key is.
enum KeyHit {
    /// No row has it.
    Absent,
    /// This row of the memtable.
    Memory(RecordBatch),
    /// A row of the table's files.
    Files,
}

/// `literal` as a one-value array of a key column of type `data_type`, where it is
/// exactly a value of that type (else a lookup by it cannot be exact).
fn key_value(data_type: &DataType, literal: &Literal) -> Option<ArrayRef> {
    use arrow_array::{
        BooleanArray, Date32Array, Int16Array, Int32Array, Int64Array, TimestampMicrosecondArray,
    };
    Some(match (data_type, literal) {
        (DataType::Int64, Literal::Int(v)) => Arc::new(Int64Array::from(vec![*v])),
        (DataType::Int32, Literal::Int(v)) => {
            Arc::new(Int32Array::from(vec![i32::try_from(*v).ok()?]))
        }
        (DataType::Int16, Literal::Int(v)) => {
            Arc::new(Int16Array::from(vec![i16::try_from(*v).ok()?]))
        }
        (DataType::Utf8, Literal::Utf8(v)) => {
            Arc::new(arrow_array::StringArray::from(vec![v.as_str()]))
        }
        (DataType::Boolean, Literal::Bool(v)) => Arc::new(BooleanArray::from(vec![*v])),
        (DataType::Date32, Literal::Date32(v)) => Arc::new(Date32Array::from(vec![*v])),
        (
            DataType::Timestamp(arrow_schema::TimeUnit::Microsecond, zone),
            Literal::TimestampMicros(v),
        ) => Arc::new(TimestampMicrosecondArray::from(vec![*v]).with_timezone_opt(zone.clone())),
        _ => return None,
    })
}

/// An insert's log record as it is read off the socket: its head (the table id filled
/// in by [`Ingest::prepare_insert`]), then the Arrow IPC stream, placed so that the
/// stream starts 64-byte aligned (its arrays are then used where they lie).
#[derive(Debug)]
pub struct InsertRecord {
    buf: Vec<u8>,
    /// Where the record starts in `buf` (after the alignment's padding).
    start: usize,
    /// Where the stream starts.
    stream: usize,
}

impl InsertRecord {
    /// Room for the record of an insert into `table` of a stream of `stream_bytes`.
    pub fn new(table: &str, stream_bytes: usize) -> Self {
        let head = 10 + table.len().min(usize::from(u16::MAX));
        let mut buf = Vec::with_capacity(64 + head + stream_bytes);
        let pad = (64 - (buf.as_ptr() as usize + head) % 64) % 64;
        buf.resize(pad, 0);
        Record::encode_head(&mut buf, 0, table);
        let stream = buf.len();
        Self {
            buf,
            start: pad,
            stream,
        }
    }

    /// What the stream's bytes are appended to.
    pub fn stream_buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// The stream's bytes so far.
    pub fn stream_len(&self) -> usize {
        self.buf.len() - self.stream
    }
}

/// A log record: `[u64 table id][u16 name length][name][Arrow IPC stream]`.
struct Record {
    id: u64,
    table: String,
    rows: Vec<RecordBatch>,
}

impl Record {
    fn encode_head(out: &mut Vec<u8>, id: u64, table: &str) {
        out.extend_from_slice(&id.to_le_bytes());
        let len = u16::try_from(table.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&table.as_bytes()[..usize::from(len)]);
    }

    fn decode(payload: &[u8]) -> Result<Self, String> {
        let bad = |what: &str| format!("a log record is damaged: {what}");
        let id = u64::from_le_bytes(
            payload
                .get(..8)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| bad("no table id"))?,
        );
        let len = u16::from_le_bytes(
            payload
                .get(8..10)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| bad("no name length"))?,
        );
        let end = 10 + usize::from(len);
        let table = std::str::from_utf8(payload.get(10..end).ok_or_else(|| bad("short name"))?)
            .map_err(|_| bad("name not UTF-8"))?
            .to_owned();
        let (_, rows) = ringscan_ipc::msg::read_ipc_stream(&payload[end..])
            .map_err(|e| bad(&format!("rows: {e}")))?;
        Ok(Self { id, table, rows })
    }
}

/// `<data>/.ringscan/ingest.version`: grows by a byte per change to a memtable.
#[derive(Debug)]
struct Version {
    path: PathBuf,
    file: Mutex<(File, u64)>,
}

impl Version {
    /// A new file (a new inode, so no version of a past daemon's can match it).
    fn create(path: &Path) -> Result<Self, String> {
        let temp = path.with_extension("tmp");
        let file = File::create(&temp)
            .and_then(|f| fs::rename(&temp, path).map(|()| f))
            .map_err(|e| format!("{}: cannot create: {e}", path.display()))?;
        Ok(Self {
            path: path.to_path_buf(),
            file: Mutex::new((file, 0)),
        })
    }

    fn bump(&self) {
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        file.1 += 1;
        let len = file.1;
        // Extending a file's length allocates nothing: this cannot fail for space.
        let _ = file.0.set_len(len);
    }
}

/// Removes the files of `dir` that look like ringscan's data files but that the
/// manifest does not name (a flush or compaction that died before its commit).
fn remove_orphans(dir: &Path, manifest: &Manifest) -> usize {
    let named: HashSet<&str> = manifest.files.iter().map(|f| f.name.as_str()).collect();
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = (name.starts_with("part-") && name.ends_with(".parquet"))
            || (name.starts_with(".part-") && name.ends_with(".tmp"));
        if ours && !named.contains(name.as_str()) && fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// A table name: one plain path component.
fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with(['.', '_', '-'])
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid table name {name:?}: letters, digits, '_' and '-' only, at most 128, \
             not starting with '.', '_' or '-'"
        ))
    }
}

/// The column types a written table may have (what its Parquet files and the wire
/// both carry exactly), and a key that names its columns once each.
fn check_schema(schema: &Schema, primary_key: &[String]) -> Result<(), String> {
    if schema.fields().is_empty() {
        return Err("a table needs at least one column".into());
    }
    let mut names = HashSet::new();
    for field in schema.fields() {
        if !names.insert(field.name().as_str()) {
            return Err(format!(
                "column \"{}\" specified more than once",
                field.name()
            ));
        }
        let supported = matches!(
            field.data_type(),
            DataType::Boolean
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::Float32
                | DataType::Float64
                | DataType::Decimal128(..)
                | DataType::Utf8
                | DataType::Binary
                | DataType::Date32
                | DataType::Timestamp(arrow_schema::TimeUnit::Microsecond, _)
        );
        if !supported {
            return Err(format!(
                "column \"{}\": type {} is not supported in a written table",
                field.name(),
                field.data_type()
            ));
        }
    }
    let mut seen = HashSet::new();
    for key in primary_key {
        if schema.field_with_name(key).is_err() {
            return Err(format!("column \"{key}\" named in key does not exist"));
        }
        if !seen.insert(key) {
            return Err(format!(
                "column \"{key}\" appears twice in primary key constraint"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;

    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use arrow_array::{Int64Array, StringArray};

    use super::super::file::testing::{CountingDir, PowerCutDir};
    use super::*;

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("v", DataType::Utf8, true),
        ])
    }

    fn rows(ids: &[i64]) -> RecordBatch {
        let values: Vec<Option<String>> = ids.iter().map(|i| Some(format!("v{i}"))).collect();
        RecordBatch::try_new(
            Arc::new(schema()),
            vec![
                Arc::new(Int64Array::from(ids.to_vec())),
                Arc::new(StringArray::from(values)),
            ],
        )
        .unwrap()
    }

    fn insert(ingest: &Ingest, table: &str, ids: &[i64]) -> Result<(u64, Lsn), String> {
        let batch = rows(ids);
        let payload =
            ringscan_ipc::msg::encode_ipc_stream(&schema(), std::slice::from_ref(&batch)).unwrap();
        // As the daemon reads an insert off its socket (the log record and the rows
        // sharing one buffer).
        let mut record = InsertRecord::new(table, payload.len());
        record.stream_buf().extend_from_slice(&payload);
        assert_eq!(record.stream_len(), payload.len());
        let commit = ingest.prepare_insert(table, record)?;
        ingest.commit(commit)
    }

    /// Every id of table `t`: from its files (read with parquet's reader) and memtable.
    fn ids(ingest: &Ingest, table: &str) -> Vec<i64> {
        let snapshot = ingest.snapshot(table, false).unwrap();
        let mut out = Vec::new();
        for file in &snapshot.table.listing.files {
            let f = File::open(snapshot.table.listing.root.join(file)).unwrap();
            for batch in ParquetRecordBatchReaderBuilder::try_new(f)
                .unwrap()
                .build()
                .unwrap()
            {
                out.extend(
                    batch
                        .unwrap()
                        .column(0)
                        .as_primitive::<Int64Type>()
                        .values(),
                );
            }
        }
        for batch in &snapshot.rows {
            out.extend(batch.column(0).as_primitive::<Int64Type>().values());
        }
        out.sort_unstable();
        out
    }

    struct Root {
        data: tempfile::TempDir,
        state: PathBuf,
    }

    fn root() -> Root {
        let data = tempfile::tempdir().unwrap();
        let state = data.path().join(".ringscan");
        fs::create_dir(&state).unwrap();
        Root { data, state }
    }

    /// A seeded xorshift generator: each call a number below its argument.
    fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
        move |below| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % below
        }
    }

    /// A fresh root opened over a power-cut log, with table `t` ([`schema`], keyed
    /// by `id`) created.
    fn with_table() -> (Root, Arc<PowerCutDir>, Ingest) {
        let root = root();
        let log = Arc::new(PowerCutDir::new());
        let (ingest, _) = open(&root, &log);
        ingest
            .create_table("t", &schema(), &["id".into()], false)
            .unwrap();
        (root, log, ingest)
    }

    fn open(root: &Root, log: &Arc<PowerCutDir>) -> (Ingest, Recovered) {
        let dir: Arc<dyn LogDir> = Arc::clone(log) as Arc<dyn LogDir>;
        Ingest::open_with(root.data.path(), &root.state, dir, IngestConfig::default()).unwrap()
    }

    #[test]
    fn acknowledged_rows_survive_a_power_cut_and_failed_ones_never_appear() {
        let root = root();
        let log = Arc::new(PowerCutDir::new());
        let (ingest, _) = open(&root, &log);
        assert!(ingest
            .create_table("t", &schema(), &["id".into()], false)
            .unwrap());
        insert(&ingest, "t", &[1, 2]).unwrap();
        insert(&ingest, "t", &[3]).unwrap();
        // A write torn by a crash mid-append: refused, not applied.
        log.tear_next_append(5);
        assert!(insert(&ingest, "t", &[4]).is_err());
        assert_eq!(ids(&ingest, "t"), [1, 2, 3]);
        insert(&ingest, "t", &[5]).unwrap();
        log.power_cut();
        drop(ingest);
        let (ingest, recovered) = open(&root, &log);
        assert_eq!(recovered.tables, 1);
        assert_eq!(recovered.records, 3, "{recovered:?}");
        assert_eq!(ids(&ingest, "t"), [1, 2, 3, 5]);
        // The keys came back with the rows.
        let err = insert(&ingest, "t", &[5]).unwrap_err();
        assert!(err.contains("Key (id)=(5) already exists"), "{err}");
    }

    #[test]
    fn a_failed_fdatasync_fails_the_commit_and_every_later_one() {
        let root = root();
        let log = Arc::new(PowerCutDir::new());
        let (ingest, _) = open(&root, &log);
        ingest.create_table("t", &schema(), &[], false).unwrap();
        insert(&ingest, "t", &[1]).unwrap();
        log.fail_next_sync();
        let err = insert(&ingest, "t", &[2]).unwrap_err();
        assert!(err.contains("fdatasync"), "{err}");
        assert!(
            insert(&ingest, "t", &[3]).is_err(),
            "no retry after a failed sync"
        );
        assert_eq!(ids(&ingest, "t"), [1]);
        log.power_cut();
        drop(ingest);
        let (ingest, _) = open(&root, &log);
        assert_eq!(ids(&ingest, "t"), [1]);
        insert(&ingest, "t", &[4]).unwrap();
        assert_eq!(ids(&ingest, "t"), [1, 4]);
    }

    #[test]
    fn each_acknowledged_commit_waited_for_a_sync_and_concurrent_ones_share_them() {
        let root = root();
        let inner: Arc<dyn LogDir> = Arc::new(PowerCutDir::new());
        let counting = Arc::new(CountingDir::new(inner));
        let syncs = counting.syncs();
        let (ingest, _) = Ingest::open_with(
            root.data.path(),
            &root.state,
            counting,
            IngestConfig::default(),
        )
        .unwrap();
        ingest
            .create_table("t", &schema(), &["id".into()], false)
            .unwrap();
        let before = syncs.load(Ordering::Relaxed);
        for i in 0..20 {
            insert(&ingest, "t", &[i]).unwrap();
            // Acknowledged: its sync happened already.
            assert!(syncs.load(Ordering::Relaxed) - before > i as u64);
        }
        let before = syncs.load(Ordering::Relaxed);
        let next = AtomicU64::new(1000);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..50 {
                        let id = next.fetch_add(1, Ordering::Relaxed) as i64;
                        insert(&ingest, "t", &[id]).unwrap();
                    }
                });
            }
        });
        let shared = syncs.load(Ordering::Relaxed) - before;
        assert!(shared < 400, "400 concurrent commits took {shared} syncs");
        assert_eq!(ids(&ingest, "t").len(), 420);
    }

    #[test]
    fn keys_and_not_null_are_checked_and_a_refused_statement_applies_nothing() {
        let (_root, _log, ingest) = with_table();
        insert(&ingest, "t", &[1, 2]).unwrap();
        for (ids_, needle) in [
            (&[3, 1][..], "Key (id)=(1) already exists"),
            (&[7, 8, 7][..], "Key (id)=(7) already exists"),
        ] {
            let err = insert(&ingest, "t", ids_).unwrap_err();
            assert!(err.contains(needle), "{err}");
            assert!(err.contains("\"t_pkey\""), "{err}");
        }
        // The refused statements' other keys are free again.
        insert(&ingest, "t", &[3, 7, 8]).unwrap();
        let nulls = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Int64, true),
                Field::new("v", DataType::Utf8, true),
            ])),
            vec![
                Arc::new(Int64Array::from(vec![Some(9), None])),
                Arc::new(StringArray::from(vec![Some("a"), Some("b")])),
            ],
        )
        .unwrap();
        let err = ingest.prepare("t", vec![nulls], &[]).unwrap_err();
        assert!(
            err.contains("null value in column \"id\"") && err.contains("row 2"),
            "{err}"
        );
        let wrong = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)])),
            vec![Arc::new(Int64Array::from(vec![10]))],
        )
        .unwrap();
        assert!(ingest
            .prepare("t", vec![wrong], &[])
            .unwrap_err()
            .contains("1 columns"));
        assert!(ingest
            .prepare("nope", vec![rows(&[1])], &[])
            .unwrap_err()
            .contains("does not exist"));
        assert_eq!(ids(&ingest, "t"), [1, 2, 3, 7, 8]);
    }

    /// Keys in files are checked by their filters and a read of what those cannot rule
    /// out: every statement is accepted or refused exactly as a set of every key
    /// accepted so far says, across flushes, compactions and reopenings (whose filters
    /// are read from the files), with keys drawn so that half collide.
    #[test]
    fn file_keys_refuse_exactly_what_a_set_of_every_key_refuses() {
        let (root, log, mut ingest) = with_table();
        let mut reference = HashSet::new();
        let mut random = xorshift(0x2545_f491_4f6c_dd1d_u64);
        let (mut refused, mut accepted) = (0, 0);
        for round in 0..60 {
            let n = 1 + random(40) as usize;
            let mut ids: Vec<i64> = (0..n).map(|_| random(3_000) as i64).collect();
            ids.sort_unstable();
            ids.dedup();
            // Shuffled, so that a duplicate is not always the first key.
            for i in (1..ids.len()).rev() {
                ids.swap(i, random(i as u64 + 1) as usize);
            }
            let dup = ids.iter().find(|i| reference.contains(*i)).copied();
            match insert(&ingest, "t", &ids) {
                Ok(_) => {
                    assert_eq!(dup, None, "round {round}: {ids:?} accepted");
                    reference.extend(ids.iter().copied());
                    accepted += 1;
                }
                Err(e) => {
                    assert!(
                        dup.is_some() && e.contains("already exists"),
                        "round {round}: {ids:?} refused: {e}"
                    );
                    let named = ids
                        .iter()
                        .any(|i| reference.contains(i) && e.contains(&format!("Key (id)=({i})")));
                    assert!(named, "round {round}: {e} names no key of {ids:?} taken");
                    refused += 1;
                }
            }
            match round % 10 {
                3 | 5 | 7 => {
                    ingest.flush(true).unwrap();
                }
                8 => {
                    ingest.compact().unwrap();
                }
                9 => {
                    drop(ingest);
                    ingest = open(&root, &log).0;
                }
                _ => {}
            }
        }
        assert!(
            accepted > 10 && refused > 10,
            "{accepted} accepted, {refused} refused"
        );
        let mut expected: Vec<i64> = reference.into_iter().collect();
        expected.sort_unstable();
        assert_eq!(ids(&ingest, "t"), expected);
    }

    /// Keys in memory are kept by fingerprint; with 3-bit fingerprints every key
    /// shares one with an eighth of the others, so each answer rests on the exact
    /// check of a row: of the memtable, of a commit on its way, of the statement itself.
    #[test]
    fn keys_sharing_fingerprints_refuse_exactly_what_a_set_of_every_key_refuses() {
        let (_root, _log, ingest) = with_table();
        let weaken = |ingest: &Ingest| {
            let table = ingest.table("t").unwrap();
            table.fingerprint_mask.store(7, Ordering::Relaxed);
        };
        weaken(&ingest);
        let mut random = xorshift(0x9e37_79b9_7f4a_7c15_u64);
        // One statement at a time, against a set of every key (a truncate empties it).
        let mut reference: HashSet<i64> = HashSet::new();
        let (mut refused, mut accepted) = (0, 0);
        for round in 0..200 {
            // Repeats within a statement too.
            let ids: Vec<i64> = (0..1 + random(12)).map(|_| random(500) as i64).collect();
            let mut seen = HashSet::new();
            let dup = ids
                .iter()
                .any(|i| reference.contains(i) || !seen.insert(*i));
            match insert(&ingest, "t", &ids) {
                Ok(_) => {
                    assert!(!dup, "round {round}: {ids:?} accepted");
                    reference.extend(ids.iter().copied());
                    accepted += 1;
                }
                Err(e) => {
                    assert!(dup && e.contains("already exists"), "round {round}: {e}");
                    refused += 1;
                }
            }
            match round % 50 {
                20 => {
                    ingest.flush(true).unwrap();
                }
                45 => {
                    ingest.truncate("t").unwrap();
                    reference.clear();
                }
                _ => {}
            }
        }
        assert!(
            accepted > 30 && refused > 30,
            "{accepted} accepted, {refused} refused"
        );
        let mut expected: Vec<i64> = reference.iter().copied().collect();
        expected.sort_unstable();
        assert_eq!(ids(&ingest, "t"), expected);
        // A point lookup finds its row, not another of the same fingerprint.
        for id in 0..500 {
            let p = Predicate::compare("id", CmpOp::Eq, Literal::Int(id));
            let s = ingest.snapshot_for("t", false, Some(&p)).unwrap();
            let mem: Vec<i64> = s
                .rows
                .iter()
                .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
                .collect();
            assert!(mem.iter().all(|&m| m == id), "{id}: {mem:?}");
            if !reference.contains(&id) {
                assert!(mem.is_empty(), "{id}: {mem:?}");
            }
        }

        // Four writers at once: commits of one group are checked against each other's
        // rows before any is applied. Whatever the order, no key is taken twice, and a
        // statement is refused only for a key taken (by another or twice by itself).
        ingest.truncate("t").unwrap();
        let ingest = &ingest;
        let outcomes: Vec<(Vec<i64>, Result<(), String>)> = std::thread::scope(|scope| {
            let writers: Vec<_> = (0..4u64)
                .map(|w| {
                    scope.spawn(move || {
                        let mut seed = 0x2545_f491_4f6c_dd1d_u64 ^ ((w + 1) * 0x1234_5678);
                        let mut random = move |below: u64| {
                            seed ^= seed << 13;
                            seed ^= seed >> 7;
                            seed ^= seed << 17;
                            seed % below
                        };
                        let mut out = Vec::new();
                        for round in 0..100 {
                            let ids: Vec<i64> =
                                (0..1 + random(6)).map(|_| random(1_500) as i64).collect();
                            let result = insert(ingest, "t", &ids).map(|_| ());
                            out.push((ids, result));
                            if w == 0 && round % 40 == 39 {
                                ingest.flush(true).unwrap();
                            }
                        }
                        out
                    })
                })
                .collect();
            writers
                .into_iter()
                .flat_map(|w| w.join().unwrap())
                .collect()
        });
        let mut taken: Vec<i64> = outcomes
            .iter()
            .filter(|(_, r)| r.is_ok())
            .flat_map(|(ids, _)| ids.iter().copied())
            .collect();
        taken.sort_unstable();
        assert_eq!(ids(ingest, "t"), taken, "the table holds what was accepted");
        assert!(
            taken.windows(2).all(|w| w[0] != w[1]),
            "a key accepted twice"
        );
        let mut refused = 0;
        for (ids, result) in &outcomes {
            let Err(e) = result else { continue };
            refused += 1;
            let named = ids.iter().any(|i| {
                e.contains(&format!("Key (id)=({i})"))
                    && (taken.binary_search(i).is_ok()
                        || ids.iter().filter(|j| *j == i).count() > 1)
            });
            assert!(named, "{ids:?} refused for no key taken: {e}");
        }
        assert!(
            refused > 10 && taken.len() > 300,
            "{refused} refused, {} taken",
            taken.len()
        );
    }

    /// A flushed file names its float columns that hold no NaN (what the daemon's
    /// pruning trusts in ringscan's files), and only those.
    #[test]
    fn flushed_files_declare_their_float_columns_without_nan() {
        use arrow_array::Float64Array;
        let root = root();
        let log = Arc::new(PowerCutDir::new());
        let (ingest, _) = open(&root, &log);
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("clean", DataType::Float64, true),
            Field::new("dirty", DataType::Float64, true),
        ]));
        ingest
            .create_table("f", &schema, &["id".into()], false)
            .unwrap();
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 3])),
                Arc::new(Float64Array::from(vec![Some(1.5), None, Some(-2.0)])),
                Arc::new(Float64Array::from(vec![Some(1.0), Some(f64::NAN), None])),
            ],
        )
        .unwrap();
        let payload =
            ringscan_ipc::msg::encode_ipc_stream(&schema, std::slice::from_ref(&batch)).unwrap();
        let commit = ingest.prepare("f", vec![batch], &payload).unwrap();
        ingest.commit(commit).unwrap();
        ingest.flush(true).unwrap();
        let snapshot = ingest.snapshot("f", false).unwrap();
        let file = &snapshot.table.listing.files[0];
        let reader = ParquetRecordBatchReaderBuilder::try_new(
            File::open(snapshot.table.listing.root.join(file)).unwrap(),
        )
        .unwrap();
        let meta = reader.metadata().file_metadata();
        assert!(meta.created_by().unwrap().starts_with("ringscan ingest "));
        let declared: Vec<&str> = meta
            .key_value_metadata()
            .unwrap()
            .iter()
            .filter(|kv| kv.key == "ringscan.nan_free")
            .filter_map(|kv| kv.value.as_deref())
            .collect();
        assert_eq!(declared, ["clean"]);
    }

    /// A statement checks its keys against the files before it reaches the log's
    /// writer; a flush in between moves a key it must be refused for from memory into a
    /// file, where the writer finds it.
    #[test]
    fn a_key_flushed_after_a_statement_checked_the_files_is_still_refused() {
        let (_root, _log, ingest) = with_table();
        insert(&ingest, "t", &[1]).unwrap();
        ingest.flush(true).unwrap();
        let batch = rows(&[4, 5]);
        let payload =
            ringscan_ipc::msg::encode_ipc_stream(&schema(), std::slice::from_ref(&batch)).unwrap();
        let late = ingest.prepare("t", vec![batch], &payload).unwrap();
        insert(&ingest, "t", &[5]).unwrap();
        ingest.flush(true).unwrap();
        let err = ingest.commit(late).unwrap_err();
        assert!(err.contains("Key (id)=(5) already exists"), "{err}");
        assert_eq!(ids(&ingest, "t"), [1, 5]);
        insert(&ingest, "t", &[4]).unwrap();
        assert_eq!(ids(&ingest, "t"), [1, 4, 5]);
    }

    /// `ids` as a part read off the socket.
    fn part(table: &str, ids: &[i64]) -> InsertRecord {
        let payload = ringscan_ipc::msg::encode_ipc_stream(&schema(), &[rows(ids)]).unwrap();
        let mut record = InsertRecord::new(table, payload.len());
        record.stream_buf().extend_from_slice(&payload);
        record
    }

    /// Stages parts `parts` (each a list of ids) of statement 1 into `t`.
    fn stage_all(ingest: &Ingest, parts: &[&[i64]]) -> Result<Option<Staged>, String> {
        let mut staged = None;
        for (n, ids) in parts.iter().enumerate() {
            ingest.stage(&mut staged, "t", (1, n as u64), part("t", ids))?;
        }
        Ok(staged)
    }

    /// The hidden files a statement stages in the table's directory.
    fn temp_files(root: &Root) -> Vec<String> {
        fs::read_dir(root.data.path().join("t"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    #[test]
    fn a_staged_statement_is_invisible_until_adopted_then_whole_and_durable() {
        let (root, log, ingest) = with_table();
        insert(&ingest, "t", &[1, 2]).unwrap();
        // Parts out of key order (sorted when written), empty, and in key order.
        let staged = stage_all(&ingest, &[&[12, 10, 11], &[], &[14, 13], &[15, 16]]).unwrap();
        let paths = staged.as_ref().unwrap().paths();
        assert_eq!(paths.len(), 3, "a part without rows makes no file");
        assert!(paths.iter().all(|p| p.exists()));
        assert_eq!(temp_files(&root).len(), 3);
        assert_eq!(ids(&ingest, "t"), [1, 2], "staged rows are not seen");
        assert_eq!(ingest.adopt(staged, "t", (1, 4)).unwrap(), 7);
        assert_eq!(ids(&ingest, "t"), [1, 2, 10, 11, 12, 13, 14, 15, 16]);
        assert!(insert(&ingest, "t", &[16])
            .unwrap_err()
            .contains("(id)=(16)"));
        assert!(temp_files(&root).is_empty());
        // The adopted files are the table's: a power cut and a restart keep them, and
        // their keys refuse a duplicate at once and after the restart.
        assert!(insert(&ingest, "t", &[13])
            .unwrap_err()
            .contains("(id)=(13)"));
        drop(ingest);
        log.power_cut();
        let (ingest, _) = open(&root, &log);
        assert_eq!(ids(&ingest, "t"), [1, 2, 10, 11, 12, 13, 14, 15, 16]);
        assert!(insert(&ingest, "t", &[10])
            .unwrap_err()
            .contains("(id)=(10)"));
        insert(&ingest, "t", &[17]).unwrap();
    }

    #[test]
    fn staged_keys_are_checked_within_parts_across_them_and_against_the_table() {
        let (root, _log, ingest) = with_table();
        insert(&ingest, "t", &[1]).unwrap();
        ingest.flush(true).unwrap();
        insert(&ingest, "t", &[2]).unwrap();
        let cases: [(&[&[i64]], i64); 4] = [
            (&[&[10, 11, 10]], 10),
            (&[&[10, 10, 11]], 10),
            (&[&[10, 11], &[12, 11]], 11),
            (&[&[10], &[1]], 1),
        ];
        for (parts, key) in cases {
            let err = stage_all(&ingest, parts).unwrap_err();
            assert!(
                err.contains(&format!("Key (id)=({key}) already exists")),
                "{err}"
            );
            assert!(
                temp_files(&root).is_empty(),
                "a refused part leaves its files"
            );
        }
        // Keys that reach the table while the statement is staged: in memory, in a
        // commit, and flushed into a new file.
        for late in [20i64, 21, 22] {
            let staged = stage_all(&ingest, &[&[late + 100, late], &[late + 200]]).unwrap();
            insert(&ingest, "t", &[late]).unwrap();
            if late == 22 {
                ingest.flush(true).unwrap();
            }
            let err = ingest.adopt(staged, "t", (1, 2)).unwrap_err();
            assert!(
                err.contains(&format!("Key (id)=({late}) already exists")),
                "{err}"
            );
            assert!(temp_files(&root).is_empty());
        }
        assert_eq!(ids(&ingest, "t"), [1, 2, 20, 21, 22]);
        // Through a flush that does not touch its keys, it commits.
        let staged = stage_all(&ingest, &[&[40, 41]]).unwrap();
        insert(&ingest, "t", &[42]).unwrap();
        ingest.flush(true).unwrap();
        assert_eq!(ingest.adopt(staged, "t", (1, 1)).unwrap(), 2);
        assert_eq!(ids(&ingest, "t"), [1, 2, 20, 21, 22, 40, 41, 42]);
    }

    #[test]
    fn parts_out_of_turn_or_abandoned_apply_nothing_and_a_crash_leaves_no_trace() {
        let (root, log, ingest) = with_table();
        let mut staged = None;
        let err = ingest
            .stage(&mut staged, "t", (1, 1), part("t", &[1]))
            .unwrap_err();
        assert!(err.contains("staged rows are gone"), "{err}");
        // Parts counted short at the end, or a statement replaced by another.
        let staged = stage_all(&ingest, &[&[1], &[2]]).unwrap();
        assert!(ingest.adopt(staged, "t", (1, 3)).is_err());
        let mut staged = stage_all(&ingest, &[&[1], &[2]]).unwrap();
        ingest
            .stage(&mut staged, "t", (2, 0), part("t", &[3]))
            .unwrap();
        assert_eq!(
            temp_files(&root).len(),
            1,
            "the replaced statement's files stay"
        );
        assert!(ingest.adopt(staged, "t", (1, 2)).is_err());
        assert!(temp_files(&root).is_empty());
        assert!(ids(&ingest, "t").is_empty());
        // A crash with parts staged: recovery removes them.
        std::mem::forget(stage_all(&ingest, &[&[5], &[6]]).unwrap());
        assert_eq!(temp_files(&root).len(), 2);
        drop(ingest);
        log.power_cut();
        let (ingest, recovered) = open(&root, &log);
        assert_eq!(recovered.orphans_removed, 2);
        assert!(temp_files(&root).is_empty());
        assert!(ids(&ingest, "t").is_empty());
        // A dropped table takes its staged statement with it.
        let staged = stage_all(&ingest, &[&[7]]).unwrap();
        ingest.drop_table("t", false).unwrap();
        let err = ingest.adopt(staged, "t", (1, 1)).unwrap_err();
        assert!(err.contains("dropped") || err.contains("gone"), "{err}");
    }

    #[test]
    fn a_flush_moves_rows_into_a_sorted_file_and_recovery_replays_nothing_twice() {
        let (root, log, ingest) = with_table();
        insert(&ingest, "t", &[5, 3]).unwrap();
        insert(&ingest, "t", &[9, 1]).unwrap();
        assert_eq!(ingest.flush(true).unwrap(), 4);
        insert(&ingest, "t", &[4]).unwrap();
        let snapshot = ingest.snapshot("t", true).unwrap();
        assert_eq!(snapshot.table.listing.files.len(), 1);
        assert_eq!(
            snapshot
                .rows
                .iter()
                .map(RecordBatch::num_rows)
                .sum::<usize>(),
            1
        );
        // The file is sorted by the key, with a bloom filter on it, and names its sort.
        let path = snapshot
            .table
            .listing
            .root
            .join(&snapshot.table.listing.files[0]);
        let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap()).unwrap();
        let rg = builder.metadata().row_group(0);
        assert!(rg.column(0).bloom_filter_offset().is_some());
        assert_eq!(rg.sorting_columns().map(Vec::len), Some(1));
        let batch = builder.build().unwrap().next().unwrap().unwrap();
        assert_eq!(
            batch.column(0).as_primitive::<Int64Type>().values(),
            &[1, 3, 5, 9]
        );
        log.power_cut();
        drop(ingest);
        let (ingest, recovered) = open(&root, &log);
        assert_eq!(recovered.records, 1, "{recovered:?}");
        assert_eq!(ids(&ingest, "t"), [1, 3, 4, 5, 9]);
        assert!(insert(&ingest, "t", &[9]).unwrap_err().contains("(id)=(9)"));
    }

    #[test]
    fn a_whole_key_finds_its_row_in_memory_or_the_files_or_nowhere() {
        let (root, log, ingest) = with_table();
        insert(&ingest, "t", &[1, 2]).unwrap();
        ingest.flush(true).unwrap();
        insert(&ingest, "t", &[3]).unwrap();
        insert(&ingest, "t", &[4, 5, 6]).unwrap();
        let eq = |id: i64| Predicate::compare("id", CmpOp::Eq, Literal::Int(id));
        let look = |p: &Predicate| {
            let s = ingest.snapshot_for("t", false, Some(p)).unwrap();
            let mem: Vec<i64> = s
                .rows
                .iter()
                .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
                .collect();
            (mem, s.table.listing.files.len())
        };
        assert_eq!(
            look(&eq(5)),
            (vec![5], 0),
            "in memory: that row alone, no file"
        );
        assert_eq!(look(&eq(3)), (vec![3], 0));
        assert_eq!(look(&eq(2)), (vec![], 1), "in a file: the files alone");
        assert_eq!(look(&eq(99)), (vec![], 0), "nowhere: nothing to read");
        let with_more = Predicate::And(vec![
            Predicate::compare("v", CmpOp::Eq, Literal::Utf8("x".into())),
            eq(6),
        ]);
        assert_eq!(look(&with_more), (vec![6], 0));
        // Not a whole key by an exact value: everything, as without a predicate.
        let range = Predicate::compare("id", CmpOp::Gt, Literal::Int(1));
        assert_eq!(look(&range), (vec![3, 4, 5, 6], 1));
        let float = Predicate::compare("id", CmpOp::Eq, Literal::Float(5.0));
        assert_eq!(look(&float).0.len(), 4);
        // After a flush the memtable places point into the file.
        ingest.flush(true).unwrap();
        assert_eq!(look(&eq(5)), (vec![], 2));
        // Recovery places replayed rows too.
        insert(&ingest, "t", &[7]).unwrap();
        log.power_cut();
        drop(ingest);
        let (ingest, _) = open(&root, &log);
        let s = ingest.snapshot_for("t", false, Some(&eq(7))).unwrap();
        assert_eq!(s.rows.len(), 1);
        assert!(s.table.listing.files.is_empty());
    }

    #[test]
    fn a_log_removed_by_hand_restarts_after_the_manifests_positions() {
        let (root, _log, ingest) = with_table();
        insert(&ingest, "t", &[1]).unwrap();
        insert(&ingest, "t", &[2]).unwrap();
        ingest.flush(true).unwrap();
        drop(ingest);
        // The log directory emptied: new records must not reuse positions the
        // manifest covers (recovery would skip them as flushed).
        let empty = Arc::new(PowerCutDir::new());
        let (ingest, _) = open(&root, &empty);
        let (_, lsn) = insert(&ingest, "t", &[3]).unwrap();
        assert!(lsn > 2, "{lsn}");
        empty.power_cut();
        drop(ingest);
        let (ingest, _) = open(&root, &empty);
        assert_eq!(ids(&ingest, "t"), [1, 2, 3]);
        drop(ingest);
        // A log that ends before the manifests' positions lost segments: refused.
        let behind = Arc::new(PowerCutDir::new());
        {
            let dir: Arc<dyn LogDir> = Arc::clone(&behind) as Arc<dyn LogDir>;
            let (wal, _) = Wal::open(
                dir,
                Writer {
                    tables: Arc::new(Tables {
                        data_dir: root.data.path().to_path_buf(),
                        map: RwLock::new(HashMap::new()),
                        applied_lsn: AtomicU64::new(0),
                        version: Version::create(&root.state.join("v")).unwrap(),
                    }),
                },
                |_, _| Ok(()),
            )
            .unwrap();
            drop(wal);
        }
        let dir: Arc<dyn LogDir> = Arc::clone(&behind) as Arc<dyn LogDir>;
        // An empty first segment: the log "ends" at 0, behind the manifest's position.
        let err = Ingest::open_with(root.data.path(), &root.state, dir, IngestConfig::default())
            .unwrap_err();
        assert!(err.contains("segments after it were lost"), "{err}");
    }

    #[test]
    fn small_files_are_compacted_into_one_sorted_file_and_the_old_ones_retired() {
        let (root, log, ingest) = with_table();
        for i in 0..COMPACT_MIN_FILES as i64 {
            insert(&ingest, "t", &[100 - i, i]).unwrap();
            ingest.flush(true).unwrap();
        }
        insert(&ingest, "t", &[500]).unwrap();
        let before = ids(&ingest, "t");
        assert_eq!(
            ingest
                .snapshot("t", false)
                .unwrap()
                .table
                .listing
                .files
                .len(),
            COMPACT_MIN_FILES
        );
        assert_eq!(ingest.compact().unwrap(), COMPACT_MIN_FILES);
        let snapshot = ingest.snapshot("t", false).unwrap();
        assert_eq!(snapshot.table.listing.files.len(), 1);
        assert_eq!(ids(&ingest, "t"), before);
        // One file, sorted by the key.
        let path = snapshot
            .table
            .listing
            .root
            .join(&snapshot.table.listing.files[0]);
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap())
            .unwrap()
            .build()
            .unwrap();
        let in_file: Vec<i64> = reader
            .flat_map(|b| {
                b.unwrap()
                    .column(0)
                    .as_primitive::<Int64Type>()
                    .values()
                    .to_vec()
            })
            .collect();
        assert!(in_file.windows(2).all(|w| w[0] < w[1]), "{in_file:?}");
        // The replaced files stay until retired; nothing new to compact.
        let dir = root.data.path().join("t");
        let parquet = || {
            fs::read_dir(&dir)
                .unwrap()
                .filter(|e| {
                    e.as_ref()
                        .unwrap()
                        .file_name()
                        .to_string_lossy()
                        .ends_with(".parquet")
                })
                .count()
        };
        assert_eq!(parquet(), COMPACT_MIN_FILES + 1);
        assert_eq!(ingest.compact().unwrap(), 0);
        assert!(insert(&ingest, "t", &[3]).unwrap_err().contains("(id)=(3)"));
        ingest.close().unwrap();
        // The compacted file and the memtable's flush at the stop; the retired gone.
        assert_eq!(parquet(), 2, "retired files removed at a clean stop");
        log.power_cut();
        drop(ingest);
        let (ingest, _) = open(&root, &log);
        assert_eq!(ids(&ingest, "t"), before);
    }

    /// A float column gets a dictionary where its values repeat (prices in cents), not
    /// where they are near-unique; and the file reads back the same either way.
    #[test]
    fn float_columns_get_a_dictionary_only_where_their_values_repeat() {
        use arrow_array::Float64Array;
        let mut next = xorshift(7);
        let cents: Vec<f64> = (0..10_000).map(|_| (next(5_000) as f64) / 100.0).collect();
        let unique: Vec<f64> = (0..10_000)
            .map(|i| f64::from(i) * 1.000_001 + 0.5)
            .collect();
        assert!(floats_repeat(&Float64Array::from(cents.clone())));
        assert!(!floats_repeat(&Float64Array::from(unique.clone())));
        assert!(!floats_repeat(&Int64Array::from(vec![1i64; 1000])));
        assert!(
            !floats_repeat(&Float64Array::from(vec![1.0; 10])),
            "too few to tell"
        );
        let schema = Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("cents", DataType::Float64, true),
            Field::new("unique", DataType::Float64, true),
        ]);
        let root = root();
        let log = Arc::new(PowerCutDir::new());
        let (ingest, _) = open(&root, &log);
        ingest
            .create_table("f", &schema, &["id".into()], false)
            .unwrap();
        let batch = RecordBatch::try_new(
            Arc::new(schema.clone()),
            vec![
                Arc::new(Int64Array::from_iter_values(0..10_000)),
                Arc::new(Float64Array::from(cents.clone())),
                Arc::new(Float64Array::from(unique.clone())),
            ],
        )
        .unwrap();
        let payload =
            ringscan_ipc::msg::encode_ipc_stream(&schema, std::slice::from_ref(&batch)).unwrap();
        let commit = ingest.prepare("f", vec![batch.clone()], &payload).unwrap();
        ingest.commit(commit).unwrap();
        ingest.flush(true).unwrap();
        let snapshot = ingest.snapshot("f", false).unwrap();
        let path = root
            .data
            .path()
            .join("f")
            .join(&snapshot.table.listing.files[0]);
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap()).unwrap();
        let group = reader.metadata().row_group(0).clone();
        let dictionary = |c: usize| {
            group
                .column(c)
                .encodings()
                .any(|e| e == parquet::basic::Encoding::RLE_DICTIONARY)
        };
        assert!(dictionary(1), "repeating prices without a dictionary");
        assert!(!dictionary(2), "near-unique floats with a dictionary");
        let back: Vec<RecordBatch> = reader.build().unwrap().map(Result::unwrap).collect();
        let back = arrow_select::concat::concat_batches(&back[0].schema(), &back).unwrap();
        assert_eq!(back.columns(), batch.columns());
    }

    /// A key of two columns: the flushed file's row groups end where the first column
    /// changes (once they hold 1/16 of a full group and one value of it), so that each
    /// long run's row groups hold one value and prune by the whole key.
    #[test]
    fn row_groups_of_a_two_column_key_end_where_its_first_column_changes() {
        let schema = Schema::new(vec![
            Field::new("sym", DataType::Utf8, false),
            Field::new("ts", DataType::Int64, false),
        ]);
        let runs: [(&str, i64); 5] = [
            ("a", 70_000),
            ("b", 5_000),
            ("c", 3_000),
            ("d", 140_000),
            ("e", 100),
        ];
        let mut rows: Vec<(&str, i64)> = runs
            .iter()
            .flat_map(|&(sym, n)| (0..n).map(move |ts| (sym, ts * 7)))
            .collect();
        // Inserted out of order, in three statements.
        let mut next = xorshift(11);
        for i in (1..rows.len()).rev() {
            rows.swap(i, next(i as u64 + 1) as usize);
        }
        let root = root();
        let log = Arc::new(PowerCutDir::new());
        let (ingest, _) = open(&root, &log);
        ingest
            .create_table("k", &schema, &["sym".into(), "ts".into()], false)
            .unwrap();
        for chunk in rows.chunks(rows.len() / 3 + 1) {
            let batch = RecordBatch::try_new(
                Arc::new(schema.clone()),
                vec![
                    Arc::new(StringArray::from_iter_values(chunk.iter().map(|r| r.0))),
                    Arc::new(Int64Array::from_iter_values(chunk.iter().map(|r| r.1))),
                ],
            )
            .unwrap();
            let payload =
                ringscan_ipc::msg::encode_ipc_stream(&schema, std::slice::from_ref(&batch))
                    .unwrap();
            let commit = ingest.prepare("k", vec![batch], &payload).unwrap();
            ingest.commit(commit).unwrap();
        }
        ingest.flush(true).unwrap();
        let snapshot = ingest.snapshot("k", false).unwrap();
        assert_eq!(snapshot.table.listing.files.len(), 1);
        let path = snapshot
            .table
            .listing
            .root
            .join(&snapshot.table.listing.files[0]);
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap()).unwrap();
        let groups: Vec<(i64, String, String)> = reader
            .metadata()
            .row_groups()
            .iter()
            .map(|g| {
                let parquet::file::statistics::Statistics::ByteArray(s) =
                    g.column(0).statistics().unwrap()
                else {
                    panic!("sym statistics")
                };
                let text = |v: Option<&parquet::data_type::ByteArray>| {
                    String::from_utf8(v.unwrap().data().to_vec()).unwrap()
                };
                (g.num_rows(), text(s.min_opt()), text(s.max_opt()))
            })
            .collect();
        let one = |n: i64, v: &str| (n, v.to_owned(), v.to_owned());
        assert_eq!(
            groups,
            [
                one(65_536, "a"),
                one(4_464, "a"),
                one(5_000, "b"),
                // c's 3,000 rows are too few for a group of their own.
                (65_536, "c".to_owned(), "d".to_owned()),
                one(65_536, "d"),
                one(11_928, "d"),
                one(100, "e"),
            ]
        );
        // The rows, whole and in key order.
        let mut expected = rows.clone();
        expected.sort_unstable();
        let back: Vec<(String, i64)> = reader
            .build()
            .unwrap()
            .flat_map(|b| {
                let b = b.unwrap();
                let sym = b.column(0).as_string::<i32>().clone();
                let ts = b.column(1).as_primitive::<Int64Type>().clone();
                (0..b.num_rows())
                    .map(|i| (sym.value(i).to_owned(), ts.value(i)))
                    .collect::<Vec<_>>()
            })
            .collect();
        let expected: Vec<(String, i64)> = expected
            .into_iter()
            .map(|(s, t)| (s.to_owned(), t))
            .collect();
        assert_eq!(back, expected);
    }

    /// The compaction's batch-at-a-time merge against the naive answer (the sorted union
    /// of the rows), over files whose keys interleave at random and that span many of
    /// its read and write batches.
    #[test]
    fn a_merge_of_large_interleaved_files_equals_the_sorted_union() {
        let (root, _log, ingest) = with_table();
        let files = COMPACT_MIN_FILES as i64;
        let per_file = 20_000i64;
        let mut keys: Vec<i64> = (0..files * per_file).collect();
        let mut next = xorshift(0x5eed_cafe);
        for i in (1..keys.len()).rev() {
            let j = usize::try_from(next(i as u64 + 1)).unwrap();
            keys.swap(i, j);
        }
        for chunk in keys.chunks(usize::try_from(per_file).unwrap()) {
            insert(&ingest, "t", chunk).unwrap();
            ingest.flush(true).unwrap();
        }
        assert_eq!(ingest.compact().unwrap(), COMPACT_MIN_FILES);
        let snapshot = ingest.snapshot("t", false).unwrap();
        assert_eq!(snapshot.table.listing.files.len(), 1);
        let path = root
            .data
            .path()
            .join("t")
            .join(&snapshot.table.listing.files[0]);
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).unwrap())
            .unwrap()
            .build()
            .unwrap();
        let mut got = Vec::new();
        for batch in reader {
            let batch = batch.unwrap();
            let ids = batch.column(0).as_primitive::<Int64Type>();
            let values = batch.column(1).as_string::<i32>();
            for (id, value) in ids.values().iter().zip(values.iter()) {
                assert_eq!(
                    value,
                    Some(format!("v{id}").as_str()),
                    "a row's columns came apart"
                );
                got.push(*id);
            }
        }
        keys.sort_unstable();
        assert_eq!(got, keys);
    }

    #[test]
    fn a_scan_during_flushes_sees_every_acknowledged_row_once() {
        let (_root, _log, ingest) = with_table();
        let acknowledged = AtomicU64::new(0);
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                for id in 0..400 {
                    insert(&ingest, "t", &[id]).unwrap();
                    acknowledged.store(id as u64 + 1, Ordering::Release);
                }
                done.store(true, Ordering::Release);
            });
            s.spawn(|| {
                while !done.load(Ordering::Acquire) {
                    ingest.flush(true).unwrap();
                }
            });
            while !done.load(Ordering::Acquire) {
                let before = acknowledged.load(Ordering::Acquire) as i64;
                let seen = ids(&ingest, "t");
                let mut unique = seen.clone();
                unique.dedup();
                assert_eq!(unique.len(), seen.len(), "a row twice: {seen:?}");
                // A prefix of the ids, holding at least every one acknowledged before.
                assert!(seen.iter().copied().eq(0..seen.len() as i64), "{seen:?}");
                assert!(seen.len() as i64 >= before, "{} < {before}", seen.len());
            }
        });
        assert_eq!(ids(&ingest, "t").len(), 400);
    }

    #[test]
    fn a_flush_that_died_before_its_manifest_leaves_no_trace() {
        let root = root();
        let log = Arc::new(PowerCutDir::new());
        let (ingest, _) = open(&root, &log);
        ingest.create_table("t", &schema(), &[], false).unwrap();
        insert(&ingest, "t", &[1, 2]).unwrap();
        drop(ingest);
        // What a flush leaves when it dies between its file and its manifest.
        let dir = root.data.path().join("t");
        fs::write(dir.join("part-00000000000000000001.parquet"), b"half").unwrap();
        fs::write(dir.join(".part-00000000000000000001.parquet.tmp"), b"half").unwrap();
        let (ingest, recovered) = open(&root, &log);
        assert_eq!(recovered.orphans_removed, 2);
        assert_eq!(ids(&ingest, "t"), [1, 2]);
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1, "only the manifest");
    }

    #[test]
    fn truncate_and_drop_survive_recovery() {
        let (root, log, ingest) = with_table();
        ingest.create_table("u", &schema(), &[], false).unwrap();
        assert!(!ingest.create_table("u", &schema(), &[], true).unwrap());
        assert!(ingest
            .create_table("u", &schema(), &[], false)
            .unwrap_err()
            .contains("already exists"));
        insert(&ingest, "t", &[1]).unwrap();
        ingest.flush(true).unwrap();
        insert(&ingest, "t", &[2]).unwrap();
        insert(&ingest, "u", &[1]).unwrap();
        ingest.truncate("t").unwrap();
        insert(&ingest, "t", &[1]).unwrap();
        assert!(ingest.drop_table("u", false).unwrap());
        assert!(!ingest.drop_table("u", true).unwrap());
        // A new table of the dropped one's name: the old rows do not come back.
        ingest.create_table("u", &schema(), &[], false).unwrap();
        log.power_cut();
        drop(ingest);
        let (ingest, _) = open(&root, &log);
        assert_eq!(ids(&ingest, "t"), [1]);
        assert_eq!(ids(&ingest, "u"), Vec::<i64>::new());
        for bad in ["", ".x", "a/b", "../x", "_x"] {
            assert!(
                ingest.create_table(bad, &schema(), &[], false).is_err(),
                "{bad}"
            );
        }
    }
}
