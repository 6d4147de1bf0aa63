//! Printing dates and timestamps without a date library (proleptic Gregorian calendar,
//! UTC), as DuckDB prints them.

const MICROS_PER_SECOND: i64 = 1_000_000;
const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;

use ringscan_values::date::civil_from_days;
pub(crate) use ringscan_values::date::format_date;

/// `YYYY-MM-DD HH:MM:SS[.ffffff]`.
pub(crate) fn format_timestamp(ts_us: i64) -> String {
    let days = ts_us.div_euclid(MICROS_PER_DAY);
    let rem = ts_us.rem_euclid(MICROS_PER_DAY);
    let (y, m, d) = civil_from_days(days);
    let secs = rem / MICROS_PER_SECOND;
    let frac = rem % MICROS_PER_SECOND;
    let base = format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    if frac == 0 {
        base
    } else {
        format!("{base}.{frac:06}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_print_as_civil_dates() {
        assert_eq!(format_date(0), "1970-01-01");
        assert_eq!(format_date(18_993), "2022-01-01");
        assert_eq!(format_date(19_782), "2024-02-29");
        assert_eq!(format_date(-1), "1969-12-31");
        // Every day of four centuries against a day-by-day count.
        let (mut y, mut m, mut d) = (1900_i64, 1_u32, 1_u32);
        for days in -25_567..120_000 {
            assert_eq!(
                format_date(days),
                format!("{y:04}-{m:02}-{d:02}"),
                "day {days}"
            );
            let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
            let len = match m {
                2 if leap => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            d += 1;
            if d > len {
                d = 1;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
        }
    }

    #[test]
    fn timestamps_print_with_fractions_only_when_present() {
        assert_eq!(format_timestamp(0), "1970-01-01 00:00:00");
        let t = 19_724 * MICROS_PER_DAY + (9 * 3600 + 30 * 60) * MICROS_PER_SECOND;
        assert_eq!(format_timestamp(t), "2024-01-02 09:30:00");
        assert_eq!(format_timestamp(t + 500_000), "2024-01-02 09:30:00.500000");
        assert_eq!(format_timestamp(-1), "1969-12-31 23:59:59.999999");
    }
}
