//! Every file the generator writes names its float columns in `ringscan.nan_free`, a
//! promise the IO daemon prunes by (a float page's min/max then rules out `>`, `>=`,
//! `<>` too): the promise holds, for every dataset, every float column, every value.

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type};
use arrow_schema::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use ringscan_generator::inspect::parquet_files;
use ringscan_generator::{generate, DatasetKind, GenerateOptions};

#[test]
fn declared_nan_free_columns_are_every_float_column_and_hold_no_nan() {
    for kind in [DatasetKind::Ohlcv, DatasetKind::Wide, DatasetKind::Contacts] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut opts = GenerateOptions::new(kind, dir.path().join("out"));
        opts.rows = 20_000;
        opts.seed = 11;
        generate(&opts, &|_| {}).expect("generate");
        let files = parquet_files(&dir.path().join("out")).expect("ls");
        assert!(!files.is_empty());
        let mut floats_seen = 0usize;
        for file in files {
            let builder =
                ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&file).expect("open"))
                    .expect("footer");
            let meta = builder.metadata().file_metadata().clone();
            assert!(
                meta.created_by()
                    .is_some_and(|c| c.starts_with("ringscan ")),
                "{file:?}: {:?}",
                meta.created_by()
            );
            let declared: Vec<String> = meta
                .key_value_metadata()
                .into_iter()
                .flatten()
                .filter(|kv| kv.key == "ringscan.nan_free")
                .filter_map(|kv| kv.value.clone())
                .flat_map(|v| v.split(',').map(str::to_owned).collect::<Vec<_>>())
                .filter(|c| !c.is_empty())
                .collect();
            let schema = builder.schema().clone();
            let floats: Vec<String> = schema
                .fields()
                .iter()
                .filter(|f| matches!(f.data_type(), DataType::Float32 | DataType::Float64))
                .map(|f| f.name().clone())
                .collect();
            assert_eq!(declared, floats, "{file:?}");
            for batch in builder.build().expect("reader") {
                let batch = batch.expect("batch");
                for name in &declared {
                    let column = batch.column_by_name(name).expect("declared column");
                    let nans = match column.data_type() {
                        DataType::Float64 => column
                            .as_primitive::<Float64Type>()
                            .iter()
                            .flatten()
                            .filter(|v| v.is_nan())
                            .count(),
                        DataType::Float32 => column
                            .as_primitive::<Float32Type>()
                            .iter()
                            .flatten()
                            .filter(|v| v.is_nan())
                            .count(),
                        other => panic!("{name} is {other}"),
                    };
                    assert_eq!(nans, 0, "{file:?}: {name} holds NaN");
                    floats_seen += column.len();
                }
            }
        }
        if kind != DatasetKind::Contacts {
            assert!(floats_seen > 0, "{kind:?} has float columns");
        }
    }
}
