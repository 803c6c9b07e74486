//! debforge: builds Debian packages and signed local apt repositories.
//!
//! Map of the crate, low layers first (docs/ARCHITECTURE.md has the rules,
//! tests/integration/architecture.rs checks them):
//! - [`digest`]: MD5/SHA1/SHA256/SHA512 in one pass; the SHA-256 helpers.
//! - [`cores`]: work on every core whose results the build keeps (moved
//!   into the caller's malloc arena as they arrive).
//! - [`error`]: `Hint` beside every error type, `FileError` for I/O on a path.
//! - [`report`]: the events long work reports; the printer is the binary's.
//! - [`input`]: input files read by type and with a bound.
//! - [`files`]: atomic writes, sibling paths, sorted walks, spill files.
//! - [`format`]: pure Debian formats (deb822, versions, relations, Release,
//!   Packages, preferences, dates).
//! - [`deb`]: the `.deb` container, read and written as streams.
//! - [`recipe`]: recipes and the lock file (parsing is pure).
//! - [`openpgp`]: signing and checking signatures (sequoia, pure Rust).
//! - [`keys`]: signing keys on disk.
//! - [`fetch`]: HTTP downloads: resume, retries, verification.
//! - [`upstream`]: the trust chain Release → index → package.
//! - [`repo`]: the repository written, verified, its generations.
//! - [`publish`]: to a directory, rsync or S3, in the safe order.
//! - [`bundle`]: the air-gapped bundle.
//! - [`serve`]: a read-only HTTP/1.1 mirror (hyper).
//! - [`native`]: native packages (no upstream: the metapackage, the
//!   repo-config package) built from their recipes.
//! - [`pipeline`]: the stages lock, fetch and build share.
//! - [`workflow`]: whole commands (build, publish, rollback, bundle), each
//!   one settings value and a reporter in, a report out.
//!
//! The library never prints and never reads the environment; the binary
//! (`src/main.rs`, `src/cli/`) resolves the settings and shows the events.

pub mod bundle;
pub mod cores;
pub mod deb;
pub mod digest;
pub mod error;
pub mod fetch;
pub mod files;
pub mod format;
pub mod input;
pub mod keys;
pub mod native;
pub mod openpgp;
pub mod pipeline;
pub mod publish;
pub mod recipe;
pub mod repo;
pub mod report;
pub mod serve;
pub mod upstream;
pub mod workflow;
