//! What can go wrong in a scan, always naming the file.

use std::path::PathBuf;

use arrow_schema::{ArrowError, DataType};
use parquet::errors::ParquetError;
use ringscan_ipc::scan_data::Literal;

use crate::error::PruneError;

/// A failed scan: the file and the cause.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScanError {
    /// The file does not exist.
    #[error("{}: no such file", .file.display())]
    Missing {
        /// The file.
        file: PathBuf,
    },
    /// Opening or reading the file failed.
    #[error("{}: I/O error", .file.display())]
    Io {
        /// The file.
        file: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Not a valid Parquet file (bad magic, truncated, corrupt footer or pages).
    #[error("{}: corrupt or truncated Parquet file", .file.display())]
    Corrupt {
        /// The file.
        file: PathBuf,
        /// The parquet crate's error.
        #[source]
        source: ParquetError,
    },
    /// Decoding pages failed (corrupt data).
    #[error("{}: cannot decode the file's data (corrupt?)", .file.display())]
    Decode {
        /// The file.
        file: PathBuf,
        /// The reader's error.
        #[source]
        source: ArrowError,
    },
    /// The parquet crate panicked on this file (corrupt input it does not check); caught
    /// so that one bad file cannot bring the daemon down.
    #[error("{}: corrupt Parquet file (the decoder panicked: {message})", .file.display())]
    DecoderPanic {
        /// The file.
        file: PathBuf,
        /// The panic message.
        message: String,
    },
    /// A column of the projection or the predicate is neither in the file nor a
    /// partition column.
    #[error("{}: unknown column {column:?}", .file.display())]
    UnknownColumn {
        /// The file.
        file: PathBuf,
        /// The column.
        column: String,
    },
    /// A literal that cannot be compared with the column's type.
    #[error("{}: column {column:?} of type {data_type} cannot be compared with {literal:?}", .file.display())]
    TypeMismatch {
        /// The file.
        file: PathBuf,
        /// The column.
        column: String,
        /// The column's Arrow type.
        data_type: DataType,
        /// The literal.
        literal: Literal,
    },
    /// A predicate shape or column type the filter does not handle.
    #[error("{}: unsupported: {reason}", .file.display())]
    Unsupported {
        /// The file.
        file: PathBuf,
        /// What is not supported.
        reason: String,
    },
    /// An Arrow kernel failed.
    #[error("{}: arrow error", .file.display())]
    Arrow {
        /// The file.
        file: PathBuf,
        /// The kernel's error.
        #[source]
        source: ArrowError,
    },
    /// The file's metadata contradicts itself or the file (a column chunk past the end
    /// of the file, negative offsets, columns of different lengths).
    #[error("{}: invalid Parquet file: {reason}", .file.display())]
    Invalid {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The file was truncated or rewritten while the scan read it.
    #[error("{}: the file changed during the scan: {reason}", .file.display())]
    Changed {
        /// The file.
        file: PathBuf,
        /// What was seen.
        reason: String,
    },
    /// The file shrank while it was mapped and being read ([`IoMode::Mmap`]): some of
    /// the bytes read were zeros, not the file's, so nothing decoded from them is used.
    ///
    /// [`IoMode::Mmap`]: super::IoMode::Mmap
    #[error("file {} was truncated while it was being read", .file.display())]
    Truncated {
        /// The file.
        file: PathBuf,
    },
    /// The caller's cancel flag was raised.
    #[error("scan cancelled")]
    Cancelled,
    /// Pruning failed (the error names the file).
    #[error(transparent)]
    Prune(#[from] PruneError),
    /// The sink refused a batch.
    #[error("the batch sink failed: {0}")]
    Sink(String),
}
