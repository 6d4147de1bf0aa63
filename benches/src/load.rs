//! Loading Parquet tables into memory for the baseline and the suites' thresholds: a
//! leaf under both (it knows files and columns, not scenarios).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Date32Type, Float64Type, Int32Type, Int64Type, UInt64Type};
use arrow_array::RecordBatch;
use arrow_schema::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

use crate::error::BenchError;

/// Rows per batch the baseline's reader produces.
pub const BATCH_ROWS: usize = 64 * 1024;

/// The Parquet files of the table in `dir`, by the daemon's rule
/// ([`table_files`](ringscan_ipc::names::table_files)).
pub fn parquet_files(dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
    let out = ringscan_ipc::names::table_files(dir).map_err(|e| BenchError::io(dir, e))?;
    if out.is_empty() {
        return Err(BenchError::NoFiles(dir.to_path_buf()));
    }
    Ok(out)
}

/// Reads `columns` (all when `None`) of every file under `table_dir` into memory.
pub(crate) fn load(
    table_dir: &Path,
    table: &str,
    columns: Option<&[String]>,
) -> Result<(Vec<RecordBatch>, u64), BenchError> {
    let mut batches = Vec::new();
    let mut bytes_read = 0u64;
    for path in parquet_files(table_dir)? {
        let perr = |source| BenchError::Parquet {
            path: path.clone(),
            source,
        };
        let file = File::open(&path).map_err(|e| BenchError::io(&path, e))?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(perr)?;
        let schema = Arc::clone(builder.schema());
        let roots: Vec<usize> = match columns {
            None => (0..schema.fields().len()).collect(),
            Some(cols) => cols
                .iter()
                .map(|c| {
                    schema.index_of(c).map_err(|_| BenchError::UnknownColumn {
                        table: table.to_owned(),
                        column: c.clone(),
                    })
                })
                .collect::<Result<_, _>>()?,
        };
        let descr = builder.parquet_schema();
        for rg in builder.metadata().row_groups() {
            for (leaf, chunk) in rg.columns().iter().enumerate() {
                if roots.contains(&descr.get_column_root_idx(leaf)) {
                    bytes_read += u64::try_from(chunk.compressed_size()).unwrap_or(0);
                }
            }
        }
        let mask = ProjectionMask::roots(descr, roots.iter().copied());
        let reader = builder
            .with_projection(mask)
            .with_batch_size(BATCH_ROWS)
            .build()
            .map_err(perr)?;
        for batch in reader {
            batches.push(
                batch.map_err(|e| BenchError::arrow(format!("reading {}", path.display()), e))?,
            );
        }
    }
    // A query that needs no column (count(*) without a filter) still needs the row count.
    if batches.is_empty() {
        return Err(BenchError::NoFiles(table_dir.to_path_buf()));
    }
    Ok((batches, bytes_read))
}

/// Every value of a numeric or date column of `table` under `data_dir`, as f64 (for
/// deriving thresholds; NULLs skipped).
pub fn read_column_f64(data_dir: &Path, table: &str, column: &str) -> Result<Vec<f64>, BenchError> {
    let (batches, _) = load(&data_dir.join(table), table, Some(&[column.to_owned()]))?;
    let mut out = Vec::new();
    for batch in &batches {
        let col = batch.column(0);
        macro_rules! push {
            ($t:ty) => {
                out.extend(col.as_primitive::<$t>().iter().flatten().map(|v| v as f64))
            };
        }
        match col.data_type() {
            DataType::Float64 => push!(Float64Type),
            DataType::Int64 => push!(Int64Type),
            DataType::Int32 => push!(Int32Type),
            DataType::UInt64 => push!(UInt64Type),
            DataType::Date32 => push!(Date32Type),
            other => {
                return Err(BenchError::Unsupported(format!(
                    "column {column} of {table} has type {other}, not a number"
                )))
            }
        }
    }
    Ok(out)
}
