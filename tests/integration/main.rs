//! The one integration suite: it runs the real `debforge` binary and the real
//! Debian tools (dpkg, dpkg-deb) of this machine against what debforge writes.
//! Helpers live in `support/`; every other module is tests.

mod support;

mod against;
mod architecture;
mod bombs;
mod bundles;
mod deb822_lists;
mod deb_build;
mod deb_read;
mod deltas;
mod escapes;
mod faults;
mod fetch;
mod first_run;
mod gpu_check;
mod history;
mod hostile;
mod incremental;
mod injection;
mod machines;
mod mutants;
mod publish;
mod publish_remote;
mod real_archives;
mod repack;
mod repo;
mod rollback;
mod serve;
mod signatures;
mod stack;
mod vercmp;
