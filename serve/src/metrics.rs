//! The host's metrics in the OpenMetrics text format (prometheus-client), served at
//! `/metrics` on the `--metrics` address: connections, statements by outcome, latency, and what the
//! daemon's scans read and pruned (seed 000's selectivity and pruning rates).

use std::sync::atomic::{AtomicI64, AtomicU64};
use std::sync::{Arc, OnceLock};

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use ringscan_executor::QueryOutcome;
use ringscan_profiling::CounterKind;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Upper bounds of the latency histogram's buckets, seconds.
const LATENCY_BOUNDS: [f64; 12] = [
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5, 10.0,
];
/// Upper bounds of the ratio histograms (selectivity, pruning rate).
const RATIO_BOUNDS: [f64; 7] = [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0];

/// How a statement ended.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Outcome {
    Ok,
    Error,
    Canceled,
}

impl Outcome {
    /// Every outcome, in declaration order (`outcome as usize` indexes it).
    const ALL: [Outcome; 3] = [Outcome::Ok, Outcome::Error, Outcome::Canceled];

    fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Canceled => "canceled",
        }
    }
}

/// One label: its name and value.
type Label<V> = [(&'static str, V); 1];

/// The members of a family with one label, by the index of the label's value in
/// `values`, each resolved once on first use (and only then exposed, as before):
/// `Family::get_or_create` hashes the label with SipHash under a lock on every call, and
/// a point lookup made eleven such calls (6% of the host's instructions per lookup).
struct Members<M, const N: usize> {
    family: Family<Label<&'static str>, M>,
    label: &'static str,
    values: [&'static str; N],
    resolved: [OnceLock<M>; N],
}

impl<M: Clone + Default, const N: usize> Members<M, N> {
    fn new(label: &'static str, values: [&'static str; N]) -> Self {
        Self {
            family: Family::default(),
            label,
            values,
            resolved: std::array::from_fn(|_| OnceLock::new()),
        }
    }

    /// The member of `values[i]`.
    fn get(&self, i: usize) -> &M {
        self.resolved[i].get_or_init(|| {
            self.family
                .get_or_create(&[(self.label, self.values[i])])
                .clone()
        })
    }
}

/// Label values of `ringscan_scan_row_groups_pruned`, by what pruned.
const PRUNED_BY: [&str; 4] = ["statistics", "bloom_filter", "page_index", "dynamic_filter"];
/// Label values of `ringscan_daemon_metadata_cache`.
const CACHE_FIGURES: [&str; 6] = [
    "hits",
    "misses",
    "entries",
    "bytes",
    "page_index_hits",
    "page_index_misses",
];

/// The host's metrics: each is registered once in `registry`, which the scrape
/// encodes; the fields are the handles that count.
pub(crate) struct Metrics {
    registry: Registry,
    connections: Counter,
    refused: Counter,
    auth_failures: Counter,
    open: Gauge<i64, AtomicI64>,
    statements: Members<Counter, 3>,
    latency: Histogram,
    bytes_read: Counter,
    row_groups_considered: Counter,
    row_groups_pruned: Members<Counter, 4>,
    pages_considered: Counter,
    pages_skipped: Counter,
    rows_decoded: Counter,
    rows_emitted: Counter,
    ring_wait: Counter<f64, AtomicU64>,
    ring_blocked_waits: Counter,
    plan_hits: Counter,
    result_hits: Counter,
    generic_plans: Counter,
    from_statistics: Counter,
    selectivity: Histogram,
    pruning: Histogram,
    daemon_events: Members<Counter, { CounterKind::ALL.len() }>,
    daemon_cache: Members<Gauge<i64, AtomicI64>, 6>,
}

impl Metrics {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix("ringscan");
        let mut counter = |name: &str, help: &str| {
            let c = Counter::default();
            registry.register(name, help, c.clone());
            c
        };
        let connections = counter("connections", "Connections accepted.");
        let refused = counter(
            "connections_refused",
            "Connections refused past --max-connections.",
        );
        let auth_failures = counter("authentication_failures", "Wrong passwords.");
        let bytes_read = counter("scan_bytes_read", "Bytes the daemon read for scans.");
        let row_groups_considered = counter(
            "scan_row_groups_considered",
            "Row groups the scans considered.",
        );
        let pages_considered = counter("scan_pages_considered", "Pages the scans considered.");
        let pages_skipped = counter("scan_pages_skipped", "Pages skipped by the page index.");
        let rows_decoded = counter("scan_rows_decoded", "Rows decoded.");
        let rows_emitted = counter("scan_rows_emitted", "Rows that passed the scans' filters.");
        let ring_blocked_waits = counter(
            "scan_ring_blocked_waits",
            "Times the daemon found the ring full and waited.",
        );
        let plan_hits = counter("plan_cache_hits", "Statements planned from the plan cache.");
        let result_hits = counter(
            "result_cache_hits",
            "Statements answered from the result cache.",
        );
        let generic_plans = counter(
            "generic_plan_runs",
            "Statements with parameters run on their generic physical plan.",
        );
        let from_statistics = counter(
            "statistics_answers",
            "Statements answered from footer statistics alone.",
        );
        let open = Gauge::default();
        registry.register("connections_open", "Connections open now.", open.clone());
        let statements = Members::new("outcome", Outcome::ALL.map(Outcome::label));
        registry.register(
            "statements",
            "Statements run on the engine, by outcome.",
            statements.family.clone(),
        );
        let row_groups_pruned = Members::new("by", PRUNED_BY);
        registry.register(
            "scan_row_groups_pruned",
            "Row groups pruned, by what pruned them (statistics, bloom filters, page \
             indexes, dynamic filters).",
            row_groups_pruned.family.clone(),
        );
        let ring_wait = Counter::default();
        registry.register_with_unit(
            "scan_ring_wait",
            "Time the daemon waited for room in the rings.",
            Unit::Seconds,
            ring_wait.clone(),
        );
        let latency = Histogram::new(LATENCY_BOUNDS);
        registry.register_with_unit(
            "statement_duration",
            "Statement latency on the engine.",
            Unit::Seconds,
            latency.clone(),
        );
        let selectivity = Histogram::new(RATIO_BOUNDS);
        registry.register(
            "scan_selectivity",
            "Rows emitted over rows decoded, per statement.",
            selectivity.clone(),
        );
        let pruning = Histogram::new(RATIO_BOUNDS);
        registry.register(
            "scan_row_group_pruning_rate",
            "Row groups pruned over row groups considered, per statement.",
            pruning.clone(),
        );
        let daemon_events = Members::new("event", CounterKind::ALL.map(CounterKind::name));
        registry.register(
            "daemon_scan_events",
            "The daemon's counters over its scans, by event (perf events where the \
             kernel counts them: task-clock in nanoseconds, page-faults, \
             context-switches...).",
            daemon_events.family.clone(),
        );
        let daemon_cache = Members::new("figure", CACHE_FIGURES);
        registry.register(
            "daemon_metadata_cache",
            "The daemon's footer and page-index cache as its last scan reported it \
             (hits and misses since the daemon started, entries and bytes now).",
            daemon_cache.family.clone(),
        );
        Self {
            registry,
            connections,
            refused,
            auth_failures,
            open,
            statements,
            latency,
            bytes_read,
            row_groups_considered,
            row_groups_pruned,
            pages_considered,
            pages_skipped,
            rows_decoded,
            rows_emitted,
            ring_wait,
            ring_blocked_waits,
            plan_hits,
            result_hits,
            generic_plans,
            from_statistics,
            selectivity,
            pruning,
            daemon_events,
            daemon_cache,
        }
    }

    pub(crate) fn connection(&self) {
        self.connections.inc();
    }

    pub(crate) fn refused(&self) {
        self.refused.inc();
    }

    pub(crate) fn auth_failure(&self) {
        self.auth_failures.inc();
    }

    /// One statement that ran on the engine, `seconds` long; `over`: its outcome, its
    /// duration and its scans' work too (not for a result still being read, which may
    /// yet fail: see [`Self::ended`]).
    pub(crate) fn statement(
        &self,
        outcome: Outcome,
        seconds: f64,
        query: Option<&QueryOutcome>,
        over: bool,
    ) {
        if let Some(q) = query {
            self.plan_hits.inc_by(u64::from(q.plan_hit));
            self.result_hits.inc_by(u64::from(q.result_hit));
            self.generic_plans.inc_by(u64::from(q.generic_plan));
            self.from_statistics.inc_by(u64::from(q.from_statistics));
        }
        if over {
            self.ended(outcome, seconds, query.and_then(|q| q.scan.as_ref()));
        }
    }

    /// A statement has ended (`outcome`; for a result read as it was sent: its last
    /// row sent, failed, or dropped first), `seconds` after it started; what its scans
    /// did, where it scanned to the end.
    pub(crate) fn ended(
        &self,
        outcome: Outcome,
        seconds: f64,
        scans: Option<&ringscan_executor::ScanSummary>,
    ) {
        self.statements.get(outcome as usize).inc();
        self.latency.observe(seconds);
        if let Some(s) = scans {
            self.scan(s);
        }
    }

    /// What a statement's scans did.
    fn scan(&self, s: &ringscan_executor::ScanSummary) {
        self.bytes_read.inc_by(s.bytes_read);
        self.row_groups_considered.inc_by(s.row_groups_considered);
        // In PRUNED_BY's order.
        for (by, n) in [
            s.row_groups_pruned_by_stats,
            s.row_groups_pruned_by_bloom,
            s.row_groups_pruned_by_page_index,
            s.row_groups_pruned_by_dynamic_filter,
        ]
        .into_iter()
        .enumerate()
        {
            if n > 0 {
                self.row_groups_pruned.get(by).inc_by(n);
            }
        }
        self.pages_considered.inc_by(s.pages_considered);
        self.pages_skipped.inc_by(s.pages_skipped);
        self.rows_decoded.inc_by(s.rows_decoded);
        self.rows_emitted.inc_by(s.rows_emitted);
        self.ring_wait.inc_by(s.timings.ring_wait_us as f64 / 1e6);
        if s.rows_decoded > 0 {
            self.selectivity
                .observe(s.rows_emitted as f64 / s.rows_decoded as f64);
        }
        if s.row_groups_considered > 0 {
            self.pruning
                .observe(s.row_groups_pruned as f64 / s.row_groups_considered as f64);
        }
        self.daemon_counters(&s.counters);
    }

    /// The daemon's counters of one scan (`ScanSummary::counters`, as its scan
    /// thread recorded them): the measured events add up, the cache's figures are
    /// the latest.
    fn daemon_counters(&self, counters: &ringscan_executor::DaemonCounters) {
        for v in counters.scan.iter().flat_map(|s| &s.values) {
            if let (true, Some(n)) = (v.measured, v.value) {
                self.daemon_events.get(v.kind.index()).inc_by(n);
            }
        }
        self.ring_blocked_waits.inc_by(counters.ring_blocked_waits);
        if let Some(cache) = &counters.metadata_cache {
            // In CACHE_FIGURES' order.
            for (figure, n) in [
                cache.hits,
                cache.misses,
                cache.entries,
                cache.bytes,
                cache.page_index_hits,
                cache.page_index_misses,
            ]
            .into_iter()
            .enumerate()
            {
                self.daemon_cache
                    .get(figure)
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
        }
    }

    /// The exposition (OpenMetrics text), with `open` connections now.
    pub(crate) fn render(&self, open: u64) -> String {
        self.open.set(i64::try_from(open).unwrap_or(i64::MAX));
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// Serves `GET /metrics` on `listener` until the task is dropped.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    open: impl Fn() -> u64 + Send + Sync + 'static,
) {
    let open = Arc::new(open);
    loop {
        let Ok((mut socket, _)) = listener.accept().await else {
            continue;
        };
        let metrics = Arc::clone(&metrics);
        let open = Arc::clone(&open);
        tokio::spawn(async move {
            // The request line and headers: one read of a few KiB is all a scraper
            // sends; anything else gets 404 or 400.
            let mut buf = vec![0u8; 8192];
            let n = match tokio::time::timeout(
                std::time::Duration::from_secs(5),
                socket.read(&mut buf),
            )
            .await
            {
                Ok(Ok(n)) => n,
                _ => return,
            };
            let request = String::from_utf8_lossy(&buf[..n]);
            let line = request.lines().next().unwrap_or("");
            let mut parts = line.split_whitespace();
            let response = match (parts.next(), parts.next()) {
                (Some("GET"), Some("/metrics")) => {
                    let body = metrics.render(open());
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                }
                (Some(_), Some(_)) => {
                    "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        .to_owned()
                }
                _ => "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    .to_owned(),
            };
            let _ = socket.write_all(response.as_bytes()).await;
            let _ = socket.shutdown().await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_in_the_exposition() {
        let m = Metrics::new();
        m.statement(Outcome::Ok, 0.000_2, None, true);
        m.statement(Outcome::Ok, 0.003, None, true);
        m.statement(Outcome::Error, 20.0, None, true);
        let text = m.render(2);
        assert!(
            text.contains("ringscan_statements_total{outcome=\"ok\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("ringscan_statements_total{outcome=\"error\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("ringscan_statement_duration_seconds_bucket{le=\"0.00025\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("ringscan_statement_duration_seconds_bucket{le=\"0.005\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("ringscan_statement_duration_seconds_bucket{le=\"+Inf\"} 3"),
            "{text}"
        );
        assert!(text.contains("ringscan_connections_open 2"), "{text}");
    }
}
