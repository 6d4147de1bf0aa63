//! `ringscan-benches`: criterion micro-benchmarks (under `benches/`) and, later, the
//! side-by-side comparison harness against DuckDB, Polars and the in-memory baseline.
#![forbid(unsafe_code)]
