//! The DataFusion engine over the daemon, as `ringscan query` runs it: what each scan
//! pushes to the daemon, answers from footer statistics, scans that outgrow their ring
//! (a join's build side, a sort), spilling under a memory limit, and the messages of
//! bad input. Answers of full SQL against DuckDB's are in `differential.rs`.

mod common;

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use serde_json::Value;

use common::cli::{ringscan, DaemonGuard};

/// Table `name` of `rows` rows: `k` 0.., `g` = k % 10, `x` = k / 2, `s` a 40-byte string.
fn write_table(data: &Path, name: &str, rows: i64, row_group_rows: usize) {
    let dir = data.join(name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("g", DataType::Int64, false),
        Field::new("x", DataType::Float64, false),
        Field::new("s", DataType::Utf8, false),
    ]));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new((0..rows).collect::<Int64Array>()),
            Arc::new((0..rows).map(|k| k % 10).collect::<Int64Array>()),
            Arc::new((0..rows).map(|k| k as f64 / 2.0).collect::<Float64Array>()),
            Arc::new(
                (0..rows)
                    .map(|k| Some(format!("{k:040}")))
                    .collect::<StringArray>(),
            ),
        ],
    )
    .expect("batch");
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(row_group_rows))
        .build();
    let file = File::create(dir.join("part-0.parquet")).expect("create");
    let mut writer = ArrowWriter::try_new(file, schema, Some(props)).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
}

/// A SQL session on `data` after starting its daemon (the caller holds a
/// [`DaemonGuard`] that stops it).
fn started_session(data: &Path) -> ringscan_executor::engine::SqlSession {
    use ringscan_executor::engine::{EngineOptions, SqlSession};
    let started = ringscan(&["daemon", "start"], data);
    assert!(started.status.success(), "daemon start: {started:?}");
    let no_spawn = || Err(std::io::Error::other("the test started the daemon"));
    SqlSession::open(data, &no_spawn, &EngineOptions::default()).expect("open session")
}

/// The values of a query's first column, a BIGINT.
fn first_column_i64(outcome: &ringscan_executor::QueryOutcome) -> Vec<i64> {
    outcome
        .result
        .batches
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("a BIGINT column")
                .values()
                .to_vec()
        })
        .collect()
}

/// The rows of a query as `ringscan query --format csv` prints them.
fn csv_of(outcome: &ringscan_executor::QueryOutcome) -> String {
    let mut out = Vec::new();
    ringscan_executor::format::write_csv(&mut out, &outcome.result).expect("csv");
    String::from_utf8(out).expect("utf8")
}

fn query(data: &Path, args: &[&str]) -> (bool, String, String) {
    let mut all = vec!["query"];
    all.extend_from_slice(args);
    let out = ringscan(&all, data);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn csv_ok(data: &Path, args: &[&str]) -> Vec<String> {
    let mut all = vec!["--format", "csv", "--no-cache"];
    all.extend_from_slice(args);
    let (ok, stdout, stderr) = query(data, &all);
    assert!(ok, "{args:?} failed: {stderr}");
    stdout.lines().skip(1).map(str::to_owned).collect()
}

fn stats_json(data: &Path, dir: &Path, sql: &str) -> Value {
    let path = dir.join("stats.json");
    let (ok, _, stderr) = query(
        data,
        &[
            "--no-cache",
            "--format",
            "csv",
            "--stats-json",
            path.to_str().expect("utf-8"),
            sql,
        ],
    );
    assert!(ok, "{sql}: {stderr}");
    serde_json::from_str(&std::fs::read_to_string(&path).expect("stats")).expect("json")
}

#[test]
fn explain_shows_what_each_scan_pushes_to_the_daemon() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    write_table(&data, "t", 5000, 1000);
    write_table(&data, "u", 300, 100);
    let _guard = DaemonGuard(&data);
    let (ok, plan, stderr) = query(
        &data,
        &[
            "--explain",
            "SELECT t.k, u.x FROM t JOIN u ON t.k = u.k WHERE t.x >= 100 AND upper(u.s) <> 'A' LIMIT 5",
        ],
    );
    assert!(ok, "{stderr}");
    // Both sides are daemon scans; the comparison went to t's scan exactly (no filter
    // above it); upper() stays in DataFusion.
    assert_eq!(plan.matches("DaemonScanExec").count(), 2, "{plan}");
    assert!(plan.contains("pushed predicate=(x >= 100.0)"), "{plan}");
    assert!(plan.contains("upper("), "{plan}");
    assert!(
        !plan.contains("projection=[k, g, x, s]"),
        "projection pushed: {plan}"
    );

    // Batches stay views of the ring only where an aggregation folds them; a result
    // (or a join's input) that is kept is copied out of the ring.
    assert!(!plan.contains("zero-copy"), "{plan}");
    let (ok, folded, stderr) = query(
        &data,
        &[
            "--explain",
            "SELECT g, sum(x), count(*) FROM t WHERE x > 5 GROUP BY g",
        ],
    );
    assert!(ok, "{stderr}");
    assert!(folded.contains("zero-copy"), "{folded}");

    // A top-k hands its tightening threshold to the scan (the daemon prunes with it).
    let (ok, topk, stderr) = query(
        &data,
        &["--explain", "SELECT k, s FROM t ORDER BY k LIMIT 3"],
    );
    assert!(ok, "{stderr}");
    assert!(topk.contains("dynamic filters=1"), "{topk}");

    // EXPLAIN ANALYZE reports what the daemon pruned: k >= 4800 leaves row group 4 of 5.
    let (ok, analyzed, stderr) = query(
        &data,
        &["EXPLAIN ANALYZE SELECT count(*) FROM t WHERE k >= 4800"],
    );
    assert!(ok, "{stderr}");
    assert!(analyzed.contains("row_groups_pruned=4"), "{analyzed}");
    assert!(analyzed.contains("row_groups=5"), "{analyzed}");
}

#[test]
fn count_min_max_come_from_footer_statistics_without_a_scan() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    write_table(&data, "t", 5000, 1000);
    let _guard = DaemonGuard(&data);
    let stats = stats_json(&data, dir.path(), "SELECT count(*), min(k), max(k) FROM t");
    assert_eq!(stats["scan"]["bytes_read"], 0, "{stats}");
    assert_eq!(stats["scan"]["rows_decoded"], 0, "{stats}");
    assert_eq!(
        csv_ok(&data, &["SELECT count(*), min(k), max(k) FROM t"]),
        ["5000,0,4999"]
    );
    // With a filter the footers cannot answer: the same shape scans.
    let stats = stats_json(&data, dir.path(), "SELECT count(*) FROM t WHERE g = 3");
    assert_eq!(stats["scan"]["rows_emitted"], 500, "{stats}");
    assert_eq!(
        csv_ok(&data, &["SELECT count(*) FROM t WHERE g = 3"]),
        ["500"]
    );
}

/// A hash join keeps its whole build side, and a sort its whole input: with a 1 MiB
/// ring both outgrow the ring, so batches must leave it (copied out) for the daemon to
/// go on. The answers must equal those of a ring that holds everything.
#[test]
fn joins_and_sorts_larger_than_the_ring_finish_with_the_same_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    write_table(&data, "big", 60_000, 8192);
    let _guard = DaemonGuard(&data);
    let join = "SELECT count(*), sum(a.x + b.x) FROM big a JOIN big b ON a.k = b.k + 1";
    let sort = "SELECT k, s FROM big ORDER BY s DESC LIMIT 3 OFFSET 1000";
    for sql in [join, sort] {
        let small = csv_ok(&data, &["--ring-mib", "1", sql]);
        let large = csv_ok(&data, &["--ring-mib", "256", sql]);
        assert_eq!(small, large, "{sql}");
    }
    assert_eq!(
        csv_ok(&data, &["--ring-mib", "1", join]),
        [format!(
            "59999,{}",
            (1..60_000).map(|k| k as f64 - 0.5).sum::<f64>()
        )]
    );
}

#[test]
fn a_sort_over_the_memory_limit_spills_and_answers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    write_table(&data, "big", 200_000, 16_384);
    let _guard = DaemonGuard(&data);
    let sql = "SELECT k, s FROM big ORDER BY s DESC, k";
    let rows = csv_ok(&data, &["--memory-limit-mib", "16", sql]);
    assert_eq!(rows.len(), 200_000);
    assert_eq!(rows[0], format!("199999,{:040}", 199_999));
    assert_eq!(rows[199_999], format!("0,{:040}", 0));
}

#[test]
fn bad_input_gets_one_clear_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    write_table(&data, "trades", 100, 100);
    std::fs::create_dir_all(data.join("broken")).expect("mkdir");
    std::fs::write(
        data.join("broken/part-0.parquet"),
        b"PAR1 not really parquet PAR1",
    )
    .expect("write");
    let _guard = DaemonGuard(&data);
    let cases: [(&str, &[&str]); 4] = [
        ("SELECT * FROM trade", &["trade", "trades"]),
        ("SELECT kk FROM trades", &["kk"]),
        ("SELECT count(*) FROM broken", &["broken/part-0.parquet"]),
        ("SELEC 1", &["SELEC"]),
    ];
    for (sql, words) in cases {
        let (ok, _, stderr) = query(&data, &[sql]);
        assert!(!ok, "{sql} succeeded");
        for w in words {
            assert!(stderr.contains(w), "{sql}: {w:?} not in {stderr}");
        }
        assert!(!stderr.contains("panicked"), "{sql}: {stderr}");
    }
    // The daemon serves on after the corrupt file.
    assert_eq!(csv_ok(&data, &["SELECT count(*) FROM trades"]), ["100"]);
}

/// `$n` parameters: one plan per SQL text, optimized once with placeholders (the
/// generic plan) and filled in per binding, pruning like literals; a value that the scan
/// would take otherwise than the placeholder (NULL, infinity) is planned on its own.
/// Answers equal to the literal query's and to a count made
/// here, and one clear message for a wrong number or type of values.
#[test]
fn parameters_bind_into_one_cached_plan_and_prune_like_literals() {
    use arrow_array::Array as _;
    use ringscan_executor::engine::Param;
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    let rows = 10_000_i64;
    write_table(data, "t", rows, 1_000);
    let _guard = DaemonGuard(data);
    let mut session = started_session(data);

    let sql = "SELECT count(*) AS n, sum(k) AS s FROM t WHERE k >= $1 AND g = $2";
    let prepared = session.prepare(sql).expect("prepare");
    assert_eq!(
        prepared.params,
        vec![Some(DataType::Int64), Some(DataType::Int64)]
    );
    assert_eq!(prepared.schema.fields().len(), 2);

    let first_row = |outcome: &ringscan_executor::QueryOutcome| -> (i64, Option<String>) {
        let batch = outcome
            .result
            .batches
            .iter()
            .find(|b| b.num_rows() > 0)
            .expect("one row");
        let n = batch
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("count is BIGINT")
            .value(0);
        let s = arrow_cast::display::ArrayFormatter::try_new(
            batch.column(1).as_ref(),
            &Default::default(),
        )
        .expect("formatter")
        .value(0)
        .to_string();
        (n, (!batch.column(1).is_null(0)).then_some(s))
    };
    for (lo, g) in [(0_i64, 3_i32), (9_000, 7), (4_321, 0), (rows, 1)] {
        // `g` is bound as an INTEGER: cast to the BIGINT its use asks for.
        let bound = session
            .query_with(
                sql,
                vec![Param::Int64(Some(lo)), Param::Int32(Some(g))],
                false,
            )
            .expect("bound query");
        assert!(bound.plan_hit, "the plan of one SQL text is made once");
        assert!(
            bound.generic_plan,
            "lo={lo} g={g}: the values fill the generic plan"
        );
        let literal = session
            .query(
                &format!("SELECT count(*) AS n, sum(k) AS s FROM t WHERE k >= {lo} AND g = {g}"),
                false,
            )
            .expect("literal query");
        let expected: Vec<i64> = (lo..rows).filter(|k| k % 10 == i64::from(g)).collect();
        let (n, s) = first_row(&bound);
        assert_eq!(n, expected.len() as i64, "count for lo={lo} g={g}");
        assert_eq!(
            s,
            (!expected.is_empty()).then(|| expected.iter().sum::<i64>().to_string())
        );
        assert_eq!((n, s), first_row(&literal));
        let pruned = |o: &ringscan_executor::QueryOutcome| {
            o.scan.as_ref().map_or(0, |s| s.row_groups_pruned)
        };
        assert_eq!(
            pruned(&bound),
            pruned(&literal),
            "lo={lo}: pruned like the literal"
        );
        assert_eq!(
            pruned(&bound),
            (lo / 1_000) as u64,
            "lo={lo}: row groups below lo"
        );
    }
    // The result cache keeps a binding at its second run: the third is a hit.
    let again = |session: &mut ringscan_executor::engine::SqlSession| {
        session
            .query_with(
                sql,
                vec![Param::Int64(Some(77)), Param::Int64(Some(7))],
                true,
            )
            .expect("cached binding")
    };
    let runs: Vec<bool> = (0..3).map(|_| again(&mut session).result_hit).collect();
    assert_eq!(
        runs,
        [false, false, true],
        "hits over three runs of one binding"
    );
    assert_eq!(
        first_row(&again(&mut session)),
        first_row(
            &session
                .query(
                    "SELECT count(*) AS n, sum(k) AS s FROM t WHERE k >= 77 AND g = 7",
                    false,
                )
                .expect("literal")
        )
    );

    // A NULL matches nothing.
    let null = session
        .query_with(sql, vec![Param::Int64(None), Param::Int64(Some(1))], false)
        .expect("null parameter");
    assert_eq!(first_row(&null).0, 0);
    // `k >= NULL` is not a filter the daemon takes: the binding is planned on its own.
    assert!(!null.generic_plan, "a NULL changes what the scan is handed");

    // A value the daemon cannot be handed (infinity travels as JSON) is planned on its
    // own too, and still answers; a finite one fills the generic plan.
    let below = "SELECT count(*) AS n, sum(k) AS s FROM t WHERE x < $1";
    for (x, expected, generic) in [
        (100.0, 200, true),
        (f64::INFINITY, rows, false),
        (-1.0, 0, true),
        (f64::NEG_INFINITY, 0, false),
        (2_500.5, 5_001, true),
    ] {
        let bound = session
            .query_with(below, vec![Param::Float64(Some(x))], false)
            .expect("float parameter");
        assert_eq!(first_row(&bound).0, expected, "x < {x}");
        assert_eq!(bound.generic_plan, generic, "x < {x}");
    }

    let few = session
        .query_with(sql, vec![Param::Int64(Some(1))], false)
        .expect_err("one value for two parameters");
    assert!(
        few.to_string().contains("takes 2 parameter(s)"),
        "message: {few}"
    );
    let none = session.query(sql, false).expect_err("no values");
    assert!(none.to_string().contains("0 value(s)"), "message: {none}");
    let bad = session
        .query_with(
            sql,
            vec![Param::Utf8(Some("abc".into())), Param::Int64(Some(1))],
            false,
        )
        .expect_err("text for a BIGINT");
    assert!(bad.to_string().contains("parameter $1"), "message: {bad}");
}

/// A session keeps each query's physical plan and runs it again (reset): every re-run
/// gives the same rows and reports its own scan, not the sum of all runs; a plan whose
/// scan takes a dynamic filter (top-k) is planned anew and still right.
#[test]
fn kept_physical_plans_rerun_with_their_own_scan_figures() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    write_table(data, "t", 20_000, 2_000);
    let _guard = DaemonGuard(data);
    let mut session = started_session(data);
    for sql in [
        "SELECT g, count(*), sum(k) FROM t WHERE k >= 5000 GROUP BY g ORDER BY g",
        "SELECT a.g, count(*) FROM t a JOIN t b ON a.k = b.k + 1 WHERE a.k < 3000 GROUP BY a.g ORDER BY a.g",
        "SELECT k, s FROM t ORDER BY x DESC LIMIT 3",
    ] {
        let first = session.query(sql, false).expect(sql);
        let first_scan = first.scan.clone().expect("scan summary");
        for run in 0..3 {
            let again = session.query(sql, false).expect(sql);
            assert!(again.plan_hit, "{sql}");
            assert_eq!(csv_of(&again), csv_of(&first), "run {run} of {sql}");
            let scan = again.scan.clone().expect("scan summary");
            assert_eq!(
                (scan.row_groups_considered, scan.rows_emitted),
                (first_scan.row_groups_considered, first_scan.rows_emitted),
                "run {run} of {sql}: the scan's own figures"
            );
        }
    }
}

/// `LIMIT .. OFFSET` over a scan whose rows are the result's goes to the daemon: the
/// skipped rows are never sent (whole row groups never read when nothing filters);
/// where a filter stays above the scan the offset stays in the plan. Answers against
/// the rows counted here.
#[test]
fn offsets_are_skipped_in_the_daemon_where_the_scan_gives_the_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    write_table(data, "t", 20_000, 2_000);
    let _guard = DaemonGuard(data);
    let mut session = started_session(data);
    let cases: [(&str, Vec<i64>, u64); 4] = [
        (
            "SELECT k FROM t LIMIT 3 OFFSET 15000",
            (15_000..15_003).collect(),
            15_000,
        ),
        (
            "SELECT k, s FROM t OFFSET 19998",
            vec![19_998, 19_999],
            19_998,
        ),
        (
            "SELECT k FROM t WHERE g = 3 LIMIT 2 OFFSET 10",
            vec![103, 113],
            10,
        ),
        // Not pushed: the daemon cannot apply `k % 7 = 0`, so the plan filters.
        (
            "SELECT k FROM t WHERE k % 7 = 0 LIMIT 2 OFFSET 5",
            vec![35, 42],
            0,
        ),
    ];
    for (sql, expected, skipped) in cases {
        let outcome = session.query(sql, false).expect(sql);
        assert_eq!(first_column_i64(&outcome), expected, "{sql}");
        let scan = outcome.scan.clone().unwrap_or_default();
        assert!(!outcome.from_statistics, "{sql}: a scan ran");
        if skipped > 0 {
            assert_eq!(scan.rows_skipped_by_offset, skipped, "{sql}: {scan:?}");
        }
    }
    let explain = session
        .explain("SELECT k FROM t LIMIT 3 OFFSET 15000")
        .expect("explain");
    assert!(explain.contains("offset=15000"), "{explain}");
}

/// A `LIMIT` without `ORDER BY` over one scan gives the scan's first rows, as DuckDB
/// does, however the scan's batches arrive: with inline answers a whole small table
/// comes at once, and DataFusion's round-robin split of the scan's batches gave the
/// rows of whichever partition answered first (rows of the second batch, about half
/// the time).
#[test]
fn a_limit_without_order_gives_the_first_rows_of_the_scan() {
    use ringscan_executor::engine::{EngineOptions, SqlSession};
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    write_table(data, "t", 20_000, 2_000);
    let _guard = DaemonGuard(data);
    let started = ringscan(&["daemon", "start"], data);
    assert!(started.status.success(), "daemon start: {started:?}");
    let no_spawn = || Err(std::io::Error::other("the test started the daemon"));
    for inline in [0u64, 1 << 20] {
        let options = EngineOptions {
            inline_answer_bytes: inline,
            ..EngineOptions::default()
        };
        let mut session = SqlSession::open(data, &no_spawn, &options).expect("open session");
        for sql in [
            "SELECT k FROM t WHERE k % 7 = 0 LIMIT 2 OFFSET 5",
            "SELECT k + 1 AS k FROM t WHERE k % 7 = 0 LIMIT 2 OFFSET 5",
        ] {
            let explain = session.explain(sql).expect("explain");
            assert!(!explain.contains("RoundRobin"), "{sql}: {explain}");
            for _ in 0..10 {
                let outcome = session.query(sql, false).expect(sql);
                let keys = first_column_i64(&outcome);
                let first = i64::from(sql.contains("k + 1"));
                assert_eq!(keys, vec![35 + first, 42 + first], "{sql}, inline {inline}");
            }
        }
        // An aggregation keeps its parallel plan.
        let explain = session
            .explain("SELECT g, count(*) FROM t WHERE k % 7 = 0 GROUP BY g LIMIT 3")
            .expect("explain");
        assert!(explain.contains("RoundRobin"), "{explain}");
    }
}

/// `SELECT DISTINCT` (and `GROUP BY` without aggregates, `count(DISTINCT x)`) over a
/// scan's columns lets the daemon drop duplicates per row group: few rows cross the
/// ring, and the answers are the distinct values counted here.
#[test]
fn distinct_drops_duplicates_in_the_daemon() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    write_table(data, "t", 20_000, 2_000);
    let _guard = DaemonGuard(data);
    let mut session = started_session(data);
    let groups: String = (0..10).map(|g| format!("{g}\n")).collect();
    for (sql, expected, pushed) in [
        (
            "SELECT DISTINCT g FROM t ORDER BY g",
            format!("g\n{groups}"),
            true,
        ),
        (
            "SELECT g FROM t WHERE k >= 4000 GROUP BY g ORDER BY g",
            format!("g\n{groups}"),
            true,
        ),
        (
            "SELECT count(DISTINCT g) AS n FROM t",
            "n\n10\n".to_owned(),
            true,
        ),
        // An aggregate needs every row: nothing is dropped.
        (
            "SELECT g, count(*) AS n FROM t GROUP BY g ORDER BY g LIMIT 1",
            "g,n\n0,2000\n".to_owned(),
            false,
        ),
    ] {
        let outcome = session.query(sql, false).expect(sql);
        assert_eq!(csv_of(&outcome), expected, "{sql}");
        let scan = outcome.scan.clone().expect("a scan");
        let explain = session.explain(sql).expect("explain");
        if pushed {
            assert!(explain.contains(", distinct"), "{sql}: {explain}");
            // At most the 10 groups of each row group the scan read.
            assert!(scan.rows_emitted <= 100, "{sql}: {scan:?}");
        } else {
            assert!(!explain.contains(", distinct"), "{sql}: {explain}");
            assert_eq!(scan.rows_emitted, 20_000, "{sql}");
        }
    }
}

#[test]
fn a_hash_join_filters_its_probe_scan_with_the_build_sides_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    write_table(data, "facts", 60_000, 8_192);
    write_table(data, "dims", 60_000, 8_192);
    let _guard = DaemonGuard(data);
    let mut session = started_session(data);
    // 50 build rows (x = k / 2 < 250, k % 10 = 3) against 60,000 probe rows.
    let sql = "SELECT count(*) AS n, sum(f.x) AS x FROM facts f JOIN dims d ON f.k = d.k \
               WHERE d.g = 3 AND d.x < 250";
    let explain = session.explain(sql).expect("explain");
    assert!(
        explain.contains("facts, projection=[k, x], after the join's build side"),
        "{explain}"
    );
    for run in 0..2 {
        let outcome = session.query(sql, false).expect(sql);
        let keys = (0..500i64).filter(|k| k % 10 == 3);
        let x: f64 = keys.map(|k| k as f64 / 2.0).sum();
        assert_eq!(csv_of(&outcome), format!("n,x\n50,{x:?}\n"), "run {run}");
        // The daemon sent the probe rows that join, not the 60,000.
        let scan = outcome.scan.expect("a scan");
        assert!(scan.rows_emitted <= 200, "run {run}: {scan:?}");
    }
    // Prepared, with the values bound: filtered the same (a plan for every binding
    // lost the build side's keys and read all 60,050 probe rows).
    let prepared = "SELECT count(*) AS n, sum(f.x) AS x FROM facts f JOIN dims d \
                    ON f.k = d.k WHERE d.g = $1 AND d.x < $2";
    for run in 0..3 {
        use ringscan_executor::engine::Param;
        let values = vec![Param::Int64(Some(3)), Param::Int64(Some(250))];
        let outcome = session.query_with(prepared, values, false).expect(prepared);
        let keys = (0..500i64).filter(|k| k % 10 == 3);
        let x: f64 = keys.map(|k| k as f64 / 2.0).sum();
        assert_eq!(
            csv_of(&outcome),
            format!("n,x\n50,{x:?}\n"),
            "prepared run {run}"
        );
        let scan = outcome.scan.expect("a scan");
        assert!(scan.rows_emitted <= 200, "prepared run {run}: {scan:?}");
    }
    // Without a build-side filter nothing narrows the probe: every row comes.
    let all = "SELECT count(*) AS n FROM facts f JOIN dims d ON f.k = d.k";
    let outcome = session.query(all, false).expect(all);
    assert_eq!(csv_of(&outcome), "n\n60000\n");
}

/// `dir/t/part-0.parquet` holding `v` = `first..first + rows`, uncompressed and plain, so
/// that two files of the same row count have the same size.
fn write_plain(path: &Path, first: i64, rows: i64) {
    let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![Arc::new((first..first + rows).collect::<Int64Array>())],
    )
    .expect("batch");
    let props = WriterProperties::builder()
        .set_dictionary_enabled(false)
        .set_compression(parquet::basic::Compression::UNCOMPRESSED)
        .build();
    let file = File::create(path).expect("create");
    let mut writer = ArrowWriter::try_new(file, schema, Some(props)).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
}

/// Issue 17 (6): file identity was (size, mtime), so a same-size rewrite that kept its
/// mtime (`cp -p`, `rsync -t`) was served from the footer, column and result caches.
#[test]
fn same_size_rewrite_keeping_its_mtime_is_not_served_stale() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    std::fs::create_dir_all(data.join("t")).expect("mkdir");
    let file = data.join("t/part-0.parquet");
    write_plain(&file, 0, 10_000);
    let _guard = DaemonGuard(data);
    let mut session = started_session(data);
    let sql = "SELECT sum(v) AS s, max(v) AS m FROM t";
    let answer = |first: i64| {
        let sum: i64 = (first..first + 10_000).sum();
        format!("s,m\n{sum},{}\n", first + 9_999)
    };
    for _ in 0..3 {
        let outcome = session.query(sql, true).expect(sql);
        assert_eq!(csv_of(&outcome), answer(0));
    }
    let before = std::fs::metadata(&file).expect("stat");
    // Overwritten in place (same inode), then replaced by a rename (another inode); each
    // time with the old size and mtime.
    for (round, first) in [(0, 7), (1, 1_000)] {
        if round == 0 {
            write_plain(&file, first, 10_000);
        } else {
            let fresh = data.join("t/.fresh");
            write_plain(&fresh, first, 10_000);
            std::fs::rename(&fresh, &file).expect("rename");
        }
        File::options()
            .write(true)
            .open(&file)
            .and_then(|f| f.set_modified(before.modified().expect("mtime")))
            .expect("set mtime");
        let after = std::fs::metadata(&file).expect("stat");
        assert_eq!(after.len(), before.len(), "the rewrite must keep the size");
        assert_eq!(after.modified().ok(), before.modified().ok());
        let outcome = session.query(sql, true).expect(sql);
        assert_eq!(csv_of(&outcome), answer(first), "round {round}");
    }
}

/// The plan cache's check that a table is unchanged is an inotify watch while it saw
/// nothing: a file added, then one deleted, right before a query is seen by it.
#[test]
fn a_file_added_or_removed_just_before_a_query_is_seen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    std::fs::create_dir_all(data.join("t")).expect("mkdir");
    write_plain(&data.join("t/part-0.parquet"), 0, 1_000);
    let _guard = DaemonGuard(data);
    let mut session = started_session(data);
    let sql = "SELECT count(*) AS n, max(v) AS m FROM t WHERE v >= 0";
    for _ in 0..3 {
        let outcome = session.query(sql, false).expect(sql);
        assert_eq!(csv_of(&outcome), "n,m\n1000,999\n");
    }
    write_plain(&data.join("t/part-1.parquet"), 5_000, 500);
    let outcome = session.query(sql, false).expect(sql);
    assert_eq!(csv_of(&outcome), "n,m\n1500,5499\n", "the added file");
    let outcome = session.query(sql, false).expect(sql);
    assert_eq!(csv_of(&outcome), "n,m\n1500,5499\n");
    std::fs::remove_file(data.join("t/part-1.parquet")).expect("rm");
    let outcome = session.query(sql, false).expect(sql);
    assert_eq!(csv_of(&outcome), "n,m\n1000,999\n", "the removed file");
}

/// Issue 17 (9): `min` of a half-float column with a sign-bit NaN (parquet-testing's
/// `floating_orders_nan_count.parquet`) was NaN: scans made NaNs positive for 32- and
/// 64-bit floats only, and DataFusion orders a negative NaN below every number.
#[test]
fn half_float_nans_order_above_every_number() {
    use half::f16;
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    std::fs::create_dir_all(data.join("h")).expect("mkdir");
    let schema = Arc::new(Schema::new(vec![Field::new("h", DataType::Float16, true)]));
    let values = [
        Some(f16::from_bits(0xFE00)), // a NaN with its sign bit set
        Some(f16::from_f32(-5.0)),
        Some(f16::from_f32(2.5)),
        Some(f16::NEG_ZERO),
        None,
    ];
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![Arc::new(arrow_array::Float16Array::from(values.to_vec()))],
    )
    .expect("batch");
    let file = File::create(data.join("h/part-0.parquet")).expect("create");
    let mut writer = ArrowWriter::try_new(file, schema, None).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
    let _guard = DaemonGuard(data);
    let mut session = started_session(data);
    let sql = "SELECT min(h) AS lo, max(h) AS hi FROM h";
    let outcome = session.query(sql, false).expect(sql);
    assert_eq!(csv_of(&outcome), "lo,hi\n-5.0,nan\n");
    let sql = "SELECT h FROM h ORDER BY h NULLS LAST";
    let outcome = session.query(sql, false).expect(sql);
    assert_eq!(csv_of(&outcome), "h\n-5.0\n0.0\n2.5\nnan\n\n");
}

/// Issue 17 (10): hive partition values were always text, so `WHERE year = 2024` compared
/// strings (or did not plan) and `day >= DATE '2024-01-01'` pruned nothing; they are typed
/// as DuckDB types them, over every directory, and the filters skip directories. Date
/// text reads with the one parser the directories are typed with (`2024-1-5`, spaces).
#[test]
fn hive_partitions_are_typed_and_prune_like_duckdb() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
    let dirs = [
        "year=2023/day=2023-12-31/code=007",
        "year=2024/day=2024-1-5/code=12",
        "year=2024/day=2024-01-06/code=abc",
        "year=__HIVE_DEFAULT_PARTITION__/day=NULL/code=NULL",
    ];
    for (n, d) in dirs.iter().enumerate() {
        let path = data.join("t").join(d);
        std::fs::create_dir_all(&path).expect("mkdir");
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Int64Array::from(vec![
                n as i64 * 10,
                n as i64 * 10 + 1,
            ]))],
        )
        .expect("batch");
        let file = File::create(path.join("part-0.parquet")).expect("create");
        let mut writer = ArrowWriter::try_new(file, Arc::clone(&schema), None).expect("writer");
        writer.write(&batch).expect("write");
        writer.close().expect("close");
    }
    let _guard = DaemonGuard(data);
    let mut session = started_session(data);
    let mut csv = |sql: &str| csv_of(&session.query(sql, false).expect(sql));
    // Typed: integer arithmetic on year, date arithmetic on day; code stays text.
    assert_eq!(
        csv("SELECT year + 1 AS y, day, code FROM t WHERE v = 10"),
        "y,day,code\n2025,2024-01-05,12\n"
    );
    assert_eq!(
        csv("SELECT year, day, code FROM t WHERE v = 30"),
        "year,day,code\n,,NULL\n"
    );
    for (sql, rows) in [
        ("SELECT count(*) AS n FROM t WHERE year = 2024", 4),
        ("SELECT count(*) AS n FROM t WHERE year < 2024", 2),
        ("SELECT count(*) AS n FROM t WHERE year IS NULL", 2),
        (
            "SELECT count(*) AS n FROM t WHERE day >= DATE '2024-01-01'",
            4,
        ),
        ("SELECT count(*) AS n FROM t WHERE day = ' 2024-1-5 '", 2),
        (
            "SELECT count(*) AS n FROM t WHERE day = DATE '2024/01/06'",
            2,
        ),
        ("SELECT count(*) AS n FROM t WHERE code = '007'", 2),
    ] {
        assert_eq!(csv(sql), format!("n\n{rows}\n"), "{sql}");
    }
    // The partition filter skips directories in the daemon.
    let stats = stats_json(data, dir.path(), "SELECT v FROM t WHERE year = 2024");
    assert_eq!(stats["scan"]["files_pruned"], 2, "{stats}");
}

/// Queries whose `WHERE` literals the session turns into parameters give the answers
/// the literals give: each against the same query wrapped so that nothing in it is
/// parameterized (a derived table), over integer, float, text and date columns, with
/// values a parameter cannot take exactly (overflow, fractions, a string compared with
/// a number) among them. And the second run of a shape is a plan-cache hit.
#[test]
fn parameterized_literals_answer_as_the_literals() {
    use arrow_array::{Date32Array, Int32Array};
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    std::fs::create_dir_all(data.join("p")).expect("mkdir");
    let rows = 200i32;
    let schema = Arc::new(Schema::new(vec![
        Field::new("i", DataType::Int32, false),
        Field::new("b", DataType::Int64, true),
        Field::new("f", DataType::Float64, false),
        Field::new("s", DataType::Utf8, false),
        Field::new("d", DataType::Date32, false),
    ]));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(Int32Array::from_iter_values((0..rows).map(|v| v - 50))),
            Arc::new(
                (0..rows)
                    .map(|v| (v % 7 != 0).then_some(i64::from(v) * 1_000_000_007))
                    .collect::<Int64Array>(),
            ),
            Arc::new(Float64Array::from_iter_values(
                (0..rows).map(|v| f64::from(v) / 4.0),
            )),
            Arc::new(StringArray::from_iter_values(
                (0..rows).map(|v| format!("{:03}", v % 37)),
            )),
            Arc::new(Date32Array::from_iter_values((0..rows).map(|v| 19_700 + v))),
        ],
    )
    .expect("batch");
    let file = File::create(data.join("p/part-0.parquet")).expect("create");
    let mut writer = ArrowWriter::try_new(file, schema, None).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
    let _guard = DaemonGuard(data);
    let mut session = started_session(data);
    let wheres = [
        "i = 7",
        "i = -3",
        "7 = i",
        "i <> 3000000000",
        "i = 3000000000",
        "i < 10 AND i >= -5",
        "i BETWEEN -10 AND 10 AND NOT (i IN (1, 2, 3))",
        "b = 5000000035",
        "b > 100000000000 OR b IS NULL",
        "f = 5",
        "f = 12.25",
        "f < 9007199254740993",
        "s = '007'",
        "s IN ('001', '002', 'zzz')",
        "s > '030' AND i < 100",
        "s = 7",
        "i = '7'",
        "d = '2024-01-10'",
        "d BETWEEN '2024-01-01' AND '2024-01-31'",
        "(i = 1 OR s = '010') AND f >= 0",
    ];
    let sorted = |outcome: &ringscan_executor::QueryOutcome| {
        let text = csv_of(outcome);
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort_unstable();
        lines.join("\n")
    };
    for w in wheres {
        let direct = format!("SELECT i, b, f, s, d FROM p WHERE {w}");
        let wrapped = format!("SELECT * FROM (SELECT i, b, f, s, d FROM p WHERE {w}) AS q");
        let got = session.query(&direct, false);
        let want = session.query(&wrapped, false);
        match (got, want) {
            (Ok(got), Ok(want)) => assert_eq!(sorted(&got), sorted(&want), "WHERE {w}"),
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "WHERE {w}"),
            (a, b) => panic!("WHERE {w}: {a:?} against {b:?}"),
        }
    }
    // Another value of a shape whose literals became parameters: planned already.
    for key in [11, 12] {
        let outcome = session
            .query(&format!("SELECT s FROM p WHERE i = {key}"), false)
            .expect("lookup");
        assert_eq!(csv_of(&outcome), format!("s\n{:03}\n", (key + 50) % 37));
        if key == 12 {
            assert!(outcome.plan_hit, "the shape was planned once");
        }
    }
}

/// A prepared statement's filter on its parameter is applied before its LIMIT and
/// OFFSET, as with the value inline (a limit pushed into the scan dropped the filter).
#[test]
fn a_prepared_filter_comes_before_its_limit_and_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    write_table(data, "t", 20_000, 2_000);
    let _guard = DaemonGuard(data);
    let mut session = started_session(data);
    let inline = session
        .query("SELECT k FROM t WHERE g = 3 LIMIT 2 OFFSET 10", false)
        .expect("inline");
    for run in 0..2 {
        let bound = session
            .query_with(
                "SELECT k FROM t WHERE g = $1 LIMIT 2 OFFSET 10",
                vec![ringscan_executor::engine::Param::Int64(Some(3))],
                false,
            )
            .expect("bound");
        assert_eq!(csv_of(&bound), "k\n103\n113\n", "run {run}");
        assert_eq!(csv_of(&inline), "k\n103\n113\n", "run {run}");
        let limited = session
            .query_with(
                "SELECT k FROM t WHERE g = $1 LIMIT 2",
                vec![ringscan_executor::engine::Param::Int64(Some(3))],
                false,
            )
            .expect("bound");
        assert_eq!(csv_of(&limited), "k\n3\n13\n", "run {run}");
    }
}
