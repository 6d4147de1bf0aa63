//! Reproducer for issue 21's flaky run record (`tests/no_pmu.rs`: 2 page faults for
//! 8,192 fresh pages): which layouts of inherited software counters read a thread that
//! has just been joined in full.
//!
//! Trials: open inherited counters on this thread, spawn a thread that touches 2,048
//! fresh pages, join it, read at once; a trial misses when fewer than 2,048 page faults
//! are read, fails when the read fails. Then churn: another thread spawns and joins
//! page-touching threads without pause while this one reads the page faults 100,000
//! times; a read fails, or goes back (the count fell below an earlier read).
//!
//! Layouts:
//! - `task-clock-led`: page faults in a group under task clock, read in one group read
//!   (what the reverted change did);
//! - `software-group`: page faults leading context switches, one group read;
//! - `alone`: page faults opened and read on its own (what `CounterScope::Process`
//!   does now with every software event).
//!
//! `cargo run --release -p ringscan-profiling --example inherit_race -- [TRIALS]`;
//! results in benches/results/counters.md.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use perf_event::events::Software;
use perf_event::{Builder, Counter, ReadFormat};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Layout {
    TaskClockLed,
    SoftwareGroup,
    Alone,
}

const PAGES: u64 = 2048;

/// The counters of one layout, read through the leader (a group read when grouped).
struct Open {
    leader: Counter,
    member: Option<Counter>,
    /// Page faults is the member (else the leader).
    faults_is_member: bool,
    grouped: bool,
}

fn open(layout: Layout) -> io::Result<Open> {
    let build = |event: Software, leader: Option<&mut Counter>, group_format: bool| {
        let times = ReadFormat::TOTAL_TIME_ENABLED | ReadFormat::TOTAL_TIME_RUNNING;
        let mut b = Builder::new(event);
        b.inherit(true).enabled(false).exclude_hv(true);
        b.read_format(if group_format {
            times | ReadFormat::GROUP
        } else {
            times
        });
        match leader {
            Some(l) => b.build_with_group(l),
            None => b.build(),
        }
    };
    let mut open = match layout {
        Layout::TaskClockLed => {
            let mut leader = build(Software::TASK_CLOCK, None, true)?;
            let faults = build(Software::PAGE_FAULTS, Some(&mut leader), true)?;
            Open {
                leader,
                member: Some(faults),
                faults_is_member: true,
                grouped: true,
            }
        }
        Layout::SoftwareGroup => {
            let mut leader = build(Software::PAGE_FAULTS, None, true)?;
            let switches = build(Software::CONTEXT_SWITCHES, Some(&mut leader), true)?;
            Open {
                leader,
                member: Some(switches),
                faults_is_member: false,
                grouped: true,
            }
        }
        Layout::Alone => Open {
            leader: build(Software::PAGE_FAULTS, None, false)?,
            member: None,
            faults_is_member: false,
            grouped: false,
        },
    };
    open.leader.enable_group()?;
    Ok(open)
}

impl Open {
    fn faults(&mut self) -> io::Result<u64> {
        if !self.grouped {
            return self.leader.read();
        }
        let data = self.leader.read_group()?;
        let faults = match &self.member {
            Some(member) if self.faults_is_member => member,
            _ => &self.leader,
        };
        data.get(faults)
            .map(|e| e.value())
            .ok_or_else(|| io::Error::other("no page-fault entry"))
    }
}

/// Touches `PAGES` pages never touched before (every 4th page of 32 MiB + 4 KiB:
/// above glibc's largest mmap threshold, so each call maps new memory rather than
/// reusing a freed heap whose pages are already there).
fn touch_pages() {
    let mut v = vec![0u8; (32 << 20) + 4096];
    for i in (0..PAGES as usize).map(|p| p * 4 * 4096) {
        v[i] = 1;
    }
    std::hint::black_box(&v);
}

fn main() -> io::Result<()> {
    let trials: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    for layout in [Layout::TaskClockLed, Layout::SoftwareGroup, Layout::Alone] {
        let (mut missed, mut failed, mut fewest) = (0, 0, u64::MAX);
        for _ in 0..trials {
            let mut counters = open(layout)?;
            let before = counters.faults()?;
            std::thread::spawn(touch_pages)
                .join()
                .map_err(|_| io::Error::other("thread panicked"))?;
            match counters.faults() {
                Ok(after) => {
                    let faults = after - before;
                    fewest = fewest.min(faults);
                    missed += usize::from(faults < PAGES);
                }
                Err(_) => failed += 1,
            }
        }
        let mut counters = open(layout)?;
        let stop = AtomicBool::new(false);
        let (mut back, mut refused, mut last) = (0, 0, 0);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let _ = std::thread::spawn(touch_pages).join();
                }
            });
            for _ in 0..100_000 {
                match counters.faults() {
                    Ok(f) if f < last => back += 1,
                    Ok(f) => last = f,
                    Err(_) => refused += 1,
                }
            }
            // Relaxed: a flag to stop, guarding no data.
            stop.store(true, Ordering::Relaxed);
        });
        println!(
            "{layout:?}: after a join, {missed} of {trials} trials missed the thread's \
             {PAGES} faults (fewest {fewest}), {failed} reads failed; under churn, \
             {refused} of 100000 reads failed, {back} went back"
        );
    }
    Ok(())
}
