//! What a task reads: the byte ranges of the column chunks it needs (only the
//! surviving pages), fetched ahead of the decoder, with the page headers the decoder
//! will find there vetted.

use std::ops::Range;
use std::sync::Arc;

use parquet::arrow::arrow_reader::RowSelection;

use super::super::page_header::PageHeaders;
use super::super::plan::{FileCtx, RgTask};
use super::super::source::{IoStats, Prefetched};
use super::super::ScanError;

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
/// decoder reaches them.
pub(super) fn fetch(
    ctx: &FileCtx,
    task: &RgTask,
    roots: &[usize],
    selection: Option<&RowSelection>,
    io: &Arc<IoStats>,
) -> Result<Prefetched, ScanError> {
    let reads = ranges(ctx, task, roots, selection)?;
    Prefetched::fetch(Arc::clone(&ctx.source), reads.ranges, Arc::clone(io))
        .map(|p| p.with_page_headers(reads.headers))
        .map_err(|source| match source.kind() {
            std::io::ErrorKind::UnexpectedEof => ScanError::Changed {
                file: ctx.path.clone(),
                reason: source.to_string(),
            },
            _ => ScanError::Io {
                file: ctx.path.clone(),
                source,
            },
        })
}
