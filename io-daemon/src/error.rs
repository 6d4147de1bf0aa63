//! The daemon's library error type.

use parquet::errors::ParquetError;

/// What went wrong while pruning a file, and on what (file, row group, column).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PruneError {
    /// The file's Parquet schema could not be mapped to Arrow.
    #[error("{file}: cannot map the Parquet schema to Arrow")]
    Schema {
        /// The file, as the caller named it.
        file: String,
        /// The parquet crate's error.
        #[source]
        source: ParquetError,
    },
    /// A row group index past the end of the file.
    #[error("{file}: row group {row_group} out of range (the file has {num_row_groups})")]
    RowGroupOutOfRange {
        /// The file.
        file: String,
        /// The requested row group.
        row_group: usize,
        /// How many the file has.
        num_row_groups: usize,
    },
    /// A row group's metadata contradicts itself (a negative row count).
    #[error("{file}: row group {row_group}: {reason}")]
    InvalidRowGroup {
        /// The file.
        file: String,
        /// The row group.
        row_group: usize,
        /// What is wrong.
        reason: String,
    },
    /// The page index (offset or column index) contradicts itself or the row group.
    #[error("{file}: row group {row_group}, column {column}: invalid page index: {reason}")]
    InvalidPageIndex {
        /// The file.
        file: String,
        /// The row group.
        row_group: usize,
        /// The column (dotted path).
        column: String,
        /// What is inconsistent.
        reason: String,
    },
    /// A bloom filter could not be read.
    #[error("{file}: row group {row_group}, column {column}: cannot read the bloom filter")]
    BloomFilter {
        /// The file.
        file: String,
        /// The row group.
        row_group: usize,
        /// The column (dotted path).
        column: String,
        /// The parquet crate's error.
        #[source]
        source: ParquetError,
    },
}
