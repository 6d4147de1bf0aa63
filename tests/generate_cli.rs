//! `ringscan generate` from the outside: bad flags, occupied and unwritable
//! directories, a full disk. Each gets one clear message, a non-zero exit, no panic and
//! no partial files.

use std::path::Path;
use std::process::{Command, Output};

fn ringscan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ringscan"))
        .args(args)
        .env_remove("RINGSCAN_DATA")
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A failure the user caused: exit 1 or 2, a message, never a panic.
fn assert_clean_failure(out: &Output, needle: &str) {
    let err = stderr(out);
    assert!(
        !out.status.success(),
        "expected failure, got success: {err}"
    );
    assert!(
        matches!(out.status.code(), Some(1 | 2)),
        "exit {:?}: {err}",
        out.status.code()
    );
    assert!(!err.contains("panicked"), "panic: {err}");
    assert!(err.contains(needle), "message {err:?} lacks {needle:?}");
}

fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path.display().to_string());
        }
    }
    out
}

#[test]
fn invalid_flags_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("o");
    let o = out.to_str().unwrap();
    assert_clean_failure(
        &ringscan(&["generate", "ohlcv", "--rows", "0", "--out", o]),
        "--rows",
    );
    assert_clean_failure(
        &ringscan(&["generate", "ohlcv", "--rows", "lots", "--out", o]),
        "not a count",
    );
    assert_clean_failure(
        &ringscan(&["generate", "ohlcv", "--rows", "1e15", "--out", o]),
        "--rows",
    );
    assert_clean_failure(
        &ringscan(&["generate", "wide", "--batch-rows", "0", "--out", o]),
        "--batch-rows",
    );
    assert_clean_failure(
        &ringscan(&["generate", "wide", "--writers", "0", "--out", o]),
        "--writers",
    );
    assert_clean_failure(
        &ringscan(&["generate", "wide", "--producers", "100000", "--out", o]),
        "--producers",
    );
    assert_clean_failure(
        &ringscan(&["generate", "wide", "--row-group-rows", "0", "--out", o]),
        "--row-group-rows",
    );
    assert_clean_failure(
        &ringscan(&["generate", "wide", "--compression", "gzip", "--out", o]),
        "gzip",
    );
    assert_clean_failure(&ringscan(&["generate", "nope", "--out", o]), "nope");
    assert_clean_failure(
        &ringscan(&["generate", "wide", "--partition-by", "symbol", "--out", o]),
        "only ohlcv can be partitioned",
    );
    assert!(!out.exists(), "a refused run creates nothing");
}

#[test]
fn an_occupied_directory_needs_overwrite_and_keeps_foreign_files() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("o");
    let o = out.to_str().unwrap();
    let first = ringscan(&["generate", "wide", "--rows", "1000", "--out", o, "--quiet"]);
    assert!(first.status.success(), "{}", stderr(&first));
    assert_clean_failure(
        &ringscan(&["generate", "wide", "--rows", "1000", "--out", o]),
        "--overwrite",
    );
    let again = ringscan(&[
        "generate",
        "wide",
        "--rows",
        "500",
        "--writers",
        "1",
        "--out",
        o,
        "--overwrite",
        "-q",
    ]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(files_under(&out).len(), 1);

    std::fs::write(out.join("README.txt"), "keep me").unwrap();
    assert_clean_failure(
        &ringscan(&[
            "generate",
            "wide",
            "--rows",
            "500",
            "--out",
            o,
            "--overwrite",
        ]),
        "README.txt",
    );
    assert_eq!(
        std::fs::read_to_string(out.join("README.txt")).unwrap(),
        "keep me"
    );
}

#[test]
fn an_unwritable_output_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let inside = file.join("out");
    let out = ringscan(&[
        "generate",
        "wide",
        "--rows",
        "100",
        "--out",
        inside.to_str().unwrap(),
    ]);
    assert_clean_failure(&out, "a-file");
}

/// A full disk, simulated with a file-size limit: writes fail with EFBIG once a file
/// passes 256 KiB (SIGXFSZ ignored, so the write returns the error instead of killing
/// the process). The run must fail with a message naming the file, and leave nothing.
#[test]
fn a_full_disk_fails_cleanly_and_leaves_no_files() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("o");
    let script = format!(
        "ulimit -f 256 && trap '' XFSZ && exec '{}' generate contacts --rows 2000000 --writers 2 --out '{}'",
        env!("CARGO_BIN_EXE_ringscan"),
        out.display()
    );
    let result = Command::new("bash").args(["-c", &script]).output().unwrap();
    assert_clean_failure(&result, "cannot write");
    let err = stderr(&result);
    assert!(err.contains("part-0000"), "names the file: {err}");
    assert!(
        err.to_lowercase().contains("file too large"),
        "says why: {err}"
    );
    assert_eq!(
        files_under(&out),
        Vec::<String>::new(),
        "partial files left behind"
    );
    assert!(
        !out.exists(),
        "the output directory this run created is removed too"
    );
    assert_eq!(
        err.matches("os error 27").count(),
        1,
        "each cause once: {err}"
    );
}

#[test]
fn help_and_version_succeed() {
    let help = ringscan(&["generate", "--help"]);
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--rows",
        "--producers",
        "--writers",
        "--batch-rows",
        "--row-group-rows",
        "--compression",
        "--seed",
        "--symbols",
        "--partition-by",
        "--overwrite",
    ] {
        assert!(text.contains(flag), "help lacks {flag}");
    }
    assert!(ringscan(&["--version"]).status.success());
    let usage = ringscan(&[]);
    assert_eq!(usage.status.code(), Some(2));
}
