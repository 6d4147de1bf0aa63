//! Is a Parquet file encrypted? The parquet crate is built without its `encryption`
//! feature, so an encrypted file fails somewhere inside it with an unhelpful message.
//! This module answers the question from the bytes, to word the error properly:
//!
//! - an encrypted footer ends in the magic `PARE`;
//! - a plaintext footer of an encrypted file carries field 8 (`encryption_algorithm`)
//!   of the Thrift `FileMetaData` struct, found by walking its top-level fields with a
//!   minimal, bounds-checked compact-protocol skipper.
//!
//! Only called after a file failed, so its cost does not matter. The same skipper
//! vets every page header before the parquet crate reads it (scan/page_header.rs).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Largest footer probed.
const MAX_FOOTER_BYTES: u64 = 64 << 20;
/// Deepest nesting the skipper follows.
const MAX_DEPTH: usize = 64;

/// Whether the file at `path` looks encrypted (`false` when it cannot tell).
pub(crate) fn is_encrypted(path: &Path) -> bool {
    probe(path).unwrap_or(false)
}

fn probe(path: &Path) -> Option<bool> {
    match read_footer(&mut File::open(path).ok()?)? {
        Footer::Encrypted => Some(true),
        Footer::Plain(footer) => has_top_level_field(&footer, 8),
    }
}

/// The footer at the end of a Parquet file, read from its own bytes.
pub(crate) enum Footer {
    /// The file ends in `PARE`: its footer is encrypted.
    Encrypted,
    /// The serialized `FileMetaData` (without its length and magic).
    Plain(Vec<u8>),
}

/// Reads the footer of `file`; `None` when the file is too short, has no Parquet magic,
/// or claims a footer longer than the file or than [`MAX_FOOTER_BYTES`].
pub(crate) fn read_footer(file: &mut File) -> Option<Footer> {
    let len = file.metadata().ok()?.len();
    if len < 12 {
        return None;
    }
    let mut tail = [0u8; 8];
    file.seek(SeekFrom::End(-8)).ok()?;
    file.read_exact(&mut tail).ok()?;
    match &tail[4..] {
        b"PARE" => return Some(Footer::Encrypted),
        b"PAR1" => {}
        _ => return None,
    }
    let footer_len = u64::from(u32::from_le_bytes(tail[..4].try_into().ok()?));
    if footer_len > MAX_FOOTER_BYTES || footer_len + 8 > len {
        return None;
    }
    let mut footer = vec![0u8; usize::try_from(footer_len).ok()?];
    file.seek(SeekFrom::Start(len - 8 - footer_len)).ok()?;
    file.read_exact(&mut footer).ok()?;
    Some(Footer::Plain(footer))
}

/// Walks the top-level fields of a compact-protocol struct; whether field `wanted` is
/// among them (`None` on malformed input).
fn has_top_level_field(bytes: &[u8], wanted: i16) -> Option<bool> {
    let mut r = Reader { bytes, at: 0 };
    let mut last_id: i16 = 0;
    loop {
        let header = r.byte()?;
        if header == 0 {
            return Some(false);
        }
        let field_type = header & 0x0f;
        let delta = header >> 4;
        let id = if delta == 0 {
            i16::try_from(zigzag(r.varint()?)).ok()?
        } else {
            last_id.checked_add(i16::from(delta))?
        };
        if id == wanted {
            return Some(true);
        }
        last_id = id;
        r.skip(field_type, 0)?;
    }
}

pub(crate) fn zigzag(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

/// A bounds-checked cursor over compact-protocol bytes.
pub(crate) struct Reader<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) at: usize,
}

impl Reader<'_> {
    pub(crate) fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    pub(crate) fn varint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> u64 {
        (self.bytes.len() - self.at) as u64
    }

    fn advance(&mut self, n: u64) -> Option<()> {
        let n = usize::try_from(n).ok()?;
        let end = self.at.checked_add(n)?;
        if end > self.bytes.len() {
            return None;
        }
        self.at = end;
        Some(())
    }

    /// Skips one value of compact type `t`.
    pub(crate) fn skip(&mut self, t: u8, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match t {
            1 | 2 => Some(()), // booleans live in the field header
            3 => self.advance(1),
            4..=6 => self.varint().map(|_| ()),
            7 => self.advance(8),
            8 => {
                let n = self.varint()?;
                self.advance(n)
            }
            9 | 10 => {
                let header = self.byte()?;
                let element = header & 0x0f;
                let size = match header >> 4 {
                    15 => self.varint()?,
                    n => u64::from(n),
                };
                for _ in 0..size {
                    if matches!(element, 1 | 2) {
                        self.advance(1)?; // list booleans are one byte each
                    } else {
                        self.skip(element, depth + 1)?;
                    }
                }
                Some(())
            }
            11 => {
                let size = self.varint()?;
                if size == 0 {
                    return Some(());
                }
                let kinds = self.byte()?;
                for _ in 0..size {
                    self.skip(kinds >> 4, depth + 1)?;
                    self.skip(kinds & 0x0f, depth + 1)?;
                }
                Some(())
            }
            12 => loop {
                let header = self.byte()?;
                if header == 0 {
                    return Some(());
                }
                if header >> 4 == 0 {
                    self.varint()?;
                }
                self.skip(header & 0x0f, depth + 1)?;
            },
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_field_after_skipping_others() {
        // field 1 i32 = 1; field 2 list<struct{field 1 binary "ab"}> of 1; field 8 struct {}.
        let bytes = [
            0x15, 0x02, // field 1, i32, zigzag(1)
            0x19, 0x1c, // field 2, list: 1 element of struct
            0x18, 0x02, b'a', b'b', 0x00, // struct { field 1 binary "ab" } stop
            0x6c, 0x00, // field 8 (delta 6), struct {} stop
            0x00,
        ];
        assert_eq!(has_top_level_field(&bytes, 8), Some(true));
        assert_eq!(has_top_level_field(&bytes[..9], 8), None, "truncated");
        let no_eight = [0x15, 0x02, 0x00];
        assert_eq!(has_top_level_field(&no_eight, 8), Some(false));
        assert_eq!(has_top_level_field(&[0x1f], 8), None, "bad type");
    }
}
