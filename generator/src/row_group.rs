//! A Parquet file written one row group at a time, each leaf by the writer that suits
//! it: parquet's `ArrowColumnWriter` for plain leaves, the generator's own
//! [`DictionaryChunkWriter`] for the leaves a dataset hands over as dictionary keys.
//!
//! A batch's columns carry the file schema's types, except that a top-level column may
//! come with `Dictionary(UInt16, Utf8)` in place of each of its `Utf8` leaves (see
//! [`crate::Dataset::encoded_batch`]); which columns do is fixed by the first batch of
//! each row group.

use std::io::Write;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::arrow_writer::{compute_leaves, ArrowColumnWriter, ArrowRowGroupWriterFactory};
use parquet::arrow::ArrowWriter;
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;

use crate::dictionary::levels::{all_leaves_dictionary, leaf_levels};
use crate::dictionary::DictionaryChunkWriter;

/// The writer of one leaf column chunk.
#[derive(Debug)]
enum LeafWriter {
    Arrow(Box<ArrowColumnWriter>),
    Dictionary(Box<DictionaryChunkWriter>),
}

/// The row group being filled.
#[derive(Debug)]
struct OpenRowGroup {
    /// The batch schema the leaf writers were chosen for.
    batch_schema: SchemaRef,
    leaves: Vec<LeafWriter>,
    rows: usize,
}

/// A Parquet file with the file schema and properties of a run.
pub(crate) struct FileWriter<W: Write + Send> {
    file_schema: SchemaRef,
    props: WriterProperties,
    max_row_group_rows: usize,
    writer: SerializedFileWriter<W>,
    factory: ArrowRowGroupWriterFactory,
    open: Option<OpenRowGroup>,
}

impl<W: Write + Send> std::fmt::Debug for FileWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileWriter")
            .field("row_groups", &self.writer.flushed_row_groups().len())
            .field("open_rows", &self.open.as_ref().map(|g| g.rows))
            .finish_non_exhaustive()
    }
}

impl<W: Write + Send> FileWriter<W> {
    /// Starts a file of `file_schema` in `sink`; the Arrow schema goes into its
    /// metadata as ArrowWriter puts it there.
    pub(crate) fn try_new(
        sink: W,
        file_schema: SchemaRef,
        props: WriterProperties,
    ) -> Result<Self, ParquetError> {
        // The row-group and page limits this writer keeps are the row counts; the
        // others ArrowWriter offers are not implemented here.
        if props.max_row_group_bytes().is_some() || props.content_defined_chunking().is_some() {
            return Err(ParquetError::NYI(
                "row groups cut by bytes or content-defined chunking".into(),
            ));
        }
        let max_row_group_rows = props.max_row_group_row_count().unwrap_or(usize::MAX).max(1);
        let (writer, factory) =
            ArrowWriter::try_new(sink, Arc::clone(&file_schema), Some(props.clone()))?
                .into_serialized_writer()?;
        Ok(Self {
            file_schema,
            props,
            max_row_group_rows,
            writer,
            factory,
            open: None,
        })
    }

    /// Writes `batch`, closing row groups as they reach the row limit.
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<(), ParquetError> {
        let mut offset = 0;
        while offset < batch.num_rows() {
            if self.open.is_none() {
                self.open = Some(self.open_row_group(&batch.schema())?);
            }
            let group = self.open.as_mut().expect("opened above");
            let len = (batch.num_rows() - offset).min(self.max_row_group_rows - group.rows);
            Self::write_to(group, &self.file_schema, &batch.slice(offset, len))?;
            offset += len;
            if group.rows >= self.max_row_group_rows {
                self.flush()?;
            }
        }
        Ok(())
    }

    fn open_row_group(&self, batch_schema: &SchemaRef) -> Result<OpenRowGroup, ParquetError> {
        if batch_schema.fields().len() != self.file_schema.fields().len() {
            return Err(ParquetError::General(format!(
                "a batch of {} columns for a file of {}",
                batch_schema.fields().len(),
                self.file_schema.fields().len()
            )));
        }
        let row_group = self.writer.flushed_row_groups().len();
        let mut arrow_writers = self.factory.create_column_writers(row_group)?.into_iter();
        let schema_descr = self.writer.schema_descr();
        let mut leaves = Vec::with_capacity(schema_descr.num_columns());
        for (file_field, batch_field) in self.file_schema.fields().iter().zip(batch_schema.fields())
        {
            let ours = file_field.data_type() != batch_field.data_type();
            if ours && !all_leaves_dictionary(batch_field.data_type()) {
                return Err(ParquetError::General(format!(
                    "column {} comes as {}, neither the file's type nor dictionary leaves",
                    file_field.name(),
                    batch_field.data_type()
                )));
            }
            for _ in 0..leaf_count(file_field.data_type()) {
                let arrow_writer = arrow_writers.next().ok_or_else(|| {
                    ParquetError::General("fewer leaf writers than leaves".into())
                })?;
                leaves.push(if ours {
                    let descr = schema_descr.column(leaves.len());
                    LeafWriter::Dictionary(Box::new(DictionaryChunkWriter::new(
                        descr,
                        &self.props,
                    )?))
                } else {
                    LeafWriter::Arrow(Box::new(arrow_writer))
                });
            }
        }
        Ok(OpenRowGroup {
            batch_schema: Arc::clone(batch_schema),
            leaves,
            rows: 0,
        })
    }

    fn write_to(
        group: &mut OpenRowGroup,
        file_schema: &SchemaRef,
        batch: &RecordBatch,
    ) -> Result<(), ParquetError> {
        if batch.schema() != group.batch_schema {
            return Err(ParquetError::General(
                "the batch schema changed within a row group".into(),
            ));
        }
        let mut leaf = 0;
        for (field, column) in file_schema.fields().iter().zip(batch.columns()) {
            let count = leaf_count(field.data_type());
            match &mut group.leaves[leaf] {
                LeafWriter::Arrow(_) => {
                    for (i, levels) in compute_leaves(field, column)?.iter().enumerate() {
                        match &mut group.leaves[leaf + i] {
                            LeafWriter::Arrow(w) => w.write(levels)?,
                            LeafWriter::Dictionary(_) => {
                                unreachable!("a column's leaves share a writer kind")
                            }
                        }
                    }
                }
                LeafWriter::Dictionary(_) => {
                    let levels = leaf_levels(field, column);
                    debug_assert_eq!(levels.len(), count);
                    for (i, levels) in levels.into_iter().enumerate() {
                        match &mut group.leaves[leaf + i] {
                            LeafWriter::Dictionary(w) => w.write(levels)?,
                            LeafWriter::Arrow(_) => {
                                unreachable!("a column's leaves share a writer kind")
                            }
                        }
                    }
                }
            }
            leaf += count;
        }
        group.rows += batch.num_rows();
        Ok(())
    }

    /// Writes the open row group out, if there is one.
    pub(crate) fn flush(&mut self) -> Result<(), ParquetError> {
        let Some(group) = self.open.take() else {
            return Ok(());
        };
        let mut row_group = self.writer.next_row_group()?;
        for leaf in group.leaves {
            match leaf {
                LeafWriter::Arrow(w) => w.close()?.append_to_row_group(&mut row_group)?,
                LeafWriter::Dictionary(w) => {
                    debug_assert_eq!(w.rows(), group.rows);
                    let (bytes, close) = w.close()?;
                    row_group.append_column(&bytes, close)?;
                }
            }
        }
        row_group.close()?;
        Ok(())
    }

    /// Writes the last row group and the footer, and returns the sink.
    pub(crate) fn into_inner(mut self) -> Result<W, ParquetError> {
        self.flush()?;
        self.writer.into_inner()
    }
}

/// Number of Parquet leaf columns a field expands to.
pub(crate) fn leaf_count(data_type: &arrow_schema::DataType) -> usize {
    use arrow_schema::DataType;
    match data_type {
        DataType::Struct(fields) => fields.iter().map(|f| leaf_count(f.data_type())).sum(),
        DataType::List(item) | DataType::LargeList(item) | DataType::FixedSizeList(item, _) => {
            leaf_count(item.data_type())
        }
        DataType::Map(entries, _) => leaf_count(entries.data_type()),
        _ => 1,
    }
}
