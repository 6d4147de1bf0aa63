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
