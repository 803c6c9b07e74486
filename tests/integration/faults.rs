//! Faults an operator meets: a build killed at the worst moment, a build
//! that fails, and what the next build finds.

use std::fs;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::{ok, run};
use crate::standin::Lab;

/// A build killed between the two renames of a swap (the fallback where
/// the filesystem cannot exchange two paths in one step) leaves no output
/// and the previous one moved aside; the next build puts it back first,
/// and a build that then fails in its output step keeps it.
#[test]
fn a_build_killed_inside_the_swap_loses_nothing() {
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    ok(crate::common::debforge().arg("verify").arg(&out));
    let release = fs::read(out.join("dists/bionic/Release")).unwrap();

    // A second build, paused between "output moved aside" and "new output
    // in", then killed.
    let pause = lab.dir.path().join("paused");
    let mut child = lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .env("DEBFORGE_TEST_PAUSE_IN_SWAP", &pause)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !pause.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "never reached the swap"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!out.exists(), "killed inside the window: no output");
    let aside: Vec<_> = fs::read_dir(lab.dir.path())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".repo-out.old-")
        })
        .collect();
    assert_eq!(aside.len(), 1, "the previous output is kept aside");

    // The next build fails in its output step (two recipes with the same
    // name, version and architecture and other bytes) and still puts the
    // previous repository back, whole.
    let packages = lab.recipes.join("packages");
    let first = fs::read_dir(&packages)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let text = fs::read_to_string(&first).unwrap();
    let dup = packages.join("zz-duplicate.toml");
    let deb = lab.dir.path().join("dup.deb");
    let name = text
        .lines()
        .find_map(|l| l.strip_prefix("name = "))
        .unwrap()
        .trim_matches('"');
    let version = text
        .lines()
        .find_map(|l| l.strip_prefix("version = "))
        .unwrap()
        .trim_matches('"');
    let arch = text
        .lines()
        .find_map(|l| l.strip_prefix("architecture = "))
        .unwrap()
        .trim_matches('"');
    let tree = lab.dir.path().join("dup-tree");
    fs::create_dir_all(tree.join("DEBIAN")).unwrap();
    fs::write(
        tree.join("DEBIAN/control"),
        format!("Package: {name}\nVersion: {version}\nArchitecture: {arch}\nMaintainer: x <x@example.org>\nDescription: other bytes\n same name and version.\n"),
    )
    .unwrap();
    ok(crate::common::debforge()
        .args(["deb", "build"])
        .arg(&tree)
        .arg("-o")
        .arg(&deb));
    fs::write(
        &dup,
        format!("name = \"{name}-dup\"\nversion = \"{version}\"\narchitecture = \"{arch}\"\nfrom = {{ path = \"{}\" }}\n", deb.display()),
    )
    .unwrap();
    let (code, _, err) = run(lab.cmd("build").arg("--out").arg(&out));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("has other bytes"), "{err}");
    assert!(
        err.contains("warning: restored the previous repository"),
        "{err}"
    );
    assert_eq!(fs::read(out.join("dists/bionic/Release")).unwrap(), release);
    ok(crate::common::debforge().arg("verify").arg(&out));

    // And with the duplicate gone, the build completes.
    fs::remove_file(&dup).unwrap();
    ok(lab.cmd("build").arg("--out").arg(&out));
    ok(crate::common::debforge().arg("verify").arg(&out));
    assert!(
        !fs::read_dir(lab.dir.path()).unwrap().flatten().any(|e| e
            .file_name()
            .to_string_lossy()
            .starts_with(".repo-out.old-")),
        "nothing left aside"
    );
}
