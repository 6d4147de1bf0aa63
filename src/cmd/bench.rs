//! `ringscan bench <suite>`: benchmark suites, and the hidden peer process they spawn.
//!
//! The measuring loops live in the library crates (`ringscan_ipc::bench` for `ring`,
//! `ringscan_benches::driver` for the query suites); this file only parses flags,
//! prepares the data, spawns this same executable as the peer (`ringscan __peer ...`)
//! or as the two sides (`ringscan __bench-side baseline|ringscan ...`), and prints or
//! writes the report.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::Context as _;
use ringscan_benches::driver::{self, RunConfig};
use ringscan_benches::suites::{self, SuiteKind};
use ringscan_ipc::bench::{peer_main, render_table, run_ring_bench, RingBenchConfig};
use serde_json::{json, Value};

use super::bench_data;
use super::common::{data_dir, parse_count, start_recording};
use super::generate::{run_generator, summary_line};

/// Benchmark suites.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Suite {
    /// Seed 000: ohlcv 100,000 bars, 90/50/10% filtered, no filter, AND, cache hit.
    Pushdown,
    /// Seed 001: wide 357,814 x 21, fifteen page / filter / sort shapes.
    Pages,
    /// Seed 002: the generator writing 10 million contacts (rows/s, counters).
    Generate,
    /// Seed 003: point lookups on a key column, cold and hot.
    Lookup,
    /// Seed 004: SELECT DISTINCT over 10 million rows, cold and warm.
    Distinct,
    /// Shared-memory ring across two processes: throughput vs memcpy, hand-off latency.
    Ring,
    /// TPC-H: the 22 queries on ringscan and DuckDB over tpchgen-cli's Parquet files,
    /// answers compared, times side by side (runs the source tree's benches/tpch/run).
    Tpch,
}

impl Suite {
    /// The suite the bench driver runs (`None`: TPC-H, run by its own harness).
    fn kind(self) -> Option<SuiteKind> {
        Some(match self {
            Self::Pushdown => SuiteKind::Pushdown,
            Self::Pages => SuiteKind::Pages,
            Self::Generate => SuiteKind::Generate,
            Self::Lookup => SuiteKind::Lookup,
            Self::Distinct => SuiteKind::Distinct,
            Self::Ring => SuiteKind::Ring,
            Self::Tpch => return None,
        })
    }
}

/// Flags of `ringscan bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    /// The suite to run.
    #[arg(value_enum)]
    suite: Suite,
    /// Also write the results as a JSON object to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Timed runs per scenario and side [default: pushdown 50, pages 10, lookup 200,
    /// distinct 5, generate 1].
    #[arg(long, value_parser = parse_count)]
    repeat: Option<u64>,
    /// Untimed warm-up runs per scenario and side.
    #[arg(long, default_value = "2", value_parser = parse_count)]
    warmup: u64,
    /// Benchmark data root: each suite generates into <DIR>/<suite> on first use
    /// [default: <data>/bench, where <data> is $RINGSCAN_DATA or ./ringscan-data].
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Rows of the suite's table instead of the seed's figure (for quick runs).
    #[arg(long, value_parser = parse_count)]
    rows: Option<u64>,
    /// Print the suite's scenarios (SQL and baseline shape) and targets as JSON and exit
    /// (generates the data first); the compare script reads this.
    #[arg(long)]
    list_json: bool,
    /// Only these scenarios (comma-separated names; TPC-H: query numbers, e.g. 1,3,6).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// TPC-H scale factor.
    #[arg(long, default_value_t = 1.0)]
    sf: f64,
}

/// Flags of the hidden `ringscan __peer` process.
#[derive(Debug, clap::Args)]
pub(crate) struct PeerArgs {
    /// The peer's role and `--key value` pairs (`ringscan_ipc::bench::PeerSpec`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 1..)]
    args: Vec<String>,
}

fn default_repeat(suite: SuiteKind) -> u64 {
    match suite {
        SuiteKind::Pushdown => 50,
        SuiteKind::Pages => 10,
        SuiteKind::Lookup => 200,
        SuiteKind::Distinct => 5,
        SuiteKind::Generate | SuiteKind::Ring => 1,
    }
}

pub(crate) fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let Some(kind) = args.suite.kind() else {
        return tpch(&args);
    };
    if kind == SuiteKind::Ring {
        if args.list_json {
            println!("{}", json!({"suite": "ring", "scenarios": []}));
            return Ok(ExitCode::SUCCESS);
        }
        return ring(args.json);
    }
    let root = args
        .data
        .clone()
        .unwrap_or_else(|| data_dir(None).join("bench"));
    let data = bench_data::ensure(kind, &root, args.rows)?;
    if args.list_json {
        println!("{}", serde_json::to_string_pretty(&data.suite_spec(kind))?);
        return Ok(ExitCode::SUCCESS);
    }
    let repeat = args.repeat.unwrap_or_else(|| default_repeat(kind)).max(1);
    let report = if kind == SuiteKind::Generate {
        generate_suite(&data, repeat)?
    } else {
        let config = RunConfig {
            warmup: usize::try_from(args.warmup).unwrap_or(usize::MAX),
            repeat: usize::try_from(repeat).unwrap_or(usize::MAX),
        };
        query_suite(kind, &data, config, &args.only)?
    };
    if let Some(path) = args.json {
        std::fs::write(&path, serde_json::to_string_pretty(&report)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `ringscan bench tpch`: DuckDB runs beside ringscan and answers are compared, which
/// takes Python, so this runs the harness of the source tree ringscan was built from
/// (`benches/tpch/run`: its own virtual environment, tpchgen-cli for the data) with
/// this executable as the ringscan side.
fn tpch(args: &BenchArgs) -> anyhow::Result<ExitCode> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/tpch/run");
    anyhow::ensure!(
        script.is_file(),
        "ringscan bench tpch runs {} (DuckDB beside ringscan, answers compared), which is \
         not here: run it from a checkout of ringscan's sources",
        script.display()
    );
    anyhow::ensure!(
        args.sf > 0.0 && args.sf <= 1000.0,
        "--sf {}: the scale factor must be above 0 and at most 1000",
        args.sf
    );
    let exe = std::env::current_exe().context("cannot find the ringscan executable")?;
    let mut cmd = Command::new(&script);
    cmd.arg("--sf")
        .arg(args.sf.to_string())
        .arg("--ringscan")
        .arg(&exe)
        .arg("--warmup")
        .arg(args.warmup.to_string());
    if let Some(repeat) = args.repeat {
        cmd.arg("--repeat").arg(repeat.to_string());
    }
    if let Some(root) = &args.data {
        cmd.arg("--data")
            .arg(root.join(format!("tpch-sf{}", args.sf)));
    }
    if !args.only.is_empty() {
        cmd.arg("--queries").arg(args.only.join(","));
    }
    if let Some(json) = &args.json {
        // The harness writes PREFIX.json and PREFIX.md.
        cmd.arg("--out").arg(json.with_extension(""));
    }
    let status = cmd
        .status()
        .with_context(|| format!("cannot run {}", script.display()))?;
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Cores, CPU model and memory of this machine, for every report.
pub(crate) fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_owned());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        });
    json!({
        "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "cpu_model": model,
        "memory_bytes": mem_kib.map(|k| k * 1024),
        "os": std::env::consts::OS,
    })
}

fn query_suite(
    kind: SuiteKind,
    data: &bench_data::SuiteData,
    config: RunConfig,
    only: &[String],
) -> anyhow::Result<Value> {
    let spec = data.suite_spec(kind);
    let mut scenarios = spec.scenarios.clone();
    if !only.is_empty() {
        for name in only {
            suites::find(&scenarios, name)?;
        }
        scenarios.retain(|s| only.contains(&s.name));
    }
    let exe = std::env::current_exe().context("cannot find the ringscan executable")?;
    let mut spawn = |side: &str| side_command(&exe, side, kind, &data.dir).spawn();
    let mut progress = |name: &str| eprintln!("ringscan bench {}: {name}", kind.name());
    let results = driver::run_sides(
        &scenarios,
        &["baseline", "ringscan"],
        config,
        &mut spawn,
        &mut progress,
    );
    // The ringscan side started the suite's daemon: a bench leaves nothing running.
    if let Ok(client) =
        ringscan_ipc::client::DaemonClient::connect(ringscan_ipc::client::socket_path(&data.dir))
    {
        let _ = client.stop();
    }
    let targets = driver::check_targets(&results, &spec.targets);
    print!("{}", driver::render(&results, &targets));
    if results
        .iter()
        .any(|r| r.side("ringscan").is_some_and(|s| s.error.is_some()))
    {
        eprintln!(
            "ringscan bench: the ringscan side did not run ({}); the table shows the baseline alone",
            super::bench_side::NOT_AVAILABLE
        );
    }
    Ok(json!({
        "suite": kind.name(),
        "machine": machine(),
        "config": config,
        "data_dir": spec.data_dir,
        "data": spec.data,
        "params": spec.params,
        "results": results,
        "targets": targets,
    }))
}

fn side_command(exe: &Path, side: &str, kind: SuiteKind, dir: &Path) -> Command {
    let mut cmd = Command::new(exe);
    cmd.arg("__bench-side")
        .arg(side)
        .arg("--suite")
        .arg(kind.name())
        .arg("--data")
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    cmd
}

fn generate_suite(data: &bench_data::SuiteData, repeat: u64) -> anyhow::Result<Value> {
    let spec = data
        .spec
        .as_ref()
        .context("the generate suite has no data spec")?;
    let mut runs = Vec::new();
    for i in 0..repeat {
        let recorder = start_recording("bench generate", vec![format!("run {i}")]);
        let opts = bench_data::generate_options(spec, data.dir.join(spec.table()))?;
        let summary = run_generator(&opts, true)?;
        eprintln!("{}", summary_line(&summary, &opts.out));
        let figures = super::generate::figures(&summary, &opts);
        let record = recorder.finish(figures);
        println!(
            "generate run {i}: {} rows/s; {}",
            super::common::human_count(summary.rows_per_sec() as u64),
            record.summary_line()
        );
        runs.push(json!({
            "rows": summary.rows,
            "seconds": summary.elapsed.as_secs_f64(),
            "rows_per_s": summary.rows_per_sec(),
            "bytes": summary.bytes,
            "producers": summary.producers,
            "writers": summary.writers,
            "record": serde_json::to_value(&record)?,
        }));
    }
    Ok(json!({
        "suite": "generate",
        "machine": machine(),
        "data": spec,
        "runs": runs,
    }))
}

fn ring(json: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().context("cannot find the ringscan executable")?;
    let mut spawn = |peer_args: &[String]| {
        Command::new(&exe)
            .arg("__peer")
            .args(peer_args)
            .stdin(Stdio::null())
            .spawn()
    };
    let report =
        run_ring_bench(&RingBenchConfig::default(), &mut spawn).context("ring benchmark failed")?;
    print!("{}", render_table(&report));
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(&path, text + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn peer(args: PeerArgs) -> anyhow::Result<ExitCode> {
    peer_main(&args.args).context("peer process failed")?;
    Ok(ExitCode::SUCCESS)
}
