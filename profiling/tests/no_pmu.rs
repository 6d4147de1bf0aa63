//! What a run record says on this machine: software counters real, hardware counters
//! either measured or marked unavailable with a reason (never a failure).

use ringscan_profiling::{append_record, read_records, runs_path, CounterKind, RunRecorder};

#[test]
fn record_keeps_software_counters_and_explains_missing_hardware() {
    let recorder = RunRecorder::start("no-pmu-test", vec![]);
    // Busy work on a thread spawned after the recorder: inherited counters must see it.
    let handle = std::thread::spawn(|| {
        let mut v = vec![0u8; 32 << 20];
        for i in (0..v.len()).step_by(4096) {
            v[i] = 1;
        }
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        x
    });
    handle.join().expect("thread");
    let record = recorder.finish(serde_json::Map::new());

    let task_clock = record
        .counters
        .value(CounterKind::TaskClock)
        .expect("task clock");
    assert!(task_clock > 1_000_000, "task clock {task_clock} ns");
    let faults = record
        .counters
        .value(CounterKind::PageFaults)
        .expect("page faults");
    assert!(faults >= 8192, "{faults} faults for 32 MiB of fresh pages");
    assert!(record
        .counters
        .get(CounterKind::ContextSwitches)
        .is_some_and(|v| v.measured));
    assert!(record.cpu_user_ns + record.cpu_system_ns > 0);
    assert!(record.peak_rss_bytes >= 32 << 20);

    let hardware: Vec<_> = record
        .counters
        .values
        .iter()
        .filter(|v| v.kind.is_hardware())
        .collect();
    assert_eq!(hardware.len(), 7);
    let line = record.summary_line();
    if hardware.iter().all(|v| !v.measured) {
        let why = record
            .counters
            .hardware_unavailable
            .as_deref()
            .expect("a reason");
        assert!(!why.is_empty());
        for v in &hardware {
            assert_eq!(v.value, None);
            assert!(
                v.unavailable.as_deref().is_some_and(|r| !r.is_empty()),
                "{v:?}"
            );
        }
        // Said once, in the summary line.
        assert_eq!(
            line.matches("hardware counters unavailable").count(),
            1,
            "{line}"
        );
    } else {
        eprintln!("PMU present: {line}");
    }

    // The reason survives the round trip through the runs file.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = runs_path(dir.path());
    append_record(&path, &record).expect("append");
    let back = read_records(&path).expect("read");
    assert_eq!(back, vec![record]);
}
