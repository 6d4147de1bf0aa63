//! The daemon process's life: status, stop, one daemon per data directory, stale
//! socket, idle exit, racing starters.

mod daemon_support;

use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use daemon_support::{spawn, write_file, Daemon, BIN};
use ringscan_ipc::client::{ensure_daemon, socket_path, DaemonClient};

#[test]
fn status_then_stop() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let mut daemon = Daemon::start(&data, &["--idle-timeout", "5m"]);
    let status = daemon.client().status().unwrap();
    assert_eq!(status.pid, daemon.child.id());
    assert_eq!(status.idle_timeout_ms, 300_000);
    assert_eq!(status.scans_active, 0);
    assert_eq!(status.data_dir, std::fs::canonicalize(&data).unwrap());
    daemon.client().stop().unwrap();
    let exit = daemon.wait_exit(Duration::from_secs(5)).expect("exited");
    assert!(exit.success(), "{exit:?}");
    assert!(!socket_path(&data).exists(), "socket removed");
    assert!(data.join(".ringscan/io.lock").exists(), "lock file kept");
    let log = std::fs::read_to_string(data.join(".ringscan/io.log")).unwrap();
    assert!(log.contains("stop requested"), "{log}");
}

#[test]
fn a_second_daemon_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let daemon = Daemon::start(&data, &[]);
    let out = Command::new(BIN)
        .arg("--data")
        .arg(&data)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("already serves") && stderr.contains(&format!("pid {}", daemon.child.id())),
        "{stderr}"
    );
    daemon.client().ping().unwrap();
}

#[test]
fn a_stale_socket_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join(".ringscan")).unwrap();
    // A socket left by a daemon that was killed: bound, nobody listening.
    drop(std::os::unix::net::UnixListener::bind(socket_path(&data)).unwrap());
    assert!(socket_path(&data).exists());
    // Nobody answers on it. (A test running beside this one may fork between our bind
    // and drop, holding the listener until its exec: retry for that brief window.)
    let deadline = Instant::now() + Duration::from_secs(2);
    while DaemonClient::connect(socket_path(&data)).is_ok() {
        assert!(Instant::now() < deadline, "the stale socket still accepts");
        std::thread::sleep(Duration::from_millis(10));
    }
    let daemon = Daemon::start(&data, &[]);
    daemon.client().ping().unwrap();
}

#[test]
fn idle_daemon_exits() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let mut daemon = Daemon::start(&data, &["--idle-timeout", "1s"]);
    let start = Instant::now();
    let exit = daemon
        .wait_exit(Duration::from_secs(10))
        .expect("idle exit");
    assert!(exit.success());
    assert!(
        start.elapsed() >= Duration::from_millis(500),
        "{:?}",
        start.elapsed()
    );
    assert!(!socket_path(&data).exists());
    let log = std::fs::read_to_string(data.join(".ringscan/io.log")).unwrap();
    assert!(log.contains("exiting (idle)"), "{log}");
}

/// A daemon over an empty data directory in a temporary one (kept while the first
/// value lives), answering, with an idle timeout longer than any test.
fn answering_daemon() -> (tempfile::TempDir, std::path::PathBuf, Daemon) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let daemon = Daemon::start(&data, &["--idle-timeout", "10m"]);
    daemon.client().ping().unwrap();
    (dir, data, daemon)
}

/// Connections the daemon closed as idle so far.
fn idle_closed(daemon: &Daemon) -> u64 {
    daemon
        .client()
        .status()
        .unwrap()
        .memory
        .idle_connections_closed
}

/// A daemon started with `args` over a data directory (in a temporary one, kept while
/// the first value lives) holding table `t` of `rows` rows.
fn daemon_over_table(
    rows: usize,
    args: &[&str],
) -> (tempfile::TempDir, std::path::PathBuf, Daemon) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("t")).unwrap();
    write_file(&data.join("t/a.parquet"), 0, rows);
    let daemon = Daemon::start(&data, args);
    (dir, data, daemon)
}

/// A daemon whose data directory (socket and all) is deleted exits at once, without
/// waiting for its idle timeout: no client can reach it again. It used to stay in its
/// `accept` for good (the watchdog's wake-up connected to a path that was gone), deaf
/// to the idle timeout and to SIGTERM: test runs left such daemons behind for hours.
#[test]
fn a_daemon_whose_directory_is_deleted_exits() {
    let (_dir, data, mut daemon) = answering_daemon();
    std::fs::remove_dir_all(&data).unwrap();
    let exit = daemon
        .wait_exit(Duration::from_secs(5))
        .expect("the daemon exits once its directory is gone");
    assert!(exit.success(), "{exit:?}");
}

/// The same for a daemon whose socket was removed and bound again by someone else:
/// it exits, and leaves the other socket in place.
#[test]
fn a_daemon_whose_socket_was_replaced_exits_and_leaves_the_new_one() {
    let (_dir, data, mut daemon) = answering_daemon();
    let socket = socket_path(&data);
    std::fs::remove_file(&socket).unwrap();
    let other = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let exit = daemon
        .wait_exit(Duration::from_secs(5))
        .expect("the daemon exits once its socket is not its own");
    assert!(exit.success(), "{exit:?}");
    assert!(socket.exists(), "the other socket is left in place");
    drop(other);
    let log = std::fs::read_to_string(data.join(".ringscan/io.log")).unwrap();
    assert!(log.contains("its socket was removed"), "{log}");
}

#[test]
fn racing_clients_share_one_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    write_file(&data.join("t/a.parquet"), 0, 10);
    let children = Mutex::new(Vec::new());
    let pids: Vec<u32> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|_| {
                s.spawn(|| {
                    let spawn = || {
                        children
                            .lock()
                            .unwrap()
                            .push(spawn(&data, &["--idle-timeout", "30s"]));
                        Ok(())
                    };
                    let mut client = ensure_daemon(&data, &spawn, Duration::from_secs(10)).unwrap();
                    client.status().unwrap().pid
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(pids.windows(2).all(|w| w[0] == w[1]), "{pids:?}");
    let mut children = children.into_inner().unwrap();
    assert!(!children.is_empty());
    // The winner serves; every loser exited on its own.
    let mut winner = None;
    for child in &mut children {
        if child.id() == pids[0] {
            winner = Some(child.id());
        } else {
            let deadline = Instant::now() + Duration::from_secs(5);
            while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            assert!(
                child.try_wait().unwrap().is_some(),
                "a losing daemon is still running"
            );
        }
    }
    assert!(winner.is_some(), "the serving daemon is one of ours");
    let _ = DaemonClient::connect(socket_path(&data)).unwrap().stop();
    for mut child in children {
        let deadline = Instant::now() + Duration::from_secs(5);
        while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Rings of this process in /dev/shm (`ringscan-<pid>-...`).
fn rings_of(pid: u32) -> Vec<String> {
    let prefix = format!("ringscan-{pid}-");
    std::fs::read_dir("/dev/shm")
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn rings_made_ahead_serve_scans_of_any_size_and_go_with_the_daemon() {
    let (_dir, data, mut daemon) = daemon_over_table(5_000, &[]);
    let pid = daemon.child.id();
    let table = ringscan_ipc::msg::ScanSource::Table { name: "t".into() };
    let expected =
        daemon_support::reference(&data, &ringscan_ipc::msg::ScanRequest::new(table.clone()));
    // Alternating ring sizes: a ring made ahead for one size must never serve another.
    // A client per scan: one client's later scans reuse its own rings, not the stock's.
    for (i, mib) in [1usize, 1, 4, 4, 1, 2].into_iter().enumerate() {
        let client = daemon.client();
        let mut request = ringscan_ipc::msg::ScanRequest::new(table.clone());
        request.ring_capacity_bytes = mib << 20;
        let (batches, summary) = daemon_support::scan_via(&client, &request).unwrap();
        assert_eq!(
            daemon_support::rows(&batches),
            daemon_support::rows(&expected),
            "scan {i}"
        );
        assert_eq!(summary.rows_emitted, 5_000);
    }
    // Exactly one ring kept ready for each of the two sizes last asked for (2 and 1
    // MiB) while the daemon lives; the scans' own rings are gone (their client
    // attached and unlinked them), and so is the 4 MiB one made ahead.
    let deadline = Instant::now() + Duration::from_secs(5);
    while rings_of(pid).len() != 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut sizes: Vec<u64> = rings_of(pid)
        .iter()
        .map(|n| std::fs::metadata(format!("/dev/shm/{n}")).map_or(0, |m| m.len()))
        .collect();
    sizes.sort_unstable();
    assert_eq!(sizes.len(), 2, "{:?}", rings_of(pid));
    assert!(
        sizes[0] >= 1 << 20 && sizes[0] < 2 << 20 && sizes[1] >= 2 << 20 && sizes[1] < 3 << 20,
        "ready ring sizes {sizes:?}"
    );
    daemon.client().stop().unwrap();
    let exit = daemon.wait_exit(Duration::from_secs(5)).expect("exited");
    assert!(exit.success(), "{exit:?}");
    assert_eq!(
        rings_of(pid),
        Vec::<String>::new(),
        "rings left in /dev/shm"
    );
}

/// Issue 17, item 11: a daemon killed with SIGKILL cannot remove its rings; the one a
/// scan had attached to is unlinked already, but the rings it made ahead for the next
/// scans stayed in /dev/shm until another daemon started. Its client outlives it and
/// removes them as soon as it sees the death, on a scan's ring and on a request.
#[test]
fn a_daemon_killed_mid_scan_leaves_no_ring_behind_once_its_client_notices() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for i in 0..6 {
        write_file(&data.join(format!("big/f{i}.parquet")), i * 5000, 5000);
    }
    for on_request in [false, true] {
        let mut daemon = Daemon::start(&data, &[]);
        let pid = daemon.child.id();
        let mut request =
            ringscan_ipc::msg::ScanRequest::new(ringscan_ipc::msg::ScanSource::Table {
                name: "big".into(),
            });
        request.batch_size = 500;
        request.ring_capacity_bytes = 64 << 10;
        let client = daemon.client();
        let mut requests = daemon.client();
        let mut stream = client.scan(&request).unwrap();
        let first = stream.next_batch().unwrap().expect("a first batch");
        // The daemon keeps a ring ready for the next scan of this size.
        let deadline = Instant::now() + Duration::from_secs(5);
        while rings_of(pid).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!rings_of(pid).is_empty(), "no ring made ahead to test with");
        daemon.child.kill().unwrap();
        let err = if on_request {
            drop(stream);
            requests.ping().expect_err("a dead daemon answered")
        } else {
            drop(first);
            loop {
                match stream.next_batch() {
                    Ok(Some(_)) => {}
                    Ok(None) => panic!("a killed daemon's scan ended as if complete"),
                    Err(e) => break e,
                }
            }
        };
        assert_eq!(
            rings_of(pid),
            Vec::<String>::new(),
            "rings of the killed daemon left in /dev/shm after the client saw: {err}"
        );
        let _ = daemon.child.wait();
    }
}

/// Issue 17, item 13: every connection counted against the limit until its client
/// closed it (or 15 minutes passed), so clients that kept their connections idle
/// locked everyone else out with "busy". Now a full daemon closes the connection that
/// has waited longest for its client, that client reconnects on its next request, and
/// a connection idle past the session timeout is closed anyway.
#[test]
fn idle_connections_make_room_for_new_clients_and_time_out() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    // One scan at once: at most 1 * 4 + 16 = 20 connections.
    let daemon = Daemon::start(&data, &["--max-scans", "1", "--session-idle-timeout", "1s"]);
    let mut idle: Vec<DaemonClient> = (0..20)
        .map(|_| {
            let mut c = daemon.client();
            c.ping().unwrap();
            c
        })
        .collect();
    // The check's own connection of `Daemon::start` is gone; these 20 fill the daemon.
    let mut newcomer = daemon.client();
    newcomer
        .ping()
        .expect("a new client was refused while all connections were idle");
    // The client whose connection was closed to make room gets its answer anyway.
    for c in &mut idle {
        c.ping().expect("an evicted client's next request failed");
    }
    let closed = idle_closed(&daemon);
    assert!(closed >= 1, "{closed}");

    // Past the session timeout the daemon closes a silent connection by itself.
    let mut raw = std::os::unix::net::UnixStream::connect(daemon.socket()).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 1];
    let n = std::io::Read::read(&mut raw, &mut buf).unwrap_or(0);
    assert_eq!(n, 0, "the daemon sent something to a silent client");
    assert!(
        started.elapsed() >= Duration::from_millis(900)
            && started.elapsed() < Duration::from_secs(4),
        "closed after {:?}, the session timeout is 1 s",
        started.elapsed()
    );
}

/// Issue 17, item 13: the daemon's memory budget covers the caches, the rings and each
/// running scan's read-ahead; scans beyond what it allows at once are told "busy",
/// and the status shows the split.
#[test]
fn scans_beyond_the_memory_budget_are_busy() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for i in 0..4 {
        write_file(&data.join(format!("big/f{i}.parquet")), i * 5000, 5000);
    }
    let daemon = Daemon::start(&data, &["--memory-budget-mib", "64"]);
    let memory = daemon.client().status().unwrap().memory;
    assert_eq!(memory.budget_bytes, 64 << 20);
    let held = memory.metadata_cache_bytes
        + memory.column_cache_bytes
        + memory.ring_bytes
        + memory.scan_bytes * memory.max_scans;
    assert!(held <= memory.budget_bytes, "{memory:?}");
    assert!(memory.max_scans >= 1 && memory.max_scans < 16, "{memory:?}");
    let mut request = ringscan_ipc::msg::ScanRequest::new(ringscan_ipc::msg::ScanSource::Table {
        name: "big".into(),
    });
    request.batch_size = 500;
    request.ring_capacity_bytes = 64 << 10;
    // Scans that stay open (their clients hold a batch, so the daemon waits on a full
    // ring) until the budget's scans are all running.
    let clients: Vec<DaemonClient> = (0..=memory.max_scans).map(|_| daemon.client()).collect();
    let mut open = Vec::new();
    for client in &clients[..memory.max_scans as usize] {
        let mut stream = client.scan(&request).unwrap();
        let batch = stream.next_batch().unwrap().expect("a first batch");
        open.push((stream, batch));
    }
    let status = daemon.client().status().unwrap();
    assert_eq!(
        status.memory.scan_bytes_in_use,
        memory.scan_bytes * memory.max_scans
    );
    let err = clients[memory.max_scans as usize]
        .scan(&request)
        .expect_err("a scan beyond the memory budget started");
    assert!(err.to_string().contains("scan memory"), "{err}");
    // Once one ends, a new one fits.
    drop(open.pop());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match clients[memory.max_scans as usize].scan(&request) {
            Ok(stream) => {
                drop(stream);
                break;
            }
            Err(e) if Instant::now() < deadline && e.to_string().contains("busy") => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("no scan fits after one ended: {e}"),
        }
    }
}

/// `--session-idle-timeout 0` is no timeout, for a connection waiting for its next
/// request and for one whose session waits for its next scan alike (the second closed
/// at once).
#[test]
fn a_zero_session_timeout_closes_nothing() {
    let (_dir, _data, daemon) = daemon_over_table(1_000, &["--session-idle-timeout", "0s"]);
    let table = ringscan_ipc::msg::ScanSource::Table { name: "t".into() };
    let client = daemon.client();
    for _ in 0..3 {
        let request = ringscan_ipc::msg::ScanRequest::new(table.clone());
        let (_, summary) = daemon_support::scan_via(&client, &request).unwrap();
        assert_eq!(summary.rows_emitted, 1_000);
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut raw = std::os::unix::net::UnixStream::connect(daemon.socket()).unwrap();
    raw.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut buf = [0u8; 1];
    let read = std::io::Read::read(&mut raw, &mut buf);
    assert!(
        matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a silent connection was closed or answered: {read:?}"
    );
    let closed = idle_closed(&daemon);
    assert_eq!(closed, 0, "connections closed as idle");
}
