//! Daemon answers that are not about one scan stream: a table's schema and data
//! version ([`TableInfo`]) and the daemon's state ([`DaemonStatus`]).
//!
//! Re-exported from [`msg`](crate::msg), where the messages that carry them live.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::{Array, RecordBatch};
use arrow_buffer::Buffer;
use arrow_ipc::reader::StreamDecoder;
use arrow_ipc::writer::{
    write_message, DictionaryTracker, IpcDataGenerator, IpcWriteContext, IpcWriteOptions,
    StreamWriter,
};
use arrow_schema::{ArrowError, Schema};
use serde::{Deserialize, Serialize};

pub use crate::scan_data::FileVersion;

/// What [`ClientMessage::Describe`](crate::msg::ClientMessage::Describe) answers.
///
/// `files` and `dirs` together are the table's data version: a result cache keyed by
/// them is stale as soon as one of them stats differently (a file rewritten, or a
/// directory whose mtime moved because a file was added or removed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableInfo {
    /// The table's Arrow schema as an Arrow IPC stream (schema message only), so that
    /// types survive exactly; see [`encode_schema`] / [`decode_schema`].
    pub schema_ipc: Vec<u8>,
    /// The table's Parquet files, in scan order.
    pub files: Vec<FileVersion>,
    /// Every directory of the table (its root first), sorted.
    pub dirs: Vec<FileVersion>,
}

impl TableInfo {
    /// The decoded schema.
    pub fn schema(&self) -> Result<Schema, ArrowError> {
        decode_schema(&self.schema_ipc)
    }
}

/// Counters of the daemon's footer cache.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CacheStatus {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that parsed a footer.
    pub misses: u64,
    /// Entries dropped to stay within the budget.
    pub evictions: u64,
    /// Entries held.
    pub entries: u64,
    /// Bytes held.
    pub bytes: u64,
    /// The budget.
    pub capacity_bytes: u64,
    /// Page indexes (one kind, one row group, one column) answered from the cache.
    pub page_index_hits: u64,
    /// Page indexes read from files.
    pub page_index_misses: u64,
    /// Page indexes held.
    pub page_indexes: u64,
}

/// Counters of the daemon's column cache (decoded column chunks of hot files).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ColumnCacheStatus {
    /// Reads (one row group's columns for one task phase) served from the cache.
    pub hits: u64,
    /// Reads that were not.
    pub misses: u64,
    /// Chunks decoded whole and kept (on their second use).
    pub admitted: u64,
    /// Chunks dropped to stay within the budget.
    pub evictions: u64,
    /// Chunks dropped because their file changed.
    pub invalidated: u64,
    /// Chunks held.
    pub entries: u64,
    /// Bytes held.
    pub bytes: u64,
    /// The budget (0: off).
    pub capacity_bytes: u64,
}

/// What [`ClientMessage::Status`](crate::msg::ClientMessage::Status) answers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DaemonStatus {
    /// The daemon's process id.
    pub pid: u32,
    /// Time since it started.
    pub uptime_ms: u64,
    /// It exits after this long without connections or scans.
    pub idle_timeout_ms: u64,
    /// Scans streaming now.
    pub scans_active: u64,
    /// Scans finished (successfully or not) since start.
    pub scans_served: u64,
    /// Scans that wrote into the ring of their connection's scan before (a session's
    /// later queries), rather than a new one.
    pub rings_reused: u64,
    /// The footer cache.
    pub metadata_cache: CacheStatus,
    /// The column cache.
    pub column_cache: ColumnCacheStatus,
    /// How its memory budget is split.
    #[serde(default)]
    pub memory: MemoryStatus,
    /// The data directory it serves.
    pub data_dir: PathBuf,
    /// Its written tables and their log.
    #[serde(default)]
    pub ingest: IngestStatus,
}

/// The daemon's written tables and write-ahead log.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct IngestStatus {
    /// Why writes are refused (a log that could not be recovered); empty when they
    /// are taken.
    pub refused: String,
    /// Rows held in memtables (acknowledged, not yet in Parquet files).
    pub memtable_rows: u64,
    /// Their bytes.
    pub memtable_bytes: u64,
    /// Commits answered (acknowledged or refused).
    pub commits: u64,
    /// Commits made durable.
    pub records: u64,
    /// `fdatasync` calls on the log.
    pub syncs: u64,
    /// Groups of commits made durable together (one write and one sync each).
    pub groups: u64,
    /// The most commits one group held.
    pub group_records_max: u64,
    /// Time in `fdatasync`, microseconds.
    pub sync_us_total: u64,
    /// Bytes written to the log.
    pub bytes: u64,
}

/// The daemon's memory budget and its parts (see `ringscan daemon run --help`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryStatus {
    /// The whole budget.
    pub budget_bytes: u64,
    /// The footer cache's part.
    pub metadata_cache_bytes: u64,
    /// The column cache's part.
    pub column_cache_bytes: u64,
    /// What all scan rings together may take (shared memory).
    pub ring_bytes: u64,
    /// What one running scan may have read ahead of its decoder.
    pub scan_bytes: u64,
    /// Scans that may run at once within the budget.
    pub max_scans: u64,
    /// The shares of the scans running now.
    pub scan_bytes_in_use: u64,
    /// Connections closed after waiting idle for their client (the idle timeout, or
    /// to make room for a new connection when all were taken).
    pub idle_connections_closed: u64,
}

/// Encodes `schema` as an Arrow IPC stream holding only the schema message.
pub fn encode_schema(schema: &Schema) -> Result<Vec<u8>, ArrowError> {
    let mut writer = StreamWriter::try_new(Vec::new(), schema)?;
    writer.finish()?;
    writer.into_inner()
}

/// How [`encode_ipc_stream`] writes: buffers aligned to 8 bytes, not arrow's default
/// 64. A point lookup's answer of one row of 21 columns was mostly padding (6.2 KB
/// with the JSON summary, 4.5 KB now), and the padding is written, sent and read past.
/// A reader copies a buffer that needs more than 8 (a decimal's 16) rather than use it
/// in place.
fn stream_options() -> Result<IpcWriteOptions, ArrowError> {
    IpcWriteOptions::try_new(8, false, arrow_ipc::MetadataVersion::V5)
}

/// `batches` of `schema` as an Arrow IPC stream (what an insert carries, and the rows
/// of a scan's inline answer).
///
/// A schema without dictionaries is encoded once per thread and its message bytes kept
/// for the next stream of an equal schema (a session's point lookups repeat one
/// schema, whose flatbuffer was a third of encoding a one-row answer); the stream is
/// byte for byte what arrow's `StreamWriter` writes.
pub fn encode_ipc_stream(schema: &Schema, batches: &[RecordBatch]) -> Result<Vec<u8>, ArrowError> {
    // Sized once, a little above the slices' own bytes (a point lookup's one-row slice
    // of a page holds the page's buffers: counting those asked for a buffer of the
    // page's size): a large COPY's stream (tens of MiB) grown by doubling copied itself
    // and faulted in twice the memory it needed (room never written costs no page).
    let arrays: usize = batches
        .iter()
        .flat_map(RecordBatch::columns)
        .map(|c| array_slice_bytes(c.as_ref()).unwrap_or(0))
        .sum();
    let room = arrays + arrays / 8 + batches.len() * 1024 + 4096;
    if has_dictionaries(schema) {
        let mut writer = StreamWriter::try_new_with_options(
            Vec::with_capacity(room),
            schema,
            stream_options()?,
        )?;
        for batch in batches {
            writer.write(batch)?;
        }
        writer.finish()?;
        return writer.into_inner();
    }
    let options = stream_options()?;
    let mut out = LAST_ENCODED_SCHEMA.with_borrow_mut(|last| -> Result<Vec<u8>, ArrowError> {
        let bytes = match last {
            Some((kept, bytes)) if kept == schema => bytes,
            _ => {
                let mut bytes = Vec::new();
                let message = IpcDataGenerator::default().schema_to_bytes_with_dictionary_tracker(
                    schema,
                    &mut DictionaryTracker::new(false),
                    &options,
                );
                write_message(&mut bytes, message, &options)?;
                &mut last.insert((schema.clone(), bytes)).1
            }
        };
        let mut out = Vec::with_capacity(bytes.len() + room);
        out.extend_from_slice(bytes);
        Ok(out)
    })?;
    let generator = IpcDataGenerator::default();
    let mut tracker = DictionaryTracker::new(false);
    let mut context = IpcWriteContext::default();
    for batch in batches {
        if batch.schema_ref().fields() != schema.fields() {
            return Err(ArrowError::InvalidArgumentError(
                "a batch does not have the stream's schema".into(),
            ));
        }
        let (dictionaries, message) =
            generator.encode(batch, &mut tracker, &options, &mut context)?;
        for dictionary in dictionaries {
            write_message(&mut out, dictionary, &options)?;
        }
        write_message(&mut out, message, &options)?;
    }
    // The end of the stream: a continuation marker and a zero length.
    out.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
    Ok(out)
}

/// arrow's `ArrayData::get_slice_memory_size` of `array`, the same figure, without its
/// copy of the array's data for the common types (fixed-width, boolean, strings and
/// binaries): a point lookup sized its one-row answer of 21 columns twice, and each
/// copy (vectors of buffers, reference counts) made that 2% of the daemon's time.
pub fn array_slice_bytes(array: &dyn Array) -> Option<usize> {
    use arrow_array::cast::AsArray;
    use arrow_schema::DataType as D;
    let len = array.len();
    // A null buffer without a null is left out of the array's data, as arrow does.
    let nulls = match array.nulls() {
        Some(n) if n.null_count() > 0 => len.div_ceil(8),
        _ => 0,
    };
    let values = match array.data_type() {
        D::Boolean => len.div_ceil(8),
        D::Utf8 => span_bytes(array.as_string::<i32>().value_offsets(), 4),
        D::LargeUtf8 => span_bytes(array.as_string::<i64>().value_offsets(), 8),
        D::Binary => span_bytes(array.as_binary::<i32>().value_offsets(), 4),
        D::LargeBinary => span_bytes(array.as_binary::<i64>().value_offsets(), 8),
        t => match t.primitive_width() {
            Some(width) => len.checked_mul(width)?,
            None => return array.to_data().get_slice_memory_size().ok(),
        },
    };
    values.checked_add(nulls)
}

/// The bytes of a byte array's slice with `offsets` (one more than its rows): its
/// offsets of `width` bytes and the values between the first and last.
fn span_bytes<O: arrow_array::OffsetSizeTrait>(offsets: &[O], width: usize) -> usize {
    let values = match (offsets.first(), offsets.last()) {
        (Some(first), Some(last)) => (*last - *first).as_usize(),
        _ => 0,
    };
    offsets.len() * width + values
}

/// Decodes what [`encode_schema`] wrote (any bytes: a bad input is an error).
pub fn decode_schema(bytes: &[u8]) -> Result<Schema, ArrowError> {
    read_ipc_stream(bytes).map(|(schema, _)| schema)
}

/// The schema and batches of an Arrow IPC stream held in memory, whatever its bytes
/// (they come from another process).
///
/// Not arrow's `StreamReader`: it allocates the lengths a message header claims before
/// reading them (2 GiB for the 8 bytes `ff ff ff ff ff ff ff 7f`, more than memory for
/// a huge body length: an abort), so the bounded, push-style `StreamDecoder`, whose
/// buffers only grow with the bytes given. And arrow-ipc 59 converts a schema message
/// with `unwrap`s (an unknown type id panics), so a panic while decoding is an error
/// here, as in the ring's codec.
pub fn read_ipc_stream(bytes: &[u8]) -> Result<(Schema, Vec<RecordBatch>), ArrowError> {
    read_ipc_buffer(Buffer::from(bytes))
}

/// [`read_ipc_stream`] of bytes already in a [`Buffer`]: the batches' arrays are slices
/// of it where their bytes are aligned (no copy), copied where they are not.
pub fn read_ipc_buffer(buffer: Buffer) -> Result<(Schema, Vec<RecordBatch>), ArrowError> {
    let schema_bytes = first_message(&buffer).map(|len| &buffer.as_slice()[..len]);
    let known = LAST_SCHEMA.with_borrow(|last| match (last, schema_bytes) {
        (Some((bytes, schema)), Some(now)) if bytes.as_slice() == now => Some(Arc::clone(schema)),
        _ => None,
    });
    if let (Some(schema), Some(skip)) = (known, schema_bytes.map(<[u8]>::len)) {
        let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            batches_of_known_schema(&buffer, skip, &schema)
        }))
        .map_err(|_| {
            ArrowError::IpcError("unreadable IPC message (the decoder panicked)".into())
        })?;
        if let Some(batches) = read? {
            return Ok((schema.as_ref().clone(), batches));
        }
    }
    let decoded = decode_stream(buffer.clone())?;
    if let Some(bytes) = schema_bytes {
        let schema = Arc::new(decoded.0.clone());
        if !has_dictionaries(&schema) {
            LAST_SCHEMA.with_borrow_mut(|last| *last = Some((bytes.to_vec(), schema)));
        }
    }
    Ok(decoded)
}

thread_local! {
    /// The schema [`encode_ipc_stream`] last encoded on this thread, and its message.
    static LAST_ENCODED_SCHEMA: std::cell::RefCell<Option<(Schema, Vec<u8>)>> =
        const { std::cell::RefCell::new(None) };
    /// The schema message of the last stream [`read_ipc_buffer`] decoded on this thread,
    /// and its schema: one client's answers repeat one schema, whose decoding (verifying
    /// its flatbuffer, converting every field) was a third of decoding a one-row answer.
    static LAST_SCHEMA: std::cell::RefCell<Option<(Vec<u8>, Arc<Schema>)>> =
        const { std::cell::RefCell::new(None) };
}

/// The length of the stream's first message (continuation marker, length, metadata;
/// a schema has no body), if the bytes hold one whole.
fn first_message(buffer: &Buffer) -> Option<usize> {
    let bytes = buffer.as_slice();
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
    };
    if word(0)? != u32::MAX {
        return None;
    }
    let len = 8usize.checked_add(usize::try_from(word(4)?).ok()?)?;
    (len > 8 && len <= bytes.len()).then_some(len)
}

/// The batches of a stream whose first `skip` bytes are the message of `schema`
/// (seen before): its record batch messages decoded against it, up to the end marker.
/// `None` where the stream has a message this reading does not take (a dictionary):
/// the full decoder reads it.
fn batches_of_known_schema(
    buffer: &Buffer,
    skip: usize,
    schema: &Arc<Schema>,
) -> Result<Option<Vec<RecordBatch>>, ArrowError> {
    let bytes = buffer.as_slice();
    let cut = || ArrowError::IpcError("IPC stream cut short".into());
    let word = |at: usize| -> Result<u32, ArrowError> {
        let b = bytes
            .get(at..at.checked_add(4).ok_or_else(cut)?)
            .ok_or_else(cut)?;
        Ok(u32::from_le_bytes(b.try_into().map_err(|_| cut())?))
    };
    let mut at = skip;
    let mut batches = Vec::new();
    let no_dictionaries = HashMap::new();
    loop {
        let mut size = word(at)?;
        at += 4;
        if size == u32::MAX {
            size = word(at)?;
            at += 4;
        }
        if size == 0 {
            return Ok(Some(batches));
        }
        let size = usize::try_from(size).map_err(|_| cut())?;
        let end = at
            .checked_add(size)
            .filter(|&e| e <= bytes.len())
            .ok_or_else(cut)?;
        let message =
            arrow_ipc::convert::MessageBuffer::try_new(buffer.slice_with_length(at, size))?;
        at = end;
        let message = message.as_ref();
        let body_len = usize::try_from(message.bodyLength()).map_err(|_| cut())?;
        let body_end = at
            .checked_add(body_len)
            .filter(|&e| e <= bytes.len())
            .ok_or_else(cut)?;
        let body = buffer.slice_with_length(at, body_len);
        at = body_end;
        match message.header_type() {
            arrow_ipc::MessageHeader::RecordBatch => {
                let Some(batch) = message.header_as_record_batch() else {
                    return Ok(None);
                };
                batches.push(arrow_ipc::reader::read_record_batch(
                    &body,
                    batch,
                    Arc::clone(schema),
                    &no_dictionaries,
                    None,
                    &message.version(),
                )?);
            }
            arrow_ipc::MessageHeader::NONE => {}
            _ => return Ok(None),
        }
    }
}

/// Whether any field (nested ones included) is dictionary-encoded.
fn has_dictionaries(schema: &Schema) -> bool {
    fn dictionary(t: &arrow_schema::DataType) -> bool {
        use arrow_schema::DataType as T;
        match t {
            T::Dictionary(..) => true,
            T::List(f) | T::LargeList(f) | T::FixedSizeList(f, _) | T::Map(f, _) => {
                dictionary(f.data_type())
            }
            T::ListView(f) | T::LargeListView(f) => dictionary(f.data_type()),
            T::Struct(fields) => fields.iter().any(|f| dictionary(f.data_type())),
            T::Union(fields, _) => fields.iter().any(|(_, f)| dictionary(f.data_type())),
            T::RunEndEncoded(a, b) => dictionary(a.data_type()) || dictionary(b.data_type()),
            _ => false,
        }
    }
    schema.fields().iter().any(|f| dictionary(f.data_type()))
}

/// [`read_ipc_buffer`] by arrow's decoder, whatever the stream holds.
fn decode_stream(mut buffer: Buffer) -> Result<(Schema, Vec<RecordBatch>), ArrowError> {
    let mut decoder = StreamDecoder::new();
    let mut batches = Vec::new();
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        while let Some(batch) = decoder.decode(&mut buffer)? {
            batches.push(batch);
        }
        decoder.finish()
    }))
    .map_err(|_| ArrowError::IpcError("unreadable IPC message (the decoder panicked)".into()))??;
    let schema = decoder
        .schema()
        .ok_or_else(|| ArrowError::IpcError("IPC stream without a schema".into()))?;
    Ok((schema.as_ref().clone(), batches))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use arrow_schema::{DataType, Field, TimeUnit};

    use super::*;

    #[test]
    fn slice_bytes_are_arrows_figure_for_every_slice() {
        use arrow_array::{
            ArrayRef, BinaryArray, BooleanArray, Decimal128Array, Int16Array, Int64Array,
            LargeStringArray, ListArray, StringArray, TimestampMicrosecondArray,
        };
        let n: usize = 37;
        let text = |i: usize| (!i.is_multiple_of(5)).then(|| "x".repeat(i % 9));
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(0..n as i64)),
            Arc::new(Int16Array::from_iter(
                (0..n).map(|i| (!i.is_multiple_of(3)).then_some(i as i16)),
            )),
            Arc::new(BooleanArray::from_iter(
                (0..n).map(|i| (i % 4 != 1).then_some(i % 2 == 0)),
            )),
            Arc::new(StringArray::from_iter((0..n).map(text))),
            Arc::new(StringArray::from_iter_values((0..n).map(|i| "y".repeat(i)))),
            Arc::new(LargeStringArray::from_iter((0..n).map(text))),
            Arc::new(BinaryArray::from_iter(
                (0..n).map(|i| text(i).map(String::into_bytes)),
            )),
            Arc::new(TimestampMicrosecondArray::from_iter_values(0..n as i64).with_timezone("UTC")),
            Arc::new(Decimal128Array::from_iter_values(0..n as i128)),
            // Not one of the quick types: arrow's own count.
            Arc::new(ListArray::from_iter_primitive::<
                arrow_array::types::Int32Type,
                _,
                _,
            >(
                (0..n).map(|i| Some(vec![Some(i as i32); i % 4]))
            )),
        ];
        for array in &arrays {
            for offset in [0, 1, 7, 8, 20, n] {
                for len in [0, 1, 2, 9, 17] {
                    if offset + len > n {
                        continue;
                    }
                    let slice = array.slice(offset, len);
                    assert_eq!(
                        array_slice_bytes(slice.as_ref()),
                        Some(slice.to_data().get_slice_memory_size().unwrap()),
                        "{} slice {offset}+{len}",
                        array.data_type()
                    );
                }
            }
        }
    }

    /// A schema of one dictionary column, and a batch of it.
    fn dictionary_batch() -> (Arc<Schema>, RecordBatch) {
        use arrow_array::types::Int32Type;
        use arrow_array::DictionaryArray;
        let schema = Arc::new(Schema::new(vec![Field::new(
            "d",
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            true,
        )]));
        let keys: DictionaryArray<Int32Type> = ["a", "b", "a"].into_iter().collect();
        let batch = RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(keys)]).unwrap();
        (schema, batch)
    }

    /// Buffers written 8-aligned read back equal in place or copied: a decimal (which
    /// wants 16) among 8-byte and 1-byte columns, sliced so that offsets are not zero,
    /// from a buffer placed at every offset of 0 to 15 bytes.
    #[test]
    fn eight_byte_aligned_streams_read_back_equal_wherever_they_lie() {
        use arrow_array::{ArrayRef, BooleanArray, Decimal128Array, Int64Array, StringArray};
        let schema = Arc::new(Schema::new(vec![
            Field::new("d", DataType::Decimal128(12, 2), true),
            Field::new("k", DataType::Int64, false),
            Field::new("b", DataType::Boolean, true),
            Field::new("s", DataType::Utf8, true),
        ]));
        let n = 37;
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(
                    Decimal128Array::from_iter((0..n).map(|i| (i % 4 != 0).then_some(i * 12_345)))
                        .with_precision_and_scale(12, 2)
                        .unwrap(),
                ) as ArrayRef,
                Arc::new(Int64Array::from_iter_values(0..n as i64)),
                Arc::new(BooleanArray::from_iter(
                    (0..n).map(|i| (i % 3 != 0).then_some(i % 2 == 0)),
                )),
                Arc::new(StringArray::from_iter(
                    (0..n).map(|i| (i % 5 != 0).then(|| format!("s{i}"))),
                )),
            ],
        )
        .unwrap();
        let batches = [batch.slice(3, 17), batch.slice(20, 1)];
        let stream = encode_ipc_stream(&schema, &batches).unwrap();
        for shift in 0..16 {
            let mut placed = arrow_buffer::MutableBuffer::new(stream.len() + 16);
            placed.extend_from_slice(&vec![0u8; shift]);
            placed.extend_from_slice(&stream);
            let buffer = Buffer::from(placed).slice(shift);
            let (back_schema, back) = read_ipc_buffer(buffer).unwrap();
            assert_eq!(back_schema, *schema);
            assert_eq!(back.len(), 2);
            for (got, want) in back.iter().zip(&batches) {
                assert_eq!(got, want, "placed {shift} bytes in");
            }
        }
    }

    /// What arrow's `StreamWriter` writes for `batches`: the reference of the kept-
    /// schema encoder.
    fn reference_stream(schema: &Schema, batches: &[RecordBatch]) -> Vec<u8> {
        let options = stream_options().unwrap();
        let mut writer = StreamWriter::try_new_with_options(Vec::new(), schema, options).unwrap();
        for batch in batches {
            writer.write(batch).unwrap();
        }
        writer.finish().unwrap();
        writer.into_inner().unwrap()
    }

    /// Streams encoded with the schema message kept from the last stream are arrow's
    /// bytes exactly: schemas alternating (kept, replaced, kept again), with metadata,
    /// nested and dictionary fields (arrow's writer), sliced batches, no batch; a batch
    /// of another schema is an error.
    #[test]
    fn a_kept_schema_encodes_like_arrows_writer() {
        use arrow_array::{ArrayRef, Float64Array, Int64Array, ListArray, StringArray};
        let plain = Arc::new(Schema::new_with_metadata(
            vec![
                Field::new("k", DataType::Int64, false),
                Field::new("s", DataType::Utf8, true),
                Field::new_list("l", Field::new("item", DataType::Int64, true), true),
            ],
            HashMap::from([("ringscan.dataset".to_owned(), "t".to_owned())]),
        ));
        let rows = |n: i64| {
            RecordBatch::try_new(
                Arc::clone(&plain),
                vec![
                    Arc::new(Int64Array::from_iter_values(0..n)) as ArrayRef,
                    Arc::new(StringArray::from_iter(
                        (0..n).map(|i| (i % 3 != 0).then(|| format!("v{i}"))),
                    )),
                    Arc::new(ListArray::from_iter_primitive::<
                        arrow_array::types::Int64Type,
                        _,
                        _,
                    >(
                        (0..n).map(|i| (i % 2 == 0).then(|| vec![Some(i), None]))
                    )),
                ],
            )
            .unwrap()
        };
        let other = Arc::new(Schema::new(vec![Field::new("x", DataType::Float64, true)]));
        let floats = RecordBatch::try_new(
            Arc::clone(&other),
            vec![Arc::new(Float64Array::from(vec![Some(1.5), None, Some(-0.0)])) as ArrayRef],
        )
        .unwrap();
        let (dict, dicts) = dictionary_batch();
        let cases: Vec<(&Schema, Vec<RecordBatch>)> = vec![
            (&plain, vec![rows(5)]),
            (&plain, vec![rows(4096).slice(1000, 1), rows(7).slice(3, 4)]),
            (&plain, vec![]),
            (&other, vec![floats.clone()]),
            (&plain, vec![rows(1), rows(0), rows(300)]),
            (&dict, vec![dicts.clone(), dicts.slice(1, 2)]),
            (&other, vec![floats.slice(1, 1)]),
        ];
        for (schema, batches) in &cases {
            let ours = encode_ipc_stream(schema, batches).unwrap();
            assert_eq!(ours, reference_stream(schema, batches), "{schema:?}");
            let (back, read) = read_ipc_stream(&ours).unwrap();
            assert_eq!(&back, *schema);
            assert_eq!(read.len(), batches.len());
        }
        assert!(encode_ipc_stream(&plain, &[floats]).is_err());
    }

    /// Streams read again with their schema known (the last one decoded on the
    /// thread) give what arrow's decoder gives: batches of every shape, no batch, a
    /// schema that changes, dictionaries (read by the decoder), and a damaged batch
    /// (an error, no panic).
    #[test]
    fn a_known_schema_reads_like_the_decoder() {
        use arrow_array::types::Int64Type;
        use arrow_array::{ArrayRef, Int64Array, ListArray, StringArray};
        let ints = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("s", DataType::Utf8, true),
            Field::new_list("l", Field::new("item", DataType::Int64, true), true),
        ]));
        let batch = |n: i64| {
            let k: ArrayRef = Arc::new(Int64Array::from_iter_values(0..n));
            let s: ArrayRef = Arc::new(StringArray::from_iter(
                (0..n).map(|i| (i % 3 != 0).then(|| format!("v{i}"))),
            ));
            let l: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(
                (0..n).map(|i| (i % 4 != 0).then(|| vec![Some(i), None])),
            ));
            RecordBatch::try_new(Arc::clone(&ints), vec![k, s, l]).expect("batch")
        };
        let other = Arc::new(Schema::new(vec![Field::new("x", DataType::Float64, true)]));
        let (dict, dict_batch) = dictionary_batch();
        let streams = [
            encode_ipc_stream(&ints, &[batch(5)]).expect("encode"),
            encode_ipc_stream(&ints, &[batch(1), batch(0), batch(700)]).expect("encode"),
            encode_ipc_stream(&ints, &[]).expect("encode"),
            encode_ipc_stream(&other, &[]).expect("encode"),
            encode_ipc_stream(&ints, &[batch(9)]).expect("encode"),
            encode_ipc_stream(&dict, std::slice::from_ref(&dict_batch)).expect("encode"),
            encode_ipc_stream(&dict, std::slice::from_ref(&dict_batch)).expect("encode"),
        ];
        for (i, stream) in streams.iter().enumerate() {
            let want = decode_stream(Buffer::from(stream.as_slice())).expect("decoder");
            // Twice: the second time (at least) with the schema known.
            for _ in 0..2 {
                let got = read_ipc_buffer(Buffer::from(stream.as_slice())).expect("read");
                assert_eq!(got, want, "stream {i}");
            }
        }
        let known = streams[4].clone();
        let _ = read_ipc_buffer(Buffer::from(known.as_slice())).expect("read");
        let skip = first_message(&Buffer::from(known.as_slice())).expect("schema message");
        assert!(
            batches_of_known_schema(&Buffer::from(known.as_slice()), skip, &ints)
                .expect("read")
                .is_some(),
            "read with the known schema"
        );
        // Damaged after the schema: every cut and a flipped byte give an error or the
        // decoder's answer, never a panic.
        for cut in skip..known.len() {
            let _ = read_ipc_buffer(Buffer::from(&known[..cut]));
        }
        for at in skip..known.len() {
            let mut bad = known.clone();
            bad[at] ^= 0x5a;
            let _ = read_ipc_buffer(Buffer::from(bad.as_slice()));
        }
    }

    #[test]
    fn schemas_round_trip_exactly() {
        let schema = Schema::new(vec![
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                false,
            ),
            Field::new(
                "sym",
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
                true,
            ),
            Field::new(
                "tags",
                DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
                true,
            ),
            Field::new("d", DataType::Decimal128(18, 3), true),
        ])
        .with_metadata(HashMap::from([("k".to_owned(), "v".to_owned())]));
        let bytes = encode_schema(&schema).unwrap();
        assert_eq!(decode_schema(&bytes).unwrap(), schema);
        let empty = Schema::empty();
        assert_eq!(
            decode_schema(&encode_schema(&empty).unwrap()).unwrap(),
            empty
        );
    }

    /// Found by the `messages` fuzz target: arrow's `StreamReader` allocated the 2 GiB
    /// this 8-byte stream's message header claims (and aborted on a larger body length).
    #[test]
    fn claimed_ipc_lengths_are_not_allocated_up_front() {
        let claims_2_gib = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
        assert!(decode_schema(&claims_2_gib).is_err());
        assert!(crate::column_stats::decode_min_max(&claims_2_gib).is_err());
    }

    #[test]
    fn garbage_schema_bytes_are_an_error() {
        assert!(decode_schema(b"").is_err());
        assert!(decode_schema(b"not arrow at all").is_err());
        let bytes =
            encode_schema(&Schema::new(vec![Field::new("a", DataType::Int8, true)])).unwrap();
        assert!(decode_schema(&bytes[..bytes.len() / 2]).is_err());
    }
}
