//! A predicate that tightens while a scan runs (top-K thresholds, join filters from
//! another stage), used for pruning only.

use std::sync::{Arc, RwLock};

use ringscan_ipc::scan_data::Predicate;

/// A filter shared (`Arc`) between a scan and whoever learns, while it runs, that fewer
/// rows can matter. The scan consults [`current`](Self::current) before scheduling each
/// row group and skips those whose statistics prove that no row satisfies it. It is
/// pruning only: rows of the row groups that are read are not filtered by it, so the
/// caller must still apply it (or accept the extra rows).
#[derive(Debug, Default)]
pub struct DynamicFilter {
    current: RwLock<Option<Arc<Predicate>>>,
}

impl DynamicFilter {
    /// No filter yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replace the filter by `pred`, which must be at least as tight as the one it
    /// replaces (it must imply it): row groups already skipped stay skipped.
    pub fn set(&self, pred: Predicate) {
        let mut guard = self.current.write().unwrap_or_else(|e| e.into_inner());
        *guard = Some(Arc::new(pred));
    }

    /// The filter now, if any.
    pub fn current(&self) -> Option<Arc<Predicate>> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
