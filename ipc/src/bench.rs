//! The cross-process ring benchmark (`ringscan bench ring`) and the peer process it,
//! and this crate's cross-process tests, spawn.
//!
//! The measuring process is the consumer (the executor's role); the spawned peer is
//! the producer (the daemon's role). Two measurements, one run:
//!
//! - **Throughput**: the peer pushes the same 1 MiB batch (one `Int64` column) over and
//!   over; the consumer imports each zero-copy and drops it. GB/s = column bytes
//!   received / time from the first to the last batch. Next to it, single-threaded
//!   `memcpy` bandwidth measured the same way: the same 1 MiB source copied into a
//!   destination as large as the ring, cycling through it, as many times.
//! - **Hand-off latency**: the peer pushes a one-row batch carrying its
//!   `CLOCK_MONOTONIC` time, then sleeps, so the consumer is blocked in its futex wait
//!   each time; the consumer subtracts that from its own clock on receipt. This is
//!   encode + copy + publish + wake-up + import, one way.
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
            } => (
                "handoff",
                kv(&[
                    ("name", name.clone()),
                    ("capacity", capacity_bytes.to_string()),
                    ("samples", samples.to_string()),
                    ("gap-us", gap_us.to_string()),
                    ("echo", echo.clone().unwrap_or_else(|| "-".into())),
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
        } => {
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

/// Sizes of one `bench ring` run.
#[derive(Debug, Clone)]
pub struct RingBenchConfig {
    /// Column bytes per throughput batch (1 MiB).
    pub batch_bytes: usize,
    /// Throughput batches.
    pub batches: usize,
    /// Ring data area.
    pub ring_capacity_bytes: usize,
    /// Hand-off samples.
    pub handoff_samples: usize,
    /// Producer sleep between hand-off samples, so that the consumer blocks each time.
    pub handoff_gap_us: u64,
}

impl Default for RingBenchConfig {
    fn default() -> Self {
        Self {
            batch_bytes: 1 << 20,
            batches: 4096,
            ring_capacity_bytes: 16 << 20,
            handoff_samples: 4000,
            handoff_gap_us: 200,
        }
    }
}

/// Results of `bench ring`.
#[derive(Debug, Clone, Serialize)]
pub struct RingBenchReport {
    /// Ring throughput, GB/s (10^9 bytes of column data per second).
    pub ring_gbps: f64,
    /// Single-threaded memcpy bandwidth measured the same way, GB/s.
    pub memcpy_gbps: f64,
    /// `ring_gbps / memcpy_gbps`.
    pub ratio: f64,
    /// Median one-way hand-off latency, µs, on an active stream: each batch is sent as
    /// soon as the previous one was answered, and the consumer is blocked in its futex
    /// wait when it arrives (see `handoff_blocked_fraction`).
    pub handoff_p50_us: f64,
    /// 99th percentile of the same, µs.
    pub handoff_p99_us: f64,
    /// Share of those hand-offs that found the consumer asleep in the futex.
    pub handoff_blocked_fraction: f64,
    /// Median over only the hand-offs that found the consumer asleep, µs.
    pub handoff_asleep_p50_us: f64,
    /// Median one-way hand-off latency, µs, after an idle pause: the producer sleeps
    /// `idle_gap_us` before each push, so both CPUs have gone idle.
    pub idle_handoff_p50_us: f64,
    /// 99th percentile of the same, µs.
    pub idle_handoff_p99_us: f64,
    /// The pause before each idle hand-off.
    pub idle_gap_us: u64,
    /// Column bytes per throughput batch.
    pub batch_bytes: usize,
    /// Throughput batches.
    pub batches: usize,
    /// Ring data area.
    pub ring_capacity_bytes: usize,
    /// Hand-off samples.
    pub handoff_samples: usize,
}

/// Runs both measurements. `spawn_peer` starts a process that calls [`peer_main`] with
/// the given arguments; it is killed and reaped if the run fails.
pub fn run_ring_bench(
    config: &RingBenchConfig,
    spawn_peer: &mut dyn FnMut(&[String]) -> io::Result<Child>,
) -> Result<RingBenchReport, BenchError> {
    if config.batches < 2 || config.handoff_samples == 0 || config.batch_bytes < 8 {
        return Err(BenchError::Args("benchmark sizes too small".into()));
    }
    let ring_gbps = ring_throughput(config, spawn_peer)?;
    let memcpy_gbps = memcpy_bandwidth(config);
    let (mut active_ns, mut asleep_ns) = handoff(config, spawn_peer, true)?;
    let (mut idle_ns, _) = handoff(config, spawn_peer, false)?;
    active_ns.sort_unstable();
    asleep_ns.sort_unstable();
    idle_ns.sort_unstable();
    let blocked = asleep_ns.len();
    if asleep_ns.is_empty() {
        asleep_ns.push(0);
    }
    let pct = |v: &[u64], p: f64| {
        let ix = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len());
        v[ix - 1] as f64 / 1000.0
    };
    Ok(RingBenchReport {
        ring_gbps,
        memcpy_gbps,
        ratio: ring_gbps / memcpy_gbps,
        handoff_p50_us: pct(&active_ns, 0.50),
        handoff_p99_us: pct(&active_ns, 0.99),
        handoff_blocked_fraction: blocked as f64 / active_ns.len() as f64,
        handoff_asleep_p50_us: pct(&asleep_ns, 0.50),
        idle_handoff_p50_us: pct(&idle_ns, 0.50),
        idle_handoff_p99_us: pct(&idle_ns, 0.99),
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

fn ring_throughput(
    config: &RingBenchConfig,
    spawn_peer: &mut dyn FnMut(&[String]) -> io::Result<Child>,
) -> Result<f64, BenchError> {
    let name = unique_name("ringscan-bench");
    let spec = PeerSpec::Throughput {
        name: name.clone(),
        capacity_bytes: config.ring_capacity_bytes,
        batches: config.batches,
        batch_bytes: config.batch_bytes,
    };
    let peer = PeerGuard(
        spawn_peer(&spec.to_args()).map_err(BenchError::Peer)?,
        name.clone(),
    );
    let consumer = attach_retry(&name, Duration::from_secs(10))?;
    let mut first: Option<Instant> = None;
    let mut bytes = 0u64;
    let mut count = 0usize;
    for batch in consumer {
        let batch = batch?;
        let column_bytes = batch.column(0).to_data().buffers()[0].len() as u64;
        if first.is_none() {
            first = Some(Instant::now());
        } else {
            bytes += column_bytes;
        }
        count += 1;
    }
    let elapsed = first.map(|t| t.elapsed()).unwrap_or_default();
    peer.wait_success()?;
    if count != config.batches {
        return Err(BenchError::Stream(format!(
            "received {count} of {} batches",
            config.batches
        )));
    }
    Ok(bytes as f64 / elapsed.as_secs_f64() / 1e9)
}

fn memcpy_bandwidth(config: &RingBenchConfig) -> f64 {
    let src: Vec<u8> = (0..config.batch_bytes).map(|i| i as u8).collect();
    // Same footprint as the ring: the destination cycles through the ring's capacity.
    let slots = (config.ring_capacity_bytes / config.batch_bytes).max(1);
    let mut dst = vec![1u8; slots * config.batch_bytes]; // touched: no page faults timed
    let start = Instant::now();
    for i in 0..config.batches - 1 {
        let at = (i % slots) * config.batch_bytes;
        dst[at..at + config.batch_bytes].copy_from_slice(&src);
        std::hint::black_box(&mut dst);
    }
    let elapsed = start.elapsed();
    ((config.batches - 1) * config.batch_bytes) as f64 / elapsed.as_secs_f64() / 1e9
}

/// One hand-off run: returns all latencies, and those of the hand-offs that found the
/// consumer asleep.
fn handoff(
    config: &RingBenchConfig,
    spawn_peer: &mut dyn FnMut(&[String]) -> io::Result<Child>,
    active: bool,
) -> Result<(Vec<u64>, Vec<u64>), BenchError> {
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
    let mut latencies_ns = Vec::with_capacity(config.handoff_samples);
    let mut asleep_ns = Vec::new();
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
        latencies_ns.push(received.saturating_sub(sent));
        if consumer.blocked_waits() > waits_before {
            asleep_ns.push(received.saturating_sub(sent));
        }
        waits_before = consumer.blocked_waits();
        drop(batch);
        if let Some(echo) = echo.as_mut() {
            echo.push(&reply)?;
        }
    }
    peer.wait_success()?;
    if latencies_ns.len() != config.handoff_samples {
        return Err(BenchError::Stream(format!(
            "received {} of {} samples",
            latencies_ns.len(),
            config.handoff_samples
        )));
    }
    Ok((latencies_ns, asleep_ns))
}

/// The report as a small table.
pub fn render_table(r: &RingBenchReport) -> String {
    format!(
        "ring bench ({} x {} KiB batches, ring {} MiB; {} hand-offs)\n\
         {:<36} {:>10}\n\
         {:<36} {:>10.2}\n\
         {:<36} {:>10.2}\n\
         {:<36} {:>10.2}\n\
         {:<36} {:>10.2}\n\
         {:<36} {:>10.2}\n\
         {:<36} {:>10.2}\n\
         {:<36} {:>10.2}\n\
         {:<36} {:>10.2}\n\
         {:<36} {:>10.2}\n",
        r.batches,
        r.batch_bytes / 1024,
        r.ring_capacity_bytes >> 20,
        r.handoff_samples,
        "metric",
        "value",
        "ring throughput (GB/s)",
        r.ring_gbps,
        "memcpy bandwidth (GB/s)",
        r.memcpy_gbps,
        "ratio ring / memcpy",
        r.ratio,
        "hand-off p50 (us)",
        r.handoff_p50_us,
        "hand-off p99 (us)",
        r.handoff_p99_us,
        "hand-off asleep fraction",
        r.handoff_blocked_fraction,
        "hand-off p50, asleep only (us)",
        r.handoff_asleep_p50_us,
        format!("idle hand-off p50 (us, {} us gap)", r.idle_gap_us),
        r.idle_handoff_p50_us,
        "idle hand-off p99 (us)",
        r.idle_handoff_p99_us,
    )
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
            },
            PeerSpec::Handoff {
                name: "/b".into(),
                capacity_bytes: 8192,
                samples: 5,
                gap_us: 0,
                echo: Some("/e".into()),
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
