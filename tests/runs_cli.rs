//! `ringscan runs`: the table, JSON output, comparisons, and the friendly failures.

use std::path::Path;
use std::process::{Command, Output};

use ringscan_profiling::{append_record, runs_path, RunRecord, RunRecorder};

fn ringscan(args: &[&str], data_env: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringscan"));
    cmd.arg("runs").args(args).env_remove("RINGSCAN_DATA");
    if let Some(dir) = data_env {
        cmd.env("RINGSCAN_DATA", dir);
    }
    cmd.output().expect("run ringscan")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn record(command: &str, rows: u64, wall_ns: u64) -> RunRecord {
    let mut figures = serde_json::Map::new();
    figures.insert("rows".into(), rows.into());
    let mut rec =
        RunRecorder::start(command, vec!["--rows".into(), rows.to_string()]).finish(figures);
    rec.wall_ns = wall_ns;
    rec.run_id = format!("20260101-00000{rows}-1");
    rec
}

fn data_with_runs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = runs_path(dir.path());
    append_record(&path, &record("generate", 1, 1_000_000_000)).expect("append");
    append_record(&path, &record("query", 2, 500_000_000)).expect("append");
    append_record(&path, &record("query", 3, 250_000_000)).expect("append");
    dir
}

#[test]
fn table_lists_recent_runs() {
    let dir = data_with_runs();
    let out = ringscan(&["--data", dir.path().to_str().expect("utf-8")], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("RUN ID"), "{stdout}");
    for col in ["WALL", "IPC", "CACHE-MISS", "BRANCH-MISS", "ROWS/S"] {
        assert!(stdout.contains(col), "{stdout}");
    }
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.starts_with("20260101-"))
            .count(),
        3,
        "{stdout}"
    );

    let out = ringscan(&["--last", "1"], Some(dir.path()));
    let stdout = text(&out.stdout);
    assert!(out.status.success());
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("20260101-"))
        .collect();
    assert_eq!(rows.len(), 1, "{stdout}");
    assert!(rows[0].contains("query --rows 3"), "{stdout}");
    // 3 rows in 0.25 s.
    assert!(rows[0].trim_end().ends_with("12"), "{stdout}");
}

#[test]
fn json_prints_whole_records() {
    let dir = data_with_runs();
    let file = runs_path(dir.path());
    let out = ringscan(
        &[
            "--json",
            "--last",
            "2",
            "--runs",
            file.to_str().expect("utf-8"),
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let records: Vec<RunRecord> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a record per line"))
        .collect();
    assert_eq!(records.len(), 2);
    assert_eq!(records[1].run_id, "20260101-000003-1");
}

#[test]
fn compare_shows_ratio_of_every_figure() {
    let dir = data_with_runs();
    let out = ringscan(&["--compare", "~2", "20260101-000003"], Some(dir.path()));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let wall = stdout
        .lines()
        .find(|l| l.starts_with("wall (s)"))
        .expect("wall line");
    assert!(wall.trim_end().ends_with("0.500"), "{stdout}");
    let rows = stdout
        .lines()
        .find(|l| l.starts_with("figure: rows"))
        .expect("rows");
    assert!(rows.trim_end().ends_with("1.500"), "{stdout}");
    assert!(stdout.contains("task-clock"), "{stdout}");
}

#[test]
fn unknown_run_is_a_clear_error() {
    let dir = data_with_runs();
    let out = ringscan(&["--compare", "~1", "nope"], Some(dir.path()));
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("no run matches \"nope\""), "{stderr}");
    assert!(stderr.contains("runs.jsonl"), "{stderr}");
}

#[test]
fn missing_runs_file_is_not_a_failure() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = ringscan(&["--data", dir.path().to_str().expect("utf-8")], None);
    assert!(out.status.success());
    assert!(
        text(&out.stderr).contains("no runs recorded yet"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn malformed_lines_are_skipped_with_a_note() {
    let dir = data_with_runs();
    let path = runs_path(dir.path());
    let mut content = std::fs::read_to_string(&path).expect("read");
    content.push_str("{\"torn\n");
    std::fs::write(&path, content).expect("write");
    append_record(&path, &record("query", 4, 1)).expect("append");
    let out = ringscan(&[], Some(dir.path()));
    assert!(out.status.success());
    assert!(
        text(&out.stderr).contains("skipped 1 malformed line"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        text(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("20260101-"))
            .count(),
        4
    );
}
