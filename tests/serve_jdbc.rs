//! `ringscan serve` with the PostgreSQL JDBC driver (pgjdbc): prepared statements with
//! parameters of several Java types, before and after pgjdbc switches to named
//! server-side statements and binary results; fetch-size cursors; result-set metadata;
//! an error's SQLSTATE. The answers are checked against `ringscan query` of the same SQL
//! with the parameters written as literals (`tests/serve/JdbcCheck.java` compares them).
//!
//! The driver is Debian's `libpostgresql-jdbc-java`, installed with apt-get when its jar
//! is missing. Without it or without Java the test is skipped (with a line saying why),
//! unless `RINGSCAN_REQUIRE_INTEROP=1`, which makes that a failure.

mod common;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::cli::{ringscan, DaemonGuard};
use common::serve::Host;

/// Where `libpostgresql-jdbc-java` puts the driver (the versioned names link to it).
const PGJDBC_JAR: &str = "/usr/share/java/postgresql.jar";
const PGJDBC_PACKAGE: &str = "libpostgresql-jdbc-java";
/// apt-get downloads the package: generous, but bounded.
const APT_TIMEOUT: Duration = Duration::from_secs(300);
/// Compiling JdbcCheck.java and running every case twice, seven times each.
const JAVA_TIMEOUT: Duration = Duration::from_secs(300);
/// The JVM's zone, sent by pgjdbc as the session's TimeZone and used by setTimestamp:
/// one with a half-hour offset, so that an instant read or written in the wrong zone
/// shows.
const JAVA_TIME_ZONE: &str = "Asia/Kolkata";

fn interop_required() -> bool {
    std::env::var("RINGSCAN_REQUIRE_INTEROP").as_deref() == Ok("1")
}

/// Says why the test is skipped, or fails with it where interop is required.
fn skip(why: &str) {
    assert!(
        !interop_required(),
        "serve_jdbc needs Java and pgjdbc and RINGSCAN_REQUIRE_INTEROP=1 is set: {why}"
    );
    eprintln!("SKIPPED serve_jdbc: {why}");
}

/// Runs `command` with stdin closed and stdout and stderr into `log`, killing it after
/// `timeout`: its exit status and what it wrote.
fn run_logged(
    command: &mut Command,
    log: &Path,
    timeout: Duration,
) -> Result<(ExitStatus, String), String> {
    let out = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot run {:?}: {e}", command.get_program()))?;
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                let text = std::fs::read_to_string(log).unwrap_or_default();
                return Err(format!(
                    "{:?} still running after {} s, killed: {text}",
                    command.get_program(),
                    timeout.as_secs()
                ));
            }
            Err(e) => return Err(format!("waiting for {:?}: {e}", command.get_program())),
        }
    };
    Ok((status, std::fs::read_to_string(log).unwrap_or_default()))
}

fn apt_get(args: &[&str], log: &Path) -> Result<(), String> {
    let (status, text) = run_logged(
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive"),
        log,
        APT_TIMEOUT,
    )?;
    if status.success() {
        return Ok(());
    }
    let tail: Vec<&str> = text.lines().rev().take(5).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Err(format!(
        "`apt-get {}` failed ({status}): {}",
        args.join(" "),
        tail.join(" / ")
    ))
}

/// The pgjdbc jar, installed with apt-get when missing (`apt-get update` first only if
/// the plain install fails: stale package lists), or why there is none.
fn pgjdbc_jar(scratch: &Path) -> Result<PathBuf, String> {
    let jar = PathBuf::from(PGJDBC_JAR);
    if jar.is_file() {
        return Ok(jar);
    }
    let log = scratch.join("apt-get.log");
    let install = ["install", "-y", "--no-install-recommends", PGJDBC_PACKAGE];
    if let Err(first) = apt_get(&install, &log) {
        apt_get(&["update"], &log)
            .and_then(|()| apt_get(&install, &log))
            .map_err(|second| format!("cannot install {PGJDBC_PACKAGE}: {first}; then {second}"))?;
    }
    if jar.is_file() {
        Ok(jar)
    } else {
        Err(format!(
            "{PGJDBC_PACKAGE} is installed but {PGJDBC_JAR} is missing"
        ))
    }
}

fn have_java() -> Result<(), String> {
    let out = Command::new("java")
        .arg("-version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("no java: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`java -version` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A statement parameter: how JdbcCheck binds it (the setter it calls) and the same
/// value as a literal in ringscan's SQL.
#[derive(Debug, Clone, Copy)]
enum Param {
    /// `setString`: pgjdbc sends varchar, in text.
    Text(&'static str),
    /// `setLong`: int8, in binary.
    Long(i64),
    /// `setInt`: int4, in binary.
    Int(i32),
    /// `setDouble`: float8, in binary.
    Double(f64),
    /// `setTimestamp` of this instant (RFC 3339): text in the JVM's zone, type unspecified.
    Timestamp(&'static str),
    /// `setObject(OffsetDateTime)` (RFC 3339): timestamptz, in text.
    OffsetDateTime(&'static str),
    /// `setBigDecimal`: numeric, in text.
    Decimal(&'static str),
}

impl Param {
    /// The type name and value in JdbcCheck's cases file.
    fn java(self) -> (&'static str, String) {
        match self {
            Self::Text(s) => ("string", s.to_owned()),
            Self::Long(v) => ("long", v.to_string()),
            Self::Int(v) => ("int", v.to_string()),
            Self::Double(v) => ("double", format!("{v:?}")),
            Self::Timestamp(s) => ("timestamp", s.to_owned()),
            Self::OffsetDateTime(s) => ("offsetdatetime", s.to_owned()),
            Self::Decimal(s) => ("bigdecimal", s.to_owned()),
        }
    }

    fn literal(self) -> String {
        match self {
            Self::Text(s) => format!("'{}'", s.replace('\'', "''")),
            Self::Long(v) => v.to_string(),
            Self::Int(v) => v.to_string(),
            Self::Double(v) => format!("CAST({v:?} AS DOUBLE)"),
            Self::Timestamp(s) | Self::OffsetDateTime(s) => format!("CAST('{s}' AS TIMESTAMPTZ)"),
            Self::Decimal(s) => s.to_owned(),
        }
    }
}

/// A query JdbcCheck runs as a PreparedStatement, with `?` for each parameter.
struct Case {
    label: &'static str,
    sql: &'static str,
    params: Vec<Param>,
    /// 0: all rows at once, autocommit; else inside a transaction, this many per fetch.
    fetch_size: u32,
}

impl Case {
    /// The SQL with each `?` replaced by its parameter's literal.
    fn with_literals(&self) -> String {
        let pieces: Vec<&str> = self.sql.split('?').collect();
        assert_eq!(
            pieces.len(),
            self.params.len() + 1,
            "{}: one `?` per parameter",
            self.label
        );
        let mut sql = pieces[0].to_owned();
        for (param, piece) in self.params.iter().zip(&pieces[1..]) {
            sql.push_str(&param.literal());
            sql.push_str(piece);
        }
        sql
    }
}

fn cases() -> Vec<Case> {
    use Param::*;
    let case = |label, sql, params: &[Param], fetch_size| Case {
        label,
        sql,
        params: params.to_vec(),
        fetch_size,
    };
    vec![
        case(
            "setString and setLong",
            "SELECT symbol, ts, open, high, low, close, volume FROM ohlcv \
             WHERE symbol = ? AND volume > ? ORDER BY ts LIMIT 20",
            &[Text("AAPL"), Long(1000)],
            0,
        ),
        case(
            "setInt",
            "SELECT symbol, ts, close, volume FROM ohlcv WHERE volume < ? \
             ORDER BY ts, symbol LIMIT 15",
            &[Int(5000)],
            0,
        ),
        case(
            "setDouble",
            "SELECT symbol, ts, close FROM ohlcv WHERE close > ? \
             ORDER BY close DESC, ts, symbol LIMIT 10",
            &[Double(470.5)],
            0,
        ),
        case(
            "setTimestamp",
            "SELECT symbol, count(*) AS n, min(ts) AS first, max(close) AS top FROM ohlcv \
             WHERE ts >= ? GROUP BY symbol ORDER BY symbol",
            &[Timestamp("2024-01-05T12:00:00Z")],
            0,
        ),
        case(
            "setObject(OffsetDateTime)",
            "SELECT ts, symbol, volume FROM ohlcv WHERE ts < ? AND symbol = ? \
             ORDER BY ts DESC LIMIT 10",
            &[OffsetDateTime("2024-01-08T15:00:00+02:00"), Text("MSFT")],
            0,
        ),
        case(
            "setBigDecimal",
            "SELECT count(*) AS n, sum(volume) AS v, avg(close) AS c FROM ohlcv WHERE close < ?",
            &[Decimal("450.25")],
            0,
        ),
        case(
            "all setters in one statement",
            "SELECT symbol, ts, close, volume FROM ohlcv WHERE symbol = ? AND volume >= ? \
             AND volume < ? AND close BETWEEN ? AND ? AND ts >= ? AND ts < ? \
             ORDER BY ts LIMIT 25",
            &[
                Text("NVDA"),
                Long(500),
                Int(400_000),
                Double(440.0),
                Decimal("470.125"),
                Timestamp("2024-01-03T00:00:00Z"),
                OffsetDateTime("2024-01-09T09:30:00-05:00"),
            ],
            0,
        ),
        // 2500 rows, 25 fetches of 100: the last Execute returns no row, only the end.
        case(
            "fetch size over 2500 rows",
            "SELECT symbol, ts, open, close, volume FROM ohlcv WHERE symbol = ? ORDER BY ts",
            &[Text("GOOG")],
            100,
        ),
        // A count that is no multiple of the fetch size: the last fetch is short.
        case(
            "fetch size over a short last fetch",
            "SELECT ts, symbol, close FROM ohlcv WHERE close > ? ORDER BY ts, symbol",
            &[Double(466.5)],
            100,
        ),
    ]
}

/// Writes each case's expected answer (`ringscan query --format csv` of its SQL with
/// literals) and the cases file JdbcCheck reads.
fn write_cases(data: &Path, dir: &Path) -> PathBuf {
    let mut spec = String::new();
    for (i, case) in cases().iter().enumerate() {
        let sql = case.with_literals();
        let out = ringscan(&["query", "--format", "csv", &sql], data);
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Lines after the header: no field of these queries holds a newline.
        let rows = out
            .stdout
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            .saturating_sub(1);
        assert!(rows > 0, "{}: no rows to compare: {sql}", case.label);
        assert!(
            case.fetch_size == 0 || rows >= 1000,
            "{}: {rows} rows, too few for a fetch size of {}",
            case.label,
            case.fetch_size
        );
        let expected = dir.join(format!("case-{i}.csv"));
        std::fs::write(&expected, &out.stdout).expect("write expected csv");
        let fields = [case.label, case.sql, &expected.to_string_lossy()];
        assert!(
            fields.iter().all(|f| !f.contains(['\t', '\n'])),
            "tabs or newlines in {fields:?}"
        );
        writeln!(
            spec,
            "case\t{}\t{}\t{}\t{}",
            case.label,
            case.fetch_size,
            expected.display(),
            case.sql
        )
        .expect("write to a String");
        for param in &case.params {
            let (kind, value) = param.java();
            writeln!(spec, "param\t{kind}\t{value}").expect("write to a String");
        }
    }
    let path = dir.join("cases.tsv");
    std::fs::write(&path, spec).expect("write cases");
    path
}

#[test]
fn pgjdbc_prepared_statements_fetch_sizes_and_metadata_equal_ringscan_query() {
    let dir = tempfile::tempdir().expect("tempdir");
    if let Err(why) = have_java() {
        return skip(&why);
    }
    let jar = match pgjdbc_jar(dir.path()) {
        Ok(jar) => jar,
        Err(why) => return skip(&why),
    };
    let data = dir.path().join("data");
    let generated = ringscan(&["generate", "ohlcv", "--rows", "20000"], &data);
    assert!(generated.status.success(), "{generated:?}");
    let _daemon = DaemonGuard(&data);
    let cases = write_cases(&data, dir.path());
    let log = dir.path().join("serve.log");
    let host = Host::start(&data, &log, &[]);

    let check = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serve/JdbcCheck.java");
    let started = Instant::now();
    let result = run_logged(
        Command::new("java")
            .arg(format!("-Duser.timezone={JAVA_TIME_ZONE}"))
            .arg("-cp")
            .arg(&jar)
            .arg(&check)
            .arg(host.port.to_string())
            .arg(&cases),
        &dir.path().join("jdbc.log"),
        JAVA_TIMEOUT,
    );
    let host_log = std::fs::read_to_string(&log).unwrap_or_default();
    let (status, output) = result.unwrap_or_else(|e| panic!("{e}\nhost log:\n{host_log}"));
    assert!(
        status.success(),
        "JdbcCheck failed ({status}):\n{output}\nhost log:\n{host_log}"
    );
    eprintln!(
        "{output}JdbcCheck took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    for wanted in [
        "server-prepared from execution",
        "fetch size 100",
        "ok ResultSetMetaData",
        "SQLSTATE 42P01",
        "ok getDatabaseProductVersion",
    ] {
        assert!(output.contains(wanted), "no '{wanted}' in:\n{output}");
    }
}
