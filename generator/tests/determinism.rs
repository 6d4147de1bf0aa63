//! The generator's promise: the same seed and row count give the same rows, whatever
//! the producer and writer counts and the batch size. Files are read back with
//! parquet's own reader and compared with the dataset's reference batch.

use std::path::Path;

use arrow_array::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use proptest::prelude::*;
use ringscan_generator::inspect::{describe, parquet_files};
use ringscan_generator::{generate, DatasetKind, GenerateOptions, PartitionBy};

/// Every row of every file under `dir`, in path order (which is row order: partition
/// directories sort like the rows, and `part-0000w` like the writers' ranges).
fn read_all(dir: &Path) -> Vec<RecordBatch> {
    let mut batches = Vec::new();
    for path in parquet_files(dir).unwrap() {
        let file = std::fs::File::open(&path).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .with_batch_size(1 << 20)
            .build()
            .unwrap();
        for batch in reader {
            batches.push(batch.unwrap());
        }
    }
    batches
}

fn concat(batches: &[RecordBatch]) -> RecordBatch {
    arrow_select::concat::concat_batches(&batches[0].schema(), batches).unwrap()
}

/// The reference: the dataset's rows built in one batch, minus partition columns.
fn expected(opts: &GenerateOptions) -> RecordBatch {
    let dataset = opts.build_dataset();
    // Batches never cross a segment (a symbol or partition), so build one per segment.
    let mut parts = Vec::new();
    let mut start = 0;
    while start < opts.rows {
        let end = dataset.segment_end(start);
        parts.push(dataset.batch(start, (end - start) as usize).unwrap());
        start = end;
    }
    let full = concat(&parts);
    let keep: Vec<usize> = (0..full.num_columns())
        .filter(|&i| {
            !dataset
                .partition_columns()
                .contains(&full.schema().field(i).name().as_str())
        })
        .collect();
    full.project(&keep).unwrap()
}

fn options(dir: &Path, kind: DatasetKind, rows: u64, seed: u64) -> GenerateOptions {
    let mut opts = GenerateOptions::new(kind, dir.to_path_buf());
    opts.rows = rows;
    opts.seed = seed;
    opts.row_group_rows = 700;
    opts.page_rows = 100;
    opts
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn rows_do_not_depend_on_threads_or_batch_size(
        kind in prop_oneof![Just(DatasetKind::Ohlcv), Just(DatasetKind::Contacts), Just(DatasetKind::Wide)],
        partition in prop_oneof![Just(PartitionBy::None), Just(PartitionBy::Symbol), Just(PartitionBy::SymbolDate)],
        rows in 1u64..3_000,
        producers in 1usize..5,
        writers in 1usize..5,
        batch_rows in 1usize..1_500,
        seed in 0u64..4,
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let mut opts = options(&tmp.path().join("out"), kind, rows, seed);
        opts.producers = producers;
        opts.writers = writers;
        opts.batch_rows = batch_rows;
        opts.symbols = 3;
        if kind == DatasetKind::Ohlcv {
            opts.partition_by = partition;
        }
        let summary = generate(&opts, &|_| {}).unwrap();
        prop_assert_eq!(summary.rows, rows);
        let got = concat(&read_all(&opts.out));
        prop_assert_eq!(got.num_rows() as u64, rows);
        prop_assert_eq!(got, expected(&opts));
        // No temporary file survives a successful run.
        let leftovers: Vec<_> = walk(&opts.out).into_iter().filter(|p| p.ends_with(".tmp")).collect();
        prop_assert!(leftovers.is_empty(), "{:?}", leftovers);
    }
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path.display().to_string());
        }
    }
    out
}

#[test]
fn the_seed_changes_the_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let a = options(&tmp.path().join("a"), DatasetKind::Contacts, 500, 1);
    let b = options(&tmp.path().join("b"), DatasetKind::Contacts, 500, 2);
    generate(&a, &|_| {}).unwrap();
    generate(&b, &|_| {}).unwrap();
    assert_ne!(concat(&read_all(&a.out)), concat(&read_all(&b.out)));
}

#[test]
fn files_carry_statistics_page_index_blooms_and_sort_order() {
    let tmp = tempfile::tempdir().unwrap();
    for (kind, sorted, bloom) in [
        (DatasetKind::Ohlcv, vec!["symbol", "ts"], vec!["symbol"]),
        (DatasetKind::Contacts, vec!["id"], vec!["id"]),
        (
            DatasetKind::Wide,
            vec!["order_id"],
            vec!["order_id", "customer_id"],
        ),
    ] {
        let mut opts = options(&tmp.path().join(kind.name()), kind, 5_000, 7);
        opts.writers = 2;
        generate(&opts, &|_| {}).unwrap();
        let files = parquet_files(&opts.out).unwrap();
        assert_eq!(files.len(), 2, "{}", kind.name());
        for path in files {
            let report = describe(&path).unwrap();
            assert_eq!(report.rows, 2_500);
            assert_eq!(
                report.row_group_rows,
                vec![700, 700, 700, 400],
                "{}",
                kind.name()
            );
            assert_eq!(
                report.columns_with_statistics,
                report.columns,
                "{}",
                kind.name()
            );
            assert_eq!(
                report.columns_with_column_index,
                report.columns,
                "{}",
                kind.name()
            );
            assert!(report.offset_index);
            assert_eq!(report.bloom_columns, bloom, "{}", kind.name());
            assert_eq!(report.sorted_by, sorted, "{}", kind.name());
            assert!(
                report.compression.starts_with("ZSTD"),
                "{}",
                report.compression
            );
            // 100-row pages: a 700-row chunk gets several pages (the limit is best effort,
            // checked per write batch), never one page for the whole chunk.
            assert!(
                report.data_pages >= report.columns.len() * 4 * 5,
                "{} pages",
                report.data_pages
            );
        }
    }
}

#[test]
fn partitioned_ohlcv_drops_the_partition_column_and_sorts_by_time() {
    let tmp = tempfile::tempdir().unwrap();
    let mut opts = options(&tmp.path().join("p"), DatasetKind::Ohlcv, 2_000, 3);
    opts.symbols = 2;
    opts.partition_by = PartitionBy::SymbolDate;
    opts.writers = 3;
    generate(&opts, &|_| {}).unwrap();
    let files = parquet_files(&opts.out).unwrap();
    let relative: Vec<String> = files
        .iter()
        .map(|p| p.strip_prefix(&opts.out).unwrap().display().to_string())
        .collect();
    assert!(
        relative[0].starts_with("symbol=QQQ/date=2024-01-02/part-0000"),
        "{relative:?}"
    );
    for path in &files {
        let report = describe(path).unwrap();
        assert!(!report.columns.contains(&"symbol".to_owned()));
        assert_eq!(report.sorted_by, vec!["ts"]);
        assert!(report.rows <= 390);
    }
}

#[test]
fn every_codec_round_trips() {
    use ringscan_generator::CompressionKind;
    let tmp = tempfile::tempdir().unwrap();
    for (codec, name) in [
        (CompressionKind::Lz4, "LZ4_RAW"),
        (CompressionKind::Snappy, "SNAPPY"),
        (CompressionKind::None, "UNCOMPRESSED"),
    ] {
        let mut opts = options(&tmp.path().join(name), DatasetKind::Wide, 1_000, 5);
        opts.compression = codec;
        opts.writers = 1;
        generate(&opts, &|_| {}).unwrap();
        let path = &parquet_files(&opts.out).unwrap()[0];
        assert!(describe(path).unwrap().compression.starts_with(name));
        assert_eq!(concat(&read_all(&opts.out)), expected(&opts));
    }
}

/// The encodings of `column` in every row group of the files under `dir`, and whether
/// each chunk has a dictionary page.
fn chunk_layout(dir: &Path, column: &str) -> Vec<(bool, Vec<parquet::basic::Encoding>)> {
    let mut out = Vec::new();
    for path in parquet_files(dir).unwrap() {
        let file = std::fs::File::open(&path).unwrap();
        let meta = parquet::file::metadata::ParquetMetaDataReader::new()
            .parse_and_finish(&file)
            .unwrap();
        for group in meta.row_groups() {
            let chunk = group
                .columns()
                .iter()
                .find(|c| c.column_path().string() == column)
                .expect("the column is in the file");
            out.push((
                chunk.dictionary_page_offset().is_some(),
                chunk.encodings().collect(),
            ));
        }
    }
    out
}

#[test]
fn ohlcv_volume_has_a_dictionary_only_in_large_row_groups() {
    use parquet::basic::Encoding;
    let tmp = tempfile::tempdir().unwrap();
    for (row_group_rows, dictionary) in [(10_000, false), (16_384, true), (131_072, true)] {
        let mut opts = options(
            &tmp.path().join(row_group_rows.to_string()),
            DatasetKind::Ohlcv,
            20_000,
            5,
        );
        opts.symbols = 1;
        opts.row_group_rows = row_group_rows;
        opts.page_rows = 1_000;
        generate(&opts, &|_| {}).unwrap();
        let volume = chunk_layout(&opts.out, "volume");
        assert!(!volume.is_empty());
        for (has_dictionary, encodings) in &volume {
            assert_eq!(
                *has_dictionary, dictionary,
                "{row_group_rows}: {encodings:?}"
            );
            assert_eq!(
                encodings.contains(&Encoding::DELTA_BINARY_PACKED),
                !dictionary,
                "{row_group_rows}: {encodings:?}"
            );
            assert_eq!(
                encodings.contains(&Encoding::RLE_DICTIONARY),
                dictionary,
                "{row_group_rows}: {encodings:?}"
            );
        }
        // The prices keep their dictionary at every size.
        for (has_dictionary, encodings) in chunk_layout(&opts.out, "close") {
            assert!(has_dictionary, "{row_group_rows}: close {encodings:?}");
        }
        assert_eq!(
            concat(&read_all(&opts.out)),
            expected(&opts),
            "{row_group_rows}"
        );
    }
}
