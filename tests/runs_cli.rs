//! `ringscan runs`: the table, JSON output, comparisons, and the friendly failures.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use ringscan_profiling::{
    append_record, read_records, runs_path, CounterKind, RunRecord, RunRecorder,
};

use common::cli::DaemonGuard;

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

/// A table `t` of one file: `k` 0..rows in row groups of 1,000.
fn write_table(data: &Path, rows: i64) {
    let dir = data.join("t");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![Arc::new((0..rows).collect::<Int64Array>())],
    )
    .expect("batch");
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(1000))
        .build();
    let file = std::fs::File::create(dir.join("a.parquet")).expect("create");
    let mut writer = ArrowWriter::try_new(file, schema, Some(props)).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
}

fn query(data: &Path, args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_ringscan"))
        .arg("query")
        .args(args)
        .arg("--data")
        .arg(data)
        .env_remove("RINGSCAN_DATA")
        .output()
        .expect("spawn ringscan");
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// Issue 21 (7): a query's record holds the executor's counters and, labelled as the
/// IO daemon's, the daemon's counters over the query's scans, summed over every scan
/// (a self-join scans twice); `ringscan runs` shows both.
#[test]
fn query_record_joins_the_daemons_counters() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    write_table(data, 20_000);
    let _guard = DaemonGuard(data);
    query(
        data,
        &["--no-cache", "SELECT sum(k) FROM t WHERE k % 3 = 0"],
    );
    query(
        data,
        &[
            "--no-cache",
            "--repeat",
            "2",
            "SELECT count(*) FROM t a JOIN t b ON a.k = b.k WHERE a.k % 2 = 0",
        ],
    );
    let records = read_records(&runs_path(data)).expect("records");
    let queries: Vec<&RunRecord> = records.iter().filter(|r| r.command == "query").collect();
    assert_eq!(queries.len(), 2, "{records:#?}");
    for (record, scans) in queries.iter().zip([1, 4]) {
        let executor_ns = record.counters.value(CounterKind::TaskClock);
        assert!(executor_ns.is_some_and(|ns| ns > 0), "{record:#?}");
        let daemon = record.daemon_stage().expect("the daemon's stage");
        assert_eq!(daemon.process.as_deref(), Some("io-daemon"));
        assert_eq!(daemon.figures["scans"], scans, "{daemon:#?}");
        let daemon_ns = daemon.counters.value(CounterKind::TaskClock);
        // Each scan decoded row groups: the daemon's threads ran, for under the
        // query's wall time on each of the machine's CPUs.
        assert!(daemon_ns.is_some_and(|ns| ns > 0), "{daemon:#?}");
        let cpus = u64::try_from(record.host.cores.max(1)).expect("cores");
        assert!(
            daemon_ns.is_some_and(|ns| ns < record.wall_ns * cpus * 2),
            "daemon task clock {daemon_ns:?} ns over a {} ns query",
            record.wall_ns
        );
        assert_eq!(daemon.counters.values.len(), CounterKind::ALL.len());
    }

    let out = ringscan(&["--last", "2"], Some(data));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("DAEMON CPU"), "{stdout}");
    assert!(stdout.contains("IO daemon's scans"), "{stdout}");
    let out = ringscan(&["--compare", "~2", "~1"], Some(data));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let line = stdout
        .lines()
        .find(|l| l.starts_with("io-daemon: scans"))
        .unwrap_or_else(|| panic!("no daemon scans line: {stdout}"));
    assert!(line.trim_end().ends_with("4.000"), "{line}");
    assert!(stdout.contains("io-daemon: task-clock"), "{stdout}");
}
