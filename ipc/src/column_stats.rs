//! What [`ClientMessage::Statistics`](crate::msg::ClientMessage::Statistics) answers:
//! per column, the minimum, maximum and null count over every file and row group of a
//! source, taken from the Parquet footers, with flags saying whether each is exact.
//!
//! Re-exported from [`msg`](crate::msg), where the messages that carry it live.
//!
//! The daemon reports facts about the statistics; the executor decides which SQL
//! aggregate they answer. Minimum and maximum values travel as a two-row Arrow IPC batch
//! (row 0 the minimums, row 1 the maximums, one column per requested column in the
//! table's type) so that every type survives exactly.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{ArrowError, Field, Schema};
use serde::{Deserialize, Serialize};

use crate::info::{read_ipc_stream, FileVersion};

/// Most columns one statistics request may name.
pub const MAX_STATISTICS_COLUMNS: usize = 4096;

/// One column's statistics over a whole source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnStatistics {
    /// The column, as named in the request.
    pub name: String,
    /// NULLs in the column over every row group; `None` when a row group lacks a null
    /// count (then `count(column)` cannot come from statistics).
    #[serde(default)]
    pub null_count: Option<u64>,
    /// The minimum in the values batch is the exact minimum of the non-NULL values (a
    /// NULL there with this set: every value is NULL).
    #[serde(default)]
    pub min_exact: bool,
    /// As `min_exact`, for the maximum.
    #[serde(default)]
    pub max_exact: bool,
    /// Why the minimum is not exact, when it is not.
    #[serde(default)]
    pub min_inexact_reason: Option<String>,
    /// Why the maximum is not exact, when it is not.
    #[serde(default)]
    pub max_inexact_reason: Option<String>,
}

/// The statistics of a source (a table or file set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableStatistics {
    /// Rows over every file.
    pub row_count: u64,
    /// Files of the source.
    pub file_count: u64,
    /// Row groups over every file.
    pub row_group_count: u64,
    /// One entry per requested column, in request order.
    pub columns: Vec<ColumnStatistics>,
    /// Minimums and maximums: see [`encode_min_max`] / [`decode_min_max`].
    pub values_ipc: Vec<u8>,
    /// The files the answer is for (the data version, as in
    /// [`TableInfo`](crate::msg::TableInfo)).
    pub files: Vec<FileVersion>,
    /// Every directory of the source, as in [`TableInfo`](crate::msg::TableInfo).
    pub dirs: Vec<FileVersion>,
}

impl TableStatistics {
    /// The decoded minimums and maximums: one two-row array per column.
    pub fn min_max(&self) -> Result<Vec<ArrayRef>, ArrowError> {
        let arrays = decode_min_max(&self.values_ipc)?;
        if arrays.len() != self.columns.len() {
            return Err(ArrowError::InvalidArgumentError(format!(
                "{} value columns for {} statistics columns",
                arrays.len(),
                self.columns.len()
            )));
        }
        Ok(arrays)
    }
}

/// Encodes per-column `[min, max]` arrays (each of length 2) as one Arrow IPC stream.
pub fn encode_min_max(names: &[String], arrays: &[ArrayRef]) -> Result<Vec<u8>, ArrowError> {
    if names.len() != arrays.len() {
        return Err(ArrowError::InvalidArgumentError(format!(
            "{} names for {} arrays",
            names.len(),
            arrays.len()
        )));
    }
    let fields: Vec<Field> = names
        .iter()
        .zip(arrays)
        .map(|(n, a)| Field::new(n, a.data_type().clone(), true))
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(2));
    let batch = RecordBatch::try_new_with_options(Arc::clone(&schema), arrays.to_vec(), &options)?;
    let mut writer = StreamWriter::try_new(Vec::new(), &schema)?;
    writer.write(&batch)?;
    writer.finish()?;
    writer.into_inner()
}

/// Decodes what [`encode_min_max`] wrote (any bytes: a bad input is an error).
pub fn decode_min_max(bytes: &[u8]) -> Result<Vec<ArrayRef>, ArrowError> {
    let (_, batches) = read_ipc_stream(bytes)?;
    let Some(batch) = batches.into_iter().next() else {
        return Err(ArrowError::IpcError(
            "statistics values: no batch in the stream".into(),
        ));
    };
    if batch.num_rows() != 2 {
        return Err(ArrowError::IpcError(format!(
            "statistics values: {} rows, expected 2 (min, max)",
            batch.num_rows()
        )));
    }
    Ok(batch.columns().to_vec())
}

#[cfg(test)]
mod tests {
    use arrow_array::{
        Array, Decimal128Array, Float64Array, Int32Array, StringArray, TimestampMicrosecondArray,
    };

    use super::*;

    #[test]
    fn min_max_round_trip_exactly() {
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(vec![Some(-3), None])),
            Arc::new(Float64Array::from(vec![-0.0, f64::INFINITY])),
            Arc::new(StringArray::from(vec!["a", "zz"])),
            Arc::new(TimestampMicrosecondArray::from(vec![1, 2]).with_timezone("UTC")),
            Arc::new(
                Decimal128Array::from(vec![12345, -1])
                    .with_precision_and_scale(18, 3)
                    .unwrap(),
            ),
        ];
        let names: Vec<String> = ["i", "f", "s", "ts", "d"].map(String::from).to_vec();
        let bytes = encode_min_max(&names, &arrays).unwrap();
        let got = decode_min_max(&bytes).unwrap();
        assert_eq!(got.len(), arrays.len());
        for (g, a) in got.iter().zip(&arrays) {
            assert_eq!(g.data_type(), a.data_type());
            assert_eq!(g.to_data(), a.to_data());
        }
        let empty = encode_min_max(&[], &[]).unwrap();
        assert!(decode_min_max(&empty).unwrap().is_empty());
    }

    #[test]
    fn bad_min_max_bytes_are_errors() {
        assert!(decode_min_max(b"").is_err());
        assert!(decode_min_max(b"garbage").is_err());
        let schema_only = crate::info::encode_schema(&Schema::empty()).unwrap();
        assert!(decode_min_max(&schema_only).is_err());
        let one: Vec<ArrayRef> = vec![Arc::new(Int32Array::from(vec![1]))];
        assert!(encode_min_max(&["x".into()], &one).is_err());
        assert!(encode_min_max(&[], &one).is_err());
    }
}
