//! `ringscan-io-daemon`: the IO daemon that turns a scan request into pruned, decoded,
//! filtered Arrow batches in a shared-memory ring.
//!
//! - [`storage`] is where bytes come from: one [`ByteRangeSource`](storage::ByteRangeSource)
//!   interface over local files (positional reads or memory maps) and objects in
//!   S3-compatible storage, GCS or Azure (`s3://`, `gs://`, `az://bucket/prefix` roots:
//!   listing, ranged GETs coalesced and fetched concurrently, retries, versions by ETag);
//! - [`table`] resolves a table name or file globs to files, a schema (with its hive
//!   partition columns typed as DuckDB types them, [`hive`]) and a data version;
//! - [`prune`] proves from metadata that files, row groups and pages hold no row
//!   matching a scan's [`Predicate`](ringscan_ipc::msg::Predicate): partition values,
//!   footer statistics, page indexes, bloom filters;
//! - [`scan`] is the scan engine as a library: the footer cache (and the column cache
//!   beside it), the access plan of each file, a pipeline that fetches column chunks
//!   (pread, mmap or a [`ByteRangeSource`](scan::ByteRangeSource)), decodes them on
//!   worker threads, filters, dedupes and projects, feeding a batch callback;
//! - [`source_stats`] answers column statistics of a whole source from the footers;
//! - [`server`] is the daemon process: control socket, one ring per scan, one memory
//!   budget, lock, idle exit, run by the `ringscan-io` binary and `ringscan daemon run`.
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
// Unsafe code only in `storage::mmap_guard` (memory maps and the SIGBUS handler).
#![deny(unsafe_code)]

pub mod error;
mod footer_probe;
pub mod hive;
pub mod ingest;
pub mod prune;
pub mod scan;
pub mod server;
pub mod source_stats;
pub mod storage;
pub mod table;

pub use error::PruneError;
