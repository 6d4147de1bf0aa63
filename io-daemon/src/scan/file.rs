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
    let mut at = Lookup::default();
    Arc::new(Schema::new(
        output
            .iter()
            .filter_map(|name| at.find(schema, name).map(|i| schema.fields()[i].clone()))
            .collect::<Vec<_>>(),
    ))
}

/// Finds fields by name in a schema for a list of names that mostly follows the
/// schema's order (a projection of a file's columns): each search starts where the
/// last one matched, so a whole projection costs one pass, where `Schema::index_of`
/// per name (a linear search each) was ~8% of the daemon's instructions in a point
/// lookup of 21 columns. Where a schema repeats a name (which no SQL query can name
/// apart: the engine refuses such a table before it asks for a scan) the field found
/// is the next one from the last match, not always the first.
#[derive(Debug, Default)]
pub(crate) struct Lookup {
    next: usize,
}

impl Lookup {
    /// The index of the field `name` in `schema`, if it has one.
    pub(crate) fn find(&mut self, schema: &Schema, name: &str) -> Option<usize> {
        let fields = schema.fields();
        let n = fields.len();
        let found = (0..n)
            .map(|k| (self.next + k) % n)
            .find(|&i| fields[i].name() == name)?;
        self.next = found + 1;
        Some(found)
    }
}

/// The `output` columns of `batch`, in order.
pub(crate) fn project(
    batch: &RecordBatch,
    schema: SchemaRef,
    output: &[String],
    path: &Path,
) -> Result<RecordBatch, ScanError> {
    let mut at = Lookup::default();
    let columns = output
        .iter()
        .map(|name| {
            at.find(batch.schema_ref(), name)
                .map(|i| batch.column(i).clone())
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// `Lookup` finds what `Schema::index_of` finds, for names in any order,
        /// repeated, or missing.
        #[test]
        fn lookup_finds_what_index_of_finds(
            width in 1usize..30,
            names in proptest::collection::vec(0usize..40, 0..60),
        ) {
            let schema = Schema::new(
                (0..width)
                    .map(|i| Field::new(format!("c{i}"), DataType::Int32, true))
                    .collect::<Vec<_>>(),
            );
            let mut at = Lookup::default();
            for n in names {
                let name = format!("c{n}");
                prop_assert_eq!(at.find(&schema, &name), schema.index_of(&name).ok());
            }
        }
    }
}
