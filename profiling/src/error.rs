//! The one error type of this crate.

use std::path::PathBuf;

/// What went wrong while writing or reading run records.
///
/// Counters never produce an error: a counter the machine cannot provide is recorded as
/// unavailable, with the reason, inside the record.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfilingError {
    /// The directory that holds the runs file could not be created.
    #[error("cannot create directory {path}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The runs file could not be opened.
    #[error("cannot open runs file {path}")]
    Open {
        /// The runs file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Appending a record failed.
    #[error("cannot append to runs file {path}")]
    Write {
        /// The runs file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The kernel wrote only part of the line (disk full?): the file now ends in a
    /// fragment, which readers skip as a malformed line.
    #[error("short write to runs file {path}: {written_bytes} of {line_bytes} bytes")]
    ShortWrite {
        /// The runs file.
        path: PathBuf,
        /// Bytes the kernel accepted.
        written_bytes: usize,
        /// Bytes in the line.
        line_bytes: usize,
    },
    /// A record is too large to be one line of the runs file.
    #[error("run record {run_id} is {line_bytes} bytes, over the {limit_bytes}-byte line limit")]
    RecordTooLarge {
        /// The record's run id.
        run_id: String,
        /// Its serialized size.
        line_bytes: usize,
        /// The limit.
        limit_bytes: usize,
    },
    /// A record could not be serialized (a figure that is not valid JSON, e.g. NaN).
    #[error("cannot serialize run record {run_id}")]
    Serialize {
        /// The record's run id.
        run_id: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// Reading the runs file failed.
    #[error("cannot read runs file {path}")]
    Read {
        /// The runs file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl ProfilingError {
    /// True when the runs file (or its directory) does not exist: nothing recorded yet.
    pub fn is_not_found(&self) -> bool {
        match self {
            ProfilingError::Open { source, .. } | ProfilingError::Read { source, .. } => {
                source.kind() == std::io::ErrorKind::NotFound
            }
            _ => false,
        }
    }
}
