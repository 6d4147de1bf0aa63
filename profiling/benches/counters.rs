//! Cost of counting one stage or run: the budget is 10 µs for setup plus read,
//! so that wrapping a 1 ms query costs at most 1 %.
//!
//! - `span`: start + stop on counters opened once (the reads alone);
//! - `open_span`: open all counters, start, stop, close (what a run paid before the
//!   counters were pooled: `RunRecorder`, and each daemon scan before its thread pool);
//! - `open`: the open alone (the close happens outside the timing);
//! - `pooled_span`: take the thread's kept counters, start, stop, give them back (what a
//!   run pays now, after its thread's first).
//!
//! `cargo bench -p ringscan-profiling --bench counters`; results in
//! benches/results/counters.md.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use ringscan_profiling::{CounterScope, Counters};

fn counters(c: &mut Criterion) {
    for (name, scope) in [
        ("thread", CounterScope::Thread),
        ("process", CounterScope::Process),
    ] {
        let mut counters = Counters::open(scope);
        c.bench_function(&format!("span/{name}"), |b| {
            b.iter(|| black_box(counters.start().stop()))
        });
        drop(counters);
        c.bench_function(&format!("open_span/{name}"), |b| {
            b.iter(|| {
                let mut counters = Counters::open(scope);
                black_box(counters.start().stop())
            })
        });
        c.bench_function(&format!("open/{name}"), |b| {
            b.iter_batched(|| (), |()| Counters::open(scope), BatchSize::PerIteration)
        });
        c.bench_function(&format!("pooled_span/{name}"), |b| {
            b.iter(|| {
                let mut counters = Counters::pooled(scope);
                black_box(counters.start().stop())
            })
        });
    }
}

criterion_group!(benches, counters);
criterion_main!(benches);
