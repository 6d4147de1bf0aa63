//! The one error type of the harness library.

use std::path::PathBuf;

/// What went wrong in the harness, naming the thing and the cause.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A Parquet file could not be read.
    #[error("reading Parquet file {path}: {source}")]
    Parquet {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: parquet::errors::ParquetError,
    },
    /// An arrow kernel failed.
    #[error("{context}: {source}")]
    Arrow {
        /// What was being computed.
        context: String,
        /// The cause.
        source: arrow_schema::ArrowError,
    },
    /// A table directory holds no Parquet file.
    #[error("no Parquet files under {0}")]
    NoFiles(PathBuf),
    /// A scenario names a column its table does not have.
    #[error("table {table} has no column {column:?}")]
    UnknownColumn {
        /// The table.
        table: String,
        /// The column.
        column: String,
    },
    /// A predicate the baseline cannot evaluate (a literal of the wrong type, ...).
    #[error("unsupported predicate: {0}")]
    Unsupported(String),
    /// A suite or scenario name that does not exist.
    #[error("unknown {kind} {name:?}")]
    Unknown {
        /// `suite` or `scenario`.
        kind: &'static str,
        /// The name asked for.
        name: String,
    },
    /// A side process broke the line protocol or reported an error.
    #[error("bench side {side}: {message}")]
    Side {
        /// The side (`baseline`, `ringscan`).
        side: String,
        /// What happened.
        message: String,
    },
    /// An engine cannot run in this build.
    #[error("{0}")]
    NotAvailable(String),
}

impl BenchError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn arrow(context: impl Into<String>, source: arrow_schema::ArrowError) -> Self {
        Self::Arrow {
            context: context.into(),
            source,
        }
    }
}
