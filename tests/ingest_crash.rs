//! Durability of written tables: writers insert rows while the IO daemon is killed with
//! SIGKILL at random moments and started again; a ledger of the rows each insert was
//! acknowledged for must be found whole afterwards, nothing twice.
//!
//! Rounds: `RINGSCAN_CRASH_ROUNDS` (default 4; the soak bench runs more). The daemon
//! flushes every half second (`--flush-mib 0`), so kills land in flushes too.

use std::collections::HashSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use ringscan_ipc::client::{socket_path, write_request, DaemonClient};
use ringscan_ipc::msg::{encode_ipc_stream, encode_schema, ClientMessage, ScanRequest, ScanSource};

const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

fn schema() -> Schema {
    Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("note", DataType::Utf8, true),
    ])
}

/// The daemon, run in the foreground as a child (so it can be SIGKILLed), its output
/// in a file.
struct Daemon {
    child: Option<Child>,
    data: PathBuf,
}

impl Daemon {
    fn start(data: &Path) -> Self {
        let log = File::options()
            .create(true)
            .append(true)
            .open(data.join("daemon-test.log"))
            .expect("log");
        let child = Command::new(env!("CARGO_BIN_EXE_ringscan"))
            .args([
                "daemon",
                "run",
                "--flush-mib",
                "0",
                "--idle-timeout",
                "5m",
                "--data",
            ])
            .arg(data)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("spawn the daemon");
        let socket = socket_path(data);
        let deadline = Instant::now() + Duration::from_secs(30);
        while DaemonClient::connect(&socket)
            .and_then(|mut c| c.ping())
            .is_err()
        {
            assert!(
                Instant::now() < deadline,
                "the daemon did not start: {}",
                log_tail(data)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Self {
            child: Some(child),
            data: data.to_path_buf(),
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill(); // SIGKILL
            let _ = child.wait();
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Ok(client) = DaemonClient::connect(socket_path(&self.data)) {
                let _ = client.stop();
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn log_tail(data: &Path) -> String {
    let text = std::fs::read_to_string(data.join("daemon-test.log")).unwrap_or_default();
    let io = std::fs::read_to_string(data.join(".ringscan/io.log")).unwrap_or_default();
    let tail = |t: &str| t.lines().rev().take(15).collect::<Vec<_>>().join("\n");
    format!("{}\n--- io.log ---\n{}", tail(&text), tail(&io))
}

fn insert(data: &Path, ids: &[i64]) -> Result<u64, String> {
    let notes: Vec<String> = ids.iter().map(|i| format!("row {i}")).collect();
    let batch = RecordBatch::try_new(
        Arc::new(schema()),
        vec![
            Arc::new(Int64Array::from(ids.to_vec())),
            Arc::new(StringArray::from(notes)),
        ],
    )
    .expect("batch");
    let payload = encode_ipc_stream(&schema(), &[batch]).expect("ipc");
    let message = ClientMessage::Insert {
        table: "ledger".into(),
        bytes: payload.len() as u64,
    };
    write_request(&socket_path(data), &message, &payload, WRITE_TIMEOUT).map_err(|e| e.to_string())
}

fn scan_ids(data: &Path) -> Vec<i64> {
    let client = DaemonClient::connect(socket_path(data)).expect("connect");
    let mut stream = client
        .scan(&ScanRequest::new(ScanSource::Table {
            name: "ledger".into(),
        }))
        .expect("scan");
    let mut ids = Vec::new();
    while let Some(batch) = stream.next_batch().expect("batch") {
        ids.extend(batch.column(0).as_primitive::<Int64Type>().values());
    }
    stream.finish().expect("summary");
    ids
}

#[test]
fn acknowledged_rows_survive_sigkill_at_random_moments() {
    let rounds: usize = std::env::var("RINGSCAN_CRASH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(4);
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().to_path_buf();
    let mut daemon = Daemon::start(&data);
    let create = ClientMessage::CreateTable {
        name: "ledger".into(),
        schema_ipc: encode_schema(&schema()).expect("schema"),
        primary_key: vec!["id".into()],
        if_not_exists: false,
    };
    write_request(&socket_path(&data), &create, &[], WRITE_TIMEOUT).expect("create table");

    // Acknowledged ids, and ids whose insert got no answer (the kill came first): those
    // may or may not be there.
    let acknowledged = Mutex::new(Vec::<i64>::new());
    let unknown = Mutex::new(Vec::<Vec<i64>>::new());
    let refused = Mutex::new(Vec::<String>::new());
    let stop = AtomicBool::new(false);
    let next = AtomicI64::new(1);
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64 ^ u64::from(std::process::id());
    let mut random = move |below: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    };
    std::thread::scope(|s| {
        for writer in 0..4 {
            let (acknowledged, unknown, refused, stop, next, data) =
                (&acknowledged, &unknown, &refused, &stop, &next, &data);
            s.spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    // One row, or a few (a statement of several rows is all or nothing).
                    let n = 1 + (writer % 3) as i64;
                    let first = next.fetch_add(n, Ordering::Relaxed);
                    let ids: Vec<i64> = (first..first + n).collect();
                    match insert(data, &ids) {
                        Ok(rows) => {
                            assert_eq!(rows, n as u64);
                            acknowledged.lock().unwrap().extend(&ids);
                        }
                        Err(e) => {
                            if e.contains("already exists") || e.contains("does not decode") {
                                refused.lock().unwrap().push(e.clone());
                            }
                            unknown.lock().unwrap().push(ids);
                            // The daemon is down: wait for it.
                            std::thread::sleep(Duration::from_millis(10));
                        }
                    }
                }
            });
        }
        for _ in 0..rounds {
            std::thread::sleep(Duration::from_millis(200 + random(600)));
            daemon.kill();
            std::thread::sleep(Duration::from_millis(random(100)));
            daemon = Daemon::start(&data);
        }
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Release);
    });
    let refused = refused.into_inner().unwrap();
    assert!(
        refused.is_empty(),
        "writes refused for their content: {refused:?}"
    );
    let acknowledged = acknowledged.into_inner().unwrap();
    let unknown = unknown.into_inner().unwrap();
    assert!(
        acknowledged.len() > 50,
        "too few writes acknowledged to tell anything: {}\n{}",
        acknowledged.len(),
        log_tail(&data)
    );

    // Once more from the log alone: a kill, a restart, and the rows read back.
    daemon.kill();
    let daemon = Daemon::start(&data);
    let mut found = scan_ids(&data);
    let total = found.len();
    found.sort_unstable();
    found.dedup();
    assert_eq!(found.len(), total, "rows appear twice\n{}", log_tail(&data));
    let found: HashSet<i64> = found.into_iter().collect();
    let lost: Vec<i64> = acknowledged
        .iter()
        .copied()
        .filter(|id| !found.contains(id))
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged rows lost (first: {:?})\n{}",
        lost.len(),
        acknowledged.len(),
        &lost[..lost.len().min(10)],
        log_tail(&data)
    );
    let ledger: HashSet<i64> = acknowledged.iter().copied().collect();
    let unanswered: HashSet<i64> = unknown.iter().flatten().copied().collect();
    let strays: Vec<i64> = found
        .iter()
        .copied()
        .filter(|id| !ledger.contains(id) && !unanswered.contains(id))
        .collect();
    assert!(strays.is_empty(), "rows nobody wrote: {strays:?}");
    // Statements are all or nothing: of an unanswered statement of several rows, all
    // or none are there.
    let mut applied = 0;
    for ids in &unknown {
        let there = ids.iter().filter(|id| found.contains(id)).count();
        assert!(
            there == 0 || there == ids.len(),
            "{there} of the {} rows of one statement are there: {ids:?}",
            ids.len()
        );
        applied += usize::from(there > 0);
    }
    eprintln!(
        "{rounds} kills: {} rows acknowledged, all found; {} statements unanswered, {applied} \
         of them applied",
        acknowledged.len(),
        unknown.len(),
    );
    drop(daemon);
}
