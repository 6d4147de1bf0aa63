//! Decoding a task's columns: from the column cache when it holds them, else from
//! the fetched byte ranges through the parquet crate's reader, batch by batch.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{BooleanArray, RecordBatch};
use arrow_schema::Schema;
use arrow_select::filter::filter_record_batch;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReaderBuilder, RowSelection};
use parquet::arrow::ProjectionMask;

use super::super::columns::Lookup;
use super::super::plan::{FileCtx, RgTask};
use super::super::source::IoStats;
use super::super::{micros, ScanError};
use super::batches::{arrow_err, concat, mismatch, row_count_batch};
use super::fetch::fetch;
use super::{Exec, TaskOutput};

/// Decodes `roots` of the task's row group (under `selection`, up to `limit` rows) and
/// collects the batches.
#[allow(clippy::too_many_arguments)]
pub(super) fn read(
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
pub(super) fn read_each(
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
    let data = fetch(ctx, task, roots, selection.as_ref(), ex, io)?;
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
