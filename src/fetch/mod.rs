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

/// Progress of the downloads, for the one printer in the binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A download starts (or resumes from `resumed_from` bytes).
    Start {
        name: String,
        total: u64,
        resumed_from: u64,
    },
    /// `bytes` of `name` have arrived so far (cumulative).
    Progress { name: String, bytes: u64 },
    /// `name` is complete and verified.
    Done { name: String },
    /// `name` was already in the cache, verified earlier (not read again
    /// from its source).
    Cached { name: String },
    /// `name` was copied, verified, from a local file (a snapshot).
    Copied { name: String, from: String },
    /// Something the user should know that does not stop the run.
    Warning { message: String },
    /// A transient failure; the next attempt starts after `wait`.
    Retry {
        name: String,
        attempt: u32,
        reason: String,
        wait: Duration,
    },
}

pub trait Observer: Sync {
    fn event(&self, event: Event);
}

impl<F: Fn(Event) + Sync> Observer for F {
    fn event(&self, event: Event) {
        self(event)
    }
}

/// An observer that ignores everything (tests, library use).
pub struct Quiet;
impl Observer for Quiet {
    fn event(&self, _: Event) {}
}

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
    #[error("no data for {0:?}: the server stalled")]
    Timeout(Duration),
    #[error("transfer failed: {0}")]
    Transfer(String),
    #[error("the server sent more than the {expected} bytes the index announces")]
    TooLong { expected: u64 },
    #[error("the server sent {found} bytes, the index announces {expected}")]
    TooShort { expected: u64, found: u64 },
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
    /// Worth another attempt: the network or the server may recover.
    pub fn is_transient(&self) -> bool {
        match self {
            FetchErrorKind::Status(s) => *s >= 500 || *s == 408 || *s == 429,
            FetchErrorKind::Connect(_)
            | FetchErrorKind::Timeout(_)
            | FetchErrorKind::Transfer(_) => true,
            FetchErrorKind::TooShort { .. } => true,
            _ => false,
        }
    }
}
