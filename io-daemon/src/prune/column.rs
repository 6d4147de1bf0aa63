//! Maps predicate column names to Parquet leaf columns and decodes their statistics
//! (column-chunk statistics and page-index entries) into [`ColumnRange`]s.

use std::collections::HashMap;
use std::sync::OnceLock;

use arrow_schema::DataType;
use parquet::basic::{ColumnOrder, SortOrder, Type as PhysicalType};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::page_index::column_index::ColumnIndexMetaData;
use parquet::file::statistics::Statistics;

use super::range::{ColumnKind, ColumnRange, Scalar};
use crate::error::PruneError;

/// How a leaf's physical statistics decode to [`Scalar`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decode {
    Bool,
    I32,
    /// INT32 holding a u8/u16/u32 bit pattern.
    U32,
    I64,
    /// INT64 holding a u64 bit pattern.
    U64,
    F32,
    F64,
    Bytes,
    /// Statistics unusable.
    None,
}

/// A top-level, non-nested column of the file.
#[derive(Debug, Clone)]
pub(crate) struct LeafColumn {
    /// Index among the file's leaf columns.
    pub(crate) index: usize,
    pub(crate) kind: ColumnKind,
    pub(crate) decode: Decode,
    /// Whether min/max were written in the order we compare in (bloom filters and null
    /// counts do not depend on it).
    pub(crate) ordered: bool,
    /// A float column its writer declares free of NaN (see [`nan_free_columns`]): its
    /// ranges prune every comparison, not only `=`.
    pub(crate) nan_free: bool,
}

/// The file metadata key under which ringscan's writers name the float columns they
/// wrote no NaN into.
const NAN_FREE_KEY: &str = "ringscan.nan_free";

/// The columns a file's writer declares free of NaN: parquet 59 reads no NaN counts,
/// and without one a float page's min/max cannot rule out the NaN rows that `>`, `>=`
/// and `<>` select. Only ringscan's own writers are taken at their word (`created_by`
/// starting `ringscan `): a file rewritten by another tool keeps the key-value
/// metadata but not the promise.
fn nan_free_columns(file_meta: &parquet::file::metadata::FileMetaData) -> Vec<String> {
    if !file_meta
        .created_by()
        .is_some_and(|c| c.starts_with("ringscan "))
    {
        return Vec::new();
    }
    file_meta
        .key_value_metadata()
        .into_iter()
        .flatten()
        .filter(|kv| kv.key == NAN_FREE_KEY)
        .filter_map(|kv| kv.value.as_deref())
        .flat_map(|v| v.split(','))
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Column name -> leaf, for the top-level primitive columns of one file; and, once a
/// predicate has looked at them, the ranges its column-chunk statistics give each leaf
/// in each row group (decoded once per footer, not once per row group per query: a
/// point lookup over 150 row groups spent a third of the daemon's time decoding them).
#[derive(Debug, Clone, Default)]
pub(crate) struct ColumnMap {
    leaves: HashMap<String, LeafColumn>,
    /// By leaf index: per row group, the chunk's range (`None`: no such chunk).
    chunk_ranges: Vec<OnceLock<Box<[Option<ColumnRange>]>>>,
}

impl ColumnMap {
    pub(crate) fn try_new(meta: &ParquetMetaData, file: &str) -> Result<Self, PruneError> {
        let file_meta = meta.file_metadata();
        let descr = file_meta.schema_descr();
        let schema = parquet::arrow::parquet_to_arrow_schema(descr, file_meta.key_value_metadata())
            .map_err(|source| PruneError::Schema {
                file: file.to_owned(),
                source,
            })?;
        let nan_free = nan_free_columns(file_meta);
        let mut leaves = HashMap::new();
        for field in schema.fields() {
            let Some(index) = (0..descr.num_columns()).find(|&i| {
                let column = descr.column(i);
                let parts = column.path().parts();
                parts.len() == 1 && parts[0] == *field.name()
            }) else {
                continue; // nested: not pruned on
            };
            let physical = descr.column(index).physical_type();
            let (kind, decode) = classify(field.data_type(), physical);
            let ordered = order_is_usable(decode, file_meta.column_order(index));
            leaves.insert(
                field.name().clone(),
                LeafColumn {
                    index,
                    kind,
                    decode,
                    ordered,
                    nan_free: matches!(decode, Decode::F32 | Decode::F64)
                        && nan_free.iter().any(|c| c == field.name()),
                },
            );
        }
        Ok(Self {
            leaves,
            chunk_ranges: (0..descr.num_columns()).map(|_| OnceLock::new()).collect(),
        })
    }

    pub(crate) fn get(&self, name: &str) -> Option<&LeafColumn> {
        self.leaves.get(name)
    }

    /// The range of `leaf` in row group `row_group` of `meta` (the footer this map was
    /// made of) by its chunk's statistics; `None` where the row group or its chunk is
    /// missing.
    pub(crate) fn chunk_range(
        &self,
        meta: &ParquetMetaData,
        leaf: &LeafColumn,
        row_group: usize,
    ) -> Option<&ColumnRange> {
        let decode = || -> Box<[Option<ColumnRange>]> {
            meta.row_groups()
                .iter()
                .map(|rg| {
                    let chunk = rg.columns().get(leaf.index)?;
                    let rows = u64::try_from(rg.num_rows()).ok();
                    Some(range_from_statistics(leaf, chunk.statistics(), rows))
                })
                .collect()
        };
        match self.chunk_ranges.get(leaf.index) {
            Some(ranges) => ranges.get_or_init(decode).get(row_group)?.as_ref(),
            None => None,
        }
    }
}

fn classify(dt: &DataType, physical: PhysicalType) -> (ColumnKind, Decode) {
    use PhysicalType as P;
    let int = |min: i128, max: i128| ColumnKind::Int { min, max };
    match (dt, physical) {
        (DataType::Boolean, P::BOOLEAN) => (ColumnKind::Bool, Decode::Bool),
        (DataType::Int8, P::INT32) => (int(i8::MIN.into(), i8::MAX.into()), Decode::I32),
        (DataType::Int16, P::INT32) => (int(i16::MIN.into(), i16::MAX.into()), Decode::I32),
        (DataType::Int32, P::INT32) => (int(i32::MIN.into(), i32::MAX.into()), Decode::I32),
        (DataType::Int64, P::INT64) => (int(i64::MIN.into(), i64::MAX.into()), Decode::I64),
        (DataType::UInt8, P::INT32) => (int(0, u8::MAX.into()), Decode::U32),
        (DataType::UInt16, P::INT32) => (int(0, u16::MAX.into()), Decode::U32),
        (DataType::UInt32, P::INT32) => (int(0, u32::MAX.into()), Decode::U32),
        (DataType::UInt64, P::INT64) => (int(0, u64::MAX.into()), Decode::U64),
        (DataType::Float32, P::FLOAT) => (ColumnKind::Float32, Decode::F32),
        (DataType::Float64, P::DOUBLE) => (ColumnKind::Float64, Decode::F64),
        (DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View, P::BYTE_ARRAY) => {
            (ColumnKind::Utf8, Decode::Bytes)
        }
        (DataType::Dictionary(_, value), P::BYTE_ARRAY)
            if matches!(
                **value,
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            ) =>
        {
            (ColumnKind::Utf8, Decode::Bytes)
        }
        (DataType::Date32, P::INT32) => (ColumnKind::Date32, Decode::I32),
        (DataType::Timestamp(unit, _), P::INT64) => (ColumnKind::Timestamp(*unit), Decode::I64),
        _ => (ColumnKind::Other, Decode::None),
    }
}

/// Statistics are only trusted when written in the order we compare in: legacy files
/// (no column order) sorted byte arrays and unsigned integers as signed.
fn order_is_usable(decode: Decode, order: ColumnOrder) -> bool {
    match decode {
        Decode::U32 | Decode::U64 | Decode::Bytes => {
            matches!(order, ColumnOrder::TYPE_DEFINED_ORDER(SortOrder::UNSIGNED))
        }
        Decode::I32 | Decode::I64 => matches!(
            order,
            ColumnOrder::TYPE_DEFINED_ORDER(SortOrder::SIGNED) | ColumnOrder::UNDEFINED
        ),
        // NaN bounds are rejected later; both orders agree on every other value.
        Decode::F32 | Decode::F64 => matches!(
            order,
            ColumnOrder::TYPE_DEFINED_ORDER(SortOrder::SIGNED) | ColumnOrder::UNDEFINED
        ),
        Decode::Bool => true,
        Decode::None => false,
    }
}

fn decode_i32(decode: Decode, v: i32) -> Option<Scalar> {
    match decode {
        Decode::I32 => Some(Scalar::Int(v.into())),
        Decode::U32 => Some(Scalar::Int((v as u32).into())),
        _ => None,
    }
}

fn decode_i64(decode: Decode, v: i64) -> Option<Scalar> {
    match decode {
        Decode::I64 => Some(Scalar::Int(v.into())),
        Decode::U64 => Some(Scalar::Int((v as u64).into())),
        _ => None,
    }
}

/// Decode column-chunk statistics; `row_count` is the row group's.
pub(crate) fn range_from_statistics(
    leaf: &LeafColumn,
    stats: Option<&Statistics>,
    row_count: Option<u64>,
) -> ColumnRange {
    let mut range = ColumnRange::unknown(leaf.kind);
    range.row_count = row_count;
    let Some(stats) = stats else {
        return range;
    };
    range.null_count = stats.null_count_opt();
    // parquet 59 reads no NaN counts: `nan_count` stays unknown, and float ranges
    // prune only `=` (a NaN row may hide behind any min/max), unless the writer
    // declared the column free of NaN.
    if leaf.nan_free {
        range.nan_count = Some(0);
    }
    let legacy = stats.is_min_max_deprecated()
        && matches!(leaf.decode, Decode::U32 | Decode::U64 | Decode::Bytes);
    if legacy || !leaf.ordered {
        return range; // legacy min/max fields or sort order: maybe signed byte order
    }
    let d = leaf.decode;
    let (min, max) = match (stats, d) {
        (Statistics::Boolean(s), Decode::Bool) => (
            s.min_opt().map(|v| Scalar::Bool(*v)),
            s.max_opt().map(|v| Scalar::Bool(*v)),
        ),
        (Statistics::Int32(s), _) => (
            s.min_opt().and_then(|v| decode_i32(d, *v)),
            s.max_opt().and_then(|v| decode_i32(d, *v)),
        ),
        (Statistics::Int64(s), _) => (
            s.min_opt().and_then(|v| decode_i64(d, *v)),
            s.max_opt().and_then(|v| decode_i64(d, *v)),
        ),
        (Statistics::Float(s), Decode::F32) => (
            s.min_opt().map(|v| Scalar::Float((*v).into())),
            s.max_opt().map(|v| Scalar::Float((*v).into())),
        ),
        (Statistics::Double(s), Decode::F64) => (
            s.min_opt().map(|v| Scalar::Float(*v)),
            s.max_opt().map(|v| Scalar::Float(*v)),
        ),
        (Statistics::ByteArray(s), Decode::Bytes) => (
            s.min_opt().map(|v| Scalar::Bytes(v.data().to_vec())),
            s.max_opt().map(|v| Scalar::Bytes(v.data().to_vec())),
        ),
        _ => (None, None),
    };
    range.min = min;
    range.max = max;
    range
}

/// Decode page `page` of a column index; `row_count` is the page's.
pub(crate) fn range_from_column_index(
    leaf: &LeafColumn,
    index: &ColumnIndexMetaData,
    page: usize,
    row_count: u64,
) -> ColumnRange {
    let mut range = ColumnRange::unknown(leaf.kind);
    range.row_count = Some(row_count);
    range.null_count = index.null_count(page).and_then(|c| u64::try_from(c).ok());
    if leaf.nan_free {
        range.nan_count = Some(0);
    }
    if index.is_null_page(page) {
        // Only nulls: min/max are meaningless, and the null count may be missing.
        range.null_count = Some(row_count);
        return range;
    }
    if !leaf.ordered {
        return range;
    }
    let d = leaf.decode;
    let (min, max) = match (index, d) {
        (ColumnIndexMetaData::BOOLEAN(ix), Decode::Bool) => (
            ix.min_value(page).map(|v| Scalar::Bool(*v)),
            ix.max_value(page).map(|v| Scalar::Bool(*v)),
        ),
        (ColumnIndexMetaData::INT32(ix), _) => (
            ix.min_value(page).and_then(|v| decode_i32(d, *v)),
            ix.max_value(page).and_then(|v| decode_i32(d, *v)),
        ),
        (ColumnIndexMetaData::INT64(ix), _) => (
            ix.min_value(page).and_then(|v| decode_i64(d, *v)),
            ix.max_value(page).and_then(|v| decode_i64(d, *v)),
        ),
        (ColumnIndexMetaData::FLOAT(ix), Decode::F32) => (
            ix.min_value(page).map(|v| Scalar::Float((*v).into())),
            ix.max_value(page).map(|v| Scalar::Float((*v).into())),
        ),
        (ColumnIndexMetaData::DOUBLE(ix), Decode::F64) => (
            ix.min_value(page).map(|v| Scalar::Float(*v)),
            ix.max_value(page).map(|v| Scalar::Float(*v)),
        ),
        (ColumnIndexMetaData::BYTE_ARRAY(ix), Decode::Bytes) => (
            ix.min_value(page).map(|v| Scalar::Bytes(v.to_vec())),
            ix.max_value(page).map(|v| Scalar::Bytes(v.to_vec())),
        ),
        _ => (None, None),
    };
    range.min = min;
    range.max = max;
    range
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::TimeUnit;

    #[test]
    fn classification_needs_matching_physical_types() {
        assert_eq!(
            classify(&DataType::Int64, PhysicalType::INT64).1,
            Decode::I64
        );
        assert_eq!(
            classify(&DataType::UInt32, PhysicalType::INT32).1,
            Decode::U32
        );
        assert_eq!(
            classify(&DataType::UInt64, PhysicalType::INT64).1,
            Decode::U64
        );
        // INT96 timestamps, decimals, binary: nothing to prune with.
        assert_eq!(
            classify(
                &DataType::Timestamp(TimeUnit::Nanosecond, None),
                PhysicalType::INT96
            ),
            (ColumnKind::Other, Decode::None)
        );
        assert_eq!(
            classify(&DataType::Decimal128(10, 2), PhysicalType::INT64).1,
            Decode::None
        );
        assert_eq!(
            classify(&DataType::Binary, PhysicalType::BYTE_ARRAY).1,
            Decode::None
        );
        let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        assert_eq!(
            classify(&dict, PhysicalType::BYTE_ARRAY),
            (ColumnKind::Utf8, Decode::Bytes)
        );
    }

    #[test]
    fn legacy_orders_are_not_trusted_for_unsigned_or_bytes() {
        let undefined = ColumnOrder::UNDEFINED;
        let unsigned = ColumnOrder::TYPE_DEFINED_ORDER(SortOrder::UNSIGNED);
        let signed = ColumnOrder::TYPE_DEFINED_ORDER(SortOrder::SIGNED);
        assert!(!order_is_usable(Decode::Bytes, undefined));
        assert!(!order_is_usable(Decode::U32, undefined));
        assert!(!order_is_usable(Decode::U64, signed));
        assert!(order_is_usable(Decode::Bytes, unsigned));
        assert!(order_is_usable(Decode::I64, undefined));
        assert!(!order_is_usable(Decode::I32, unsigned));
    }
}
