//! One module per subcommand; each owns its clap `Args` and a `run` function.

pub(crate) mod bench;
pub(crate) mod bench_data;
pub(crate) mod bench_side;
pub(crate) mod common;
pub(crate) mod daemon;
pub(crate) mod demo;
pub(crate) mod generate;
pub(crate) mod ingest;
pub(crate) mod query;
pub(crate) mod runs;
pub(crate) mod serve;
