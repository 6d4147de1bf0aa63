//! Scans through a `ringscan-io` process return exactly what the in-process scan
//! returns, and no client misbehaviour or data change takes the daemon down.

mod daemon_support;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use daemon_support::{reference, rows, scan_via, write_file, Daemon};
use ringscan_ipc::client::ClientError;
use ringscan_ipc::msg::{
    decode_schema, CmpOp, Literal, Operand, Predicate, ScanRequest, ScanSource, MAX_FRAME_BYTES,
    MAX_PREDICATE_DEPTH,
};

/// Table `t`: three files of 2500 rows; table `p`: hive-partitioned by `region`.
fn dataset(data: &Path) {
    for (i, name) in ["a.parquet", "b.parquet", "sub/c.parquet"]
        .iter()
        .enumerate()
    {
        write_file(&data.join("t").join(name), i as i64 * 2500, 2500);
    }
    write_file(&data.join("p/region=east/part-0.parquet"), 0, 1200);
    write_file(&data.join("p/region=west/part-0.parquet"), 1200, 1300);
    // Hidden entries and other files are not part of the table.
    std::fs::write(data.join("t/.part-0.tmp"), b"junk").unwrap();
    std::fs::write(data.join("t/readme.txt"), b"junk").unwrap();
}

fn table(name: &str) -> ScanSource {
    ScanSource::Table { name: name.into() }
}

fn requests() -> Vec<ScanRequest> {
    let mut out = Vec::new();
    let base = |source: ScanSource| {
        let mut r = ScanRequest::new(source);
        r.batch_size = 700;
        r.ring_capacity_bytes = 1 << 20;
        r
    };
    out.push(base(table("t")));
    let mut r = base(table("t"));
    r.projection = Some(vec!["s".into(), "id".into()]);
    r.predicate = Some(Predicate::compare("id", CmpOp::GtEq, Literal::Int(4000)));
    out.push(r);
    let mut r = base(table("t"));
    r.predicate = Some(Predicate::Or(vec![
        Predicate::IsNull {
            expr: Operand::Column("v".into()),
            negated: false,
        },
        Predicate::InList {
            expr: Operand::Column("s".into()),
            list: vec![Literal::Utf8("s1".into())],
            negated: false,
        },
    ]));
    r.limit = Some(333);
    out.push(r);
    let mut r = base(table("t"));
    r.projection = Some(vec![]);
    out.push(r);
    let mut r = base(table("t"));
    r.projection = Some(vec![]);
    r.predicate = Some(Predicate::compare("id", CmpOp::Lt, Literal::Int(10)));
    out.push(r);
    out.push(base(table("p")));
    let mut r = base(table("p"));
    r.projection = Some(vec!["region".into(), "v".into()]);
    r.predicate = Some(Predicate::compare(
        "region",
        CmpOp::Eq,
        Literal::Utf8("west".into()),
    ));
    out.push(r);
    let mut r = base(ScanSource::Files {
        paths: vec!["t/*.parquet".into(), "t/**/c.parquet".into()],
    });
    r.projection = Some(vec!["id".into()]);
    out.push(r);
    let mut r = base(ScanSource::Files {
        paths: vec!["p/region=*/*.parquet".into()],
    });
    r.predicate = Some(Predicate::compare(
        "region",
        CmpOp::NotEq,
        Literal::Utf8("east".into()),
    ));
    out.push(r);
    let mut r = base(table("t"));
    r.limit = Some(0);
    out.push(r);
    out
}

#[test]
fn daemon_scans_equal_in_process_scans() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    dataset(&data);
    let daemon = Daemon::start(&data, &[]);
    let client = daemon.client();
    for request in requests() {
        let expected = reference(&data, &request);
        let (got, summary) =
            scan_via(&client, &request).unwrap_or_else(|e| panic!("{request:?}: {e}"));
        assert_eq!(rows(&got), rows(&expected), "{request:?}");
        let n: usize = expected.iter().map(|b| b.num_rows()).sum();
        assert_eq!(
            got.iter().map(|b| b.num_rows()).sum::<usize>(),
            n,
            "{request:?}"
        );
        assert_eq!(summary.rows_emitted, n as u64, "{request:?}");
        if request.projection == Some(vec![]) {
            assert!(n > 0 || request.predicate.is_some());
            assert!(got.iter().all(|b| b.num_columns() == 0), "{request:?}");
        }
    }
}

/// Scans that ask for an inline answer get their rows on the socket when they are few
/// and through a ring when they are many, in any order on one client's kept connection
/// (its ring rearmed for a scan answered inline, then used by the next), each equal to
/// the in-process scan.
#[test]
fn inline_answers_and_rings_alternate_on_one_connection() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    dataset(&data);
    big_table(&data);
    let daemon = Daemon::start(&data, &[]);
    let client = daemon.client();
    let mut small = ScanRequest::new(table("t"));
    small.predicate = Some(Predicate::compare("id", CmpOp::Eq, Literal::Int(4321)));
    small.inline_bytes = 64 << 10;
    small.ring_capacity_bytes = 1 << 20;
    let mut none = small.clone();
    none.predicate = Some(Predicate::compare("id", CmpOp::Lt, Literal::Int(-5)));
    let mut big = small.clone();
    big.predicate = None;
    big.batch_size = 700;
    big.inline_bytes = 4 << 10;
    let mut plain = big.clone();
    plain.inline_bytes = 0;
    // Every row group of `big` read (`s` is "s0".."s4": no statistics rule "s25" out)
    // and none matching: the scan may pass the inline window before it ends, and then
    // opens a ring with nothing held.
    let mut late = ScanRequest::new(table("big"));
    late.predicate = Some(Predicate::compare(
        "s",
        CmpOp::Eq,
        Literal::Utf8("s25".into()),
    ));
    late.inline_bytes = 64 << 10;
    late.ring_capacity_bytes = 1 << 20;
    let order = [
        (&small, Some(true)),
        (&big, Some(false)),
        (&small, Some(true)),
        (&none, Some(true)),
        (&plain, Some(false)),
        (&big, Some(false)),
        (&small, Some(true)),
        (&late, None),
        (&small, Some(true)),
        (&plain, Some(false)),
    ];
    // Warm footers: a cold first scan may outlast the inline window.
    good_scan_works(&daemon);
    for (i, (request, inline)) in order.into_iter().enumerate() {
        let expected = reference(&data, request);
        let n: usize = expected.iter().map(|b| b.num_rows()).sum();
        // Inline is bound in time as well as in bytes: a small scan may go through a
        // ring on a stalled machine, so it has three tries to be answered inline.
        let mut answers = Vec::new();
        for _ in 0..3 {
            let mut stream = client
                .scan(request)
                .unwrap_or_else(|e| panic!("scan {i}: {e}"));
            answers.push(stream.is_inline());
            let mut got = Vec::new();
            while let Some(batch) = stream.next_batch().unwrap() {
                got.push(batch);
            }
            let summary = stream.finish().unwrap();
            assert_eq!(rows(&got), rows(&expected), "scan {i}: {request:?}");
            assert_eq!(summary.rows_emitted, n as u64, "scan {i}");
            if inline != Some(true) || answers.contains(&true) {
                break;
            }
        }
        match inline {
            Some(true) => assert!(answers.contains(&true), "scan {i}: {request:?}"),
            Some(false) => assert_eq!(answers, [false], "scan {i}: {request:?}"),
            None => {}
        }
    }
    good_scan_works(&daemon);
}

#[test]
fn partitioned_scan_has_the_partition_column_in_path_order() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    write_file(&data.join("q/year=2024/month=01/x.parquet"), 0, 10);
    let daemon = Daemon::start(&data, &[]);
    let (batches, _) = scan_via(&daemon.client(), &ScanRequest::new(table("q"))).unwrap();
    let schema = batches[0].schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["id", "v", "s", "year", "month"]);
    // Typed as DuckDB types them: `2024` an integer, `01` (a leading zero) text.
    assert_eq!(schema.field(3).data_type(), &arrow_schema::DataType::Int64);
    assert_eq!(schema.field(4).data_type(), &arrow_schema::DataType::Utf8);
    assert_eq!(rows(&batches)[3], "3|1.5|s3|2024|01");
}

#[test]
fn describe_returns_schema_and_versions() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    dataset(&data);
    let daemon = Daemon::start(&data, &[]);
    let mut client = daemon.client();
    let info = client.describe(&table("p")).unwrap();
    let schema = decode_schema(&info.schema_ipc).unwrap();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["id", "v", "s", "region"]);
    let files: Vec<String> = info
        .files
        .iter()
        .map(|f| f.path.display().to_string())
        .collect();
    assert_eq!(
        files,
        [
            "p/region=east/part-0.parquet",
            "p/region=west/part-0.parquet"
        ]
    );
    let dirs: Vec<String> = info
        .dirs
        .iter()
        .map(|f| f.path.display().to_string())
        .collect();
    assert_eq!(dirs, ["p", "p/region=east", "p/region=west"]);
    let meta = std::fs::metadata(data.join(&info.files[0].path)).unwrap();
    assert_eq!(info.files[0].size_bytes, meta.len());
    assert!(info.files[0].modified_ns > 0);
    // A new file changes the version of its directory.
    std::thread::sleep(Duration::from_millis(20));
    write_file(&data.join("p/region=east/part-1.parquet"), 9000, 10);
    let again = client.describe(&table("p")).unwrap();
    assert_eq!(again.files.len(), 3);
    assert_ne!(again.dirs[1], info.dirs[1]);
    // Missing table: named, with the nearest existing one.
    let err = client.describe(&table("pp")).unwrap_err().to_string();
    assert!(
        err.contains("\"pp\"") && err.contains("did you mean \"p\""),
        "{err}"
    );
    // Escapes are refused.
    let mut client = daemon.client();
    let err = client
        .describe(&ScanSource::Files {
            paths: vec!["../x.parquet".into()],
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("not allowed"), "{err}");
}

#[test]
fn concurrent_scans_all_complete() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    dataset(&data);
    let daemon = Daemon::start(&data, &[]);
    let client = daemon.client();
    let requests = requests();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..6)
            .map(|i| {
                let request = requests[i % requests.len()].clone();
                let client = &client;
                let data = &data;
                s.spawn(move || {
                    let (got, _) = scan_via(client, &request).unwrap();
                    assert_eq!(rows(&got), rows(&reference(data, &request)));
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
    let status = daemon.client().status().unwrap();
    assert_eq!(status.scans_served, 6);
    assert_eq!(status.scans_active, 0);
}

/// A scan with a small ring over many files: the daemon blocks on the full ring after
/// the first batches, so files can be changed under it.
fn slow_scan_request() -> ScanRequest {
    let mut r = ScanRequest::new(table("big"));
    r.batch_size = 500;
    r.ring_capacity_bytes = 64 << 10;
    r
}

fn big_table(data: &Path) {
    for i in 0..6 {
        write_file(&data.join(format!("big/f{i}.parquet")), i * 5000, 5000);
    }
}

fn good_scan_works(daemon: &Daemon) {
    let (got, _) = scan_via(&daemon.client(), &ScanRequest::new(table("t"))).unwrap();
    assert_eq!(got.iter().map(|b| b.num_rows()).sum::<usize>(), 7500);
}

#[test]
fn client_gone_mid_scan_then_the_next_scan_works() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    dataset(&data);
    big_table(&data);
    let daemon = Daemon::start(&data, &[]);
    for cancel in [false, true] {
        let mut stream = daemon.client().scan(&slow_scan_request()).unwrap();
        assert!(stream.next_batch().unwrap().is_some());
        if cancel {
            stream.cancel();
            let summary = stream.finish().unwrap();
            assert!(summary.rows_emitted < 30_000, "{summary:?}");
        } else {
            drop(stream); // consumer and socket gone, as if the process died
        }
        good_scan_works(&daemon);
    }
    // The abandoned scans release their slots once their control threads notice (each
    // polls its socket every 100 ms): within a bounded wait, none is left active.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    let mut active = daemon.client().status().unwrap().scans_active;
    while active != 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
        active = daemon.client().status().unwrap().scans_active;
    }
    assert_eq!(active, 0);
}

#[test]
fn files_truncated_or_deleted_during_a_scan_are_clear_errors() {
    truncated_or_deleted_during_a_scan(&[]);
}

#[test]
fn mapped_files_truncated_or_deleted_during_a_scan_are_clear_errors() {
    truncated_or_deleted_during_a_scan(&["--io", "mmap"]);
}

/// A file shrinking under the daemon's memory map mid-scan: SIGBUS must not kill the
/// daemon, the scan ends in an error naming the file and the cause, and the daemon
/// serves the next scan.
#[test]
fn mapped_file_truncated_mid_read_is_an_error_and_the_daemon_lives() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    dataset(&data);
    let victim = data.join("long/f.parquet");
    let mut daemon = Daemon::start(&data, &["--io", "mmap"]);
    for _ in 0..2 {
        // 30 row groups of 1000 rows: the small ring stalls the daemon after a few, so
        // most of the file is read after the truncation.
        write_file(&victim, 0, 30_000);
        let mut request = ScanRequest::new(table("long"));
        request.batch_size = 500;
        request.ring_capacity_bytes = 64 << 10;
        let mut stream = daemon.client().scan(&request).unwrap();
        // Batches point into the ring until dropped: hold none, or the ring stays full.
        let mut rows = stream
            .next_batch()
            .unwrap()
            .expect("a first batch")
            .num_rows();
        // A batch of more than an eighth of the ring comes in parts.
        assert!((1..=500).contains(&rows), "{rows}");
        std::fs::OpenOptions::new()
            .write(true)
            .open(&victim)
            .and_then(|f| f.set_len(4096))
            .unwrap();
        let err = loop {
            match stream.next_batch() {
                Ok(Some(b)) => rows += b.num_rows(),
                Ok(None) => panic!("the scan ended without noticing the truncation"),
                Err(e) => break e,
            }
        };
        assert!(rows < 30_000, "{rows}");
        let text = err.to_string();
        assert!(text.contains("f.parquet"), "{text}");
        assert!(
            text.contains("was truncated while it was being read"),
            "{text}"
        );
        assert!(matches!(err, ClientError::Daemon { .. }), "{err:?}");
        drop(stream);
        assert!(
            daemon.child.try_wait().unwrap().is_none(),
            "the daemon died"
        );
        good_scan_works(&daemon);
    }
    assert!(daemon.wait_exit(Duration::from_millis(1)).is_none());
}

fn truncated_or_deleted_during_a_scan(daemon_args: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    dataset(&data);
    big_table(&data);
    let daemon = Daemon::start(&data, daemon_args);
    for delete in [false, true] {
        let mut stream = daemon.client().scan(&slow_scan_request()).unwrap();
        assert!(stream.next_batch().unwrap().is_some());
        let victim = data.join("big/f4.parquet");
        if delete {
            std::fs::remove_file(&victim).unwrap();
        } else {
            let bytes = std::fs::read(&victim).unwrap();
            std::fs::write(&victim, &bytes[..bytes.len() / 2]).unwrap();
        }
        let err = loop {
            match stream.next_batch() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("the scan ended without noticing the change"),
                Err(e) => break e,
            }
        };
        let text = err.to_string();
        assert!(text.contains("f4.parquet"), "{text}");
        assert!(matches!(err, ClientError::Daemon { .. }), "{err:?}");
        let finish = stream.finish().unwrap_err().to_string();
        assert!(finish.contains("f4.parquet"), "{finish}");
        good_scan_works(&daemon);
        write_file(&victim, 20_000, 5000);
    }
}

/// Sends raw bytes, expects an Error frame and then the connection closed.
fn expect_error_then_close(daemon: &Daemon, bytes: &[u8]) -> String {
    let mut s = UnixStream::connect(daemon.socket()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(bytes).unwrap();
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).unwrap();
    assert!(answer.len() > 4, "no answer to {bytes:?}");
    let text = String::from_utf8_lossy(&answer[4..]).into_owned();
    assert!(text.contains("\"error\""), "{text}");
    text
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_le_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

#[test]
fn hostile_frames_get_an_error_and_the_daemon_lives() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    dataset(&data);
    let daemon = Daemon::start(&data, &[]);
    let mut deep = Predicate::IsNull {
        expr: Operand::Column("id".into()),
        negated: false,
    };
    for _ in 0..MAX_PREDICATE_DEPTH + 1 {
        deep = Predicate::Not(Box::new(deep));
    }
    let mut deep_request = ScanRequest::new(table("t"));
    deep_request.predicate = Some(deep);
    let mut old = ScanRequest::new(table("t"));
    old.version = 99;
    let mut bad_column = ScanRequest::new(table("t"));
    bad_column.projection = Some(vec!["nope".into()]);
    // The ring's own rule, checked where the daemon creates it.
    let mut odd_ring = ScanRequest::new(table("t"));
    odd_ring.ring_capacity_bytes = 1 << 20 | 1000;
    let json = |r: &ScanRequest| serde_json::to_vec(&serde_json::json!({ "scan": r })).unwrap();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (frame(b"garbage!"), "malformed"),
        (
            ((MAX_FRAME_BYTES + 1) as u32).to_le_bytes().to_vec(),
            "exceeds the limit",
        ),
        (u32::MAX.to_le_bytes().to_vec(), "exceeds the limit"),
        (frame(&json(&old)), "version 99"),
        (frame(&json(&deep_request)), "deeper"),
        (frame(&json(&bad_column)), "unknown column"),
        (frame(&json(&odd_ring)), "not a multiple of 4096"),
        (frame(br#""cancel""#), "only valid on a running scan"),
        (
            frame(br#"{"refine":{"predicate":{"and":[]}}}"#),
            "only valid",
        ),
        (vec![7, 0, 0, 0, b'{'], "connection closed"),
    ];
    for (bytes, expected) in cases {
        if expected == "connection closed" {
            // A truncated frame: nothing to answer; just no crash.
            let mut s = UnixStream::connect(daemon.socket()).unwrap();
            s.write_all(&bytes).unwrap();
            drop(s);
            continue;
        }
        let text = expect_error_then_close(&daemon, &bytes);
        assert!(text.contains(expected), "{expected}: {text}");
    }
    daemon.client().ping().unwrap();
    good_scan_after_hostility(&daemon);
}

fn good_scan_after_hostility(daemon: &Daemon) {
    let (got, _) = scan_via(&daemon.client(), &ScanRequest::new(table("t"))).unwrap();
    assert_eq!(got.iter().map(|b| b.num_rows()).sum::<usize>(), 7500);
}

#[test]
fn refine_prunes_but_never_loses_a_qualifying_row() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    dataset(&data);
    let daemon = Daemon::start(&data, &[]);
    let mut stream = daemon.client().scan(&ScanRequest::new(table("t"))).unwrap();
    stream
        .refine(&Predicate::compare("id", CmpOp::Lt, Literal::Int(100)))
        .unwrap();
    let (mut n, mut qualifying) = (0, 0);
    while let Some(b) = stream.next_batch().unwrap() {
        n += b.num_rows();
        let ids = b
            .column_by_name("id")
            .unwrap()
            .as_any()
            .downcast_ref::<arrow_array::Int64Array>()
            .unwrap();
        qualifying += ids.iter().filter(|v| v.is_some_and(|v| v < 100)).count();
    }
    // The refine only skips row groups (how many depends on when it arrives): every row
    // that satisfies it still comes, and nothing beyond the table.
    assert_eq!(qualifying, 100);
    assert!((100..=7500).contains(&n), "{n}");
    let summary = stream.finish().unwrap();
    assert_eq!(
        summary.row_groups_pruned_by_dynamic_filter, summary.row_groups_pruned,
        "{summary:?}"
    );
}

/// Issue 17, item 4: a scan whose client keeps the ring full (holding a batch, not
/// reading) must not keep a stopping daemon waiting for space: SIGTERM ends the scan
/// at once, the daemon exits well inside its grace period, and the client learns that
/// its result was cut short (an error with the reason, not a clean end after fewer
/// rows).
#[test]
fn sigterm_during_a_blocked_scan_cuts_it_short_with_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    big_table(&data);
    let mut daemon = Daemon::start(&data, &[]);
    let mut stream = daemon.client().scan(&slow_scan_request()).unwrap();
    let held = stream.next_batch().unwrap().expect("a first batch");
    // The daemon fills the 64 KiB ring and waits for space the held batch pins.
    std::thread::sleep(Duration::from_millis(300));
    let started = std::time::Instant::now();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &daemon.child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = daemon
        .wait_exit(Duration::from_secs(10))
        .expect("the daemon exits");
    let took = started.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(
        took < Duration::from_secs(3),
        "a blocked scan held the exit for {took:?} (the grace period is 5 s)"
    );
    drop(held);
    let mut rows = 500;
    let err = loop {
        match stream.next_batch() {
            Ok(Some(b)) => rows += b.num_rows(),
            Ok(None) => panic!("a scan the daemon cut short ended as if complete ({rows} rows)"),
            Err(e) => break e,
        }
    };
    assert!(rows < 30_000);
    assert!(err.to_string().contains("the daemon is stopping"), "{err}");
}
