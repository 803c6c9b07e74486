//! OpenPGP with sequoia-openpgp: checking upstream signatures against pinned
//! keys (signing our own repository arrives with the signed-repository work).
//!
//! Policy: sequoia's StandardPolicy, which like apt 1.6 and gpgv 2.2 rejects
//! SHA1 signatures. Only v4 keys and signatures are in play (RFC 4880).

pub mod sign;
mod verify;

pub use verify::{KeyringError, PinnedKeyring, VerifyError};
