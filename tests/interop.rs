//! Interop is a test, not a hope: DuckDB and pyarrow read every dataset the generator
//! writes, with the right row count, column names and types, and agree with the
//! generator's own reference on an aggregate of the values.
//!
//! The Python packages come from a virtual environment this test creates on first use
//! (under cargo's target directory) from `tests/interop/requirements.txt`. Without
//! Python or the package registry the tests are skipped with the reason printed, unless
//! `RINGSCAN_REQUIRE_INTEROP=1` (CI sets it), which turns a skip into a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use arrow_array::cast::AsArray;
use arrow_array::types::UInt64Type;
use arrow_array::{Array, ListArray};
use ringscan_generator::{DatasetKind, GenerateOptions, PartitionBy};

mod common;

use common::python::python_or_skip;

const ROWS: u64 = 20_000;

/// Generates through the CLI, as a user would.
fn generate(dir: &Path, dataset: &str, extra: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_ringscan"))
        .args([
            "generate",
            dataset,
            "--rows",
            &ROWS.to_string(),
            "--writers",
            "2",
        ])
        .args(["--row-group-rows", "4096", "--quiet", "--out"])
        .arg(dir)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "generate failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[derive(Debug, serde::Deserialize)]
struct EngineView {
    rows: u64,
    columns: Vec<(String, String)>,
    value: String,
}

#[derive(Debug, serde::Deserialize)]
struct Views {
    pyarrow: EngineView,
    duckdb: EngineView,
}

fn check(python: &Path, dir: &Path, query: &str) -> Views {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/check.py");
    let out = Command::new(python)
        .arg(script)
        .arg(dir)
        .arg(query)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "check.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The reference: the dataset's own rows, built in memory, segment by segment.
fn reference(
    kind: DatasetKind,
    extra: impl Fn(&mut GenerateOptions),
) -> Vec<arrow_array::RecordBatch> {
    let mut opts = GenerateOptions::new(kind, PathBuf::new());
    opts.rows = ROWS;
    extra(&mut opts);
    let dataset = opts.build_dataset();
    let mut batches = Vec::new();
    let mut start = 0;
    while start < ROWS {
        let end = dataset.segment_end(start);
        batches.push(dataset.batch(start, (end - start) as usize).unwrap());
        start = end;
    }
    batches
}

fn names(columns: &[(String, String)]) -> Vec<&str> {
    columns.iter().map(|(n, _)| n.as_str()).collect()
}

fn types(columns: &[(String, String)]) -> Vec<&str> {
    columns.iter().map(|(_, t)| t.as_str()).collect()
}

#[test]
fn ohlcv_reads_in_duckdb_and_pyarrow() {
    let Some(python) = python_or_skip("ohlcv") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ohlcv");
    generate(&dir, "ohlcv", &[]);
    let views = check(python, &dir, "SELECT sum(volume) FROM t");
    let volume: u64 = reference(DatasetKind::Ohlcv, |_| {})
        .iter()
        .map(|b| {
            b.column(6)
                .as_primitive::<UInt64Type>()
                .values()
                .iter()
                .sum::<u64>()
        })
        .sum();
    let names_expected = ["symbol", "ts", "open", "high", "low", "close", "volume"];
    for view in [&views.pyarrow, &views.duckdb] {
        assert_eq!(view.rows, ROWS);
        assert_eq!(names(&view.columns), names_expected);
        assert_eq!(view.value, volume.to_string());
    }
    assert_eq!(
        types(&views.pyarrow.columns),
        [
            "string",
            "timestamp[us, tz=UTC]",
            "double",
            "double",
            "double",
            "double",
            "uint64"
        ]
    );
    assert_eq!(
        types(&views.duckdb.columns),
        [
            "VARCHAR",
            "TIMESTAMP WITH TIME ZONE",
            "DOUBLE",
            "DOUBLE",
            "DOUBLE",
            "DOUBLE",
            "UBIGINT"
        ]
    );
}

#[test]
fn partitioned_ohlcv_reads_as_a_hive_table() {
    let Some(python) = python_or_skip("partitioned ohlcv") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ohlcv");
    generate(
        &dir,
        "ohlcv",
        &["--symbols", "3", "--partition-by", "symbol,date"],
    );
    let views = check(
        python,
        &dir,
        "SELECT count(DISTINCT symbol) || '/' || count(DISTINCT date) FROM t",
    );
    let days = (ROWS / 3).div_ceil(390);
    for view in [&views.pyarrow, &views.duckdb] {
        assert_eq!(view.rows, ROWS);
        let mut got = names(&view.columns);
        got.sort_unstable();
        assert_eq!(
            got,
            ["close", "date", "high", "low", "open", "symbol", "ts", "volume"]
        );
        assert_eq!(view.value, format!("3/{days}"));
    }
}

#[test]
fn contacts_nested_columns_read_in_duckdb_and_pyarrow() {
    let Some(python) = python_or_skip("contacts") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("contacts");
    generate(&dir, "contacts", &[]);
    let views = check(
        python,
        &dir,
        "SELECT sum(len(phones)) || '/' || count(name) FROM t",
    );
    let (mut phones, mut named) = (0i64, 0usize);
    for b in reference(DatasetKind::Contacts, |_| {}) {
        let list = b.column(2).as_any().downcast_ref::<ListArray>().unwrap();
        phones += (0..list.len())
            .filter(|&i| list.is_valid(i))
            .map(|i| i64::from(list.value_length(i)))
            .sum::<i64>();
        named += b.column(1).len() - b.column(1).null_count();
    }
    for view in [&views.pyarrow, &views.duckdb] {
        assert_eq!(view.rows, ROWS);
        assert_eq!(names(&view.columns), ["id", "name", "phones", "address"]);
        assert_eq!(view.value, format!("{phones}/{named}"));
    }
    assert_eq!(
        types(&views.pyarrow.columns),
        [
            "uint64",
            "string",
            "list<item: struct<number: string, kind: string>>",
            "struct<city: string not null, zip: string not null>"
        ]
    );
    assert_eq!(
        types(&views.duckdb.columns),
        [
            "UBIGINT",
            "VARCHAR",
            "STRUCT(number VARCHAR, kind VARCHAR)[]",
            "STRUCT(city VARCHAR, zip VARCHAR)"
        ]
    );
}

#[test]
fn wide_reads_in_duckdb_and_pyarrow() {
    let Some(python) = python_or_skip("wide") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("wide");
    generate(&dir, "wide", &["--compression", "lz4"]);
    let views = check(
        python,
        &dir,
        "SELECT count(ship_date) || '/' || count(sales_rep) FROM t",
    );
    let (mut shipped, mut with_rep) = (0, 0);
    for b in reference(DatasetKind::Wide, |_| {}) {
        shipped += b.column(9).len() - b.column(9).null_count();
        with_rep += b.column(19).len() - b.column(19).null_count();
    }
    for view in [&views.pyarrow, &views.duckdb] {
        assert_eq!(view.rows, ROWS);
        assert_eq!(view.columns.len(), 21);
        assert_eq!(view.columns[0].0, "order_id");
        assert_eq!(view.value, format!("{shipped}/{with_rep}"));
    }
    let duck = types(&views.duckdb.columns);
    assert_eq!(&duck[..4], ["BIGINT", "BIGINT", "INTEGER", "VARCHAR"]);
    assert_eq!(&duck[8..11], ["DATE", "DATE", "TIMESTAMP WITH TIME ZONE"]);
    assert_eq!(&duck[17..19], ["BOOLEAN", "BOOLEAN"]);
    let pa = types(&views.pyarrow.columns);
    assert_eq!(
        &pa[8..11],
        ["date32[day]", "date32[day]", "timestamp[us, tz=UTC]"]
    );
}

#[test]
fn partition_dates_match_the_reference() {
    // Keeps `PartitionBy` honest without Python: the reference builds the same segments.
    let batches = reference(DatasetKind::Ohlcv, |o| {
        o.symbols = 3;
        o.partition_by = PartitionBy::SymbolDate;
    });
    assert!(batches.iter().all(|b| b.num_rows() <= 390));
    assert_eq!(
        batches.iter().map(|b| b.num_rows() as u64).sum::<u64>(),
        ROWS
    );
}
