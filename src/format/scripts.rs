//! Merging maintainer scripts so that upstream's keeps working exactly as
//! upstream wrote it, whatever its interpreter (sh, bash, perl, a binary).
//!
//! Spec: Debian Policy §6 (<https://www.debian.org/doc/debian-policy/ch-maintainerscripts.html>)
//! and debconf-devel(7). What dpkg and debconf do that the design follows:
//! - dpkg runs a maintainer script by its path (`/var/lib/dpkg/info/PKG.postinst`,
//!   or `/var/lib/dpkg/tmp.ci/preinst` for a new preinst) with its arguments and
//!   `DPKG_MAINTSCRIPT_*` in the environment; the kernel picks the interpreter
//!   from `#!` (or runs the ELF binary).
//! - debconf's confmodule re-executes `$0` through `/usr/share/debconf/frontend`,
//!   which takes the package name from `$0` (`…/PKG.postinst|prerm|postrm`,
//!   else `tmp.ci/control`), loads `…/PKG.templates` next to it and, for a
//!   postinst or preinst, first runs `…/PKG.config`; then it executes `$0`
//!   again. So upstream's part must be executable, run under the very name
//!   dpkg gave the merged script, next to links to its templates and config.
//! - After `dpkg -r`, only the postrm is left in the info directory: the
//!   merged postrm must carry upstream's postrm inside itself.
//!
//! The merged script is POSIX sh. Upstream's script and ours follow its
//! final `exit` as raw bytes (never re-encoded, so a binary stays a binary);
//! each part is copied out with `tail -c`/`head -c` into a fresh directory
//! under `$TMPDIR` (as debconf's own `apt-extracttemplates` does), made
//! executable, named like `$0`, and run with the same arguments. Upstream's
//! part runs first for `preinst` and `postinst` (ours configures on top of
//! what upstream set up); ours runs first for `prerm` and `postrm` (our links
//! go before upstream takes away what they point at). A failing part fails
//! the whole with its exit status. Our part's standard output goes to
//! standard error: under `dpkg-reconfigure`, standard output is debconf's
//! protocol pipe.

/// The maintainer scripts dpkg runs.
pub const SCRIPT_NAMES: [&str; 4] = ["preinst", "postinst", "prerm", "postrm"];

/// Digits of the offsets and lengths written into the merged script: fixed,
/// so the header's length does not depend on the numbers in it.
const WIDTH: usize = 12;

/// Whether upstream's part runs before ours for the script `name`.
pub fn upstream_first(name: &str) -> bool {
    matches!(name, "preinst" | "postinst")
}

fn header(name: &str, parts: &[(&str, usize, usize, bool)]) -> String {
    let mut s = format!(
        "#!/bin/sh\n\
         # {name} merged by debforge. Upstream's {name} and debforge's follow the\n\
         # final `exit` byte for byte; each is copied out, named like this script\n\
         # (debconf derives the package and script from $0) and run with the same\n\
         # arguments: upstream's first for preinst/postinst, debforge's first for\n\
         # prerm/postrm. A failing part fails the whole.\n\
         set -e\n\
         debforge_part() {{\n\
         \x20   debforge_off=$1 debforge_len=$2 debforge_label=$3 debforge_quiet=$4\n\
         \x20   shift 4\n\
         \x20   debforge_self=$(basename \"$0\")\n\
         \x20   debforge_here=$(dirname \"$0\")\n\
         \x20   debforge_prefix=${{debforge_self%{name}}}\n\
         \x20   debforge_dir=$(mktemp -d \"${{TMPDIR:-/tmp}}/debforge-{name}.XXXXXX\")\n\
         \x20   for debforge_f in templates config; do\n\
         \x20       if [ -e \"$debforge_here/$debforge_prefix$debforge_f\" ]; then\n\
         \x20           ln -s \"$debforge_here/$debforge_prefix$debforge_f\" \"$debforge_dir/$debforge_prefix$debforge_f\"\n\
         \x20       fi\n\
         \x20   done\n\
         \x20   tail -c +\"$debforge_off\" \"$0\" | head -c \"$debforge_len\" > \"$debforge_dir/$debforge_self\"\n\
         \x20   chmod 0755 \"$debforge_dir/$debforge_self\"\n\
         \x20   debforge_rc=0\n\
         \x20   if [ \"$debforge_quiet\" = 1 ]; then\n\
         \x20       \"$debforge_dir/$debforge_self\" \"$@\" >&2 || debforge_rc=$?\n\
         \x20   else\n\
         \x20       \"$debforge_dir/$debforge_self\" \"$@\" || debforge_rc=$?\n\
         \x20   fi\n\
         \x20   rm -rf \"$debforge_dir\"\n\
         \x20   if [ \"$debforge_rc\" -ne 0 ]; then\n\
         \x20       echo \"$debforge_self: the $debforge_label part failed (exit $debforge_rc)\" >&2\n\
         \x20       exit \"$debforge_rc\"\n\
         \x20   fi\n\
         }}\n"
    );
    for (label, off, len, quiet) in parts {
        s.push_str(&format!(
            "debforge_part {off:0w$} {len:0w$} {label} {q} \"$@\"\n",
            w = WIDTH,
            q = u8::from(*quiet)
        ));
    }
    s.push_str("exit 0\n");
    s
}

/// The merged script for the script `name`: `upstream` (if any) and `ours`,
/// in the safe order for `name`. Without an upstream script, ours is used as
/// it is.
pub fn merge(name: &str, upstream: Option<&[u8]>, ours: &[u8]) -> Vec<u8> {
    let Some(upstream) = upstream else {
        return ours.to_vec();
    };
    let order: [(&str, &[u8], bool); 2] = if upstream_first(name) {
        [("upstream", upstream, false), ("debforge", ours, true)]
    } else {
        [("debforge", ours, true), ("upstream", upstream, false)]
    };
    // The header's length is fixed by WIDTH: measure it once with zeros.
    let zeros: Vec<(&str, usize, usize, bool)> =
        order.iter().map(|(l, _, q)| (*l, 0, 0, *q)).collect();
    let mut offset = header(name, &zeros).len() + 1; // tail -c +N counts from 1
    let mut parts = Vec::new();
    for (label, bytes, quiet) in &order {
        parts.push((*label, offset, bytes.len(), *quiet));
        offset += bytes.len();
    }
    let mut out = header(name, &parts).into_bytes();
    for (_, bytes, _) in &order {
        out.extend_from_slice(bytes);
    }
    out
}

/// The parts of a merged script (label, bytes), as `merge` laid them out;
/// `None` for a script debforge did not merge.
pub fn parts(script: &[u8]) -> Option<Vec<(String, Vec<u8>)>> {
    let text_end = script.windows(7).position(|w| w == b"\nexit 0")? + 8;
    let head = std::str::from_utf8(&script[..text_end]).ok()?;
    if !head.contains("merged by debforge") {
        return None;
    }
    let mut out = Vec::new();
    for line in head.lines() {
        let Some(rest) = line.strip_prefix("debforge_part ") else {
            continue;
        };
        let mut it = rest.split(' ');
        let (Some(off), Some(len), Some(label)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let (Ok(off), Ok(len)) = (off.parse::<usize>(), len.parse::<usize>()) else {
            continue;
        };
        let bytes = script.get(off - 1..off - 1 + len)?.to_vec();
        out.push((label.to_string(), bytes));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_follow_the_header_byte_for_byte_in_the_safe_order() {
        let upstream = b"\x7fELF\x02\x01\x01\0binary\0\xff\n".to_vec();
        let ours = b"#!/bin/sh\necho ours \"$1\"\n".to_vec();
        for name in SCRIPT_NAMES {
            let merged = merge(name, Some(&upstream), &ours);
            assert!(merged.starts_with(b"#!/bin/sh\n"));
            let got = parts(&merged).unwrap();
            let want = if upstream_first(name) {
                vec![
                    ("upstream".to_string(), upstream.clone()),
                    ("debforge".into(), ours.clone()),
                ]
            } else {
                vec![
                    ("debforge".to_string(), ours.clone()),
                    ("upstream".into(), upstream.clone()),
                ]
            };
            assert_eq!(got, want, "{name}");
        }
        assert_eq!(merge("postinst", None, &ours), ours);
        assert_eq!(parts(&ours), None);
    }
}
