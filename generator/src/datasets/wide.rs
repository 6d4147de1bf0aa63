//! `wide`: 21 columns of mixed types, the shape of seed 001's benchmark table (357,814
//! rows by default): ids, low-cardinality strings, dates, amounts, flags.
//!
//! Rows are orders sorted by `order_id`; `order_date` grows with it (about 400 orders a
//! day from 2022-01-01), so date ranges prune row groups too.

use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::{
    BooleanArray, Date32Array, Float64Array, Int32Array, Int64Array, RecordBatch,
    TimestampMicrosecondArray,
};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef, TimeUnit};

use super::Dataset;
use crate::rng::RowRng;
use crate::zipf::Zipf;

/// Seed 001's row count.
pub const WIDE_DEFAULT_ROWS: u64 = 357_814;
const REGIONS: &[&str] = &["north", "south", "east", "west", "central", "overseas"];
const COUNTRIES: &[&str] = &[
    "US", "CA", "MX", "BR", "GB", "DE", "FR", "ES", "IT", "NL", "SE", "PL", "IN", "JP", "KR", "CN",
    "AU", "NZ", "ZA", "NG",
];
const STATUSES: &[&str] = &["delivered", "shipped", "pending", "cancelled", "returned"];
const CHANNELS: &[&str] = &["web", "store", "phone", "partner"];
const CATEGORIES: &[&str] = &[
    "electronics",
    "books",
    "garden",
    "toys",
    "grocery",
    "clothing",
    "sports",
    "beauty",
    "automotive",
    "music",
    "office",
    "health",
];
const CURRENCIES: &[&str] = &["USD", "EUR", "GBP", "JPY"];
const NOTES: &[&str] = &[
    "gift wrap",
    "leave at door",
    "call before delivery",
    "fragile",
    "expedite",
];
/// 2022-01-01 in days since the epoch.
const FIRST_ORDER_DAY: i32 = 18_993;
const ORDERS_PER_DAY: u64 = 400;
const SALES_REPS: usize = 200;
const CUSTOMERS: usize = 50_000;
const PRODUCTS: usize = 5_000;
const STREAM_ROW: u64 = 0x51DE;

/// The `wide` dataset.
#[derive(Debug)]
pub struct Wide {
    seed: u64,
    rows: u64,
    schema: SchemaRef,
    customer: Zipf,
    product: Zipf,
    country: Zipf,
    status: Zipf,
    category: Zipf,
    rep: Zipf,
}

impl Wide {
    /// `rows` orders under `seed`.
    pub fn new(seed: u64, rows: u64) -> Self {
        let utc = Some("UTC".into());
        let schema = Arc::new(Schema::new(vec![
            Field::new("order_id", DataType::Int64, false),
            Field::new("customer_id", DataType::Int64, false),
            Field::new("product_id", DataType::Int32, false),
            Field::new("region", DataType::Utf8, false),
            Field::new("country", DataType::Utf8, false),
            Field::new("status", DataType::Utf8, false),
            Field::new("channel", DataType::Utf8, false),
            Field::new("category", DataType::Utf8, false),
            Field::new("order_date", DataType::Date32, false),
            Field::new("ship_date", DataType::Date32, true),
            Field::new(
                "created_at",
                DataType::Timestamp(TimeUnit::Microsecond, utc),
                false,
            ),
            Field::new("quantity", DataType::Int32, false),
            Field::new("unit_price", DataType::Float64, false),
            Field::new("discount", DataType::Float64, false),
            Field::new("tax", DataType::Float64, false),
            Field::new("total", DataType::Float64, false),
            Field::new("currency", DataType::Utf8, false),
            Field::new("is_priority", DataType::Boolean, false),
            Field::new("is_gift", DataType::Boolean, false),
            Field::new("sales_rep", DataType::Utf8, true),
            Field::new("notes", DataType::Utf8, true),
        ]));
        Self {
            seed,
            rows,
            schema,
            customer: Zipf::new(CUSTOMERS, 0.9),
            product: Zipf::new(PRODUCTS, 1.0),
            country: Zipf::new(COUNTRIES.len(), 1.1),
            status: Zipf::from_weights(&[60.0, 20.0, 10.0, 6.0, 4.0]),
            category: Zipf::new(CATEGORIES.len(), 0.8),
            rep: Zipf::new(SALES_REPS, 0.7),
        }
    }
}

fn round_cents(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

impl Dataset for Wide {
    fn name(&self) -> &'static str {
        "wide"
    }

    fn rows(&self) -> u64 {
        self.rows
    }

    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn bloom_columns(&self) -> &[&'static str] {
        &["order_id", "customer_id"]
    }

    fn delta_columns(&self) -> &[&'static str] {
        &["order_id", "created_at"]
    }

    fn sorted_by(&self) -> Vec<&'static str> {
        vec!["order_id"]
    }

    fn batch(&self, start: u64, len: usize) -> Result<RecordBatch, ArrowError> {
        let mut order_id = Vec::with_capacity(len);
        let mut customer_id = Vec::with_capacity(len);
        let mut product_id = Vec::with_capacity(len);
        let mut region = StringBuilder::with_capacity(len, len * 6);
        let mut country = StringBuilder::with_capacity(len, len * 2);
        let mut status = StringBuilder::with_capacity(len, len * 9);
        let mut channel = StringBuilder::with_capacity(len, len * 5);
        let mut category = StringBuilder::with_capacity(len, len * 8);
        let mut order_date = Vec::with_capacity(len);
        let mut ship_date = Vec::with_capacity(len);
        let mut created_at = Vec::with_capacity(len);
        let mut quantity = Vec::with_capacity(len);
        let mut unit_price = Vec::with_capacity(len);
        let mut discount = Vec::with_capacity(len);
        let mut tax = Vec::with_capacity(len);
        let mut total = Vec::with_capacity(len);
        let mut currency = StringBuilder::with_capacity(len, len * 3);
        let mut is_priority = Vec::with_capacity(len);
        let mut is_gift = Vec::with_capacity(len);
        let mut sales_rep = StringBuilder::with_capacity(len, len * 7);
        let mut notes = StringBuilder::with_capacity(len, len);
        let mut rep_name = *b"rep-000";

        for row in start..start + len as u64 {
            let mut rng = RowRng::for_row(self.seed, STREAM_ROW, row);
            order_id.push(row as i64 + 1_000_000);
            customer_id.push(self.customer.sample(rng.next_u64()) as i64 + 1);
            product_id.push(self.product.sample(rng.next_u64()) as i32 + 1);
            let country_ix = self.country.sample(rng.next_u64());
            region.append_value(REGIONS[country_ix % REGIONS.len()]);
            country.append_value(COUNTRIES[country_ix]);
            let status_ix = self.status.sample(rng.next_u64());
            status.append_value(STATUSES[status_ix]);
            channel.append_value(CHANNELS[rng.below(CHANNELS.len() as u64) as usize]);
            category.append_value(CATEGORIES[self.category.sample(rng.next_u64())]);

            let day = FIRST_ORDER_DAY + (row / ORDERS_PER_DAY) as i32;
            order_date.push(day);
            // Pending and cancelled orders have not shipped.
            ship_date.push(match STATUSES[status_ix] {
                "pending" | "cancelled" => None,
                _ => Some(day + 1 + rng.below(7) as i32),
            });
            let second_of_day = (row % ORDERS_PER_DAY) * 86_400 / ORDERS_PER_DAY + rng.below(200);
            created_at.push((i64::from(day) * 86_400 + second_of_day as i64) * 1_000_000);

            let qty = 1 + rng.below(5) as i32 + if rng.chance(0.05) { 20 } else { 0 };
            quantity.push(qty);
            let price = round_cents(2.0 + 498.0 * rng.next_f64().powi(3));
            unit_price.push(price);
            let disc = if rng.chance(0.3) {
                (rng.below(7) as f64) * 0.05
            } else {
                0.0
            };
            discount.push(disc);
            let gross = f64::from(qty) * price * (1.0 - disc);
            let t = round_cents(gross * 0.08);
            tax.push(t);
            total.push(round_cents(gross + t));
            currency.append_value(CURRENCIES[country_ix % CURRENCIES.len()]);
            is_priority.push(rng.chance(0.12));
            is_gift.push(rng.chance(0.07));
            if rng.chance(0.05) {
                sales_rep.append_null();
            } else {
                let r = self.rep.sample(rng.next_u64()) as u8;
                rep_name[4] = b'0' + r / 100 % 10;
                rep_name[5] = b'0' + r / 10 % 10;
                rep_name[6] = b'0' + r % 10;
                let text = std::str::from_utf8(&rep_name)
                    .map_err(|e| ArrowError::ComputeError(e.to_string()))?;
                sales_rep.append_value(text);
            }
            if rng.chance(0.9) {
                notes.append_null();
            } else {
                notes.append_value(NOTES[rng.below(NOTES.len() as u64) as usize]);
            }
        }

        RecordBatch::try_new(
            Arc::clone(&self.schema),
            vec![
                Arc::new(Int64Array::from(order_id)),
                Arc::new(Int64Array::from(customer_id)),
                Arc::new(Int32Array::from(product_id)),
                Arc::new(region.finish()),
                Arc::new(country.finish()),
                Arc::new(status.finish()),
                Arc::new(channel.finish()),
                Arc::new(category.finish()),
                Arc::new(Date32Array::from(order_date)),
                Arc::new(Date32Array::from(ship_date)),
                Arc::new(TimestampMicrosecondArray::from(created_at).with_timezone("UTC")),
                Arc::new(Int32Array::from(quantity)),
                Arc::new(Float64Array::from(unit_price)),
                Arc::new(Float64Array::from(discount)),
                Arc::new(Float64Array::from(tax)),
                Arc::new(Float64Array::from(total)),
                Arc::new(currency.finish()),
                Arc::new(BooleanArray::from(is_priority)),
                Arc::new(BooleanArray::from(is_gift)),
                Arc::new(sales_rep.finish()),
                Arc::new(notes.finish()),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn has_21_columns_and_is_a_pure_function_of_the_range() {
        let d = Wide::new(11, 5_000);
        assert_eq!(d.schema().fields().len(), 21);
        let whole = d.batch(0, 2_000).unwrap();
        assert_eq!(whole.slice(700, 300), d.batch(700, 300).unwrap());
    }
}
