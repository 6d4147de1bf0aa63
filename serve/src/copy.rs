//! `COPY (query) TO STDOUT` and `COPY table TO STDOUT` (what psql's `\copy ... to`
//! sends): a result streamed in PostgreSQL's text, CSV or binary format.

use arrow_array::RecordBatch;
use bytes::{BufMut, BytesMut};
use datafusion::sql::sqlparser::ast::{
    CopyLegacyCsvOption, CopyLegacyOption, CopyOption, CopySource, CopyTarget, Statement,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::parser::Parser;
use futures::stream;
use pgwire::api::results::CopyResponse;
use pgwire::error::PgWireResult;
use pgwire::messages::copy::CopyData;

use crate::encode::Column;

/// A `COPY ... TO STDOUT`: the query whose rows go out and how they are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CopyOut {
    /// The rows: the query, or `SELECT columns FROM table` (empty for COPY FROM).
    pub(crate) query: String,
    /// `COPY table (columns) FROM STDIN`: the table and the columns named (none: all).
    pub(crate) into: Option<(String, Vec<String>)>,
    pub(crate) csv: bool,
    pub(crate) header: bool,
    pub(crate) delimiter: char,
    /// How NULL is written (`\N` in text, nothing in CSV, by default).
    pub(crate) null: String,
    pub(crate) quote: char,
    pub(crate) escape: char,
    /// PostgreSQL's binary format: a signature, then each row as a field count and
    /// each field's length and binary value (the types' wire form).
    pub(crate) binary: bool,
}

/// Reads a COPY statement: `Err` with the SQLSTATE and message for what the host does
/// not do (COPY FROM, a server-side file).
pub(crate) fn parse(sql: &str) -> Result<CopyOut, (&'static str, String)> {
    let statements = Parser::parse_sql(&PostgreSqlDialect {}, sql)
        .map_err(|e| ("42601", format!("SQL syntax: {e}")))?;
    let [Statement::Copy {
        source,
        to,
        target,
        options,
        legacy_options,
        ..
    }] = statements.as_slice()
    else {
        return Err(("42601", "not one COPY statement".into()));
    };
    let into = if *to {
        None
    } else {
        if *target != CopyTarget::Stdin {
            return Err((
                "42501",
                format!(
                    "COPY FROM {target} is not allowed: the host reads no files for clients; \
                     use COPY ... FROM STDIN (psql's \\copy)"
                ),
            ));
        }
        match source {
            CopySource::Table {
                table_name,
                columns,
            } => {
                let name = match table_name.0.last() {
                    Some(datafusion::sql::sqlparser::ast::ObjectNamePart::Identifier(id)) => {
                        if id.quote_style.is_some() {
                            id.value.clone()
                        } else {
                            id.value.to_lowercase()
                        }
                    }
                    _ => return Err(("42601", format!("{table_name}: not a table name"))),
                };
                let columns = columns
                    .iter()
                    .map(|c| {
                        if c.quote_style.is_some() {
                            c.value.clone()
                        } else {
                            c.value.to_lowercase()
                        }
                    })
                    .collect();
                Some((name, columns))
            }
            CopySource::Query(_) => {
                return Err((
                    "42601",
                    "COPY (query) FROM is not valid: name a table".into(),
                ))
            }
        }
    };
    if into.is_none() && *target != CopyTarget::Stdout {
        return Err((
            "42501",
            format!(
                "COPY TO {target} is not allowed: the host writes no files for clients; use \
                 COPY ... TO STDOUT (psql's \\copy)"
            ),
        ));
    }
    let query = match source {
        _ if into.is_some() => String::new(),
        CopySource::Query(q) => q.to_string(),
        CopySource::Table {
            table_name,
            columns,
        } => {
            let columns = if columns.is_empty() {
                "*".to_owned()
            } else {
                columns
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            format!("SELECT {columns} FROM {table_name}")
        }
    };
    let mut copy = CopyOut {
        query,
        into,
        csv: false,
        header: false,
        delimiter: '\t',
        null: "\\N".into(),
        quote: '"',
        escape: '"',
        binary: false,
    };
    let mut delimiter = None;
    let mut null = None;
    for option in options {
        match option {
            CopyOption::Format(f) => match f.value.to_ascii_lowercase().as_str() {
                "csv" => copy.csv = true,
                "text" => copy.csv = false,
                "binary" => copy.binary = true,
                other => return Err(("22023", format!("COPY format \"{other}\" not recognized"))),
            },
            CopyOption::Delimiter(c) => delimiter = Some(*c),
            CopyOption::Null(s) => null = Some(s.clone()),
            CopyOption::Header(h) => copy.header = *h,
            CopyOption::Quote(c) => copy.quote = *c,
            CopyOption::Escape(c) => copy.escape = *c,
            CopyOption::Encoding(e) if e.eq_ignore_ascii_case("utf8") => {}
            other => return Err(("0A000", format!("COPY option {other} is not supported"))),
        }
    }
    for option in legacy_options {
        match option {
            CopyLegacyOption::Binary => copy.binary = true,
            CopyLegacyOption::Delimiter(c) => delimiter = Some(*c),
            CopyLegacyOption::Null(s) => null = Some(s.clone()),
            CopyLegacyOption::Header => copy.header = true,
            CopyLegacyOption::Csv(csv) => {
                copy.csv = true;
                for o in csv {
                    match o {
                        CopyLegacyCsvOption::Header => copy.header = true,
                        CopyLegacyCsvOption::Quote(c) => copy.quote = *c,
                        CopyLegacyCsvOption::Escape(c) => copy.escape = *c,
                        other => {
                            return Err(("0A000", format!("COPY option {other} is not supported")))
                        }
                    }
                }
            }
            other => return Err(("0A000", format!("COPY option {other} is not supported"))),
        }
    }
    if copy.csv {
        copy.delimiter = ',';
        copy.null = String::new();
    }
    if let Some(d) = delimiter {
        copy.delimiter = d;
    }
    if let Some(n) = null {
        copy.null = n;
    }
    if copy.header && !copy.csv {
        return Err(("0A000", "COPY HEADER is available only in CSV mode".into()));
    }
    if copy.binary && (copy.csv || delimiter.is_some() || copy.null != "\\N") {
        return Err((
            "42601",
            "COPY BINARY takes no CSV, DELIMITER or NULL option".into(),
        ));
    }
    Ok(copy)
}

impl CopyOut {
    /// The rows as CopyData messages, one per row (the header rides with the first, so
    /// that the command tag counts rows only).
    pub(crate) fn response(&self, names: &[String], batches: &[RecordBatch]) -> CopyResponse {
        if self.binary {
            return binary_response(names.len(), batches);
        }
        let mut out: Vec<PgWireResult<CopyData>> = Vec::new();
        let mut pending = BytesMut::new();
        if self.header {
            self.line(names.iter().map(|n| Some(n.as_str())), &mut pending);
        }
        // Each row's values in text, one after another, and where each ends.
        let mut values = BytesMut::new();
        let mut ends: Vec<Option<usize>> = Vec::new();
        for batch in batches {
            let columns: Vec<Column<'_>> = batch
                .columns()
                .iter()
                .map(|c| Column::new(c.as_ref(), false))
                .collect();
            for i in 0..batch.num_rows() {
                values.clear();
                ends.clear();
                for c in &columns {
                    ends.push((!c.is_null(i)).then(|| {
                        c.put_value(i, &mut values);
                        values.len()
                    }));
                }
                let mut start = 0;
                let cells = ends.iter().map(|end| {
                    end.map(|end| {
                        let cell = &values[start..end];
                        start = end;
                        // Text values are UTF-8 (strings as stored, the rest ASCII).
                        std::str::from_utf8(cell).unwrap_or_default()
                    })
                });
                self.line(cells, &mut pending);
                out.push(Ok(CopyData::new(pending.split().freeze())));
            }
        }
        if !pending.is_empty() {
            // A header over no rows.
            out.push(Ok(CopyData::new(pending.split().freeze())));
        }
        CopyResponse::new(0, names.len(), stream::iter(out))
    }

    fn line<'a>(&self, cells: impl Iterator<Item = Option<&'a str>>, out: &mut BytesMut) {
        let mut buf = [0u8; 4];
        let delimiter = self.delimiter.encode_utf8(&mut buf).as_bytes();
        for (i, cell) in cells.enumerate() {
            if i > 0 {
                out.put_slice(delimiter);
            }
            match cell {
                None => out.put_slice(self.null.as_bytes()),
                Some(v) if self.csv => self.csv_cell(v, out),
                Some(v) => text_cell(v, self.delimiter, out),
            }
        }
        out.put_u8(b'\n');
    }

    /// A CSV value, quoted when it holds the delimiter, a quote, a line break, or
    /// would read back as NULL.
    fn csv_cell(&self, v: &str, out: &mut BytesMut) {
        let needs = v.is_empty() && self.null.is_empty()
            || v == self.null
            || v.contains([self.delimiter, self.quote, '\n', '\r'])
            || v.starts_with("\\.");
        if !needs {
            out.put_slice(v.as_bytes());
            return;
        }
        let mut quoted = String::with_capacity(v.len() + 2);
        quoted.push(self.quote);
        for c in v.chars() {
            if c == self.quote || c == self.escape {
                quoted.push(self.escape);
            }
            quoted.push(c);
        }
        quoted.push(self.quote);
        out.put_slice(quoted.as_bytes());
    }
}

/// The rows in COPY's binary format: the header with the first, one CopyData per row
/// (pgwire adds the trailer). A value of a type with no binary form here fails the
/// COPY with 0A000 naming the type.
fn binary_response(columns: usize, batches: &[RecordBatch]) -> CopyResponse {
    let mut out: Vec<PgWireResult<CopyData>> = Vec::new();
    let mut pending = BytesMut::new();
    pending.put_slice(b"PGCOPY\n\xff\r\n\0");
    pending.put_i32(0); // flags: no OIDs
    pending.put_i32(0); // no header extension
    let fields = i16::try_from(columns).unwrap_or(i16::MAX);
    'rows: for batch in batches {
        for i in 0..batch.num_rows() {
            pending.put_i16(fields);
            for column in batch.columns() {
                if column.is_null(i) {
                    pending.put_i32(-1);
                    continue;
                }
                let at = pending.len();
                pending.put_i32(0);
                if crate::binary::write(column.as_ref(), i, &mut pending).is_none() {
                    out.push(Err(pgwire::error::PgWireError::UserError(Box::new(
                        pgwire::error::ErrorInfo::new(
                            "ERROR".into(),
                            "0A000".into(),
                            format!(
                                "COPY BINARY: values of type {} have no binary form here; \
                                 use the text or CSV format",
                                column.data_type()
                            ),
                        ),
                    ))));
                    break 'rows;
                }
                let len = i32::try_from(pending.len() - at - 4).unwrap_or(i32::MAX);
                pending[at..at + 4].copy_from_slice(&len.to_be_bytes());
            }
            out.push(Ok(CopyData::new(pending.split().freeze())));
        }
    }
    if !pending.is_empty() {
        // The header over no rows.
        out.push(Ok(CopyData::new(pending.split().freeze())));
    }
    CopyResponse::new(1, columns, stream::iter(out))
}

/// A value in COPY's text format: backslash, the delimiter and control characters
/// escaped.
fn text_cell(v: &str, delimiter: char, out: &mut BytesMut) {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' if delimiter == '\t' => s.push_str("\\t"),
            c if c == delimiter => {
                s.push('\\');
                s.push(c);
            }
            c => s.push(c),
        }
    }
    out.put_slice(s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(copy: &CopyOut, cells: &[Option<&str>]) -> String {
        let mut out = BytesMut::new();
        copy.line(cells.iter().copied(), &mut out);
        String::from_utf8(out.to_vec()).expect("utf8")
    }

    #[test]
    fn options_are_read_in_both_syntaxes() {
        let legacy = parse("COPY (SELECT 1) TO STDOUT CSV HEADER").expect("copy");
        assert!(legacy.csv && legacy.header && legacy.delimiter == ',');
        let modern = parse("COPY t (a, b) TO STDOUT WITH (FORMAT csv, DELIMITER ';', NULL 'x')")
            .expect("copy");
        assert_eq!(modern.query, "SELECT a, b FROM t");
        assert_eq!((modern.delimiter, modern.null.as_str()), (';', "x"));
        let into = parse("COPY \"T\" (A, \"B\") FROM STDIN (FORMAT csv)").expect("copy in");
        assert_eq!(into.into, Some(("T".into(), vec!["a".into(), "B".into()])));
        assert!(into.csv);
        assert_eq!(parse("COPY t FROM '/etc/x'").map_err(|e| e.0), Err("42501"));
        assert_eq!(parse("COPY t TO '/etc/x'").map_err(|e| e.0), Err("42501"));
        assert!(
            parse("COPY t TO STDOUT (FORMAT binary)")
                .expect("binary")
                .binary
        );
        assert!(parse("COPY t TO STDOUT BINARY").expect("binary").binary);
        assert_eq!(
            parse("COPY t TO STDOUT (FORMAT binary, DELIMITER ',')").map_err(|e| e.0),
            Err("42601")
        );
    }

    #[test]
    fn values_are_escaped_as_postgresql_escapes_them() {
        let text = parse("COPY t TO STDOUT").expect("copy");
        assert_eq!(
            lines(&text, &[Some("a\tb\\"), None, Some("x\ny")]),
            "a\\tb\\\\\t\\N\tx\\ny\n"
        );
        let csv = parse("COPY t TO STDOUT CSV").expect("copy");
        assert_eq!(
            lines(&csv, &[Some("a,b"), None, Some(""), Some("say \"hi\"")]),
            "\"a,b\",,\"\",\"say \"\"hi\"\"\"\n"
        );
    }
}
