//! Running one row-group task: fetch the byte ranges of the needed column chunks (only
//! the surviving pages), decode, filter, and late materialization.
//!
//! With a predicate, the predicate's columns are fetched and decoded first (restricted
//! by the page index), the predicate evaluated into a mask, and then the other output
//! columns are fetched and decoded either
//! - late: only for the rows that passed (a `RowSelection` refined by the mask, so pages
//!   with no passing row are neither read nor decompressed), or
//! - eagerly: for every page-selected row, then filtered by the mask,
//!
//! chosen per row group from the mask just computed (how many rows passed and in how
//! many runs). Either way no column is decoded twice: the predicate columns that are
//! also output are filtered, not read again. Without a predicate, the output columns are
//! decoded in one pass with no mask work at all.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, RecordBatchOptions};
use arrow_schema::{FieldRef, Schema, SchemaRef};
use arrow_select::concat::concat_batches;
use arrow_select::filter::{filter_record_batch, prep_null_mask_filter};
use parquet::arrow::arrow_reader::{ParquetRecordBatchReaderBuilder, RowSelection};
use parquet::arrow::ProjectionMask;
use ringscan_ipc::msg::Predicate;

use super::columns::{ColumnCache, Lookup};
use super::file::{project, project_schema, with_partitions};
use super::plan::{FileCtx, RgTask};
use super::source::{IoStats, Prefetched};
use super::{filter, micros, LateMaterialization, ScanError};

/// Scan-wide settings a task needs.
#[derive(Debug)]
pub(crate) struct Exec<'a> {
    pub(crate) predicate: Option<&'a Predicate>,
    pub(crate) batch_size: usize,
    pub(crate) late: LateMaterialization,
    /// Send each distinct row of a row group once (see [`Dedupe`]).
    pub(crate) distinct: bool,
    /// Decoded chunks kept between scans.
    pub(crate) columns: &'a ColumnCache,
    /// Set by the coordinator when the scan ends early.
    pub(crate) stop: &'a AtomicBool,
    /// The caller's cancel flag.
    pub(crate) cancel: Option<&'a AtomicBool>,
}

impl Exec<'_> {
    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.cancel.is_some_and(|c| c.load(Ordering::Relaxed))
    }
}

/// A task's counters (its batches went to its [`Emit`] as they were decoded).
#[derive(Debug, Default)]
pub(crate) struct TaskOutput {
    /// Rows decoded (each row once, whichever columns and phases).
    pub(crate) rows_decoded: u64,
    pub(crate) bytes_read: u64,
    pub(crate) io_us: u64,
    pub(crate) decode_us: u64,
    pub(crate) filter_us: u64,
    pub(crate) late: bool,
    /// Reads served by the column cache.
    pub(crate) cached_reads: u64,
}

/// Where a task's output batches go, in row order: `false` when the scan no longer
/// wants them (the task then stops).
pub(crate) type Emit<'e> = dyn FnMut(RecordBatch) -> bool + 'e;

/// A failed task on a file that shrank under its mapping failed because of that (the
/// decoder read zeros): say so rather than "corrupt".
pub(crate) fn prefer_truncation(
    task: &RgTask,
    result: Result<TaskOutput, ScanError>,
) -> Result<TaskOutput, ScanError> {
    match result {
        Err(ScanError::Cancelled) => Err(ScanError::Cancelled),
        Err(_) if task.file.source.verify_intact().is_err() => Err(ScanError::Truncated {
            file: task.file.path.clone(),
        }),
        other => other,
    }
}

/// Runs one row-group task, handing its batches to `emit` as they are ready: an
/// unfiltered task batch by batch as they are decoded (a row group's worth of decoded
/// memory is never live at once), a filtered one once its predicate has been applied.
pub(crate) fn run(
    task: &RgTask,
    ex: &Exec<'_>,
    emit: &mut Emit<'_>,
) -> Result<TaskOutput, ScanError> {
    let io = Arc::new(IoStats::default());
    let mut out = TaskOutput::default();
    let ctx = &*task.file;
    // A batch leaves only if no read of a mapped file has faulted so far (the decoder
    // would have read zeros); the coordinator checks again after its sink has read it.
    let mut dedupe = ex.distinct.then(Dedupe::default);
    let mut emit = |batch: RecordBatch| -> Result<bool, ScanError> {
        if ctx.source.poisoned() {
            return Err(ScanError::Truncated {
                file: ctx.path.clone(),
            });
        }
        let batch = match &mut dedupe {
            Some(d) => {
                let kept = d.keep_new(&batch).map_err(arrow_err(ctx))?;
                if kept.num_rows() == 0 {
                    return Ok(true);
                }
                kept
            }
            None => batch,
        };
        Ok(emit(batch))
    };
    let result = run_inner(task, ex, &io, &mut out, &mut emit);
    out.bytes_read = io.bytes.load(Ordering::Relaxed);
    out.io_us = io.micros.load(Ordering::Relaxed);
    result.map(|()| out)
}

fn run_inner(
    task: &RgTask,
    ex: &Exec<'_>,
    io: &Arc<IoStats>,
    out: &mut TaskOutput,
    emit: &mut dyn FnMut(RecordBatch) -> Result<bool, ScanError>,
) -> Result<(), ScanError> {
    let ctx = &*task.file;
    let Some(pred) = ex.predicate else {
        // No mask work at all: each decoded batch is projected and handed on.
        return read_each(
            ctx,
            task,
            &ctx.rest_roots,
            task.selection.clone(),
            task.limit,
            ex,
            io,
            out,
            &mut |b, out| {
                out.rows_decoded += b.num_rows() as u64;
                let start = Instant::now();
                let b = assemble(ctx, &b)?;
                out.filter_us += micros(start);
                emit(b)
            },
        );
    };

    // Phase 1: the predicate's columns, on the page-selected rows; under a limit, only
    // until as many rows have passed as the scan can use from this task.
    let mut pred_batches = Vec::new();
    let mut masks = Vec::new();
    let mut passed = 0usize;
    read_each(
        ctx,
        task,
        &ctx.pred_roots,
        task.selection.clone(),
        None,
        ex,
        io,
        out,
        &mut |b, out| {
            let start = Instant::now();
            let working = with_partitions(&b, &ctx.partitions, &ctx.pred_partitions, &ctx.path)?;
            let m = filter::evaluate(pred, &working, &ctx.path)?;
            let m = if m.null_count() > 0 {
                prep_null_mask_filter(&m)
            } else {
                m
            };
            passed += m.true_count();
            masks.push(m);
            pred_batches.push(b);
            out.filter_us += micros(start);
            Ok(task.limit.is_none_or(|cap| passed < cap))
        },
    )?;
    let selected = rows(&pred_batches);
    out.rows_decoded += selected;
    let start = Instant::now();
    // Rows not decoded because the limit was reached pass nothing.
    let total = match &task.selection {
        Some(s) => s.row_count(),
        None => usize::try_from(ctx.meta.row_group(task.row_group).num_rows()).unwrap_or(0),
    };
    if let Some(rest) = total.checked_sub(selected as usize).filter(|&n| n > 0) {
        masks.push(BooleanArray::new(
            arrow_buffer::BooleanBuffer::new_unset(rest),
            None,
        ));
    }
    if let Some(cap) = task.limit {
        cap_passing(&mut masks, cap);
    }
    let passed: usize = masks.iter().map(BooleanArray::true_count).sum();
    let pred_kept = pred_batches
        .iter()
        .zip(&masks)
        .map(|(b, m)| filter_batch(b, m, ctx))
        .collect::<Result<Vec<_>, _>>()?;
    out.filter_us += micros(start);
    if passed == 0 || ex.stopped() {
        return Ok(());
    }
    if ctx.rest_roots.is_empty() {
        for b in pred_kept.iter().filter(|b| b.num_rows() > 0) {
            let start = Instant::now();
            let b = assemble(ctx, b)?;
            out.filter_us += micros(start);
            if !emit(b)? {
                break;
            }
        }
        return Ok(());
    }

    // Phase 2: the other output columns.
    let start = Instant::now();
    let mask = concat_masks(&masks, ctx)?;
    let runs = mask.values().set_slices().count();
    let late = match ex.late {
        LateMaterialization::Always => true,
        LateMaterialization::Never => false,
        // Late decoding costs the passing rows plus a skip per run of them; eager
        // decoding costs every selected row (and reads every selected page).
        LateMaterialization::Auto => {
            passed.saturating_add(runs.saturating_mul(RUN_COST)) < (selected as usize / 4) * 3
        }
    };
    let pred_kept = concat(&pred_kept, ctx)?;
    out.filter_us += micros(start);
    out.late = late;
    let rest = if late {
        let by_mask = RowSelection::from_filters(std::slice::from_ref(&mask));
        let selection = match &task.selection {
            Some(pages) => pages.and_then(&by_mask),
            None => by_mask,
        };
        read(
            ctx,
            task,
            &ctx.rest_roots,
            Some(selection),
            None,
            ex,
            io,
            out,
        )?
    } else {
        let batches = read(
            ctx,
            task,
            &ctx.rest_roots,
            task.selection.clone(),
            None,
            ex,
            io,
            out,
        )?;
        let start = Instant::now();
        let mut offset = 0;
        let mut kept = Vec::with_capacity(batches.len());
        for b in batches {
            let n = b.num_rows();
            if offset + n > mask.len() {
                return Err(mismatch(ctx, task));
            }
            kept.push(filter_batch(&b, &mask.slice(offset, n), ctx)?);
            offset += n;
        }
        out.filter_us += micros(start);
        kept
    };

    if rows(&rest) != pred_kept.num_rows() as u64 {
        return Err(mismatch(ctx, task));
    }
    let mut offset = 0;
    for r in rest.into_iter().filter(|b| b.num_rows() > 0) {
        let start = Instant::now();
        let n = r.num_rows();
        let joined = zip(&pred_kept.slice(offset, n), &r, ctx)?;
        offset += n;
        let b = assemble(ctx, &joined)?;
        out.filter_us += micros(start);
        if !emit(b)? {
            break;
        }
    }
    Ok(())
}

/// The rows one task has sent, for a distinct scan: each batch keeps only rows not seen
/// before in this task, in order (first occurrences). A single dictionary column is
/// first reduced by its keys (one pass over integers), so that only a batch's distinct
/// keys are compared as rows; rows are compared bit for bit in Arrow's row format.
#[derive(Default)]
struct Dedupe {
    converter: Option<arrow_row::RowConverter>,
    seen: std::collections::HashSet<Box<[u8]>>,
}

impl Dedupe {
    fn keep_new(&mut self, batch: &RecordBatch) -> Result<RecordBatch, arrow_schema::ArrowError> {
        if batch.num_columns() == 0 {
            // Zero columns: every row is the same empty row.
            let n = usize::from(batch.num_rows() > 0 && self.seen.insert(Box::from([])));
            return RecordBatch::try_new_with_options(
                batch.schema(),
                Vec::new(),
                &RecordBatchOptions::new().with_row_count(Some(n)),
            );
        }
        let candidates = match first_keys(batch)? {
            Some(c) => c,
            None => batch.clone(),
        };
        if self.converter.is_none() {
            let fields = candidates
                .schema_ref()
                .fields()
                .iter()
                .map(|f| arrow_row::SortField::new(f.data_type().clone()))
                .collect();
            self.converter = Some(arrow_row::RowConverter::new(fields)?);
        }
        let Some(converter) = &self.converter else {
            return Ok(candidates);
        };
        let rows = converter.convert_columns(candidates.columns())?;
        let mut keep: Vec<u32> = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let bytes: &[u8] = row.as_ref();
            if !self.seen.contains(bytes) {
                self.seen.insert(Box::from(bytes));
                keep.push(u32::try_from(i).unwrap_or(u32::MAX));
            }
        }
        if keep.len() == candidates.num_rows() {
            return Ok(candidates);
        }
        let indices = arrow_array::UInt32Array::from(keep);
        arrow_select::take::take_record_batch(&candidates, &indices)
    }
}

/// For a batch of one dictionary column: its rows at the first occurrence of each key
/// (a NULL once), in order. `None` for anything else.
fn first_keys(batch: &RecordBatch) -> Result<Option<RecordBatch>, arrow_schema::ArrowError> {
    use arrow_array::cast::AsArray;
    let [column] = batch.columns() else {
        return Ok(None);
    };
    let Some(dict) = column.as_dictionary_opt::<arrow_array::types::Int32Type>() else {
        return Ok(None);
    };
    let mut seen = vec![false; dict.values().len()];
    let mut null_seen = false;
    let mut first: Vec<u32> = Vec::new();
    for (i, key) in dict.keys().iter().enumerate() {
        let new = match key.and_then(|k| usize::try_from(k).ok()) {
            Some(k) if k < seen.len() => !std::mem::replace(&mut seen[k], true),
            // A key past the dictionary: let the row comparison decide (never here
            // for a valid array).
            Some(_) => true,
            None => !std::mem::replace(&mut null_seen, true),
        };
        if new {
            first.push(u32::try_from(i).unwrap_or(u32::MAX));
        }
    }
    let indices = arrow_array::UInt32Array::from(first);
    arrow_select::take::take_record_batch(batch, &indices).map(Some)
}

/// Keeps only the first `cap` passing rows of `masks` (in row order): under a limit the
/// scan cannot use more from one task, so the other columns are not decoded for them.
fn cap_passing(masks: &mut [BooleanArray], cap: usize) {
    let mut left = cap;
    for m in masks.iter_mut() {
        let n = m.true_count();
        if n <= left {
            left -= n;
            continue;
        }
        let mut kept = arrow_buffer::BooleanBufferBuilder::new(m.len());
        for v in m.values().iter() {
            let keep = v && left > 0;
            left -= usize::from(keep);
            kept.append(keep);
        }
        *m = BooleanArray::new(kept.finish(), None);
    }
}

/// Late materialization's cost of one skip, in rows decoded.
const RUN_COST: usize = 8;

fn mismatch(ctx: &FileCtx, task: &RgTask) -> ScanError {
    ScanError::Invalid {
        file: ctx.path.clone(),
        reason: format!(
            "row group {}: columns decoded to different row counts",
            task.row_group
        ),
    }
}

fn rows(batches: &[RecordBatch]) -> u64 {
    batches.iter().map(|b| b.num_rows() as u64).sum()
}

fn arrow_err(ctx: &FileCtx) -> impl Fn(arrow_schema::ArrowError) -> ScanError + '_ {
    |source| ScanError::Arrow {
        file: ctx.path.clone(),
        source,
    }
}

/// `batch` filtered by `mask` (no NULLs), zero-column batches included.
fn filter_batch(
    batch: &RecordBatch,
    mask: &BooleanArray,
    ctx: &FileCtx,
) -> Result<RecordBatch, ScanError> {
    if batch.num_columns() == 0 {
        return row_count_batch(batch.schema(), mask.true_count(), ctx);
    }
    filter_record_batch(batch, mask).map_err(arrow_err(ctx))
}

fn row_count_batch(schema: SchemaRef, n: usize, ctx: &FileCtx) -> Result<RecordBatch, ScanError> {
    RecordBatch::try_new_with_options(
        schema,
        Vec::new(),
        &RecordBatchOptions::new().with_row_count(Some(n)),
    )
    .map_err(arrow_err(ctx))
}

fn concat_masks(masks: &[BooleanArray], ctx: &FileCtx) -> Result<BooleanArray, ScanError> {
    if let [one] = masks {
        return Ok(one.clone());
    }
    let refs: Vec<&dyn Array> = masks.iter().map(|m| m as &dyn Array).collect();
    let joined = arrow_select::concat::concat(&refs).map_err(arrow_err(ctx))?;
    Ok(arrow_array::cast::AsArray::as_boolean(&joined).clone())
}

fn concat(batches: &[RecordBatch], ctx: &FileCtx) -> Result<RecordBatch, ScanError> {
    let schema = batches
        .first()
        .map(RecordBatch::schema)
        .unwrap_or_else(|| Arc::new(Schema::empty()));
    if schema.fields().is_empty() {
        let n = batches.iter().map(RecordBatch::num_rows).sum();
        return row_count_batch(schema, n, ctx);
    }
    concat_batches(&schema, batches).map_err(arrow_err(ctx))
}

/// The columns of `a` then those of `b` (same row count).
fn zip(a: &RecordBatch, b: &RecordBatch, ctx: &FileCtx) -> Result<RecordBatch, ScanError> {
    let fields: Vec<FieldRef> = a
        .schema()
        .fields()
        .iter()
        .chain(b.schema().fields().iter())
        .cloned()
        .collect();
    let columns: Vec<ArrayRef> = a.columns().iter().chain(b.columns()).cloned().collect();
    RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(b.num_rows())),
    )
    .map_err(arrow_err(ctx))
}

/// The output batch: partition columns added, projected in output order.
fn assemble(ctx: &FileCtx, batch: &RecordBatch) -> Result<RecordBatch, ScanError> {
    let working = with_partitions(batch, &ctx.partitions, &ctx.out_partitions, &ctx.path)?;
    let schema = ctx
        .output_schema
        .get_or_init(|| project_schema(working.schema_ref(), &ctx.output))
        .clone();
    project(&working, schema, &ctx.output, &ctx.path)
}

/// Byte ranges of the column chunks of `roots` in the task's row group: with a
/// selection and an offset index, only the dictionary page and the selected pages.
fn ranges(
    ctx: &FileCtx,
    task: &RgTask,
    roots: &[usize],
    selection: Option<&RowSelection>,
) -> Result<Vec<Range<u64>>, ScanError> {
    let invalid = |reason: String| ScanError::Invalid {
        file: ctx.path.clone(),
        reason,
    };
    let g = task.row_group;
    let schema = ctx.meta.file_metadata().schema_descr();
    let rg = ctx.meta.row_group(g);
    let page_index = crate::prune::RowGroupPageIndex::new(&*ctx.meta, g);
    let file_len = ctx.source.len();
    let mut out = Vec::new();
    for c in 0..rg.num_columns() {
        if !roots.contains(&schema.get_column_root_idx(c)) {
            continue;
        }
        let col = rg.column(c);
        let start = col
            .dictionary_page_offset()
            .unwrap_or_else(|| col.data_page_offset());
        let (Ok(start), Ok(len)) = (u64::try_from(start), u64::try_from(col.compressed_size()))
        else {
            return Err(invalid(format!(
                "row group {g} column {c}: negative offset or size"
            )));
        };
        let end = start
            .checked_add(len)
            .filter(|&e| e <= file_len)
            .ok_or_else(|| {
                invalid(format!(
                    "row group {g} column {c}: chunk {start}+{len} ends past the end of the \
                     file ({file_len} bytes)"
                ))
            })?;
        match (selection, page_index.page_locations(c)) {
            (Some(sel), Some(locs)) if !locs.is_empty() => {
                let first = u64::try_from(locs[0].offset).unwrap_or(start);
                if first > start && first <= end {
                    out.push(start..first);
                }
                out.extend(sel.scan_ranges(locs));
            }
            _ => out.push(start..end),
        }
    }
    Ok(out)
}

/// Decodes `roots` of the task's row group (under `selection`, up to `limit` rows) and
/// collects the batches.
#[allow(clippy::too_many_arguments)]
fn read(
    ctx: &FileCtx,
    task: &RgTask,
    roots: &[usize],
    selection: Option<RowSelection>,
    limit: Option<usize>,
    ex: &Exec<'_>,
    io: &Arc<IoStats>,
    out: &mut TaskOutput,
) -> Result<Vec<RecordBatch>, ScanError> {
    let mut batches = Vec::new();
    read_each(
        ctx,
        task,
        roots,
        selection,
        limit,
        ex,
        io,
        out,
        &mut |b, _| {
            batches.push(b);
            Ok(true)
        },
    )?;
    Ok(batches)
}

/// What [`read_each`] hands each decoded batch to: `Ok(false)` stops the read.
type EachBatch<'f> = dyn FnMut(RecordBatch, &mut TaskOutput) -> Result<bool, ScanError> + 'f;

/// Decodes `roots` of the task's row group (under `selection`, up to `limit` rows),
/// handing each batch to `each` as soon as it is decoded: zero-column batches with row
/// counts when `roots` is empty (no IO at all). `decode_us` counts the decoding only,
/// not the time `each` takes.
#[allow(clippy::too_many_arguments)]
fn read_each(
    ctx: &FileCtx,
    task: &RgTask,
    roots: &[usize],
    selection: Option<RowSelection>,
    limit: Option<usize>,
    ex: &Exec<'_>,
    io: &Arc<IoStats>,
    out: &mut TaskOutput,
    each: &mut EachBatch<'_>,
) -> Result<(), ScanError> {
    let batch_size = ex.batch_size.max(1);
    if roots.is_empty() {
        let total = match &selection {
            Some(s) => s.row_count(),
            None => usize::try_from(ctx.meta.row_group(task.row_group).num_rows()).unwrap_or(0),
        };
        let total = limit.map_or(total, |l| total.min(l));
        let schema = Arc::new(Schema::empty());
        let mut done = 0;
        while done < total {
            let n = batch_size.min(total - done);
            if !each(row_count_batch(Arc::clone(&schema), n, ctx)?, out)? {
                break;
            }
            done += n;
        }
        return Ok(());
    }
    let estimate = chunk_bytes(ctx, task.row_group, roots);
    // A distinct scan reads its string columns as dictionaries: not what the cache
    // holds for other scans.
    let lookup = if ex.distinct {
        Lookup::Pass
    } else {
        ex.columns
            .lookup(&ctx.path, &ctx.footer, task.row_group, roots, estimate)
    };
    let full = match lookup {
        Lookup::Pass => {
            return decode_each(
                ctx, task, roots, selection, limit, batch_size, ex, io, out, each,
            )
        }
        Lookup::Hit(full) => {
            out.cached_reads += 1;
            full
        }
        Lookup::Admit => {
            let whole = usize::try_from(ctx.meta.row_group(task.row_group).num_rows()).unwrap_or(0);
            let mut parts = Vec::new();
            decode_each(
                ctx,
                task,
                roots,
                None,
                None,
                whole.max(1),
                ex,
                io,
                out,
                &mut |b, _| {
                    parts.push(b);
                    Ok(true)
                },
            )?;
            if ex.stopped() {
                return Ok(());
            }
            let full = concat(&parts, ctx)?;
            if full.num_rows() != whole {
                return Err(mismatch(ctx, task));
            }
            ex.columns
                .insert(&ctx.path, &ctx.footer, task.row_group, roots, &full);
            full
        }
    };
    serve(
        ctx,
        &full,
        selection.as_ref(),
        limit,
        batch_size,
        ex,
        out,
        each,
    )
}

/// Decoded bytes of the chunks of `roots` in `row_group`, as the footer has them.
fn chunk_bytes(ctx: &FileCtx, row_group: usize, roots: &[usize]) -> u64 {
    let schema = ctx.meta.file_metadata().schema_descr();
    let rg = ctx.meta.row_group(row_group);
    (0..rg.num_columns())
        .filter(|&c| roots.contains(&schema.get_column_root_idx(c)))
        .map(|c| u64::try_from(rg.column(c).uncompressed_size()).unwrap_or(u64::MAX))
        .fold(0u64, u64::saturating_add)
}

/// More selected runs than this are gathered with one filter, not sliced run by run.
const MAX_SLICES: usize = 8;

/// Hands `each` the rows of `full` (a whole row group from the column cache) that
/// `selection` and `limit` pick, in batches of at most `batch_size`: slices of the
/// cached arrays for a few runs, one filtered copy for many.
#[allow(clippy::too_many_arguments)]
fn serve(
    ctx: &FileCtx,
    full: &RecordBatch,
    selection: Option<&RowSelection>,
    limit: Option<usize>,
    batch_size: usize,
    ex: &Exec<'_>,
    out: &mut TaskOutput,
    each: &mut EachBatch<'_>,
) -> Result<(), ScanError> {
    let start = Instant::now();
    let runs = selected_runs(selection, full.num_rows(), limit);
    let pieces = take_runs(full, &runs).map_err(arrow_err(ctx))?;
    out.decode_us += micros(start);
    for piece in pieces {
        let mut offset = 0;
        while offset < piece.num_rows() {
            if ex.stopped() {
                return Ok(());
            }
            let n = batch_size.min(piece.num_rows() - offset);
            if !each(piece.slice(offset, n), out)? {
                return Ok(());
            }
            offset += n;
        }
    }
    Ok(())
}

/// The row ranges of a `total`-row row group that `selection` (all rows when `None`)
/// picks, the first `limit` of them, merged where adjacent.
fn selected_runs(
    selection: Option<&RowSelection>,
    total: usize,
    limit: Option<usize>,
) -> Vec<Range<usize>> {
    let mut runs: Vec<Range<usize>> = match selection {
        None => std::iter::once(0..total).collect(),
        Some(s) => {
            let mut runs: Vec<Range<usize>> = Vec::new();
            let mut at = 0usize;
            for sel in s.iter() {
                let end = at.saturating_add(sel.row_count).min(total);
                if !sel.skip && end > at {
                    match runs.last_mut() {
                        Some(last) if last.end == at => last.end = end,
                        _ => runs.push(at..end),
                    }
                }
                at = end;
            }
            runs
        }
    };
    if let Some(mut left) = limit {
        runs.retain_mut(|r| {
            let n = r.len().min(left);
            r.end = r.start + n;
            left -= n;
            n > 0
        });
    }
    runs
}

/// The rows of `full` in `runs` (sorted, disjoint): zero-copy slices for a few runs,
/// one filtered copy for many.
fn take_runs(
    full: &RecordBatch,
    runs: &[Range<usize>],
) -> Result<Vec<RecordBatch>, arrow_schema::ArrowError> {
    if runs.len() <= MAX_SLICES {
        return Ok(runs.iter().map(|r| full.slice(r.start, r.len())).collect());
    }
    let total = full.num_rows();
    let mut mask = arrow_buffer::BooleanBufferBuilder::new(total);
    let mut at = 0;
    for r in runs {
        mask.append_n(r.start - at, false);
        mask.append_n(r.len(), true);
        at = r.end;
    }
    mask.append_n(total - at, false);
    let mask = BooleanArray::new(mask.finish(), None);
    Ok(vec![filter_record_batch(full, &mask)?])
}

/// [`read_each`] without the column cache: fetches the byte ranges and decodes.
#[allow(clippy::too_many_arguments)]
fn decode_each(
    ctx: &FileCtx,
    task: &RgTask,
    roots: &[usize],
    selection: Option<RowSelection>,
    limit: Option<usize>,
    batch_size: usize,
    ex: &Exec<'_>,
    io: &Arc<IoStats>,
    out: &mut TaskOutput,
    each: &mut EachBatch<'_>,
) -> Result<(), ScanError> {
    let ranges = ranges(ctx, task, roots, selection.as_ref())?;
    let data =
        Prefetched::fetch(Arc::clone(&ctx.source), ranges, Arc::clone(io)).map_err(|source| {
            match source.kind() {
                std::io::ErrorKind::UnexpectedEof => ScanError::Changed {
                    file: ctx.path.clone(),
                    reason: source.to_string(),
                },
                _ => ScanError::Io {
                    file: ctx.path.clone(),
                    source,
                },
            }
        })?;
    let mut start = Instant::now();
    let mask = ProjectionMask::roots(
        ctx.meta.file_metadata().schema_descr(),
        roots.iter().copied(),
    );
    let mut builder =
        ParquetRecordBatchReaderBuilder::new_with_metadata(data, ctx.arrow_meta.clone())
            .with_batch_size(batch_size)
            .with_row_groups(vec![task.row_group])
            .with_projection(mask);
    if let Some(s) = selection {
        builder = builder.with_row_selection(s);
    }
    if let Some(l) = limit {
        builder = builder.with_limit(l);
    }
    let mut reader = builder.build().map_err(|source| ScanError::Corrupt {
        file: ctx.path.clone(),
        source,
    })?;
    while !ex.stopped() {
        let Some(batch) = reader.next() else {
            break;
        };
        let batch = batch.map_err(|source| ScanError::Decode {
            file: ctx.path.clone(),
            source,
        })?;
        out.decode_us += micros(start);
        if !each(batch, out)? {
            break;
        }
        start = Instant::now();
    }
    out.decode_us += micros(start);
    ctx.source
        .verify_intact()
        .map_err(|_| ScanError::Truncated {
            file: ctx.path.clone(),
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use arrow_array::Int64Array;
    use arrow_schema::{DataType, Field};
    use parquet::arrow::arrow_reader::RowSelector;
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// What the column cache serves for a row selection and a limit equals picking
        /// the selected row numbers one by one.
        #[test]
        fn cached_rows_are_the_selected_rows(
            total in 0usize..300,
            selectors in prop::collection::vec((1usize..12, any::<bool>()), 0..60),
            limit in prop::option::of(0usize..300),
            whole in any::<bool>(),
        ) {
            let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
            let values: Int64Array = (0..total as i64).collect();
            let full = RecordBatch::try_new(schema, vec![Arc::new(values)]).unwrap();
            // A selection covers the row group exactly, as the page index's does.
            let mut covered = 0;
            let mut sel = Vec::new();
            for (n, skip) in selectors {
                let n = n.min(total - covered);
                if n == 0 {
                    break;
                }
                sel.push(if skip { RowSelector::skip(n) } else { RowSelector::select(n) });
                covered += n;
            }
            if covered < total {
                sel.push(RowSelector::select(total - covered));
            }
            let mut expected: Vec<i64> = Vec::new();
            let mut at = 0;
            for s in &sel {
                if !s.skip {
                    expected.extend(at as i64..(at + s.row_count) as i64);
                }
                at += s.row_count;
            }
            let selection = RowSelection::from(sel);
            let selection = (!whole).then_some(&selection);
            if selection.is_none() {
                expected = (0..total as i64).collect();
            }
            if let Some(l) = limit {
                expected.truncate(l);
            }
            let runs = selected_runs(selection, total, limit);
            let pieces = take_runs(&full, &runs).unwrap();
            let got: Vec<i64> = pieces
                .iter()
                .flat_map(|b| {
                    b.column(0)
                        .as_any()
                        .downcast_ref::<Int64Array>()
                        .unwrap()
                        .values()
                        .to_vec()
                })
                .collect();
            prop_assert_eq!(got, expected);
        }
    }
}
