//! `COPY table [(columns)] FROM STDIN`, in PostgreSQL's text or CSV format: the rows the
//! client streams (CopyData messages, cut anywhere) parsed into the table's columns as
//! they arrive, then written in one statement when the client says CopyDone: all of
//! them or, on any bad line, none.
//!
//! Each field goes straight into its column as it is split off the line: text into the
//! column's string buffer, integers, floats and timestamps (without a time zone) parsed
//! there with the parsers Arrow's casts use, so no field is copied twice; a column of
//! any other type gathers its fields as text (no allocation per field) and is
//! converted a few thousand rows at a time with Arrow's casts. A value that does not
//! convert is named by its line and column.

use std::sync::Arc;

use arrow_array::builder::{PrimitiveBuilder, StringBuilder};
use arrow_array::types::{
    ArrowPrimitiveType, ArrowTimestampType, Float32Type, Float64Type, Int16Type, Int32Type,
    Int64Type, TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType,
};
use arrow_array::{Array, ArrayRef, BinaryArray, RecordBatch, RecordBatchOptions, StringArray};
use arrow_cast::parse::Parser;
use arrow_schema::{DataType, SchemaRef, TimeUnit};

use crate::copy::CopyOut as Format;

/// Rows gathered as text before they are converted into a batch.
const BATCH_ROWS: usize = 64 * 1024;

/// A COPY FROM STDIN in progress.
#[derive(Debug)]
pub(crate) struct CopyIn {
    pub(crate) table: String,
    format: Format,
    /// The table's columns (as stored).
    schema: SchemaRef,
    /// For each column of the input, the table column it fills.
    targets: Vec<usize>,
    /// Input not yet parsed (the part of a record a CopyData message cut).
    pending: Vec<u8>,
    /// Fields of the rows since the last batch, per input column.
    fields: Vec<Column>,
    /// Line numbers (1-based) of those rows.
    lines: Vec<u64>,
    line: u64,
    header_skipped: bool,
    /// The text format's end-of-data line (`\.`) was seen.
    ended: bool,
    batches: Vec<RecordBatch>,
    rows: u64,
}

/// Rows of a CSV or text file for a table's columns, parsed as `COPY ... FROM STDIN`
/// parses them (what `ringscan ingest` reads files with).
#[derive(Debug)]
pub struct FileRows(CopyIn);

impl FileRows {
    /// CSV (`csv`: quotes, an empty field is NULL) or PostgreSQL's text format (tab
    /// separated, `\N` is NULL) with `delimiter`, its first line a header when `header`,
    /// for `table` of columns `schema`.
    pub fn new(
        table: &str,
        schema: SchemaRef,
        csv: bool,
        header: bool,
        delimiter: char,
    ) -> Result<Self, String> {
        let format = Format {
            query: String::new(),
            into: None,
            csv,
            header,
            delimiter,
            null: if csv { String::new() } else { "\\N".into() },
            quote: '"',
            escape: '"',
            binary: false,
        };
        CopyIn::new(table.to_owned(), format, schema, &[])
            .map(Self)
            .map_err(|(_, m)| m)
    }

    /// The file's next bytes (cut anywhere).
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.0.data(bytes).map_err(|(_, m)| m)
    }

    /// The rows converted so far, taken (the rest follow from [`Self::finish`]).
    pub fn take_batches(&mut self) -> Vec<RecordBatch> {
        self.0.take_batches()
    }

    /// The rows, after the last bytes.
    pub fn finish(self) -> Result<(Vec<RecordBatch>, u64), String> {
        self.0
            .finish()
            .map(|(_, batches, rows)| (batches, rows))
            .map_err(|(_, m)| m)
    }
}

/// Why a COPY failed: SQLSTATE and message.
pub(crate) type Failure = (&'static str, String);

impl CopyIn {
    /// A COPY into `table` (whose stored columns are `schema`) of the input columns
    /// `columns` (all, in order, when empty).
    pub(crate) fn new(
        table: String,
        format: Format,
        schema: SchemaRef,
        columns: &[String],
    ) -> Result<Self, Failure> {
        if format.binary {
            return Err((
                "0A000",
                "COPY FROM STDIN in binary format is not supported: use FORMAT text or csv".into(),
            ));
        }
        let targets = if columns.is_empty() {
            (0..schema.fields().len()).collect()
        } else {
            columns
                .iter()
                .map(|c| {
                    schema.index_of(c).map_err(|_| {
                        (
                            "42703",
                            format!("column \"{c}\" of relation \"{table}\" does not exist"),
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()?
        };
        let fields = targets
            .iter()
            .map(|&t| Column::new(schema.field(t).data_type()))
            .collect();
        Ok(Self {
            table,
            format,
            schema,
            targets,
            pending: Vec::new(),
            fields,
            lines: Vec::new(),
            line: 0,
            header_skipped: false,
            ended: false,
            batches: Vec::new(),
            rows: 0,
        })
    }

    /// Input columns (what the CopyInResponse announces).
    pub(crate) fn columns(&self) -> usize {
        self.targets.len()
    }

    /// One CopyData message's bytes.
    pub(crate) fn data(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        if self.pending.is_empty() {
            let used = self.records(bytes, false)?;
            self.pending.extend_from_slice(&bytes[used..]);
        } else {
            self.pending.extend_from_slice(bytes);
            let pending = std::mem::take(&mut self.pending);
            let used = self.records(&pending, false)?;
            self.pending = pending[used..].to_vec();
        }
        Ok(())
    }

    /// The rows converted so far, taken (the rest follow from [`Self::finish`]).
    pub(crate) fn take_batches(&mut self) -> Vec<RecordBatch> {
        std::mem::take(&mut self.batches)
    }

    /// CopyDone: the last record (without its newline), then the batches to write.
    pub(crate) fn finish(mut self) -> Result<(String, Vec<RecordBatch>, u64), Failure> {
        let pending = std::mem::take(&mut self.pending);
        if !pending.is_empty() {
            let used = self.records(&pending, true)?;
            if used < pending.len() {
                return Err(self.bad(self.line + 1, "unterminated CSV quoted field".into()));
            }
        }
        self.convert()?;
        Ok((self.table, self.batches, self.rows))
    }

    fn bad(&self, line: u64, what: String) -> Failure {
        ("22P04", format!("COPY {}, line {line}: {what}", self.table))
    }

    /// Parses the complete records of `input` (with `last`: the final record too, which
    /// has no newline), returning the bytes used.
    fn records(&mut self, input: &[u8], last: bool) -> Result<usize, Failure> {
        let mut at = 0;
        while at < input.len() && !self.ended {
            let Some((end, next)) = self.record_end(&input[at..], last) else {
                break;
            };
            let record = &input[at..at + end];
            at += next;
            self.line += 1;
            let record = record.strip_suffix(b"\r").unwrap_or(record);
            if self.format.header && !self.header_skipped {
                self.header_skipped = true;
                continue;
            }
            if !self.format.csv && record == b"\\." {
                self.ended = true;
                break;
            }
            self.record(record)?;
            if self.lines.len() >= BATCH_ROWS {
                self.convert()?;
            }
        }
        if self.ended {
            // Whatever follows the end marker is ignored, as PostgreSQL does.
            return Ok(input.len());
        }
        Ok(at)
    }

    /// Where the record starting `input` ends (its length, and the bytes to skip to
    /// the next): at a newline outside CSV quotes; at the end with `last`.
    fn record_end(&self, input: &[u8], last: bool) -> Option<(usize, usize)> {
        if !self.format.csv {
            return match memchr(b'\n', input) {
                Some(i) => Some((i, i + 1)),
                None if last => Some((input.len(), input.len())),
                None => None,
            };
        }
        let quote = self.format.quote as u8;
        let mut quoted = false;
        for (i, &b) in input.iter().enumerate() {
            if b == quote {
                quoted = !quoted;
            } else if b == b'\n' && !quoted {
                return Some((i, i + 1));
            }
        }
        (last && !quoted).then_some((input.len(), input.len()))
    }

    fn record(&mut self, record: &[u8]) -> Result<(), Failure> {
        let line = self.line;
        let text = std::str::from_utf8(record)
            .map_err(|_| self.bad(line, "invalid byte sequence for encoding \"UTF8\"".into()))?;
        // Fields go into their columns as they are split off; a line that fails leaves
        // its first fields behind, which is harmless: the whole COPY fails with it.
        let mut count = 0;
        if self.format.csv {
            let mut fields = Vec::with_capacity(self.targets.len());
            self.csv_fields(text, &mut fields)
                .map_err(|what| self.bad(line, what))?;
            for field in fields {
                self.field(line, count, field.as_deref())?;
                count += 1;
            }
        } else {
            let (delimiter, columns) = (self.format.delimiter, self.targets.len());
            if delimiter.is_ascii() {
                // One pass over the bytes finds the delimiters and the backslashes (a
                // field cut at an ASCII byte is whole UTF-8).
                let (bytes, delimiter) = (text.as_bytes(), delimiter as u8);
                let (mut start, mut escaped) = (0, false);
                for at in 0..=bytes.len() {
                    match bytes.get(at) {
                        Some(b'\\') => escaped = true,
                        Some(&b) if b != delimiter => {}
                        _ => {
                            if count == columns {
                                return Err(
                                    self.bad(line, "extra data after last expected column".into())
                                );
                            }
                            self.text_field(line, count, &text[start..at], escaped)?;
                            count += 1;
                            (start, escaped) = (at + 1, false);
                        }
                    }
                }
            } else {
                for raw in text.split(delimiter) {
                    if count == columns {
                        return Err(self.bad(line, "extra data after last expected column".into()));
                    }
                    self.text_field(line, count, raw, raw.contains('\\'))?;
                    count += 1;
                }
            }
        }
        if count > self.targets.len() {
            return Err(self.bad(line, "extra data after last expected column".into()));
        }
        if count < self.targets.len() {
            let column = self.schema.field(self.targets[count]).name();
            return Err(self.bad(line, format!("missing data for column \"{column}\"")));
        }
        self.lines.push(line);
        Ok(())
    }

    /// Field `index` of a text-format line, as written (`escaped`: it holds a
    /// backslash), into its column.
    fn text_field(
        &mut self,
        line: u64,
        index: usize,
        raw: &str,
        escaped: bool,
    ) -> Result<(), Failure> {
        if raw == self.format.null {
            self.field(line, index, None)
        } else if escaped {
            let value = unescape(raw).map_err(|what| self.bad(line, what))?;
            self.field(line, index, Some(&value))
        } else {
            self.field(line, index, Some(raw))
        }
    }

    /// Field `index` of line `line` (`None`: NULL) into its column.
    fn field(&mut self, line: u64, index: usize, value: Option<&str>) -> Result<(), Failure> {
        if self.fields[index].push(value) {
            return Ok(());
        }
        let field = self.schema.field(self.targets[index]);
        Err(self.bad(
            line,
            format!(
                "column \"{}\": invalid input syntax for type {}: \"{}\"",
                field.name(),
                crate::text::pg_type(field.data_type()).name(),
                value.unwrap_or_default()
            ),
        ))
    }

    /// The fields of a CSV record: quoted fields may hold the delimiter, newlines and
    /// doubled quotes (or escaped ones); an unquoted field equal to NULL is NULL.
    fn csv_fields<'a>(
        &self,
        text: &'a str,
        out: &mut Vec<Option<std::borrow::Cow<'a, str>>>,
    ) -> Result<(), String> {
        let (delimiter, quote, escape) =
            (self.format.delimiter, self.format.quote, self.format.escape);
        let mut chars = text.char_indices().peekable();
        let mut start = 0;
        loop {
            if chars.peek().is_some_and(|&(_, c)| c == quote) {
                chars.next();
                let mut value = String::new();
                loop {
                    match chars.next() {
                        None => return Err("unterminated CSV quoted field".into()),
                        Some((_, c))
                            if c == escape
                                && chars.peek().is_some_and(|&(_, n)| {
                                    n == quote || (n == escape && escape != quote)
                                }) =>
                        {
                            if let Some((_, n)) = chars.next() {
                                value.push(n);
                            }
                        }
                        Some((_, c)) if c == quote => break,
                        Some((_, c)) => value.push(c),
                    }
                }
                out.push(Some(value.into()));
                match chars.next() {
                    None => return Ok(()),
                    Some((i, c)) if c == delimiter => start = i + c.len_utf8(),
                    Some(_) => return Err("extra data after a quoted field".into()),
                }
            } else {
                let end = loop {
                    match chars.peek() {
                        None => break text.len(),
                        Some(&(i, c)) if c == delimiter => break i,
                        Some(_) => {
                            chars.next();
                        }
                    }
                };
                let value = &text[start..end];
                out.push((value != self.format.null).then_some(value.into()));
                match chars.next() {
                    None => return Ok(()),
                    Some((i, c)) => start = i + c.len_utf8(),
                }
            }
        }
    }

    /// The rows gathered so far as one batch of the table's columns.
    fn convert(&mut self) -> Result<(), Failure> {
        let rows = self.lines.len();
        if rows == 0 {
            return Ok(());
        }
        let mut columns: Vec<Option<ArrayRef>> = vec![None; self.schema.fields().len()];
        let mut texts = Vec::new();
        for (i, column) in self.fields.iter_mut().enumerate() {
            match column.finish() {
                Ok(array) => columns[self.targets[i]] = Some(array),
                Err(text) => texts.push((i, text)),
            }
        }
        for (i, text) in &texts {
            let target = self.targets[*i];
            let field = self.schema.field(target);
            let array = typed(text, field.data_type()).map_err(|(row, why)| {
                let value = text.value(row);
                self.bad(
                    self.lines[row],
                    format!(
                        "column \"{}\": invalid input syntax for type {}: \"{value}\"{why}",
                        field.name(),
                        crate::text::pg_type(field.data_type()).name()
                    ),
                )
            })?;
            columns[target] = Some(array);
        }
        let columns = columns
            .into_iter()
            .zip(self.schema.fields())
            .map(|(c, f)| c.unwrap_or_else(|| arrow_array::new_null_array(f.data_type(), rows)))
            .collect();
        // Nullability is the daemon's to check (it names the column); the batch is
        // built loose.
        let loose = Arc::new(arrow_schema::Schema::new(
            self.schema
                .fields()
                .iter()
                .map(|f| f.as_ref().clone().with_nullable(true))
                .collect::<Vec<_>>(),
        ));
        let batch = RecordBatch::try_new_with_options(
            loose,
            columns,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )
        .map_err(|e| ("XX000", format!("COPY {}: {e}", self.table)))?;
        self.rows += rows as u64;
        self.batches.push(batch);
        self.lines.clear();
        Ok(())
    }
}

/// One input column's values since the last batch: parsed as they come where the
/// column's type has a parser here, else gathered as text for Arrow's cast.
#[derive(Debug)]
enum Column {
    Text(StringBuilder),
    Int16(PrimitiveBuilder<Int16Type>),
    Int32(PrimitiveBuilder<Int32Type>),
    Int64(PrimitiveBuilder<Int64Type>),
    Float32(PrimitiveBuilder<Float32Type>),
    Float64(PrimitiveBuilder<Float64Type>),
    /// A timestamp without a time zone, in microseconds, milliseconds, seconds or
    /// nanoseconds (the builder holds the unit's type).
    TimestampUs(PrimitiveBuilder<TimestampMicrosecondType>),
    TimestampMs(PrimitiveBuilder<TimestampMillisecondType>),
    TimestampS(PrimitiveBuilder<TimestampSecondType>),
    TimestampNs(PrimitiveBuilder<TimestampNanosecondType>),
    /// Any other type: the text, cast when the batch is made.
    Cast(StringBuilder),
}

impl Column {
    fn new(data_type: &DataType) -> Self {
        // A batch's worth (room never written costs no page).
        fn sized<T: ArrowPrimitiveType>() -> PrimitiveBuilder<T> {
            PrimitiveBuilder::with_capacity(BATCH_ROWS)
        }
        match data_type {
            DataType::Utf8 => Self::Text(StringBuilder::new()),
            DataType::Int16 => Self::Int16(sized()),
            DataType::Int32 => Self::Int32(sized()),
            DataType::Int64 => Self::Int64(sized()),
            DataType::Float32 => Self::Float32(sized()),
            DataType::Float64 => Self::Float64(sized()),
            DataType::Timestamp(unit, None) => match unit {
                TimeUnit::Microsecond => Self::TimestampUs(sized()),
                TimeUnit::Millisecond => Self::TimestampMs(sized()),
                TimeUnit::Second => Self::TimestampS(sized()),
                TimeUnit::Nanosecond => Self::TimestampNs(sized()),
            },
            _ => Self::Cast(StringBuilder::new()),
        }
    }

    /// Appends `value` (`None`: NULL); false when it is not a value of the type.
    fn push(&mut self, value: Option<&str>) -> bool {
        fn number<T: Parser>(b: &mut PrimitiveBuilder<T>, value: Option<&str>) -> bool {
            match value {
                None => b.append_null(),
                Some(v) => match T::parse(v) {
                    Some(n) => b.append_value(n),
                    None => return false,
                },
            }
            true
        }
        match self {
            Self::Text(b) | Self::Cast(b) => {
                b.append_option(value);
                true
            }
            Self::Int16(b) => number(b, value),
            Self::Int32(b) => number(b, value),
            Self::Int64(b) => number(b, value),
            Self::Float32(b) => number(b, value),
            Self::Float64(b) => number(b, value),
            Self::TimestampUs(b) => match value.and_then(|v| plain_timestamp_us(v.as_bytes())) {
                Some(micros) => {
                    b.append_value(micros);
                    true
                }
                None => timestamp(b, value),
            },
            Self::TimestampMs(b) => timestamp(b, value),
            Self::TimestampS(b) => timestamp(b, value),
            Self::TimestampNs(b) => timestamp(b, value),
        }
    }

    /// The column's values so far, or (for [`Self::Cast`]) their text to cast.
    ///
    /// The builder starts over sized for a whole batch (the text's bytes as many as
    /// this batch's): a builder grown by doubling copies itself and touches twice the
    /// fresh memory, which costs more than the parsing on this kind of machine.
    fn finish(&mut self) -> Result<ArrayRef, StringArray> {
        fn done<T: ArrowPrimitiveType>(
            b: &mut PrimitiveBuilder<T>,
        ) -> Result<ArrayRef, StringArray> {
            let array = b.finish();
            *b = PrimitiveBuilder::with_capacity(BATCH_ROWS)
                .with_data_type(array.data_type().clone());
            Ok(Arc::new(array))
        }
        fn text(b: &mut StringBuilder) -> StringArray {
            let array = b.finish();
            let bytes = array.value_data().len();
            *b = StringBuilder::with_capacity(BATCH_ROWS, bytes + bytes / 8);
            array
        }
        match self {
            Self::Text(b) => Ok(Arc::new(text(b))),
            Self::Int16(b) => done(b),
            Self::Int32(b) => done(b),
            Self::Int64(b) => done(b),
            Self::Float32(b) => done(b),
            Self::Float64(b) => done(b),
            Self::TimestampUs(b) => done(b),
            Self::TimestampMs(b) => done(b),
            Self::TimestampS(b) => done(b),
            Self::TimestampNs(b) => done(b),
            Self::Cast(b) => Err(text(b)),
        }
    }
}

/// A timestamp without a time zone as Arrow's cast from text reads it (the text's own
/// offset, if it has one, applied).
fn timestamp<T: ArrowTimestampType>(b: &mut PrimitiveBuilder<T>, value: Option<&str>) -> bool {
    let Some(v) = value else {
        b.append_null();
        return true;
    };
    let parsed = arrow_cast::parse::string_to_datetime(&chrono::Utc, v)
        .ok()
        .and_then(|t| T::from_naive_datetime(t.naive_utc(), None));
    match parsed {
        Some(n) => {
            b.append_value(n);
            true
        }
        None => false,
    }
}

/// `YYYY-MM-DD HH:MM:SS[.fraction]` (or with a `T`; no offset) in microseconds since
/// the epoch, as Arrow's parser reads it (the fraction cut to microseconds); `None` for
/// any other text, which Arrow's parser then reads. The common shape of a timestamp
/// column parsed without the general parser, which was a fifth of a COPY's host time.
fn plain_timestamp_us(s: &[u8]) -> Option<i64> {
    if s.len() < 19
        || s[4] != b'-'
        || s[7] != b'-'
        || (s[10] != b' ' && s[10] != b'T')
        || s[13] != b':'
        || s[16] != b':'
    {
        return None;
    }
    let digits = |from: usize, to: usize| -> Option<u32> {
        s[from..to].iter().try_fold(0u32, |v, &c| {
            c.is_ascii_digit().then(|| v * 10 + u32::from(c - b'0'))
        })
    };
    let (year, month, day) = (digits(0, 4)?, digits(5, 7)?, digits(8, 10)?);
    let (hour, minute, second) = (digits(11, 13)?, digits(14, 16)?, digits(17, 19)?);
    let days = ringscan_values::date::days_from_civil(i64::from(year), month, day)?;
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut micros = 0u32;
    if s.len() > 19 {
        let fraction = &s[20..];
        if s[19] != b'.' || fraction.is_empty() || fraction.len() > 9 {
            return None;
        }
        for (i, &c) in fraction.iter().enumerate() {
            if !c.is_ascii_digit() {
                return None;
            }
            if i < 6 {
                micros = micros * 10 + u32::from(c - b'0');
            }
        }
        for _ in fraction.len()..6 {
            micros *= 10;
        }
    }
    let seconds = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second);
    Some(seconds * 1_000_000 + i64::from(micros))
}

/// `text` converted to `data_type`; on failure, the first row that does not convert.
fn typed(text: &StringArray, data_type: &DataType) -> Result<ArrayRef, (usize, String)> {
    if *data_type == DataType::Utf8 {
        return Ok(Arc::new(text.clone()));
    }
    if *data_type == DataType::Binary {
        return bytea(text);
    }
    let options = arrow_cast::CastOptions {
        safe: true,
        ..Default::default()
    };
    let array = arrow_cast::cast_with_options(text, data_type, &options)
        .map_err(|e| (0, format!(" ({e})")))?;
    if array.null_count() != text.null_count() {
        let row = (0..text.len())
            .find(|&i| array.is_null(i) && !text.is_null(i))
            .unwrap_or(0);
        return Err((row, String::new()));
    }
    Ok(array)
}

/// PostgreSQL's bytea input: `\x` and hex digits, or the bytes as written.
fn bytea(text: &StringArray) -> Result<ArrayRef, (usize, String)> {
    let mut values: Vec<Option<Vec<u8>>> = Vec::with_capacity(text.len());
    for (row, value) in text.iter().enumerate() {
        values.push(match value {
            None => None,
            Some(v) => match v.strip_prefix("\\x") {
                Some(hex) => Some(unhex(hex).ok_or((row, " (odd or non-hex digits)".into()))?),
                None => Some(v.as_bytes().to_vec()),
            },
        });
    }
    Ok(Arc::new(BinaryArray::from_iter(values)))
}

fn unhex(hex: &str) -> Option<Vec<u8>> {
    let bytes = hex.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    bytes
        .chunks(2)
        .map(|p| {
            let d = |c: u8| (c as char).to_digit(16);
            Some((d(p[0])? * 16 + d(p[1])?) as u8)
        })
        .collect()
}

fn unescape(raw: &str) -> Result<String, String> {
    let mut bytes = Vec::with_capacity(raw.len());
    let mut it = raw.bytes().peekable();
    while let Some(b) = it.next() {
        if b != b'\\' {
            bytes.push(b);
            continue;
        }
        let Some(c) = it.next() else {
            return Err("end-of-copy marker corrupt (a lone backslash ends the line)".into());
        };
        match c {
            b'b' => bytes.push(8),
            b'f' => bytes.push(12),
            b'n' => bytes.push(b'\n'),
            b'r' => bytes.push(b'\r'),
            b't' => bytes.push(b'\t'),
            b'v' => bytes.push(11),
            b'0'..=b'7' => {
                let mut value = u32::from(c - b'0');
                for _ in 0..2 {
                    match it.peek() {
                        Some(&d @ b'0'..=b'7') => {
                            value = value * 8 + u32::from(d - b'0');
                            it.next();
                        }
                        _ => break,
                    }
                }
                bytes.push((value & 0xff) as u8);
            }
            b'x' => {
                let mut value = 0u32;
                let mut digits = 0;
                while digits < 2 {
                    match it.peek().and_then(|&d| (d as char).to_digit(16)) {
                        Some(d) => {
                            value = value * 16 + d;
                            it.next();
                            digits += 1;
                        }
                        None => break,
                    }
                }
                if digits == 0 {
                    bytes.push(b'x');
                } else {
                    bytes.push(value as u8);
                }
            }
            other => bytes.push(other),
        }
    }
    String::from_utf8(bytes).map_err(|_| "invalid byte sequence for encoding \"UTF8\"".into())
}

fn memchr(needle: u8, haystack: &[u8]) -> Option<usize> {
    haystack.iter().position(|&b| b == needle)
}

#[cfg(test)]
mod tests {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, Int64Type};
    use arrow_schema::{Field, Schema};

    use super::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("px", DataType::Float64, true),
        ]))
    }

    fn format(sql: &str) -> Format {
        crate::copy::parse(sql).unwrap()
    }

    fn run(sql: &str, chunks: &[&[u8]]) -> Result<Vec<RecordBatch>, Failure> {
        let mut copy = CopyIn::new("t".into(), format(sql), schema(), &[])?;
        for c in chunks {
            copy.data(c)?;
        }
        copy.finish().map(|(_, b, _)| b)
    }

    fn ids(batches: &[RecordBatch]) -> Vec<i64> {
        batches
            .iter()
            .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
            .collect()
    }

    #[test]
    fn text_format_cut_anywhere_gives_the_same_rows() {
        let input = b"1\tal\\tpha\t1.5\n2\t\\N\t\\N\n3\tx\\\\y\\012z\t-2e3\n\\.\nignored\n";
        let whole = run("COPY t FROM STDIN", &[input]).unwrap();
        for cut in 1..input.len() {
            let (a, b) = input.split_at(cut);
            let parts = run("COPY t FROM STDIN", &[a, b]).unwrap();
            assert_eq!(parts, whole, "cut at {cut}");
        }
        assert_eq!(ids(&whole), [1, 2, 3]);
        let names = whole[0].column(1).as_string::<i32>();
        assert_eq!(names.value(0), "al\tpha");
        assert!(names.is_null(1));
        assert_eq!(names.value(2), "x\\y\nz");
        assert_eq!(
            whole[0].column(2).as_primitive::<Float64Type>().value(2),
            -2000.0
        );
    }

    #[test]
    fn csv_quotes_hold_delimiters_newlines_and_quotes() {
        let input = b"id,name,px\r\n1,\"a,b\",1\n2,\"say \"\"hi\"\"\nthere\",\n3,,2.5";
        let sql = "COPY t FROM STDIN WITH (FORMAT csv, HEADER true)";
        let whole = run(sql, &[input]).unwrap();
        for cut in 1..input.len() {
            let (a, b) = input.split_at(cut);
            assert_eq!(run(sql, &[a, b]).unwrap(), whole, "cut at {cut}");
        }
        assert_eq!(ids(&whole), [1, 2, 3]);
        let names = whole[0].column(1).as_string::<i32>();
        assert_eq!(names.value(0), "a,b");
        assert_eq!(names.value(1), "say \"hi\"\nthere");
        assert!(names.is_null(2), "an unquoted empty field is NULL in CSV");
        assert!(whole[0].column(2).is_null(1));
    }

    #[test]
    fn plain_timestamps_read_as_arrows_parser_reads_them() {
        let mut cases: Vec<String> = [
            "2024-01-02 09:30:00.123456",
            "2024-02-29T23:59:59",
            "2023-02-29 00:00:00",
            "1969-12-31 23:59:59.9999999",
            "0001-01-01 00:00:00.5",
            "1900-03-01 12:00:00.000001",
            "2000-02-29 24:00:00",
            "2024-13-01 00:00:00",
            "2024-01-02 09:30:60",
            "2024-01-02 09:30:00.",
            "2024-01-02 09:30:00.1234567890",
            "2024-01-02 09:30:00Z",
            "2024-01-02 09:30:00+02:00",
            "2024-01-02",
            "2024-1-02 09:30:00",
            " 2024-01-02 09:30:00",
        ]
        .map(String::from)
        .to_vec();
        // A day in each month of 1600-2400 (leap rules of 100 and 400 years), times
        // and fractions of every length.
        for i in 0..9_600u32 {
            let (year, month, day) = (1600 + i / 12, i % 12 + 1, (i * 7) % 31 + 1);
            let fraction = &"123456789"[..(i % 10) as usize];
            let dot = if fraction.is_empty() { "" } else { "." };
            cases.push(format!(
                "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}{dot}{fraction}",
                i % 24,
                i % 60,
                (i * 13) % 60
            ));
        }
        let mut fast = 0;
        for case in &cases {
            let arrow = arrow_cast::parse::string_to_datetime(&chrono::Utc, case)
                .ok()
                .and_then(|t| TimestampMicrosecondType::from_naive_datetime(t.naive_utc(), None));
            if let Some(micros) = plain_timestamp_us(case.as_bytes()) {
                assert_eq!(Some(micros), arrow, "{case}");
                fast += 1;
            }
        }
        assert!(fast > 9_000, "the fast path read {fast} of {}", cases.len());
    }

    #[test]
    fn bad_lines_are_named() {
        for (sql, input, needle) in [
            (
                "COPY t FROM STDIN",
                &b"1\ta\t1\n2\tb\n"[..],
                "line 2: missing data for column \"px\"",
            ),
            ("COPY t FROM STDIN", b"1\ta\t1\t9\n", "line 1: extra data"),
            (
                "COPY t FROM STDIN",
                b"1\ta\t1\nx\tb\t2\n",
                "line 2: column \"id\": invalid input syntax",
            ),
            (
                "COPY t FROM STDIN (FORMAT csv)",
                b"1,\"open,1\n",
                "unterminated CSV quoted field",
            ),
            (
                "COPY t FROM STDIN",
                b"1\t\xff\t1\n",
                "line 1: invalid byte sequence",
            ),
        ] {
            let err = run(sql, &[input]).unwrap_err();
            assert!(err.1.contains(needle), "{sql} {input:?}: {err:?}");
            assert_eq!(err.0, "22P04");
        }
        let err = CopyIn::new(
            "t".into(),
            format("COPY t (nope) FROM STDIN"),
            schema(),
            &["nope".into()],
        )
        .unwrap_err();
        assert_eq!(err.0, "42703");
    }

    #[test]
    fn named_columns_leave_the_others_null_and_bytea_reads_hex() {
        let mut copy = CopyIn::new(
            "t".into(),
            format("COPY t (px, id) FROM STDIN"),
            schema(),
            &["px".into(), "id".into()],
        )
        .unwrap();
        copy.data(b"0.5\t7\n").unwrap();
        let (_, batches, rows) = copy.finish().unwrap();
        assert_eq!(rows, 1);
        assert_eq!(ids(&batches), [7]);
        assert!(batches[0].column(1).is_null(0));
        let text = StringArray::from(vec![Some("\\x00ff"), Some("raw"), None]);
        let b = bytea(&text).unwrap();
        let b = b.as_binary::<i32>();
        assert_eq!(b.value(0), [0, 255]);
        assert_eq!(b.value(1), b"raw");
        assert!(b.is_null(2));
        assert!(bytea(&StringArray::from(vec!["\\x0"])).is_err());
    }
}
