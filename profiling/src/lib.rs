//! `ringscan-profiling`: hardware and software counters, and run records.
//!
//! Every ringscan process records what each run did and what it cost:
//!
//! - [`Counters`] opens perf-event counters once — cycles, instructions (IPC), cache and
//!   branch misses, L1d read misses (hardware); task clock, page faults, context
//!   switches, CPU migrations (software) — and reads them cheaply around any stage
//!   ([`Counters::start`] / [`CounterSpan::stop`]). Multiplexed counters are scaled by
//!   `time_enabled / time_running`, both kept in the [`CounterSample`].
//! - [`Counters::pooled`] keeps each thread's counters open between runs: a run pays two
//!   reads, not the opens and closes ([`PooledCounters`]; see `benches/counters.rs`).
//!   [`CounterSample::sum`] totals the samples of several intervals (a query's scans).
//! - Nothing fails for want of a PMU: on a virtual machine without one (or under a strict
//!   `perf_event_paranoid`) each hardware counter is marked unavailable with the reason in
//!   words, once, and the software counters are still real.
//! - [`RunRecorder`] wraps a whole process run; [`RunRecorder::finish`] gives a
//!   [`RunRecord`] (wall, CPU, peak RSS, counters, the command's own figures, and
//!   other processes' counters joined in as stages: a query's daemon scans) that
//!   [`append_record`] writes as one JSON line to `<data>/.ringscan/runs.jsonl`
//!   ([`runs_path`]) with a single `O_APPEND` write, so concurrent processes never
//!   interleave lines. [`read_records`] reads them back; [`format_table`] and
//!   [`format_comparison`] are the views of `ringscan runs`.
//!
//! ```
//! use ringscan_profiling::{append_record, read_records, runs_path, RunRecorder};
//!
//! // First thing in main, before any thread is spawned.
//! let recorder = RunRecorder::start("generate", vec!["--rows".into(), "10".into()]);
//! // ... work ...
//! let mut figures = serde_json::Map::new();
//! figures.insert("rows".into(), 10.into());
//! let record = recorder.finish(figures);
//! eprintln!("{}", record.summary_line());
//!
//! let data = tempfile::tempdir()?;
//! append_record(&runs_path(data.path()), &record)?;
//! assert_eq!(read_records(&runs_path(data.path()))?.len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_code)]

mod counters;
mod error;
mod pool;
mod record;
mod report;
mod store;
#[expect(unsafe_code, reason = "getrusage(2); the crate's only unsafe room")]
mod sys;
mod time;

pub use counters::{
    CounterKind, CounterSample, CounterScope, CounterSnapshot, CounterSpan, CounterValue, Counters,
};
pub use error::ProfilingError;
pub use pool::PooledCounters;
pub use record::{
    summary_of, thousands, HostInfo, RunRecord, RunRecorder, StageRecord, DAEMON_SCANS_STAGE,
    RECORD_SCHEMA,
};
pub use report::{find_run, format_comparison, format_table, RunLookupError};
pub use store::{
    append_record, read_records, read_records_counted, runs_path, RecordsRead, MAX_LINE_BYTES,
};
pub use time::rfc3339_utc;
