//! The scan path: files in, pruned, decoded, filtered and projected Arrow batches out.
//!
//! Planning (`plan`), on the calling thread, file by file as the pipeline needs work:
//! partition pruning from the hive path; the footer from the [`MetadataCache`]; the
//! file's access plan (row-group pruning by statistics then bloom filters, page pruning
//! into a `RowSelection`); one task per surviving row group. A row group whose statistics
//! prove that every row passes the predicate (`Verdict::Always`) skips the bloom
//! filters, the page index and the predicate: it reads its output columns whole, as an
//! unfiltered scan does (from object storage, in one grouped read from the start).
//!
//! Execution, on a small pool of worker threads: each task reads the byte ranges of the
//! column chunks it needs (only the surviving pages) through a [`ByteRangeSource`]
//! (positional reads for local files, [`LocalFile`], or zero-copy slices of a memory map,
//! [`MappedFile`], safe when the file is truncated under it: see [`IoMode`]), decodes them, evaluates the
//! predicate with Arrow kernels (SQL three-valued logic: only TRUE rows pass) and decodes
//! the other output columns late, only for passing rows, when that pays (see `task`:
//! `fetch`, `decode`, `dedupe` and the phases in between). Every page header is vetted
//! by ringscan's own bounded Thrift walk before the parquet crate reads it
//! (`page_header`, `thrift_walk`): the crate spins or allocates on what a hostile one
//! claims.
//! At most `threads + prefetch_row_groups` tasks, and about `prefetch_bytes` of decoded
//! data, are in flight, so reading and decoding row group k+1 overlaps handing row group
//! k to the sink. Each task streams its batches to the coordinator as they are decoded,
//! over a channel of a few batches, so a row group's worth of decoded memory is never
//! live at once: the plain reader's footprint, and no fresh pages to fault in per row
//! group (this took the one-thread full scan of 10M rows from 1.35x parquet's plain
//! reader to 1.04-1.25x, measured under load).
//!
//! Batches go to the sink in file order and row order; a limit stops scheduling once
//! met, `Ok(false)` from the sink or the cancel flag stops the scan. The summary reports
//! what was pruned (by which mechanism) and read.

mod cache;
mod columns;
mod derived;
mod dynamic;
mod error;
mod file;
mod filter;
mod page_header;
mod page_index;
mod plan;
mod source;
mod task;
mod thrift_walk;

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use ringscan_ipc::scan_data::{Predicate, ScanSummary};

pub use cache::{CacheStats, MetadataCache};
pub use columns::{ColumnCache, ColumnCacheStats};
pub use dynamic::DynamicFilter;
pub use error::ScanError;
pub use page_index::{IndexKind, MAX_PAGE_INDEX_BYTES};
pub use source::{ByteRangeSource, IoMode, LocalFile, MappedFile};

use crate::hive::PartitionTypes;
use crate::prune::{FilePruner, Verdict};
pub(crate) use file::Lookup;
pub(crate) use plan::open_object;
use plan::RgTask;
use task::{Exec, TaskOutput};

/// A task's file and how it is read.
type TaskFile = (PathBuf, Arc<dyn ByteRangeSource>);

/// Whether to decode the non-predicate output columns only for the rows that passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LateMaterialization {
    /// Per row group, from how many rows passed and in how many runs.
    #[default]
    Auto,
    /// Always (when there are such columns).
    Always,
    /// Never: decode every output column for every page-selected row, then filter.
    Never,
}

/// Rows per batch unless told otherwise.
pub const DEFAULT_BATCH_SIZE: usize = 8192;
/// Row groups fetched ahead of the one being handed over, beyond one per thread.
pub const DEFAULT_PREFETCH_ROW_GROUPS: usize = 2;
/// Decoded bytes (estimated) in flight at most, unless one row group alone is larger.
pub const DEFAULT_PREFETCH_BYTES: usize = 256 << 20;
/// The most row groups a scan of remote files has in flight (fetching, fetched, or
/// decoding): its read-ahead, sized to the store's latency (see [`remote_depth`]),
/// stops here (and at `prefetch_bytes`).
pub const MAX_REMOTE_IN_FLIGHT: usize = 64;
/// A row group's decoding time assumed before any was measured, and the least one
/// counted (microseconds): small, so that a scan reads ahead enough from its start.
const MIN_TASK_US: u64 = 500;

/// How many row groups a scan of remote files keeps in flight: enough that the
/// decoders never wait for a request, `threads × latency / decode time` beyond the
/// local depth (`base`), from the store's recent request latency and the mean decoding
/// time of the scan's row groups so far. The local depth without a measured latency.
fn remote_depth(base: usize, threads: usize, latency: Option<Duration>, task_us: u64) -> usize {
    let Some(latency) = latency else {
        return base;
    };
    let latency_us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
    let ahead = latency_us
        .saturating_mul(threads as u64)
        .div_ceil(task_us.max(MIN_TASK_US));
    base.saturating_add(usize::try_from(ahead).unwrap_or(usize::MAX))
        .min(MAX_REMOTE_IN_FLIGHT.max(base))
}

/// What tells a running scan to stop (see [`ScanSpec::cancel`]). Checked by the scan's
/// threads between row groups and pages, so cheap to ask.
pub trait Cancel: Sync {
    /// Whether the scan should stop now.
    fn cancelled(&self) -> bool;
}

impl std::fmt::Debug for dyn Cancel + '_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("dyn Cancel")
    }
}

impl Cancel for AtomicBool {
    fn cancelled(&self) -> bool {
        self.load(Ordering::Relaxed)
    }
}

/// What to scan. Build with [`ScanSpec::new`] and the `with_*` setters.
#[derive(Debug, Clone, Copy)]
pub struct ScanSpec<'a> {
    /// The table's root directory: partition values come from the path of each file
    /// relative to it (a file outside it has none).
    pub table_root: &'a Path,
    /// The files, in scan order; relative paths are taken relative to `table_root`.
    pub files: &'a [PathBuf],
    /// Columns to return, in order (file or partition columns); `None`: every file
    /// column, then the partition columns.
    pub projection: Option<&'a [String]>,
    /// Rows to return: those for which it is TRUE; `None`: all.
    pub predicate: Option<&'a Predicate>,
    /// Stop after this many rows (counted after `offset`).
    pub limit: Option<u64>,
    /// Skip this many matching rows, in scan order, before emitting any. Unfiltered
    /// scans skip whole row groups by their row counts without reading them, and the
    /// first rows of the next one through a row selection.
    pub offset: u64,
    /// Rows per decoded batch (at least 1).
    pub batch_size: usize,
    /// Worker threads decoding row groups (at least 1).
    pub threads: usize,
    /// Row groups in flight beyond one per thread.
    pub prefetch_row_groups: usize,
    /// Estimated decoded bytes in flight at most (one row group always may be).
    pub prefetch_bytes: usize,
    /// Late materialization policy.
    pub late_materialization: LateMaterialization,
    /// Only distinct rows are wanted: each row group sends a row once (the first
    /// occurrence; string columns are read as dictionaries, so that most duplicates
    /// are dropped by their dictionary keys before any string is built).
    pub distinct: bool,
    /// Consulted before scheduling each row group, for pruning only.
    pub dynamic_filter: Option<&'a DynamicFilter>,
    /// Says when the caller wants the scan stopped ([`ScanError::Cancelled`]): a flag
    /// it raises, or anything else that can say so.
    pub cancel: Option<&'a dyn Cancel>,
    /// How local files are read.
    pub io: IoMode,
    /// The types of the hive partition columns (the table's, from
    /// [`table::resolve`](crate::table::resolve)); `None`: inferred from `files`.
    pub partition_types: Option<&'a PartitionTypes>,
    /// Versions of local files as a `stat` of their path (the key, as the scan joins
    /// it: `table_root` and the file) showed them while this scan was being set up
    /// (the listing it resolved): a file kept open at that version is read without
    /// another `stat`. `None`, or a file it lacks: stat it.
    pub seen: Option<&'a SeenVersions>,
}

/// Versions of local files seen by a `stat` just now, by path ([`ScanSpec::seen`]).
pub type SeenVersions = std::collections::HashMap<PathBuf, ringscan_ipc::msg::FileVersion>;

impl<'a> ScanSpec<'a> {
    /// Every row and column of `files`; batches of [`DEFAULT_BATCH_SIZE`] rows; threads:
    /// the available parallelism, at most 4.
    pub fn new(table_root: &'a Path, files: &'a [PathBuf]) -> Self {
        // Asked once per process: the standard library reads the cgroup's CPU quota
        // files each time, which was 8% of the daemon's time on a fully pruned query.
        static PARALLELISM: OnceLock<usize> = OnceLock::new();
        let threads = *PARALLELISM.get_or_init(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
                .min(4)
        });
        Self {
            table_root,
            files,
            projection: None,
            predicate: None,
            limit: None,
            offset: 0,
            batch_size: DEFAULT_BATCH_SIZE,
            threads,
            seen: None,
            prefetch_row_groups: DEFAULT_PREFETCH_ROW_GROUPS,
            prefetch_bytes: DEFAULT_PREFETCH_BYTES,
            late_materialization: LateMaterialization::Auto,
            distinct: false,
            dynamic_filter: None,
            cancel: None,
            io: IoMode::default(),
            partition_types: None,
        }
    }

    /// Sets [`projection`](Self::projection).
    pub fn with_projection(mut self, projection: Option<&'a [String]>) -> Self {
        self.projection = projection;
        self
    }

    /// Sets [`predicate`](Self::predicate).
    pub fn with_predicate(mut self, predicate: Option<&'a Predicate>) -> Self {
        self.predicate = predicate;
        self
    }

    /// Sets [`limit`](Self::limit).
    pub fn with_limit(mut self, limit: Option<u64>) -> Self {
        self.limit = limit;
        self
    }

    /// Sets [`offset`](Self::offset).
    pub fn with_offset(mut self, offset: u64) -> Self {
        self.offset = offset;
        self
    }

    /// Sets [`batch_size`](Self::batch_size).
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// Sets [`threads`](Self::threads).
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// Sets [`prefetch_row_groups`](Self::prefetch_row_groups) and
    /// [`prefetch_bytes`](Self::prefetch_bytes).
    pub fn with_prefetch(mut self, row_groups: usize, bytes: usize) -> Self {
        self.prefetch_row_groups = row_groups;
        self.prefetch_bytes = bytes;
        self
    }

    /// Sets [`late_materialization`](Self::late_materialization).
    pub fn with_late_materialization(mut self, late: LateMaterialization) -> Self {
        self.late_materialization = late;
        self
    }

    /// Sets [`distinct`](Self::distinct).
    pub fn with_distinct(mut self, distinct: bool) -> Self {
        self.distinct = distinct;
        self
    }

    /// Sets [`dynamic_filter`](Self::dynamic_filter).
    pub fn with_dynamic_filter(mut self, filter: Option<&'a DynamicFilter>) -> Self {
        self.dynamic_filter = filter;
        self
    }

    /// Sets [`cancel`](Self::cancel).
    pub fn with_cancel(mut self, cancel: Option<&'a dyn Cancel>) -> Self {
        self.cancel = cancel;
        self
    }

    /// Sets [`io`](Self::io).
    pub fn with_io(mut self, io: IoMode) -> Self {
        self.io = io;
        self
    }

    /// Sets [`partition_types`](Self::partition_types).
    pub fn with_partition_types(mut self, types: Option<&'a PartitionTypes>) -> Self {
        self.partition_types = types;
        self
    }

    /// Local files' versions seen just now ([`ScanSpec::seen`]).
    pub fn with_seen(mut self, seen: Option<&'a SeenVersions>) -> Self {
        self.seen = seen;
        self
    }
}

/// The partition types of `files` (relative to `root`, or absolute below it).
pub fn infer_partition_types(root: &Path, files: &[PathBuf]) -> PartitionTypes {
    // As planning reads them: a file outside `root` has no partition values.
    let texts: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let full = root.join(f);
            let rel = full.strip_prefix(root).ok()?;
            Some(rel.to_string_lossy().replace('\\', "/"))
        })
        .collect();
    PartitionTypes::infer(texts.iter().map(String::as_str))
}

/// A batch sink: `Ok(true)` for more, `Ok(false)` to stop the scan (not an error).
pub type Sink<'s> = dyn FnMut(RecordBatch) -> Result<bool, ScanError> + 's;

/// What a worker sends back for one task, on that task's own channel: its batches as
/// they are decoded, then its end.
enum TaskMsg {
    Batch(RecordBatch),
    Done(Result<TaskOutput, ScanError>),
}

/// A task for a worker: its sequence number, the row group, and where its output goes.
type Job = (u64, RgTask, crossbeam_channel::Sender<TaskMsg>);

/// A task whose chunks the column cache holds, and that is at most this large
/// (decoded), runs on the coordinator's thread at its turn: serving it is slicing and
/// filtering arrays in memory, cheaper than starting a worker thread for it (that was
/// a tenth of a selective hot query's daemon time).
const HOT_INLINE_MAX_BYTES: u64 = 4 << 20;

/// Whether `task` runs on the coordinator's thread (see [`HOT_INLINE_MAX_BYTES`]).
fn is_hot(exec: &Exec<'_>, task: &RgTask) -> bool {
    if exec.distinct || task.estimated_bytes > HOT_INLINE_MAX_BYTES {
        return false;
    }
    let file = &*task.file;
    let roots: Vec<usize> = if task.all_pass && exec.predicate.is_some() {
        file.out_roots.clone()
    } else {
        file.pred_roots
            .iter()
            .chain(&file.rest_roots)
            .copied()
            .collect()
    };
    !roots.is_empty()
        && exec
            .columns
            .holds(&file.path, &file.footer, task.row_group, &roots)
}

/// The most batches a task may have decoded ahead of the sink. A task's channel holds
/// its whole row group (up to this), so that the workers on later row groups never wait
/// for the sink: a channel of 4 batches made the two-thread full scan of 10M rows barely
/// faster than one thread (the second worker stalled 4 batches into its row group).
/// Memory stays bounded by the tasks in flight (`prefetch_bytes`), as before streaming;
/// the row group at the head of the line streams through without piling up.
const MAX_TASK_CHANNEL_BATCHES: usize = 4096;

/// Rows held in memory (a written table's memtable), read as a scan of files reads
/// its rows: `predicate` filters them (the same evaluator), `offset` rows that pass are
/// skipped, at most `limit` are handed to `sink` in batches of at most `batch_size`,
/// with the columns of `projection`. `offset` and `limit` are left with what the rows
/// did not use up, for the files after them. Returns the rows handed over and whether
/// the sink asked to stop.
pub fn scan_rows(
    batches: &[RecordBatch],
    projection: &[String],
    predicate: Option<&Predicate>,
    offset: &mut u64,
    limit: &mut Option<u64>,
    batch_size: usize,
    sink: &mut Sink<'_>,
) -> Result<(u64, bool), ScanError> {
    let memory = Path::new("rows in memory");
    let mut emitted = 0u64;
    for batch in batches {
        if *limit == Some(0) {
            break;
        }
        let indexes = projection
            .iter()
            .map(|name| batch.schema_ref().index_of(name))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ScanError::Sink(format!("{}: {e}", memory.display())))?;
        let kept = match predicate {
            Some(p) => {
                let mask = filter::evaluate(p, batch, memory)?;
                arrow_select::filter::filter_record_batch(batch, &mask)
                    .map_err(|e| ScanError::Sink(format!("{}: {e}", memory.display())))?
            }
            None => batch.clone(),
        };
        let mut kept = kept
            .project(&indexes)
            .map_err(|e| ScanError::Sink(format!("{}: {e}", memory.display())))?;
        let skip = usize::try_from((*offset).min(kept.num_rows() as u64)).unwrap_or(0);
        *offset -= skip as u64;
        kept = kept.slice(skip, kept.num_rows() - skip);
        if let Some(left) = limit {
            let take = usize::try_from((*left).min(kept.num_rows() as u64)).unwrap_or(0);
            kept = kept.slice(0, take);
            *left -= take as u64;
        }
        let mut at = 0;
        while at < kept.num_rows() {
            let len = batch_size.max(1).min(kept.num_rows() - at);
            let piece = kept.slice(at, len);
            at += len;
            emitted += len as u64;
            if !sink(piece)? {
                return Ok((emitted, true));
            }
        }
    }
    Ok((emitted, false))
}

/// Run a scan, handing batches to `sink` in file order and row order. An error stops the
/// scan (batches already handed over stay handed over); so does `Ok(false)` from the sink
/// (not an error).
pub fn scan_files(
    spec: &ScanSpec<'_>,
    cache: &MetadataCache,
    sink: &mut Sink<'_>,
) -> Result<ScanSummary, ScanError> {
    let start = Instant::now();
    let mut summary = ScanSummary::default();
    // What the bucket's client did meanwhile: the scan's requests (and those of scans
    // of the same bucket running at once).
    let store = crate::storage::is_object_url(spec.table_root)
        .then(|| crate::storage::object_root(&spec.table_root.to_string_lossy()).ok())
        .flatten();
    let store_before = store.as_ref().map(|root| root.stats());
    let stop = AtomicBool::new(false);
    let inferred;
    let partition_types = match spec.partition_types {
        Some(types) => types,
        None => {
            inferred = infer_partition_types(spec.table_root, spec.files);
            &inferred
        }
    };
    let exec = Exec {
        predicate: spec.predicate,
        batch_size: spec.batch_size.max(1),
        late: spec.late_materialization,
        distinct: spec.distinct,
        columns: cache.columns(),
        stop: &stop,
        cancel: spec.cancel,
    };
    let threads = spec.threads.max(1);
    // Room for every task in flight: the coordinator never blocks on sending one.
    let queue = threads + spec.prefetch_row_groups.max(MAX_REMOTE_IN_FLIGHT);
    let (job_tx, job_rx) = crossbeam_channel::bounded::<Job>(queue);
    let result = std::thread::scope(|scope| {
        // Workers start on demand, one per queued row group up to `threads`: a scan that
        // pruned everything starts none, a one-row-group scan starts one. Starting a thread
        // costs tens of microseconds (more with the scan's inherited counters), which was
        // a visible share of a small query's time.
        let mut spawn_worker = || {
            let (job_rx, exec) = (job_rx.clone(), &exec);
            scope.spawn(move || {
                // A task whose receiver is gone (the scan ended) just stops; the worker
                // goes on to drain the queue until the coordinator closes it.
                for (_seq, task, out) in job_rx {
                    let result = if exec.stopped() {
                        Ok(TaskOutput::default())
                    } else {
                        let mut emit = |b: RecordBatch| out.send(TaskMsg::Batch(b)).is_ok();
                        let result =
                            guard_panic(&task.file.path, || task::run(&task, exec, &mut emit));
                        task::prefer_truncation(&task, result)
                    };
                    let _ = out.send(TaskMsg::Done(result));
                }
            });
        };
        let mut coordinator = Coordinator {
            spec,
            partition_types,
            stop: &stop,
            cache,
            summary: &mut summary,
            files: spec.files.iter(),
            planned: VecDeque::new(),
            planning_done: false,
            next_seq: 0,
            next_emit: 0,
            pending: BTreeMap::new(),
            outputs: BTreeMap::new(),
            hot: BTreeMap::new(),
            in_flight: 0,
            in_flight_bytes: 0,
            estimates: BTreeMap::new(),
            scheduled_rows: 0,
            store: store.as_deref(),
            task_us: 0,
            tasks_done: 0,
            filtered_done: 0,
            read_rest: false,
            remaining: spec.limit,
            to_skip: spec.offset,
        };
        let result = if threads == 1 {
            coordinator.run_inline(&exec, sink)
        } else {
            coordinator.run(&exec, &job_tx, sink, threads, &mut spawn_worker)
        };
        stop.store(true, Ordering::Relaxed);
        drop(job_tx);
        // Dropping the tasks' receivers stops workers that are still sending.
        drop(coordinator);
        result
    });
    summary.timings.total_us = micros(start);
    if let (Some(root), Some(before)) = (&store, store_before) {
        let after = root.stats();
        summary.store_requests = after.requests.saturating_sub(before.requests);
        summary.store_bytes_fetched = after.bytes_fetched.saturating_sub(before.bytes_fetched);
        summary.store_wait_us = after.wait_us.saturating_sub(before.wait_us);
        summary.store_cache_hit_bytes = after
            .range_cache_hit_bytes
            .saturating_sub(before.range_cache_hit_bytes);
    }
    result.map(|()| summary)
}

struct Coordinator<'s, 'c> {
    spec: &'c ScanSpec<'s>,
    /// The partition columns' types, agreed over every file of the scan.
    partition_types: &'c PartitionTypes,
    /// The workers' stop flag (see [`Exec`]).
    stop: &'c AtomicBool,
    cache: &'c MetadataCache,
    summary: &'c mut ScanSummary,
    files: std::slice::Iter<'s, PathBuf>,
    planned: VecDeque<RgTask>,
    planning_done: bool,
    next_seq: u64,
    next_emit: u64,
    /// Planning errors waiting for their turn.
    pending: BTreeMap<u64, ScanError>,
    /// The output channels of the tasks in flight, and their files' sources (checked
    /// after the sink has read each batch, which may point into a mapping).
    outputs: BTreeMap<u64, (crossbeam_channel::Receiver<TaskMsg>, TaskFile)>,
    /// Tasks whose chunks the column cache holds, run on this thread at their turn.
    hot: BTreeMap<u64, RgTask>,
    in_flight: usize,
    in_flight_bytes: u64,
    estimates: BTreeMap<u64, u64>,
    /// Rows scheduled so far (unfiltered scans: the limit stops scheduling).
    scheduled_rows: u64,
    /// The bucket's client when the scan's files are remote: tasks then read ahead.
    store: Option<&'c crate::storage::ObjectRoot>,
    /// Decoding and filtering time of the worker tasks done, and how many.
    task_us: u64,
    tasks_done: u64,
    /// Of those, the tasks that evaluated the predicate (not [`RgTask::all_pass`]).
    filtered_done: u64,
    /// Whether read-aheads include the columns after the predicate's: the latest task
    /// read them whole.
    read_rest: bool,
    /// Rows still to emit under the limit.
    remaining: Option<u64>,
    /// Rows of the offset still to skip: whole row groups and leading rows at planning
    /// for unfiltered scans, emitted batches otherwise.
    to_skip: u64,
}

impl Coordinator<'_, '_> {
    fn run(
        &mut self,
        exec: &Exec<'_>,
        jobs: &crossbeam_channel::Sender<Job>,
        sink: &mut Sink<'_>,
        threads: usize,
        spawn_worker: &mut dyn FnMut(),
    ) -> Result<(), ScanError> {
        let base = threads + self.spec.prefetch_row_groups;
        let mut workers = 0;
        loop {
            self.check_cancel()?;
            if self.remaining == Some(0) {
                return Ok(());
            }
            while self.in_flight < self.depth(base, threads)
                && (self.in_flight == 0 || self.in_flight_bytes < self.spec.prefetch_bytes as u64)
            {
                let Some((seq, task)) = self.schedule_next() else {
                    break;
                };
                self.in_flight += 1;
                self.in_flight_bytes += task.estimated_bytes;
                self.estimates.insert(seq, task.estimated_bytes);
                if is_hot(exec, &task) {
                    self.hot.insert(seq, task);
                    continue;
                }
                if workers < threads && workers < self.in_flight - self.hot.len() {
                    spawn_worker();
                    workers += 1;
                }
                if self.store.is_some() && task.read_ahead.get().is_none() {
                    // Later tasks join its read only where the scan surely runs them: no
                    // top-k filter (yet) to prune them, and a limit that all their rows
                    // (every one passing) would not reach. A daemon's scan always has a
                    // filter that may be set later: a group read before it was costs at
                    // most its bytes.
                    let filtered = self
                        .spec
                        .dynamic_filter
                        .is_some_and(|f| f.current().is_some());
                    let mut rows_left = if filtered {
                        0
                    } else if self.spec.predicate.is_some() {
                        self.remaining
                            .map_or(u64::MAX, |r| r.saturating_add(self.to_skip))
                    } else {
                        self.spec
                            .limit
                            .map_or(u64::MAX, |l| l.saturating_sub(self.scheduled_rows))
                    };
                    let later = self.planned.iter().take_while(|t| {
                        rows_left = rows_left.saturating_sub(t.rows);
                        rows_left > 0
                    });
                    task::read_ahead(std::iter::once(&task).chain(later), exec, self.read_rest);
                }
                let batches = usize::try_from(task.rows)
                    .unwrap_or(usize::MAX)
                    .div_ceil(self.spec.batch_size.max(1))
                    .saturating_add(1)
                    .min(MAX_TASK_CHANNEL_BATCHES);
                let (out_tx, out_rx) = crossbeam_channel::bounded(batches);
                let file = (task.file.path.clone(), Arc::clone(&task.file.source));
                self.outputs.insert(seq, (out_rx, file));
                if jobs.send((seq, task, out_tx)).is_err() {
                    return Err(ScanError::Sink("scan worker pool stopped".into()));
                }
            }
            if self.next_emit == self.next_seq {
                return Ok(()); // Nothing planned or outstanding: done.
            }
            let seq = self.next_emit;
            if let Some(e) = self.pending.remove(&seq) {
                return Err(e);
            }
            if let Some(task) = self.hot.remove(&seq) {
                let more = self.run_here(seq, &task, exec, sink)?;
                self.in_flight -= 1;
                let est = self.estimates.remove(&seq).unwrap_or(0);
                self.in_flight_bytes = self.in_flight_bytes.saturating_sub(est);
                if !more {
                    self.stop.store(true, Ordering::Relaxed);
                    return Ok(());
                }
                continue;
            }
            let Some((out_rx, (path, source))) = self.outputs.remove(&seq) else {
                return Err(ScanError::Sink(format!("scan task {seq} has no output")));
            };
            // The task's batches, in order, as its worker decodes them.
            let stats = loop {
                let wait = Instant::now();
                let msg = loop {
                    self.check_cancel()?;
                    match out_rx.recv_timeout(Duration::from_millis(20)) {
                        Ok(msg) => break msg,
                        Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                        Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                            return Err(ScanError::Sink("scan workers exited".into()));
                        }
                    }
                };
                self.summary.timings.wait_us += micros(wait);
                match msg {
                    TaskMsg::Batch(batch) => {
                        if !self.emit(batch, sink)? {
                            self.end_early(&out_rx);
                            return Ok(());
                        }
                        // The sink may have read pages that went away under a mapping:
                        // its batch holds zeros, so the scan must not end as a success.
                        if source.poisoned() {
                            return Err(ScanError::Truncated { file: path });
                        }
                    }
                    TaskMsg::Done(result) => break result?,
                }
            };
            self.next_emit += 1;
            self.in_flight -= 1;
            let est = self.estimates.remove(&seq).unwrap_or(0);
            self.in_flight_bytes = self.in_flight_bytes.saturating_sub(est);
            self.task_us += stats.decode_us + stats.filter_us;
            self.tasks_done += 1;
            if !stats.all_pass {
                self.filtered_done += 1;
                self.read_rest = stats.rest_whole;
            }
            self.account(&stats);
        }
    }

    /// How many tasks may be in flight now (`base`: the local depth).
    fn depth(&self, base: usize, threads: usize) -> usize {
        let Some(store) = self.store else {
            return base;
        };
        // Until a filtered task has shown whether the rows pass (and the other columns
        // are read whole), read-aheads hold the predicate's columns only: few tasks so
        // far, so that most read-aheads know. A row group whose rows all pass reads
        // every column it needs from the start.
        let next_all_pass = self.planned.front().is_some_and(|t| t.all_pass);
        if self.spec.predicate.is_some() && self.filtered_done == 0 && !next_all_pass {
            return base;
        }
        let task_us = self.task_us.checked_div(self.tasks_done).unwrap_or(0);
        remote_depth(base, threads, store.request_latency(), task_us)
    }

    /// The next task to run, numbered, with the offset and the limit applied to it.
    fn schedule_next(&mut self) -> Option<(u64, RgTask)> {
        loop {
            let mut task = self.next_task()?;
            if self.spec.predicate.is_none()
                && self.to_skip > 0
                && !self.skip_at_planning(&mut task)
            {
                continue;
            }
            let seq = self.next_seq;
            self.next_seq += 1;
            if self.spec.predicate.is_none() {
                task.limit = self.spec.limit.map(|l| {
                    usize::try_from(l.saturating_sub(self.scheduled_rows)).unwrap_or(usize::MAX)
                });
            } else {
                // Tasks before this one can only lower what the scan still wants.
                task.limit = self
                    .remaining
                    .map(|r| usize::try_from(r.saturating_add(self.to_skip)).unwrap_or(usize::MAX));
            }
            self.scheduled_rows += task.rows;
            return Some((seq, task));
        }
    }

    /// A one-thread scan: each task runs on this thread, its batches going straight to
    /// the sink. No worker, no hand-over per batch, and batches are freed on the thread
    /// that allocated them: the same work as parquet's plain reader plus the pruning.
    fn run_inline(&mut self, exec: &Exec<'_>, sink: &mut Sink<'_>) -> Result<(), ScanError> {
        loop {
            self.check_cancel()?;
            if self.remaining == Some(0) {
                return Ok(());
            }
            let Some((seq, task)) = self.schedule_next() else {
                // A planning error is queued at the sequence number it took.
                return match self.pending.pop_first() {
                    Some((_, e)) => Err(e),
                    None => Ok(()),
                };
            };
            if !self.run_here(seq, &task, exec, sink)? {
                return Ok(());
            }
        }
    }

    /// Runs task `seq` on this thread, its batches going straight to the sink; whether
    /// the sink wants more.
    fn run_here(
        &mut self,
        seq: u64,
        task: &RgTask,
        exec: &Exec<'_>,
        sink: &mut Sink<'_>,
    ) -> Result<bool, ScanError> {
        let mut more = true;
        let mut sink_error = None;
        let mut emit = |batch: RecordBatch| match self.emit(batch, sink) {
            Ok(true) => true,
            Ok(false) => {
                more = false;
                false
            }
            Err(e) => {
                sink_error = Some(e);
                false
            }
        };
        let result = guard_panic(&task.file.path, || task::run(task, exec, &mut emit));
        let stats = task::prefer_truncation(task, result);
        if let Some(e) = sink_error {
            return Err(e);
        }
        let stats = stats?;
        self.account(&stats);
        self.next_emit = seq + 1;
        // The sink may have read pages that went away under a mapping.
        if task.file.source.poisoned() {
            return Err(ScanError::Truncated {
                file: task.file.path.clone(),
            });
        }
        Ok(more)
    }

    /// Adds a finished task's counters to the summary.
    fn account(&mut self, stats: &TaskOutput) {
        let s = &mut *self.summary;
        s.bytes_read += stats.bytes_read;
        s.rows_decoded += stats.rows_decoded;
        s.timings.io_us += stats.io_us;
        s.timings.decode_us += stats.decode_us;
        s.timings.filter_us += stats.filter_us;
        s.row_groups_late_materialized += u64::from(stats.late);
        s.column_cache_hits += stats.cached_reads;
    }

    /// The scan is complete before the task that `out` belongs to: stop the workers and
    /// wait for that task's end (it stops after the batch it is decoding), so that the
    /// summary counts what it read and decoded.
    fn end_early(&mut self, out: &crossbeam_channel::Receiver<TaskMsg>) {
        self.stop.store(true, Ordering::Relaxed);
        for msg in out {
            if let TaskMsg::Done(Ok(stats)) = msg {
                self.account(&stats);
            }
        }
    }

    /// Applies the offset and the limit to `batch` and hands what is left to the sink:
    /// `Ok(false)` when the scan is complete (the limit is met or the sink said stop).
    fn emit(&mut self, mut batch: RecordBatch, sink: &mut Sink<'_>) -> Result<bool, ScanError> {
        if self.to_skip > 0 {
            let n = batch.num_rows() as u64;
            let skip = self.to_skip.min(n);
            self.to_skip -= skip;
            self.summary.rows_skipped_by_offset += skip;
            let skip = usize::try_from(skip).unwrap_or(usize::MAX);
            batch = batch.slice(skip, batch.num_rows() - skip);
        }
        if let Some(remaining) = self.remaining.as_mut() {
            let n = usize::try_from(*remaining).unwrap_or(usize::MAX);
            if batch.num_rows() > n {
                batch = batch.slice(0, n);
            }
            *remaining -= batch.num_rows() as u64;
        }
        if batch.num_rows() > 0 {
            self.summary.rows_emitted += batch.num_rows() as u64;
            if !sink(batch)? {
                return Ok(false);
            }
        }
        Ok(self.remaining != Some(0))
    }

    /// Applies the offset to an unfiltered scan's next row group: `false` when the
    /// whole row group lies inside the offset (skipped, never read); otherwise its
    /// leading rows inside the offset are deselected.
    fn skip_at_planning(&mut self, task: &mut RgTask) -> bool {
        if task.rows <= self.to_skip {
            self.to_skip -= task.rows;
            let s = &mut *self.summary;
            s.rows_skipped_by_offset += task.rows;
            s.row_groups_skipped_by_offset += 1;
            s.row_groups_pruned += 1;
            return false;
        }
        let skip = usize::try_from(self.to_skip).unwrap_or(usize::MAX);
        let keep = usize::try_from(task.rows).unwrap_or(usize::MAX) - skip;
        let leading = RowSelection::from(vec![RowSelector::skip(skip), RowSelector::select(keep)]);
        task.selection = Some(match task.selection.take() {
            // Unfiltered scans carry no page selection today; compose in case they do.
            Some(existing) => existing.and_then(&leading),
            None => leading,
        });
        task.rows -= self.to_skip;
        self.summary.rows_skipped_by_offset += self.to_skip;
        self.to_skip = 0;
        true
    }

    fn check_cancel(&self) -> Result<(), ScanError> {
        match self.spec.cancel {
            Some(c) if c.cancelled() => Err(ScanError::Cancelled),
            _ => Ok(()),
        }
    }

    /// The next row group to schedule; planning errors are queued in order.
    fn next_task(&mut self) -> Option<RgTask> {
        loop {
            if self.spec.predicate.is_none()
                && self.spec.limit.is_some_and(|l| self.scheduled_rows >= l)
            {
                return None;
            }
            if let Some(task) = self.planned.pop_front() {
                if self.dynamically_pruned(&task) {
                    self.summary.row_groups_pruned += 1;
                    self.summary.row_groups_pruned_by_dynamic_filter += 1;
                    continue;
                }
                return Some(task);
            }
            if self.planning_done {
                return None;
            }
            let Some(path) = self.files.next() else {
                self.planning_done = true;
                return None;
            };
            let path = self.spec.table_root.join(path);
            match plan::plan_file(
                self.spec,
                self.partition_types,
                &path,
                self.cache,
                self.summary,
            ) {
                Ok(tasks) => self.planned.extend(tasks),
                Err(e) => {
                    self.pending.insert(self.next_seq, e);
                    self.next_seq += 1;
                    self.planning_done = true;
                    return None;
                }
            }
        }
    }

    fn dynamically_pruned(&self, task: &RgTask) -> bool {
        let Some(pred) = self.spec.dynamic_filter.and_then(DynamicFilter::current) else {
            return false;
        };
        // Pruning only, so any doubt (a column the file lacks) means "read".
        FilePruner::with_columns(
            &task.file.meta,
            std::sync::Arc::clone(&task.file.columns),
            task.file.path.display().to_string(),
        )
        .row_group(&pred, task.row_group)
        .is_ok_and(|v| v == Verdict::Never)
    }
}

fn micros(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// Run `f`, turning a panic inside it (the parquet crate on some corrupt inputs) into
/// [`ScanError::DecoderPanic`].
pub(crate) fn guard_panic<T>(
    file: &Path,
    f: impl FnOnce() -> Result<T, ScanError>,
) -> Result<T, ScanError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_owned());
        Err(ScanError::DecoderPanic {
            file: file.to_path_buf(),
            message,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_depth_follows_latency_over_decode_time() {
        // No latency measured yet: the local depth.
        assert_eq!(remote_depth(4, 2, None, 1000), 4);
        // 20 ms requests, 2 ms row groups, 2 threads: 20 more in flight.
        assert_eq!(
            remote_depth(4, 2, Some(Duration::from_millis(20)), 2000),
            24
        );
        // Unmeasured decoding counts as MIN_TASK_US; the depth stops at its bound.
        assert_eq!(
            remote_depth(4, 2, Some(Duration::from_secs(1)), 0),
            MAX_REMOTE_IN_FLIGHT
        );
        // A local depth above the bound is kept.
        assert_eq!(
            remote_depth(100, 2, Some(Duration::from_millis(1)), 1000),
            100
        );
    }
}
