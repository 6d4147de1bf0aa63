//! Scratch: time Parquet encoding of one contacts batch under property variants.
use std::time::Instant;

use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterPropertiesBuilder};
use parquet::schema::types::ColumnPath;
use ringscan_generator::{DatasetKind, GenerateOptions};

fn main() {
    let kind = match std::env::args().nth(1).as_deref() {
        Some("wide") => DatasetKind::Wide,
        Some("ohlcv") => DatasetKind::Ohlcv,
        _ => DatasetKind::Contacts,
    };
    let mut opts = GenerateOptions::new(kind, "x".into());
    opts.rows = 1_000_000;
    let d = opts.build_dataset();
    let mut best = f64::MAX;
    let mut batches = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        batches = (0..8)
            .map(|i| d.batch(i * 65_536, 65_536).unwrap())
            .collect();
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!("build 524k rows: {:.1} ms (best of 5)", best * 1e3);
    if std::env::var_os("BUILD_ONLY").is_some() {
        return;
    }
    let base = || {
        WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_max_row_group_row_count(Some(131_072))
            .set_data_page_row_count_limit(10_000)
            .set_write_batch_size(1024)
            .set_statistics_enabled(EnabledStatistics::Page)
    };
    let bloom = |b: WriterPropertiesBuilder| {
        b.set_column_bloom_filter_enabled(ColumnPath::from("id"), true)
            .set_column_bloom_filter_fpp(ColumnPath::from("id"), 0.01)
            .set_column_bloom_filter_max_ndv(ColumnPath::from("id"), 131_072)
    };
    let id = || ColumnPath::from("id");
    let delta = |b: WriterPropertiesBuilder| {
        b.set_column_dictionary_enabled(id(), false)
            .set_column_encoding(id(), Encoding::DELTA_BINARY_PACKED)
    };
    let num = || {
        ColumnPath::from(vec![
            "phones".to_string(),
            "list".to_string(),
            "item".to_string(),
            "number".to_string(),
        ])
    };
    let zip = || ColumnPath::from(vec!["address".to_string(), "zip".to_string()]);
    let name = || ColumnPath::from("name");
    let cur = || delta(bloom(base())).set_write_batch_size(5000);
    let variants: Vec<(&str, WriterProperties)> = vec![
        ("current", cur().build()),
        (
            "number plain",
            cur().set_column_dictionary_enabled(num(), false).build(),
        ),
        (
            "number+zip plain",
            cur()
                .set_column_dictionary_enabled(num(), false)
                .set_column_dictionary_enabled(zip(), false)
                .build(),
        ),
        (
            "number+zip+name plain",
            cur()
                .set_column_dictionary_enabled(num(), false)
                .set_column_dictionary_enabled(zip(), false)
                .set_column_dictionary_enabled(name(), false)
                .build(),
        ),
        ("current again", cur().build()),
    ];
    for (name, props) in variants {
        let mut best = f64::MAX;
        let mut size = 0;
        for _ in 0..3 {
            let t = Instant::now();
            let mut w = ArrowWriter::try_new(
                Vec::with_capacity(64 << 20),
                batches[0].schema(),
                Some(props.clone()),
            )
            .unwrap();
            for b in &batches {
                w.write(b).unwrap();
            }
            size = w.into_inner().unwrap().len();
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!(
            "{name:40} {:7.1} ms  {:5.2} Mrows/s  {:6.1} MiB",
            best * 1e3,
            524_288.0 / best / 1e6,
            size as f64 / 1048576.0
        );
    }
}
