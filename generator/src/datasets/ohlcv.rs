//! `ohlcv`: one-minute bars per symbol, prices a random walk around 400-500.
//!
//! Rows are ordered by symbol, then time: row `r` is bar `r % bars_per_symbol` of symbol
//! `r / bars_per_symbol`. A bar's close is a sum of value-noise octaves whose amplitude
//! doubles every two octaves (Brownian scaling), so consecutive bars are close, a row
//! group spans a narrow price range, and any bar can be computed without its
//! predecessors.

use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::{Float64Array, RecordBatch, TimestampMicrosecondArray, UInt64Array};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef, TimeUnit};

use super::Dataset;
use crate::rng::{hash3, unit_f64, RowRng};

/// Trading minutes in a US session, 14:30 to 21:00 UTC.
const BARS_PER_DAY: u64 = 390;
/// Session open, seconds after midnight UTC.
const OPEN_SECS: i64 = 14 * 3600 + 30 * 60;
/// 2024-01-02, a Tuesday, in days since the Unix epoch.
const FIRST_DAY: i64 = 19_724;
/// Day of the week of `FIRST_DAY`, Monday = 0.
const FIRST_WEEKDAY: i64 = 1;
/// Octaves of price noise: the coarsest spans 2^16 minutes (about 168 trading days).
const OCTAVES: u32 = 17;
/// Amplitude of the finest octave, dollars.
const FINE_AMPLITUDE: f64 = 0.04;
const PRICE_MIN: f64 = 400.0;
const PRICE_MAX: f64 = 500.0;

/// Real tickers first; beyond them, synthetic `S0042` names.
const TICKERS: &[&str] = &[
    "SPY", "QQQ", "AAPL", "MSFT", "NVDA", "AMZN", "GOOG", "META", "TSLA", "AMD", "NFLX", "INTC",
    "JPM", "BAC", "XOM", "CVX", "KO", "PEP", "WMT", "COST", "DIS", "V", "MA", "UNH", "HD", "ORCL",
    "CRM", "ADBE", "AVGO", "CSCO", "IWM", "DIA",
];

/// Stream tags, so that each use of randomness is independent of the others.
const STREAM_NOISE: u64 = 1;
const STREAM_BASE: u64 = 2;
const STREAM_BAR: u64 = 3;

/// How `ohlcv` output is split into hive partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionBy {
    /// One file per writer.
    None,
    /// `symbol=SPY/`.
    Symbol,
    /// `symbol=SPY/date=2024-01-02/`.
    SymbolDate,
}

/// The `ohlcv` dataset.
#[derive(Debug)]
pub struct Ohlcv {
    seed: u64,
    rows: u64,
    bars_per_symbol: u64,
    symbols: Vec<String>,
    base_price: Vec<f64>,
    partition_by: PartitionBy,
    schema: SchemaRef,
}

impl Ohlcv {
    /// `rows` bars spread over `symbols` symbols (at least 1, and at most `rows`).
    pub fn new(seed: u64, rows: u64, symbols: usize, partition_by: PartitionBy) -> Self {
        assert!(symbols >= 1, "at least one symbol");
        let symbols_count = (symbols as u64).min(rows.max(1));
        let bars_per_symbol = rows.div_ceil(symbols_count).max(1);
        let mut names: Vec<String> = (0..symbols_count as usize)
            .map(|i| match TICKERS.get(i) {
                Some(t) => (*t).to_owned(),
                None => format!("S{i:05}"),
            })
            .collect();
        // Rows are symbol-major; sorting the names makes the files sorted by symbol.
        names.sort();
        let base_price = (0..symbols_count)
            .map(|s| 430.0 + 40.0 * unit_f64(hash3(seed, STREAM_BASE, s)))
            .collect();
        let schema = Arc::new(Schema::new(vec![
            Field::new("symbol", DataType::Utf8, false),
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                false,
            ),
            Field::new("open", DataType::Float64, false),
            Field::new("high", DataType::Float64, false),
            Field::new("low", DataType::Float64, false),
            Field::new("close", DataType::Float64, false),
            Field::new("volume", DataType::UInt64, false),
        ]));
        Self {
            seed,
            rows,
            bars_per_symbol,
            symbols: names,
            base_price,
            partition_by,
            schema,
        }
    }

    /// The symbols, in row order.
    pub fn symbols(&self) -> &[String] {
        &self.symbols
    }

    /// Close prices of bars `m0 .. m0 + out.len()` of symbol `sym` (`m0` may be -1, the
    /// bar before the first, whose close is the first bar's open).
    fn closes_into(&self, sym: u64, m0: i64, out: &mut [f64]) {
        out.fill(self.base_price[sym as usize]);
        let stream_base = STREAM_NOISE ^ (sym << 8);
        for octave in 0..OCTAVES {
            let amplitude = FINE_AMPLITUDE * f64::from(1u32 << octave).sqrt();
            let stream = stream_base ^ u64::from(octave);
            let period = 1i64 << octave;
            // Lattice values at both ends of the current cell, re-hashed only when the
            // cell changes: about two hashes per cell instead of two per bar.
            let mut cell = i64::MIN;
            let (mut left, mut right) = (0.0, 0.0);
            for (i, price) in out.iter_mut().enumerate() {
                let m = m0 + i as i64 + 1; // shift so that m0 = -1 maps to a lattice index >= 0
                let c = m >> octave;
                if c != cell {
                    cell = c;
                    left = lattice(self.seed, stream, c);
                    right = lattice(self.seed, stream, c + 1);
                }
                let t = (m & (period - 1)) as f64 / period as f64;
                *price += amplitude * (left + (right - left) * t);
            }
        }
        for price in out.iter_mut() {
            *price = round_cents(reflect(*price));
        }
    }
}

/// A lattice value in [-1, 1].
#[inline]
fn lattice(seed: u64, stream: u64, cell: i64) -> f64 {
    unit_f64(hash3(seed, stream, cell as u64)) * 2.0 - 1.0
}

/// Folds a price back into [PRICE_MIN, PRICE_MAX] by reflection at the edges.
fn reflect(p: f64) -> f64 {
    let span = PRICE_MAX - PRICE_MIN;
    let x = (p - PRICE_MIN).rem_euclid(2.0 * span);
    PRICE_MIN + if x > span { 2.0 * span - x } else { x }
}

fn round_cents(p: f64) -> f64 {
    (p * 100.0).round() / 100.0
}

/// Days since the epoch of the `d`-th trading day (weekdays from 2024-01-02).
fn trading_day(d: u64) -> i64 {
    let d = d as i64;
    let (weeks, rem) = (d / 5, d % 5);
    let weekend = if FIRST_WEEKDAY + rem >= 5 { 2 } else { 0 };
    FIRST_DAY + weeks * 7 + rem + weekend
}

/// `YYYY-MM-DD` of a day number (days since 1970-01-01), civil calendar.
pub(crate) fn format_date(days: i64) -> String {
    let (year, month, day) = ringscan_values::date::civil_from_days(days);
    format!("{year:04}-{month:02}-{day:02}")
}

impl Dataset for Ohlcv {
    fn name(&self) -> &'static str {
        "ohlcv"
    }

    fn rows(&self) -> u64 {
        self.rows
    }

    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn segment_end(&self, row: u64) -> u64 {
        let symbol_start = row - row % self.bars_per_symbol;
        let end = match self.partition_by {
            PartitionBy::SymbolDate => {
                let m = row - symbol_start;
                symbol_start + (m / BARS_PER_DAY + 1) * BARS_PER_DAY
            }
            // A batch never spans two symbols, even unpartitioned: the price walk is
            // computed per symbol.
            PartitionBy::None | PartitionBy::Symbol => symbol_start + self.bars_per_symbol,
        };
        end.min(symbol_start + self.bars_per_symbol).min(self.rows)
    }

    fn partition_dir(&self, row: u64) -> Option<String> {
        let sym = &self.symbols[(row / self.bars_per_symbol) as usize];
        match self.partition_by {
            PartitionBy::None => None,
            PartitionBy::Symbol => Some(format!("symbol={sym}")),
            PartitionBy::SymbolDate => {
                let day = trading_day(row % self.bars_per_symbol / BARS_PER_DAY);
                Some(format!("symbol={sym}/date={}", format_date(day)))
            }
        }
    }

    fn partition_columns(&self) -> &[&'static str] {
        match self.partition_by {
            PartitionBy::None => &[],
            PartitionBy::Symbol | PartitionBy::SymbolDate => &["symbol"],
        }
    }

    fn bloom_columns(&self) -> &[&'static str] {
        &["symbol"]
    }

    fn delta_columns(&self) -> &[&'static str] {
        &["ts"]
    }

    // `volume` takes about 6,000 values (multiples of 100, heavy-tailed) in random order.
    // Measured on 1,000,000 bars of one symbol, zstd, DELTA_BINARY_PACKED without a
    // dictionary vs the dictionary: file size -1.4% (1,000-row row groups, 250-row pages),
    // +2.6% (4,096), +4.5% (8,192), +5.0% (10,000; +5.8% with 1,000-row pages), +6.3% to
    // +7.6% (16,384), +9% to +13% (65,536 and 131,072). With 10,000-row row groups the
    // dictionary page is about 8 KB of a 23 KB chunk, and seed 000's `close >= p90` (three
    // row groups kept, 15% of their pages) read 155,109 bytes with it and 129,422 without
    // (18.0% -> 14.3% of an unfiltered scan), and an unfiltered scan decodes faster
    // (-11% instructions, 250-row pages). With 131,072-row row groups the dictionary is 9%
    // of the chunk and the delta file 13% larger, so the dictionary stays there.
    // BYTE_STREAM_SPLIT instead of delta: smaller files (+3.3% at 10,000 rows) but a
    // slower unfiltered scan (+14% instructions, 1,000-row pages; +10% wall time).
    fn dictionary_min_row_group_rows(&self) -> &[(&'static str, usize)] {
        &[("volume", 16_384)]
    }

    fn sorted_by(&self) -> Vec<&'static str> {
        match self.partition_by {
            PartitionBy::None => vec!["symbol", "ts"],
            PartitionBy::Symbol | PartitionBy::SymbolDate => vec!["ts"],
        }
    }

    fn batch(&self, start: u64, len: usize) -> Result<RecordBatch, ArrowError> {
        let sym = start / self.bars_per_symbol;
        let m0 = start % self.bars_per_symbol;
        debug_assert!(start + len as u64 <= self.segment_end(start).max(start));

        // closes[0] is the bar before the first: its close is the first bar's open.
        let mut closes = vec![0.0; len + 1];
        self.closes_into(sym, m0 as i64 - 1, &mut closes);

        let mut ts = Vec::with_capacity(len);
        let mut open = Vec::with_capacity(len);
        let mut high = Vec::with_capacity(len);
        let mut low = Vec::with_capacity(len);
        let mut volume = Vec::with_capacity(len);
        let mut day_of = u64::MAX;
        let mut day_secs = 0i64;
        for i in 0..len {
            let m = m0 + i as u64;
            let day = m / BARS_PER_DAY;
            if day != day_of {
                day_of = day;
                day_secs = trading_day(day) * 86_400 + OPEN_SECS;
            }
            ts.push((day_secs + (m % BARS_PER_DAY) as i64 * 60) * 1_000_000);
            let (o, c) = (closes[i], closes[i + 1]);
            let mut rng = RowRng::for_row(self.seed, STREAM_BAR ^ (sym << 8), m);
            let wick_up = rng.next_f64() * 0.15;
            let wick_down = rng.next_f64() * 0.15;
            open.push(o);
            high.push(round_cents(o.max(c) + wick_up));
            low.push(round_cents(o.min(c) - wick_down));
            // Heavy-tailed volume: 100 shares to a few hundred thousand.
            let u = rng.next_f64();
            volume.push(100 + (200.0 * (8.0 * u).exp()) as u64 / 100 * 100);
        }
        let symbol = &self.symbols[sym as usize];
        let mut symbols = StringBuilder::with_capacity(len, len * symbol.len());
        for _ in 0..len {
            symbols.append_value(symbol);
        }
        let close = closes[1..].to_vec();
        RecordBatch::try_new(
            Arc::clone(&self.schema),
            vec![
                Arc::new(symbols.finish()),
                Arc::new(TimestampMicrosecondArray::from(ts).with_timezone("UTC")),
                Arc::new(Float64Array::from(open)),
                Arc::new(Float64Array::from(high)),
                Arc::new(Float64Array::from(low)),
                Arc::new(Float64Array::from(close)),
                Arc::new(UInt64Array::from(volume)),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::Float64Type;

    #[test]
    fn dates_format_as_civil_dates() {
        assert_eq!(format_date(0), "1970-01-01");
        assert_eq!(format_date(FIRST_DAY), "2024-01-02");
        assert_eq!(format_date(19_782), "2024-02-29");
    }

    #[test]
    fn trading_days_skip_weekends() {
        // 2024-01-02 Tue .. Fri 01-05, then Mon 01-08.
        let days: Vec<String> = (0..6).map(|d| format_date(trading_day(d))).collect();
        assert_eq!(
            days,
            [
                "2024-01-02",
                "2024-01-03",
                "2024-01-04",
                "2024-01-05",
                "2024-01-08",
                "2024-01-09"
            ]
        );
    }

    #[test]
    fn prices_stay_in_range_and_move_little_per_bar() {
        let d = Ohlcv::new(3, 200_000, 2, PartitionBy::None);
        let b = d.batch(0, 100_000).unwrap();
        let close = b.column(5).as_primitive::<Float64Type>();
        let open = b.column(2).as_primitive::<Float64Type>();
        for i in 0..close.len() {
            let c = close.value(i);
            assert!((PRICE_MIN..=PRICE_MAX).contains(&c), "close {c} at {i}");
            if i > 0 {
                assert_eq!(
                    open.value(i),
                    close.value(i - 1),
                    "open is the previous close"
                );
                assert!((c - close.value(i - 1)).abs() < 2.0, "jump at {i}");
            }
        }
    }

    #[test]
    fn any_range_equals_the_same_rows_of_a_larger_range() {
        let d = Ohlcv::new(9, 10_000, 3, PartitionBy::None);
        let whole = d.batch(0, 3_334).unwrap();
        let part = d.batch(1_000, 500).unwrap();
        assert_eq!(whole.slice(1_000, 500), part);
    }

    #[test]
    fn segments_follow_partitions() {
        let d = Ohlcv::new(1, 2_000, 2, PartitionBy::SymbolDate);
        assert_eq!(d.segment_end(0), 390);
        assert_eq!(d.segment_end(995), 1_000);
        assert_eq!(d.segment_end(1_000), 1_390);
        assert_eq!(d.partition_dir(0).unwrap(), "symbol=QQQ/date=2024-01-02");
        assert_eq!(
            d.partition_dir(1_390).unwrap(),
            "symbol=SPY/date=2024-01-03"
        );
    }
}
