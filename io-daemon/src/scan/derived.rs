//! What a scan derives from a parsed footer (the Arrow schema mapping and the pruner's
//! column map), computed once per cached footer instead of on every scan: converting a
//! Parquet schema to Arrow twice per file per query was a visible share of a small
//! query's daemon time.

use std::path::Path;
use std::sync::Arc;

use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::file::metadata::ParquetMetaData;

use super::{guard_panic, ScanError};
use crate::prune::ColumnMap;

/// Derived values of one footer. They are kept in the footer's own cache entry
/// ([`MetadataCache`](super::MetadataCache)) and go with it: `arrow` holds the footer
/// (`Arc<ParquetMetaData>`), so a side table of them kept every footer it ever saw alive
/// whatever the cache's budget said.
#[derive(Debug, Clone)]
pub(crate) struct Derived {
    /// The Arrow view of the file (its schema and field mapping).
    pub(crate) arrow: ArrowReaderMetadata,
    /// Column name -> leaf, for pruning.
    pub(crate) columns: Arc<ColumnMap>,
}

impl Derived {
    /// Derives the values of `meta`, the footer of `path`.
    pub(crate) fn of(meta: &Arc<ParquetMetaData>, path: &Path) -> Result<Self, ScanError> {
        guard_panic(path, || {
            let arrow = ArrowReaderMetadata::try_new(Arc::clone(meta), ArrowReaderOptions::new())
                .map_err(|source| ScanError::Corrupt {
                file: path.to_path_buf(),
                source,
            })?;
            let columns = Arc::new(ColumnMap::try_new(meta, &path.display().to_string())?);
            Ok(Self { arrow, columns })
        })
    }

    /// Estimated memory beyond the footer it refers to: the Arrow schema and the column
    /// map, about a few hundred bytes per leaf column, and the chunk ranges the map
    /// decodes for the columns predicates look at (~160 bytes a row group each, counted
    /// here as if a quarter of the leaves were: the entry's size is fixed when cached).
    pub(crate) fn memory_bytes(&self, meta: &ParquetMetaData) -> usize {
        const PER_LEAF_BYTES: usize = 320;
        const PER_CHUNK_RANGE_BYTES: usize = 40;
        let leaves = meta.file_metadata().schema_descr().num_columns();
        leaves * PER_LEAF_BYTES + leaves * meta.num_row_groups() * PER_CHUNK_RANGE_BYTES
    }
}
