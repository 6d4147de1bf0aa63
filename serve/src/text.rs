//! Arrow columns as PostgreSQL sees them: the type OID of each column and the text
//! format of each value (what psql prints and what drivers parse).

use arrow_array::cast::AsArray;
use arrow_array::types::{Float16Type, Float32Type, Float64Type};
use arrow_array::Array;
use arrow_schema::DataType;
use pgwire::api::Type;

/// The PostgreSQL type a column of `t` is described as.
pub fn pg_type(t: &DataType) -> Type {
    match t {
        DataType::Boolean => Type::BOOL,
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => Type::INT2,
        DataType::Int32 | DataType::UInt16 => Type::INT4,
        DataType::Int64 | DataType::UInt32 => Type::INT8,
        DataType::UInt64 | DataType::Decimal32(..) | DataType::Decimal64(..) => Type::NUMERIC,
        DataType::Decimal128(..) | DataType::Decimal256(..) => Type::NUMERIC,
        DataType::Float16 | DataType::Float32 => Type::FLOAT4,
        DataType::Float64 => Type::FLOAT8,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Type::TEXT,
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => Type::BYTEA,
        DataType::Date32 | DataType::Date64 => Type::DATE,
        DataType::Timestamp(_, None) => Type::TIMESTAMP,
        DataType::Timestamp(_, Some(_)) => Type::TIMESTAMPTZ,
        DataType::Time32(_) | DataType::Time64(_) => Type::TIME,
        DataType::Interval(_) | DataType::Duration(_) => Type::INTERVAL,
        DataType::Dictionary(_, values) => pg_type(values),
        _ => Type::TEXT,
    }
}

/// Row `i` of `a` in PostgreSQL's text format (`None` for NULL).
pub fn text(a: &dyn Array, i: usize) -> Option<String> {
    if a.is_null(i) {
        return None;
    }
    match a.data_type() {
        DataType::Boolean => Some(if a.as_boolean().value(i) { "t" } else { "f" }.into()),
        DataType::Float16 => Some(float4(a.as_primitive::<Float16Type>().value(i).to_f32())),
        DataType::Float32 => Some(float4(a.as_primitive::<Float32Type>().value(i))),
        DataType::Float64 => Some(float8(a.as_primitive::<Float64Type>().value(i))),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
            let bytes: &[u8] = match a.data_type() {
                DataType::Binary => a.as_binary::<i32>().value(i),
                DataType::LargeBinary => a.as_binary::<i64>().value(i),
                _ => a.as_binary_view().value(i),
            };
            Some(bytea(bytes))
        }
        DataType::FixedSizeBinary(_) => Some(bytea(a.as_fixed_size_binary().value(i))),
        DataType::Dictionary(..) => {
            let dict = a.as_any_dictionary();
            let key = dict.normalized_keys()[i];
            text(dict.values().as_ref(), key)
        }
        _ => ringscan_executor::format::cell(a, i),
    }
}

/// `\x` and the bytes in hex, PostgreSQL's default `bytea_output`.
fn bytea(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(2 + 2 * bytes.len());
    s.push_str("\\x");
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// A double as PostgreSQL 12+ prints it (`extra_float_digits` 1, the default): the
/// shortest digits that read back exactly, chosen as PostgreSQL chooses them (Ryu:
/// between two equally short, the nearer, and on a tie the even one), in exponent
/// form below 1e-4 and from 1e15.
pub fn float8(v: f64) -> String {
    special(v.is_nan(), v.is_infinite(), v > 0.0)
        .unwrap_or_else(|| pg_layout(ryu::Buffer::new().format_finite(v), 15))
}

/// A real as PostgreSQL prints it (see [`float8`]; exponent form from 1e6).
pub fn float4(v: f32) -> String {
    special(v.is_nan(), v.is_infinite(), v > 0.0)
        .unwrap_or_else(|| pg_layout(ryu::Buffer::new().format_finite(v), 6))
}

fn special(nan: bool, infinite: bool, positive: bool) -> Option<String> {
    if nan {
        return Some("NaN".into());
    }
    infinite.then(|| if positive { "Infinity" } else { "-Infinity" }.into())
}

/// Ryu's digits of a finite value (written `123.45`, `1.0`, `1e16`, `1.5e-7`) laid out
/// as PostgreSQL lays them out: `1.5e+21`, `1e-05`, `0.0001`, `1`; exponent form when
/// the decimal exponent is below -4 or at least `exponent_from`.
fn pg_layout(ryu: &str, exponent_from: i32) -> String {
    let (negative, unsigned) = match ryu.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, ryu),
    };
    let (mantissa, exp) = match unsigned.split_once('e') {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (unsigned, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all = format!("{int}{frac}");
    let significant = all.trim_start_matches('0');
    let digits = significant.trim_end_matches('0');
    let mut out = String::with_capacity(24);
    if negative {
        out.push('-');
    }
    if digits.is_empty() {
        out.push('0');
        return out;
    }
    // Digits before the decimal point (negative: zeros after it before the first).
    let point = int.len() as i32 + exp - (all.len() - significant.len()) as i32;
    let e = point - 1;
    let zeros = |n: i32| "0".repeat(usize::try_from(n).unwrap_or(0));
    if !(-4..exponent_from).contains(&e) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push_str(&format!("e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs()));
    } else if point <= 0 {
        out.push_str("0.");
        out.push_str(&zeros(-point));
        out.push_str(digits);
    } else if point as usize >= digits.len() {
        out.push_str(digits);
        out.push_str(&zeros(point - digits.len() as i32));
    } else {
        let (whole, fraction) = digits.split_at(point as usize);
        out.push_str(whole);
        out.push('.');
        out.push_str(fraction);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_postgresql_prints_them() {
        // What `SELECT x::float8` prints in PostgreSQL 15 with default settings.
        for (v, want) in [
            (1.0, "1"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (1e15, "1e+15"),
            (123456789012345.0, "123456789012345"),
            (1.5e21, "1.5e+21"),
            (0.0001, "0.0001"),
            (0.00001234, "1.234e-05"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-Infinity"),
            (0.0, "0"),
            (-0.0, "-0"),
            (-1.5e-300, "-1.5e-300"),
            (100.0, "100"),
            (123.456, "123.456"),
            // Two shortest forms, .12 and .13, lie equally near the value (…473.125):
            // PostgreSQL's Ryu takes the even one, Rust's own formatting the other.
            (182_301_818_556_473.0 + 0.125, "182301818556473.12"),
        ] {
            assert_eq!(float8(v), want, "{v}");
        }
        assert_eq!(float4(1.1), "1.1");
        assert_eq!(float4(1e6), "1e+06");
        assert_eq!(float4(123_456.7), "123456.7");
        assert_eq!(float4(1e-5), "1e-05");
    }

    #[test]
    fn bytes_are_hex() {
        assert_eq!(bytea(&[0, 0xab, 0x10]), "\\x00ab10");
    }
}
