//! RFC 3339 timestamps from `SystemTime`, without a date-time crate.

use std::time::{SystemTime, UNIX_EPOCH};

use ringscan_values::date::civil_from_days;

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
}
