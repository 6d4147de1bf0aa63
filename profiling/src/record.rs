//! Run records: what one run of a command did and cost, as one JSON line.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Instant, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::counters::{CounterKind, CounterSample, CounterScope, CounterSnapshot, Counters};
use crate::pool::PooledCounters;
use crate::sys;
use crate::time::{compact_utc, rfc3339_utc};

/// Version of the record layout; bump when a field changes meaning.
pub const RECORD_SCHEMA: u32 = 1;

/// The machine a run ran on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    /// Host name, if known.
    #[serde(default)]
    pub hostname: Option<String>,
    /// CPUs this process may run on.
    pub cores: usize,
    /// CPU model (`/proc/cpuinfo` "model name"), if known.
    #[serde(default)]
    pub cpu_model: Option<String>,
    /// Kernel release, if known.
    #[serde(default)]
    pub kernel: Option<String>,
}

impl HostInfo {
    /// Reads the host description from `/proc`; missing pieces stay `None`.
    pub fn detect() -> HostInfo {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
        };
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        });
        HostInfo {
            hostname: read("/proc/sys/kernel/hostname"),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model,
            kernel: read("/proc/sys/kernel/osrelease"),
        }
    }
}

/// Counters of one stage of a run (e.g. the executor's part of a query, or the daemon's
/// scan for it), joined into the run's record.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StageRecord {
    /// Which stage: "executor", "daemon-scans", ...
    pub name: String,
    /// The process whose counters these are, when not the record's own ("io-daemon"):
    /// the record's top-level `counters` are always its own process's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<String>,
    /// Wall time of the stage.
    #[serde(default)]
    pub wall_ns: u64,
    /// Its counters.
    #[serde(default)]
    pub counters: CounterSample,
    /// Its own figures (rows, bytes, pruning counts).
    #[serde(default)]
    pub figures: Map<String, Value>,
}

/// One run: appended as one JSON line to the runs file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Layout version ([`RECORD_SCHEMA`]).
    #[serde(default)]
    pub schema: u32,
    /// Unique id: `<UTC start yyyymmdd-hhmmss>-<pid>[-<n>]`.
    pub run_id: String,
    /// The query this run belongs to; joins records of several processes.
    #[serde(default)]
    pub query_id: Option<String>,
    /// Start time, RFC 3339 UTC.
    pub time: String,
    /// The subcommand ("generate", "query", ...).
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Git revision of the binary, if it was built with one.
    #[serde(default)]
    pub git_revision: Option<String>,
    /// Process id.
    #[serde(default)]
    pub pid: u32,
    /// The machine.
    #[serde(default)]
    pub host: HostInfo,
    /// Wall time from [`RunRecorder::start`] to [`RunRecorder::finish`].
    pub wall_ns: u64,
    /// User CPU time of the process (all threads) over the run.
    #[serde(default)]
    pub cpu_user_ns: u64,
    /// System CPU time of the process (all threads) over the run.
    #[serde(default)]
    pub cpu_system_ns: u64,
    /// Peak resident set size of the process.
    #[serde(default)]
    pub peak_rss_bytes: u64,
    /// Whole-process counters over the run: this process's (`pid`), the executor's
    /// for a query.
    #[serde(default)]
    pub counters: CounterSample,
    /// Per-stage counters, this process's or another's (a query's daemon scans, summed:
    /// the stage named [`DAEMON_SCANS_STAGE`], process "io-daemon").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageRecord>,
    /// The command's own figures: rows, bytes, pruning counts, ...
    #[serde(default)]
    pub figures: Map<String, Value>,
}

/// The stage of a query's record that holds the IO daemon's counters over the query's
/// scans (summed over every scan of every run of the query in the process).
pub const DAEMON_SCANS_STAGE: &str = "daemon-scans";

impl RunRecord {
    /// The IO daemon's counters joined into this record ([`DAEMON_SCANS_STAGE`]).
    pub fn daemon_stage(&self) -> Option<&StageRecord> {
        self.stages.iter().find(|s| s.name == DAEMON_SCANS_STAGE)
    }

    /// Wall time in seconds.
    pub fn wall_s(&self) -> f64 {
        self.wall_ns as f64 / 1e9
    }

    /// CPU time (user + system) in seconds.
    pub fn cpu_s(&self) -> f64 {
        (self.cpu_user_ns + self.cpu_system_ns) as f64 / 1e9
    }

    /// A numeric figure, if present.
    pub fn figure(&self, name: &str) -> Option<f64> {
        self.figures.get(name).and_then(Value::as_f64)
    }

    /// Rows per wall second, from the `rows` figure.
    pub fn rows_per_s(&self) -> Option<f64> {
        let rows = self.figure("rows")?;
        (self.wall_ns > 0).then(|| rows / self.wall_s())
    }

    /// Joins a stage's counters (from this or another process) into this record.
    pub fn join_stage(&mut self, stage: StageRecord) {
        self.stages.push(stage);
    }

    /// One line for a log, e.g. `counters: task-clock 1.23 s, 4,567 page faults,
    /// 12 ctx switches; hardware counters unavailable: no PMU exposed (perf_event_open:
    /// ENOENT)`.
    pub fn summary_line(&self) -> String {
        summary_of(&self.counters)
    }
}

/// The summary line of a counter sample; see [`RunRecord::summary_line`].
pub fn summary_of(c: &CounterSample) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(cycles) = c.value(CounterKind::Cycles) {
        parts.push(format!("{} cycles", si(cycles as f64)));
    }
    if let Some(ipc) = c.ipc() {
        parts.push(format!("IPC {ipc:.2}"));
    }
    if let Some(r) = c.cache_miss_rate() {
        parts.push(format!("cache-miss {:.1}%", r * 100.0));
    }
    if let Some(r) = c.branch_miss_rate() {
        parts.push(format!("branch-miss {:.2}%", r * 100.0));
    }
    if let Some(ns) = c.value(CounterKind::TaskClock) {
        if ns >= 1_000_000_000 {
            parts.push(format!("task-clock {:.2} s", ns as f64 / 1e9));
        } else {
            parts.push(format!("task-clock {:.1} ms", ns as f64 / 1e6));
        }
    }
    if let Some(n) = c.value(CounterKind::PageFaults) {
        parts.push(format!("{} page faults", thousands(n)));
    }
    if let Some(n) = c.value(CounterKind::ContextSwitches) {
        parts.push(format!("{} ctx switches", thousands(n)));
    }
    if let Some(n) = c.value(CounterKind::CpuMigrations) {
        parts.push(format!("{} migrations", thousands(n)));
    }
    let mut line = format!("counters: {}", parts.join(", "));
    if parts.is_empty() {
        line.push_str("none");
    }
    if let Some(why) = &c.hardware_unavailable {
        line.push_str("; hardware counters unavailable: ");
        line.push_str(why);
    } else {
        let missing: Vec<String> = c
            .values
            .iter()
            .filter(|v| !v.measured)
            .map(|v| {
                format!(
                    "{} ({})",
                    v.kind.name(),
                    v.unavailable.as_deref().unwrap_or("unavailable")
                )
            })
            .collect();
        if !missing.is_empty() {
            line.push_str("; unavailable: ");
            line.push_str(&missing.join(", "));
        }
    }
    let least_running = c
        .values
        .iter()
        .filter(|v| v.multiplexed() && v.time_enabled_ns > 0)
        .map(|v| v.time_running_ns as f64 / v.time_enabled_ns as f64)
        .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.min(x))));
    if let Some(share) = least_running {
        line.push_str(&format!(
            "; multiplexed (scaled; least on-PMU share {:.0}%)",
            share * 100.0
        ));
    }
    line
}

/// `1234567` -> `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// [`thousands`] of a whole-valued float, with its sign.
pub(crate) fn thousands_signed(x: f64) -> String {
    let digits = thousands(x.abs() as u64);
    if x < 0.0 {
        format!("-{digits}")
    } else {
        digits
    }
}

/// `1.23 G`, `45.6 M`, `789 k`.
pub(crate) fn si(x: f64) -> String {
    let (v, unit) = if x.abs() >= 1e9 {
        (x / 1e9, " G")
    } else if x.abs() >= 1e6 {
        (x / 1e6, " M")
    } else if x.abs() >= 1e3 {
        (x / 1e3, " k")
    } else {
        (x, "")
    };
    if unit.is_empty() {
        format!("{v:.0}")
    } else {
        format!("{v:.2}{unit}")
    }
}

/// Records one run of a process: create it first thing in `main`, before any thread is
/// spawned, so its inherited counters cover every thread.
///
/// ```
/// use ringscan_profiling::RunRecorder;
///
/// let recorder = RunRecorder::start("generate", vec!["--rows".into(), "1000".into()]);
/// // ... the command's work ...
/// let mut figures = serde_json::Map::new();
/// figures.insert("rows".into(), 1000.into());
/// let record = recorder.finish(figures);
/// assert_eq!(record.command, "generate");
/// println!("{}", record.summary_line());
/// ```
#[derive(Debug)]
pub struct RunRecorder {
    run_id: String,
    query_id: Option<String>,
    git_revision: Option<String>,
    command: String,
    args: Vec<String>,
    started: SystemTime,
    started_at: Instant,
    usage_at_start: sys::ProcessUsage,
    /// The thread's kept process-scope counters: a second run on this thread (a
    /// benchmark's, a test's) reuses them rather than opening and closing its own.
    counters: PooledCounters,
    counters_at_start: CounterSnapshot,
    stages: Vec<StageRecord>,
}

/// Distinguishes several recorders in one process within the same second.
static RECORDERS_STARTED: AtomicU32 = AtomicU32::new(0);

impl RunRecorder {
    /// Starts recording; never fails (unavailable counters are recorded with reasons).
    pub fn start(command: &str, args: Vec<String>) -> RunRecorder {
        let started = SystemTime::now();
        let started_at = Instant::now();
        let usage_at_start = sys::process_usage();
        let mut counters = Counters::pooled(CounterScope::Process);
        let counters_at_start = counters.snapshot();
        // Relaxed: only uniqueness matters, no other memory is published through it.
        let n = RECORDERS_STARTED.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let run_id = if n == 0 {
            format!("{}-{pid}", compact_utc(started))
        } else {
            format!("{}-{pid}-{n}", compact_utc(started))
        };
        RunRecorder {
            run_id,
            query_id: None,
            git_revision: option_env!("RINGSCAN_GIT_REVISION").map(str::to_owned),
            command: command.to_owned(),
            args,
            started,
            started_at,
            usage_at_start,
            counters,
            counters_at_start,
            stages: Vec::new(),
        }
    }

    /// This run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Ties this run to a query (records of several processes share it).
    pub fn set_query_id(&mut self, query_id: impl Into<String>) {
        self.query_id = Some(query_id.into());
    }

    /// The git revision of the binary (the binary knows it; this crate may not).
    pub fn set_git_revision(&mut self, revision: impl Into<String>) {
        self.git_revision = Some(revision.into());
    }

    /// Adds a stage's counters to the record.
    pub fn add_stage(&mut self, stage: StageRecord) {
        self.stages.push(stage);
    }

    /// The process counters of this run so far (for progress lines).
    pub fn counters_now(&mut self) -> CounterSample {
        self.counters.since(&self.counters_at_start)
    }

    /// Stops counting and builds the record: wall, CPU, peak RSS, counters, `figures`.
    pub fn finish(mut self, figures: Map<String, Value>) -> RunRecord {
        let counters = self.counters.since(&self.counters_at_start);
        let wall_ns = u64::try_from(self.started_at.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let usage = sys::process_usage();
        let ns = |d: std::time::Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        RunRecord {
            schema: RECORD_SCHEMA,
            run_id: self.run_id,
            query_id: self.query_id,
            time: rfc3339_utc(self.started),
            command: self.command,
            args: self.args,
            git_revision: self.git_revision,
            pid: std::process::id(),
            host: HostInfo::detect(),
            wall_ns,
            cpu_user_ns: ns(usage.user_cpu.saturating_sub(self.usage_at_start.user_cpu)),
            cpu_system_ns: ns(usage
                .system_cpu
                .saturating_sub(self.usage_at_start.system_cpu)),
            peak_rss_bytes: usage.peak_rss_bytes,
            counters,
            stages: self.stages,
            figures,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(4567), "4,567");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn record_round_trips_and_summarizes() {
        let rec = RunRecorder::start("test", vec!["a".into()]);
        let mut v = vec![0u64; 1 << 20];
        for (i, x) in v.iter_mut().enumerate() {
            *x = i as u64;
        }
        std::hint::black_box(&v);
        let mut figures = Map::new();
        figures.insert("rows".into(), 1_000_000.into());
        let record = rec.finish(figures);
        assert!(record.wall_ns > 0);
        assert!(record.peak_rss_bytes > 0);
        assert_eq!(record.counters.values.len(), CounterKind::ALL.len());
        let json = serde_json::to_string(&record).expect("serialize");
        let back: RunRecord = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, record);
        let line = record.summary_line();
        assert!(line.starts_with("counters: "), "{line}");
        assert!(line.contains("task-clock"), "{line}");
        if record.counters.hardware_unavailable.is_some() {
            assert!(line.contains("hardware counters unavailable: "), "{line}");
        }
        assert!(!line.contains('\n'));
    }
}
