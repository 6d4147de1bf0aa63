//! What to generate and how: the options of `ringscan generate`, with their limits.

use std::path::PathBuf;

use parquet::basic::{Compression, ZstdLevel};

use crate::datasets::{Contacts, DatasetRef, Ohlcv, PartitionBy, Wide};
use crate::error::GeneratorError;

/// Which dataset to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatasetKind {
    /// One-minute OHLCV bars.
    Ohlcv,
    /// Nested contact records.
    Contacts,
    /// 21 mixed columns.
    Wide,
}

impl DatasetKind {
    /// The dataset's name as the CLI spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ohlcv => "ohlcv",
            Self::Contacts => "contacts",
            Self::Wide => "wide",
        }
    }

    /// The row count used when none is given.
    pub fn default_rows(self) -> u64 {
        match self {
            Self::Ohlcv => 1_000_000,
            Self::Contacts => 1_000_000,
            Self::Wide => crate::datasets::WIDE_DEFAULT_ROWS,
        }
    }
}

/// The Parquet compression codec of the data pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompressionKind {
    /// zstd level 1: the default, fast and compact.
    Zstd,
    /// Parquet's LZ4_RAW (lz4_flex).
    Lz4,
    /// Snappy.
    Snappy,
    /// Uncompressed.
    None,
}

impl CompressionKind {
    pub(crate) fn parquet(self) -> Compression {
        match self {
            Self::Zstd => Compression::ZSTD(ZstdLevel::default()),
            Self::Lz4 => Compression::LZ4_RAW,
            Self::Snappy => Compression::SNAPPY,
            Self::None => Compression::UNCOMPRESSED,
        }
    }
}

/// Upper limits that keep a typo (`--rows 1e15`) from filling the disk or the memory.
pub mod limits {
    /// Most rows one run writes.
    pub const MAX_ROWS: u64 = 100_000_000_000;
    /// Most producer or writer threads.
    pub const MAX_THREADS: usize = 256;
    /// Most rows in one batch.
    pub const MAX_BATCH_ROWS: usize = 1 << 20;
    /// Most rows in one row group.
    pub const MAX_ROW_GROUP_ROWS: usize = 1 << 26;
    /// Most `ohlcv` symbols.
    pub const MAX_SYMBOLS: usize = 1_000_000;
}

/// Everything `generate` needs to know. Build with [`GenerateOptions::new`], then set
/// fields; [`GenerateOptions::validate`] checks the limits.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    /// The dataset.
    pub dataset: DatasetKind,
    /// Rows to write.
    pub rows: u64,
    /// Output directory (created if missing).
    pub out: PathBuf,
    /// Producer threads (build batches).
    pub producers: usize,
    /// Writer threads (each owns its own files).
    pub writers: usize,
    /// Rows per generated batch.
    pub batch_rows: usize,
    /// Rows per Parquet row group.
    pub row_group_rows: usize,
    /// Rows per Parquet data page (best effort; finer pages prune better).
    pub page_rows: usize,
    /// Page compression.
    pub compression: CompressionKind,
    /// The seed every value derives from.
    pub seed: u64,
    /// `ohlcv` only: number of symbols.
    pub symbols: usize,
    /// `ohlcv` only: hive partitioning.
    pub partition_by: PartitionBy,
    /// Replace the Parquet files of a non-empty output directory.
    pub overwrite: bool,
}

impl GenerateOptions {
    /// Defaults for `dataset` into `out`: threads from the core count, 64 Ki-row batches,
    /// 128 Ki-row row groups, 10,000-row pages, zstd, seed 42, 8 symbols.
    pub fn new(dataset: DatasetKind, out: PathBuf) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self {
            dataset,
            rows: dataset.default_rows(),
            out,
            producers: cores,
            writers: cores,
            batch_rows: 65_536,
            row_group_rows: 131_072,
            page_rows: 10_000,
            compression: CompressionKind::Zstd,
            seed: 42,
            symbols: 8,
            partition_by: PartitionBy::None,
            overwrite: false,
        }
    }

    /// Checks every option against its limits.
    pub fn validate(&self) -> Result<(), GeneratorError> {
        fn check<T: PartialOrd + std::fmt::Display>(
            flag: &'static str,
            value: T,
            min: T,
            max: T,
        ) -> Result<(), GeneratorError> {
            if value < min || value > max {
                return Err(GeneratorError::InvalidOption {
                    flag,
                    reason: format!("{value} is outside {min}..={max}"),
                });
            }
            Ok(())
        }
        check("rows", self.rows, 1, limits::MAX_ROWS)?;
        check("producers", self.producers, 1, limits::MAX_THREADS)?;
        check("writers", self.writers, 1, limits::MAX_THREADS)?;
        check("batch-rows", self.batch_rows, 1, limits::MAX_BATCH_ROWS)?;
        check(
            "row-group-rows",
            self.row_group_rows,
            1,
            limits::MAX_ROW_GROUP_ROWS,
        )?;
        check("page-rows", self.page_rows, 1, limits::MAX_ROW_GROUP_ROWS)?;
        check("symbols", self.symbols, 1, limits::MAX_SYMBOLS)?;
        if self.dataset != DatasetKind::Ohlcv && self.partition_by != PartitionBy::None {
            return Err(GeneratorError::InvalidOption {
                flag: "partition-by",
                reason: format!("only ohlcv can be partitioned, not {}", self.dataset.name()),
            });
        }
        Ok(())
    }

    /// The dataset these options describe.
    pub fn build_dataset(&self) -> DatasetRef {
        match self.dataset {
            DatasetKind::Ohlcv => std::sync::Arc::new(Ohlcv::new(
                self.seed,
                self.rows,
                self.symbols,
                self.partition_by,
            )),
            DatasetKind::Contacts => std::sync::Arc::new(Contacts::new(self.seed, self.rows)),
            DatasetKind::Wide => std::sync::Arc::new(Wide::new(self.seed, self.rows)),
        }
    }
}
