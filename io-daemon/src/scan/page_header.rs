//! Page headers vetted before the parquet crate reads them.
//!
//! parquet 59.3.2 trusts what a page header says, read through a compact protocol over
//! `std::io::Read`:
//! - a list claiming 2^31 doubles at the end of the input "skips" each one
//!   successfully: billions of empty turns, 38 s of a worker (fuzz input
//!   `regression-thrift-skip-past-eof-slow`); a field of the wrong wire type is read as
//!   the declared one from the bytes after it, which led to the same spin through
//!   nested lists (93 s, `regression-page-header-field-of-the-wrong-type`);
//! - a binary length near 2^63 goes to `Vec::with_capacity`;
//! - a dictionary page's `num_values` sizes the dictionary (`resize`) before a value is
//!   decoded: a 32-byte page claiming 2^30 INT64s asks for 8 GiB, and a failed
//!   allocation aborts the whole daemon (`regression-dictionary-claims-8-gib`).
//!
//! [`PageHeaders::vet`] accepts a header only if it is one the crate reads as the spec
//! does and ends within the input ([`thrift_walk::page_header`]), and a dictionary
//! page only if its count fits its size: a plain value of the column's physical type
//! takes at least so many bits. Both hold for every valid file, so a header they
//! refuse is one the file could not have meant.

use std::ops::Range;

use parquet::basic::Type as PhysicalType;
use parquet::file::metadata::RowGroupMetaData;

use super::thrift_walk;

/// Where the decoder will find page headers in the column chunks it reads.
#[derive(Debug, Default)]
pub(crate) struct PageHeaders {
    /// Page starts the offset index lists, and each chunk's start: sorted.
    starts: Vec<u64>,
    /// The chunks, sorted by start: their byte ranges and the fewest bits a plain value
    /// of their physical type takes.
    chunks: Vec<(Range<u64>, u64)>,
}

impl PageHeaders {
    /// Notes column chunk `c` of `rg`, occupying `range`, with the page starts its
    /// offset index lists (if any).
    pub(crate) fn add_chunk(
        &mut self,
        rg: &RowGroupMetaData,
        c: usize,
        range: Range<u64>,
        pages: impl IntoIterator<Item = u64>,
    ) {
        let col = rg.column(c).column_descr();
        let bits = match col.physical_type() {
            PhysicalType::BOOLEAN => 1,
            PhysicalType::INT32 | PhysicalType::FLOAT | PhysicalType::BYTE_ARRAY => 32,
            PhysicalType::INT64 | PhysicalType::DOUBLE => 64,
            PhysicalType::INT96 => 96,
            PhysicalType::FIXED_LEN_BYTE_ARRAY => {
                8 * u64::try_from(col.type_length()).unwrap_or(0).max(1)
            }
        };
        self.starts.push(range.start);
        self.starts.extend(pages);
        self.chunks.push((range, bits));
    }

    /// Sorts what [`add_chunk`](Self::add_chunk) noted.
    pub(crate) fn finish(mut self) -> Self {
        self.starts.sort_unstable();
        self.starts.dedup();
        self.chunks.sort_unstable_by_key(|(r, _)| r.start);
        self
    }

    /// Whether a read at `at` starts with a page header, by the offset index.
    pub(crate) fn is_page_start(&self, at: u64) -> bool {
        self.starts.binary_search(&at).is_ok()
    }

    /// Checks the page header at byte `at`, the first of `bytes` (which run to the end
    /// of what the decoder may read there).
    pub(crate) fn vet(&self, at: u64, bytes: &[u8]) -> Result<(), String> {
        let Some(header) = thrift_walk::page_header(bytes) else {
            return Err(format!(
                "the page header at byte {at} is malformed or claims more than the {} bytes \
                 that follow it",
                bytes.len()
            ));
        };
        let Some(values) = header.dictionary_values else {
            return Ok(());
        };
        let bits = self.value_bits(at);
        let size = u64::try_from(header.uncompressed_size.unwrap_or(0)).unwrap_or(0);
        let most = size.saturating_mul(8) / bits;
        match u64::try_from(values) {
            Ok(n) if n <= most => Ok(()),
            _ => Err(format!(
                "the dictionary page at byte {at} claims {values} values in {size} bytes, \
                 more than values of at least {bits} bits fit"
            )),
        }
    }

    /// The fewest bits of a plain value in the chunk holding byte `at` (1 when no noted
    /// chunk holds it).
    fn value_bits(&self, at: u64) -> u64 {
        let i = self.chunks.partition_point(|(r, _)| r.start <= at);
        i.checked_sub(1)
            .and_then(|i| self.chunks.get(i))
            .filter(|(r, _)| r.contains(&at))
            .map_or(1, |&(_, bits)| bits)
    }
}

/// A row group of one required INT64 column (for tests).
#[cfg(test)]
pub(crate) fn int64_row_group() -> RowGroupMetaData {
    use parquet::file::metadata::ColumnChunkMetaData;
    use parquet::schema::{parser::parse_message_type, types::SchemaDescriptor};
    use std::sync::Arc;
    let schema = parse_message_type("message m { required int64 x; }").expect("schema");
    let schema = Arc::new(SchemaDescriptor::new(Arc::new(schema)));
    let column = ColumnChunkMetaData::builder(schema.column(0))
        .build()
        .expect("column");
    RowGroupMetaData::builder(schema)
        .set_num_rows(1)
        .set_column_metadata(vec![column])
        .build()
        .expect("row group")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `{1: i32 type, 2: i32 uncompressed, 3: i32 compressed, 7: {1: i32 values}}`.
    fn dictionary_header(uncompressed: u8, values: &[u8]) -> Vec<u8> {
        let mut h = vec![
            0x15,
            0x04,
            0x15,
            uncompressed,
            0x15,
            uncompressed,
            0x4c,
            0x15,
        ];
        h.extend_from_slice(values);
        h.extend_from_slice(&[0x00, 0x00]);
        h
    }

    #[test]
    fn reads_the_sizes_and_the_length_of_a_header() {
        let h = dictionary_header(0x40, &[0x08]);
        let mut bytes = h.clone();
        bytes.extend_from_slice(&[0xaa; 32]);
        let header = thrift_walk::page_header(&bytes).expect("well formed");
        assert_eq!(
            header,
            thrift_walk::PageHeaderFacts {
                len: h.len(),
                uncompressed_size: Some(32),
                dictionary_values: Some(4),
            }
        );
        assert_eq!(thrift_walk::page_header(&h[..h.len() - 1]), None, "no stop");
    }

    #[test]
    fn sizes_past_the_end_are_refused() {
        let len = |b: &[u8]| thrift_walk::page_header(b).map(|h| h.len);
        // Field 9 (unknown) list<double> claiming 2^31 elements, then the end.
        assert_eq!(len(&[0x99, 0xf7, 0x80, 0x80, 0x80, 0x80, 0x08]), None);
        // Field 9 binary of length 2^62.
        let long = [0x98, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40];
        assert_eq!(len(&long), None);
        // A known field of the wrong type: field 6 (a struct) as an i64.
        assert_eq!(len(&[0x66, 0x14, 0x00]), None);
        // A list of booleans, which the crate skips without consuming them.
        assert_eq!(len(&[0x99, 0x21, 0x01, 0x01, 0x00]), None);
        // The same list of i32s is fine in a field the crate does not know.
        assert_eq!(len(&[0x99, 0x25, 0x02, 0x04, 0x00]), Some(5));
        let err = PageHeaders::default().vet(7, &long).expect_err("refused");
        assert!(err.contains("page header at byte 7"), "{err}");
    }

    #[test]
    fn a_dictionary_holds_no_more_values_than_its_bytes_allow() {
        let rg = int64_row_group();
        let mut headers = PageHeaders::default();
        headers.add_chunk(&rg, 0, 100..200, []);
        let headers = headers.finish();
        // 32 bytes hold 4 INT64s: 4 is fine, 5 is not (zigzag: 8 is 4, 10 is 5).
        assert!(headers.vet(100, &dictionary_header(0x40, &[0x08])).is_ok());
        let err = headers
            .vet(100, &dictionary_header(0x40, &[0x0a]))
            .expect_err("5 INT64s in 32 bytes");
        assert!(err.contains("claims 5 values in 32 bytes"), "{err}");
        // The fuzz input's 2^30-odd values in 32 bytes, outside any noted chunk: even
        // at one bit a value, refused.
        let huge = dictionary_header(0x40, &[0xff, 0xff, 0xff, 0xfc, 0x10]);
        assert!(headers.vet(500, &huge).is_err());
        assert!(headers.is_page_start(100) && !headers.is_page_start(101));
    }
}
