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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{Array, BooleanArray, RecordBatch};
use arrow_select::filter::prep_null_mask_filter;
use parquet::arrow::arrow_reader::RowSelection;
use ringscan_ipc::scan_data::Predicate;

use super::columns::ColumnCache;
use super::file::with_partitions;
use super::plan::RgTask;
use super::source::IoStats;
use super::{filter, micros, LateMaterialization, ScanError};
use batches::{arrow_err, assemble, concat, concat_masks, filter_batch, mismatch, rows, zip};
use decode::{read, read_each};
use dedupe::Dedupe;
pub(crate) use fetch::read_ahead;

mod batches;
mod decode;
mod dedupe;
mod fetch;

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
    pub(crate) cancel: Option<&'a dyn super::Cancel>,
}
impl Exec<'_> {
    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.cancel.is_some_and(|c| c.cancelled())
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
    /// The other output columns were read whole under the page selection (eager, after
    /// the predicate passed rows): what a read-ahead of them would have fetched.
    pub(crate) rest_whole: bool,
    /// Reads served by the column cache.
    pub(crate) cached_reads: u64,
    /// The task's rows all passed by statistics: it read them unfiltered.
    pub(crate) all_pass: bool,
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
    let mut out = TaskOutput {
        all_pass: task.all_pass,
        ..TaskOutput::default()
    };
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
    let pred = ex.predicate.filter(|_| !task.all_pass);
    let Some(pred) = pred else {
        // No mask work at all: each decoded batch is projected and handed on. Without
        // a predicate the output columns are the rest; where every row passes it,
        // statistics say so, and its columns are read only if they are output.
        let roots = if ex.predicate.is_some() {
            &ctx.out_roots
        } else {
            &ctx.rest_roots
        };
        return read_each(
            ctx,
            task,
            roots,
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
        out.rest_whole = true;
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
