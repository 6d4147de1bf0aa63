//! Scan path on hand-made files: corrupt input, errors naming the file, the metadata
//! cache, partition columns, limit and cancellation.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use ringscan_io_daemon::scan::{scan_files, MetadataCache, ScanError, ScanSpec};
use ringscan_ipc::msg::{CmpOp, Literal, Predicate, ScanSummary};

/// `i` = 0..n, `s` = "v{i}", in row groups of 10 rows.
fn write(path: &Path, n: i64) {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).expect("mkdir");
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new("i", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(0..n)),
        Arc::new(StringArray::from_iter_values(
            (0..n).map(|i| format!("v{i}")),
        )),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns).expect("batch");
    let props = WriterProperties::builder()
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_max_row_group_row_count(Some(10))
        .set_data_page_row_count_limit(3)
        .set_write_batch_size(3)
        .build();
    let file = File::create(path).expect("create");
    let mut writer = ArrowWriter::try_new(file, schema, Some(props)).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
}

struct Scan<'a> {
    root: &'a Path,
    files: Vec<PathBuf>,
    projection: Option<Vec<String>>,
    predicate: Option<Predicate>,
    limit: Option<u64>,
}

impl<'a> Scan<'a> {
    fn new(root: &'a Path, files: &[&str]) -> Self {
        Self {
            root,
            files: files.iter().map(PathBuf::from).collect(),
            projection: None,
            predicate: None,
            limit: None,
        }
    }

    fn run(
        &self,
        cache: &MetadataCache,
        mut keep_going: impl FnMut(&RecordBatch) -> bool,
    ) -> Result<(ScanSummary, Vec<RecordBatch>), ScanError> {
        let spec = ScanSpec::new(self.root, &self.files)
            .with_projection(self.projection.as_deref())
            .with_predicate(self.predicate.as_ref())
            .with_limit(self.limit)
            .with_batch_size(4)
            // One row group in flight: these tests check what is read and when the scan
            // stops; scan_proptest and scan_robust cover the pipeline.
            .with_threads(1)
            .with_prefetch(0, 0);
        let mut batches = Vec::new();
        let summary = scan_files(&spec, cache, &mut |b: RecordBatch| {
            let more = keep_going(&b);
            batches.push(b);
            Ok(more)
        })?;
        Ok((summary, batches))
    }

    fn all(&self, cache: &MetadataCache) -> Result<(ScanSummary, Vec<RecordBatch>), ScanError> {
        self.run(cache, |_| true)
    }
}

fn ints(batches: &[RecordBatch], column: &str) -> Vec<i64> {
    batches
        .iter()
        .flat_map(|b| {
            let c = b.column_by_name(column).expect("column");
            c.as_primitive::<Int64Type>().values().to_vec()
        })
        .collect()
}

fn cache() -> MetadataCache {
    MetadataCache::new(1 << 20)
}

#[test]
fn bad_data_files_error_or_succeed_without_panicking() {
    let Ok(data) = std::env::var("PARQUET_TEST_DATA") else {
        eprintln!("PARQUET_TEST_DATA is unset: skipping the bad_data corpus");
        return;
    };
    let dir = Path::new(&data).join("../bad_data");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("bad_data dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "parquet") {
            continue;
        }
        seen += 1;
        for predicate in [
            None,
            // Unknown in most of these files: an error, not a panic, either way.
            Some(Predicate::compare("i", CmpOp::Gt, Literal::Int(0))),
        ] {
            let result = std::panic::catch_unwind(|| {
                let mut scan = Scan::new(&dir, &[]);
                scan.files = vec![path.clone()];
                scan.predicate = predicate.clone();
                scan.all(&cache()).map(|(s, _)| s.rows_emitted)
            });
            match result {
                Ok(Ok(rows)) => eprintln!("{}: ok, {rows} rows", path.display()),
                Ok(Err(e)) => {
                    let name = path.file_name().expect("name").to_string_lossy();
                    assert!(e.to_string().contains(name.as_ref()), "{e}");
                    eprintln!("{}: {e:?}", path.display());
                }
                Err(_) => panic!("{}: the scan panicked", path.display()),
            }
        }
    }
    assert!(seen > 0, "no .parquet file under {}", dir.display());
}

#[test]
fn truncated_file_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("good.parquet"), 100);
    let bytes = std::fs::read(dir.path().join("good.parquet")).expect("read");
    for cut in [0, 3, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(dir.path().join("truncated.parquet"), &bytes[..cut]).expect("write");
        let err = Scan::new(dir.path(), &["truncated.parquet"])
            .all(&cache())
            .expect_err("truncated");
        assert!(
            matches!(err, ScanError::Corrupt { .. }),
            "cut at {cut}: {err:?}"
        );
        assert!(err.to_string().contains("truncated.parquet"), "{err}");
    }
}

#[test]
fn errors_name_the_file_and_the_cause() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("a.parquet"), 5);
    let c = cache();

    let err = Scan::new(dir.path(), &["missing.parquet"])
        .all(&c)
        .expect_err("missing");
    assert!(matches!(err, ScanError::Missing { .. }), "{err:?}");
    assert!(err.to_string().contains("missing.parquet"), "{err}");

    let mut scan = Scan::new(dir.path(), &["a.parquet"]);
    scan.projection = Some(vec!["i".into(), "nope".into()]);
    let err = scan.all(&c).expect_err("unknown projected column");
    assert!(
        matches!(&err, ScanError::UnknownColumn { column, .. } if column == "nope"),
        "{err:?}"
    );
    assert!(err.to_string().contains("a.parquet"), "{err}");

    let mut scan = Scan::new(dir.path(), &["a.parquet"]);
    scan.predicate = Some(Predicate::compare("zzz", CmpOp::Eq, Literal::Int(1)));
    let err = scan.all(&c).expect_err("unknown predicate column");
    assert!(
        matches!(&err, ScanError::UnknownColumn { column, .. } if column == "zzz"),
        "{err:?}"
    );

    let mut scan = Scan::new(dir.path(), &["a.parquet"]);
    scan.predicate = Some(Predicate::compare("s", CmpOp::Eq, Literal::Int(1)));
    let err = scan.all(&c).expect_err("type mismatch");
    assert!(
        matches!(&err, ScanError::TypeMismatch { column, .. } if column == "s"),
        "{err:?}"
    );
    assert!(err.to_string().contains("a.parquet"), "{err}");
}

#[test]
fn metadata_cache_hits_and_revalidates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("a.parquet");
    write(&path, 25);
    let c = cache();
    let scan = Scan::new(dir.path(), &["a.parquet"]);

    let (_, first) = scan.all(&c).expect("first");
    assert_eq!(ints(&first, "i"), (0..25).collect::<Vec<_>>());
    assert_eq!((c.stats().hits, c.stats().misses), (0, 1));
    let (_, second) = scan.all(&c).expect("second");
    assert_eq!(ints(&second, "i"), (0..25).collect::<Vec<_>>());
    assert_eq!((c.stats().hits, c.stats().misses), (1, 1));
    assert_eq!(c.stats().entries, 1);
    assert!(c.stats().bytes > 0);

    // A predicate needs page indexes: they are loaded on their own, the footer is not
    // parsed again.
    let mut filtered = Scan::new(dir.path(), &["a.parquet"]);
    filtered.predicate = Some(Predicate::compare("i", CmpOp::GtEq, Literal::Int(20)));
    let (summary, batches) = filtered.all(&c).expect("filtered");
    assert_eq!(ints(&batches, "i"), (20..25).collect::<Vec<_>>());
    assert_eq!(summary.row_groups_pruned, 2);
    assert_eq!((c.stats().hits, c.stats().misses), (2, 1));
    filtered.all(&c).expect("filtered again");
    scan.all(&c).expect("unfiltered");
    assert_eq!((c.stats().hits, c.stats().misses), (4, 1));

    // Rewritten in place (new size and mtime): parsed again, new rows.
    write(&path, 40);
    let (_, third) = scan.all(&c).expect("rewritten");
    assert_eq!(ints(&third, "i"), (0..40).collect::<Vec<_>>());
    assert_eq!((c.stats().hits, c.stats().misses), (4, 2));
    assert_eq!(c.stats().entries, 1);
    assert_eq!(
        c.stats().page_indexes,
        0,
        "the old version's indexes went with it"
    );
}

/// `a` = 0..40, `b` = 2a, `c` = a % 7: four row groups of 10 rows, pages of 3.
fn write_abc(path: &Path) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int64, false),
        Field::new("b", DataType::Int64, false),
        Field::new("c", DataType::Int64, false),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(0..40)),
        Arc::new(Int64Array::from_iter_values((0..40).map(|a| 2 * a))),
        Arc::new(Int64Array::from_iter_values((0..40).map(|a| a % 7))),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns).expect("batch");
    let props = WriterProperties::builder()
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_max_row_group_row_count(Some(10))
        .set_data_page_row_count_limit(3)
        .set_write_batch_size(3)
        .build();
    let file = File::create(path).expect("create");
    let mut writer = ArrowWriter::try_new(file, schema, Some(props)).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
}

#[test]
fn page_indexes_load_per_column_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_abc(&dir.path().join("abc.parquet"));
    let c = cache();
    let query = |pred: Predicate, projection: &[&str]| {
        let mut q = Scan::new(dir.path(), &["abc.parquet"]);
        q.predicate = Some(pred);
        q.projection = Some(projection.iter().map(|s| (*s).to_owned()).collect());
        q.all(&c).expect("scan")
    };
    let ge = |column: &str, v: i64| Predicate::compare(column, CmpOp::GtEq, Literal::Int(v));

    // Statistics keep only the last row group: one column index and one offset index,
    // of `a` alone.
    let (first, batches) = query(ge("a", 35), &["a"]);
    assert_eq!(ints(&batches, "a"), (35..40).collect::<Vec<_>>());
    assert_eq!(first.row_groups_pruned_by_stats, 3);
    assert_eq!(
        (first.column_indexes_loaded, first.offset_indexes_loaded),
        (1, 1)
    );
    assert_eq!(first.page_index_cache_hits, 0);
    assert!(first.page_index_bytes_read > 0);
    assert!(first.pages_skipped > 0, "the page index pruned nothing");

    // The same query again: no index byte read.
    let (again, batches) = query(ge("a", 35), &["a"]);
    assert_eq!(ints(&batches, "a"), (35..40).collect::<Vec<_>>());
    assert_eq!(again.page_index_bytes_read, 0);
    assert_eq!(
        (again.column_indexes_loaded, again.offset_indexes_loaded),
        (0, 0)
    );
    assert_eq!(again.page_index_cache_hits, 2);
    assert_eq!(
        again.bytes_read,
        first.bytes_read - first.page_index_bytes_read
    );

    // Another predicate column: its column index only, and the offset indexes of the two
    // columns read.
    let (other, batches) = query(ge("b", 70), &["b", "c"]);
    assert_eq!(
        ints(&batches, "b"),
        (35..40).map(|a| 2 * a).collect::<Vec<_>>()
    );
    assert_eq!(
        ints(&batches, "c"),
        (35..40).map(|a| a % 7).collect::<Vec<_>>()
    );
    assert_eq!(
        (other.column_indexes_loaded, other.offset_indexes_loaded),
        (1, 2)
    );
    assert_eq!(other.page_index_cache_hits, 0);
    assert!(other.page_index_bytes_read > 0);

    // Everything this one needs is cached by now.
    let (mixed, batches) = query(ge("a", 35), &["a", "b"]);
    assert_eq!(
        ints(&batches, "b"),
        (35..40).map(|a| 2 * a).collect::<Vec<_>>()
    );
    assert_eq!(mixed.page_index_bytes_read, 0);
    assert_eq!(mixed.page_index_cache_hits, 3);

    let stats = c.stats();
    assert_eq!(stats.misses, 1, "the footer is parsed once");
    assert_eq!(stats.page_indexes, 5);
    assert_eq!((stats.page_index_hits, stats.page_index_misses), (5, 5));
}

#[test]
fn page_indexes_count_against_the_byte_budget() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_abc(&dir.path().join("abc.parquet"));
    let probe = cache();
    let scan = Scan::new(dir.path(), &["abc.parquet"]);
    scan.all(&probe).expect("probe");
    let footer = probe.stats().bytes;
    let mut filtered = Scan::new(dir.path(), &["abc.parquet"]);
    // Some rows of every row group fail it: a predicate every row passes by statistics
    // needs no page index at all.
    filtered.predicate = Some(Predicate::compare("c", CmpOp::GtEq, Literal::Int(1)));
    let passing: Vec<i64> = (0..40).filter(|a| a % 7 != 0).collect();
    filtered.all(&probe).expect("filtered");
    let with_indexes = probe.stats().bytes;
    assert!(with_indexes > footer, "{with_indexes} <= {footer}");
    assert!(probe.stats().page_indexes > 0);

    // Room for the footer only: the indexes are served but not kept, and the scan is right.
    let c = MetadataCache::new(footer);
    scan.all(&c).expect("footer");
    for _ in 0..2 {
        let (summary, batches) = filtered.all(&c).expect("filtered");
        assert_eq!(ints(&batches, "a"), passing);
        assert!(
            summary.page_index_bytes_read > 0,
            "not cached, so read again"
        );
    }
    assert_eq!(c.stats().bytes, footer);
    assert_eq!(c.stats().page_indexes, 0);
    assert_eq!(c.stats().misses, 1);
}

#[test]
fn metadata_cache_evicts_least_recently_used() {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["a", "b", "c"] {
        write(&dir.path().join(format!("{name}.parquet")), 10);
    }
    let probe = cache();
    Scan::new(dir.path(), &["a.parquet"])
        .all(&probe)
        .expect("probe");
    let one = probe.stats().bytes;
    // Room for two footers.
    let c = MetadataCache::new(one * 2 + one / 2);
    for files in [["a.parquet"], ["b.parquet"], ["a.parquet"], ["c.parquet"]] {
        Scan::new(dir.path(), &files).all(&c).expect("scan");
    }
    // c evicted b (least recently used), so a is still a hit and b a miss.
    assert_eq!(c.stats().evictions, 1);
    Scan::new(dir.path(), &["a.parquet"]).all(&c).expect("a");
    assert_eq!((c.stats().hits, c.stats().misses), (2, 3));
    Scan::new(dir.path(), &["b.parquet"]).all(&c).expect("b");
    assert_eq!((c.stats().hits, c.stats().misses), (2, 4));
}

/// Partition values typed as DuckDB types them, over all the files: `year` is BIGINT,
/// `day` DATE (one directory written `2024-1-5`), `code` VARCHAR (`007` keeps its zeros,
/// and one directory's `abc` makes the other's `12` text too); filters on them prune
/// whole files by value.
#[test]
fn hive_partition_values_are_typed_and_prune() {
    use arrow_array::types::Date32Type;
    let dir = tempfile::tempdir().expect("tempdir");
    let files = [
        "year=2023/day=2023-12-31/code=007/part.parquet",
        "year=2024/day=2024-1-5/code=12/part.parquet",
        "year=2024/day=2024-01-06/code=abc/part.parquet",
    ];
    for f in files {
        write(&dir.path().join(f), 2);
    }
    let c = cache();
    let (_, batches) = Scan::new(dir.path(), &files).all(&c).expect("all");
    let schema = batches[0].schema();
    let types: Vec<(&str, &DataType)> = schema
        .fields()
        .iter()
        .map(|f| (f.name().as_str(), f.data_type()))
        .collect();
    // A library scan without a projection adds partition columns in name order (the
    // daemon's table schema keeps path order).
    assert_eq!(
        types,
        [
            ("i", &DataType::Int64),
            ("s", &DataType::Utf8),
            ("code", &DataType::Utf8),
            ("day", &DataType::Date32),
            ("year", &DataType::Int64),
        ]
    );
    let days: Vec<i32> = batches
        .iter()
        .flat_map(|b| {
            let day = b.column_by_name("day").expect("day");
            day.as_primitive::<Date32Type>().values().to_vec()
        })
        .collect();
    let jan5 = ringscan_values::date::parse_date("2024-01-05").expect("date");
    assert_eq!(days, [jan5 - 5, jan5 - 5, jan5, jan5, jan5 + 1, jan5 + 1]);
    let codes: Vec<String> = batches
        .iter()
        .flat_map(|b| {
            b.column_by_name("code")
                .expect("code")
                .as_string::<i32>()
                .iter()
                .map(|v| v.expect("code").to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(codes, ["007", "007", "12", "12", "abc", "abc"]);

    for (pred, kept) in [
        (Predicate::compare("year", CmpOp::Eq, Literal::Int(2024)), 2),
        (
            Predicate::compare("day", CmpOp::GtEq, Literal::Date32(jan5 - 4)),
            2,
        ),
        (
            Predicate::compare("day", CmpOp::Eq, Literal::Date32(jan5)),
            1,
        ),
        (
            Predicate::compare("code", CmpOp::Eq, Literal::Utf8("007".into())),
            1,
        ),
    ] {
        let mut scan = Scan::new(dir.path(), &files);
        scan.predicate = Some(pred.clone());
        let (summary, batches) = scan.all(&c).expect("scan");
        assert_eq!(summary.files_pruned_by_partition, 3 - kept, "{pred:?}");
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        assert_eq!(rows, 2 * kept as usize, "{pred:?}");
    }
}

#[test]
fn partition_columns_from_the_hive_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("sym=A/part.parquet"), 12);
    write(&dir.path().join("sym=B/part.parquet"), 3);
    let c = cache();
    let files = ["sym=A/part.parquet", "sym=B/part.parquet"];

    let mut scan = Scan::new(dir.path(), &files);
    scan.projection = Some(vec!["sym".into(), "i".into()]);
    scan.predicate = Some(Predicate::compare(
        "sym",
        CmpOp::Eq,
        Literal::Utf8("A".into()),
    ));
    let (summary, batches) = scan.all(&c).expect("scan");
    assert_eq!(summary.files_considered, 2);
    assert_eq!(summary.files_pruned, 1);
    assert_eq!(ints(&batches, "i"), (0..12).collect::<Vec<_>>());
    for b in &batches {
        assert_eq!(b.schema().field(0).name(), "sym");
        assert_eq!(b.schema().field(0).data_type(), &DataType::Utf8);
        let sym = b.column(0).as_string::<i32>();
        assert!(sym.iter().all(|v| v == Some("A")));
    }

    // No projection: file columns, then the partition column.
    let (_, batches) = Scan::new(dir.path(), &files).all(&c).expect("all");
    let names: Vec<String> = batches[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["i", "s", "sym"]);
    let syms: Vec<String> = batches
        .iter()
        .flat_map(|b| {
            b.column(2)
                .as_string::<i32>()
                .iter()
                .map(|v| v.expect("value").to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(syms.iter().filter(|s| *s == "A").count(), 12);
    assert_eq!(syms.iter().filter(|s| *s == "B").count(), 3);
}

#[test]
fn limit_and_cancel_stop_early() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("a.parquet"), 30);
    write(&dir.path().join("b.parquet"), 30);
    let c = cache();

    let mut scan = Scan::new(dir.path(), &["a.parquet", "b.parquet"]);
    scan.limit = Some(33);
    let (summary, batches) = scan.all(&c).expect("limit");
    assert_eq!(ints(&batches, "i"), (0..30).chain(0..3).collect::<Vec<_>>());
    assert_eq!(summary.rows_emitted, 33);

    scan.limit = Some(7);
    scan.predicate = Some(Predicate::compare("i", CmpOp::Gt, Literal::Int(25)));
    let (_, batches) = scan.all(&c).expect("limit with predicate");
    assert_eq!(ints(&batches, "i"), vec![26, 27, 28, 29, 26, 27, 28]);

    let scan = Scan::new(dir.path(), &["a.parquet", "b.parquet"]);
    let (summary, batches) = scan.run(&c, |_| false).expect("cancel");
    assert_eq!(batches.len(), 1);
    assert_eq!(summary.rows_emitted, 4);
    assert_eq!(summary.files_considered, 1);
}

#[test]
fn literals_that_are_not_values_of_the_column_type() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir.path().join("a.parquet"), 5);
    let c = cache();
    let cases = [
        (CmpOp::Lt, Literal::Float(2.5), vec![0, 1, 2]),
        (CmpOp::LtEq, Literal::Float(-0.5), vec![]),
        (CmpOp::Gt, Literal::Float(2.5), vec![3, 4]),
        (CmpOp::GtEq, Literal::Float(-0.5), vec![0, 1, 2, 3, 4]),
        (CmpOp::Eq, Literal::Float(2.0), vec![2]),
        (CmpOp::Eq, Literal::Float(2.5), vec![]),
        (CmpOp::NotEq, Literal::Float(2.5), vec![0, 1, 2, 3, 4]),
        (CmpOp::Lt, Literal::UInt(u64::MAX), vec![0, 1, 2, 3, 4]),
        (CmpOp::Gt, Literal::Int(i64::MAX), vec![]),
        (
            CmpOp::Lt,
            Literal::Float(f64::INFINITY),
            vec![0, 1, 2, 3, 4],
        ),
    ];
    for (op, lit, expected) in cases {
        let mut scan = Scan::new(dir.path(), &["a.parquet"]);
        scan.predicate = Some(Predicate::compare("i", op, lit.clone()));
        let (_, batches) = scan.all(&c).expect("scan");
        assert_eq!(ints(&batches, "i"), expected, "i {op:?} {lit:?}");
    }
}

#[test]
fn pruning_reaches_pages_and_the_summary_counts_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Row groups [0, 10), [10, 20), [20, 25); pages of 3 rows.
    write(&dir.path().join("a.parquet"), 25);
    let mut scan = Scan::new(dir.path(), &["a.parquet"]);
    scan.predicate = Some(Predicate::compare("i", CmpOp::GtEq, Literal::Int(23)));
    let (summary, batches) = scan.all(&cache()).expect("scan");
    assert_eq!(ints(&batches, "i"), vec![23, 24]);
    assert_eq!(summary.row_groups_considered, 3);
    assert_eq!(summary.row_groups_pruned, 2);
    assert!(summary.pages_skipped >= 1, "{summary:?}");
    assert_eq!(summary.rows_decoded, 2);
    assert_eq!(summary.rows_emitted, 2);
    assert!(summary.bytes_read > 0);
}
