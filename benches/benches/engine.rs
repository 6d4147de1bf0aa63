//! What a SQL query costs outside its scan, on the DataFusion engine over an in-process
//! IO daemon: planning from SQL text (parse, plan, optimize, physical plan) against a
//! cached logical plan, a result-cache hit, and a whole point query (plan, daemon round
//! trip, ring, one row out) with the result cache off.
//!
//! `cargo bench -p ringscan-benches --bench engine`
#![allow(missing_docs)]

use std::fs::File;
use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::{Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use criterion::{criterion_group, criterion_main, Criterion};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use ringscan_executor::engine::{EngineOptions, SqlSession};
use ringscan_io_daemon::server::{self, DaemonConfig};

const ROWS: i64 = 1_000_000;
const SYMBOLS: i64 = 500;

const QUERIES: [(&str, &str); 3] = [
    (
        "aggregate",
        "SELECT symbol, count(*) AS n, avg(close) AS c FROM ticks WHERE volume > 500000 \
         GROUP BY symbol ORDER BY symbol",
    ),
    (
        "join",
        "SELECT s.sector, sum(t.volume) AS v FROM ticks t JOIN symbols s ON t.symbol = s.symbol \
         WHERE t.close > 900 GROUP BY s.sector ORDER BY v DESC LIMIT 5",
    ),
    ("point", "SELECT * FROM ticks WHERE id = 123457"),
];

fn write(path: &Path, batch: &RecordBatch, row_group_rows: usize) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(row_group_rows))
        .build();
    let mut writer = ArrowWriter::try_new(
        File::create(path).expect("create"),
        batch.schema(),
        Some(props),
    )
    .expect("writer");
    writer.write(batch).expect("write");
    writer.close().expect("close");
}

/// `ticks` (id, symbol, close, volume; 1M rows in 10 row groups, sorted by id) and
/// `symbols` (symbol, sector; 500 rows).
fn write_data(data: &Path) {
    let symbol = |i: i64| format!("S{:03}", i % SYMBOLS);
    let ticks = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("symbol", DataType::Utf8, false),
            Field::new("close", DataType::Float64, false),
            Field::new("volume", DataType::Int64, false),
        ])),
        vec![
            Arc::new((0..ROWS).collect::<Int64Array>()),
            Arc::new(
                (0..ROWS)
                    .map(|i| Some(symbol(i * 7)))
                    .collect::<StringArray>(),
            ),
            Arc::new(
                (0..ROWS)
                    .map(|i| (i * 7919 % 100_000) as f64 / 100.0)
                    .collect::<Float64Array>(),
            ),
            Arc::new(
                (0..ROWS)
                    .map(|i| i * 104_729 % 1_000_000)
                    .collect::<Int64Array>(),
            ),
        ],
    )
    .expect("ticks");
    write(&data.join("ticks/part-0.parquet"), &ticks, 100_000);
    let symbols = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("symbol", DataType::Utf8, false),
            Field::new("sector", DataType::Utf8, false),
        ])),
        vec![
            Arc::new(
                (0..SYMBOLS)
                    .map(|i| Some(symbol(i)))
                    .collect::<StringArray>(),
            ),
            Arc::new(
                (0..SYMBOLS)
                    .map(|i| Some(format!("sector{}", i % 11)))
                    .collect::<StringArray>(),
            ),
        ],
    )
    .expect("symbols");
    write(&data.join("symbols/part-0.parquet"), &symbols, 1_000);
}

/// A session on `data`, whose daemon runs on a thread of this process.
fn session(data: &Path, plan_cache_bytes: usize) -> SqlSession {
    let dir = data.to_path_buf();
    let spawn = move || {
        let mut config = DaemonConfig::new(dir.clone());
        config.idle_timeout = Duration::from_secs(600);
        std::thread::spawn(move || {
            if let Err(e) = server::run(config) {
                eprintln!("daemon: {e}");
            }
        });
        Ok(())
    };
    let options = EngineOptions {
        plan_cache_bytes,
        ..EngineOptions::default()
    };
    SqlSession::open(data, &spawn, &options).expect("open session")
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    write_data(data);
    let mut cached = session(data, 8 << 20);
    // The daemon is up: this one finds it.
    let mut uncached = session(data, 0);
    let mut group = c.benchmark_group("engine");
    for (name, sql) in QUERIES {
        // Warm the daemon's footer cache and the plan and result caches.
        cached.query(sql, true).expect("query");
        group.bench_function(format!("plan_from_sql/{name}"), |b| {
            b.iter(|| black_box(uncached.physical_plan(sql).expect("plan")));
        });
        group.bench_function(format!("plan_cached/{name}"), |b| {
            b.iter(|| black_box(cached.physical_plan(sql).expect("plan")));
        });
        group.bench_function(format!("result_cache_hit/{name}"), |b| {
            b.iter(|| {
                let outcome = cached.query(sql, true).expect("query");
                assert!(outcome.result_hit);
                black_box(outcome)
            });
        });
    }
    group.bench_function("query_no_result_cache/point", |b| {
        b.iter(|| black_box(cached.query(QUERIES[2].1, false).expect("query")));
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
