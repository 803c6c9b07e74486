//! `install.sh`, the script every bundle carries: the air-gapped side,
//! where debforge is not installed. POSIX sh and the tools of a minimal
//! Ubuntu 18.04 (coreutils, grep, sed, find, gpgv 2.2).
//!
//! The repository lives in `DEBFORGE_BUNDLE_DIR` as generations named by
//! the SHA-256 of their InRelease (`generations/<sha256>/`), and
//! `current` is a link to the one in force: apt (or a web server, on a
//! mirror inside the air gap) reads `current/`. A generation is assembled
//! beside the one in force and switched in with one rename, so a reader
//! sees the old repository or the new, never a mix; killed midway, the
//! script completes on the next run. A delta holds only the files its base
//! generation lacks and a manifest (`DELTA`) signed by the repository's
//! key, which the script checks with the keyring the last full bundle left
//! (`trusted.gpg`): it names the base, the target, and every file of the
//! target with its SHA-256, against which the assembled generation is
//! checked.

use super::SUMS_LINE_ERE;

/// The script, with `@SUITE@`, `@COMPONENT@` and `@SUMS_LINE@` to fill in
/// (a file of its own: shell, not a Rust string).
const TEMPLATE: &str = include_str!("install.sh");

pub(super) fn install_script(suite: &str, component: &str) -> String {
    // The suite and component are one word each (checked where the
    // repository's settings are read): nothing here needs quoting.
    TEMPLATE
        .replace("@SUMS_LINE@", SUMS_LINE_ERE)
        .replace("@SUITE@", suite)
        .replace("@COMPONENT@", component)
}
