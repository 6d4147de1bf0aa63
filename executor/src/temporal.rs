//! Date, timestamp and interval literals: parsing, printing and constant arithmetic,
//! without a date library (proleptic Gregorian calendar, UTC).

const MICROS_PER_SECOND: i64 = 1_000_000;
const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
pub(crate) fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day number (inverse of [`days_from_civil`]).
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Parses `YYYY-MM-DD` into days since the epoch.
pub(crate) fn parse_date(s: &str) -> Result<i32, String> {
    let s = s.trim();
    let mut parts = s.splitn(3, '-');
    let (y, m, d) = match (parts.next(), parts.next(), parts.next()) {
        (Some(y), Some(m), Some(d)) => (y, m, d),
        _ => return Err("expected YYYY-MM-DD".into()),
    };
    let year: i64 = y.parse().map_err(|_| format!("bad year '{y}'"))?;
    let month: u32 = m.parse().map_err(|_| format!("bad month '{m}'"))?;
    let day: u32 = d.parse().map_err(|_| format!("bad day '{d}'"))?;
    if !(1..=9999).contains(&year) || !(1..=12).contains(&month) {
        return Err("year or month out of range".into());
    }
    if day == 0 || day > days_in_month(year, month) {
        return Err(format!("day {day} does not exist in {year}-{month:02}"));
    }
    i32::try_from(days_from_civil(year, month, day)).map_err(|_| "date out of range".into())
}

/// Parses `YYYY-MM-DD[( |T)HH:MM[:SS[.ffffff]]][Z|+00|+00:00]` into µs since the epoch.
pub(crate) fn parse_timestamp(s: &str) -> Result<i64, String> {
    let s = s.trim();
    let (date, time) = match s.find([' ', 'T']) {
        Some(i) => (&s[..i], s[i + 1..].trim()),
        None => (s, ""),
    };
    let days = i64::from(parse_date(date)?);
    let time = time
        .trim_end_matches('Z')
        .trim_end_matches("+00:00")
        .trim_end_matches("+00");
    let mut micros = 0i64;
    if !time.is_empty() {
        let mut it = time.splitn(3, ':');
        let h: i64 = field(it.next(), "hour", 23)?;
        let m: i64 = field(it.next(), "minute", 59)?;
        let (sec, frac) = match it.next() {
            Some(sec) => match sec.split_once('.') {
                Some((s, f)) => (s, f),
                None => (sec, ""),
            },
            None => ("0", ""),
        };
        let sec: i64 = field(Some(sec), "second", 59)?;
        if frac.len() > 6 || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("bad fraction of a second '{frac}'"));
        }
        let frac_us: i64 = format!("{frac:0<6}").parse().unwrap_or(0);
        micros = ((h * 60 + m) * 60 + sec) * MICROS_PER_SECOND + frac_us;
    }
    Ok(days * MICROS_PER_DAY + micros)
}

fn field(part: Option<&str>, what: &str, max: i64) -> Result<i64, String> {
    let text = part.ok_or_else(|| format!("missing {what}"))?;
    match text.parse::<i64>() {
        Ok(v) if (0..=max).contains(&v) => Ok(v),
        _ => Err(format!("bad {what} '{text}'")),
    }
}

/// Parses an interval such as `1 day`, `90 minutes`, `2 hours 30 minutes`, `1 month`;
/// `unit` is the unit written after the quotes (`INTERVAL '1' DAY`), if any.
pub(crate) fn parse_interval(s: &str, unit: Option<&str>) -> Result<(i32, i64), String> {
    let text = match unit {
        Some(u) => format!("{s} {u}"),
        None => s.to_owned(),
    };
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.is_empty() || !words.len().is_multiple_of(2) {
        return Err("expected '<number> <unit>' pairs".into());
    }
    let (mut months, mut micros) = (0i64, 0i64);
    for pair in words.chunks(2) {
        let n: i64 = pair[0]
            .parse()
            .map_err(|_| format!("bad number '{}'", pair[0]))?;
        let unit = pair[1].to_ascii_lowercase();
        let (m, us) = match unit.trim_end_matches('s') {
            "microsecond" | "u" => (0, 1),
            "millisecond" | "m" => (0, 1_000),
            "second" | "sec" => (0, MICROS_PER_SECOND),
            "minute" | "min" => (0, 60 * MICROS_PER_SECOND),
            "hour" => (0, 3_600 * MICROS_PER_SECOND),
            "day" => (0, MICROS_PER_DAY),
            "week" => (0, 7 * MICROS_PER_DAY),
            "month" | "mon" => (1, 0),
            "year" => (12, 0),
            _ => return Err(format!("unknown unit '{}'", pair[1])),
        };
        months = n
            .checked_mul(m)
            .and_then(|v| v.checked_add(months))
            .ok_or("interval out of range")?;
        micros = n
            .checked_mul(us)
            .and_then(|v| v.checked_add(micros))
            .ok_or("interval out of range")?;
    }
    let months = i32::try_from(months).map_err(|_| "interval out of range".to_owned())?;
    Ok((months, micros))
}

/// `ts + sign * (months, micros)`, months by calendar (day clamped to the month's end).
pub(crate) fn add_interval(ts_us: i64, months: i32, micros: i64, sign: i64) -> Option<i64> {
    let days = ts_us.div_euclid(MICROS_PER_DAY);
    let time = ts_us.rem_euclid(MICROS_PER_DAY);
    let (y, m, d) = civil_from_days(days);
    let total = y * 12 + i64::from(m) - 1 + sign * i64::from(months);
    let (ny, nm) = (total.div_euclid(12), (total.rem_euclid(12) + 1) as u32);
    let nd = d.min(days_in_month(ny, nm));
    let shifted = days_from_civil(ny, nm, nd)
        .checked_mul(MICROS_PER_DAY)?
        .checked_add(time)?;
    shifted.checked_add(micros.checked_mul(sign)?)
}

/// `YYYY-MM-DD`.
pub(crate) fn format_date(days: i32) -> String {
    let (y, m, d) = civil_from_days(i64::from(days));
    format!("{y:04}-{m:02}-{d:02}")
}

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
    fn dates_round_trip() {
        assert_eq!(parse_date("1970-01-01"), Ok(0));
        assert_eq!(parse_date("2022-01-01"), Ok(18_993));
        assert_eq!(format_date(18_993), "2022-01-01");
        assert!(parse_date("2023-02-29").is_err());
        assert_eq!(
            parse_date("2024-02-29").map(format_date).as_deref(),
            Ok("2024-02-29")
        );
    }

    #[test]
    fn timestamps_parse_and_print() {
        let t = parse_timestamp("2024-01-02 09:30:00").unwrap();
        assert_eq!(format_timestamp(t), "2024-01-02 09:30:00");
        assert_eq!(parse_timestamp("2024-01-02T09:30:00Z"), Ok(t));
        assert_eq!(
            parse_timestamp("2024-01-02 09:30:00.5").unwrap() - t,
            500_000
        );
        assert_eq!(parse_timestamp("1970-01-02"), Ok(MICROS_PER_DAY));
        assert!(parse_timestamp("2024-01-02 25:00").is_err());
    }

    #[test]
    fn interval_arithmetic() {
        let t = parse_timestamp("2024-03-31").unwrap();
        let (m, us) = parse_interval("1 month", None).unwrap();
        assert_eq!(
            format_timestamp(add_interval(t, m, us, -1).unwrap()),
            "2024-02-29 00:00:00"
        );
        let (m, us) = parse_interval("1", Some("DAY")).unwrap();
        assert_eq!((m, us), (0, MICROS_PER_DAY));
        assert!(parse_interval("1 fortnight", None).is_err());
    }
}
