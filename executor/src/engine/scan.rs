//! [`DaemonScanExec`]: DataFusion's leaf for one scan by the IO daemon.
//!
//! Executing it sends the [`ScanRequest`] (projection, pushed predicate, limit) to the
//! daemon and streams the batches it writes into the shared-memory ring. A thread of
//! tokio's blocking pool reads the ring (its waits block) and hands batches over a
//! channel of [`CHANNEL_BATCHES`]; the batches stay in the ring, zero-copy, until
//! whatever holds them downstream drops them. A plan that keeps many (a sort, a hash
//! join's build side) would leave the daemon waiting for space, so once the live
//! batches hold half the ring, each further batch is copied out before it is handed on:
//! the ring always has room for the daemon's next batch.
//!
//! Dropping the stream (a satisfied LIMIT, a cancelled query) closes the channel; the
//! reading thread then cancels the scan in the daemon. When the scan ends, its
//! [`ScanSummary`] is kept in the exec for EXPLAIN ANALYZE and the query's outcome.

use std::fmt;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result, ScalarValue, Statistics};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::expressions::DynamicFilterPhysicalExpr;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::execution_plan::{
    replace_children_if_necessary, Boundedness, EmissionType,
};
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::filter_pushdown::{
    ChildPushdownResult, FilterPushdownPhase, FilterPushdownPropagation, PushedDown,
};
use datafusion::physical_plan::metrics::{Count, Metric, MetricValue, MetricsSet};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use ringscan_ipc::client::ScanStream;
use ringscan_ipc::msg::{Predicate, ScanRequest, ScanSummary};
use tokio::sync::mpsc;

use super::daemon::Daemon;
use super::filter::format_predicate;
use super::filter::physical_to_predicate;

/// Batches in flight between the ring reader and the plan.
const CHANNEL_BATCHES: usize = 2;

/// The most bytes of rows a scan takes on the control socket instead of a ring, when
/// the daemon has them within its inline window: a point lookup's answer then costs
/// one round trip, without the ring's set-up and wake-ups or a reader thread here.
/// 256 KiB unless `RINGSCAN_INLINE_BYTES` says (0: every scan through a ring, as
/// before; for side-by-side benchmarks).
pub(crate) fn default_inline_answer_bytes() -> u64 {
    std::env::var("RINGSCAN_INLINE_BYTES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(256 << 10)
}

/// One scan of the IO daemon, as a DataFusion leaf.
pub(crate) struct DaemonScanExec {
    daemon: Arc<Daemon>,
    request: ScanRequest,
    /// The table or path as the query named it (for EXPLAIN).
    label: String,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
    statistics: Arc<Statistics>,
    /// Filters DataFusion pushed that the daemon applies only in part (it filters
    /// again above the scan).
    inexact_filters: usize,
    /// Batches go up the plan as views of the ring (else as heap copies). Only safe
    /// where nothing above keeps them: [`RingSafety`] sets it.
    zero_copy: bool,
    /// Only operators that pass batches on (or filter them) stand between this scan
    /// and the plan's root: its batches go up as views of the ring too where the
    /// caller takes each as it comes ([`CallerTakes`]). [`RingSafety`] sets it.
    to_caller: bool,
    /// Filters the plan above tightens while it runs (a top-k's threshold), handed to
    /// the daemon as they change so that it skips row groups that cannot qualify.
    dynamic_filters: Vec<Arc<dyn PhysicalExpr>>,
    summaries: Arc<Mutex<Vec<ScanSummary>>>,
    /// A top-k's first pass over its sort key, whose k-th value bounds this scan
    /// ([`TopKLateMaterialization`]).
    prepass: Option<TopKPrepass>,
    /// The probe side of a hash join that pushes its keys as a dynamic filter: the
    /// scan starts once the build side is in, with the keys as a row filter
    /// ([`JoinProbeFilters`]).
    join_probe: bool,
    /// Ring readers of this scan still running (a reader records its summary as it
    /// ends, which may be after the plan above stopped reading).
    readers: Arc<(Mutex<usize>, Condvar)>,
    /// Filters on a prepared statement's parameters (`k = $1`), pushed whole: the
    /// predicate they add is made when the scan runs, from the values the query's task
    /// context carries ([`BoundParams`]), so that one physical plan serves every
    /// binding.
    param_filters: Option<Arc<ParamFilters>>,
}

/// See [`DaemonScanExec::param_filters`].
#[derive(Debug)]
pub(crate) struct ParamFilters {
    pub(crate) filters: Vec<datafusion::logical_expr::Expr>,
    /// The table's schema, which the filters name columns of.
    pub(crate) table_schema: SchemaRef,
}

/// In a task context's configuration: the plan's caller writes out each batch as it
/// comes and keeps none it took (a host writing rows for the wire), so that scans
/// marked [`DaemonScanExec::to_caller`] may hand up views of their rings.
#[derive(Debug)]
pub(crate) struct CallerTakes;

/// The values of a prepared statement's parameters for one run of its plan, carried
/// in the task context's configuration.
#[derive(Debug)]
pub(crate) struct BoundParams(pub(crate) datafusion::common::ParamValues);

impl ParamFilters {
    /// The predicate the filters make with `values` for their parameters; an error
    /// where one is no longer pushed whole (the engine checks the values first, so that
    /// is a bug, never a wrong answer).
    fn predicate(&self, values: &datafusion::common::ParamValues) -> Result<Predicate> {
        let mut parts = Vec::new();
        for filter in &self.filters {
            let bound = super::filter::fill_placeholders(filter, values)?;
            match super::filter::push_filter(&bound, &self.table_schema) {
                super::filter::Pushed::Exact(p) => parts.push(p),
                _ => {
                    return Err(DataFusionError::Internal(format!(
                        "the filter {bound} is not pushed whole with its parameter values"
                    )));
                }
            }
        }
        Ok(match parts.len() {
            1 => parts.pop().expect("one"),
            _ => Predicate::And(parts),
        })
    }
}

impl fmt::Debug for DaemonScanExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DaemonScanExec")
            .field("label", &self.label)
            .field("request", &self.request)
            .finish_non_exhaustive()
    }
}

impl DaemonScanExec {
    pub(crate) fn new(
        daemon: Arc<Daemon>,
        request: ScanRequest,
        label: String,
        schema: SchemaRef,
        statistics: Statistics,
        inexact_filters: usize,
    ) -> Self {
        let properties = PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Self {
            daemon,
            request,
            label,
            schema,
            properties: Arc::new(properties),
            statistics: Arc::new(statistics),
            inexact_filters,
            zero_copy: false,
            to_caller: false,
            dynamic_filters: Vec::new(),
            summaries: Arc::new(Mutex::new(Vec::new())),
            readers: Arc::new((Mutex::new(0), Condvar::new())),
            prepass: None,
            join_probe: false,
            param_filters: None,
        }
    }

    /// This scan adding `filters` (on parameters) to its predicate when it runs.
    pub(crate) fn with_param_filters(mut self, filters: ParamFilters) -> Self {
        self.param_filters = (!filters.filters.is_empty()).then(|| Arc::new(filters));
        self
    }

    /// The request for a run in `context`: with the parameter filters' predicate.
    fn request_in(&self, context: &TaskContext) -> Result<ScanRequest> {
        let Some(filters) = &self.param_filters else {
            return Ok(self.request.clone());
        };
        let values = context
            .session_config()
            .get_extension::<BoundParams>()
            .ok_or_else(|| {
                DataFusionError::Internal(
                    "a scan filtered on parameters ran without their values".into(),
                )
            })?;
        let added = filters.predicate(&values.0)?;
        let mut request = self.request.clone();
        request.predicate = Some(match request.predicate.take() {
            None => added,
            Some(Predicate::And(mut parts)) => {
                parts.push(added);
                Predicate::And(parts)
            }
            Some(p) => Predicate::And(vec![p, added]),
        });
        Ok(request)
    }

    /// This scan with batches handed up as views of the ring (`zero_copy`), or where
    /// the caller takes them (`to_caller`), or else copied out.
    fn with_zero_copy(&self, zero_copy: bool, to_caller: bool) -> Self {
        Self {
            zero_copy,
            to_caller,
            ..self.copy()
        }
    }

    /// A copy of this scan with fresh summaries.
    fn copy(&self) -> Self {
        Self {
            daemon: Arc::clone(&self.daemon),
            request: self.request.clone(),
            label: self.label.clone(),
            schema: Arc::clone(&self.schema),
            properties: Arc::clone(&self.properties),
            statistics: Arc::clone(&self.statistics),
            inexact_filters: self.inexact_filters,
            zero_copy: self.zero_copy,
            to_caller: self.to_caller,
            dynamic_filters: self.dynamic_filters.clone(),
            summaries: Arc::new(Mutex::new(Vec::new())),
            readers: Arc::new((Mutex::new(0), Condvar::new())),
            prepass: self.prepass.clone(),
            join_probe: self.join_probe,
            param_filters: self.param_filters.clone(),
        }
    }

    /// This scan skipping its first `skip` rows and stopping `fetch` rows after them, in
    /// the daemon (`None` where its rows are not the result's rows as they come: a filter
    /// applied above it, DISTINCT, an offset already).
    fn with_offset(&self, skip: usize, fetch: Option<usize>) -> Option<Self> {
        if self.inexact_filters > 0 || self.request.distinct || self.request.offset > 0 {
            return None;
        }
        let mut request = self.request.clone();
        request.offset = skip as u64;
        request.limit = fetch.map(|f| f as u64);
        let statistics = Arc::unwrap_or_clone(Arc::clone(&self.statistics))
            .with_fetch(fetch, skip, 1)
            .ok()?;
        Some(Self {
            request,
            statistics: Arc::new(statistics),
            ..self.copy()
        })
    }

    /// This scan with the daemon dropping rows it already sent (per row group, strings
    /// read as dictionaries): for a grouping without aggregates over every column of
    /// the scan, which removes duplicates anyway.
    fn with_distinct(&self) -> Option<Self> {
        if self.request.distinct || self.request.limit.is_some() || self.request.offset > 0 {
            return None;
        }
        let mut request = self.request.clone();
        request.distinct = true;
        Some(Self {
            request,
            ..self.copy()
        })
    }

    /// Whether the plan above hands this scan filters that tighten while it runs (a
    /// plan with them is not run twice: a re-run would start from their last state).
    pub(crate) fn has_dynamic_filters(&self) -> bool {
        !self.dynamic_filters.is_empty()
    }

    /// The summaries of the scans this exec ran so far, once their readers ended (at
    /// most `wait` for them: a reader ends as soon as it sees the plan gone).
    pub(crate) fn summaries_after(&self, wait: std::time::Duration) -> Vec<ScanSummary> {
        let (running, ended) = &*self.readers;
        let guard = running.lock().unwrap_or_else(PoisonError::into_inner);
        drop(
            ended
                .wait_timeout_while(guard, wait, |n| *n > 0)
                .unwrap_or_else(PoisonError::into_inner),
        );
        self.summaries()
    }

    /// The summaries of the scans this exec ran so far.
    pub(crate) fn summaries(&self) -> Vec<ScanSummary> {
        self.summaries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DaemonScanExec: {}", self.label)?;
        if let Some(p) = &self.request.projection {
            write!(f, ", projection=[{}]", p.join(", "))?;
        }
        if let Some(p) = &self.request.predicate {
            write!(f, ", pushed predicate={}", format_predicate(p))?;
            if self.inexact_filters > 0 {
                write!(f, " (inexact: filtered again above)")?;
            }
        }
        if let Some(p) = &self.param_filters {
            let filters: Vec<String> = p.filters.iter().map(ToString::to_string).collect();
            write!(f, ", pushed on parameters={}", filters.join(" AND "))?;
        }
        if let Some(limit) = self.request.limit {
            write!(f, ", pushed limit={limit}")?;
        }
        if self.request.offset > 0 {
            write!(f, ", pushed offset={}", self.request.offset)?;
        }
        if self.request.distinct {
            write!(f, ", distinct")?;
        }
        if let Some(p) = &self.prepass {
            write!(f, ", top-{} first pass on {}", p.k, p.column)?;
        }
        if self.join_probe {
            write!(f, ", after the join's build side")?;
        }
        if self.zero_copy {
            write!(f, ", zero-copy")?;
        }
        if !self.dynamic_filters.is_empty() {
            write!(f, ", dynamic filters={}", self.dynamic_filters.len())?;
        }
        Ok(())
    }
}

impl DisplayAs for DaemonScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => self.describe(f),
            DisplayFormatType::TreeRender => write!(f, "{}", self.label),
        }
    }
}

impl ExecutionPlan for DaemonScanExec {
    fn name(&self) -> &str {
        "DaemonScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    /// The dynamic filters the scan takes: a hash join computes its filter only where
    /// its probe side shows a consumer of it (found through this walk).
    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        for filter in &self.dynamic_filters {
            if f(filter)? == TreeNodeRecursion::Stop {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            Err(DataFusionError::Internal(
                "DaemonScanExec has no children".into(),
            ))
        }
    }

    fn reset_state(self: Arc<Self>) -> Result<Arc<dyn ExecutionPlan>> {
        // A re-run of a cached plan: its scans report afresh.
        Ok(Arc::new(self.copy()))
    }

    fn handle_child_pushdown_result(
        &self,
        phase: FilterPushdownPhase,
        child_pushdown_result: ChildPushdownResult,
        _config: &ConfigOptions,
    ) -> Result<FilterPushdownPropagation<Arc<dyn ExecutionPlan>>> {
        // The filters stay the parent's to apply (`No`): the daemon uses them to prune,
        // as hints. Only dynamic ones (the static ones came through the provider).
        let filters: Vec<Arc<dyn PhysicalExpr>> = child_pushdown_result
            .parent_filters
            .into_iter()
            .map(|f| f.filter)
            .collect();
        let unsupported = vec![PushedDown::No; filters.len()];
        let dynamic: Vec<Arc<dyn PhysicalExpr>> = filters
            .into_iter()
            .filter(|f| f.is::<DynamicFilterPhysicalExpr>())
            .collect();
        if phase != FilterPushdownPhase::Post || dynamic.is_empty() {
            return Ok(FilterPushdownPropagation {
                filters: unsupported,
                updated_node: None,
            });
        }
        let mut node = self.copy();
        node.dynamic_filters.extend(dynamic);
        Ok(FilterPushdownPropagation {
            filters: unsupported,
            updated_node: Some(Arc::new(node)),
        })
    }

    fn with_fetch(&self, limit: Option<usize>) -> Option<Arc<dyn ExecutionPlan>> {
        let mut request = self.request.clone();
        request.limit = match (request.limit, limit) {
            (Some(a), Some(b)) => Some(a.min(b as u64)),
            (a, b) => a.or(b.map(|b| b as u64)),
        };
        let statistics = Arc::unwrap_or_clone(Arc::clone(&self.statistics));
        let statistics = match request.limit {
            Some(limit) => statistics.with_fetch(Some(limit as usize), 0, 1).ok()?,
            None => statistics,
        };
        // Everything else of this scan kept: a new scan dropped a prepared statement's
        // filters on its parameters (`WHERE g = $1 LIMIT 2` gave the first two rows).
        Some(Arc::new(Self {
            request,
            statistics: Arc::new(statistics),
            ..self.copy()
        }))
    }

    fn fetch(&self) -> Option<usize> {
        self.request.limit.map(|l| l as usize)
    }

    fn statistics_from_inputs(
        &self,
        _input_stats: &[Arc<Statistics>],
        _args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        Ok(Arc::clone(&self.statistics))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        let summaries = self.summaries();
        if summaries.is_empty() {
            return None;
        }
        let mut total = ScanSummary::default();
        for s in &summaries {
            total.absorb(s);
        }
        Some(summary_metrics(&total))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        if partition != 0 {
            return Err(DataFusionError::Internal(format!(
                "DaemonScanExec has one partition, asked for {partition}"
            )));
        }
        let daemon = Arc::clone(&self.daemon);
        let request = self.request_in(&context)?;
        let prepass = self.prepass.clone();
        // A scan that takes dynamic filters starts when the plan first asks for a batch:
        // a hash join asks its probe side only once its build side is in and its
        // filter (the build side's keys) complete, which then filters the scan's rows
        // in the daemon (see `RingReader::start`).
        let (first_poll, wait_first_poll) = std::sync::mpsc::sync_channel::<()>(1);
        let lazy = prepass.is_none() && self.join_probe && !self.dynamic_filters.is_empty();
        // Otherwise, without a first pass, the scan starts here, so that a daemon that
        // refuses it fails the plan at once.
        let stream = match prepass.is_some() || lazy {
            true => None,
            false => Some(
                self.daemon
                    .scan(&request)
                    .map_err(|e| DataFusionError::External(Box::new(e)))?,
            ),
        };
        let schema = Arc::clone(&self.schema);
        let summaries = Arc::clone(&self.summaries);
        let reader_schema = Arc::clone(&schema);
        let caller_takes = || {
            context
                .session_config()
                .get_extension::<CallerTakes>()
                .is_some()
        };
        let reader = RingReader {
            schema: reader_schema,
            zero_copy: self.zero_copy || (self.to_caller && caller_takes()),
            dynamic_filters: self.dynamic_filters.clone(),
        };
        // A scan the daemon answered on the socket (a point lookup, say) is over: its
        // batches go up as they are, with no reader thread and no channel.
        let stream = match stream {
            Some(stream) if stream.is_inline() => {
                let batches = reader.answer(stream, &summaries);
                return Ok(Box::pin(RecordBatchStreamAdapter::new(
                    schema,
                    futures::stream::iter(batches),
                )));
            }
            other => other,
        };
        let (tx, mut rx) = mpsc::channel(CHANNEL_BATCHES);
        let readers = Arc::clone(&self.readers);
        *readers.0.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        let read = move || {
            /// Counts the reader out however it ends.
            struct Ended(Arc<(Mutex<usize>, Condvar)>);
            impl Drop for Ended {
                fn drop(&mut self) {
                    let (running, ended) = &*self.0;
                    let mut n = running.lock().unwrap_or_else(PoisonError::into_inner);
                    *n = n.saturating_sub(1);
                    ended.notify_all();
                }
            }
            let _ended = Ended(readers);
            let opened = match (stream, prepass) {
                (Some(stream), _) => Ok(stream),
                (None, None) => match wait_first_poll.recv() {
                    Ok(()) => reader.start(&daemon, request),
                    // The plan dropped the stream unread.
                    Err(_) => return,
                },
                (None, Some(prepass)) => {
                    prepass
                        .bound(&daemon, &request)
                        .and_then(|(bounded, first)| {
                            summaries
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .push(first);
                            daemon
                                .scan(&bounded)
                                .map_err(|e| DataFusionError::External(Box::new(e)))
                        })
                }
            };
            let stream = match opened {
                Ok(stream) => stream,
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    return;
                }
            };
            reader.read(stream, &tx, &summaries);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => drop(handle.spawn_blocking(read)),
            Err(_) => {
                std::thread::Builder::new()
                    .name("ringscan-scan".into())
                    .spawn(read)
                    .map_err(|e| DataFusionError::External(Box::new(e)))?;
            }
        }
        let mut first_poll = Some(first_poll);
        let batches = futures::stream::poll_fn(move |cx| {
            if let Some(signal) = first_poll.take() {
                // Only a lazy reader waits for it; the others dropped the receiver.
                let _ = signal.try_send(());
            }
            rx.poll_recv(cx)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, batches)))
    }
}

/// The daemon's summary as DataFusion metrics (EXPLAIN ANALYZE prints them).
fn summary_metrics(s: &ScanSummary) -> MetricsSet {
    let mut set = MetricsSet::new();
    let figures: [(&'static str, u64); 18] = [
        ("files", s.files_considered),
        ("files_pruned", s.files_pruned),
        ("row_groups", s.row_groups_considered),
        ("row_groups_pruned", s.row_groups_pruned),
        ("row_groups_pruned_by_stats", s.row_groups_pruned_by_stats),
        ("row_groups_pruned_by_bloom", s.row_groups_pruned_by_bloom),
        (
            "row_groups_pruned_by_dynamic_filter",
            s.row_groups_pruned_by_dynamic_filter,
        ),
        ("pages_pruned", s.pages_skipped),
        // Row groups whose statistics prove every row passes: read whole, unfiltered.
        ("row_groups_all_pass", s.row_groups_all_pass),
        ("bytes_read", s.bytes_read),
        ("column_cache_hits", s.column_cache_hits),
        // Object storage: requests sent, bytes they brought (against bytes_read, what the
        // decoders read of them), the time the scan's threads waited on them, and the
        // bytes the on-disk range cache (--cache-dir) served instead.
        ("store_requests", s.store_requests),
        ("store_bytes_fetched", s.store_bytes_fetched),
        ("store_wait_us", s.store_wait_us),
        ("store_cache_hit_bytes", s.store_cache_hit_bytes),
        ("rows_decoded", s.rows_decoded),
        ("output_rows", s.rows_emitted),
        ("daemon_time_us", s.timings.total_us),
    ];
    for (name, value) in figures {
        let count = Count::new();
        count.add(usize::try_from(value).unwrap_or(usize::MAX));
        set.push(Arc::new(Metric::new(
            MetricValue::Count {
                name: name.into(),
                count,
            },
            None,
        )));
    }
    set
}

/// The reading side of one scan: ring → channel, then the summary.
struct RingReader {
    /// The plan's schema for the scan's batches (also what dynamic filters name).
    schema: SchemaRef,
    zero_copy: bool,
    dynamic_filters: Vec<Arc<dyn PhysicalExpr>>,
}

/// `column` with every NaN made the positive quiet NaN and every zero `+0.0`, as DuckDB
/// sees them. DuckDB orders any NaN above every number; DataFusion orders floats by
/// their bits (`total_cmp`), which puts a NaN with its sign bit set (what `0.0 / 0.0`
/// gives on x86) below every number, so `min`, `ORDER BY` and top-k would differ. DuckDB
/// groups, joins and sorts `-0.0` as `0.0`; under `total_cmp` they are two values, and
/// DataFusion's top-k, whose heap orders them so while its own row filter does not,
/// dropped `-0.0` rows that belonged to the answer (found by
/// `topk_first_pass_equals_the_whole_sort`). The rule is the workspace's one
/// ([`ringscan_values::float`]), the one the daemon's filter and pruning compare by. A
/// column without such values is returned as it is (no copy; one pass to look).
fn canonical_floats(column: &arrow_array::ArrayRef) -> arrow_array::ArrayRef {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float16Type, Float32Type, Float64Type};
    use arrow_schema::DataType;
    use ringscan_values::float::{
        any_needs_canonical_f32, any_needs_canonical_f64, canonical_f32, canonical_f64,
    };
    match column.data_type() {
        DataType::Float64 => {
            let values = column.as_primitive::<Float64Type>();
            if any_needs_canonical_f64(values.values()) {
                return Arc::new(values.unary::<_, Float64Type>(canonical_f64));
            }
        }
        DataType::Float16 => {
            use half::f16;
            let values = column.as_primitive::<Float16Type>();
            if values
                .values()
                .iter()
                .any(|v| v.is_sign_negative() && (v.is_nan() || *v == f16::ZERO))
            {
                return Arc::new(values.unary::<_, Float16Type>(|v| {
                    if v.is_nan() {
                        f16::NAN
                    } else if v == f16::ZERO {
                        f16::ZERO
                    } else {
                        v
                    }
                }));
            }
        }
        DataType::Float32 => {
            let values = column.as_primitive::<Float32Type>();
            if any_needs_canonical_f32(values.values()) {
                return Arc::new(values.unary::<_, Float32Type>(canonical_f32));
            }
        }
        _ => {}
    }
    Arc::clone(column)
}

impl RingReader {
    /// Waits (at most [`JOIN_FILTER_WAIT`]) until one of the scan's dynamic filters is
    /// complete: a hash join completes its filter when its build side is in, and may
    /// ask for probe rows before (a repartition above the scan pulls at once).
    fn wait_for_a_complete_filter(&self) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let waits: Vec<_> = self
            .dynamic_filters
            .iter()
            .filter_map(|f| {
                let f = Arc::clone(f);
                f.downcast_ref::<DynamicFilterPhysicalExpr>()?;
                Some(Box::pin(async move {
                    if let Some(d) = f.downcast_ref::<DynamicFilterPhysicalExpr>() {
                        d.wait_complete().await;
                    }
                }))
            })
            .collect();
        if waits.is_empty() {
            return;
        }
        let _ = handle.block_on(tokio::time::timeout(
            JOIN_FILTER_WAIT,
            futures::future::select_all(waits),
        ));
    }

    /// Starts `request` with the dynamic filters as they stand ANDed into its
    /// predicate, so that the daemon filters rows with them, not only row groups: a
    /// complete hash-join filter (the build side's keys, as a list) keeps only the probe
    /// rows that can join, before their other columns are decoded or sent. Any value a
    /// dynamic filter has taken is safe to filter with: its producers only tighten it
    /// (a top-k's threshold), or set it once, complete (a hash join).
    fn start(&self, daemon: &Daemon, mut request: ScanRequest) -> Result<ScanStream> {
        self.wait_for_a_complete_filter();
        if let Some(dynamic) = self.dynamic_predicate() {
            request.predicate = Some(match request.predicate.take() {
                Some(p) => Predicate::And(vec![p, dynamic]),
                None => dynamic,
            });
        }
        daemon
            .scan(&request)
            .map_err(|e| DataFusionError::External(Box::new(e)))
    }

    fn read(
        &self,
        mut stream: ScanStream,
        tx: &mpsc::Sender<Result<RecordBatch>>,
        summaries: &Mutex<Vec<ScanSummary>>,
    ) {
        let external =
            |e: ringscan_ipc::client::ClientError| DataFusionError::External(Box::new(e));
        let mut refined: Option<Predicate> = None;
        loop {
            let batch = match stream.next_batch() {
                Ok(Some(batch)) => batch,
                Ok(None) => break,
                Err(e) => {
                    let _ = tx.blocking_send(Err(external(e)));
                    return;
                }
            };
            let batch = self.plan_batch(batch, self.zero_copy && !stream.ring_under_pressure());
            if tx.blocking_send(batch).is_err() {
                // The plan dropped the stream (a LIMIT was met, the query was cancelled).
                stream.cancel();
                break;
            }
            if let Some(filter) = self.dynamic_predicate() {
                if refined.as_ref() != Some(&filter) {
                    // Only a hint: a daemon that cannot take it still returns correct
                    // rows, and the plan filters above.
                    let _ = stream.refine(&filter);
                    refined = Some(filter);
                }
            }
        }
        match stream.finish() {
            Ok(summary) => summaries
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(summary),
            Err(e) => {
                let _ = tx.blocking_send(Err(external(e)));
            }
        }
    }

    /// The batches and summary of a scan the daemon answered inline.
    fn answer(
        &self,
        mut stream: ScanStream,
        summaries: &Mutex<Vec<ScanSummary>>,
    ) -> Vec<Result<RecordBatch>> {
        let external =
            |e: ringscan_ipc::client::ClientError| DataFusionError::External(Box::new(e));
        let mut batches = Vec::new();
        loop {
            match stream.next_batch() {
                // Its own memory, not the ring's: nothing to copy out.
                Ok(Some(batch)) => batches.push(self.plan_batch(batch, true)),
                Ok(None) => break,
                Err(e) => {
                    batches.push(Err(external(e)));
                    return batches;
                }
            }
        }
        match stream.finish() {
            Ok(summary) => summaries
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(summary),
            Err(e) => batches.push(Err(external(e))),
        }
        batches
    }

    /// A batch from the daemon as the plan wants it: copied out of the ring unless
    /// `keep` (whatever is downstream may keep batches: a copy leaves the ring so that
    /// the daemon always has room for the next; a batch kept in the ring stops its
    /// writer from ever wrapping past it), floats canonical, instants in the plan's
    /// zone, the plan's schema.
    fn plan_batch(&self, batch: RecordBatch, keep: bool) -> Result<RecordBatch> {
        let batch = if keep {
            batch
        } else {
            crate::owned_copy(batch.schema(), std::slice::from_ref(&batch))?
        };
        // The daemon's schema may differ from the plan's in field metadata or
        // nullability; the columns are the plan's.
        RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            batch
                .columns()
                .iter()
                .zip(self.schema.fields())
                // Instants arrive in their file's zone; the plan's is the session's.
                .map(|(c, f)| crate::zone::in_zone(&canonical_floats(c), f.data_type()))
                .collect(),
            &arrow_array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
        )
        .map_err(|e| DataFusionError::ArrowError(Box::new(e), None))
    }

    /// The dynamic filters as they stand, as one predicate (`None`: nothing to prune
    /// with yet, or nothing the daemon can evaluate).
    fn dynamic_predicate(&self) -> Option<Predicate> {
        let parts: Vec<Predicate> = self
            .dynamic_filters
            .iter()
            .filter_map(|f| physical_to_predicate(f.as_ref(), &self.schema))
            .filter(|p| *p != Predicate::And(Vec::new()))
            .collect();
        match parts.len() {
            0 => None,
            1 => parts.into_iter().next(),
            _ => Some(Predicate::And(parts)),
        }
    }
}

/// Decides, per daemon scan, whether its batches may go up the plan as views of the
/// ring. A view that something keeps (a result being collected, a sort's or a join's
/// build input, a window's partition) pins its part of the ring for good, and the
/// daemon, which writes the ring in order, would wait for it forever. So scans copy
/// their batches out, except where every path up reaches an aggregation that folds
/// rows into state of its own (count, sum, min, max, avg...) through operators that
/// only pass batches on or filter them.
#[derive(Debug, Default)]
pub(crate) struct RingSafety;

/// Keeps a `LIMIT` without `ORDER BY` over one daemon scan in the scan's order, as
/// DuckDB does (insertion order): DataFusion splits the scan's batches round-robin
/// between partitions and takes the first rows of whichever partition answers first,
/// so `SELECT k FROM t WHERE k % 7 = 0 LIMIT 2 OFFSET 5` gave rows of the scan's second
/// batch when that batch came back sooner. Where only row-preserving operators
/// (filters, projections, local limits) stand between the limit and the scan, the
/// round-robin split and the merge above it go: the rows are few, and one partition
/// gives them in order.
#[derive(Debug, Default)]
pub(crate) struct LimitInScanOrder;

impl PhysicalOptimizerRule for LimitInScanOrder {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        use datafusion::common::tree_node::{Transformed, TreeNode};
        use datafusion::physical_plan::limit::GlobalLimitExec;
        plan.transform_down(|node| {
            if let Some(limit) = node.downcast_ref::<GlobalLimitExec>() {
                if let Some(merge) = limit.input().downcast_ref::<CoalescePartitionsExec>() {
                    if let Some(input) = without_round_robin(merge.input())? {
                        return Ok(Transformed::yes(Arc::new(GlobalLimitExec::new(
                            input,
                            limit.skip(),
                            limit.fetch(),
                        ))));
                    }
                }
                return Ok(Transformed::no(node));
            }
            // A split of a limit's rows (for a projection above it, say) gains nothing
            // and loses their order.
            if let Some(repartition) = node.downcast_ref::<RepartitionExec>() {
                if splits_in_turn(repartition) && over_a_limit(repartition.input()) {
                    return Ok(Transformed::yes(Arc::clone(repartition.input())));
                }
            }
            if let Some(merge) = node.downcast_ref::<CoalescePartitionsExec>() {
                if let Some(fetch) = merge.fetch() {
                    if let Some(input) = without_round_robin(merge.input())? {
                        return Ok(Transformed::yes(Arc::new(GlobalLimitExec::new(
                            input,
                            0,
                            Some(fetch),
                        ))));
                    }
                }
            }
            Ok(Transformed::no(node))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "ringscan_limit_in_scan_order"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Whether `repartition` deals one partition's batches out in turn.
fn splits_in_turn(repartition: &RepartitionExec) -> bool {
    use datafusion::physical_plan::ExecutionPlanProperties;
    repartition.input().output_partitioning().partition_count() == 1
        && matches!(repartition.partitioning(), Partitioning::RoundRobinBatch(_))
        && !repartition.preserve_order()
}

/// Whether `plan` is a limit's rows, through operators that keep their order.
fn over_a_limit(plan: &Arc<dyn ExecutionPlan>) -> bool {
    use datafusion::physical_plan::coop::CooperativeExec;
    use datafusion::physical_plan::limit::{GlobalLimitExec, LocalLimitExec};
    if plan.is::<GlobalLimitExec>() {
        return true;
    }
    let passes = plan.is::<FilterExec>()
        || plan.is::<ProjectionExec>()
        || plan.is::<CooperativeExec>()
        || plan.is::<LocalLimitExec>();
    match &plan.children()[..] {
        [child] if passes => over_a_limit(child),
        _ => false,
    }
}

/// `plan` without its round-robin repartitioning of a one-partition daemon scan, where
/// only operators that keep the order of the rows they pass stand above the scan;
/// `None` where another operator does, or nothing was split.
fn without_round_robin(plan: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    use datafusion::physical_plan::coop::CooperativeExec;
    use datafusion::physical_plan::limit::LocalLimitExec;
    if let Some(repartition) = plan.downcast_ref::<RepartitionExec>() {
        let input = repartition.input();
        let one_scan = splits_in_turn(repartition);
        let mut below = Arc::clone(input);
        let to_scan = loop {
            if below.is::<DaemonScanExec>() {
                break true;
            }
            let row_preserving = below.is::<ProjectionExec>() || below.is::<CooperativeExec>();
            match &below.children()[..] {
                [child] if row_preserving => below = Arc::clone(child),
                _ => break false,
            }
        };
        return Ok((one_scan && to_scan).then(|| Arc::clone(input)));
    }
    let passes = plan.is::<FilterExec>()
        || plan.is::<ProjectionExec>()
        || plan.is::<CooperativeExec>()
        || plan.is::<LocalLimitExec>();
    let [child] = &plan.children()[..] else {
        return Ok(None);
    };
    if !passes {
        return Ok(None);
    }
    match without_round_robin(child)? {
        Some(child) => Ok(Some(replace_children_if_necessary(
            Arc::clone(plan),
            vec![child],
        )?)),
        None => Ok(None),
    }
}

/// Moves an `OFFSET` into the daemon where the scan's rows are the result's rows in
/// order (a `LIMIT .. OFFSET` over the scan, through projections only): the daemon
/// skips them without sending them, and an unfiltered scan skips whole row groups by
/// their row counts without reading them. DataFusion alone fetches offset + limit rows
/// and drops the first ones.
#[derive(Debug, Default)]
pub(crate) struct OffsetToDaemon;

impl PhysicalOptimizerRule for OffsetToDaemon {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        use datafusion::common::tree_node::{Transformed, TreeNode};
        use datafusion::physical_plan::limit::GlobalLimitExec;
        plan.transform_down(|node| {
            let Some(limit) = node.downcast_ref::<GlobalLimitExec>() else {
                return Ok(Transformed::no(node));
            };
            if limit.skip() == 0 {
                return Ok(Transformed::no(node));
            }
            match offset_into_scan(limit.input(), limit.skip(), limit.fetch())? {
                Some(input) => Ok(Transformed::yes(Arc::new(GlobalLimitExec::new(
                    input,
                    0,
                    limit.fetch(),
                )))),
                None => Ok(Transformed::no(node)),
            }
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "ringscan_offset_to_daemon"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `plan` with `skip`/`fetch` taken by its scan, where only row-preserving operators
/// (projections, cooperative wrappers) stand between.
fn offset_into_scan(
    plan: &Arc<dyn ExecutionPlan>,
    skip: usize,
    fetch: Option<usize>,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    use datafusion::physical_plan::coop::CooperativeExec;
    rewrite_scan_below(
        plan,
        (),
        &|node, ()| (node.is::<ProjectionExec>() || node.is::<CooperativeExec>()).then_some(()),
        &|scan, ()| scan.with_offset(skip, fetch),
    )
}

/// `node` over `input` where a rule rewrote its only input, else `node` unchanged.
fn with_new_input(
    node: Arc<dyn ExecutionPlan>,
    input: Option<Arc<dyn ExecutionPlan>>,
) -> Result<datafusion::common::tree_node::Transformed<Arc<dyn ExecutionPlan>>> {
    use datafusion::common::tree_node::Transformed;
    match input {
        Some(input) => Ok(Transformed::yes(replace_children_if_necessary(
            node,
            vec![input],
        )?)),
        None => Ok(Transformed::no(node)),
    }
}

/// `plan` with the daemon scan under it replaced by `at_scan(scan, state)`, through
/// single-input operators that `through(node, state)` lets pass (with the state as it
/// stands below them); `None` where either refuses.
fn rewrite_scan_below<S>(
    plan: &Arc<dyn ExecutionPlan>,
    state: S,
    through: &dyn Fn(&dyn ExecutionPlan, S) -> Option<S>,
    at_scan: &dyn Fn(&DaemonScanExec, S) -> Option<DaemonScanExec>,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    if let Some(scan) = plan.downcast_ref::<DaemonScanExec>() {
        return Ok(at_scan(scan, state).map(|s| Arc::new(s) as Arc<dyn ExecutionPlan>));
    }
    let ([child], Some(state)) = (&plan.children()[..], through(plan.as_ref(), state)) else {
        return Ok(None);
    };
    match rewrite_scan_below(child, state, through, at_scan)? {
        Some(child) => Ok(Some(replace_children_if_necessary(
            Arc::clone(plan),
            vec![child],
        )?)),
        None => Ok(None),
    }
}

/// Hands `SELECT DISTINCT` (a grouping without aggregates, over plain columns) to the
/// daemon where the grouping's keys are every column the scan emits and only
/// repartitioning and column-only projections stand between: the daemon drops
/// duplicates per row group (seed 004: 576 rows through the ring instead of 10M), and
/// the grouping above still removes the rest.
#[derive(Debug, Default)]
pub(crate) struct DistinctToDaemon;

impl PhysicalOptimizerRule for DistinctToDaemon {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        use datafusion::common::tree_node::{Transformed, TreeNode};
        use datafusion::physical_expr::expressions::Column;
        plan.transform_down(|node| {
            let Some(agg) = node.downcast_ref::<AggregateExec>() else {
                return Ok(Transformed::no(node));
            };
            let group = agg.group_expr();
            let keys: Option<Vec<String>> = group
                .expr()
                .iter()
                .map(|(e, _)| e.downcast_ref::<Column>().map(|c| c.name().to_owned()))
                .collect();
            let plain = agg.aggr_expr().is_empty()
                && group.is_single()
                && agg.filter_expr().iter().all(Option::is_none);
            let (Some(keys), true) = (keys, plain) else {
                return Ok(Transformed::no(node));
            };
            let input = distinct_into_scan(agg.input(), keys)?;
            with_new_input(node, input)
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "ringscan_distinct_to_daemon"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `plan` with its scan dropping duplicates, where the scan's columns are all among
/// `keys` and only repartitioning, cooperative wrappers and column-only projections
/// stand between.
fn distinct_into_scan(
    plan: &Arc<dyn ExecutionPlan>,
    keys: Vec<String>,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    use datafusion::physical_plan::coop::CooperativeExec;
    rewrite_scan_below(
        plan,
        keys,
        &|node, keys| {
            if let Some(projection) = node.downcast_ref::<ProjectionExec>() {
                keys_below_projection(projection, &keys)
            } else {
                (node.is::<RepartitionExec>() || node.is::<CooperativeExec>()).then_some(keys)
            }
        },
        &|scan, keys| {
            let all_keys = scan.schema.fields().iter().all(|f| keys.contains(f.name()));
            all_keys.then(|| scan.with_distinct()).flatten()
        },
    )
}

/// How long a hash join's probe scan waits for the join's filter before it starts
/// without (the build side is still being read: a big build side, a slow disk).
const JOIN_FILTER_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Marks the scans on the probe side of a hash join that pushes a dynamic filter (its
/// build side's keys) as [`join_probe`](DaemonScanExec::join_probe): they start once
/// the build side is in and hand the keys to the daemon as a row filter, so that only
/// probe rows that can join are decoded in full and sent through the ring (TPC-H Q17:
/// a few thousand of six million lineitems). Through repartitioning, projections,
/// filters and cooperative wrappers.
#[derive(Debug, Default)]
pub(crate) struct JoinProbeFilters;

impl PhysicalOptimizerRule for JoinProbeFilters {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        use datafusion::common::tree_node::{Transformed, TreeNode};
        use datafusion::physical_plan::coop::CooperativeExec;
        use datafusion::physical_plan::filter::FilterExec;
        use datafusion::physical_plan::joins::HashJoinExec;
        plan.transform_up(|node| {
            let Some(join) = node.downcast_ref::<HashJoinExec>() else {
                return Ok(Transformed::no(node));
            };
            if join.dynamic_expressions_produced().is_empty() {
                return Ok(Transformed::no(node));
            }
            let probe = rewrite_scan_below(
                join.right(),
                (),
                &|n, ()| {
                    (n.is::<RepartitionExec>()
                        || n.is::<ProjectionExec>()
                        || n.is::<FilterExec>()
                        || n.is::<CooperativeExec>())
                    .then_some(())
                },
                &|scan, ()| {
                    (!scan.dynamic_filters.is_empty()).then(|| DaemonScanExec {
                        join_probe: true,
                        ..scan.copy()
                    })
                },
            )?;
            match probe {
                Some(probe) => Ok(Transformed::yes(replace_children_if_necessary(
                    Arc::clone(&node),
                    vec![Arc::clone(join.left()), probe],
                )?)),
                None => Ok(Transformed::no(node)),
            }
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "ringscan_join_probe_filters"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// A top-k's first pass: the scan of its first sort key alone, whose k-th value (in
/// the sort's direction, NULLs last) bounds the scan of every column, inclusively, so
/// that the daemon decodes the other columns only of rows that can be among the k
/// (late materialization) and sends only those through the ring.
#[derive(Debug, Clone)]
pub(crate) struct TopKPrepass {
    column: String,
    descending: bool,
    k: usize,
}

impl TopKPrepass {
    /// `request` bounded by the k-th key (unchanged where no bound is safe: fewer than
    /// k keys, or a NaN among float keys), and the first pass's work.
    fn bound(&self, daemon: &Daemon, request: &ScanRequest) -> Result<(ScanRequest, ScanSummary)> {
        use datafusion::arrow::compute::{concat, sort_to_indices, SortOptions};
        let external =
            |e: ringscan_ipc::client::ClientError| DataFusionError::External(Box::new(e));
        let mut first = request.clone();
        first.projection = Some(vec![self.column.clone()]);
        let mut stream = daemon.scan(&first).map_err(external)?;
        let mut keys = Vec::new();
        while let Some(batch) = stream.next_batch().map_err(external)? {
            // Out of the ring at once: the stream reuses it.
            let owned = crate::owned_copy(batch.schema(), std::slice::from_ref(&batch))?;
            keys.push(Arc::clone(owned.column(0)));
        }
        let summary = stream.finish().map_err(external)?;
        let mut work = ScanSummary::default();
        work.absorb_work(&summary);
        let unchanged = Ok((request.clone(), work.clone()));
        if keys.is_empty() {
            return unchanged;
        }
        let refs: Vec<&dyn arrow_array::Array> = keys.iter().map(|a| a.as_ref()).collect();
        let all = concat(&refs)?;
        if all.len() - all.null_count() < self.k || has_nan(&all) {
            return unchanged;
        }
        let options = SortOptions {
            descending: self.descending,
            nulls_first: false,
        };
        let order = sort_to_indices(&all, Some(options), Some(self.k))?;
        let kth = ScalarValue::try_from_array(&all, order.value(self.k - 1) as usize)?;
        // A zero bound takes both zeros, whichever the daemon and the sort above put
        // first (rows of the other sign may tie with the k-th in the sort's order).
        let kth = match kth {
            ScalarValue::Float64(Some(0.0)) => {
                ScalarValue::Float64(Some(if self.descending { -0.0 } else { 0.0 }))
            }
            ScalarValue::Float32(Some(0.0)) => {
                ScalarValue::Float32(Some(if self.descending { -0.0 } else { 0.0 }))
            }
            other => other,
        };
        let Some(literal) = super::filter::exact_literal(all.data_type(), &kth) else {
            return unchanged;
        };
        let op = if self.descending {
            ringscan_ipc::msg::CmpOp::GtEq
        } else {
            ringscan_ipc::msg::CmpOp::LtEq
        };
        let bound = Predicate::compare(&self.column, op, literal);
        let mut bounded = request.clone();
        bounded.predicate = Some(match bounded.predicate.take() {
            Some(p) => Predicate::And(vec![p, bound]),
            None => bound,
        });
        Ok((bounded, work))
    }
}

/// Whether a float array holds a NaN (whose order the daemon's comparisons and the
/// sort kernel see differently).
fn has_nan(a: &arrow_array::ArrayRef) -> bool {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float32Type, Float64Type};
    use arrow_schema::DataType;
    match a.data_type() {
        DataType::Float64 => a
            .as_primitive::<Float64Type>()
            .values()
            .iter()
            .any(|v| v.is_nan()),
        DataType::Float32 => a
            .as_primitive::<Float32Type>()
            .values()
            .iter()
            .any(|v| v.is_nan()),
        DataType::Float16 => true,
        _ => false,
    }
}

/// Gives a top-k over a scan of more columns than its sort key a first pass over the
/// key ([`TopKPrepass`]): where a `SortExec` with a fetch reads, through projections
/// of plain columns and cooperative wrappers only, a scan whose rows are the sort's
/// input (no filter left above it, no limit, offset or DISTINCT in it), and its first
/// key is a column sorted NULLs last.
#[derive(Debug, Default)]
pub(crate) struct TopKLateMaterialization;

impl PhysicalOptimizerRule for TopKLateMaterialization {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        use datafusion::common::tree_node::{Transformed, TreeNode};
        use datafusion::physical_expr::expressions::Column;
        use datafusion::physical_plan::sorts::sort::SortExec;
        plan.transform_down(|node| {
            let Some(sort) = node.downcast_ref::<SortExec>() else {
                return Ok(Transformed::no(node));
            };
            let (Some(k), first) = (sort.fetch(), sort.expr().first()) else {
                return Ok(Transformed::no(node));
            };
            let Some(column) = first.expr.downcast_ref::<Column>() else {
                return Ok(Transformed::no(node));
            };
            if k == 0 || first.options.nulls_first {
                return Ok(Transformed::no(node));
            }
            let prepass = TopKPrepass {
                column: column.name().to_owned(),
                descending: first.options.descending,
                k,
            };
            let input = prepass_into_scan(sort.input(), prepass)?;
            with_new_input(node, input)
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "ringscan_topk_late_materialization"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `plan` with its scan taking `prepass`, where only cooperative wrappers and
/// projections that pass the key column through stand between, and the scan emits more
/// columns than the key and every row it reads (no filter left above it, no limit,
/// offset or DISTINCT in it).
fn prepass_into_scan(
    plan: &Arc<dyn ExecutionPlan>,
    prepass: TopKPrepass,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    use datafusion::physical_expr::expressions::Column;
    use datafusion::physical_plan::coop::CooperativeExec;
    rewrite_scan_below(
        plan,
        prepass,
        &|node, prepass| {
            let Some(projection) = node.downcast_ref::<ProjectionExec>() else {
                return node.is::<CooperativeExec>().then_some(prepass);
            };
            let source = projection
                .expr()
                .iter()
                .find(|e| e.alias == prepass.column)
                .and_then(|e| e.expr.downcast_ref::<Column>())?;
            Some(TopKPrepass {
                column: source.name().to_owned(),
                ..prepass
            })
        },
        &|scan, prepass| {
            let r = &scan.request;
            let worth = scan.schema.fields().len() > 1
                && scan.schema.field_with_name(&prepass.column).is_ok();
            let whole = scan.inexact_filters == 0 && !r.distinct && r.limit.is_none();
            (worth && whole && r.offset == 0).then(|| DaemonScanExec {
                prepass: Some(prepass),
                ..scan.copy()
            })
        },
    )
}

/// The input columns of a column-only projection, where every one of its outputs is
/// among `keys` (else it drops a column that tells rows apart).
fn keys_below_projection(projection: &ProjectionExec, keys: &[String]) -> Option<Vec<String>> {
    use datafusion::physical_expr::expressions::Column;
    projection
        .expr()
        .iter()
        .map(|e| {
            let column = e.expr.downcast_ref::<Column>()?;
            keys.contains(&e.alias).then(|| column.name().to_owned())
        })
        .collect()
}

/// Aggregates whose state owns its values (never a slice of an input batch).
const FOLDING_AGGREGATES: &[&str] = &[
    "count",
    "sum",
    "min",
    "max",
    "avg",
    "mean",
    "bool_and",
    "bool_or",
    "stddev",
    "stddev_pop",
    "stddev_samp",
    "var",
    "var_pop",
    "var_samp",
    "approx_distinct",
];

impl PhysicalOptimizerRule for RingSafety {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        mark_zero_copy(plan, false, true)
    }

    fn name(&self) -> &str {
        "ringscan_ring_safety"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// `plan` with its scans marked; `folded` says that the batches `plan` emits are folded
/// by an aggregation above (through pass-through operators only), `to_caller` that
/// they go to the plan's caller (through pass-through operators only).
fn mark_zero_copy(
    plan: Arc<dyn ExecutionPlan>,
    folded: bool,
    to_caller: bool,
) -> Result<Arc<dyn ExecutionPlan>> {
    if let Some(scan) = plan.downcast_ref::<DaemonScanExec>() {
        if scan.zero_copy == folded && scan.to_caller == to_caller {
            return Ok(plan);
        }
        return Ok(Arc::new(scan.with_zero_copy(folded, to_caller)));
    }
    let passes_on = plan.is::<ProjectionExec>()
        || plan.is::<FilterExec>()
        || plan.is::<RepartitionExec>()
        || plan.is::<CoalescePartitionsExec>()
        || plan.is::<CooperativeExec>();
    let children_folded = if let Some(agg) = plan.downcast_ref::<AggregateExec>() {
        agg.aggr_expr()
            .iter()
            .all(|e| FOLDING_AGGREGATES.contains(&e.fun().name()))
    } else {
        folded && passes_on
    };
    let children_to_caller = to_caller && passes_on;
    let children = plan.children();
    if children.is_empty() {
        return Ok(plan);
    }
    let marked = children
        .into_iter()
        .map(|c| mark_zero_copy(Arc::clone(c), children_folded, children_to_caller))
        .collect::<Result<Vec<_>>>()?;
    replace_children_if_necessary(plan, marked)
}
