//! Results as the wire carries them: a row description (names, type OIDs, formats)
//! and data rows in text or binary, column by column as the client asked.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::Schema;
use bytes::{BufMut, BytesMut};
use futures::stream;
use pgwire::api::portal::Format;
use pgwire::api::results::{FieldFormat, FieldInfo, QueryResponse};
use pgwire::api::Type;
use pgwire::error::PgWireResult;
use pgwire::messages::data::DataRow;

use crate::encode::Cells;
use crate::text::pg_type;

/// The column name PostgreSQL would give: DataFusion names an unnamed expression by
/// its text (`count(*)`, `Int64(1)`, `a + Int64(1)`), PostgreSQL by the function it
/// calls (`count`) or `?column?`.
pub(crate) fn column_name(name: &str) -> String {
    let plain = |s: &str| {
        !s.is_empty()
            && s.chars().all(|c| c.is_alphanumeric() || c == '_')
            && !s.starts_with(|c: char| c.is_ascii_digit())
    };
    // What DataFusion writes for an expression it names: a call or a literal
    // (parentheses) or an operator between operands. Anything else is a name the
    // query gave ("Access privileges").
    const OPERATORS: &[&str] = &[
        " + ", " - ", " * ", " / ", " % ", " = ", " != ", " <> ", " < ", " > ", " <= ", " >= ",
        " AND ", " OR ", " || ", " LIKE ", " IS ",
    ];
    if plain(name) || !(name.contains('(') || OPERATORS.iter().any(|o| name.contains(o))) {
        return name.to_owned();
    }
    if let Some((function, _)) = name.split_once('(') {
        // A literal is shown as its Arrow type: Int64(1), Utf8("a"), Float64(2.5).
        const LITERALS: &[&str] = &[
            "Int8",
            "Int16",
            "Int32",
            "Int64",
            "UInt8",
            "UInt16",
            "UInt32",
            "UInt64",
            "Float16",
            "Float32",
            "Float64",
            "Utf8",
            "LargeUtf8",
            "Utf8View",
            "Boolean",
            "Decimal128",
            "Decimal256",
            "Date32",
            "Binary",
            "IntervalMonthDayNano",
            "TimestampNanosecond",
            "TimestampMicrosecond",
            "CAST",
            "TRY_CAST",
        ];
        if plain(function) && name.ends_with(')') && !LITERALS.contains(&function) {
            // A call of one function over the whole expression: count(*), sum(t.x).
            let inner = &name[function.len()..];
            if balanced_once(inner) {
                return function.to_ascii_lowercase();
            }
        }
    }
    "?column?".into()
}

/// `(...)` whose first parenthesis closes at the end.
fn balanced_once(s: &str) -> bool {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1 == s.len();
                }
            }
            _ => {}
        }
    }
    false
}

/// The row description of `schema`, column `i` in `formats.format_for(i)`.
pub(crate) fn fields(schema: &Schema, formats: &Format) -> Vec<FieldInfo> {
    schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let format = format_for(formats, i);
            FieldInfo::new(
                column_name(f.name()),
                None,
                None,
                pg_type(f.data_type()),
                format,
            )
        })
        .collect()
}

/// Text columns named `names` (`SHOW`, `EXPLAIN`).
pub(crate) fn text_fields<S: AsRef<str>>(names: &[S], formats: &Format) -> Vec<FieldInfo> {
    names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            FieldInfo::new(
                n.as_ref().into(),
                None,
                None,
                Type::TEXT,
                format_for(formats, i),
            )
        })
        .collect()
}

/// A client may send one format code per column or fewer; a missing one is text.
pub(crate) fn format_for(formats: &Format, i: usize) -> FieldFormat {
    match formats {
        Format::Individual(codes) => codes
            .get(i)
            .map_or(FieldFormat::Text, |c| FieldFormat::from(*c)),
        other => other.format_for(i),
    }
}

/// The rows of `batches` under `fields` (one per column, in order), written a batch at
/// a time as the client's connection takes them.
pub(crate) fn response(fields: Vec<FieldInfo>, batches: Vec<RecordBatch>) -> QueryResponse {
    let binary: Vec<bool> = fields
        .iter()
        .map(|f| f.format() == FieldFormat::Binary)
        .collect();
    let rows = batches
        .into_iter()
        .flat_map(move |batch| data_rows(&batch, &binary))
        .map(Ok);
    QueryResponse::new(Arc::new(fields), stream::iter(rows))
}

/// Bytes the rows of a batch are written into before the buffer is renewed: each row
/// is split off it, sharing its allocation.
const ROW_BUFFER: usize = 64 << 10;

/// The data rows of `batch`, column `c` in binary where `binary[c]`.
pub(crate) fn data_rows(batch: &RecordBatch, binary: &[bool]) -> Vec<DataRow> {
    let columns: Vec<Cells<'_>> = batch
        .columns()
        .iter()
        .zip(binary)
        .map(|(c, &binary)| Cells::new(c.as_ref(), binary))
        .collect();
    let count = i16::try_from(columns.len()).unwrap_or(i16::MAX);
    let n = batch.num_rows();
    // The batch's rows in one allocation where their size is known (fixed widths and
    // strings), each row split off it.
    let known: usize = columns.iter().map(|c| c.bytes(0..n)).sum();
    let mut buf = BytesMut::with_capacity(known + ROW_BUFFER / 16);
    let mut rows = Vec::with_capacity(n);
    for i in 0..n {
        if buf.capacity() - buf.len() < ROW_BUFFER / 16 {
            buf.reserve(ROW_BUFFER);
        }
        for column in &columns {
            column.put(i, &mut buf);
        }
        rows.push(DataRow::new(buf.split(), count));
    }
    rows
}

/// Rows of text cells (`SHOW`, `EXPLAIN`): one per line of `lines`, each a row of its
/// cells.
pub(crate) fn text_response(fields: Vec<FieldInfo>, lines: &[Vec<String>]) -> QueryResponse {
    let rows: Vec<PgWireResult<DataRow>> = lines
        .iter()
        .map(|cells| {
            let mut data = BytesMut::new();
            for c in cells {
                // Text and binary text are the same bytes.
                put_len(&mut data, c.len());
                data.put_slice(c.as_bytes());
            }
            Ok(DataRow::new(data, cells.len() as i16))
        })
        .collect();
    QueryResponse::new(Arc::new(fields), stream::iter(rows))
}

fn put_len(out: &mut BytesMut, len: usize) {
    out.put_i32(i32::try_from(len).unwrap_or(i32::MAX));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unnamed_expressions_get_postgresql_names() {
        for (datafusion, pg) in [
            ("symbol", "symbol"),
            ("count(*)", "count"),
            ("sum(t.price)", "sum"),
            ("Int64(1)", "?column?"),
            ("Utf8(\"a\")", "?column?"),
            ("t.a + Int64(1)", "?column?"),
            ("max(a) + min(b)", "?column?"),
            ("version()", "version"),
            ("Access privileges", "Access privileges"),
            ("t.a", "t.a"),
        ] {
            assert_eq!(column_name(datafusion), pg, "{datafusion}");
        }
    }
}
