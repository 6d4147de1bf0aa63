//! Arrow IPC encoding of record payloads, and zero-copy decoding.
//!
//! Encoding uses [`StreamEncoder`], which returns the message as a list of
//! [`Buffer`]s that *share* the batch's column buffers (no intermediate body `Vec`), so
//! the only copy of column data is the one into ring space. Decoding walks the framed
//! messages of one record itself and calls arrow's [`RecordBatchDecoder`] with
//! `require_alignment(true)` on a body that points into the mapping: a misaligned
//! buffer is an error, never a silent copy.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_buffer::Buffer;
use arrow_data::ArrayData;
use arrow_ipc::reader::{read_dictionary, RecordBatchDecoder};
use arrow_ipc::writer::{
    write_message, DictionaryTracker, IpcDataGenerator, IpcWriteOptions, StreamEncoder,
};
use arrow_ipc::{root_as_message, MessageHeader};
use arrow_schema::{ArrowError, DataType, Schema, SchemaRef};

use crate::layout::RECORD_ALIGN;

/// Marks an encapsulated IPC message (arrow_ipc keeps its constant private).
const CONTINUATION_MARKER: [u8; 4] = [0xff; 4];

/// Why a payload could not be decoded.
#[derive(Debug)]
pub(crate) enum DecodeError {
    /// The framing or flatbuffers are invalid.
    Corrupt(String),
    /// A buffer is not aligned for zero-copy import.
    Misaligned(String),
    /// Arrow rejected the message (validation of offsets, lengths, types...).
    Arrow(ArrowError),
}

/// The encoded IPC messages of one batch record, as shared pieces.
#[derive(Debug)]
pub(crate) struct EncodedBatch {
    pub(crate) parts: Vec<Buffer>,
    pub(crate) len: usize,
}

/// Encodes the schema record and then batch records.
pub(crate) struct BatchEncoder {
    encoder: StreamEncoder,
    /// `StreamEncoder` prepends the schema message to its first output; we already sent
    /// the schema as its own record, so that prefix is dropped once.
    skip_schema_bytes: Option<usize>,
    schema: SchemaRef,
}

impl std::fmt::Debug for BatchEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchEncoder")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl BatchEncoder {
    /// Returns the encoder and the framed schema message (the schema record's payload).
    pub(crate) fn new(schema: SchemaRef) -> Result<(Self, Vec<u8>), ArrowError> {
        // 64-byte alignment (the default, stated here because zero-copy depends on it):
        // the metadata is padded to 64 and every body buffer to 64, so each buffer starts
        // 64-aligned relative to a 64-aligned payload.
        let options = IpcWriteOptions::try_new(64, false, arrow_ipc::MetadataVersion::V5)?;
        let schema_bytes = schema_message(&schema, &options)?;
        let encoder = StreamEncoder::try_new_with_options(&schema, options)?;
        Ok((
            Self {
                encoder,
                skip_schema_bytes: Some(schema_bytes.len()),
                schema,
            },
            schema_bytes,
        ))
    }

    pub(crate) fn encode(&mut self, batch: &RecordBatch) -> Result<EncodedBatch, ArrowError> {
        if batch.schema_ref().fields() != self.schema.fields() {
            return Err(ArrowError::SchemaError(format!(
                "batch schema {:?} differs from the ring's schema {:?}",
                batch.schema_ref(),
                self.schema
            )));
        }
        let mut parts = self.encoder.encode(batch)?;
        if let Some(mut skip) = self.skip_schema_bytes.take() {
            let mut n = 0;
            while skip > 0 && n < parts.len() {
                if parts[n].len() > skip {
                    return Err(ArrowError::IpcError(
                        "schema message does not end on a buffer boundary".into(),
                    ));
                }
                skip -= parts[n].len();
                n += 1;
            }
            if skip != 0 {
                return Err(ArrowError::IpcError("schema message missing".into()));
            }
            parts.drain(..n);
        }
        let len = parts.iter().map(Buffer::len).sum();
        Ok(EncodedBatch { parts, len })
    }
}

/// Schemas encoded lately, with their framed schema messages: a session's scans ask
/// for the same few schemas again and again (each point lookup of a prepared
/// statement), and building the flatbuffer was a few percent of such a scan.
static SCHEMA_MESSAGES: std::sync::Mutex<Vec<(SchemaRef, Vec<u8>)>> =
    std::sync::Mutex::new(Vec::new());
/// Schemas kept in [`SCHEMA_MESSAGES`].
const SCHEMA_MESSAGES_KEPT: usize = 16;

/// The framed IPC message of `schema`: from [`SCHEMA_MESSAGES`] when an equal schema
/// was encoded lately.
fn schema_message(schema: &SchemaRef, options: &IpcWriteOptions) -> Result<Vec<u8>, ArrowError> {
    let mut kept = SCHEMA_MESSAGES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(i) = kept
        .iter()
        .position(|(s, _)| Arc::ptr_eq(s, schema) || **s == **schema)
    {
        // Most recent first.
        let entry = kept.remove(i);
        let bytes = entry.1.clone();
        kept.insert(0, entry);
        return Ok(bytes);
    }
    drop(kept);
    let encoded = IpcDataGenerator::default().schema_to_bytes_with_dictionary_tracker(
        schema,
        &mut DictionaryTracker::new(false),
        options,
    );
    let mut bytes = Vec::new();
    write_message(&mut bytes, encoded, options)?;
    let mut kept = SCHEMA_MESSAGES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    kept.insert(0, (Arc::clone(schema), bytes.clone()));
    kept.truncate(SCHEMA_MESSAGES_KEPT);
    Ok(bytes)
}

/// One framed message inside a payload: `[0xFFFFFFFF][meta_len: i32][meta][body]`.
struct Framed<'a> {
    /// The verified flatbuffer message.
    message: arrow_ipc::Message<'a>,
    body: std::ops::Range<usize>,
}

fn next_message(payload: &[u8], at: usize) -> Result<Framed<'_>, DecodeError> {
    let corrupt = |what: String| DecodeError::Corrupt(what);
    let prefix = payload
        .get(at..at + 8)
        .ok_or_else(|| corrupt(format!("truncated message prefix at byte {at}")))?;
    if prefix[..4] != CONTINUATION_MARKER {
        return Err(corrupt(format!("missing continuation marker at byte {at}")));
    }
    let meta_len = i32::from_le_bytes([prefix[4], prefix[5], prefix[6], prefix[7]]);
    let meta_len = usize::try_from(meta_len)
        .map_err(|_| corrupt(format!("negative metadata length at byte {at}")))?;
    let meta_start = at + 8;
    let meta_end = meta_start
        .checked_add(meta_len)
        .filter(|&e| e <= payload.len())
        .ok_or_else(|| corrupt(format!("metadata length {meta_len} overruns the record")))?;
    let message = root_as_message(&payload[meta_start..meta_end])
        .map_err(|e| corrupt(format!("invalid message flatbuffer: {e}")))?;
    let body_len = usize::try_from(message.bodyLength())
        .map_err(|_| corrupt("negative body length".into()))?;
    let body_end = meta_end
        .checked_add(body_len)
        .filter(|&e| e <= payload.len())
        .ok_or_else(|| corrupt(format!("body length {body_len} overruns the record")))?;
    Ok(Framed {
        message,
        body: meta_end..body_end,
    })
}

/// Decodes the schema record's payload.
/// [`decode_schema`] through a small cache of the schemas decoded last, by their exact
/// bytes: a client scanning one table over and over decodes its schema once, not at
/// every scan (a point lookup spent about 4% of its time there).
pub(crate) fn decode_schema_cached(payload: &[u8]) -> Result<SchemaRef, DecodeError> {
    use std::sync::{Mutex, PoisonError};
    const KEPT: usize = 16;
    static KEPT_SCHEMAS: Mutex<Vec<(Vec<u8>, SchemaRef)>> = Mutex::new(Vec::new());
    let lookup = || {
        let kept = KEPT_SCHEMAS.lock().unwrap_or_else(PoisonError::into_inner);
        kept.iter()
            .find(|(bytes, _)| bytes.as_slice() == payload)
            .map(|(_, schema)| Arc::clone(schema))
    };
    if let Some(schema) = lookup() {
        return Ok(schema);
    }
    let schema = Arc::new(decode_schema(payload)?);
    let mut kept = KEPT_SCHEMAS.lock().unwrap_or_else(PoisonError::into_inner);
    if kept.len() >= KEPT {
        kept.remove(0);
    }
    kept.push((payload.to_vec(), Arc::clone(&schema)));
    Ok(schema)
}

pub(crate) fn decode_schema(payload: &[u8]) -> Result<Schema, DecodeError> {
    let framed = next_message(payload, 0)?;
    if framed.body.end != payload.len() {
        return Err(DecodeError::Corrupt(
            "trailing bytes after the schema".into(),
        ));
    }
    let schema = framed
        .message
        .header_as_schema()
        .ok_or_else(|| DecodeError::Corrupt("first record is not a schema message".into()))?;
    // arrow-ipc 59 has no fallible flatbuffer → schema conversion: check what its
    // `fb_to_schema` would unwrap, and turn any panic left (an unknown type id in a
    // field) into an error, since the segment is as untrusted as a network peer.
    if schema.fields().is_none() {
        return Err(DecodeError::Corrupt("schema message without fields".into()));
    }
    if schema.endianness() != arrow_ipc::Endianness::Little {
        return Err(DecodeError::Corrupt("big-endian schema".into()));
    }
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        arrow_ipc::convert::fb_to_schema(schema)
    }))
    .map_err(|_| DecodeError::Corrupt("schema message with an unreadable field".into()))
}

/// What arrow's `RecordBatch::try_new` and `ArrayData::validate_full` check, for a
/// batch decoded without validation ([`crate::sys::deferred_validation`]): the columns
/// match the schema and the row count, and every array is valid, its children too.
fn validate_batch(schema: &Schema, batch: &RecordBatch) -> Result<(), ArrowError> {
    let invalid = |m: String| Err(ArrowError::InvalidArgumentError(m));
    if batch.num_columns() != schema.fields().len() {
        return invalid(format!(
            "{} columns for a schema of {}",
            batch.num_columns(),
            schema.fields().len()
        ));
    }
    for (column, field) in batch.columns().iter().zip(schema.fields()) {
        if column.data_type() != field.data_type() {
            return invalid(format!(
                "column {} is {}, the schema says {}",
                field.name(),
                column.data_type(),
                field.data_type()
            ));
        }
        if column.len() != batch.num_rows() {
            return invalid(format!(
                "column {} has {} rows, the batch {}",
                field.name(),
                column.len(),
                batch.num_rows()
            ));
        }
        if !field.is_nullable() && column.null_count() > 0 {
            return invalid(format!("non-nullable column {} holds nulls", field.name()));
        }
        validate_array(&column.to_data())?;
    }
    Ok(())
}

/// Whether a column of type `data_type` holds a type `is` says yes to, at any depth.
fn holds(data_type: &DataType, is: fn(&DataType) -> bool) -> bool {
    if is(data_type) {
        return true;
    }
    match data_type {
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::FixedSizeList(f, _)
        | DataType::Map(f, _) => holds(f.data_type(), is),
        DataType::Struct(fields) => fields.iter().any(|f| holds(f.data_type(), is)),
        DataType::Union(fields, _) => fields.iter().any(|(_, f)| holds(f.data_type(), is)),
        DataType::Dictionary(_, values) => holds(values, is),
        DataType::RunEndEncoded(_, values) => holds(values.data_type(), is),
        _ => false,
    }
}

/// `ArrayData::validate_full`, with string views checked by [`validate_string_views`]
/// and ASCII strings by [`ascii_strings`].
fn validate_array(data: &ArrayData) -> Result<(), ArrowError> {
    data.validate()?;
    data.validate_nulls()?;
    match data.data_type() {
        DataType::Utf8View => validate_string_views(data)?,
        DataType::Utf8 if ascii_strings::<i32>(data) => {}
        DataType::LargeUtf8 if ascii_strings::<i64>(data) => {}
        _ => data.validate_values()?,
    }
    data.child_data().iter().try_for_each(validate_array)
}

/// Whether the strings of `data` (offsets of type `O`; its buffers' sizes checked by
/// `ArrayData::validate`) pass arrow's value check on a fast path: offsets that never
/// fall, all within the values, and nothing but ASCII between the first and the last
/// (so valid UTF-8, each offset on a character boundary). `false` leaves the array to
/// arrow's check, which finds what is wrong, if anything. arrow's walks the offsets
/// one `Result` at a time: a tenth of a host's CPU for a wide string result.
fn ascii_strings<O: arrow_buffer::ArrowNativeType + Into<i64>>(data: &ArrayData) -> bool {
    let (Some(offsets), Some(values)) = (data.buffers().first(), data.buffers().get(1)) else {
        return false;
    };
    let width = std::mem::size_of::<O>();
    if offsets.len() % width != 0 || offsets.as_ptr().align_offset(width) != 0 {
        return false;
    }
    let offsets: &[O] = offsets.typed_data();
    let Some(offsets) = offsets.get(data.offset()..=data.offset() + data.len()) else {
        return false;
    };
    let (first, last) = (offsets[0].into(), offsets[offsets.len() - 1].into());
    let (Ok(first), Ok(last)) = (usize::try_from(first), usize::try_from(last)) else {
        return false;
    };
    if first > last || last > values.len() {
        return false;
    }
    // No early exit: the loop vectorizes.
    let rising = offsets
        .iter()
        .zip(&offsets[1..])
        .fold(true, |ok, (a, b)| ok & ((*a).into() <= (*b).into()));
    rising && values.as_slice()[first..last].is_ascii()
}

/// arrow's string view checks (padding of inline views, buffer bounds and prefix of the
/// others, UTF-8 of all), with inline ASCII views (all bytes below 0x80) accepted by one
/// mask test instead of a `from_utf8` call each.
fn validate_string_views(data: &ArrayData) -> Result<(), ArrowError> {
    /// The high bit of each of an inline view's 12 data bytes (bytes 4..16).
    const NON_ASCII: u128 = 0x8080_8080_8080_8080_8080_8080 << 32;
    let Some(views) = data.buffers().first() else {
        return Err(ArrowError::InvalidArgumentError(
            "string view array without views".into(),
        ));
    };
    let views = &views.typed_data::<u128>()[data.offset()..data.offset() + data.len()];
    let rest: Vec<u128> = views
        .iter()
        .copied()
        .filter(|&v| {
            let len = v as u32;
            let inline_ascii =
                len <= 12 && (len == 12 || v >> (32 + len * 8) == 0) && v & NON_ASCII == 0;
            !inline_ascii
        })
        .collect();
    if rest.is_empty() {
        return Ok(());
    }
    let mut buffers = vec![Buffer::from_vec(rest)];
    buffers.extend_from_slice(&data.buffers()[1..]);
    let len = buffers[0].len() / 16;
    ArrayData::try_new(DataType::Utf8View, len, None, 0, buffers, vec![]).map(drop)
}

/// Checks that every buffer a batch message lists lies inside its body: arrow-ipc 59
/// slices them out without checking (`Buffer::slice_with_length` panics). Found by the
/// `ring` fuzz target.
fn check_buffers(batch: &arrow_ipc::RecordBatch<'_>, body_len: usize) -> Result<(), DecodeError> {
    for (i, buffer) in batch.buffers().into_iter().flatten().enumerate() {
        let end = u64::try_from(buffer.offset())
            .ok()
            .zip(u64::try_from(buffer.length()).ok())
            .and_then(|(offset, len)| offset.checked_add(len));
        if end.is_none_or(|end| end > body_len as u64) {
            return Err(DecodeError::Corrupt(format!(
                "buffer {i} (offset {}, length {}) lies outside the {body_len}-byte message body",
                buffer.offset(),
                buffer.length()
            )));
        }
    }
    Ok(())
}

/// Runs an arrow-ipc decode, a panic in it being a corrupt record. arrow-ipc 59 asserts
/// on some inconsistent messages rather than returning an error (a validity buffer
/// shorter than its node's length: `BooleanBuffer::new`), and the segment is as
/// untrusted as a network peer. Found by the `ring` fuzz target.
fn no_panic<T>(
    what: &str,
    decode: impl FnOnce() -> Result<T, DecodeError>,
) -> Result<T, DecodeError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(decode)).unwrap_or_else(|_| {
        Err(DecodeError::Corrupt(format!(
            "inconsistent {what} message (the arrow decoder panicked on it)"
        )))
    })
}

/// Decodes batch records against one schema, keeping the stream's dictionaries.
#[derive(Debug)]
pub(crate) struct BatchDecoder {
    schema: SchemaRef,
    dictionaries: HashMap<i64, ArrayRef>,
    /// The schema holds a string view column: its arrays are decoded unchecked and the
    /// batch validated afterwards by [`validate_batch`], whose view check has an ASCII
    /// fast path (arrow's calls `from_utf8` per value).
    views: bool,
    /// The schema holds a string column: a batch of [`DEFER_ROWS`] rows or more is
    /// validated afterwards too, for [`ascii_strings`]. Other batches let arrow
    /// validate each array as it builds it, which spares cloning every column's
    /// `ArrayData` to validate it a second time (a tenth of a one-row hand-off's work).
    strings: bool,
}

/// Rows of a batch with strings from which it is validated after decoding
/// ([`BatchDecoder::strings`]).
const DEFER_ROWS: i64 = 256;

impl BatchDecoder {
    pub(crate) fn new(schema: SchemaRef) -> Self {
        let any =
            |is: fn(&DataType) -> bool| schema.fields().iter().any(|f| holds(f.data_type(), is));
        let views = any(|t| *t == DataType::Utf8View);
        let strings = any(|t| matches!(t, DataType::Utf8 | DataType::LargeUtf8));
        Self {
            schema,
            dictionaries: HashMap::new(),
            views,
            strings,
        }
    }

    /// Whether a batch of `rows` rows is decoded unchecked, then validated by
    /// [`validate_batch`].
    fn defers_validation(&self, rows: i64) -> bool {
        self.views || (self.strings && rows >= DEFER_ROWS)
    }

    /// Decodes a batch record whose payload is `payload` (a buffer over the mapping).
    /// The returned batch's column buffers are slices of `payload`.
    pub(crate) fn decode(&mut self, payload: &Buffer) -> Result<RecordBatch, DecodeError> {
        let mut at = 0;
        while at < payload.len() {
            let framed = next_message(payload.as_slice(), at)?;
            let message = framed.message;
            at = framed.body.end;
            let body_addr = payload.as_ptr() as usize + framed.body.start;
            if !body_addr.is_multiple_of(RECORD_ALIGN) {
                return Err(DecodeError::Misaligned(format!(
                    "message body at byte {} of the record is {} bytes past a {RECORD_ALIGN}-byte boundary",
                    framed.body.start,
                    body_addr % RECORD_ALIGN
                )));
            }
            let version = message.version();
            match message.header_type() {
                MessageHeader::DictionaryBatch => {
                    let dict = message.header_as_dictionary_batch().ok_or_else(|| {
                        DecodeError::Corrupt("dictionary message without header".into())
                    })?;
                    // Dictionaries outlive the record they came in (the decoder keeps
                    // them for later batches), so they are copied to the heap: a
                    // zero-copy dictionary would pin its ring space indefinitely and
                    // could stall the producer.
                    let body = Buffer::from_slice_ref(&payload.as_slice()[framed.body]);
                    if let Some(data) = dict.data() {
                        check_buffers(&data, body.len())?;
                    }
                    let (schema, dictionaries) = (&self.schema, &mut self.dictionaries);
                    no_panic("dictionary", || {
                        read_dictionary(&body, dict, schema, dictionaries, &version)
                            .map_err(DecodeError::Arrow)
                    })?;
                }
                MessageHeader::RecordBatch => {
                    if at != payload.len() {
                        return Err(DecodeError::Corrupt(
                            "bytes after the record batch message".into(),
                        ));
                    }
                    let batch = message.header_as_record_batch().ok_or_else(|| {
                        DecodeError::Corrupt("record batch message without header".into())
                    })?;
                    let body = payload.slice_with_length(framed.body.start, framed.body.len());
                    check_buffers(&batch, body.len())?;
                    let defer = self.defers_validation(batch.length());
                    let decoded = no_panic("record batch", || {
                        RecordBatchDecoder::try_new(
                            &body,
                            batch,
                            self.schema.clone(),
                            &self.dictionaries,
                            &version,
                        )
                        .and_then(|d| {
                            let d = d.with_require_alignment(true);
                            if defer {
                                d.with_skip_validation(crate::sys::deferred_validation())
                                    .read_record_batch()
                            } else {
                                d.read_record_batch()
                            }
                        })
                        .map_err(DecodeError::Arrow)
                    });
                    return decoded
                        .and_then(|batch| {
                            if !defer {
                                return Ok(batch);
                            }
                            // arrow's checks assert on some malformed buffers too.
                            no_panic("record batch", || {
                                validate_batch(&self.schema, &batch).map_err(DecodeError::Arrow)
                            })
                            .map(|()| batch)
                        })
                        .map_err(|e| match e {
                            DecodeError::Arrow(ArrowError::InvalidArgumentError(m))
                                if m.contains("isaligned") =>
                            {
                                DecodeError::Misaligned(m)
                            }
                            e => e,
                        });
                }
                other => {
                    return Err(DecodeError::Corrupt(format!(
                        "unexpected {other:?} message in a batch record"
                    )));
                }
            }
        }
        Err(DecodeError::Corrupt(
            "batch record holds no record batch message".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{
        types::Int32Type, Array, DictionaryArray, Int32Array, StringArray, StringViewArray,
    };
    use arrow_schema::{DataType, Field};

    use super::*;

    fn concat(parts: &[Buffer]) -> Vec<u8> {
        parts
            .iter()
            .flat_map(|b| b.as_slice().iter().copied())
            .collect()
    }

    fn sample() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int32, true),
            Field::new("s", DataType::Utf8, false),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int32Array::from(vec![Some(1), None, Some(3)])),
                Arc::new(StringArray::from(vec!["x", "yy", "zzz"])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn round_trip_zero_copy() {
        let batch = sample();
        let (mut enc, schema_bytes) = BatchEncoder::new(batch.schema()).unwrap();
        assert_eq!(decode_schema(&schema_bytes).unwrap(), *batch.schema());
        let mut dec = BatchDecoder::new(batch.schema());
        for _ in 0..3 {
            let encoded = enc.encode(&batch).unwrap();
            let bytes = Buffer::from_slice_ref(concat(&encoded.parts));
            assert_eq!(bytes.len(), encoded.len);
            let out = dec.decode(&bytes).unwrap();
            assert_eq!(out, batch);
            // Zero-copy: the int column's values point into the record payload.
            let values = out.column(0).to_data().buffers()[0].as_ptr() as usize;
            let start = bytes.as_ptr() as usize;
            assert!((start..start + bytes.len()).contains(&values));
        }
    }

    #[test]
    fn dictionaries_are_decoded() {
        let dict: DictionaryArray<Int32Type> = vec!["a", "b", "a"].into_iter().collect();
        let schema = Arc::new(Schema::new(vec![Field::new(
            "d",
            dict.data_type().clone(),
            true,
        )]));
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(dict)]).unwrap();
        let (mut enc, _) = BatchEncoder::new(schema.clone()).unwrap();
        let mut dec = BatchDecoder::new(schema);
        let encoded = enc.encode(&batch).unwrap();
        let bytes = Buffer::from_slice_ref(concat(&encoded.parts));
        assert_eq!(dec.decode(&bytes).unwrap(), batch);
    }

    #[test]
    fn misaligned_payload_is_rejected_not_copied() {
        let batch = sample();
        let (mut enc, _) = BatchEncoder::new(batch.schema()).unwrap();
        let encoded = enc.encode(&batch).unwrap();
        let mut shifted = vec![0u8; 8];
        shifted.extend(concat(&encoded.parts));
        let shifted = Buffer::from_vec(shifted).slice(8);
        // The payload now starts 8 bytes past a 64-byte boundary.
        let err = BatchDecoder::new(batch.schema())
            .decode(&shifted)
            .unwrap_err();
        assert!(matches!(err, DecodeError::Misaligned(_)), "{err:?}");
    }

    #[test]
    fn garbage_and_truncation_are_errors() {
        let batch = sample();
        let (mut enc, schema_bytes) = BatchEncoder::new(batch.schema()).unwrap();
        let good = concat(&enc.encode(&batch).unwrap().parts);
        let mut dec = BatchDecoder::new(batch.schema());
        for cut in [0, 4, 8, 16, good.len() / 2, good.len() - 1] {
            let b = Buffer::from_slice_ref(&good[..cut]);
            assert!(dec.decode(&b).is_err(), "truncated at {cut}");
        }
        let mut flipped = good.clone();
        for i in (0..flipped.len()).step_by(7) {
            flipped[i] ^= 0x5a;
        }
        assert!(dec.decode(&Buffer::from_slice_ref(&flipped)).is_err());
        assert!(decode_schema(&schema_bytes[..schema_bytes.len() - 1]).is_err());
        assert!(decode_schema(&good).is_err(), "a batch is not a schema");
        let other = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("z", DataType::Int32, false)])),
            vec![Arc::new(Int32Array::from(vec![1]))],
        )
        .unwrap();
        assert!(enc.encode(&other).is_err(), "schema mismatch is rejected");
        assert_eq!(other.column(0).len(), 1);
    }

    fn views_batch() -> RecordBatch {
        let views = StringViewArray::from(vec![
            Some("abcdefgh"),
            None,
            Some("é ü"),
            Some("ABCDEFGHIJKLMNOPQRST"),
            Some("long and not ascii: ñandú"),
            Some(""),
            Some("twelve bytes"),
        ]);
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Utf8View, true)]));
        RecordBatch::try_new(schema, vec![Arc::new(views)]).unwrap()
    }

    fn encoded(batch: &RecordBatch) -> Vec<u8> {
        let (mut enc, _) = BatchEncoder::new(batch.schema()).unwrap();
        concat(&enc.encode(batch).unwrap().parts)
    }

    fn decode(batch: &RecordBatch, bytes: &[u8]) -> Result<RecordBatch, DecodeError> {
        BatchDecoder::new(batch.schema()).decode(&Buffer::from_slice_ref(bytes))
    }

    fn patch(bytes: &mut [u8], needle: &[u8], nth: usize, at: usize, value: u8) {
        let hit = (0..bytes.len() - needle.len())
            .filter(|&i| &bytes[i..i + needle.len()] == needle)
            .nth(nth)
            .expect("needle in the encoded record");
        bytes[hit + at] = value;
    }

    #[test]
    fn string_views_are_validated_after_the_unchecked_decode() {
        let batch = views_batch();
        let good = encoded(&batch);
        assert_eq!(decode(&batch, &good).unwrap(), batch);
        let sliced = batch.slice(2, 4);
        assert_eq!(decode(&sliced, &encoded(&sliced)).unwrap(), sliced);

        // Invalid UTF-8 in an inline view.
        let mut bad = good.clone();
        patch(&mut bad, b"abcdefgh", 0, 3, 0xff);
        assert!(decode(&batch, &bad).is_err(), "inline view with byte 0xff");
        // A non-ASCII inline view cut in the middle of a character.
        let mut bad = good.clone();
        patch(&mut bad, "é ü".as_bytes(), 0, 1, b'x');
        assert!(decode(&batch, &bad).is_err(), "inline view with a broken é");
        // Non-zero padding after a short inline view.
        let mut bad = good.clone();
        patch(&mut bad, b"abcdefgh", 0, 9, b'!');
        assert!(decode(&batch, &bad).is_err(), "inline view with padding");
        // A long view whose prefix disagrees with its data.
        let mut bad = good.clone();
        patch(&mut bad, b"ABCD", 0, 0, b'Z');
        assert!(decode(&batch, &bad).is_err(), "prefix mismatch");
        // Invalid UTF-8 inside a long string's data.
        let mut bad = good.clone();
        patch(&mut bad, b"QRST", 0, 0, 0xc3);
        assert!(
            decode(&batch, &bad).is_err(),
            "long string with a broken character"
        );
        // A long view pointing past its buffer.
        let mut bad = good;
        patch(&mut bad, &[20, 0, 0, 0, b'A', b'B', b'C', b'D'], 0, 1, 0x7f);
        assert!(decode(&batch, &bad).is_err(), "view longer than its buffer");
    }

    /// A short batch without string views is validated by arrow as it decodes, not by
    /// `validate_batch` afterwards: invalid UTF-8, an offset past the values and a null
    /// in a non-nullable column are still errors.
    #[test]
    fn batches_without_string_views_are_validated_as_they_are_decoded() {
        let batch = sample();
        let decoder = BatchDecoder::new(batch.schema());
        assert!(!decoder.defers_validation(3));
        assert!(decoder.defers_validation(DEFER_ROWS));
        assert!(BatchDecoder::new(views_batch().schema()).defers_validation(1));
        let nested = Schema::new(vec![Field::new(
            "l",
            DataType::List(Arc::new(Field::new("v", DataType::Utf8View, true))),
            true,
        )]);
        assert!(BatchDecoder::new(Arc::new(nested)).defers_validation(1));
        let numbers = Schema::new(vec![Field::new("n", DataType::Int64, true)]);
        assert!(!BatchDecoder::new(Arc::new(numbers)).defers_validation(1 << 20));

        let good = encoded(&batch);
        assert_eq!(decode(&batch, &good).unwrap(), batch);
        let mut bad = good.clone();
        patch(&mut bad, b"xyyzzz", 0, 1, 0xff);
        assert!(decode(&batch, &bad).is_err(), "invalid UTF-8");
        // The string column's offsets are 0, 1, 3, 6: the last one past the values.
        let mut bad = good;
        patch(&mut bad, &[3, 0, 0, 0, 6, 0, 0, 0], 0, 4, 0x7f);
        assert!(decode(&batch, &bad).is_err(), "offset past the values");
        // Column `a` holds a null; decoded against a schema that says it holds none.
        let strict = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int32, false),
            Field::new("s", DataType::Utf8, false),
        ]));
        let err = BatchDecoder::new(strict)
            .decode(&Buffer::from_slice_ref(encoded(&batch)))
            .unwrap_err();
        assert!(
            matches!(&err, DecodeError::Arrow(e) if e.to_string().contains("non-nullable")),
            "{err:?}"
        );
    }

    /// A long batch of strings is decoded unchecked and validated afterwards, ASCII
    /// strings on a fast path: what arrow's check refuses is still refused (bytes that
    /// are not UTF-8, offsets that fall, an offset inside a character), on either path.
    #[test]
    fn long_string_batches_are_validated_after_decoding() {
        let rows = DEFER_ROWS as usize + 44;
        let batch = |text: &dyn Fn(usize) -> String| {
            let schema = Arc::new(Schema::new(vec![
                Field::new("a", DataType::Int32, true),
                Field::new("s", DataType::Utf8, true),
                Field::new("l", DataType::LargeUtf8, true),
            ]));
            let strings: Vec<Option<String>> =
                (0..rows).map(|i| (i % 9 != 4).then(|| text(i))).collect();
            RecordBatch::try_new(
                schema,
                vec![
                    Arc::new(Int32Array::from_iter_values(0..rows as i32)),
                    Arc::new(StringArray::from(strings.clone())),
                    Arc::new(arrow_array::LargeStringArray::from(strings)),
                ],
            )
            .unwrap()
        };
        // Every value 5 bytes: offsets 0, 5, 10, ... (a null repeats its offset).
        let ascii = batch(&|i| format!("v{i:04}"));
        let wide = batch(&|i| format!("ñ{:03}", i % 1000));
        for b in [&ascii, &wide] {
            assert!(BatchDecoder::new(b.schema()).defers_validation(rows as i64));
            assert_eq!(&decode(b, &encoded(b)).unwrap(), b);
            let sliced = b.slice(7, rows - 20);
            assert_eq!(decode(&sliced, &encoded(&sliced)).unwrap(), sliced);
        }
        let good = encoded(&ascii);
        let mut bad = good.clone();
        patch(&mut bad, b"v0123", 0, 2, 0xff);
        assert!(decode(&ascii, &bad).is_err(), "not UTF-8");
        // Offsets 5, 10, 15 of the i32 column become 5, 3, 15: still within the
        // values, and ASCII between them.
        let mut bad = good.clone();
        patch(&mut bad, &[5, 0, 0, 0, 10, 0, 0, 0, 15, 0, 0, 0], 0, 4, 3);
        assert!(decode(&ascii, &bad).is_err(), "offsets that fall");
        // The same in the i64 column.
        let mut bad = good.clone();
        let needle = [5, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0];
        patch(&mut bad, &needle, 0, 8, 3);
        assert!(decode(&ascii, &bad).is_err(), "large offsets that fall");
        // An offset past the values.
        let mut bad = good;
        patch(
            &mut bad,
            &[5, 0, 0, 0, 10, 0, 0, 0, 15, 0, 0, 0],
            0,
            7,
            0x7f,
        );
        assert!(decode(&ascii, &bad).is_err(), "offset past the values");
        // Offsets 5, 10 become 5, 6: inside the 'ñ' of the second value.
        let mut bad = encoded(&wide);
        patch(&mut bad, &[5, 0, 0, 0, 10, 0, 0, 0, 15, 0, 0, 0], 0, 4, 6);
        assert!(decode(&wide, &bad).is_err(), "an offset inside a character");
    }

    /// Sets the length of buffer `i` of the (first, record batch) message of an encoded
    /// record, in place in its flatbuffer.
    fn set_buffer_length(bytes: &mut [u8], i: usize, length: i64) {
        let at = {
            let framed = next_message(bytes, 0).unwrap();
            let batch = framed.message.header_as_record_batch().unwrap();
            let buffer = batch.buffers().unwrap().get(i);
            std::ptr::from_ref(buffer) as usize - bytes.as_ptr() as usize
        };
        // The flatbuffer struct: offset (i64), then length (i64).
        bytes[at + 8..at + 16].copy_from_slice(&length.to_le_bytes());
    }

    /// Found by the `ring` fuzz target: arrow-ipc sliced a buffer past the message body
    /// (a panic in `Buffer::slice_with_length`).
    #[test]
    fn a_buffer_past_the_message_body_is_corrupt_not_a_panic() {
        let batch = sample();
        let mut bad = encoded(&batch);
        set_buffer_length(&mut bad, 1, 738_197_520);
        let err = decode(&batch, &bad).unwrap_err();
        assert!(
            matches!(&err, DecodeError::Corrupt(m) if m.contains("outside")),
            "{err:?}"
        );
    }

    /// Found by the `ring` fuzz target: a validity buffer shorter than its column made
    /// arrow-ipc's unchecked decode assert (`BooleanBuffer::new`).
    #[test]
    fn a_short_validity_buffer_is_corrupt_not_a_panic() {
        let batch = sample();
        let mut bad = encoded(&batch);
        set_buffer_length(&mut bad, 0, 0);
        assert!(decode(&batch, &bad).is_err());
    }
}
