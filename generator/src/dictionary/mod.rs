//! A column-chunk writer for string leaves whose values come from a known vocabulary.
//!
//! parquet's `ArrowWriter` interns every string of a dictionary column again, even one
//! handed over as an Arrow `DictionaryArray` (hashing and comparing each value was a
//! quarter of `generate contacts`' CPU), and its value encoders are crate-private. The
//! generator already knows each value's key in a vocabulary sorted by bytes, so this
//! writer takes the keys as they are: [`DictionaryChunkWriter`] buffers a row group's
//! levels and keys ([`levels`]), then writes the chunk Parquet's way: a PLAIN
//! dictionary page holding the vocabulary's values that occur (commonest first),
//! RLE_DICTIONARY data pages (v1: levels then keys, [`hybrid`]-encoded,
//! compressed with the run's codec, [`codec`]), chunk statistics, the column index
//! (page min/max from the keys, since key order is byte order) and the offset index.
//! The chunk is spliced into the row group with
//! `SerializedRowGroupWriter::append_column`.
//!
//! Its files read back as ArrowWriter's do (tested against it on the same rows, with
//! parquet's reader here and with DuckDB and pyarrow in `benches/scripts`).

mod codec;
pub(crate) mod hybrid;
pub(crate) mod levels;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use arrow_array::{Array, StringArray};
use bytes::Bytes;
use parquet::basic::{BoundaryOrder, Encoding, EncodingMask, PageType, Type as PhysicalType};
use parquet::column::page::{CompressedPage, Page, PageWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::data_type::ByteArray;
use parquet::errors::ParquetError;
use parquet::file::metadata::{
    ColumnChunkMetaData, ColumnIndexBuilder, LevelHistogram, OffsetIndexBuilder, PageEncodingStats,
};
use parquet::file::properties::WriterProperties;
use parquet::file::statistics::{Statistics, ValueStatistics};
use parquet::file::writer::{SerializedPageWriter, TrackedWrite};
use parquet::schema::types::ColumnDescPtr;

use codec::PageCodec;
use levels::LeafLevels;

/// Most entries a vocabulary may have: keys are `u16`.
pub(crate) const MAX_VOCABULARY: usize = 1 << 16;
/// Longest vocabulary value: at most parquet's default statistics truncation length,
/// so that min/max are whole values, as ArrowWriter writes them.
pub(crate) const MAX_VALUE_BYTES: usize = 64;
/// A data page also ends, at a row boundary, once it holds this many level entries
/// (bounds a page's size when rows hold long lists).
const MAX_PAGE_LEVELS: usize = 1 << 17;

/// Checks that `vocabulary` can key a dictionary leaf: no nulls, strictly ascending by
/// bytes, at most [`MAX_VOCABULARY`] values of at most [`MAX_VALUE_BYTES`] bytes.
pub(crate) fn check_vocabulary(vocabulary: &StringArray) -> Result<(), String> {
    if vocabulary.null_count() > 0 {
        return Err("a vocabulary holds a null".into());
    }
    if vocabulary.len() > MAX_VOCABULARY {
        return Err(format!(
            "a vocabulary of {} values (at most {MAX_VOCABULARY})",
            vocabulary.len()
        ));
    }
    for i in 0..vocabulary.len() {
        let value = vocabulary.value(i).as_bytes();
        if value.len() > MAX_VALUE_BYTES {
            return Err(format!("a vocabulary value of {} bytes", value.len()));
        }
        if i > 0 && vocabulary.value(i - 1).as_bytes() >= value {
            return Err(format!("vocabulary values {} and {i} out of order", i - 1));
        }
    }
    Ok(())
}

/// Whether two string arrays are the same buffers (a vocabulary shared by batches).
fn same_buffers(a: &StringArray, b: &StringArray) -> bool {
    a.len() == b.len()
        && a.offset() == b.offset()
        && a.values().as_ptr() == b.values().as_ptr()
        && a.value_offsets().as_ptr() == b.value_offsets().as_ptr()
}

/// One dictionary leaf of one row group, buffered until [`Self::close`].
#[derive(Debug)]
pub(crate) struct DictionaryChunkWriter {
    descr: ColumnDescPtr,
    codec: PageCodec,
    compression: parquet::basic::Compression,
    page_rows: usize,
    vocabulary: Option<StringArray>,
    def: Vec<u16>,
    rep: Vec<u16>,
    keys: Vec<u16>,
    rows: usize,
}

/// What one data page covers: level entries, keys and rows.
#[derive(Debug, Clone, Copy)]
struct PageSpan {
    levels: (usize, usize),
    keys: (usize, usize),
    rows: usize,
}

impl DictionaryChunkWriter {
    /// A writer for leaf `descr` with the codec and page size of `props`.
    pub(crate) fn new(
        descr: ColumnDescPtr,
        props: &WriterProperties,
    ) -> Result<Self, ParquetError> {
        if descr.physical_type() != PhysicalType::BYTE_ARRAY {
            return Err(ParquetError::General(format!(
                "dictionary leaf {} is {}, not BYTE_ARRAY",
                descr.path(),
                descr.physical_type()
            )));
        }
        // What ArrowWriter would do differently under these properties, this writer
        // does not do: refuse rather than write another file.
        let whole_values = |limit: Option<usize>| limit.is_none_or(|n| n >= MAX_VALUE_BYTES);
        if props.bloom_filter_properties(descr.path()).is_some()
            || !props.dictionary_enabled(descr.path())
            || !whole_values(props.statistics_truncate_length())
            || !whole_values(props.column_index_truncate_length())
        {
            return Err(ParquetError::NYI(format!(
                "dictionary leaf {}: bloom filters, no dictionary or min/max truncated \
                 below {MAX_VALUE_BYTES} bytes",
                descr.path()
            )));
        }
        let compression = props.compression(descr.path());
        Ok(Self {
            codec: PageCodec::new(compression)?,
            compression,
            page_rows: props.data_page_row_count_limit().max(1),
            descr,
            vocabulary: None,
            def: Vec::new(),
            rep: Vec::new(),
            keys: Vec::new(),
            rows: 0,
        })
    }

    /// Adds a batch's share of the leaf. Every batch of a chunk must carry the same
    /// vocabulary.
    pub(crate) fn write(&mut self, leaf: LeafLevels) -> Result<(), ParquetError> {
        let max_rep = self.descr.max_rep_level();
        let max_def = self.descr.max_def_level();
        if leaf.rep.is_empty() != (max_rep == 0)
            || leaf.def.iter().any(|&d| d > max_def as u16)
            || leaf.rep.iter().any(|&r| r > max_rep as u16)
        {
            return Err(ParquetError::General(format!(
                "levels of {} do not fit its schema (max def {max_def}, max rep {max_rep})",
                self.descr.path()
            )));
        }
        match &self.vocabulary {
            Some(v) if same_buffers(v, &leaf.vocabulary) => {}
            Some(v) if *v == leaf.vocabulary => {}
            Some(_) => {
                return Err(ParquetError::General(format!(
                    "the vocabulary of {} changed within a row group",
                    self.descr.path()
                )))
            }
            None => {
                check_vocabulary(&leaf.vocabulary)
                    .map_err(|e| ParquetError::General(format!("{}: {e}", self.descr.path())))?;
                self.vocabulary = Some(leaf.vocabulary.clone());
            }
        }
        let size = self.vocabulary.as_ref().map_or(0, |v| v.len());
        if leaf.keys.iter().any(|&k| usize::from(k) >= size) {
            return Err(ParquetError::General(format!(
                "a key of {} past its vocabulary of {size}",
                self.descr.path()
            )));
        }
        self.def.extend_from_slice(&leaf.def);
        self.rep.extend_from_slice(&leaf.rep);
        self.keys.extend_from_slice(&leaf.keys);
        self.rows += leaf.rows;
        Ok(())
    }

    /// Rows written so far.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Cuts the buffered levels into data pages: each ends at a row boundary after
    /// `page_rows` rows or [`MAX_PAGE_LEVELS`] level entries.
    fn pages(&self) -> Vec<PageSpan> {
        let max_def = self.descr.max_def_level() as u16;
        let mut pages = Vec::new();
        let (mut level_start, mut key_start, mut rows) = (0, 0, 0);
        let mut keys = 0;
        for i in 0..self.def.len() {
            let row_start = self.rep.is_empty() || self.rep[i] == 0;
            if row_start {
                if rows == self.page_rows || (rows > 0 && i - level_start >= MAX_PAGE_LEVELS) {
                    pages.push(PageSpan {
                        levels: (level_start, i),
                        keys: (key_start, keys),
                        rows,
                    });
                    (level_start, key_start, rows) = (i, keys, 0);
                }
                rows += 1;
            }
            keys += usize::from(self.def[i] == max_def);
        }
        if self.def.len() > level_start || pages.is_empty() {
            pages.push(PageSpan {
                levels: (level_start, self.def.len()),
                keys: (key_start, keys),
                rows,
            });
        }
        debug_assert_eq!(keys, self.keys.len());
        pages
    }

    /// Encodes the chunk: returns its bytes (the dictionary page at offset 0) and what
    /// `SerializedRowGroupWriter::append_column` needs to splice it.
    pub(crate) fn close(mut self) -> Result<(Bytes, ColumnCloseResult), ParquetError> {
        let vocabulary = self
            .vocabulary
            .take()
            .unwrap_or_else(|| StringArray::from(Vec::<&str>::new()));
        let max_def = self.descr.max_def_level();
        let max_rep = self.descr.max_rep_level();

        // The dictionary holds the values that occur, commonest first: the small
        // indices go to the frequent values, whose packed keys then compress better
        // (sorted by value, the keys of `phones.number` took 10% more bytes).
        let mut counts = vec![0u32; vocabulary.len()];
        for &k in &self.keys {
            counts[usize::from(k)] += 1;
        }
        let mut used: Vec<u16> = (0..counts.len())
            .filter(|&k| counts[k] > 0)
            .map(|k| k as u16)
            .collect();
        used.sort_unstable_by_key(|&k| (std::cmp::Reverse(counts[usize::from(k)]), k));
        let dictionary_len = used.len();
        let mut remap = vec![u16::MAX; vocabulary.len()];
        let mut plain = Vec::new();
        for (index, &k) in used.iter().enumerate() {
            remap[usize::from(k)] = index as u16;
            let value = vocabulary.value(usize::from(k)).as_bytes();
            plain.extend_from_slice(&(value.len() as u32).to_le_bytes());
            plain.extend_from_slice(value);
        }

        let mut sink = TrackedWrite::new(Vec::new());
        let mut page_writer = SerializedPageWriter::new(&mut sink);
        let mut compressed = Vec::new();
        self.codec.compress(&plain, &mut compressed)?;
        let dictionary_spec = page_writer.write_page(CompressedPage::new(
            Page::DictionaryPage {
                buf: Bytes::from(std::mem::take(&mut compressed)),
                num_values: dictionary_len as u32,
                encoding: Encoding::PLAIN,
                is_sorted: false,
            },
            plain.len(),
        ))?;
        let mut compressed_bytes = dictionary_spec.compressed_size as i64;
        let mut uncompressed_bytes = dictionary_spec.uncompressed_size as i64;

        let key_width = hybrid::bit_width(dictionary_len.saturating_sub(1) as u32);
        let def_width = hybrid::bit_width(max_def as u32);
        let rep_width = hybrid::bit_width(max_rep as u32);
        let mut column_index = ColumnIndexBuilder::new(PhysicalType::BYTE_ARRAY);
        let mut offset_index = OffsetIndexBuilder::new();
        let mut chunk_def_hist = LevelHistogram::try_new(max_def);
        let mut chunk_rep_hist = LevelHistogram::try_new(max_rep);
        let (mut chunk_min, mut chunk_max) = (u16::MAX, 0u16);
        let mut chunk_nulls = 0u64;
        let mut chunk_string_bytes = 0i64;
        let (mut ascending, mut descending) = (true, true);
        let mut last_bounds: Option<(u16, u16)> = None;
        let mut data_page_offset = None;
        let mut data_pages = 0;
        let mut page_buf = Vec::new();
        let mut page_keys = Vec::new();

        for span in self.pages() {
            let levels = span.levels.0..span.levels.1;
            let keys = &self.keys[span.keys.0..span.keys.1];
            page_buf.clear();
            // Page histograms, counted while the levels are encoded.
            let mut rep_hist = LevelHistogram::try_new(max_rep).map(Vec::from);
            let mut def_hist = LevelHistogram::try_new(max_def).map(Vec::from);
            if let Some(counts) = &mut rep_hist {
                put_levels(&self.rep[levels.clone()], rep_width, &mut page_buf, counts);
            }
            if let Some(counts) = &mut def_hist {
                put_levels(&self.def[levels.clone()], def_width, &mut page_buf, counts);
            }
            let rep_hist = rep_hist.map(LevelHistogram::from);
            let def_hist = def_hist.map(LevelHistogram::from);
            page_buf.push(key_width);
            page_keys.clear();
            page_keys.extend(keys.iter().map(|&k| remap[usize::from(k)]));
            hybrid::encode(&page_keys, key_width, &mut page_buf);
            compressed.clear();
            self.codec.compress(&page_buf, &mut compressed)?;
            let num_values = levels.len();
            let spec = page_writer.write_page(CompressedPage::new(
                Page::DataPage {
                    buf: Bytes::from(std::mem::take(&mut compressed)),
                    num_values: num_values as u32,
                    encoding: Encoding::RLE_DICTIONARY,
                    def_level_encoding: Encoding::RLE,
                    rep_level_encoding: Encoding::RLE,
                    statistics: None,
                },
                page_buf.len(),
            ))?;
            data_page_offset.get_or_insert(spec.offset as i64);
            data_pages += 1;
            compressed_bytes += spec.compressed_size as i64;
            uncompressed_bytes += spec.uncompressed_size as i64;

            let nulls = (num_values - keys.len()) as u64;
            chunk_nulls += nulls;
            let string_bytes: i64 = keys
                .iter()
                .map(|&k| vocabulary.value_length(usize::from(k)) as i64)
                .sum();
            chunk_string_bytes += string_bytes;
            let bounds = keys.iter().fold(None, |b: Option<(u16, u16)>, &k| {
                Some(b.map_or((k, k), |(lo, hi)| (lo.min(k), hi.max(k))))
            });
            match bounds {
                None => column_index.append(true, Vec::new(), Vec::new(), nulls as i64),
                Some((lo, hi)) => {
                    chunk_min = chunk_min.min(lo);
                    chunk_max = chunk_max.max(hi);
                    if let Some((last_lo, last_hi)) = last_bounds {
                        ascending &= last_lo <= lo && last_hi <= hi;
                        descending &= last_lo >= lo && last_hi >= hi;
                    }
                    last_bounds = Some((lo, hi));
                    column_index.append(
                        false,
                        vocabulary.value(usize::from(lo)).as_bytes().to_vec(),
                        vocabulary.value(usize::from(hi)).as_bytes().to_vec(),
                        nulls as i64,
                    );
                }
            }
            add_histogram(&mut chunk_def_hist, &def_hist);
            add_histogram(&mut chunk_rep_hist, &rep_hist);
            column_index.append_histograms(&rep_hist, &def_hist);
            offset_index.append_offset_and_size(spec.offset as i64, spec.compressed_size as i32);
            offset_index.append_row_count(span.rows as i64);
            offset_index.append_unencoded_byte_array_data_bytes(Some(string_bytes));
        }
        page_writer.close()?;
        let bytes_written = sink.bytes_written() as u64;
        let bytes = Bytes::from(sink.into_inner()?);
        debug_assert_eq!(bytes.len() as i64, compressed_bytes);

        column_index.set_boundary_order(match (ascending, descending) {
            (true, _) => BoundaryOrder::ASCENDING,
            (false, true) => BoundaryOrder::DESCENDING,
            (false, false) => BoundaryOrder::UNORDERED,
        });
        let (min, max) = if self.keys.is_empty() {
            (None, None)
        } else {
            let value =
                |k: u16| ByteArray::from(vocabulary.value(usize::from(k)).as_bytes().to_vec());
            (Some(value(chunk_min)), Some(value(chunk_max)))
        };
        let statistics = Statistics::ByteArray(
            ValueStatistics::new(min, max, None, Some(chunk_nulls), false)
                .with_backwards_compatible_min_max(false),
        );
        let encodings = [Encoding::PLAIN, Encoding::RLE, Encoding::RLE_DICTIONARY];
        let metadata = ColumnChunkMetaData::builder(Arc::clone(&self.descr))
            .set_compression(self.compression)
            .set_encodings_mask(EncodingMask::new_from_encodings(encodings.iter()))
            .set_page_encoding_stats(vec![
                PageEncodingStats {
                    page_type: PageType::DICTIONARY_PAGE,
                    encoding: Encoding::PLAIN,
                    count: 1,
                },
                PageEncodingStats {
                    page_type: PageType::DATA_PAGE,
                    encoding: Encoding::RLE_DICTIONARY,
                    count: data_pages,
                },
            ])
            .set_total_compressed_size(compressed_bytes)
            .set_total_uncompressed_size(uncompressed_bytes)
            .set_num_values(self.def.len() as i64)
            .set_data_page_offset(data_page_offset.unwrap_or(0))
            .set_dictionary_page_offset(Some(dictionary_spec.offset as i64))
            .set_statistics(statistics)
            .set_unencoded_byte_array_data_bytes(Some(chunk_string_bytes))
            .set_repetition_level_histogram(chunk_rep_hist)
            .set_definition_level_histogram(chunk_def_hist)
            .build()?;
        let close = ColumnCloseResult {
            bytes_written,
            rows_written: self.rows as u64,
            metadata,
            bloom_filter: None,
            column_index: Some(column_index.build()?),
            offset_index: Some(offset_index.build()),
        };
        Ok((bytes, close))
    }
}

/// Appends a v1 data page's levels: their byte length, then the hybrid encoding.
/// `counts` gets each level's count added.
fn put_levels(levels: &[u16], bit_width: u8, out: &mut Vec<u8>, counts: &mut [i64]) {
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    hybrid::encode_counting(levels, bit_width, out, counts);
    let len = (out.len() - at - 4) as u32;
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
}

fn add_histogram(total: &mut Option<LevelHistogram>, page: &Option<LevelHistogram>) {
    if let (Some(total), Some(page)) = (total, page) {
        total.add(page);
    }
}
