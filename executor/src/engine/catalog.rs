//! [`DataDirSchema`]: the tables of the data directory as DataFusion's default schema.
//!
//! A name resolves to a table (a directory of the data directory) or, when it looks like
//! a path or glob (`'ohlcv/*.parquet'`, `'wide/part-0.parquet'`), to those files; either
//! way the daemon describes it and [`DaemonTable`] scans it. A name the daemon does not
//! know is an error in the daemon's words ("no table ohlvc; did you mean ohlcv?"), not a
//! bare "not found". Views created with `CREATE VIEW` live in this schema beside the
//! tables, for the session.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use datafusion::catalog::SchemaProvider;
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::TableProvider;
use ringscan_ipc::client::ClientError;
use ringscan_ipc::msg::ScanSource;

use super::daemon::Daemon;
use super::table::DaemonTable;
use super::ScanSettings;

/// The data directory's tables, and the session's views.
#[derive(Debug)]
pub(crate) struct DataDirSchema {
    daemon: Arc<Daemon>,
    settings: Arc<ScanSettings>,
    views: Mutex<HashMap<String, Arc<dyn TableProvider>>>,
}

impl DataDirSchema {
    pub(crate) fn new(daemon: Arc<Daemon>, settings: Arc<ScanSettings>) -> Self {
        Self {
            daemon,
            settings,
            views: Mutex::new(HashMap::new()),
        }
    }

    fn views(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<dyn TableProvider>>> {
        self.views.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What a name in FROM means: files when it looks like a path or glob, else a table.
pub(crate) fn source_of(name: &str) -> ScanSource {
    if name.contains(['/', '*', '?']) || name.ends_with(".parquet") {
        ScanSource::Files {
            paths: vec![PathBuf::from(name)],
        }
    } else {
        ScanSource::Table {
            name: name.to_owned(),
        }
    }
}

#[async_trait]
impl SchemaProvider for DataDirSchema {
    fn table_names(&self) -> Vec<String> {
        // The daemon's listing (an object-storage root's tables are not in the local
        // directory); a daemon that cannot list leaves the views only.
        let mut names = self.daemon.table_names().unwrap_or_default();
        names.extend(self.views().keys().cloned());
        names.sort();
        names.dedup();
        names
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        if let Some(view) = self.views().get(name) {
            return Ok(Some(Arc::clone(view)));
        }
        let source = source_of(name);
        match self.daemon.table(&source) {
            Ok(entry) => Ok(Some(Arc::new(DaemonTable::new(
                Arc::clone(&self.daemon),
                entry,
                Arc::clone(&self.settings),
            )))),
            Err(ClientError::Daemon { message }) => Err(DataFusionError::Plan(message)),
            Err(e) => Err(DataFusionError::External(Box::new(e))),
        }
    }

    fn register_table(
        &self,
        name: String,
        table: Arc<dyn TableProvider>,
    ) -> Result<Option<Arc<dyn TableProvider>>> {
        Ok(self.views().insert(name, table))
    }

    fn deregister_table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        Ok(self.views().remove(name))
    }

    fn table_exist(&self, name: &str) -> bool {
        if self.views().contains_key(name) || name.starts_with('.') || name.contains(['/', '\\']) {
            return self.views().contains_key(name);
        }
        self.daemon.data_dir().join(name).is_dir()
            || self
                .daemon
                .table_names()
                .is_ok_and(|names| names.iter().any(|n| n == name))
    }
}
