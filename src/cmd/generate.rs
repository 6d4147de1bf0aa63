//! `ringscan generate <dataset>`: write a synthetic Parquet dataset.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::ValueEnum;
use ringscan_generator::{
    generate, CompressionKind, DatasetKind, GenerateOptions, GenerateSummary, PartitionBy,
};

use super::common::{
    data_dir, finish_recording, human_bytes, human_count, parse_count, start_recording,
};

/// Which dataset to write.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum DatasetArg {
    /// One-minute OHLCV bars per symbol (symbol, ts, open, high, low, close, volume).
    Ohlcv,
    /// Nested contact records: lists of structs, Zipfian values and list lengths.
    Contacts,
    /// 21 mixed columns (ids, low-cardinality strings, dates, amounts, flags).
    Wide,
}

/// Page compression codec.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum CompressionArg {
    /// zstd, level 1.
    Zstd,
    /// Parquet LZ4_RAW.
    Lz4,
    /// Snappy.
    Snappy,
    /// No compression.
    None,
}

/// Hive partitioning of ohlcv output.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum PartitionArg {
    /// No partitions.
    None,
    /// symbol=SPY/
    Symbol,
    /// symbol=SPY/date=2024-01-02/
    #[value(name = "symbol,date")]
    SymbolDate,
}

/// Flags of `ringscan generate`.
#[derive(Debug, clap::Args)]
pub(crate) struct GenerateArgs {
    /// The dataset to write.
    #[arg(value_enum)]
    pub(crate) dataset: DatasetArg,
    /// Rows to write (accepts 10_000_000, 10,000,000, 10M, 1e7) [default: ohlcv 1M,
    /// contacts 1M, wide 357,814].
    #[arg(long, value_parser = parse_count)]
    pub(crate) rows: Option<u64>,
    /// Output directory [default: <data>/<dataset>].
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Data directory [default: $RINGSCAN_DATA, else ./ringscan-data].
    #[arg(long)]
    pub(crate) data: Option<PathBuf>,
    /// Producer threads [default: number of cores].
    #[arg(long)]
    pub(crate) producers: Option<usize>,
    /// Writer threads, each writing its own files [default: number of cores].
    #[arg(long)]
    pub(crate) writers: Option<usize>,
    /// Rows per generated batch.
    #[arg(long, default_value = "65536", value_parser = parse_count)]
    pub(crate) batch_rows: u64,
    /// Rows per Parquet row group.
    #[arg(long, default_value = "131072", value_parser = parse_count)]
    pub(crate) row_group_rows: u64,
    /// Rows per Parquet data page (best effort).
    #[arg(long, default_value = "10000", value_parser = parse_count)]
    pub(crate) page_rows: u64,
    /// Page compression.
    #[arg(long, value_enum, default_value = "zstd")]
    pub(crate) compression: CompressionArg,
    /// Seed: the same seed and row count give the same rows.
    #[arg(long, default_value_t = 42)]
    pub(crate) seed: u64,
    /// ohlcv: number of symbols.
    #[arg(long, default_value = "8", value_parser = parse_count)]
    pub(crate) symbols: u64,
    /// ohlcv: hive partitioning.
    #[arg(long, value_enum, default_value = "none")]
    pub(crate) partition_by: PartitionArg,
    /// Replace the Parquet files of a non-empty output directory.
    #[arg(long)]
    pub(crate) overwrite: bool,
    /// Run-record file [default: <data>/.ringscan/runs.jsonl, where <data> is the output
    /// directory's parent].
    #[arg(long)]
    pub(crate) runs: Option<PathBuf>,
    /// No progress bar and no summary line.
    #[arg(long, short)]
    pub(crate) quiet: bool,
}

fn too_big(flag: &str, value: u64) -> anyhow::Error {
    anyhow::anyhow!("invalid --{flag}: {value} is too large")
}

impl GenerateArgs {
    /// The library options these flags describe.
    pub(crate) fn options(&self) -> anyhow::Result<GenerateOptions> {
        let dataset = match self.dataset {
            DatasetArg::Ohlcv => DatasetKind::Ohlcv,
            DatasetArg::Contacts => DatasetKind::Contacts,
            DatasetArg::Wide => DatasetKind::Wide,
        };
        let out = match &self.out {
            Some(out) => out.clone(),
            None => data_dir(self.data.as_deref()).join(dataset.name()),
        };
        let mut opts = GenerateOptions::new(dataset, out);
        if let Some(rows) = self.rows {
            opts.rows = rows;
        }
        if let Some(p) = self.producers {
            opts.producers = p;
        }
        if let Some(w) = self.writers {
            opts.writers = w;
        }
        let size = |flag: &str, v: u64| usize::try_from(v).map_err(|_| too_big(flag, v));
        opts.batch_rows = size("batch-rows", self.batch_rows)?;
        opts.row_group_rows = size("row-group-rows", self.row_group_rows)?;
        opts.page_rows = size("page-rows", self.page_rows)?;
        opts.symbols = size("symbols", self.symbols)?;
        opts.compression = match self.compression {
            CompressionArg::Zstd => CompressionKind::Zstd,
            CompressionArg::Lz4 => CompressionKind::Lz4,
            CompressionArg::Snappy => CompressionKind::Snappy,
            CompressionArg::None => CompressionKind::None,
        };
        opts.partition_by = match self.partition_by {
            PartitionArg::None => PartitionBy::None,
            PartitionArg::Symbol => PartitionBy::Symbol,
            PartitionArg::SymbolDate => PartitionBy::SymbolDate,
        };
        opts.seed = self.seed;
        opts.overwrite = self.overwrite;
        opts.validate()?;
        Ok(opts)
    }
}

/// Runs the generator with a progress bar on a terminal, nothing on a pipe.
pub(crate) fn run_generator(
    opts: &GenerateOptions,
    quiet: bool,
) -> anyhow::Result<GenerateSummary> {
    let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new(opts.rows);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} {msg} [{bar:30}] {human_pos}/{human_len} rows ({per_sec}, eta {eta})",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.set_message(opts.dataset.name());
        bar
    });
    let progress = |rows: u64| {
        if let Some(bar) = &bar {
            bar.inc(rows);
        }
    };
    let result = generate(opts, &progress);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    result.with_context(|| {
        format!(
            "generating {} into {}",
            opts.dataset.name(),
            opts.out.display()
        )
    })
}

/// The one-line summary printed after a run.
pub(crate) fn summary_line(summary: &GenerateSummary, out: &std::path::Path) -> String {
    format!(
        "{}: {} rows in {} files, {}, {:.2} s ({} rows/s; {} producers, {} writers) -> {}",
        summary.dataset,
        human_count(summary.rows),
        summary.files.len(),
        human_bytes(summary.bytes),
        summary.elapsed.as_secs_f64(),
        human_count(summary.rows_per_sec() as u64),
        summary.producers,
        summary.writers,
        out.display()
    )
}

/// The figures of a generate run, for its run record.
pub(crate) fn figures(
    summary: &GenerateSummary,
    opts: &GenerateOptions,
) -> serde_json::Map<String, serde_json::Value> {
    let mut figures = serde_json::Map::new();
    figures.insert("dataset".into(), summary.dataset.into());
    figures.insert("rows".into(), summary.rows.into());
    figures.insert("files".into(), summary.files.len().into());
    figures.insert("bytes".into(), summary.bytes.into());
    figures.insert("rows_per_s".into(), summary.rows_per_sec().into());
    figures.insert("producers".into(), summary.producers.into());
    figures.insert("writers".into(), summary.writers.into());
    figures.insert("batch_rows".into(), opts.batch_rows.into());
    figures.insert("row_group_rows".into(), opts.row_group_rows.into());
    figures.insert(
        "compression".into(),
        format!("{:?}", opts.compression).to_lowercase().into(),
    );
    figures.insert("seed".into(), opts.seed.into());
    figures
}

/// Where a generate run's record goes: `--runs`, else the output directory's parent
/// data directory.
pub(crate) fn runs_file(runs: Option<&std::path::Path>, out: &std::path::Path) -> PathBuf {
    match runs {
        Some(file) => file.to_path_buf(),
        None => {
            let data = out
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."));
            ringscan_profiling::runs_path(data)
        }
    }
}

pub(crate) fn run(args: GenerateArgs) -> anyhow::Result<ExitCode> {
    // `ringscan generate <args>`: record the arguments after the subcommand.
    let recorder = start_recording("generate", std::env::args().skip(2).collect());
    let opts = args.options()?;
    let summary = run_generator(&opts, args.quiet)?;
    if !args.quiet {
        eprintln!("{}", summary_line(&summary, &opts.out));
    }
    finish_recording(
        recorder,
        figures(&summary, &opts),
        &runs_file(args.runs.as_deref(), &opts.out),
        args.quiet,
    );
    Ok(ExitCode::SUCCESS)
}
