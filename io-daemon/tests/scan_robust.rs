//! The scan engine under bad input and interference: hostile files, files truncated,
//! deleted or rewritten during a scan, cancel, limits and the dynamic filter.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use ringscan_io_daemon::scan::{
    scan_files, DynamicFilter, IoMode, LateMaterialization, MetadataCache, ScanError, ScanSpec,
};
use ringscan_ipc::msg::{CmpOp, Literal, Predicate, ScanSummary};

/// `rows` rows (`i` = 0.., `k` = a permutation of them, `s` = a padded string), `group`
/// rows per row group, 16-row pages.
fn write(path: &Path, rows: i64, group: usize) {
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(group))
        .set_data_page_row_count_limit(16)
        .set_write_batch_size(16)
        .set_statistics_enabled(EnabledStatistics::Page)
        .build();
    write_with(path, rows, props);
}

fn write_with(path: &Path, rows: i64, props: WriterProperties) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("i", DataType::Int64, false),
        Field::new("k", DataType::Int64, false),
        Field::new("s", DataType::Utf8, false),
    ]));
    let file = std::fs::File::create(path).expect("create");
    let mut w = ArrowWriter::try_new(file, Arc::clone(&schema), Some(props)).expect("writer");
    let i: Vec<i64> = (0..rows).collect();
    let s: Vec<String> = i
        .iter()
        .map(|v| format!("row-{v:08}-padding-padding"))
        .collect();
    let k: Vec<i64> = i.iter().map(|v| v * 7919 % rows.max(1)).collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(i)),
        Arc::new(Int64Array::from(k)),
        Arc::new(StringArray::from(s)),
    ];
    w.write(&RecordBatch::try_new(schema, columns).expect("batch"))
        .expect("write");
    w.close().expect("close");
}

fn run(
    spec: &ScanSpec<'_>,
    mut on_batch: impl FnMut(&RecordBatch) -> bool,
) -> (Result<ScanSummary, ScanError>, Vec<i64>) {
    let cache = MetadataCache::new(1 << 20);
    let mut got = Vec::new();
    let result = scan_files(spec, &cache, &mut |b: RecordBatch| {
        if let Some(c) = b.column_by_name("i") {
            got.extend(c.as_primitive::<Int64Type>().values().iter().copied());
        }
        Ok(on_batch(&b))
    });
    (result, got)
}

fn expect_file_error(path: &Path, err: &ScanError, cause: &str) {
    let text = format!("{err}");
    assert!(
        text.contains(&path.display().to_string()),
        "error does not name the file: {text}"
    );
    let chain = format!("{err} {err:?}");
    assert!(
        chain.to_lowercase().contains(cause),
        "error does not say {cause:?}: {chain}"
    );
}

#[test]
fn hostile_files_fail_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = dir.path().join("good.parquet");
    write(&good, 200, 50);
    let bytes = std::fs::read(&good).expect("read");
    let n = bytes.len();

    let mut cases: Vec<(&str, Vec<u8>, &str)> = Vec::new();
    cases.push((
        "magic.parquet",
        b"definitely not a parquet file".to_vec(),
        "corrupt",
    ));
    cases.push(("empty.parquet", Vec::new(), "corrupt"));
    let mut past = bytes.clone();
    past[n - 8..n - 4].copy_from_slice(&u32::MAX.to_le_bytes());
    cases.push(("footer_len.parquet", past, "corrupt"));
    let mut garbage = bytes.clone();
    let footer_len = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().expect("4")) as usize;
    for (k, b) in garbage[n - 8 - footer_len..n - 8].iter_mut().enumerate() {
        *b = (k as u8).wrapping_mul(151).wrapping_add(7);
    }
    cases.push(("thrift.parquet", garbage, "corrupt"));
    cases.push(("half.parquet", bytes[..n / 2].to_vec(), "corrupt"));
    let mut encrypted = bytes.clone();
    encrypted[n - 4..].copy_from_slice(b"PARE");
    cases.push((
        "enc.parquet",
        encrypted,
        "encrypted parquet is not supported",
    ));

    for (name, content, cause) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, content).expect("write");
        let files = [path.clone()];
        for pred in [
            None,
            Some(Predicate::compare("i", CmpOp::GtEq, Literal::Int(10))),
        ] {
            let spec = ScanSpec::new(dir.path(), &files).with_predicate(pred.as_ref());
            let (result, _) = run(&spec, |_| true);
            let err = result.expect_err(name);
            expect_file_error(&path, &err, cause);
        }
    }
}

#[test]
fn truncation_during_the_scan_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.parquet");
    write(&path, 2000, 100);
    let files = [path.clone()];
    // One row group in flight at a time, so the truncation lands before the next read.
    let spec = ScanSpec::new(dir.path(), &files)
        .with_threads(1)
        .with_prefetch(0, 0);
    let mut truncated = false;
    let (result, got) = run(&spec, |_| {
        if !truncated {
            truncated = true;
            let f = OpenOptions::new().write(true).open(&path).expect("open");
            f.set_len(4096).expect("truncate");
        }
        true
    });
    let err = result.expect_err("the file shrank");
    assert!(matches!(err, ScanError::Changed { .. }), "{err:?}");
    expect_file_error(&path, &err, "truncated");
    assert_eq!(got, (0..100).collect::<Vec<_>>());
}

/// The same truncation with files read through memory maps: a SIGBUS on the vanished
/// pages must neither kill the test process nor let zeros through as rows.
#[test]
fn truncation_of_a_mapped_file_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("m.parquet");
    write(&path, 2000, 100);
    let files = [path.clone()];
    let spec = ScanSpec::new(dir.path(), &files)
        .with_threads(1)
        .with_prefetch(0, 0)
        .with_io(IoMode::Mmap);
    let mut truncated = false;
    let (result, got) = run(&spec, |_| {
        if !truncated {
            truncated = true;
            let f = OpenOptions::new().write(true).open(&path).expect("open");
            f.set_len(4096).expect("truncate");
        }
        true
    });
    let err = result.expect_err("the file shrank");
    assert!(matches!(err, ScanError::Truncated { .. }), "{err:?}");
    expect_file_error(&path, &err, "was truncated while it was being read");
    assert_eq!(got, (0..100).collect::<Vec<_>>());
}

/// Mapped files truncated at random moments of a two-thread scan, with and without a
/// predicate: every row handed over is right (a prefix of the file, in order), and the
/// scan ends in success only if it had read everything before the truncation.
#[test]
fn mapped_files_truncated_mid_scan_never_yield_wrong_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pred = Predicate::compare("k", CmpOp::GtEq, Literal::Int(0));
    for round in 0..12u64 {
        let path = dir.path().join(format!("r{round}.parquet"));
        write(&path, 3000, 100);
        let len = std::fs::metadata(&path).expect("stat").len();
        let files = [path.clone()];
        let with_pred = round % 2 == 0;
        let spec = ScanSpec::new(dir.path(), &files)
            .with_threads(2)
            .with_batch_size(64)
            .with_predicate(with_pred.then_some(&pred))
            .with_io(IoMode::Mmap);
        let cut_after = round % 4;
        let mut batches = 0u64;
        let (result, got) = run(&spec, |_| {
            if batches == cut_after {
                let f = OpenOptions::new().write(true).open(&path).expect("open");
                f.set_len(len * (round + 1) / 16).expect("truncate");
            }
            batches += 1;
            true
        });
        assert_eq!(
            got,
            (0..got.len() as i64).collect::<Vec<_>>(),
            "round {round}"
        );
        match result {
            Ok(_) => assert_eq!(got.len(), 3000, "round {round}: success with rows missing"),
            Err(err) => expect_file_error(&path, &err, "truncated"),
        }
    }
}

#[test]
fn deletion_during_the_scan() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (dir.path().join("a.parquet"), dir.path().join("b.parquet"));
    write(&a, 300, 100);
    write(&b, 300, 100);
    let files = [a.clone(), b.clone()];
    let spec = ScanSpec::new(dir.path(), &files)
        .with_threads(1)
        .with_prefetch(0, 0);
    let mut first = true;
    let (result, got) = run(&spec, |_| {
        if first {
            first = false;
            // The open file stays readable; the next one is gone.
            std::fs::remove_file(&a).expect("rm a");
            std::fs::remove_file(&b).expect("rm b");
        }
        true
    });
    let err = result.expect_err("b is gone");
    assert!(matches!(err, ScanError::Missing { .. }), "{err:?}");
    expect_file_error(&b, &err, "missing");
    assert_eq!(got, (0..300).collect::<Vec<_>>());
}

#[test]
fn cancel_stops_the_scan() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.parquet");
    write(&path, 2000, 100);
    let files = [path];
    let cancel = AtomicBool::new(false);
    let spec = ScanSpec::new(dir.path(), &files)
        .with_batch_size(50)
        .with_cancel(Some(&cancel));
    let (result, got) = run(&spec, |_| {
        cancel.store(true, Ordering::Relaxed);
        true
    });
    assert!(matches!(result, Err(ScanError::Cancelled)), "{result:?}");
    assert!(got.len() < 2000);
}

#[test]
fn a_limit_stops_scheduling() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("l.parquet");
    write(&path, 2000, 100);
    let files = [path];
    let full = run(&ScanSpec::new(dir.path(), &files), |_| true)
        .0
        .expect("full");
    for threads in [1, 3] {
        let spec = ScanSpec::new(dir.path(), &files)
            .with_limit(Some(5))
            .with_threads(threads);
        let (result, got) = run(&spec, |_| true);
        let summary = result.expect("limited");
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        assert!(summary.rows_decoded <= 16, "{summary:?}");
        assert!(summary.bytes_read * 5 < full.bytes_read, "{summary:?}");
    }
    // Filtered: stops once enough rows passed.
    let pred = Predicate::compare("i", CmpOp::GtEq, Literal::Int(1000));
    let spec = ScanSpec::new(dir.path(), &files)
        .with_predicate(Some(&pred))
        .with_limit(Some(3))
        .with_threads(1)
        .with_prefetch(0, 0);
    let (result, got) = run(&spec, |_| true);
    let summary = result.expect("filtered");
    assert_eq!(got, vec![1000, 1001, 1002]);
    assert!(summary.rows_decoded <= 100, "{summary:?}");
}

#[test]
fn the_dynamic_filter_prunes_later_row_groups() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("d.parquet");
    write(&path, 2000, 100);
    let files = [path];
    let filter = DynamicFilter::new();
    let spec = ScanSpec::new(dir.path(), &files)
        .with_threads(1)
        .with_prefetch(0, 0)
        .with_dynamic_filter(Some(&filter));
    let (result, got) = run(&spec, |_| {
        filter.set(Predicate::compare("i", CmpOp::Lt, Literal::Int(150)));
        true
    });
    let summary = result.expect("scan");
    // Row group 0 was read before the filter; row group 1 may match; the rest cannot.
    assert_eq!(got, (0..200).collect::<Vec<_>>());
    assert_eq!(summary.row_groups_pruned_by_dynamic_filter, 18);
    assert_eq!(summary.row_groups_pruned, 18);
}

#[test]
fn late_materialization_reads_fewer_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path: PathBuf = dir.path().join("m.parquet");
    // Pages by bytes: `k` pages of 128 rows, which the page index can rarely prune for
    // `k < 20`; `s` pages of about 30 rows, which late materialization skips.
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(1000))
        .set_data_page_row_count_limit(usize::MAX)
        .set_data_page_size_limit(1024)
        .set_write_batch_size(8)
        .set_dictionary_enabled(false)
        .set_statistics_enabled(EnabledStatistics::Page)
        .build();
    write_with(&path, 2000, props);
    let files = [path];
    let pred = Predicate::compare("k", CmpOp::Lt, Literal::Int(20));
    let projection = ["i".to_owned(), "s".to_owned()];
    let scan = |late| {
        let spec = ScanSpec::new(dir.path(), &files)
            .with_predicate(Some(&pred))
            .with_projection(Some(&projection))
            .with_late_materialization(late);
        run(&spec, |_| true)
    };
    let (eager, eager_rows) = scan(LateMaterialization::Never);
    let (auto, auto_rows) = scan(LateMaterialization::Auto);
    let (eager, auto) = (eager.expect("eager"), auto.expect("auto"));
    assert_eq!(eager_rows, auto_rows);
    assert_eq!(auto_rows.len(), 20);
    assert_eq!(auto.row_groups_late_materialized, 2, "{auto:?}");
    assert_eq!(eager.row_groups_late_materialized, 0, "{eager:?}");
    assert!(
        auto.bytes_read * 4 < eager.bytes_read * 3,
        "late {} bytes vs eager {}",
        auto.bytes_read,
        eager.bytes_read
    );
}
