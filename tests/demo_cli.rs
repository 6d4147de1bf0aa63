//! The README's main job: `ringscan demo` generates the default datasets, then answers
//! its queries through the daemon -> ring -> executor path, the second run of each from
//! the result cache.

mod common;

use common::cli::{ringscan, DaemonGuard};

#[test]
fn demo_generates_then_queries_through_the_daemon() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path();
    let _guard = DaemonGuard(data);
    let out = ringscan(&["demo"], data);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // The first query counts every bar generated.
    assert!(stdout.contains("100000"), "{stdout}");
    // Every query ran twice; the second came from the result cache.
    assert_eq!(stdout.matches("result cache hit").count(), 5, "{stdout}");
    // The daemon is up and served the scans.
    let status = ringscan(&["daemon", "status"], data);
    let status_text = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{status_text}");
    // Five queries, at least one scan each (the daemon counts every scan it served).
    let served: u32 = status_text
        .split(" served")
        .next()
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!((5..=10).contains(&served), "{status_text}");
    // A second demo regenerates nothing.
    let again = ringscan(&["demo"], data);
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stdout).contains("not regenerated"));
}
