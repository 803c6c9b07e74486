//! Merging maintainer scripts: the upstream script runs first, with the same
//! arguments and under its own interpreter (`#!/bin/sh`, bash, perl, …); if
//! it fails, the merged script fails with its exit status; then ours runs.
//!
//! Spec for the scripts' contract: Debian Policy §6
//! (<https://www.debian.org/doc/debian-policy/ch-maintainerscripts.html>).
//! The merged script is POSIX sh. Each part is embedded verbatim in a quoted
//! here-document (no expansion), written to a private temporary file and run
//! as `interpreter file "$@"`, so it needs no execute permission on the
//! temporary directory.

/// The maintainer scripts dpkg runs.
pub const SCRIPT_NAMES: [&str; 4] = ["preinst", "postinst", "prerm", "postrm"];

/// `#!` line of a script: interpreter and its arguments (`/bin/sh` if none).
fn interpreter(script: &[u8]) -> String {
    let first = script.split(|&b| b == b'\n').next().unwrap_or_default();
    match first.strip_prefix(b"#!") {
        Some(rest) => String::from_utf8_lossy(rest).trim().to_string(),
        None => "/bin/sh".to_string(),
    }
}

/// A here-document delimiter that does not occur as a line of `script`.
fn delimiter(script: &[u8], base: &str) -> String {
    let text = String::from_utf8_lossy(script);
    let mut n = 0;
    loop {
        let d = if n == 0 {
            base.to_string()
        } else {
            format!("{base}_{n}")
        };
        if !text.lines().any(|l| l == d) {
            return d;
        }
        n += 1;
    }
}

fn embed(out: &mut String, label: &str, script: &[u8]) {
    let interp = interpreter(script);
    let delim = delimiter(
        script,
        &format!("DEBFORGE_{}_EOF", label.to_ascii_uppercase()),
    );
    let mut body = String::from_utf8_lossy(script).into_owned();
    if !body.ends_with('\n') {
        body.push('\n');
    }
    out.push_str(&format!(
        "\n# --- {label} part ({interp}) ---\n\
         part=$(mktemp \"${{TMPDIR:-/tmp}}/debforge-{label}.XXXXXX\")\n\
         cat > \"$part\" <<'{delim}'\n{body}{delim}\n\
         rc=0\n\
         {interp} \"$part\" \"$@\" || rc=$?\n\
         rm -f \"$part\"\n\
         if [ \"$rc\" -ne 0 ]; then\n    echo \"{name}: the {label} part failed (exit $rc)\" >&2\n    exit \"$rc\"\nfi\n",
        name = "debforge",
    ));
}

/// The merged script: `upstream` (if any) then `ours`, for the script `name`.
/// Without an upstream script, ours is used as it is.
pub fn merge(name: &str, upstream: Option<&[u8]>, ours: &[u8]) -> Vec<u8> {
    let Some(upstream) = upstream else {
        return ours.to_vec();
    };
    let mut out = format!(
        "#!/bin/sh\n# {name} merged by debforge: the upstream script first (same arguments,\n# its own interpreter), then debforge's. A failing part fails the whole.\nset -e\n"
    );
    embed(&mut out, "upstream", upstream);
    embed(&mut out, "debforge", ours);
    out.push_str("exit 0\n");
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embeds_both_parts_with_their_interpreters() {
        let upstream = b"#!/usr/bin/perl -w\nprint \"hi $ARGV[0]\\n\";\n";
        let ours = b"#!/bin/sh\necho ours \"$1\"\n";
        let merged = String::from_utf8(merge("postinst", Some(upstream), ours)).unwrap();
        assert!(merged.starts_with("#!/bin/sh\n"));
        assert!(merged.contains("/usr/bin/perl -w \"$part\" \"$@\""));
        assert!(merged.contains("/bin/sh \"$part\" \"$@\""));
        assert!(
            merged.find("DEBFORGE_UPSTREAM_EOF").unwrap()
                < merged.find("DEBFORGE_DEBFORGE_EOF").unwrap()
        );
        assert_eq!(merge("postinst", None, ours), ours.to_vec());
    }

    #[test]
    fn a_delimiter_inside_the_script_is_avoided() {
        let upstream = b"#!/bin/sh\ncat <<'DEBFORGE_UPSTREAM_EOF'\nx\nDEBFORGE_UPSTREAM_EOF\n";
        let merged = String::from_utf8(merge("postinst", Some(upstream), b"#!/bin/sh\n")).unwrap();
        assert!(merged.contains("<<'DEBFORGE_UPSTREAM_EOF_1'"));
    }
}
