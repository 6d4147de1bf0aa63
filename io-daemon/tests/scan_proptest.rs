//! Differential property test of the scan path: random files (small row groups and pages,
//! page statistics and bloom filters on), random predicates, projections and limits; the
//! scan must return exactly the rows, in order, of a naive reference that reads the whole
//! file without pruning and evaluates the predicate row by row (SQL NULL semantics, floats
//! in total order like Arrow's kernels).

mod common;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use common::{eval_row, FloatSemantics, Value};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use proptest::prelude::*;
use ringscan_io_daemon::scan::{scan_files, LateMaterialization, MetadataCache, ScanSpec};
use ringscan_ipc::msg::{CmpOp, Literal, Predicate, ScanSummary};

/// A cell as compared: floats by bit pattern, so NaN equals NaN and -0 differs from +0.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Cell {
    Null,
    I(i64),
    F(u64),
    S(String),
}

impl Cell {
    fn value(&self) -> Value {
        match self {
            Cell::Null => Value::Null,
            Cell::I(v) => Value::Int((*v).into()),
            Cell::F(b) => Value::Float(f64::from_bits(*b)),
            Cell::S(s) => Value::Str(s.clone()),
        }
    }
}

fn cell(column: &dyn Array, row: usize) -> Cell {
    if column.is_null(row) {
        return Cell::Null;
    }
    match column.data_type() {
        DataType::Int64 => Cell::I(column.as_primitive::<Int64Type>().value(row)),
        DataType::Float64 => Cell::F(column.as_primitive::<Float64Type>().value(row).to_bits()),
        DataType::Utf8 => Cell::S(column.as_string::<i32>().value(row).to_owned()),
        // A distinct scan reads strings as dictionaries.
        DataType::Dictionary(_, _) => {
            let plain = arrow_cast::cast(&column.slice(row, 1), &DataType::Utf8).expect("cast");
            cell(plain.as_ref(), 0)
        }
        other => panic!("unexpected type {other}"),
    }
}

/// Rows of `batches`, each as the cells of `columns` (by name) in order.
fn rows_of(batches: &[RecordBatch], columns: &[String]) -> Vec<Vec<Cell>> {
    let mut out = Vec::new();
    for b in batches {
        let cols: Vec<&ArrayRef> = columns
            .iter()
            .map(|c| b.column_by_name(c).expect("column"))
            .collect();
        for r in 0..b.num_rows() {
            out.push(cols.iter().map(|c| cell(c.as_ref(), r)).collect());
        }
    }
    out
}

#[derive(Debug, Clone)]
struct Rows {
    i: Vec<Option<i64>>,
    f: Vec<Option<f64>>,
    s: Vec<Option<String>>,
}

#[derive(Debug, Clone)]
struct Layout {
    row_group_rows: usize,
    page_rows: usize,
    dictionary: bool,
}

const FLOATS: [f64; 10] = [
    -2.5,
    -1.0,
    -0.0,
    0.0,
    1.0,
    2.5,
    3.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
];

fn float_value() -> impl Strategy<Value = f64> {
    prop_oneof![
        prop::sample::select(FLOATS.to_vec()),
        Just(-f64::NAN),
        (-5i32..5).prop_map(f64::from),
    ]
}

fn string_value() -> impl Strategy<Value = String> {
    "[abz]{0,9}"
}

fn rows() -> impl Strategy<Value = Rows> {
    (0usize..60).prop_flat_map(|n| {
        (
            prop::collection::vec(prop::option::weighted(0.85, -20i64..20), n),
            prop::collection::vec(prop::option::weighted(0.85, float_value()), n),
            prop::collection::vec(prop::option::weighted(0.85, string_value()), n),
        )
            .prop_map(|(i, f, s)| Rows { i, f, s })
    })
}

fn layout() -> impl Strategy<Value = Layout> {
    (1usize..20, 1usize..8, any::<bool>()).prop_map(|(row_group_rows, page_rows, dictionary)| {
        Layout {
            row_group_rows,
            page_rows,
            dictionary,
        }
    })
}

fn literal_for(column: &'static str) -> BoxedStrategy<Literal> {
    let null = Just(Literal::Null);
    match column {
        "i" => prop_oneof![
            6 => (-22i64..22).prop_map(Literal::Int),
            4 => (-44i32..44).prop_map(|h| Literal::Float(f64::from(h) / 2.0)),
            1 => prop::sample::select(vec![i64::MIN, i64::MAX]).prop_map(Literal::Int),
            1 => Just(Literal::UInt(u64::MAX)),
            1 => null,
        ]
        .boxed(),
        "f" => prop_oneof![
            6 => float_value().prop_map(Literal::Float),
            2 => (-5i64..5).prop_map(Literal::Int),
            1 => null,
        ]
        .boxed(),
        _ => prop_oneof![8 => string_value().prop_map(Literal::Utf8), 1 => null].boxed(),
    }
}

fn predicate() -> impl Strategy<Value = Predicate> {
    common::predicate_over(vec!["i", "f", "s"], literal_for)
}

fn projection() -> impl Strategy<Value = Option<Vec<String>>> {
    prop::option::weighted(
        0.8,
        prop::sample::subsequence(vec!["i", "f", "s"], 0..=3)
            .prop_shuffle()
            .prop_map(|v| v.into_iter().map(str::to_owned).collect()),
    )
}

fn write(dir: &Path, rows: &Rows, layout: &Layout) -> PathBuf {
    let schema = Arc::new(Schema::new(vec![
        Field::new("i", DataType::Int64, true),
        Field::new("f", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(rows.i.clone())),
        Arc::new(Float64Array::from(rows.f.clone())),
        Arc::new(StringArray::from(rows.s.clone())),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns).expect("batch");
    let props = WriterProperties::builder()
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_max_row_group_row_count(Some(layout.row_group_rows))
        .set_data_page_row_count_limit(layout.page_rows)
        .set_write_batch_size(layout.page_rows)
        .set_dictionary_enabled(layout.dictionary)
        .set_bloom_filter_enabled(true)
        .build();
    let path = dir.join("data.parquet");
    let file = File::create(&path).expect("create");
    let mut writer = ArrowWriter::try_new(file, schema, Some(props)).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
    path
}

/// The whole file, no pruning, filtered row by row, projected.
fn reference(path: &Path, pred: Option<&Predicate>, projection: &[String]) -> Vec<Vec<Cell>> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).expect("open"))
        .expect("builder")
        .build()
        .expect("reader");
    let batches: Vec<RecordBatch> = reader.map(|b| b.expect("batch")).collect();
    let all = ["i", "f", "s"].map(str::to_owned);
    rows_of(&batches, &all)
        .into_iter()
        .filter(|row| {
            pred.is_none_or(|p| {
                let lookup = |c: &str| row[all.iter().position(|a| a == c).expect("col")].value();
                eval_row(p, &lookup, FloatSemantics::Total) == Some(true)
            })
        })
        .map(|row| {
            projection
                .iter()
                .map(|c| row[all.iter().position(|a| a == c).expect("col")].clone())
                .collect()
        })
        .collect()
}

/// The engine's knobs: every combination must give the same rows.
#[derive(Debug, Clone, Copy)]
struct Engine {
    threads: usize,
    prefetch: usize,
    prefetch_bytes: usize,
    late: LateMaterialization,
}

impl Default for Engine {
    fn default() -> Self {
        Self {
            threads: 2,
            prefetch: 2,
            prefetch_bytes: 1 << 20,
            late: LateMaterialization::Auto,
        }
    }
}

fn engine() -> impl Strategy<Value = Engine> {
    (
        1usize..4,
        0usize..3,
        prop_oneof![Just(0usize), Just(1 << 20)],
        prop_oneof![
            Just(LateMaterialization::Auto),
            Just(LateMaterialization::Always),
            Just(LateMaterialization::Never)
        ],
    )
        .prop_map(|(threads, prefetch, prefetch_bytes, late)| Engine {
            threads,
            prefetch,
            prefetch_bytes,
            late,
        })
}

#[allow(clippy::too_many_arguments)]
fn check(
    rows: &Rows,
    layout: &Layout,
    pred: Option<&Predicate>,
    projection: Option<&[String]>,
    page: (Option<u64>, u64),
    batch_size: usize,
    engine: Engine,
) -> Result<(), TestCaseError> {
    check_twice(
        rows, layout, pred, projection, None, page, batch_size, engine,
    )
}

/// [`check`] for `pred`, then again on the same cache (its page indexes now cached), then
/// for `second` (other predicate columns and projection: some indexes cached, some not).
#[allow(clippy::too_many_arguments)]
fn check_twice(
    rows: &Rows,
    layout: &Layout,
    pred: Option<&Predicate>,
    projection: Option<&[String]>,
    second: Option<(Option<&Predicate>, Option<&[String]>)>,
    page: (Option<u64>, u64),
    batch_size: usize,
    engine: Engine,
) -> Result<(), TestCaseError> {
    let (limit, offset) = page;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), rows, layout);
    let cache = MetadataCache::new(1 << 20);
    let first = scan_and_compare(
        dir.path(),
        &path,
        &cache,
        rows,
        pred,
        projection,
        page,
        batch_size,
        engine,
    )?;
    let again = scan_and_compare(
        dir.path(),
        &path,
        &cache,
        rows,
        pred,
        projection,
        page,
        batch_size,
        engine,
    )?;
    if pred.is_none() && limit != Some(0) {
        // Unfiltered: the offset's whole row groups are never decoded.
        let matching = rows.i.len() as u64;
        let (rg, skip) = (layout.row_group_rows as u64, offset.min(matching));
        let (mut whole, mut whole_rows) = (0, 0);
        while whole_rows < matching && whole_rows + rg.min(matching - whole_rows) <= skip {
            whole_rows += rg.min(matching - whole_rows);
            whole += 1;
        }
        prop_assert_eq!(first.row_groups_skipped_by_offset, whole);
        prop_assert!(first.rows_decoded <= matching - whole_rows, "{:?}", first);
    }
    // Everything the first scan loaded is cached: no index byte is read twice.
    prop_assert_eq!(again.page_index_bytes_read, 0);
    prop_assert_eq!(again.column_indexes_loaded, 0);
    prop_assert_eq!(again.offset_indexes_loaded, 0);
    // Nor a bloom filter.
    prop_assert_eq!(again.bloom_filter_bytes_read, 0);
    if limit.is_none() {
        // A limit stops the scan at a point that depends on the threads' timing.
        prop_assert_eq!(
            again.bytes_read + first.page_index_bytes_read + first.bloom_filter_bytes_read,
            first.bytes_read
        );
    }
    if let Some((pred, projection)) = second {
        scan_and_compare(
            dir.path(),
            &path,
            &cache,
            rows,
            pred,
            projection,
            page,
            batch_size,
            engine,
        )?;
    }
    // The footer was parsed once for all the scans (none, with a zero limit).
    prop_assert!(cache.stats().misses <= 1);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn scan_and_compare(
    root: &Path,
    path: &Path,
    cache: &MetadataCache,
    rows: &Rows,
    pred: Option<&Predicate>,
    projection: Option<&[String]>,
    (limit, offset): (Option<u64>, u64),
    batch_size: usize,
    engine: Engine,
) -> Result<ScanSummary, TestCaseError> {
    let columns: Vec<String> = projection.map_or_else(
        || ["i", "f", "s"].map(str::to_owned).to_vec(),
        <[String]>::to_vec,
    );
    let mut expected = reference(path, pred, &columns);
    let matching = expected.len() as u64;
    expected.drain(..usize::try_from(offset.min(matching)).expect("offset"));
    if let Some(l) = limit {
        expected.truncate(usize::try_from(l).expect("limit"));
    }

    let files = [path.to_path_buf()];
    let spec = ScanSpec::new(root, &files)
        .with_projection(projection)
        .with_predicate(pred)
        .with_limit(limit)
        .with_offset(offset)
        .with_batch_size(batch_size)
        .with_threads(engine.threads)
        .with_prefetch(engine.prefetch, engine.prefetch_bytes)
        .with_late_materialization(engine.late);
    let mut batches = Vec::new();
    let summary = scan_files(&spec, cache, &mut |b: RecordBatch| {
        batches.push(b);
        Ok(true)
    })
    .map_err(|e| TestCaseError::fail(format!("scan failed: {e:?}")))?;
    for b in &batches {
        let names: Vec<&String> = b.schema_ref().fields().iter().map(|f| f.name()).collect();
        prop_assert_eq!(names, columns.iter().collect::<Vec<_>>());
        prop_assert!(b.num_rows() <= batch_size);
    }
    let got = rows_of(&batches, &columns);
    prop_assert_eq!(&got, &expected);
    prop_assert_eq!(summary.rows_emitted, expected.len() as u64);
    prop_assert!(summary.rows_decoded >= summary.rows_emitted);
    prop_assert!(summary.rows_decoded <= rows.i.len() as u64);
    // A zero limit reads nothing, not even the footer.
    prop_assert_eq!(summary.files_considered, u64::from(limit != Some(0)));
    prop_assert!(summary.row_groups_pruned <= summary.row_groups_considered);
    // Column indexes only for the predicate's columns, none without a predicate.
    let pred_columns = pred.map_or(0, |p| {
        let mut c = p.columns();
        c.sort_unstable();
        c.dedup();
        c.len() as u64
    });
    prop_assert!(
        summary.column_indexes_loaded <= summary.row_groups_considered * pred_columns,
        "{} column indexes for {} row groups and {} predicate columns",
        summary.column_indexes_loaded,
        summary.row_groups_considered,
        pred_columns
    );
    if pred.is_none() {
        prop_assert_eq!(summary.offset_indexes_loaded, 0);
        prop_assert_eq!(summary.page_index_bytes_read, 0);
    }
    prop_assert!(summary.page_index_bytes_read <= summary.bytes_read);
    if limit != Some(0) {
        prop_assert_eq!(summary.rows_skipped_by_offset, offset.min(matching));
    }
    Ok(summary)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// `SELECT DISTINCT`'s scan: duplicates dropped per row group, never a distinct row.
    #[test]
    fn distinct_scan_sends_every_distinct_row(
        rows in rows(),
        layout in layout(),
        pred in prop::option::weighted(0.5, predicate()),
        projection in prop::sample::subsequence(vec!["i", "f", "s"], 1..=3)
            .prop_shuffle()
            .prop_map(|v| v.into_iter().map(str::to_owned).collect::<Vec<_>>()),
        engine in engine(),
        cached in any::<bool>(),
    ) {
        check_distinct(&rows, &layout, pred.as_ref(), &projection, engine, cached)?;
    }

    /// Decoded chunks kept between scans give the same rows, and none survive a change
    /// of the file.
    #[test]
    fn column_cache_gives_the_same_rows(
        rows in rows(),
        other_rows in rows(),
        layout in layout(),
        pred in prop::option::weighted(0.9, predicate()),
        projection in projection(),
        second_pred in prop::option::weighted(0.9, predicate()),
        second_projection in projection(),
        limit in prop::option::weighted(0.2, 0u64..70),
        offset in prop_oneof![3 => Just(0u64), 1 => 0u64..90],
        batch_size in 1usize..16,
        engine in engine(),
    ) {
        check_column_cache(
            &rows,
            &other_rows,
            &layout,
            [
                (pred.as_ref(), projection.as_deref()),
                (second_pred.as_ref(), second_projection.as_deref()),
            ],
            (limit, offset),
            batch_size,
            engine,
        )?;
    }

    #[test]
    fn scan_matches_naive_reference(
        rows in rows(),
        layout in layout(),
        pred in prop::option::weighted(0.9, predicate()),
        projection in projection(),
        limit in prop::option::weighted(0.3, 0u64..70),
        offset in prop_oneof![3 => Just(0u64), 1 => 0u64..90],
        batch_size in 1usize..16,
        engine in engine(),
    ) {
        check(&rows, &layout, pred.as_ref(), projection.as_deref(), (limit, offset), batch_size, engine)?;
    }

    /// Deep pagination of unfiltered scans: whole row groups skipped by row counts.
    #[test]
    fn unfiltered_offset_matches_naive_reference(
        rows in rows(),
        layout in layout(),
        projection in projection(),
        limit in prop::option::weighted(0.5, 0u64..40),
        offset in 0u64..90,
        batch_size in 1usize..16,
        engine in engine(),
    ) {
        check(&rows, &layout, None, projection.as_deref(), (limit, offset), batch_size, engine)?;
    }

    /// Page indexes cached by one query and reused, in part, by another with other
    /// predicate columns and projection: the same rows as the naive reference each time.
    #[test]
    fn cached_page_indexes_give_the_same_rows(
        rows in rows(),
        layout in layout(),
        pred in predicate(),
        projection in projection(),
        second_pred in prop::option::weighted(0.9, predicate()),
        second_projection in projection(),
        batch_size in 1usize..16,
        engine in engine(),
    ) {
        check_twice(
            &rows,
            &layout,
            Some(&pred),
            projection.as_deref(),
            Some((second_pred.as_ref(), second_projection.as_deref())),
            (None, 0),
            batch_size,
            engine,
        )?;
    }
}

/// The column cache: two queries run in turn, four times each, on one cache (first use
/// reads only surviving pages, second decodes whole chunks and keeps them, later ones
/// are served from memory), then the file is rewritten with other rows and both run
/// again. Every scan returns exactly the naive reference's rows.
#[allow(clippy::too_many_arguments)]
fn check_column_cache(
    rows: &Rows,
    other_rows: &Rows,
    layout: &Layout,
    queries: [(Option<&Predicate>, Option<&[String]>); 2],
    page: (Option<u64>, u64),
    batch_size: usize,
    engine: Engine,
) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), rows, layout);
    let cache = MetadataCache::new(1 << 20).with_column_cache(64 << 20);
    let run =
        |path: &Path, rows: &Rows, (pred, projection): (Option<&Predicate>, Option<&[String]>)| {
            scan_and_compare(
                dir.path(),
                path,
                &cache,
                rows,
                pred,
                projection,
                page,
                batch_size,
                engine,
            )
        };
    let mut summaries = Vec::new();
    for _ in 0..4 {
        for query in queries {
            summaries.push(run(&path, rows, query)?);
        }
    }
    if page.0.is_none() {
        // Without a limit the same chunks are read every time: from the third use on,
        // whatever the first scan decoded comes from the cache (no column data read).
        for ((first, last), (pred, projection)) in
            summaries[..2].iter().zip(&summaries[6..]).zip(queries)
        {
            // A row group whose rows all pass by statistics reads the output columns
            // only: with none, no column at all.
            let filtered =
                first.row_groups_considered - first.row_groups_pruned > first.row_groups_all_pass;
            let reads_columns = projection.is_none_or(|p| !p.is_empty())
                || (filtered && pred.is_some_and(|p| !p.columns().is_empty()));
            if first.rows_decoded > 0 && reads_columns {
                prop_assert!(last.column_cache_hits > 0, "{first:?}\n{last:?}");
                // (Bloom filters are still read for pruning.)
                prop_assert!(
                    last.bytes_read - last.page_index_bytes_read
                        < first.bytes_read - first.page_index_bytes_read
                );
            }
        }
    }
    // A new version of the file: nothing of the old one may be served.
    std::thread::sleep(std::time::Duration::from_millis(5));
    let path = write(dir.path(), other_rows, layout);
    for _ in 0..3 {
        for query in queries {
            run(&path, other_rows, query)?;
        }
    }
    Ok(())
}

/// A distinct scan: every distinct row of the naive reference's answer comes at least
/// once, nothing else comes, rows come in the reference's order (first occurrences, a
/// subsequence of it), and no row comes twice from one row group.
fn check_distinct(
    rows: &Rows,
    layout: &Layout,
    pred: Option<&Predicate>,
    projection: &[String],
    engine: Engine,
    cached: bool,
) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), rows, layout);
    let expected = reference(&path, pred, projection);
    let cache = MetadataCache::new(1 << 20).with_column_cache(if cached { 64 << 20 } else { 0 });
    let files = [path.clone()];
    for _ in 0..3 {
        let spec = ScanSpec::new(dir.path(), &files)
            .with_projection(Some(projection))
            .with_predicate(pred)
            .with_distinct(true)
            .with_batch_size(4)
            .with_threads(engine.threads)
            .with_prefetch(engine.prefetch, engine.prefetch_bytes)
            .with_late_materialization(engine.late);
        let mut batches = Vec::new();
        let summary = scan_files(&spec, &cache, &mut |b: RecordBatch| {
            batches.push(b);
            Ok(true)
        })
        .map_err(|e| TestCaseError::fail(format!("scan failed: {e:?}")))?;
        let got = rows_of(&batches, projection);
        prop_assert_eq!(summary.rows_emitted, got.len() as u64);
        // A subsequence of the reference's rows...
        let mut at = 0;
        for row in &got {
            while at < expected.len() && &expected[at] != row {
                at += 1;
            }
            prop_assert!(at < expected.len(), "{row:?} out of order or not expected");
            at += 1;
        }
        // ...with every distinct row of it.
        let mut want: Vec<&Vec<Cell>> = expected.iter().collect();
        want.sort_by_key(|r| format!("{r:?}"));
        want.dedup();
        let mut have: Vec<&Vec<Cell>> = got.iter().collect();
        have.sort_by_key(|r| format!("{r:?}"));
        let before = have.len();
        have.dedup();
        prop_assert_eq!(&have, &want);
        // At most once per row group.
        let groups = rows.i.len().div_ceil(layout.row_group_rows.max(1)).max(1);
        prop_assert!(
            before <= want.len() * groups,
            "{before} rows for {} distinct",
            want.len()
        );
    }
    Ok(())
}

/// Signed zeros and NaNs of both signs against every operator, in one-row pages: DuckDB's
/// order (both zeros equal; every NaN equal and above +infinity).
#[test]
fn floats_compare_as_duckdb() {
    let f = vec![
        Some(-0.0),
        Some(0.0),
        Some(1.0),
        None,
        Some(f64::NAN),
        Some(-f64::NAN),
        Some(f64::INFINITY),
    ];
    let n = f.len();
    let rows = Rows {
        i: vec![Some(0); n],
        f,
        s: vec![None; n],
    };
    let layout = Layout {
        row_group_rows: 2,
        page_rows: 1,
        dictionary: false,
    };
    for lit in [-0.0, 0.0, 1.0, f64::NAN, -f64::NAN] {
        for op in [
            CmpOp::Eq,
            CmpOp::NotEq,
            CmpOp::Lt,
            CmpOp::LtEq,
            CmpOp::Gt,
            CmpOp::GtEq,
        ] {
            let p = Predicate::compare("f", op, Literal::Float(lit));
            check(
                &rows,
                &layout,
                Some(&p),
                None,
                (None, 0),
                3,
                Engine::default(),
            )
            .expect("plain");
            let p = Predicate::Not(Box::new(p));
            check(
                &rows,
                &layout,
                Some(&p),
                None,
                (None, 0),
                3,
                Engine::default(),
            )
            .expect("negated");
        }
    }
}

/// Row groups whose statistics prove every row passes are read whole and unfiltered
/// (their output columns only); the others, and those with a NULL or a failing row in
/// the predicate's column, are filtered. Every projection, limit, offset and engine gives
/// the naive reference's rows, and the summary counts the row groups read unfiltered.
#[test]
fn row_groups_whose_rows_all_pass_are_read_unfiltered() {
    // Five-row groups: all pass; one fails; one NULL; all pass; NaNs (NaN > 0 holds
    // under the one float rule, so `f > 0` passes them whole too).
    let i = [
        [1, 2, 3, 4, 5].map(Some),
        [Some(2), Some(-1), Some(3), Some(4), Some(5)],
        [Some(1), None, Some(3), Some(4), Some(5)],
        [6, 7, 8, 9, 10].map(Some),
        [Some(3), Some(1), None, Some(2), Some(9)],
    ]
    .concat();
    let f = [
        [1.0, 2.0, 3.0, 4.0, 5.0].map(Some),
        [1.0, 2.0, 0.0, 4.0, 5.0].map(Some),
        [Some(1.0), None, Some(3.0), Some(4.0), Some(5.0)],
        [6.0, 7.0, 8.0, 9.0, 10.0].map(Some),
        [f64::NAN, 1.0, 2.0, f64::NAN, 3.0].map(Some),
    ]
    .concat();
    let s = (0..i.len()).map(|r| Some(format!("r{r}"))).collect();
    let rows = Rows { i, f, s };
    let layout = Layout {
        row_group_rows: 5,
        page_rows: 2,
        dictionary: false,
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(dir.path(), &rows, &layout);
    let pages = [
        (None, 0),
        (Some(3), 2),
        (Some(7), 4),
        (None, 13),
        (Some(0), 0),
    ];
    for (pred, all_pass) in [
        (Predicate::compare("i", CmpOp::Gt, Literal::Int(0)), 2),
        (Predicate::compare("f", CmpOp::Gt, Literal::Int(0)), 3),
        // Equivalent rewrites the evaluator also proves, and one it cannot.
        (
            Predicate::Not(Box::new(Predicate::compare(
                "i",
                CmpOp::LtEq,
                Literal::Int(0),
            ))),
            2,
        ),
        (
            Predicate::And(vec![
                Predicate::compare("i", CmpOp::Gt, Literal::Int(0)),
                Predicate::IsNull {
                    expr: ringscan_ipc::msg::Operand::Column("s".into()),
                    negated: true,
                },
            ]),
            2,
        ),
        (Predicate::compare("i", CmpOp::Gt, Literal::Int(1)), 1),
    ] {
        for projection in [None, Some(vec![]), Some(vec!["s"]), Some(vec!["s", "i"])] {
            let projection: Option<Vec<String>> =
                projection.map(|p| p.into_iter().map(str::to_owned).collect());
            for page in pages {
                for engine in [
                    Engine::default(),
                    Engine {
                        threads: 1,
                        ..Engine::default()
                    },
                    Engine {
                        late: LateMaterialization::Always,
                        prefetch_bytes: 0,
                        ..Engine::default()
                    },
                ] {
                    let cache = MetadataCache::new(1 << 20);
                    let summary = scan_and_compare(
                        dir.path(),
                        &path,
                        &cache,
                        &rows,
                        Some(&pred),
                        projection.as_deref(),
                        page,
                        3,
                        engine,
                    )
                    .unwrap_or_else(|e| panic!("{pred:?} {projection:?} {page:?}: {e}"));
                    if page.0 != Some(0) {
                        assert_eq!(summary.row_groups_all_pass, all_pass, "{pred:?}");
                    }
                }
            }
        }
    }
}
