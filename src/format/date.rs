//! Dates as Debian's repository files write them: RFC 2822 in UTC,
//! `Sat, 23 Mar 2019 06:13:20 UTC` (the `Date` and `Valid-Until` fields of a
//! Release file, <https://wiki.debian.org/DebianRepository/Format#Date.2C_Valid-Until>).

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];
const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];

/// Days since 1970-01-01 to (year, month, day). H. Hinnant's algorithm.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// (year, month, day) to days since 1970-01-01.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Seconds since the epoch to `YYYY-MM-DD HH:MM` (UTC).
pub fn utc_minutes(epoch: i64) -> String {
    let (y, m, d) = civil_from_days(epoch.div_euclid(86_400));
    let s = epoch.rem_euclid(86_400);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}", s / 3600, s % 3600 / 60)
}

/// Seconds since the epoch to the Release form, `Sat, 23 Mar 2019 06:13:20 UTC`.
pub fn format_rfc2822(epoch: i64) -> String {
    let days = epoch.div_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let s = epoch.rem_euclid(86_400);
    format!(
        "{}, {d:02} {} {y:04} {:02}:{:02}:{:02} UTC",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[m as usize - 1],
        s / 3600,
        s % 3600 / 60,
        s % 60
    )
}

/// Parses what apt accepts in Release files: an optional weekday, `D Mon
/// YYYY HH:MM:SS` and a zone of `UTC`, `GMT`, `Z` or `±HHMM`.
pub fn parse_rfc2822(text: &str) -> Option<i64> {
    let text = text.trim();
    let text = match text.split_once(',') {
        Some((_, rest)) => rest.trim(),
        None => text,
    };
    let parts: Vec<&str> = text.split_whitespace().collect();
    let [day, month, year, time, zone] = parts.as_slice() else {
        return None;
    };
    let d: u32 = day.parse().ok().filter(|d| (1..=31).contains(d))?;
    let m = MONTHS.iter().position(|&n| n.eq_ignore_ascii_case(month))? as u32 + 1;
    let y: i64 = year.parse().ok().filter(|y| (1970..=9999).contains(y))?;
    let hms: Vec<i64> = time
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [hh, mm, ss] = hms.as_slice() else {
        return None;
    };
    if !(0..24).contains(hh) || !(0..60).contains(mm) || !(0..61).contains(ss) {
        return None;
    }
    let offset = match *zone {
        "UTC" | "GMT" | "Z" | "UT" => 0,
        z if z.len() == 5 && (z.starts_with('+') || z.starts_with('-')) => {
            let n: i64 = z[1..].parse().ok()?;
            let secs = (n / 100) * 3600 + (n % 100) * 60;
            if z.starts_with('-') { -secs } else { secs }
        }
        _ => return None,
    };
    Some(days_from_civil(y, m, d) * 86_400 + hh * 3600 + mm * 60 + ss - offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for t in [0, 951_782_400, 1_556_000_000, 1_779_286_000] {
            assert_eq!(parse_rfc2822(&format_rfc2822(t)), Some(t));
        }
        assert_eq!(
            format_rfc2822(1_556_000_000),
            "Tue, 23 Apr 2019 06:13:20 UTC"
        );
        assert_eq!(
            parse_rfc2822("Wed, 20 May 2026 14:06:31 UTC"),
            Some(1_779_285_991)
        );
        assert_eq!(
            parse_rfc2822("20 May 2026 16:06:31 +0200"),
            Some(1_779_285_991)
        );
        assert_eq!(parse_rfc2822("yesterday"), None);
        assert_eq!(utc_minutes(1_556_000_000), "2019-04-23 06:13");
    }
}
