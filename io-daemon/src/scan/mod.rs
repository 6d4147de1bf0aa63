//! The scan path: files in, pruned, decoded, filtered and projected Arrow batches out.
//!
//! For each file, in order: partition pruning from the hive path; the footer from the
//! [`MetadataCache`]; row-group pruning by statistics then bloom filters; page pruning
//! into a `RowSelection`; decoding of the surviving rows of the projected and predicate
//! columns with `ParquetRecordBatchReader` (over a plain `std::fs::File`: the crate
//! forbids `unsafe`, so no memory mapping); the predicate evaluated on each batch with
//! Arrow kernels (SQL three-valued logic: only TRUE rows pass); projection, partition
//! columns added as constant Utf8 columns; `limit` and the sink's cancel honoured.
//!
//! Batches go to a sink callback in file order and row order; the summary reports what
//! was pruned and read.

mod cache;
mod error;
mod file;
mod filter;

use std::path::{Path, PathBuf};
use std::time::Instant;

use arrow_array::RecordBatch;
use ringscan_ipc::msg::{Predicate, ScanSummary};

pub use cache::{CacheStats, MetadataCache};
pub use error::ScanError;

/// What to scan.
#[derive(Debug, Clone, Copy)]
pub struct ScanSpec<'a> {
    /// The table's root directory: partition values come from the path of each file
    /// relative to it (a file outside it has none).
    pub table_root: &'a Path,
    /// The files, in scan order; relative paths are taken relative to `table_root`.
    pub files: &'a [PathBuf],
    /// Columns to return, in order (file or partition columns); `None`: every file
    /// column, then the partition columns.
    pub projection: Option<&'a [String]>,
    /// Rows to return: those for which it is TRUE; `None`: all.
    pub predicate: Option<&'a Predicate>,
    /// Stop after this many rows.
    pub limit: Option<u64>,
    /// Rows per decoded batch (at least 1).
    pub batch_size: usize,
}

/// A batch sink: `Ok(true)` for more, `Ok(false)` to stop the scan (not an error).
pub type Sink<'s> = dyn FnMut(RecordBatch) -> Result<bool, ScanError> + 's;

/// Run a scan, handing batches to `sink`. Files are scanned one after another; an error
/// stops the scan (batches already handed over stay handed over).
pub fn scan_files(
    spec: &ScanSpec<'_>,
    cache: &MetadataCache,
    sink: &mut Sink<'_>,
) -> Result<ScanSummary, ScanError> {
    let start = Instant::now();
    let mut summary = ScanSummary::default();
    let mut state = file::State {
        remaining: spec.limit,
        stopped: false,
    };
    for path in spec.files {
        if state.stopped || state.remaining == Some(0) {
            break;
        }
        let path = spec.table_root.join(path);
        file::scan_file(spec, &path, cache, sink, &mut summary, &mut state)?;
    }
    summary.timings.total_us = micros(start);
    Ok(summary)
}

fn micros(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// Run `f`, turning a panic inside it (the parquet crate on some corrupt inputs) into
/// [`ScanError::DecoderPanic`].
pub(crate) fn guard_panic<T>(
    file: &Path,
    f: impl FnOnce() -> Result<T, ScanError>,
) -> Result<T, ScanError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_owned());
        Err(ScanError::DecoderPanic {
            file: file.to_path_buf(),
            message,
        })
    })
}
