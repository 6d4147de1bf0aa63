//! One statement's rows given a few at a time, of any size: `COPY ... FROM STDIN`,
//! `INSERT ... SELECT` and `CREATE TABLE ... AS SELECT`, `ringscan ingest` of a large
//! file.
//!
//! The rows are held in memory up to [`stage_bytes`]. A statement that stays under it
//! is one insert, through the daemon's write-ahead log, as before. Past it, the rows
//! held are handed to the daemon as a part ([`SqlSession::bulk_stage`]): it checks them
//! and writes them ahead as a Parquet file that no scan sees, and the host lets them
//! go and reads the next part while the daemon writes this one. [`SqlSession::bulk_finish`] commits the statement: every part joins the table
//! at once, or none does. So memory stays bounded by one part on each side, whatever
//! the statement's size, and each row is written once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use arrow_array::RecordBatch;

use super::daemon::Daemon;
use super::{EngineError, SqlSession};

/// Bytes of rows (in Arrow's memory) a [`BulkInsert`] holds before it stages them:
/// `RINGSCAN_STAGE_BYTES`, else 128 MiB; at most 512 MiB (a part travels as one
/// message, which the daemon takes up to 1 GiB).
pub fn stage_bytes() -> usize {
    static BYTES: OnceLock<usize> = OnceLock::new();
    *BYTES.get_or_init(|| {
        std::env::var("RINGSCAN_STAGE_BYTES")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .filter(|&b: &usize| b > 0)
            .unwrap_or(128 << 20)
            .min(512 << 20)
    })
}

/// Statement numbers for the daemon (unique in the process, so in each connection).
static STATEMENTS: AtomicU64 = AtomicU64::new(1);

/// A statement's rows on their way: see the module's doc.
#[derive(Debug)]
pub struct BulkInsert {
    table: String,
    held: Vec<RecordBatch>,
    held_bytes: usize,
    /// The statement's number with the daemon and the parts staged so far (`None`:
    /// none yet).
    staged: Option<(u64, u64)>,
    rows: u64,
}

impl BulkInsert {
    /// A statement into table `table`.
    pub fn new(table: &str) -> Self {
        Self {
            table: table.to_owned(),
            held: Vec::new(),
            held_bytes: 0,
            staged: None,
            rows: 0,
        }
    }

    /// The table written.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Takes `batches`; whether the rows held are due to be staged
    /// ([`SqlSession::bulk_stage`]).
    pub fn push(&mut self, batches: impl IntoIterator<Item = RecordBatch>) -> bool {
        for batch in batches {
            self.held_bytes += batch.get_array_memory_size();
            self.rows += batch.num_rows() as u64;
            self.held.push(batch);
        }
        self.held_bytes >= stage_bytes()
    }

    /// Whether parts of it are with the daemon (then only [`SqlSession::bulk_finish`]
    /// or [`SqlSession::bulk_abandon`] ends it).
    pub fn staged(&self) -> bool {
        self.staged.is_some()
    }

    /// Rows taken so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }
}

impl Daemon {
    /// [`SqlSession::bulk_stage`].
    pub(crate) fn bulk_stage(&self, bulk: &mut BulkInsert) -> datafusion::common::Result<()> {
        if bulk.held.is_empty() {
            return Ok(());
        }
        let (statement, part) = *bulk
            .staged
            .get_or_insert_with(|| (STATEMENTS.fetch_add(1, Ordering::Relaxed), 0));
        let held = std::mem::take(&mut bulk.held);
        bulk.held_bytes = 0;
        self.stage(&bulk.table, (statement, part), &held)?;
        bulk.staged = Some((statement, part + 1));
        Ok(())
    }

    /// [`SqlSession::bulk_finish`].
    pub(crate) fn bulk_finish(&self, mut bulk: BulkInsert) -> datafusion::common::Result<u64> {
        if bulk.staged.is_none() {
            return self.insert(&bulk.table, &bulk.held);
        }
        self.bulk_stage(&mut bulk)?;
        self.adopt(&bulk.table, bulk.staged.unwrap_or_default())
    }

    /// [`SqlSession::bulk_abandon`].
    pub(crate) fn bulk_abandon(&self, bulk: BulkInsert) -> datafusion::common::Result<()> {
        if bulk.staged.is_some() {
            self.discard()?;
        }
        Ok(())
    }
}

impl SqlSession {
    /// Hands the rows `bulk` holds to the daemon as the statement's next part, without
    /// waiting for the daemon to write it (the caller reads the next part meanwhile;
    /// the next call collects its answer). On an error (this part's or the last
    /// one's) the statement has failed: nothing of it will be written.
    pub fn bulk_stage(&mut self, bulk: &mut BulkInsert) -> Result<(), EngineError> {
        Ok(self.daemon.bulk_stage(bulk)?)
    }

    /// Ends the statement: all of its rows written, or none. The rows written.
    pub fn bulk_finish(&mut self, bulk: BulkInsert) -> Result<u64, EngineError> {
        Ok(self.daemon.bulk_finish(bulk)?)
    }

    /// Abandons the statement: nothing of it is written (its staged parts are dropped).
    pub fn bulk_abandon(&mut self, bulk: BulkInsert) -> Result<(), EngineError> {
        Ok(self.daemon.bulk_abandon(bulk)?)
    }
}
