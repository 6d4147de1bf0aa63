//! PostgreSQL's binary format: result values written (what psycopg 3 and pgjdbc ask
//! for) and parameter values read.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Date64Type, DurationMicrosecondType, DurationMillisecondType,
    DurationNanosecondType, DurationSecondType, Float16Type, Float32Type, Float64Type, Int16Type,
    Int32Type, Int64Type, Int8Type, IntervalDayTimeType, IntervalMonthDayNanoType,
    IntervalYearMonthType, Time32MillisecondType, Time32SecondType, Time64MicrosecondType,
    Time64NanosecondType, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::Array;
use arrow_schema::{DataType, TimeUnit};
use bytes::{BufMut, BytesMut};
use pgwire::api::Type;
use ringscan_executor::engine::Param;

/// Days from 1970-01-01 to 2000-01-01, PostgreSQL's epoch.
pub(crate) const PG_EPOCH_DAYS: i64 = 10_957;
/// Microseconds from 1970-01-01 to 2000-01-01.
pub(crate) const PG_EPOCH_US: i64 = PG_EPOCH_DAYS * 86_400_000_000;

/// Writes row `i` of `a` (not NULL) in the binary format of `pg_type(a.data_type())`;
/// `None` where that type has no binary writer here (the caller writes text).
pub(crate) fn write(a: &dyn Array, i: usize, out: &mut BytesMut) -> Option<()> {
    match a.data_type() {
        DataType::Boolean => out.put_u8(u8::from(a.as_boolean().value(i))),
        DataType::Int8 => out.put_i16(i16::from(a.as_primitive::<Int8Type>().value(i))),
        DataType::Int16 => out.put_i16(a.as_primitive::<Int16Type>().value(i)),
        DataType::UInt8 => out.put_i16(i16::from(a.as_primitive::<UInt8Type>().value(i))),
        DataType::Int32 => out.put_i32(a.as_primitive::<Int32Type>().value(i)),
        DataType::UInt16 => out.put_i32(i32::from(a.as_primitive::<UInt16Type>().value(i))),
        DataType::Int64 => out.put_i64(a.as_primitive::<Int64Type>().value(i)),
        DataType::UInt32 => out.put_i64(i64::from(a.as_primitive::<UInt32Type>().value(i))),
        DataType::UInt64 => numeric(&a.as_primitive::<UInt64Type>().value(i).to_string(), out),
        DataType::Float16 => out.put_f32(a.as_primitive::<Float16Type>().value(i).to_f32()),
        DataType::Float32 => out.put_f32(a.as_primitive::<Float32Type>().value(i)),
        DataType::Float64 => out.put_f64(a.as_primitive::<Float64Type>().value(i)),
        DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..) => numeric(&ringscan_executor::format::cell(a, i)?, out),
        DataType::Utf8 => out.put_slice(a.as_string::<i32>().value(i).as_bytes()),
        DataType::LargeUtf8 => out.put_slice(a.as_string::<i64>().value(i).as_bytes()),
        DataType::Utf8View => out.put_slice(a.as_string_view().value(i).as_bytes()),
        DataType::Binary => out.put_slice(a.as_binary::<i32>().value(i)),
        DataType::LargeBinary => out.put_slice(a.as_binary::<i64>().value(i)),
        DataType::BinaryView => out.put_slice(a.as_binary_view().value(i)),
        DataType::FixedSizeBinary(_) => out.put_slice(a.as_fixed_size_binary().value(i)),
        DataType::Date32 => {
            let days = i64::from(a.as_primitive::<Date32Type>().value(i)) - PG_EPOCH_DAYS;
            out.put_i32(i32::try_from(days).ok()?);
        }
        DataType::Date64 => {
            let ms = a.as_primitive::<Date64Type>().value(i);
            let days = ms.div_euclid(86_400_000) - PG_EPOCH_DAYS;
            out.put_i32(i32::try_from(days).ok()?);
        }
        DataType::Timestamp(unit, _) => {
            let us = match unit {
                TimeUnit::Second => a
                    .as_primitive::<TimestampSecondType>()
                    .value(i)
                    .checked_mul(1_000_000)?,
                TimeUnit::Millisecond => a
                    .as_primitive::<TimestampMillisecondType>()
                    .value(i)
                    .checked_mul(1000)?,
                TimeUnit::Microsecond => a.as_primitive::<TimestampMicrosecondType>().value(i),
                // PostgreSQL keeps microseconds: nanoseconds are truncated toward the
                // past, as its own cast does.
                TimeUnit::Nanosecond => a
                    .as_primitive::<TimestampNanosecondType>()
                    .value(i)
                    .div_euclid(1000),
            };
            out.put_i64(us.checked_sub(PG_EPOCH_US)?);
        }
        DataType::Time32(TimeUnit::Second) => {
            out.put_i64(i64::from(a.as_primitive::<Time32SecondType>().value(i)) * 1_000_000);
        }
        DataType::Time32(_) => {
            out.put_i64(i64::from(a.as_primitive::<Time32MillisecondType>().value(i)) * 1000);
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            out.put_i64(a.as_primitive::<Time64MicrosecondType>().value(i));
        }
        DataType::Time64(_) => {
            out.put_i64(a.as_primitive::<Time64NanosecondType>().value(i) / 1000);
        }
        DataType::Interval(_) | DataType::Duration(_) => {
            let (us, days, months) = interval(a, i)?;
            out.put_i64(us);
            out.put_i32(days);
            out.put_i32(months);
        }
        DataType::Dictionary(..) => {
            let dict = a.as_any_dictionary();
            let key = dict.normalized_keys()[i];
            return write(dict.values().as_ref(), key, out);
        }
        _ => return None,
    }
    Some(())
}

/// An interval or duration as PostgreSQL's (microseconds, days, months).
fn interval(a: &dyn Array, i: usize) -> Option<(i64, i32, i32)> {
    Some(match a.data_type() {
        DataType::Interval(arrow_schema::IntervalUnit::YearMonth) => {
            (0, 0, a.as_primitive::<IntervalYearMonthType>().value(i))
        }
        DataType::Interval(arrow_schema::IntervalUnit::DayTime) => {
            let v = a.as_primitive::<IntervalDayTimeType>().value(i);
            (i64::from(v.milliseconds) * 1000, v.days, 0)
        }
        DataType::Interval(arrow_schema::IntervalUnit::MonthDayNano) => {
            let v = a.as_primitive::<IntervalMonthDayNanoType>().value(i);
            (v.nanoseconds / 1000, v.days, v.months)
        }
        DataType::Duration(unit) => {
            let us = match unit {
                TimeUnit::Second => a
                    .as_primitive::<DurationSecondType>()
                    .value(i)
                    .checked_mul(1_000_000)?,
                TimeUnit::Millisecond => a
                    .as_primitive::<DurationMillisecondType>()
                    .value(i)
                    .checked_mul(1000)?,
                TimeUnit::Microsecond => a.as_primitive::<DurationMicrosecondType>().value(i),
                TimeUnit::Nanosecond => a.as_primitive::<DurationNanosecondType>().value(i) / 1000,
            };
            (us, 0, 0)
        }
        _ => return None,
    })
}

/// A decimal's text (`-123.4500`) as PostgreSQL's binary numeric: digit count,
/// weight, sign, display scale, then base-10000 digits.
fn numeric(text: &str, out: &mut BytesMut) {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, text),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let int = int.trim_start_matches('0');
    let scale = frac.len();
    // Groups of four digits aligned on the decimal point.
    let int_pad = (4 - int.len() % 4) % 4;
    let frac_pad = (4 - frac.len() % 4) % 4;
    let padded: Vec<u8> = std::iter::repeat_n(b'0', int_pad)
        .chain(int.bytes())
        .chain(frac.bytes())
        .chain(std::iter::repeat_n(b'0', frac_pad))
        .collect();
    let mut groups: Vec<i16> = padded
        .chunks(4)
        .map(|c| c.iter().fold(0i16, |acc, d| acc * 10 + i16::from(d - b'0')))
        .collect();
    let mut weight = i16::try_from((int.len() + int_pad) / 4).unwrap_or(i16::MAX) - 1;
    while groups.first() == Some(&0) {
        groups.remove(0);
        weight -= 1;
    }
    while groups.last() == Some(&0) {
        groups.pop();
    }
    if groups.is_empty() {
        weight = 0;
    }
    out.put_i16(i16::try_from(groups.len()).unwrap_or(i16::MAX));
    out.put_i16(weight);
    out.put_u16(if negative && !groups.is_empty() {
        0x4000
    } else {
        0
    });
    out.put_i16(i16::try_from(scale).unwrap_or(i16::MAX));
    for g in groups {
        out.put_i16(g);
    }
}

/// PostgreSQL's binary numeric as decimal text (`None`: malformed or NaN/infinite).
fn numeric_text(bytes: &[u8]) -> Option<String> {
    let word = |at: usize| -> Option<i16> {
        Some(i16::from_be_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
    };
    let count = usize::try_from(word(0)?).ok()?;
    let weight = i32::from(word(2)?);
    let sign = word(4)? as u16;
    let scale = usize::try_from(word(6)?).ok()?;
    if bytes.len() != 8 + 2 * count || !matches!(sign, 0 | 0x4000) {
        return None;
    }
    let groups: Vec<i16> = (0..count).map(|g| word(8 + 2 * g)).collect::<Option<_>>()?;
    if groups.iter().any(|g| !(0..10_000).contains(g)) {
        return None;
    }
    // Digit group k stands for group * 10000^(weight - k).
    let mut int = String::new();
    for k in 0..=weight.max(-1) {
        let g = usize::try_from(k)
            .ok()
            .and_then(|k| groups.get(k))
            .copied()
            .unwrap_or(0);
        if int.is_empty() {
            int = g.to_string();
        } else {
            int.push_str(&format!("{g:04}"));
        }
    }
    if int.is_empty() {
        int.push('0');
    }
    let mut frac = String::new();
    let mut k = weight + 1;
    while frac.len() < scale {
        let g = if k < 0 {
            0
        } else {
            usize::try_from(k)
                .ok()
                .and_then(|k| groups.get(k))
                .copied()
                .unwrap_or(0)
        };
        frac.push_str(&format!("{g:04}"));
        k += 1;
    }
    frac.truncate(scale);
    let mut s = String::new();
    if sign == 0x4000 {
        s.push('-');
    }
    s.push_str(&int);
    if scale > 0 {
        s.push('.');
        s.push_str(&frac);
    }
    Some(s)
}

/// The Arrow type a parameter of PostgreSQL type `t` is read as (`None`: as text).
pub(crate) fn arrow_type(t: &Type) -> Option<DataType> {
    Some(match *t {
        Type::BOOL => DataType::Boolean,
        Type::INT2 => DataType::Int16,
        Type::INT4 | Type::OID => DataType::Int32,
        Type::INT8 => DataType::Int64,
        Type::FLOAT4 => DataType::Float32,
        Type::FLOAT8 => DataType::Float64,
        Type::NUMERIC => DataType::Decimal128(38, 10),
        Type::BYTEA => DataType::Binary,
        Type::DATE => DataType::Date32,
        Type::TIMESTAMP => DataType::Timestamp(TimeUnit::Microsecond, None),
        Type::TIMESTAMPTZ => DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
        Type::TIME => DataType::Time64(TimeUnit::Microsecond),
        _ => return None,
    })
}

/// Reads parameter `n` (from 1) of type `t` from its bytes (`None`: NULL), in binary
/// when `binary`, else from PostgreSQL's text.
pub(crate) fn param(
    n: usize,
    bytes: Option<&[u8]>,
    binary: bool,
    t: &Type,
) -> Result<Param, String> {
    let target = arrow_type(t);
    let Some(bytes) = bytes else {
        return Param::try_from(target.as_ref().unwrap_or(&DataType::Utf8))
            .map_err(|e| format!("parameter ${n}: {e}"));
    };
    let bad = |what: &str| format!("parameter ${n}: {what} for type {}", t.name());
    if !binary {
        let text = std::str::from_utf8(bytes).map_err(|_| bad("text that is not UTF-8"))?;
        return match target {
            Some(DataType::Decimal128(..)) => decimal(text).ok_or_else(|| bad("not a number")),
            Some(DataType::Binary) => hex_bytea(text)
                .map(|b| Param::Binary(Some(b)))
                .ok_or_else(|| bad("not \\x and hex digits")),
            Some(DataType::Boolean) => match text.trim().to_ascii_lowercase().as_str() {
                "t" | "true" | "yes" | "on" | "1" | "y" => Ok(Param::Boolean(Some(true))),
                "f" | "false" | "no" | "off" | "0" | "n" => Ok(Param::Boolean(Some(false))),
                _ => Err(bad("not a boolean")),
            },
            Some(t) => Param::try_from_string(text.to_owned(), &t)
                .map_err(|_| bad(&format!("\"{text}\" is not valid"))),
            None => Ok(Param::Utf8(Some(text.to_owned()))),
        };
    }
    let fixed = |len: usize| -> Result<&[u8], String> {
        (bytes.len() == len)
            .then_some(bytes)
            .ok_or_else(|| bad(&format!("{} bytes where {len} are", bytes.len())))
    };
    let be8 = |b: &[u8]| i64::from_be_bytes(b.try_into().expect("8 bytes"));
    Ok(match *t {
        Type::BOOL => Param::Boolean(Some(fixed(1)?[0] != 0)),
        Type::INT2 => Param::Int16(Some(i16::from_be_bytes(
            fixed(2)?.try_into().expect("2 bytes"),
        ))),
        Type::INT4 | Type::OID => Param::Int32(Some(i32::from_be_bytes(
            fixed(4)?.try_into().expect("4 bytes"),
        ))),
        Type::INT8 => Param::Int64(Some(be8(fixed(8)?))),
        Type::FLOAT4 => Param::Float32(Some(f32::from_be_bytes(
            fixed(4)?.try_into().expect("4 bytes"),
        ))),
        Type::FLOAT8 => Param::Float64(Some(f64::from_be_bytes(
            fixed(8)?.try_into().expect("8 bytes"),
        ))),
        Type::NUMERIC => {
            let text = numeric_text(bytes).ok_or_else(|| bad("a malformed numeric"))?;
            decimal(&text).ok_or_else(|| bad("a numeric out of range"))?
        }
        Type::BYTEA => Param::Binary(Some(bytes.to_vec())),
        Type::DATE => {
            let days = i32::from_be_bytes(fixed(4)?.try_into().expect("4 bytes"));
            let days = i64::from(days) + PG_EPOCH_DAYS;
            Param::Date32(Some(
                i32::try_from(days).map_err(|_| bad("a date out of range"))?,
            ))
        }
        Type::TIMESTAMP | Type::TIMESTAMPTZ => {
            let us = be8(fixed(8)?)
                .checked_add(PG_EPOCH_US)
                .ok_or_else(|| bad("a timestamp out of range"))?;
            let zone = (*t == Type::TIMESTAMPTZ).then(|| "+00:00".into());
            Param::TimestampMicrosecond(Some(us), zone)
        }
        Type::TIME => Param::Time64Microsecond(Some(be8(fixed(8)?))),
        // Text, varchar, name, unknown and the rest: the bytes are the text.
        _ => Param::Utf8(Some(
            String::from_utf8(bytes.to_vec()).map_err(|_| bad("text that is not UTF-8"))?,
        )),
    })
}

/// Decimal text as a Decimal128 with the scale it was written with.
fn decimal(text: &str) -> Option<Param> {
    let text = text.trim();
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    let scale = i8::try_from(frac.len()).ok().filter(|s| *s <= 38)?;
    let digits = format!("{int}{frac}");
    let value: i128 = digits.parse().ok()?;
    let precision = 38u8;
    (value.unsigned_abs() < 10u128.pow(38)).then_some(Param::Decimal128(
        Some(value),
        precision,
        scale,
    ))
}

/// `\x0aff` as bytes.
fn hex_bytea(text: &str) -> Option<Vec<u8>> {
    let hex = text.strip_prefix("\\x")?;
    if hex.len() % 2 != 0 {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numeric_bytes(text: &str) -> Vec<u8> {
        let mut out = BytesMut::new();
        numeric(text, &mut out);
        out.to_vec()
    }

    #[test]
    fn numerics_are_postgresql_digit_groups() {
        // What PostgreSQL 15 sends for SELECT '12345.678'::numeric in binary.
        assert_eq!(
            numeric_bytes("12345.678"),
            [0, 3, 0, 1, 0, 0, 0, 3, 0, 1, 0x09, 0x29, 0x1a, 0x7c]
        );
        // 0.0001: weight -1, one group of 1, scale 4.
        assert_eq!(
            numeric_bytes("0.0001"),
            [0, 1, 0xff, 0xff, 0, 0, 0, 4, 0, 1]
        );
        assert_eq!(numeric_bytes("-0.00"), [0, 0, 0, 0, 0, 0, 0, 2]);
    }

    #[test]
    fn numerics_read_back_as_written() {
        for text in [
            "12345.678",
            "0.0001",
            "-42",
            "100000000",
            "-0.5",
            "0",
            "99999999999999999999.99",
        ] {
            assert_eq!(
                numeric_text(&numeric_bytes(text)).as_deref(),
                Some(text),
                "{text}"
            );
        }
    }

    #[test]
    fn binary_parameters_are_read_by_type() {
        let p = |t: &Type, b: &[u8]| param(1, Some(b), true, t);
        assert_eq!(
            p(&Type::INT4, &7i32.to_be_bytes()),
            Ok(Param::Int32(Some(7)))
        );
        assert_eq!(
            p(&Type::INT8, &(-3i64).to_be_bytes()),
            Ok(Param::Int64(Some(-3)))
        );
        assert_eq!(
            p(&Type::FLOAT8, &2.5f64.to_be_bytes()),
            Ok(Param::Float64(Some(2.5)))
        );
        // 2000-01-02 is day 1 of PostgreSQL's epoch, day 10958 of Arrow's.
        assert_eq!(
            p(&Type::DATE, &1i32.to_be_bytes()),
            Ok(Param::Date32(Some(10_958)))
        );
        assert!(p(&Type::INT4, &[0, 1])
            .unwrap_err()
            .contains("2 bytes where 4"));
        assert_eq!(param(2, None, true, &Type::INT8), Ok(Param::Int64(None)));
    }

    #[test]
    fn text_parameters_are_parsed_for_their_type() {
        let p = |t: &Type, s: &str| param(1, Some(s.as_bytes()), false, t);
        assert_eq!(p(&Type::INT8, "42"), Ok(Param::Int64(Some(42))));
        assert_eq!(p(&Type::BOOL, "t"), Ok(Param::Boolean(Some(true))));
        assert_eq!(
            p(&Type::NUMERIC, "-1.50"),
            Ok(Param::Decimal128(Some(-150), 38, 2))
        );
        assert_eq!(
            p(&Type::BYTEA, "\\x00ff"),
            Ok(Param::Binary(Some(vec![0, 255])))
        );
        assert_eq!(
            p(&Type::UNKNOWN, "abc"),
            Ok(Param::Utf8(Some("abc".into())))
        );
        assert!(p(&Type::INT4, "x1")
            .unwrap_err()
            .contains("\"x1\" is not valid"));
    }
}
