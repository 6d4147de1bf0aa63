//! `ringscan demo`: the main job on an embedded default. Creates the default datasets
//! under the data directory when they are missing, then shows what was written and what
//! the files promise a reader (row groups, statistics, page index, bloom filters, sort
//! order). It grows into the daemon -> ring -> executor query demo as those land.

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
    println!(
        "\nnext: `ringscan generate --help` for bigger datasets; the query path (daemon, ring, \
         executor) is being built."
    );
    Ok(ExitCode::SUCCESS)
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
