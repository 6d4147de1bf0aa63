//! Planning one file: partition pruning, the footer, column resolution, row-group
//! pruning (statistics, bloom filters) and page pruning, into one task per surviving row
//! group.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use arrow_schema::SchemaRef;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, RowSelection, RowSelector,
};
use parquet::bloom_filter::Sbbf;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataBuilder};
use ringscan_ipc::scan_data::{Predicate, ScanSummary};

use super::file::Lookup;
use super::page_index::{IndexKey, IndexKind, IndexLoad, SparsePageIndex};
use super::source::{ByteRangeSource, IoMode, IoStats, LocalFile, MappedFile, Prefetched};
use super::{guard_panic, micros, MetadataCache, ScanError, ScanSpec};
use crate::hive::PartitionTypes;
use crate::prune::{FilePruner, PartitionValues, Verdict};
use crate::storage::{is_object_url, object_root, ObjectSource, StorageError};

/// What every row-group task of one file shares.
#[derive(Debug)]
pub(crate) struct FileCtx {
    pub(crate) path: PathBuf,
    pub(crate) source: Arc<dyn ByteRangeSource>,
    pub(crate) meta: Arc<ParquetMetaData>,
    /// The footer as the metadata cache holds it (`meta` may be a copy with page
    /// indexes): the file version's identity for the column cache.
    pub(crate) footer: Arc<ParquetMetaData>,
    pub(crate) arrow_meta: ArrowReaderMetadata,
    /// The file's column map for pruning (top-k's dynamic filter re-prunes per task).
    pub(crate) columns: Arc<crate::prune::ColumnMap>,
    pub(crate) partitions: PartitionValues,
    /// Partition columns (not in the file) the predicate references.
    pub(crate) pred_partitions: Vec<String>,
    /// Partition columns (not in the file) the output references.
    pub(crate) out_partitions: Vec<String>,
    /// Output column names, in order.
    pub(crate) output: Vec<String>,
    /// File root columns the predicate reads (sorted).
    pub(crate) pred_roots: Vec<usize>,
    /// Output file root columns the predicate does not read (sorted).
    pub(crate) rest_roots: Vec<usize>,
    /// Every output file root column (sorted): what a row group whose rows all pass
    /// reads ([`RgTask::all_pass`]).
    pub(crate) out_roots: Vec<usize>,
    /// The output schema, from the first batch.
    pub(crate) output_schema: OnceLock<SchemaRef>,
}

/// One surviving row group of one file: the unit of work.
#[derive(Debug)]
pub(crate) struct RgTask {
    pub(crate) file: Arc<FileCtx>,
    pub(crate) row_group: usize,
    /// Rows to read by the page index (covering the whole row group); `None`: all.
    pub(crate) selection: Option<RowSelection>,
    /// Rows selected.
    pub(crate) rows: u64,
    /// Rows the scan still needs (set when scheduled): for an unfiltered scan the rows
    /// to read; for a filtered one the most passing rows it can use (rows it still
    /// skips for the offset included), after which the task materializes no more.
    pub(crate) limit: Option<usize>,
    /// Decoded size estimate, for the prefetch byte budget.
    pub(crate) estimated_bytes: u64,
    /// Statistics prove that every row passes the predicate ([`Verdict::Always`]): the
    /// task reads the output columns whole, as an unfiltered scan does, and evaluates
    /// nothing.
    pub(crate) all_pass: bool,
    /// Reads of a remote file started before the task runs, shared with the next
    /// tasks of the file (see `task::read_ahead`): its fetches are served from them
    /// where they cover what the decoder needs.
    pub(crate) read_ahead: std::sync::OnceLock<Arc<super::source::ReadAhead>>,
}

/// Plan `path`: `None` when partition values prune the whole file.
pub(crate) fn plan_file(
    spec: &ScanSpec<'_>,
    partition_types: &PartitionTypes,
    path: &Path,
    cache: &MetadataCache,
    summary: &mut ScanSummary,
) -> Result<Vec<RgTask>, ScanError> {
    let plan_start = Instant::now();
    let result = plan_inner(spec, partition_types, path, cache, summary);
    summary.timings.plan_us += micros(plan_start);
    result
}

/// The columns of one scan of one file.
struct Columns {
    /// Output column names, in order.
    output: Vec<String>,
    /// File root columns the predicate reads (sorted).
    pred_roots: Vec<usize>,
    /// Output file root columns the predicate does not read (sorted).
    rest_roots: Vec<usize>,
    /// Every output file root column (sorted).
    out_roots: Vec<usize>,
    /// Partition columns (not in the file) the predicate references.
    pred_partitions: Vec<String>,
    /// Partition columns (not in the file) the output references.
    out_partitions: Vec<String>,
}

/// One row group a scan reads, and which of its rows.
struct RowGroupAccess {
    row_group: usize,
    /// Rows the page index leaves (covering the whole row group); `None`: all.
    selection: Option<RowSelection>,
    /// Rows selected.
    rows: u64,
    /// Every row passes the predicate (statistics prove it): no selection.
    all_pass: bool,
}

/// How a scan reads one file: the row groups that survive pruning, in file order, and
/// the page indexes loaded on the way (the reader skips pages by their offset indexes).
#[derive(Default)]
struct AccessPlan {
    row_groups: Vec<RowGroupAccess>,
    page_index: SparsePageIndex,
}

fn plan_inner(
    spec: &ScanSpec<'_>,
    partition_types: &PartitionTypes,
    path: &Path,
    cache: &MetadataCache,
    summary: &mut ScanSummary,
) -> Result<Vec<RgTask>, ScanError> {
    summary.files_considered += 1;
    let partitions = path
        .strip_prefix(spec.table_root)
        .ok()
        .map(|rel| {
            PartitionValues::typed(&rel.to_string_lossy().replace('\\', "/"), partition_types)
        })
        .unwrap_or_default();
    if let Some(pred) = spec.predicate {
        if partitions.evaluate(pred) == Verdict::Never {
            summary.files_pruned += 1;
            summary.files_pruned_by_partition += 1;
            return Ok(Vec::new());
        }
    }

    let (source, footer) = if is_object_url(path) {
        let stop = || spec.cancel.is_some_and(|c| c.cancelled());
        let (object, footer) = open_object(path, cache, &stop)?;
        (object as Arc<dyn ByteRangeSource>, footer)
    } else {
        open_local(path, spec.io, cache, spec.seen.and_then(|s| s.get(path)))?
    };
    let corrupt = |source| ScanError::Corrupt {
        file: path.to_path_buf(),
        source,
    };
    let derived = cache.derived(&footer, path)?;
    let arrow_meta = derived.arrow.clone();
    let columns = resolve_columns(spec, path, arrow_meta.schema(), &partitions)?;
    let access = access_plan(
        spec,
        path,
        cache,
        &footer,
        &source,
        &derived.columns,
        &columns,
        summary,
    )?;
    if access.row_groups.is_empty() {
        summary.files_pruned += 1;
        return Ok(Vec::new());
    }

    // The reader skips pages by the offset indexes in the metadata it is given: the
    // footer with exactly the loaded page indexes (a cheap copy; indexes are shared).
    let cached_footer = Arc::clone(&footer);
    let (meta, arrow_meta) = match access.page_index.offset_keys() {
        None => (footer, arrow_meta),
        Some(keys) => cache.dense_metadata(path, &footer, keys, || {
            let offset_index = access.page_index.dense_offset_index(&footer);
            let meta = Arc::new(
                ParquetMetaDataBuilder::new_from_metadata((*footer).clone())
                    .set_offset_index(offset_index)
                    .build(),
            );
            let arrow_meta = guard_panic(path, || {
                ArrowReaderMetadata::try_new(Arc::clone(&meta), ArrowReaderOptions::new())
                    .map_err(corrupt)
            })?;
            Ok((meta, arrow_meta))
        })?,
    };
    let arrow_meta = if spec.distinct {
        guard_panic(path, || {
            strings_as_dictionaries(&meta, &arrow_meta, &columns.rest_roots).map_err(corrupt)
        })?
    } else {
        arrow_meta
    };
    let ctx = Arc::new(FileCtx {
        path: path.to_path_buf(),
        source,
        meta: Arc::clone(&meta),
        footer: cached_footer,
        arrow_meta,
        columns: Arc::clone(&derived.columns),
        partitions,
        pred_partitions: columns.pred_partitions,
        out_partitions: columns.out_partitions,
        output: columns.output,
        pred_roots: columns.pred_roots,
        rest_roots: columns.rest_roots,
        out_roots: columns.out_roots,
        output_schema: OnceLock::new(),
    });
    Ok(tasks(&ctx, access.row_groups))
}

/// The output columns and the file's root columns to decode; a column that is neither
/// in the file nor a partition column is an error.
fn resolve_columns(
    spec: &ScanSpec<'_>,
    path: &Path,
    file_schema: &SchemaRef,
    partitions: &PartitionValues,
) -> Result<Columns, ScanError> {
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
    let mut pred_roots = Vec::new();
    let mut pred_partitions = Vec::new();
    let mut at = Lookup::default();
    for name in spec.predicate.map(Predicate::columns).unwrap_or_default() {
        if let Some(i) = at.find(file_schema, name) {
            push_unique(&mut pred_roots, i);
        } else if partitions.contains(name) {
            push_unique(&mut pred_partitions, name.to_owned());
        } else {
            return Err(unknown(name));
        }
    }
    let mut rest_roots = Vec::new();
    let mut out_roots = Vec::new();
    let mut out_partitions = Vec::new();
    let mut at = Lookup::default();
    for name in &output {
        if let Some(i) = at.find(file_schema, name) {
            push_unique(&mut out_roots, i);
            if !pred_roots.contains(&i) {
                push_unique(&mut rest_roots, i);
            }
        } else if partitions.contains(name) {
            push_unique(&mut out_partitions, name.clone());
        } else {
            return Err(unknown(name));
        }
    }
    pred_roots.sort_unstable();
    rest_roots.sort_unstable();
    out_roots.sort_unstable();
    Ok(Columns {
        output,
        pred_roots,
        rest_roots,
        out_roots,
        pred_partitions,
        out_partitions,
    })
}

/// Prunes the file's row groups (statistics, bloom filters, then pages by the column
/// indexes) and loads the page indexes that pruning and page-level IO need: the
/// predicate columns' (both kinds) for the row groups statistics and bloom filters
/// keep, then the other read columns' offset indexes for the row groups that survive.
#[allow(clippy::too_many_arguments)]
fn access_plan(
    spec: &ScanSpec<'_>,
    path: &Path,
    cache: &MetadataCache,
    footer: &Arc<ParquetMetaData>,
    source: &Arc<dyn ByteRangeSource>,
    column_map: &Arc<crate::prune::ColumnMap>,
    columns: &Columns,
    summary: &mut ScanSummary,
) -> Result<AccessPlan, ScanError> {
    let meta = &**footer;
    let num_row_groups = meta.num_row_groups();
    summary.row_groups_considered += num_row_groups as u64;
    let stop = || spec.cancel.is_some_and(|c| c.cancelled());
    let mut plan = AccessPlan::default();
    let Some(pred) = spec.predicate else {
        plan.row_groups = (0..num_row_groups)
            .map(|g| RowGroupAccess {
                row_group: g,
                selection: None,
                rows: u64::try_from(meta.row_group(g).num_rows()).unwrap_or(0),
                all_pass: false,
            })
            .collect();
        return Ok(plan);
    };
    let mut index_load = IndexLoad::default();
    let mut pruner =
        FilePruner::with_columns(meta, Arc::clone(column_map), path.display().to_string());
    let by_stats = pruner.row_groups(pred);
    summary.row_groups_pruned_by_stats += (num_row_groups - by_stats.kept.len()) as u64;
    // Row groups whose every row passes need neither bloom filters nor page pruning:
    // they are read whole, unfiltered.
    let (all_pass, by_stats): (Vec<usize>, Vec<usize>) = by_stats.kept.iter().partition(|&&g| {
        pruner
            .row_group(pred, g)
            .is_ok_and(|v| v == Verdict::Always)
    });
    summary.row_groups_all_pass += all_pass.len() as u64;
    let stats = Arc::new(IoStats::default());
    let direct = Prefetched::direct(Arc::clone(source), Arc::clone(&stats));
    let by_bloom = guard_panic(path, || {
        let mut load = |g: usize, leaf: usize| {
            cache.bloom_filter(path, footer, g, leaf, || {
                Sbbf::read_from_column_chunk(meta.row_group(g).column(leaf), &direct)
            })
        };
        Ok(pruner.bloom_filters_with(pred, &by_stats, &mut load)?)
    });
    // Zeros read from a shrunken mapping would make an empty filter, which prunes
    // every row group: check before believing it.
    if source.verify_intact().is_err() {
        return Err(ScanError::Truncated {
            file: path.to_path_buf(),
        });
    }
    let by_bloom = by_bloom?;
    let bloom_bytes = stats.bytes.load(std::sync::atomic::Ordering::Relaxed);
    summary.bytes_read += bloom_bytes;
    summary.bloom_filter_bytes_read += bloom_bytes;
    summary.timings.io_us += stats.micros.load(std::sync::atomic::Ordering::Relaxed);
    summary.row_groups_pruned_by_bloom += (by_stats.len() - by_bloom.kept.len()) as u64;
    let pred_leaves = leaves(meta, &columns.pred_roots);
    let wanted: Vec<IndexKey> = by_bloom
        .kept
        .iter()
        .flat_map(|&g| {
            pred_leaves
                .iter()
                .flat_map(move |&c| [(g, c, IndexKind::Column), (g, c, IndexKind::Offset)])
        })
        .collect();
    cache.page_indexes(
        path,
        &**source,
        footer,
        &wanted,
        &mut plan.page_index,
        &mut index_load,
        &stop,
    )?;
    pruner.set_page_index(Arc::new(plan.page_index.clone()));
    let mut all_pass = all_pass.into_iter().peekable();
    for g in by_bloom.kept {
        while let Some(whole) = all_pass.next_if(|&a| a < g) {
            plan.row_groups.push(RowGroupAccess::whole(meta, whole));
        }
        let pages = pruner.pages(pred, g)?;
        summary.pages_considered += pages.pages_considered as u64;
        summary.pages_skipped += pages.pages_skipped as u64;
        if pages.rows_selected == 0 {
            summary.row_groups_pruned_by_page_index += 1;
            continue;
        }
        let num_rows = usize::try_from(meta.row_group(g).num_rows()).unwrap_or(0);
        let selection = (pages.rows_selected < num_rows as u64).then(|| {
            // A row group's selection must cover the whole group: pad a short one.
            let mut selectors: Vec<RowSelector> = pages.selection.iter().copied().collect();
            let covered: usize = selectors.iter().map(|s| s.row_count).sum();
            if covered < num_rows {
                selectors.push(RowSelector::skip(num_rows - covered));
            }
            RowSelection::from(selectors)
        });
        plan.row_groups.push(RowGroupAccess {
            row_group: g,
            selection,
            rows: pages.rows_selected,
            all_pass: false,
        });
    }
    plan.row_groups
        .extend(all_pass.map(|g| RowGroupAccess::whole(meta, g)));
    // The reader's metadata holds offset indexes for every read chunk or none (an
    // absent one reads as a chunk without pages): a file whose row groups all pass
    // needs none; otherwise those row groups' chunks need theirs too.
    let wanted: Vec<IndexKey> = if plan.row_groups.iter().all(|a| a.all_pass) {
        Vec::new()
    } else {
        let rest_leaves = leaves(meta, &columns.rest_roots);
        let out_leaves = leaves(meta, &columns.out_roots);
        plan.row_groups
            .iter()
            .flat_map(|a| {
                let read = if a.all_pass {
                    &out_leaves
                } else {
                    &rest_leaves
                };
                read.iter()
                    .map(move |&c| (a.row_group, c, IndexKind::Offset))
            })
            .collect()
    };
    cache.page_indexes(
        path,
        &**source,
        footer,
        &wanted,
        &mut plan.page_index,
        &mut index_load,
        &stop,
    )?;
    summary.bytes_read += index_load.bytes_read;
    summary.timings.io_us += index_load.io_us;
    summary.page_index_bytes_read += index_load.bytes_read;
    summary.column_indexes_loaded += index_load.column_indexes_loaded;
    summary.offset_indexes_loaded += index_load.offset_indexes_loaded;
    summary.page_index_cache_hits += index_load.cache_hits;
    summary.row_groups_pruned += (num_row_groups - plan.row_groups.len()) as u64;
    Ok(plan)
}

impl RowGroupAccess {
    /// Row group `g` of `meta`, every row of which passes: read whole.
    fn whole(meta: &ParquetMetaData, g: usize) -> Self {
        Self {
            row_group: g,
            selection: None,
            rows: u64::try_from(meta.row_group(g).num_rows()).unwrap_or(0),
            all_pass: true,
        }
    }
}

/// One task per row group of `access`, with its share of the decoded bytes.
fn tasks(ctx: &Arc<FileCtx>, access: Vec<RowGroupAccess>) -> Vec<RgTask> {
    let schema = ctx.meta.file_metadata().schema_descr();
    access
        .into_iter()
        .map(|a| {
            let rg = ctx.meta.row_group(a.row_group);
            let total = u64::try_from(rg.num_rows()).unwrap_or(0).max(1);
            let bytes: u64 = (0..rg.num_columns())
                .filter(|&c| {
                    let root = schema.get_column_root_idx(c);
                    if a.all_pass {
                        ctx.out_roots.contains(&root)
                    } else {
                        ctx.pred_roots.contains(&root) || ctx.rest_roots.contains(&root)
                    }
                })
                .map(|c| u64::try_from(rg.column(c).uncompressed_size()).unwrap_or(0))
                .fold(0u64, u64::saturating_add);
            RgTask {
                file: Arc::clone(ctx),
                row_group: a.row_group,
                selection: a.selection,
                rows: a.rows,
                limit: None,
                estimated_bytes: bytes.saturating_mul(a.rows) / total,
                all_pass: a.all_pass,
                read_ahead: std::sync::OnceLock::new(),
            }
        })
        .collect()
}

/// `arrow_meta` reading the string and binary columns among `roots` (top-level, not
/// read by the predicate) as dictionaries of 32-bit keys: a distinct scan then drops
/// duplicate rows by their keys. Parquet's dictionary pages become the dictionary with
/// no string built per row.
fn strings_as_dictionaries(
    meta: &Arc<ParquetMetaData>,
    arrow_meta: &ArrowReaderMetadata,
    roots: &[usize],
) -> Result<ArrowReaderMetadata, parquet::errors::ParquetError> {
    use arrow_schema::{DataType, Field, Schema};
    let schema = arrow_meta.schema();
    let mut changed = false;
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| match f.data_type() {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Binary | DataType::LargeBinary
                if roots.contains(&i) =>
            {
                changed = true;
                f.as_ref().clone().with_data_type(DataType::Dictionary(
                    Box::new(DataType::Int32),
                    Box::new(f.data_type().clone()),
                ))
            }
            _ => f.as_ref().clone(),
        })
        .collect();
    if !changed {
        return Ok(arrow_meta.clone());
    }
    let hinted = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
    ArrowReaderMetadata::try_new(
        Arc::clone(meta),
        ArrowReaderOptions::new().with_schema(hinted),
    )
}

/// The leaf columns (as the footer numbers them) under the root columns `roots`.
fn leaves(meta: &ParquetMetaData, roots: &[usize]) -> Vec<usize> {
    let schema = meta.file_metadata().schema_descr();
    (0..schema.num_columns())
        .filter(|&c| roots.contains(&schema.get_column_root_idx(c)))
        .collect()
}

fn push_unique<T: PartialEq>(v: &mut Vec<T>, x: T) {
    if !v.contains(&x) {
        v.push(x);
    }
}

/// The local file at `path`, read as `io` says, and its footer.
fn open_local(
    path: &Path,
    io: IoMode,
    cache: &MetadataCache,
    seen: Option<&ringscan_ipc::msg::FileVersion>,
) -> Result<(Arc<dyn ByteRangeSource>, Arc<ParquetMetaData>), ScanError> {
    let io_error = |source: std::io::Error| match source.kind() {
        ErrorKind::NotFound => ScanError::Missing {
            file: path.to_path_buf(),
        },
        _ => ScanError::Io {
            file: path.to_path_buf(),
            source,
        },
    };
    let (local, version) = cache.open_files().open(path, seen, io_error, |local| {
        check_not_encrypted(path, local)
    })?;
    let footer = cache.get_or_load_version(path, version, local.file())?;
    let source: Arc<dyn ByteRangeSource> = match io {
        IoMode::Pread => local,
        // A file that cannot be mapped (too many mapped at once, say) is read with
        // positional reads: slower perhaps, never wrong.
        IoMode::Mmap => match MappedFile::from_local(path, &local) {
            Ok(mapped) => Arc::new(mapped),
            Err(_) => local,
        },
    };
    Ok((source, footer))
}

/// The object at `path` (an `s3://` URL) at its listed version, and its footer (its
/// fetch given up once `stop` says so: [`ScanError::Cancelled`]).
pub(crate) fn open_object(
    path: &Path,
    cache: &MetadataCache,
    stop: &dyn Fn() -> bool,
) -> Result<(Arc<ObjectSource>, Arc<ParquetMetaData>), ScanError> {
    let io = |e: StorageError| ScanError::Io {
        file: path.to_path_buf(),
        source: e.into_io(),
    };
    let url = path.to_str().unwrap_or_default();
    let object = Arc::new(
        object_root(url)
            .and_then(|root| root.open(url))
            .map_err(io)?,
    );
    let footer = cache.get_or_load_object(path, &object, stop)?;
    Ok((object, footer))
}

/// Encrypted footers end with `PARE`: refuse them by name rather than as "corrupt".
fn check_not_encrypted(path: &Path, file: &LocalFile) -> Result<(), ScanError> {
    let len = file.len();
    if len < 4 {
        return Ok(()); // The footer parser reports the truncation.
    }
    let tail = file
        .read_range(len - 4..len)
        .map_err(|source| ScanError::Io {
            file: path.to_path_buf(),
            source,
        })?;
    if &tail[..] == b"PARE" {
        return Err(ScanError::Unsupported {
            file: path.to_path_buf(),
            reason: "encrypted Parquet is not supported".to_owned(),
        });
    }
    Ok(())
}
