//! Data rows in packs: many rows' `DataRow` messages handed to pgwire as one.
//!
//! pgwire sends a result one `DataRow` at a time, each through its sink (a future, an
//! encode, a copy): for 100,000 rows of four columns that was a third of the host's
//! time, more than writing the rows. So a result the client takes whole (an Execute
//! without a row limit, a simple query) is handed over in packs: one `DataRow` whose
//! field count is minus the number of rows it carries and whose bytes are those rows'
//! own `DataRow` messages, framed. No client ever sees a pack: most go past pgwire
//! altogether, their bytes queued as they are on the connection's lane
//! (`socket::Lane`, by `handlers::send_rows`); those pgwire sends (the last statement
//! of a simple query of several) pass through [`Unpack`], which every byte pgwire
//! writes passes through on its way out: it drops a pack's frame (7 bytes) and adds
//! the rows pgwire did not count (it counts a pack as one) to the `SELECT n` of the
//! CommandComplete that follows.

/// The field count that marks a pack of `rows` rows.
pub(crate) fn pack_count(rows: usize) -> i16 {
    -i16::try_from(rows).unwrap_or(i16::MAX)
}

/// The rows `row` carries as a pack; `None` for a plain data row.
pub(crate) fn pack_rows(row: &pgwire::messages::data::DataRow) -> Option<usize> {
    (row.field_count < 0).then(|| usize::from(row.field_count.unsigned_abs()))
}

/// Rows a pack carries at most (its field count is an i16).
pub(crate) const PACK_ROWS: usize = 1024;

/// The connection's outgoing bytes, message by message: packs unframed, tags counted
/// right, everything else as it came. Bytes may arrive split anywhere.
#[derive(Debug, Default)]
pub(crate) struct Unpack {
    /// The start of the current message held back: type, length, and for a data row
    /// its field count.
    header: [u8; 7],
    have: usize,
    /// Bytes of the current message's body still to pass on.
    body: usize,
    /// A CommandComplete being collected (its tag may be rewritten): its body so far
    /// and its length.
    tag: Option<(Vec<u8>, usize)>,
    /// Rows carried by packs beyond the one pgwire counted for each, since the last
    /// CommandComplete.
    extra: u64,
    last_type: u8,
}

impl Unpack {
    /// Passes `input` on into `out`.
    pub(crate) fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) {
        while !input.is_empty() {
            if let Some((tag, len)) = &mut self.tag {
                let n = (*len - tag.len()).min(input.len());
                tag.extend_from_slice(&input[..n]);
                input = &input[n..];
                if tag.len() == *len {
                    let tag = std::mem::take(tag);
                    self.tag = None;
                    self.complete(&tag, out);
                }
                continue;
            }
            if self.body > 0 {
                let n = self.body.min(input.len());
                out.extend_from_slice(&input[..n]);
                self.body -= n;
                input = &input[n..];
                continue;
            }
            let need = if self.have > 0 && self.header[0] == b'D' {
                7
            } else {
                5
            };
            let n = (need - self.have).min(input.len());
            self.header[self.have..self.have + n].copy_from_slice(&input[..n]);
            self.have += n;
            input = &input[n..];
            if self.have == 5 && self.header[0] == b'D' {
                continue; // its field count too
            }
            if self.have < need {
                break;
            }
            self.have = 0;
            self.start(out);
        }
    }

    /// The header of a message is in: pass it on, or begin collecting a tag.
    fn start(&mut self, out: &mut Vec<u8>) {
        let kind = self.header[0];
        let len = u32::from_be_bytes([
            self.header[1],
            self.header[2],
            self.header[3],
            self.header[4],
        ]) as usize;
        let body = len.saturating_sub(4);
        self.last_type = kind;
        match kind {
            b'D' => {
                let count = i16::from_be_bytes([self.header[5], self.header[6]]);
                if count < 0 {
                    // A pack: its rows follow as messages of their own.
                    self.extra += u64::from(count.unsigned_abs()).saturating_sub(1);
                } else {
                    out.extend_from_slice(&self.header);
                    self.body = body.saturating_sub(2);
                }
            }
            b'C' => self.tag = Some((Vec::with_capacity(body), body)),
            _ => {
                if matches!(kind, b's' | b'E' | b'Z') {
                    self.extra = 0;
                }
                out.extend_from_slice(&self.header[..5]);
                self.body = body;
            }
        }
        if let Some((tag, 0)) = &self.tag {
            let tag = tag.clone();
            self.tag = None;
            self.complete(&tag, out);
        }
    }

    /// A CommandComplete whose body is `tag`: `SELECT n` counts the packs' rows too.
    fn complete(&mut self, tag: &[u8], out: &mut Vec<u8>) {
        let extra = std::mem::take(&mut self.extra);
        let counted = tag
            .strip_prefix(b"SELECT ")
            .and_then(|rest| rest.strip_suffix(b"\0"))
            .and_then(|n| std::str::from_utf8(n).ok()?.parse::<u64>().ok());
        let rewritten;
        let tag = match counted {
            Some(n) if extra > 0 => {
                rewritten = format!("SELECT {}\0", n + extra).into_bytes();
                &rewritten[..]
            }
            _ => tag,
        };
        out.push(b'C');
        out.extend_from_slice(&(tag.len() as u32 + 4).to_be_bytes());
        out.extend_from_slice(tag);
    }

    /// Whether every message passed on so far is whole.
    pub(crate) fn whole(&self) -> bool {
        self.have == 0 && self.body == 0 && self.tag.is_none()
    }

    /// The type of the last message begun.
    pub(crate) fn last_type(&self) -> u8 {
        self.last_type
    }
}

/// A backend message of type `kind` with `body`, framed (for tests).
#[cfg(test)]
pub(crate) fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![kind];
    m.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    m.extend_from_slice(body);
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cells: &[&[u8]]) -> Vec<u8> {
        let mut body = (cells.len() as i16).to_be_bytes().to_vec();
        for c in cells {
            body.extend_from_slice(&(c.len() as i32).to_be_bytes());
            body.extend_from_slice(c);
        }
        message(b'D', &body)
    }

    /// A pack of `rows` as pgwire frames it.
    fn pack(rows: &[Vec<u8>]) -> Vec<u8> {
        let mut body = pack_count(rows.len()).to_be_bytes().to_vec();
        for r in rows {
            body.extend_from_slice(r);
        }
        message(b'D', &body)
    }

    /// `input` fed in pieces of `step` bytes.
    fn unpacked(input: &[u8], step: usize) -> (Vec<u8>, bool) {
        let mut u = Unpack::default();
        let mut out = Vec::new();
        for piece in input.chunks(step) {
            u.feed(piece, &mut out);
        }
        (out, u.whole())
    }

    #[test]
    fn packs_reach_the_client_as_the_rows_they_carry_counted_in_the_tag() {
        let rows: Vec<Vec<u8>> = (0..5)
            .map(|i| row(&[format!("{i}").as_bytes(), b"x"]))
            .collect();
        let bind = message(b'2', b"");
        let plain = row(&[b"plain"]);
        let ready = message(b'Z', b"I");
        // pgwire counts a pack as one row: 1 plain + 2 packs = "SELECT 3".
        let sent = [
            bind.clone(),
            plain.clone(),
            pack(&rows[..2]),
            pack(&rows[2..]),
            message(b'C', b"SELECT 3\0"),
            ready.clone(),
            // The next statement's count starts from nothing.
            pack(&rows[..1]),
            message(b'C', b"SELECT 1\0"),
            message(b'C', b"INSERT 0 4\0"),
        ]
        .concat();
        let want = [
            bind,
            plain,
            rows.concat(),
            message(b'C', b"SELECT 6\0"),
            ready,
            rows[0].clone(),
            message(b'C', b"SELECT 1\0"),
            message(b'C', b"INSERT 0 4\0"),
        ]
        .concat();
        for step in [1, 2, 3, 5, 6, 7, 8, 13, 64, sent.len()] {
            let (got, whole) = unpacked(&sent, step);
            assert_eq!(got, want, "fed {step} bytes at a time");
            assert!(whole);
        }
        // Cut inside a message: not whole.
        let (_, whole) = unpacked(&sent[..sent.len() - 3], 4);
        assert!(!whole);
    }

    #[test]
    fn everything_else_passes_as_it_came() {
        let sent = [
            message(
                b'T',
                b"\0\x01a\0\0\0\0\0\0\0\0\0\0\x17\0\x04\xff\xff\xff\xff\0\0",
            ),
            row(&[]),
            row(&[b"", b"abc"]),
            message(b'C', b"SELECT 2\0"),
            message(b'C', b"\0"),
            message(b'C', b""),
            message(b'E', b"SERROR\0\0"),
            message(b's', b""),
        ]
        .concat();
        for step in [1, 4, 7, sent.len()] {
            let (got, whole) = unpacked(&sent, step);
            assert_eq!(got, sent, "fed {step} bytes at a time");
            assert!(whole);
        }
    }
}
