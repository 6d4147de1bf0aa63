//! The datasets: each builds any range of its rows, from the seed and the row indices
//! alone.

mod contacts;
mod ohlcv;
mod vocabulary;
mod wide;

use std::fmt;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{ArrowError, SchemaRef};

pub use contacts::Contacts;
pub use ohlcv::{Ohlcv, PartitionBy};
pub use wide::{Wide, WIDE_DEFAULT_ROWS};

/// A synthetic dataset: a schema and a pure function from a row range to a batch.
///
/// Implementations must be deterministic: `batch(start, len)` returns the same rows
/// whatever else was generated before, on whichever thread.
pub trait Dataset: Send + Sync + fmt::Debug {
    /// The dataset's name (`ohlcv`, `contacts`, `wide`).
    fn name(&self) -> &'static str;

    /// Total number of rows.
    fn rows(&self) -> u64;

    /// The schema of the rows `batch` builds (partition columns included).
    fn schema(&self) -> SchemaRef;

    /// Builds rows `start..start + len`. The range never crosses a `segment_end`.
    fn batch(&self, start: u64, len: usize) -> Result<RecordBatch, ArrowError>;

    /// The rows of [`Dataset::batch`], as the writers take them: a column may come with
    /// `Dictionary(UInt16, Utf8)` arrays in place of its `Utf8` leaves, keyed into a
    /// vocabulary (the dictionary's values) that is sorted by bytes, free of nulls and
    /// duplicates, and the same array for every batch. Those leaves are written from
    /// the keys, without interning each string again. The default is `batch` itself.
    fn encoded_batch(&self, start: u64, len: usize) -> Result<RecordBatch, ArrowError> {
        self.batch(start, len)
    }

    /// The first row after `row` that may not share a batch with it (a symbol or
    /// partition boundary), capped at `rows()`.
    fn segment_end(&self, row: u64) -> u64 {
        let _ = row;
        self.rows()
    }

    /// The hive partition directory (`symbol=SPY/date=2024-01-02`) of `row`, if the
    /// dataset is partitioned. Rows of one segment share a partition.
    fn partition_dir(&self, row: u64) -> Option<String> {
        let _ = row;
        None
    }

    /// Columns whose values are encoded in the partition directory and so are left out
    /// of the files.
    fn partition_columns(&self) -> &[&'static str] {
        &[]
    }

    /// Columns that get a bloom filter (keys that queries look up with `=` and `IN`).
    fn bloom_columns(&self) -> &[&'static str];

    /// Integer columns that are sorted and (nearly) unique, such as row ids and times:
    /// written with DELTA_BINARY_PACKED and no dictionary, which is both smaller and
    /// cheaper to write than a dictionary that overflows and falls back.
    fn delta_columns(&self) -> &[&'static str] {
        &[]
    }

    /// Integer columns of many distinct values in no order, each with the row-group size
    /// from which its dictionary pays: in smaller row groups a dictionary page holds most
    /// of the chunk's values once and is a large share of the chunk, and a selective read
    /// pays it whole for every row group it keeps, however few data pages it reads. Below
    /// that size the column is written like [`Dataset::delta_columns`]; from it up, with a
    /// dictionary, which is the smaller file there.
    fn dictionary_min_row_group_rows(&self) -> &[(&'static str, usize)] {
        &[]
    }

    /// The columns (of the written file schema) by which every file is sorted, in order.
    fn sorted_by(&self) -> Vec<&'static str>;
}

/// A dataset behind a shared pointer, as the producer threads use it.
pub type DatasetRef = Arc<dyn Dataset>;
