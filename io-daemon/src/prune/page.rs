//! Page pruning with the page index (column index + offset index).
//!
//! Pages of different columns start at different rows, so the row group is cut at every
//! page start of every predicate column; inside one such segment each column sits in a
//! single page, whose statistics describe every row of the segment. The whole predicate
//! (AND, OR, NOT alike) is evaluated per segment with those page ranges; a column without
//! a page index falls back to its row-group statistics, which also hold for every row.

use std::fmt::Debug;

use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::page_index::column_index::ColumnIndexMetaData;
use parquet::file::page_index::offset_index::{OffsetIndexMetaData, PageLocation};
use ringscan_ipc::scan_data::{CmpOp, Literal, Predicate};

use super::column::{range_from_column_index, ColumnMap, LeafColumn};
use super::eval::{evaluate, Outcomes, Stats};
use super::range::ColumnRange;
use super::row_group::RowGroupStats;
use crate::error::PruneError;

/// Page indexes by `(row group, leaf column)`, wherever they were loaded from: the
/// metadata's own (read with the footer), or loaded column by column apart from it
/// (`scan::page_index`). `None`: no index for that column chunk.
pub trait PageIndexes: Debug + Send + Sync {
    /// The column index (per-page statistics).
    fn column_index(&self, row_group: usize, column: usize) -> Option<&ColumnIndexMetaData>;
    /// The offset index (page locations and first rows).
    fn offset_index(&self, row_group: usize, column: usize) -> Option<&OffsetIndexMetaData>;
}

impl PageIndexes for ParquetMetaData {
    fn column_index(&self, row_group: usize, column: usize) -> Option<&ColumnIndexMetaData> {
        let ix = ParquetMetaData::column_index(self)?
            .get(row_group)?
            .get(column)?;
        (!matches!(ix, ColumnIndexMetaData::NONE)).then_some(ix)
    }

    fn offset_index(&self, row_group: usize, column: usize) -> Option<&OffsetIndexMetaData> {
        let ix = ParquetMetaData::offset_index(self)?
            .get(row_group)?
            .get(column)?;
        // An empty offset index stands in for one that was not loaded (a dense index
        // needs an entry for every chunk); a real one has a page.
        (!ix.page_locations().is_empty()).then_some(ix)
    }
}

/// The page indexes of one row group.
#[derive(Debug, Clone, Copy)]
pub struct RowGroupPageIndex<'a> {
    indexes: &'a dyn PageIndexes,
    row_group: usize,
}

impl<'a> RowGroupPageIndex<'a> {
    /// Row group `row_group` of `indexes`.
    pub fn new(indexes: &'a dyn PageIndexes, row_group: usize) -> Self {
        Self { indexes, row_group }
    }

    /// The column index of leaf `column`.
    pub fn column_index(&self, column: usize) -> Option<&'a ColumnIndexMetaData> {
        self.indexes.column_index(self.row_group, column)
    }

    /// The offset index of leaf `column`.
    pub fn offset_index(&self, column: usize) -> Option<&'a OffsetIndexMetaData> {
        self.indexes.offset_index(self.row_group, column)
    }

    /// The page locations of leaf `column`.
    pub fn page_locations(&self, column: usize) -> Option<&'a [PageLocation]> {
        self.offset_index(column)
            .map(|ix| ix.page_locations().as_slice())
    }
}

/// The rows of one row group that may match, for `with_row_selection`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PagePruning {
    /// The row group.
    pub row_group: usize,
    /// Rows to read (relative to the row group's first row).
    pub selection: RowSelection,
    /// Rows selected.
    pub rows_selected: u64,
    /// Pages of the predicate's columns that have an offset index.
    pub pages_considered: usize,
    /// Of those, pages none of whose rows is selected.
    pub pages_skipped: usize,
}

/// A predicate column with a usable offset index.
struct PageColumn<'a> {
    name: &'a str,
    leaf: &'a LeafColumn,
    /// First row of each page, strictly increasing from 0.
    starts: Vec<u64>,
    index: Option<&'a ColumnIndexMetaData>,
}

impl PageColumn<'_> {
    fn page_end(&self, page: usize, num_rows: u64) -> u64 {
        self.starts.get(page + 1).copied().unwrap_or(num_rows)
    }
}

struct SegmentStats<'a> {
    row_group: &'a RowGroupStats<'a>,
    pages: Vec<(&'a str, ColumnRange)>,
}

impl Stats for SegmentStats<'_> {
    fn compare(&self, column: &str, op: CmpOp, lit: &Literal) -> Outcomes {
        match self.pages.iter().find(|(name, _)| *name == column) {
            Some((_, r)) => r.compare(op, lit),
            None => self.row_group.compare(column, op, lit),
        }
    }
    fn is_null(&self, column: &str) -> Outcomes {
        match self.pages.iter().find(|(name, _)| *name == column) {
            Some((_, r)) => r.is_null(),
            None => self.row_group.is_null(column),
        }
    }
}

pub(crate) fn filter(
    meta: &ParquetMetaData,
    page_index: &RowGroupPageIndex<'_>,
    columns: &ColumnMap,
    pred: &Predicate,
    row_group: usize,
    file: &str,
) -> Result<PagePruning, PruneError> {
    let rg = meta.row_group(row_group);
    let num_rows = u64::try_from(rg.num_rows()).map_err(|_| PruneError::InvalidRowGroup {
        file: file.to_owned(),
        row_group,
        reason: format!("negative row count {}", rg.num_rows()),
    })?;
    let rg_stats = RowGroupStats {
        columns,
        meta,
        index: row_group,
    };
    let invalid = |column: &str, reason: String| PruneError::InvalidPageIndex {
        file: file.to_owned(),
        row_group,
        column: column.to_owned(),
        reason,
    };

    let mut page_columns = Vec::new();
    for name in pred.columns() {
        let Some(leaf) = columns.get(name) else {
            continue;
        };
        let Some(offsets) = page_index.offset_index(leaf.index) else {
            continue;
        };
        let starts: Vec<u64> = offsets
            .page_locations()
            .iter()
            .map(|p| {
                u64::try_from(p.first_row_index)
                    .map_err(|_| invalid(name, "negative first row".into()))
            })
            .collect::<Result<_, _>>()?;
        if starts.first() != Some(&0) && num_rows > 0 {
            return Err(invalid(name, "first page does not start at row 0".into()));
        }
        if starts.windows(2).any(|w| w[0] >= w[1])
            || starts.last().is_some_and(|&s| s >= num_rows.max(1))
        {
            return Err(invalid(
                name,
                "page first rows not increasing within the row group".into(),
            ));
        }
        let index = page_index.column_index(leaf.index);
        if let Some(ix) = index {
            if ix.num_pages() != starts.len() as u64 {
                return Err(invalid(
                    name,
                    format!(
                        "column index has {} pages, offset index {}",
                        ix.num_pages(),
                        starts.len()
                    ),
                ));
            }
        }
        page_columns.push(PageColumn {
            name,
            leaf,
            starts,
            index,
        });
    }

    // Segment boundaries: every page start of every page column.
    let mut cuts: Vec<u64> = page_columns
        .iter()
        .flat_map(|c| c.starts.iter().copied())
        .collect();
    cuts.push(0);
    cuts.sort_unstable();
    cuts.dedup();
    cuts.retain(|&c| c < num_rows);

    let whole_group_may_match = num_rows > 0;
    let mut selected: Vec<(u64, u64)> = Vec::new();
    let mut cursor = vec![0usize; page_columns.len()];
    for (i, &start) in cuts.iter().enumerate() {
        if !whole_group_may_match {
            break;
        }
        let end = cuts.get(i + 1).copied().unwrap_or(num_rows);
        let mut pages = Vec::new();
        for (c, col) in page_columns.iter().enumerate() {
            while cursor[c] + 1 < col.starts.len() && col.starts[cursor[c] + 1] <= start {
                cursor[c] += 1;
            }
            let p = cursor[c];
            if let Some(ix) = col.index {
                let rows = col.page_end(p, num_rows) - col.starts[p];
                pages.push((col.name, range_from_column_index(col.leaf, ix, p, rows)));
            }
        }
        let stats = SegmentStats {
            row_group: &rg_stats,
            pages,
        };
        if evaluate(pred, &stats).can_be_true() {
            match selected.last_mut() {
                Some(last) if last.1 == start => last.1 = end,
                _ => selected.push((start, end)),
            }
        }
    }

    let mut pages_considered = 0;
    let mut pages_skipped = 0;
    for col in &page_columns {
        for p in 0..col.starts.len() {
            pages_considered += 1;
            let (a, b) = (col.starts[p], col.page_end(p, num_rows));
            let first = selected.partition_point(|&(_, e)| e <= a);
            if selected.get(first).is_none_or(|&(s, _)| s >= b) {
                pages_skipped += 1;
            }
        }
    }

    let mut selectors = Vec::with_capacity(selected.len() * 2 + 1);
    let mut pos = 0u64;
    for &(s, e) in &selected {
        if s > pos {
            selectors.push(RowSelector::skip(to_usize(s - pos)));
        }
        selectors.push(RowSelector::select(to_usize(e - s)));
        pos = e;
    }
    if num_rows > pos {
        selectors.push(RowSelector::skip(to_usize(num_rows - pos)));
    }
    let rows_selected = selected.iter().map(|(s, e)| e - s).sum();
    Ok(PagePruning {
        row_group,
        selection: RowSelection::from(selectors),
        rows_selected,
        pages_considered,
        pages_skipped,
    })
}

fn to_usize(n: u64) -> usize {
    // Row counts come from i64 metadata on a 64-bit host.
    usize::try_from(n).unwrap_or(usize::MAX)
}
