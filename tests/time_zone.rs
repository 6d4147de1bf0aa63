//! The session time zone (issue 17, item 8): `TIMESTAMPTZ` columns are instants shown,
//! truncated and split in the session's zone (`SET TimeZone`, `--time-zone`), whatever
//! zone their files name; literals with offsets are instants; predicates on instants
//! prune and filter in the daemon as instants. Against DuckDB on the same file across
//! the daylight-saving changes of 2024: `time_zones_match_duckdb`.

mod common;

use std::fs::File;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch, TimestampMicrosecondArray};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

use common::cli::{ringscan, DaemonGuard};
use common::python::python_or_skip;
use ringscan_executor::engine::{EngineOptions, SqlSession};

/// 2024-03-30 00:00:00 UTC, microseconds.
const MARCH_30_US: i64 = 1_711_756_800_000_000;
const HOUR_US: i64 = 3_600_000_000;

/// Table `ev`: `id` 0..72 and the instant 2024-03-30 00:00 UTC + `id` hours (over
/// Berlin's spring-forward night) stored three ways: zone `UTC`, `+02:00` and
/// `America/New_York`. Row groups of 12 rows, so that predicates prune.
fn write_events(data: &Path) {
    let dir = data.join("ev");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let us = DataType::Timestamp(TimeUnit::Microsecond, None);
    let zoned = |zone: &str| DataType::Timestamp(TimeUnit::Microsecond, Some(zone.into()));
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("ts", zoned("UTC"), false),
        Field::new("ts_off", zoned("+02:00"), false),
        Field::new("ts_ny", zoned("America/New_York"), false),
        Field::new("naive", us, false),
    ]));
    let instants: Vec<i64> = (0..72).map(|h| MARCH_30_US + h * HOUR_US).collect();
    let ts = |zone: Option<&str>| {
        let a = TimestampMicrosecondArray::from(instants.clone());
        Arc::new(match zone {
            Some(z) => a.with_timezone(z),
            None => a,
        })
    };
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new((0..72).collect::<Int64Array>()),
            ts(Some("UTC")),
            ts(Some("+02:00")),
            ts(Some("America/New_York")),
            ts(None),
        ],
    )
    .expect("batch");
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(12))
        .build();
    let file = File::create(dir.join("part-0.parquet")).expect("create");
    let mut writer = ArrowWriter::try_new(file, schema, Some(props)).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
}

/// A session in `zone` on `data` after starting its daemon (the caller holds a
/// [`DaemonGuard`]).
fn session_in(data: &Path, zone: &str) -> SqlSession {
    let started = ringscan(&["daemon", "start"], data);
    assert!(started.status.success(), "daemon start: {started:?}");
    let no_spawn = || Err(std::io::Error::other("the test started the daemon"));
    let options = EngineOptions {
        time_zone: zone.into(),
        ..EngineOptions::default()
    };
    SqlSession::open(data, &no_spawn, &options).expect("open session")
}

/// The rows of `sql` as `ringscan query --format csv` prints them, header left out.
fn rows(session: &mut SqlSession, sql: &str) -> Vec<String> {
    let outcome = session.query(sql, true).expect(sql);
    let mut out = Vec::new();
    ringscan_executor::format::write_csv(&mut out, &outcome.result).expect("csv");
    String::from_utf8(out)
        .expect("utf8")
        .lines()
        .skip(1)
        .map(str::to_owned)
        .collect()
}

/// Regression: `date_trunc('day', ...)` cut at UTC midnight whatever the session's
/// zone. In Berlin, 2024-03-31 has 23 hours and starts at 23:00 UTC the day before.
#[test]
fn date_trunc_day_follows_the_session_time_zone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    write_events(data);
    let _guard = DaemonGuard(data);
    let mut session = session_in(data, "Europe/Berlin");
    for column in ["ts", "ts_off", "ts_ny"] {
        assert_eq!(
            rows(
                &mut session,
                &format!(
                    "SELECT date_trunc('day', {column}) AS d, count(*) AS hours FROM ev \
                     GROUP BY d ORDER BY d"
                )
            ),
            [
                "2024-03-30 00:00:00+01,23",
                "2024-03-31 00:00:00+01,23",
                "2024-04-01 00:00:00+02,24",
                "2024-04-02 00:00:00+02,2",
            ],
            "{column}"
        );
    }
    assert_eq!(
        rows(
            &mut session,
            "SELECT ts::DATE AS d, date_part('hour', ts) AS h, date_trunc('hour', ts) AS t \
             FROM ev WHERE id IN (22, 23, 25, 26) ORDER BY id"
        ),
        [
            "2024-03-30,23,2024-03-30 23:00:00+01",
            "2024-03-31,0,2024-03-31 00:00:00+01",
            "2024-03-31,3,2024-03-31 03:00:00+02",
            "2024-03-31,4,2024-03-31 04:00:00+02",
        ]
    );
    // The same session after `SET TimeZone`: the answer moves with it, not from the
    // result cache.
    let sql = "SELECT date_trunc('day', ts) AS d, count(*) AS n FROM ev GROUP BY d ORDER BY d";
    let before = rows(&mut session, sql);
    rows(&mut session, "SET TimeZone = 'Asia/Kolkata'");
    assert_eq!(&*session.time_zone(), "Asia/Kolkata");
    let after = rows(&mut session, sql);
    assert_ne!(before, after);
    assert_eq!(after[0], "2024-03-30 00:00:00+05:30,19");
}

/// Where clocks go back the hour 02:00-02:59 happens twice; a value in its first pass
/// truncates to the hour's first pass, never after itself (DuckDB differs:
/// KNOWN_DIFFERENCES.md). Local times that happen twice or never are read as DuckDB
/// reads them.
#[test]
fn the_hours_clocks_change_in_truncate_and_resolve_like_duckdb_where_it_is_sound() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    write_events(data);
    let _guard = DaemonGuard(data);
    let mut session = session_in(data, "Europe/Berlin");
    assert_eq!(
        rows(
            &mut session,
            "SELECT date_trunc('hour', TIMESTAMPTZ '2024-10-27 02:45:00+02') AS a, \
                    date_trunc('hour', TIMESTAMPTZ '2024-10-27 02:45:00+01') AS b, \
                    TIMESTAMPTZ '2024-10-27 02:30:00' AS twice, \
                    TIMESTAMPTZ '2024-03-31 02:30:00' AS never, \
                    TIMESTAMP '2024-03-31 02:00:00'::TIMESTAMPTZ AS never_cast, \
                    DATE '2024-03-31'::TIMESTAMPTZ AS midnight"
        ),
        [
            "2024-10-27 02:00:00+02,2024-10-27 02:00:00+01,2024-10-27 02:30:00+01,\
          2024-03-31 03:30:00+02,2024-03-31 03:00:00+02,2024-03-31 00:00:00+01"
        ]
    );
    // A naive column meeting an instant column: local time in the session zone (ids
    // 25 and 26 are 01:00 and 02:00, local times that do not exist in Berlin).
    assert_eq!(
        rows(
            &mut session,
            "SELECT id, naive::TIMESTAMPTZ AS t FROM ev WHERE id IN (24, 25, 26, 27) ORDER BY id"
        ),
        [
            "24,2024-03-31 00:00:00+01",
            "25,2024-03-31 01:00:00+01",
            "26,2024-03-31 03:00:00+02",
            "27,2024-03-31 03:00:00+02",
        ]
    );
}

/// Regression: instants printed `+00` and UTC time whatever the zone.
#[test]
fn instants_print_in_the_session_zone_with_their_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    write_events(data);
    let _guard = DaemonGuard(data);
    let mut session = session_in(data, "Europe/Berlin");
    let sql = "SELECT ts, ts_off, ts_ny, naive FROM ev WHERE id IN (0, 25) ORDER BY id";
    assert_eq!(
        rows(&mut session, sql),
        [
            "2024-03-30 01:00:00+01,2024-03-30 01:00:00+01,2024-03-30 01:00:00+01,2024-03-30 00:00:00",
            "2024-03-31 03:00:00+02,2024-03-31 03:00:00+02,2024-03-31 03:00:00+02,2024-03-31 01:00:00",
        ]
    );
    rows(&mut session, "SET timezone TO 'Asia/Kolkata'");
    assert_eq!(
        rows(&mut session, "SELECT ts FROM ev WHERE id = 0"),
        ["2024-03-30 05:30:00+05:30"]
    );
    rows(&mut session, "RESET TimeZone");
    assert_eq!(&*session.time_zone(), "Europe/Berlin");
}

/// Regression: literals with an offset other than +00 were refused or compared as the
/// wrong instant. An instant literal prunes the daemon's row groups like any literal.
#[test]
fn offset_literals_compare_as_instants_and_prune_in_the_daemon() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    write_events(data);
    let _guard = DaemonGuard(data);
    let mut session = session_in(data, "America/New_York");
    // 2024-03-31 05:30+05:30 is 00:00 UTC: id 24 on.
    for column in ["ts", "ts_off", "ts_ny"] {
        let sql = format!(
            "SELECT count(*) AS n, min(id) AS first FROM ev \
             WHERE {column} >= TIMESTAMPTZ '2024-03-31 05:30:00+05:30'"
        );
        let outcome = session.query(&sql, false).expect("query");
        let mut out = Vec::new();
        ringscan_executor::format::write_csv(&mut out, &outcome.result).expect("csv");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "n,first\n48,24\n",
            "{column}"
        );
        let scan = outcome.scan.expect("a daemon scan");
        assert_eq!(
            scan.row_groups_pruned, 2,
            "{column}: the instant bound prunes the first two row groups"
        );
    }
    // Without an offset a literal is local time in the session zone (-04 that day).
    assert_eq!(
        rows(
            &mut session,
            "SELECT min(id) FROM ev WHERE ts >= TIMESTAMPTZ '2024-03-30 20:00:00'"
        ),
        ["24"]
    );
    assert_eq!(
        rows(
            &mut session,
            "SELECT TIMESTAMPTZ '2024-01-01 00:00:00+05:30' AS t"
        ),
        ["2023-12-31 13:30:00-05"]
    );
}

#[test]
fn an_unknown_time_zone_is_refused_and_the_session_keeps_its_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    write_events(data);
    let _guard = DaemonGuard(data);
    let mut session = session_in(data, "Europe/Berlin");
    let e = session
        .query("SET TimeZone = 'Mars/Olympus'", false)
        .expect_err("an unknown zone");
    assert!(
        e.to_string().contains("unknown time zone \"Mars/Olympus\""),
        "{e}"
    );
    assert_eq!(&*session.time_zone(), "Europe/Berlin");
    assert_eq!(
        rows(&mut session, "SELECT ts FROM ev WHERE id = 0"),
        ["2024-03-30 01:00:00+01"]
    );
    let options = EngineOptions {
        time_zone: "Nowhere/Special".into(),
        ..EngineOptions::default()
    };
    let no_spawn = || Err(std::io::Error::other("the test started the daemon"));
    let e = SqlSession::open(data, &no_spawn, &options).expect_err("an unknown zone");
    assert!(e.to_string().contains("unknown time zone"), "{e}");
}

/// `ringscan query`: `--time-zone`, `$RINGSCAN_TIME_ZONE`, and a `SET TimeZone`
/// statement before the query.
#[test]
fn the_cli_takes_the_zone_from_its_option_the_environment_or_a_set_statement() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    write_events(data);
    let _guard = DaemonGuard(data);
    let sql = "SELECT ts FROM ev WHERE id = 25";
    let run = |args: &[&str], env: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringscan"));
        cmd.args(["query", "--format", "csv", "--data"])
            .arg(data)
            .args(args)
            .env_remove("RINGSCAN_TIME_ZONE");
        if let Some(zone) = env {
            cmd.env("RINGSCAN_TIME_ZONE", zone);
        }
        let out = cmd.output().expect("spawn ringscan");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf8")
    };
    assert_eq!(run(&[sql], None), "ts\n2024-03-31 01:00:00+00\n");
    assert_eq!(
        run(&["--time-zone", "Europe/Berlin", sql], None),
        "ts\n2024-03-31 03:00:00+02\n"
    );
    assert_eq!(
        run(&[sql], Some("America/New_York")),
        "ts\n2024-03-30 21:00:00-04\n"
    );
    assert_eq!(
        run(
            &[&format!("SET TimeZone = 'Asia/Kolkata'; {sql};")],
            Some("America/New_York")
        ),
        "ts\n2024-03-31 06:30:00+05:30\n"
    );
    let out = ringscan(&["query", "--time-zone", "Mars/Olympus", "SELECT 1"], data);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown time zone"));
}

/// The differential check: `tests/differential/time_zones.py` against DuckDB.
#[test]
fn time_zones_match_duckdb() {
    let Some(python) = python_or_skip("time_zones_match_duckdb") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    let _guard = DaemonGuard(data);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/differential/time_zones.py");
    let out = Command::new(python)
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_ringscan"))
        .arg(data)
        .output()
        .expect("run time_zones.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "time zones differ from DuckDB:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_str(stdout.lines().last().unwrap_or("{}")).expect("summary");
    assert!(summary["queries"].as_u64().unwrap_or(0) >= 60, "{summary}");
    assert_eq!(summary["failures"], 0, "{stdout}");
}
