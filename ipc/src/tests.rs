//! In-process tests of the ring: both ends in one process, each with its own mapping.
//! Cross-process behaviour (dead peers, cancel across processes) is in `tests/`.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::types::Int32Type;
use arrow_array::{Array, DictionaryArray, Int64Array, RecordBatch, StringArray, StringViewArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use proptest::prelude::*;

use crate::layout::{RecordHeader, RecordKind};
use crate::{unique_name, Consumer, Producer, RingError, TryNext};

fn shm_path(name: &str) -> std::path::PathBuf {
    Path::new("/dev/shm").join(&name[1..])
}

fn int_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, true)]))
}

fn ints(schema: &SchemaRef, start: i64, n: usize) -> RecordBatch {
    let values: Int64Array = (start..start + n as i64).map(Some).collect();
    RecordBatch::try_new(schema.clone(), vec![Arc::new(values)]).unwrap()
}

fn pair(capacity: usize) -> (Producer, Consumer) {
    let name = unique_name("ringscan-test");
    let producer = Producer::create(&name, int_schema(), capacity).unwrap();
    let consumer = Consumer::attach(&name).unwrap();
    (producer, consumer)
}

fn pair_of(schema: SchemaRef, capacity: usize) -> (Producer, Consumer) {
    let name = unique_name("ringscan-test");
    let producer = Producer::create(&name, schema, capacity).unwrap();
    let consumer = Consumer::attach(&name).unwrap();
    (producer, consumer)
}

/// A string column and the same strings as views.
fn text_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("s", DataType::Utf8, false),
        Field::new("v", DataType::Utf8View, false),
    ]))
}

/// `n` rows from row `start`, each string `width` bytes that name their row.
fn texts(start: usize, n: usize, width: usize) -> RecordBatch {
    let text = |i: usize| {
        let mut t = format!("{i:010}-");
        t.extend(std::iter::repeat_n(
            char::from(b'a' + (i % 26) as u8),
            width - 11,
        ));
        t
    };
    let values: Vec<String> = (start..start + n).map(text).collect();
    RecordBatch::try_new(
        text_schema(),
        vec![
            Arc::new(StringArray::from_iter_values(&values)),
            Arc::new(StringViewArray::from_iter_values(&values)),
        ],
    )
    .unwrap()
}

/// Runs `f` on a thread and fails the test if it takes longer than `limit` (a hang
/// is then a failure with a message, not a test run that never ends).
pub(crate) fn within<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("did not finish within {limit:?}: the ring hangs"))
}

#[test]
fn batches_round_trip_zero_copy_and_name_is_unlinked() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("i", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new(
            "d",
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            true,
        ),
    ]));
    let batch = |k: i64| {
        let n = 100 + k as usize;
        let i: Int64Array = (0..n as i64)
            .map(|v| (v % 7 != 0).then_some(v * k))
            .collect();
        let s: StringArray = (0..n).map(|v| Some(format!("row {v} of {k}"))).collect();
        let d: DictionaryArray<Int32Type> = (0..n)
            .map(|v| if v % 3 == 0 { "a" } else { "bb" })
            .collect();
        RecordBatch::try_new(schema.clone(), vec![Arc::new(i), Arc::new(s), Arc::new(d)]).unwrap()
    };
    let name = unique_name("ringscan-test");
    let mut producer = Producer::create(&name, schema.clone(), 1 << 20).unwrap();
    let meta = std::fs::metadata(shm_path(&name)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(meta.permissions().mode() & 0o777, 0o600, "segment mode");
    let consumer = Consumer::attach(&name).unwrap();
    assert!(
        !shm_path(&name).exists(),
        "unlinked once both sides mapped it"
    );
    assert_eq!(consumer.schema(), schema);
    for k in 0..5 {
        producer.push(&batch(k)).unwrap();
    }
    producer.finish().unwrap();
    let mut consumer = consumer;
    let mut got = Vec::new();
    for b in consumer.by_ref() {
        got.push(b.unwrap());
    }
    assert_eq!(got.len(), 5);
    for (k, b) in got.iter().enumerate() {
        assert_eq!(b, &batch(k as i64));
        let values = b.column(0).to_data().buffers()[0].as_ptr() as usize;
        assert!(consumer.points_into_ring(values), "batch {k} was copied");
    }
    assert!(consumer.next().is_none(), "fused after the end");
}

#[test]
fn producer_dropped_before_attach_leaves_nothing() {
    let name = unique_name("ringscan-test");
    let producer = Producer::create(&name, int_schema(), 8192).unwrap();
    assert!(shm_path(&name).exists());
    drop(producer);
    assert!(!shm_path(&name).exists());
    assert!(matches!(Consumer::attach(&name), Err(RingError::Os { .. })));
}

#[test]
fn out_of_order_release_advances_over_the_released_prefix() {
    let (mut p, mut c) = pair(1 << 16);
    let schema = int_schema();
    for k in 0..3 {
        p.push(&ints(&schema, k * 10, 10)).unwrap();
    }
    let start = c.shared_read_pos();
    let b0 = c.next().unwrap().unwrap();
    let b1 = c.next().unwrap().unwrap();
    let b2 = c.next().unwrap().unwrap();
    let end = c.cursor();
    drop(b1);
    assert_eq!(c.shared_read_pos(), start, "b0 still held");
    drop(b2);
    assert_eq!(c.shared_read_pos(), start);
    assert_eq!(c.outstanding_records(), 3);
    // A slice of a column keeps the record alive too.
    let col = b0.column(0).slice(2, 3);
    drop(b0);
    assert_eq!(c.shared_read_pos(), start);
    drop(col);
    assert_eq!(c.shared_read_pos(), end, "all released");
    assert_eq!(c.outstanding_records(), 0);
}

#[test]
fn full_ring_back_pressure_and_wrap_with_padding() {
    let (mut p, mut c) = pair(8192);
    let schema = int_schema();
    let big = ints(&schema, 0, 400); // ~3.3 KiB of values
    assert!(p.try_push(&big).unwrap());
    assert!(p.try_push(&big).unwrap());
    assert!(!p.try_push(&big).unwrap(), "the ring is full");
    let held = c.next().unwrap().unwrap();
    assert!(!p.try_push(&big).unwrap(), "consumed but still held");
    drop(held);
    // Space is back, but the record would wrap: padding goes first, then it fits
    // once the consumer has passed the padding.
    let mut pushed = 0;
    for _ in 0..100 {
        if p.try_push(&ints(&schema, pushed * 1000, 400)).unwrap() {
            pushed += 1;
        }
        match c.try_next().unwrap() {
            TryNext::Batch(b) => assert_eq!(b.num_rows(), 400),
            TryNext::Empty => {}
            TryNext::End => unreachable!(),
        }
    }
    assert!(pushed > 10, "the ring keeps cycling ({pushed})");
}

#[test]
fn too_large_records_are_rejected() {
    // One row cannot be split further.
    let (mut p, _c) = pair_of(text_schema(), 4096);
    let err = p.push(&texts(0, 1, 5000)).unwrap_err();
    assert!(matches!(err, RingError::RecordTooLarge { .. }), "{err}");
    // try_push never splits.
    let (mut p, _c) = pair(4096);
    let err = p.try_push(&ints(&int_schema(), 0, 10_000)).unwrap_err();
    assert!(matches!(err, RingError::RecordTooLarge { .. }), "{err}");
    let other = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("x", DataType::Utf8, false)])),
        vec![Arc::new(StringArray::from(vec!["a"]))],
    )
    .unwrap();
    assert!(matches!(p.push(&other), Err(RingError::Arrow { .. })));
}

#[test]
fn producer_error_text_reaches_the_consumer() {
    let (mut p, mut c) = pair(1 << 16);
    p.push(&ints(&int_schema(), 0, 5)).unwrap();
    p.fail("row group 3 of /data/x.parquet: corrupt page header")
        .unwrap();
    assert_eq!(c.next().unwrap().unwrap().num_rows(), 5);
    match c.next() {
        Some(Err(RingError::ProducerFailed { message })) => {
            assert_eq!(
                message,
                "row group 3 of /data/x.parquet: corrupt page header"
            )
        }
        other => panic!("{other:?}"),
    }
    assert!(c.next().is_none());
}

#[test]
fn producer_dropped_mid_stream_is_an_error() {
    let (mut p, mut c) = pair(1 << 16);
    p.push(&ints(&int_schema(), 0, 5)).unwrap();
    drop(p);
    assert!(
        c.next().unwrap().is_ok(),
        "published batches are still delivered"
    );
    assert!(matches!(
        c.next(),
        Some(Err(RingError::ProducerGone { .. }))
    ));
    assert!(c.next().is_none());
}

#[test]
fn cancel_is_seen_at_the_next_push() {
    let (mut p, mut c) = pair(1 << 16);
    let schema = int_schema();
    p.push(&ints(&schema, 0, 5)).unwrap();
    assert!(!p.is_cancelled());
    c.cancel();
    assert!(p.is_cancelled());
    assert!(matches!(
        p.push(&ints(&schema, 0, 5)),
        Err(RingError::Cancelled { .. })
    ));
    assert!(c.next().is_none(), "iteration ends after cancel");
    // Dropping a consumer before the end cancels too.
    let (mut p, c) = pair(1 << 16);
    drop(c);
    assert!(matches!(
        p.push(&ints(&schema, 0, 5)),
        Err(RingError::Cancelled { .. })
    ));
    assert!(matches!(p.finish(), Err(RingError::Cancelled { .. })));
}

#[test]
fn corrupt_records_are_errors_not_ub() {
    let schema = int_schema();
    // Garbage where a record header should be.
    let (mut p, mut c) = pair(1 << 16);
    p.publish_raw(&[0xAB; 64], 64);
    assert!(matches!(c.next(), Some(Err(RingError::Corrupt { .. }))));
    assert!(c.next().is_none());
    // A header whose length overruns what was published.
    let (mut p, mut c) = pair(1 << 16);
    let h = RecordHeader {
        kind: RecordKind::Batch,
        payload_bytes: 1 << 15,
        seq: 1,
    };
    p.publish_raw(&h.encode(), 64);
    assert!(matches!(c.next(), Some(Err(RingError::Corrupt { .. }))));
    // A well-framed record whose payload is not an IPC message.
    let (mut p, mut c) = pair(1 << 16);
    let h = RecordHeader {
        kind: RecordKind::Batch,
        payload_bytes: 64,
        seq: 1,
    };
    let mut rec = h.encode().to_vec();
    rec.extend_from_slice(&[0xFF; 64]);
    p.publish_raw(&rec, 128);
    assert!(matches!(c.next(), Some(Err(RingError::Corrupt { .. }))));
    // A write position that goes backwards or runs past the ring.
    let (mut p, mut c) = pair(1 << 16);
    p.push(&ints(&schema, 0, 5)).unwrap();
    let _ = c.next().unwrap().unwrap();
    p.header().write_pos.store(64, Ordering::Release);
    assert!(matches!(c.next(), Some(Err(RingError::Corrupt { .. }))));
    let (p, mut c) = pair(1 << 16);
    p.header().write_pos.store(1 << 40, Ordering::Release);
    assert!(matches!(c.next(), Some(Err(RingError::Corrupt { .. }))));
    // A write position a whole ring past the consumer's cursor while a batch it read
    // is still held (issue 17, item 15): the producer would have overwritten it.
    let (mut p, mut c) = pair(1 << 16);
    p.push(&ints(&schema, 0, 5)).unwrap();
    let held = c.next().unwrap().unwrap();
    let cursor = p.header().write_pos.load(Ordering::Acquire);
    p.header()
        .write_pos
        .store(cursor + (1 << 16), Ordering::Release);
    match c.next() {
        Some(Err(RingError::Corrupt { detail, .. })) => {
            assert!(detail.contains("write position"), "{detail}");
        }
        other => panic!("expected a corrupt write position, got {other:?}"),
    }
    assert_eq!(held.num_rows(), 5);
    // And on the producer side, a read position past the write position.
    let (mut p, _c) = pair(1 << 16);
    p.header().read_pos.store(1 << 20, Ordering::Release);
    assert!(matches!(
        p.push(&ints(&schema, 0, 5)),
        Err(RingError::Corrupt { .. })
    ));
}

#[test]
fn corrupt_segments_are_refused_at_attach() {
    for corrupt in [
        |p: &Producer| p.header().magic.store(7, Ordering::Release),
        |p: &Producer| p.header().version.store(99, Ordering::Release),
        |p: &Producer| p.header().capacity_bytes.store(1 << 30, Ordering::Release),
        |p: &Producer| p.header().producer_pid.store(0, Ordering::Release),
    ] {
        let name = unique_name("ringscan-test");
        let p = Producer::create(&name, int_schema(), 8192).unwrap();
        corrupt(&p);
        let err = Consumer::attach(&name).unwrap_err();
        assert!(matches!(err, RingError::Corrupt { .. }), "{err}");
        drop(p);
        assert!(!shm_path(&name).exists());
    }
    // A second consumer cannot attach (here the name is already gone, as designed).
    let (_p, c) = pair(8192);
    assert!(Consumer::attach(c.name()).is_err());
}

/// One step of the model test.
#[derive(Debug, Clone)]
enum Op {
    /// Try to push a batch of this many rows.
    Push(usize),
    /// Try to take the next batch.
    Consume,
    /// Drop the held batch at this index (out of order).
    Release(prop::sample::Index),
    /// Copy every held batch out of the ring.
    Unpin,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0usize..700).prop_map(Op::Push),
        3 => Just(Op::Consume),
        2 => any::<prop::sample::Index>().prop_map(Op::Release),
        1 => Just(Op::Unpin),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random push / consume / out-of-order release sequences on a small ring, against
    /// a sequential model: batches arrive in order and intact, held batches are never
    /// overwritten, and the read position is the start of the oldest held record (or
    /// the cursor when none is held).
    #[test]
    fn ring_matches_sequential_model(ops in prop::collection::vec(op(), 1..200)) {
        let (mut p, mut c) = pair(16384);
        let schema = int_schema();
        let mut next_value = 0i64;
        let mut in_flight = std::collections::VecDeque::new(); // (first value, rows)
        // (start, batch, first value, still in the ring)
        let mut held: Vec<(u64, RecordBatch, i64, bool)> = Vec::new();
        for op in ops {
            match op {
                Op::Push(rows) => {
                    let batch = ints(&schema, next_value, rows);
                    if p.try_push(&batch).unwrap() {
                        in_flight.push_back((next_value, rows));
                        next_value += rows as i64;
                    } else if held.is_empty() && in_flight.is_empty() {
                        // Full is only legitimate while something occupies the ring; an
                        // empty ring may hold padding, which one consume step skips.
                        prop_assert!(matches!(c.try_next().unwrap(), TryNext::Empty));
                        prop_assert!(p.try_push(&batch).unwrap(), "empty ring refused {rows} rows");
                        in_flight.push_back((next_value, rows));
                        next_value += rows as i64;
                    }
                }
                Op::Consume => match c.try_next().unwrap() {
                    TryNext::Batch(b) => {
                        let (first, rows) = in_flight.pop_front().expect("model has a batch");
                        prop_assert_eq!(&b, &ints(&schema, first, rows));
                        held.push((c.last_batch_start, b, first, true));
                    }
                    TryNext::Empty => prop_assert!(in_flight.is_empty()),
                    TryNext::End => prop_assert!(false, "no end was sent"),
                },
                Op::Release(ix) => {
                    if !held.is_empty() {
                        held.remove(ix.index(held.len()));
                    }
                }
                Op::Unpin => {
                    let pinned = c.cursor() - c.shared_read_pos();
                    prop_assert_eq!(c.unpin().unwrap(), pinned);
                    for h in &mut held {
                        h.3 = false;
                    }
                }
            }
            // Held batches are intact (their space was never reused while in the ring,
            // and copies are copies).
            for (_, b, first, _) in &held {
                prop_assert_eq!(b, &ints(&schema, *first, b.num_rows()));
            }
            let model_read_pos = held
                .iter()
                .filter(|h| h.3)
                .map(|h| h.0)
                .min()
                .unwrap_or(c.cursor());
            prop_assert_eq!(c.shared_read_pos(), model_read_pos);
        }
        while let Some((first, rows)) = in_flight.pop_front() {
            let TryNext::Batch(b) = c.try_next().unwrap() else {
                panic!("published batch missing");
            };
            prop_assert_eq!(&b, &ints(&schema, first, rows));
        }
        drop(held);
        prop_assert_eq!(c.shared_read_pos(), c.cursor());
        p.finish().unwrap();
        prop_assert!(c.next().is_none());
    }
}

/// count(*) scans stream batches without columns: only the row count must survive.
#[test]
fn zero_column_batches_keep_their_row_count() {
    use arrow_array::RecordBatchOptions;
    let schema = Arc::new(Schema::empty());
    let name = unique_name("zero-cols");
    let mut producer = Producer::create(&name, schema.clone(), 1 << 16).unwrap();
    let consumer = Consumer::attach(&name).unwrap();
    for rows in [0usize, 1, 8192, 123_456] {
        let batch = RecordBatch::try_new_with_options(
            schema.clone(),
            vec![],
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )
        .unwrap();
        producer.push(&batch).unwrap();
    }
    producer.finish().unwrap();
    let rows: Vec<usize> = consumer.map(|b| b.unwrap().num_rows()).collect();
    assert_eq!(rows, [0, 1, 8192, 123_456]);
}

#[test]
fn a_fresh_ring_started_later_streams_like_a_new_one() {
    let name = unique_name("ringscan-test");
    let options = crate::RingOptions::new(1 << 20);
    // More to touch than the ring holds: bounded by the data area.
    let fresh = crate::FreshRing::create(&name, &options, 4 << 20).unwrap();
    assert_eq!(fresh.name(), name);
    assert_eq!(fresh.capacity_bytes(), 1 << 20);
    assert!(shm_path(&name).exists());
    let schema = int_schema();
    let mut producer = fresh.start(schema.clone()).unwrap();
    let mut consumer = Consumer::attach(&name).unwrap();
    assert_eq!(consumer.schema(), schema);
    let mut expected = Vec::new();
    for k in 0..50 {
        let batch = ints(&schema, k * 1000, 1000);
        expected.extend(k * 1000..k * 1000 + 1000);
        producer.push(&batch).unwrap();
        let got = consumer.next().unwrap().unwrap();
        let values = got.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(values.values(), &expected[expected.len() - 1000..]);
    }
    assert!(producer.bytes_written() >= 50 * 8000);
    producer.finish().unwrap();
    assert!(consumer.next().is_none());
    assert!(!shm_path(&name).exists());
}

#[test]
fn an_unstarted_fresh_ring_leaves_no_name() {
    let name = unique_name("ringscan-test");
    let fresh =
        crate::FreshRing::create(&name, &crate::RingOptions::new(1 << 16), 1 << 16).unwrap();
    assert!(shm_path(&name).exists());
    drop(fresh);
    assert!(!shm_path(&name).exists());
    // And a started one whose consumer never came removes it at the producer's drop.
    let fresh = crate::FreshRing::create(&name, &crate::RingOptions::new(1 << 16), 0).unwrap();
    let producer = fresh.start(int_schema()).unwrap();
    drop(producer);
    assert!(!shm_path(&name).exists());
}

#[test]
fn end_keeps_the_producer_and_ends_the_stream_once() {
    let (mut p, mut c) = pair(1 << 16);
    let schema = int_schema();
    p.push(&ints(&schema, 0, 5)).unwrap();
    p.end().unwrap();
    assert!(p.end().is_err(), "a second end is an error");
    assert!(
        p.push(&ints(&schema, 5, 5)).is_err(),
        "no push after the end"
    );
    assert_eq!(c.next().unwrap().unwrap().num_rows(), 5);
    assert!(c.next().is_none());
    assert!(p.bytes_written() > 0);
}

fn two_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("s", DataType::Utf8, true),
        Field::new("v", DataType::Int64, true),
    ]))
}

fn batch_of(schema: &SchemaRef, start: i64, n: usize) -> RecordBatch {
    if schema.fields().len() == 1 {
        return ints(schema, start, n);
    }
    let s: StringArray = (0..n)
        .map(|v| Some(format!("r{}", start + v as i64)))
        .collect();
    let v: Int64Array = (start..start + n as i64).map(Some).collect();
    RecordBatch::try_new(schema.clone(), vec![Arc::new(s), Arc::new(v)]).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// One ring carries stream after stream, of other schemas: each read to its end or
    /// cancelled part way (before or after the producer ended it), with batches kept
    /// alive across the restart or not. Every stream yields exactly what was pushed,
    /// kept batches are never overwritten, and a restart on a fully released ring
    /// starts at the beginning of the data area.
    #[test]
    fn a_ring_carries_stream_after_stream(
        streams in prop::collection::vec(
            (0usize..6, prop::option::of(0usize..6), any::<bool>(), 1usize..300),
            1..7,
        ),
    ) {
        let capacity = 256 << 10;
        let (mut producer, mut consumer) = pair(capacity);
        let mut kept: Vec<(RecordBatch, RecordBatch)> = Vec::new();
        let mut start = 0i64;
        for (i, &(batches, cancel_after, keep, rows)) in streams.iter().enumerate() {
            let schema = if i % 2 == 0 { int_schema() } else { two_schema() };
            if i > 0 {
                prop_assert!(consumer.rearm(), "stream {i}: cannot rearm");
                let all_released = consumer.held_bytes() == 0;
                producer.restart(schema.clone()).unwrap();
                if all_released {
                    // Only the schema record past a multiple of the capacity.
                    prop_assert!(producer.bytes_written() % capacity as u64 <= 1024);
                }
                consumer.begin_stream().unwrap();
            }
            prop_assert_eq!(consumer.schema(), schema.clone());
            let mut pushed = Vec::new();
            let mut got = Vec::new();
            let mut cancelled = false;
            for b in 0..batches {
                let batch = batch_of(&schema, start, rows + b);
                start += 1000;
                match producer.push(&batch) {
                    Ok(()) => pushed.push(batch),
                    Err(RingError::Cancelled { .. }) => break,
                    Err(e) => panic!("push: {e}"),
                }
                if cancel_after == Some(b) && !cancelled {
                    while let Ok(TryNext::Batch(x)) = consumer.try_next() {
                        got.push(x);
                    }
                    consumer.cancel();
                    cancelled = true;
                }
            }
            let _ = producer.end();
            if cancel_after.is_some_and(|c| c >= batches) {
                // Cancelled after the producer ended the stream: read some, then stop.
                if let Ok(TryNext::Batch(x)) = consumer.try_next() {
                    got.push(x);
                }
                consumer.cancel();
                cancelled = true;
            }
            if !cancelled {
                for x in consumer.by_ref() {
                    got.push(x.unwrap());
                }
                prop_assert_eq!(got.len(), pushed.len());
            }
            prop_assert!(got.len() <= pushed.len());
            for (g, p) in got.iter().zip(&pushed) {
                prop_assert_eq!(g, p);
            }
            if keep {
                if let Some(g) = got.first() {
                    kept.push((g.clone(), pushed[0].clone()));
                }
            }
            drop(got);
        }
        for (held, expected) in &kept {
            prop_assert_eq!(held, expected, "a kept batch was overwritten");
        }
    }
}

/// The crate's doc example, past capacity: one thread collects every batch (keeping
/// them all) while the producer has written several rings' worth. The consumer copies
/// the batches it handed out out of the ring when the producer waits on them, where it
/// used to wait forever.
#[test]
fn collecting_more_than_the_ring_holds_does_not_hang() {
    let name = unique_name("ringscan-test");
    let schema = int_schema();
    let mut producer = Producer::create(&name, schema.clone(), 64 << 10).unwrap();
    let consumer = Consumer::attach(&name).unwrap();
    let sent: Vec<RecordBatch> = (0..40).map(|k| ints(&schema, k * 1000, 1000)).collect();
    let to_send = sent.clone();
    let writer = std::thread::spawn(move || {
        for b in &to_send {
            producer.push(b).unwrap();
        }
        producer.finish().unwrap();
    });
    let (got, unpinned) = within(Duration::from_secs(30), move || {
        let mut consumer = consumer;
        let got: Vec<RecordBatch> = consumer.by_ref().collect::<Result<_, _>>().unwrap();
        (got, consumer.unpinned())
    });
    writer.join().unwrap();
    assert_eq!(got, sent, "every batch arrived intact and in order");
    assert!(unpinned.0 > 0 && unpinned.1 > 0, "{unpinned:?}");
}

/// Batches kept across an unpin keep their addresses and values while the producer
/// goes on to overwrite the whole ring several times.
#[test]
fn unpinned_batches_survive_the_ring_being_overwritten() {
    let (mut p, mut c) = pair_of(text_schema(), 64 << 10);
    p.push(&texts(0, 20, 100)).unwrap();
    p.push(&texts(20, 20, 100)).unwrap();
    let first = c.next().unwrap().unwrap();
    let second = c.next().unwrap().unwrap();
    let addr = first.column(0).to_data().buffers()[1].as_ptr() as usize;
    assert!(c.points_into_ring(addr), "zero-copy before the unpin");
    assert!(c.unpin().unwrap() > 0);
    assert_eq!(c.held_bytes(), 0, "all of the ring is the producer's again");
    assert_eq!(c.unpin().unwrap(), 0, "nothing left to unpin");
    let mut start = 40;
    for _ in 0..200 {
        p.push(&texts(start, 20, 100)).unwrap();
        assert_eq!(c.next().unwrap().unwrap(), texts(start, 20, 100));
        start += 20;
    }
    assert_eq!(
        first.column(0).to_data().buffers()[1].as_ptr() as usize,
        addr
    );
    assert_eq!(first, texts(0, 20, 100));
    assert_eq!(second, texts(20, 20, 100));
    drop(first);
    drop(second);
    assert_eq!(c.held_bytes(), 0, "their late release is a no-op");
    p.finish().unwrap();
    assert!(c.next().is_none());
}

/// Issue 17, item 3: rows of 2 KB in batches of 20,000 rows (40 MB) through a 1 MiB
/// ring, where a batch was one record and `RecordTooLarge`. The producer splits them;
/// the rows arrive whole and in order, as strings and as string views.
#[test]
fn wide_batches_are_split_to_fit_the_ring() {
    let (mut p, c) = pair_of(text_schema(), 1 << 20);
    let batch = texts(0, 10_000, 2000);
    let reader = std::thread::spawn(move || {
        let mut rows = 0;
        let mut records = 0;
        for b in c {
            let b = b.unwrap();
            assert_eq!(b, texts(rows, b.num_rows(), 2000));
            rows += b.num_rows();
            records += 1;
        }
        (rows, records)
    });
    p.push(&batch).unwrap();
    p.finish().unwrap();
    let (rows, records) = reader.join().unwrap();
    assert_eq!(rows, 10_000);
    assert!(
        records >= 8 * 20,
        "split into parts of at most 1/8 ring: {records}"
    );
}

/// Issue 17, item 4: a push blocked on a full ring (the consumer alive but not
/// reading) returns when its caller says stop, instead of holding on.
#[test]
fn a_blocked_push_stops_when_its_caller_says_so() {
    let (mut p, _c) = pair(8192);
    let schema = int_schema();
    while p.try_push(&ints(&schema, 0, 100)).unwrap() {}
    let started = Instant::now();
    let deadline = started + Duration::from_millis(300);
    let err = p
        .push_until(&ints(&schema, 0, 100), &mut || {
            (Instant::now() >= deadline).then(|| "the client went away".to_owned())
        })
        .unwrap_err();
    assert!(matches!(err, RingError::Stopped { .. }), "{err}");
    assert!(err.to_string().contains("the client went away"), "{err}");
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(2), "stopped after {waited:?}");
    assert!(p.blocked_time() >= Duration::from_millis(200));
}

/// The blocking wait/wake protocol under threads: a producer and a consumer on a tiny
/// ring with random pauses on both sides, the consumer keeping random batches for a
/// while; everything arrives in order and nothing waits forever.
#[test]
fn blocking_hand_off_under_random_pauses_never_hangs() {
    for seed in 0..4u64 {
        let (mut p, c) = pair(16 << 10);
        let schema = int_schema();
        let writer = std::thread::spawn(move || {
            let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            let mut next = 0i64;
            for _ in 0..400 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let rows = (x % 300) as usize + 1;
                p.push(&ints(&schema, next, rows)).unwrap();
                next += rows as i64;
                if x % 17 == 0 {
                    std::thread::sleep(Duration::from_micros(x % 500));
                }
            }
            p.finish().unwrap();
            next
        });
        let (total, kept_max) = within(Duration::from_secs(60), move || {
            let mut x = seed.wrapping_add(7).wrapping_mul(0xD1B5_4A32_D192_ED03) | 1;
            let mut kept = std::collections::VecDeque::new();
            let mut expected = 0i64;
            let mut kept_max = 0;
            for b in c {
                let b = b.unwrap();
                let v = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                assert_eq!(v.value(0), expected, "seed {seed}: batches in order");
                expected += b.num_rows() as i64;
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                kept.push_back(b);
                while kept.len() > (x % 8) as usize {
                    kept.pop_front();
                }
                kept_max = kept_max.max(kept.len());
                if x % 11 == 0 {
                    std::thread::sleep(Duration::from_micros(x % 700));
                }
            }
            (expected, kept_max)
        });
        assert_eq!(total, writer.join().unwrap(), "seed {seed}");
        assert!(kept_max > 1);
    }
}

/// Issue 17, item 1: rings are tmpfs files sized with `ftruncate`; a write to a page
/// that a full `/dev/shm` cannot back used to kill the process with `SIGBUS` (Docker's
/// default `/dev/shm` is 64 MiB, a ring 256 MiB). The producer reserves pages ahead of
/// its writes, so a full `/dev/shm` is an error for that ring. Runs itself again in a
/// user and mount namespace whose `/dev/shm` is a 1 MiB tmpfs.
#[test]
fn a_full_dev_shm_is_an_error_for_the_ring_not_a_crash() {
    const INSIDE: &str = "RINGSCAN_TEST_SMALL_SHM";
    if std::env::var_os(INSIDE).is_some() {
        let schema = int_schema();
        // A ring that fits streams as anywhere else.
        let (mut p, c) = pair(512 << 10);
        let reader = std::thread::spawn(move || c.map(|b| b.unwrap().num_rows()).sum::<usize>());
        for k in 0..50 {
            p.push(&ints(&schema, k * 10_000, 10_000)).unwrap();
        }
        p.finish().unwrap();
        assert_eq!(reader.join().unwrap(), 500_000);
        // One that does not is refused when it is made or at the push that needs more.
        let name = unique_name("ringscan-test");
        let err = match Producer::create(&name, schema.clone(), 8 << 20) {
            Err(e) => e,
            Ok(mut p) => {
                let c = Consumer::attach(&name).unwrap();
                let reader = std::thread::spawn(move || c.count());
                let err = (0..100)
                    .find_map(|k| p.push(&ints(&schema, k * 10_000, 10_000)).err())
                    .expect("8 MiB of batches cannot fit a 1 MiB /dev/shm");
                drop(p);
                let _ = reader.join();
                err
            }
        };
        assert!(matches!(err, RingError::NoSpace { .. }), "{err}");
        assert!(err.to_string().contains("/dev/shm has no room"), "{err}");
        return;
    }
    let namespaces = std::process::Command::new("unshare")
        .args(["-rm", "true"])
        .stderr(std::process::Stdio::null())
        .status();
    if !namespaces.is_ok_and(|s| s.success()) {
        eprintln!("skipped: no unprivileged user namespaces here (unshare -rm)");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let output = std::process::Command::new("unshare")
        .args([
            "-rm",
            "sh",
            "-c",
            "mount -t tmpfs -o size=1m tmpfs /dev/shm && exec \"$0\" --exact \
             tests::a_full_dev_shm_is_an_error_for_the_ring_not_a_crash --test-threads=1",
        ])
        .arg(exe)
        .env(INSIDE, "1")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the test in a 1 MiB /dev/shm: {:?}\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("1 passed"), "{stdout}");
}

/// Issue 17, item 11: a consumer that won the ring (its pid is in the header) but then
/// failed to map the data pages returned without removing the name: nobody else may
/// attach, so the segment stayed in /dev/shm after both sides gave up.
#[test]
fn a_failed_attach_after_winning_the_ring_leaves_no_segment() {
    let name = unique_name("ringscan-test");
    let mut producer = Producer::create(&name, int_schema(), 1 << 20).unwrap();
    crate::consumer::FAIL_DATA_MAP.with(|f| f.set(true));
    let err = Consumer::attach(&name).unwrap_err();
    crate::consumer::FAIL_DATA_MAP.with(|f| f.set(false));
    assert!(err.to_string().contains("mmap"), "{err}");
    assert!(!shm_path(&name).exists(), "{name} left in /dev/shm");
    // The producer learns at once that its consumer is gone, not after the attach timeout.
    assert!(producer.is_cancelled());
    assert!(producer.push(&ints(&int_schema(), 0, 10)).is_err());
}
