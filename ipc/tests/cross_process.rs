//! Cross-process tests: the peer is the crate's `ring-peer` binary, a real separate
//! process. Every child is killed and reaped by a guard, and every test checks that
//! nothing is left in /dev/shm.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use ringscan_ipc::bench::{attach_retry, PeerSpec};
use ringscan_ipc::{unique_name, Peer, Producer, RingError};

/// Kills and reaps the child when dropped, whatever happened in the test.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(spec: &PeerSpec) -> ChildGuard {
    let child = Command::new(env!("CARGO_BIN_EXE_ring-peer"))
        .args(spec.to_args())
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn ring-peer");
    ChildGuard(child)
}

fn shm_path(name: &str) -> PathBuf {
    Path::new("/dev/shm").join(&name[1..])
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]))
}

fn batch(k: i64) -> RecordBatch {
    let values: Int64Array = (k * 10..k * 10 + 10).collect();
    RecordBatch::try_new(schema(), vec![Arc::new(values)]).unwrap()
}

#[test]
fn batches_cross_the_process_boundary() {
    let name = unique_name("ringscan-xp");
    let mut child = spawn(&PeerSpec::Throughput {
        name: name.clone(),
        capacity_bytes: 1 << 16,
        batches: 200,
        batch_bytes: 4096,
    });
    let consumer = attach_retry(&name, Duration::from_secs(10)).unwrap();
    assert!(
        !shm_path(&name).exists(),
        "unlinked once both sides mapped it"
    );
    let mut n = 0;
    for b in consumer {
        let b = b.unwrap();
        assert_eq!(b.num_rows(), 512);
        n += 1;
    }
    assert_eq!(n, 200);
    assert!(child.0.wait().unwrap().success());
}

#[test]
fn producer_killed_mid_stream_is_reported_within_one_second() {
    let name = unique_name("ringscan-xp");
    let mut child = spawn(&PeerSpec::SlowProducer {
        name: name.clone(),
        interval_ms: 5,
    });
    let mut consumer = attach_retry(&name, Duration::from_secs(10)).unwrap();
    for _ in 0..3 {
        consumer.next().unwrap().unwrap();
    }
    // SIGKILL, and deliberately not reaped yet: a zombie must count as dead too.
    child.0.kill().unwrap();
    let killed = Instant::now();
    let err = loop {
        match consumer.next() {
            Some(Ok(_)) => continue, // batches published before the kill
            Some(Err(e)) => break e,
            None => panic!("stream ended cleanly after SIGKILL"),
        }
    };
    let elapsed = killed.elapsed();
    assert!(
        matches!(
            err,
            RingError::PeerDied {
                peer: Peer::Producer,
                ..
            }
        ),
        "{err}"
    );
    assert!(elapsed < Duration::from_secs(1), "took {elapsed:?}");
    assert!(consumer.next().is_none());
    drop(consumer);
    drop(child);
    assert!(!shm_path(&name).exists());
}

#[test]
fn consumer_killed_is_reported_and_nothing_is_left_in_dev_shm() {
    let name = unique_name("ringscan-xp");
    let mut producer = Producer::create(&name, schema(), 1 << 16).unwrap();
    let mut child = spawn(&PeerSpec::Consumer {
        name: name.clone(),
        read: 2,
        then: "hang".into(),
    });
    producer.wait_for_consumer().unwrap();
    for k in 0..2 {
        producer.push(&batch(k)).unwrap();
    }
    std::thread::sleep(Duration::from_millis(50)); // let it read both and hang
    child.0.kill().unwrap();
    let killed = Instant::now();
    let err = loop {
        match producer.push(&batch(7)) {
            Ok(()) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => break e,
        }
        assert!(killed.elapsed() < Duration::from_secs(5), "never noticed");
    };
    let elapsed = killed.elapsed();
    assert!(
        matches!(
            err,
            RingError::PeerDied {
                peer: Peer::Consumer,
                ..
            }
        ),
        "{err}"
    );
    assert!(elapsed < Duration::from_secs(1), "took {elapsed:?}");
    drop(producer);
    drop(child);
    assert!(!shm_path(&name).exists(), "segment left behind");
}

#[test]
fn cancel_stops_the_producer_at_its_next_push() {
    let name = unique_name("ringscan-xp");
    let mut producer = Producer::create(&name, schema(), 1 << 16).unwrap();
    let mut child = spawn(&PeerSpec::Consumer {
        name: name.clone(),
        read: 3,
        then: "cancel".into(),
    });
    producer.wait_for_consumer().unwrap();
    for k in 0..3 {
        producer.push(&batch(k)).unwrap();
    }
    assert!(
        child.0.wait().unwrap().success(),
        "consumer cancelled and exited"
    );
    let err = producer.push(&batch(3)).unwrap_err();
    assert!(matches!(err, RingError::Cancelled { .. }), "{err}");
    assert!(producer.is_cancelled());
    drop(producer);
    assert!(!shm_path(&name).exists());
}

#[test]
fn no_consumer_is_an_error_and_leaves_nothing() {
    let name = unique_name("ringscan-xp");
    let opts = ringscan_ipc::RingOptions::new(4096).with_attach_timeout(Duration::from_millis(200));
    let mut producer = Producer::create_with(&name, schema(), &opts).unwrap();
    let err = producer.wait_for_consumer().unwrap_err();
    assert!(matches!(err, RingError::NotAttached { .. }), "{err}");
    drop(producer);
    assert!(!shm_path(&name).exists());
}

#[test]
fn producer_killed_before_attach_is_cleaned_up() {
    let name = unique_name("ringscan-xp-stale");
    let mut child = spawn(&PeerSpec::SlowProducer {
        name: name.clone(),
        interval_ms: 5,
    });
    // Killed once its ring is set up (its header's magic written last): a kill in
    // between leaves a segment that only its age marks stale (10 s), which a busy
    // machine's scheduling hit once.
    let start = Instant::now();
    let initialised = || {
        use std::io::Read;
        let mut magic = [0u8; 8];
        std::fs::File::open(shm_path(&name))
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok_and(|()| &magic == b"RINGSCAN")
    };
    while !initialised() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "peer never set up the ring"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    // A live producer's ring is not stale.
    assert_eq!(ringscan_ipc::remove_stale_rings(&name[1..]), 0);
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    assert_eq!(ringscan_ipc::remove_stale_rings(&name[1..]), 1);
    assert!(!shm_path(&name).exists());
}
