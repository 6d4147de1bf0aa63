//! What a task reads: the byte ranges of the column chunks it needs (only the
//! surviving pages), fetched ahead of the decoder, with the page headers the decoder
//! will find there vetted.

use std::ops::Range;
use std::sync::Arc;

use parquet::arrow::arrow_reader::RowSelection;

use super::super::page_header::PageHeaders;
use super::super::plan::{FileCtx, RgTask};
use super::super::source::{coalesce, IoStats, Prefetched, ReadAhead};
use super::super::ScanError;
use super::Exec;

/// What the decoder of a row group reads: byte ranges and where pages start.
struct Reads {
    /// The column chunks of the roots; with a selection and an offset index, only the
    /// dictionary page and the selected pages.
    ranges: Vec<Range<u64>>,
    /// Where the decoder finds page headers, to vet them.
    headers: PageHeaders,
}
/// What the decoder reads of `roots` in the task's row group under `selection`.
fn ranges(
    ctx: &FileCtx,
    task: &RgTask,
    roots: &[usize],
    selection: Option<&RowSelection>,
) -> Result<Reads, ScanError> {
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
    let mut headers = PageHeaders::default();
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
        let locs = page_index.page_locations(c);
        let pages = locs.into_iter().flatten();
        headers.add_chunk(
            rg,
            c,
            start..end,
            pages.filter_map(|l| u64::try_from(l.offset).ok()),
        );
        match (selection, locs) {
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
    Ok(Reads {
        ranges: out,
        headers: headers.finish(),
    })
}

/// Fetches what the decoder of `roots` in the task's row group reads under `selection`
/// (one coalesced read per nearby ranges), ready for it: page headers are vetted as the
/// decoder reaches them. Reads started ahead serve it where they cover those ranges.
/// A wait on a remote file gives up when the scan stops.
pub(super) fn fetch(
    ctx: &FileCtx,
    task: &RgTask,
    roots: &[usize],
    selection: Option<&RowSelection>,
    ex: &Exec<'_>,
    io: &Arc<IoStats>,
) -> Result<Prefetched, ScanError> {
    let reads = ranges(ctx, task, roots, selection)?;
    let stop = || ex.stopped();
    Prefetched::fetch(
        Arc::clone(&ctx.source),
        reads.ranges,
        task.read_ahead.get().map(|a| &**a),
        &stop,
        Arc::clone(io),
    )
    .map(|p| p.with_page_headers(reads.headers))
    .map_err(|source| match source.kind() {
        std::io::ErrorKind::UnexpectedEof => ScanError::Changed {
            file: ctx.path.clone(),
            reason: source.to_string(),
        },
        std::io::ErrorKind::Interrupted => ScanError::Cancelled,
        _ => ScanError::Io {
            file: ctx.path.clone(),
            source,
        },
    })
}

/// The most bytes one read-ahead asks for (several row groups' chunks, the gaps
/// coalescing bridges included): one request's worth.
pub(crate) const READ_AHEAD_BYTES: u64 = crate::storage::object::MAX_REQUEST_BYTES;

/// Starts reading, for the first of `tasks` and as many of the next ones of the same
/// file as fit in [`READ_AHEAD_BYTES`], what their decoders will read, when the file is
/// remote: the requests run while the decoders work on earlier row groups (the scan's
/// read-ahead, which hides the store's latency), and the row groups' chunks that touch
/// go as one request (a full scan of consecutive row groups: one GET per
/// [`READ_AHEAD_BYTES`], not one per chunk).
///
/// What is read: the first phase's columns (the predicate's, or the output's without
/// one) under each task's page selection; with `with_rest`, the other output columns too
/// (the scan's latest tasks read them whole: nearly every row passed); every output
/// column of a row group whose rows all pass (it reads nothing else). A task whose
/// columns the column cache holds, or that already has a read-ahead, ends the group. A
/// read that cannot start (a range outside the file) is left to the tasks, which report
/// it at their turn.
pub(crate) fn read_ahead<'t>(
    tasks: impl IntoIterator<Item = &'t RgTask>,
    ex: &Exec<'_>,
    with_rest: bool,
) {
    let mut group: Vec<&RgTask> = Vec::new();
    let mut wanted: Vec<Range<u64>> = Vec::new();
    let mut span = 0u64;
    for task in tasks {
        let ctx = &*task.file;
        if task.read_ahead.get().is_some()
            || group
                .first()
                .is_some_and(|first| !Arc::ptr_eq(&first.file, &task.file))
        {
            break;
        }
        let mut roots = if ex.predicate.is_none() {
            ctx.rest_roots.clone()
        } else if task.all_pass {
            ctx.out_roots.clone()
        } else {
            ctx.pred_roots.clone()
        };
        if with_rest && ex.predicate.is_some() && !task.all_pass {
            roots.extend(&ctx.rest_roots);
        }
        if roots.is_empty()
            || ex
                .columns
                .holds(&ctx.path, &ctx.footer, task.row_group, &roots)
        {
            break;
        }
        let Ok(reads) = ranges(ctx, task, &roots, task.selection.as_ref()) else {
            break;
        };
        // The group spans as many row groups as fit with every column the task may
        // read, even when it reads the predicate's only: the rest, read later by the
        // tasks, then goes in as few requests as they would have.
        let whole = if !task.all_pass && roots.len() < ctx.pred_roots.len() + ctx.rest_roots.len() {
            let all: Vec<usize> = ctx
                .pred_roots
                .iter()
                .chain(&ctx.rest_roots)
                .copied()
                .collect();
            ranges(ctx, task, &all, task.selection.as_ref())
                .map_or(reads.ranges.clone(), |r| r.ranges)
        } else {
            reads.ranges.clone()
        };
        let bytes: u64 = whole.iter().map(|r| r.end - r.start).sum();
        if !group.is_empty() && span.saturating_add(bytes) > READ_AHEAD_BYTES {
            break;
        }
        span = span.saturating_add(bytes);
        wanted.extend(reads.ranges);
        group.push(task);
    }
    let Some(first) = group.first() else {
        return;
    };
    let source = &first.file.source;
    let merged = coalesce(wanted, source.coalesce_gap());
    if let Some(Ok(pending)) = source.start_reads(merged.clone()) {
        let shared = Arc::new(ReadAhead::new(merged, pending));
        for task in group {
            let _ = task.read_ahead.set(Arc::clone(&shared));
        }
    }
}
