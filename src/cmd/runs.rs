//! `ringscan runs`: recorded runs as a table, and comparisons.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use ringscan_profiling::{
    find_run, format_comparison, format_table, read_records_counted, runs_path,
};

/// Flags of `ringscan runs`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunsArgs {
    /// Show only the N most recent runs.
    #[arg(long, value_name = "N", default_value_t = 20)]
    last: usize,
    /// Print the selected records as JSON lines instead of a table.
    #[arg(long)]
    json: bool,
    /// Compare two runs side by side (run id, unique prefix, or ~N for the N-th latest).
    #[arg(long, num_args = 2, value_names = ["RUN_A", "RUN_B"])]
    compare: Option<Vec<String>>,
    /// Data directory whose `.ringscan/runs.jsonl` to read [default: $RINGSCAN_DATA, else
    /// ./ringscan-data].
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Runs file to read (overrides --data).
    #[arg(long, value_name = "FILE")]
    runs: Option<PathBuf>,
}

pub(crate) fn run(args: RunsArgs) -> anyhow::Result<ExitCode> {
    let path = match (&args.runs, &args.data) {
        (Some(file), _) => file.clone(),
        (None, Some(dir)) => runs_path(dir),
        (None, None) => runs_path(
            &std::env::var_os("RINGSCAN_DATA")
                .map_or_else(|| PathBuf::from("ringscan-data"), PathBuf::from),
        ),
    };
    let read = match read_records_counted(&path) {
        Ok(read) => read,
        Err(e) if e.is_not_found() && args.compare.is_none() => {
            eprintln!(
                "ringscan: no runs recorded yet ({} does not exist)",
                path.display()
            );
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => return Err(e).context("cannot read recorded runs"),
    };
    if read.malformed_lines > 0 {
        eprintln!(
            "ringscan: skipped {} malformed line(s) in {}",
            read.malformed_lines,
            path.display()
        );
    }
    let records = read.records;
    let mut out = std::io::stdout().lock();

    if let Some(keys) = &args.compare {
        let [a, b] = keys.as_slice() else {
            anyhow::bail!("--compare takes two run ids");
        };
        let context = || format!("cannot compare runs from {}", path.display());
        let ra = find_run(&records, a).with_context(context)?;
        let rb = find_run(&records, b).with_context(context)?;
        if args.json {
            let pair = serde_json::json!({ "a": ra, "b": rb });
            writeln!(out, "{pair}")?;
        } else {
            out.write_all(format_comparison(ra, rb).as_bytes())?;
        }
        return Ok(ExitCode::SUCCESS);
    }

    let recent = &records[records.len().saturating_sub(args.last)..];
    if args.json {
        for rec in recent {
            writeln!(out, "{}", serde_json::to_string(rec)?)?;
        }
    } else if recent.is_empty() {
        eprintln!("ringscan: no runs recorded in {}", path.display());
    } else {
        out.write_all(format_table(recent).as_bytes())?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
