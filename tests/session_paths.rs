//! Shortcuts of the SQL session against its plain path, through a real daemon:
//! - `count(*)`, `count(x)`, `min(x)`, `max(x)` answered from Parquet statistics give
//!   exactly what the scan gives, and the statistics path is taken only where the
//!   statistics are exact;
//! - a session's scans reuse one ring, and the daemon's column cache serves hot chunks,
//!   without changing any answer.
//!
//! One daemon (`ringscan daemon run`, stdio detached, stopped on drop) serves a data
//! directory; every case writes its own table there.

use std::cell::RefCell;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{
    ArrayRef, Date32Array, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use proptest::prelude::*;
use ringscan_executor::engine::{EngineOptions, Handed, Handing, Interrupt, SqlSession};
use ringscan_executor::QueryOutcome;
use ringscan_ipc::client::{socket_path, DaemonClient};

const BIN: &str = env!("CARGO_BIN_EXE_ringscan");

/// A `ringscan daemon run` process; Drop asks it to stop, then kills it.
struct Daemon {
    child: Child,
    data: PathBuf,
}

impl Daemon {
    fn start(data: &Path) -> Self {
        let log = File::create(data.with_extension("log")).expect("log file");
        let child = Command::new(BIN)
            .args(["daemon", "run", "--data"])
            .arg(data)
            .args(["--idle-timeout", "120s"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn the daemon");
        let daemon = Self {
            child,
            data: data.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(mut c) = DaemonClient::connect(socket_path(data)) {
                if c.ping().is_ok() {
                    return daemon;
                }
            }
            assert!(Instant::now() < deadline, "the daemon did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn session(&self) -> SqlSession {
        self.session_with(EngineOptions {
            result_cache_bytes: 0,
            ..EngineOptions::default()
        })
    }

    fn session_with(&self, options: EngineOptions) -> SqlSession {
        let no_spawn = || Err(std::io::Error::other("the test starts the daemon"));
        SqlSession::open(&self.data, &no_spawn, &options).expect("session")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(c) = DaemonClient::connect(socket_path(&self.data)) {
            let _ = c.with_timeout(Duration::from_secs(2)).stop();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("i", DataType::Int64, true),
        Field::new("f", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("d", DataType::Date32, true),
        Field::new("n", DataType::Int32, true),
    ]))
}

/// One generated row.
#[derive(Debug, Clone)]
struct Row {
    i: Option<i64>,
    f: Option<f64>,
    s: Option<String>,
    ts: Option<i64>,
    d: Option<i32>,
}

fn batch(rows: &[Row]) -> RecordBatch {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(rows.iter().map(|r| r.i).collect::<Int64Array>()),
        Arc::new(rows.iter().map(|r| r.f).collect::<Float64Array>()),
        Arc::new(rows.iter().map(|r| r.s.clone()).collect::<StringArray>()),
        Arc::new(
            rows.iter()
                .map(|r| r.ts)
                .collect::<TimestampMicrosecondArray>()
                .with_timezone("UTC"),
        ),
        Arc::new(rows.iter().map(|r| r.d).collect::<Date32Array>()),
        Arc::new(Int32Array::from(vec![None; rows.len()])),
    ];
    RecordBatch::try_new(schema(), columns).expect("batch")
}

/// How one file is written.
#[derive(Debug, Clone)]
struct FileSpec {
    rows: Vec<Row>,
    row_group_rows: usize,
    statistics: EnabledStatistics,
    truncate: Option<usize>,
}

fn write(path: &Path, spec: &FileSpec) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(spec.row_group_rows.max(1)))
        .set_statistics_enabled(spec.statistics)
        .set_statistics_truncate_length(spec.truncate)
        .build();
    let file = File::create(path).expect("create");
    let mut w = ArrowWriter::try_new(file, schema(), Some(props)).expect("writer");
    w.write(&batch(&spec.rows)).expect("write");
    w.close().expect("close");
}

fn float() -> impl Strategy<Value = Option<f64>> {
    prop_oneof![
        3 => (-1000.0f64..1000.0).prop_map(Some),
        1 => Just(Some(f64::NAN)),
        1 => Just(Some(-f64::NAN)),
        1 => Just(Some(-0.0)),
        1 => Just(Some(0.0)),
        1 => Just(None),
    ]
}

fn row() -> impl Strategy<Value = Row> {
    (
        prop::option::weighted(0.8, -50i64..50),
        float(),
        prop::option::weighted(0.8, "[a-c]{0,3}|[x-z]{20,40}"),
        prop::option::weighted(0.8, -1_000_000_000i64..1_000_000_000),
        prop::option::weighted(0.8, -1000i32..1000),
    )
        .prop_map(|(i, f, s, ts, d)| Row { i, f, s, ts, d })
}

fn file_spec() -> impl Strategy<Value = FileSpec> {
    (
        prop::collection::vec(row(), 1..40),
        1usize..20,
        prop_oneof![
            4 => Just(EnabledStatistics::Chunk),
            2 => Just(EnabledStatistics::Page),
            1 => Just(EnabledStatistics::None),
        ],
        prop_oneof![Just(None), Just(Some(8usize)), Just(Some(64usize))],
    )
        .prop_map(|(rows, row_group_rows, statistics, truncate)| FileSpec {
            rows,
            row_group_rows,
            statistics,
            truncate,
        })
}

const QUERIES: &[&str] = &[
    "SELECT count(*) FROM {t}",
    "SELECT count(*), count(i), min(i), max(i) FROM {t}",
    "SELECT min(f), count(f) FROM {t}",
    "SELECT max(f) FROM {t}",
    "SELECT min(s), max(s), count(s) FROM {t}",
    "SELECT min(ts), max(ts), min(d), max(d) FROM {t}",
    "SELECT count(n), min(n), max(n) FROM {t}",
    "SELECT max(i) - min(i) AS span, count(*) * 2 AS twice FROM {t}",
    "SELECT count(*), min(i), max(i), min(f), min(s), max(s), min(ts), max(d), count(n), max(n) FROM {t}",
];

/// Every cell as text, floats by their bits but for the sign of a zero or a NaN: a
/// footer's zero minimum is -0.0 whichever zero the column holds (the two compare
/// equal in SQL), and NaNs are one value to DuckDB.
fn cells(outcome: &QueryOutcome) -> (Vec<String>, Vec<String>) {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float32Type, Float64Type};
    use arrow_array::Array;
    let types = outcome
        .result
        .schema
        .fields()
        .iter()
        .map(|f| format!("{}: {}", f.name(), f.data_type()))
        .collect();
    let mut out = Vec::new();
    for b in &outcome.result.batches {
        for c in b.columns() {
            for i in 0..c.len() {
                let text = if c.is_null(i) {
                    "NULL".to_owned()
                } else {
                    match c.data_type() {
                        DataType::Float64 => {
                            let v = c.as_primitive::<Float64Type>().value(i);
                            match v {
                                _ if v.is_nan() => "f64:NaN".to_owned(),
                                0.0 => "f64:0".to_owned(),
                                _ => format!("f64:{:x}", v.to_bits()),
                            }
                        }
                        DataType::Float32 => {
                            let v = c.as_primitive::<Float32Type>().value(i);
                            match v {
                                _ if v.is_nan() => "f32:NaN".to_owned(),
                                0.0 => "f32:0".to_owned(),
                                _ => format!("f32:{:x}", v.to_bits()),
                            }
                        }
                        DataType::Timestamp(..) => {
                            let raw = arrow_cast::cast(&c.slice(i, 1), &DataType::Int64)
                                .expect("timestamp as integer");
                            format!(
                                "ts:{}",
                                raw.as_primitive::<arrow_array::types::Int64Type>().value(0)
                            )
                        }
                        _ => arrow_cast::display::array_value_to_string(c, i).expect("display"),
                    }
                };
                out.push(text);
            }
        }
    }
    (types, out)
}

/// The rows as text, sorted: the same multiset of rows whatever order the plan's
/// partitions returned them in.
fn sorted_rows(outcome: &QueryOutcome) -> Vec<String> {
    let mut rows: Vec<String> = outcome.result.batches.iter().flat_map(batch_rows).collect();
    rows.sort();
    rows
}

/// Runs `sql` with every batch offered to take, the first `limit` taken: the outcome,
/// the rest of the result, the rows of the batches taken, and how many were.
fn take_batches(
    session: &mut SqlSession,
    sql: &str,
    cache: bool,
    limit: usize,
) -> (
    QueryOutcome,
    Option<ringscan_executor::engine::Rest>,
    Vec<String>,
    usize,
) {
    let mut taken: Vec<String> = Vec::new();
    let mut count = 0;
    let (outcome, rest) = session
        .query_each(
            sql,
            Vec::new(),
            cache,
            &Interrupt::new(),
            Handing {
                hold: None,
                takes: true,
            },
            &mut |handed| match handed {
                Handed::Start => {
                    taken.clear();
                    count = 0;
                    false
                }
                Handed::Take(batch) if count < limit => {
                    count += 1;
                    taken.extend(batch_rows(batch));
                    true
                }
                Handed::Take(_) | Handed::Batch(_) => false,
            },
        )
        .expect(sql);
    (outcome, rest, taken, count)
}

/// The rows of `batch` as text, in order.
fn batch_rows(batch: &RecordBatch) -> Vec<String> {
    (0..batch.num_rows())
        .map(|i| {
            let row: Vec<String> = batch
                .columns()
                .iter()
                .map(|c| arrow_cast::display::array_value_to_string(c, i).expect("display"))
                .collect();
            row.join("|")
        })
        .collect()
}

static TABLES: AtomicUsize = AtomicUsize::new(0);

#[test]
fn statistics_path_equals_the_scan_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    let daemon = Daemon::start(&data);
    let stats_session = RefCell::new(daemon.session());
    let scan_session = RefCell::new(daemon.session());
    scan_session.borrow_mut().set_use_statistics(false);
    let taken = AtomicUsize::new(0);
    let fell_back = AtomicUsize::new(0);
    let config = ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |(files in prop::collection::vec(file_spec(), 1..4))| {
        let name = format!("t{}", TABLES.fetch_add(1, Ordering::Relaxed));
        for (n, spec) in files.iter().enumerate() {
            write(&data.join(&name).join(format!("part-{n}.parquet")), spec);
        }
        for q in QUERIES {
            let sql = q.replace("{t}", &name);
            let fast = stats_session.borrow_mut().query(&sql, false).expect("statistics session");
            let slow = scan_session.borrow_mut().query(&sql, false).expect("scan session");
            prop_assert!(!slow.from_statistics);
            if fast.from_statistics {
                taken.fetch_add(1, Ordering::Relaxed);
                let scan = fast.scan.clone().unwrap_or_default();
                prop_assert_eq!(scan.bytes_read, 0);
                prop_assert_eq!(scan.rows_decoded, 0);
            } else {
                fell_back.fetch_add(1, Ordering::Relaxed);
            }
            prop_assert_eq!(cells(&fast), cells(&slow), "{}", sql);
        }
    });
    let (taken, fell_back) = (taken.into_inner(), fell_back.into_inner());
    assert!(taken > 20, "statistics path taken only {taken} times");
    assert!(fell_back > 20, "scan fallback only {fell_back} times");
}

fn rows(n: i64) -> Vec<Row> {
    (0..n)
        .map(|k| Row {
            i: (k % 10 != 3).then_some(k - 7),
            f: Some(k as f64 / 4.0),
            s: Some(format!("s{k:03}")),
            ts: Some(1_700_000_000_000_000 + k),
            d: Some(19_000 + k as i32),
        })
        .collect()
}

fn spec(rows: Vec<Row>) -> FileSpec {
    FileSpec {
        rows,
        row_group_rows: 16,
        statistics: EnabledStatistics::Chunk,
        truncate: None,
    }
}

#[test]
fn statistics_path_is_taken_only_where_exact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    write(&data.join("good/a.parquet"), &spec(rows(50)));
    write(&data.join("good/b.parquet"), &spec(rows(20)));
    let long: Vec<Row> = rows(30)
        .into_iter()
        .map(|mut r| {
            r.s = r.s.map(|s| format!("{s}{}", "x".repeat(100)));
            r
        })
        .collect();
    write(
        &data.join("long/a.parquet"),
        &FileSpec {
            truncate: Some(16),
            ..spec(long)
        },
    );
    write(&data.join("nostats/a.parquet"), &spec(rows(10)));
    write(
        &data.join("nostats/b.parquet"),
        &FileSpec {
            statistics: EnabledStatistics::None,
            ..spec(rows(10))
        },
    );
    write(&data.join("part/region=east/a.parquet"), &spec(rows(10)));
    write(&data.join("part/region=west/a.parquet"), &spec(rows(10)));
    let daemon = Daemon::start(&data);
    let mut session = daemon.session();

    let sql = "SELECT count(*), count(i), min(i), max(i), min(f), min(s), max(s), min(ts), max(d) FROM good";
    let outcome = session.query(sql, false).expect("query");
    assert!(outcome.from_statistics, "{sql}");
    let scan = outcome.scan.clone().expect("summary");
    assert_eq!((scan.bytes_read, scan.rows_decoded), (0, 0));
    assert_eq!((scan.files_considered, scan.row_groups_considered), (2, 6));
    let (_, values) = cells(&outcome);
    assert_eq!(values[..4], ["70", "63", "-7", "42"]);
    let explain = session.explain(sql).expect("explain");
    assert!(
        !explain.contains("DaemonScan"),
        "no scan planned: {explain}"
    );
    let explain = session
        .query(&format!("EXPLAIN {sql}"), false)
        .expect("EXPLAIN")
        .explain
        .expect("text");
    assert!(!explain.contains("DaemonScan"), "{explain}");

    // Not exact from statistics, each for the reason in its comment.
    for sql in [
        // floats: statistics say nothing of NaN
        "SELECT max(f) FROM good",
        // a filter
        "SELECT count(*) FROM good WHERE i > 3",
        // a sum is no statistic
        "SELECT sum(i) FROM good",
        // truncated string statistics
        "SELECT min(s) FROM long",
        // truncated string statistics
        "SELECT max(s) FROM long",
        // a file without statistics
        "SELECT min(i) FROM nostats",
        // a file without null counts
        "SELECT count(i) FROM nostats",
        // a partition column, in no footer
        "SELECT min(region) FROM part",
    ] {
        let outcome = session.query(sql, false).expect("query");
        assert!(
            !outcome.from_statistics,
            "{sql} was answered from statistics"
        );
        let explain = session.explain(sql).expect("explain");
        assert!(explain.contains("DaemonScan"), "{sql}: {explain}");
    }
    // The shorter strings of `long` are exact, its count(*) too.
    let outcome = session
        .query("SELECT count(*), min(i) FROM long", false)
        .expect("query");
    assert!(outcome.from_statistics);
    let outcome = session
        .query("SELECT count(*) FROM nostats", false)
        .expect("query");
    assert!(
        outcome.from_statistics,
        "count(*) needs no column statistics"
    );
    let outcome = session
        .query("SELECT count(*), max(i) FROM part", false)
        .expect("query");
    assert!(
        outcome.from_statistics,
        "file columns of a partitioned table"
    );
}

/// `SELECT *` top-k queries over the generated tables: every sort-key type, both
/// directions, NULLs first and last, with and without a pushed and a residual filter.
/// The later keys cover every column, so rows tied on all keys are equal rows.
fn topk_query() -> impl Strategy<Value = (String, u64, u64)> {
    (
        prop::sample::select(vec!["i", "f", "s", "ts", "d"]),
        prop::sample::select(vec!["", " DESC"]),
        prop::sample::select(vec!["", " NULLS FIRST", " NULLS LAST"]),
        prop::sample::select(vec![
            "",
            " WHERE d > DATE '1969-06-01'",
            " WHERE i * 2 > -30",
        ]),
        0u64..25,
        prop::sample::select(vec![0u64, 0, 1, 4]),
    )
        .prop_map(|(key, dir, nulls, filter, k, offset)| {
            (
                format!("SELECT * FROM {{t}}{filter} ORDER BY {key}{dir}{nulls}, i, f, s, ts, d"),
                k,
                offset,
            )
        })
}

/// The rows as text, in order.
fn ordered_rows(outcome: &QueryOutcome) -> Vec<String> {
    let mut rows = Vec::new();
    for b in &outcome.result.batches {
        for i in 0..b.num_rows() {
            let row: Vec<String> = b
                .columns()
                .iter()
                .map(|c| arrow_cast::display::array_value_to_string(c, i).expect("display"))
                .collect();
            rows.push(row.join("|"));
        }
    }
    rows
}

/// A top-k (`ORDER BY .. LIMIT k OFFSET o`, whose scan gets a first pass over the sort
/// key and a bound from its k-th value) gives rows o..o+k of the whole sort.
#[test]
fn topk_first_pass_equals_the_whole_sort() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    let daemon = Daemon::start(&data);
    let session = RefCell::new(daemon.session());
    let config = ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |(
        files in prop::collection::vec(file_spec(), 1..4),
        queries in prop::collection::vec(topk_query(), 4),
    )| {
        let name = format!("t{}", TABLES.fetch_add(1, Ordering::Relaxed));
        for (n, spec) in files.iter().enumerate() {
            write(&data.join(&name).join(format!("part-{n}.parquet")), spec);
        }
        for (q, k, offset) in &queries {
            let whole_sql = q.replace("{t}", &name);
            let topk_sql = format!("{whole_sql} LIMIT {k} OFFSET {offset}");
            let topk = session.borrow_mut().query(&topk_sql, false).expect("top-k");
            let whole = session.borrow_mut().query(&whole_sql, false).expect("whole sort");
            let expected: Vec<String> = ordered_rows(&whole)
                .into_iter()
                .skip(*offset as usize)
                .take(*k as usize)
                .collect();
            prop_assert_eq!(ordered_rows(&topk), expected, "{}", topk_sql);
        }
    });
}

#[test]
fn topk_first_pass_reads_less_and_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    write(
        &data.join("big/a.parquet"),
        &FileSpec {
            row_group_rows: 500,
            ..spec(rows(4000))
        },
    );
    let daemon = Daemon::start(&data);
    let mut session = daemon.session();
    let sql = "SELECT * FROM big ORDER BY ts DESC LIMIT 7";
    let explain = session.explain(sql).expect("explain");
    assert!(explain.contains("top-7 first pass on ts"), "{explain}");
    let topk = session.query(sql, false).expect("top-k");
    assert_eq!(topk.result.rows, 7);
    let whole = session
        .query("SELECT * FROM big ORDER BY ts DESC", false)
        .expect("whole sort");
    let expected: Vec<String> = ordered_rows(&whole).into_iter().take(7).collect();
    assert_eq!(ordered_rows(&topk), expected);
    // `ts` ascends with the row: the bound leaves the last row group alone for the
    // scan of every column; the first pass reads `ts` only.
    let (a, b) = (topk.scan.expect("summary"), whole.scan.expect("summary"));
    assert!(
        a.bytes_read < b.bytes_read / 2,
        "{} vs {}",
        a.bytes_read,
        b.bytes_read
    );
    // The scan of every column kept one row group of eight.
    assert_eq!(a.row_groups_pruned, 7, "{a:?}");
    // A top-k on the sort key alone has nothing to read late.
    let explain = session
        .explain("SELECT ts FROM big ORDER BY ts DESC LIMIT 7")
        .expect("explain");
    assert!(!explain.contains("first pass"), "{explain}");
}

/// A session's queries share one connection and ring (the daemon restarts its stream
/// in the ring of the scan before), and the daemon's column cache serves the chunks the
/// queries used twice before: every run of every query, in any order, with rows of an
/// earlier run still alive or not, gives what its first run gave.
#[test]
fn a_session_reuses_its_ring_and_hot_chunks_give_the_same_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    write(
        &data.join("t/a.parquet"),
        &FileSpec {
            row_group_rows: 300,
            ..spec(rows(3000))
        },
    );
    let daemon = Daemon::start(&data);
    // Through rings only: these answers are small enough to come inline.
    let mut session = daemon.session_with(EngineOptions {
        result_cache_bytes: 0,
        inline_answer_bytes: 0,
        ..EngineOptions::default()
    });
    let queries = [
        // Rows out, aggregates (zero-copy), a limit that cancels the scan part way, a
        // top-k (dynamic filter), and an unfiltered load.
        "SELECT i, f, s FROM t WHERE f >= 600 AND i * 2 > f",
        "SELECT count(*), sum(f), min(s) FROM t WHERE i > 100",
        "SELECT * FROM t WHERE s > 's1' LIMIT 5",
        "SELECT * FROM t ORDER BY f DESC LIMIT 9",
        "SELECT * FROM t",
        "SELECT d, count(*) FROM t WHERE f < 50 GROUP BY d ORDER BY d",
    ];
    let first: Vec<_> = queries
        .iter()
        .map(|sql| sorted_rows(&session.query(sql, false).expect(sql)))
        .collect();
    // Answers taken inline (the default for answers this small) are the same rows.
    let mut inline = daemon.session();
    for (k, sql) in queries.iter().enumerate() {
        let outcome = inline.query(sql, false).expect(sql);
        assert_eq!(sorted_rows(&outcome), first[k], "inline: {sql}");
    }
    // The first query's rows stay alive throughout (its ring is then not reused).
    let pinned = session.query(queries[0], false).expect("pinned");
    for round in 0..4 {
        for (k, sql) in queries.iter().enumerate().rev() {
            let outcome = session.query(sql, false).expect(sql);
            assert_eq!(sorted_rows(&outcome), first[k], "round {round}: {sql}");
        }
    }
    assert_eq!(
        sorted_rows(&pinned),
        first[0],
        "rows kept alive were overwritten"
    );
    let mut client = DaemonClient::connect(socket_path(&data)).expect("connect");
    let status = client.status().expect("status");
    assert!(
        status.rings_reused >= 10,
        "{} of {} scans reused a ring",
        status.rings_reused,
        status.scans_served
    );
    assert!(
        status.column_cache.hits >= 10 && status.column_cache.entries > 0,
        "{:?}",
        status.column_cache
    );
}

/// A caller that takes batches as they come (a host writing rows for the wire) gets
/// views of a ring smaller than the result: the rows it took and those the outcome
/// kept are the result once each, however many it took; the result cache keeps copies
/// (a later scan reuses the ring, and a hit still gives the same rows).
#[test]
fn batches_taken_as_they_come_are_the_result_once_and_the_cache_keeps_copies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    write(
        &data.join("t/a.parquet"),
        &FileSpec {
            row_group_rows: 8192,
            ..spec(rows(120_000))
        },
    );
    let daemon = Daemon::start(&data);
    let options = EngineOptions {
        ring_capacity_bytes: 1 << 20,
        inline_answer_bytes: 0,
        ..EngineOptions::default()
    };
    let sql = "SELECT i, f, s, ts FROM t WHERE f >= 100";
    let want = sorted_rows(&daemon.session().query(sql, false).expect(sql));
    assert!(want.len() > 100_000, "{} rows", want.len());
    let mut session = daemon.session_with(options);
    let mut client = DaemonClient::connect(socket_path(&data)).expect("connect");
    let reused_before = client.status().expect("status").rings_reused;
    // (batches to take, use the result cache, a cache hit expected)
    let runs = [
        (usize::MAX, true, false),
        (3, false, false),
        (0, false, false),
        (3, true, true),
        (usize::MAX, true, true),
    ];
    for (limit, cache, hit) in runs {
        let (outcome, rest, mut taken, count) = take_batches(&mut session, sql, cache, limit);
        assert!(rest.is_none());
        assert_eq!(outcome.result_hit, hit, "taking {limit}, cache {cache}");
        assert_eq!(outcome.result.rows, want.len(), "taking {limit}");
        match limit {
            usize::MAX => assert!(count > 3, "{count} batches taken"),
            _ => assert_eq!(count, limit, "batches taken"),
        }
        taken.extend(outcome.result.batches.iter().flat_map(batch_rows));
        taken.sort();
        assert!(taken == want, "taking {limit}, cache {cache}: rows differ");
    }
    // A result whose copies would pass 8 MiB is not kept (its batches taken, what is
    // left could not be the result): run again, it is scanned again, the same rows.
    let wide = "SELECT i, f, s, ts, repeat(s, 8) AS a, repeat(s, 9) AS b FROM t WHERE f >= 100";
    let want_wide = sorted_rows(&daemon.session().query(wide, false).expect(wide));
    for run in 0..2 {
        let (outcome, _, mut taken, _) = take_batches(&mut session, wide, true, usize::MAX);
        assert!(
            !outcome.result_hit,
            "run {run}: a result past 8 MiB was kept"
        );
        taken.extend(outcome.result.batches.iter().flat_map(batch_rows));
        taken.sort();
        assert!(taken == want_wide, "run {run}: rows differ");
    }
    // The second and third runs scanned in the first's ring: nothing kept it (the
    // cached result is copies, the batches taken were dropped).
    let reused = client.status().expect("status").rings_reused - reused_before;
    assert!(reused >= 2, "{reused} scans reused the session's ring");
}
