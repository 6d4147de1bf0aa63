//! The session time zone: how instants (`TIMESTAMP WITH TIME ZONE`) are seen, as DuckDB
//! sees them.
//!
//! A `TIMESTAMPTZ` is an instant; the zone it is shown and taken apart in is the
//! session's (`SET TimeZone = 'Europe/Berlin'`), not the one a file stored with it
//! (Parquet's `isAdjustedToUTC` columns, Arrow's `Timestamp(_, Some("+02:00"))`). Arrow
//! keeps the instant as the same integer whatever zone its type names, so a column is
//! put in the session zone by relabelling its type ([`in_zone`]): no value changes, and
//! DataFusion's `date_trunc`, `date_part`, casts to `DATE` and `TIMESTAMP` then work on
//! the session's local time, days of 23 and 25 hours included.
//!
//! Values print as DuckDB prints them: local time, then the offset in force at that
//! instant, `+01`, `+05:30`, `-03:30` (seconds only where a zone's history has them).

use std::str::FromStr;
use std::sync::Arc;

use arrow_array::timezone::Tz;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};
use chrono::{Offset, TimeZone};

/// A time zone name that is neither in the zone database nor an offset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown time zone {name:?} (an IANA name such as 'Europe/Berlin' or 'UTC', or an offset such as '+05:30')")]
pub struct UnknownTimeZone {
    /// The name as given.
    pub name: String,
}

/// A time zone name checked against the zone database: an IANA name
/// (`Europe/Berlin`, `UTC`; as the database spells it) or a fixed offset (`+05:30`,
/// `-03`).
pub fn parse_time_zone(name: &str) -> Result<Tz, UnknownTimeZone> {
    Tz::from_str(name.trim()).map_err(|_| UnknownTimeZone {
        name: name.to_owned(),
    })
}

/// Names of UTC (and zero offsets): zones with no offset, ever.
const UTC_NAMES: [&str; 24] = [
    "+00:00",
    "+0000",
    "+00",
    "-00:00",
    "-0000",
    "-00",
    "UTC",
    "Etc/UTC",
    "UCT",
    "Etc/UCT",
    "Universal",
    "Etc/Universal",
    "Zulu",
    "Etc/Zulu",
    "GMT",
    "Etc/GMT",
    "GMT0",
    "Etc/GMT0",
    "GMT+0",
    "Etc/GMT+0",
    "GMT-0",
    "Etc/GMT-0",
    "Greenwich",
    "Etc/Greenwich",
];

/// Whether the zone named `name` is UTC under one of its names (or a zero offset): no
/// offset, ever, so none to look up for each instant.
pub fn is_utc(name: &str) -> bool {
    UTC_NAMES.contains(&name.trim())
}

/// `t` with its instants in `zone`: a `Timestamp` with a time zone gets `zone`; any other
/// type (a naive `TIMESTAMP` included) is itself.
pub fn zoned_type(t: &DataType, zone: &str) -> DataType {
    match t {
        DataType::Timestamp(unit, Some(tz)) if tz.as_ref() != zone => {
            DataType::Timestamp(*unit, Some(zone.into()))
        }
        other => other.clone(),
    }
}

/// The schema with every instant column in `zone` (the same `Arc` when none changes).
pub fn zoned_schema(schema: &SchemaRef, zone: &str) -> SchemaRef {
    let changed = |f: &Field| zoned_type(f.data_type(), zone) != *f.data_type();
    if !schema.fields().iter().any(|f| changed(f)) {
        return Arc::clone(schema);
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| {
            f.as_ref()
                .clone()
                .with_data_type(zoned_type(f.data_type(), zone))
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// `array` relabelled to `to` where both are instants of one unit (the values stay: an
/// instant is the same integer in every zone); else `array` itself.
pub fn in_zone(array: &ArrayRef, to: &DataType) -> ArrayRef {
    match (array.data_type(), to) {
        (DataType::Timestamp(from_unit, Some(from)), DataType::Timestamp(to_unit, Some(tz)))
            if from_unit == to_unit && from != tz =>
        {
            let data = array.to_data().into_builder().data_type(to.clone());
            // A timestamp's layout does not depend on its zone: the data is valid as the
            // new type (and `build` checks it again).
            match data.build() {
                Ok(data) => arrow_array::make_array(data),
                Err(_) => Arc::clone(array),
            }
        }
        _ => Arc::clone(array),
    }
}

/// `batches` with every instant column in `zone`, under the matching schema.
pub fn zoned_batches(
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    zone: &str,
) -> Result<(SchemaRef, Vec<RecordBatch>), ArrowError> {
    let zoned = zoned_schema(schema, zone);
    if Arc::ptr_eq(&zoned, schema) {
        return Ok((zoned, batches));
    }
    let batches = batches
        .into_iter()
        .map(|b| zoned_batch(&zoned, b))
        .collect::<Result<_, _>>()?;
    Ok((zoned, batches))
}

/// `batch` under `zoned`, a schema [`zoned_schema`] changed: its instant columns
/// relabelled.
pub fn zoned_batch(zoned: &SchemaRef, batch: RecordBatch) -> Result<RecordBatch, ArrowError> {
    let columns = batch
        .columns()
        .iter()
        .zip(zoned.fields())
        .map(|(c, f)| in_zone(c, f.data_type()))
        .collect();
    RecordBatch::try_new_with_options(
        Arc::clone(zoned),
        columns,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )
}

/// The offset as DuckDB prints it after a `TIMESTAMPTZ`: `+00`, `+02`, `+05:30`,
/// `-03:30`, `+00:53:28`.
pub fn format_offset(seconds_east: i32) -> String {
    let sign = if seconds_east < 0 { '-' } else { '+' };
    let s = seconds_east.unsigned_abs();
    let (h, m, sec) = (s / 3600, s / 60 % 60, s % 60);
    match (m, sec) {
        (0, 0) => format!("{sign}{h:02}"),
        (_, 0) => format!("{sign}{h:02}:{m:02}"),
        _ => format!("{sign}{h:02}:{m:02}:{sec:02}"),
    }
}

/// The offset from UTC of `zone` at the instant `ts_us` (microseconds since the epoch),
/// in seconds east.
pub fn offset_at(zone: &Tz, ts_us: i64) -> i32 {
    chrono::DateTime::from_timestamp_micros(ts_us).map_or(0, |utc| {
        zone.offset_from_utc_datetime(&utc.naive_utc())
            .fix()
            .local_minus_utc()
    })
}

/// The offset (seconds east) to take from the local time `local_us` (microseconds since
/// 1970-01-01 00:00 on the zone's wall clock) to get its instant, as DuckDB resolves
/// local times (ICU's defaults): a time that happens twice (the hour after clocks go
/// back) is the later instant; a time that never happens (the hour skipped when clocks
/// go forward) is read with the offset before the change (`02:30` in Berlin on
/// 2024-03-31 is `03:30+02`). `None` past chrono's range.
pub(crate) fn local_offset(zone: &Tz, local_us: i64) -> Option<i32> {
    use chrono::LocalResult;
    const DAY_US: i64 = 86_400_000_000;
    let local = chrono::DateTime::from_timestamp_micros(local_us)?.naive_utc();
    match zone.offset_from_local_datetime(&local) {
        LocalResult::Single(o) => Some(o.fix().local_minus_utc()),
        // The later instant is the one with the smaller offset.
        LocalResult::Ambiguous(a, b) => {
            Some(a.fix().local_minus_utc().min(b.fix().local_minus_utc()))
        }
        LocalResult::None => {
            // In a gap the offset after the change is the larger; the wall time read
            // with it is an instant before the change, whose offset is the one before.
            let after = offset_at(zone, local_us.checked_sub(DAY_US)?)
                .max(offset_at(zone, local_us.checked_add(DAY_US)?));
            Some(offset_at(
                zone,
                local_us.checked_sub(i64::from(after) * 1_000_000)?,
            ))
        }
    }
}

/// The instant `ts_us` as DuckDB prints a `TIMESTAMPTZ` in `zone`:
/// `2024-03-31 03:30:00+02`.
pub(crate) fn format_instant(ts_us: i64, zone: &Tz) -> String {
    let offset = offset_at(zone, ts_us);
    let local = ts_us.saturating_add(i64::from(offset) * 1_000_000);
    format!(
        "{}{}",
        crate::temporal::format_timestamp(local),
        format_offset(offset)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::TimestampMicrosecondArray;
    use arrow_schema::TimeUnit;

    fn us(rfc3339: &str) -> i64 {
        chrono::DateTime::parse_from_rfc3339(rfc3339)
            .unwrap()
            .timestamp_micros()
    }

    #[test]
    fn offsets_print_as_duckdb_prints_them() {
        assert_eq!(format_offset(0), "+00");
        assert_eq!(format_offset(7200), "+02");
        assert_eq!(format_offset(19_800), "+05:30");
        assert_eq!(format_offset(-12_600), "-03:30");
        assert_eq!(format_offset(-18_000), "-05");
        assert_eq!(format_offset(3208), "+00:53:28");
    }

    #[test]
    fn instants_print_in_the_zone_with_the_offset_in_force() {
        let berlin = parse_time_zone("Europe/Berlin").unwrap();
        // The spring-forward night: 01:59:59+01 is followed by 03:00:00+02.
        assert_eq!(
            format_instant(us("2024-03-31T00:59:59Z"), &berlin),
            "2024-03-31 01:59:59+01"
        );
        assert_eq!(
            format_instant(us("2024-03-31T01:30:00Z"), &berlin),
            "2024-03-31 03:30:00+02"
        );
        // The fall-back night: 02:30 happens twice.
        assert_eq!(
            format_instant(us("2024-10-27T00:30:00Z"), &berlin),
            "2024-10-27 02:30:00+02"
        );
        assert_eq!(
            format_instant(us("2024-10-27T01:30:00Z"), &berlin),
            "2024-10-27 02:30:00+01"
        );
        let kolkata = parse_time_zone("Asia/Kolkata").unwrap();
        assert_eq!(
            format_instant(us("2024-01-01T00:00:00.5Z"), &kolkata),
            "2024-01-01 05:30:00.500000+05:30"
        );
        let fixed = parse_time_zone("-03:30").unwrap();
        assert_eq!(
            format_instant(us("2024-01-01T00:00:00Z"), &fixed),
            "2023-12-31 20:30:00-03:30"
        );
        let utc = parse_time_zone("UTC").unwrap();
        assert_eq!(
            format_instant(us("1969-12-31T23:59:59Z"), &utc),
            "1969-12-31 23:59:59+00"
        );
    }

    #[test]
    fn local_times_resolve_as_duckdb_resolves_them() {
        let local = |text: &str| {
            chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S")
                .unwrap()
                .and_utc()
                .timestamp_micros()
        };
        let instant = |zone: &str, text: &str| {
            let zone = parse_time_zone(zone).unwrap();
            let l = local(text);
            format_instant(
                l - i64::from(local_offset(&zone, l).unwrap()) * 1_000_000,
                &zone,
            )
        };
        // DuckDB 1.x answers, `SET TimeZone = ...; SELECT TIMESTAMPTZ '...'`.
        assert_eq!(
            instant("Europe/Berlin", "2024-03-31 02:30:00"),
            "2024-03-31 03:30:00+02"
        );
        assert_eq!(
            instant("Europe/Berlin", "2024-03-31 02:00:00"),
            "2024-03-31 03:00:00+02"
        );
        assert_eq!(
            instant("Europe/Berlin", "2024-10-27 02:30:00"),
            "2024-10-27 02:30:00+01"
        );
        assert_eq!(
            instant("America/New_York", "2024-03-10 02:30:00"),
            "2024-03-10 03:30:00-04"
        );
        assert_eq!(
            instant("America/New_York", "2024-11-03 01:30:00"),
            "2024-11-03 01:30:00-05"
        );
        assert_eq!(
            instant("Australia/Lord_Howe", "2024-10-06 02:15:00"),
            "2024-10-06 02:45:00+11"
        );
        assert_eq!(
            instant("Australia/Lord_Howe", "2024-04-07 01:45:00"),
            "2024-04-07 01:45:00+10:30"
        );
        assert_eq!(
            instant("Asia/Kolkata", "2024-01-01 00:00:00"),
            "2024-01-01 00:00:00+05:30"
        );
    }

    #[test]
    fn unknown_zones_are_refused_with_their_name() {
        let e = parse_time_zone("Mars/Olympus").unwrap_err().to_string();
        assert!(e.contains("unknown time zone \"Mars/Olympus\""), "{e}");
        assert!(parse_time_zone("+05:30").is_ok());
        assert!(parse_time_zone("America/New_York").is_ok());
    }

    #[test]
    fn relabelling_keeps_the_instants_and_leaves_naive_timestamps() {
        let utc: ArrayRef =
            Arc::new(TimestampMicrosecondArray::from(vec![1, 2]).with_timezone("UTC"));
        let berlin = DataType::Timestamp(TimeUnit::Microsecond, Some("Europe/Berlin".into()));
        let moved = in_zone(&utc, &berlin);
        assert_eq!(moved.data_type(), &berlin);
        assert_eq!(moved.to_data().buffers(), utc.to_data().buffers());
        let naive = DataType::Timestamp(TimeUnit::Microsecond, None);
        assert_eq!(zoned_type(&naive, "Europe/Berlin"), naive);
        assert_eq!(
            zoned_type(
                &DataType::Timestamp(TimeUnit::Millisecond, Some("+02:00".into())),
                "Asia/Kolkata"
            ),
            DataType::Timestamp(TimeUnit::Millisecond, Some("Asia/Kolkata".into()))
        );
    }

    /// Every name `is_utc` takes is a zone arrow reads, with no offset at any instant.
    #[test]
    fn utc_names_have_no_offset_ever() {
        for name in UTC_NAMES {
            let zone = parse_time_zone(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            for us in [
                -62_000_000_000_000_000,
                -1,
                0,
                1_700_000_000_000_000,
                253_000_000_000_000_000,
            ] {
                assert_eq!(offset_at(&zone, us), 0, "{name} at {us}");
            }
            assert!(is_utc(name));
        }
        for other in ["Europe/Berlin", "+05:30", "America/New_York", "Etc/GMT+1"] {
            assert!(!is_utc(other), "{other}");
        }
    }
}
