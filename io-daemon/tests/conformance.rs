//! Conformance: every Parquet file of parquet-testing's `data` directory (the directory
//! `PARQUET_TEST_DATA` names) is either read through `scan_files` with the same rows as
//! DuckDB reads from it, or refused with the message its entry in [`REFUSED`] gives.
//!
//! Rows are compared as multisets of canonical texts (see
//! `io-daemon/tests/conformance/compare.py`): ringscan's rows are written to a Parquet file that
//! pyarrow reads back, DuckDB's come from `read_parquet`. Skipped, with the reason, when
//! `PARQUET_TEST_DATA` is unset or Python/DuckDB is missing, unless
//! `RINGSCAN_REQUIRE_INTEROP=1`, which turns the skip into a failure.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

use arrow_array::RecordBatch;
use parquet::arrow::ArrowWriter;
use ringscan_io_daemon::scan::{scan_files, IoMode, MetadataCache, ScanError, ScanSpec};

/// Files ringscan refuses: (file name, a substring of the error, why). Keep it short.
const REFUSED: &[(&str, &str, &str)] = &[
    (
        "encrypt_columns_and_footer.parquet.encrypted",
        "encrypted Parquet is not supported",
        "no decryption: it needs key management, which a local query host does not have",
    ),
    (
        "encrypt_columns_and_footer_aad.parquet.encrypted",
        "encrypted Parquet is not supported",
        "as above",
    ),
    (
        "encrypt_columns_and_footer_bloom_filter.parquet.encrypted",
        "encrypted Parquet is not supported",
        "as above",
    ),
    (
        "encrypt_columns_and_footer_ctr.parquet.encrypted",
        "encrypted Parquet is not supported",
        "as above",
    ),
    (
        "encrypt_columns_and_footer_disable_aad_storage.parquet.encrypted",
        "encrypted Parquet is not supported",
        "as above",
    ),
    (
        "uniform_encryption.parquet.encrypted",
        "encrypted Parquet is not supported",
        "as above",
    ),
    (
        "external_key_material_java.parquet.encrypted",
        "encrypted Parquet is not supported",
        "as above",
    ),
];

// The DuckDB/pyarrow virtual environment of the root integration tests, shared (same
// venv under cargo's target directory, same pinned requirements).
#[path = "../../tests/common/python.rs"]
#[allow(dead_code, reason = "the shared helper also offers python_or_skip")]
mod python;

use python::python;

/// Files read, but not row for row as DuckDB does, and why: (file name, why). Each is a
/// bug or a limit of the comparison, listed so that the test guards every other file.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[
    (
        "int96_from_spark.parquet",
        "INT96 values outside the nanosecond range: DuckDB and arrow-rs wrap them differently",
    ),
    (
        "nested_structs.rust.parquet",
        "nested timestamps beyond Python's datetime range: compare.py cannot render them",
    ),
    (
        "encrypt_columns_plaintext_footer.parquet.encrypted",
        "encrypted columns under a plaintext footer: refused, but as undecodable rather than \
         as encrypted (the parquet crate without its encryption feature cannot tell)",
    ),
    (
        "large_string_map.brotli.parquet",
        "over 2 GiB of strings in one column chunk overflow Utf8 offsets",
    ),
    (
        "nation.dict-malformed.parquet",
        "a malformed dictionary page: refused as corrupt (DuckDB reads it)",
    ),
];

fn skip(why: &str) {
    assert!(
        std::env::var("RINGSCAN_REQUIRE_INTEROP").as_deref() != Ok("1"),
        "conformance cannot run and RINGSCAN_REQUIRE_INTEROP=1: {why}"
    );
    eprintln!("SKIPPED conformance: {why}");
}

/// Scan `path` into `out` (a Parquet file; none when there is no row or no column):
/// the row count.
fn scan_to_parquet(path: &Path, out: &Path) -> Result<(usize, bool), ScanError> {
    let root = path.parent().unwrap_or(Path::new("/"));
    let files = [path.to_path_buf()];
    let spec = ScanSpec::new(root, &files).with_threads(2);
    let cache = MetadataCache::new(64 << 20);
    let mut batches: Vec<RecordBatch> = Vec::new();
    scan_files(&spec, &cache, &mut |b| {
        batches.push(b);
        Ok(true)
    })?;
    let rows = batches.iter().map(RecordBatch::num_rows).sum();
    let Some(first) = batches.first() else {
        return Ok((0, false));
    };
    if first.num_columns() == 0 {
        return Ok((rows, false));
    }
    let file = File::create(out).expect("create our copy");
    let mut w = ArrowWriter::try_new(file, first.schema(), None).expect("writer");
    for b in &batches {
        w.write(b).expect("write our copy");
    }
    w.close().expect("close our copy");
    Ok((rows, true))
}

#[test]
fn parquet_testing_files_read_like_duckdb() {
    let Some(data) = std::env::var_os("PARQUET_TEST_DATA").map(PathBuf::from) else {
        skip("PARQUET_TEST_DATA is not set (point it at parquet-testing/data)");
        return;
    };
    let python = match python() {
        Ok(p) => p,
        Err(why) => {
            skip(why);
            return;
        }
    };
    let out = tempfile::tempdir().expect("tempdir");
    let mut names: Vec<String> = std::fs::read_dir(&data)
        .expect("PARQUET_TEST_DATA is a directory")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".parquet") || n.ends_with(".parquet.encrypted"))
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no Parquet file in {}", data.display());

    let mut failures = Vec::new();
    let mut manifest = Vec::new();
    let mut refused = 0;
    for name in &names {
        let path = data.join(name);
        let ours = out.path().join(format!("{name}.ours.parquet"));
        let listed = REFUSED.iter().find(|(n, _, _)| n == name);
        match scan_to_parquet(&path, &ours) {
            Ok((rows, written)) => {
                if let Some((_, _, why)) = listed {
                    failures.push(format!("{name}: read, but REFUSED lists it ({why})"));
                }
                manifest.push(serde_json::json!({
                    "name": name,
                    "original": path,
                    "ours": written.then(|| ours.clone()),
                    "our_count": rows,
                }));
            }
            Err(e) => {
                let text = format!("{e} / {e:?}");
                match listed {
                    Some((_, msg, _)) if text.contains(msg) => refused += 1,
                    _ => failures.push(format!("{name}: refused: {text}")),
                }
                assert!(
                    format!("{e}").contains(name.as_str()),
                    "{name}: the error does not name the file: {e}"
                );
            }
        }
    }

    let manifest_path = out.path().join("manifest.json");
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).expect("json")).expect("write");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/compare.py");
    let run = Command::new(python)
        .arg(&script)
        .arg(&manifest_path)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run compare.py");
    assert!(
        run.status.success(),
        "compare.py failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let mut compared = 0;
    for line in String::from_utf8_lossy(&run.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("compare.py output");
        let name = v["name"].as_str().unwrap_or("?");
        if let Some(err) = v["duckdb_error"].as_str() {
            eprintln!("note: {name}: DuckDB refuses it ({err}); ringscan reads it");
            continue;
        }
        if let Some(err) = v["compare_error"].as_str() {
            failures.push(format!("{name}: cannot compare: {err}"));
            continue;
        }
        if let Some(err) = v["ours_error"].as_str() {
            failures.push(format!(
                "{name}: pyarrow cannot read ringscan's rows back: {err}"
            ));
            continue;
        }
        compared += 1;
        if v["equal"] != serde_json::Value::Bool(true) {
            failures.push(format!(
                "{name}: rows differ: DuckDB {} rows, ringscan {} rows, e.g. {}",
                v["duckdb_rows"], v["our_rows"], v["example"]
            ));
        }
    }
    eprintln!(
        "conformance: {} files, {compared} compared with DuckDB, {refused} refused as listed",
        names.len()
    );
    let mut known = 0;
    let mut seen_known = std::collections::HashSet::new();
    failures.retain(|f| {
        let listed = KNOWN_DIFFERENCES
            .iter()
            .find(|(n, _)| f.starts_with(&format!("{n}:")));
        if let Some((n, _)) = listed {
            seen_known.insert(*n);
        }
        known += usize::from(listed.is_some());
        listed.is_none()
    });
    eprintln!("conformance: {known} known differences (KNOWN_DIFFERENCES)");
    // A listed difference that went away must leave the list, or the list stops saying
    // what differs (dict-page-offset-zero.parquet stayed listed after it could be read).
    for (name, why) in KNOWN_DIFFERENCES {
        if names.iter().any(|n| n == name) && !seen_known.contains(name) {
            failures.push(format!(
                "{name}: agrees with DuckDB now; remove it from KNOWN_DIFFERENCES ({why})"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} files fail:\n{}",
        failures.len(),
        names.len(),
        failures.join("\n")
    );
}

/// Every file (`PARQUET_TEST_DATA`) scanned through memory maps (`IoMode::Mmap`) gives
/// exactly what positional reads give: the same batches, or the same error.
#[test]
fn parquet_testing_files_read_the_same_through_memory_maps() {
    let Some(data) = std::env::var_os("PARQUET_TEST_DATA").map(PathBuf::from) else {
        skip("PARQUET_TEST_DATA is not set (point it at parquet-testing/data)");
        return;
    };
    let scan = |path: &Path, io: IoMode| -> Result<Vec<RecordBatch>, String> {
        let root = path.parent().unwrap_or(Path::new("/"));
        let files = [path.to_path_buf()];
        let spec = ScanSpec::new(root, &files).with_threads(2).with_io(io);
        let cache = MetadataCache::new(64 << 20);
        let mut batches = Vec::new();
        scan_files(&spec, &cache, &mut |b| {
            batches.push(b);
            Ok(true)
        })
        .map_err(|e| e.to_string())?;
        Ok(batches)
    };
    let mut names: Vec<PathBuf> = std::fs::read_dir(&data)
        .expect("PARQUET_TEST_DATA is a directory")
        .chain(
            std::fs::read_dir(data.join("../bad_data"))
                .into_iter()
                .flatten(),
        )
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains(".parquet") && p.is_file())
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no Parquet file in {}", data.display());
    for path in &names {
        let pread = scan(path, IoMode::Pread);
        let mmap = scan(path, IoMode::Mmap);
        assert_eq!(pread, mmap, "{}", path.display());
    }
    eprintln!("mmap conformance: {} files read the same", names.len());
}
