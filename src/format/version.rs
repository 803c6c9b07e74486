//! Debian package versions: `[epoch:]upstream_version[-debian_revision]`.
//!
//! Spec: Debian Policy §5.6.12 (<https://www.debian.org/doc/debian-policy/ch-controlfields.html#version>);
//! the parser and the ordering follow dpkg's `parseversion()` and `verrevcmp()`
//! (lib/dpkg/parsehelp.c, lib/dpkg/version.c) exactly, including what dpkg only
//! warns about, so `debforge vercmp` answers as `dpkg --compare-versions` does.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// A parsed Debian version. Comparison (`Ord`) is dpkg's; equality is dpkg's too,
/// so `1.0` == `0:1.0` == `1.0-0`.
#[derive(Debug, Clone)]
pub struct Version {
    epoch: u32,
    upstream: String,
    revision: String,
}

/// Why a string is not a Debian version. The messages are dpkg's own words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error("version string is empty")]
    Empty,
    #[error("version string has embedded spaces")]
    EmbeddedSpaces,
    #[error("epoch in version is empty")]
    EpochEmpty,
    #[error("epoch in version is not number")]
    EpochNotNumber,
    #[error("epoch in version is negative")]
    EpochNegative,
    #[error("epoch in version is too big")]
    EpochTooBig,
    #[error("nothing after colon in version number")]
    NothingAfterColon,
    #[error("revision number is empty")]
    RevisionEmpty,
    #[error("version number is empty")]
    UpstreamEmpty,
    /// dpkg only warns about the following three; `Version::parse` rejects them,
    /// `Version::parse_lenient` accepts them as dpkg does.
    #[error("version number does not start with digit")]
    UpstreamNotDigit,
    #[error("invalid character in version number")]
    UpstreamBadChar,
    #[error("invalid character in revision number")]
    RevisionBadChar,
}

impl Version {
    /// Parses a version that Debian Policy allows; dpkg's warnings are errors here
    /// (a package we build must not carry a version dpkg complains about).
    pub fn parse(s: &str) -> Result<Version, VersionError> {
        let (version, warning) = Self::parse_lenient(s)?;
        match warning {
            Some(w) => Err(w),
            None => Ok(version),
        }
    }

    /// Parses as dpkg does: hard errors fail; a syntax warning is returned beside
    /// the version, which still compares.
    pub fn parse_lenient(s: &str) -> Result<(Version, Option<VersionError>), VersionError> {
        let is_space = |c: char| matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c');
        if s.is_empty() {
            return Err(VersionError::Empty);
        }
        // dpkg trims leading blanks and trailing spaces; anything after an inner
        // space is an error.
        let s = s.trim_start_matches([' ', '\t']);
        let end = s.find(is_space).unwrap_or(s.len());
        if !s[end..].trim_start_matches(is_space).is_empty() {
            return Err(VersionError::EmbeddedSpaces);
        }
        let mut rest = &s[..end];
        if rest.is_empty() {
            // dpkg: only blanks; its strtol-based epoch parse never runs.
            return Err(VersionError::UpstreamEmpty);
        }

        let mut epoch = 0u32;
        if let Some(colon) = rest.find(':') {
            epoch = parse_epoch(&rest[..colon])?;
            rest = &rest[colon + 1..];
            if rest.is_empty() {
                return Err(VersionError::NothingAfterColon);
            }
        }
        let (upstream, revision) = match rest.rfind('-') {
            Some(h) => {
                if h + 1 == rest.len() {
                    return Err(VersionError::RevisionEmpty);
                }
                (&rest[..h], &rest[h + 1..])
            }
            None => (rest, ""),
        };
        if upstream.is_empty() {
            return Err(VersionError::UpstreamEmpty);
        }
        let version = Version {
            epoch,
            upstream: upstream.to_string(),
            revision: revision.to_string(),
        };
        let warning = if !upstream.as_bytes()[0].is_ascii_digit() {
            Some(VersionError::UpstreamNotDigit)
        } else if !upstream
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || b".-+~:".contains(&c))
        {
            Some(VersionError::UpstreamBadChar)
        } else if !revision
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || b".+~".contains(&c))
        {
            Some(VersionError::RevisionBadChar)
        } else {
            None
        };
        Ok((version, warning))
    }

    pub fn epoch(&self) -> u32 {
        self.epoch
    }
    pub fn upstream(&self) -> &str {
        &self.upstream
    }
    /// The Debian revision, empty when the version has none.
    pub fn revision(&self) -> &str {
        &self.revision
    }

    /// dpkg's `dpkg_version_compare`.
    pub fn compare(&self, other: &Version) -> Ordering {
        self.epoch
            .cmp(&other.epoch)
            .then_with(|| verrevcmp(self.upstream.as_bytes(), other.upstream.as_bytes()))
            .then_with(|| verrevcmp(self.revision.as_bytes(), other.revision.as_bytes()))
    }
}

/// dpkg parses the epoch with `strtol`: optional sign, decimal digits, no junk.
fn parse_epoch(text: &str) -> Result<u32, VersionError> {
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let run = digits.bytes().take_while(u8::is_ascii_digit).count();
    if run == 0 {
        // strtol consumed nothing: dpkg calls that an empty epoch.
        return Err(VersionError::EpochEmpty);
    }
    if run != digits.len() {
        return Err(VersionError::EpochNotNumber);
    }
    let significant = digits.trim_start_matches('0');
    if negative && !significant.is_empty() {
        return Err(VersionError::EpochNegative);
    }
    if significant.len() > 10 {
        return Err(VersionError::EpochTooBig);
    }
    let value: u64 = if significant.is_empty() {
        0
    } else {
        significant.parse().unwrap_or(u64::MAX)
    };
    if value > i32::MAX as u64 {
        return Err(VersionError::EpochTooBig);
    }
    Ok(value as u32)
}

/// dpkg's character weight: `~` before everything (even the end), then the end
/// and digits, then letters, then everything else. Bytes are signed `char`s in
/// dpkg (x86), which is why non-ASCII bytes land between letters and punctuation.
fn order(c: Option<u8>) -> i32 {
    match c {
        None => 0,
        Some(c) if c.is_ascii_digit() => 0,
        Some(c) if c.is_ascii_alphabetic() => c as i32,
        Some(b'~') => -1,
        Some(c) => (c as i8) as i32 + 256,
    }
}

/// dpkg's `verrevcmp`: alternating non-digit and digit runs; digit runs compare
/// numerically without converting them (so any length works).
fn verrevcmp(a: &[u8], b: &[u8]) -> Ordering {
    let (mut i, mut j) = (0, 0);
    let at = |s: &[u8], k: usize| s.get(k).copied();
    let digit = |c: Option<u8>| c.is_some_and(|c| c.is_ascii_digit());
    while i < a.len() || j < b.len() {
        while (i < a.len() && !digit(at(a, i))) || (j < b.len() && !digit(at(b, j))) {
            let (ac, bc) = (order(at(a, i)), order(at(b, j)));
            if ac != bc {
                return ac.cmp(&bc);
            }
            i += 1;
            j += 1;
        }
        while at(a, i) == Some(b'0') {
            i += 1;
        }
        while at(b, j) == Some(b'0') {
            j += 1;
        }
        let mut first_diff = Ordering::Equal;
        while digit(at(a, i)) && digit(at(b, j)) {
            if first_diff == Ordering::Equal {
                first_diff = a[i].cmp(&b[j]);
            }
            i += 1;
            j += 1;
        }
        if digit(at(a, i)) {
            return Ordering::Greater;
        }
        if digit(at(b, j)) {
            return Ordering::Less;
        }
        if first_diff != Ordering::Equal {
            return first_diff;
        }
    }
    Ordering::Equal
}

impl PartialEq for Version {
    fn eq(&self, other: &Self) -> bool {
        self.compare(other) == Ordering::Equal
    }
}
impl Eq for Version {}
impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.compare(other)
    }
}

impl FromStr for Version {
    type Err = VersionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Version::parse(s)
    }
}

impl fmt::Display for Version {
    /// dpkg's non-ambiguous form: the epoch only when non-zero.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.epoch != 0 {
            write!(f, "{}:", self.epoch)?;
        }
        f.write_str(&self.upstream)?;
        if !self.revision.is_empty() {
            write!(f, "-{}", self.revision)?;
        }
        Ok(())
    }
}

/// The relation operators of `dpkg --compare-versions` (and of `Depends` fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum CompareOp {
    Lt,
    Le,
    Eq,
    Ne,
    Ge,
    Gt,
}

impl CompareOp {
    /// Accepts dpkg's word forms (`lt le eq ne ge gt`) and the relation symbols
    /// (`<< <= = >= >>`).
    pub fn parse(s: &str) -> Option<CompareOp> {
        Some(match s {
            "lt" | "<<" => CompareOp::Lt,
            "le" | "<=" => CompareOp::Le,
            "eq" | "=" => CompareOp::Eq,
            "ne" => CompareOp::Ne,
            "ge" | ">=" => CompareOp::Ge,
            "gt" | ">>" => CompareOp::Gt,
            _ => return None,
        })
    }

    pub fn holds(self, ordering: Ordering) -> bool {
        match self {
            CompareOp::Lt => ordering == Ordering::Less,
            CompareOp::Le => ordering != Ordering::Greater,
            CompareOp::Eq => ordering == Ordering::Equal,
            CompareOp::Ne => ordering != Ordering::Equal,
            CompareOp::Ge => ordering != Ordering::Less,
            CompareOp::Gt => ordering == Ordering::Greater,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse_lenient(s).unwrap().0
    }

    #[test]
    fn orders_like_dpkg() {
        let ascending = [
            "~~",
            "~~a",
            "~",
            "0",
            "1.0~rc1",
            "1.0",
            "1.0-0.1",
            "1.0-1",
            "1.0a",
            "1.0+cuda10.1",
            "1.0.1",
            "7.0.5.15-1ubuntu1",
            "7.5.0.56-1+cuda10.1",
            "7.6.5.32-1+cuda10.1",
            "1:0.1",
        ];
        for pair in ascending.windows(2) {
            assert_eq!(
                v(pair[0]).cmp(&v(pair[1])),
                Ordering::Less,
                "{} < {}",
                pair[0],
                pair[1]
            );
        }
    }

    #[test]
    fn equal_forms() {
        assert_eq!(v("1.0"), v("0:1.0"));
        assert_eq!(v("1.0"), v("1.0-0"));
        assert_eq!(v("1.001"), v("1.1"));
    }

    #[test]
    fn long_digit_runs_do_not_overflow() {
        let big = "1".repeat(200);
        let bigger = format!("{big}0");
        assert_eq!(v(&big).cmp(&v(&bigger)), Ordering::Less);
        assert_eq!(v(&format!("000{big}")).cmp(&v(&big)), Ordering::Equal);
    }

    #[test]
    fn errors() {
        assert_eq!(Version::parse(""), Err(VersionError::Empty));
        assert_eq!(Version::parse("1 2"), Err(VersionError::EmbeddedSpaces));
        assert_eq!(Version::parse(":1"), Err(VersionError::EpochEmpty));
        assert_eq!(Version::parse("a:1"), Err(VersionError::EpochEmpty));
        assert_eq!(Version::parse("1a:1"), Err(VersionError::EpochNotNumber));
        assert_eq!(Version::parse("-1:1"), Err(VersionError::EpochNegative));
        assert_eq!(
            Version::parse("99999999999:1"),
            Err(VersionError::EpochTooBig)
        );
        assert_eq!(Version::parse("1:"), Err(VersionError::NothingAfterColon));
        assert_eq!(Version::parse("1-"), Err(VersionError::RevisionEmpty));
        assert_eq!(Version::parse("-1"), Err(VersionError::UpstreamEmpty));
        assert_eq!(Version::parse("a1"), Err(VersionError::UpstreamNotDigit));
        assert_eq!(Version::parse("1_2"), Err(VersionError::UpstreamBadChar));
        assert_eq!(Version::parse("1-a_b"), Err(VersionError::RevisionBadChar));
        assert!(Version::parse_lenient("a1").is_ok());
    }

    #[test]
    fn display_is_dpkg_nonambiguous() {
        assert_eq!(
            v("0:7.5.0.56-1+cuda10.1").to_string(),
            "7.5.0.56-1+cuda10.1"
        );
        assert_eq!(v("2:1.0").to_string(), "2:1.0");
    }
}
