//! `ringscan bench <suite>`: benchmark suites, and the hidden peer process they spawn.
//!
//! The measuring loops live in the library crates (`ringscan_ipc::bench` for `ring`);
//! this file only parses flags, spawns this same executable as the peer
//! (`ringscan __peer ...`), and prints or writes the report.

use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

use anyhow::Context as _;
use ringscan_ipc::bench::{peer_main, render_table, run_ring_bench, RingBenchConfig};

/// Benchmark suites.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum Suite {
    /// Shared-memory ring across two processes: throughput vs memcpy, hand-off latency.
    Ring,
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
}

/// Flags of the hidden `ringscan __peer` process.
#[derive(Debug, clap::Args)]
pub(crate) struct PeerArgs {
    /// The peer's role and `--key value` pairs (`ringscan_ipc::bench::PeerSpec`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 1..)]
    args: Vec<String>,
}

pub(crate) fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    match args.suite {
        Suite::Ring => ring(args.json),
    }
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
