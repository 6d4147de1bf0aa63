//! Differential property tests: pruning (statistics, bloom filters, page index) against a
//! naive row-by-row evaluator on random batches written to small row groups and pages.
//! Pruning may keep extra rows; it must never drop a row the naive evaluator matches.

mod common;

use std::sync::Arc;

use arrow_array::{
    ArrayRef, Date32Array, Float32Array, Float64Array, Int64Array, Int8Array, RecordBatch,
    StringArray, TimestampMillisecondArray, UInt32Array,
};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use common::{eval_row, prune_file, read_metadata, FloatSemantics, Value};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use proptest::prelude::*;
use ringscan_io_daemon::prune::{FilePruner, Verdict};
use ringscan_ipc::msg::{CmpOp, Literal, Predicate};

#[derive(Debug, Clone)]
struct Rows {
    i: Vec<Option<i64>>,
    u: Vec<Option<u32>>,
    f: Vec<Option<f64>>,
    s: Vec<Option<String>>,
    /// Int8, Float32, Date32 and Timestamp(ms, UTC): logical types over INT32/FLOAT/INT64.
    b: Vec<Option<i8>>,
    g: Vec<Option<f32>>,
    d: Vec<Option<i32>>,
    t: Vec<Option<i64>>,
}

impl Rows {
    fn len(&self) -> usize {
        self.i.len()
    }
    fn cell(&self, row: usize, column: &str) -> Value {
        match column {
            "i" => self.i[row].map_or(Value::Null, |v| Value::Int(v.into())),
            "u" => self.u[row].map_or(Value::Null, |v| Value::Int(v.into())),
            "f" => self.f[row].map_or(Value::Null, Value::Float),
            "s" => self.s[row].clone().map_or(Value::Null, Value::Str),
            "b" => self.b[row].map_or(Value::Null, |v| Value::Int(v.into())),
            "g" => self.g[row].map_or(Value::Null, |v| Value::Float(v.into())),
            "d" => self.d[row].map_or(Value::Null, |v| Value::Int(v.into())),
            "t" => self.t[row].map_or(Value::Null, Value::TsMillis),
            _ => panic!("no column {column}"),
        }
    }
}

#[derive(Debug, Clone)]
struct Layout {
    row_group_rows: usize,
    page_rows: usize,
    truncate: Option<usize>,
    dictionary: bool,
    sort_i: bool,
}

const FLOATS: [f64; 10] = [
    -2.5,
    -1.0,
    -0.0,
    0.0,
    1.0,
    2.5,
    3.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
];
const U32S: [u32; 6] = [0, 1, 2, 0x7fff_ffff, 0x8000_0000, u32::MAX];

fn string_value() -> impl Strategy<Value = String> {
    // Short alphabet so comparisons land on boundaries; up to 9 bytes so that a 4-byte
    // truncation of min/max happens; 'z' runs exercise the truncated-max increment.
    "[abz]{0,9}"
}

fn float_value() -> impl Strategy<Value = f64> {
    prop_oneof![
        prop::sample::select(FLOATS.to_vec()),
        Just(-f64::NAN),
        (-5i32..5).prop_map(f64::from),
    ]
}

fn float32_value() -> impl Strategy<Value = f32> {
    prop_oneof![
        prop::sample::select(vec![-0.0f32, 0.0, 0.1, 0.5, 1.0, f32::NAN, f32::INFINITY]),
        (-3i16..3).prop_map(f32::from),
    ]
}

fn rows() -> impl Strategy<Value = Rows> {
    (0usize..60).prop_flat_map(|n| {
        (
            prop::collection::vec(prop::option::weighted(0.85, -20i64..20), n),
            prop::collection::vec(
                prop::option::weighted(
                    0.85,
                    prop_oneof![prop::sample::select(U32S.to_vec()), 0u32..10],
                ),
                n,
            ),
            prop::collection::vec(prop::option::weighted(0.85, float_value()), n),
            prop::collection::vec(prop::option::weighted(0.85, string_value()), n),
        )
            .prop_flat_map(move |(i, u, f, s)| {
                (
                    prop::collection::vec(prop::option::weighted(0.85, any::<i8>()), n),
                    prop::collection::vec(prop::option::weighted(0.85, float32_value()), n),
                    prop::collection::vec(prop::option::weighted(0.85, -3i32..3), n),
                    prop::collection::vec(prop::option::weighted(0.85, -3i64..3), n),
                )
                    .prop_map(move |(b, g, d, t)| Rows {
                        i: i.clone(),
                        u: u.clone(),
                        f: f.clone(),
                        s: s.clone(),
                        b,
                        g,
                        d,
                        t,
                    })
            })
    })
}

fn layout() -> impl Strategy<Value = Layout> {
    (
        1usize..20,
        1usize..8,
        prop::option::of(Just(4usize)),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(row_group_rows, page_rows, truncate, dictionary, sort_i)| Layout {
                row_group_rows,
                page_rows,
                truncate,
                dictionary,
                sort_i,
            },
        )
}

fn literal_for(column: &'static str) -> BoxedStrategy<Literal> {
    let null = Just(Literal::Null);
    match column {
        "i" => prop_oneof![
            8 => (-22i64..22).prop_map(Literal::Int),
            2 => (-44i32..44).prop_map(|h| Literal::Float(f64::from(h) / 2.0)),
            1 => prop::sample::select(vec![i64::MIN, i64::MAX]).prop_map(Literal::Int),
            1 => Just(Literal::UInt(u64::MAX)),
            1 => null,
        ]
        .boxed(),
        "u" => prop_oneof![
            4 => prop::sample::select(U32S.to_vec()).prop_map(|v| Literal::Int(v.into())),
            4 => (-2i64..12).prop_map(Literal::Int),
            1 => Just(Literal::Int(1 << 40)),
            1 => Just(Literal::Float(2.0)),
            1 => null,
        ]
        .boxed(),
        "f" => prop_oneof![
            6 => float_value().prop_map(Literal::Float),
            2 => (-5i64..5).prop_map(Literal::Int),
            1 => null,
        ]
        .boxed(),
        "b" => prop_oneof![
            4 => prop::sample::select(vec![-128i64, -1, 0, 1, 127]).prop_map(Literal::Int),
            2 => any::<i8>().prop_map(|v| Literal::Int(v.into())),
            1 => Just(Literal::Int(300)),
            1 => null,
        ]
        .boxed(),
        "g" => prop_oneof![
            // 0.1 is not an f32: the literal does not convert exactly.
            4 => prop::sample::select(vec![-0.0, 0.0, 0.1, 0.5, 1.0, 0.100_000_001_490_116_12])
                .prop_map(Literal::Float),
            2 => (-3i64..3).prop_map(Literal::Int),
            1 => null,
        ]
        .boxed(),
        "d" => prop_oneof![4 => (-4i32..4).prop_map(Literal::Date32), 1 => (-4i64..4).prop_map(Literal::Int), 1 => null].boxed(),
        "t" => prop_oneof![
            4 => (-4i64..4).prop_map(|ms| Literal::TimestampMicros(ms * 1000)),
            2 => (-4000i64..4000).prop_map(Literal::TimestampMicros),
            1 => null,
        ]
        .boxed(),
        _ => prop_oneof![8 => string_value().prop_map(Literal::Utf8), 1 => null].boxed(),
    }
}

fn predicate() -> impl Strategy<Value = Predicate> {
    common::predicate_over(vec!["i", "u", "f", "s", "b", "g", "d", "t"], literal_for)
}

fn write(rows: &Rows, layout: &Layout) -> std::fs::File {
    let mut rows = rows.clone();
    if layout.sort_i {
        rows.i.sort();
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new("i", DataType::Int64, true),
        Field::new("u", DataType::UInt32, true),
        Field::new("f", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("b", DataType::Int8, true),
        Field::new("g", DataType::Float32, true),
        Field::new("d", DataType::Date32, true),
        Field::new(
            "t",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            true,
        ),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(rows.i.clone())),
        Arc::new(UInt32Array::from(rows.u.clone())),
        Arc::new(Float64Array::from(rows.f.clone())),
        Arc::new(StringArray::from(rows.s.clone())),
        Arc::new(Int8Array::from(rows.b.clone())),
        Arc::new(Float32Array::from(rows.g.clone())),
        Arc::new(Date32Array::from(rows.d.clone())),
        Arc::new(TimestampMillisecondArray::from(rows.t.clone()).with_timezone("UTC")),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns).expect("batch");
    let props = WriterProperties::builder()
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_max_row_group_row_count(Some(layout.row_group_rows))
        .set_data_page_row_count_limit(layout.page_rows)
        .set_write_batch_size(layout.page_rows)
        .set_statistics_truncate_length(layout.truncate)
        .set_column_index_truncate_length(layout.truncate)
        .set_dictionary_enabled(layout.dictionary)
        .set_bloom_filter_enabled(true)
        .build();
    let mut file = tempfile::tempfile().expect("tempfile");
    let mut writer = ArrowWriter::try_new(&mut file, schema, Some(props)).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
    file
}

/// Rows of `rows` as written (the `i` column sorted when the layout says so).
fn as_written(rows: &Rows, layout: &Layout) -> Rows {
    let mut rows = rows.clone();
    if layout.sort_i {
        rows.i.sort();
    }
    rows
}

fn check(rows: &Rows, layout: &Layout, pred: &Predicate) -> Result<(), TestCaseError> {
    let file = write(rows, layout);
    let meta = read_metadata(&file);
    let rows = as_written(rows, layout);
    let kept = prune_file(&file, &meta, pred);
    prop_assert_eq!(kept.rows.len(), rows.len());
    // Under the one float rule (DuckDB's), which the engine and the row filter follow.
    for r in 0..rows.len() {
        if eval_row(pred, &|c| rows.cell(r, c), FloatSemantics::Total) == Some(true) {
            prop_assert!(kept.rows[r], "row {} matches but was pruned: {:?}", r, kept);
        }
    }
    // A row group said to pass whole is read without the filter: every row of it must
    // be TRUE (not FALSE, not NULL) row by row.
    let pruner = FilePruner::try_new(&meta, "test.parquet").expect("pruner");
    let mut first = 0;
    for g in 0..meta.num_row_groups() {
        let n = usize::try_from(meta.row_group(g).num_rows()).expect("rows");
        if pruner.row_group(pred, g).expect("verdict") == Verdict::Always {
            for r in first..first + n {
                let got = eval_row(pred, &|c| rows.cell(r, c), FloatSemantics::Total);
                prop_assert_eq!(got, Some(true), "row {} of all-pass row group {}", r, g);
            }
        }
        first += n;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn pruning_never_drops_a_matching_row(rows in rows(), layout in layout(), pred in predicate()) {
        check(&rows, &layout, &pred)?;
    }
}

/// Signed zeros are rare in random batches: one-row groups and pages of each zero, under
/// every operator against both zeros, plain and negated.
#[test]
fn signed_zeros_in_single_value_pages() {
    let f = vec![
        Some(-0.0),
        Some(0.0),
        Some(-0.0),
        Some(1.0),
        None,
        Some(f64::NAN),
        Some(-f64::NAN),
    ];
    let n = f.len();
    let rows = Rows {
        i: vec![Some(0); n],
        u: vec![Some(0); n],
        f,
        s: vec![None; n],
        b: vec![None; n],
        g: vec![None; n],
        d: vec![None; n],
        t: vec![None; n],
    };
    let ops = [
        CmpOp::Eq,
        CmpOp::NotEq,
        CmpOp::Lt,
        CmpOp::LtEq,
        CmpOp::Gt,
        CmpOp::GtEq,
    ];
    for row_group_rows in [1, 3] {
        let layout = Layout {
            row_group_rows,
            page_rows: 1,
            truncate: None,
            dictionary: false,
            sort_i: false,
        };
        for lit in [-0.0, 0.0, 1.0, -1.0] {
            for op in ops {
                let p = Predicate::compare("f", op, Literal::Float(lit));
                check(&rows, &layout, &p).expect("kept");
                check(&rows, &layout, &Predicate::Not(Box::new(p))).expect("kept");
            }
        }
    }
}
