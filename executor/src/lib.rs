//! `ringscan-executor`: the SQL engine. DataFusion parses, plans and executes every
//! query; the IO daemon is its scan ([`engine`]).
//!
//! - [`engine::SqlSession`]: one client's session on a data directory, with a plan
//!   cache keyed by SQL text (`$n` parameters bound per execution) and a result cache
//!   keyed by plan and data version;
//! - [`format`]: results as an aligned table, CSV or JSON lines, as DuckDB prints them;
//! - [`zone`]: the session time zone that `TIMESTAMPTZ` values are seen in (DuckDB's
//!   `SET TimeZone`).
#![forbid(unsafe_code)]

pub mod engine;
pub mod format;
mod result;
mod result_cache;
mod temporal;
pub mod zone;

pub use result::{owned_copy, QueryOutcome, QueryResult};
pub use result_cache::{DataVersion, ResultCache, ResultKey};
/// A scan's counters from the daemon ([`QueryOutcome::scan`]'s `counters`).
pub use ringscan_ipc::msg::{DaemonCounters, ScanSummary};
pub use ringscan_lru::{ByteLru, LruStats as CacheStats};
