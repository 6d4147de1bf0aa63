//! Output formats for a [`QueryResult`]: an aligned `table`, `csv` and JSON lines.
//!
//! Values print as DuckDB prints them: timestamps `2024-01-02 09:30:00[.ffffff]`;
//! instants (a time zone in the type) in that zone with the offset in force,
//! `2024-03-31 03:30:00+02` (the engine puts results in the session zone), dates
//! `YYYY-MM-DD`, booleans
//! `true`/`false`, doubles in their shortest round-trip form with DuckDB's exponent
//! style (`0.1`, `100.0`, `1e+20`, `nan`, `inf`).
//!
//! - `table`: a header, a rule, numbers right-aligned, NULL as `NULL`, and a row count.
//! - `csv`: a header row, RFC 4180 quoting (fields with `,` `"` CR or LF are quoted,
//!   quotes doubled), NULL as an empty field, `\n` line ends.
//! - `json`: one object per row and line; NULL as `null`, numbers as numbers; NaN and
//!   infinities as the strings `"NaN"`, `"Infinity"`, `"-Infinity"` (DuckDB writes them
//!   bare, which is not JSON); dates and timestamps as strings.

use std::io::{self, Write};

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::Array;
use arrow_schema::{DataType, IntervalUnit, TimeUnit};

use crate::result::QueryResult;

/// An output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned columns for people.
    Table,
    /// RFC 4180 CSV.
    Csv,
    /// One JSON object per line.
    Json,
}

impl Format {
    /// Parses `table`, `csv` or `json` (case-insensitive).
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "table" => Some(Self::Table),
            "csv" => Some(Self::Csv),
            "json" | "jsonl" | "ndjson" => Some(Self::Json),
            _ => None,
        }
    }

    /// Writes `result` to `out` in this format.
    pub fn write(self, out: &mut dyn Write, result: &QueryResult) -> io::Result<()> {
        match self {
            Self::Table => write_table(out, result),
            Self::Csv => write_csv(out, result),
            Self::Json => write_json(out, result),
        }
    }
}

/// A double as DuckDB prints it: shortest round-trip digits, `1e+20` style exponents.
pub fn format_f64(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let a = v.abs();
    if a != 0.0 && !(1e-5..1e16).contains(&a) {
        let s = format!("{v:e}");
        return match s.split_once('e') {
            Some((m, e)) if !e.starts_with('-') => format!("{m}e+{e}"),
            Some((m, e)) => {
                let digits = e.trim_start_matches('-');
                format!("{m}e-{digits:0>2}")
            }
            None => s,
        };
    }
    let s = format!("{v}");
    if s.contains('.') {
        s
    } else {
        format!("{s}.0")
    }
}

fn is_numeric(t: &DataType) -> bool {
    t.is_numeric()
}

/// The text of row `i` of `a` as DuckDB prints it (`None` for NULL).
pub fn cell(a: &dyn Array, i: usize) -> Option<String> {
    if a.is_null(i) {
        return None;
    }
    Some(match a.data_type() {
        DataType::Null => return None,
        DataType::Boolean => a.as_boolean().value(i).to_string(),
        DataType::Int8 => a.as_primitive::<Int8Type>().value(i).to_string(),
        DataType::Int16 => a.as_primitive::<Int16Type>().value(i).to_string(),
        DataType::Int32 => a.as_primitive::<Int32Type>().value(i).to_string(),
        DataType::Int64 => a.as_primitive::<Int64Type>().value(i).to_string(),
        DataType::UInt8 => a.as_primitive::<UInt8Type>().value(i).to_string(),
        DataType::UInt16 => a.as_primitive::<UInt16Type>().value(i).to_string(),
        DataType::UInt32 => a.as_primitive::<UInt32Type>().value(i).to_string(),
        DataType::UInt64 => a.as_primitive::<UInt64Type>().value(i).to_string(),
        DataType::Float16 => format_f64(a.as_primitive::<Float16Type>().value(i).to_f64()),
        DataType::Float32 => format_f64(f64::from(a.as_primitive::<Float32Type>().value(i))),
        DataType::Float64 => format_f64(a.as_primitive::<Float64Type>().value(i)),
        DataType::Decimal128(_, s) => arrow_array::types::Decimal128Type::format_decimal(
            a.as_primitive::<Decimal128Type>().value(i),
            38,
            *s,
        ),
        DataType::Utf8 => a.as_string::<i32>().value(i).to_owned(),
        DataType::LargeUtf8 => a.as_string::<i64>().value(i).to_owned(),
        DataType::Utf8View => a.as_string_view().value(i).to_owned(),
        DataType::Date32 => crate::temporal::format_date(a.as_primitive::<Date32Type>().value(i)),
        DataType::Date64 => {
            let ms = a.as_primitive::<Date64Type>().value(i);
            crate::temporal::format_date(ms.div_euclid(86_400_000) as i32)
        }
        DataType::Timestamp(unit, tz) => {
            let v = match unit {
                TimeUnit::Second => a
                    .as_primitive::<TimestampSecondType>()
                    .value(i)
                    .saturating_mul(1_000_000),
                TimeUnit::Millisecond => a
                    .as_primitive::<TimestampMillisecondType>()
                    .value(i)
                    .saturating_mul(1000),
                TimeUnit::Microsecond => a.as_primitive::<TimestampMicrosecondType>().value(i),
                TimeUnit::Nanosecond => a
                    .as_primitive::<TimestampNanosecondType>()
                    .value(i)
                    .div_euclid(1000),
            };
            match tz.as_deref().map(crate::zone::parse_time_zone) {
                Some(Ok(zone)) => crate::zone::format_instant(v, &zone),
                // Arrow accepts any text as a zone; one it cannot read prints as UTC.
                Some(Err(_)) => format!("{}+00", crate::temporal::format_timestamp(v)),
                None => crate::temporal::format_timestamp(v),
            }
        }
        DataType::Interval(IntervalUnit::MonthDayNano) => {
            let v = a.as_primitive::<IntervalMonthDayNanoType>().value(i);
            format!(
                "{} months {} days {} microseconds",
                v.months,
                v.days,
                v.nanoseconds / 1000
            )
        }
        _ => arrow_cast::display::ArrayFormatter::try_new(a, &Default::default())
            .map(|f| f.value(i).to_string())
            .unwrap_or_else(|_| "?".into()),
    })
}

/// The text of row `i` of `a`, NULL as `NULL`.
pub(crate) fn cell_text(a: &dyn Array, i: usize) -> String {
    cell(a, i).unwrap_or_else(|| "NULL".into())
}

/// Writes an aligned table with a header and a row count.
pub fn write_table(out: &mut dyn Write, result: &QueryResult) -> io::Result<()> {
    let fields = result.schema.fields();
    let mut widths: Vec<usize> = fields.iter().map(|f| f.name().chars().count()).collect();
    let mut rows: Vec<Vec<String>> = Vec::with_capacity(result.rows);
    for b in &result.batches {
        for i in 0..b.num_rows() {
            let row: Vec<String> = b
                .columns()
                .iter()
                .map(|c| cell_text(c.as_ref(), i))
                .collect();
            for (w, s) in widths.iter_mut().zip(&row) {
                *w = (*w).max(s.chars().count());
            }
            rows.push(row);
        }
    }
    let right: Vec<bool> = fields.iter().map(|f| is_numeric(f.data_type())).collect();
    let pad = |s: &str, w: usize, right: bool| {
        let n = w.saturating_sub(s.chars().count());
        if right {
            format!("{}{s}", " ".repeat(n))
        } else {
            format!("{s}{}", " ".repeat(n))
        }
    };
    let line = |cells: Vec<String>| cells.join(" | ").trim_end().to_owned();
    let header: Vec<String> = fields
        .iter()
        .zip(&widths)
        .zip(&right)
        .map(|((f, w), r)| pad(f.name(), *w, *r))
        .collect();
    writeln!(out, "{}", line(header))?;
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    writeln!(out, "{}", rule.join("-+-"))?;
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .zip(&right)
            .map(|((s, w), r)| pad(s, *w, *r))
            .collect();
        writeln!(out, "{}", line(cells))?;
    }
    let n = result.rows;
    writeln!(out, "({n} row{})", if n == 1 { "" } else { "s" })
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// Writes CSV with a header row; NULL is an empty field.
pub fn write_csv(out: &mut dyn Write, result: &QueryResult) -> io::Result<()> {
    let header: Vec<String> = result
        .schema
        .fields()
        .iter()
        .map(|f| csv_field(f.name()))
        .collect();
    writeln!(out, "{}", header.join(","))?;
    for b in &result.batches {
        for i in 0..b.num_rows() {
            let row: Vec<String> = b
                .columns()
                .iter()
                .map(|c| {
                    cell(c.as_ref(), i)
                        .map(|s| csv_field(&s))
                        .unwrap_or_default()
                })
                .collect();
            writeln!(out, "{}", row.join(","))?;
        }
    }
    Ok(())
}

fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

fn json_value(a: &dyn Array, i: usize) -> String {
    let Some(text) = cell(a, i) else {
        return "null".into();
    };
    match a.data_type() {
        DataType::Boolean => text,
        t if t.is_floating() => match text.as_str() {
            "nan" => "\"NaN\"".into(),
            "inf" => "\"Infinity\"".into(),
            "-inf" => "\"-Infinity\"".into(),
            _ => text,
        },
        t if t.is_numeric() => text,
        _ => json_string(&text),
    }
}

/// Writes one JSON object per row and line.
pub fn write_json(out: &mut dyn Write, result: &QueryResult) -> io::Result<()> {
    let names: Vec<String> = result
        .schema
        .fields()
        .iter()
        .map(|f| json_string(f.name()))
        .collect();
    for b in &result.batches {
        for i in 0..b.num_rows() {
            let parts: Vec<String> = b
                .columns()
                .iter()
                .zip(&names)
                .map(|(c, n)| format!("{n}:{}", json_value(c.as_ref(), i)))
                .collect();
            writeln!(out, "{{{}}}", parts.join(","))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{
        ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
    };
    use arrow_schema::{Field, Schema};

    use super::*;

    fn result() -> QueryResult {
        let ts = DataType::Timestamp(TimeUnit::Microsecond, None);
        let tz = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
        let schema = Arc::new(Schema::new(vec![
            Field::new("sym", DataType::Utf8, true),
            Field::new("n", DataType::Int64, true),
            Field::new("x", DataType::Float64, true),
            Field::new("t", ts, true),
            Field::new("tz", tz, true),
        ]));
        let t = 1_704_187_800_000_000i64;
        let cols: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![Some("a,\"b\""), None, Some("c")])),
            Arc::new(Int64Array::from(vec![Some(1), Some(-20), None])),
            Arc::new(Float64Array::from(vec![
                Some(0.1),
                Some(f64::NAN),
                Some(1e20),
            ])),
            Arc::new(TimestampMicrosecondArray::from(vec![
                Some(t),
                None,
                Some(t + 1),
            ])),
            Arc::new(
                TimestampMicrosecondArray::from(vec![Some(t), None, None]).with_timezone("UTC"),
            ),
        ];
        let batch = RecordBatch::try_new(schema.clone(), cols).unwrap();
        QueryResult {
            schema,
            batches: vec![batch],
            rows: 3,
        }
    }

    fn render(f: Format) -> String {
        let mut out = Vec::new();
        f.write(&mut out, &result()).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn doubles_print_like_duckdb() {
        let cases = [
            (0.1, "0.1"),
            (100.0, "100.0"),
            (1e20, "1e+20"),
            (1e-7, "1e-07"),
            (123_456_789_012_345_680.0, "1.2345678901234568e+17"),
            (1.5e300, "1.5e+300"),
            (-0.0, "-0.0"),
            (f64::INFINITY, "inf"),
        ];
        for (v, s) in cases {
            assert_eq!(format_f64(v), s);
            assert!(s == "inf" || s.parse::<f64>().unwrap() == v);
        }
    }

    #[test]
    fn csv_quotes_and_nulls() {
        let text = render(Format::Csv);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "sym,n,x,t,tz");
        assert_eq!(
            lines[1],
            "\"a,\"\"b\"\"\",1,0.1,2024-01-02 09:30:00,2024-01-02 09:30:00+00"
        );
        assert_eq!(lines[2], ",-20,nan,,");
        assert_eq!(lines[3], "c,,1e+20,2024-01-02 09:30:00.000001,");
    }

    #[test]
    fn json_lines() {
        let text = render(Format::Json);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        for l in &lines {
            serde_json::from_str::<serde_json::Value>(l).unwrap();
        }
        assert_eq!(
            lines[1],
            r#"{"sym":null,"n":-20,"x":"NaN","t":null,"tz":null}"#
        );
        assert!(lines[0].contains(r#""t":"2024-01-02 09:30:00""#));
    }

    #[test]
    fn table_aligns_and_counts() {
        let text = render(Format::Table);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("sym   |    n |     x | t "), "{text}");
        assert!(lines[1].starts_with("------+------+-------+---"), "{text}");
        assert!(lines[2].starts_with("a,\"b\" |    1 |   0.1 |"), "{text}");
        assert!(
            lines[3].starts_with("NULL  |  -20 |   nan | NULL "),
            "{text}"
        );
        assert!(lines[4].contains("| NULL | 1e+20 |"), "{text}");
        assert_eq!(*lines.last().unwrap(), "(3 rows)");
    }

    /// Regression (issue 17, item 8): every instant printed `+00` whatever its zone.
    #[test]
    fn instants_print_in_their_zone_with_its_offset() {
        let t = 1_711_848_600_000_000i64; // 2024-03-31 01:30:00 UTC
        let cell_in = |zone: &str| {
            let a = TimestampMicrosecondArray::from(vec![t]).with_timezone(zone);
            cell_text(&a, 0)
        };
        assert_eq!(cell_in("Europe/Berlin"), "2024-03-31 03:30:00+02");
        assert_eq!(cell_in("Asia/Kolkata"), "2024-03-31 07:00:00+05:30");
        assert_eq!(cell_in("America/New_York"), "2024-03-30 21:30:00-04");
        assert_eq!(cell_in("+00:00"), "2024-03-31 01:30:00+00");
        assert_eq!(cell_in("UTC"), "2024-03-31 01:30:00+00");
    }
}
