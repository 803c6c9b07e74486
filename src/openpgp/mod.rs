//! OpenPGP with sequoia-openpgp: checking upstream signatures against pinned
//! keys, and signing our own repository.
//!
//! Policy (verify.rs): the Release signature must pass sequoia's
//! StandardPolicy, which like apt 1.6 and gpgv 2.2 rejects SHA-1 and MD5; a
//! pinned key's own binding signatures may use SHA-1, as gpgv accepts (Ubuntu's
//! 2012 archive key). Only v4 keys and signatures are in play (RFC 4880).

pub mod sign;
mod verify;

pub use verify::{KeyringError, PinnedKeyring, VerifyError};
