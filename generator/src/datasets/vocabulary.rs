//! Known vocabularies of string columns, and the dictionary arrays keyed into them.
//!
//! A dataset that draws a string column from a fixed set builds a [`Vocabulary`] once:
//! the distinct values sorted by bytes (the order Parquet compares strings in, so a
//! key's order is its value's) and each source index's key. Its batches then carry
//! `Dictionary(UInt16, Utf8)` arrays ([`KeyColumn`]), which the writer encodes from the
//! keys; [`decode_dictionaries`] turns them back into the plain `Utf8` rows.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::UInt16Type;
use arrow_array::{
    Array, ArrayRef, DictionaryArray, ListArray, RecordBatch, StringArray, StructArray, UInt16Array,
};
use arrow_buffer::{BooleanBufferBuilder, NullBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType, Field, FieldRef, Fields, SchemaRef};

/// The distinct values of a string column, sorted by bytes.
#[derive(Debug, Clone)]
pub(crate) struct Vocabulary {
    values: Arc<StringArray>,
    /// The key of each source index.
    keys: Vec<u16>,
}

impl Vocabulary {
    /// The vocabulary of `spellings`: source index `i` is spelled `spellings[i]`
    /// (several indices may share a spelling, and then a key).
    ///
    /// # Panics
    /// If there are more than 65,536 distinct spellings (keys are `u16`), or one is
    /// longer than the writer's statistics bound: both are fixed by the dataset's
    /// code, not by its options.
    pub(crate) fn new(spellings: &[String]) -> Self {
        let mut order: Vec<usize> = (0..spellings.len()).collect();
        order.sort_by(|&a, &b| spellings[a].as_bytes().cmp(spellings[b].as_bytes()));
        let mut keys = vec![0u16; spellings.len()];
        let mut distinct: Vec<&str> = Vec::new();
        for i in order {
            if distinct.last() != Some(&spellings[i].as_str()) {
                distinct.push(&spellings[i]);
            }
            keys[i] = u16::try_from(distinct.len() - 1).expect("at most 65,536 distinct values");
        }
        let values = StringArray::from(distinct);
        crate::dictionary::check_vocabulary(&values).expect("a vocabulary the writer takes");
        Self {
            values: Arc::new(values),
            keys,
        }
    }

    /// The key of source index `i`.
    #[inline]
    pub(crate) fn key(&self, i: usize) -> u16 {
        self.keys[i]
    }

    /// The dictionary array type of a column keyed into a vocabulary.
    pub(crate) fn data_type() -> DataType {
        DataType::Dictionary(Box::new(DataType::UInt16), Box::new(DataType::Utf8))
    }
}

/// Keys and validity of a dictionary column under construction.
#[derive(Debug)]
pub(crate) struct KeyColumn {
    keys: Vec<u16>,
    valid: BooleanBufferBuilder,
    nulls: usize,
}

impl KeyColumn {
    pub(crate) fn with_capacity(items: usize) -> Self {
        Self {
            keys: Vec::with_capacity(items),
            valid: BooleanBufferBuilder::new(items),
            nulls: 0,
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, key: u16) {
        self.keys.push(key);
        self.valid.append(true);
    }

    #[inline]
    pub(crate) fn push_null(&mut self) {
        self.keys.push(0);
        self.valid.append(false);
        self.nulls += 1;
    }

    /// The finished array over `vocabulary`; checks every key against it.
    pub(crate) fn finish(
        mut self,
        vocabulary: &Vocabulary,
    ) -> Result<DictionaryArray<UInt16Type>, ArrowError> {
        let nulls = (self.nulls > 0).then(|| NullBuffer::new(self.valid.finish()));
        let keys = UInt16Array::new(ScalarBuffer::from(self.keys), nulls);
        DictionaryArray::try_new(keys, Arc::clone(&vocabulary.values) as ArrayRef)
    }
}

/// `batch` with every dictionary array (at any depth below structs and lists) replaced
/// by its plain values, under `schema`: the naive spelling of the same rows.
pub(crate) fn decode_dictionaries(
    batch: &RecordBatch,
    schema: &SchemaRef,
) -> Result<RecordBatch, ArrowError> {
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(column, field)| decode(column, field))
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(Arc::clone(schema), columns)
}

fn decode(array: &ArrayRef, field: &FieldRef) -> Result<ArrayRef, ArrowError> {
    Ok(match (array.data_type(), field.data_type()) {
        (DataType::Dictionary(..), DataType::Utf8) => {
            let dict = array.as_dictionary::<UInt16Type>();
            arrow_select::take::take(dict.values().as_ref(), dict.keys(), None)?
        }
        (DataType::Struct(_), DataType::Struct(fields)) => {
            let s = array.as_struct();
            let children = s
                .columns()
                .iter()
                .zip(fields)
                .map(|(c, f)| decode(c, f))
                .collect::<Result<Vec<_>, _>>()?;
            Arc::new(StructArray::try_new(
                fields.clone(),
                children,
                s.nulls().cloned(),
            )?)
        }
        (DataType::List(_), DataType::List(item)) => {
            let l = array.as_list::<i32>();
            Arc::new(ListArray::try_new(
                Arc::clone(item),
                l.offsets().clone(),
                decode(l.values(), item)?,
                l.nulls().cloned(),
            )?)
        }
        (from, to) if from == to => Arc::clone(array),
        (from, to) => {
            return Err(ArrowError::SchemaError(format!(
                "column {} is {from}, which does not decode to {to}",
                field.name()
            )))
        }
    })
}

/// `fields` with each `Utf8` leaf named in `keyed` replaced by
/// [`Vocabulary::data_type`]. A leaf's name is its path of field names below the
/// top level, list items left out (`phones.number`).
pub(crate) fn keyed_fields(fields: &Fields, keyed: &[&str], prefix: &str) -> Fields {
    fields
        .iter()
        .map(|f| {
            let path = if prefix.is_empty() {
                f.name().clone()
            } else {
                format!("{prefix}.{}", f.name())
            };
            let data_type = keyed_type(f.data_type(), keyed, &path);
            Arc::new(
                Field::new(f.name(), data_type, f.is_nullable())
                    .with_metadata(f.metadata().clone()),
            )
        })
        .collect()
}

fn keyed_type(data_type: &DataType, keyed: &[&str], path: &str) -> DataType {
    match data_type {
        DataType::Utf8 if keyed.contains(&path) => Vocabulary::data_type(),
        DataType::Struct(inner) => DataType::Struct(keyed_fields(inner, keyed, path)),
        DataType::List(item) => DataType::List(Arc::new(
            Field::new(
                item.name(),
                keyed_type(item.data_type(), keyed, path),
                item.is_nullable(),
            )
            .with_metadata(item.metadata().clone()),
        )),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_byte_order_and_share_spellings() {
        let v = Vocabulary::new(&["b".into(), "a".into(), "b".into(), "C".into()]);
        assert_eq!(
            v.values.iter().flatten().collect::<Vec<_>>(),
            ["C", "a", "b"]
        );
        assert_eq!((0..4).map(|i| v.key(i)).collect::<Vec<_>>(), [2, 1, 2, 0]);
    }

    #[test]
    fn decoding_gives_the_plain_column() {
        let v = Vocabulary::new(&["x".into(), "y".into()]);
        let mut keys = KeyColumn::with_capacity(3);
        keys.push(v.key(1));
        keys.push_null();
        keys.push(v.key(0));
        let dict = Arc::new(keys.finish(&v).unwrap()) as ArrayRef;
        let plain = arrow_schema::Schema::new(vec![Field::new("s", DataType::Utf8, true)]);
        let keyed = arrow_schema::Schema::new(keyed_fields(plain.fields(), &["s"], ""));
        let batch = RecordBatch::try_new(Arc::new(keyed), vec![dict]).unwrap();
        let decoded = decode_dictionaries(&batch, &Arc::new(plain)).unwrap();
        assert_eq!(
            decoded.column(0).as_string::<i32>(),
            &StringArray::from(vec![Some("y"), None, Some("x")])
        );
    }
}
