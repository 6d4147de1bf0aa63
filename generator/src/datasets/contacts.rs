//! `contacts`: nested records (a struct, a list of structs) with Zipfian values and list
//! lengths, the shape of seed 002's generator.
//!
//! Schema: `id` u64, `name` utf8?, `phones` list<struct<number utf8?, kind utf8?>>?,
//! `address` struct<city utf8, zip utf8>?.

use std::sync::Arc;

use arrow_array::{ArrayRef, ListArray, RecordBatch, StringArray, StructArray, UInt64Array};
use arrow_buffer::{BooleanBufferBuilder, NullBuffer, OffsetBuffer};
use arrow_schema::{ArrowError, DataType, Field, Fields, Schema, SchemaRef};

use super::columns::Utf8Column;
use super::Dataset;
use crate::rng::{mix64, RowRng};
use crate::zipf::Zipf;

const FIRST_NAMES: &[&str] = &[
    "James",
    "Mary",
    "John",
    "Patricia",
    "Robert",
    "Jennifer",
    "Michael",
    "Linda",
    "William",
    "Elizabeth",
    "David",
    "Barbara",
    "Richard",
    "Susan",
    "Joseph",
    "Jessica",
    "Thomas",
    "Sarah",
    "Charles",
    "Karen",
    "Wei",
    "Yuki",
    "Priya",
    "Ahmed",
    "Olga",
    "Mateo",
    "Aisha",
    "Lars",
    "Chen",
    "Fatima",
    "Diego",
    "Ingrid",
];
const LAST_NAMES: &[&str] = &[
    "Smith",
    "Johnson",
    "Williams",
    "Brown",
    "Jones",
    "Garcia",
    "Miller",
    "Davis",
    "Rodriguez",
    "Martinez",
    "Hernandez",
    "Lopez",
    "Gonzalez",
    "Wilson",
    "Anderson",
    "Thomas",
    "Taylor",
    "Moore",
    "Jackson",
    "Martin",
    "Lee",
    "Perez",
    "Thompson",
    "White",
    "Nakamura",
    "Kowalski",
    "Okafor",
    "Lindqvist",
    "Rossi",
    "Novak",
    "Silva",
    "Haddad",
];
const CITIES: &[&str] = &[
    "New York",
    "London",
    "Tokyo",
    "Paris",
    "Berlin",
    "Sydney",
    "Toronto",
    "Mumbai",
    "Sao Paulo",
    "Lagos",
    "Seoul",
    "Madrid",
    "Chicago",
    "Amsterdam",
    "Stockholm",
    "Zurich",
];
const PHONE_KINDS: &[&str] = &["mobile", "home", "work"];
/// Distinct phone numbers drawn Zipfian; the table (8 bytes a rank, 128 KiB) stays in
/// L2, where 64 Ki ranks missed it on most draws.
const PHONE_RANKS: usize = 1 << 14;
/// At most this many phones per contact.
const MAX_PHONES: usize = 8;
const STREAM_ROW: u64 = 0xC0;

/// The `contacts` dataset.
#[derive(Debug)]
pub struct Contacts {
    seed: u64,
    rows: u64,
    schema: SchemaRef,
    phone_struct: Fields,
    phone_item: Arc<Field>,
    address_struct: Fields,
    first: Zipf,
    last: Zipf,
    city: Zipf,
    phone: Zipf,
    kind: Zipf,
    phones_len: Zipf,
}

impl Contacts {
    /// `rows` contacts under `seed`.
    pub fn new(seed: u64, rows: u64) -> Self {
        let phone_struct = Fields::from(vec![
            Field::new("number", DataType::Utf8, true),
            Field::new("kind", DataType::Utf8, true),
        ]);
        let phone_item = Arc::new(Field::new(
            "item",
            DataType::Struct(phone_struct.clone()),
            true,
        ));
        let address_struct = Fields::from(vec![
            Field::new("city", DataType::Utf8, false),
            Field::new("zip", DataType::Utf8, false),
        ]);
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::UInt64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("phones", DataType::List(Arc::clone(&phone_item)), true),
            Field::new("address", DataType::Struct(address_struct.clone()), true),
        ]));
        // List lengths: Zipfian over 0..=MAX_PHONES, shifted so that one phone is the
        // most common, none and two next.
        let len_weights: Vec<f64> = (0..=MAX_PHONES)
            .map(|k| match k {
                0 => 0.5,
                k => 1.0 / (k as f64).powf(1.6),
            })
            .collect();
        Self {
            seed,
            rows,
            schema,
            phone_struct,
            phone_item,
            address_struct,
            first: Zipf::new(FIRST_NAMES.len(), 1.0),
            last: Zipf::new(LAST_NAMES.len(), 0.8),
            city: Zipf::new(CITIES.len(), 1.2),
            phone: Zipf::new(PHONE_RANKS, 1.05),
            kind: Zipf::new(PHONE_KINDS.len(), 1.0),
            phones_len: Zipf::from_weights(&len_weights),
        }
    }
}

/// Writes `value` as exactly `digits` decimal digits at the end of `buf`.
#[inline]
fn put_digits(buf: &mut [u8], mut value: u64) {
    for b in buf.iter_mut().rev() {
        *b = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

/// The columns of one batch of contacts: allocated once per batch, never per row.
#[derive(Debug)]
struct Builders {
    ids: Vec<u64>,
    names: Utf8Column,
    list_offsets: Vec<i32>,
    list_valid: BooleanBufferBuilder,
    numbers: Utf8Column,
    kinds: Utf8Column,
    item_valid: BooleanBufferBuilder,
    cities: Utf8Column,
    zips: Utf8Column,
    address_valid: BooleanBufferBuilder,
}

impl Builders {
    fn with_capacity(rows: usize) -> Self {
        let phones = rows + rows / 2;
        Self {
            ids: Vec::with_capacity(rows),
            names: Utf8Column::with_capacity(rows, rows * 14),
            list_offsets: Vec::with_capacity(rows + 1),
            list_valid: BooleanBufferBuilder::new(rows),
            numbers: Utf8Column::with_capacity(phones, phones * 15),
            kinds: Utf8Column::with_capacity(phones, phones * 5),
            item_valid: BooleanBufferBuilder::new(phones),
            cities: Utf8Column::with_capacity(rows, rows * 8),
            zips: Utf8Column::with_capacity(rows, rows * 5),
            address_valid: BooleanBufferBuilder::new(rows),
        }
    }
}

impl Dataset for Contacts {
    fn name(&self) -> &'static str {
        "contacts"
    }

    fn rows(&self) -> u64 {
        self.rows
    }

    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn bloom_columns(&self) -> &[&'static str] {
        &["id"]
    }

    fn delta_columns(&self) -> &[&'static str] {
        &["id"]
    }

    fn sorted_by(&self) -> Vec<&'static str> {
        vec!["id"]
    }

    fn batch(&self, start: u64, len: usize) -> Result<RecordBatch, ArrowError> {
        let mut b = Builders::with_capacity(len);
        b.list_offsets.push(0);
        let mut phone_count: i32 = 0;
        let mut number = *b"+1-555-000-0000";
        for row in start..start + len as u64 {
            let mut rng = RowRng::for_row(self.seed, STREAM_ROW, row);
            b.ids.push(row + 1);

            if rng.chance(0.06) {
                b.names.push_null();
            } else {
                let first = FIRST_NAMES[self.first.sample(rng.next_u64())];
                let last = LAST_NAMES[self.last.sample(rng.next_u64())];
                b.names
                    .push_parts(&[first.as_bytes(), b" ", last.as_bytes()]);
            }

            // 4% of contacts have no phone list at all (null), others 0..=8 entries.
            let list_is_null = rng.chance(0.04);
            b.list_valid.append(!list_is_null);
            if !list_is_null {
                let n = self.phones_len.sample(rng.next_u64());
                for _ in 0..n {
                    let bits = rng.next_u64();
                    if bits & 0xff < 3 {
                        // About 1% of entries are null structs.
                        b.item_valid.append(false);
                        b.numbers.push_null();
                        b.kinds.push_null();
                    } else {
                        b.item_valid.append(true);
                        let rank = self.phone.sample(rng.next_u64()) as u64;
                        // +1-555-XXX-XXXX
                        let digits = mix64(rank ^ self.seed) % 10_000_000;
                        put_digits(&mut number[7..10], digits / 10_000);
                        put_digits(&mut number[11..15], digits % 10_000);
                        b.numbers.push(&number);
                        if bits & 0xff00 < 0x0800 {
                            b.kinds.push_null();
                        } else {
                            let kind = PHONE_KINDS[self.kind.sample(rng.next_u64())];
                            b.kinds.push(kind.as_bytes());
                        }
                    }
                    phone_count += 1;
                }
            }
            b.list_offsets.push(phone_count);

            let has_address = !rng.chance(0.05);
            b.address_valid.append(has_address);
            let city = self.city.sample(rng.next_u64());
            b.cities.push(CITIES[city].as_bytes());
            let mut zip = [0u8; 5];
            put_digits(&mut zip, (city as u64 * 6_007 + rng.below(100)) % 100_000);
            b.zips.push(&zip);
        }

        let phones = StructArray::try_new(
            self.phone_struct.clone(),
            vec![
                Arc::new(b.numbers.finish()?) as ArrayRef,
                Arc::new(b.kinds.finish()?),
            ],
            Some(NullBuffer::new(b.item_valid.finish())),
        )?;
        let list = ListArray::try_new(
            Arc::clone(&self.phone_item),
            OffsetBuffer::new(b.list_offsets.into()),
            Arc::new(phones),
            Some(NullBuffer::new(b.list_valid.finish())),
        )?;
        let cities: StringArray = b.cities.finish()?;
        let address = StructArray::try_new(
            self.address_struct.clone(),
            vec![Arc::new(cities) as ArrayRef, Arc::new(b.zips.finish()?)],
            Some(NullBuffer::new(b.address_valid.finish())),
        )?;
        RecordBatch::try_new(
            Arc::clone(&self.schema),
            vec![
                Arc::new(UInt64Array::from(b.ids)),
                Arc::new(b.names.finish()?),
                Arc::new(list),
                Arc::new(address),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;

    #[test]
    fn batches_are_pure_functions_of_the_range() {
        let d = Contacts::new(5, 10_000);
        let whole = d.batch(0, 1_000).unwrap();
        let part = d.batch(300, 200).unwrap();
        assert_eq!(whole.slice(300, 200), part);
        assert_ne!(Contacts::new(6, 10_000).batch(300, 200).unwrap(), part);
    }

    #[test]
    fn phone_numbers_are_well_formed() {
        let d = Contacts::new(2, 2_000);
        let b = d.batch(0, 2_000).unwrap();
        let list = b.column(2).as_any().downcast_ref::<ListArray>().unwrap();
        let phones = list
            .values()
            .as_any()
            .downcast_ref::<StructArray>()
            .unwrap();
        let numbers = phones
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        let mut seen = 0;
        for n in numbers.iter().flatten() {
            let bytes = n.as_bytes();
            assert_eq!(bytes.len(), 15, "{n}");
            assert!(n.starts_with("+1-555-") && bytes[10] == b'-', "{n}");
            assert!(
                bytes[7..10]
                    .iter()
                    .chain(&bytes[11..])
                    .all(u8::is_ascii_digit),
                "{n}"
            );
            seen += 1;
        }
        assert!(seen > 1_000);
    }

    #[test]
    fn list_lengths_are_skewed_and_bounded() {
        let d = Contacts::new(1, 20_000);
        let b = d.batch(0, 20_000).unwrap();
        let list = b.column(2).as_any().downcast_ref::<ListArray>().unwrap();
        let mut hist = [0usize; MAX_PHONES + 1];
        for i in 0..list.len() {
            if list.is_valid(i) {
                hist[list.value_length(i) as usize] += 1;
            }
        }
        assert!(
            hist[1] > hist[2] && hist[2] > hist[3] && hist[3] > hist[5],
            "{hist:?}"
        );
        assert!(hist[0] > 0 && hist[MAX_PHONES] > 0, "{hist:?}");
        assert!(list.null_count() > 0 && list.null_count() < 2_000);
    }
}
