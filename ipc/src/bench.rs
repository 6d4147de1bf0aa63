//! The cross-process ring benchmark (`ringscan bench ring`) and the peer process it,
//! and this crate's cross-process tests, spawn.
//!
//! The measuring process is the consumer (the executor's role); the spawned peer is
//! the producer (the daemon's role). One run:
//!
//! - **Throughput**, in rounds: the peer pushes the same 1 MiB batch (one `Int64`
//!   column) over and over; the consumer imports each zero-copy and drops it. GB/s =
//!   column bytes received / time. Just before each round's ring measurement,
//!   single-threaded `memcpy` bandwidth measured the same way: the same 1 MiB source
//!   copied into a destination as large as the ring, cycling through it, as many times,
//!   into a heap buffer and into a shared-memory segment. Each round's ratios compare
//!   measurements a few ms apart, so that the load of a shared machine moves them
//!   together; their spread over the rounds is the figure.
//! - **Hand-off latency**: the peer pushes a one-row batch carrying its
//!   `CLOCK_MONOTONIC` time; the consumer subtracts that from its own clock on
//!   receipt: encode + copy + publish + wake-up (or end of a spin) + import, one way.
//!   Three ways: an active stream (each batch sent as soon as the consumer answered the
//!   last on a second ring) with the waits' spin on, so the consumer is awake; the
//!   same with spinning off, so every hand-off wakes a sleeping consumer; and after an
//!   idle pause (the producer sleeps before each push), where the consumer's spin
//!   gives up and it sleeps.
//!
//! Peers are described by [`PeerSpec`], which turns into and back from command-line
//! arguments so that any binary can host one (`ringscan __peer ...`, or this crate's
//! `ring-peer` test binary) by calling [`peer_main`].

use std::io;
use std::process::Child;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::{Array, Int64Array, RecordBatch, UInt64Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use serde::Serialize;

use crate::{monotonic_ns, unique_name, Consumer, Producer, RingError};

/// Errors of the benchmark and of peer processes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// The ring failed.
    #[error(transparent)]
    Ring(#[from] RingError),
    /// Spawning or waiting for the peer failed.
    #[error("peer process: {0}")]
    Peer(#[source] io::Error),
    /// The peer's arguments are invalid.
    #[error("invalid peer arguments: {0}")]
    Args(String),
    /// The stream did not carry what the benchmark sent.
    #[error("benchmark stream: {0}")]
    Stream(String),
}

/// What a peer process does.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PeerSpec {
    /// Create ring `name`, wait for a consumer, push `batches` batches of `batch_bytes`
    /// column bytes, finish.
    Throughput {
        /// Ring name.
        name: String,
        /// Ring capacity.
        capacity_bytes: usize,
        /// Batches to push.
        batches: usize,
        /// Column bytes per batch.
        batch_bytes: usize,
    },
    /// Create ring `name`, wait for a consumer, push `samples` one-row timestamp batches,
    /// finish. Paced either by `gap_us` of sleep before each push, or, with `echo`, by
    /// waiting for the consumer's reply on ring `echo` (which the consumer created).
    Handoff {
        /// Ring name.
        name: String,
        /// Ring capacity.
        capacity_bytes: usize,
        /// Batches to push.
        samples: usize,
        /// Sleep before each batch (when there is no echo ring).
        gap_us: u64,
        /// Ring on which the consumer answers each batch.
        echo: Option<String>,
        /// The peer's spin bound ([`set_wait_spin`](crate::set_wait_spin)), ns;
        /// `None`: its default.
        spin_ns: Option<u64>,
    },
    /// Create ring `name` and push a 10-row batch every `interval_ms`, forever (until
    /// killed or cancelled): the producer that tests kill.
    SlowProducer {
        /// Ring name.
        name: String,
        /// Pause between pushes.
        interval_ms: u64,
    },
    /// Attach to ring `name`, read `read` batches, then: `cancel` (cancel and exit),
    /// `hang` (hold the batches and sleep until killed), or `drain` (read to the end).
    Consumer {
        /// Ring name.
        name: String,
        /// Batches to read first.
        read: usize,
        /// `cancel`, `hang` or `drain`.
        then: String,
    },
}

impl PeerSpec {
    /// The command-line form, parsed back by [`PeerSpec::parse`].
    pub fn to_args(&self) -> Vec<String> {
        let kv = |pairs: &[(&str, String)]| -> Vec<String> {
            pairs
                .iter()
                .flat_map(|(k, v)| [format!("--{k}"), v.clone()])
                .collect()
        };
        let (role, rest) = match self {
            Self::Throughput {
                name,
                capacity_bytes,
                batches,
                batch_bytes,
            } => (
                "throughput",
                kv(&[
                    ("name", name.clone()),
                    ("capacity", capacity_bytes.to_string()),
                    ("batches", batches.to_string()),
                    ("batch-bytes", batch_bytes.to_string()),
                ]),
            ),
            Self::Handoff {
                name,
                capacity_bytes,
                samples,
                gap_us,
                echo,
                spin_ns,
            } => (
                "handoff",
                kv(&[
                    ("name", name.clone()),
                    ("capacity", capacity_bytes.to_string()),
                    ("samples", samples.to_string()),
                    ("gap-us", gap_us.to_string()),
                    ("echo", echo.clone().unwrap_or_else(|| "-".into())),
                    (
                        "spin-ns",
                        spin_ns.map_or_else(|| "-".into(), |n| n.to_string()),
                    ),
                ]),
            ),
            Self::SlowProducer { name, interval_ms } => (
                "slow-producer",
                kv(&[
                    ("name", name.clone()),
                    ("interval-ms", interval_ms.to_string()),
                ]),
            ),
            Self::Consumer { name, read, then } => (
                "consumer",
                kv(&[
                    ("name", name.clone()),
                    ("read", read.to_string()),
                    ("then", then.clone()),
                ]),
            ),
        };
        std::iter::once(role.to_owned()).chain(rest).collect()
    }

    /// Parses [`to_args`](Self::to_args) output.
    pub fn parse(args: &[String]) -> Result<Self, BenchError> {
        let bad = |m: String| BenchError::Args(m);
        let (role, rest) = args
            .split_first()
            .ok_or_else(|| bad("missing peer role".into()))?;
        if rest.len() % 2 != 0 {
            return Err(bad("arguments must be --key value pairs".into()));
        }
        let get = |key: &str| -> Result<String, BenchError> {
            rest.chunks(2)
                .find(|kv| kv[0].strip_prefix("--") == Some(key))
                .map(|kv| kv[1].clone())
                .ok_or_else(|| bad(format!("missing --{key}")))
        };
        let num = |key: &str| -> Result<u64, BenchError> {
            get(key)?.parse().map_err(|e| bad(format!("--{key}: {e}")))
        };
        Ok(match role.as_str() {
            "throughput" => Self::Throughput {
                name: get("name")?,
                capacity_bytes: num("capacity")? as usize,
                batches: num("batches")? as usize,
                batch_bytes: num("batch-bytes")? as usize,
            },
            "handoff" => Self::Handoff {
                name: get("name")?,
                capacity_bytes: num("capacity")? as usize,
                samples: num("samples")? as usize,
                gap_us: num("gap-us")?,
                echo: Some(get("echo")?).filter(|e| e != "-"),
                spin_ns: match get("spin-ns")?.as_str() {
                    "-" => None,
                    n => Some(n.parse().map_err(|e| bad(format!("--spin-ns: {e}")))?),
                },
            },
            "slow-producer" => Self::SlowProducer {
                name: get("name")?,
                interval_ms: num("interval-ms")?,
            },
            "consumer" => Self::Consumer {
                name: get("name")?,
                read: num("read")? as usize,
                then: get("then")?,
            },
            other => return Err(bad(format!("unknown peer role {other:?}"))),
        })
    }
}

fn value_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]))
}

fn timestamp_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new(
        "sent_ns",
        DataType::UInt64,
        false,
    )]))
}

/// Runs a peer: parses `args` ([`PeerSpec::to_args`] form) and plays that role.
pub fn peer_main(args: &[String]) -> Result<(), BenchError> {
    match PeerSpec::parse(args)? {
        PeerSpec::Throughput {
            name,
            capacity_bytes,
            batches,
            batch_bytes,
        } => {
            let schema = value_schema();
            let values: Int64Array = (0..(batch_bytes / 8) as i64).collect();
            let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(values)])
                .map_err(|e| BenchError::Stream(e.to_string()))?;
            let mut producer = Producer::create(&name, schema, capacity_bytes)?;
            producer.wait_for_consumer()?;
            for _ in 0..batches {
                producer.push(&batch)?;
            }
            producer.finish()?;
        }
        PeerSpec::Handoff {
            name,
            capacity_bytes,
            samples,
            gap_us,
            echo,
            spin_ns,
        } => {
            if let Some(ns) = spin_ns {
                crate::set_wait_spin(Duration::from_nanos(ns));
            }
            let schema = timestamp_schema();
            let mut producer = Producer::create(&name, schema.clone(), capacity_bytes)?;
            producer.wait_for_consumer()?;
            let mut echo = match echo {
                Some(echo) => Some(attach_retry(&echo, Duration::from_secs(10))?),
                None => None,
            };
            for _ in 0..samples {
                if echo.is_none() {
                    std::thread::sleep(Duration::from_micros(gap_us));
                }
                let sent = UInt64Array::from(vec![monotonic_ns()]);
                let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(sent)])
                    .map_err(|e| BenchError::Stream(e.to_string()))?;
                producer.push(&batch)?;
                if let Some(echo) = echo.as_mut() {
                    match echo.next() {
                        Some(reply) => drop(reply?),
                        None => return Err(BenchError::Stream("echo ring ended".into())),
                    }
                }
            }
            producer.finish()?;
        }
        PeerSpec::SlowProducer { name, interval_ms } => {
            let schema = value_schema();
            let mut producer = Producer::create(&name, schema.clone(), 1 << 20)?;
            for k in 0.. {
                let values: Int64Array = (k * 10..k * 10 + 10).collect();
                let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(values)])
                    .map_err(|e| BenchError::Stream(e.to_string()))?;
                producer.push(&batch)?;
                std::thread::sleep(Duration::from_millis(interval_ms));
            }
        }
        PeerSpec::Consumer { name, read, then } => {
            let mut consumer = attach_retry(&name, Duration::from_secs(10))?;
            let mut held = Vec::new();
            for _ in 0..read {
                match consumer.next() {
                    Some(batch) => held.push(batch?),
                    None => return Err(BenchError::Stream("stream ended early".into())),
                }
            }
            match then.as_str() {
                "cancel" => consumer.cancel(),
                "hang" => loop {
                    std::thread::sleep(Duration::from_secs(1));
                },
                "drain" => {
                    for batch in consumer.by_ref() {
                        batch?;
                    }
                }
                other => return Err(BenchError::Args(format!("unknown --then {other:?}"))),
            }
        }
    }
    Ok(())
}

/// Attaches to `name`, retrying while it does not exist yet (the peer creates it).
pub fn attach_retry(name: &str, timeout: Duration) -> Result<Consumer, RingError> {
    let start = Instant::now();
    loop {
        match Consumer::attach(name) {
            Err(RingError::Os { source, .. })
                if source.kind() == io::ErrorKind::NotFound && start.elapsed() < timeout =>
            {
                std::thread::sleep(Duration::from_millis(2));
            }
            other => return other,
        }
    }
}

/// Spin bound of the "spinning" measurements when the process's own is shorter (or
/// off: `RINGSCAN_RING_SPIN_US=0`); the default spin is this long.
const BENCH_SPIN_US: u64 = 20;

/// Sizes of one `bench ring` run.
#[derive(Debug, Clone)]
pub struct RingBenchConfig {
    /// Column bytes per throughput batch (1 MiB).
    pub batch_bytes: usize,
    /// Throughput batches timed per round.
    pub batches: usize,
    /// Throughput rounds. Each times a heap memcpy, a shared-memory memcpy and then the
    /// ring (one producer process for all rounds, paused by the full ring in between),
    /// so that each round's ratios compare measurements a few ms apart, and a shared
    /// machine's load, which comes and goes over seconds, moves them together.
    pub rounds: usize,
    /// Ring data area.
    pub ring_capacity_bytes: usize,
    /// Hand-off samples per hand-off measurement.
    pub handoff_samples: usize,
    /// Producer sleep between idle hand-off samples, so that both sides go idle.
    pub handoff_gap_us: u64,
    /// Spin bound of the waits (both processes) for the awake and idle measurements
    /// (the process's own, or 20 µs if that is off); the asleep one and the
    /// throughput rounds use the process's own.
    pub spin: Duration,
}

impl Default for RingBenchConfig {
    fn default() -> Self {
        Self {
            batch_bytes: 1 << 20,
            batches: 256,
            rounds: 16,
            ring_capacity_bytes: 16 << 20,
            handoff_samples: 4000,
            handoff_gap_us: 200,
            spin: crate::wait_spin().max(Duration::from_micros(BENCH_SPIN_US)),
        }
    }
}

/// Minimum, median and maximum of a few figures.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Spread {
    /// Smallest.
    pub min: f64,
    /// Median (upper median of an even count).
    pub median: f64,
    /// Largest.
    pub max: f64,
}

impl Spread {
    fn of(values: &[f64]) -> Self {
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        Self {
            min: v.first().copied().unwrap_or(f64::NAN),
            median: v.get(v.len() / 2).copied().unwrap_or(f64::NAN),
            max: v.last().copied().unwrap_or(f64::NAN),
        }
    }
}

/// One hand-off measurement.
#[derive(Debug, Clone, Serialize)]
pub struct HandoffFigures {
    /// Spin bound of both sides' waits, µs.
    pub spin_us: f64,
    /// Median one-way latency (push on one side to the batch in hand on the other), µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// Share of the hand-offs that found the consumer asleep in its futex wait.
    pub asleep_fraction: f64,
    /// Median over those that found it asleep, µs (0 if none did).
    pub asleep_p50_us: f64,
    /// Median over those that found it awake (spinning), µs (0 if none did).
    pub awake_p50_us: f64,
}

/// Results of `bench ring`.
#[derive(Debug, Clone, Serialize)]
pub struct RingBenchReport {
    /// Ring throughput per round, GB/s (10^9 bytes of column data per second).
    pub ring_gbps: Vec<f64>,
    /// Single-threaded memcpy bandwidth into a heap buffer as large as the ring, per
    /// round, measured just before the ring.
    pub memcpy_gbps: Vec<f64>,
    /// The same into a shared-memory segment like the ring's (its page size: a heap
    /// buffer may get transparent huge pages, shared memory here does not).
    pub shm_memcpy_gbps: Vec<f64>,
    /// `ring_gbps / memcpy_gbps` per round.
    pub ratios: Vec<f64>,
    /// Spread of `ratios`.
    pub ratio: Spread,
    /// `ring_gbps / shm_memcpy_gbps` per round: the ring's cost over the copy into its
    /// kind of memory.
    pub shm_ratios: Vec<f64>,
    /// Spread of `shm_ratios`.
    pub shm_ratio: Spread,
    /// Active stream with spinning on: each batch is sent as soon as the previous one
    /// was answered (on a second ring), both sides spinning before they sleep.
    pub awake: HandoffFigures,
    /// The same stream with spinning off: every hand-off wakes a sleeping consumer.
    pub asleep: HandoffFigures,
    /// After an idle pause: the producer sleeps `idle_gap_us` before each push, so that
    /// the consumer's spin gives up and it sleeps (blocking when idle).
    pub idle: HandoffFigures,
    /// The pause before each idle hand-off.
    pub idle_gap_us: u64,
    /// The work of one hand-off without the wait: the same one-row batch built,
    /// pushed, imported and dropped by one thread on a ring of its own, in ns; one
    /// figure per block of `handoff_samples` hand-offs. What a hand-off costs on top
    /// of it is the wake-up (or spin) and the scheduling of the two processes.
    pub work_ns: Vec<f64>,
    /// Spread of `work_ns`.
    pub work: Spread,
    /// Column bytes per throughput batch.
    pub batch_bytes: usize,
    /// Throughput batches timed per round.
    pub batches: usize,
    /// Ring data area.
    pub ring_capacity_bytes: usize,
    /// Hand-off samples per measurement.
    pub handoff_samples: usize,
}

/// Runs all measurements. `spawn_peer` starts a process that calls [`peer_main`] with
/// the given arguments; it is killed and reaped if the run fails. Sets this process's
/// spin bound ([`set_wait_spin`](crate::set_wait_spin)) while it runs and restores it.
pub fn run_ring_bench(
    config: &RingBenchConfig,
    spawn_peer: &mut dyn FnMut(&[String]) -> io::Result<Child>,
) -> Result<RingBenchReport, BenchError> {
    if config.batches < 2
        || config.handoff_samples == 0
        || config.batch_bytes < 8
        || config.rounds == 0
        || config.ring_capacity_bytes < config.batch_bytes
    {
        return Err(BenchError::Args("benchmark sizes too small".into()));
    }
    let spin_before = crate::wait_spin();
    let result = run_all(config, spawn_peer);
    crate::set_wait_spin(spin_before);
    result
}

fn run_all(
    config: &RingBenchConfig,
    spawn_peer: &mut dyn FnMut(&[String]) -> io::Result<Child>,
) -> Result<RingBenchReport, BenchError> {
    let rounds = throughput_rounds(config, spawn_peer)?;
    let ring_gbps: Vec<f64> = rounds.iter().map(|r| r.ring_gbps).collect();
    let memcpy_gbps: Vec<f64> = rounds.iter().map(|r| r.memcpy_gbps).collect();
    let shm_memcpy_gbps: Vec<f64> = rounds.iter().map(|r| r.shm_memcpy_gbps).collect();
    let ratios: Vec<f64> = rounds.iter().map(|r| r.ring_gbps / r.memcpy_gbps).collect();
    let shm_ratios: Vec<f64> = rounds
        .iter()
        .map(|r| r.ring_gbps / r.shm_memcpy_gbps)
        .collect();
    let awake = handoff(config, spawn_peer, true, config.spin)?;
    let asleep = handoff(config, spawn_peer, true, Duration::ZERO)?;
    let idle = handoff(config, spawn_peer, false, config.spin)?;
    let work_ns = handoff_work(config)?;
    Ok(RingBenchReport {
        work: Spread::of(&work_ns),
        work_ns,
        ratio: Spread::of(&ratios),
        shm_ratio: Spread::of(&shm_ratios),
        ring_gbps,
        memcpy_gbps,
        shm_memcpy_gbps,
        ratios,
        shm_ratios,
        awake,
        asleep,
        idle,
        idle_gap_us: config.handoff_gap_us,
        batch_bytes: config.batch_bytes,
        batches: config.batches,
        ring_capacity_bytes: config.ring_capacity_bytes,
        handoff_samples: config.handoff_samples,
    })
}

/// Kills and reaps a peer that is still running when dropped, and removes the ring it
/// may have created if it died before we attached.
struct PeerGuard(Child, String);

impl PeerGuard {
    fn wait_success(mut self) -> Result<(), BenchError> {
        let status = self.0.wait().map_err(BenchError::Peer)?;
        if status.success() {
            Ok(())
        } else {
            Err(BenchError::Stream(format!("peer exited with {status}")))
        }
    }
}

impl Drop for PeerGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        crate::remove_stale_rings(&self.1[1..]);
    }
}

/// One throughput round's figures, GB/s.
struct Round {
    ring_gbps: f64,
    memcpy_gbps: f64,
    shm_memcpy_gbps: f64,
}

/// The throughput rounds. One peer pushes every round's batches; between rounds the
/// consumer stops reading, the ring fills and the producer waits. A round times a heap
/// memcpy, a shared-memory memcpy, then the ring: it first reads the batches the
/// ring held (produced while it was not reading, so they would arrive at no cost), then
/// times `batches` more. Round 0 runs on a fresh ring and fresh segment (first-touch
/// page faults included), like a scan's first records on a new ring.
fn throughput_rounds(
    config: &RingBenchConfig,
    spawn_peer: &mut dyn FnMut(&[String]) -> io::Result<Child>,
) -> Result<Vec<Round>, BenchError> {
    let name = unique_name("ringscan-bench");
    // The ring holds fewer whole records than this (each has a header).
    let held = config.ring_capacity_bytes / config.batch_bytes;
    let per_round = held + config.batches;
    let spec = PeerSpec::Throughput {
        name: name.clone(),
        capacity_bytes: config.ring_capacity_bytes,
        batches: config.rounds * per_round,
        batch_bytes: config.batch_bytes,
    };
    let peer = PeerGuard(
        spawn_peer(&spec.to_args()).map_err(BenchError::Peer)?,
        name.clone(),
    );
    let mut consumer = attach_retry(&name, Duration::from_secs(10))?;
    let src: Vec<u8> = (0..config.batch_bytes).map(|i| i as u8).collect();
    let mut heap = HeapDestination::new(config);
    let shm = shm_destination(config)?;
    let mut rounds = Vec::with_capacity(config.rounds);
    for _ in 0..config.rounds {
        let memcpy_gbps = copy_bandwidth(config, &src, |at, src| {
            heap.write(at, src);
            Ok(())
        })?;
        let shm_memcpy_gbps = copy_bandwidth(config, &src, |at, src| {
            shm.write_from(at, src)
                .ok_or_else(|| BenchError::Stream("copy past the segment".into()))
        })?;
        for _ in 0..held {
            next_batch(&mut consumer)?;
        }
        let start = Instant::now();
        let mut bytes = 0u64;
        for _ in 0..config.batches {
            bytes += next_batch(&mut consumer)?;
        }
        let ring_gbps = bytes as f64 / start.elapsed().as_secs_f64() / 1e9;
        rounds.push(Round {
            ring_gbps,
            memcpy_gbps,
            shm_memcpy_gbps,
        });
    }
    if let Some(extra) = consumer.next() {
        return Err(BenchError::Stream(format!(
            "the peer sent more batches than asked for: {:?}",
            extra.map(|b| b.num_rows())
        )));
    }
    peer.wait_success()?;
    Ok(rounds)
}

/// The next batch's column bytes; the batch is dropped (its ring space released).
fn next_batch(consumer: &mut Consumer) -> Result<u64, BenchError> {
    match consumer.next() {
        Some(batch) => Ok(batch?.column(0).to_data().buffers()[0].len() as u64),
        None => Err(BenchError::Stream(
            "the throughput stream ended early".into(),
        )),
    }
}

/// A heap buffer as large as the ring, touched (no page faults timed).
struct HeapDestination(Vec<u8>);

impl HeapDestination {
    fn new(config: &RingBenchConfig) -> Self {
        Self(vec![1u8; config.ring_capacity_bytes])
    }

    fn write(&mut self, at: usize, src: &[u8]) {
        self.0[at..at + src.len()].copy_from_slice(src);
        std::hint::black_box(&mut self.0);
    }
}

/// A fresh shared-memory segment as large as the ring, mapped like the producer's
/// (named, then unlinked at once).
fn shm_destination(config: &RingBenchConfig) -> Result<crate::sys::Mapping, BenchError> {
    let name = unique_name("ringscan-bench");
    let len = config.ring_capacity_bytes;
    let fd = crate::sys::shm_create(&name, len as u64).map_err(BenchError::Peer)?;
    let _ = crate::sys::shm_unlink(&name);
    crate::sys::reserve(&fd, 0, len as u64).map_err(BenchError::Peer)?;
    crate::sys::Mapping::map(&fd, 0, len, true).map_err(BenchError::Peer)
}

/// Copies `src` `config.batches` times with `copy(offset, src)`, cycling through a
/// destination as large as the ring in batch-sized slots; GB/s.
fn copy_bandwidth(
    config: &RingBenchConfig,
    src: &[u8],
    mut copy: impl FnMut(usize, &[u8]) -> Result<(), BenchError>,
) -> Result<f64, BenchError> {
    let slots = (config.ring_capacity_bytes / config.batch_bytes).max(1);
    let start = Instant::now();
    for i in 0..config.batches {
        copy((i % slots) * config.batch_bytes, std::hint::black_box(src))?;
    }
    let elapsed = start.elapsed();
    Ok((config.batches * config.batch_bytes) as f64 / elapsed.as_secs_f64() / 1e9)
}

/// One hand-off run, both sides with spin bound `spin`: `active` paces the producer by
/// the consumer's answers on an echo ring, otherwise by a sleep of `handoff_gap_us`.
fn handoff(
    config: &RingBenchConfig,
    spawn_peer: &mut dyn FnMut(&[String]) -> io::Result<Child>,
    active: bool,
    spin: Duration,
) -> Result<HandoffFigures, BenchError> {
    crate::set_wait_spin(spin);
    let name = unique_name("ringscan-bench");
    let mut echo = if active {
        Some(Producer::create(
            &format!("{name}-echo"),
            timestamp_schema(),
            1 << 20,
        )?)
    } else {
        None
    };
    let spec = PeerSpec::Handoff {
        name: name.clone(),
        capacity_bytes: 1 << 20,
        samples: config.handoff_samples,
        gap_us: config.handoff_gap_us,
        echo: echo.as_ref().map(|e| e.name().to_owned()),
        spin_ns: Some(spin.as_nanos() as u64),
    };
    let peer = PeerGuard(
        spawn_peer(&spec.to_args()).map_err(BenchError::Peer)?,
        name.clone(),
    );
    let mut consumer = attach_retry(&name, Duration::from_secs(10))?;
    let reply = RecordBatch::try_new(
        timestamp_schema(),
        vec![Arc::new(UInt64Array::from(vec![0u64]))],
    )
    .map_err(|e| BenchError::Stream(e.to_string()))?;
    let mut all_ns = Vec::with_capacity(config.handoff_samples);
    let (mut asleep_ns, mut awake_ns) = (Vec::new(), Vec::new());
    let mut waits_before = 0;
    while let Some(batch) = Iterator::next(&mut consumer) {
        let batch = batch?;
        let received = monotonic_ns();
        let sent = batch
            .column(0)
            .as_any()
            .downcast_ref::<UInt64Array>()
            .filter(|a| a.len() == 1)
            .ok_or_else(|| BenchError::Stream("not a one-row timestamp batch".into()))?
            .value(0);
        let ns = received.saturating_sub(sent);
        all_ns.push(ns);
        if consumer.blocked_waits() > waits_before {
            asleep_ns.push(ns);
        } else {
            awake_ns.push(ns);
        }
        waits_before = consumer.blocked_waits();
        drop(batch);
        if let Some(echo) = echo.as_mut() {
            echo.push(&reply)?;
        }
    }
    peer.wait_success()?;
    if all_ns.len() != config.handoff_samples {
        return Err(BenchError::Stream(format!(
            "received {} of {} samples",
            all_ns.len(),
            config.handoff_samples
        )));
    }
    let asleep_fraction = asleep_ns.len() as f64 / all_ns.len() as f64;
    Ok(HandoffFigures {
        spin_us: spin.as_secs_f64() * 1e6,
        p50_us: percentile_us(&mut all_ns, 0.50),
        p99_us: percentile_us(&mut all_ns, 0.99),
        asleep_fraction,
        asleep_p50_us: percentile_us(&mut asleep_ns, 0.50),
        awake_p50_us: percentile_us(&mut awake_ns, 0.50),
    })
}

/// Blocks of hand-offs without a wait: one thread builds each one-row timestamp
/// batch, pushes it, takes it from the consumer and drops it (its space released),
/// on one ring; ns per hand-off, one figure per block.
fn handoff_work(config: &RingBenchConfig) -> Result<Vec<f64>, BenchError> {
    const BLOCKS: usize = 8;
    let schema = timestamp_schema();
    let name = unique_name("ringscan-bench");
    let mut producer = Producer::create(&name, schema.clone(), 1 << 20)?;
    let mut consumer = Consumer::attach(&name)?;
    let mut blocks = Vec::with_capacity(BLOCKS);
    for _ in 0..BLOCKS {
        let start = Instant::now();
        for _ in 0..config.handoff_samples {
            let sent = UInt64Array::from(vec![monotonic_ns()]);
            let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(sent)])
                .map_err(|e| BenchError::Stream(e.to_string()))?;
            producer.push(&batch)?;
            match consumer.try_next()? {
                crate::TryNext::Batch(got) if got.num_rows() == 1 => drop(got),
                other => {
                    return Err(BenchError::Stream(format!(
                        "expected the one-row batch just pushed, got {other:?}"
                    )))
                }
            }
        }
        let ns = start.elapsed().as_nanos() as f64 / config.handoff_samples as f64;
        blocks.push(ns);
    }
    producer.finish()?;
    Ok(blocks)
}

/// The `p` quantile of `ns` in µs (nearest rank); 0 for none.
fn percentile_us(ns: &mut [u64], p: f64) -> f64 {
    if ns.is_empty() {
        return 0.0;
    }
    ns.sort_unstable();
    let ix = ((ns.len() as f64 * p).ceil() as usize).clamp(1, ns.len());
    ns[ix - 1] as f64 / 1000.0
}

/// The report as a small table.
pub fn render_table(r: &RingBenchReport) -> String {
    use std::fmt::Write as _;
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.2}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut out = format!(
        "ring bench ({} rounds x {} x {} KiB batches, ring {} MiB; {} hand-offs each)\n",
        r.ratios.len(),
        r.batches,
        r.batch_bytes / 1024,
        r.ring_capacity_bytes >> 20,
        r.handoff_samples,
    );
    let spread = |s: &Spread| format!("{:.2} / {:.2} / {:.2}", s.min, s.median, s.max);
    for (label, value) in [
        ("ring throughput (GB/s), per round", list(&r.ring_gbps)),
        ("memcpy bandwidth (GB/s), per round", list(&r.memcpy_gbps)),
        (
            "shm memcpy bandwidth (GB/s), per round",
            list(&r.shm_memcpy_gbps),
        ),
        ("ratio ring / memcpy, per round", list(&r.ratios)),
        ("ratio min / median / max", spread(&r.ratio)),
        ("ratio ring / shm memcpy, per round", list(&r.shm_ratios)),
        ("ratio to shm min / median / max", spread(&r.shm_ratio)),
    ] {
        let _ = writeln!(out, "{label:<40} {value}");
    }
    let _ = writeln!(
        out,
        "{:<40} {:.2} / {:.2} / {:.2}",
        "hand-off work, no wait (us): min / median / max",
        r.work.min / 1000.0,
        r.work.median / 1000.0,
        r.work.max / 1000.0
    );
    let _ = writeln!(
        out,
        "{:<40} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "hand-off (us)", "spin", "p50", "p99", "asleep", "p50 slp", "p50 awk"
    );
    for (label, h) in [
        ("active, spinning", &r.awake),
        ("active, no spin (asleep)", &r.asleep),
        (&*format!("idle ({} us gap)", r.idle_gap_us), &r.idle),
    ] {
        let _ = writeln!(
            out,
            "{:<40} {:>8.1} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2}",
            label,
            h.spin_us,
            h.p50_us,
            h.p99_us,
            h.asleep_fraction,
            h.asleep_p50_us,
            h.awake_p50_us
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_specs_round_trip_through_args() {
        let specs = [
            PeerSpec::Throughput {
                name: "/a".into(),
                capacity_bytes: 4096,
                batches: 3,
                batch_bytes: 64,
            },
            PeerSpec::Handoff {
                name: "/b".into(),
                capacity_bytes: 8192,
                samples: 5,
                gap_us: 7,
                echo: None,
                spin_ns: None,
            },
            PeerSpec::Handoff {
                name: "/b".into(),
                capacity_bytes: 8192,
                samples: 5,
                gap_us: 0,
                echo: Some("/e".into()),
                spin_ns: Some(5000),
            },
            PeerSpec::SlowProducer {
                name: "/c".into(),
                interval_ms: 9,
            },
            PeerSpec::Consumer {
                name: "/d".into(),
                read: 2,
                then: "hang".into(),
            },
        ];
        for spec in specs {
            assert_eq!(PeerSpec::parse(&spec.to_args()).unwrap(), spec);
        }
        assert!(PeerSpec::parse(&["nope".into()]).is_err());
        assert!(PeerSpec::parse(&["consumer".into(), "--name".into()]).is_err());
    }
}
