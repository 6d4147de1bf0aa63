//! A minimal UTF-8 column builder for the generators' hot loops.
//!
//! arrow's `StringBuilder` needs a `&str` per value, so bytes produced digit by digit
//! would be validated once per value (`from_utf8` was 2.4% of a `generate contacts`
//! profile); here values are raw bytes and the whole buffer is validated once, when the
//! array is built.

use arrow_array::StringArray;
use arrow_buffer::{BooleanBufferBuilder, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::ArrowError;

/// Offsets, bytes and validity of a `Utf8` column under construction.
#[derive(Debug)]
pub(crate) struct Utf8Column {
    offsets: Vec<i32>,
    values: Vec<u8>,
    valid: BooleanBufferBuilder,
    nulls: usize,
}

impl Utf8Column {
    pub(crate) fn with_capacity(items: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(items + 1);
        offsets.push(0);
        Self {
            offsets,
            values: Vec::with_capacity(bytes),
            valid: BooleanBufferBuilder::new(items),
            nulls: 0,
        }
    }

    /// Appends one value made of `parts`, concatenated.
    #[inline]
    pub(crate) fn push_parts(&mut self, parts: &[&[u8]]) {
        for part in parts {
            self.values.extend_from_slice(part);
        }
        self.end_value();
    }

    /// Appends one value.
    #[inline]
    pub(crate) fn push(&mut self, value: &[u8]) {
        self.values.extend_from_slice(value);
        self.end_value();
    }

    #[inline]
    fn end_value(&mut self) {
        // Batches are at most 2^20 rows of short strings: far below i32::MAX bytes,
        // and `finish` checks the offsets again.
        self.offsets.push(self.values.len() as i32);
        self.valid.append(true);
    }

    /// Appends a null.
    #[inline]
    pub(crate) fn push_null(&mut self) {
        self.offsets.push(self.values.len() as i32);
        self.valid.append(false);
        self.nulls += 1;
    }

    /// The finished array; validates offsets and UTF-8 of the whole buffer once.
    pub(crate) fn finish(mut self) -> Result<StringArray, ArrowError> {
        if self.values.len() > i32::MAX as usize {
            return Err(ArrowError::ComputeError("string column over 2 GiB".into()));
        }
        let nulls = (self.nulls > 0).then(|| NullBuffer::new(self.valid.finish()));
        StringArray::try_new(
            OffsetBuffer::new(ScalarBuffer::from(self.offsets)),
            self.values.into(),
            nulls,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;

    #[test]
    fn matches_arrows_builder() {
        let mut mine = Utf8Column::with_capacity(4, 8);
        mine.push(b"ab");
        mine.push_null();
        mine.push_parts(&[b"c", b" ", b"d"]);
        mine.push(b"");
        let array = mine.finish().unwrap();
        let reference = StringArray::from(vec![Some("ab"), None, Some("c d"), Some("")]);
        assert_eq!(array, reference);
        assert_eq!(array.null_count(), 1);
    }

    #[test]
    fn invalid_utf8_is_an_error_not_ub() {
        let mut col = Utf8Column::with_capacity(1, 1);
        col.push(&[0xff]);
        assert!(col.finish().is_err());
    }
}
