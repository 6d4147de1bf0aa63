//! Result columns written into data rows. A column's type is looked at, and its array
//! downcast, once per batch; each value is then written straight into the rows'
//! shared buffer, with no `String` per value. One value at a time, [`text::text`] and
//! [`binary::write`] are the reference these writers are tested against (and what
//! they fall back to for the types and values they do not take themselves).

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrowPrimitiveType, OffsetSizeTrait, PrimitiveArray};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, TimeUnit};
use bytes::{BufMut, BytesMut};

use crate::{binary, text};

/// Writes the value at a row (not NULL) into the buffer.
type Writer<'a> = Box<dyn Fn(usize, &mut BytesMut) + 'a>;

/// One column of one batch, ready to write its values in text or binary.
pub(crate) struct Column<'a> {
    nulls: Option<NullBuffer>,
    write: Writer<'a>,
}

impl<'a> Column<'a> {
    /// The column `a` in the binary format (where its type has one) or text.
    pub(crate) fn new(a: &'a dyn Array, binary: bool) -> Self {
        Self {
            nulls: a.logical_nulls(),
            write: if binary {
                binary_writer(a)
            } else {
                text_writer(a)
            },
        }
    }

    /// Writes value `i` as a data row carries it: its length, then its bytes; -1 and
    /// nothing for NULL.
    pub(crate) fn put(&self, i: usize, out: &mut BytesMut) {
        if self.nulls.as_ref().is_some_and(|n| n.is_null(i)) {
            out.put_i32(-1);
            return;
        }
        let at = out.len();
        out.put_i32(0);
        (self.write)(i, out);
        let len = i32::try_from(out.len() - at - 4).unwrap_or(i32::MAX);
        out[at..at + 4].copy_from_slice(&len.to_be_bytes());
    }

    /// Writes value `i` (not NULL) alone, without its length.
    pub(crate) fn put_value(&self, i: usize, out: &mut BytesMut) {
        (self.write)(i, out);
    }

    /// Whether value `i` is NULL.
    pub(crate) fn is_null(&self, i: usize) -> bool {
        self.nulls.as_ref().is_some_and(|n| n.is_null(i))
    }
}

/// A column's cells as data rows carry them, for writing rows whole: the common types
/// (binary numbers, dates and timestamps, strings in either format) written inline
/// from the array's values, with no call through a [`Writer`] per value; the others
/// (and the values the inline forms leave to the reference) through [`Column`].
pub(crate) struct Cells<'a> {
    /// The inline kinds' NULLs (a [`Column`] checks its own).
    nulls: Option<NullBuffer>,
    kind: CellKind<'a>,
}

enum CellKind<'a> {
    /// Big-endian values of a fixed width, their bytes as they are.
    I16(&'a [i16]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    F32(&'a [f32]),
    F64(&'a [f64]),
    Bool(&'a arrow_array::BooleanArray),
    /// Days since 1970 written as PostgreSQL's days since 2000 (past its range, as
    /// the column's writer does).
    Date(&'a [i32], Column<'a>),
    /// Microseconds since 1970 written as PostgreSQL's since 2000 (past its range, as
    /// the column's writer does).
    Micros(&'a [i64], Column<'a>),
    Str(&'a [i32], &'a [u8]),
    LargeStr(&'a [i64], &'a [u8]),
    Other(Column<'a>),
}

/// A cell's length and fixed-width value, in one write.
fn put_fixed<const N: usize>(value: [u8; N], out: &mut BytesMut) {
    let mut cell = [0u8; 12];
    cell[..4].copy_from_slice(&(N as i32).to_be_bytes());
    cell[4..4 + N].copy_from_slice(&value);
    out.put_slice(&cell[..4 + N]);
}

fn put_bytes(value: &[u8], out: &mut BytesMut) {
    out.put_i32(i32::try_from(value.len()).unwrap_or(i32::MAX));
    out.put_slice(value);
}

impl<'a> Cells<'a> {
    /// The column `a` in the binary format (where its type has one) or text.
    pub(crate) fn new(a: &'a dyn Array, binary: bool) -> Self {
        use arrow_array::types::Float32Type;
        let kind = match (a.data_type(), binary) {
            (DataType::Utf8, _) => {
                let s = a.as_string::<i32>();
                CellKind::Str(s.value_offsets(), s.value_data())
            }
            (DataType::LargeUtf8, _) => {
                let s = a.as_string::<i64>();
                CellKind::LargeStr(s.value_offsets(), s.value_data())
            }
            (DataType::Int16, true) => CellKind::I16(a.as_primitive::<Int16Type>().values()),
            (DataType::Int32, true) => CellKind::I32(a.as_primitive::<Int32Type>().values()),
            (DataType::Int64, true) => CellKind::I64(a.as_primitive::<Int64Type>().values()),
            (DataType::Float32, true) => CellKind::F32(a.as_primitive::<Float32Type>().values()),
            (DataType::Float64, true) => CellKind::F64(a.as_primitive::<Float64Type>().values()),
            (DataType::Boolean, true) => CellKind::Bool(a.as_boolean()),
            (DataType::Date32, true) => CellKind::Date(
                a.as_primitive::<Date32Type>().values(),
                Column::new(a, binary),
            ),
            (DataType::Timestamp(TimeUnit::Microsecond, _), true) => CellKind::Micros(
                a.as_primitive::<TimestampMicrosecondType>().values(),
                Column::new(a, binary),
            ),
            _ => {
                return Self {
                    nulls: None,
                    kind: CellKind::Other(Column::new(a, binary)),
                }
            }
        };
        Self {
            nulls: a.logical_nulls(),
            kind,
        }
    }

    /// Writes value `i` as [`Column::put`] does.
    #[inline]
    pub(crate) fn put(&self, i: usize, out: &mut BytesMut) {
        if self.nulls.as_ref().is_some_and(|n| n.is_null(i)) {
            out.put_i32(-1);
            return;
        }
        match &self.kind {
            CellKind::I16(v) => put_fixed(v[i].to_be_bytes(), out),
            CellKind::I32(v) => put_fixed(v[i].to_be_bytes(), out),
            CellKind::I64(v) => put_fixed(v[i].to_be_bytes(), out),
            CellKind::F32(v) => put_fixed(v[i].to_be_bytes(), out),
            CellKind::F64(v) => put_fixed(v[i].to_be_bytes(), out),
            CellKind::Bool(a) => put_fixed([u8::from(a.value(i))], out),
            CellKind::Date(v, column) => match date_inline(v[i]) {
                Some(days) => put_fixed(days.to_be_bytes(), out),
                None => column.put(i, out),
            },
            CellKind::Micros(v, column) => match micros_inline(v[i]) {
                Some(us) => put_fixed(us.to_be_bytes(), out),
                None => column.put(i, out),
            },
            CellKind::Str(offsets, values) => {
                put_bytes(&values[offsets[i] as usize..offsets[i + 1] as usize], out)
            }
            CellKind::LargeStr(offsets, values) => {
                put_bytes(&values[offsets[i] as usize..offsets[i + 1] as usize], out)
            }
            CellKind::Other(column) => column.put(i, out),
        }
    }

    /// Bytes the cells of rows `rows` take at least (fixed widths and strings exactly,
    /// 4 for each other cell): what to reserve before writing them.
    pub(crate) fn bytes(&self, rows: std::ops::Range<usize>) -> usize {
        let n = rows.len();
        let span = |first: usize, last: usize| last.saturating_sub(first);
        4 * n
            + match self.kind {
                CellKind::I16(_) => 2 * n,
                CellKind::I32(_) | CellKind::F32(_) | CellKind::Date(..) => 4 * n,
                CellKind::I64(_) | CellKind::F64(_) | CellKind::Micros(..) => 8 * n,
                CellKind::Bool(_) => n,
                CellKind::Str(o, _) => span(o[rows.start] as usize, o[rows.end] as usize),
                CellKind::LargeStr(o, _) => span(o[rows.start] as usize, o[rows.end] as usize),
                CellKind::Other(_) => 0,
            }
    }
}

/// Rows written column by column: each row's size first, then every column's cells
/// into their rows, one column at a time, with no choice of writer per cell (written
/// row by row, a call and an indirect jump per cell were a quarter of a host's CPU for
/// a wide result).
impl Cells<'_> {
    /// Whether every cell's size is known before writing it (every kind but
    /// [`CellKind::Other`], and dates and timestamps only where every value is in the
    /// range the inline form writes).
    pub(crate) fn sized(&self) -> bool {
        match &self.kind {
            CellKind::Other(_) => false,
            // NULLs' values included: a NULL's slot may hold anything.
            CellKind::Date(v, _) => v.iter().all(|&d| date_inline(d).is_some()),
            CellKind::Micros(v, _) => v.iter().all(|&us| micros_inline(us).is_some()),
            _ => true,
        }
    }

    /// The size of every row's cell where it is one size in every row (a fixed-width
    /// kind without NULLs).
    pub(crate) fn same_size(&self) -> Option<usize> {
        if self.nulls.is_some() {
            return None;
        }
        match &self.kind {
            CellKind::I16(_) => Some(4 + 2),
            CellKind::I32(_) | CellKind::F32(_) | CellKind::Date(..) => Some(4 + 4),
            CellKind::I64(_) | CellKind::F64(_) | CellKind::Micros(..) => Some(4 + 8),
            CellKind::Bool(_) => Some(4 + 1),
            _ => None,
        }
    }

    /// Adds the size of each row's cell (rows `start..start + sizes.len()`) to
    /// `sizes`. Only for [`Self::sized`] cells.
    pub(crate) fn add_sizes(&self, start: usize, sizes: &mut [usize]) {
        let fixed = match &self.kind {
            CellKind::I16(_) => 2,
            CellKind::I32(_) | CellKind::F32(_) | CellKind::Date(..) => 4,
            CellKind::I64(_) | CellKind::F64(_) | CellKind::Micros(..) => 8,
            CellKind::Bool(_) => 1,
            CellKind::Str(o, _) => return add_string_sizes(o, &self.nulls, start, sizes),
            CellKind::LargeStr(o, _) => return add_string_sizes(o, &self.nulls, start, sizes),
            CellKind::Other(_) => unreachable!("sized cells only"),
        };
        match &self.nulls {
            None => sizes.iter_mut().for_each(|s| *s += 4 + fixed),
            Some(n) => {
                for (k, s) in sizes.iter_mut().enumerate() {
                    *s += if n.is_null(start + k) { 4 } else { 4 + fixed };
                }
            }
        }
    }

    /// Writes the cells of rows `start..start + at.len()` into `buf`, row `k`'s at
    /// `at[k]`, and moves each `at[k]` past its cell. Only for [`Self::sized`] cells,
    /// `buf` as sized by [`Self::add_sizes`]. Row `k` ends at `ends[k]`: a string
    /// cell may write garbage past its end, up to there, for the later columns of
    /// its row to overwrite (so columns are written first to last).
    pub(crate) fn write_at(&self, start: usize, buf: &mut [u8], at: &mut [usize], ends: &[usize]) {
        let nulls = self.nulls.as_ref();
        match &self.kind {
            CellKind::I16(v) => fixed_at(v, |x| x.to_be_bytes(), nulls, start, buf, at),
            CellKind::I32(v) => fixed_at(v, |x| x.to_be_bytes(), nulls, start, buf, at),
            CellKind::I64(v) => fixed_at(v, |x| x.to_be_bytes(), nulls, start, buf, at),
            CellKind::F32(v) => fixed_at(v, |x| x.to_be_bytes(), nulls, start, buf, at),
            CellKind::F64(v) => fixed_at(v, |x| x.to_be_bytes(), nulls, start, buf, at),
            CellKind::Date(v, _) => fixed_at(
                v,
                |d| date_inline(d).unwrap_or_default().to_be_bytes(),
                nulls,
                start,
                buf,
                at,
            ),
            CellKind::Micros(v, _) => fixed_at(
                v,
                |us| micros_inline(us).unwrap_or_default().to_be_bytes(),
                nulls,
                start,
                buf,
                at,
            ),
            CellKind::Bool(a) => {
                for (k, pos) in at.iter_mut().enumerate() {
                    let i = start + k;
                    *pos = match nulls.is_some_and(|n| n.is_null(i)) {
                        true => put_null_at(buf, *pos),
                        false => put_at(buf, *pos, [u8::from(a.value(i))]),
                    };
                }
            }
            CellKind::Str(o, values) => strings_at(o, values, nulls, start, buf, at, ends),
            CellKind::LargeStr(o, values) => strings_at(o, values, nulls, start, buf, at, ends),
            CellKind::Other(_) => unreachable!("sized cells only"),
        }
    }
}

/// A date's days as PostgreSQL's binary form counts them, where they fit.
fn date_inline(days: i32) -> Option<i32> {
    i32::try_from(i64::from(days) - crate::binary::PG_EPOCH_DAYS).ok()
}

/// A timestamp's microseconds as PostgreSQL's binary form counts them, where they fit.
fn micros_inline(us: i64) -> Option<i64> {
    us.checked_sub(crate::binary::PG_EPOCH_US)
}

fn add_string_sizes<O: OffsetSizeTrait>(
    offsets: &[O],
    nulls: &Option<NullBuffer>,
    start: usize,
    sizes: &mut [usize],
) {
    let offsets = &offsets[start..=start + sizes.len()];
    let lengths = offsets.windows(2).map(|w| (w[1] - w[0]).as_usize());
    match nulls {
        None => sizes
            .iter_mut()
            .zip(lengths)
            .for_each(|(s, len)| *s += 4 + len),
        Some(n) => {
            for (k, (s, len)) in sizes.iter_mut().zip(lengths).enumerate() {
                *s += 4 + if n.is_null(start + k) { 0 } else { len };
            }
        }
    }
}

/// Writes a NULL cell at `pos`; where the next cell goes.
fn put_null_at(buf: &mut [u8], pos: usize) -> usize {
    buf[pos..pos + 4].copy_from_slice(&(-1i32).to_be_bytes());
    pos + 4
}

/// Writes a cell of `value` at `pos`; where the next cell goes. Length and value go
/// in one move (for the widths cells inline: at most 8 bytes).
fn put_at<const N: usize>(buf: &mut [u8], pos: usize, value: [u8; N]) -> usize {
    let mut cell = [0u8; 12];
    cell[..4].copy_from_slice(&(N as i32).to_be_bytes());
    cell[4..4 + N].copy_from_slice(&value);
    buf[pos..pos + 4 + N].copy_from_slice(&cell[..4 + N]);
    pos + 4 + N
}

fn fixed_at<T: Copy, const N: usize>(
    values: &[T],
    bytes: impl Fn(T) -> [u8; N],
    nulls: Option<&NullBuffer>,
    start: usize,
    buf: &mut [u8],
    at: &mut [usize],
) {
    let values = &values[start..start + at.len()];
    match nulls {
        None => {
            for (pos, &v) in at.iter_mut().zip(values) {
                *pos = put_at(buf, *pos, bytes(v));
            }
        }
        Some(n) => {
            for (k, (pos, &v)) in at.iter_mut().zip(values).enumerate() {
                *pos = match n.is_null(start + k) {
                    true => put_null_at(buf, *pos),
                    false => put_at(buf, *pos, bytes(v)),
                };
            }
        }
    }
}

/// Strings of at most this many bytes are copied as this many (see
/// [`Cells::write_at`]): a fixed-size move, where a copy of the string's own length
/// was a call to `memcpy` per cell.
const SHORT: usize = 8;

fn strings_at<O: OffsetSizeTrait>(
    offsets: &[O],
    values: &[u8],
    nulls: Option<&NullBuffer>,
    start: usize,
    buf: &mut [u8],
    at: &mut [usize],
    ends: &[usize],
) {
    // Writes one non-NULL cell at `p`, where its row ends at `end`; where the next goes.
    let cell = |buf: &mut [u8], p: usize, end: usize, from: usize, to: usize| -> usize {
        let len = to - from;
        let prefix = i32::try_from(len).unwrap_or(i32::MAX).to_be_bytes();
        if len <= SHORT && p + 4 + SHORT <= end {
            if let Some(short) = values.get(from..from + SHORT) {
                // Length and value in one fixed-size move.
                let mut bytes = [0u8; 4 + SHORT];
                bytes[..4].copy_from_slice(&prefix);
                bytes[4..].copy_from_slice(short);
                buf[p..p + 4 + SHORT].copy_from_slice(&bytes);
                return p + 4 + len;
            }
        }
        buf[p..p + 4].copy_from_slice(&prefix);
        buf[p + 4..p + 4 + len].copy_from_slice(&values[from..to]);
        p + 4 + len
    };
    let offsets = &offsets[start..=start + at.len()];
    let rows = at.iter_mut().zip(ends).zip(offsets.windows(2));
    match nulls {
        None => {
            for ((pos, &end), w) in rows {
                *pos = cell(buf, *pos, end, w[0].as_usize(), w[1].as_usize());
            }
        }
        Some(n) => {
            for (k, ((pos, &end), w)) in rows.enumerate() {
                *pos = match n.is_null(start + k) {
                    true => put_null_at(buf, *pos),
                    false => cell(buf, *pos, end, w[0].as_usize(), w[1].as_usize()),
                };
            }
        }
    }
}

/// The reference, one value at a time: text (nothing for NULL).
fn text_slow(a: &dyn Array, i: usize, out: &mut BytesMut) {
    if let Some(t) = text::text(a, i) {
        out.put_slice(t.as_bytes());
    }
}

/// A primitive column's values through `f`.
fn primitive<'a, T: ArrowPrimitiveType>(
    a: &'a dyn Array,
    f: impl Fn(T::Native, &mut BytesMut) + 'a,
) -> Writer<'a> {
    let a: &PrimitiveArray<T> = a.as_primitive();
    Box::new(move |i, out| f(a.value(i), out))
}

/// An integer in decimal.
fn put_int(v: impl itoa::Integer, out: &mut BytesMut) {
    out.put_slice(itoa::Buffer::new().format(v).as_bytes());
}

fn text_writer<'a>(a: &'a dyn Array) -> Writer<'a> {
    match a.data_type() {
        DataType::Boolean => {
            let a = a.as_boolean();
            Box::new(move |i, out| out.put_u8(if a.value(i) { b't' } else { b'f' }))
        }
        DataType::Int8 => primitive::<Int8Type>(a, put_int),
        DataType::Int16 => primitive::<Int16Type>(a, put_int),
        DataType::Int32 => primitive::<Int32Type>(a, put_int),
        DataType::Int64 => primitive::<Int64Type>(a, put_int),
        DataType::UInt8 => primitive::<UInt8Type>(a, put_int),
        DataType::UInt16 => primitive::<UInt16Type>(a, put_int),
        DataType::UInt32 => primitive::<UInt32Type>(a, put_int),
        DataType::UInt64 => primitive::<UInt64Type>(a, put_int),
        DataType::Float64 => primitive::<Float64Type>(a, put_float8),
        DataType::Utf8 => {
            let a = a.as_string::<i32>();
            Box::new(move |i, out| out.put_slice(a.value(i).as_bytes()))
        }
        DataType::LargeUtf8 => {
            let a = a.as_string::<i64>();
            Box::new(move |i, out| out.put_slice(a.value(i).as_bytes()))
        }
        DataType::Utf8View => {
            let a = a.as_string_view();
            Box::new(move |i, out| out.put_slice(a.value(i).as_bytes()))
        }
        DataType::Date32 => {
            let a = a.as_primitive::<Date32Type>();
            let last = LastDay::default();
            Box::new(move |i, out| {
                if !last.put(i64::from(a.value(i)), out) {
                    text_slow(a, i, out);
                }
            })
        }
        DataType::Timestamp(unit, zone) => {
            let micros = timestamp_micros(a, *unit);
            let zone = match zone
                .as_deref()
                .map(ringscan_executor::zone::parse_time_zone)
            {
                Some(Ok(z)) => Some(z),
                // A zone Arrow took but no one can read: the reference prints it (as UTC).
                Some(Err(_)) => return Box::new(move |i, out| text_slow(a, i, out)),
                None => None,
            };
            // UTC's offset is 0 at every instant: not looked up for each.
            let utc = matches!(a.data_type(), DataType::Timestamp(_, Some(name)) if ringscan_executor::zone::is_utc(name));
            let last = LastDay::default();
            Box::new(move |i, out| {
                let us = micros(i);
                let offset = match &zone {
                    Some(_) if utc => Some(0),
                    Some(z) => Some(ringscan_executor::zone::offset_at(z, us)),
                    None => None,
                };
                let local = us.saturating_add(i64::from(offset.unwrap_or(0)) * 1_000_000);
                if !put_timestamp(local, &last, out) {
                    return text_slow(a, i, out);
                }
                match offset {
                    Some(0) => out.put_slice(b"+00"),
                    Some(o) => out.put_slice(ringscan_executor::zone::format_offset(o).as_bytes()),
                    None => {}
                }
            })
        }
        DataType::Dictionary(..) => dictionary(a, text_writer),
        _ => Box::new(move |i, out| text_slow(a, i, out)),
    }
}

/// A dictionary's values through the writer of its values: its keys are read once.
fn dictionary<'a>(a: &'a dyn Array, inner: fn(&'a dyn Array) -> Writer<'a>) -> Writer<'a> {
    let dict = a.as_any_dictionary();
    // No values: every row is NULL, and Arrow's normalized keys would panic.
    let keys = if dict.values().is_empty() {
        Vec::new()
    } else {
        dict.normalized_keys()
    };
    let values = inner(dict.values().as_ref());
    Box::new(move |i, out| values(keys[i], out))
}

/// Row `i`'s microseconds since the epoch, for a timestamp column of `unit` (as the
/// reference reads them: saturating, nanoseconds toward the past).
fn timestamp_micros(a: &dyn Array, unit: TimeUnit) -> Box<dyn Fn(usize) -> i64 + '_> {
    match unit {
        TimeUnit::Second => {
            let a = a.as_primitive::<TimestampSecondType>();
            Box::new(move |i| a.value(i).saturating_mul(1_000_000))
        }
        TimeUnit::Millisecond => {
            let a = a.as_primitive::<TimestampMillisecondType>();
            Box::new(move |i| a.value(i).saturating_mul(1000))
        }
        TimeUnit::Microsecond => {
            let a = a.as_primitive::<TimestampMicrosecondType>();
            Box::new(move |i| a.value(i))
        }
        TimeUnit::Nanosecond => {
            let a = a.as_primitive::<TimestampNanosecondType>();
            Box::new(move |i| a.value(i).div_euclid(1000))
        }
    }
}

/// `n` (< 10^width) in `width` digits, zero-padded.
fn put_digits(mut n: u32, width: usize, out: &mut BytesMut) {
    let mut digits = [b'0'; 4];
    for d in digits[..width].iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
    }
    out.put_slice(&digits[..width]);
}

/// `YYYY-MM-DD` of a day number; false (nothing written) outside years 0 to 9999,
/// which the reference writes.
fn put_date(days: i64, out: &mut BytesMut) -> bool {
    let (y, m, d) = ringscan_values::date::civil_from_days(days);
    let Ok(y @ 0..=9999) = u32::try_from(y) else {
        return false;
    };
    put_digits(y, 4, out);
    out.put_u8(b'-');
    put_digits(m, 2, out);
    out.put_u8(b'-');
    put_digits(d, 2, out);
    true
}

/// The text of the day a column's writer wrote last, so that a run of values on one
/// day (a time series, sorted) is written without working its date out again: that
/// was a third of writing a timestamp or a date as text.
#[derive(Default)]
struct LastDay(std::cell::Cell<Option<(i64, [u8; 10])>>);

impl LastDay {
    /// [`put_date`], through the day written last.
    fn put(&self, days: i64, out: &mut BytesMut) -> bool {
        if let Some((day, text)) = self.0.get() {
            if day == days {
                out.put_slice(&text);
                return true;
            }
        }
        let at = out.len();
        if !put_date(days, out) {
            return false;
        }
        // Years 0 to 9999: always ten bytes.
        if let Ok(text) = <[u8; 10]>::try_from(&out[at..]) {
            self.0.set(Some((days, text)));
        }
        true
    }
}

/// `YYYY-MM-DD HH:MM:SS[.ffffff]` of microseconds since the epoch (wall time); false
/// (nothing written) outside years 0 to 9999.
fn put_timestamp(us: i64, last: &LastDay, out: &mut BytesMut) -> bool {
    const DAY: i64 = 86_400_000_000;
    if !last.put(us.div_euclid(DAY), out) {
        return false;
    }
    let rem = us.rem_euclid(DAY);
    let (secs, frac) = ((rem / 1_000_000) as u32, (rem % 1_000_000) as u32);
    out.put_u8(b' ');
    put_digits(secs / 3600, 2, out);
    out.put_u8(b':');
    put_digits(secs / 60 % 60, 2, out);
    out.put_u8(b':');
    put_digits(secs % 60, 2, out);
    if frac != 0 {
        out.put_u8(b'.');
        put_digits(frac / 10_000, 2, out);
        put_digits(frac % 10_000, 4, out);
    }
    true
}

/// A double as [`text::float8`] writes it: Ryu's shortest digits where they are in
/// fixed notation in both (1e-4 up to 1e15, and zero), the reference elsewhere.
fn put_float8(v: f64, out: &mut BytesMut) {
    let a = v.abs();
    // Prices and amounts in cents: a value that two decimals write exactly (the
    // decimal read back is the same double) has no shorter form than those digits
    // (below 1e13 neighbouring doubles are much closer than 0.01 apart), which is what
    // Ryu finds too, at a tenth of the work.
    if (0.01..1e13).contains(&a) {
        // `(v * 100.0).round()` without libm's `round` (a call per value here): below
        // 1e15 the truncation is exact, and so is what it leaves.
        let scaled = v * 100.0;
        let whole = scaled as i64;
        let cents = match scaled - whole as f64 {
            f if f >= 0.5 => whole + 1,
            f if f <= -0.5 => whole - 1,
            _ => whole,
        };
        if cents as f64 / 100.0 == v {
            if cents < 0 {
                out.put_u8(b'-');
            }
            let (whole, frac) = (cents.unsigned_abs() / 100, cents.unsigned_abs() % 100);
            put_int(whole, out);
            if frac != 0 {
                let digits = [b'.', b'0' + (frac / 10) as u8, b'0' + (frac % 10) as u8];
                out.put_slice(if frac % 10 == 0 {
                    &digits[..2]
                } else {
                    &digits
                });
            }
            return;
        }
    }
    if v.is_finite() && (a == 0.0 || (1e-4..1e15).contains(&a)) {
        let mut buffer = ryu::Buffer::new();
        let s = buffer.format_finite(v);
        if !s.contains('e') {
            out.put_slice(s.strip_suffix(".0").unwrap_or(s).as_bytes());
            return;
        }
    }
    out.put_slice(text::float8(v).as_bytes());
}

fn binary_writer<'a>(a: &'a dyn Array) -> Writer<'a> {
    match a.data_type() {
        DataType::Boolean => {
            let a = a.as_boolean();
            Box::new(move |i, out| out.put_u8(u8::from(a.value(i))))
        }
        DataType::Int16 => primitive::<Int16Type>(a, |v, out| out.put_i16(v)),
        DataType::Int32 => primitive::<Int32Type>(a, |v, out| out.put_i32(v)),
        DataType::Int64 => primitive::<Int64Type>(a, |v, out| out.put_i64(v)),
        DataType::Float64 => primitive::<Float64Type>(a, |v, out| out.put_f64(v)),
        // A string's binary form is its text.
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => text_writer(a),
        DataType::Dictionary(..) => dictionary(a, binary_writer),
        // The reference, and text for a value it has no binary form for.
        _ => Box::new(move |i, out| {
            let at = out.len();
            if binary::write(a, i, out).is_none() {
                out.truncate(at);
                text_slow(a, i, out);
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{
        ArrayRef, BooleanArray, Date32Array, DictionaryArray, Float32Array, Float64Array,
        Int16Array, Int32Array, Int64Array, Int8Array, StringArray, StringViewArray,
        TimestampMicrosecondArray, TimestampMillisecondArray, TimestampNanosecondArray,
        TimestampSecondArray, UInt16Array, UInt32Array, UInt64Array, UInt8Array,
    };
    use proptest::prelude::*;

    use super::*;

    /// The reference: one value at a time through `text::text` or `binary::write`
    /// (text where binary has no form), NULL as -1.
    fn reference(a: &dyn Array, i: usize, binary: bool, out: &mut BytesMut) {
        if a.logical_nulls().is_some_and(|n| n.is_null(i)) {
            out.put_i32(-1);
            return;
        }
        let at = out.len();
        out.put_i32(0);
        if !(binary && binary::write(a, i, out).is_some()) {
            out.truncate(at + 4);
            text_slow(a, i, out);
        }
        let len = (out.len() - at - 4) as i32;
        out[at..at + 4].copy_from_slice(&len.to_be_bytes());
    }

    /// `Column` and `Cells` against the reference, value by value, and the data rows of
    /// a batch of `a` (and of a slice of it) against the reference's cells row by row.
    fn check(a: &ArrayRef) {
        for binary in [false, true] {
            let column = Column::new(a.as_ref(), binary);
            let cells = Cells::new(a.as_ref(), binary);
            for i in 0..a.len() {
                let (mut want, mut got, mut fast) =
                    (BytesMut::new(), BytesMut::new(), BytesMut::new());
                reference(a.as_ref(), i, binary, &mut want);
                column.put(i, &mut got);
                cells.put(i, &mut fast);
                let what = || {
                    format!(
                        "{} row {i} ({}): {:?}",
                        a.data_type(),
                        if binary { "binary" } else { "text" },
                        text::text(a.as_ref(), i)
                    )
                };
                assert_eq!(got, want, "{}", what());
                assert_eq!(fast, want, "{}", what());
            }
            let whole = a.len();
            for (start, len) in [(0, whole), (whole / 3, whole - whole / 3 - whole / 4)] {
                let sliced = a.slice(start, len);
                let batch = arrow_array::RecordBatch::try_from_iter([
                    ("a", Arc::clone(&sliced)),
                    ("b", Arc::clone(&sliced)),
                ])
                .unwrap();
                let rows = crate::rows::data_rows(&batch, &[binary, !binary]);
                assert_eq!(rows.len(), len);
                // The same rows in packs (written column by column where every cell's
                // size is known), as the client receives them.
                let packed: Vec<u8> = crate::rows::packed_rows(&batch, &[binary, !binary])
                    .iter()
                    .flat_map(|pack| pack.data.to_vec())
                    .collect();
                let mut framed = Vec::new();
                for (i, row) in rows.iter().enumerate() {
                    let mut want = BytesMut::new();
                    reference(sliced.as_ref(), i, binary, &mut want);
                    reference(sliced.as_ref(), i, !binary, &mut want);
                    assert_eq!(row.field_count, 2);
                    assert_eq!(row.data, want, "{} row {i} of a slice", a.data_type());
                    framed.push(b'D');
                    framed.extend_from_slice(&(want.len() as i32 + 6).to_be_bytes());
                    framed.extend_from_slice(&2i16.to_be_bytes());
                    framed.extend_from_slice(&want);
                }
                assert!(packed == framed, "{} packed rows of a slice", a.data_type());
            }
        }
    }

    /// Dates and timestamps in runs on one day (a time series), as the day written last
    /// is reused: the same text as the reference, across days, NULLs, values past year
    /// 9999 between runs (which the reference writes), and zones with and without
    /// offsets.
    #[test]
    fn runs_of_one_day_are_written_as_the_reference_writes_them() {
        const DAY: i64 = 86_400_000_000;
        let mut micros = Vec::new();
        for (day, n) in [(19_000i64, 5), (19_000, 3), (19_001, 4), (-1, 3), (0, 2)] {
            for k in 0..n {
                micros.push(Some(day * DAY + k * 3_600_000_000 + k * 7));
            }
            micros.push(None);
        }
        // Past year 9999, then back on the day before it.
        micros.push(Some(3_000_000 * DAY));
        micros.push(Some(19_001 * DAY + 5));
        micros.push(Some(-800_000 * DAY));
        micros.push(Some(19_001 * DAY + 6));
        let days: Vec<Option<i32>> = micros
            .iter()
            .map(|us| us.map(|us| us.div_euclid(DAY) as i32))
            .collect();
        check(&(Arc::new(Date32Array::from(days)) as ArrayRef));
        let naive = TimestampMicrosecondArray::from(micros);
        for zone in [
            None,
            Some("UTC"),
            Some("Etc/UTC"),
            Some("+00:00"),
            Some("Europe/Berlin"),
        ] {
            let a = match zone {
                Some(z) => naive.clone().with_timezone(z),
                None => naive.clone(),
            };
            check(&(Arc::new(a) as ArrayRef));
        }
    }

    /// The cents fast path of `put_float8` against the reference over many values of
    /// at most two decimals (and their neighbours, which it must leave to Ryu), from
    /// 0.01 to 1e13 and past both ends.
    #[test]
    fn doubles_in_cents_are_written_as_the_reference_writes_them() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut values = vec![
            0.01,
            0.1,
            0.015,
            0.005,
            1e13,
            1e13 - 0.01,
            9_999_999_999_999.99,
        ];
        for _ in 0..100_000 {
            let magnitude = 10f64.powi((next() % 17) as i32 - 2);
            let cents = (next() % 10_000) as f64 / 100.0;
            let v = (magnitude * cents * 100.0).round() / 100.0;
            values.push(v);
            values.push(-v);
            values.push(f64::from_bits(v.to_bits() + 1));
            values.push(v + 0.001);
        }
        for v in values {
            let mut got = BytesMut::new();
            put_float8(v, &mut got);
            assert_eq!(
                std::str::from_utf8(&got).unwrap(),
                text::float8(v),
                "{v:e} (bits {:#x})",
                v.to_bits()
            );
        }
    }

    /// Doubles where the fast path and the reference meet: whole numbers, cents,
    /// the thresholds of exponent notation, and any bit pattern.
    fn double() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<i32>().prop_map(f64::from),
            (any::<i32>(), 1..7u32).prop_map(|(v, p)| f64::from(v) / 10f64.powi(p as i32)),
            prop::sample::select(vec![
                1e-4,
                9.999_999_999_999_999e-5,
                1e15,
                999_999_999_999_999.9,
                0.0,
                -0.0,
                f64::MIN_POSITIVE,
                f64::MAX,
                f64::NAN,
                f64::INFINITY,
                f64::NEG_INFINITY,
            ]),
            any::<u64>().prop_map(f64::from_bits),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn columns_write_what_the_reference_writes_value_by_value(
            ints in prop::collection::vec(prop::option::weighted(0.9, any::<i64>()), 1..40),
            doubles in prop::collection::vec(prop::option::weighted(0.9, double()), 1..40),
            strings in prop::collection::vec(prop::option::weighted(0.9, "[a-zé\\\\\"]{0,8}"), 1..40),
            days in prop::collection::vec(prop::option::weighted(0.9, -800_000i32..3_000_000), 1..40),
            micros in prop::collection::vec(
                prop::option::weighted(0.9, -70_000_000_000_000_000i64..300_000_000_000_000_000), 1..40),
        ) {
            let columns: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from(ints.clone())),
                Arc::new(Int32Array::from_iter(ints.iter().map(|v| v.map(|v| v as i32)))),
                Arc::new(Int16Array::from_iter(ints.iter().map(|v| v.map(|v| v as i16)))),
                Arc::new(Int8Array::from_iter(ints.iter().map(|v| v.map(|v| v as i8)))),
                Arc::new(UInt8Array::from_iter(ints.iter().map(|v| v.map(|v| v as u8)))),
                Arc::new(UInt16Array::from_iter(ints.iter().map(|v| v.map(|v| v as u16)))),
                Arc::new(UInt32Array::from_iter(ints.iter().map(|v| v.map(|v| v as u32)))),
                Arc::new(UInt64Array::from_iter(ints.iter().map(|v| v.map(|v| v as u64)))),
                Arc::new(BooleanArray::from_iter(ints.iter().map(|v| v.map(|v| v % 2 == 0)))),
                Arc::new(Float64Array::from(doubles.clone())),
                Arc::new(Float32Array::from_iter(doubles.iter().map(|v| v.map(|v| v as f32)))),
                Arc::new(StringArray::from(strings.clone())),
                Arc::new(arrow_array::LargeStringArray::from(strings.clone())),
                Arc::new(StringViewArray::from_iter(strings.iter().cloned())),
                Arc::new(strings.iter().map(|s| s.as_deref()).collect::<DictionaryArray<arrow_array::types::Int32Type>>()),
                Arc::new(Date32Array::from(days.clone())),
                Arc::new(TimestampMicrosecondArray::from(micros.clone())),
                Arc::new(TimestampMicrosecondArray::from(micros.clone()).with_timezone("UTC")),
                Arc::new(TimestampMicrosecondArray::from(micros.clone()).with_timezone("Europe/Berlin")),
                Arc::new(TimestampMicrosecondArray::from(micros.clone()).with_timezone("+05:30")),
                Arc::new(TimestampSecondArray::from_iter(micros.iter().map(|v| v.map(|v| v / 1_000_000)))),
                Arc::new(TimestampMillisecondArray::from_iter(micros.iter().map(|v| v.map(|v| v / 1000)))),
                Arc::new(TimestampNanosecondArray::from_iter(micros.iter().map(|v| v.map(|v| v.saturating_mul(1000).saturating_add(999))))),
            ];
            for c in &columns {
                check(c);
            }
            // Strings beside other columns and each other, as a result's rows: the
            // same bytes in packs (short strings moved in fixed sizes that may reach
            // into the cells after theirs) as row by row.
            let n = ints.len().min(strings.len());
            let shifted = |k: usize| -> ArrayRef {
                Arc::new(StringArray::from_iter((0..n).map(|i| strings[(i + k) % strings.len()].clone())))
            };
            let batch = arrow_array::RecordBatch::try_from_iter([
                ("s0", shifted(0)),
                ("i", Arc::new(Int64Array::from(ints[..n].to_vec())) as ArrayRef),
                ("s1", shifted(1)),
                ("s2", shifted(2)),
                ("b", Arc::new(BooleanArray::from_iter(ints[..n].iter().map(|v| v.map(|v| v % 3 == 0)))) as ArrayRef),
                ("s3", shifted(3)),
            ])
            .unwrap();
            for binary in [true, false] {
                let formats = [binary; 6];
                let packed: Vec<u8> = crate::rows::packed_rows(&batch, &formats)
                    .iter()
                    .flat_map(|pack| pack.data.to_vec())
                    .collect();
                let mut framed = Vec::new();
                for row in crate::rows::data_rows(&batch, &formats) {
                    framed.push(b'D');
                    framed.extend_from_slice(&(row.data.len() as i32 + 6).to_be_bytes());
                    framed.extend_from_slice(&row.field_count.to_be_bytes());
                    framed.extend_from_slice(&row.data);
                }
                prop_assert!(packed == framed, "packed rows of strings beside other columns");
            }
            // Where the binary forms end: dates and instants past PostgreSQL's range
            // (written as the reference writes them, in text).
            let extremes: Vec<ArrayRef> = vec![
                Arc::new(Date32Array::from(vec![Some(i32::MIN), Some(i32::MAX), None, Some(0)])),
                Arc::new(TimestampMicrosecondArray::from(vec![Some(i64::MIN), Some(i64::MAX), None, Some(0)])),
            ];
            for c in &extremes {
                check(c);
            }
        }
    }
}
