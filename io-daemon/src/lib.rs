//! `ringscan-io-daemon`: the IO daemon that turns a scan request into pruned, decoded,
//! filtered Arrow batches in a shared-memory ring.
//!
//! Built so far: [`prune`], which proves from metadata that files, row groups and pages
//! hold no row matching a scan's [`Predicate`](ringscan_ipc::msg::Predicate), and
//! [`scan`], the single-threaded scan path as a library (footer cache, pruning, decode,
//! filter, projection, limit) feeding a batch callback; [`table`], which resolves a
//! table name or file globs to files, a schema and a data version, its hive partition
//! columns typed as DuckDB types them ([`hive`]); and [`server`], the
//! daemon process (control socket, one ring per scan, lock, idle exit) run by the
//! `ringscan-io` binary and `ringscan daemon run`. Still to come: the column-chunk
//! scheduler and parallel decode.
//!
//! ```
//! use ringscan_io_daemon::prune::{PartitionValues, Verdict};
//! use ringscan_ipc::msg::{CmpOp, Literal, Predicate};
//!
//! let pred = Predicate::compare("symbol", CmpOp::Eq, Literal::Utf8("SPY".into()));
//! let file = PartitionValues::from_relative_path("symbol=QQQ/date=2024-01-02/part-0.parquet");
//! assert_eq!(file.evaluate(&pred), Verdict::Never);
//! ```
//!
//! For a Parquet file, [`prune::FilePruner`] gives the surviving row groups
//! ([`row_groups`](prune::FilePruner::row_groups), then
//! [`bloom_filters`](prune::FilePruner::bloom_filters)) and, per row group, a
//! `RowSelection` from the page index ([`pages`](prune::FilePruner::pages)).
// Unsafe code only in `scan::mmap_guard` (memory maps and the SIGBUS handler).
#![deny(unsafe_code)]

pub mod error;
mod footer_probe;
pub mod hive;
pub mod prune;
pub mod scan;
pub mod server;
pub mod stats;
pub mod table;

pub use error::PruneError;
