//! One full scan of Parquet files, repeated, for A/B measurements that must hold up on a
//! shared machine: prints each run's wall time and the process's CPU time (user + system,
//! from `getrusage` via /proc) per run, so a run slowed by another process's load shows
//! as wall time, not as CPU time.
//!
//! `cargo run --release -p ringscan-io-daemon --example full_scan -- MODE RUNS FILE...`
//! where MODE is `plain` (parquet's `ParquetRecordBatchReader`, one thread) or
//! `pread1`, `pread2`, `mmap1`, `mmap2` (ringscan's scan, that many threads).

use std::fs::File;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Instant;

use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use ringscan_io_daemon::scan::{scan_files, IoMode, MetadataCache, ScanSpec};

/// This process's CPU time so far, in milliseconds (utime + stime from /proc).
fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields 14 and 15 of stat; `after` starts at field 3.
    (ticks(11) + ticks(12)) * 10.0
}

fn plain(files: &[PathBuf]) -> usize {
    let mut rows = 0;
    for f in files {
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(f).expect("open"))
            .expect("builder")
            .with_batch_size(8192)
            .build()
            .expect("reader");
        for b in reader {
            rows += b.expect("batch").num_rows();
        }
    }
    rows
}

fn ringscan(files: &[PathBuf], threads: usize, io: IoMode, cache: &MetadataCache) -> usize {
    let spec = ScanSpec::new(Path::new("/"), files)
        .with_threads(threads)
        .with_io(io);
    let mut rows = 0;
    scan_files(&spec, cache, &mut |b| {
        rows += b.num_rows();
        Ok(true)
    })
    .expect("scan");
    rows
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(mode), Some(runs)) = (
        args.first(),
        args.get(1).and_then(|r| r.parse::<usize>().ok()),
    ) else {
        eprintln!("usage: full_scan plain|pread1|pread2|mmap1|mmap2 RUNS FILE...");
        std::process::exit(2);
    };
    let files: Vec<PathBuf> = args[2..]
        .iter()
        .map(|f| std::fs::canonicalize(f).unwrap_or_else(|_| PathBuf::from(f)))
        .collect();
    let cache = MetadataCache::new(64 << 20);
    let run = || match mode.as_str() {
        "plain" => plain(&files),
        "pread1" => ringscan(&files, 1, IoMode::Pread, &cache),
        "pread2" => ringscan(&files, 2, IoMode::Pread, &cache),
        "mmap1" => ringscan(&files, 1, IoMode::Mmap, &cache),
        "mmap2" => ringscan(&files, 2, IoMode::Mmap, &cache),
        other => {
            eprintln!("unknown mode {other}");
            std::process::exit(2);
        }
    };
    black_box(run()); // warm-up: page cache, footer cache
    let mut walls = Vec::with_capacity(runs);
    let cpu0 = cpu_ms();
    for _ in 0..runs {
        let t = Instant::now();
        black_box(run());
        walls.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let cpu = (cpu_ms() - cpu0) / runs as f64;
    walls.sort_by(f64::total_cmp);
    println!(
        "{mode}: wall p50 {:.1} ms (min {:.1}), cpu {:.1} ms per run over {runs} runs",
        walls[walls.len() / 2],
        walls[0],
        cpu
    );
}
