//! The pruning decision: row groups from column-chunk statistics and pages from the page
//! index, on a real ohlcv file's metadata (100 row groups of 10,000 bars), for a
//! selective, a half and a two-column predicate.
//!
//! `cargo bench -p ringscan-benches --bench prune`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::file::metadata::PageIndexPolicy;
use ringscan_generator::{generate, DatasetKind, GenerateOptions};
use ringscan_io_daemon::prune::{page_filter, row_group_filter};
use ringscan_ipc::msg::{CmpOp, Literal, Predicate};

fn metadata() -> (
    tempfile::TempDir,
    std::sync::Arc<parquet::file::metadata::ParquetMetaData>,
) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut opts = GenerateOptions::new(DatasetKind::Ohlcv, dir.path().join("ohlcv"));
    opts.rows = 1_000_000;
    opts.symbols = 1;
    opts.writers = 1;
    opts.row_group_rows = 10_000;
    opts.page_rows = 1_000;
    let summary = generate(&opts, &|_| {}).expect("generate ohlcv");
    let path = &summary.files[0].path;
    let file = std::fs::File::open(path).expect("open");
    let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
    let meta = ArrowReaderMetadata::load(&file, options).expect("metadata");
    (dir, std::sync::Arc::clone(meta.metadata()))
}

fn pruning(c: &mut Criterion) {
    let (_dir, meta) = metadata();
    let close = |op, v| Predicate::compare("close", op, Literal::Float(v));
    let predicates = [
        ("close_ge_490", close(CmpOp::GtEq, 490.0)),
        ("close_ge_450", close(CmpOp::GtEq, 450.0)),
        (
            "close_and_volume",
            Predicate::And(vec![
                close(CmpOp::GtEq, 450.0),
                Predicate::compare("volume", CmpOp::GtEq, Literal::Int(5_000)),
            ]),
        ),
    ];
    let mut group = c.benchmark_group("prune");
    for (name, pred) in &predicates {
        group.bench_function(format!("row_groups/{name}"), |b| {
            b.iter(|| black_box(row_group_filter(&meta, black_box(pred)).expect("prune")))
        });
        let groups: Vec<usize> = (0..meta.num_row_groups()).collect();
        group.bench_function(format!("pages/{name}"), |b| {
            b.iter(|| black_box(page_filter(&meta, black_box(pred), &groups).expect("pages")))
        });
    }
    group.finish();
}

criterion_group!(benches, pruning);
criterion_main!(benches);
