//! Pruning on concrete files: it must actually prune in the obvious cases (so the property
//! test can fail), and never drop a matching row of the Apache parquet-testing files.

mod common;

use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use common::{eval_row, prune_file, read_metadata, FloatSemantics, Value};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use ringscan_io_daemon::prune::{FilePruner, Verdict};
use ringscan_io_daemon::PruneError;
use ringscan_ipc::msg::{CmpOp, Literal, Operand, Predicate};

const ROWS: i64 = 1000;

/// `sorted` = 0..1000, `shuffled` = a permutation, `f` = sorted floats, `s` = zero-padded
/// strings longer than the 4-byte statistics truncation; 100-row groups, 10-row pages.
fn sample_file() -> std::fs::File {
    let schema = Arc::new(Schema::new(vec![
        Field::new("sorted", DataType::Int64, false),
        Field::new("shuffled", DataType::Int64, false),
        Field::new("f", DataType::Float64, false),
        Field::new("s", DataType::Utf8, false),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(0..ROWS)),
        Arc::new(Int64Array::from_iter_values(
            (0..ROWS).map(|i| (i * 7919) % ROWS),
        )),
        Arc::new(Float64Array::from_iter_values(
            (0..ROWS).map(|i| i as f64 / 2.0),
        )),
        Arc::new(StringArray::from_iter_values(
            (0..ROWS).map(|i| format!("key-{i:06}")),
        )),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns).expect("batch");
    let props = WriterProperties::builder()
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_max_row_group_row_count(Some(100))
        .set_data_page_row_count_limit(10)
        .set_write_batch_size(10)
        .set_statistics_truncate_length(Some(4))
        .set_column_index_truncate_length(Some(4))
        .set_bloom_filter_enabled(true)
        .build();
    let mut file = tempfile::tempfile().expect("tempfile");
    let mut writer = ArrowWriter::try_new(&mut file, schema, Some(props)).expect("writer");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
    file
}

fn int(col: &str, op: CmpOp, v: i64) -> Predicate {
    Predicate::compare(col, op, Literal::Int(v))
}

#[test]
fn sorted_column_above_max_prunes_every_row_group() {
    let file = sample_file();
    let meta = read_metadata(&file);
    let pruner = FilePruner::try_new(&meta, "sample").expect("pruner");
    let r = pruner.row_groups(&int("sorted", CmpOp::Gt, ROWS - 1));
    assert_eq!((r.considered, r.pruned, r.kept.len()), (10, 10, 0));
    let r = pruner.row_groups(&int("sorted", CmpOp::Gt, 955));
    assert_eq!(r.kept, vec![9]);
    // Negated: NOT (sorted <= 955) keeps the same group.
    let not = Predicate::Not(Box::new(int("sorted", CmpOp::LtEq, 955)));
    assert_eq!(pruner.row_groups(&not).kept, vec![9]);
    assert_eq!(
        pruner
            .row_group(&int("sorted", CmpOp::Lt, 0), 0)
            .expect("rg"),
        Verdict::Never
    );
    assert!(matches!(
        pruner.row_group(&int("sorted", CmpOp::Lt, 0), 10),
        Err(PruneError::RowGroupOutOfRange { row_group: 10, .. })
    ));
}

#[test]
fn page_index_selects_only_matching_pages() {
    let file = sample_file();
    let meta = read_metadata(&file);
    let pruner = FilePruner::try_new(&meta, "sample").expect("pruner");
    let p = pruner
        .pages(&int("sorted", CmpOp::Gt, 955), 9)
        .expect("pages");
    // Rows 956..999 live in the pages starting at 950, 960, ..., 990.
    assert_eq!(p.rows_selected, 50);
    assert_eq!((p.pages_considered, p.pages_skipped), (10, 5));
    // OR across columns with different page boundaries is a union.
    let or = Predicate::Or(vec![
        int("sorted", CmpOp::Lt, 905),
        int("sorted", CmpOp::GtEq, 990),
    ]);
    assert_eq!(pruner.pages(&or, 9).expect("pages").rows_selected, 20);
    // AND is an intersection.
    let and = Predicate::And(vec![
        int("sorted", CmpOp::GtEq, 920),
        int("sorted", CmpOp::Lt, 930),
    ]);
    assert_eq!(pruner.pages(&and, 9).expect("pages").rows_selected, 10);
}

#[test]
fn bloom_filter_prunes_absent_values() {
    let file = sample_file();
    let meta = read_metadata(&file);
    let pruner = FilePruner::try_new(&meta, "sample").expect("pruner");
    let all: Vec<usize> = (0..10).collect();
    // `shuffled` spans 0..1000 in every group: statistics cannot prune, bloom filters can.
    let eq = int("shuffled", CmpOp::Eq, 500);
    assert_eq!(pruner.row_groups(&eq).pruned, 0);
    let b = pruner.bloom_filters(&file, &eq, &all).expect("bloom");
    let holder = (0..ROWS)
        .position(|i| (i * 7919) % ROWS == 500)
        .expect("present")
        / 100;
    assert!(b.kept.contains(&holder));
    assert!(b.pruned >= 8, "bloom filter pruned only {} of 10", b.pruned);
    // A value absent everywhere; strings as well; IN lists.
    assert!(
        pruner
            .bloom_filters(&file, &int("shuffled", CmpOp::Eq, 5000), &all)
            .expect("bloom")
            .pruned
            >= 9
    );
    let s = Predicate::compare("s", CmpOp::Eq, Literal::Utf8("key-000123".into()));
    let b = pruner.bloom_filters(&file, &s, &all).expect("bloom");
    assert!(b.kept.contains(&1) && b.pruned >= 8);
    let list = Predicate::InList {
        expr: Operand::Column("shuffled".into()),
        list: vec![Literal::Int(5000), Literal::Int(6000)],
        negated: false,
    };
    assert!(
        pruner
            .bloom_filters(&file, &list, &all)
            .expect("bloom")
            .pruned
            >= 9
    );
    // `<>` and NOT IN cannot use a bloom filter.
    let ne = int("shuffled", CmpOp::NotEq, 5000);
    assert_eq!(
        pruner
            .bloom_filters(&file, &ne, &all)
            .expect("bloom")
            .pruned,
        0
    );
    let not = Predicate::Not(Box::new(int("shuffled", CmpOp::Eq, 5000)));
    assert_eq!(
        pruner
            .bloom_filters(&file, &not, &all)
            .expect("bloom")
            .pruned,
        0
    );
}

#[test]
fn truncated_strings_and_floats_still_prune_soundly() {
    let file = sample_file();
    let meta = read_metadata(&file);
    let pruner = FilePruner::try_new(&meta, "sample").expect("pruner");
    // min/max are truncated to "key-": a bound, not a value; nothing may be pruned wrongly.
    let s = Predicate::compare("s", CmpOp::GtEq, Literal::Utf8("key-000950".into()));
    assert!(pruner.row_groups(&s).kept.contains(&9));
    let s = Predicate::compare("s", CmpOp::Gt, Literal::Utf8("kez".into()));
    assert_eq!(pruner.row_groups(&s).kept, Vec::<usize>::new());
    // Floats prune only `=`: a NaN row may hide behind any min/max, and parquet 59
    // reads no NaN counts that could rule one out.
    let f = Predicate::compare("f", CmpOp::Gt, Literal::Float(1000.0));
    assert_eq!(pruner.row_groups(&f).pruned, 0);
    let f = Predicate::compare("f", CmpOp::Eq, Literal::Float(1000.0));
    assert_eq!(pruner.row_groups(&f).pruned, 10);
}

/// `$PARQUET_TEST_DATA/<name>`, or `None` (with a message) when the variable is unset.
fn testing_file(name: &str) -> Option<std::fs::File> {
    let Some(dir) = std::env::var_os("PARQUET_TEST_DATA") else {
        println!("PARQUET_TEST_DATA unset: skipping the parquet-testing check of {name}");
        return None;
    };
    let path = std::path::Path::new(&dir).join(name);
    Some(std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// Every top-level column of a supported type, as naive values.
fn read_columns(file: &std::fs::File) -> Result<Vec<(String, Vec<Value>)>, String> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::*;
    use arrow_array::Array;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file.try_clone().expect("clone"))
        .expect("reader")
        .build()
        .expect("build");
    let mut out: Vec<(String, Vec<Value>)> = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| e.to_string())?;
        for (i, field) in batch.schema().fields().iter().enumerate() {
            let a = batch.column(i);
            let cell = |r: usize| -> Option<Value> {
                if a.is_null(r) {
                    return Some(Value::Null);
                }
                Some(match a.data_type() {
                    DataType::Int8 => Value::Int(a.as_primitive::<Int8Type>().value(r).into()),
                    DataType::Int16 => Value::Int(a.as_primitive::<Int16Type>().value(r).into()),
                    DataType::Int32 => Value::Int(a.as_primitive::<Int32Type>().value(r).into()),
                    DataType::Int64 => Value::Int(a.as_primitive::<Int64Type>().value(r).into()),
                    DataType::UInt32 => Value::Int(a.as_primitive::<UInt32Type>().value(r).into()),
                    DataType::UInt64 => Value::Int(a.as_primitive::<UInt64Type>().value(r).into()),
                    DataType::Float32 => {
                        Value::Float(a.as_primitive::<Float32Type>().value(r).into())
                    }
                    DataType::Float64 => Value::Float(a.as_primitive::<Float64Type>().value(r)),
                    DataType::Utf8 => Value::Str(a.as_string::<i32>().value(r).to_owned()),
                    _ => return None,
                })
            };
            let values: Option<Vec<Value>> = (0..a.len()).map(cell).collect();
            let Some(values) = values else { continue };
            match out.iter_mut().find(|(n, _)| n == field.name()) {
                Some((_, v)) => v.extend(values),
                None => out.push((field.name().clone(), values)),
            }
        }
    }
    Ok(out)
}

/// Literals around the column's values: present ones, the extremes, and just outside.
fn literals(values: &[Value]) -> Vec<Literal> {
    let mut out = vec![Literal::Null];
    let present: Vec<&Value> = values.iter().filter(|v| **v != Value::Null).collect();
    let picks = [
        0,
        present.len() / 3,
        present.len() / 2,
        present.len().saturating_sub(1),
    ];
    for &i in picks.iter().filter(|&&i| i < present.len()) {
        match present[i] {
            Value::Int(v) => {
                let v = i64::try_from(*v).expect("i64");
                out.extend([Literal::Int(v), Literal::Int(v.saturating_add(1))]);
            }
            Value::Float(f) => out.extend([Literal::Float(*f), Literal::Float(*f + 0.5)]),
            Value::Str(s) => out.extend([Literal::Utf8(s.clone()), Literal::Utf8(format!("{s}~"))]),
            Value::Null | Value::TsMillis(_) => {}
        }
    }
    match present.first() {
        Some(Value::Int(_)) => out.extend([Literal::Int(i64::MIN), Literal::Int(i64::MAX)]),
        Some(Value::Float(_)) => out.extend([Literal::Float(-1e300), Literal::Float(1e300)]),
        Some(Value::Str(_)) => {
            out.extend([Literal::Utf8(String::new()), Literal::Utf8("zzzz".into())])
        }
        _ => {}
    }
    out
}

/// Prune `name` with many predicates over its own values; assert no matching row is
/// dropped. Returns (row groups pruned, bloom pruned, pages skipped) summed.
fn check_testing_file(name: &str) -> Option<(usize, usize, usize)> {
    let file = testing_file(name)?;
    let meta = read_metadata(&file);
    let columns = match read_columns(&file) {
        Ok(columns) => columns,
        // The workspace's parquet has no gzip (flate2): such files are checked on metadata only.
        Err(e) if e.contains("Disabled feature") => {
            println!("{name}: cannot decode ({e}): naive check skipped");
            return Some((0, 0, 0));
        }
        Err(e) => panic!("{name}: {e}"),
    };
    if columns.is_empty() {
        println!("{name}: no top-level column of a supported type: naive check skipped");
        return Some((0, 0, 0));
    }
    let ops = [
        CmpOp::Eq,
        CmpOp::NotEq,
        CmpOp::Lt,
        CmpOp::LtEq,
        CmpOp::Gt,
        CmpOp::GtEq,
    ];
    let mut preds = Vec::new();
    for (col, values) in &columns {
        let lits = literals(values);
        let c = || Operand::Column(col.clone());
        for lit in &lits {
            for op in ops {
                let p = Predicate::compare(col, op, lit.clone());
                preds.push(Predicate::Not(Box::new(p.clone())));
                preds.push(p);
            }
        }
        preds.push(Predicate::IsNull {
            expr: c(),
            negated: false,
        });
        preds.push(Predicate::IsNull {
            expr: c(),
            negated: true,
        });
        preds.push(Predicate::InList {
            expr: c(),
            list: lits.clone(),
            negated: false,
        });
        preds.push(Predicate::InList {
            expr: c(),
            list: lits[1..].to_vec(),
            negated: true,
        });
        if lits.len() > 3 {
            preds.push(Predicate::Between {
                expr: c(),
                low: lits[1].clone(),
                high: lits[3].clone(),
                negated: false,
            });
        }
    }
    // Pairs across columns: AND and OR with different page boundaries.
    let leaves: Vec<Predicate> = preds.iter().step_by(7).cloned().collect();
    for w in leaves.windows(2) {
        preds.push(Predicate::And(w.to_vec()));
        preds.push(Predicate::Or(w.to_vec()));
    }
    let lookup = |c: &str, r: usize| -> Value {
        columns
            .iter()
            .find(|(n, _)| n == c)
            .map(|(_, v)| v[r].clone())
            .expect("column")
    };
    let num_rows = columns[0].1.len();
    let mut totals = (0, 0, 0);
    for pred in &preds {
        let kept = prune_file(&file, &meta, pred);
        assert_eq!(kept.rows.len(), num_rows, "{name}");
        // Under the one float rule (DuckDB's), which the engine and the row filter follow.
        for r in 0..num_rows {
            if eval_row(pred, &|c| lookup(c, r), FloatSemantics::Total) == Some(true) {
                assert!(
                    kept.rows[r],
                    "{name}: row {r} matches {pred:?} but was pruned"
                );
            }
        }
        totals.0 += kept.row_groups_pruned;
        totals.1 += kept.bloom_pruned;
        totals.2 += kept.pages_skipped;
    }
    println!(
        "{name}: {} predicates, totals (rg, bloom, pages) = {totals:?}",
        preds.len()
    );
    Some(totals)
}

#[test]
fn parquet_testing_alltypes_tiny_pages() {
    if let Some((_, _, pages_skipped)) = check_testing_file("alltypes_tiny_pages.parquet") {
        assert!(pages_skipped > 0, "the page index never pruned a page");
    }
}

#[test]
fn parquet_testing_bloom_filter_files() {
    for name in [
        "data_index_bloom_encoding_stats.parquet",
        "data_index_bloom_encoding_with_length.parquet",
    ] {
        check_bloom_file(name);
    }
}

fn check_bloom_file(name: &str) {
    let Some(_) = check_testing_file(name) else {
        return;
    };
    let file = testing_file(name).expect("file");
    let meta = read_metadata(&file);
    let pruner = FilePruner::try_new(&meta, "bloom").expect("pruner");
    let all: Vec<usize> = (0..meta.num_row_groups()).collect();
    // Values known to be in the file (arrow-rs's own bloom filter test uses "Hello"), and
    // the exact column-chunk min and max, must survive `=`.
    let mut present = vec!["Hello".to_owned()];
    for g in &all {
        let stats = meta.row_group(*g).column(0).statistics().expect("stats");
        for (bytes, exact) in [
            (stats.min_bytes_opt(), stats.min_is_exact()),
            (stats.max_bytes_opt(), stats.max_is_exact()),
        ] {
            if let (Some(b), true) = (bytes, exact) {
                present.push(String::from_utf8(b.to_vec()).expect("utf8"));
            }
        }
    }
    for value in &present {
        let eq = Predicate::compare("String", CmpOp::Eq, Literal::Utf8(value.clone()));
        let kept = pruner.bloom_filters(&file, &eq, &all).expect("bloom");
        assert_eq!(
            kept.kept, all,
            "{name}: {value:?} is in the file but was pruned"
        );
    }
    println!("{name}: present values kept: {present:?}");
    let absent = Predicate::compare("String", CmpOp::Eq, Literal::Utf8("Hello~absent".into()));
    let pruned = pruner
        .bloom_filters(&file, &absent, &all)
        .expect("bloom")
        .pruned;
    println!(
        "{name}: absent value pruned {pruned} of {} row groups",
        all.len()
    );
    assert_eq!(
        pruned,
        all.len(),
        "{name}: the bloom filter did not prune an absent value"
    );
}

#[test]
fn parquet_testing_other_files() {
    for name in [
        "alltypes_plain.parquet",
        "datapage_v2.snappy.parquet",
        "nulls.snappy.parquet",
    ] {
        let _ = check_testing_file(name);
    }
}

#[test]
fn without_a_page_index_every_row_is_selected() {
    let file = sample_file();
    let meta = parquet::file::metadata::ParquetMetaDataReader::new()
        .with_page_index_policy(parquet::file::metadata::PageIndexPolicy::Skip)
        .parse_and_finish(&file)
        .expect("metadata");
    let pruner = FilePruner::try_new(&meta, "sample").expect("pruner");
    let p = pruner
        .pages(&int("sorted", CmpOp::Gt, 955), 9)
        .expect("pages");
    assert_eq!(
        (p.rows_selected, p.pages_considered, p.pages_skipped),
        (100, 0, 0)
    );
    // Row-group statistics still apply inside the row group: a provably empty group
    // selects nothing.
    let p = pruner
        .pages(&int("sorted", CmpOp::Gt, 5000), 9)
        .expect("pages");
    assert_eq!(p.rows_selected, 0);
}
