//! One writer thread's output: a sequence of Parquet files (one per partition it
//! touches), each written under a hidden temporary name, synced, then renamed.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{Schema, SchemaRef};
use parquet::basic::Encoding;
use parquet::file::metadata::{KeyValue, SortingColumn};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use crate::datasets::Dataset;
use crate::error::GeneratorError;
use crate::options::GenerateOptions;
use crate::row_group::{leaf_count, FileWriter};

/// The Parquet leaf index of top-level column `name`.
fn leaf_index(schema: &Schema, name: &str) -> Option<usize> {
    let mut leaves = 0;
    for field in schema.fields() {
        if field.name() == name {
            return Some(leaves);
        }
        leaves += leaf_count(field.data_type());
    }
    None
}

/// The file metadata key naming the float columns that hold no NaN (read by the IO
/// daemon's pruning, in files whose `created_by` is ringscan's).
pub(crate) const NAN_FREE_KEY: &str = "ringscan.nan_free";

/// The top-level float columns of `schema`.
fn float_columns(schema: &arrow_schema::Schema) -> Vec<&str> {
    schema
        .fields()
        .iter()
        .filter(|f| {
            matches!(
                f.data_type(),
                arrow_schema::DataType::Float16
                    | arrow_schema::DataType::Float32
                    | arrow_schema::DataType::Float64
            )
        })
        .map(|f| f.name().as_str())
        .collect()
}

/// What every file of a run shares: the file schema (partition columns removed), the
/// projection that produces it, and the writer properties.
#[derive(Debug)]
pub(crate) struct FileLayout {
    pub(crate) file_schema: SchemaRef,
    projection: Option<Vec<usize>>,
    props: WriterProperties,
}

impl FileLayout {
    pub(crate) fn new(dataset: &dyn Dataset, opts: &GenerateOptions) -> Self {
        let schema = dataset.schema();
        let dropped = dataset.partition_columns();
        let keep: Vec<usize> = (0..schema.fields().len())
            .filter(|&i| !dropped.contains(&schema.field(i).name().as_str()))
            .collect();
        let (file_schema, projection) = if keep.len() == schema.fields().len() {
            (schema, None)
        } else {
            let projected = schema
                .project(&keep)
                .expect("projection indices come from the schema itself");
            (Arc::new(projected), Some(keep))
        };

        let sorting: Vec<SortingColumn> = dataset
            .sorted_by()
            .iter()
            .filter_map(|name| leaf_index(&file_schema, name))
            .map(|column_idx| SortingColumn {
                column_idx: column_idx as i32,
                descending: false,
                nulls_first: false,
            })
            .collect();
        let mut builder = WriterProperties::builder()
            .set_created_by(format!(
                "ringscan generate {} (parquet-rs)",
                env!("CARGO_PKG_VERSION")
            ))
            .set_compression(opts.compression.parquet())
            .set_max_row_group_row_count(Some(opts.row_group_rows))
            .set_data_page_row_count_limit(opts.page_rows)
            // The page row limit is checked between write batches, so the batch divides
            // the page: 10,000-row pages are written 5,000 rows at a time. Larger write
            // batches than parquet's default of 1,024 cut per-batch overhead (measured
            // with benches/examples/encode_experiment.rs).
            .set_write_batch_size(opts.page_rows / opts.page_rows.div_ceil(8_192))
            // Page-level statistics give the column index (page index) as well.
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_sorting_columns((!sorting.is_empty()).then_some(sorting))
            .set_key_value_metadata(Some(vec![
                KeyValue::new("ringscan.dataset".into(), dataset.name().to_owned()),
                KeyValue::new("ringscan.seed".into(), opts.seed.to_string()),
                KeyValue::new("ringscan.rows_total".into(), opts.rows.to_string()),
                // No dataset writes a NaN: a reader may then prune these columns' pages
                // by min/max for every comparison (NaN sorts above every number, and a
                // page's statistics leave NaNs out).
                KeyValue::new(NAN_FREE_KEY.into(), float_columns(&file_schema).join(",")),
            ]));
        let small_group_delta = dataset
            .dictionary_min_row_group_rows()
            .iter()
            .filter(|(_, min_rows)| opts.row_group_rows < *min_rows)
            .map(|(column, _)| column);
        for column in dataset.delta_columns().iter().chain(small_group_delta) {
            if leaf_index(&file_schema, column).is_some() {
                let path = ColumnPath::from(*column);
                builder = builder
                    .set_column_dictionary_enabled(path.clone(), false)
                    .set_column_encoding(path, Encoding::DELTA_BINARY_PACKED);
            }
        }
        for column in dataset.bloom_columns() {
            if leaf_index(&file_schema, column).is_some() {
                let path = ColumnPath::from(*column);
                builder = builder
                    .set_column_bloom_filter_enabled(path.clone(), true)
                    .set_column_bloom_filter_fpp(path.clone(), 0.01)
                    .set_column_bloom_filter_max_ndv(path, opts.row_group_rows as u64);
            }
        }
        Self {
            file_schema,
            projection,
            props: builder.build(),
        }
    }

    fn to_file_batch(&self, batch: &RecordBatch) -> Result<RecordBatch, arrow_schema::ArrowError> {
        match &self.projection {
            None => Ok(batch.clone()),
            Some(keep) => batch.project(keep),
        }
    }
}

/// The file a writer is currently filling.
#[derive(Debug)]
struct OpenFile {
    partition: Option<String>,
    tmp_path: PathBuf,
    final_path: PathBuf,
    writer: FileWriter<File>,
}

/// A finished file.
#[derive(Debug, Clone)]
pub struct WrittenFile {
    /// Where it is.
    pub path: PathBuf,
    /// Rows in it.
    pub rows: u64,
    /// Its size in bytes.
    pub bytes: u64,
}

/// A writer thread's sink. On drop without `finish`, the open temporary file is removed.
#[derive(Debug)]
pub(crate) struct Sink<'a> {
    layout: &'a FileLayout,
    out: &'a Path,
    writer_index: usize,
    current: Option<OpenFile>,
    current_rows: u64,
    /// Files completed and renamed, so that a failed run can remove them.
    pub(crate) done: Vec<WrittenFile>,
    /// Directories this sink created, for the same reason.
    pub(crate) created_dirs: Vec<PathBuf>,
}

impl<'a> Sink<'a> {
    pub(crate) fn new(layout: &'a FileLayout, out: &'a Path, writer_index: usize) -> Self {
        Self {
            layout,
            out,
            writer_index,
            current: None,
            current_rows: 0,
            done: Vec::new(),
            created_dirs: Vec::new(),
        }
    }

    /// Writes a batch that belongs to `partition`, rolling to a new file when the
    /// partition changes.
    pub(crate) fn write(
        &mut self,
        partition: Option<String>,
        batch: &RecordBatch,
    ) -> Result<(), GeneratorError> {
        if self
            .current
            .as_ref()
            .is_some_and(|f| f.partition != partition)
        {
            self.close_current()?;
        }
        if self.current.is_none() {
            self.open(partition)?;
        }
        let file = self.current.as_mut().expect("a file was just opened");
        let file_batch = self
            .layout
            .to_file_batch(batch)
            .map_err(|e| GeneratorError::Parquet {
                path: file.tmp_path.clone(),
                source: e.into(),
            })?;
        file.writer
            .write(&file_batch)
            .map_err(|source| GeneratorError::Parquet {
                path: file.tmp_path.clone(),
                source,
            })?;
        self.current_rows += batch.num_rows() as u64;
        Ok(())
    }

    fn open(&mut self, partition: Option<String>) -> Result<(), GeneratorError> {
        let dir = match &partition {
            Some(p) => self.out.join(p),
            None => self.out.to_path_buf(),
        };
        if !dir.exists() {
            // Record each level we create, so that a failed run removes exactly those.
            let mut missing = Vec::new();
            let mut d = dir.as_path();
            while !d.exists() {
                missing.push(d.to_path_buf());
                match d.parent() {
                    Some(parent) => d = parent,
                    None => break,
                }
            }
            fs::create_dir_all(&dir).map_err(|source| GeneratorError::Io {
                action: "create directory",
                path: dir.clone(),
                source,
            })?;
            self.created_dirs.extend(missing);
        }
        let name = format!("part-{:05}.parquet", self.writer_index);
        let final_path = dir.join(&name);
        let tmp_path = dir.join(format!(".{name}.tmp"));
        let file = File::create(&tmp_path).map_err(|source| GeneratorError::Io {
            action: "create",
            path: tmp_path.clone(),
            source,
        })?;
        let writer = FileWriter::try_new(
            file,
            Arc::clone(&self.layout.file_schema),
            self.layout.props.clone(),
        )
        .map_err(|source| GeneratorError::Parquet {
            path: tmp_path.clone(),
            source,
        })?;
        self.current = Some(OpenFile {
            partition,
            tmp_path,
            final_path,
            writer,
        });
        self.current_rows = 0;
        Ok(())
    }

    fn close_current(&mut self) -> Result<(), GeneratorError> {
        let Some(file) = self.current.take() else {
            return Ok(());
        };
        let tmp_path = file.tmp_path.clone();
        let result = (|| {
            let inner = file
                .writer
                .into_inner()
                .map_err(|source| GeneratorError::Parquet {
                    path: tmp_path.clone(),
                    source,
                })?;
            // Durable before it becomes visible: a crash never leaves a renamed but
            // empty file behind.
            inner.sync_all().map_err(|source| GeneratorError::Io {
                action: "sync",
                path: tmp_path.clone(),
                source,
            })?;
            let bytes = inner
                .metadata()
                .map_err(|source| GeneratorError::Io {
                    action: "inspect",
                    path: tmp_path.clone(),
                    source,
                })?
                .len();
            fs::rename(&tmp_path, &file.final_path).map_err(|source| GeneratorError::Io {
                action: "rename",
                path: tmp_path.clone(),
                source,
            })?;
            Ok(bytes)
        })();
        match result {
            Ok(bytes) => {
                self.done.push(WrittenFile {
                    path: file.final_path,
                    rows: self.current_rows,
                    bytes,
                });
                Ok(())
            }
            Err(e) => {
                let _ = fs::remove_file(&tmp_path);
                Err(e)
            }
        }
    }

    /// Closes the open file and returns everything written.
    pub(crate) fn finish(mut self) -> Result<Vec<WrittenFile>, GeneratorError> {
        self.close_current()?;
        Ok(std::mem::take(&mut self.done))
    }
}

impl Drop for Sink<'_> {
    fn drop(&mut self) {
        if let Some(file) = self.current.take() {
            let _ = fs::remove_file(&file.tmp_path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::{DataType, Field};

    #[test]
    fn leaf_indices_skip_nested_leaves() {
        let inner = arrow_schema::Fields::from(vec![
            Field::new("a", DataType::Utf8, true),
            Field::new("b", DataType::Utf8, true),
        ]);
        let schema = Schema::new(vec![
            Field::new("s", DataType::Struct(inner.clone()), true),
            Field::new(
                "l",
                DataType::List(Arc::new(Field::new("item", DataType::Struct(inner), true))),
                true,
            ),
            Field::new("x", DataType::Int64, false),
        ]);
        assert_eq!(leaf_index(&schema, "s"), Some(0));
        assert_eq!(leaf_index(&schema, "l"), Some(2));
        assert_eq!(leaf_index(&schema, "x"), Some(4));
        assert_eq!(leaf_index(&schema, "nope"), None);
    }
}
