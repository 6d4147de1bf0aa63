//! The dictionary writer against parquet's ArrowWriter, the naive reference: the same
//! `contacts` rows written both ways must read back equal, with equal chunk statistics,
//! and every page's column-index entry must describe the rows its offset-index entry
//! says the page holds.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch, StringArray};
use bytes::Bytes;
use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData};
use parquet::file::page_index::column_index::ColumnIndexMetaData;
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use super::levels::LeafLevels;
use super::{check_vocabulary, DictionaryChunkWriter, MAX_VALUE_BYTES};
use crate::datasets::{Contacts, Dataset};
use crate::row_group::FileWriter;

fn props(compression: Compression) -> WriterProperties {
    WriterProperties::builder()
        .set_compression(compression)
        .set_max_row_group_row_count(Some(1_500))
        .set_data_page_row_count_limit(200)
        .set_write_batch_size(100)
        .set_statistics_enabled(EnabledStatistics::Page)
        .build()
}

/// Rows 0..4,000 of `contacts` in three uneven batches, keyed and plain.
fn batches() -> (Vec<RecordBatch>, Vec<RecordBatch>) {
    let d = Contacts::new(7, 4_000);
    let ranges = [(0, 1_700), (1_700, 1), (1_701, 2_299)];
    let keyed = ranges.map(|(s, n)| d.encoded_batch(s, n).unwrap()).to_vec();
    let plain = ranges.map(|(s, n)| d.batch(s, n).unwrap()).to_vec();
    assert_ne!(
        keyed[0].schema(),
        plain[0].schema(),
        "the string leaves come keyed"
    );
    (keyed, plain)
}

fn read(bytes: &Bytes) -> (RecordBatch, Arc<ParquetMetaData>) {
    let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Required);
    let builder =
        ParquetRecordBatchReaderBuilder::try_new_with_options(bytes.clone(), options).unwrap();
    let metadata = Arc::clone(builder.metadata());
    let schema = builder.schema().clone();
    let batches: Vec<RecordBatch> = builder.build().unwrap().map(|b| b.unwrap()).collect();
    (
        arrow_select::concat::concat_batches(&schema, &batches).unwrap(),
        metadata,
    )
}

/// Each level entry of leaf `leaf` (0 `id` .. 5 `address.zip`) in row `row`: the
/// value, or `None` where a null or an empty list stands in its place.
fn leaf_entries(batch: &RecordBatch, leaf: usize, row: usize) -> Vec<Option<String>> {
    let text = |a: &dyn Array, i: usize| {
        a.is_valid(i)
            .then(|| a.as_string::<i32>().value(i).to_owned())
    };
    match leaf {
        1 => vec![text(batch.column(1).as_ref(), row)],
        2 | 3 => {
            let list = batch.column(2).as_list::<i32>();
            if list.is_null(row) || list.value_length(row) == 0 {
                return vec![None];
            }
            let items = list.values().as_struct();
            let (start, end) = (
                list.value_offsets()[row] as usize,
                list.value_offsets()[row + 1] as usize,
            );
            (start..end)
                .map(|i| {
                    items
                        .is_valid(i)
                        .then(|| text(items.column(leaf - 2).as_ref(), i))
                        .flatten()
                })
                .collect()
        }
        4 | 5 => {
            let address = batch.column(3).as_struct();
            vec![address
                .is_valid(row)
                .then(|| text(address.column(leaf - 4).as_ref(), row))
                .flatten()]
        }
        _ => unreachable!("only the string leaves"),
    }
}

/// Checks every page of the string leaves: the column index's min, max and null count
/// are those of the rows the offset index gives the page.
fn check_page_index(rows: &RecordBatch, metadata: &ParquetMetaData) {
    let column_index = metadata.column_index().expect("a column index");
    let offset_index = metadata.offset_index().expect("an offset index");
    let mut first_row = 0;
    for (rg, group) in metadata.row_groups().iter().enumerate() {
        for leaf in 1..=5 {
            let ColumnIndexMetaData::BYTE_ARRAY(index) = &column_index[rg][leaf] else {
                panic!("row group {rg} leaf {leaf}: no byte-array column index");
            };
            let pages = &offset_index[rg][leaf].page_locations;
            assert_eq!(index.num_pages() as usize, pages.len());
            for (p, page) in pages.iter().enumerate() {
                let start = first_row + page.first_row_index as usize;
                let end = pages
                    .get(p + 1)
                    .map_or(first_row + group.num_rows() as usize, |n| {
                        first_row + n.first_row_index as usize
                    });
                let entries: Vec<Option<String>> = (start..end)
                    .flat_map(|r| leaf_entries(rows, leaf, r))
                    .collect();
                let values: Vec<&String> = entries.iter().flatten().collect();
                let at = format!("row group {rg} leaf {leaf} page {p}");
                assert_eq!(
                    index.null_count(p),
                    Some((entries.len() - values.len()) as i64),
                    "{at}"
                );
                if values.is_empty() {
                    assert!(index.is_null_page(p), "{at}");
                } else {
                    let min = values.iter().min().unwrap().as_bytes();
                    let max = values.iter().max().unwrap().as_bytes();
                    assert_eq!(index.min_value(p), Some(min), "{at}");
                    assert_eq!(index.max_value(p), Some(max), "{at}");
                }
            }
        }
        first_row += group.num_rows() as usize;
    }
    assert_eq!(first_row, rows.num_rows());
}

#[test]
fn reads_back_like_arrow_writers_file() {
    let (keyed, plain) = batches();
    let schema = plain[0].schema();
    for compression in [
        Compression::ZSTD(ZstdLevel::default()),
        Compression::SNAPPY,
        Compression::LZ4_RAW,
        Compression::UNCOMPRESSED,
    ] {
        let mut ours =
            FileWriter::try_new(Vec::new(), Arc::clone(&schema), props(compression)).unwrap();
        for b in &keyed {
            ours.write(b).unwrap();
        }
        let ours = Bytes::from(ours.into_inner().unwrap());
        let mut theirs =
            ArrowWriter::try_new(Vec::new(), Arc::clone(&schema), Some(props(compression)))
                .unwrap();
        for b in &plain {
            theirs.write(b).unwrap();
        }
        let theirs = Bytes::from(theirs.into_inner().unwrap());

        let (our_rows, our_meta) = read(&ours);
        let (their_rows, their_meta) = read(&theirs);
        assert_eq!(our_rows, their_rows, "{compression}");
        assert_eq!(our_rows.num_rows(), 4_000);

        assert_eq!(our_meta.num_row_groups(), their_meta.num_row_groups());
        for (a, b) in our_meta.row_groups().iter().zip(their_meta.row_groups()) {
            assert_eq!(a.num_rows(), b.num_rows());
            for (x, y) in a.columns().iter().zip(b.columns()) {
                let at = format!("{compression} {}", x.column_path());
                assert_eq!(x.num_values(), y.num_values(), "{at}");
                assert_eq!(x.compression(), y.compression(), "{at}");
                let (sx, sy) = (x.statistics().unwrap(), y.statistics().unwrap());
                assert_eq!(sx.min_bytes_opt(), sy.min_bytes_opt(), "{at}");
                assert_eq!(sx.max_bytes_opt(), sy.max_bytes_opt(), "{at}");
                assert_eq!(sx.null_count_opt(), sy.null_count_opt(), "{at}");
                assert_eq!(
                    x.unencoded_byte_array_data_bytes(),
                    y.unencoded_byte_array_data_bytes(),
                    "{at}"
                );
                assert_eq!(
                    x.definition_level_histogram(),
                    y.definition_level_histogram(),
                    "{at}"
                );
                assert_eq!(
                    x.repetition_level_histogram(),
                    y.repetition_level_histogram(),
                    "{at}"
                );
            }
        }
        check_page_index(&our_rows, &our_meta);
        // The check itself, on the reference file.
        check_page_index(&their_rows, &their_meta);
    }
}

/// The leaf `name` of a one-column schema, and a writer for it with 3-row pages.
fn name_writer() -> DictionaryChunkWriter {
    let message = "message m { optional binary name (STRING); }";
    let schema = parquet::schema::parser::parse_message_type(message).unwrap();
    let descr = parquet::schema::types::SchemaDescriptor::new(Arc::new(schema));
    let props = WriterProperties::builder()
        .set_data_page_row_count_limit(3)
        .build();
    DictionaryChunkWriter::new(descr.column(0), &props).unwrap()
}

fn leaf(vocabulary: &[&str], keys: &[Option<u16>]) -> LeafLevels {
    LeafLevels {
        def: keys.iter().map(|k| u16::from(k.is_some())).collect(),
        rep: Vec::new(),
        keys: keys.iter().flatten().copied().collect(),
        vocabulary: StringArray::from(vocabulary.to_vec()),
        rows: keys.len(),
    }
}

#[test]
fn bad_vocabularies_and_keys_are_refused() {
    assert!(check_vocabulary(&StringArray::from(vec!["a", "b"])).is_ok());
    assert!(check_vocabulary(&StringArray::from(vec!["b", "a"])).is_err());
    assert!(check_vocabulary(&StringArray::from(vec!["a", "a"])).is_err());
    assert!(check_vocabulary(&StringArray::from(vec![Some("a"), None])).is_err());
    assert!(check_vocabulary(&StringArray::from(vec!["x".repeat(MAX_VALUE_BYTES + 1)])).is_err());

    let mut w = name_writer();
    assert!(
        w.write(leaf(&["a", "b"], &[Some(2)])).is_err(),
        "a key past the vocabulary"
    );

    // Properties under which ArrowWriter would write something else are refused.
    let message = "message m { optional binary name (STRING); }";
    let schema = parquet::schema::parser::parse_message_type(message).unwrap();
    let descr = parquet::schema::types::SchemaDescriptor::new(Arc::new(schema));
    for props in [
        WriterProperties::builder().set_bloom_filter_enabled(true),
        WriterProperties::builder().set_dictionary_enabled(false),
        WriterProperties::builder().set_statistics_truncate_length(Some(8)),
    ] {
        assert!(DictionaryChunkWriter::new(descr.column(0), &props.build()).is_err());
    }
    let mut w = name_writer();
    w.write(leaf(&["a", "b"], &[Some(1), None])).unwrap();
    let err = w.write(leaf(&["a", "c"], &[Some(0)])).unwrap_err();
    assert!(
        err.to_string().contains("changed within a row group"),
        "{err}"
    );
    // An equal vocabulary in other buffers is the same vocabulary.
    w.write(leaf(&["a", "b"], &[Some(0)])).unwrap();
    assert_eq!(w.rows(), 3);
}

#[test]
fn pages_end_at_the_row_limit_and_keep_only_used_values() {
    let mut w = name_writer();
    w.write(leaf(
        &["a", "b", "c", "d"],
        &[Some(3), None, Some(3), Some(0), None, None, Some(3)],
    ))
    .unwrap();
    let (bytes, close) = w.close().unwrap();
    let offsets = close.offset_index.as_ref().unwrap();
    let first_rows: Vec<i64> = offsets
        .page_locations
        .iter()
        .map(|p| p.first_row_index)
        .collect();
    assert_eq!(first_rows, [0, 3, 6]);
    assert_eq!(close.rows_written, 7);
    let ColumnIndexMetaData::BYTE_ARRAY(index) = close.column_index.as_ref().unwrap() else {
        panic!("a byte-array column index")
    };
    // Pages: [d, -, d], [a, -, -], [d].
    assert_eq!(index.min_value(0), Some(&b"d"[..]));
    assert_eq!(index.min_value(1), Some(&b"a"[..]));
    assert_eq!(index.max_value(1), Some(&b"a"[..]));
    assert_eq!(
        (
            index.null_count(0),
            index.null_count(1),
            index.null_count(2)
        ),
        (Some(1), Some(2), Some(0))
    );
    assert_eq!(close.metadata.num_values(), 7);
    let stats = close.metadata.statistics().unwrap();
    assert_eq!(
        (stats.min_bytes_opt(), stats.max_bytes_opt()),
        (Some(&b"a"[..]), Some(&b"d"[..]))
    );
    // The dictionary page holds the two values used, the commonest first.
    assert_eq!(close.metadata.dictionary_page_offset(), Some(0));
    let dictionary = &bytes[..close.metadata.data_page_offset() as usize];
    let d = dictionary.windows(1).position(|w| w == b"d").unwrap();
    let a = dictionary.windows(1).position(|w| w == b"a").unwrap();
    assert!(d < a, "d (3 times) before a (once)");
}
