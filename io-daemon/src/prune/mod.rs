//! Pruning: proving, from metadata alone, that parts of a scan hold no matching row.
//!
//! Four levels, each never dropping a row the predicate could select:
//! - [`PartitionValues`]: whole files, from hive `key=value` directories;
//! - [`FilePruner::row_groups`]: row groups, from column-chunk statistics (and
//!   [`FilePruner::row_group`], which also says when they prove that *every* row
//!   matches: [`Verdict::Always`], a row group read whole with no filter);
//! - [`FilePruner::bloom_filters`]: row groups, from bloom filters (`=` and `IN`);
//! - [`FilePruner::pages`]: rows within a row group, from the page index, as a
//!   [`RowSelection`](parquet::arrow::arrow_reader::RowSelection).
//!
//! All share one three-valued evaluator (SQL TRUE / FALSE / NULL over sets of rows), so
//! NOT, NULLs and NaNs are handled once. Anything not understood exactly (a literal that
//! does not convert exactly to the column's type, decimals, legacy sort orders, NaN
//! bounds, missing statistics) evaluates to "maybe".

mod bloom;
mod column;
mod eval;
mod page;
mod partition;
mod range;
mod row_group;

use std::sync::Arc;

use parquet::file::metadata::ParquetMetaData;
use parquet::file::reader::ChunkReader;
use ringscan_ipc::scan_data::Predicate;

pub use bloom::{BloomLoad, MAX_BLOOM_FILTER_BYTES};
pub use page::PagePruning;
pub use page::{PageIndexes, RowGroupPageIndex};
pub use partition::{PartitionValues, HIVE_DEFAULT_PARTITION};
pub use row_group::RowGroupPruning;

use crate::error::PruneError;
pub(crate) use column::ColumnMap;

/// The answer for one unit (file, row group): may any row match?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No row can match: skip it.
    Never,
    /// Some row may match: read it.
    Maybe,
    /// Every row matches: the predicate is TRUE for each (none FALSE, none NULL, as
    /// far as the statistics prove): read it whole, without evaluating the predicate.
    Always,
}

impl Verdict {
    fn from_can_be_true(can_be_true: bool) -> Self {
        if can_be_true {
            Self::Maybe
        } else {
            Self::Never
        }
    }

    /// From the outcomes the predicate may take on the unit's rows: TRUE alone is
    /// [`Always`](Self::Always) (a unit with no row at all is `Never`).
    fn from_outcomes(outcomes: eval::Outcomes) -> Self {
        if outcomes == eval::Outcomes::TRUE {
            Self::Always
        } else {
            Self::from_can_be_true(outcomes.can_be_true())
        }
    }
}

/// Pruning for one Parquet file, from its metadata (load it with the page index to get
/// page pruning).
#[derive(Debug)]
pub struct FilePruner<'a> {
    meta: &'a ParquetMetaData,
    columns: Arc<ColumnMap>,
    file: String,
    /// Page indexes loaded apart from the footer; `None`: the footer's own.
    page_index: Option<Arc<dyn PageIndexes>>,
}

impl<'a> FilePruner<'a> {
    /// Map the file's top-level columns; `file` names the file in errors.
    pub fn try_new(meta: &'a ParquetMetaData, file: impl Into<String>) -> Result<Self, PruneError> {
        let file = file.into();
        let columns = Arc::new(ColumnMap::try_new(meta, &file)?);
        Ok(Self::with_columns(meta, columns, file))
    }

    /// A pruner over a column map computed before (see `scan::derived`).
    pub(crate) fn with_columns(
        meta: &'a ParquetMetaData,
        columns: Arc<ColumnMap>,
        file: impl Into<String>,
    ) -> Self {
        Self {
            meta,
            columns,
            file: file.into(),
            page_index: None,
        }
    }

    /// Prune pages with `page_index` (loaded apart from the footer, say only for the
    /// predicate's columns) instead of the metadata's own page index.
    pub fn set_page_index(&mut self, page_index: Arc<dyn PageIndexes>) {
        self.page_index = Some(page_index);
    }

    /// Whether row group `row_group` may hold a matching row, by its column-chunk
    /// statistics, and whether they prove that every row of it matches.
    pub fn row_group(&self, pred: &Predicate, row_group: usize) -> Result<Verdict, PruneError> {
        self.check_row_group(row_group)?;
        Ok(Verdict::from_outcomes(row_group::row_group_outcomes(
            self.meta,
            &self.columns,
            pred,
            row_group,
        )))
    }

    /// The row groups that may hold a matching row, by column-chunk statistics.
    pub fn row_groups(&self, pred: &Predicate) -> RowGroupPruning {
        row_group::filter(self.meta, &self.columns, pred)
    }

    /// Of `row_groups`, those that survive statistics and bloom filters. Reads the bloom
    /// filters of the columns compared with `=` / `IN` from `reader` (the file's bytes).
    pub fn bloom_filters<R: ChunkReader>(
        &self,
        reader: &R,
        pred: &Predicate,
        row_groups: &[usize],
    ) -> Result<RowGroupPruning, PruneError> {
        bloom::filter(
            self.meta,
            &self.columns,
            reader,
            pred,
            row_groups,
            &self.file,
        )
    }

    /// [`Self::bloom_filters`] with each filter from `load` (row group, leaf column):
    /// a cache in front of the file.
    pub fn bloom_filters_with(
        &self,
        pred: &Predicate,
        row_groups: &[usize],
        load: &mut bloom::BloomLoad<'_>,
    ) -> Result<RowGroupPruning, PruneError> {
        bloom::filter_with(self.meta, &self.columns, pred, row_groups, &self.file, load)
    }

    /// The rows of `row_group` that may match, by the page index; everything when the
    /// metadata holds no page index.
    pub fn pages(&self, pred: &Predicate, row_group: usize) -> Result<PagePruning, PruneError> {
        self.check_row_group(row_group)?;
        let page_index = match &self.page_index {
            Some(p) => RowGroupPageIndex::new(&**p, row_group),
            None => RowGroupPageIndex::new(self.meta, row_group),
        };
        page::filter(
            self.meta,
            &page_index,
            &self.columns,
            pred,
            row_group,
            &self.file,
        )
    }

    fn check_row_group(&self, row_group: usize) -> Result<(), PruneError> {
        if row_group < self.meta.num_row_groups() {
            Ok(())
        } else {
            Err(PruneError::RowGroupOutOfRange {
                file: self.file.clone(),
                row_group,
                num_row_groups: self.meta.num_row_groups(),
            })
        }
    }
}

/// Row groups of a file that survive column-chunk statistics.
pub fn row_group_filter(
    meta: &ParquetMetaData,
    pred: &Predicate,
) -> Result<RowGroupPruning, PruneError> {
    Ok(FilePruner::try_new(meta, "<parquet>")?.row_groups(pred))
}

/// Page-index row selections for each of `row_groups`.
pub fn page_filter(
    meta: &ParquetMetaData,
    pred: &Predicate,
    row_groups: &[usize],
) -> Result<Vec<PagePruning>, PruneError> {
    let pruner = FilePruner::try_new(meta, "<parquet>")?;
    row_groups.iter().map(|&g| pruner.pages(pred, g)).collect()
}
