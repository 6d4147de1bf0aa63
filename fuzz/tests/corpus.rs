//! Replays the committed corpus through every target: the regression tests of
//! everything a fuzz run ever found (its inputs are kept in the corpus), and a check
//! that the seeds still reach what they were made to reach.

use std::path::{Path, PathBuf};

// `scripts/fuzz` builds this test (and with it the driver) with the `libfuzzer` feature
// and ringscan's crates instrumented: libFuzzer's runtime then provides the coverage
// hooks they call, so it must be linked here too.
#[cfg(feature = "libfuzzer")]
use libfuzzer_sys as _;

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target)
}

fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = corpus_dir(target);
    let mut out: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("a corpus entry").path();
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path, bytes)
        })
        .collect();
    out.sort();
    out
}

/// Every corpus input runs through its target without a panic (each target returns
/// for every input, whatever it is).
fn replay(target: &str) {
    let run = ringscan_fuzz::target(target).expect("a known target");
    let inputs = inputs(target);
    assert!(!inputs.is_empty(), "the {target} corpus is empty");
    for (path, bytes) in inputs {
        let outcome = std::panic::catch_unwind(|| run(&bytes));
        assert!(outcome.is_ok(), "{target}: {} panicked", path.display());
    }
}

#[test]
fn footer_corpus_replays() {
    replay("footer");
}

#[test]
fn pages_corpus_replays() {
    replay("pages");
}

#[test]
fn ring_corpus_replays() {
    replay("ring");
}

#[test]
fn messages_corpus_replays() {
    replay("messages");
}

#[test]
fn every_target_has_a_corpus() {
    for (name, _) in ringscan_fuzz::TARGETS {
        assert!(corpus_dir(name).is_dir(), "no corpus for {name}");
    }
}

/// The ring target restates the header layout; its seeds (a real producer's writes)
/// must still come out as batches, or the layout moved and the target fuzzes nothing.
#[test]
fn ring_seeds_reach_the_decoder() {
    for (path, bytes) in inputs("ring") {
        let is_seed = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("seed-"));
        if is_seed {
            let batches = ringscan_fuzz::ring_batches(&bytes);
            assert!(batches > 0, "{}: no batch", path.display());
        }
    }
}
