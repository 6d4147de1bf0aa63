//! The generator's stages, measured apart: value generation (counter-based RNG and
//! Zipf draws), batch building (arrow arrays from the values), and Parquet encoding
//! (ArrowWriter with the run's properties, into memory).
//!
//! `cargo bench -p ringscan-benches --bench generator`

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use ringscan_generator::rng::RowRng;
use ringscan_generator::zipf::Zipf;
use ringscan_generator::{DatasetKind, GenerateOptions};

const ROWS: usize = 65_536;

fn value_generation(c: &mut Criterion) {
    let mut group = c.benchmark_group("values");
    group.throughput(Throughput::Elements(ROWS as u64));
    let zipf = Zipf::new(1 << 16, 1.05);
    group.bench_function("row_rng_8_draws", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for row in 0..ROWS as u64 {
                let mut rng = RowRng::for_row(42, 1, row);
                for _ in 0..8 {
                    acc ^= rng.next_u64();
                }
            }
            black_box(acc)
        })
    });
    group.bench_function("zipf_64k_ranks", |b| {
        let mut rng = RowRng::for_row(42, 2, 0);
        b.iter(|| {
            let mut acc = 0usize;
            for _ in 0..ROWS {
                acc = acc.wrapping_add(zipf.sample(rng.next_u64()));
            }
            black_box(acc)
        })
    });
    group.finish();
}

fn datasets() -> Vec<(&'static str, ringscan_generator::DatasetRef)> {
    [DatasetKind::Ohlcv, DatasetKind::Contacts, DatasetKind::Wide]
        .into_iter()
        .map(|kind| {
            let mut opts = GenerateOptions::new(kind, "unused".into());
            opts.rows = 10 * ROWS as u64;
            (kind.name(), opts.build_dataset())
        })
        .collect()
}

fn batch_building(c: &mut Criterion) {
    let mut group = c.benchmark_group("build_batch");
    group.throughput(Throughput::Elements(ROWS as u64));
    for (name, dataset) in datasets() {
        group.bench_function(name, |b| {
            b.iter(|| black_box(dataset.batch(ROWS as u64, ROWS).expect("batch builds")))
        });
    }
    group.finish();
}

fn encoding(c: &mut Criterion) {
    let mut group = c.benchmark_group("encode_parquet");
    group.throughput(Throughput::Elements(ROWS as u64));
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_max_row_group_row_count(Some(131_072))
        .set_data_page_row_count_limit(10_000)
        .build();
    for (name, dataset) in datasets() {
        let batch = dataset.batch(0, ROWS).expect("batch builds");
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut writer = ArrowWriter::try_new(
                    Vec::with_capacity(8 << 20),
                    batch.schema(),
                    Some(props.clone()),
                )
                .expect("writer opens");
                writer.write(&batch).expect("batch encodes");
                black_box(writer.into_inner().expect("writer closes").len())
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3)).sample_size(20);
    targets = value_generation, batch_building, encoding
}
criterion_main!(benches);
