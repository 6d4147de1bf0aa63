//! Ring push and pop in one process (no peer wake-ups on the measured path beyond the
//! futex words): one 64 Ki-row batch of two columns pushed, then popped and dropped
//! (releasing its space), per iteration. The cross-process figure is `ringscan bench
//! ring`.
//!
//! `cargo bench -p ringscan-benches --bench ring`

use std::hint::black_box;
use std::sync::Arc;

use arrow_array::{Float64Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ringscan_ipc::{unique_name, Consumer, Producer, TryNext};

fn push_pop(c: &mut Criterion) {
    let mut group = c.benchmark_group("ring");
    for rows in [1_024usize, 65_536] {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("v", DataType::Float64, false),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from_iter_values(0..rows as i64)),
                Arc::new(Float64Array::from_iter_values((0..rows).map(|i| i as f64))),
            ],
        )
        .expect("batch");
        let name = unique_name("bench");
        let mut producer = Producer::create(&name, schema, 64 << 20).expect("create ring");
        let mut consumer = Consumer::attach(&name).expect("attach ring");
        group.throughput(Throughput::Bytes((rows * 16) as u64));
        group.bench_function(format!("push_pop/{rows}_rows"), |b| {
            b.iter(|| {
                producer.push(black_box(&batch)).expect("push");
                loop {
                    match consumer.try_next().expect("pop") {
                        TryNext::Batch(got) => {
                            black_box(got.num_rows());
                            break;
                        }
                        TryNext::Empty => continue,
                        TryNext::End => panic!("ring ended early"),
                    }
                }
            })
        });
        producer.finish().expect("finish");
    }
    group.finish();
}

criterion_group!(benches, push_pop);
criterion_main!(benches);
