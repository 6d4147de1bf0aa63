//! Several processes appending to one runs file leave only whole lines.
//!
//! The test binary re-executes itself: with `RINGSCAN_APPEND_CHILD` set, the child test
//! appends records instead of spawning.

use std::path::Path;
use std::process::Command;

use ringscan_profiling::{append_record, read_records_counted, RunRecorder};

const CHILD_ENV: &str = "RINGSCAN_APPEND_CHILD";
const PROCESSES: usize = 6;
const RECORDS_PER_PROCESS: usize = 40;

fn append_many(path: &Path, writer: usize) {
    let template = RunRecorder::start("append-test", vec![format!("writer={writer}")]);
    let mut figures = serde_json::Map::new();
    // ~16 KiB lines: far past any single-page buffering, so a torn write would show.
    figures.insert("padding".into(), "x".repeat(16 * 1024).into());
    figures.insert("writer".into(), writer.into());
    let base = template.finish(figures);
    for n in 0..RECORDS_PER_PROCESS {
        let mut rec = base.clone();
        rec.run_id = format!("{}-w{writer}-n{n}", base.run_id);
        rec.figures.insert("n".into(), n.into());
        append_record(path, &rec).expect("append");
    }
}

#[test]
fn concurrent_processes_leave_whole_lines() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        let (writer, path) = spec.split_once(':').expect("writer:path");
        append_many(Path::new(path), writer.parse().expect("writer"));
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("data/.ringscan/runs.jsonl");
    let exe = std::env::current_exe().expect("current exe");
    let children: Vec<_> = (0..PROCESSES)
        .map(|w| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "concurrent_processes_leave_whole_lines",
                    "--nocapture",
                ])
                .env(CHILD_ENV, format!("{w}:{}", path.display()))
                .spawn()
                .expect("spawn child")
        })
        .collect();
    // Threads in this process too, racing the children.
    std::thread::scope(|s| {
        for w in PROCESSES..PROCESSES + 2 {
            let path = &path;
            s.spawn(move || append_many(path, w));
        }
    });
    for mut child in children {
        assert!(child.wait().expect("wait").success(), "a child failed");
    }
    let read = read_records_counted(&path).expect("read");
    assert_eq!(read.malformed_lines, 0, "torn or interleaved lines");
    assert_eq!(read.records.len(), (PROCESSES + 2) * RECORDS_PER_PROCESS);
    let text = std::fs::read_to_string(&path).expect("read text");
    assert!(text.ends_with('\n'));
    for w in 0..PROCESSES + 2 {
        let mine: Vec<u64> = read
            .records
            .iter()
            .filter(|r| r.figures.get("writer").and_then(|v| v.as_u64()) == Some(w as u64))
            .filter_map(|r| r.figures.get("n").and_then(|v| v.as_u64()))
            .collect();
        // One writer's lines stay in its own order.
        let expected: Vec<u64> = (0..RECORDS_PER_PROCESS as u64).collect();
        assert_eq!(mine, expected, "writer {w}");
    }
}
