//! The [`Engine`] trait: what a side of the comparison must do to be timed.
//!
//! The harness owns the clock: it calls [`Engine::run`] between two `Instant::now()`
//! reads, so an engine reports only what it returned, never its own timing. Engines
//! that live in another process (DuckDB, Polars, `ringscan query`) are driven by the
//! Python compare script; engines in this process implement this trait.

use crate::error::BenchError;
use crate::suites::Scenario;

/// What one run of a scenario returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RunOutcome {
    /// Rows in the result (checked equal across engines: a fast wrong answer is no win).
    pub rows: u64,
    /// Bytes of Parquet data the engine read, where it knows.
    pub bytes_read: Option<u64>,
}

/// One side of a benchmark: the in-memory baseline, or ringscan's executor.
pub trait Engine {
    /// A short name for tables (`baseline`, `ringscan`).
    fn name(&self) -> &str;

    /// Called once per scenario before its warm-up: open what must be open, plan what can
    /// be planned. Not timed.
    fn prepare(&mut self, scenario: &Scenario) -> Result<(), BenchError>;

    /// Runs the scenario once and returns its answer's size. Timed.
    fn run(&mut self, scenario: &Scenario) -> Result<RunOutcome, BenchError>;

    /// Drops every warm state (metadata caches, a running daemon) so that the next
    /// [`Engine::run`] is cold. Not timed. Engines that keep nothing do nothing.
    fn make_cold(&mut self) -> Result<(), BenchError> {
        Ok(())
    }
}
