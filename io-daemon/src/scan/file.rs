//! Batch shaping shared by the scan tasks: partition columns and projection.

use std::path::Path;
use std::sync::Arc;

use arrow_array::{new_null_array, ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use super::ScanError;
use crate::prune::PartitionValues;

/// `batch` with the partition columns `names` appended as constant columns of their
/// types (NULL where the value is NULL or unknown).
pub(crate) fn with_partitions(
    batch: &RecordBatch,
    partitions: &PartitionValues,
    names: &[String],
    path: &Path,
) -> Result<RecordBatch, ScanError> {
    if names.is_empty() {
        return Ok(batch.clone());
    }
    let n = batch.num_rows();
    let mut fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    for name in names {
        let column = partitions
            .column(name, n)
            .unwrap_or_else(|| new_null_array(&DataType::Utf8, n));
        fields.push(Field::new(name.as_str(), column.data_type().clone(), true));
        columns.push(column);
    }
    RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(n)),
    )
    .map_err(|source| ScanError::Arrow {
        file: path.to_path_buf(),
        source,
    })
}

pub(crate) fn project_schema(schema: &SchemaRef, output: &[String]) -> SchemaRef {
    Arc::new(Schema::new(
        output
            .iter()
            .filter_map(|name| schema.field_with_name(name).ok().cloned())
            .collect::<Vec<_>>(),
    ))
}

/// The `output` columns of `batch`, in order.
pub(crate) fn project(
    batch: &RecordBatch,
    schema: SchemaRef,
    output: &[String],
    path: &Path,
) -> Result<RecordBatch, ScanError> {
    let columns = output
        .iter()
        .map(|name| {
            batch
                .column_by_name(name)
                .cloned()
                .ok_or_else(|| ScanError::UnknownColumn {
                    file: path.to_path_buf(),
                    column: name.clone(),
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new_with_options(
        schema,
        columns,
        &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )
    .map_err(|source| ScanError::Arrow {
        file: path.to_path_buf(),
        source,
    })
}
