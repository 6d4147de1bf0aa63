//! `ringscan-benches`: the side-by-side benchmark harness and criterion micro-benchmarks.
//!
//! - [`suites`]: the suites of issue 7 and their scenarios, each as SQL and as a
//!   [`suites::Shape`], in one place (`ringscan bench <suite> --list-json` exports them
//!   for the Python compare script in `benches/compare/`).
//! - [`baseline`]: the in-memory baseline (read every needed column into memory with
//!   parquet's reader, then filter / sort / page with arrow).
//! - [`engine`]: the [`Engine`] trait a side implements (the baseline here; ringscan's
//!   executor in the CLI).
//! - [`side`] and [`driver`]: one child process per side, driven over a line protocol,
//!   interleaved, summarized with [`latency`].
//!
//! Criterion benches (`benches/`): the generator's stages, the pruning decision, ring
//! push and pop.
//!
//! ```no_run
//! use ringscan_benches::{Baseline, suites};
//! # fn main() -> Result<(), ringscan_benches::BenchError> {
//! let dir = std::path::Path::new("bench-data/pushdown");
//! let params = suites::derive_params(suites::SuiteKind::Pushdown, dir)?;
//! let list = suites::scenarios(suites::SuiteKind::Pushdown, &params);
//! let result = Baseline::new(dir).execute(&list[0].shape)?;
//! println!("{} rows, {} bytes read", result.batch.num_rows(), result.bytes_read);
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

pub mod baseline;
pub mod driver;
pub mod engine;
mod error;
pub mod latency;
mod load;
pub mod side;
pub mod suites;

pub use baseline::Baseline;
pub use engine::{Engine, RunOutcome};
pub use error::BenchError;
