//! What the integration tests share: no test of debforge's behaviour lives
//! here, only the machinery the tests run on (and a few checks of that
//! machinery itself).

/// The real apt in a sandbox (a private APT_CONFIG) against a repository.
pub mod apt;
/// Real roots (mmdebstrap: Ubuntu 18.04 to 24.04, Debian 12 and 13), cached
/// as tarballs, extracted fresh for each test.
pub mod chroot;
/// Running the binary and the Debian tools; temporary projects.
pub mod common;
/// Real packages downloaded by apt into a cache at test time (never committed).
pub mod corpus;
/// A loopback HTTP/1.1 file server with faults on demand (stalls, 500s, short bodies).
pub mod server;
/// Stand-ins for the upstreams that cannot be reached (NVIDIA's server), with
/// NVIDIA's real shapes and relations, signed by the real gpg.
pub mod standin;
