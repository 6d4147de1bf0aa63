//! Cost of counting one stage: the budget is 10 µs for setup plus read, so that
//! wrapping a 1 ms query costs at most 1 %.
//!
//! `span`: start + stop on counters opened once (what a stage pays per query);
//! `open_span`: open all counters, start, stop, close (a stage that opens its own).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
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
        c.bench_function(&format!("open_span/{name}"), |b| {
            b.iter(|| {
                let mut counters = Counters::open(scope);
                black_box(counters.start().stop())
            })
        });
    }
}

criterion_group!(benches, counters);
criterion_main!(benches);
