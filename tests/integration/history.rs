//! Generations: each build that changes a package, a pin or a key records
//! one beside the output; `history` lists them, `diff` says what changed.

use std::fs;

use crate::support::common::{debforge, ok, run};
use crate::support::standin::Lab;

#[test]
fn builds_record_generations_that_history_lists_and_diff_compares() {
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    let (code, _, err) = run(lab.cmd("build").arg("--out").arg(&out));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("recorded generation 1"), "{err}");
    // A rebuild that only re-dates the Release is no new generation.
    let (code, _, err) = run(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .env("SOURCE_DATE_EPOCH", "1600000000"));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("generation 1 still in force"), "{err}");

    // A newer cuDNN: generation 2, an upgrade (the runtime, and the -dev and
    // -doc packages that name its version exactly: a build that moved only
    // the runtime would not install, and is refused).
    for p in ["libcudnn7", "libcudnn7-dev", "libcudnn7-doc"] {
        let recipe = lab.recipes.join(format!("packages/{p}.toml"));
        let text = fs::read_to_string(&recipe).unwrap();
        fs::write(
            &recipe,
            text.replace("7.5.0.56-1+cuda10.1", "7.6.5.32-1+cuda10.1"),
        )
        .unwrap();
    }
    let (code, _, err) = run(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .args(["--keep", "5"]));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("recorded generation 2"), "{err}");
    // With --keep 5 the pool keeps generation 1's file (linked, listed in no
    // index), so that generation's packages are at hand; --keep 1 (the
    // default) lets it go.
    let pool = out.join("pool/main/libc/libcudnn7");
    let old_file = pool.join("libcudnn7_7.5.0.56-1+cuda10.1_amd64.deb");
    assert!(old_file.exists(), "kept from generation 1");
    assert!(
        pool.join("libcudnn7_7.6.5.32-1+cuda10.1_amd64.deb")
            .exists()
    );
    let packages = fs::read_to_string(out.join("dists/bionic/main/binary-amd64/Packages")).unwrap();
    assert!(
        !packages.contains("libcudnn7_7.5.0.56"),
        "in no index: {packages}"
    );
    let (code, _, err) = run(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .args(["--keep", "1"])
        .env("SOURCE_DATE_EPOCH", "1650000000"));
    assert_eq!(code, 0, "{err}");
    assert!(!old_file.exists(), "--keep 1: only this generation's files");
    // Kept files come from the previous output only: once gone, gone.
    ok(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .args(["--keep", "5"]));
    assert!(!old_file.exists());

    // A local package, then the same version with other bytes: generation 4
    // shows the red flag.
    let tree = lab.dir.path().join("tree");
    fs::create_dir_all(tree.join("DEBIAN")).unwrap();
    let deb = lab.recipes.join("local_1.0_all.deb");
    let make = |payload: &str| {
        fs::write(
            tree.join("DEBIAN/control"),
            format!("Package: local\nVersion: 1.0\nArchitecture: all\nMaintainer: x <x@example.org>\nDescription: {payload}\n local.\n"),
        )
        .unwrap();
        ok(debforge()
            .args(["deb", "build"])
            .arg(&tree)
            .arg("-o")
            .arg(&deb));
    };
    make("first");
    fs::write(
        lab.recipes.join("packages/local.toml"),
        "name = \"local\"\nversion = \"1.0\"\narchitecture = \"all\"\nfrom = { path = \"local_1.0_all.deb\" }\n",
    )
    .unwrap();
    ok(lab.cmd("build").arg("--out").arg(&out));
    make("second");
    ok(lab.cmd("build").arg("--out").arg(&out));

    let history = ok(debforge().arg("history").arg("--out").arg(&out));
    let lines: Vec<&str> = history.lines().collect();
    assert_eq!(lines.len(), 4, "{history}");
    assert!(
        lines[0].trim_start().starts_with("1  ")
            && lines[0].ends_with("7 packages (first generation)"),
        "{history}"
    );
    assert!(lines[1].ends_with("7 packages, 3 upgraded"), "{history}");
    assert!(lines[2].ends_with("8 packages, 1 added"), "{history}");
    assert!(
        lines[3].ends_with("8 packages, 1 CHANGED AT THE SAME VERSION"),
        "{history}"
    );

    // diff: the last two by default, exit 1 when something changed.
    let (code, stdout, _) = run(debforge().arg("diff").arg("--out").arg(&out));
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.starts_with(
            "generation 3 -> 4:\n! local 1.0 (all): OTHER BYTES AT THE SAME VERSION (sha256 "
        ),
        "{stdout}"
    );
    let (code, stdout, _) = run(debforge().args(["diff", "1", "3", "--out"]).arg(&out));
    assert_eq!(code, 1, "{stdout}");
    assert_eq!(
        stdout,
        // `local` is kept as its file is and nothing needs it exactly: not
        // pinned, so the pins did not change.
        "generation 1 -> 3:\n↑ libcudnn7 7.5.0.56-1+cuda10.1 -> 7.6.5.32-1+cuda10.1 (amd64)\n↑ libcudnn7-dev 7.5.0.56-1+cuda10.1 -> 7.6.5.32-1+cuda10.1 (amd64)\n↑ libcudnn7-doc 7.5.0.56-1+cuda10.1 -> 7.6.5.32-1+cuda10.1 (amd64)\n+ local 1.0 (all)\n"
    );
    let (code, stdout, _) = run(debforge().args(["diff", "2", "2", "--out"]).arg(&out));
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(stdout, "generations 2 and 2: no difference\n");
    let (code, stdout, _) = run(debforge()
        .args(["diff", "3", "2", "--json", "--out"])
        .arg(&out));
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["changes"][0]["change"], "removed", "{v}");
    let (code, _, err) = run(debforge().args(["diff", "9", "--out"]).arg(&out));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no generation 9") && err.contains("(it has 1, 2, 3, 4)"),
        "{err}"
    );

    // The manifests are append-only files beside the output.
    let dir = lab.dir.path().join(".repo-out.generations");
    let names: Vec<String> = {
        let mut v: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    // `indexes/`: each generation's index files, by SHA256 (for rollback);
    // `pools/`: what a build reads of each manifest, kept beside it.
    assert_eq!(
        names,
        [
            "000001.json",
            "000002.json",
            "000003.json",
            "000004.json",
            "indexes",
            "pools"
        ]
    );
}

/// `diff --upstream`: the lock against what the upstreams offer now,
/// through their signed indexes: newer versions, a locked version whose
/// bytes changed (the red flag), a locked version gone.
#[test]
fn diff_upstream_compares_the_lock_with_the_signed_indexes() {
    use crate::support::standin::{TestKey, write_release};
    let lab = Lab::new();
    ok(&mut lab.cmd("lock"));
    let (code, stdout, err) = run(lab.cmd("diff").arg("--upstream"));
    assert_eq!(code, 1, "{stdout}{err}");
    assert!(
        stdout.contains(
            "↑ libcudnn7 7.5.0.56-1+cuda10.1 (amd64): upstream also offers 7.6.5.32-1+cuda10.1\n"
        ) && stdout.contains(
            "↑ libnccl2 2.4.2-1+cuda10.1 (amd64): upstream also offers 2.4.8-1+cuda10.1\n"
        ),
        "{stdout}"
    );
    let (code, stdout, _) = run(lab.cmd("diff").args(["--upstream", "--json"]));
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(
        v.as_array().unwrap().iter().all(|c| c["change"] == "newer"),
        "{v}"
    );

    // The upstream re-signs an index whose libcudnn7 7.5.0.56 has other bytes.
    let repo = lab.www().join("nvidia");
    let index = repo.join("Packages");
    let text = fs::read_to_string(&index).unwrap();
    let stanza_start = text.find("Package: libcudnn7\n").unwrap();
    let stanza = &text[stanza_start..];
    let stanza = &stanza[..stanza.find("\n\n").unwrap_or(stanza.len())];
    assert!(stanza.contains("Version: 7.5.0.56-1+cuda10.1"), "{stanza}");
    let sha_line = stanza.lines().find(|l| l.starts_with("SHA256: ")).unwrap();
    let forged = format!("SHA256: {}", "a".repeat(64));
    fs::write(&index, text.replacen(sha_line, &forged, 1)).unwrap();
    for f in ["Packages.gz", "Packages.xz"] {
        let _ = fs::remove_file(repo.join(f));
    }
    let release = write_release(&repo, &[("Origin", "NVIDIA")]);
    TestKey::shared().sign_detached(&release);
    let (code, stdout, _) = run(lab.cmd("diff").arg("--upstream"));
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains(&format!(
            "! libcudnn7 7.5.0.56-1+cuda10.1 (amd64): UPSTREAM'S BYTES CHANGED AT THE SAME VERSION (locked sha256 {}, offered {})",
            sha_line.trim_start_matches("SHA256: "),
            "a".repeat(64)
        )),
        "{stdout}"
    );
}
