//! A query session: the executor's end of the daemon → ring → executor path.
//!
//! A [`Session`] holds one connection to the IO daemon of a data directory (started on
//! demand by the caller's `spawn`), the plan cache, a result cache and what the daemon
//! said about each table (schema and data version). [`Session::query`] plans the SQL
//! (plan cache), checks the table's data version by stat-ing the files and directories
//! the daemon listed (so a rewritten, added or removed file is never served from the
//! result cache), then either answers from the result cache or opens a scan stream,
//! feeds its batches to an [`Execution`], cancels the scan as soon as the executor needs
//! no more rows, forwards top-k's dynamic filter to the daemon, and caches the result.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use ringscan_ipc::client::{ensure_daemon, ClientError, DaemonClient};
use ringscan_ipc::msg::{
    FileVersion, Predicate, ScanRequest, ScanSource, ScanSummary, TableInfo, TableStatistics,
};

use crate::exec::{scan_schema, Execution, Flow, QueryResult};
use crate::result_cache::{DataVersion, ResultCache, ResultKey};
use crate::stats::{aggregate_row, statistics_aggregates, statistics_columns, StatsAggregate};
use crate::{Catalog, PhysicalPlan, PlanError, Planner};

/// Failure of one query of a session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// Planning failed (SQL outside the subset, unknown column, type error).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The daemon could not be reached or refused the request.
    #[error(transparent)]
    Daemon(#[from] ClientError),
    /// The table's schema from the daemon could not be decoded.
    #[error("the daemon sent an unreadable schema for {source_name}: {message}")]
    Schema {
        /// The table or path.
        source_name: String,
        /// Decoder's message.
        message: String,
    },
    /// The executor failed on the scanned batches.
    #[error(transparent)]
    Exec(#[from] crate::exec::ExecError),
    /// A file of the table could not be stat-ed for its data version.
    #[error("the table's data changed while it was being checked: {path}")]
    Vanished {
        /// The file or directory.
        path: PathBuf,
    },
}

/// Sizes and switches of a session.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Bytes of planned queries kept (the plan cache).
    pub plan_cache_bytes: usize,
    /// Bytes of results kept (the result cache); 0 disables it.
    pub result_cache_bytes: usize,
    /// How long to wait for a daemon that `spawn` started.
    pub daemon_start_wait: Duration,
    /// The data area of each scan's ring, in bytes.
    pub ring_capacity_bytes: usize,
    /// Answer `count(*)`, `count(x)`, `min(x)`, `max(x)` without a filter from Parquet
    /// statistics where they are exact (off: always scan).
    pub use_statistics: bool,
    /// Top-k late materialization where it applies ([`PhysicalPlan::topk_prepass`];
    /// off: one scan of every column).
    pub topk_late: bool,
}

impl Default for SessionOptions {
    fn default() -> Self {
        Self {
            plan_cache_bytes: 8 << 20,
            result_cache_bytes: 256 << 20,
            daemon_start_wait: Duration::from_secs(10),
            ring_capacity_bytes: ScanRequest::DEFAULT_RING_CAPACITY_BYTES,
            use_statistics: true,
            topk_late: true,
        }
    }
}

/// What one query did and returned.
#[derive(Debug, Clone)]
pub struct QueryOutcome {
    /// The rows (shared with the result cache).
    pub result: Arc<QueryResult>,
    /// `EXPLAIN` text, when the query was an EXPLAIN (then `result` is empty).
    pub explain: Option<String>,
    /// The daemon's summary of the scan (`None` on a result-cache hit or EXPLAIN).
    pub scan: Option<ScanSummary>,
    /// The plan came from the plan cache.
    pub plan_hit: bool,
    /// The result came from the result cache.
    pub result_hit: bool,
    /// The aggregates were answered from Parquet statistics: no column data was read
    /// (`scan` then counts the files and row groups whose footers answered).
    pub from_statistics: bool,
    /// The top-k was answered by late materialization: a first scan of its sort key
    /// found the k-th key, and the scan of the other columns was bounded by it
    /// ([`PhysicalPlan::topk_prepass`]; `scan` then sums both scans' work).
    pub topk_late: bool,
    /// Wall time of the whole query, microseconds.
    pub total_us: u64,
}

/// A table as the daemon described it.
#[derive(Debug)]
struct TableEntry {
    schema: SchemaRef,
    info: TableInfo,
}

impl TableEntry {
    /// The data version as recorded: every file and directory with its size and mtime.
    fn version(&self) -> DataVersion {
        self.info
            .files
            .iter()
            .chain(&self.info.dirs)
            .map(|v| (v.path.clone(), v.size_bytes, v.modified_ns))
            .collect()
    }

    /// Whether every recorded file and directory still stats the same: a file rewritten,
    /// added or removed (which moves its directory's mtime) makes it false.
    fn still_current(&self, data_dir: &Path) -> bool {
        self.info
            .files
            .iter()
            .chain(&self.info.dirs)
            .all(|recorded| stat_version(data_dir, recorded).as_ref() == Some(recorded))
    }
}

/// The catalog the planner sees: tables described by the daemon, remembered.
#[derive(Debug)]
struct DaemonCatalog {
    client: RefCell<DaemonClient>,
    tables: RefCell<HashMap<ScanSource, Arc<TableEntry>>>,
    /// Why the last lookup found nothing (the daemon's words: "no table ohlvc; did
    /// you mean ohlcv?"), so the session reports it instead of a bare "unknown table".
    last_error: RefCell<Option<ClientError>>,
}

impl DaemonCatalog {
    fn describe(&self, source: &ScanSource) -> Result<Arc<TableEntry>, SessionError> {
        let info = self.client.borrow_mut().describe(source)?;
        let schema = info.schema().map_err(|e| SessionError::Schema {
            source_name: source_name(source),
            message: e.to_string(),
        })?;
        let entry = Arc::new(TableEntry {
            schema: Arc::new(schema),
            info,
        });
        self.tables
            .borrow_mut()
            .insert(source.clone(), Arc::clone(&entry));
        Ok(entry)
    }

    fn entry(&self, source: &ScanSource) -> Option<Arc<TableEntry>> {
        self.tables.borrow().get(source).cloned()
    }
}

impl Catalog for DaemonCatalog {
    fn schema(&self, source: &ScanSource) -> Option<SchemaRef> {
        if let Some(entry) = self.entry(source) {
            return Some(Arc::clone(&entry.schema));
        }
        match self.describe(source) {
            Ok(entry) => Some(Arc::clone(&entry.schema)),
            Err(SessionError::Daemon(e)) => {
                *self.last_error.borrow_mut() = Some(e);
                None
            }
            Err(_) => None,
        }
    }
}

/// Most plans whose result-cache text is remembered (cleared when full).
const PLAN_TEXTS_MAX: usize = 1024;

/// The ring of a scan whose rows the executor does not keep (see
/// [`PhysicalPlan::consumes_scan`]), at most: a few batches in flight. The executor's
/// resident memory then stays near the aggregation's or the top-k's, not the table's:
/// a top-k over the 357,814 rows of `wide` peaked at 76 MiB with the 256 MiB ring (the
/// pages the stream had written by then) and at 30 MiB with 4 MiB.
const CONSUMED_RING_BYTES: usize = 8 << 20;

/// One client's queries against one data directory's daemon.
#[derive(Debug)]
pub struct Session {
    data_dir: PathBuf,
    planner: Planner<DaemonCatalog>,
    results: ResultCache,
    /// The result-cache text of each plan, rendered once: the entry holds the plan's
    /// `Arc`, so a pointer match proves it is the same plan.
    plan_texts: HashMap<String, (Arc<PhysicalPlan>, Arc<str>)>,
    ring_capacity_bytes: usize,
    use_statistics: bool,
    topk_late: bool,
}

impl Session {
    /// Connects to the daemon of `data_dir`, calling `spawn` to start one if none
    /// answers.
    pub fn open(
        data_dir: &Path,
        spawn: &dyn Fn() -> std::io::Result<()>,
        options: &SessionOptions,
    ) -> Result<Self, SessionError> {
        let client = ensure_daemon(data_dir, spawn, options.daemon_start_wait)?;
        let catalog = DaemonCatalog {
            client: RefCell::new(client),
            tables: RefCell::new(HashMap::new()),
            last_error: RefCell::new(None),
        };
        Ok(Self {
            data_dir: data_dir.to_path_buf(),
            planner: Planner::new(catalog, options.plan_cache_bytes),
            results: ResultCache::new(options.result_cache_bytes),
            plan_texts: HashMap::new(),
            ring_capacity_bytes: options.ring_capacity_bytes,
            use_statistics: options.use_statistics,
            topk_late: options.topk_late,
        })
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Turns the statistics path on or off (see [`SessionOptions::use_statistics`]).
    pub fn set_use_statistics(&mut self, on: bool) {
        self.use_statistics = on;
    }

    /// Turns top-k late materialization on or off (see [`SessionOptions::topk_late`]).
    pub fn set_topk_late(&mut self, on: bool) {
        self.topk_late = on;
    }

    /// The `EXPLAIN` text of `sql`: the plan, and for an aggregation whether the daemon's
    /// statistics answer it (asked of the daemon now).
    pub fn explain(&mut self, sql: &str) -> Result<String, SessionError> {
        let (plan, _) = self.plan(sql)?;
        Ok(self.explain_plan(&plan))
    }

    fn explain_plan(&self, plan: &PhysicalPlan) -> String {
        let mut text = plan.explain();
        if self.topk_late {
            text.extend(plan.explain_topk_late());
        }
        if !plan.logical.is_aggregate() {
            return text;
        }
        let line = match self.statistics_row(plan) {
            Ok((_, aggregates, _)) => {
                let names: Vec<String> = aggregates.iter().map(ToString::to_string).collect();
                format!("answered from Parquet statistics ({})", names.join(", "))
            }
            Err(why) => format!("not answered from Parquet statistics: {why}"),
        };
        text.push_str("Statistics\n  ");
        text.push_str(&line);
        text.push('\n');
        text
    }

    /// The aggregation's output row from the daemon's statistics, or why not.
    fn statistics_row(
        &self,
        plan: &PhysicalPlan,
    ) -> Result<(RecordBatch, Vec<StatsAggregate>, TableStatistics), String> {
        if !self.use_statistics {
            return Err("turned off for this session".into());
        }
        let aggregates = statistics_aggregates(plan)?;
        let columns = statistics_columns(&aggregates);
        let stats = self
            .planner
            .catalog()
            .client
            .borrow_mut()
            .statistics(&plan.scan.source, &columns)
            .map_err(|e| format!("the daemon gave no statistics: {e}"))?;
        let schema = Execution::new(plan, scan_schema(plan))
            .ok()
            .and_then(|e| e.aggregate_output_schema())
            .ok_or("the plan has no ungrouped aggregation")?;
        let row = aggregate_row(&aggregates, &stats, &schema)?;
        Ok((row, aggregates, stats))
    }

    /// Runs `plan` from statistics when they answer it for the data version of `entry`.
    fn run_from_statistics(
        &self,
        plan: &PhysicalPlan,
        entry: &TableEntry,
    ) -> Result<Option<(QueryResult, ScanSummary)>, SessionError> {
        let start = Instant::now();
        let Ok((row, _, stats)) = self.statistics_row(plan) else {
            return Ok(None);
        };
        if stats.files != entry.info.files || stats.dirs != entry.info.dirs {
            // Another data version than the result-cache key's: scan instead.
            return Ok(None);
        }
        let mut execution = Execution::new(plan, scan_schema(plan))?;
        execution.push_aggregated(row)?;
        let result = execution.finish()?;
        let summary = ScanSummary {
            files_considered: stats.file_count,
            row_groups_considered: stats.row_group_count,
            timings: ringscan_ipc::msg::ScanTimings {
                total_us: micros(start),
                ..Default::default()
            },
            ..ScanSummary::default()
        };
        Ok(Some((result, summary)))
    }

    /// Plans `sql` (through the plan cache) without running it.
    pub fn plan(&mut self, sql: &str) -> Result<(Arc<PhysicalPlan>, bool), SessionError> {
        let hits_before = self.planner.cache_stats().hits;
        let plan = self
            .planner
            .plan(sql)
            .map_err(|e| self.explain_plan_error(e))?;
        Ok((plan, self.planner.cache_stats().hits > hits_before))
    }

    fn explain_plan_error(&self, e: PlanError) -> SessionError {
        if let PlanError::UnknownTable { .. } = e {
            if let Some(why) = self.planner.catalog().last_error.borrow_mut().take() {
                return SessionError::Daemon(why);
            }
        }
        SessionError::Plan(e)
    }

    /// Runs `sql`; `use_result_cache: false` neither reads nor fills the result cache.
    pub fn query(
        &mut self,
        sql: &str,
        use_result_cache: bool,
    ) -> Result<QueryOutcome, SessionError> {
        let start = Instant::now();
        let (mut plan, mut plan_hit) = self.plan(sql)?;
        if plan.logical.explain {
            return Ok(QueryOutcome {
                result: Arc::new(QueryResult {
                    schema: Arc::clone(&plan.logical.output_schema),
                    batches: Vec::new(),
                    rows: 0,
                }),
                explain: Some(self.explain_plan(&plan)),
                scan: None,
                plan_hit,
                result_hit: false,
                from_statistics: false,
                topk_late: false,
                total_us: micros(start),
            });
        }
        let source = plan.scan.source.clone();
        let catalog = self.planner.catalog();
        let mut entry = match catalog.entry(&source) {
            Some(entry) => entry,
            None => catalog.describe(&source)?,
        };
        if !entry.still_current(&self.data_dir) {
            // The data changed under us: ask again, and re-plan if the schema moved.
            let fresh = catalog.describe(&source)?;
            if fresh.schema != entry.schema {
                self.planner.invalidate();
                (plan, plan_hit) = self.plan(sql)?;
            }
            entry = fresh;
        }
        let key = ResultKey::from_parts(self.plan_text(sql, &plan).to_string(), entry.version());
        if use_result_cache {
            if let Some(result) = self.results.get(&key) {
                return Ok(QueryOutcome {
                    result,
                    explain: None,
                    scan: None,
                    plan_hit,
                    result_hit: true,
                    from_statistics: false,
                    topk_late: false,
                    total_us: micros(start),
                });
            }
        }
        let stats_answer = if self.use_statistics && plan.logical.is_aggregate() {
            self.run_from_statistics(&plan, &entry)?
        } else {
            None
        };
        let from_statistics = stats_answer.is_some();
        let (result, summary, topk_late) = match stats_answer {
            Some((result, summary)) => (result, summary, false),
            None => self.run_plan(&plan)?,
        };
        let result = if use_result_cache {
            // A cached result must not keep the scan's ring (its whole mapping) alive.
            let owned = crate::exec::owned_copy(Arc::clone(&result.schema), &result.batches)?;
            let result = Arc::new(QueryResult {
                schema: Arc::clone(&result.schema),
                rows: result.rows,
                batches: if owned.num_rows() > 0 {
                    vec![owned]
                } else {
                    Vec::new()
                },
            });
            self.results.insert(key, Arc::clone(&result));
            result
        } else {
            Arc::new(result)
        };
        Ok(QueryOutcome {
            result,
            explain: None,
            scan: Some(summary),
            plan_hit,
            result_hit: false,
            from_statistics,
            topk_late,
            total_us: micros(start),
        })
    }

    /// Runs the plan's scan and operators: a top-k that qualifies for late
    /// materialization ([`PhysicalPlan::topk_prepass`]) in two scans, anything else in
    /// one. The flag: the two scans answered.
    fn run_plan(
        &self,
        plan: &PhysicalPlan,
    ) -> Result<(QueryResult, ScanSummary, bool), SessionError> {
        if let Some(first) = plan.topk_prepass().filter(|_| self.topk_late) {
            if let Some((result, summary)) = self.run_topk_late(plan, &first)? {
                return Ok((result, summary, true));
            }
        }
        let (execution, summary) = self.stream(plan)?;
        Ok((execution.finish()?, summary, false))
    }

    /// Top-k late materialization: `first` finds the k-th sort key reading only the
    /// columns it needs, and `plan` runs with that key pushed as a bound. `None` when the
    /// bound cannot be said (fewer than k rows, a NaN k-th key...), or when the second
    /// scan saw fewer than k rows although the first saw k (the data changed between
    /// them): the caller runs `plan` as it is.
    fn run_topk_late(
        &self,
        plan: &PhysicalPlan,
        first: &PhysicalPlan,
    ) -> Result<Option<(QueryResult, ScanSummary)>, SessionError> {
        let (mut execution, first_summary) = self.stream(first)?;
        let Some(bound) = execution.topk_threshold()? else {
            return Ok(None);
        };
        drop(execution);
        let mut bounded = plan.clone();
        bounded.scan.predicate = Some(match bounded.scan.predicate.take() {
            None => bound,
            Some(Predicate::And(mut all)) => {
                all.push(bound);
                Predicate::And(all)
            }
            Some(p) => Predicate::And(vec![p, bound]),
        });
        let (execution, mut summary) = self.stream(&bounded)?;
        if !execution.topk_saw_k_rows() {
            return Ok(None);
        }
        summary.absorb_work(&first_summary);
        Ok(Some((execution.finish()?, summary)))
    }

    /// Streams the plan's scan through an [`Execution`] (not finished yet).
    fn stream(&self, plan: &PhysicalPlan) -> Result<(Execution, ScanSummary), SessionError> {
        let client = self.planner.catalog().client.borrow();
        let mut request = plan.scan.clone();
        request.ring_capacity_bytes = if plan.consumes_scan() {
            self.ring_capacity_bytes.min(CONSUMED_RING_BYTES)
        } else {
            self.ring_capacity_bytes
        };
        let mut stream = client.scan(&request)?;
        let mut execution = Execution::new(plan, stream.schema())?;
        let mut refined: Option<Predicate> = None;
        while let Some(batch) = stream.next_batch()? {
            if execution.push(batch)? == Flow::Done {
                stream.cancel();
                break;
            }
            if stream.ring_under_pressure() {
                // The batches kept so far hold half the ring: copy them out, or a result
                // larger than the ring would leave the daemon waiting for space.
                execution.unpin()?;
            }
            if let Some(filter) = execution.dynamic_filter() {
                if refined.as_ref() != Some(&filter) {
                    // Only a hint: a daemon that cannot take it still returns correct rows.
                    let _ = stream.refine(&filter);
                    refined = Some(filter);
                }
            }
        }
        let summary = stream.finish()?;
        Ok((execution, summary))
    }

    /// The plan's canonical text for the result cache, rendered once per plan.
    fn plan_text(&mut self, sql: &str, plan: &Arc<PhysicalPlan>) -> Arc<str> {
        if let Some((cached, text)) = self.plan_texts.get(sql) {
            if Arc::ptr_eq(cached, plan) {
                return Arc::clone(text);
            }
        }
        if self.plan_texts.len() >= PLAN_TEXTS_MAX {
            self.plan_texts.clear();
        }
        let text: Arc<str> = format!("{plan:?}").into();
        self.plan_texts
            .insert(sql.to_owned(), (Arc::clone(plan), Arc::clone(&text)));
        text
    }

    /// Result-cache counters.
    pub fn result_cache_stats(&self) -> crate::CacheStats {
        self.results.stats()
    }
}

fn source_name(source: &ScanSource) -> String {
    match source {
        ScanSource::Table { name } => name.clone(),
        ScanSource::Files { paths } => paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

fn micros(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// `recorded`'s file as it stats now.
fn stat_version(data_dir: &Path, recorded: &FileVersion) -> Option<FileVersion> {
    let meta = std::fs::metadata(data_dir.join(&recorded.path)).ok()?;
    Some(FileVersion::from_metadata(recorded.path.clone(), &meta))
}
