//! Civil dates: days since 1970-01-01 ↔ (year, month, day), and date text.
//!
//! The calendar is the proleptic Gregorian one with astronomical years (year 0 is 1 BC),
//! which is what Arrow's `Date32`, Parquet's `DATE` and DuckDB's `DATE` count in. The
//! conversions are Howard Hinnant's `days_from_civil` / `civil_from_days`
//! (<https://howardhinnant.github.io/date_algorithms.html>), exact for every `i32` day.
//!
//! [`parse_date`] is the one reader of date text in the workspace: hive partition
//! directories (`day=2024-1-5`) are typed and compared with it. It takes what a strict
//! DuckDB cast of text to `DATE` takes for ordinary dates:
//!
//! - optional ASCII whitespace around the date;
//! - a year of 1 to 6 digits, a month and a day of 1 or 2 digits (`2024-01-05`,
//!   `2024-1-5`, `24-01-05` is the year 24);
//! - `-`, `/` or a space between them, the same separator twice;
//! - a day that exists (`2024-02-30` is not a date).
//!
//! DuckDB's rarer forms (`infinity`, `epoch`, a ` (BC)` suffix, a time after the date in
//! a non-strict cast) are not dates here; KNOWN_DIFFERENCES lists them.

/// Days from 0000-03-01 to 1970-01-01 in the algorithm's March-based eras.
const UNIX_EPOCH_FROM_ERA0_DAYS: i64 = 719_468;
/// Days in 400 Gregorian years: the calendar repeats with this period.
const DAYS_PER_ERA: i64 = 146_097;

/// Whether `year` (astronomical) is a leap year.
pub fn is_leap_year(year: i64) -> bool {
    (year.rem_euclid(4) == 0 && year.rem_euclid(100) != 0) || year.rem_euclid(400) == 0
}

/// Days in `month` (1..=12) of `year`; 0 for a month outside 1..=12.
pub fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap_year(year) => 29,
        2 => 28,
        _ => 0,
    }
}

/// Days since 1970-01-01 of the civil date `year-month-day`, `None` when no such day
/// exists (month outside 1..=12, day outside the month).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> Option<i64> {
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    // Years start in March, so that the leap day is the last day of a year.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400; // 0..=399
    let month_from_march = i64::from((month + 9) % 12); // 0..=11
    let day_of_year = (153 * month_from_march + 2) / 5 + i64::from(day) - 1; // 0..=365
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    Some(era * DAYS_PER_ERA + day_of_era - UNIX_EPOCH_FROM_ERA0_DAYS)
}

/// The civil date (year, month 1..=12, day 1..=31) of a count of days since 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + UNIX_EPOCH_FROM_ERA0_DAYS;
    let era = z.div_euclid(DAYS_PER_ERA);
    let day_of_era = z.rem_euclid(DAYS_PER_ERA); // 0..=146096
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153; // 0..=11
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `YYYY-MM-DD` of a day number (days since 1970-01-01).
pub fn format_date(days: i32) -> String {
    let (y, m, d) = civil_from_days(i64::from(days));
    format!("{y:04}-{m:02}-{d:02}")
}

/// Most digits of a year in date text (a Date32 holds about ±5.8 million years).
const MAX_YEAR_DIGITS: usize = 6;

/// Days since 1970-01-01 of date text, as the module docs describe; `None` when the
/// text is not a date.
pub fn parse_date(text: &str) -> Option<i32> {
    let b = text
        .trim_matches(|c: char| c.is_ascii_whitespace())
        .as_bytes();
    let (year, rest) = leading_number(b, MAX_YEAR_DIGITS)?;
    let (&sep, rest) = rest.split_first()?;
    if !matches!(sep, b'-' | b'/' | b' ') {
        return None;
    }
    let (month, rest) = leading_number(rest, 2)?;
    let rest = rest.strip_prefix(&[sep])?;
    let (day, rest) = leading_number(rest, 2)?;
    if !rest.is_empty() {
        return None;
    }
    let days = days_from_civil(i64::from(year), month, day)?;
    i32::try_from(days).ok()
}

/// The number of 1 to `max_digits` decimal digits that `b` starts with, and the rest;
/// `None` when it starts with no digit or with more than `max_digits`.
fn leading_number(b: &[u8], max_digits: usize) -> Option<(u32, &[u8])> {
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 || digits > max_digits {
        return None;
    }
    let value = b[..digits]
        .iter()
        .fold(0u32, |v, c| v * 10 + u32::from(c - b'0'));
    Some((value, &b[digits..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, NaiveDate};
    use proptest::prelude::*;

    #[test]
    fn known_days() {
        assert_eq!(parse_date("1970-01-01"), Some(0));
        assert_eq!(parse_date("2024-01-02"), Some(19_724));
        assert_eq!(parse_date("1969-12-31"), Some(-1));
        assert_eq!(parse_date("2000-02-29"), Some(11_016));
        assert_eq!(format_date(19_782), "2024-02-29");
        assert_eq!(format_date(-1), "1969-12-31");
    }

    /// The forms DuckDB 1.x/2.0 accepts in a strict cast (checked with `duckdb` from
    /// tests/interop/requirements.txt: `SELECT '2024-1-5'::DATE` and hive typing).
    #[test]
    fn accepts_what_duckdb_accepts() {
        let jan5 = Some(19_727);
        for text in [
            "2024-01-05",
            "2024-1-5",
            "2024-1-05",
            "2024-01-5",
            " 2024-01-05",
            "2024-01-05 ",
            "\t2024-01-05\n",
            "2024/01/05",
            "2024 01 05",
        ] {
            assert_eq!(parse_date(text), jan5, "{text:?}");
        }
        assert_eq!(
            parse_date("24-01-05"),
            days_from_civil(24, 1, 5).map(|d| d as i32)
        );
        assert_eq!(
            parse_date("0000-01-01"),
            days_from_civil(0, 1, 1).map(|d| d as i32)
        );
        assert_eq!(
            parse_date("99999-01-01"),
            days_from_civil(99_999, 1, 1).map(|d| d as i32)
        );
    }

    #[test]
    fn refuses_what_is_not_a_date() {
        for text in [
            "",
            " ",
            "2024",
            "2024-01",
            "2024-01-05x",
            "2024-01-05T",
            "2024-01-05 10:00:00",
            "2024-02-30",
            "1900-02-29",
            "2024-13-01",
            "2024-00-10",
            "2024-01-00",
            "2024-001-05",
            "2024-01-005",
            "2024-01/05",
            "2024.01.05",
            "20240105",
            "+2024-01-05",
            "-2024-01-05",
            "1234567-01-01",
            "２０２４-01-05",
            "infinity",
            "epoch",
        ] {
            assert_eq!(parse_date(text), None, "{text:?}");
        }
    }

    proptest! {
        /// Against chrono, for every day of ±20,000 years around the epoch.
        #[test]
        fn civil_conversions_match_chrono(days in -7_300_000i64..7_300_000) {
            let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();
            let want = epoch + chrono::Duration::days(days);
            let (y, m, d) = civil_from_days(days);
            prop_assert_eq!((y, m, d), (i64::from(want.year()), want.month(), want.day()));
            prop_assert_eq!(days_from_civil(y, m, d), Some(days));
        }

        /// Text of every shape the parser takes reads back as chrono reads it.
        #[test]
        fn parsing_matches_chrono(
            year in 0i32..10_000,
            month in 0u32..14,
            day in 0u32..33,
            pad in any::<bool>(),
            sep in prop::sample::select(vec!['-', '/', ' ']),
        ) {
            let text = if pad {
                format!("{year:04}{sep}{month:02}{sep}{day:02}")
            } else {
                format!("{year}{sep}{month}{sep}{day}")
            };
            let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();
            let want = NaiveDate::from_ymd_opt(year, month, day)
                .map(|d| (d - epoch).num_days() as i32);
            prop_assert_eq!(parse_date(&text), want, "{}", text);
            if let Some(days) = want {
                prop_assert_eq!(parse_date(&format_date(days)), Some(days));
            }
        }
    }

    /// Against a naive day-by-day walk of the calendar, without chrono.
    #[test]
    fn civil_matches_a_day_walk() {
        let (mut y, mut m, mut d) = (1900_i64, 1_u32, 1_u32);
        for days in -25_567..50_000 {
            assert_eq!(civil_from_days(days), (y, m, d), "day {days}");
            d += 1;
            if d > days_in_month(y, m) {
                d = 1;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
        }
    }
}
