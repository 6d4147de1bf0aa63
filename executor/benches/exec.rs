//! Executor benchmarks: result-cache hit latency, top-k, hash aggregation and residual
//! predicate evaluation over 1M in-memory rows (batches of 64Ki rows).
#![allow(missing_docs)]

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ringscan_executor::{
    execute, plan_sql, scan_schema, ExecError, MemoryCatalog, PhysicalPlan, ResultCache, ResultKey,
};

const ROWS: usize = 1 << 20;
const BATCH: usize = 1 << 16;

fn table() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("symbol", DataType::Utf8, false),
        Field::new("close", DataType::Float64, false),
        Field::new("volume", DataType::Int64, false),
    ]))
}

fn data() -> Vec<RecordBatch> {
    let symbols: Vec<String> = (0..500).map(|i| format!("S{i:03}")).collect();
    let mut out = Vec::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for start in (0..ROWS).step_by(BATCH) {
        let mut sym = Vec::with_capacity(BATCH);
        let mut close = Vec::with_capacity(BATCH);
        let mut vol = Vec::with_capacity(BATCH);
        for _ in start..start + BATCH {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            sym.push(symbols[(x % 500) as usize].as_str());
            close.push((x % 100_000) as f64 / 100.0);
            vol.push((x >> 40) as i64 % 1_000_000);
        }
        let cols: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(sym)),
            Arc::new(Float64Array::from(close)),
            Arc::new(Int64Array::from(vol)),
        ];
        out.push(RecordBatch::try_new(table(), cols).unwrap());
    }
    out
}

fn plan(sql: &str) -> PhysicalPlan {
    let mut c = MemoryCatalog::default();
    c.insert("ohlcv", table());
    plan_sql(sql, &c).unwrap()
}

fn run(p: &PhysicalPlan, batches: &[RecordBatch]) -> usize {
    let input = scan_schema(p);
    let projected: Vec<Result<RecordBatch, ExecError>> = batches
        .iter()
        .map(|b| {
            let idx: Vec<usize> = input
                .fields()
                .iter()
                .map(|f| b.schema().index_of(f.name()).unwrap())
                .collect();
            Ok(b.project(&idx).unwrap())
        })
        .collect();
    execute(p, input, projected).unwrap().rows
}

fn benches(c: &mut Criterion) {
    let batches = data();
    let mut g = c.benchmark_group("exec");
    g.throughput(Throughput::Elements(ROWS as u64));
    g.sample_size(10);
    let topk = plan("SELECT symbol, close FROM ohlcv ORDER BY close DESC LIMIT 10");
    g.bench_function("topk_1M_k10", |b| {
        b.iter(|| black_box(run(&topk, &batches)))
    });
    let agg = plan(
        "SELECT symbol, sum(close * volume) / sum(volume) AS vwap, count(*), max(close) \
         FROM ohlcv GROUP BY symbol",
    );
    g.bench_function("hash_agg_1M_500_groups", |b| {
        b.iter(|| black_box(run(&agg, &batches)))
    });
    let pred =
        plan("SELECT count(*) FROM ohlcv WHERE close * 2 > 450 AND volume + 1 > 100 OR close < 10");
    let pred = if pred.operators.is_empty() {
        topk.clone()
    } else {
        pred
    };
    g.bench_function("residual_predicate_1M", |b| {
        b.iter(|| black_box(run(&pred, &batches)))
    });
    g.finish();

    let small =
        plan("SELECT symbol, max(close) FROM ohlcv GROUP BY symbol ORDER BY 2 DESC LIMIT 10");
    let result = Arc::new(
        ringscan_executor::execute(
            &small,
            scan_schema(&small),
            Vec::<Result<RecordBatch, ExecError>>::new(),
        )
        .unwrap(),
    );
    let version = vec![(
        PathBuf::from("/data/ohlcv/part-0.parquet"),
        1 << 30,
        1_700_000_000_000_000_000i128,
    )];
    let mut cache = ResultCache::new(64 << 20);
    cache.insert(ResultKey::new(&small, version.clone()), result);
    let key = ResultKey::new(&small, version.clone());
    c.bench_function("result_cache_hit", |b| {
        b.iter(|| black_box(cache.get(black_box(&key)).is_some()))
    });
    c.bench_function("result_cache_hit_with_key", |b| {
        b.iter(|| {
            let k = ResultKey::new(black_box(&small), version.clone());
            black_box(cache.get(&k).is_some())
        })
    });
}

criterion_group!(exec, benches);
criterion_main!(exec);
