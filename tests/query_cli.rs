//! `ringscan query`'s measurement flags: `--repeat`, `--warmup` and `--stats-json` (the
//! fields the benchmark harness and users read), through a daemon the query starts.

mod common;

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{Float64Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use serde_json::Value;

use common::cli::{ringscan, ringscan_with, succeeded, DaemonGuard};

fn write_table(data: &Path, rows: i64) {
    let dir = data.join("t");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("x", DataType::Float64, false),
    ]));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new((0..rows).collect::<Int64Array>()),
            Arc::new((0..rows).map(|k| k as f64 / 2.0).collect::<Float64Array>()),
        ],
    )
    .expect("batch");
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(1000))
        .build();
    let file = File::create(dir.join("a.parquet")).expect("create");
    let mut writer = ArrowWriter::try_new(file, schema, Some(props)).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
}

fn number(v: &Value, path: &[&str]) -> f64 {
    let mut at = v;
    for key in path {
        at = &at[*key];
    }
    at.as_f64()
        .unwrap_or_else(|| panic!("{} is not a number in {v}", path.join(".")))
}

/// A temporary directory holding an empty data directory `data` (both go when the
/// first value is dropped).
fn empty_data() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("data dir");
    (dir, data)
}

#[test]
fn stats_json_reports_the_timed_runs_of_a_warm_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    write_table(&data, 5000);
    let _guard = DaemonGuard(&data);
    let stats_path = dir.path().join("stats.json");
    // Through the ring (these 800 rows would otherwise come inline), to see it reused.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringscan"))
        .args([
            "query",
            "--no-cache",
            "--format",
            "csv",
            "--warmup",
            "2",
            "--repeat",
            "5",
            "--stats-json",
            stats_path.to_str().expect("utf-8"),
            "SELECT k, x FROM t WHERE k >= 4200",
            "--data",
        ])
        .arg(&data)
        .env("RINGSCAN_INLINE_BYTES", "0")
        .output()
        .expect("spawn ringscan");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The rows once, with a header.
    assert_eq!(stdout.lines().count(), 1 + 800, "{stdout}");
    assert_eq!(stdout.lines().next(), Some("k,x"));
    let stats: Value =
        serde_json::from_str(&std::fs::read_to_string(&stats_path).expect("stats")).expect("json");
    assert_eq!(stats["repeat"], 5);
    assert_eq!(stats["warmup"], 2);
    assert_eq!(stats["rows_returned"], 800);
    // Only the timed runs are in the percentiles.
    let samples = stats["latency_us"]["samples"].as_array().expect("samples");
    assert_eq!(samples.len(), 5, "{stats}");
    let (p50, p95, p99) = (
        number(&stats, &["latency_us", "p50"]),
        number(&stats, &["latency_us", "p95"]),
        number(&stats, &["latency_us", "p99"]),
    );
    assert!(0.0 < p50 && p50 <= p95 && p95 <= p99, "{stats}");
    assert!(number(&stats, &["latency_us", "mean"]) > 0.0);
    // Four of the five row groups are pruned by their statistics.
    assert_eq!(number(&stats, &["scan", "files_total"]), 1.0);
    assert_eq!(number(&stats, &["scan", "row_groups_total"]), 5.0);
    assert_eq!(number(&stats, &["scan", "row_groups_pruned"]), 4.0);
    assert_eq!(number(&stats, &["scan", "rows_emitted"]), 800.0);
    assert!(number(&stats, &["scan", "rows_decoded"]) >= 800.0);
    assert!(number(&stats, &["scan", "bytes_read"]) >= 0.0);
    assert!(number(&stats, &["scan", "pages_pruned"]) >= 0.0);
    // The warm-up filled the plan cache; the result cache was not used.
    assert_eq!(stats["cache"]["plan_hit"], true, "{stats}");
    assert_eq!(stats["cache"]["first_plan_hit"], true, "{stats}");
    assert_eq!(stats["cache"]["result_hit"], false, "{stats}");
    assert!(stats["counters"]["daemon"].is_object(), "{stats}");
    assert!(stats["counters"]["executor"].is_object(), "{stats}");
    // The session's timed scans reused its ring.
    let status = ringscan(&["daemon", "status"], &data);
    let text = String::from_utf8_lossy(&status.stdout);
    let reused: u32 = text
        .split(" on their session's ring")
        .next()
        .and_then(|head| head.rsplit('(').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(reused >= 4, "{text}");
}

/// Issue 17 (14): the state directory is private (0700: its log holds queries and
/// paths, its socket answers whoever reaches it), its files 0600, also when it existed
/// before with looser modes; the table name `.` (every table as one) is refused.
#[test]
fn state_directory_is_private_and_dot_is_not_a_table() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    write_table(data, 100);
    let state = data.join(".ringscan");
    std::fs::create_dir(&state).expect("mkdir");
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let _guard = DaemonGuard(data);
    let out = ringscan(&["query", "SELECT count(*) AS n FROM t"], data);
    assert!(out.status.success(), "{out:?}");
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(&state), 0o700, "state directory");
    for file in ["io.log", "io.lock", "runs.jsonl"] {
        assert_eq!(mode(&state.join(file)), 0o600, "{file}");
    }
    for sql in [
        "SELECT count(*) FROM \".\"",
        "SELECT count(*) FROM '.'",
        "SELECT count(*) FROM './'",
    ] {
        let out = ringscan(&["query", sql], data);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{sql}: {stderr}");
        assert!(
            stderr.contains("names the data directory itself"),
            "{sql}: {stderr}"
        );
    }
}

/// Issue 17 (12): SIGTERM stops the daemon as `daemon stop` does (socket removed, the
/// exit logged) instead of killing it with its socket left behind.
#[test]
fn sigterm_stops_the_daemon_cleanly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    write_table(data, 10);
    let _guard = DaemonGuard(data);
    let started = ringscan(&["daemon", "start"], data);
    assert!(started.status.success(), "{started:?}");
    let state = data.join(".ringscan");
    let pid = std::fs::read_to_string(state.join("io.lock")).expect("lock file");
    let pid = pid.trim();
    assert!(pid.parse::<u32>().is_ok(), "pid {pid:?}");
    assert!(state.join("io.sock").exists());
    let kill = std::process::Command::new("kill")
        .args(["-TERM", pid])
        .status()
        .expect("kill");
    assert!(kill.success());
    wait_for_daemon_exit(&state, "daemon exiting (SIGTERM or SIGINT)");
}

/// Waits (10 s at most) until the daemon of state directory `state` has removed its
/// socket and logged `line`.
fn wait_for_daemon_exit(state: &Path, line: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let log = std::fs::read_to_string(state.join("io.log")).unwrap_or_default();
        if log.contains(line) && !state.join("io.sock").exists() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the daemon did not exit with {line:?}: {log}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A daemon whose executable was replaced (a rebuild, an upgrade) exits once it has no
/// connection, so that the next client starts the new one instead of being served by
/// the old code.
#[test]
fn a_daemon_whose_executable_was_replaced_exits_when_idle() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    write_table(&data, 10);
    let exe = dir.path().join("ringscan");
    std::fs::copy(env!("CARGO_BIN_EXE_ringscan"), &exe).expect("copy the binary");
    let _guard = DaemonGuard(&data);
    let started = std::process::Command::new(&exe)
        .args(["daemon", "start", "--data"])
        .arg(&data)
        .output()
        .expect("daemon start");
    assert!(started.status.success(), "{started:?}");
    let state = data.join(".ringscan");
    // Still the same file a while later: the daemon serves on.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(state.join("io.sock").exists());
    // Replaced as cargo and package managers do: a new file renamed over the old.
    let fresh = dir.path().join("ringscan.new");
    std::fs::copy(env!("CARGO_BIN_EXE_ringscan"), &fresh).expect("copy");
    std::fs::rename(&fresh, &exe).expect("rename");
    wait_for_daemon_exit(&state, "exiting: the executable was replaced");
    // The next query starts a daemon of the new executable and answers.
    let out = ringscan(&["query", "SELECT count(*) AS n FROM t"], &data);
    assert!(out.status.success(), "{out:?}");
}

/// Issue 17 (5): a panic in the CLI (here on a worker thread, as a query's would be) is
/// one report that names it an internal error, and exit status 70, not Rust's default
/// panic text and status 101.
#[test]
fn a_panic_is_one_internal_error_report_and_status_70() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringscan"))
        .arg("__panic")
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("spawn ringscan");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(70), "{stderr}");
    assert!(
        stderr.starts_with("ringscan: internal error: thread 'worker' panicked at "),
        "{stderr}"
    );
    assert!(
        stderr.contains("deliberate panic for the test of the panic report"),
        "{stderr}"
    );
    assert!(stderr.contains("this is a bug in ringscan"), "{stderr}");
    assert_eq!(
        stderr.matches("panicked").count(),
        1,
        "reported once: {stderr}"
    );
}

/// Issue 17 (12): a daemon started in the background leads its own session (no
/// controlling terminal: the caller's terminal closing or a Ctrl-C there cannot reach
/// it).
#[test]
fn a_background_daemon_leads_its_own_session() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let _daemon = DaemonGuard(&data);
    let out = ringscan(&["daemon", "start"], &data);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let pid: u32 = stdout
        .split("(pid ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {stdout:?}"));
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    assert_eq!(fields[3], pid.to_string(), "session of the daemon: {stat}");
}

/// `ringscan ingest`: CSV, PostgreSQL text, JSON lines and Parquet files into a table
/// made by CREATE TABLE, each file all or nothing, read back by `ringscan query`.
#[test]
fn ingest_writes_files_of_four_formats_each_whole_or_not_at_all() {
    let (dir, data) = empty_data();
    let _guard = DaemonGuard(&data);
    let ok = |args: &[&str]| succeeded(args, &ringscan(args, &data));
    ok(&[
        "query",
        "CREATE TABLE t (id BIGINT PRIMARY KEY, name TEXT NOT NULL, px DOUBLE PRECISION)",
    ]);
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        path.display().to_string()
    };
    let csv = file("a.csv", "id,name,px\n1,\"a,b\",1.5\n2,c,\n");
    let tsv = file("b.tsv", "3\td\t\\N\n");
    let jsonl = file("c.jsonl", "{\"id\": 4, \"name\": \"e\", \"px\": 2.5}\n");
    let parquet = dir.path().join("d.parquet");
    {
        let schema = Arc::new(Schema::new(vec![
            Field::new("px", DataType::Float64, true),
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, false),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Float64Array::from(vec![9.0])),
                Arc::new(Int64Array::from(vec![5])),
                Arc::new(arrow_array::StringArray::from(vec!["f"])),
            ],
        )
        .expect("batch");
        let mut w = ArrowWriter::try_new(File::create(&parquet).expect("create"), schema, None)
            .expect("writer");
        w.write(&batch).expect("write");
        w.close().expect("close");
    }
    let parquet = parquet.display().to_string();
    ok(&["ingest", "--quiet", "t", &csv, &tsv, &jsonl, &parquet]);
    let got = ok(&[
        "query",
        "--format",
        "csv",
        "SELECT id, name, px FROM t ORDER BY id",
    ]);
    assert_eq!(
        got, "id,name,px\n1,\"a,b\",1.5\n2,c,\n3,d,\n4,e,2.5\n5,f,9.0\n",
        "{got}"
    );
    // A bad line names itself, and nothing of its file is written.
    let bad = file("bad.csv", "id,name,px\n10,x,1\n11,y,notanumber\n");
    let out = ringscan(&["ingest", "--quiet", "t", &bad], &data);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("line 3") && err.contains("\"px\""), "{err}");
    let null = file("null.csv", "id,name,px\n12,,1\n");
    let out = ringscan(&["ingest", "--quiet", "t", &null], &data);
    assert!(String::from_utf8_lossy(&out.stderr).contains("violates not-null"));
    let dup = file("dup.csv", "id,name,px\n13,z,1\n1,again,2\n");
    let out = ringscan(&["ingest", "--quiet", "t", &dup], &data);
    assert!(String::from_utf8_lossy(&out.stderr).contains("(id)=(1) already exists"));
    let n = ok(&["query", "--format", "csv", "SELECT count(*) AS n FROM t"]);
    assert_eq!(n, "n\n5\n", "a refused file wrote rows: {n}");
}

/// `ringscan ingest` of a file larger than it holds in memory (here 64 KiB, by
/// `RINGSCAN_STAGE_BYTES`): the rows go to the daemon in parts as they are read and
/// are committed whole; a bad row in a late part leaves nothing of its file.
#[test]
fn ingest_of_a_file_past_its_memory_bound_is_staged_in_parts_and_whole() {
    let (dir, data) = empty_data();
    let _guard = DaemonGuard(&data);
    let run = |args: &[&str]| ringscan_with(args, &data, &[("RINGSCAN_STAGE_BYTES", "65536")]);
    let ok = |args: &[&str]| succeeded(args, &run(args));
    ok(&[
        "query",
        "CREATE TABLE t (id BIGINT PRIMARY KEY, name TEXT NOT NULL)",
    ]);
    let file = |name: &str, ids: std::ops::Range<i64>, last: &str| {
        let mut text = String::from("id,name\n");
        for i in ids {
            text.push_str(&format!("{i},n{}\n", i % 13));
        }
        text.push_str(last);
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        path.display().to_string()
    };
    let big = file("big.csv", 0..150_000, "");
    ok(&["ingest", "--quiet", "t", &big]);
    let sum: i64 = (0..150_000).sum();
    let got = ok(&[
        "query",
        "--format",
        "csv",
        "SELECT count(*) AS n, sum(id) AS s FROM t",
    ]);
    assert_eq!(got, format!("n,s\n150000,{sum}\n"));
    let parquet = |suffix: &str| {
        std::fs::read_dir(data.join("t"))
            .expect("table dir")
            .filter(|e| {
                e.as_ref().is_ok_and(|e| {
                    common::cli::is_file_of(&e.file_name().to_string_lossy(), suffix)
                })
            })
            .count()
    };
    assert!(parquet(".parquet") > 1, "the file was not staged in parts");
    let dup = file("dup.csv", 200_000..350_000, "7,again\n");
    let out = run(&["ingest", "--quiet", "t", &dup]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("(id)=(7) already exists"),
        "{err}"
    );
    assert_eq!(parquet(".tmp"), 0, "a refused file left staged parts");
    let got = ok(&[
        "query",
        "--format",
        "csv",
        "SELECT count(*) AS n, sum(id) AS s FROM t",
    ]);
    assert_eq!(
        got,
        format!("n,s\n150000,{sum}\n"),
        "a refused file wrote rows"
    );
    // INSERT ... SELECT stages the query's rows as they come, whole or not at all.
    ok(&[
        "query",
        "CREATE TABLE t2 (id BIGINT PRIMARY KEY, name TEXT NOT NULL)",
    ]);
    ok(&["query", "INSERT INTO t2 VALUES (1100000, 'first')"]);
    let out = run(&["query", "INSERT INTO t2 SELECT id + 1000000, name FROM t"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("(id)=(1100000) already exists"),
        "{err}"
    );
    let count = |table: &str| {
        let sql = format!("SELECT count(*) AS n FROM {table}");
        ok(&["query", "--format", "csv", &sql])
    };
    assert_eq!(count("t2"), "n\n1\n");
    ok(&["query", "INSERT INTO t2 SELECT id + 2000000, name FROM t"]);
    assert_eq!(count("t2"), "n\n150001\n");
    let names: Vec<String> = std::fs::read_dir(data.join("t2"))
        .expect("t2")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().filter(|n| n.ends_with(".parquet")).count() > 1,
        "{names:?}"
    );
    assert!(
        !names.iter().any(|n| common::cli::is_file_of(n, ".tmp")),
        "{names:?}"
    );
    let got = ok(&[
        "query",
        "--format",
        "csv",
        "SELECT count(*) AS n FROM t2 a JOIN t b ON a.id = b.id + 2000000 AND a.name = b.name",
    ]);
    assert_eq!(got, "n\n150000\n", "the rows read back differ");
    // CREATE TABLE ... AS runs as an INSERT ... SELECT into the new table: staged too.
    ok(&[
        "query",
        "CREATE TABLE t3 AS SELECT id * 2 AS id2, name FROM t",
    ]);
    let got = ok(&[
        "query",
        "--format",
        "csv",
        "SELECT count(*) AS n, sum(id2) AS s FROM t3",
    ]);
    assert_eq!(got, format!("n,s\n150000,{}\n", 2 * sum));
    let files = std::fs::read_dir(data.join("t3")).expect("t3").flatten();
    let parquet = files.filter(|e| e.file_name().to_string_lossy().ends_with(".parquet"));
    assert!(parquet.count() > 1, "CREATE TABLE ... AS was not staged");
    // IF NOT EXISTS of an existing table runs nothing; a failing query leaves no table.
    ok(&[
        "query",
        "CREATE TABLE IF NOT EXISTS t3 AS SELECT 1 AS id2, 'x' AS name",
    ]);
    assert_eq!(count("t3"), "n\n150000\n");
    let out = run(&[
        "query",
        "CREATE TABLE t5 AS SELECT CAST(name AS INTEGER) AS x FROM t",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("Cannot cast string"),
        "{err}"
    );
    let out = run(&["query", "SELECT count(*) FROM t5"]);
    assert!(
        !out.status.success(),
        "a failed CREATE TABLE ... AS left its table"
    );
}

/// A full disk under a staged statement, simulated with a file-size limit on the daemon
/// (256 KiB: its staged part's Parquet file passes it; SIGXFSZ ignored, so the write
/// returns EFBIG instead of killing it): the file's statement fails with a message
/// naming the file and the cause, nothing of it is applied and no part is left, and
/// the daemon serves on.
#[test]
fn a_full_disk_under_a_staged_statement_fails_it_cleanly_and_the_daemon_serves_on() {
    let (dir, data) = empty_data();
    let _guard = DaemonGuard(&data);
    let csv = dir.path().join("big.csv");
    let mut text = String::from("id,name\n");
    for i in 0..200_000 {
        text.push_str(&format!("{i},name-{}\n", i * 7919 % 100_003));
    }
    std::fs::write(&csv, text).expect("write");
    // The daemon starts under the limit (the first command starts it) and keeps it.
    let limited = |args: &str| {
        let script = format!(
            "ulimit -f 256 && trap '' XFSZ && exec '{}' {args} --data '{}'",
            env!("CARGO_BIN_EXE_ringscan"),
            data.display()
        );
        std::process::Command::new("bash")
            .args(["-c", &script])
            .env("RINGSCAN_STAGE_BYTES", "2097152")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("bash")
    };
    let out = limited("query 'CREATE TABLE t (id BIGINT PRIMARY KEY, name TEXT NOT NULL)'");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = limited(&format!("ingest --quiet t '{}'", csv.display()));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the ingest went through a full disk: {err}"
    );
    assert!(
        err.contains("cannot write") && err.contains(".parquet") && err.contains("too large"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let names: Vec<String> = std::fs::read_dir(data.join("t"))
        .expect("t")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| n.ends_with(".parquet") || n.ends_with(".tmp")),
        "{names:?}"
    );
    // The same daemon answers, and takes a small statement (through its log).
    let out = ringscan(&["query", "INSERT INTO t VALUES (1, 'one')"], &data);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = ringscan(
        &["query", "--format", "csv", "SELECT count(*) AS n FROM t"],
        &data,
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "n\n1\n");
}

/// A statement whose parts come slower than the daemon's session idle timeout (here a
/// file fed through a named pipe with a pause of 2.5 s, the timeout 1 s) keeps its
/// parts: the daemon waits without a limit on a connection that holds some.
#[test]
fn staged_parts_outlast_the_session_idle_timeout() {
    let (dir, data) = empty_data();
    let log = std::fs::File::create(dir.path().join("daemon.log")).expect("log");
    let mut daemon = std::process::Command::new(env!("CARGO_BIN_EXE_ringscan"))
        .args(["daemon", "run", "--session-idle-timeout", "1s", "--data"])
        .arg(&data)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("daemon");
    let _guard = DaemonGuard(&data);
    let ready = std::time::Instant::now();
    while !ringscan(&["daemon", "status"], &data).status.success() {
        assert!(ready.elapsed().as_secs() < 20, "the daemon did not start");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let run = |args: &[&str]| ringscan_with(args, &data, &[("RINGSCAN_STAGE_BYTES", "65536")]);
    let out = run(&[
        "query",
        "CREATE TABLE t (id BIGINT PRIMARY KEY, name TEXT NOT NULL)",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fifo = dir.path().join("rows.csv");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            use std::io::Write;
            let mut pipe = std::fs::OpenOptions::new()
                .write(true)
                .open(&fifo)
                .expect("fifo");
            let rows = |range: std::ops::Range<i64>| -> String {
                range.map(|i| format!("{i},n{}\n", i % 13)).collect()
            };
            // Errors here mean the ingest stopped reading: its own failure says why.
            let _ = pipe.write_all(format!("id,name\n{}", rows(0..150_000)).as_bytes());
            let _ = pipe.flush();
            std::thread::sleep(std::time::Duration::from_millis(2500));
            let _ = pipe.write_all(rows(150_000..300_000).as_bytes());
        })
    };
    let out = run(&[
        "ingest",
        "--quiet",
        "--format",
        "csv",
        "t",
        &fifo.display().to_string(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    writer.join().expect("writer");
    let out = run(&["query", "--format", "csv", "SELECT count(*) AS n FROM t"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "n\n300000\n");
    let _ = ringscan(&["daemon", "stop"], &data);
    let _ = daemon.wait();
}
