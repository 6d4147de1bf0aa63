//! Scanning one file: prune, decode, filter, project.

use std::fs::File;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{new_null_array, ArrayRef, RecordBatch, RecordBatchOptions, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use arrow_select::filter::filter_record_batch;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelector,
};
use parquet::arrow::ProjectionMask;
use parquet::file::metadata::ParquetMetaData;
use ringscan_ipc::msg::{Predicate, ScanSummary};

use super::{filter, guard_panic, micros, MetadataCache, ScanError, ScanSpec, Sink};
use crate::prune::{FilePruner, PartitionValues, Verdict};

/// Scan-wide progress shared across files.
#[derive(Debug)]
pub(crate) struct State {
    /// Rows still to emit under the limit.
    pub(crate) remaining: Option<u64>,
    /// The sink asked to stop.
    pub(crate) stopped: bool,
}

/// Which rows of a file to decode.
struct Plan {
    row_groups: Vec<usize>,
    selection: Option<RowSelection>,
}

pub(crate) fn scan_file(
    spec: &ScanSpec<'_>,
    path: &Path,
    cache: &MetadataCache,
    sink: &mut Sink<'_>,
    summary: &mut ScanSummary,
    state: &mut State,
) -> Result<(), ScanError> {
    let plan_start = Instant::now();
    summary.files_considered += 1;
    let partitions = path
        .strip_prefix(spec.table_root)
        .ok()
        .map(|rel| PartitionValues::from_relative_path(&rel.to_string_lossy().replace('\\', "/")))
        .unwrap_or_default();
    if let Some(pred) = spec.predicate {
        if partitions.evaluate(pred) == Verdict::Never {
            summary.files_pruned += 1;
            return Ok(());
        }
    }

    let file = File::open(path).map_err(|source| match source.kind() {
        ErrorKind::NotFound => ScanError::Missing {
            file: path.to_path_buf(),
        },
        _ => ScanError::Io {
            file: path.to_path_buf(),
            source,
        },
    })?;
    let meta = cache.get_or_load(path, &file, spec.predicate.is_some())?;
    let corrupt = |source| ScanError::Corrupt {
        file: path.to_path_buf(),
        source,
    };
    let arrow_meta = guard_panic(path, || {
        ArrowReaderMetadata::try_new(Arc::clone(&meta), ArrowReaderOptions::new()).map_err(corrupt)
    })?;
    let file_schema = Arc::clone(arrow_meta.schema());

    // Columns: the output ones, and the file roots to decode.
    let unknown = |column: &str| ScanError::UnknownColumn {
        file: path.to_path_buf(),
        column: column.to_owned(),
    };
    let output: Vec<String> = match spec.projection {
        Some(names) => names.to_vec(),
        None => file_schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .chain(
                partitions
                    .iter()
                    .filter(|(k, _)| file_schema.index_of(k).is_err())
                    .map(|(k, _)| k.to_owned()),
            )
            .collect(),
    };
    let predicate_columns = spec.predicate.map(Predicate::columns).unwrap_or_default();
    let mut roots = Vec::new();
    let mut partition_columns = Vec::new();
    for name in output.iter().map(String::as_str).chain(predicate_columns) {
        if let Ok(i) = file_schema.index_of(name) {
            if !roots.contains(&i) {
                roots.push(i);
            }
        } else if partitions.contains(name) {
            if !partition_columns.contains(&name) {
                partition_columns.push(name);
            }
        } else {
            return Err(unknown(name));
        }
    }
    if roots.is_empty() && !file_schema.fields().is_empty() {
        // Decode one column anyway, for the row count.
        roots.push(0);
    }
    roots.sort_unstable();
    let mask = ProjectionMask::roots(meta.file_metadata().schema_descr(), roots);

    // Pruning.
    summary.row_groups_considered += meta.num_row_groups() as u64;
    let plan = plan(spec.predicate, path, &meta, &file, summary)?;
    if plan.row_groups.is_empty() {
        summary.files_pruned += 1;
        summary.timings.plan_us += micros(plan_start);
        return Ok(());
    }
    for &g in &plan.row_groups {
        let row_group = meta.row_group(g);
        summary.bytes_read += (0..row_group.num_columns())
            .filter(|&c| mask.leaf_included(c))
            .map(|c| u64::try_from(row_group.column(c).compressed_size()).unwrap_or(0))
            .sum::<u64>();
    }

    let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(file, arrow_meta)
        .with_batch_size(spec.batch_size.max(1))
        .with_row_groups(plan.row_groups)
        .with_projection(mask);
    if let Some(selection) = plan.selection {
        builder = builder.with_row_selection(selection);
    }
    if let (None, Some(remaining)) = (spec.predicate, state.remaining) {
        builder = builder.with_limit(usize::try_from(remaining).unwrap_or(usize::MAX));
    }
    let mut reader = guard_panic(path, || builder.build().map_err(corrupt))?;
    summary.timings.plan_us += micros(plan_start);

    let mut output_schema: Option<SchemaRef> = None;
    loop {
        let decode_start = Instant::now();
        let next = guard_panic(path, || {
            reader
                .next()
                .transpose()
                .map_err(|source| ScanError::Decode {
                    file: path.to_path_buf(),
                    source,
                })
        })?;
        summary.timings.decode_us += micros(decode_start);
        let Some(batch) = next else { break };
        summary.rows_decoded += batch.num_rows() as u64;

        let filter_start = Instant::now();
        let working = with_partitions(&batch, &partitions, &partition_columns, path)?;
        let kept = match spec.predicate {
            Some(pred) => {
                let keep = filter::evaluate(pred, &working, path)?;
                filter_record_batch(&working, &keep).map_err(|source| ScanError::Arrow {
                    file: path.to_path_buf(),
                    source,
                })?
            }
            None => working,
        };
        let schema = output_schema
            .get_or_insert_with(|| project_schema(kept.schema_ref(), &output))
            .clone();
        let mut out = project(&kept, schema, &output, path)?;
        summary.timings.filter_us += micros(filter_start);

        if let Some(remaining) = state.remaining.as_mut() {
            let n = usize::try_from(*remaining).unwrap_or(usize::MAX);
            if out.num_rows() > n {
                out = out.slice(0, n);
            }
            *remaining -= out.num_rows() as u64;
        }
        if out.num_rows() > 0 {
            summary.rows_emitted += out.num_rows() as u64;
            if !sink(out)? {
                state.stopped = true;
                return Ok(());
            }
        }
        if state.remaining == Some(0) {
            return Ok(());
        }
    }
    Ok(())
}

/// Row groups (statistics, then bloom filters) and page selection for `pred`.
fn plan(
    pred: Option<&Predicate>,
    path: &Path,
    meta: &ParquetMetaData,
    file: &File,
    summary: &mut ScanSummary,
) -> Result<Plan, ScanError> {
    let Some(pred) = pred else {
        return Ok(Plan {
            row_groups: (0..meta.num_row_groups()).collect(),
            selection: None,
        });
    };
    let pruner = FilePruner::try_new(meta, path.display().to_string())?;
    let by_stats = pruner.row_groups(pred);
    let by_bloom = guard_panic(path, || {
        Ok(pruner.bloom_filters(file, pred, &by_stats.kept)?)
    })?;
    summary.row_groups_pruned += (meta.num_row_groups() - by_bloom.kept.len()) as u64;
    let mut row_groups = Vec::new();
    let mut selectors = Vec::new();
    for g in by_bloom.kept {
        let pages = pruner.pages(pred, g)?;
        summary.pages_skipped += pages.pages_skipped as u64;
        if pages.rows_selected == 0 {
            continue;
        }
        // Each group's selection must cover the whole group for the concatenation to
        // line up; pad a short one with skipped rows.
        let num_rows = usize::try_from(meta.row_group(g).num_rows()).unwrap_or(0);
        let mut covered = 0;
        for s in pages.selection.iter() {
            covered += s.row_count;
            selectors.push(*s);
        }
        if covered < num_rows {
            selectors.push(RowSelector::skip(num_rows - covered));
        }
        row_groups.push(g);
    }
    Ok(Plan {
        row_groups,
        selection: Some(RowSelection::from(selectors)),
    })
}

/// `batch` with the partition columns `names` appended as constant Utf8 columns.
fn with_partitions(
    batch: &RecordBatch,
    partitions: &PartitionValues,
    names: &[&str],
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
    for &name in names {
        fields.push(Field::new(name, DataType::Utf8, true));
        columns.push(match partitions.get(name) {
            Some(v) => Arc::new(StringArray::from_iter_values(std::iter::repeat_n(v, n))),
            None => new_null_array(&DataType::Utf8, n),
        });
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

fn project_schema(schema: &SchemaRef, output: &[String]) -> SchemaRef {
    Arc::new(Schema::new(
        output
            .iter()
            .filter_map(|name| schema.field_with_name(name).ok().cloned())
            .collect::<Vec<_>>(),
    ))
}

/// The `output` columns of `batch`, in order.
fn project(
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
