//! The host's metrics in Prometheus' text format, served at `/metrics` on the
//! `--metrics` address: connections, statements by outcome, latency, and what the
//! daemon's scans read and pruned (seed 000's selectivity and pruning rates).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ringscan_executor::QueryOutcome;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Upper bounds of the latency histogram's buckets, seconds.
const LATENCY_BOUNDS: [f64; 12] = [
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5, 10.0,
];
/// Upper bounds of the ratio histograms (selectivity, pruning rate).
const RATIO_BOUNDS: [f64; 7] = [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0];

/// A histogram: counts per bucket (not cumulative), the sum and the count.
struct Histogram<const N: usize> {
    bounds: [f64; N],
    buckets: [AtomicU64; N],
    /// Sum in millionths of the unit.
    sum_micro: AtomicU64,
    count: AtomicU64,
}

impl<const N: usize> Histogram<N> {
    fn new(bounds: [f64; N]) -> Self {
        Self {
            bounds,
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_micro: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    fn observe(&self, v: f64) {
        if let Some(i) = self.bounds.iter().position(|b| v <= *b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.sum_micro
            .fetch_add((v * 1e6) as u64, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    fn write(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (bound, bucket) in self.bounds.iter().zip(&self.buckets) {
            cumulative += bucket.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.sum_micro.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
    }
}

/// How a statement ended.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Outcome {
    Ok = 0,
    Error = 1,
    Canceled = 2,
}

const OUTCOMES: [&str; 3] = ["ok", "error", "canceled"];

/// Counters of one host.
pub(crate) struct Metrics {
    connections: AtomicU64,
    refused: AtomicU64,
    auth_failures: AtomicU64,
    statements: [AtomicU64; 3],
    latency: Histogram<12>,
    bytes_read: AtomicU64,
    row_groups_considered: AtomicU64,
    row_groups_pruned: AtomicU64,
    pages_considered: AtomicU64,
    pages_skipped: AtomicU64,
    rows_decoded: AtomicU64,
    rows_emitted: AtomicU64,
    ring_wait_us: AtomicU64,
    plan_hits: AtomicU64,
    result_hits: AtomicU64,
    from_statistics: AtomicU64,
    selectivity: Histogram<7>,
    pruning: Histogram<7>,
}

impl Metrics {
    pub(crate) fn new() -> Self {
        let zero = || AtomicU64::new(0);
        Self {
            connections: zero(),
            refused: zero(),
            auth_failures: zero(),
            statements: std::array::from_fn(|_| zero()),
            latency: Histogram::new(LATENCY_BOUNDS),
            bytes_read: zero(),
            row_groups_considered: zero(),
            row_groups_pruned: zero(),
            pages_considered: zero(),
            pages_skipped: zero(),
            rows_decoded: zero(),
            rows_emitted: zero(),
            ring_wait_us: zero(),
            plan_hits: zero(),
            result_hits: zero(),
            from_statistics: zero(),
            selectivity: Histogram::new(RATIO_BOUNDS),
            pruning: Histogram::new(RATIO_BOUNDS),
        }
    }

    pub(crate) fn connection(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn auth_failure(&self) {
        self.auth_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// One statement that ran on the engine, `seconds` long.
    pub(crate) fn statement(&self, outcome: Outcome, seconds: f64, query: Option<&QueryOutcome>) {
        self.statements[outcome as usize].fetch_add(1, Ordering::Relaxed);
        self.latency.observe(seconds);
        let Some(q) = query else {
            return;
        };
        let add = |c: &AtomicU64, v: u64| {
            c.fetch_add(v, Ordering::Relaxed);
        };
        add(&self.plan_hits, u64::from(q.plan_hit));
        add(&self.result_hits, u64::from(q.result_hit));
        add(&self.from_statistics, u64::from(q.from_statistics));
        let Some(s) = &q.scan else {
            return;
        };
        add(&self.bytes_read, s.bytes_read);
        add(&self.row_groups_considered, s.row_groups_considered);
        add(&self.row_groups_pruned, s.row_groups_pruned);
        add(&self.pages_considered, s.pages_considered);
        add(&self.pages_skipped, s.pages_skipped);
        add(&self.rows_decoded, s.rows_decoded);
        add(&self.rows_emitted, s.rows_emitted);
        add(&self.ring_wait_us, s.timings.ring_wait_us);
        if s.rows_decoded > 0 {
            self.selectivity
                .observe(s.rows_emitted as f64 / s.rows_decoded as f64);
        }
        if s.row_groups_considered > 0 {
            self.pruning
                .observe(s.row_groups_pruned as f64 / s.row_groups_considered as f64);
        }
    }

    /// The exposition, with `open` connections now.
    pub(crate) fn render(&self, open: u64) -> String {
        let mut out = String::new();
        let mut counter = |name: &str, help: &str, v: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
            );
        };
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        counter(
            "ringscan_connections_total",
            "Connections accepted.",
            get(&self.connections),
        );
        counter(
            "ringscan_connections_refused_total",
            "Connections refused past --max-connections.",
            get(&self.refused),
        );
        counter(
            "ringscan_authentication_failures_total",
            "Wrong passwords.",
            get(&self.auth_failures),
        );
        counter(
            "ringscan_scan_bytes_read_total",
            "Bytes the daemon read for scans.",
            get(&self.bytes_read),
        );
        counter(
            "ringscan_scan_row_groups_considered_total",
            "Row groups the scans considered.",
            get(&self.row_groups_considered),
        );
        counter(
            "ringscan_scan_row_groups_pruned_total",
            "Row groups pruned (statistics, bloom filters, page indexes).",
            get(&self.row_groups_pruned),
        );
        counter(
            "ringscan_scan_pages_considered_total",
            "Pages the scans considered.",
            get(&self.pages_considered),
        );
        counter(
            "ringscan_scan_pages_skipped_total",
            "Pages skipped by the page index.",
            get(&self.pages_skipped),
        );
        counter(
            "ringscan_scan_rows_decoded_total",
            "Rows decoded.",
            get(&self.rows_decoded),
        );
        counter(
            "ringscan_scan_rows_emitted_total",
            "Rows that passed the scans' filters.",
            get(&self.rows_emitted),
        );
        counter(
            "ringscan_scan_ring_wait_microseconds_total",
            "Time the daemon waited for room in the rings.",
            get(&self.ring_wait_us),
        );
        counter(
            "ringscan_plan_cache_hits_total",
            "Statements planned from the plan cache.",
            get(&self.plan_hits),
        );
        counter(
            "ringscan_result_cache_hits_total",
            "Statements answered from the result cache.",
            get(&self.result_hits),
        );
        counter(
            "ringscan_statistics_answers_total",
            "Statements answered from footer statistics alone.",
            get(&self.from_statistics),
        );
        let _ = writeln!(
            out,
            "# HELP ringscan_connections_open Connections open now.\n# TYPE ringscan_connections_open gauge\nringscan_connections_open {open}"
        );
        let _ = writeln!(
            out,
            "# HELP ringscan_statements_total Statements run on the engine, by outcome.\n# TYPE ringscan_statements_total counter"
        );
        for (name, c) in OUTCOMES.iter().zip(&self.statements) {
            let _ = writeln!(
                out,
                "ringscan_statements_total{{outcome=\"{name}\"}} {}",
                get(c)
            );
        }
        self.latency.write(
            &mut out,
            "ringscan_statement_duration_seconds",
            "Statement latency on the engine.",
        );
        self.selectivity.write(
            &mut out,
            "ringscan_scan_selectivity",
            "Rows emitted over rows decoded, per statement.",
        );
        self.pruning.write(
            &mut out,
            "ringscan_scan_row_group_pruning_rate",
            "Row groups pruned over row groups considered, per statement.",
        );
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
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
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
        m.statement(Outcome::Ok, 0.000_2, None);
        m.statement(Outcome::Ok, 0.003, None);
        m.statement(Outcome::Error, 20.0, None);
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
