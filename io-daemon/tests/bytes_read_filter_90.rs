//! Bytes read by the seed-000 `filter_90` scan against the pages that hold its rows
//! (issue 21, item 4).
//!
//! The `pushdown` bench suite's data (100,000 `ohlcv` bars of one symbol, 10 row groups of
//! 10,000 rows, 1,000-row pages, seed 7, two writers) and its `filter_90` scenario
//! (`close >= p90`, every column). Three figures, each a share of the unfiltered scan's
//! bytes:
//!
//! - **page share**: the data pages (all columns) that hold at least one selected row,
//!   from the offset index: what a reader that knew the rows in advance would read;
//! - **floor**: what a late-materializing reader must read when the filter column cannot
//!   be pruned (`close >= x` on a float with no NaN count prunes nothing): the filter
//!   column whole, then of every other column its dictionary page and the pages that hold
//!   selected rows;
//! - **read**: what the scan read on a warm cache (page indexes cached, like footers).
//!
//! - **pruned floor**: what it would read if the filter column's pages were pruned too
//!   (every column's dictionary page and the pages that hold selected rows).
//!
//! The target is read <= page share + 10 points. It was missed (30.1% against a
//! page share of 14.2%) while the float filter column was read whole: parquet 59 reads
//! no NaN counts (`prune/range.rs`: a NaN row, which `>=` selects, may hide behind any
//! min/max). The generator now declares its float columns free of NaN in the file's
//! metadata (`ringscan.nan_free`, trusted only where `created_by` is ringscan's), and
//! the read falls to the pruned floor (16.6%). Without dictionaries for the price
//! columns the files grow (PLAIN +33%, BYTE_STREAM_SPLIT +138%) and the share read does
//! not fall; figures and commands in benches/results/bytes-read.md, made by
//! `scripts/bench-bytes-read`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::Float64Type;
use arrow_array::RecordBatch;
use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::file::metadata::PageIndexPolicy;
use ringscan_generator::{DatasetKind, GenerateOptions};
use ringscan_io_daemon::scan::{scan_files, MetadataCache, ScanSpec};
use ringscan_ipc::msg::{CmpOp, Literal, Predicate, ScanSummary};

/// The pushdown suite's data (`benches/src/suites.rs`, `SuiteKind::Pushdown`).
fn generate(out: &Path) -> Vec<PathBuf> {
    let mut opts = GenerateOptions::new(DatasetKind::Ohlcv, out.to_path_buf());
    opts.rows = 100_000;
    opts.seed = 7;
    opts.symbols = 1;
    opts.row_group_rows = 10_000;
    opts.page_rows = 1_000;
    // The bench runs with one writer per core; two on the 2-core machines it is measured
    // on. Fixed here so that the files do not depend on the machine.
    opts.writers = 2;
    opts.producers = 2;
    ringscan_generator::generate(&opts, &|_| {}).expect("generate");
    ringscan_generator::inspect::parquet_files(out).expect("ls")
}

fn scan(
    root: &Path,
    files: &[PathBuf],
    pred: Option<&Predicate>,
    cache: &MetadataCache,
) -> ScanSummary {
    let spec = ScanSpec::new(root, files).with_predicate(pred);
    scan_files(&spec, cache, &mut |_: RecordBatch| Ok(true)).expect("scan")
}

/// Byte accounting of the files from their offset indexes, for rows where `selected`.
#[derive(Debug, Default)]
struct Pages {
    /// Every column chunk, whole (what an unfiltered scan of every column reads).
    total: u64,
    /// Data pages holding a selected row, every column.
    selected_pages: u64,
    /// The filter column whole, plus the dictionary page and selected pages of the rest.
    floor: u64,
    /// Every column's dictionary page and its pages holding a selected row (chunks with
    /// no such page left out): the floor if the filter column were pruned like the rest.
    pruned_floor: u64,
    /// Dictionary pages, every column.
    dictionaries: u64,
    /// Bytes per column (whole chunks), by name.
    by_column: HashMap<String, u64>,
    /// Dictionary page bytes per column, by name.
    dictionary_by_column: HashMap<String, u64>,
}

fn pages(files: &[PathBuf], filter_column: &str, threshold: f64) -> Pages {
    let mut p = Pages::default();
    for path in files {
        let file = std::fs::File::open(path).expect("open");
        let builder = ParquetRecordBatchReaderBuilder::try_new_with_options(
            file,
            ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Required),
        )
        .expect("reader");
        let meta = builder.metadata().clone();
        let closes: Vec<f64> = builder
            .with_batch_size(1 << 20)
            .build()
            .expect("reader")
            .flat_map(|b| {
                let b = b.expect("batch");
                let c = b.column_by_name(filter_column).expect("filter column");
                c.as_primitive::<Float64Type>().values().to_vec()
            })
            .collect();
        let offsets = meta.offset_index().expect("offset index");
        let mut first_row = 0usize;
        for (g, rg) in meta.row_groups().iter().enumerate() {
            let rows = rg.num_rows() as usize;
            let selected: Vec<bool> = closes[first_row..first_row + rows]
                .iter()
                .map(|c| *c >= threshold)
                .collect();
            first_row += rows;
            for (c, col) in rg.columns().iter().enumerate() {
                let name = col.column_path().string();
                let chunk = col.compressed_size() as u64;
                let locations = offsets[g][c].page_locations();
                let chunk_start =
                    col.dictionary_page_offset()
                        .unwrap_or_else(|| col.data_page_offset()) as u64;
                let dictionary = locations[0].offset as u64 - chunk_start;
                let mut held = 0u64;
                for (i, loc) in locations.iter().enumerate() {
                    let start = loc.first_row_index as usize;
                    let end = locations
                        .get(i + 1)
                        .map_or(rows, |next| next.first_row_index as usize);
                    if selected[start..end].iter().any(|s| *s) {
                        held += loc.compressed_page_size as u64;
                    }
                }
                p.total += chunk;
                p.selected_pages += held;
                p.dictionaries += dictionary;
                if held > 0 {
                    p.pruned_floor += dictionary + held;
                }
                p.floor += if name == filter_column {
                    chunk
                } else if held > 0 {
                    dictionary + held
                } else {
                    0
                };
                *p.by_column.entry(name.clone()).or_default() += chunk;
                *p.dictionary_by_column.entry(name).or_default() += dictionary;
            }
        }
    }
    p
}

/// The scans and the page accounting of the suite's data: (unfiltered, filtered cold,
/// filtered warm, pages).
fn measure() -> (ScanSummary, ScanSummary, ScanSummary, Pages) {
    let dir = tempfile::tempdir().expect("tempdir");
    let files = generate(&dir.path().join("ohlcv"));
    let cache = MetadataCache::new(16 << 20);
    let all = scan(dir.path(), &files, None, &cache);

    // p90 of close, as the suite's `close_q90` (its quantile is DuckDB's; any value near
    // it gives the shape: about 10% of the bars kept).
    let mut closes = Vec::new();
    let spec = ScanSpec::new(dir.path(), &files);
    scan_files(&spec, &cache, &mut |b: RecordBatch| {
        let c = b.column_by_name("close").expect("close");
        closes.extend(c.as_primitive::<Float64Type>().values().iter().copied());
        Ok(true)
    })
    .expect("scan");
    closes.sort_by(f64::total_cmp);
    let threshold = closes[closes.len() * 9 / 10];
    let pred = Predicate::compare("close", CmpOp::GtEq, Literal::Float(threshold));

    let cold = scan(
        dir.path(),
        &files,
        Some(&pred),
        &MetadataCache::new(16 << 20),
    );
    let warm_cache = MetadataCache::new(16 << 20);
    scan(dir.path(), &files, Some(&pred), &warm_cache);
    let warm = scan(dir.path(), &files, Some(&pred), &warm_cache);
    assert_eq!(warm.page_index_bytes_read, 0, "page indexes are cached");
    assert_eq!(
        warm.rows_emitted,
        closes.iter().filter(|c| **c >= threshold).count() as u64
    );

    let p = pages(&files, "close", threshold);
    assert_eq!(
        p.total, all.bytes_read,
        "the unfiltered scan reads every chunk whole"
    );
    let share = |bytes: u64| 100.0 * bytes as f64 / all.bytes_read as f64;
    let mut columns: Vec<_> = p.by_column.iter().collect();
    columns.sort();
    let columns: Vec<String> = columns
        .into_iter()
        .map(|(name, bytes)| {
            format!(
                "{name} {bytes} ({:.1}%, dictionary {})",
                share(*bytes),
                p.dictionary_by_column[name]
            )
        })
        .collect();
    let file_bytes: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).expect("stat").len())
        .sum();
    eprintln!(
        "filter_90 (close >= {threshold}): {} of {} rows; files {file_bytes} bytes\n\
         unfiltered scan: {} bytes\n\
         filtered scan, warm: {} bytes ({:.1}%)\n\
         filtered scan, cold: {} bytes ({:.1}%), {} of them page index\n\
         page share: {} bytes ({:.1}%)\n\
         floor (filter column whole): {} bytes ({:.1}%)\n\
         pruned floor (filter column pruned too): {} bytes ({:.1}%)\n\
         dictionary pages: {} bytes ({:.1}%)\n\
         columns: {}",
        warm.rows_emitted,
        all.rows_emitted,
        all.bytes_read,
        warm.bytes_read,
        share(warm.bytes_read),
        cold.bytes_read,
        share(cold.bytes_read),
        cold.page_index_bytes_read,
        p.selected_pages,
        share(p.selected_pages),
        p.floor,
        share(p.floor),
        p.pruned_floor,
        share(p.pruned_floor),
        p.dictionaries,
        share(p.dictionaries),
        columns.join(", "),
    );
    (all, cold, warm, p)
}

/// The reader fetches only what the scan needs: of the filter column the pages whose
/// min/max can hold a selected row (the generator declares its float columns free of
/// NaN, which the statistics leave out), then of the other columns the dictionary page
/// and the pages holding selected rows (offset index).
#[test]
fn filter_90_reads_only_the_pages_holding_its_rows_and_the_dictionaries() {
    let (_, cold, warm, p) = measure();
    assert_eq!(warm.bytes_read, p.pruned_floor);
    assert_eq!(cold.bytes_read, p.pruned_floor + cold.page_index_bytes_read);
}

#[test]
fn filter_90_reads_at_most_its_page_share_plus_10_points() {
    let (all, _, warm, p) = measure();
    let share = |bytes: u64| bytes as f64 / all.bytes_read as f64;
    assert!(
        share(warm.bytes_read) <= share(p.selected_pages) + 0.10,
        "read {:.1}% of the unfiltered scan's bytes; the pages holding the rows are {:.1}%",
        100.0 * share(warm.bytes_read),
        100.0 * share(p.selected_pages)
    );
}

/// A file that names its float column in `ringscan.nan_free` but was written by another
/// tool (a rewrite keeps key-value metadata, not the promise) is not taken at its word:
/// `x >= 2.5` still finds the NaN row behind a page whose max is 2.0.
#[test]
fn a_nan_free_declaration_from_another_writer_is_not_trusted() {
    use std::sync::Arc;

    use arrow_array::Float64Array;
    use arrow_schema::{DataType, Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::file::metadata::KeyValue;
    use parquet::file::properties::{EnabledStatistics, WriterProperties};

    let dir = tempfile::tempdir().expect("tempdir");
    let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Float64, false)]));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![Arc::new(Float64Array::from(vec![
            1.0,
            f64::NAN,
            2.0,
            1.5,
            3.0,
            4.0,
            3.5,
            5.0,
        ]))],
    )
    .expect("batch");
    let rows_at_least = |created_by: &str| {
        let path = dir
            .path()
            .join(format!("{}.parquet", created_by.replace(' ', "_")));
        let props = WriterProperties::builder()
            .set_created_by(created_by.to_owned())
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_data_page_row_count_limit(4)
            .set_write_batch_size(4)
            .set_dictionary_enabled(false)
            .set_key_value_metadata(Some(vec![KeyValue::new(
                "ringscan.nan_free".into(),
                "x".to_owned(),
            )]))
            .build();
        let file = std::fs::File::create(&path).expect("create");
        let mut writer =
            ArrowWriter::try_new(file, Arc::clone(&schema), Some(props)).expect("writer");
        writer.write(&batch).expect("write");
        writer.close().expect("close");
        let pred = Predicate::compare("x", CmpOp::GtEq, Literal::Float(2.5));
        let files = vec![path];
        let spec = ScanSpec::new(dir.path(), &files).with_predicate(Some(&pred));
        let mut rows = 0;
        let summary = scan_files(
            &spec,
            &MetadataCache::new(1 << 20),
            &mut |b: RecordBatch| {
                rows += b.num_rows();
                Ok(true)
            },
        )
        .expect("scan");
        (rows, summary.pages_skipped)
    };
    // NaN >= 2.5 (NaN above every number): 3.0, 4.0, 3.5, 5.0 and the NaN.
    let (rows, _) = rows_at_least("parquet-rs version 59");
    assert_eq!(rows, 5, "a stranger's declaration pruned the NaN's page");
    // The same bytes from ringscan's writer are taken at their word: the first page
    // (max 2.0) is pruned, NaN and all (which is why the generator must never write
    // one: `generator/tests/nan_free.rs`).
    let (rows, pruned) = rows_at_least("ringscan generate (test)");
    assert_eq!((rows, pruned), (4, 1));
}
