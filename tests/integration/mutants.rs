//! Mutated packages (tests/fixtures/make-mutants.py, made at test time from
//! packages built here with no compression, gzip and xz): debforge never
//! panics or aborts on them, and never accepts one that dpkg-deb refuses —
//! neither to show it (`deb info`, `deb contents`), nor to repack it (whose
//! output dpkg-deb must accept too), nor to index it.

use std::path::Path;
use std::process::Command;

use crate::support::common::{debforge, fixture, ok, run};

fn base(dir: &Path, compression: &str) -> std::path::PathBuf {
    let tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes/trees/debforge-hello");
    let out = dir.join(format!("base-{compression}.deb"));
    ok(debforge()
        .args(["deb", "build", "-Z", compression])
        .arg(&tree)
        .arg("-o")
        .arg(&out)
        .env("SOURCE_DATE_EPOCH", crate::support::common::EPOCH));
    out
}

#[test]
fn mutated_packages_never_crash_and_never_pass_where_dpkg_deb_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    let mut refused = 0;
    // Built here with each compression, and Debian's own hello (xz, real
    // maintainer scripts and md5sums).
    for compression in ["none", "gzip", "xz", "real"] {
        let deb = if compression == "real" {
            crate::support::common::fixture("real/hello_2.10-3_amd64.deb")
        } else {
            base(dir.path(), compression)
        };
        let mutants = dir.path().join(format!("mutants-{compression}"));
        ok(Command::new("python3")
            .arg(fixture("make-mutants.py"))
            .arg(&deb)
            .arg(&mutants)
            .arg(if compression == "real" { "60" } else { "120" }));
        let mut files: Vec<_> = std::fs::read_dir(&mutants)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for m in files {
            let dpkg = |file: &Path| {
                ["--info", "--contents"].iter().all(|o| {
                    Command::new("dpkg-deb")
                        .arg(o)
                        .arg(file)
                        .output()
                        .unwrap()
                        .status
                        .success()
                })
            };
            // Repack: accepted only what dpkg-deb accepts, written only what
            // it accepts.
            let out = dir.path().join("repacked.deb");
            let _ = std::fs::remove_file(&out);
            let (code, _, err) = run(debforge()
                .args(["deb", "repack"])
                .arg(&m)
                .arg("-o")
                .arg(&out)
                .args(["--version-suffix", "+x"]));
            assert!(
                code == 0 || code == 2,
                "{} repack: exit {code}: {err}",
                m.display()
            );
            if code == 0 {
                assert!(
                    dpkg(&m),
                    "{} repack: accepted, but dpkg-deb refuses it",
                    m.display()
                );
                assert!(
                    dpkg(&out),
                    "{} repack: wrote what dpkg-deb refuses",
                    m.display()
                );
            } else {
                refused += 1;
            }
            // Index: a pool of that one file.
            let pool = dir.path().join("pool");
            let _ = std::fs::remove_dir_all(&pool);
            std::fs::create_dir_all(&pool).unwrap();
            std::fs::copy(&m, pool.join("m.deb")).unwrap();
            let (code, _, err) = run(debforge().arg("index").arg(&pool).arg("--no-cache"));
            assert!(
                code == 0 || code == 2,
                "{} index: exit {code}: {err}",
                m.display()
            );
            if code == 0 {
                assert!(
                    dpkg(&m),
                    "{} index: accepted, but dpkg-deb refuses it",
                    m.display()
                );
            } else {
                refused += 1;
            }
            checked += 2;
            for (ours, theirs) in [
                (["deb", "info"], "--info"),
                (["deb", "contents"], "--contents"),
            ] {
                let (code, _, err) = run(debforge().args(ours).arg(&m));
                assert!(
                    code == 0 || code == 2,
                    "{} {ours:?}: exit {code}: {err}",
                    m.display()
                );
                assert!(!err.contains("panicked"), "{} {ours:?}: {err}", m.display());
                let dpkg_ok = Command::new("dpkg-deb")
                    .arg(theirs)
                    .arg(&m)
                    .output()
                    .unwrap()
                    .status
                    .success();
                if code == 0 {
                    assert!(
                        dpkg_ok,
                        "{} {ours:?}: accepted, but dpkg-deb {theirs} refuses it",
                        m.display()
                    );
                } else {
                    refused += 1;
                }
                checked += 1;
            }
        }
    }
    eprintln!(
        "{checked} runs on mutants, {refused} refused, no crash, nothing dpkg-deb refuses accepted"
    );
}
