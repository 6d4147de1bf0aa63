//! Page compression for the dictionary writer: the codecs `generate` offers, through
//! the same crates (and so the same formats) parquet's own writer uses.

use parquet::basic::Compression;
use parquet::errors::ParquetError;

/// A page compressor, reused for every page of a column chunk.
pub(crate) enum PageCodec {
    /// Pages stored as they are.
    None,
    /// zstd at a fixed level, with one context kept across pages.
    Zstd(Box<zstd::bulk::Compressor<'static>>),
    /// LZ4 block format without a frame (Parquet's LZ4_RAW).
    Lz4Raw,
    /// Raw snappy.
    Snappy(Box<snap::raw::Encoder>),
}

impl std::fmt::Debug for PageCodec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::None => "PageCodec::None",
            Self::Zstd(_) => "PageCodec::Zstd",
            Self::Lz4Raw => "PageCodec::Lz4Raw",
            Self::Snappy(_) => "PageCodec::Snappy",
        })
    }
}

impl PageCodec {
    /// The compressor for `compression`; the codecs `generate` does not offer are an
    /// error.
    pub(crate) fn new(compression: Compression) -> Result<Self, ParquetError> {
        Ok(match compression {
            Compression::UNCOMPRESSED => Self::None,
            Compression::ZSTD(level) => Self::Zstd(Box::new(
                zstd::bulk::Compressor::new(level.compression_level())
                    .map_err(|e| ParquetError::External(Box::new(e)))?,
            )),
            Compression::LZ4_RAW => Self::Lz4Raw,
            Compression::SNAPPY => Self::Snappy(Box::new(snap::raw::Encoder::new())),
            other => {
                return Err(ParquetError::NYI(format!(
                    "the dictionary writer does not compress with {other}"
                )))
            }
        })
    }

    /// Appends `input`, compressed, to `out`.
    pub(crate) fn compress(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), ParquetError> {
        let start = out.len();
        match self {
            Self::None => out.extend_from_slice(input),
            Self::Zstd(compressor) => {
                out.reserve(zstd::zstd_safe::compress_bound(input.len()));
                // A plain `Vec` would be written from its start; the cursor appends.
                let mut cursor = std::io::Cursor::new(out);
                cursor.set_position(start as u64);
                compressor
                    .compress_to_buffer(input, &mut cursor)
                    .map_err(|e| ParquetError::External(Box::new(e)))?;
            }
            Self::Lz4Raw => {
                out.resize(
                    start + lz4_flex::block::get_maximum_output_size(input.len()),
                    0,
                );
                let n = lz4_flex::block::compress_into(input, &mut out[start..])
                    .map_err(|e| ParquetError::External(Box::new(e)))?;
                out.truncate(start + n);
            }
            Self::Snappy(encoder) => {
                out.resize(start + snap::raw::max_compress_len(input.len()), 0);
                let n = encoder
                    .compress(input, &mut out[start..])
                    .map_err(|e| ParquetError::External(Box::new(e)))?;
                out.truncate(start + n);
            }
        }
        Ok(())
    }
}
