//! Plain ranged GETs of whole objects through ringscan's S3 client, no decoding: the
//! baseline of `benches/object_storage/run --throughput` (issue 20's target: a cold full
//! scan at 80% of this throughput or more, with the same concurrency).
//!
//! `s3_get CONCURRENCY PART_BYTES URL...` cuts each object into parts of `PART_BYTES`,
//! keeps `CONCURRENCY` of them in flight (one thread each, blocking on the client's own
//! runtime, as the scan's workers do) and prints one JSON line: bytes fetched, requests,
//! and the wall time from the first request to the last byte. Endpoint and credentials
//! come from the `AWS_*` variables, as the daemon's do.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use ringscan_io_daemon::storage::{object_root, ByteRangeSource, ObjectSource};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: s3_get CONCURRENCY PART_BYTES s3://bucket/key...";
    let (Some(concurrency), Some(part_bytes)) = (
        args.first().and_then(|a| a.parse::<usize>().ok()),
        args.get(1).and_then(|a| a.parse::<u64>().ok()),
    ) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let urls = &args[2..];
    if urls.is_empty() || concurrency == 0 || part_bytes == 0 {
        eprintln!("{usage}");
        std::process::exit(2);
    }
    // Opening takes a HEAD per object (a scan's listing gives it the versions): not timed.
    let sources: Vec<Arc<ObjectSource>> = urls
        .iter()
        .map(|url| {
            let root = object_root(url).unwrap_or_else(|e| fail(&e.to_string()));
            Arc::new(root.open(url).unwrap_or_else(|e| fail(&e.to_string())))
        })
        .collect();
    let mut parts = Vec::new();
    for (i, source) in sources.iter().enumerate() {
        let mut at = 0;
        while at < source.len() {
            let end = source.len().min(at + part_bytes);
            parts.push((i, at..end));
            at = end;
        }
    }
    let next = AtomicUsize::new(0);
    let fetched = AtomicU64::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..concurrency.min(parts.len()) {
            scope.spawn(|| {
                while let Some((i, range)) = parts.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let bytes = sources[*i]
                        .read_range(range.clone())
                        .unwrap_or_else(|e| fail(&e.to_string()));
                    fetched.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                }
            });
        }
    });
    let wall_us = started.elapsed().as_micros();
    println!(
        "{{\"bytes\": {}, \"requests\": {}, \"wall_us\": {wall_us}}}",
        fetched.load(Ordering::Relaxed),
        parts.len()
    );
}

fn fail(message: &str) -> ! {
    eprintln!("s3_get: {message}");
    std::process::exit(1);
}
