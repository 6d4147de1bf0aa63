//! Differential tests: ringscan's answers against DuckDB's, on the same files.
//!
//! `tests/differential/corpus.sql` holds the queries; `make_data.py` writes Parquet with
//! pyarrow and DuckDB (row-group sizes, codecs, dictionary on and off, NULLs) beside the
//! generator's datasets; `check.py` runs each query through the `ringscan query` binary
//! (daemon -> ring -> executor, as a user runs it) and through DuckDB and compares.
//! Also here: the refusal paths of `ringscan query`, each with its message.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

mod common;

use common::python::python_or_skip;

fn ringscan() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ringscan"))
}

/// Stops the daemon of a data directory when dropped, whatever the test did.
struct DaemonGuard(PathBuf);

impl Drop for DaemonGuard {
    fn drop(&mut self) {
        let _ = ringscan()
            .args(["daemon", "stop", "--data"])
            .arg(&self.0)
            .output();
    }
}

/// The corpus tests share one data directory (and its daemon) and run at once: the last
/// to finish stops the daemon. The count's lock is held while stopping, so that a test
/// starting then waits and its first query starts a fresh daemon.
struct SharedDaemon(&'static Path);

static SHARED_USERS: std::sync::Mutex<usize> = std::sync::Mutex::new(0);

impl SharedDaemon {
    fn enter(data: &'static Path) -> Self {
        *SHARED_USERS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) += 1;
        Self(data)
    }
}

impl Drop for SharedDaemon {
    fn drop(&mut self) {
        let mut users = SHARED_USERS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *users -= 1;
        if *users == 0 {
            drop(DaemonGuard(self.0.to_path_buf()));
        }
    }
}

fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("spawn ringscan");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The corpus's data directory, made once per test binary.
fn data_dir(python: &Path) -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let gen = |dataset: &str, rows: &str, out: &str, extra: &[&str]| {
            run_ok(
                ringscan()
                    .args(["generate", dataset, "--rows", rows, "--quiet", "--out"])
                    .arg(dir.path().join(out))
                    .args(extra),
            );
        };
        gen(
            "ohlcv",
            "100000",
            "ohlcv",
            &["--row-group-rows", "10000", "--writers", "2"],
        );
        gen(
            "ohlcv",
            "50000",
            "ohlcv_part",
            &["--row-group-rows", "4096", "--partition-by", "symbol"],
        );
        gen(
            "wide",
            "50000",
            "wide",
            &["--row-group-rows", "8192", "--writers", "2"],
        );
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/differential/make_data.py");
        run_ok(Command::new(python).arg(script).arg(dir.path()));
        dir
    })
    .path()
}

/// Runs `corpus` through `ringscan query` and DuckDB; asserts that every query agrees
/// and that the corpus holds at least `min_queries`.
fn corpus_agrees(test: &str, corpus: &str, min_queries: u64) {
    let Some(python) = python_or_skip(test) else {
        return;
    };
    let data = data_dir(python);
    let _daemon = SharedDaemon::enter(data);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cmd = Command::new(python);
    cmd.arg(root.join("tests/differential/check.py"))
        .arg(env!("CARGO_BIN_EXE_ringscan"))
        .arg(data)
        .arg(root.join("tests/differential").join(corpus));
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{corpus} mismatches:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_str(stdout.lines().last().unwrap_or("{}")).unwrap();
    assert!(
        summary["queries"].as_u64().unwrap() >= min_queries,
        "{summary}"
    );
    assert_eq!(summary["failures"], 0, "{stdout}");
}

#[test]
fn corpus_matches_duckdb() {
    corpus_agrees("corpus_matches_duckdb", "corpus.sql", 100);
}

#[test]
fn full_sql_corpus_matches_duckdb() {
    corpus_agrees("full_sql_corpus_matches_duckdb", "corpus_full_sql.sql", 50);
}

/// `ringscan query` on `data` must fail with exit 1 and a message containing `needle`.
fn refused(data: &Path, sql: &str, needle: &str) {
    let out = ringscan()
        .args(["query", "--data"])
        .arg(data)
        .arg(sql)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{sql}: {stderr}");
    assert!(
        stderr.contains(needle),
        "{sql}: expected {needle:?} in {stderr:?}"
    );
    assert!(!stderr.contains("panicked"), "{sql}: {stderr}");
    // One message, not a chain repeating it, and no appeal to report a bug upstream.
    assert!(!stderr.contains("caused by"), "{sql}: {stderr}");
    assert!(!stderr.contains("bug report"), "{sql}: {stderr}");
}

#[test]
fn refusals_name_the_construct() {
    let dir = tempfile::tempdir().unwrap();
    run_ok(
        ringscan()
            .args(["generate", "ohlcv", "--rows", "2000", "--quiet", "--out"])
            .arg(dir.path().join("ohlcv")),
    );
    let _daemon = DaemonGuard(dir.path().to_path_buf());
    let data = dir.path();
    refused(data, "SELECT clos FROM ohlcv", "No field named clos");
    refused(
        data,
        "SELECT clos FROM ohlcv",
        "Did you mean 'ohlcv.close'?",
    );
    refused(data, "SELECT * FROM ohlvc", "no table \"ohlvc\"");
    refused(data, "SELECT * FROM ohlvc", "did you mean \"ohlcv\"?");
    let missing = data.join("no-such-dir");
    let out = ringscan()
        .args(["query", "--data"])
        .arg(&missing)
        .arg("SELECT 1 FROM t")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
    refused(data, "SELECT symbol FROM ohlcv GROUP BY", "SQL syntax");
    refused(data, "DELETE FROM ohlcv", "unsupported: DELETE");
    // Files written by others are read-only; a table of that name exists.
    refused(
        data,
        "INSERT INTO ohlcv SELECT * FROM ohlcv",
        "table \"ohlcv\" was not created by ringscan",
    );
    refused(
        data,
        "CREATE TABLE ohlcv (a INT)",
        "relation \"ohlcv\" already exists",
    );
    refused(
        data,
        "CREATE TABLE x (a INT[])",
        "type INT[] is not supported",
    );
    refused(data, "COPY ohlcv TO 'x.csv'", "unsupported: COPY");
    refused(data, "SELECT close + symbol FROM ohlcv", "Float64 + Utf8");
    refused(
        data,
        "SELECT * FROM 'nowhere/*.parquet'",
        "\"nowhere/*.parquet\" matches no file",
    );
    refused(
        data,
        "SELECT sum(symbol) FROM ohlcv",
        "no function sum(Utf8)",
    );
    refused(
        data,
        "SELECT nosuchfn(close) FROM ohlcv",
        "Invalid function 'nosuchfn'",
    );
    refused(
        data,
        "SELECT symbol, close FROM ohlcv GROUP BY symbol",
        "\"ohlcv.close\" must appear in the GROUP BY clause",
    );
}

/// TPC-H at scale factor 0.1: the 22 queries through `ringscan query` against DuckDB on
/// the same tpchgen-cli files (benches/tpch/run.py's answer check).
#[test]
fn tpch_sf01_matches_duckdb() {
    let Some(python) = python_or_skip("tpch_sf01_matches_duckdb") else {
        return;
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let data = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tpch-sf0.1");
    let _daemon = DaemonGuard(data.clone());
    let out = Command::new(python)
        .arg(root.join("benches/tpch/run.py"))
        .args(["--sf", "0.1", "--check-only", "--ringscan"])
        .arg(env!("CARGO_BIN_EXE_ringscan"))
        .arg("--data")
        .arg(&data)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "TPC-H SF 0.1:\n{stdout}\n{stderr}");
    assert!(
        stderr.contains("tpch: 22 equal, 0 differ, 0 failed"),
        "{stdout}\n{stderr}"
    );
}
