//! Row-group pruning with column-chunk statistics.

use parquet::file::metadata::ParquetMetaData;
use ringscan_ipc::scan_data::{CmpOp, Literal, Predicate};

use super::column::ColumnMap;
use super::eval::{evaluate, Outcomes, Stats};
use super::range::ColumnRange;

/// Which row groups of a file survive, and the counts for the scan summary.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RowGroupPruning {
    /// Surviving row-group indexes, ascending.
    pub kept: Vec<usize>,
    /// Row groups looked at.
    pub considered: usize,
    /// Row groups proven to hold no matching row.
    pub pruned: usize,
}

/// Facts about one row group, from its column-chunk statistics.
#[derive(Debug)]
pub(crate) struct RowGroupStats<'a> {
    pub(crate) columns: &'a ColumnMap,
    pub(crate) meta: &'a ParquetMetaData,
    pub(crate) index: usize,
}

impl RowGroupStats<'_> {
    pub(crate) fn num_rows(&self) -> Option<u64> {
        u64::try_from(self.meta.row_group(self.index).num_rows()).ok()
    }

    /// The range of `column`, `None` when the file has no usable leaf of that name.
    pub(crate) fn range(&self, column: &str) -> Option<&ColumnRange> {
        let leaf = self.columns.get(column)?;
        self.columns.chunk_range(self.meta, leaf, self.index)
    }
}

impl Stats for RowGroupStats<'_> {
    fn compare(&self, column: &str, op: CmpOp, lit: &Literal) -> Outcomes {
        match self.range(column) {
            Some(r) => r.compare(op, lit),
            None if *lit == Literal::Null => Outcomes::NULL,
            None => Outcomes::ALL,
        }
    }

    fn is_null(&self, column: &str) -> Outcomes {
        self.range(column).map_or(Outcomes::BOOL, |r| r.is_null())
    }
}

/// True when row group `index` may hold a row matching `pred`.
pub(crate) fn row_group_may_match(
    meta: &ParquetMetaData,
    columns: &ColumnMap,
    pred: &Predicate,
    index: usize,
) -> bool {
    row_group_outcomes(meta, columns, pred, index).can_be_true()
}

/// The outcomes `pred` may take on the rows of row group `index` (none for a row group
/// without rows). TRUE alone proves every row matches: the evaluator's leaves and
/// operators over-approximate FALSE and NULL as they do TRUE (NOT needs them).
pub(crate) fn row_group_outcomes(
    meta: &ParquetMetaData,
    columns: &ColumnMap,
    pred: &Predicate,
    index: usize,
) -> Outcomes {
    let stats = RowGroupStats {
        columns,
        meta,
        index,
    };
    if stats.num_rows() == Some(0) {
        return Outcomes::NONE;
    }
    evaluate(pred, &stats)
}

pub(crate) fn filter(
    meta: &ParquetMetaData,
    columns: &ColumnMap,
    pred: &Predicate,
) -> RowGroupPruning {
    let considered = meta.num_row_groups();
    let kept: Vec<usize> = (0..considered)
        .filter(|&g| row_group_may_match(meta, columns, pred, g))
        .collect();
    RowGroupPruning {
        pruned: considered - kept.len(),
        considered,
        kept,
    }
}
