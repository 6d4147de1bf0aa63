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
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("t")).unwrap();
    write_file(&data.join("t/a.parquet"), 0, 5_000);
    let mut daemon = Daemon::start(&data, &[]);
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
