//! Faults an operator meets: a build killed at the worst moment, a build
//! that fails, and what the next build finds.

use std::fs;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::common::{ok, run};
use crate::support::standin::Lab;

/// A package `name` 1.0 (all) built here from `fields` (what follows its
/// Maintainer), and a path recipe for it; the recipe's path.
fn add_package(lab: &Lab, name: &str, fields: &str) -> std::path::PathBuf {
    let tree = lab.dir.path().join(format!("{name}-tree"));
    fs::create_dir_all(tree.join("DEBIAN")).unwrap();
    fs::write(
        tree.join("DEBIAN/control"),
        format!("Package: {name}\nVersion: 1.0\nArchitecture: all\nMaintainer: x <x@example.org>\n{fields}"),
    )
    .unwrap();
    let deb = lab.dir.path().join(format!("{name}_1.0_all.deb"));
    ok(crate::support::common::debforge()
        .args(["deb", "build"])
        .arg(&tree)
        .arg("-o")
        .arg(&deb));
    let recipe = lab.recipes.join(format!("packages/{name}.toml"));
    fs::write(
        &recipe,
        format!("name = \"{name}\"\nversion = \"1.0\"\narchitecture = \"all\"\nfrom = {{ path = \"{}\" }}\n", deb.display()),
    )
    .unwrap();
    recipe
}

/// A build of `out` dated 1700000000, started and paused between "output
/// moved aside" and "new output in" (the fallback swap): the running child
/// and the marker whose removal lets it go on.
fn paused_in_swap(
    lab: &Lab,
    out: &std::path::Path,
    stderr: Stdio,
) -> (std::process::Child, std::path::PathBuf) {
    let pause = lab.dir.path().join("paused");
    let child = lab
        .cmd("build")
        .arg("--out")
        .arg(out)
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .env("DEBFORGE_TEST_PAUSE_IN_SWAP", &pause)
        .stdout(Stdio::null())
        .stderr(stderr)
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
    (child, pause)
}

/// A build killed between the two renames of a swap (the fallback where
/// the filesystem cannot exchange two paths in one step) leaves no output
/// and the previous one moved aside; the next build puts it back first,
/// and a build that then fails in its output step keeps it.
#[test]
fn a_build_killed_inside_the_swap_loses_nothing() {
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    ok(crate::support::common::debforge().arg("verify").arg(&out));
    let release = fs::read(out.join("dists/bionic/Release")).unwrap();
    let manifest = lab.dir.path().join(".repo-out.generations/000001.json");
    let recorded = fs::read(&manifest).unwrap();

    // A second build, paused between "output moved aside" and "new output
    // in", then killed.
    let (mut child, _) = paused_in_swap(&lab, &out, Stdio::null());
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
    // The generations survive it: the manifest as it was, history readable.
    assert_eq!(fs::read(&manifest).unwrap(), recorded);
    let history = ok(crate::support::common::debforge()
        .arg("history")
        .arg("--out")
        .arg(&out));
    assert_eq!(history.lines().count(), 1, "{history}");

    // The next build fails in its output step (a package that needs a
    // version of libnccl2 the repository does not have: refused before the
    // swap) and still puts the previous repository back, whole.
    let dup = add_package(
        &lab,
        "zz-broken",
        "Depends: libnccl2 (= 9.9)\nDescription: needs what is not there\n x.\n",
    );
    let (code, _, err) = run(lab.cmd("build").arg("--out").arg(&out));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("the repository would not install"), "{err}");
    assert!(
        err.contains("warning: restored the previous repository"),
        "{err}"
    );
    assert_eq!(fs::read(out.join("dists/bionic/Release")).unwrap(), release);
    ok(crate::support::common::debforge().arg("verify").arg(&out));

    // And with the duplicate gone, the build completes.
    fs::remove_file(&dup).unwrap();
    ok(lab.cmd("build").arg("--out").arg(&out));
    ok(crate::support::common::debforge().arg("verify").arg(&out));
    assert!(
        !fs::read_dir(lab.dir.path()).unwrap().flatten().any(|e| e
            .file_name()
            .to_string_lossy()
            .starts_with(".repo-out.old-")),
        "nothing left aside"
    );
    // The same packages: still generation 1, its manifest untouched.
    assert_eq!(fs::read(&manifest).unwrap(), recorded);
    let history = ok(crate::support::common::debforge()
        .arg("history")
        .arg("--out")
        .arg(&out));
    assert_eq!(history.lines().count(), 1, "{history}");
}

/// A build whose generation cannot be recorded fails, and leaves no stamp
/// that would answer the next build with the same inputs: that build
/// records the generation.
#[test]
fn a_generation_not_recorded_is_recorded_by_the_next_build() {
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    let generations = lab.dir.path().join(".repo-out.generations");
    assert!(generations.join("000001.json").is_file());

    // One package more: a new generation to record.
    add_package(&lab, "zz-extra", "Description: one more\n x.\n");

    // Paused inside the swap (after the earlier generations were read),
    // a directory is put where the next manifest goes.
    let (child, pause) = paused_in_swap(&lab, &out, Stdio::piped());
    let blocker = generations.join("000002.json");
    fs::create_dir(&blocker).unwrap();
    fs::remove_file(&pause).unwrap();
    let failed = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&failed.stderr);
    assert_eq!(failed.status.code(), Some(2), "{err}");
    assert!(err.contains("000002.json"), "{err}");

    // The same inputs again, nothing in the way: the generation is
    // recorded, not skipped as "unchanged".
    fs::remove_dir(&blocker).unwrap();
    ok(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .env("SOURCE_DATE_EPOCH", "1700000000"));
    let manifest = fs::read_to_string(generations.join("000002.json")).unwrap();
    assert!(manifest.contains("zz-extra"), "{manifest}");
    let history = ok(crate::support::common::debforge()
        .arg("history")
        .arg("--out")
        .arg(&out));
    assert_eq!(history.lines().count(), 2, "{history}");
}

/// Two publishes to one directory at once: the second is refused at once
/// (no collision on temporary files), and says who holds the target.
#[test]
fn a_second_publish_to_the_same_directory_waits_for_nothing() {
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    let target = lab.dir.path().join("mirror");
    let publish = || {
        run(crate::support::common::debforge()
            .arg("publish")
            .arg("--to")
            .arg(&target)
            .arg("--out")
            .arg(&out))
    };
    let (code, _, err) = publish();
    assert_eq!(code, 0, "{err}");
    // Another publish holds the lock.
    let held = fs::File::open(target.join(".debforge-publish.lock")).unwrap();
    held.lock().unwrap();
    let (code, _, err) = publish();
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!(
            "{}: another debforge publish is writing it",
            target.display()
        )),
        "{err}"
    );
    drop(held);
    // Released: the next publish goes through. (A sibling test's fork may
    // hold a copy of `held` until its exec: flock follows the descriptor;
    // so a short wait before calling that a failure.)
    let mut result = publish();
    for _ in 0..20 {
        if result.0 == 0 || !result.2.contains("another debforge publish") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        result = publish();
    }
    let (code, _, err) = result;
    assert_eq!(code, 0, "{err}");
}

/// A full disk during a publish: a clear error, the previous Release still
/// in force, and no half-copied `.debforge-part` file left.
#[test]
fn a_full_disk_during_publish_leaves_no_partial_file() {
    let lab = Lab::new();
    // A 2 MB package, on a 1 MB filesystem.
    let tree = lab.dir.path().join("big-tree");
    fs::create_dir_all(tree.join("DEBIAN")).unwrap();
    fs::create_dir_all(tree.join("usr/share/big")).unwrap();
    fs::write(
        tree.join("DEBIAN/control"),
        "Package: big\nVersion: 1.0\nArchitecture: all\nMaintainer: x <x@example.org>\nDescription: big\n incompressible.\n",
    )
    .unwrap();
    let noise: Vec<u8> = (0..2u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    fs::write(tree.join("usr/share/big/noise"), noise).unwrap();
    let deb = lab.recipes.join("big_1.0_all.deb");
    ok(crate::support::common::debforge()
        .args(["deb", "build", "-Z", "none"])
        .arg(&tree)
        .arg("-o")
        .arg(&deb));
    fs::write(
        lab.recipes.join("packages/big.toml"),
        "name = \"big\"\nversion = \"1.0\"\narchitecture = \"all\"\nfrom = { path = \"big_1.0_all.deb\" }\n",
    )
    .unwrap();
    let out = lab.dir.path().join("repo-out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    let target = lab.dir.path().join("small");
    fs::create_dir_all(&target).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&target)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("SKIPPED: cannot mount a small tmpfs here (not root?)");
        return;
    }
    struct Unmount<'a>(&'a std::path::Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(&target);
    let (code, _, err) = run(crate::support::common::debforge()
        .arg("publish")
        .arg("--to")
        .arg(&target)
        .arg("--out")
        .arg(&out));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    let mut parts = Vec::new();
    crate::support::common::walk_files(&target, &mut |p| {
        if p.to_string_lossy().ends_with(".debforge-part") {
            parts.push(p.to_path_buf());
        }
    });
    assert!(parts.is_empty(), "{parts:?}");
    assert!(
        !target.join("dists/bionic/InRelease").exists(),
        "no Release published"
    );
}

/// Numbers that cannot be seconds are usage errors, not panics.
#[test]
fn impossible_timeouts_are_usage_errors() {
    let lab = Lab::new();
    for (flag, value) in [
        ("--timeout", "inf"),
        ("--timeout", "NaN"),
        ("--retry-wait", "1e300"),
        ("--timeout", "-1"),
    ] {
        let (code, _, err) = run(crate::support::common::debforge()
            .args(["lock", "--recipes"])
            .arg(&lab.recipes)
            .arg(format!("{flag}={value}")));
        assert_eq!(code, 2, "{flag} {value}: {err}");
        assert!(
            err.contains(&format!("{flag} ")) && err.contains("expected a number of seconds from"),
            "{flag} {value}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// A killed build of `action = "build"` recipes leaves its temporary tree
/// under the cache, where the next build clears it, not in the system's
/// temporary directory.
#[test]
fn packages_built_here_are_built_under_the_cache() {
    let lab = Lab::new();
    lab.add_small_metapackage();
    let tmp = lab.dir.path().join("tmp");
    fs::create_dir_all(&tmp).unwrap();
    let out = lab.dir.path().join("repo-out");
    ok(lab.cmd("build").arg("--out").arg(&out).env("TMPDIR", &tmp));
    assert_eq!(fs::read_dir(&tmp).unwrap().count(), 0, "nothing in TMPDIR");
    let built = lab.cache.join("built/gpu-stack-cu101");
    let entries: Vec<String> = fs::read_dir(&built)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries.len(), 1, "one kept build, no scratch: {entries:?}");
    // What a killed build leaves there goes with the next build.
    fs::create_dir_all(built.join(".build-killed/.tree-x/tree")).unwrap();
    ok(lab.cmd("build").arg("--out").arg(&out));
    assert!(!built.join(".build-killed").exists());
}

/// A package whose file name is not UTF-8: `index` names it and says what
/// to do (it cannot put the name in a text index), instead of failing to
/// open a mangled name.
#[test]
fn index_names_a_file_name_that_is_not_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    fs::create_dir_all(tree.join("DEBIAN")).unwrap();
    fs::write(
        tree.join("DEBIAN/control"),
        "Package: latin\nVersion: 1.0\nArchitecture: all\nMaintainer: x <x@example.org>\nDescription: x\n x.\n",
    )
    .unwrap();
    let pool = dir.path().join("pool");
    fs::create_dir_all(&pool).unwrap();
    let name = std::ffi::OsStr::from_bytes(b"latin-\xe9_1.0_all.deb");
    ok(crate::support::common::debforge()
        .args(["deb", "build"])
        .arg(&tree)
        .arg("-o")
        .arg(pool.join(name)));
    let (code, _, err) = run(crate::support::common::debforge()
        .args(["index", "--no-cache"])
        .arg(&pool));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("the file name is not UTF-8; debforge writes Packages indexes as text and cannot name it there: rename it"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}
