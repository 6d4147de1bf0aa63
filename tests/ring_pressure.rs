//! Results larger than the scan's ring: the executor keeps batches zero-copy in the
//! ring, so a result (or a sort's input) that outgrows it must be copied out as it
//! arrives, or the daemon waits for space forever. Each query runs with a 1 MiB ring
//! over ~6 MiB of rows and must return exactly what a 64 MiB ring returns.

use std::fs::File;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn ringscan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ringscan"))
        .args(args)
        .env_remove("RINGSCAN_DATA")
        .output()
        .expect("run ringscan")
}

/// Stops the daemon of a data directory when the test ends, pass or fail.
struct DaemonGuard<'a>(&'a Path);

impl Drop for DaemonGuard<'_> {
    fn drop(&mut self) {
        let _ = ringscan(&["daemon", "stop", "--data", self.0.to_str().unwrap_or("")]);
    }
}

/// Runs one query; a query that has not finished in a minute (the daemon waiting for
/// ring space that never comes) is killed and fails the test instead of hanging it.
fn query(data: &Path, ring_mib: &str, sql: &str) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let (out_path, err_path) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringscan"))
        .args([
            "query",
            "--data",
            data.to_str().expect("utf8"),
            "--no-cache",
            "--format",
            "csv",
            "--ring-mib",
            ring_mib,
            sql,
        ])
        .env_remove("RINGSCAN_DATA")
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).expect("stdout file"))
        .stderr(File::create(&err_path).expect("stderr file"))
        .spawn()
        .expect("run ringscan");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{sql} (ring {ring_mib} MiB): no answer within 60 s (ring deadlock?)");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    assert!(status.success(), "{sql} (ring {ring_mib} MiB): {stderr}");
    std::fs::read_to_string(&out_path).expect("utf8 csv")
}

#[test]
fn results_larger_than_the_ring_are_complete_and_equal() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let table = data.join("ohlcv");
    let rows = 100_000;
    let out = ringscan(&[
        "generate",
        "ohlcv",
        "--rows",
        &rows.to_string(),
        "--out",
        table.to_str().expect("utf8"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _daemon = DaemonGuard(&data);

    // A plain result, a full sort and a large top-k: each keeps batches.
    for sql in [
        "SELECT * FROM ohlcv",
        "SELECT * FROM ohlcv ORDER BY close DESC, ts, symbol",
        "SELECT symbol, ts, volume FROM ohlcv ORDER BY volume, ts, symbol LIMIT 30000",
        "SELECT * FROM ohlcv WHERE volume > 10 LIMIT 90000 OFFSET 3",
    ] {
        let small = query(&data, "1", sql);
        let large = query(&data, "64", sql);
        assert!(small.lines().count() > 30_000, "{sql}: too few rows");
        assert_eq!(small, large, "{sql}: a 1 MiB ring changed the answer");
    }
    let all = query(&data, "1", "SELECT * FROM ohlcv");
    assert_eq!(all.lines().count(), rows + 1, "every row plus the header");
}

/// Writes `rows` rows of one `width`-byte string column `s` (each naming its row) and an
/// integer `k` to `<dir>/wide/part.parquet`.
fn write_wide_table(data: &Path, rows: usize, width: usize) {
    use std::sync::Arc;

    use arrow_array::{Int64Array, RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};

    let table = data.join("wide");
    std::fs::create_dir_all(&table).expect("table dir");
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("s", DataType::Utf8, false),
    ]));
    let file = File::create(table.join("part.parquet")).expect("parquet file");
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(file, Arc::clone(&schema), None).expect("writer");
    for start in (0..rows).step_by(1000) {
        let n = 1000.min(rows - start);
        let keys = Int64Array::from_iter_values((start..start + n).map(|i| i as i64));
        let texts = StringArray::from_iter_values((start..start + n).map(|i| {
            let head = format!("{i:08}");
            head.clone() + &"x".repeat(width - head.len())
        }));
        let batch =
            RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(keys), Arc::new(texts)])
                .expect("batch");
        writer.write(&batch).expect("write");
    }
    writer.close().expect("close");
}

/// Issue 17, items 2 and 3: rows of 2 KB, so that one batch of 8,192 rows is 16 MiB,
/// through a 1 MiB ring. A batch larger than the ring was `RecordTooLarge`; split, an
/// aggregate that keeps a few batches zero-copy while it waits for the next one hung
/// (the daemon waiting for space, the executor for the daemon). Every shape must give
/// what a 64 MiB ring gives, and the values the table was written with.
#[test]
fn wide_rows_through_a_small_ring_neither_fail_nor_hang() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let (rows, width) = (12_000, 2000);
    write_wide_table(&data, rows, width);
    let _daemon = DaemonGuard(&data);
    let aggregate = "SELECT max(length(s)) AS m, count(*) AS n, sum(k) AS total FROM wide";
    assert_eq!(
        query(&data, "1", aggregate),
        format!("m,n,total\n{width},{rows},{}\n", rows * (rows - 1) / 2)
    );
    for sql in [
        "SELECT count(DISTINCT s) AS d FROM wide",
        "SELECT k, length(s) AS len FROM wide ORDER BY s DESC LIMIT 3",
        "SELECT k, s FROM wide WHERE k % 1000 = 7",
        "SELECT * FROM wide",
    ] {
        // Without ORDER BY rows may come in any order: compared as sorted lines (and
        // without printing 2 KB strings on a mismatch).
        let lines = |csv: String| {
            let mut lines: Vec<String> = csv.lines().map(str::to_owned).collect();
            lines.sort_unstable();
            lines
        };
        let small = lines(query(&data, "1", sql));
        let large = lines(query(&data, "64", sql));
        assert!(small.len() > 1, "{sql}: no rows");
        assert!(
            small == large,
            "{sql}: a 1 MiB ring changed the answer ({} vs {} lines)",
            small.len(),
            large.len()
        );
    }
    let all = query(&data, "1", "SELECT * FROM wide");
    assert_eq!(all.lines().count(), rows + 1, "every row plus the header");
}

/// Issue 17, item 1: the daemon's rings share one budget of shared memory. A daemon
/// allowed 3 MiB gives a scan that asks for 64 MiB a smaller ring (the same answer),
/// and refuses a scan as busy, with the reason, when less than a useful ring is left.
#[test]
fn rings_are_bounded_by_the_daemons_shared_memory_budget() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    write_wide_table(&data, 3000, 500);
    let log = File::create(dir.path().join("daemon.log")).expect("log");
    let run = |budget: &str| {
        Command::new(env!("CARGO_BIN_EXE_ringscan"))
            .args(["daemon", "run", "--data", data.to_str().expect("utf8")])
            .args(["--ring-budget-mib", budget])
            .env_remove("RINGSCAN_DATA")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log.try_clone().expect("log"))
            .spawn()
            .expect("daemon run")
    };
    let wait_ready = || {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !ringscan(&["daemon", "status", "--data", data.to_str().expect("utf8")])
            .status
            .success()
        {
            assert!(Instant::now() < deadline, "the daemon did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let sql = "SELECT k, s FROM wide ORDER BY k";
    let mut daemon = run("3");
    let _guard = DaemonGuard(&data);
    wait_ready();
    let within_budget = query(&data, "64", sql);
    assert_eq!(within_budget.lines().count(), 3001);
    let _ = ringscan(&["daemon", "stop", "--data", data.to_str().expect("utf8")]);
    let _ = daemon.wait();

    let mut daemon = run("0");
    wait_ready();
    let out = Command::new(env!("CARGO_BIN_EXE_ringscan"))
        .args([
            "query",
            "--data",
            data.to_str().expect("utf8"),
            "--no-cache",
            sql,
        ])
        .env_remove("RINGSCAN_DATA")
        .stdin(Stdio::null())
        .output()
        .expect("query");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("busy: the scans' shared-memory rings"),
        "{stderr}"
    );
    let _ = ringscan(&["daemon", "stop", "--data", data.to_str().expect("utf8")]);
    let _ = daemon.wait();
}

/// A host's sessions each keep their last scan's ring for their next one (and a
/// 16-client soak of `ringscan serve` ran the budget out: clients were told "busy"
/// while every ring sat idle). A scan that finds the budget taken has the idle
/// connections give their rings up and waits for the room; their clients scan again
/// on a new connection.
#[test]
fn idle_kept_rings_are_given_up_for_a_scan_that_needs_the_budget() {
    use ringscan_ipc::client::DaemonClient;
    use ringscan_ipc::msg::{ScanRequest, ScanSource};

    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    write_wide_table(&data, 3000, 500);
    let log = File::create(dir.path().join("daemon.log")).expect("log");
    // Room for one ring (the smallest, 1 MiB: a 2 MiB budget's share per scan is less)
    // and its header page, and not for a second.
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_ringscan"))
        .args(["daemon", "run", "--data", data.to_str().expect("utf8")])
        .args(["--ring-budget-mib", "2"])
        .env_remove("RINGSCAN_DATA")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log.try_clone().expect("log"))
        .spawn()
        .expect("daemon run");
    let _guard = DaemonGuard(&data);
    let socket = ringscan_ipc::client::socket_path(&data);
    let deadline = Instant::now() + Duration::from_secs(20);
    let connect = || loop {
        match DaemonClient::connect(&socket) {
            Ok(c) => return c,
            Err(e) => {
                assert!(Instant::now() < deadline, "no daemon: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    let mut request = ScanRequest::new(ScanSource::Table {
        name: "wide".into(),
    });
    request.ring_capacity_bytes = 4 << 20;
    let daemon_log = dir.path().join("daemon.log");
    let scan = |client: &DaemonClient| -> u64 {
        let mut stream = client.scan(&request).unwrap_or_else(|e| {
            let log = std::fs::read_to_string(&daemon_log).unwrap_or_default();
            let io_log = std::fs::read_to_string(data.join(".ringscan/io.log")).unwrap_or_default();
            panic!("scan: {e}\n{log}\n{io_log}")
        });
        let mut rows = 0;
        while let Some(batch) = stream.next_batch().expect("batch") {
            rows += batch.num_rows() as u64;
        }
        stream.finish().expect("summary");
        rows
    };
    let (a, b) = (connect(), connect());
    // a's scan ends and keeps its connection and ring; b's needs a's ring.
    assert_eq!(scan(&a), 3000);
    assert_eq!(scan(&b), 3000);
    // Now a's kept connection is gone and b keeps the ring: a scans again on a new one.
    assert_eq!(scan(&a), 3000);
    assert_eq!(scan(&b), 3000);
    let _ = ringscan(&["daemon", "stop", "--data", data.to_str().expect("utf8")]);
    let _ = daemon.wait();
}
