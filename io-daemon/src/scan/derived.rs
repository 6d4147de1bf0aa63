//! What a scan derives from a parsed footer (the Arrow schema mapping and the pruner's
//! column map), computed once per cached footer instead of on every scan: converting a
//! Parquet schema to Arrow twice per file per query was a visible share of a small
//! query's daemon time.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};

use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::file::metadata::ParquetMetaData;

use super::{guard_panic, ScanError};
use crate::prune::ColumnMap;

/// Entries kept before dead ones (footers evicted from the metadata cache) are dropped.
const PRUNE_AT: usize = 1024;

/// Derived values of one footer.
#[derive(Debug, Clone)]
pub(crate) struct Derived {
    /// The Arrow view of the file (its schema and field mapping).
    pub(crate) arrow: ArrowReaderMetadata,
    /// Column name -> leaf, for pruning.
    pub(crate) columns: Arc<ColumnMap>,
}

/// [`Derived`] values keyed by the identity of the `Arc<ParquetMetaData>` they come from
/// (a re-parsed footer is a new `Arc`, so a rewritten file never sees stale values).
#[derive(Debug, Default)]
pub(crate) struct DerivedCache {
    entries: Mutex<HashMap<usize, (Weak<ParquetMetaData>, Derived)>>,
}

impl DerivedCache {
    /// The derived values of `meta` (the footer of `path`).
    pub(crate) fn get(
        &self,
        meta: &Arc<ParquetMetaData>,
        path: &Path,
    ) -> Result<Derived, ScanError> {
        let key = Arc::as_ptr(meta) as usize;
        if let Some((weak, derived)) = self.lock().get(&key) {
            if weak.upgrade().is_some_and(|m| Arc::ptr_eq(&m, meta)) {
                return Ok(derived.clone());
            }
        }
        let derived = guard_panic(path, || {
            let arrow = ArrowReaderMetadata::try_new(Arc::clone(meta), ArrowReaderOptions::new())
                .map_err(|source| ScanError::Corrupt {
                file: path.to_path_buf(),
                source,
            })?;
            let columns = Arc::new(ColumnMap::try_new(meta, &path.display().to_string())?);
            Ok(Derived { arrow, columns })
        })?;
        let mut entries = self.lock();
        if entries.len() >= PRUNE_AT {
            entries.retain(|_, (weak, _)| weak.strong_count() > 0);
            if entries.len() >= PRUNE_AT {
                entries.clear();
            }
        }
        entries.insert(key, (Arc::downgrade(meta), derived.clone()));
        Ok(derived)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<usize, (Weak<ParquetMetaData>, Derived)>> {
        // Inserts and lookups cannot unwind half-way: the map is consistent after a panic.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn footer(values: &[i64]) -> Arc<ParquetMetaData> {
        use arrow_array::{Int64Array, RecordBatch};
        use parquet::arrow::ArrowWriter;
        let batch =
            RecordBatch::try_from_iter([("x", Arc::new(Int64Array::from(values.to_vec())) as _)])
                .unwrap();
        let mut buf = Vec::new();
        let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let bytes = bytes::Bytes::from(buf);
        Arc::new(
            parquet::file::metadata::ParquetMetaDataReader::new()
                .parse_and_finish(&bytes)
                .unwrap(),
        )
    }

    #[test]
    fn same_footer_is_derived_once_and_a_new_footer_again() {
        let cache = DerivedCache::default();
        let a = footer(&[1, 2, 3]);
        let first = cache.get(&a, Path::new("a")).unwrap();
        let again = cache.get(&a, Path::new("a")).unwrap();
        assert!(
            Arc::ptr_eq(&first.columns, &again.columns),
            "second lookup recomputed"
        );
        assert_eq!(first.arrow.schema().field(0).name(), "x");
        let b = footer(&[4]);
        let other = cache.get(&b, Path::new("b")).unwrap();
        assert!(!Arc::ptr_eq(&first.columns, &other.columns));
        drop(a);
        // `a`'s entry is dead; a new footer that lands at the same address must not get it.
        let c = footer(&[5, 6]);
        let fresh = cache.get(&c, Path::new("c")).unwrap();
        assert!(!Arc::ptr_eq(&first.columns, &fresh.columns));
    }
}
