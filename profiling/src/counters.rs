//! Hardware and software counters from `perf_event_open(2)`, opened once and read cheaply.
//!
//! [`Counters::open`] opens every event it can and records, for every one it cannot, the
//! reason in words. Events are opened in three groups, each scheduled on the PMU as a
//! unit so the ratios inside a group (IPC, miss rates) come from the same time slices:
//!
//! - core: cycles (leader), instructions, branch instructions, branch misses;
//! - cache: cache references (leader), cache misses, L1d read misses;
//! - software: task clock, page faults, context switches, CPU migrations — each on its
//!   own: software events never multiplex, and grouped under a task-clock leader the
//!   members were observed (kernel 6.18) to stay enabled-but-never-running.
//!
//! Two hardware groups instead of one because seven hardware events do not fit the
//! counters of many CPUs (4 general-purpose per hyperthread on Intel): an oversized group
//! is never scheduled at all. When the kernel multiplexes the groups, each value is
//! scaled by `time_enabled / time_running`, and both times are kept in the sample.
//!
//! Each member is read on its own (`read_format` without `PERF_FORMAT_GROUP`): perf-event2
//! documents `inherit` on group reads as unsupported, and inheritance is what lets
//! [`CounterScope::Process`] cover the threads the process spawns later. The cost is one
//! `read(2)` per open counter per snapshot (see the `counters` bench).

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use perf_event::events::{Cache, CacheId, CacheOp, CacheResult, Event, Hardware, Software};
use perf_event::{Builder, Counter};
use serde::{Deserialize, Serialize};

/// One counted event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CounterKind {
    /// CPU cycles (hardware).
    Cycles,
    /// Instructions retired (hardware).
    Instructions,
    /// Branch instructions retired (hardware).
    BranchInstructions,
    /// Mispredicted branches (hardware).
    BranchMisses,
    /// Last-level cache references (hardware).
    CacheReferences,
    /// Last-level cache misses (hardware).
    CacheMisses,
    /// L1 data cache read misses (hardware cache event; absent on some CPUs).
    L1dReadMisses,
    /// CPU time of the observed tasks, in nanoseconds (software).
    TaskClock,
    /// Page faults, minor and major (software).
    PageFaults,
    /// Context switches (software).
    ContextSwitches,
    /// Migrations between CPUs (software).
    CpuMigrations,
}

impl CounterKind {
    /// Every counter, in group order (the order of [`CounterSample::values`]).
    pub const ALL: [CounterKind; 11] = [
        CounterKind::Cycles,
        CounterKind::Instructions,
        CounterKind::BranchInstructions,
        CounterKind::BranchMisses,
        CounterKind::CacheReferences,
        CounterKind::CacheMisses,
        CounterKind::L1dReadMisses,
        CounterKind::TaskClock,
        CounterKind::PageFaults,
        CounterKind::ContextSwitches,
        CounterKind::CpuMigrations,
    ];

    /// The name used in records and tables (`perf stat` spelling).
    pub fn name(self) -> &'static str {
        match self {
            CounterKind::Cycles => "cycles",
            CounterKind::Instructions => "instructions",
            CounterKind::BranchInstructions => "branch-instructions",
            CounterKind::BranchMisses => "branch-misses",
            CounterKind::CacheReferences => "cache-references",
            CounterKind::CacheMisses => "cache-misses",
            CounterKind::L1dReadMisses => "l1d-read-misses",
            CounterKind::TaskClock => "task-clock",
            CounterKind::PageFaults => "page-faults",
            CounterKind::ContextSwitches => "context-switches",
            CounterKind::CpuMigrations => "cpu-migrations",
        }
    }

    /// True for events counted by the PMU (absent on most virtual machines).
    pub fn is_hardware(self) -> bool {
        !matches!(
            self,
            CounterKind::TaskClock
                | CounterKind::PageFaults
                | CounterKind::ContextSwitches
                | CounterKind::CpuMigrations
        )
    }

    /// The hardware group this event is scheduled with (0 core, 1 cache); software
    /// events stand alone.
    fn group(self) -> Option<usize> {
        match self {
            CounterKind::Cycles
            | CounterKind::Instructions
            | CounterKind::BranchInstructions
            | CounterKind::BranchMisses => Some(0),
            CounterKind::CacheReferences
            | CounterKind::CacheMisses
            | CounterKind::L1dReadMisses => Some(1),
            _ => None,
        }
    }

    fn builder(self) -> Builder<'static> {
        fn b(event: impl Event + 'static) -> Builder<'static> {
            Builder::new(event)
        }
        match self {
            CounterKind::Cycles => b(Hardware::CPU_CYCLES),
            CounterKind::Instructions => b(Hardware::INSTRUCTIONS),
            CounterKind::BranchInstructions => b(Hardware::BRANCH_INSTRUCTIONS),
            CounterKind::BranchMisses => b(Hardware::BRANCH_MISSES),
            CounterKind::CacheReferences => b(Hardware::CACHE_REFERENCES),
            CounterKind::CacheMisses => b(Hardware::CACHE_MISSES),
            CounterKind::L1dReadMisses => b(Cache {
                which: CacheId::L1D,
                operation: CacheOp::READ,
                result: CacheResult::MISS,
            }),
            CounterKind::TaskClock => b(Software::TASK_CLOCK),
            CounterKind::PageFaults => b(Software::PAGE_FAULTS),
            CounterKind::ContextSwitches => b(Software::CONTEXT_SWITCHES),
            CounterKind::CpuMigrations => b(Software::CPU_MIGRATIONS),
        }
    }
}

/// Which threads a set of counters observes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CounterScope {
    /// The calling thread and every thread (or child process) it, or they, spawn after
    /// the counters are opened (`inherit`). Open these at the start of `main`, before
    /// any thread exists, to count the whole process.
    Process,
    /// The calling thread only. Cheaper to read; right for one stage on one thread.
    Thread,
}

/// One counter's value over an interval, or why there is none.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CounterValue {
    /// The event.
    pub kind: CounterKind,
    /// True when the kernel counted this event; false when it is unavailable.
    pub measured: bool,
    /// Estimated count: `raw * time_enabled / time_running` (exact when not multiplexed).
    /// `None` when not measured.
    pub value: Option<u64>,
    /// The count as read, before scaling.
    #[serde(default)]
    pub raw: u64,
    /// Nanoseconds the event was enabled.
    #[serde(default)]
    pub time_enabled_ns: u64,
    /// Nanoseconds the event was actually on the PMU (below enabled: multiplexed).
    #[serde(default)]
    pub time_running_ns: u64,
    /// Why the event is not measured, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// True when only user space is counted (the paranoid level forbade kernel counting).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub user_only: bool,
}

impl CounterValue {
    fn unavailable(kind: CounterKind, reason: String) -> CounterValue {
        CounterValue {
            kind,
            measured: false,
            value: None,
            raw: 0,
            time_enabled_ns: 0,
            time_running_ns: 0,
            unavailable: Some(reason),
            user_only: false,
        }
    }

    fn measured(
        kind: CounterKind,
        raw: u64,
        time_enabled_ns: u64,
        time_running_ns: u64,
        user_only: bool,
    ) -> CounterValue {
        let mut v = CounterValue {
            kind,
            measured: true,
            value: scale(raw, time_enabled_ns, time_running_ns),
            raw,
            time_enabled_ns,
            time_running_ns,
            unavailable: None,
            user_only,
        };
        if v.value.is_none() {
            v.measured = false;
            v.unavailable = Some("never scheduled on the PMU during the interval".to_owned());
        }
        v
    }

    /// True when the kernel time-shared this event with others (the value is scaled).
    pub fn multiplexed(&self) -> bool {
        self.measured && self.time_running_ns < self.time_enabled_ns
    }
}

/// `raw * enabled / running`; `None` when enabled but never running.
fn scale(raw: u64, enabled_ns: u64, running_ns: u64) -> Option<u64> {
    if running_ns == 0 {
        // Enabled for no time at all (an empty interval) is an exact zero-length count.
        return (enabled_ns == 0).then_some(raw);
    }
    if running_ns >= enabled_ns {
        return Some(raw);
    }
    let scaled = u128::from(raw) * u128::from(enabled_ns) / u128::from(running_ns);
    Some(u64::try_from(scaled).unwrap_or(u64::MAX))
}

/// Values of every counter over one interval (or since opening).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CounterSample {
    /// One entry per [`CounterKind`], in [`CounterKind::ALL`] order.
    pub values: Vec<CounterValue>,
    /// When no hardware counter is measured: why, once, in words
    /// (e.g. "no PMU exposed (perf_event_open: ENOENT)").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware_unavailable: Option<String>,
}

impl CounterSample {
    /// The entry for `kind`, if the sample has one.
    pub fn get(&self, kind: CounterKind) -> Option<&CounterValue> {
        self.values.iter().find(|v| v.kind == kind)
    }

    /// The (scaled) count of `kind`, if measured.
    pub fn value(&self, kind: CounterKind) -> Option<u64> {
        self.get(kind).filter(|v| v.measured).and_then(|v| v.value)
    }

    /// Instructions per cycle.
    pub fn ipc(&self) -> Option<f64> {
        ratio(
            self.value(CounterKind::Instructions),
            self.value(CounterKind::Cycles),
        )
    }

    /// Cache misses per cache reference (0..=1).
    pub fn cache_miss_rate(&self) -> Option<f64> {
        ratio(
            self.value(CounterKind::CacheMisses),
            self.value(CounterKind::CacheReferences),
        )
    }

    /// Branch misses per branch instruction (0..=1).
    pub fn branch_miss_rate(&self) -> Option<f64> {
        ratio(
            self.value(CounterKind::BranchMisses),
            self.value(CounterKind::BranchInstructions),
        )
    }

    /// The counts between `earlier` and `self` (both read from the same [`Counters`]),
    /// each rescaled by its own enabled/running times over the interval.
    pub fn delta(&self, earlier: &CounterSample) -> CounterSample {
        let values = self
            .values
            .iter()
            .map(|late| match earlier.get(late.kind) {
                Some(early) if late.measured && early.measured => CounterValue::measured(
                    late.kind,
                    late.raw.saturating_sub(early.raw),
                    late.time_enabled_ns.saturating_sub(early.time_enabled_ns),
                    late.time_running_ns.saturating_sub(early.time_running_ns),
                    late.user_only,
                ),
                Some(early) if !early.measured => early.clone(),
                _ => late.clone(),
            })
            .collect();
        CounterSample {
            values,
            hardware_unavailable: self.hardware_unavailable.clone(),
        }
    }
}

fn ratio(num: Option<u64>, den: Option<u64>) -> Option<f64> {
    match (num, den) {
        (Some(n), Some(d)) if d > 0 => Some(n as f64 / d as f64),
        _ => None,
    }
}

struct OpenCounter {
    counter: Counter,
    user_only: bool,
}

enum Slot {
    Open(OpenCounter),
    Unavailable(String),
}

/// A set of open counters: open once ([`Counters::open`], ~tens of µs), then read
/// cheaply ([`Counters::read`], [`Counters::start`]/[`CounterSpan::stop`]).
///
/// ```
/// use ringscan_profiling::{CounterKind, CounterScope, Counters};
///
/// let mut counters = Counters::open(CounterScope::Thread);
/// let span = counters.start();
/// let v: Vec<u64> = (0..100_000).collect();
/// let sample = span.stop();
/// # drop(v);
/// // Task clock is a software counter: there even on a VM without a PMU.
/// if let Some(ns) = sample.value(CounterKind::TaskClock) {
///     assert!(ns > 0);
/// }
/// ```
pub struct Counters {
    scope: CounterScope,
    slots: Vec<(CounterKind, Slot)>,
    hardware_unavailable: Option<String>,
}

impl std::fmt::Debug for Counters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let open: Vec<&str> = self
            .slots
            .iter()
            .filter(|(_, s)| matches!(s, Slot::Open(_)))
            .map(|(k, _)| k.name())
            .collect();
        f.debug_struct("Counters")
            .field("scope", &self.scope)
            .field("open", &open)
            .field("hardware_unavailable", &self.hardware_unavailable)
            .finish()
    }
}

impl Counters {
    /// Opens and enables every counter this machine allows; never fails. Counters that
    /// cannot be opened are kept as unavailable, with the reason in words.
    pub fn open(scope: CounterScope) -> Counters {
        let paranoid = paranoid_level();
        let mut slots: Vec<(CounterKind, Result<OpenCounter, io::Error>)> = Vec::new();
        // Index in `slots` of each hardware group's leader (its first event that opened).
        let mut leaders: [Option<usize>; 2] = [None; 2];
        // Indexes of counters that are enabled on their own: leaders and software events.
        let mut to_enable: Vec<usize> = Vec::new();
        for kind in CounterKind::ALL {
            let leader =
                kind.group()
                    .and_then(|g| leaders[g])
                    .and_then(|i| match &mut slots[i].1 {
                        Ok(open) => Some(&mut open.counter),
                        Err(_) => None,
                    });
            let is_member = leader.is_some();
            // Relaxed: the flag only ever goes from false to true and guards no other
            // data; a stale false costs one more round of failing syscalls.
            let opened = if kind.is_hardware() && KNOWN_NO_PMU.load(Ordering::Relaxed) {
                Err(io::Error::from_raw_os_error(libc::ENOENT))
            } else {
                open_one(kind, scope, leader)
            };
            if opened.is_ok() && !is_member {
                if let Some(g) = kind.group() {
                    leaders[g] = Some(slots.len());
                }
                to_enable.push(slots.len());
            }
            slots.push((kind, opened));
        }
        // Enable each hardware group as a unit, so its members count over the same slices.
        for i in to_enable {
            let kind = slots[i].0;
            if let Ok(open) = &mut slots[i].1 {
                if let Err(e) = open.counter.enable_group() {
                    for (k, slot) in slots.iter_mut() {
                        let same = *k == kind || (k.group().is_some() && k.group() == kind.group());
                        if same && slot.is_ok() {
                            *slot = Err(io::Error::new(e.kind(), format!("enable: {e}")));
                        }
                    }
                }
            }
        }

        let hw_errnos: Vec<Option<i32>> = slots
            .iter()
            .filter(|(k, _)| k.is_hardware())
            .filter_map(|(_, s)| s.as_ref().err().map(io::Error::raw_os_error))
            .collect();
        let hw_total = CounterKind::ALL.iter().filter(|k| k.is_hardware()).count();
        let all_hw_failed = hw_errnos.len() == hw_total;
        let no_pmu = all_hw_failed
            && hw_errnos
                .iter()
                .all(|e| matches!(e, Some(libc::ENOENT | libc::ENODEV)));
        if no_pmu {
            KNOWN_NO_PMU.store(true, Ordering::Relaxed);
        }
        let slots: Vec<(CounterKind, Slot)> = slots
            .into_iter()
            .map(|(kind, s)| {
                let slot = match s {
                    Ok(open) => Slot::Open(open),
                    Err(e) => Slot::Unavailable(reason(&e, kind, no_pmu, paranoid)),
                };
                (kind, slot)
            })
            .collect();
        let hardware_unavailable = if all_hw_failed {
            slots.iter().find_map(|(k, s)| match s {
                Slot::Unavailable(r) if k.is_hardware() => Some(r.clone()),
                _ => None,
            })
        } else {
            None
        };
        debug_assert_eq!(slots.len(), COUNTERS);
        Counters {
            scope,
            slots,
            hardware_unavailable,
        }
    }

    /// The scope these counters were opened with.
    pub fn scope(&self) -> CounterScope {
        self.scope
    }

    /// When no hardware counter could be opened: why, in words.
    pub fn hardware_unavailable(&self) -> Option<&str> {
        self.hardware_unavailable.as_deref()
    }

    /// True when at least one hardware counter is open (a PMU is usable).
    pub fn has_hardware(&self) -> bool {
        self.slots
            .iter()
            .any(|(k, s)| k.is_hardware() && matches!(s, Slot::Open(_)))
    }

    /// Cumulative values since [`Counters::open`]. One `read(2)` per open counter.
    pub fn read(&mut self) -> CounterSample {
        let mut now = [None; COUNTERS];
        self.read_raw(&mut now);
        self.sample_between(&[Some(RawReading::default()); COUNTERS], &now)
    }

    /// Begins an interval: takes a snapshot now; [`CounterSpan::stop`] returns the delta.
    ///
    /// The snapshot is raw numbers in a fixed array: no allocation until `stop`.
    pub fn start(&mut self) -> CounterSpan<'_> {
        let mut start = [None; COUNTERS];
        self.read_raw(&mut start);
        CounterSpan {
            counters: self,
            start,
        }
    }

    /// Reads every open counter into `out` (by slot); `None` where not open or unreadable.
    fn read_raw(&mut self, out: &mut [Option<RawReading>; COUNTERS]) {
        for ((_, slot), out) in self.slots.iter_mut().zip(out.iter_mut()) {
            *out = match slot {
                Slot::Open(open) => open
                    .counter
                    .read_count_and_time()
                    .ok()
                    .map(|cat| RawReading {
                        count: cat.count,
                        time_enabled_ns: cat.time_enabled,
                        time_running_ns: cat.time_running,
                    }),
                Slot::Unavailable(_) => None,
            };
        }
    }

    /// The sample for the interval between two raw snapshots.
    fn sample_between(
        &self,
        start: &[Option<RawReading>; COUNTERS],
        end: &[Option<RawReading>; COUNTERS],
    ) -> CounterSample {
        let values = self
            .slots
            .iter()
            .zip(start.iter().zip(end))
            .map(|((kind, slot), pair)| match (slot, pair) {
                (Slot::Open(open), (Some(a), Some(b))) => CounterValue::measured(
                    *kind,
                    b.count.saturating_sub(a.count),
                    b.time_enabled_ns.saturating_sub(a.time_enabled_ns),
                    b.time_running_ns.saturating_sub(a.time_running_ns),
                    open.user_only,
                ),
                (Slot::Open(_), _) => {
                    CounterValue::unavailable(*kind, "read(2) of the counter failed".to_owned())
                }
                (Slot::Unavailable(reason), _) => CounterValue::unavailable(*kind, reason.clone()),
            })
            .collect();
        CounterSample {
            values,
            hardware_unavailable: self.hardware_unavailable.clone(),
        }
    }

    /// Runs `f` inside a span and returns its result with the counters it used.
    pub fn measure<R>(&mut self, f: impl FnOnce() -> R) -> (R, CounterSample) {
        let span = self.start();
        let r = f();
        (r, span.stop())
    }
}

/// Number of counters ([`CounterKind::ALL`]); `Counters` always has one slot each.
const COUNTERS: usize = CounterKind::ALL.len();

/// One `read(2)` of a counter.
#[derive(Clone, Copy, Debug, Default)]
struct RawReading {
    count: u64,
    time_enabled_ns: u64,
    time_running_ns: u64,
}

/// An interval being counted; see [`Counters::start`].
#[derive(Debug)]
#[must_use = "a span counts nothing until stopped"]
pub struct CounterSpan<'a> {
    counters: &'a mut Counters,
    start: [Option<RawReading>; COUNTERS],
}

impl CounterSpan<'_> {
    /// Ends the interval and returns what was counted during it.
    pub fn stop(self) -> CounterSample {
        let mut end = [None; COUNTERS];
        self.counters.read_raw(&mut end);
        self.counters.sample_between(&self.start, &end)
    }
}

fn open_one(
    kind: CounterKind,
    scope: CounterScope,
    mut leader: Option<&mut Counter>,
) -> io::Result<OpenCounter> {
    let mut builder = kind.builder();
    builder
        .inherit(scope == CounterScope::Process)
        .enabled(false)
        .exclude_kernel(false)
        .exclude_hv(true);
    let build = |builder: &Builder<'_>, leader: &mut Option<&mut Counter>| match leader {
        Some(l) => builder.build_with_group(&mut **l),
        None => builder.build(),
    };
    match build(&builder, &mut leader) {
        Ok(counter) => Ok(OpenCounter {
            counter,
            user_only: false,
        }),
        // perf_event_paranoid >= 2 forbids counting the kernel for unprivileged users;
        // user space alone is still worth having.
        Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => {
            builder.exclude_kernel(true);
            build(&builder, &mut leader).map(|counter| OpenCounter {
                counter,
                user_only: true,
            })
        }
        Err(e) => Err(e),
    }
}

/// `/proc/sys/kernel/perf_event_paranoid`, if readable.
/// The `perf_event_paranoid` level, read once per process: it is only used to word the
/// reason a counter is missing, and re-reading /proc on every `open` cost a syscall
/// round trip per query.
fn paranoid_level() -> Option<i32> {
    static LEVEL: OnceLock<Option<i32>> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
            .ok()
            .and_then(|s| s.trim().parse().ok())
    })
}

/// Set once an `open` found that this machine exposes no PMU at all (every hardware
/// event failed with ENOENT or ENODEV). A PMU does not appear while a process runs, so
/// later opens skip the seven failing `perf_event_open` calls: on this VM that took
/// open + start + stop + close from about 30 µs down (see benches/counters.rs).
static KNOWN_NO_PMU: AtomicBool = AtomicBool::new(false);

fn errno_name(e: &io::Error) -> String {
    let name = match e.raw_os_error() {
        Some(libc::ENOENT) => "ENOENT",
        Some(libc::ENODEV) => "ENODEV",
        Some(libc::EACCES) => "EACCES",
        Some(libc::EPERM) => "EPERM",
        Some(libc::EOPNOTSUPP) => "EOPNOTSUPP",
        Some(libc::EINVAL) => "EINVAL",
        Some(libc::ENOSYS) => "ENOSYS",
        Some(libc::EMFILE) => "EMFILE",
        Some(libc::EBUSY) => "EBUSY",
        Some(libc::E2BIG) => "E2BIG",
        _ => return e.to_string(),
    };
    name.to_owned()
}

/// Words for why `kind` could not be opened.
fn reason(e: &io::Error, kind: CounterKind, no_pmu: bool, paranoid: Option<i32>) -> String {
    let errno = errno_name(e);
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::ENODEV) if no_pmu && kind.is_hardware() => {
            format!("no PMU exposed (perf_event_open: {errno})")
        }
        Some(libc::ENOENT | libc::EOPNOTSUPP) => {
            format!("event not supported (perf_event_open: {errno})")
        }
        Some(libc::ENODEV) => format!("no such PMU (perf_event_open: {errno})"),
        Some(libc::EACCES | libc::EPERM) => match paranoid {
            Some(level) => format!(
                "not permitted at perf_event_paranoid level {level} (perf_event_open: {errno})"
            ),
            None => format!(
                "not permitted: no perf_event_paranoid, perf events disabled or blocked by \
                 seccomp (perf_event_open: {errno})"
            ),
        },
        Some(libc::ENOSYS) => format!("kernel has no perf events (perf_event_open: {errno})"),
        Some(libc::EINVAL) => {
            format!("event rejected, or does not fit its group (perf_event_open: {errno})")
        }
        Some(libc::EMFILE) => format!("out of file descriptors (perf_event_open: {errno})"),
        _ => format!("perf_event_open failed: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy_work(iterations: u64) -> u64 {
        let mut x = 1u64;
        for i in 0..iterations {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
        x
    }

    #[test]
    fn scale_handles_multiplexing_and_empty_intervals() {
        assert_eq!(scale(100, 10, 10), Some(100));
        assert_eq!(scale(100, 10, 5), Some(200));
        assert_eq!(scale(0, 0, 0), Some(0));
        assert_eq!(scale(7, 10, 0), None);
        assert_eq!(scale(u64::MAX, 10, 1), Some(u64::MAX));
    }

    #[test]
    fn software_counters_are_real() {
        let mut counters = Counters::open(CounterScope::Thread);
        let (_, sample) = counters.measure(|| busy_work(5_000_000));
        let task_clock = sample.value(CounterKind::TaskClock).expect("task clock");
        assert!(task_clock > 0, "{sample:?}");
        assert_eq!(sample.values.len(), CounterKind::ALL.len());
    }

    #[test]
    fn page_faults_rise_after_touching_fresh_memory() {
        let mut counters = Counters::open(CounterScope::Thread);
        let (_, sample) = counters.measure(|| {
            // 16 MiB of fresh pages, one write per page.
            let mut v = vec![0u8; 16 << 20];
            for i in (0..v.len()).step_by(4096) {
                v[i] = 1;
            }
            std::hint::black_box(&v);
        });
        let faults = sample
            .value(CounterKind::PageFaults)
            .unwrap_or_else(|| panic!("page faults: {sample:#?}"));
        assert!(faults >= 1000, "{faults} faults for 4096 fresh pages");
    }

    #[test]
    fn process_scope_counts_threads_spawned_later() {
        let mut counters = Counters::open(CounterScope::Process);
        let before = counters.read();
        std::thread::spawn(|| busy_work(20_000_000))
            .join()
            .expect("thread");
        let after = counters.read();
        let d = after.delta(&before);
        // The spawned thread ran ~tens of ms; the main thread mostly waited.
        let ns = d.value(CounterKind::TaskClock).expect("task clock");
        assert!(ns > 2_000_000, "task clock {ns} ns misses the child thread");
    }

    #[test]
    fn hardware_counters_measured_or_explained() {
        let mut counters = Counters::open(CounterScope::Process);
        let sample = counters.read();
        for v in sample.values.iter().filter(|v| v.kind.is_hardware()) {
            assert!(
                v.measured || v.unavailable.as_deref().is_some_and(|r| !r.is_empty()),
                "{v:?}"
            );
        }
        if !counters.has_hardware() {
            let why = sample.hardware_unavailable.expect("a reason");
            assert!(
                why.contains("PMU") || why.contains("paranoid") || why.contains("not"),
                "{why}"
            );
        }
    }

    /// Runs only where a PMU exists.
    #[test]
    fn hardware_counters_count_where_a_pmu_exists() {
        let mut counters = Counters::open(CounterScope::Thread);
        if !counters.has_hardware() {
            eprintln!(
                "skipped: {}",
                counters.hardware_unavailable().unwrap_or("no PMU")
            );
            return;
        }
        let (_, s) = counters.measure(|| busy_work(10_000_000));
        if let (Some(ins), Some(ipc)) = (s.value(CounterKind::Instructions), s.ipc()) {
            assert!(ins > 10_000_000, "{s:?}");
            assert!(ipc > 0.05 && ipc < 10.0, "{s:?}");
        }
    }
}
