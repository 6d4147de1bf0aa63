//! `contacts`: nested records (a struct, a list of structs) with Zipfian values and list
//! lengths, the shape of seed 002's generator.
//!
//! Schema: `id` u64, `name` utf8?, `phones` list<struct<number utf8?, kind utf8?>>?,
//! `address` struct<city utf8, zip utf8>?.
//!
//! Every string is drawn from a vocabulary built once (names, 16 Ki phone numbers,
//! kinds, cities, zips), so the batches the writers get carry the strings as
//! dictionary keys ([`Dataset::encoded_batch`]); [`Dataset::batch`] spells them out.

use std::sync::Arc;

use arrow_array::{ArrayRef, ListArray, RecordBatch, StructArray, UInt64Array};
use arrow_buffer::{BooleanBufferBuilder, NullBuffer, OffsetBuffer};
use arrow_schema::{ArrowError, DataType, Field, Fields, Schema, SchemaRef};

use super::vocabulary::{decode_dictionaries, keyed_fields, KeyColumn, Vocabulary};
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
/// The string leaves written from their vocabularies' keys.
const KEYED: &[&str] = &[
    "name",
    "phones.number",
    "phones.kind",
    "address.city",
    "address.zip",
];
/// Zip codes per city: a city's zips are `city * 6_007 + 0..ZIPS_PER_CITY`.
const ZIPS_PER_CITY: u64 = 100;

/// The `contacts` dataset.
#[derive(Debug)]
pub struct Contacts {
    seed: u64,
    rows: u64,
    schema: SchemaRef,
    /// `schema` with the string leaves of known vocabulary as dictionary keys.
    keyed_schema: SchemaRef,
    /// Full names; source index `first * LAST_NAMES.len() + last`.
    names: Vocabulary,
    /// Phone numbers; source index the Zipf rank.
    numbers: Vocabulary,
    /// Source index the index in `PHONE_KINDS`.
    kinds: Vocabulary,
    /// Source index the index in `CITIES`.
    cities: Vocabulary,
    /// Source index `city * ZIPS_PER_CITY + offset`.
    zips: Vocabulary,
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
        let plain_phone = Fields::from(vec![
            Field::new("number", DataType::Utf8, true),
            Field::new("kind", DataType::Utf8, true),
        ]);
        let plain_item = Arc::new(Field::new("item", DataType::Struct(plain_phone), true));
        let plain_address = Fields::from(vec![
            Field::new("city", DataType::Utf8, false),
            Field::new("zip", DataType::Utf8, false),
        ]);
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::UInt64, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("phones", DataType::List(plain_item), true),
            Field::new("address", DataType::Struct(plain_address), true),
        ]));
        let keyed_schema = Arc::new(Schema::new(keyed_fields(schema.fields(), KEYED, "")));
        // The batches' nested types are the keyed schema's.
        let DataType::List(phone_item) = keyed_schema.field(2).data_type().clone() else {
            unreachable!("phones is a list")
        };
        let DataType::Struct(phone_struct) = phone_item.data_type().clone() else {
            unreachable!("a phone is a struct")
        };
        let DataType::Struct(address_struct) = keyed_schema.field(3).data_type().clone() else {
            unreachable!("address is a struct")
        };
        let names = Vocabulary::new(
            &FIRST_NAMES
                .iter()
                .flat_map(|f| LAST_NAMES.iter().map(move |l| format!("{f} {l}")))
                .collect::<Vec<_>>(),
        );
        let numbers = Vocabulary::new(
            &(0..PHONE_RANKS as u64)
                .map(|rank| {
                    // +1-555-XXX-XXXX
                    let digits = mix64(rank ^ seed) % 10_000_000;
                    format!("+1-555-{:03}-{:04}", digits / 10_000, digits % 10_000)
                })
                .collect::<Vec<_>>(),
        );
        let spell = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
        let zips = Vocabulary::new(
            &(0..CITIES.len() as u64 * ZIPS_PER_CITY)
                .map(|i| {
                    let (city, offset) = (i / ZIPS_PER_CITY, i % ZIPS_PER_CITY);
                    format!("{:05}", (city * 6_007 + offset) % 100_000)
                })
                .collect::<Vec<_>>(),
        );
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
            keyed_schema,
            names,
            numbers,
            kinds: Vocabulary::new(&spell(PHONE_KINDS)),
            cities: Vocabulary::new(&spell(CITIES)),
            zips,
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

/// The columns of one batch of contacts: allocated once per batch, never per row.
#[derive(Debug)]
struct Builders {
    ids: Vec<u64>,
    names: KeyColumn,
    list_offsets: Vec<i32>,
    list_valid: BooleanBufferBuilder,
    numbers: KeyColumn,
    kinds: KeyColumn,
    item_valid: BooleanBufferBuilder,
    cities: KeyColumn,
    zips: KeyColumn,
    address_valid: BooleanBufferBuilder,
}

impl Builders {
    fn with_capacity(rows: usize) -> Self {
        let phones = rows + rows / 2;
        Self {
            ids: Vec::with_capacity(rows),
            names: KeyColumn::with_capacity(rows),
            list_offsets: Vec::with_capacity(rows + 1),
            list_valid: BooleanBufferBuilder::new(rows),
            numbers: KeyColumn::with_capacity(phones),
            kinds: KeyColumn::with_capacity(phones),
            item_valid: BooleanBufferBuilder::new(phones),
            cities: KeyColumn::with_capacity(rows),
            zips: KeyColumn::with_capacity(rows),
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
        decode_dictionaries(&self.encoded_batch(start, len)?, &self.schema)
    }

    fn encoded_batch(&self, start: u64, len: usize) -> Result<RecordBatch, ArrowError> {
        let mut b = Builders::with_capacity(len);
        b.list_offsets.push(0);
        let mut phone_count: i32 = 0;
        for row in start..start + len as u64 {
            let mut rng = RowRng::for_row(self.seed, STREAM_ROW, row);
            b.ids.push(row + 1);

            if rng.chance(0.06) {
                b.names.push_null();
            } else {
                let first = self.first.sample(rng.next_u64());
                let last = self.last.sample(rng.next_u64());
                b.names
                    .push(self.names.key(first * LAST_NAMES.len() + last));
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
                        let rank = self.phone.sample(rng.next_u64());
                        b.numbers.push(self.numbers.key(rank));
                        if bits & 0xff00 < 0x0800 {
                            b.kinds.push_null();
                        } else {
                            let kind = self.kind.sample(rng.next_u64());
                            b.kinds.push(self.kinds.key(kind));
                        }
                    }
                    phone_count += 1;
                }
            }
            b.list_offsets.push(phone_count);

            let has_address = !rng.chance(0.05);
            b.address_valid.append(has_address);
            let city = self.city.sample(rng.next_u64());
            b.cities.push(self.cities.key(city));
            let zip = city as u64 * ZIPS_PER_CITY + rng.below(ZIPS_PER_CITY);
            b.zips.push(self.zips.key(zip as usize));
        }

        let phones = StructArray::try_new(
            self.phone_struct.clone(),
            vec![
                Arc::new(b.numbers.finish(&self.numbers)?) as ArrayRef,
                Arc::new(b.kinds.finish(&self.kinds)?),
            ],
            Some(NullBuffer::new(b.item_valid.finish())),
        )?;
        let list = ListArray::try_new(
            Arc::clone(&self.phone_item),
            OffsetBuffer::new(b.list_offsets.into()),
            Arc::new(phones),
            Some(NullBuffer::new(b.list_valid.finish())),
        )?;
        let address = StructArray::try_new(
            self.address_struct.clone(),
            vec![
                Arc::new(b.cities.finish(&self.cities)?) as ArrayRef,
                Arc::new(b.zips.finish(&self.zips)?),
            ],
            Some(NullBuffer::new(b.address_valid.finish())),
        )?;
        RecordBatch::try_new(
            Arc::clone(&self.keyed_schema),
            vec![
                Arc::new(UInt64Array::from(b.ids)),
                Arc::new(b.names.finish(&self.names)?),
                Arc::new(list),
                Arc::new(address),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Array, StringArray};

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
