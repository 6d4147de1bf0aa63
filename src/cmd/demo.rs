//! `ringscan demo`: the main job on an embedded default. Creates the default datasets
//! under the data directory when they are missing, then shows what was written and what
//! the files promise a reader (row groups, statistics, page index, bloom filters, sort
//! order), and runs a set of queries through the whole daemon -> ring -> executor path,
//! each twice (the second run answers from the warm caches), with what the daemon pruned.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use ringscan_generator::inspect::{describe, parquet_files};
use ringscan_generator::{DatasetKind, GenerateOptions};

use super::common::{data_dir, finish_recording, human_bytes, human_count, start_recording};
use super::generate::{figures, run_generator, summary_line};

/// Flags of `ringscan demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct DemoArgs {
    /// Data directory [default: $RINGSCAN_DATA, else ./ringscan-data].
    #[arg(long)]
    pub(crate) data: Option<PathBuf>,
}

/// The demo's datasets: seed 000's 100,000 OHLCV bars and seed 001's wide table.
fn demo_options(data: &Path) -> Vec<GenerateOptions> {
    let mut ohlcv = GenerateOptions::new(DatasetKind::Ohlcv, data.join("ohlcv"));
    ohlcv.rows = 100_000;
    ohlcv.row_group_rows = 16_384;
    ohlcv.page_rows = 2_048;
    let wide = GenerateOptions::new(DatasetKind::Wide, data.join("wide"));
    vec![ohlcv, wide]
}

fn has_parquet(dir: &Path) -> bool {
    parquet_files(dir).is_ok_and(|files| !files.is_empty())
}

pub(crate) fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let data = data_dir(args.data.as_deref());
    println!("ringscan demo: data directory {}", data.display());
    for opts in demo_options(&data) {
        let name = opts.dataset.name();
        if has_parquet(&opts.out) {
            println!(
                "\n{name}: already present in {}, not regenerated",
                opts.out.display()
            );
        } else {
            let recorder = start_recording(
                "generate",
                vec![
                    name.to_owned(),
                    "--rows".to_owned(),
                    opts.rows.to_string(),
                    "--out".to_owned(),
                    opts.out.display().to_string(),
                    "(demo)".to_owned(),
                ],
            );
            let summary = run_generator(&opts, false)?;
            println!("\n{}", summary_line(&summary, &opts.out));
            let runs = ringscan_profiling::runs_path(&data);
            finish_recording(recorder, figures(&summary, &opts), &runs, false);
        }
        print_files(&opts.out)?;
    }
    run_queries(&data)?;
    println!(
        "\nnext: `ringscan query --stats \"SELECT ...\"` for your own queries (the daemon stays \
         up until idle for 10 minutes; `ringscan daemon stop` ends it), `ringscan generate \
         --help` for bigger datasets."
    );
    Ok(ExitCode::SUCCESS)
}

/// The demo's queries: seed 000's filtered scans, seed 001's pages, an aggregate.
const DEMO_QUERIES: &[&str] = &[
    "SELECT count(*) AS bars, min(close), max(close) FROM ohlcv",
    "SELECT symbol, ts, close FROM ohlcv WHERE close >= 470 ORDER BY close DESC LIMIT 5",
    "SELECT symbol, count(*) AS bars, sum(close * volume) / sum(volume) AS vwap FROM ohlcv \
     GROUP BY symbol ORDER BY symbol",
    "SELECT order_id, region, status, total FROM wide WHERE region = 'north' AND total > 1000 \
     ORDER BY order_id LIMIT 5 OFFSET 100",
    "SELECT status, count(*) AS orders, avg(total) FROM wide GROUP BY status ORDER BY orders DESC",
];

/// Runs [`DEMO_QUERIES`] through a session, each twice, with what the scan did.
fn run_queries(data: &Path) -> anyhow::Result<()> {
    let mut session =
        super::query::open_sql_session(data, &ringscan_executor::engine::EngineOptions::default())?;
    println!("\nqueries (IO daemon -> shared-memory ring -> executor):");
    for sql in DEMO_QUERIES {
        println!("\n> {sql}");
        let first = session.query(sql, true)?;
        let mut out = std::io::stdout().lock();
        ringscan_executor::format::write_table(&mut out, &first.result)?;
        drop(out);
        let second = session.query(sql, true)?;
        if let Some(s) = &first.scan {
            println!(
                "  {:.2} ms; {}/{} row groups and {} pages pruned, {} read, {} rows decoded; \
                 again: {:.3} ms ({})",
                first.total_us as f64 / 1000.0,
                s.row_groups_pruned,
                s.row_groups_considered,
                s.pages_skipped,
                human_bytes(s.bytes_read),
                human_count(s.rows_decoded),
                second.total_us as f64 / 1000.0,
                if second.result_hit {
                    "result cache hit"
                } else {
                    "no cache hit"
                },
            );
        }
    }
    Ok(())
}

/// A table of the files under `dir` and what their footers carry.
fn print_files(dir: &Path) -> anyhow::Result<()> {
    println!(
        "  {:<28} {:>10} {:>10} {:>5} {:>6}  {:<8} {:<22} bloom filters",
        "file", "rows", "bytes", "rgs", "pages", "codec", "sorted by"
    );
    for path in parquet_files(dir)? {
        let report = describe(&path)?;
        let relative = path
            .strip_prefix(dir)
            .unwrap_or(&path)
            .display()
            .to_string();
        println!(
            "  {:<28} {:>10} {:>10} {:>5} {:>6}  {:<8} {:<22} {}",
            relative,
            human_count(report.rows),
            human_bytes(report.bytes),
            report.row_group_rows.len(),
            report.data_pages,
            report.compression.split('(').next().unwrap_or(""),
            report.sorted_by.join(","),
            report.bloom_columns.join(","),
        );
        let all = report.columns.len();
        println!(
            "  {:<28} statistics on {}/{all} columns, page index on {}/{all}, offset index {}",
            "",
            report.columns_with_statistics.len(),
            report.columns_with_column_index.len(),
            if report.offset_index { "yes" } else { "no" },
        );
    }
    Ok(())
}
