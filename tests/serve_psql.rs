//! `ringscan serve` with a real client: psql connects over TCP on loopback and its
//! answers equal `ringscan query`'s on the same files; errors carry their SQLSTATE;
//! SIGTERM stops the host with status 0. Skipped (with a line saying so) where psql is
//! not installed, unless `RINGSCAN_REQUIRE_INTEROP` is set.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::cli::{ringscan, DaemonGuard};
use common::serve::Host;

impl Host {
    /// `psql -At` (unaligned, tuples only) of `sql`: (status ok, stdout, stderr).
    fn psql(&self, sql: &str) -> (bool, String, String) {
        self.psql_commands(&[sql])
    }

    /// `psql -At -c C1 -c C2...`.
    fn psql_commands(&self, commands: &[&str]) -> (bool, String, String) {
        let out = Command::new("psql")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", "ringscan", "-d", "ringscan", "-X", "-At", "-F", ","])
            .args(["-v", "ON_ERROR_STOP=1"])
            .args(commands.iter().flat_map(|c| ["-c", c]))
            .env("PGCONNECT_TIMEOUT", "10")
            .stdin(Stdio::null())
            .output()
            .expect("run psql");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// A temporary data directory holding `rows` rows of the generator's ohlcv table (the
/// directory goes when the first value is dropped).
fn ohlcv(rows: u32) -> (tempfile::TempDir, std::path::PathBuf) {
    ohlcv_in_groups(rows, None)
}

/// `ohlcv` in row groups of `group_rows` (a scan's batches: one a row group).
fn ohlcv_in_groups(rows: u32, group_rows: Option<u32>) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let rows = rows.to_string();
    let group = group_rows.map(|g| g.to_string());
    let mut args = vec!["generate", "ohlcv", "--rows", &rows];
    if let Some(g) = &group {
        args.extend(["--row-group-rows", g]);
    }
    let generated = ringscan(&args, &data);
    assert!(generated.status.success(), "{generated:?}");
    (dir, data)
}

/// Every close against every other: a statement that runs for many seconds over
/// 60,000 rows even on a fast machine.
const SLOW: &str = "SELECT count(*) FROM ohlcv a, ohlcv b WHERE a.close < b.close + a.volume * 0";

/// A frontend message: its type, length and body.
fn frame(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![kind];
    m.extend(((4 + body.len()) as u32).to_be_bytes());
    m.extend(body);
    m
}

/// A simple Query message.
fn query_message(sql: &str) -> Vec<u8> {
    frame(b'Q', &[sql.as_bytes(), b"\0"].concat())
}

impl Host {
    /// Sends SIGTERM and waits (at most `within`) for the exit status.
    fn terminate(&mut self, within: Duration) -> std::process::ExitStatus {
        let killed = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(killed.success());
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "still running {within:?} after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn have_psql() -> bool {
    let found = Command::new("psql")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var_os("RINGSCAN_REQUIRE_INTEROP").is_none(),
            "psql is not installed and RINGSCAN_REQUIRE_INTEROP is set"
        );
        eprintln!("SKIPPED serve_psql: psql is not installed");
    }
    found
}

/// `ringscan query --format csv` of `sql`, its header dropped: what psql -At -F, prints
/// for the same rows, but for the spelling of booleans (PostgreSQL's t/f).
fn query_csv(data: &Path, sql: &str) -> String {
    let out = ringscan(&["query", "--format", "csv", sql], data);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines().skip(1).map(|l| format!("{l}\n")).collect()
}

#[test]
fn psql_answers_equal_ringscan_query_and_errors_have_sqlstates() {
    if !have_psql() {
        return;
    }
    let (dir, data) = ohlcv(20000);
    let _daemon = DaemonGuard(&data);
    let mut host = Host::start(&data, &dir.path().join("serve.log"), &[]);

    for sql in [
        "SELECT symbol, count(*) AS n, round(avg(close), 4) AS c, min(ts) AS first \
         FROM ohlcv GROUP BY symbol ORDER BY symbol",
        "SELECT symbol, ts, close, volume FROM ohlcv WHERE close >= 460 ORDER BY close DESC, ts, symbol \
         LIMIT 50",
        "SELECT count(*) FROM ohlcv WHERE symbol = 'AAPL' AND volume IS NOT NULL",
    ] {
        let (ok, wire, err) = host.psql(sql);
        assert!(ok, "{sql}: {err}");
        assert_eq!(wire, query_csv(&data, sql), "{sql}");
        assert!(!wire.is_empty(), "{sql}: no rows to compare");
    }

    // PostgreSQL's spellings: booleans t/f, NULL as nothing, doubles without ".0".
    let (ok, wire, err) = host.psql("SELECT true, false, NULL, 2.0::double, 'a''b'");
    assert!(ok, "{err}");
    assert_eq!(wire, "t,f,,2,a'b\n");

    // Several statements in one query, and a transaction bracket (psql prints each
    // statement's result, command tags included, as with PostgreSQL).
    let (ok, wire, err) = host.psql("BEGIN; SELECT count(*) FROM ohlcv; COMMIT");
    assert!(ok, "{err}");
    assert_eq!(wire, "BEGIN\n20000\nCOMMIT\n");

    // Errors: one message naming the cause, its SQLSTATE, and the session lives on.
    for (sql, code) in [
        ("SELECT nope FROM ohlcv", "42703"),
        ("SELECT * FROM missing_table", "42P01"),
        ("SELEKT 1", "42601"),
    ] {
        let (ok, _, err) = host.psql_commands(&["\\set VERBOSITY verbose", sql]);
        assert!(!ok, "{sql} succeeded");
        assert!(
            err.contains(code),
            "{sql}: wanted SQLSTATE {code} in: {err}"
        );
    }
    let (ok, wire, _) = host.psql("SELECT 1 + 1");
    assert!(ok);
    assert_eq!(wire, "2\n");

    // \copy to a client-side file: COPY ... TO STDOUT in CSV with a header, equal to
    // ringscan query's CSV.
    let sql = "SELECT symbol, count(*) AS n, max(close) AS top FROM ohlcv GROUP BY symbol ORDER BY symbol";
    let file = dir.path().join("copied.csv");
    let (ok, wire, err) = host.psql(&format!(
        "\\copy ({sql}) to '{}' csv header",
        file.display()
    ));
    assert!(ok, "{err}");
    assert_eq!(wire, "COPY 8\n");
    let direct = ringscan(&["query", "--format", "csv", sql], &data);
    assert_eq!(
        std::fs::read_to_string(&file).expect("copied"),
        String::from_utf8_lossy(&direct.stdout)
    );

    // libpq's startup options (PGOPTIONS) set parameters.
    let out = Command::new("psql")
        .args(["-h", "127.0.0.1", "-p", &host.port.to_string()])
        .args(["-U", "ringscan", "-d", "ringscan", "-X", "-At"])
        .args(["-c", "SHOW statement_timeout"])
        .env("PGOPTIONS", "-c statement_timeout=1234")
        .stdin(Stdio::null())
        .output()
        .expect("psql");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1234\n", "{out:?}");

    // psql's catalog commands answer from the data directory.
    let (ok, wire, err) = host.psql_commands(&["\\dt", "\\d ohlcv", "\\l", "\\dn"]);
    assert!(ok, "{err}");
    assert_eq!(
        wire,
        "public,ohlcv,table,ringscan\n\
         symbol,text,,not null,\n\
         ts,timestamp with time zone,,not null,\n\
         open,double precision,,not null,\n\
         high,double precision,,not null,\n\
         low,double precision,,not null,\n\
         close,double precision,,not null,\n\
         volume,numeric,,not null,\n\
         ringscan,ringscan,UTF8,C,C,,libc,\n\
         public,ringscan\n"
    );
    // \dt+ sizes the table by its files; \du lists the one role.
    let bytes: u64 = std::fs::read_dir(data.join("ohlcv"))
        .expect("table dir")
        .map(|e| e.expect("entry").metadata().expect("metadata").len())
        .sum();
    let (ok, wire, err) = host.psql_commands(&["\\dt+", "\\du"]);
    assert!(ok, "{err}");
    assert_eq!(
        wire,
        format!(
            "public,ohlcv,table,ringscan,permanent,,{} kB,\nringscan,,{{}}\n",
            (bytes / 512).div_ceil(2)
        )
    );
    // \d+ adds each column's storage (PostgreSQL's: plain for fixed-length types,
    // extended for the others), compression, statistics target and description.
    let (ok, wire, err) = host.psql_commands(&["\\d+ ohlcv"]);
    assert!(ok, "{err}");
    assert_eq!(
        wire,
        "symbol,text,,not null,,extended,,,\n\
         ts,timestamp with time zone,,not null,,plain,,,\n\
         open,double precision,,not null,,plain,,,\n\
         high,double precision,,not null,,plain,,,\n\
         low,double precision,,not null,,plain,,,\n\
         close,double precision,,not null,,plain,,,\n\
         volume,numeric,,not null,,extended,,,\n"
    );
    // GUI tools read information_schema.columns: PostgreSQL's type names there too,
    // the same as \d's.
    let (ok, wire, err) = host.psql(
        "SELECT column_name, data_type, udt_name, is_nullable, numeric_precision, \
         datetime_precision FROM information_schema.columns \
         WHERE table_schema = 'public' AND table_name = 'ohlcv' ORDER BY ordinal_position",
    );
    assert!(ok, "{err}");
    assert_eq!(
        wire,
        "symbol,text,text,NO,,\n\
         ts,timestamp with time zone,timestamptz,NO,,6\n\
         open,double precision,float8,NO,53,\n\
         high,double precision,float8,NO,53,\n\
         low,double precision,float8,NO,53,\n\
         close,double precision,float8,NO,53,\n\
         volume,numeric,numeric,NO,,\n"
    );
    let (ok, wire, err) = host.psql(
        "SELECT current_database(), current_schema(), version() LIKE 'PostgreSQL 15%ringscan%'",
    );
    assert!(ok, "{err}");
    assert_eq!(wire, "ringscan,public,t\n");

    // SIGTERM: the listener stops and the host exits 0.
    let status = host.terminate(Duration::from_secs(10));
    assert!(status.success(), "{status:?}");
}

#[test]
fn sigterm_lets_a_statement_run_out_its_grace_then_stops_it_and_the_daemon() {
    if !have_psql() {
        return;
    }
    let (dir, data) = ohlcv(60000);
    let _daemon = DaemonGuard(&data);
    let log = dir.path().join("serve.log");
    let mut host = Host::start(&data, &log, &["--shutdown-grace", "1"]);
    // The daemon started and the table's footers read before the statement under test.
    let (ok, _, err) = host.psql("SELECT count(*) FROM ohlcv");
    assert!(ok, "{err}");
    let client_log = dir.path().join("psql.log");
    let out = std::fs::File::create(&client_log).expect("log");
    let mut client = Command::new("psql")
        .args(["-h", "127.0.0.1", "-p", &host.port.to_string()])
        .args(["-U", "ringscan", "-d", "ringscan", "-X", "-At"])
        .args(["-c", "\\set VERBOSITY verbose", "-c", SLOW])
        .env("PGCONNECT_TIMEOUT", "10")
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("log"))
        .stderr(out)
        .spawn()
        .expect("psql");
    // The statement runs once psql is connected and its session is open; it then
    // runs for many seconds, of which 1.5 pass before the signal.
    let deadline = Instant::now() + Duration::from_secs(20);
    // (The second psql connection: the first was the warm-up's.)
    while std::fs::read_to_string(&log)
        .unwrap_or_default()
        .matches("application=\"psql\"")
        .count()
        < 2
    {
        assert!(Instant::now() < deadline, "psql never connected");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let status = host.terminate(Duration::from_secs(15));
    let _ = client.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let psql = std::fs::read_to_string(&client_log).unwrap_or_default();
    assert!(status.success(), "{status:?}\n{text}");
    assert!(
        text.contains("stopping 1 statement(s) still running after 1 s"),
        "{text}"
    );
    assert!(
        psql.contains("57P01") && psql.contains("administrator command"),
        "psql: {psql}\nhost: {text}"
    );
    // The daemon the host started is gone with it.
    let status = ringscan(&["daemon", "status"], &data);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("no daemon running"),
        "{status:?}"
    );
}

/// A raw protocol client: the startup message, then simple queries, reading until
/// ReadyForQuery. `None` once the server closed the connection.
struct Wire(std::net::TcpStream);

impl Wire {
    fn connect(port: u16) -> Self {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let body = b"user\0ringscan\0\0";
        let mut startup = ((8 + body.len()) as u32).to_be_bytes().to_vec();
        startup.extend(196_608u32.to_be_bytes());
        startup.extend(body);
        s.write_all(&startup).expect("startup");
        let mut wire = Self(s);
        assert!(
            wire.until_ready().is_some(),
            "no ReadyForQuery after startup"
        );
        wire
    }

    /// The next message: its type and body, or `None` at EOF.
    fn message(&mut self) -> Option<(u8, Vec<u8>)> {
        use std::io::Read;
        let mut head = [0u8; 5];
        self.0.read_exact(&mut head).ok()?;
        let len = u32::from_be_bytes(head[1..5].try_into().expect("4")) as usize;
        let mut body = vec![0u8; len.saturating_sub(4)];
        self.0.read_exact(&mut body).ok()?;
        Some((head[0], body))
    }

    /// Reads messages up to ReadyForQuery; their type bytes, or `None` at EOF.
    fn until_ready(&mut self) -> Option<Vec<u8>> {
        let mut types = Vec::new();
        loop {
            let (kind, _) = self.message()?;
            types.push(kind);
            if kind == b'Z' {
                return Some(types);
            }
        }
    }

    fn query(&mut self, sql: &str) -> Option<Vec<u8>> {
        use std::io::Write;
        self.0.write_all(&query_message(sql)).ok()?;
        self.until_ready()
    }
}

/// The address of the host's `/metrics` (`--metrics 127.0.0.1:0`), from its log.
fn metrics_addr(log: &std::path::Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .find_map(|l| l.split("metrics on http://").nth(1))
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("no metrics line: {text}"))
        .to_owned()
}

/// The host's metrics, as a scraper gets them (the HTTP response whole).
fn scrape_metrics(addr: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("request");
    let mut body = String::new();
    s.read_to_string(&mut body).expect("response");
    body
}

/// `ringscan_statements_total` of `outcome` in a scrape (0 before the first).
fn statements(body: &str, outcome: &str) -> f64 {
    let name = format!("ringscan_statements_total{{outcome=\"{outcome}\"}}");
    body.lines()
        .find_map(|l| {
            l.strip_prefix(name.as_str())
                .and_then(|v| v.strip_prefix(' '))
        })
        .map_or(0.0, |v| v.trim().parse().unwrap_or(f64::NAN))
}

/// An Execute without a row limit sends the portal's rows (read as they are sent, past
/// 64 KiB) and leaves it finished: executed again, it has no rows. With a row limit,
/// the portal is sent in parts, each ending suspended, the last with its command tag.
/// A simple query's rows go as the whole portal's do (past pgwire's encoder, in
/// packs): the same rows, byte for byte, as the parts that pgwire sends row by row.
#[test]
fn portals_are_sent_whole_once_or_in_parts_of_their_row_limit() {
    use std::io::Write;
    // More rows than a scan's batch (65,536): the result is read as it is sent past
    // the host's first 64 KiB.
    let (dir, data) = ohlcv_in_groups(150_000, Some(10_000));
    let _daemon = DaemonGuard(&data);
    let log = dir.path().join("serve.log");
    let host = Host::start(&data, &log, &["--metrics", "127.0.0.1:0"]);
    let addr = metrics_addr(&log);
    let mut wire = Wire::connect(host.port);
    let sql = "SELECT * FROM ohlcv WHERE volume >= 0";
    let parse = frame(b'P', &[b"\0", sql.as_bytes(), b"\0\0\0"].concat());
    // Unnamed portal of the unnamed statement: no parameters, results in text.
    let bind = frame(b'B', b"\0\0\0\0\0\0\0\0");
    let execute = |max_rows: i32| frame(b'E', &[&b"\0"[..], &max_rows.to_be_bytes()].concat());
    // What came back: data rows counted between the other messages (type, body), and
    // the data rows' bodies (sorted: the scan's row groups may come in any order).
    let replies = |wire: &mut Wire| {
        let mut seen: Vec<(u8, String)> = Vec::new();
        let mut rows = Vec::new();
        loop {
            let (kind, body) = wire.message().expect("a reply");
            if kind == b'D' {
                rows.push(body.clone());
            }
            match (kind, seen.last_mut()) {
                (b'D', Some((b'D', n))) => *n = (n.parse::<u64>().unwrap() + 1).to_string(),
                (b'D', _) => seen.push((b'D', "1".into())),
                _ => seen.push((kind, String::from_utf8_lossy(&body).into_owned())),
            }
            if kind == b'Z' {
                rows.sort();
                return (seen, rows);
            }
        }
    };
    let sync = frame(b'S', b"");
    let whole = [&parse[..], &bind, &execute(0), &execute(0), &sync].concat();
    wire.0.write_all(&whole).expect("send");
    let (seen, whole_rows) = replies(&mut wire);
    let kinds: Vec<(u8, &str)> = seen.iter().map(|(k, b)| (*k, b.as_str())).collect();
    assert_eq!(
        &kinds[..5],
        &[
            (b'1', ""),
            (b'2', ""),
            (b'D', "150000"),
            (b'C', "SELECT 150000\0"),
            (b'C', "SELECT 0\0"),
        ],
        "{kinds:?}"
    );
    // The parts are read as they are sent: after the first, the statement is still
    // running (not yet counted), its scan held by the portal; after the last, over.
    // A named portal in a transaction, as JDBC fetches (pgwire drops the unnamed one
    // at every Sync), with the result cache off (it holds the whole portal's result).
    wire.query("SET ringscan.result_cache = off").expect("SET");
    wire.query("BEGIN").expect("BEGIN");
    let before = statements(&scrape_metrics(&addr), "ok");
    let bind = frame(b'B', b"p\0\0\0\0\0\0\0\0");
    let execute = |max_rows: i32| frame(b'E', &[&b"p\0"[..], &max_rows.to_be_bytes()].concat());
    let first = [&parse[..], &bind, &execute(70_000), &sync].concat();
    wire.0.write_all(&first).expect("send");
    let (mut seen, mut part_rows) = replies(&mut wire);
    assert_eq!(statements(&scrape_metrics(&addr), "ok"), before);
    // Without its ReadyForQuery, the reply goes on with the next parts.
    seen.pop();
    let rest = [&execute(70_000)[..], &execute(70_000), &sync].concat();
    wire.0.write_all(&rest).expect("send");
    let (more, rest_rows) = replies(&mut wire);
    seen.extend(more);
    part_rows.extend(rest_rows);
    part_rows.sort();
    assert_eq!(statements(&scrape_metrics(&addr), "ok"), before + 1.0);
    wire.query("COMMIT").expect("COMMIT");
    let kinds: Vec<(u8, &str)> = seen.iter().map(|(k, b)| (*k, b.as_str())).collect();
    assert_eq!(
        &kinds[..8],
        &[
            (b'1', ""),
            (b'2', ""),
            (b'D', "70000"),
            (b's', ""),
            (b'D', "70000"),
            (b's', ""),
            (b'D', "10000"),
            (b'C', "SELECT 10000\0"),
        ],
        "{kinds:?}"
    );
    // Every row, as pgwire sent them one by one in parts.
    assert_eq!(part_rows.len(), 150_000);
    assert!(
        part_rows == whole_rows,
        "the parts' rows differ from the whole's"
    );

    // Simple queries: one statement, and two (only the last is sent as read).
    wire.0.write_all(&query_message(sql)).expect("send");
    let (seen, simple_rows) = replies(&mut wire);
    let kinds: Vec<u8> = seen.iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds, b"TDCZ", "{seen:?}");
    assert_eq!(seen[1].1, "150000");
    assert_eq!(seen[2].1, "SELECT 150000\0");
    assert!(simple_rows == whole_rows, "the simple query's rows differ");
    let two = format!("SELECT 1 AS one; {sql}");
    wire.0.write_all(&query_message(&two)).expect("send");
    let (seen, two_rows) = replies(&mut wire);
    let kinds: Vec<u8> = seen.iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds, b"TDCTDCZ", "{seen:?}");
    let counts: Vec<&str> = seen
        .iter()
        .skip(1)
        .step_by(3)
        .take(2)
        .map(|(_, b)| b.as_str())
        .collect();
    assert_eq!(counts, ["1", "150000"], "{seen:?}");
    assert_eq!(seen[5].1, "SELECT 150000\0");
    assert_eq!(two_rows.len(), 150_001);
    let mut without_one: Vec<Vec<u8>> = two_rows
        .into_iter()
        .filter(|r| r.as_slice() != [0, 1, 0, 0, 0, 1, b'1'])
        .collect();
    without_one.sort();
    assert!(
        without_one == whole_rows,
        "the second statement's rows differ"
    );
}

#[test]
fn an_idle_connection_is_closed_after_the_idle_timeout_and_an_active_one_is_not() {
    let (dir, data) = ohlcv(20000);
    let _daemon = DaemonGuard(&data);
    let log = dir.path().join("serve.log");
    let host = Host::start(&data, &log, &["--idle-timeout", "1"]);
    let mut idle = Wire::connect(host.port);
    let mut active = Wire::connect(host.port);
    // The active one sends a statement every 0.3 s for 2 s; the idle one nothing.
    for _ in 0..7 {
        let types = active
            .query("SELECT 1")
            .expect("the active connection was closed");
        assert!(types.contains(&b'D'), "{types:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
    // As PostgreSQL's idle_session_timeout: FATAL 57P05, then the connection closes.
    let (kind, body) = idle.message().expect("a message before the close");
    assert_eq!(kind, b'E', "{}", String::from_utf8_lossy(&body));
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains("SFATAL") && text.contains("C57P05") && text.contains("idle-session"),
        "{text}"
    );
    assert_eq!(
        idle.query("SELECT 1"),
        None,
        "the idle connection is still open"
    );
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(text.contains("--idle-timeout"), "{text}");

    // A client reading a large result slowly, the host sending it for longer than the
    // timeout (30 MB: more than the sockets buffer), is not idle: its connection stays
    // open, its next statement answered. Like PostgreSQL's idle_session_timeout, the
    // clock starts once the host has sent everything: the client reads slowly until
    // the host is done (its last 300,000 rows, 9 MB, fit in the sockets' buffers),
    // then the rest at once, well within the timeout.
    drop(host);
    let host = Host::start(&data, &log, &["--idle-timeout", "2"]);
    let mut reader = Wire::connect(host.port);
    {
        use std::io::Write;
        let sql = "SELECT a.close, b.volume FROM ohlcv a, ohlcv b LIMIT 1000000";
        reader.0.write_all(&query_message(sql)).expect("send");
    }
    let started = std::time::Instant::now();
    let mut rows = 0;
    loop {
        let (kind, _) = reader.message().expect("closed while reading the result");
        match kind {
            b'D' => rows += 1,
            b'Z' => break,
            _ => {}
        }
        if kind == b'D' && rows % 25_000 == 0 && rows <= 700_000 {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    assert_eq!(rows, 1_000_000);
    assert!(started.elapsed() > Duration::from_millis(2800));
    let types = reader.query("SELECT 1").expect("closed after a slow read");
    assert!(types.contains(&b'D'), "{types:?}");
}

#[test]
fn a_client_that_goes_away_mid_statement_stops_it() {
    let (dir, data) = ohlcv(60000);
    let _daemon = DaemonGuard(&data);
    let log = dir.path().join("serve.log");
    let host = Host::start(&data, &log, &[]);
    let mut wire = Wire::connect(host.port);
    {
        use std::io::Write;
        wire.0.write_all(&query_message(SLOW)).expect("query");
    }
    std::thread::sleep(Duration::from_millis(1500));
    drop(wire);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("slow statement") {
            assert!(
                text.contains("stopping its statement why=the client closed the connection"),
                "{text}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the statement still runs 10 s after its client went: {text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn with_a_password_clients_prove_it_with_scram_and_a_wrong_one_is_28p01() {
    if !have_psql() {
        return;
    }
    let (dir, data) = ohlcv(1000);
    let _daemon = DaemonGuard(&data);
    let file = dir.path().join("password");
    std::fs::write(&file, "correct horse\n").expect("password file");
    let log = dir.path().join("serve.log");
    let host = Host::start(
        &data,
        &log,
        &["--password-file", file.to_str().expect("utf8")],
    );
    let psql = |password: &str| count_as_alice(host.port, password);
    let right = psql("correct horse");
    assert!(right.status.success(), "{right:?}");
    assert_eq!(String::from_utf8_lossy(&right.stdout), "1000\n");
    let wrong = psql("battery staple");
    assert!(!wrong.status.success());
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        err.contains("password authentication failed for user \"alice\""),
        "{err}"
    );
    // The SQLSTATE, with postgres-protocol's SCRAM client over a raw connection.
    assert_eq!(scram_login(host.port, "correct horse"), Ok(()));
    assert_eq!(scram_login(host.port, "wrong"), Err("28P01".into()));
}

/// A password is prepared with SASLprep on both sides, as PostgreSQL and libpq do:
/// `Ⅸ` (a Roman numeral) and `IX`, a no-break space and a space, are the same password;
/// another is refused.
#[test]
fn passwords_are_compared_after_saslprep() {
    if !have_psql() {
        return;
    }
    let (dir, data) = ohlcv(100);
    let _daemon = DaemonGuard(&data);
    let file = dir.path().join("password");
    std::fs::write(&file, "\u{2168}\u{00a0}horse\n").expect("password file");
    let log = dir.path().join("serve.log");
    let host = Host::start(
        &data,
        &log,
        &["--password-file", file.to_str().expect("utf8")],
    );
    let psql = |password: &str| count_as_alice(host.port, password);
    for same in ["\u{2168}\u{00a0}horse", "IX horse", "\u{2168} horse"] {
        let out = psql(same);
        assert!(out.status.success(), "{same:?}: {out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "100\n");
        assert_eq!(scram_login(host.port, same), Ok(()), "{same:?}");
    }
    assert!(!psql("IX  horse").status.success());
    assert_eq!(scram_login(host.port, "XI horse"), Err("28P01".into()));
}

/// psql logging in as alice with `password` to count ohlcv's rows.
fn count_as_alice(port: u16, password: &str) -> std::process::Output {
    Command::new("psql")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-U", "alice", "-d", "ringscan", "-X", "-At", "-w"])
        .args(["-c", "SELECT count(*) FROM ohlcv"])
        .env("PGPASSWORD", password)
        .env("PGCONNECT_TIMEOUT", "10")
        .stdin(Stdio::null())
        .output()
        .expect("psql")
}

/// Logs in with SCRAM-SHA-256 over a raw connection: `Err(SQLSTATE)` when refused.
fn scram_login(port: u16, password: &str) -> Result<(), String> {
    use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256};
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let send = |s: &mut std::net::TcpStream, kind: u8, body: &[u8]| {
        s.write_all(&frame(kind, body)).expect("send");
    };
    // A message: its type and body.
    let read = |s: &mut std::net::TcpStream| -> (u8, Vec<u8>) {
        let mut head = [0u8; 5];
        s.read_exact(&mut head).expect("read");
        let len = u32::from_be_bytes(head[1..5].try_into().expect("4")) as usize;
        let mut body = vec![0u8; len - 4];
        s.read_exact(&mut body).expect("read");
        (head[0], body)
    };
    let sqlstate = |body: &[u8]| -> String {
        body.split(|b| *b == 0)
            .find_map(|f| f.strip_prefix(b"C"))
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .unwrap_or_default()
    };
    let body = b"user\0alice\0database\0ringscan\0\0";
    let mut startup = ((8 + body.len()) as u32).to_be_bytes().to_vec();
    startup.extend(196_608u32.to_be_bytes());
    startup.extend(body);
    s.write_all(&startup).expect("startup");
    let (kind, body) = read(&mut s);
    assert_eq!(
        (kind, &body[..4]),
        (b'R', &10u32.to_be_bytes()[..]),
        "AuthenticationSASL"
    );
    let mut scram = ScramSha256::new(password.as_bytes(), ChannelBinding::unsupported());
    let mut initial = b"SCRAM-SHA-256\0".to_vec();
    initial.extend((scram.message().len() as u32).to_be_bytes());
    initial.extend(scram.message());
    send(&mut s, b'p', &initial);
    let (kind, body) = read(&mut s);
    assert_eq!(
        (kind, &body[..4]),
        (b'R', &11u32.to_be_bytes()[..]),
        "SASLContinue"
    );
    scram.update(&body[4..]).expect("server-first");
    send(&mut s, b'p', scram.message());
    let (kind, body) = read(&mut s);
    if kind == b'E' {
        return Err(sqlstate(&body));
    }
    assert_eq!(
        (kind, &body[..4]),
        (b'R', &12u32.to_be_bytes()[..]),
        "SASLFinal"
    );
    // The server proves it knows the password too.
    scram.finish(&body[4..]).expect("the server's signature");
    let (kind, body) = read(&mut s);
    assert_eq!(
        (kind, &body[..4]),
        (b'R', &0u32.to_be_bytes()[..]),
        "AuthenticationOk"
    );
    Ok(())
}

#[test]
fn metrics_count_connections_statements_and_what_scans_read() {
    if !have_psql() {
        return;
    }
    let (dir, data) = ohlcv(20000);
    let _daemon = DaemonGuard(&data);
    let log = dir.path().join("serve.log");
    let host = Host::start(&data, &log, &["--metrics", "127.0.0.1:0"]);
    let (ok, _, err) =
        host.psql("SELECT symbol, max(close) FROM ohlcv WHERE volume > 1000 GROUP BY symbol");
    assert!(ok, "{err}");
    let (ok, _, _) = host.psql("SELECT nope FROM ohlcv");
    assert!(!ok);
    let addr = metrics_addr(&log);
    let scrape = || scrape_metrics(&addr);
    let value_in = |body: &str, name: &str| -> f64 {
        body.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in:\n{body}"))
    };
    let body = scrape();
    let value = |name: &str| value_in(&body, name);
    assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
    assert_eq!(value("ringscan_connections_total"), 2.0);
    assert_eq!(value("ringscan_statements_total{outcome=\"ok\"}"), 1.0);
    assert_eq!(value("ringscan_statements_total{outcome=\"error\"}"), 1.0);
    assert!(value("ringscan_scan_bytes_read_total") > 0.0);
    assert_eq!(value("ringscan_scan_rows_decoded_total"), 20_000.0);
    assert_eq!(value("ringscan_statement_duration_seconds_count"), 2.0);
    assert_eq!(value("ringscan_scan_selectivity_count"), 1.0);
    // The daemon's own counters of the scan: its thread's CPU time (a software event,
    // counted on any Linux) and its metadata cache, which read the file's footer.
    assert!(value("ringscan_daemon_scan_events_total{event=\"task-clock\"}") > 0.0);
    assert!(value("ringscan_daemon_metadata_cache{figure=\"bytes\"}") > 0.0);
    // psql has exited; the host sees its connection close soon after.
    let deadline = Instant::now() + Duration::from_secs(10);
    while value_in(&scrape(), "ringscan_connections_open") != 0.0 {
        assert!(
            Instant::now() < deadline,
            "a closed connection is still open"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // OpenMetrics' terminator: a scraper knows it read the whole exposition.
    assert!(body.trim_end().ends_with("# EOF"), "{body}");
    // A session's second run of a statement is answered from its result cache,
    // unless ringscan.result_cache is off.
    assert_eq!(value("ringscan_result_cache_hits_total"), 0.0);
    let grouped = "SELECT symbol, max(close) FROM ohlcv WHERE volume > 1000 GROUP BY symbol";
    let (ok, _, err) = host.psql(&format!(
        "SET ringscan.result_cache = off; {grouped}; {grouped}"
    ));
    assert!(ok, "{err}");
    let hits = |body: &str| value_in(body, "ringscan_result_cache_hits_total");
    assert_eq!(hits(&scrape()), 0.0);
    let (ok, _, err) = host.psql(&format!("{grouped}; {grouped}"));
    assert!(ok, "{err}");
    assert_eq!(hits(&scrape()), 1.0);
    let (ok, _, _) = host.psql("SET ringscan.result_cache = maybe");
    assert!(!ok, "a value that is neither on nor off is refused");
    // A result sent as it is read (past 64 KiB): its scan is counted whole when it
    // ends, and the result cache keeps it then, so that the second run scans nothing.
    let decoded = |body: &str| value_in(body, "ringscan_scan_rows_decoded_total");
    let before = scrape();
    let every = "SELECT * FROM ohlcv WHERE volume >= 0";
    let (ok, out, err) = host.psql_commands(&[every, every]);
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 40_000, "both runs' rows");
    let after = scrape();
    assert_eq!(decoded(&after) - decoded(&before), 20_000.0, "{after}");
    assert_eq!(hits(&after) - hits(&before), 1.0, "{after}");
    // Each run's duration observed once: the streamed one when its last row was read.
    let timed = |body: &str| value_in(body, "ringscan_statement_duration_seconds_count");
    assert_eq!(timed(&after) - timed(&before), 2.0, "{after}");
    // A result sent as it is read whose client leaves before its end (far more than
    // the sockets hold): counted canceled when it ends, not ok when it started.
    let before = scrape();
    {
        use std::io::Write;
        let mut wire = Wire::connect(host.port);
        let big = "SELECT a.*, b.symbol AS other FROM ohlcv a, ohlcv b LIMIT 300000";
        wire.0.write_all(&query_message(big)).expect("send");
        std::thread::sleep(Duration::from_millis(300));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let after = loop {
        let body = scrape();
        if statements(&body, "canceled") > statements(&before, "canceled") {
            break body;
        }
        assert!(Instant::now() < deadline, "never counted canceled:\n{body}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        statements(&after, "canceled") - statements(&before, "canceled"),
        1.0
    );
    assert_eq!(
        statements(&after, "ok"),
        statements(&before, "ok"),
        "{after}"
    );
}

#[test]
fn malformed_protocol_messages_close_their_connection_and_the_host_serves_on() {
    use std::io::Write;
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    let _daemon = DaemonGuard(&data);
    let log = dir.path().join("serve.log");
    let host = Host::start(&data, &log, &[]);
    let cases: Vec<Vec<u8>> = vec![
        // Bind whose parameter claims 100,000 bytes of the 9 that follow.
        [
            frame(b'P', b"\0SELECT $1\0\0\0"),
            frame(b'B', b"\0\0\0\0\0\x01\0\x01\x86\xa0x\0\0"),
            frame(b'S', b""),
        ]
        .concat(),
        // Parse cut short inside its parameter-type count.
        frame(b'P', b"\0SELECT 1\0\x01"),
        // Describe and Close without their target.
        frame(b'D', b""),
        frame(b'C', b""),
        // Execute without its row limit.
        frame(b'E', b"\0"),
    ];
    for case in &cases {
        let mut wire = Wire::connect(host.port);
        wire.0.write_all(case).expect("send");
        // The host answers with an error or closes the connection; either way it
        // does not hang.
        let _ = wire.until_ready();
    }
    let mut wire = Wire::connect(host.port);
    let types = wire.query("SELECT 41 + 1").expect("the host serves on");
    assert!(types.contains(&b'D'), "{types:?}");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!text.contains("internal error"), "{text}");
    // pgwire 0.42's decoder panics on the first; the host says so in one line.
    assert!(
        text.contains("why=\"a malformed protocol message: "),
        "{text}"
    );
}

#[test]
fn psycopg_answers_equal_duckdb_in_text_and_binary_and_queries_stop_when_asked() {
    let Some(python) = common::python::python_or_skip("serve_psycopg") else {
        return;
    };
    let (dir, data) = ohlcv(20000);
    let _daemon = DaemonGuard(&data);
    // Results past 64 KiB (the default, set here in case it changes) are read as they
    // are sent: the larger answers, a timeout and a cancel request take that path.
    let host = Host::start_with_env(
        "127.0.0.1:0",
        &data,
        &dir.path().join("serve.log"),
        &["--max-connections", "4"],
        &[("RINGSCAN_HOLD_BYTES", "65536")],
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serve/psycopg_check.py");
    let glob = format!("{}/ohlcv/**/*.parquet", data.display());
    let out = Command::new(python)
        .arg(&script)
        .args([host.port.to_string().as_str(), glob.as_str(), "4"])
        .stdin(Stdio::null())
        .output()
        .expect("run the psycopg check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap_or_default();
    assert!(
        out.status.success(),
        "psycopg check failed:\n{stdout}\n{stderr}\nhost log:\n{log}"
    );
    eprintln!("{stdout}");
    assert!(stdout.contains("ok connection 5 refused"), "{stdout}");
}

#[test]
fn psycopg_writes_tables_and_duckdb_reads_what_was_flushed() {
    let Some(python) = common::python::python_or_skip("serve_ingest") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("data dir");
    let _daemon = DaemonGuard(&data);
    let host = Host::start(&data, &dir.path().join("serve.log"), &[]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serve/ingest_check.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(host.port.to_string())
        .arg(&data)
        .stdin(Stdio::null())
        .output()
        .expect("run the ingest check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let log = std::fs::read_to_string(dir.path().join("serve.log")).unwrap_or_default();
    assert!(
        out.status.success(),
        "ingest check failed:\n{stdout}\n{stderr}\nhost log:\n{log}"
    );
    eprintln!("{stdout}");
    assert!(stdout.contains("ok drop table"), "{stdout}");
}

/// A host and its IO daemon killed with SIGKILL, with a client connected: a new host
/// listens on the same port at once (the old one's sockets linger in the kernel), starts
/// a new daemon (the dead one's pid and socket files are stale), and every row the old
/// one acknowledged is there.
#[test]
fn a_host_killed_with_sigkill_is_back_on_its_port_with_every_acknowledged_row() {
    if !have_psql() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("data dir");
    let _daemon = DaemonGuard(&data);
    let mut host = Host::start(&data, &dir.path().join("serve.log"), &[]);
    let port = host.port;
    let (ok, _, err) =
        host.psql("CREATE TABLE ledger (id BIGINT NOT NULL, v TEXT, PRIMARY KEY (id))");
    assert!(ok, "create: {err}");
    for chunk in 0..5 {
        let values: Vec<String> = (chunk * 20..chunk * 20 + 20)
            .map(|i| format!("({i}, 'row {i}')"))
            .collect();
        let (ok, out, err) = host.psql(&format!("INSERT INTO ledger VALUES {}", values.join(", ")));
        assert!(ok && out.contains("INSERT 0 20"), "insert: {out} {err}");
    }
    // A client stays connected through the kill, so the port has a socket left behind.
    use std::io::Write;
    let mut client = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    client
        .write_all(&frame(0, b"\x00\x03\x00\x00user\x00ringscan\x00\x00")[1..])
        .expect("startup");
    let daemon_pid = daemon_pid(&data);
    host.child.kill().expect("SIGKILL the host");
    host.child.wait().expect("reap the host");
    let killed = Command::new("kill")
        .args(["-KILL", &daemon_pid.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success(), "SIGKILL the daemon {daemon_pid}");
    let started = Instant::now();
    let host = Host::start_on(
        &format!("127.0.0.1:{port}"),
        &data,
        &dir.path().join("serve-2.log"),
        &[],
    );
    assert_eq!(host.port, port);
    let (ok, out, err) = host.psql("SELECT count(*), sum(id), min(v), max(v) FROM ledger");
    let back = started.elapsed();
    assert!(ok, "query after the restart: {err}");
    assert_eq!(out.trim(), "100,4950,row 0,row 99", "{out}");
    assert!(
        back < Duration::from_secs(10),
        "listening and answering took {back:?} after the kill"
    );
    let (ok, out, err) = host.psql("INSERT INTO ledger VALUES (100, 'after')");
    assert!(
        ok && out.contains("INSERT 0 1"),
        "insert after the restart: {out} {err}"
    );
    let (ok, _, err) = host.psql_commands(&[
        "\\set VERBOSITY verbose",
        "INSERT INTO ledger VALUES (7, 'again')",
    ]);
    assert!(
        !ok && err.contains("23505"),
        "a duplicate key after the restart: {err}"
    );
    drop(client);
}

#[test]
fn a_non_loopback_address_without_a_password_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    let out = ringscan(&["serve", "--listen", "0.0.0.0:0"], &data);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refusing to listen on 0.0.0.0:0") && err.contains("loopback"),
        "{err}"
    );
}

/// `--tls-cert` / `--tls-key`: psql's `sslmode=require` gets TLS (and the same rows),
/// a plain connection still works, a host without them refuses TLS, and a key file
/// that holds no key stops the start with a message naming it.
#[test]
fn tls_is_offered_with_a_certificate_and_key() {
    if !have_psql() {
        return;
    }
    let (dir, data) = ohlcv(500);
    let _daemon = DaemonGuard(&data);
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdin(Stdio::null())
        .output()
        .expect("openssl (Debian's openssl package) makes the test certificate");
    assert!(made.status.success(), "{made:?}");
    let (cert_arg, key_arg) = (cert.to_str().expect("utf8"), key.to_str().expect("utf8"));
    let host = Host::start(
        &data,
        &dir.path().join("serve.log"),
        &["--tls-cert", cert_arg, "--tls-key", key_arg],
    );
    let psql = |port: u16, sslmode: &str, commands: &[&str]| {
        Command::new("psql")
            .arg(format!(
                "host=127.0.0.1 port={port} user=ringscan dbname=ringscan sslmode={sslmode} \
                 connect_timeout=10"
            ))
            .args(["-X", "-At"])
            .args(commands.iter().flat_map(|c| ["-c", c]))
            .stdin(Stdio::null())
            .output()
            .expect("psql")
    };
    let secure = psql(
        host.port,
        "require",
        &["SELECT count(*) FROM ohlcv", "\\conninfo"],
    );
    let text = String::from_utf8_lossy(&secure.stdout);
    assert!(secure.status.success(), "{secure:?}");
    assert!(text.starts_with("500\n"), "{text}");
    assert!(text.contains("SSL connection (protocol: TLSv1."), "{text}");
    let plain = psql(host.port, "disable", &["SELECT count(*) FROM ohlcv"]);
    assert_eq!(String::from_utf8_lossy(&plain.stdout), "500\n", "{plain:?}");
    // A result of megabytes (sent past pgwire, in packs): the same rows over TLS.
    let many = "SELECT a.*, b.close AS other FROM ohlcv a, ohlcv b \
                ORDER BY a.ts, a.symbol, b.ts, b.symbol LIMIT 20000";
    let (secure, plain) = (
        psql(host.port, "require", &[many]),
        psql(host.port, "disable", &[many]),
    );
    assert!(
        secure.status.success() && plain.status.success(),
        "{secure:?}"
    );
    assert_eq!(secure.stdout.iter().filter(|&&b| b == b'\n').count(), 20000);
    let lines = |out: &[u8]| {
        let mut l: Vec<Vec<u8>> = out.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
        l.sort();
        l
    };
    assert!(
        lines(&secure.stdout) == lines(&plain.stdout),
        "the rows over TLS differ"
    );

    let without = Host::start(&data, &dir.path().join("plain.log"), &[]);
    let refused = psql(without.port, "require", &["SELECT 1"]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("server does not support SSL"), "{err}");

    let out = ringscan(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            cert_arg,
            "--tls-key",
            cert_arg,
        ],
        &data,
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(cert_arg) && err.contains("private key"),
        "{err}"
    );
}

/// Row `i` of table `big` as a CSV line (which is also how `psql -At -F ,` prints it).
fn big_row(i: i64) -> String {
    format!(
        "{i},sym{},{i}.5,{},2024-01-02 09:30:{:02}\n",
        i % 7,
        i % 1000,
        i % 60
    )
}

/// CSV rows `ids` of table `big`, and their (count, sum of id, sum of qty).
fn big_rows(ids: std::ops::Range<i64>) -> (String, (i64, i64, i64)) {
    let text = ids.clone().map(big_row).collect();
    let n = ids.end - ids.start;
    (text, (n, ids.clone().sum(), ids.map(|i| i % 1000).sum()))
}

/// A COPY larger than the host holds (here 64 KiB, by `RINGSCAN_STAGE_BYTES`) reaches
/// the daemon in parts and commits whole at CopyDone, read back equal to what was sent.
/// A bad line or a duplicate key in a late part, or a client killed mid-COPY, leaves
/// nothing: no row, no file.
#[test]
fn a_copy_staged_in_parts_commits_whole_or_leaves_nothing() {
    if !have_psql() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("data dir");
    let _daemon = DaemonGuard(&data);
    let host = Host::start_with_env(
        "127.0.0.1:0",
        &data,
        &dir.path().join("serve.log"),
        &[],
        &[("RINGSCAN_STAGE_BYTES", "65536")],
    );
    let (ok, _, err) = host.psql(
        "CREATE TABLE big (id BIGINT PRIMARY KEY, sym TEXT NOT NULL, px DOUBLE PRECISION, \
         qty INTEGER, ts TIMESTAMP)",
    );
    assert!(ok, "{err}");
    let table = data.join("big");
    let files = |suffix: &str| {
        std::fs::read_dir(&table)
            .expect("table dir")
            .filter(|e| {
                e.as_ref().is_ok_and(|e| {
                    common::cli::is_file_of(&e.file_name().to_string_lossy(), suffix)
                })
            })
            .count()
    };
    let copy = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write rows");
        host.psql(&format!("\\copy big FROM '{}' csv", path.display()))
    };
    let totals = || {
        let (ok, out, err) = host.psql("SELECT count(*), sum(id), sum(qty) FROM big");
        assert!(ok, "{err}");
        out.trim().to_owned()
    };
    let (rows, (n, sum_id, sum_qty)) = big_rows(0..200_000);
    let (ok, out, err) = copy("rows.csv", &rows);
    assert!(ok && out.contains("COPY 200000"), "{out}{err}");
    assert_eq!(totals(), format!("{n},{sum_id},{sum_qty}"));
    assert!(files(".parquet") > 1, "the COPY was not staged in parts");
    let (ok, out, err) = host
        .psql("SELECT id, sym, px, qty, ts FROM big WHERE id IN (0, 123457, 199999) ORDER BY id");
    assert!(ok, "{err}");
    let want: String = [0, 123_457, 199_999].into_iter().map(big_row).collect();
    assert_eq!(out, want);
    let before = totals();
    // A bad last line, and a duplicate key in the last part: nothing of either.
    let (mut bad, _) = big_rows(300_000..450_000);
    bad.push_str("450000,x,notafloat,1,2024-01-02 09:30:00\n");
    let (ok, _, err) = copy("bad.csv", &bad);
    assert!(
        !ok && err.contains("line 150001") && err.contains("\"px\""),
        "{err}"
    );
    let (mut dup, _) = big_rows(500_000..650_000);
    dup.push_str("5,again,1.5,1,2024-01-02 09:30:00\n");
    let (ok, _, err) = copy("dup.csv", &dup);
    assert!(!ok && err.contains("Key (id)=(5) already exists"), "{err}");
    // A part refused while the host parses the next: the refusal ends the COPY.
    let (fresh, _) = big_rows(660_000..860_000);
    let early = format!("{}{fresh}", big_row(5));
    let (ok, _, err) = copy("early.csv", &early);
    assert!(!ok && err.contains("Key (id)=(5) already exists"), "{err}");
    assert_eq!(totals(), before);
    assert_eq!(files(".tmp"), 0, "a refused COPY left staged files");
    // A COPY fed through psql's stdin, left open: `rows` sent and at least one part
    // staged when this returns.
    let copy_open = |rows: std::ops::Range<i64>| {
        use std::io::Write;
        let mut psql = Command::new("psql")
            .args(["-h", "127.0.0.1", "-p", &host.port.to_string()])
            .args(["-U", "ringscan", "-d", "ringscan", "-X", "-At"])
            .args(["-c", "\\copy big FROM pstdin csv"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("psql");
        let mut stdin = psql.stdin.take().expect("stdin");
        stdin
            .write_all(big_rows(rows).0.as_bytes())
            .expect("rows to psql");
        let deadline = Instant::now() + Duration::from_secs(20);
        while files(".tmp") == 0 {
            assert!(Instant::now() < deadline, "no part was staged");
            std::thread::sleep(Duration::from_millis(20));
        }
        (psql, stdin)
    };
    // A client killed with parts staged: they were never visible, and they go.
    let (mut psql, stdin) = copy_open(1_000_000..1_150_000);
    assert_eq!(totals(), before, "staged rows were seen before CopyDone");
    psql.kill().expect("kill psql");
    psql.wait().expect("reap psql");
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(20);
    while files(".tmp") > 0 {
        assert!(Instant::now() < deadline, "a dead client's parts stayed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(totals(), before);
    // The daemon killed with SIGKILL while parts are staged: the COPY fails, and the
    // next daemon (started by the next statement) removes what the dead one staged.
    let (psql, mut stdin) = copy_open(1_300_000..1_450_000);
    let daemon_pid = daemon_pid(&data);
    let killed = Command::new("kill")
        .args(["-KILL", &daemon_pid.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success(), "SIGKILL the daemon {daemon_pid}");
    // The rest of the rows, then the end of the COPY.
    {
        use std::io::Write;
        let _ = stdin.write_all(big_rows(1_450_000..1_600_000).0.as_bytes());
        drop(stdin);
    }
    let out = psql.wait_with_output().expect("psql");
    assert!(
        !out.status.success(),
        "a COPY whose daemon died was acknowledged"
    );
    assert_eq!(
        totals(),
        before,
        "rows of the killed daemon's parts appeared"
    );
    assert_eq!(files(".tmp"), 0, "recovery left the dead daemon's parts");
    // The next COPY on a fresh connection goes through.
    let (rows, _) = big_rows(1_200_000..1_200_003);
    let (ok, out, err) = copy("three.csv", &rows);
    assert!(ok && out.contains("COPY 3"), "{out}{err}");
}

/// The pid of the IO daemon of `data`, as `ringscan daemon status` gives it.
fn daemon_pid(data: &Path) -> i32 {
    let status = ringscan(&["daemon", "status"], data);
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    status
        .lines()
        .find_map(|l| l.strip_prefix("pid"))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no daemon pid in: {status}"))
}
