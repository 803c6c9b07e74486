//! Relative paths that come from input (index `Filename`s, suites,
//! components, lock entries, recipe file references): checked before they
//! are joined to anything, so none can name a place outside the directory
//! or URL it is joined to.

/// Why a path from input was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("{0:?} is empty")]
    Empty(String),
    #[error("{0:?} is absolute; a relative path is expected")]
    Absolute(String),
    #[error(
        "{0:?} has a `.`, `..` or empty component (after %-decoding); it could name a place outside its directory"
    )]
    Escapes(String),
    #[error("{0:?} holds a NUL, a backslash or a control character")]
    BadByte(String),
}

/// Checks a `/`-separated relative path: not empty, not absolute, every
/// component a plain name (no `.`, `..` or empty component, also once
/// `%XX` escapes are decoded, as an HTTP client or server would decode
/// them), no NUL, backslash or control character.
pub fn check_relative(path: &str) -> Result<(), PathError> {
    if path.is_empty() {
        return Err(PathError::Empty(path.into()));
    }
    let decoded = percent_decode(path);
    for p in [path, decoded.as_str()] {
        if p.starts_with('/') {
            return Err(PathError::Absolute(path.into()));
        }
        if p.bytes().any(|b| b == b'\\' || b < 0x20 || b == 0x7f) {
            return Err(PathError::BadByte(path.into()));
        }
        if p.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
            return Err(PathError::Escapes(path.into()));
        }
    }
    Ok(())
}

/// `%XX` decoded (invalid escapes kept as they are); bytes that are not
/// UTF-8 become U+FFFD, which no check above lets through as a separator.
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// Lower-case hex of exactly `len` digits (a SHA256 is 64, a SHA512 128).
pub fn is_hex_digest(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_paths_stay_inside() {
        for good in [
            "pool/main/c/c-ares/libc-ares2_1.14.0-1ubuntu0.2_amd64.deb",
            "./libcudnn7_7.5.0.56-1+cuda10.1_amd64.deb".trim_start_matches("./"),
            "pool/main/f/foo/foo_1%3a2.0-1_amd64.deb",
            "bionic-updates",
            "stable/updates",
        ] {
            assert_eq!(check_relative(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "/etc/shadow",
            "../x.deb",
            "a/../../x",
            "%2e%2e/other/x.deb",
            "%2E%2E/x",
            "a/%2f/b",
            "%2fetc/shadow",
            "a//b",
            "./a",
            "a\\..\\b",
            "a\0b",
            "a/\nb",
        ] {
            assert!(check_relative(bad).is_err(), "{bad:?}");
        }
        assert!(is_hex_digest(&"a".repeat(64), 64));
        assert!(!is_hex_digest("../../../../tmp/x", 64));
        assert!(!is_hex_digest(&"A".repeat(64), 64));
    }
}
