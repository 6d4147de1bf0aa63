//! The SQL engine: DataFusion parses, plans and executes every query; the IO daemon is
//! its scan.
//!
//! - [`SqlSession`] owns a DataFusion `SessionContext` whose default schema is the data
//!   directory ([`catalog::DataDirSchema`]): each table, and each quoted path or glob,
//!   is a [`table::DaemonTable`] whose scans are [`scan::DaemonScanExec`]s streaming
//!   from the daemon's shared-memory ring.
//! - Projection, filters ([`filter`]: exact where the daemon applies all of a filter)
//!   and limits go to the daemon; footer statistics answer `count`/`min`/`max` and order
//!   joins.
//! - [`rules`] keeps DuckDB's results where DataFusion's would differ.
//! - The session time zone (`SET TimeZone`, [`EngineOptions::time_zone`]): tables show
//!   their instants in it, results print in it, and local times (dates, `TIMESTAMP`s,
//!   strings) made instants are read in it as DuckDB reads them ([`local_time`]); see
//!   [`crate::zone`].
//! - A result cache keyed by the optimized plan and the data version of every table
//!   it reads answers repeated queries until a file changes.
//! - Joins and sorts run under a memory pool ([`EngineOptions::memory_limit_bytes`]) and
//!   spill to disk past it.

mod bulk;
mod catalog;
mod daemon;
mod decimal_avg;
mod filter;
mod interrupt;
mod literals;
mod local_time;
mod rest;
mod rules;
mod scan;
mod table;
mod write;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use arrow_array::{Array, RecordBatch, StringArray};
use arrow_schema::{DataType, SchemaRef};
use datafusion::common::{DataFusionError, ParamValues, ScalarValue};
use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::execution::session_state::{SessionState, SessionStateBuilder};
use datafusion::logical_expr::{DdlStatement, LogicalPlan};
use datafusion::optimizer::analyzer::resolve_grouping_function::ResolveGroupingFunction;
use datafusion::optimizer::analyzer::type_coercion::TypeCoercion;
use datafusion::physical_plan::execution_plan::reset_plan_states;
use datafusion::physical_plan::{execute_stream, ExecutionPlan};
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::StreamExt;
use ringscan_ipc::client::{ensure_daemon, ClientError};
use ringscan_ipc::msg::ScanSummary;

use crate::result::QueryOutcome;
use crate::result::QueryResult;
use crate::result_cache::{DataVersion, ResultCache, ResultKey};
use catalog::DataDirSchema;
use daemon::Daemon;
use ringscan_lru::ByteLru;
use scan::DaemonScanExec;
use table::DaemonTable;

pub use bulk::{stage_bytes, BulkInsert};
pub use daemon_settings::ScanSettings;
/// A parameter's value ([`SqlSession::query_with`]).
pub use datafusion::common::ScalarValue as Param;
pub use interrupt::Interrupt;
pub use rest::{Rest, RestEnd};

/// Failure of one query of a [`SqlSession`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The daemon could not be reached.
    #[error(transparent)]
    Daemon(#[from] ClientError),
    /// Planning or execution failed (DataFusion's message, the daemon's for a scan).
    /// The message is the whole story: no source chain repeats it.
    #[error("{}", clean_message(.0))]
    Query(DataFusionError),
    /// The engine's runtime could not be started.
    #[error("cannot start the query runtime: {0}")]
    Runtime(std::io::Error),
    /// An [`Interrupt`] stopped the query; the reason it was given.
    #[error("{0}")]
    Interrupted(String),
}

impl From<DataFusionError> for EngineError {
    fn from(e: DataFusionError) -> Self {
        Self::Query(e)
    }
}

/// DataFusion's appeal to file a bug, which its internal errors carry: wrong here, where
/// they mostly mean a query DataFusion cannot type.
const BUG_APPEAL: &str = "This issue was likely caused by a bug in DataFusion's code. Please help us to resolve this by filing a bug report in our issue tracker: https://github.com/apache/datafusion/issues";

/// DataFusion's message without its wrapping ("External error: ", "Error during
/// planning: "...): the daemon's and the planner's words are the message.
fn clean_message(e: &DataFusionError) -> String {
    let message = wrapped_message(e);
    // "No function matches the given name and argument types 'sum(Utf8)'" is the
    // sentence a user needs out of a signature mismatch's page of candidates.
    const NO_MATCH: &str = "No function matches the given name and argument types '";
    if let Some(at) = message.find(NO_MATCH) {
        let rest = &message[at + NO_MATCH.len()..];
        if let Some(call) = rest.split('\'').next() {
            return format!("no function {call} (the argument types do not fit; add a cast)");
        }
    }
    message
        .replace(BUG_APPEAL, "")
        .replace("Internal error: ", "")
        .trim()
        .to_owned()
}

fn wrapped_message(e: &DataFusionError) -> String {
    match e {
        DataFusionError::External(inner) => inner.to_string(),
        DataFusionError::Context(context, inner) => {
            format!("{context}: {}", wrapped_message(inner))
        }
        DataFusionError::Plan(m) | DataFusionError::Execution(m) => m.clone(),
        DataFusionError::SQL(e, _) => format!("SQL syntax: {e}"),
        DataFusionError::NotImplemented(m) => format!("unsupported: {m}"),
        DataFusionError::ResourcesExhausted(m) => format!("out of memory for this query: {m}"),
        DataFusionError::ArrowError(e, _) => e.to_string(),
        DataFusionError::Shared(inner) => wrapped_message(inner),
        DataFusionError::Diagnostic(_, inner) => wrapped_message(inner),
        other => other.to_string(),
    }
}

/// Sizes and switches of the engine.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Bytes of planned queries kept (the plan cache, keyed by SQL text).
    pub plan_cache_bytes: usize,
    /// Bytes of results kept (the result cache); 0 disables it.
    pub result_cache_bytes: usize,
    /// How long to wait for a daemon that `spawn` started.
    pub daemon_start_wait: Duration,
    /// The data area of each scan's ring, in bytes.
    pub ring_capacity_bytes: usize,
    /// The most bytes of rows a scan takes on the control socket instead of a ring,
    /// when the daemon has them within its inline window (0: always a ring). By default
    /// 256 KiB, or `RINGSCAN_INLINE_BYTES`.
    pub inline_answer_bytes: u64,
    /// Let footer statistics answer `count`/`min`/`max` (off: always scan).
    pub use_statistics: bool,
    /// Memory for joins, sorts and aggregations, beyond which they spill to disk.
    pub memory_limit_bytes: usize,
    /// Threads that execute plans (and DataFusion's target partitions).
    pub threads: usize,
    /// The session time zone that `TIMESTAMPTZ` values are shown and taken apart in
    /// (`date_trunc`, `date_part`, casts to `DATE`), until a `SET TimeZone` changes it:
    /// an IANA name or an offset ([`crate::zone::parse_time_zone`]). DuckDB starts in
    /// the machine's zone; ringscan starts in UTC unless told, so that answers do not
    /// depend on where they are computed.
    pub time_zone: String,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            plan_cache_bytes: 8 << 20,
            result_cache_bytes: 256 << 20,
            daemon_start_wait: Duration::from_secs(10),
            ring_capacity_bytes: ringscan_ipc::msg::ScanRequest::DEFAULT_RING_CAPACITY_BYTES,
            inline_answer_bytes: scan::default_inline_answer_bytes(),
            use_statistics: true,
            memory_limit_bytes: default_memory_limit_bytes(),
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            time_zone: "UTC".into(),
        }
    }
}

/// Where a statement's result goes as it is made ([`SqlSession::query_each`]).
struct Delivery<'a> {
    each: &'a mut dyn FnMut(Handed<'_>) -> bool,
    /// Bytes of the result held before the rest is left to read as it is sent.
    hold: Option<usize>,
    /// `each` may take the batches it is handed ([`Handed::Take`]).
    takes: bool,
    /// The rest of the result, when it was left to read.
    rest: Option<Rest>,
}

/// How [`SqlSession::query_each`] hands a result over.
#[derive(Debug, Clone, Copy, Default)]
pub struct Handing {
    /// Once the batches handed over hold more than these bytes, the query returns
    /// with them and the [`Rest`] of its result; `None`: it returns with all.
    pub hold: Option<usize>,
    /// The caller may take batches ([`Handed::Take`]): what it writes out as it is
    /// handed need not stay in the outcome, and so may come as views of a scan's ring
    /// rather than copies out of it.
    pub takes: bool,
}

/// What [`SqlSession::query_each`] hands its `each`.
#[derive(Debug, Clone, Copy)]
pub enum Handed<'a> {
    /// An attempt at the statement starts: batches handed over before (by an attempt
    /// that failed) are not the result's.
    Start,
    /// The result's next batch, which stays in the outcome's result whatever `each`
    /// answers.
    Batch(&'a RecordBatch),
    /// The result's next batch, which `each` takes by answering `true`: it is then not
    /// in the outcome's result (whose row count still counts it), and must not be
    /// kept, since it may be a view of a scan's ring that the daemon writes again.
    /// Batches taken are the result's first: once `each` answers `false`, later ones
    /// are [`Handed::Batch`].
    Take(&'a RecordBatch),
}

/// Hands a statement's batches to a [`Delivery`]'s `each`: as [`Handed::Take`] while
/// it takes them (where the statement lets it), then as [`Handed::Batch`].
struct Hand<'e> {
    each: &'e mut dyn FnMut(Handed<'_>) -> bool,
    taking: bool,
    /// Rows of the batches taken.
    taken_rows: usize,
}

impl Hand<'_> {
    /// Hands `batch` over; `true` when it was taken.
    fn give(&mut self, batch: &RecordBatch) -> bool {
        if !self.taking {
            (self.each)(Handed::Batch(batch));
            return false;
        }
        if (self.each)(Handed::Take(batch)) {
            self.taken_rows += batch.num_rows();
            return true;
        }
        self.taking = false;
        false
    }
}

/// The bytes `batch`'s arrays span: their slices, not the allocations they are in (a
/// view of a ring is in the whole mapping).
fn held_bytes(batch: &RecordBatch) -> usize {
    batch
        .columns()
        .iter()
        .map(|c| c.to_data().get_slice_memory_size().unwrap_or(0))
        .sum()
}

/// Half of the machine's memory (1 GiB when it cannot be read).
pub fn default_memory_limit_bytes() -> usize {
    let total_kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        });
    total_kib.map_or(1 << 30, |kib| kib.saturating_mul(1024) / 2)
}

mod daemon_settings {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex, PoisonError};

    /// Scan settings a session can change between queries.
    #[derive(Debug)]
    pub struct ScanSettings {
        pub(crate) ring_capacity_bytes: usize,
        pub(crate) inline_answer_bytes: u64,
        use_statistics: AtomicBool,
        /// The session time zone: tables show their instant columns in it.
        time_zone: Mutex<Arc<str>>,
    }

    impl ScanSettings {
        pub(crate) fn new(
            ring_capacity_bytes: usize,
            inline_answer_bytes: u64,
            use_statistics: bool,
        ) -> Self {
            Self {
                ring_capacity_bytes,
                inline_answer_bytes: inline_answer_bytes.min(ringscan_ipc::msg::MAX_INLINE_BYTES),
                use_statistics: AtomicBool::new(use_statistics),
                time_zone: Mutex::new("UTC".into()),
            }
        }

        /// The session time zone, checked ([`crate::zone::parse_time_zone`]).
        pub fn time_zone(&self) -> Arc<str> {
            Arc::clone(
                &self
                    .time_zone
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            )
        }

        pub(crate) fn set_time_zone(&self, zone: &str) {
            *self
                .time_zone
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = zone.into();
        }

        /// Whether footer statistics are reported to the planner.
        pub fn use_statistics(&self) -> bool {
            // Relaxed: a plain switch read between queries; nothing else is ordered by it.
            self.use_statistics.load(Ordering::Relaxed)
        }

        pub(crate) fn set_use_statistics(&self, on: bool) {
            self.use_statistics.store(on, Ordering::Relaxed);
        }
    }
}

/// One client's SQL session on one data directory.
pub struct SqlSession {
    daemon: Arc<Daemon>,
    settings: Arc<ScanSettings>,
    ctx: SessionContext,
    runtime: tokio::runtime::Runtime,
    plans: ByteLru<String, Arc<CachedPlan>>,
    /// Statements with their literals as parameters ([`literals`]) that did not plan, or
    /// whose parameters do not take their literals exactly: run as written.
    literals_refused: std::collections::HashSet<String>,
    /// Each recent statement text's literal sites as [`literals`] found them (`None`:
    /// none to replace), so that a text run again is not parsed again.
    literal_shapes: HashMap<String, Option<Arc<literals::Shape>>>,
    /// Shared with the [`Rest`] of a result being read, which fills it at its end.
    results: Arc<Mutex<ResultCache>>,
    /// The zone the session started in, where `RESET TimeZone` goes back to.
    default_time_zone: Arc<str>,
}

impl std::fmt::Debug for SqlSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlSession")
            .field("data_dir", &self.daemon.data_dir())
            .field("session_id", &self.ctx.session_id())
            .finish_non_exhaustive()
    }
}

/// An optimized plan kept for its SQL text, valid while its tables' files stat the same.
#[derive(Debug)]
struct CachedPlan {
    plan: LogicalPlan,
    /// The daemon tables the plan reads, as planned.
    entries: Vec<Arc<daemon::TableEntry>>,
    /// The plan's text: the result cache's key, with the tables' data version.
    text: String,
    explain: bool,
    /// The types of `$1`, `$2`... as inferred from where they are used (`None`: not
    /// inferable). A plan with parameters is kept unoptimized and optimized per binding.
    params: Vec<Option<DataType>>,
    /// For a plan with parameters of known types: the plan optimized once with its
    /// placeholders in (PostgreSQL's generic plan), which a binding runs without
    /// optimizing again; its physical plan too where each filter on a parameter goes to
    /// the daemon whole (the scan makes the predicate from the values when it runs).
    /// `None` where the optimizer refused the placeholders.
    generic: Option<Arc<CachedPlan>>,
    /// Physical planning refused this generic plan (a parameter outside the filters
    /// pushed whole): bindings fill in its logical plan instead.
    physical_refused: std::sync::atomic::AtomicBool,
    /// The physical plan, once made, where it may run again after
    /// `reset_plan_states` (no dynamic filter reaches a scan): physical planning is
    /// most of what a cached query costs before its first batch.
    physical: Mutex<Option<Arc<dyn ExecutionPlan>>>,
}

impl CachedPlan {
    fn approx_size_bytes(&self, sql: &str) -> usize {
        // The plan's tree is a few times its text.
        sql.len() + self.text.len() * 4 + 512
    }
}

/// The statements of `sql` (separated by `;` outside strings, quoted names and
/// comments), each as written, empty ones left out: `SET TimeZone = 'Europe/Berlin';
/// SELECT ...` is two.
pub fn split_statements(sql: &str) -> Result<Vec<&str>, EngineError> {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::tokenizer::{Location, Token, Tokenizer};
    let tokens = Tokenizer::new(&GenericDialect {}, sql)
        .tokenize_with_location()
        .map_err(|e| EngineError::Query(DataFusionError::SQL(Box::new(e.into()), None)))?;
    // Locations count lines and characters from 1.
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(sql.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let byte_at = |at: Location| -> usize {
        let line = usize::try_from(at.line).unwrap_or(usize::MAX).max(1);
        let start = line_starts.get(line - 1).copied().unwrap_or(sql.len());
        let column = usize::try_from(at.column).unwrap_or(usize::MAX).max(1) - 1;
        sql[start..]
            .char_indices()
            .nth(column)
            .map_or(sql.len(), |(i, _)| start + i)
    };
    let mut statements = Vec::new();
    let mut from = 0;
    // Whether the statement so far has more than whitespace and comments.
    let mut content = false;
    for t in &tokens {
        match t.token {
            Token::SemiColon => {
                let at = byte_at(t.span.start);
                if content {
                    statements.push(sql[from..at].trim());
                }
                from = (at + 1).min(sql.len());
                content = false;
            }
            Token::Whitespace(_) | Token::EOF => {}
            _ => content = true,
        }
    }
    if content {
        statements.push(sql[from..].trim());
    }
    Ok(statements)
}

/// What a statement does to the session's planning state.
fn statement_kind(sql: &str) -> (bool, bool) {
    let head: String = sql
        .trim_start_matches(|c: char| c.is_whitespace() || c == '(')
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .collect::<String>()
        .to_ascii_uppercase();
    // An INSERT's plan is kept too (a prepared insert runs it with each row's values);
    // it changes no name.
    let cacheable = matches!(
        head.as_str(),
        "SELECT" | "WITH" | "VALUES" | "EXPLAIN" | "INSERT"
    );
    // Anything but a query may change what names mean (views, settings): plans go.
    (cacheable, !cacheable && head != "SHOW")
}

impl SqlSession {
    /// Connects to the daemon of `data_dir`, calling `spawn` to start one if none
    /// answers.
    pub fn open(
        data_dir: &Path,
        spawn: &dyn Fn() -> std::io::Result<()>,
        options: &EngineOptions,
    ) -> Result<Self, EngineError> {
        let client = ensure_daemon(data_dir, spawn, options.daemon_start_wait)?;
        let daemon = Arc::new(Daemon::new(data_dir, client));
        let settings = Arc::new(ScanSettings::new(
            options.ring_capacity_bytes,
            options.inline_answer_bytes,
            options.use_statistics,
        ));
        crate::zone::parse_time_zone(&options.time_zone)
            .map_err(|e| EngineError::Query(DataFusionError::External(Box::new(e))))?;
        settings.set_time_zone(options.time_zone.trim());
        let threads = options.threads.max(1);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("ringscan-exec")
            .enable_time()
            .build()
            .map_err(EngineError::Runtime)?;
        let mut config = SessionConfig::new()
            .with_target_partitions(threads)
            .with_information_schema(true)
            // Decimal literals stay exact (DuckDB reads `0.06` as DECIMAL, so
            // `0.06 + 0.01 = 0.07` holds).
            .set_bool("datafusion.sql_parser.parse_float_as_decimal", true)
            .set_bool("datafusion.sql_parser.map_string_types_to_utf8view", false)
            // DuckDB puts NULLs last in either direction (PostgreSQL: first when
            // descending).
            .set_str("datafusion.sql_parser.default_null_ordering", "nulls_last");
        // TIMESTAMPTZ literals and casts take the session zone; tables show their
        // instants in it (DaemonTable), and results print in it.
        config.options_mut().execution.time_zone = Some(options.time_zone.trim().into());
        // Hash joins: a build side of up to 500,000 rows is collected once (the probe
        // side is not hash-repartitioned, a copy of every probe row), and its keys up
        // to 4,096 go to the probe scan as a list that the daemon filters rows with.
        // TPC-H SF 1, two back-to-back pairs of full runs: geometric mean 1.73 and
        // 1.68x DuckDB with DataFusion's defaults (1 MiB / 128K rows, 150 keys), 1.59
        // and 1.60x with these (Q8 3.4x -> 1.5x, Q5 3.3x -> 2.7x; Q17, Q20, Q21 a
        // little slower).
        let optimizer = &mut config.options_mut().optimizer;
        optimizer.hash_join_single_partition_threshold = 32 << 20;
        optimizer.hash_join_single_partition_threshold_rows = 500_000;
        optimizer.hash_join_inlist_pushdown_max_distinct_values = 4096;
        optimizer.hash_join_inlist_pushdown_max_size = 1 << 20;
        let runtime_env = RuntimeEnvBuilder::new()
            .with_memory_pool(Arc::new(FairSpillPool::new(options.memory_limit_bytes)))
            .build_arc()?;
        let state = SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(runtime_env)
            .with_default_features()
            // DuckDB's semantics before type coercion, so that what they rewrite is
            // coerced like the rest.
            .with_analyzer_rules(vec![
                Arc::new(ResolveGroupingFunction::new()),
                Arc::new(rules::DuckDbSemantics::default()),
                Arc::new(TypeCoercion::new()),
                Arc::new(local_time::LocalTimes),
            ])
            .with_physical_optimizer_rule(Arc::new(scan::LimitInScanOrder))
            .with_physical_optimizer_rule(Arc::new(scan::OffsetToDaemon))
            .with_physical_optimizer_rule(Arc::new(scan::DistinctToDaemon))
            .with_physical_optimizer_rule(Arc::new(scan::TopKLateMaterialization))
            .with_physical_optimizer_rule(Arc::new(scan::JoinProbeFilters))
            .with_physical_optimizer_rule(Arc::new(scan::RingSafety))
            .build();
        let ctx = SessionContext::new_with_state(state);
        let schema = Arc::new(DataDirSchema::new(
            Arc::clone(&daemon),
            Arc::clone(&settings),
        ));
        let catalog = ctx.catalog("datafusion").ok_or_else(|| {
            EngineError::Query(DataFusionError::Internal("no default catalog".into()))
        })?;
        catalog.register_schema("public", schema)?;
        Ok(Self {
            daemon,
            settings,
            ctx,
            runtime,
            plans: ByteLru::new(options.plan_cache_bytes),
            literals_refused: std::collections::HashSet::new(),
            literal_shapes: HashMap::new(),
            results: Arc::new(Mutex::new(ResultCache::new(options.result_cache_bytes))),
            default_time_zone: options.time_zone.trim().into(),
        })
    }

    /// Runs `work` to its end on this thread, with the session's runtime as the
    /// current one: what the plan spawns (its partitions) runs on that runtime's
    /// workers. On a thread that drives another runtime already (the host runs each
    /// connection on its own thread and runtime, and its statements inline), where
    /// tokio refuses a nested `block_on`, this thread polls `work` itself and sleeps
    /// between polls: it has nothing else to do meanwhile.
    fn wait<F: std::future::Future>(&self, work: F) -> F::Output {
        if tokio::runtime::Handle::try_current().is_err() {
            return self.runtime.block_on(work);
        }
        let _current = self.runtime.enter();
        poll_here(work)
    }

    /// The session time zone (`SET TimeZone` changes it).
    pub fn time_zone(&self) -> Arc<str> {
        self.settings.time_zone()
    }

    /// Takes the time zone a statement (`SET TimeZone = ...`, `RESET TimeZone`) left in
    /// DataFusion's configuration: checked, and the tables' view of their instants
    /// follows it. An unknown zone is refused and the previous one stays.
    fn follow_time_zone(&self) -> Result<(), EngineError> {
        let configured = self
            .ctx
            .state()
            .config()
            .options()
            .execution
            .time_zone
            .clone();
        let current = self.settings.time_zone();
        let wanted = match configured.as_deref().map(str::trim) {
            // RESET: back to where the session started.
            None | Some("") => Arc::clone(&self.default_time_zone),
            Some(z) => z.into(),
        };
        let checked = crate::zone::parse_time_zone(&wanted);
        let zone = if checked.is_ok() { wanted } else { current };
        if configured.as_deref() != Some(&*zone) {
            self.ctx
                .state_ref()
                .write()
                .config_mut()
                .options_mut()
                .execution
                .time_zone = Some(zone.to_string());
        }
        self.settings.set_time_zone(&zone);
        checked
            .map(drop)
            .map_err(|e| EngineError::Query(DataFusionError::External(Box::new(e))))
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        self.daemon.data_dir()
    }

    /// Turns answers from footer statistics on or off.
    pub fn set_use_statistics(&mut self, on: bool) {
        self.settings.set_use_statistics(on);
        // Kept physical plans may hold answers from statistics.
        self.plans.clear();
    }

    /// The DataFusion context (tests, embedding).
    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// The plan of `sql` as EXPLAIN prints it: the logical and physical plans, each scan
    /// with what it pushes to the daemon.
    pub fn explain(&mut self, sql: &str) -> Result<String, EngineError> {
        let outcome = self.query(&format!("EXPLAIN {sql}"), false)?;
        Ok(outcome.explain.unwrap_or_default())
    }

    /// The plan of `sql`, from the plan cache while its tables are unchanged: optimized,
    /// or, for a statement with parameters, as planned (see [`Self::bind`]).
    /// The flag: it came from the cache.
    fn plan(&mut self, sql: &str) -> Result<(Arc<CachedPlan>, bool), EngineError> {
        let (cacheable, invalidates) = statement_kind(sql);
        if cacheable {
            if let Some(cached) = self.plans.get(&sql.to_owned()).cloned() {
                let data_dir = self.daemon.data_dir();
                if cached.entries.iter().all(|e| e.still_current(data_dir)) {
                    return Ok((cached, true));
                }
            }
        }
        if invalidates {
            self.plans.clear();
        }
        let state = self.ctx.state();
        let dialect = state.config().options().sql_parser.dialect;
        let mut statement = state.sql_to_statement(sql, &dialect)?;
        refuse_table_ddl(&statement)?;
        exponent_literals_as_double(&mut statement);
        let logical = self.wait(state.statement_to_plan(statement))?;
        refuse_writes(&logical)?;
        let params = parameter_types(&logical)?;
        let explain = matches!(logical, LogicalPlan::Explain(_) | LogicalPlan::Analyze(_));
        // A join is planned with each binding's values (a custom plan): its plan filters
        // the probe scan by the build side's keys, which a plan for every binding lost
        // (the whole probe table came, 60,050 rows for 50 that join).
        let generic = (!params.is_empty()
            && !explain
            && params.iter().all(Option::is_some)
            && !has_join(&logical))
        .then(|| self.ctx.state().optimize(&logical).ok())
        .flatten()
        .map(|plan| {
            Arc::new(CachedPlan {
                entries: tables_of(&plan),
                text: format!("{}", plan.display_indent()),
                plan,
                explain,
                params: params.clone(),
                generic: None,
                physical_refused: false.into(),
                physical: Mutex::new(None),
            })
        });
        let (plan, text) = if params.is_empty() {
            let df = self.wait(self.ctx.execute_logical_plan(logical))?;
            if invalidates {
                self.follow_time_zone()?;
            }
            let (state, plan) = df.into_parts();
            let plan = state.optimize(&plan)?;
            let text = format!("{}", plan.display_indent());
            (plan, text)
        } else {
            (logical, String::new())
        };
        let cached = Arc::new(CachedPlan {
            entries: tables_of(&plan),
            text,
            plan,
            explain,
            params,
            generic,
            physical_refused: false.into(),
            physical: Mutex::new(None),
        });
        if cacheable {
            let size = cached.approx_size_bytes(sql);
            self.plans.insert(sql.to_owned(), Arc::clone(&cached), size);
        }
        Ok((cached, false))
    }

    /// The plan of a cached plan with `values` for its parameters: the generic plan
    /// with them (its physical plan where it has one), else a plan optimized for them.
    fn bind(
        &self,
        cached: Arc<CachedPlan>,
        values: Vec<ScalarValue>,
        state: &SessionState,
    ) -> Result<Bound, EngineError> {
        if cached.params.len() != values.len() {
            return Err(EngineError::Query(DataFusionError::Plan(format!(
                "the statement takes {} parameter(s) ($1...), {} value(s) were given",
                cached.params.len(),
                values.len()
            ))));
        }
        if values.is_empty() {
            return Ok(Bound::plain(cached));
        }
        let values = values
            .into_iter()
            .zip(&cached.params)
            .enumerate()
            .map(|(i, (value, ty))| bind_value(i + 1, value, ty.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(generic) = &cached.generic {
            let param_values = ParamValues::from(values.clone());
            if write::is_values_insert(&generic.plan)
                && write::values_rows(&generic.plan, Some(&param_values)).is_some()
            {
                // The rows are made from the values directly (`write::values_rows`):
                // no physical plan.
                return Ok(Bound {
                    plan: Arc::clone(generic),
                    physical: None,
                    params: Some(Arc::new(scan::BoundParams(param_values))),
                    key_values: None,
                });
            }
            if values_keep_pushdown(&generic.plan, &param_values) {
                let key_values = Some(format!("{values:?}"));
                if !generic.physical_refused.load(Ordering::Relaxed)
                    && !matches!(generic.plan, LogicalPlan::Dml(_))
                {
                    match self.physical(generic, state) {
                        Ok(physical) => {
                            return Ok(Bound {
                                plan: Arc::clone(generic),
                                physical: Some(physical),
                                params: Some(Arc::new(scan::BoundParams(param_values))),
                                key_values,
                            })
                        }
                        Err(_) => generic.physical_refused.store(true, Ordering::Relaxed),
                    }
                }
                let plan = generic.plan.clone().with_param_values(param_values)?;
                return Ok(Bound {
                    plan: Arc::new(CachedPlan {
                        entries: generic.entries.clone(),
                        text: generic.text.clone(),
                        plan,
                        explain: generic.explain,
                        params: Vec::new(),
                        generic: None,
                        physical_refused: false.into(),
                        physical: Mutex::new(None),
                    }),
                    physical: None,
                    params: None,
                    key_values,
                });
            }
        }
        let plan = cached.plan.clone().with_param_values(values)?;
        let plan = state.optimize(&plan)?;
        Ok(Bound::plain(Arc::new(CachedPlan {
            entries: tables_of(&plan),
            text: format!("{}", plan.display_indent()),
            plan,
            explain: cached.explain,
            params: Vec::new(),
            generic: None,
            physical_refused: false.into(),
            physical: Mutex::new(None),
        })))
    }

    /// `sql`, a plain `SELECT` with literals in its `WHERE`, as the text with those
    /// literals as parameters and their values, when the plan of that text (planned
    /// once, then from the plan cache) takes every one of them exactly; see
    /// [`literals`]. `None`: run `sql` as written.
    fn parameterized(&mut self, sql: &str) -> Option<(String, Vec<ScalarValue>)> {
        // Short statements only (a lookup's is a few dozen bytes): the texts are kept
        // (`literal_shapes`, `literals_refused`), by count, so their size is bounded here.
        const MAX_SQL_BYTES: usize = 4096;
        let head = sql.trim_start().get(..6)?;
        if !head.eq_ignore_ascii_case("select") || sql.contains('$') || sql.len() > MAX_SQL_BYTES {
            return None;
        }
        let shape = match self.literal_shapes.get(sql) {
            Some(shape) => shape.clone(),
            None => {
                let shape = self.literal_shape(sql);
                const MAX_SHAPES: usize = 1024;
                if self.literal_shapes.len() >= MAX_SHAPES {
                    self.literal_shapes.clear();
                }
                self.literal_shapes.insert(sql.to_owned(), shape.clone());
                shape
            }
        }?;
        let (text, found) = (&shape.0, &shape.1);
        if self.literals_refused.contains(text) {
            return None;
        }
        // Only over the daemon's tables: the catalog's tables are made when scanned,
        // and their plans are not kept.
        let takes_all = self.plan(text).is_ok_and(|(plan, _)| {
            plan.params.len() == found.len()
                && (found.iter().zip(&plan.params)).all(|(l, ty)| literals::takes(l, ty.as_ref()))
                && reads_daemon_tables_only(&plan.plan)
        });
        if !takes_all {
            // Planned only to find out: not kept.
            self.plans.remove(text);
            self.refuse_literals(text.clone());
            return None;
        }
        Some((
            text.clone(),
            found.iter().map(literals::Literal::value).collect(),
        ))
    }

    /// `sql` parsed: the text with its literal sites as parameters, and the literals.
    fn literal_shape(&self, sql: &str) -> Option<Arc<literals::Shape>> {
        let statement = {
            let state = self.ctx.state_ref();
            let state = state.read();
            let dialect = state.config().options().sql_parser.dialect;
            match state.sql_to_statement(sql, &dialect).ok()? {
                datafusion::sql::parser::Statement::Statement(s) => s,
                _ => return None,
            }
        };
        let found = literals::sites(&statement);
        if found.is_empty() {
            return None;
        }
        let text = literals::render(&statement, &vec![true; found.len()])?;
        Some(Arc::new((text, found)))
    }

    fn refuse_literals(&mut self, text: String) {
        const MAX_REFUSED: usize = 4096;
        if self.literals_refused.len() >= MAX_REFUSED {
            self.literals_refused.clear();
        }
        self.literals_refused.insert(text);
    }

    /// Plans `sql` into the plan cache without running it: its parameters' types and
    /// the columns it returns, what a client's Describe needs.
    pub fn prepare(&mut self, sql: &str) -> Result<Prepared, EngineError> {
        self.prepare_typed(sql, &[])
    }

    /// [`Self::prepare`] with the types a client declared for `$1`, `$2`... (`None`:
    /// not declared). A declared type fills in for a parameter whose use says nothing
    /// (`SELECT $1`), and the columns are then those of the statement with values of
    /// that type, as they will be when it runs with them.
    pub fn prepare_typed(
        &mut self,
        sql: &str,
        declared: &[Option<DataType>],
    ) -> Result<Prepared, EngineError> {
        let (cached, _) = self.plan(sql)?;
        let mut params = cached.params.clone();
        let fills = params
            .iter()
            .zip(declared)
            .any(|(inferred, given)| inferred.is_none() && given.is_some());
        let schema = if fills {
            for (inferred, given) in params.iter_mut().zip(declared) {
                if inferred.is_none() {
                    inferred.clone_from(given);
                }
            }
            let nulls = params
                .iter()
                .map(|t| ScalarValue::try_from(t.as_ref().unwrap_or(&DataType::Utf8)))
                .collect::<Result<Vec<_>, _>>()?;
            let bound = self.bind(Arc::clone(&cached), nulls, &self.ctx.state())?;
            Arc::new(bound.plan.plan.schema().as_arrow().clone())
        } else {
            Arc::new(cached.plan.schema().as_arrow().clone())
        };
        Ok(Prepared {
            params,
            schema: crate::zone::zoned_schema(&schema, &self.time_zone()),
        })
    }

    /// The physical plan of `sql` (no parameters), made from the plan cache's logical
    /// plan when it has one: what a query costs before its first batch (benchmarks).
    pub fn physical_plan(&mut self, sql: &str) -> Result<Arc<dyn ExecutionPlan>, EngineError> {
        let (cached, _) = self.plan(sql)?;
        let state = self.ctx.state();
        let bound = self.bind(cached, Vec::new(), &state)?;
        self.physical(&bound.plan, &state)
    }

    fn physical(
        &self,
        cached: &CachedPlan,
        state: &SessionState,
    ) -> Result<Arc<dyn ExecutionPlan>, EngineError> {
        let mut kept = cached
            .physical
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(plan) = kept.as_ref() {
            return Ok(reset_plan_states(Arc::clone(plan))?);
        }
        let plan = self.wait(
            state
                .query_planner()
                .create_physical_plan(&cached.plan, state),
        )?;
        if !cached.explain && !matches!(cached.plan, LogicalPlan::Dml(_)) && rerunnable(&plan) {
            *kept = Some(Arc::clone(&plan));
        }
        Ok(plan)
    }

    /// Runs `sql`; `use_result_cache: false` neither reads nor fills the result cache.
    pub fn query(
        &mut self,
        sql: &str,
        use_result_cache: bool,
    ) -> Result<QueryOutcome, EngineError> {
        self.query_with(sql, Vec::new(), use_result_cache)
    }

    /// Runs `sql` with `params` as its `$1`, `$2`...: planned once per SQL text, each
    /// value cast to the type its use asks for.
    pub fn query_with(
        &mut self,
        sql: &str,
        params: Vec<ScalarValue>,
        use_result_cache: bool,
    ) -> Result<QueryOutcome, EngineError> {
        self.query_until(sql, params, use_result_cache, &Interrupt::new())
    }

    /// [`Self::query_with`], stopped with [`EngineError::Interrupted`] when `interrupt`
    /// fires: before execution (the query does not start) or during it (its scans are
    /// dropped).
    pub fn query_until(
        &mut self,
        sql: &str,
        params: Vec<ScalarValue>,
        use_result_cache: bool,
        interrupt: &Interrupt,
    ) -> Result<QueryOutcome, EngineError> {
        self.query_each(
            sql,
            params,
            use_result_cache,
            interrupt,
            Handing::default(),
            &mut |_| false,
        )
        .map(|(outcome, _)| outcome)
    }

    /// [`Self::query_until`], handing `each` every batch of the result as it comes, in
    /// order (the caller's thread polls the query: whatever `each` does, the daemon's
    /// scan goes on meanwhile): a host formats rows for the wire while the rest are
    /// still scanned. A result that fails or is interrupted after some batches were
    /// handed over is an error all the same; a statement run again for its own error
    /// (literals as parameters refused) hands its batches over again from the first.
    ///
    /// `how.hold`: once the batches handed over hold more than these bytes, the query
    /// returns with them and the [`Rest`] of its result, to be read as the caller
    /// sends what it has (the outcome's scan summary counts what the scans had done by
    /// then; the rest fills the result cache and reports the whole scan at its end). A
    /// statement that writes is never split.
    /// `how.takes`: a query's batches are handed as [`Handed::Take`] (not an EXPLAIN's
    /// or a write's), and the caller's answer says whether it took each.
    pub fn query_each(
        &mut self,
        sql: &str,
        params: Vec<ScalarValue>,
        use_result_cache: bool,
        interrupt: &Interrupt,
        how: Handing,
        each: &mut dyn FnMut(Handed<'_>) -> bool,
    ) -> Result<(QueryOutcome, Option<Rest>), EngineError> {
        let mut to = Delivery {
            each,
            hold: how.hold,
            takes: how.takes,
            rest: None,
        };
        if params.is_empty() {
            if let Some((text, values)) = self.parameterized(sql) {
                match self.run(&text, values, use_result_cache, interrupt, true, &mut to) {
                    Err(EngineError::Interrupted(reason)) => {
                        return Err(EngineError::Interrupted(reason))
                    }
                    Ok(outcome) => return Ok((outcome, to.rest)),
                    // Run as written (its own error, if any, is the one to give).
                    Err(_) => self.refuse_literals(text),
                }
            }
        }
        let outcome = self.run(sql, params, use_result_cache, interrupt, false, &mut to)?;
        Ok((outcome, to.rest))
    }

    /// [`Self::query_until`] of `sql` as given; `own_literals`: its parameters are a
    /// statement's own literals ([`Self::parameterized`]), whose result is kept in the
    /// result cache at its first run as the statement's always was (a prepared
    /// statement's binding is kept at its second).
    fn run(
        &mut self,
        sql: &str,
        params: Vec<ScalarValue>,
        use_result_cache: bool,
        interrupt: &Interrupt,
        own_literals: bool,
        to: &mut Delivery<'_>,
    ) -> Result<QueryOutcome, EngineError> {
        let start = Instant::now();
        // Whatever an earlier attempt handed over does not count.
        (to.each)(Handed::Start);
        to.rest = None;
        let hold = to.hold;
        if write::may_be_ddl(sql) {
            if let Some(outcome) = self.run_ddl(sql, start)? {
                return Ok(outcome);
            }
        }
        let (cached, plan_hit) = self.plan(sql)?;
        // The session's state read in place, not cloned (a clone and its drop were a
        // twentieth of a single-row insert's host time); released before the plan runs.
        let state_ref = self.ctx.state_ref();
        let state = state_ref.read();
        let bound = self.bind(cached, params, &state)?;
        if matches!(bound.plan.plan, LogicalPlan::Dml(_)) {
            let values = bound.params.as_ref().map(|p| &p.0);
            if let Some(rows) = write::values_rows(&bound.plan.plan, values) {
                let inserted = rows
                    .and_then(|(_, batch)| self.insert_values(&bound.plan.plan, &batch))
                    .map_err(|e| {
                        self.plans.remove(&sql.to_owned());
                        EngineError::from(e)
                    })?;
                let mut outcome =
                    QueryOutcome::command(format!("INSERT 0 {inserted}"), micros(start));
                outcome.plan_hit = plan_hit;
                return Ok(outcome);
            }
        }
        let cached = Arc::clone(&bound.plan);
        let generic_plan = bound.key_values.is_some();
        let is_explain = cached.explain;
        let writes = matches!(cached.plan, LogicalPlan::Dml(_));
        let mut hand = Hand {
            each: &mut *to.each,
            taking: to.takes && !is_explain && !writes,
            taken_rows: 0,
        };
        let zone = self.time_zone();
        // The zone is part of the answer: a plan's text names no types, and the same
        // text truncates to other days in another zone.
        let key =
            (use_result_cache && !is_explain && !writes && !cached.entries.is_empty()).then(|| {
                let values = bound.key_values.as_deref().unwrap_or_default();
                ResultKey::from_parts(
                    format!("time zone {zone}\n{}\n{values}", cached.text),
                    data_version(&cached.entries),
                )
            });
        let hit = key.as_ref().and_then(|k| self.results().get(k));
        if let Some(mut result) = hit {
            let kept: Vec<RecordBatch> = result
                .batches
                .iter()
                .filter(|b| !hand.give(b))
                .cloned()
                .collect();
            if kept.len() < result.batches.len() {
                result = Arc::new(QueryResult {
                    schema: Arc::clone(&result.schema),
                    batches: kept,
                    rows: result.rows,
                });
            }
            return Ok(QueryOutcome {
                result,
                explain: None,
                scan: None,
                plan_hit,
                generic_plan,
                result_hit: true,
                from_statistics: false,
                total_us: micros(start),
                command: None,
            });
        }
        let tables = &cached.entries;
        let physical = match bound.physical {
            Some(physical) => physical,
            None => self.physical(&cached, &state)?,
        };
        // The session's configuration (with the statement's parameter values) and
        // runtime, and no copy of its function registry: a physical plan holds its
        // functions already, and copying several hundred of them (what
        // `TaskContext::from(&SessionState)` does) was a twelfth of a point lookup's
        // time in the host.
        let mut config = state.config().clone();
        if let Some(params) = bound.params {
            config = config.with_extension(params);
        }
        if hand.taking {
            // Scans with nothing but pass-through operators above them hand up views
            // of their rings.
            config = config.with_extension(Arc::new(scan::CallerTakes));
        }
        let task = Arc::new(datafusion::execution::TaskContext::new(
            None,
            state.session_id().to_owned(),
            config,
            HashMap::new(),
            HashMap::new(),
            HashMap::new(),
            HashMap::new(),
            Arc::clone(state.runtime_env()),
        ));
        drop(state);
        if let Some(reason) = interrupt.reason() {
            return Err(EngineError::Interrupted(reason));
        }
        // The result's instants in the session zone, whatever zone an expression left
        // them in; batch by batch, each handed over as it comes.
        let schema = crate::zone::zoned_schema(&physical.schema(), &zone);
        let relabel = !Arc::ptr_eq(&schema, &physical.schema());
        let hold = hold.filter(|_| !writes && !is_explain);
        // A binding of a prepared statement is kept at its second run (the values of
        // point lookups rarely repeat; copying each answer out would cost them a tenth).
        let key = key.filter(|k| !generic_plan || own_literals || self.results().seen_before(k));
        // Batches taken may be views of a ring: the result cache keeps copies of them,
        // while they stay under what a result read as it is sent may copy.
        let mut for_cache = (hand.taking && key.is_some()).then(|| (Vec::new(), 0usize));
        let views = hand.taking;
        let running = Box::pin(async {
            let mut stream = execute_stream(Arc::clone(&physical), task)?;
            let mut batches = Vec::new();
            let (mut handed, mut held) = (0usize, 0usize);
            while let Some(batch) = stream.next().await {
                let batch = if relabel {
                    crate::zone::zoned_batch(&schema, batch?)?
                } else {
                    batch?
                };
                // Sized where it may matter: not a point lookup's one small batch.
                if hold.is_some() && (handed > 0 || batch.num_rows() > 1024) {
                    held += held_bytes(&batch);
                }
                handed += 1;
                let taken = hand.give(&batch);
                // A batch kept in the outcome must not pin a ring.
                let copy = |b: &RecordBatch| crate::owned_copy(b.schema(), std::slice::from_ref(b));
                let kept = match (taken, views) {
                    (true, _) => None,
                    (false, true) => Some(copy(&batch)?),
                    (false, false) => Some(batch.clone()),
                };
                if let Some((cache, bytes)) = &mut for_cache {
                    *bytes += held_bytes(&batch);
                    if *bytes > rest::STREAMED_CACHE_BYTES {
                        for_cache = None;
                    } else {
                        cache.push(match &kept {
                            Some(kept) => kept.clone(),
                            None => copy(&batch)?,
                        });
                    }
                }
                batches.extend(kept);
                if hold.is_some_and(|limit| held > limit) {
                    // The rest is read as it is sent.
                    return Ok::<_, DataFusionError>((batches, Some(stream)));
                }
            }
            Ok((batches, None))
        });
        let stopped = Box::pin(interrupt.fired());
        let batches = match self.wait(futures::future::select(running, stopped)) {
            futures::future::Either::Left((Err(e), _)) if writes => {
                // The table may have been made anew with other columns: plan again.
                self.plans.remove(&sql.to_owned());
                return Err(not_null_words(e, &cached.plan).into());
            }
            futures::future::Either::Left((batches, _)) => batches?,
            futures::future::Either::Right((reason, _)) => {
                return Err(EngineError::Interrupted(reason))
            }
        };
        let (batches, unread) = batches;
        // A result still being read: its scans go on, and their summaries so far are
        // what there is (waiting for their end would wait for the client).
        let (scans, scanned) = daemon_scans(&physical, unread.is_none());
        let from_statistics = !tables.is_empty() && !scanned;
        let any_scan = !scans.is_empty();
        let mut summary = combined_summary(scans);
        if from_statistics {
            // The footers that answered: every file and row group of each table.
            for stats in tables.iter().filter_map(|t| self.daemon.statistics(t)) {
                summary.files_considered += stats.file_count;
                summary.row_groups_considered += stats.row_group_count;
            }
        }
        let rows = hand.taken_rows + batches.iter().map(RecordBatch::num_rows).sum::<usize>();
        if is_explain {
            return Ok(QueryOutcome {
                result: Arc::new(QueryResult {
                    schema,
                    batches: Vec::new(),
                    rows: 0,
                }),
                explain: Some(explain_text(&batches)),
                scan: None,
                plan_hit,
                generic_plan,
                result_hit: false,
                from_statistics: false,
                total_us: micros(start),
                command: None,
            });
        }
        let mut result = Arc::new(QueryResult {
            schema,
            batches,
            rows,
        });
        // What the result cache takes: copies (of the batches taken too), or the
        // result's own batches, copied out of any ring.
        let copies = match (&key, for_cache) {
            (None, _) => None,
            (Some(_), Some(copies)) => Some(copies),
            // Batches were taken, and the copies outgrew the limit: not kept.
            (Some(_), None) if views => None,
            (Some(_), None) => {
                result = Arc::new(result.owned().map_err(DataFusionError::from)?);
                Some((
                    result.batches.clone(),
                    result.batches.iter().map(held_bytes).sum(),
                ))
            }
        };
        let filling = key
            .zip(copies)
            .map(|(key, (batches, bytes))| rest::Filling {
                cache: Arc::clone(&self.results),
                key,
                schema: Arc::clone(&result.schema),
                bytes,
                batches,
                rows,
            });
        let command = writes.then(|| format!("INSERT 0 {}", inserted_rows(&result)));
        match unread {
            None => filling.into_iter().for_each(rest::Filling::fill),
            Some(stream) => {
                let zoned = relabel.then(|| Arc::clone(&result.schema));
                let runtime = self.runtime.handle().clone();
                // The rest fills the cache at its end, if the result stays small.
                let filling = filling.filter(|f| f.bytes <= rest::STREAMED_CACHE_BYTES);
                to.rest = Some(Rest::new(
                    stream, zoned, runtime, interrupt, physical, filling,
                ));
            }
        }
        Ok(QueryOutcome {
            result,
            explain: None,
            scan: (any_scan || from_statistics).then_some(summary),
            plan_hit,
            generic_plan,
            result_hit: false,
            from_statistics,
            total_us: micros(start),
            command,
        })
    }

    /// Runs `sql` when it is a statement [`write`] runs itself (`CREATE TABLE`, `DROP
    /// TABLE`, `TRUNCATE`); `Ok(None)` when it is not one.
    fn run_ddl(&mut self, sql: &str, start: Instant) -> Result<Option<QueryOutcome>, EngineError> {
        let ddl = if write::is_checkpoint(sql) {
            write::Ddl::Checkpoint
        } else {
            let state = self.ctx.state();
            let dialect = state.config().options().sql_parser.dialect;
            let statement = state.sql_to_statement(sql, &dialect)?;
            let datafusion::sql::parser::Statement::Statement(ast) = &statement else {
                return Ok(None);
            };
            let Some(ddl) = write::ddl(ast)? else {
                return Ok(None);
            };
            ddl
        };
        let mut tag = ddl.tag().to_owned();
        match &ddl {
            write::Ddl::Create {
                name,
                schema: None,
                primary_key,
                if_not_exists,
                query: Some(query),
            } => {
                // Planned first for its columns; then run as `INSERT INTO name query`,
                // whose sink stages rows past memory in parts as the query makes them
                // (`bulk`), not collected whole first.
                if *if_not_exists && self.table_schema(name).is_ok() {
                    // PostgreSQL skips the query too.
                    return Ok(Some(QueryOutcome::command(
                        "SELECT 0".into(),
                        micros(start),
                    )));
                }
                let planned = self.prepare(query)?;
                let fields: Vec<arrow_schema::Field> = planned
                    .schema
                    .fields()
                    .iter()
                    .map(|f| {
                        arrow_schema::Field::new(f.name(), write::stored_type(f.data_type()), true)
                    })
                    .collect();
                let schema = Arc::new(arrow_schema::Schema::new(fields));
                write::run(
                    &self.daemon,
                    &write::Ddl::Create {
                        name: name.clone(),
                        schema: Some(schema.as_ref().clone()),
                        primary_key: primary_key.clone(),
                        if_not_exists: *if_not_exists,
                        query: None,
                    },
                )?;
                // The new table, named as the parser gave it (one plain component).
                self.plans.clear();
                let insert = format!("INSERT INTO \"{}\" {query}", name.replace('"', "\"\""));
                let inserted = match self.query(&insert, false) {
                    Ok(outcome) => inserted_rows(&outcome.result),
                    Err(e) => {
                        // All or nothing, as PostgreSQL's: the table goes with its rows.
                        let drop = write::Ddl::Drop {
                            names: vec![name.clone()],
                            if_exists: true,
                        };
                        let _ = write::run(&self.daemon, &drop);
                        self.plans.clear();
                        return Err(e);
                    }
                };
                tag = format!("SELECT {inserted}");
            }
            other => write::run(&self.daemon, other)?,
        }
        // Names may mean other tables now.
        self.plans.clear();
        Ok(Some(QueryOutcome::command(tag, micros(start))))
    }

    /// Writes the rows of an `INSERT ... VALUES` made without DataFusion
    /// ([`write::values_rows`]) into the insert's table.
    fn insert_values(
        &self,
        plan: &LogicalPlan,
        batch: &RecordBatch,
    ) -> datafusion::common::Result<u64> {
        use datafusion::datasource::source_as_provider;
        let LogicalPlan::Dml(dml) = plan else {
            return Err(DataFusionError::Internal("not an insert".into()));
        };
        let provider = source_as_provider(&dml.target)?;
        let Some(table) = provider.downcast_ref::<DaemonTable>() else {
            return Err(DataFusionError::Plan(format!(
                "{}: not a table of the data directory",
                dml.table_name
            )));
        };
        let entry = table.entry();
        let ringscan_ipc::msg::ScanSource::Table { name } = &entry.source else {
            return datafusion::common::not_impl_err!(
                "INSERT into files named by path: insert into a table (CREATE TABLE makes one)"
            );
        };
        let batch = write::stored_batch(batch, &entry.schema)?;
        self.daemon.insert(name, std::slice::from_ref(&batch))
    }

    /// The columns of table `name` as stored (what rows written into it must have).
    pub fn table_schema(&self, name: &str) -> Result<SchemaRef, EngineError> {
        let source = ringscan_ipc::msg::ScanSource::Table {
            name: name.to_owned(),
        };
        let entry = self.daemon.table(&source).map_err(|e| match e {
            ClientError::Daemon { message } => EngineError::Query(DataFusionError::Plan(message)),
            other => EngineError::Daemon(other),
        })?;
        Ok(Arc::clone(&entry.schema))
    }

    /// Writes `batches` (columns as [`Self::table_schema`] gives them) into table
    /// `name` as one statement: all durable, or none. The rows written.
    pub fn insert(&mut self, name: &str, batches: &[RecordBatch]) -> Result<u64, EngineError> {
        Ok(self.daemon.insert(name, batches)?)
    }

    /// Drops `sql`'s plan from the plan cache: for a query whose tables the cache
    /// cannot see change (a catalog computed when scanned).
    pub fn forget_plan(&mut self, sql: &str) {
        self.plans.remove(&sql.to_owned());
    }

    /// Result-cache counters.
    pub fn result_cache_stats(&self) -> crate::CacheStats {
        self.results().stats()
    }

    fn results(&self) -> std::sync::MutexGuard<'_, ResultCache> {
        self.results.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A planned statement as a client describes it.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// `$1`, `$2`...: the type each is used as, `None` where nothing in the statement
    /// says (the value's own type is used).
    pub params: Vec<Option<DataType>>,
    /// The columns it returns.
    pub schema: SchemaRef,
}

/// `$1`, `$2`... of `plan` in order, each with the type its use gives it.
/// Polls `work` on this thread until it is done, parked between polls until its waker
/// is called. Unlike `futures::executor::block_on`, it may run inside a future polled
/// by that executor (the catalog's tables are listed with it, from inside a plan).
fn poll_here<F: std::future::Future>(work: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    // Outside tokio's cooperative budget: polled inside a task of another runtime (a
    // host's connection), a channel past that task's budget defers its wake-up to
    // that runtime, which never gets the thread back meanwhile (a COPY of a million
    // rows hung on its 129th batch).
    let mut work = std::pin::pin!(tokio::task::unconstrained(work));
    loop {
        if let std::task::Poll::Ready(done) = std::future::Future::poll(work.as_mut(), &mut cx) {
            return done;
        }
        // A wake-up before the park leaves its token: the park returns at once.
        std::thread::park();
    }
}

fn parameter_types(plan: &LogicalPlan) -> Result<Vec<Option<DataType>>, EngineError> {
    let found = plan.get_parameter_types()?;
    let mut params = Vec::new();
    for (id, ty) in found {
        let index = id
            .strip_prefix('$')
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| (1..=65_535).contains(n))
            .ok_or_else(|| {
                EngineError::Query(DataFusionError::Plan(format!(
                    "parameter {id}: only positional parameters $1, $2... are supported"
                )))
            })?;
        if params.len() < index {
            params.resize(index, None);
        }
        params[index - 1] = ty;
    }
    Ok(params)
}

/// `value` as parameter `$n` of type `ty`: cast when the types differ, a NULL typed.
fn bind_value(
    n: usize,
    value: ScalarValue,
    ty: Option<&DataType>,
) -> Result<ScalarValue, EngineError> {
    let Some(ty) = ty else {
        return Ok(value);
    };
    if value.data_type() == *ty {
        return Ok(value);
    }
    if value.is_null() {
        return Ok(ScalarValue::try_from(ty)?);
    }
    value.cast_to(ty).map_err(|e| {
        EngineError::Query(DataFusionError::Plan(format!(
            "parameter ${n}: {value} is not a {ty} ({})",
            clean_message(&e)
        )))
    })
}

/// The daemon tables `plan` reads (subqueries included), as planned.
/// Refuses statements that create tables before they are planned (planning one looks
/// its name up, which a data directory answers with "no table").
fn refuse_table_ddl(statement: &datafusion::sql::parser::Statement) -> Result<(), EngineError> {
    use datafusion::sql::parser::Statement;
    use datafusion::sql::sqlparser::ast;
    let what = match statement {
        Statement::CreateExternalTable(_) => "CREATE EXTERNAL TABLE",
        Statement::Statement(s) => match s.as_ref() {
            // Those `write` did not take (it takes every other CREATE TABLE).
            ast::Statement::CreateTable(_) => "CREATE TABLE",
            _ => return Ok(()),
        },
        _ => return Ok(()),
    };
    Err(read_only(what))
}

/// Number literals with an exponent (`1e3`, `2.5E-3`) as `DOUBLE`s, as DuckDB reads
/// them; the others stay exact decimals (`parse_float_as_decimal`), which DataFusion
/// would make of these too (`1e300` is then an error).
fn exponent_literals_as_double(statement: &mut datafusion::sql::parser::Statement) {
    use datafusion::sql::parser::Statement;
    use datafusion::sql::sqlparser::ast::{
        visit_expressions_mut, CastKind, DataType, ExactNumberInfo, Expr, Value,
    };
    use std::ops::ControlFlow;
    let ast = match statement {
        Statement::Statement(s) => s.as_mut(),
        Statement::Explain(e) => return exponent_literals_as_double(&mut e.statement),
        _ => return,
    };
    let _ = visit_expressions_mut(ast, |expr| {
        if let Expr::Value(v) = expr {
            if let Value::Number(text, _) = &v.value {
                if text.contains(['e', 'E']) {
                    let mut literal = v.clone();
                    literal.value = Value::SingleQuotedString(text.clone());
                    *expr = Expr::Cast {
                        kind: CastKind::Cast,
                        expr: Box::new(Expr::Value(literal)),
                        data_type: DataType::Double(ExactNumberInfo::None),
                        array: false,
                        format: None,
                    };
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
}

fn read_only(what: &str) -> EngineError {
    EngineError::Query(DataFusionError::NotImplemented(format!(
        "{what}: a table of the data directory is its Parquet files; CREATE TABLE makes one \
         that INSERT and COPY write"
    )))
}

/// Arrow's refusal of a NULL in a `NOT NULL` column of an `INSERT`'s rows, in
/// PostgreSQL's words (which clients map to SQLSTATE 23502): the column by its table
/// name where the rows are the table's columns in order.
fn not_null_words(e: DataFusionError, plan: &LogicalPlan) -> DataFusionError {
    let text = e.to_string();
    let Some((_, rest)) = text.split_once("Column '") else {
        return e;
    };
    let Some((column, _)) = rest.split_once("' is declared as non-nullable") else {
        return e;
    };
    let LogicalPlan::Dml(dml) = plan else {
        return e;
    };
    let schema = dml.target.schema();
    let position = column
        .strip_prefix("column")
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|&n| n >= 1 && dml.input.schema().fields().len() == schema.fields().len());
    let name = match (schema.field_with_name(column), position) {
        (Ok(field), _) => field.name().clone(),
        (Err(_), Some(n)) => schema.field(n - 1).name().clone(),
        (Err(_), None) => column.to_owned(),
    };
    DataFusionError::Execution(format!(
        "null value in column \"{name}\" of relation \"{}\" violates not-null constraint",
        dml.table_name.table()
    ))
}

/// The count an `INSERT`'s plan returns.
fn inserted_rows(result: &QueryResult) -> u64 {
    use arrow_array::cast::AsArray;
    result
        .batches
        .iter()
        .filter(|b| b.num_columns() == 1)
        .filter_map(|b| {
            b.column(0)
                .as_primitive_opt::<arrow_array::types::UInt64Type>()
        })
        .map(|c| c.iter().flatten().sum::<u64>())
        .sum()
}

/// Refuses what would write: the tables are the data directory's Parquet files, which
/// SQL reads; only views (per session) may be created and dropped.
fn refuse_writes(plan: &LogicalPlan) -> Result<(), EngineError> {
    use datafusion::logical_expr::dml::InsertOp;
    use datafusion::logical_expr::WriteOp;
    let what = match plan {
        LogicalPlan::Dml(dml) if dml.op == WriteOp::Insert(InsertOp::Append) => return Ok(()),
        LogicalPlan::Dml(dml) => {
            return Err(EngineError::Query(DataFusionError::NotImplemented(
                format!(
                    "{}: tables take INSERT, COPY FROM, TRUNCATE and DROP TABLE; rows are not \
                 changed or deleted one by one",
                    dml.name().to_ascii_uppercase()
                ),
            )))
        }
        LogicalPlan::Copy(_) => "COPY".into(),
        LogicalPlan::Ddl(DdlStatement::CreateView(_) | DdlStatement::DropView(_)) => return Ok(()),
        LogicalPlan::Ddl(DdlStatement::CreateMemoryTable(_)) => "CREATE TABLE".into(),
        LogicalPlan::Ddl(DdlStatement::CreateExternalTable(_)) => "CREATE EXTERNAL TABLE".into(),
        LogicalPlan::Ddl(DdlStatement::DropTable(_)) => "DROP TABLE".into(),
        LogicalPlan::Ddl(other) => other.name().to_owned(),
        _ => return Ok(()),
    };
    Err(read_only(&what))
}

/// Whether each scan of the generic plan `generic` hands every filter on a parameter
/// to its table as exactly (or as partly, or not at all) with `values` filled in as it
/// did with the placeholders when the plan was optimized: a filter left to the scan as
/// exact must stay exact with its value (a NULL, a float the column cannot hold
/// exactly, an integer out of its range do not), else the binding is optimized on its
/// own.
fn values_keep_pushdown(generic: &LogicalPlan, values: &ParamValues) -> bool {
    use datafusion::common::tree_node::TreeNodeRecursion;
    let mut same = true;
    let _ = generic.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            for filter in scan.filters.iter().filter(|f| filter::has_placeholder(f)) {
                let verdicts = filter::fill_placeholders(filter, values).and_then(|bound| {
                    Ok((
                        scan.source.supports_filters_pushdown(&[filter])?,
                        scan.source.supports_filters_pushdown(&[&bound])?,
                    ))
                });
                if !matches!(verdicts, Ok((a, b)) if a == b) {
                    same = false;
                    return Ok(TreeNodeRecursion::Stop);
                }
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
    same
}

/// A cached plan ready to run with its parameters' values.
struct Bound {
    plan: Arc<CachedPlan>,
    /// Its physical plan, where binding made it.
    physical: Option<Arc<dyn ExecutionPlan>>,
    /// The values a generic physical plan's scans take when they run.
    params: Option<Arc<scan::BoundParams>>,
    /// The values as the result cache's key adds them to a generic plan's text.
    key_values: Option<String>,
}

impl Bound {
    fn plain(plan: Arc<CachedPlan>) -> Self {
        Self {
            plan,
            physical: None,
            params: None,
            key_values: None,
        }
    }
}

fn tables_of(plan: &LogicalPlan) -> Vec<Arc<daemon::TableEntry>> {
    use datafusion::common::tree_node::TreeNodeRecursion;
    use datafusion::datasource::source_as_provider;
    let mut tables = Vec::new();
    let _ = plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            if let Ok(provider) = source_as_provider(&scan.source) {
                if let Some(table) = provider.downcast_ref::<DaemonTable>() {
                    tables.push(Arc::clone(table.entry()));
                }
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
    tables
}

/// Whether `plan` joins (subqueries included).
fn has_join(plan: &LogicalPlan) -> bool {
    use datafusion::common::tree_node::TreeNodeRecursion;
    let mut found = false;
    let _ = plan.apply_with_subqueries(|node| {
        found = matches!(node, LogicalPlan::Join(_));
        Ok(if found {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    });
    found
}

/// Whether `plan` scans tables, and only the daemon's.
fn reads_daemon_tables_only(plan: &LogicalPlan) -> bool {
    use datafusion::common::tree_node::TreeNodeRecursion;
    use datafusion::datasource::source_as_provider;
    let (mut daemon, mut other) = (0, 0);
    let _ = plan.apply_with_subqueries(|node| {
        if let LogicalPlan::TableScan(scan) = node {
            match source_as_provider(&scan.source) {
                Ok(p) if p.downcast_ref::<DaemonTable>().is_some() => daemon += 1,
                _ => other += 1,
            }
        }
        Ok(TreeNodeRecursion::Continue)
    });
    daemon > 0 && other == 0
}

/// The data version of several tables, each path prefixed by its table so that two
/// tables' versions never collide.
fn data_version(entries: &[Arc<daemon::TableEntry>]) -> DataVersion {
    let mut version = DataVersion::new();
    for entry in entries {
        let label = daemon::source_label(&entry.source);
        version.extend(
            entry
                .version()
                .into_iter()
                .map(|(p, size, mtime, id)| (Path::new(&label).join(p), size, mtime, id)),
        );
    }
    version
}

/// Whether `plan` may run again after `reset_plan_states`: no dynamic filter reaches
/// one of its scans (a reset gives the operator above a new filter; the scan would keep
/// the old one).
fn rerunnable(plan: &Arc<dyn ExecutionPlan>) -> bool {
    let mut stack = vec![Arc::clone(plan)];
    while let Some(node) = stack.pop() {
        if let Some(scan) = node.downcast_ref::<DaemonScanExec>() {
            if scan.has_dynamic_filters() {
                return false;
            }
        }
        stack.extend(node.children().into_iter().cloned());
    }
    true
}

/// How long a finished query waits for its scans' ring readers to record their
/// summaries (a reader ends at its next batch once the plan stopped reading).
const READER_WAIT: Duration = Duration::from_secs(2);

/// The summaries of every daemon scan of a physical plan, and whether it has any scan
/// (one stopped early, by a LIMIT, may have left no summary).
fn daemon_scans(plan: &Arc<dyn ExecutionPlan>, wait: bool) -> (Vec<ScanSummary>, bool) {
    let mut out = Vec::new();
    let mut any = false;
    let mut stack = vec![Arc::clone(plan)];
    while let Some(node) = stack.pop() {
        if let Some(scan) = node.downcast_ref::<DaemonScanExec>() {
            any = true;
            out.extend(if wait {
                scan.summaries_after(READER_WAIT)
            } else {
                scan.summaries()
            });
        }
        stack.extend(node.children().into_iter().cloned());
    }
    (out, any)
}

/// The work of several scans as one summary.
fn combined_summary(mut scans: Vec<ScanSummary>) -> ScanSummary {
    if scans.len() == 1 {
        // One scan: its summary as it came, with what the combined form adds. Copying
        // its counters' JSON twice and reading its sample back to sum it alone were 6%
        // of the host's CPU time in a profile of prepared point lookups.
        let mut only = scans.pop().expect("one scan");
        let counters = &mut only.counters;
        counters.scans_counted = Some(u64::from(counters.scan.is_some()));
        return only;
    }
    let Some((first, rest)) = scans.split_first() else {
        return ScanSummary::default();
    };
    let mut total = first.clone();
    for s in rest {
        total.absorb(s);
    }
    total.counters = combined_counters(&scans);
    total
}

/// The daemon's counters over several scans: each scan's `scan` sample (perf events
/// of the daemon thread that ran it, and its workers) summed into one, with
/// `scans_counted` saying how many samples went in; the ring waits summed; the cache
/// figures (running totals of the daemon, not per scan) are the last scan's.
fn combined_counters(scans: &[ScanSummary]) -> ringscan_ipc::msg::DaemonCounters {
    let Some(last) = scans.last() else {
        return Default::default();
    };
    let mut out = last.counters.clone();
    let samples: Vec<&ringscan_profiling::CounterSample> = scans
        .iter()
        .filter_map(|s| s.counters.scan.as_ref())
        .collect();
    if !samples.is_empty() {
        out.scan = Some(ringscan_profiling::CounterSample::sum(
            samples.iter().copied(),
        ));
    }
    out.scans_counted = Some(samples.len() as u64);
    out.ring_blocked_waits = scans.iter().map(|s| s.counters.ring_blocked_waits).sum();
    out
}

/// EXPLAIN's rows (plan type, plan) as text.
fn explain_text(batches: &[RecordBatch]) -> String {
    let mut text = String::new();
    for batch in batches {
        let (Some(kind), Some(plan)) = (
            batch.column(0).as_any().downcast_ref::<StringArray>(),
            batch
                .column(batch.num_columns() - 1)
                .as_any()
                .downcast_ref::<StringArray>(),
        ) else {
            continue;
        };
        for row in 0..batch.num_rows() {
            if batch.num_columns() > 1 && !kind.is_null(row) {
                text.push_str(kind.value(row));
                text.push('\n');
            }
            for line in plan.value(row).lines() {
                text.push_str("  ");
                text.push_str(line);
                text.push('\n');
            }
        }
    }
    text
}

fn micros(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`poll_here`] waits for a wake-up from another thread, also inside a future
    /// that `futures::executor::block_on` polls (where that executor refuses to nest)
    /// and on a single-threaded tokio runtime's thread, for a timer of another runtime
    /// (as a host's connection thread runs its session's statements).
    #[test]
    fn polling_here_nests_and_waits_for_other_threads() {
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            tx.send(7).expect("receiver alive");
        });
        let got = futures::executor::block_on(async { poll_here(rx) });
        assert_eq!(got, Ok(7));
        sender.join().expect("sender");
        let connection = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let session = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_time()
            .build()
            .expect("runtime");
        let slept = connection.block_on(async {
            let started = Instant::now();
            let _current = session.enter();
            poll_here(async {
                tokio::time::sleep(Duration::from_millis(20)).await;
            });
            started.elapsed()
        });
        assert!(slept >= Duration::from_millis(20), "{slept:?}");

        // Many messages from another thread through a bounded channel, received inside
        // a task of the single-threaded runtime: past tokio's budget of 128 a receive
        // would defer its wake-up to that runtime (and hang here).
        let (tx, mut rx) = tokio::sync::mpsc::channel::<u32>(4);
        let sender = std::thread::spawn(move || {
            for i in 0..1000 {
                tx.blocking_send(i).expect("receiver alive");
            }
        });
        let sum = connection.block_on(async {
            let _current = session.enter();
            poll_here(async {
                let mut sum = 0u64;
                while let Some(i) = rx.recv().await {
                    sum += u64::from(i);
                }
                sum
            })
        });
        sender.join().expect("sender");
        assert_eq!(sum, 999 * 1000 / 2);
    }

    /// The one-scan shortcut of [`combined_summary`] gives what combining the scan
    /// alone gives, for a daemon's counters, for counters without ring waits, and for
    /// no counters at all.
    #[test]
    fn one_scan_summary_is_what_combining_it_alone_gives() {
        use ringscan_ipc::msg::{CacheStatus, DaemonCounters};
        let sample = ringscan_profiling::CounterSample::default();
        let with_waits = DaemonCounters {
            scan: Some(sample.clone()),
            ring_blocked_waits: 3,
            metadata_cache: Some(CacheStatus {
                hits: 7,
                misses: 1,
                ..CacheStatus::default()
            }),
            ..DaemonCounters::default()
        };
        let without_waits = DaemonCounters {
            scan: Some(sample),
            hardware_unavailable: Some("no PMU".into()),
            ..DaemonCounters::default()
        };
        for counters in [with_waits, without_waits, DaemonCounters::default()] {
            let scan = ScanSummary {
                rows_emitted: 5,
                row_groups_pruned: 2,
                counters,
                ..ScanSummary::default()
            };
            let alone = combined_summary(vec![scan.clone()]);
            assert_eq!(
                alone.counters,
                combined_counters(std::slice::from_ref(&scan))
            );
            assert_eq!(alone.rows_emitted, 5);
            assert_eq!(alone.row_groups_pruned, 2);
        }
    }
}
