//! debforge: builds Debian packages and signed local apt repositories.
//!
//! Map of the crate (see docs/ARCHITECTURE.md for more):
//! - [`format`]: pure Debian formats (deb822, versions, relations, control).
//! - [`deb`]: the `.deb` container, read and written as streams.
//! - [`digest`]: MD5/SHA1/SHA256/SHA512 in one pass.
//! - [`recipe`]: recipes and the lock file (parsing is pure).
//! - [`openpgp`]: signature checks against pinned keys (sequoia).
//! - [`fetch`]: HTTP downloads: resume, retries, verification (effects).
//! - [`upstream`]: the trust chain Release → index → package.
//! - [`pipeline`]: lock / fetch / build orchestration, one stage per module.
//! - [`progress`]: the events long work reports (the printer is the binary's).
//!
//! The library never prints; the binary (`src/main.rs`, `src/cli/`) decides
//! what the user sees.

pub mod bundle;
pub mod deb;
pub mod digest;
pub mod error;
pub mod fetch;
pub mod format;
pub mod input;
pub mod keys;
pub mod openpgp;
pub mod pipeline;
pub mod publish;
pub mod recipe;
pub mod repo;
pub mod report;
pub mod scratch;
pub mod serve;
pub mod upstream;
pub mod workflow;
