//! Hive partition directories: `key=value` components between a table's root and its
//! files, and the types of their values, inferred as DuckDB infers them.
//!
//! DuckDB (`hive_types_autocast`, on by default) types a partition column by trying each
//! directory's raw text, in this order, as a `DATE`, a `TIMESTAMP` and a `BIGINT` with
//! its strict casts; a column whose directories disagree (`k=1` and `k=abc`, or a date
//! and an integer) is `VARCHAR`, and so is one that has no value but NULL. Each rule
//! below was checked with DuckDB 2.0 (the interop venv's); this module's tests hold the
//! cases, and `tests/differential` (table `hive_t`) compares whole answers. Here:
//!
//! - **NULL**: `__HIVE_DEFAULT_PARTITION__` is NULL in every column. The text `NULL`
//!   (any case) votes for no type, and is NULL in a column that is not text; in a
//!   `VARCHAR` column it stays the text (DuckDB does the same).
//! - **DATE** ([`PartitionType::Date32`]): text [`parse_date`] takes (`2024-01-05`,
//!   `2024-1-5`, spaces around it).
//! - **BIGINT** ([`PartitionType::Int64`]): optional spaces, an optional `-`, decimal
//!   digits, within `i64`; a leading zero (`007`, `01`, `00`) or a `+` keeps the text,
//!   as DuckDB's strict cast does (`-007` is an integer there too).
//! - Everything else, the empty value included, is text ([`PartitionType::Utf8`]).
//!
//! Types are inferred on the raw directory text, before `%XX` escapes are decoded
//! (`k=%2D5` is the text `-5`), and over every file of a table, so that all of them
//! agree. DuckDB's `TIMESTAMP` partitions (`t=2024-01-05 10:00:00`), hexadecimal
//! integers (`0x10`) and date words (`epoch`, `infinity`) are text here
//! (KNOWN_DIFFERENCES).

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::{new_null_array, ArrayRef, Date32Array, Int64Array, StringArray};
use arrow_schema::DataType;
use ringscan_values::date::parse_date;

/// The directory name hive writes for a NULL partition value.
pub const HIVE_DEFAULT_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// The type of a partition column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PartitionType {
    /// `BIGINT`.
    Int64,
    /// `DATE`.
    Date32,
    /// `VARCHAR`: what any other value, or a mix of types, makes.
    #[default]
    Utf8,
}

impl PartitionType {
    /// The column's Arrow type.
    pub fn data_type(self) -> DataType {
        match self {
            Self::Int64 => DataType::Int64,
            Self::Date32 => DataType::Date32,
            Self::Utf8 => DataType::Utf8,
        }
    }

    /// The type one raw directory value votes for; `None` for a NULL marker.
    pub fn of_raw(raw: &str) -> Option<Self> {
        if is_null_marker(raw) {
            None
        } else if parse_date(raw).is_some() {
            Some(Self::Date32)
        } else if parse_bigint(raw).is_some() {
            Some(Self::Int64)
        } else {
            Some(Self::Utf8)
        }
    }
}

/// `__HIVE_DEFAULT_PARTITION__`, or `NULL` in any case.
fn is_null_marker(raw: &str) -> bool {
    raw == HIVE_DEFAULT_PARTITION || raw.eq_ignore_ascii_case("NULL")
}

/// A `BIGINT` as DuckDB's strict cast reads one (module docs).
fn parse_bigint(raw: &str) -> Option<i64> {
    let text = raw.trim_matches(|c: char| c.is_ascii_whitespace());
    let digits = text.strip_prefix('-').unwrap_or(text);
    let plain = !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit());
    if !plain || text.starts_with('0') && text.len() > 1 {
        return None;
    }
    text.parse().ok()
}

/// The partition types of a table: one per column, agreed over all its files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionTypes {
    types: BTreeMap<String, PartitionType>,
}

impl PartitionTypes {
    /// Infers the types over `paths` (relative to the table root, `/`-separated).
    pub fn infer<'p>(paths: impl IntoIterator<Item = &'p str>) -> Self {
        // Per column: the type every non-NULL value agreed on so far (`None`: no value
        // yet); a disagreement makes it text for good.
        let mut votes: BTreeMap<String, Option<PartitionType>> = BTreeMap::new();
        for path in paths {
            for (key, raw) in components(path) {
                let Some(key) = percent_decode(key) else {
                    continue;
                };
                let vote = PartitionType::of_raw(raw);
                let slot = votes.entry(key).or_insert(None);
                *slot = match (*slot, vote) {
                    (None, v) | (v, None) => v,
                    (Some(a), Some(b)) if a == b => Some(a),
                    _ => Some(PartitionType::Utf8),
                };
            }
        }
        Self {
            types: votes
                .into_iter()
                .map(|(k, v)| (k, v.unwrap_or_default()))
                .collect(),
        }
    }

    /// The type of `column` (text for a column these types do not know).
    pub fn get(&self, column: &str) -> PartitionType {
        self.types.get(column).copied().unwrap_or_default()
    }
}

/// The `key=value` directory components of `path` (the last component is the file).
fn components(path: &str) -> impl Iterator<Item = (&str, &str)> {
    let mut parts: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    parts.pop();
    parts.into_iter().filter_map(|c| c.split_once('='))
}

/// One file's value of one partition column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartitionValue {
    /// NULL: hive's marker, or `NULL` in a column that is not text.
    Null,
    /// Not known: an escape that does not decode, or the key twice with two values.
    Unknown,
    /// A `BIGINT`.
    Int(i64),
    /// A `DATE`: days since 1970-01-01.
    Date(i32),
    /// Text, `%XX` escapes decoded.
    Utf8(String),
}

impl PartitionValue {
    fn typed(raw: &str, ty: PartitionType) -> Self {
        if raw == HIVE_DEFAULT_PARTITION {
            return Self::Null;
        }
        match ty {
            PartitionType::Utf8 => percent_decode(raw).map_or(Self::Unknown, Self::Utf8),
            _ if is_null_marker(raw) => Self::Null,
            // A value the types were not inferred from (a file outside the listing).
            PartitionType::Date32 => parse_date(raw).map_or(Self::Unknown, Self::Date),
            PartitionType::Int64 => parse_bigint(raw).map_or(Self::Unknown, Self::Int),
        }
    }

    /// `rows` copies of the value as an array of `ty` (unknown values are NULL).
    pub fn to_array(&self, ty: PartitionType, rows: usize) -> ArrayRef {
        match (self, ty) {
            (Self::Int(v), PartitionType::Int64) => {
                Arc::new(Int64Array::from_value(*v, rows)) as ArrayRef
            }
            (Self::Date(v), PartitionType::Date32) => Arc::new(Date32Array::from_value(*v, rows)),
            (Self::Utf8(v), PartitionType::Utf8) => {
                Arc::new(StringArray::from_iter_values(std::iter::repeat_n(v, rows)))
            }
            _ => new_null_array(&ty.data_type(), rows),
        }
    }
}

/// The partition values of one file, from its path relative to the table root.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PartitionValues {
    /// Column -> (its type, this file's value).
    values: BTreeMap<String, (PartitionType, PartitionValue)>,
}

impl PartitionValues {
    /// Parse `symbol=SPY/date=2024-01-02/part-0.parquet` (relative to the table root,
    /// `/`-separated) with every column as text. The last component is the file and is
    /// never a partition; directory components without `=` are ignored. Hive's `%XX`
    /// escapes are decoded.
    pub fn from_relative_path(path: &str) -> Self {
        Self::typed(path, &PartitionTypes::default())
    }

    /// Parse `path` as [`from_relative_path`](Self::from_relative_path) does, each
    /// column typed as `types` says.
    pub fn typed(path: &str, types: &PartitionTypes) -> Self {
        let mut values: BTreeMap<String, (PartitionType, PartitionValue)> = BTreeMap::new();
        for (key, raw) in components(path) {
            let Some(key) = percent_decode(key) else {
                continue;
            };
            let ty = types.get(&key);
            let value = PartitionValue::typed(raw, ty);
            match values.get_mut(&key) {
                Some((_, existing)) if *existing != value => *existing = PartitionValue::Unknown,
                Some(_) => {}
                None => {
                    values.insert(key, (ty, value));
                }
            }
        }
        Self { values }
    }

    /// The value of `column`, if it is a partition column.
    pub fn value(&self, column: &str) -> Option<&PartitionValue> {
        self.values.get(column).map(|(_, v)| v)
    }

    /// The type of `column`, if it is a partition column.
    pub fn column_type(&self, column: &str) -> Option<PartitionType> {
        self.values.get(column).map(|(t, _)| *t)
    }

    /// The text value of `column`, if it is a known text partition value.
    pub fn get(&self, column: &str) -> Option<&str> {
        match self.value(column)? {
            PartitionValue::Utf8(s) => Some(s),
            _ => None,
        }
    }

    /// The partition columns in name order, with their values.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &PartitionValue)> {
        self.values.iter().map(|(k, (_, v))| (k.as_str(), v))
    }

    /// Whether `column` is a partition column of this file (even with an unknown value).
    pub fn contains(&self, column: &str) -> bool {
        self.values.contains_key(column)
    }

    /// `rows` copies of `column`'s value, as an array of its type; `None` when `column`
    /// is not a partition column.
    pub fn column(&self, column: &str, rows: usize) -> Option<ArrayRef> {
        let (ty, value) = self.values.get(column)?;
        Some(value.to_array(*ty, rows))
    }
}

/// Hive's `%XX` escapes decoded; `None` for a bad escape or text that is not UTF-8.
pub(crate) fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types(paths: &[&str]) -> PartitionTypes {
        PartitionTypes::infer(paths.iter().copied())
    }

    fn ty(dirs: &[&str]) -> PartitionType {
        let paths: Vec<String> = dirs.iter().map(|d| format!("k={d}/f.parquet")).collect();
        PartitionTypes::infer(paths.iter().map(String::as_str)).get("k")
    }

    /// Each case checked against DuckDB 2.0's `read_parquet(..., hive_partitioning=true)`.
    #[test]
    fn hive_partition_integers_are_typed() {
        use PartitionType::*;
        for (dirs, want) in [
            (&["2024"][..], Int64),
            (&["-5", "3"], Int64),
            (&["0"], Int64),
            (&["-007"], Int64),
            (&["-0"], Int64),
            (&[" 5 "], Int64),
            (&["12345678901"], Int64),
            (&["9223372036854775807"], Int64),
            (&["-9223372036854775808"], Int64),
            (&["9223372036854775808"], Utf8),
            (&["123456789012345678901234"], Utf8),
            (&["007"], Utf8),
            (&["01"], Utf8),
            (&["00"], Utf8),
            (&["007", "8"], Utf8),
            (&["+5"], Utf8),
            (&["1.5"], Utf8),
            (&["1e3"], Utf8),
            (&["1_000"], Utf8),
            (&[""], Utf8),
            (&["", "3"], Utf8),
            (&["%2D5"], Utf8),
            (&["1", "abc"], Utf8),
            (&["true", "false"], Utf8),
            (&["nan"], Utf8),
        ] {
            assert_eq!(ty(dirs), want, "{dirs:?}");
        }
    }

    #[test]
    fn hive_partition_dates_are_typed() {
        use PartitionType::*;
        for (dirs, want) in [
            (&["2024-01-05"][..], Date32),
            (&["2024-1-5"], Date32),
            (&["2024-01-05", "2024-1-5"], Date32),
            (&["2024-01-05 "], Date32),
            (&["2024-02-30"], Utf8),
            (&["2024-01-05", "3"], Utf8),
            (&["2024-01-05", "2024-01-05 10:00:00"], Utf8),
        ] {
            assert_eq!(ty(dirs), want, "{dirs:?}");
        }
        let p = PartitionValues::typed("d=2024-1-5/f.parquet", &types(&["d=2024-1-5/f"]));
        assert_eq!(p.value("d"), Some(&PartitionValue::Date(19_727)));
    }

    #[test]
    fn nulls_vote_for_no_type() {
        use PartitionType::*;
        assert_eq!(ty(&[HIVE_DEFAULT_PARTITION, "3"]), Int64);
        assert_eq!(ty(&["NULL", "3"]), Int64);
        assert_eq!(ty(&["null", "2024-01-05"]), Date32);
        assert_eq!(ty(&[HIVE_DEFAULT_PARTITION]), Utf8);
        assert_eq!(ty(&["NULL"]), Utf8);
        let t = types(&["k=NULL/f", "k=3/f"]);
        assert_eq!(
            PartitionValues::typed("k=NULL/f", &t).value("k"),
            Some(&PartitionValue::Null)
        );
        // In a text column the text stays; hive's marker is NULL everywhere.
        let t = types(&["k=NULL/f", "k=abc/f", "k=__HIVE_DEFAULT_PARTITION__/f"]);
        assert_eq!(
            PartitionValues::typed("k=NULL/f", &t).get("k"),
            Some("NULL")
        );
        assert_eq!(
            PartitionValues::typed("k=__HIVE_DEFAULT_PARTITION__/f", &t).value("k"),
            Some(&PartitionValue::Null)
        );
    }

    #[test]
    fn all_files_agree_on_one_type() {
        let paths = ["year=2024/k=1/f", "year=2025/k=abc/f"];
        let t = types(&paths);
        assert_eq!(t.get("year"), PartitionType::Int64);
        assert_eq!(t.get("k"), PartitionType::Utf8);
        // The file whose own value looks like an integer is text like the others.
        assert_eq!(PartitionValues::typed(paths[0], &t).get("k"), Some("1"));
        assert_eq!(
            PartitionValues::typed(paths[0], &t).value("year"),
            Some(&PartitionValue::Int(2024))
        );
    }

    #[test]
    fn escaped_values_are_text_decoded() {
        let t = types(&["k=a%20b/f", "k=x%2Fy/f"]);
        assert_eq!(t.get("k"), PartitionType::Utf8);
        assert_eq!(
            PartitionValues::typed("k=x%2Fy/f", &t).get("k"),
            Some("x/y")
        );
    }
}
