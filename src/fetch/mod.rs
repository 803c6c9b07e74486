//! Network effects: HTTP downloads with resume, retries and verification.
//!
//! One concurrency model: OS threads. `reqwest::blocking` keeps its async
//! machinery to itself; a few downloads run in parallel on scoped threads.
//! Nothing here prints: progress goes to an [`Observer`] as [`Event`]s and the
//! binary decides how to show them.

mod http;

pub use http::{Expected, Http, HttpOptions};

use std::path::PathBuf;
use std::time::Duration;

pub use crate::progress::{Event, Observer, Quiet, Task};

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
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("file is larger than {0} bytes")]
    TooLarge(u64),
    #[error("bad URL: {0}")]
    BadUrl(String),
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
