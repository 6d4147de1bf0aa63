//! The generator's error type: what failed, and on which path, flag or row range.

use std::io;
use std::path::PathBuf;

/// Everything `generate` can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GeneratorError {
    /// A flag's value is out of its range.
    #[error("invalid --{flag}: {reason}")]
    InvalidOption {
        /// The flag, without dashes.
        flag: &'static str,
        /// Why the value is refused.
        reason: String,
    },
    /// The output directory already holds files and `--overwrite` was not given.
    #[error("output directory {} is not empty (pass --overwrite to replace the Parquet files in it)", path.display())]
    OutputNotEmpty {
        /// The output directory.
        path: PathBuf,
    },
    /// `--overwrite` was given, but the directory holds something ringscan did not write.
    #[error("refusing to overwrite {}: it holds {}, which is not a Parquet file or hive partition written by ringscan", path.display(), entry.display())]
    ForeignContent {
        /// The output directory.
        path: PathBuf,
        /// The entry that is not ours.
        entry: PathBuf,
    },
    /// A filesystem operation on the output failed (create, remove, rename, sync).
    #[error("cannot {action} {}", path.display())]
    Io {
        /// What was being done (`create directory`, `rename`, ...).
        action: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The Parquet writer failed (a full disk surfaces here as an IO cause).
    #[error("cannot write Parquet file {}", path.display())]
    Parquet {
        /// The file being written.
        path: PathBuf,
        /// The writer's error.
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// Building a batch of rows failed (a bug in a dataset: the arrays did not fit).
    #[error("cannot build rows {start}..{end} of dataset {dataset}")]
    Build {
        /// The dataset.
        dataset: &'static str,
        /// First row of the batch.
        start: u64,
        /// One past the last row.
        end: u64,
        /// Arrow's error.
        #[source]
        source: arrow_schema::ArrowError,
    },
    /// A producer or writer thread panicked; the run was abandoned and its files removed.
    #[error("a generator {role} thread panicked: {message}")]
    ThreadPanicked {
        /// `producer` or `writer`.
        role: &'static str,
        /// The panic's message, where it had one.
        message: String,
    },
}
