//! `ringscan-generator`: deterministic synthetic Parquet datasets, written by P producer
//! threads feeding W writer threads over bounded channels.
//!
//! Three datasets (see [`datasets`]): `ohlcv` (one-minute bars, prices a random walk in
//! 400-500), `contacts` (nested lists and structs with Zipfian values, as in seed 002)
//! and `wide` (21 mixed columns, the shape of seed 001). Every value derives from the
//! seed and the row's index, so the rows are the same whatever the thread counts and
//! batch size. Files carry statistics, the page index, bloom filters on key columns and
//! `sorting_columns`; each is written under a temporary name and renamed when complete.
//!
//! String columns drawn from a fixed vocabulary (all of `contacts`' strings) travel from
//! the producers as dictionary keys ([`Dataset::encoded_batch`]) and are written from
//! the keys by the crate's own column-chunk writer, not re-interned by parquet's
//! `ArrowWriter`, which writes the other columns.
//!
//! ```no_run
//! use ringscan_generator::{generate, DatasetKind, GenerateOptions};
//!
//! let mut opts = GenerateOptions::new(DatasetKind::Ohlcv, "data/ohlcv".into());
//! opts.rows = 100_000;
//! let summary = generate(&opts, &|_rows| {})?;
//! println!("{} rows in {} files", summary.rows, summary.files.len());
//! # Ok::<(), ringscan_generator::GeneratorError>(())
//! ```
#![forbid(unsafe_code)]

pub mod datasets;
mod dictionary;
mod error;
pub mod inspect;
mod options;
mod output;
mod pipeline;
pub mod rng;
mod row_group;
mod sink;
pub mod zipf;

pub use datasets::{Dataset, DatasetRef, PartitionBy};
pub use error::GeneratorError;
pub use options::{limits, CompressionKind, DatasetKind, GenerateOptions};
pub use pipeline::{generate, GenerateSummary};
pub use sink::WrittenFile;
