//! Network effects: HTTP downloads with resume, retries and verification.
//!
//! One concurrency model: OS threads. `reqwest::blocking` keeps its async
//! machinery to itself; a few downloads run in parallel on scoped threads.
//! Nothing here prints: progress goes to an [`Reporter`] as [`Event`]s and the
//! binary decides how to show them.

mod http;

pub use http::{Expected, Http, HttpOptions};

use std::time::Duration;

pub use crate::report::{Event, Quiet, Reporter, Task};

/// A download that failed for good, with what the user needs to act.
#[derive(Debug, thiserror::Error)]
#[error("{url}: {kind}")]
pub struct FetchError {
    pub url: String,
    pub kind: FetchErrorKind,
}

#[derive(Debug, thiserror::Error)]
pub enum FetchErrorKind {
    #[error("HTTP {0}")]
    Status(u16),
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("the host name does not resolve: {0}")]
    Dns(String),
    #[error("no data for {0:?}: the server stalled")]
    Timeout(Duration),
    #[error("too slow: {0}")]
    TooSlow(String),
    #[error("transfer failed: {0}")]
    Transfer(String),
    #[error("the server sent more than the {expected} bytes the index announces")]
    TooLong { expected: u64 },
    #[error("the server sent {found} bytes, the index announces {expected}")]
    TooShort { expected: u64, found: u64 },
    #[error(
        "the server's file ends before the {expected} bytes the index announces: it refused the bytes after the {have} already fetched (HTTP 416)"
    )]
    EndsShort { expected: u64, have: u64 },
    #[error(
        "SHA256 mismatch: expected {expected}, found {found}; nothing was written to the cache"
    )]
    Sha256 { expected: String, found: String },
    #[error(
        "SHA512 mismatch: expected {expected}, found {found}; nothing was written to the cache"
    )]
    Sha512 { expected: String, found: String },
    #[error(transparent)]
    Io(#[from] crate::error::FileError),
    #[error("file is larger than {0} bytes")]
    TooLarge(u64),
    #[error("bad URL: {0}")]
    BadUrl(String),
    /// Not the server's doing, and no retry mends it.
    #[error("the HTTP client could not be set up (TLS, the system's settings): {0}")]
    Client(String),
}

impl FetchErrorKind {
    /// The server or the network could not be reached at all (as opposed
    /// to a file that is missing or wrong).
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            FetchErrorKind::Connect(_)
                | FetchErrorKind::Dns(_)
                | FetchErrorKind::Timeout(_)
                | FetchErrorKind::TooSlow(_)
        )
    }

    /// Worth another attempt: the network or the server may recover.
    pub fn is_transient(&self) -> bool {
        match self {
            FetchErrorKind::Status(s) => *s >= 500 || *s == 408 || *s == 429,
            FetchErrorKind::Connect(_)
            | FetchErrorKind::Timeout(_)
            | FetchErrorKind::TooSlow(_)
            | FetchErrorKind::Transfer(_) => true,
            FetchErrorKind::TooShort { .. } => true,
            _ => false,
        }
    }
}

impl FetchErrorKind {
    /// What to do about a download that failed, for source `source` (a
    /// name from sources.toml, when the failure is known to be one's).
    pub fn hint_for(&self, source: Option<&str>) -> String {
        use FetchErrorKind as K;
        let name = source.unwrap_or("NAME");
        match self {
            k if k.is_unreachable() => format!(
                "the upstream cannot be reached from here: use a mirror with --source {name}=URL, or work offline from a snapshot with --source-dir DIR (made by `debforge fetch --to DIR` where it can be reached)"
            ),
            K::Status(404) | K::Status(410) => format!(
                "the upstream has no such file (HTTP 404): check source '{name}' in recipes/sources.toml, or the upstream removed it (`debforge lock` resolves again)"
            ),
            K::Status(_) => "the server refused the request; run the command again later".into(),
            K::Sha256 { .. } | K::Sha512 { .. } | K::TooLong { .. } | K::EndsShort { .. } => {
                "nothing unverified was kept: the upstream's file is not the one its signed index (or the lock) vouches for; do not use it, try another mirror (--source NAME=URL)".into()
            }
            K::Client(_) => "check the system's TLS settings (SSL_CERT_FILE, SSL_CERT_DIR) and proxy variables; nothing was fetched".into(),
            _ => "nothing unverified was kept; run the command again to retry".into(),
        }
    }
}

impl crate::error::Hint for FetchError {
    fn hint(&self) -> Option<String> {
        Some(self.kind.hint_for(None))
    }
}

#[cfg(test)]
mod tests {
    use super::FetchErrorKind as K;

    /// Retried: what the network or a busy server may mend. Not retried:
    /// what a retry gives again (a name that does not resolve, a client
    /// that cannot be set up, a wrong file, a refusal).
    #[test]
    fn only_what_a_retry_may_mend_is_retried() {
        let retried = [
            K::Connect("refused".into()),
            K::Timeout(std::time::Duration::from_secs(1)),
            K::TooSlow("slow".into()),
            K::Transfer("reset".into()),
            K::Status(503),
            K::Status(429),
            K::TooShort {
                expected: 2,
                found: 1,
            },
        ];
        let given_up = [
            K::Client("no TLS roots".into()),
            K::Dns("no such host".into()),
            K::BadUrl("x".into()),
            K::Status(404),
            K::Sha256 {
                expected: "a".into(),
                found: "b".into(),
            },
            K::TooLarge(1),
        ];
        for k in &retried {
            assert!(k.is_transient(), "{k}");
        }
        for k in &given_up {
            assert!(!k.is_transient(), "{k}");
        }
        assert!(K::Client("x".into()).hint_for(None).contains("TLS"));
    }
}
