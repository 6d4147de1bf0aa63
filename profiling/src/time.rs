//! RFC 3339 timestamps from `SystemTime`, without a date-time crate.

use std::time::{SystemTime, UNIX_EPOCH};

/// Civil date (year, month 1..=12, day 1..=31) of a count of days since 1970-01-01.
///
/// Howard Hinnant's `civil_from_days`: exact for the whole proleptic Gregorian calendar.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, 0..=146096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // 0..=399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // 0..=365
    let mp = (5 * doy + 2) / 153; // 0..=11, March-based
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Broken-down UTC time: (year, month, day, hour, minute, second, millisecond).
fn utc_parts(t: SystemTime) -> (i64, u32, u32, u32, u32, u32, u32) {
    // Before 1970 only on a badly set clock: clamp to the epoch rather than fail.
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = i64::try_from(since.as_secs()).unwrap_or(i64::MAX / 2);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, mo, d) = civil_from_days(days);
    let rem = rem as u32;
    (
        y,
        mo,
        d,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since.subsec_millis(),
    )
}

/// `2026-03-21T10:15:12.345Z`.
pub fn rfc3339_utc(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s, ms) = utc_parts(t);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
}

/// `20260321-101512`: sortable, for run ids.
pub(crate) fn compact_utc(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s, _) = utc_parts(t);
    format!("{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(secs: u64, millis: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(millis)
    }

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339_utc(at(0, 0)), "1970-01-01T00:00:00.000Z");
        // `date -u -d @951782400` = 2000-02-29 00:00:00 (leap day of a /400 year).
        assert_eq!(rfc3339_utc(at(951_782_400, 5)), "2000-02-29T00:00:00.005Z");
        assert_eq!(
            rfc3339_utc(at(1_709_251_199, 999)),
            "2024-02-29T23:59:59.999Z"
        );
        assert_eq!(
            rfc3339_utc(at(4_102_444_800, 0)),
            "2100-01-01T00:00:00.000Z"
        );
        assert_eq!(compact_utc(at(1_774_088_112, 0)), "20260321-101512");
    }

    proptest::proptest! {
        /// Against a naive day-by-day walk of the calendar.
        #[test]
        fn civil_matches_naive_walk(days in 0i64..80_000) {
            let (mut y, mut m, mut d) = (1970i64, 1u32, 1u32);
            for _ in 0..days {
                let leap = (y.rem_euclid(4) == 0 && y.rem_euclid(100) != 0) || y.rem_euclid(400) == 0;
                let len = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
                d += 1;
                if d > len[(m - 1) as usize] { d = 1; m += 1; }
                if m > 12 { m = 1; y += 1; }
            }
            proptest::prop_assert_eq!(civil_from_days(days), (y, m, d));
        }
    }
}
