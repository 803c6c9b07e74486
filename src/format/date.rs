//! Dates as Debian's repository files write them: RFC 2822 in UTC,
//! `Sat, 23 Mar 2019 06:13:20 UTC` (the `Date` and `Valid-Until` fields of a
//! Release file, <https://wiki.debian.org/DebianRepository/Format#Date.2C_Valid-Until>).

use chrono::{DateTime, Datelike, Utc};

fn utc(epoch: i64) -> Option<DateTime<Utc>> {
    DateTime::<Utc>::from_timestamp(epoch, 0)
}

/// Seconds since the epoch to `YYYY-MM-DD HH:MM` (UTC), as `dpkg-deb -c`
/// lists a file's time.
pub fn utc_minutes(epoch: i64) -> String {
    utc(epoch).map_or_else(String::new, |t| t.format("%Y-%m-%d %H:%M").to_string())
}

/// Seconds since the epoch to the Release form, `Sat, 23 Mar 2019 06:13:20 UTC`.
pub fn format_rfc2822(epoch: i64) -> String {
    utc(epoch).map_or_else(String::new, |t| {
        t.format("%a, %d %b %Y %H:%M:%S UTC").to_string()
    })
}

/// Parses what apt accepts in Release files: an optional weekday, `D Mon
/// YYYY HH:MM:SS` and a zone of `UTC`, `GMT`, `UT`, `Z` or `±HHMM` (chrono's
/// RFC 2822 parser, after the named zones it reads differently).
pub fn parse_rfc2822(text: &str) -> Option<i64> {
    let (head, zone) = text.trim().rsplit_once(char::is_whitespace)?;
    let zone = match zone {
        "UTC" | "GMT" | "UT" | "Z" => "+0000",
        z if z.len() == 5 && (z.starts_with('+') || z.starts_with('-')) => z,
        _ => return None,
    };
    let t = DateTime::parse_from_rfc2822(&format!("{} {zone}", head.trim_end())).ok()?;
    (1970..=9999).contains(&t.year()).then(|| t.timestamp())
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
        assert_eq!(parse_rfc2822("1 Jan 2000 00:00:00 Z"), Some(946_684_800));
        assert_eq!(
            parse_rfc2822("Sat, 01 Jan 2000 00:00:00 GMT"),
            Some(946_684_800)
        );
        assert_eq!(parse_rfc2822("Sat, 01 Jan 2000 00:00:00 EST"), None);
        assert_eq!(parse_rfc2822("Sat, 01 Jan 1969 00:00:00 UTC"), None);
        assert_eq!(parse_rfc2822("yesterday"), None);
        assert_eq!(utc_minutes(1_556_000_000), "2019-04-23 06:13");
    }
}
