//! `ringscan query`: one SQL query through the daemon → ring → executor path.
//!
//! The daemon of the data directory is started on demand (detached, logging under
//! `<data>/.ringscan/`) and stays up until idle, so the second query finds warm footer
//! caches. `--repeat N` runs the query N times in this process (plan and result caches
//! warm after the first) and reports latency percentiles.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use ringscan_executor::engine::{split_statements, EngineOptions, SqlSession};
use ringscan_executor::format::{write_csv, write_json, write_table};
use ringscan_executor::{QueryOutcome, QueryResult};
use ringscan_ipc::msg::ScanSummary;
use ringscan_profiling::{CounterSample, StageRecord, DAEMON_SCANS_STAGE};
use serde_json::{json, Map, Value};

use super::common::{
    finish_recording, human_bytes, human_count, start_recording, DataRoot, RangeCacheArgs,
};
use super::daemon::spawn_detached;

/// How long a daemon started by a query stays up without work.
const DAEMON_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// Output format of the rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// An aligned table with a header.
    Table,
    /// CSV with a header row.
    Csv,
    /// One JSON object per row, one per line.
    Json,
}

/// Arguments of `ringscan query`.
#[derive(Debug, Args)]
pub(crate) struct QueryArgs {
    /// The query: `SELECT ... FROM table|'path/glob' ...` (or `EXPLAIN SELECT ...`).
    /// Statements before the last (`SET TimeZone = 'Europe/Berlin'; SELECT ...`) run
    /// first, for their effect; the last one's rows are printed.
    sql: String,
    /// Data directory, or an object-storage prefix `s3://bucket/prefix` (read-only;
    /// endpoint and credentials from the AWS_* variables and the AWS profile;
    /// `gs://bucket/prefix` and `az://container/prefix` from GOOGLE_* and AZURE_*)
    /// [default: $RINGSCAN_DATA, else ./ringscan-data].
    #[arg(long, value_name = "DIR|URL")]
    data: Option<PathBuf>,
    /// For an s3:// root: the local directory for the daemon's socket, log and run
    /// records [default: one under the user's cache directory named after the URL].
    #[arg(long, value_name = "DIR")]
    state: Option<PathBuf>,
    #[command(flatten)]
    range_cache: RangeCacheArgs,
    /// How to print the rows.
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Print the scan summary (pruning, bytes read, timings) and counters to stderr.
    #[arg(long)]
    stats: bool,
    /// Print the plan (what is pushed to the daemon, what stays here) instead of running.
    #[arg(long)]
    explain: bool,
    /// Neither read nor fill the result cache.
    #[arg(long)]
    no_cache: bool,
    /// Run the query this many times in this process; report latency percentiles.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    repeat: u32,
    /// Run the query this many times first, untimed and unreported: the `--repeat` runs
    /// then measure a warm session (its connection and ring, the plan cache).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    warmup: u32,
    /// Write latency, scan, cache and counter figures as one JSON object to this file.
    #[arg(long)]
    stats_json: Option<PathBuf>,
    /// Shared-memory ring per scan, in MiB (results larger than the ring are copied out
    /// of it as they arrive).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65536))]
    ring_mib: u32,
    /// Memory for joins, sorts and aggregations before they spill to disk, in MiB
    /// [default: half the machine's memory].
    #[arg(long, value_parser = clap::value_parser!(u64).range(16..))]
    memory_limit_mib: Option<u64>,
    /// The session time zone that TIMESTAMPTZ values print, truncate and split in (an
    /// IANA name such as Europe/Berlin, or an offset such as +05:30; `SET TimeZone`
    /// in the SQL changes it) [default: $RINGSCAN_TIME_ZONE, else UTC].
    #[arg(long)]
    time_zone: Option<String>,
}

/// Latency percentiles over the repeats, microseconds.
#[derive(Debug, Clone, Copy)]
struct Latency {
    p50: u64,
    p95: u64,
    p99: u64,
    mean: f64,
}

impl Latency {
    fn of(samples: &[u64]) -> Self {
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        let rank = |q: f64| {
            let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
            sorted[i - 1]
        };
        Self {
            p50: rank(0.50),
            p95: rank(0.95),
            p99: rank(0.99),
            mean: sorted.iter().sum::<u64>() as f64 / sorted.len() as f64,
        }
    }
}

/// Opens a SQL session on the local data directory `data`, starting its daemon if
/// none answers.
pub(crate) fn open_sql_session(data: &Path, options: &EngineOptions) -> anyhow::Result<SqlSession> {
    open_root_session(&DataRoot::local(data), options)
}

/// Opens a SQL session on `data` (a local directory or an object-storage root),
/// starting its daemon if none answers.
pub(crate) fn open_root_session(
    data: &DataRoot,
    options: &EngineOptions,
) -> anyhow::Result<SqlSession> {
    data.check()?;
    let exe = std::env::current_exe().context("cannot find the ringscan executable")?;
    let spawn = || spawn_detached(&exe, data, DAEMON_IDLE_TIMEOUT).map(drop);
    SqlSession::open(&data.local, &spawn, options)
        .with_context(|| format!("cannot reach the IO daemon of {}", data.root.display()))
}

/// The session zone asked for: `--time-zone`, else `$RINGSCAN_TIME_ZONE` (an empty
/// value counts as unset); `None`: the engine's default (UTC).
fn time_zone(flag: Option<&str>) -> Option<String> {
    flag.map(str::to_owned)
        .or_else(|| std::env::var("RINGSCAN_TIME_ZONE").ok())
        .filter(|z| !z.trim().is_empty())
}

pub(crate) fn run(args: QueryArgs) -> anyhow::Result<std::process::ExitCode> {
    let root = DataRoot::new(args.data.as_deref(), args.state.as_deref())?
        .with_range_cache(&args.range_cache)?;
    let data = root.local.clone();
    let mut recorder = start_recording("query", std::env::args().skip(2).collect());
    let mut daemon = DaemonCounters::default();
    let ring_capacity_bytes = args.ring_mib as usize * (1 << 20);
    let mut options = EngineOptions {
        ring_capacity_bytes,
        ..EngineOptions::default()
    };
    if let Some(mib) = args.memory_limit_mib {
        options.memory_limit_bytes = usize::try_from(mib << 20).unwrap_or(usize::MAX);
    }
    if let Some(zone) = time_zone(args.time_zone.as_deref()) {
        ringscan_executor::zone::parse_time_zone(&zone)?;
        options.time_zone = zone;
    }
    let statements = split_statements(&args.sql)?;
    let Some((sql, setup)) = statements.split_last() else {
        bail!("no SQL statement was given");
    };
    let mut session = open_root_session(&root, &options)?;
    for statement in setup {
        daemon.add(&session.query(statement, false)?);
    }
    if args.explain {
        println!("{}", session.explain(sql)?);
        return Ok(std::process::ExitCode::SUCCESS);
    }
    for _ in 0..args.warmup {
        daemon.add(&session.query(sql, !args.no_cache)?);
    }
    let mut latencies_us = Vec::with_capacity(args.repeat as usize);
    let mut first: Option<QueryOutcome> = None;
    let mut last: Option<QueryOutcome> = None;
    for _ in 0..args.repeat {
        let outcome = session.query(sql, !args.no_cache)?;
        daemon.add(&outcome);
        latencies_us.push(outcome.total_us);
        if first.is_none() {
            let mut outcome = outcome;
            if args.repeat > 1 {
                // Printed at the end: copied out of the ring now (outside the timing),
                // so that the next run's scan can reuse the ring.
                outcome.result = Arc::new(outcome.result.owned()?);
            }
            first = Some(outcome);
        } else {
            // Only the first run's rows are printed. The later runs' rows go now: alive,
            // they would hold the ring that the next run's scan can otherwise reuse.
            let mut outcome = outcome;
            outcome.result = Arc::new(QueryResult {
                schema: Arc::clone(&outcome.result.schema),
                batches: Vec::new(),
                rows: outcome.result.rows,
            });
            last = Some(outcome);
        }
    }
    let first = first.expect("repeat is at least 1");
    let latency = Latency::of(&latencies_us);
    print_result(&first, args.format)?;

    let scan = first.scan.clone().unwrap_or_default();
    let mut figures = Map::new();
    figures.insert("rows_returned".into(), json!(first.result.rows));
    figures.insert("latency_us_p50".into(), json!(latency.p50));
    figures.insert("repeat".into(), json!(args.repeat));
    let runs_file = ringscan_profiling::runs_path(&data);
    let record_quiet = !args.stats;
    if args.stats {
        print_stats(&first, last.as_ref(), &scan, latency, args.repeat);
    }
    recorder.add_stage(daemon.stage());
    let record = finish_recording(recorder, figures, &runs_file, record_quiet);
    if let Some(path) = &args.stats_json {
        let stats = json!({
            "sql": args.sql,
            "repeat": args.repeat,
            "warmup": args.warmup,
            "latency_us": {
                "p50": latency.p50,
                "p95": latency.p95,
                "p99": latency.p99,
                "mean": latency.mean,
                "samples": latencies_us,
            },
            "rows_returned": first.result.rows,
            "scan": scan_json(&scan),
            "cache": {
                "plan_hit": last.as_ref().unwrap_or(&first).plan_hit,
                "result_hit": last.as_ref().unwrap_or(&first).result_hit,
                "first_plan_hit": first.plan_hit,
                "first_result_hit": first.result_hit,
            },
            "counters": {
                "daemon": scan.counters.readable(),
                "executor": record.counters,
                "executor_peak_rss_bytes": record.peak_rss_bytes,
                "executor_cpu_ns": record.cpu_user_ns + record.cpu_system_ns,
            },
        });
        write_stats_json(path, stats)?;
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// The IO daemon's counters over every scan this process asked of it, for the run's
/// record: the executor's counters cover the whole process run (setup statements and
/// warm-up runs included), so the daemon's cover the same queries.
#[derive(Debug, Default)]
struct DaemonCounters {
    samples: Vec<CounterSample>,
    scans: u64,
    queries: u64,
    wall_us: u64,
}

impl DaemonCounters {
    fn add(&mut self, outcome: &QueryOutcome) {
        self.queries += 1;
        let Some(scan) = &outcome.scan else {
            return; // A result-cache hit, or no table read: the daemon did nothing.
        };
        if let Some(sample) = &scan.counters.scan {
            self.samples.push(sample.clone());
            self.scans += scan.counters.scans_counted.unwrap_or(1);
            self.wall_us += scan.timings.total_us;
        }
    }

    fn stage(&self) -> StageRecord {
        let mut figures = Map::new();
        figures.insert("scans".into(), json!(self.scans));
        figures.insert("queries".into(), json!(self.queries));
        StageRecord {
            name: DAEMON_SCANS_STAGE.to_owned(),
            process: Some("io-daemon".to_owned()),
            wall_ns: self.wall_us.saturating_mul(1000),
            counters: CounterSample::sum(&self.samples),
            figures,
        }
    }
}

fn write_stats_json(path: &Path, stats: Value) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(&stats)?;
    std::fs::write(path, text + "\n")
        .with_context(|| format!("cannot write the stats to {}", path.display()))
}

fn scan_json(s: &ScanSummary) -> Value {
    json!({
        "files_total": s.files_considered,
        "files_pruned": s.files_pruned,
        "row_groups_total": s.row_groups_considered,
        "row_groups_pruned": s.row_groups_pruned,
        "pages_pruned": s.pages_skipped,
        "row_groups_all_pass": s.row_groups_all_pass,
        "bytes_read": s.bytes_read,
        "rows_decoded": s.rows_decoded,
        "rows_emitted": s.rows_emitted,
        "column_cache_hits": s.column_cache_hits,
        "store_requests": s.store_requests,
        "store_bytes_fetched": s.store_bytes_fetched,
        "store_wait_us": s.store_wait_us,
        "store_cache_hit_bytes": s.store_cache_hit_bytes,
        "timings_us": s.timings,
    })
}

fn print_result(outcome: &QueryOutcome, format: Format) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    if let Some(text) = &outcome.explain {
        out.write_all(text.as_bytes())?;
        out.flush()?;
        return Ok(());
    }
    if let Some(tag) = &outcome.command {
        // A statement that wrote: its tag, as psql prints it (`INSERT 0 3`).
        writeln!(out, "{tag}")?;
        out.flush()?;
        return Ok(());
    }
    match format {
        Format::Table => write_table(&mut out, &outcome.result)?,
        Format::Csv => write_csv(&mut out, &outcome.result)?,
        Format::Json => write_json(&mut out, &outcome.result)?,
    }
    out.flush()?;
    Ok(())
}

fn print_stats(
    first: &QueryOutcome,
    last: Option<&QueryOutcome>,
    s: &ScanSummary,
    latency: Latency,
    repeat: u32,
) {
    let ms = |us: u64| format!("{:.3} ms", us as f64 / 1000.0);
    eprintln!(
        "scan: files {} ({} pruned), row groups {} ({} pruned), pages {} pruned; {} read; \
         rows {} decoded, {} emitted",
        human_count(s.files_considered),
        human_count(s.files_pruned),
        human_count(s.row_groups_considered),
        human_count(s.row_groups_pruned),
        human_count(s.pages_skipped),
        human_bytes(s.bytes_read),
        human_count(s.rows_decoded),
        human_count(s.rows_emitted),
    );
    if s.rows_skipped_by_offset > 0 {
        eprintln!(
            "offset: {} rows skipped in the daemon ({} row groups never read)",
            human_count(s.rows_skipped_by_offset),
            human_count(s.row_groups_skipped_by_offset),
        );
    }
    if s.row_groups_all_pass > 0 {
        eprintln!(
            "filter: {} row groups read unfiltered (their statistics prove every row passes)",
            human_count(s.row_groups_all_pass)
        );
    }
    if s.column_cache_hits > 0 {
        eprintln!(
            "column cache: {} reads served decoded from the daemon's memory",
            human_count(s.column_cache_hits)
        );
    }
    if s.store_requests > 0 || s.store_cache_hit_bytes > 0 {
        eprintln!(
            "object store: {} requests, {} fetched and {} from the range cache for {} read, \
             {} waiting (summed over threads)",
            human_count(s.store_requests),
            human_bytes(s.store_bytes_fetched),
            human_bytes(s.store_cache_hit_bytes),
            human_bytes(s.bytes_read),
            ms(s.store_wait_us)
        );
    }
    if first.from_statistics {
        eprintln!("answered from Parquet statistics: no column data read, no row decoded");
    }
    let t = &s.timings;
    eprintln!(
        "daemon time: total {}, io {}, decode {}, filter {}, waiting on the ring {}",
        ms(t.total_us),
        ms(t.io_us),
        ms(t.decode_us),
        ms(t.filter_us),
        ms(t.ring_wait_us)
    );
    eprintln!(
        "query: {} rows in {}; plan cache {}, result cache {}",
        human_count(first.result.rows as u64),
        ms(first.total_us),
        if first.plan_hit { "hit" } else { "miss" },
        if first.result_hit { "hit" } else { "miss" },
    );
    if repeat > 1 {
        let later = last.unwrap_or(first);
        eprintln!(
            "{repeat} runs: p50 {}, p95 {}, p99 {}, mean {:.3} ms (later runs: plan cache {}, result cache {})",
            ms(latency.p50),
            ms(latency.p95),
            ms(latency.p99),
            latency.mean / 1000.0,
            if later.plan_hit { "hit" } else { "miss" },
            if later.result_hit { "hit" } else { "miss" },
        );
    }
    match &s.counters.scan {
        Some(sample) => eprintln!(
            "daemon scan {}; footer cache {}",
            ringscan_profiling::summary_of(sample),
            serde_json::to_value(&s.counters.metadata_cache).unwrap_or(Value::Null)
        ),
        None if s.counters != Default::default() => {
            eprintln!("daemon counters: {}", s.counters.readable())
        }
        None => {}
    }
    if let Some(unpins @ ringscan_ipc::msg::Unpins { count: 1.., .. }) = s.counters.executor_unpins
    {
        eprintln!(
            "ring: batches the executor held were copied out of the ring {} times ({} MiB) so that the daemon could go on",
            unpins.count,
            unpins.bytes as f64 / (1 << 20) as f64
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let samples: Vec<u64> = (1..=100).collect();
        let l = Latency::of(&samples);
        assert_eq!((l.p50, l.p95, l.p99), (50, 95, 99));
        assert!((l.mean - 50.5).abs() < 1e-9);
        let one = Latency::of(&[7]);
        assert_eq!((one.p50, one.p99), (7, 7));
    }
}
