//! Results as the wire carries them: a row description (names, type OIDs, formats)
//! and data rows in text or binary, column by column as the client asked.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::Schema;
use bytes::{BufMut, BytesMut};
use futures::{stream, StreamExt};
use pgwire::api::portal::Format;
use pgwire::api::results::{FieldFormat, FieldInfo, QueryResponse};
use pgwire::api::Type;
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::data::DataRow;

use ringscan_executor::engine::Handed;

use crate::encode::Cells;
use crate::packed::{pack_count, PACK_ROWS};
use crate::text::pg_type;

/// The column name PostgreSQL would give: DataFusion names an unnamed expression by
/// its text (`count(*)`, `Int64(1)`, `a + Int64(1)`), PostgreSQL by the function it
/// calls (`count`) or `?column?`.
pub(crate) fn column_name(name: &str) -> String {
    // The common case, an ASCII identifier, in one pass over the bytes (a row
    // description names every column of every answer).
    if name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && name.bytes().next().is_some_and(|b| !b.is_ascii_digit())
    {
        return name.to_owned();
    }
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
    fields_of(&columns(schema), formats)
}

/// The columns of `schema` as a row description names and types them: what a prepared
/// statement keeps, as libpq describes its portal at every execution.
pub(crate) fn columns(schema: &Schema) -> Vec<(String, Type)> {
    schema
        .fields()
        .iter()
        .map(|f| (column_name(f.name()), pg_type(f.data_type())))
        .collect()
}

/// The row description of `columns` ([`columns`]), column `i` in
/// `formats.format_for(i)`.
pub(crate) fn fields_of(columns: &[(String, Type)], formats: &Format) -> Vec<FieldInfo> {
    columns
        .iter()
        .enumerate()
        .map(|(i, (name, ty))| {
            FieldInfo::new(name.clone(), None, None, ty.clone(), format_for(formats, i))
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

/// The batches of a result still to read, as it is sent (see `conn::Rest`).
pub(crate) type Unread =
    std::pin::Pin<Box<dyn futures::Stream<Item = Result<RecordBatch, Box<ErrorInfo>>> + Send>>;

/// The rows of `batches` under `fields` (one per column, in order): those `early`
/// holds as it wrote them, the rest written a batch at a time as the client's
/// connection takes them; then those of `unread`, read as they are sent (an error
/// there ends the reply with it). `keep` lives until the last row is sent.
pub(crate) fn response<K: Send + 'static>(
    fields: Vec<FieldInfo>,
    batches: Vec<RecordBatch>,
    early: Early,
    unread: Option<Unread>,
    keep: K,
) -> QueryResponse {
    let binary: Vec<bool> = fields
        .iter()
        .map(|f| f.format() == FieldFormat::Binary)
        .collect();
    let packed = early.packed;
    let write = move |batch: &RecordBatch, binary: &[bool]| {
        if packed {
            packed_rows(batch, binary)
        } else {
            data_rows(batch, binary)
        }
    };
    let (written, rest) = early
        .into_rows(&batches, &binary)
        .unwrap_or((Vec::new(), 0));
    let held = {
        let binary = binary.clone();
        written
            .into_iter()
            .chain(
                batches
                    .into_iter()
                    .skip(rest)
                    .flat_map(move |batch| write(&batch, &binary)),
            )
            .map(Ok)
    };
    let rows = stream::iter(held);
    let rows = match unread {
        None => rows.boxed(),
        Some(unread) => {
            let more = unread.flat_map(move |batch| {
                stream::iter(match batch {
                    Ok(batch) => write(&batch, &binary).into_iter().map(Ok).collect(),
                    Err(e) => vec![Err(PgWireError::UserError(e))],
                })
            });
            rows.chain(more).boxed()
        }
    };
    let rows = rows.map(move |row| {
        let _ = &keep;
        row
    });
    QueryResponse::new(Arc::new(fields), rows)
}

/// Data rows written while the query still ran ([`SqlSession::query_each`]): the
/// first batches of the result, up to [`EARLY_BYTES`] of rows (past that, the rest are
/// written as the client takes them, as they always were: a huge result is not held
/// twice whole).
///
/// [`SqlSession::query_each`]: ringscan_executor::engine::SqlSession::query_each
#[derive(Default)]
pub(crate) struct Early {
    /// Column `c` in binary where `binary[c]` (as the portal's formats say).
    binary: Vec<bool>,
    formats: Option<Format>,
    /// The client takes the result whole: rows go in packs (see `packed`).
    packed: bool,
    rows: Vec<DataRow>,
    /// The result's batches `rows` holds, from its first.
    batches: usize,
    /// Of those, the first `taken` were taken ([`Handed::Take`]): they are not in the
    /// outcome's result, and are `taken_rows` rows.
    taken: usize,
    taken_rows: usize,
    bytes: usize,
    full: bool,
    /// Bytes past which no more are written ([`EARLY_BYTES`]).
    limit: usize,
}

/// Bytes of data rows [`Early`] writes ahead at most.
const EARLY_BYTES: usize = 64 << 20;

impl Early {
    /// Rows to write in `formats` as batches come; `whole`: the client takes them all
    /// at once (no row limit), so they go in packs.
    pub(crate) fn new(formats: &Format, whole: bool) -> Self {
        Self {
            formats: Some(formats.clone()),
            packed: whole,
            limit: EARLY_BYTES,
            ..Self::default()
        }
    }

    /// Takes what the query hands over: writes the rows of the result's next batch,
    /// or starts over. `true`: a batch offered to take ([`Handed::Take`]) was written
    /// and is not needed again.
    pub(crate) fn push(&mut self, handed: Handed<'_>) -> bool {
        let Some(formats) = &self.formats else {
            return false;
        };
        let (batch, take) = match handed {
            Handed::Start => {
                self.rows.clear();
                self.batches = 0;
                self.taken = 0;
                self.taken_rows = 0;
                self.bytes = 0;
                self.full = false;
                self.binary.clear();
                return false;
            }
            Handed::Batch(batch) => (batch, false),
            Handed::Take(batch) => (batch, true),
        };
        if self.batches == 0 && self.binary.is_empty() {
            self.binary = (0..batch.num_columns())
                .map(|i| format_for(formats, i) == FieldFormat::Binary)
                .collect();
        }
        if self.full || self.bytes >= self.limit {
            self.full = true;
            return false;
        }
        let rows = if self.packed {
            packed_rows(batch, &self.binary)
        } else {
            data_rows(batch, &self.binary)
        };
        self.bytes += rows.iter().map(|r| r.data.len()).sum::<usize>();
        self.rows.extend(rows);
        self.batches += 1;
        // Taken only while every batch before was (the engine hands the rest over
        // to keep once one is not).
        if take && self.taken + 1 == self.batches {
            self.taken += 1;
            self.taken_rows += batch.num_rows();
            return true;
        }
        false
    }

    /// The rows written and how many of `batches` (the result they were written of,
    /// less the batches taken) they are, when they are its first and in `binary`;
    /// `None` (write them all anew) otherwise, which cannot be where batches were
    /// taken (nothing else holds their rows): those were written in the formats the
    /// response is, as the engine handed them.
    fn into_rows(self, batches: &[RecordBatch], binary: &[bool]) -> Option<(Vec<DataRow>, usize)> {
        let covered = batches.get(..self.batches - self.taken)?;
        let rows: usize =
            self.taken_rows + covered.iter().map(RecordBatch::num_rows).sum::<usize>();
        let written: usize = self
            .rows
            .iter()
            .map(|r| match r.field_count {
                n if n < 0 => usize::from(n.unsigned_abs()),
                _ => 1,
            })
            .sum();
        let whole = self.batches > 0 && self.binary == binary && rows == written;
        debug_assert!(whole || self.taken == 0, "rows of taken batches dropped");
        whole.then_some((self.rows, self.batches - self.taken))
    }
}

/// Bytes the rows of a batch are written into before the buffer is renewed: each row
/// is split off it, sharing its allocation.
const ROW_BUFFER: usize = 64 << 10;

/// The columns of `batch` ready to write, column `c` in binary where `binary[c]`, and
/// a row's field count.
fn cells<'a>(batch: &'a RecordBatch, binary: &[bool]) -> (Vec<Cells<'a>>, i16) {
    let columns: Vec<Cells<'_>> = batch
        .columns()
        .iter()
        .zip(binary)
        .map(|(c, &binary)| Cells::new(c.as_ref(), binary))
        .collect();
    let count = i16::try_from(columns.len()).unwrap_or(i16::MAX);
    (columns, count)
}

/// The data rows of `batch`, column `c` in binary where `binary[c]`.
pub(crate) fn data_rows(batch: &RecordBatch, binary: &[bool]) -> Vec<DataRow> {
    let (columns, count) = cells(batch, binary);
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

/// The data rows of `batch` in packs of at most [`PACK_ROWS`] rows (see `packed`):
/// for a result the client takes whole.
pub(crate) fn packed_rows(batch: &RecordBatch, binary: &[bool]) -> Vec<DataRow> {
    let (columns, count) = cells(batch, binary);
    let n = batch.num_rows();
    let mut packs = Vec::with_capacity(n.div_ceil(PACK_ROWS));
    if columns.iter().all(Cells::sized) {
        let mut start = 0;
        while start < n {
            let end = (start + PACK_ROWS).min(n);
            packs.push(DataRow::new(
                pack_by_column(&columns, count, start..end),
                pack_count(end - start),
            ));
            start = end;
        }
        return packs;
    }
    let mut start = 0;
    while start < n {
        let end = (start + PACK_ROWS).min(n);
        let known: usize = columns.iter().map(|c| c.bytes(start..end)).sum();
        let mut buf = BytesMut::with_capacity(known + 7 * (end - start));
        for i in start..end {
            let at = buf.len();
            buf.put_u8(b'D');
            buf.put_i32(0);
            buf.put_i16(count);
            for column in &columns {
                column.put(i, &mut buf);
            }
            let len = i32::try_from(buf.len() - at - 1).unwrap_or(i32::MAX);
            buf[at + 1..at + 5].copy_from_slice(&len.to_be_bytes());
        }
        packs.push(DataRow::new(buf, pack_count(end - start)));
        start = end;
    }
    packs
}

/// The data row messages of rows `rows` of `columns` (every one [`Cells::sized`]),
/// written column by column: each row's size, its header, then each column's cells.
fn pack_by_column(columns: &[Cells<'_>], count: i16, rows: std::ops::Range<usize>) -> BytesMut {
    // A row's message: 'D', its length, its field count, its cells.
    const HEADER: usize = 7;
    // Cells of one size in every row are counted once.
    let same: usize = columns.iter().filter_map(Cells::same_size).sum();
    let mut at = vec![HEADER + same; rows.len()];
    for column in columns.iter().filter(|c| c.same_size().is_none()) {
        column.add_sizes(rows.start, &mut at);
    }
    let total: usize = at.iter().sum();
    let mut buf = BytesMut::zeroed(total);
    // Where each row ends (short strings are copied in fixed-size moves that may
    // reach past their cell, never past their row: see `Cells::write_at`).
    let mut ends = Vec::with_capacity(rows.len());
    let mut pos = 0;
    for size in &mut at {
        let length = i32::try_from(*size - 1).unwrap_or(i32::MAX);
        buf[pos] = b'D';
        buf[pos + 1..pos + 5].copy_from_slice(&length.to_be_bytes());
        buf[pos + 5..pos + HEADER].copy_from_slice(&count.to_be_bytes());
        // From the row's size to where its first cell goes.
        let next = pos + *size;
        *size = pos + HEADER;
        ends.push(next);
        pos = next;
    }
    for column in columns {
        column.write_at(rows.start, &mut buf, &mut at, &ends);
    }
    debug_assert_eq!(at.last().copied().unwrap_or(0), total);
    buf
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

    /// The bytes a client receives for `rows` (packs unframed, as `packed::Unpack`
    /// passes them on).
    fn wire(rows: &[DataRow]) -> Vec<u8> {
        let mut out = Vec::new();
        for r in rows {
            if r.field_count < 0 {
                out.extend_from_slice(&r.data);
            } else {
                out.push(b'D');
                out.extend_from_slice(&(r.data.len() as u32 + 6).to_be_bytes());
                out.extend_from_slice(&r.field_count.to_be_bytes());
                out.extend_from_slice(&r.data);
            }
        }
        out
    }

    /// The rows of a response: those written early, then the rest, equal to every
    /// batch's rows written anew one by one, whatever was written early (all, some,
    /// none, rows of an attempt started over, rows in other formats), in packs or not,
    /// the batches written early taken (not in the outcome) or not.
    #[test]
    fn early_rows_and_the_rest_are_the_result_s_rows_once_in_order() {
        use arrow_array::{ArrayRef, Int64Array, StringArray};
        use futures::StreamExt;
        let batch = |from: i64, n: i64| {
            let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(from..from + n));
            let names: ArrayRef = Arc::new(StringArray::from_iter_values(
                (from..from + n).map(|i| format!("name {i}")),
            ));
            RecordBatch::try_from_iter([("id", ids), ("name", names)]).unwrap()
        };
        // One batch past a pack's rows.
        let mut batches: Vec<RecordBatch> = (0..5).map(|b| batch(b * 100, 30 + b)).collect();
        batches.push(batch(10_000, PACK_ROWS as i64 * 2 + 5));
        let formats = Format::Individual(vec![1, 0]);
        let fields = fields(&batches[0].schema(), &formats);
        let binary = [true, false];
        let one_by_one: Vec<DataRow> = batches.iter().flat_map(|b| data_rows(b, &binary)).collect();
        let want = wire(&one_by_one);
        let rows_of_kept = |early: Early, kept: Vec<RecordBatch>| -> Vec<DataRow> {
            let mut r = response(fields.clone(), kept, early, None, ());
            futures::executor::block_on(r.data_rows().map(Result::unwrap).collect())
        };
        let rows_of = |early: Early| rows_of_kept(early, batches.clone());
        for (packed, take) in [(false, false), (true, false), (false, true), (true, true)] {
            for limit in [0, 1, 600, 1500, usize::MAX] {
                let mut early = Early::new(&formats, packed);
                early.limit = limit;
                // An attempt that handed over a stray batch, then the result from its
                // first.
                early.push(Handed::Start);
                assert_eq!(early.push(Handed::Take(&batch(9_000, 7))), limit > 0);
                early.push(Handed::Start);
                // As the engine hands them: to take until one is not taken.
                let mut taking = take;
                let mut kept = Vec::new();
                for b in &batches {
                    if taking && early.push(Handed::Take(b)) {
                        continue;
                    }
                    taking = false;
                    if !take {
                        early.push(Handed::Batch(b));
                    }
                    kept.push(b.clone());
                }
                let written = early.batches;
                if take {
                    assert_eq!(written, batches.len() - kept.len(), "taken as written");
                }
                match limit {
                    0 => assert_eq!(written, 0),
                    usize::MAX => assert_eq!(written, batches.len()),
                    _ => assert!((1..batches.len()).contains(&written), "{written}"),
                }
                let got = rows_of_kept(early, kept);
                assert_eq!(
                    got.iter().any(|r| r.field_count < 0),
                    packed,
                    "packs where the client takes the rows whole"
                );
                assert!(got.iter().all(|r| r.field_count >= -(PACK_ROWS as i16)));
                assert!(
                    wire(&got) == want,
                    "packed {packed}, taken {take}, written ahead up to {limit} bytes"
                );
            }
        }
        // Written in other formats, or none at all: every row anew.
        let mut text = Early::new(&Format::UnifiedText, false);
        text.push(Handed::Start);
        text.push(Handed::Batch(&batches[0]));
        assert!(wire(&rows_of(text)) == want, "written in text");
        assert!(wire(&rows_of(Early::default())) == want, "none written");
    }

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
