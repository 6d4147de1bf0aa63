//! Column statistics of a whole source from the cached footers: what answers
//! [`ClientMessage::Statistics`](ringscan_ipc::msg::ClientMessage::Statistics).
//!
//! For each requested column and every row group of every file, the Parquet statistics
//! are converted to the table's Arrow type with parquet's [`StatisticsConverter`], then
//! reduced to one minimum, one maximum and one null count. Nothing is decoded.
//!
//! A minimum (maximum) is reported exact only when every row group either has an exact
//! minimum (maximum) in the current, type-ordered statistics fields, or is known to hold
//! only NULLs (null count = row count). Conservative on purpose, when in doubt the
//! executor scans:
//! - truncated (`is_min_value_exact` false) or legacy (deprecated `min`/`max` fields,
//!   undefined column order) statistics are inexact; strings without the exactness flags
//!   count as truncated;
//! - a float maximum is never exact: writers leave NaN out of statistics, and SQL's
//!   `max` returns NaN when any value is NaN; a NaN minimum is not trusted either;
//! - partition columns, columns missing from a file and types outside a plain set
//!   (nested, dictionary, intervals...) are inexact.

use std::fs::File;
use std::path::Path;

use arrow_array::{new_null_array, Array, ArrayRef, BooleanArray, UInt64Array};
use arrow_ord::ord::make_comparator;
use arrow_schema::{ArrowError, DataType, Field, SortOptions};
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::arrow::parquet_column;
use parquet::basic::{ColumnOrder, SortOrder};
use parquet::file::metadata::{ParquetMetaData, RowGroupMetaData};
use ringscan_ipc::msg::{encode_min_max, ColumnStatistics, ScanSource, TableStatistics};

use crate::scan::{MetadataCache, ScanError};
use crate::table::{self, TableError};

/// What can go wrong computing statistics.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StatisticsError {
    /// Resolving the source failed.
    #[error(transparent)]
    Table(#[from] TableError),
    /// A requested column is not in the table.
    #[error("no column {name:?} in the table")]
    UnknownColumn {
        /// The name asked for.
        name: String,
    },
    /// Opening a file or reading its footer failed.
    #[error(transparent)]
    Scan(#[from] ScanError),
    /// Reducing or encoding the values failed.
    #[error("statistics of column {column:?}: {source}")]
    Arrow {
        /// The column.
        column: String,
        /// The kernel's error.
        #[source]
        source: ArrowError,
    },
}

/// Types whose Parquet statistics order is the SQL order of the Arrow values.
fn supported(data_type: &DataType) -> bool {
    use DataType as D;
    matches!(
        data_type,
        D::Boolean
            | D::Int8
            | D::Int16
            | D::Int32
            | D::Int64
            | D::UInt8
            | D::UInt16
            | D::UInt32
            | D::UInt64
            | D::Float32
            | D::Float64
            | D::Utf8
            | D::LargeUtf8
            | D::Date32
            | D::Timestamp(_, _)
            | D::Decimal128(_, _)
    )
}

/// One column's statistics accumulated over files.
#[derive(Debug)]
struct Acc {
    field: Field,
    mins: Vec<ArrayRef>,
    maxes: Vec<ArrayRef>,
    null_count: Option<u64>,
    /// Why the min (first) or the max (second) is not exact.
    min_inexact: Option<String>,
    max_inexact: Option<String>,
}

impl Acc {
    fn new(field: Field) -> Self {
        let (mut min_inexact, mut max_inexact) = (None, None);
        if !supported(field.data_type()) {
            let why = format!("type {} is not supported", field.data_type());
            min_inexact = Some(why.clone());
            max_inexact = Some(why);
        } else if matches!(field.data_type(), DataType::Float32 | DataType::Float64) {
            max_inexact = Some("a float max may be NaN, which statistics leave out".into());
        }
        Self {
            field,
            mins: Vec::new(),
            maxes: Vec::new(),
            null_count: Some(0),
            min_inexact,
            max_inexact,
        }
    }

    fn both_inexact(&mut self, why: String) {
        self.min_inexact.get_or_insert_with(|| why.clone());
        self.max_inexact.get_or_insert(why);
    }

    /// Adds one file's row groups.
    fn add_file(
        &mut self,
        file: &Path,
        meta: &ParquetMetaData,
        file_schema: &arrow_schema::Schema,
    ) {
        let name = self.field.name().clone();
        let parquet_schema = meta.file_metadata().schema_descr();
        let Some((index, _)) = parquet_column(parquet_schema, file_schema, &name) else {
            self.null_count = None;
            self.both_inexact(format!(
                "{name} is not a column of {} (a partition column?)",
                file.display()
            ));
            return;
        };
        let order = meta
            .file_metadata()
            .column_orders()
            .and_then(|orders| orders.get(index).copied())
            .unwrap_or(ColumnOrder::UNDEFINED);
        let ordered = matches!(
            order,
            ColumnOrder::TYPE_DEFINED_ORDER(SortOrder::SIGNED | SortOrder::UNSIGNED)
        );
        if !ordered {
            self.both_inexact(format!("{} has no defined sort order", file.display()));
        }
        let converter =
            match StatisticsConverter::from_column_index(index, &self.field, parquet_schema) {
                Ok(c) => c.with_missing_null_counts_as_zero(false),
                Err(e) => {
                    self.null_count = None;
                    self.both_inexact(format!("{}: {e}", file.display()));
                    return;
                }
            };
        let groups = meta.row_groups();
        let converted = convert(&converter, groups);
        let (mins, maxes, min_exact, max_exact, nulls) = match converted {
            Ok(v) => v,
            Err(e) => {
                self.null_count = None;
                self.both_inexact(format!("{}: {e}", file.display()));
                return;
            }
        };
        for (i, group) in groups.iter().enumerate() {
            let rows = u64::try_from(group.num_rows()).unwrap_or(u64::MAX);
            let nulls_here = nulls.is_valid(i).then(|| nulls.value(i));
            self.null_count = match (self.null_count, nulls_here) {
                (Some(a), Some(b)) => a.checked_add(b),
                _ => None,
            };
            let all_null = nulls_here == Some(rows);
            if all_null {
                continue;
            }
            let at = || format!("row group {i} of {}", file.display());
            if group
                .column(index)
                .statistics()
                .is_some_and(|s| s.is_min_max_deprecated())
            {
                self.both_inexact(format!("{} has only legacy min/max statistics", at()));
            }
            if !mins.is_valid(i) || !min_exact.is_valid(i) || !min_exact.value(i) {
                self.min_inexact
                    .get_or_insert_with(|| format!("{} has no exact min", at()));
            } else if is_nan(&mins, i) {
                self.min_inexact
                    .get_or_insert_with(|| format!("{} has a NaN min", at()));
            }
            if !maxes.is_valid(i) || !max_exact.is_valid(i) || !max_exact.value(i) {
                self.max_inexact
                    .get_or_insert_with(|| format!("{} has no exact max", at()));
            }
        }
        self.mins.push(mins);
        self.maxes.push(maxes);
    }

    /// `[min, max]` and the column's entry.
    fn finish(self) -> Result<(ArrayRef, ColumnStatistics), StatisticsError> {
        let name = self.field.name().clone();
        let arrow = |source| StatisticsError::Arrow {
            column: name.clone(),
            source,
        };
        let data_type = self.field.data_type();
        let pick = |parts: &[ArrayRef], max: bool, exact: bool| -> Result<ArrayRef, ArrowError> {
            if !exact || parts.is_empty() {
                return Ok(new_null_array(data_type, 1));
            }
            let refs: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
            let all = arrow_select::concat::concat(&refs)?;
            let cmp = make_comparator(&all, &all, SortOptions::default())?;
            let mut best: Option<usize> = None;
            for i in 0..all.len() {
                if all.is_null(i) {
                    continue;
                }
                best = match best {
                    None => Some(i),
                    Some(b) => {
                        let o = cmp(i, b);
                        Some(if (max && o.is_gt()) || (!max && o.is_lt()) {
                            i
                        } else {
                            b
                        })
                    }
                };
            }
            Ok(match best {
                Some(b) => all.slice(b, 1),
                None => new_null_array(data_type, 1),
            })
        };
        let min_exact = self.min_inexact.is_none();
        let max_exact = self.max_inexact.is_none();
        let min = pick(&self.mins, false, min_exact).map_err(arrow)?;
        let max = pick(&self.maxes, true, max_exact).map_err(arrow)?;
        let both = arrow_select::concat::concat(&[min.as_ref(), max.as_ref()]).map_err(arrow)?;
        let column = ColumnStatistics {
            name: name.clone(),
            null_count: self.null_count,
            min_exact,
            max_exact,
            min_inexact_reason: self.min_inexact,
            max_inexact_reason: self.max_inexact,
        };
        Ok((both, column))
    }
}

/// Per row group: mins, maxes, min-is-exact, max-is-exact, null counts.
type Converted = (ArrayRef, ArrayRef, BooleanArray, BooleanArray, UInt64Array);

fn convert<'a>(
    converter: &StatisticsConverter<'a>,
    groups: &'a [RowGroupMetaData],
) -> Result<Converted, parquet::errors::ParquetError> {
    Ok((
        converter.row_group_mins(groups)?,
        converter.row_group_maxes(groups)?,
        converter.row_group_is_min_value_exact(groups)?,
        converter.row_group_is_max_value_exact(groups)?,
        converter.row_group_null_counts(groups)?,
    ))
}

fn is_nan(a: &ArrayRef, i: usize) -> bool {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float32Type, Float64Type};
    match a.data_type() {
        DataType::Float32 => a.as_primitive::<Float32Type>().value(i).is_nan(),
        DataType::Float64 => a.as_primitive::<Float64Type>().value(i).is_nan(),
        _ => false,
    }
}

/// Strips dictionary encoding.
fn logical(data_type: &DataType) -> &DataType {
    match data_type {
        DataType::Dictionary(_, value) => logical(value),
        other => other,
    }
}

/// The statistics of `columns` over every file of `source` (footers through `cache`).
pub fn table_statistics(
    data_dir: &Path,
    source: &ScanSource,
    columns: &[String],
    cache: &MetadataCache,
) -> Result<TableStatistics, StatisticsError> {
    let resolved = table::resolve(data_dir, source, cache)?;
    resolved_statistics(resolved, columns, cache)
}

/// [`table_statistics`] of a table already resolved (a written table's snapshot).
pub fn resolved_statistics(
    resolved: table::ResolvedTable,
    columns: &[String],
    cache: &MetadataCache,
) -> Result<TableStatistics, StatisticsError> {
    let mut accs = Vec::with_capacity(columns.len());
    for name in columns {
        let field = resolved
            .schema
            .field_with_name(name)
            .map_err(|_| StatisticsError::UnknownColumn { name: name.clone() })?;
        let dictionary = matches!(field.data_type(), DataType::Dictionary(..));
        let mut acc = Acc::new(Field::new(
            field.name(),
            logical(field.data_type()).clone(),
            true,
        ));
        if dictionary {
            acc.both_inexact(format!("{name} is dictionary-encoded"));
        }
        accs.push(acc);
    }
    let (mut rows, mut groups) = (0u64, 0u64);
    for rel in &resolved.listing.files {
        let path = resolved.listing.root.join(rel);
        let meta = if crate::storage::is_object_url(&path) {
            crate::scan::open_object(&path, cache, &|| false)?.1
        } else {
            let file = File::open(&path).map_err(|source| ScanError::Io {
                file: path.clone(),
                source,
            })?;
            cache.get_or_load(&path, &file)?
        };
        let arrow_meta = ArrowReaderMetadata::try_new(meta.clone(), ArrowReaderOptions::new())
            .map_err(|source| ScanError::Corrupt {
                file: path.clone(),
                source,
            })?;
        rows = rows.saturating_add(u64::try_from(meta.file_metadata().num_rows()).unwrap_or(0));
        groups = groups.saturating_add(meta.num_row_groups() as u64);
        for acc in &mut accs {
            acc.add_file(&path, &meta, arrow_meta.schema());
        }
    }
    let mut arrays = Vec::with_capacity(accs.len());
    let mut out = Vec::with_capacity(accs.len());
    for acc in accs {
        let (values, column) = acc.finish()?;
        arrays.push(values);
        out.push(column);
    }
    let values_ipc = encode_min_max(columns, &arrays).map_err(|source| StatisticsError::Arrow {
        column: columns.join(", "),
        source,
    })?;
    Ok(TableStatistics {
        row_count: rows,
        file_count: resolved.listing.files.len() as u64,
        row_group_count: groups,
        columns: out,
        values_ipc,
        files: resolved.listing.file_versions,
        dirs: resolved.listing.dirs,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use arrow_array::{Int64Array, RecordBatch};
    use arrow_schema::Schema;
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    use super::*;

    fn write(path: &Path, values: Vec<Option<i64>>, row_group_rows: usize) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, true)]));
        let batch =
            RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(values))]).unwrap();
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(row_group_rows))
            .build();
        let mut w = ArrowWriter::try_new(File::create(path).unwrap(), schema, Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
    }

    #[test]
    fn all_null_row_groups_count_nulls_and_add_no_extremes() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        // Row groups: [NULL, NULL] [5, NULL] [-3, 9]; a second file of NULLs only.
        write(
            &data.join("t/region=a/one.parquet"),
            vec![None, None, Some(5), None, Some(-3), Some(9)],
            2,
        );
        write(&data.join("t/region=b/two.parquet"), vec![None; 3], 3);
        let cache = MetadataCache::new(1 << 20);
        let source = ScanSource::Table { name: "t".into() };
        let columns = vec!["x".to_owned(), "region".to_owned()];
        let stats = table_statistics(data, &source, &columns, &cache).unwrap();
        assert_eq!(
            (stats.row_count, stats.file_count, stats.row_group_count),
            (9, 2, 4)
        );
        let x = &stats.columns[0];
        assert_eq!(x.null_count, Some(6));
        assert!(x.min_exact && x.max_exact, "{x:?}");
        let values = stats.min_max().unwrap();
        let v = values[0].as_primitive::<Int64Type>();
        assert_eq!((v.value(0), v.value(1)), (-3, 9));
        let region = &stats.columns[1];
        assert!(!region.min_exact && !region.max_exact && region.null_count.is_none());
        let why = region.min_inexact_reason.as_deref().unwrap_or_default();
        assert!(why.contains("partition column"), "{why}");

        let only_nulls = ScanSource::Files {
            paths: vec!["t/region=b/two.parquet".into()],
        };
        let stats = table_statistics(data, &only_nulls, &columns[..1], &cache).unwrap();
        assert!(stats.columns[0].min_exact && stats.columns[0].max_exact);
        assert_eq!(stats.columns[0].null_count, Some(3));
        assert_eq!(
            stats.min_max().unwrap()[0].null_count(),
            2,
            "all NULL: NULL"
        );

        let err = table_statistics(data, &source, &["nope".into()], &cache).unwrap_err();
        assert!(
            matches!(err, StatisticsError::UnknownColumn { .. }),
            "{err}"
        );
    }
}
