//! `ringscan bench <suite>` end to end on small tables: data generated on first use,
//! the baseline and ringscan sides measured in their own processes with equal answers,
//! the scenario list exported for the compare script.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn ringscan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ringscan"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run ringscan")
}

/// Stops the suite's daemon whatever the test did (`ringscan bench` stops it too; this
/// makes sure no test leaves one behind).
struct DaemonGuard(std::path::PathBuf);

impl Drop for DaemonGuard {
    fn drop(&mut self) {
        let _ = ringscan(&["daemon", "stop", "--data", self.0.to_str().unwrap_or("")]);
    }
}

fn json_of(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("read json")).expect("parse json")
}

#[test]
fn pushdown_runs_both_sides_with_equal_answers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("bench");
    let _daemon = DaemonGuard(data.join("pushdown"));
    let report = dir.path().join("pushdown.json");
    let data_s = data.to_str().expect("utf8");
    let out = ringscan(&[
        "bench",
        "pushdown",
        "--data",
        data_s,
        "--rows",
        "8000",
        "--repeat",
        "3",
        "--warmup",
        "1",
        "--json",
        report.to_str().expect("utf8"),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("could not run"), "{stderr}");
    let report = json_of(&report);
    let results = report["results"].as_array().expect("results");
    assert_eq!(results.len(), 6);
    for r in results {
        let baseline = &r["sides"][0];
        assert_eq!(baseline["side"], "baseline");
        assert!(baseline["error"].is_null(), "{baseline}");
        assert_eq!(baseline["latency"]["n"], 3);
        assert!(baseline["peak_rss_bytes"].as_u64().expect("rss") > 0);
        let ringscan = &r["sides"][1];
        assert_eq!(ringscan["side"], "ringscan");
        assert!(ringscan["error"].is_null(), "{ringscan}");
        assert_eq!(ringscan["rows"], baseline["rows"], "{}", r["name"]);
    }
    // 90% filtered keeps about a tenth of the bars; no filter keeps all of them.
    let rows = |name: &str| {
        results.iter().find(|r| r["name"] == name).expect(name)["sides"][0]["rows"]
            .as_u64()
            .expect("rows")
    };
    assert_eq!(rows("no_filter"), 8000);
    assert!(
        (600..=1000).contains(&rows("filter_90")),
        "{}",
        rows("filter_90")
    );
    assert!(rows("filter_50") > rows("filter_90") && rows("filter_10") > rows("filter_50"));
    assert_eq!(rows("cache_hit"), rows("filter_90"));

    // Second use: the data is reused, and the scenario list is what the script reads.
    let out = ringscan(&[
        "bench",
        "pushdown",
        "--data",
        data_s,
        "--rows",
        "8000",
        "--list-json",
    ]);
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("generating"));
    let spec: Value = serde_json::from_slice(&out.stdout).expect("list json");
    assert_eq!(spec["scenarios"].as_array().expect("scenarios").len(), 6);
    assert!(spec["scenarios"][0]["sql"]
        .as_str()
        .expect("sql")
        .starts_with("SELECT * FROM ohlcv WHERE close >= "));
    assert!(Path::new(spec["data_dir"].as_str().expect("dir"))
        .join("ohlcv")
        .is_dir());
}

#[test]
fn an_unknown_scenario_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = ringscan(&[
        "bench",
        "pushdown",
        "--data",
        dir.path().to_str().expect("utf8"),
        "--rows",
        "2000",
        "--only",
        "nope",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown scenario \"nope\""));
}
