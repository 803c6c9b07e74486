//! Input used as a path never reaches outside the project: package fields,
//! suites, lock digests, recipe file references. (Upstream `Filename`s are
//! in fetch::trust_chain_failures; request paths in serve.)

use std::fs;
use std::path::Path;

use crate::support::common::{ok, run};
use crate::support::standin::Lab;

/// `debforge build` fails with exit 2, saying `needle`, and writes no output.
fn build_fails(lab: &Lab, args: &[&str], needle: &str) {
    let out = lab.dir.path().join("out");
    let (code, _, err) = run(lab.cmd("build").args(args).arg("--out").arg(&out));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(needle), "missing {needle:?} in:\n{err}");
    assert!(!out.exists(), "an output was written");
}

/// No file appeared anywhere under `dir` named `name`.
fn nothing_named(dir: &Path, name: &str) -> bool {
    let mut found = false;
    crate::support::common::walk_files(dir, &mut |p| {
        if p.to_string_lossy().contains(name) {
            found = true;
        }
    });
    !found
}

#[test]
fn a_package_source_field_cannot_move_its_pool_file() {
    let lab = Lab::new();
    let tree = lab.dir.path().join("tree");
    fs::create_dir_all(tree.join("DEBIAN")).unwrap();
    fs::write(
        tree.join("DEBIAN/control"),
        "Package: escape\nSource: ../../../../../../tmp/debforge-escape\nVersion: 1.0-1\nArchitecture: all\nMaintainer: x <x@example.org>\nDescription: hostile\n Source escapes.\n",
    )
    .unwrap();
    let deb = lab.recipes.join("escape_1.0-1_all.deb");
    ok(std::process::Command::new("dpkg-deb")
        .args(["--build", "--root-owner-group"])
        .arg(&tree)
        .arg(&deb));
    fs::write(
        lab.recipes.join("packages/escape.toml"),
        "name = \"escape\"\nversion = \"1.0-1\"\narchitecture = \"all\"\nfrom = { path = \"escape_1.0-1_all.deb\" }\n",
    )
    .unwrap();
    build_fails(&lab, &[], "Source");
    assert!(!Path::new("/tmp/debforge-escape").exists());
}

#[test]
fn a_suite_or_component_cannot_leave_the_snapshot() {
    let lab = Lab::new();
    let sources = lab.recipes.join("sources.toml");
    let text = fs::read_to_string(&sources).unwrap();
    for (from, to) in [
        ("suite = \"bionic-updates\"", "suite = \"../../../escape\""),
        ("component = \"main\"", "component = \"/etc\""),
    ] {
        assert!(text.contains(from), "{text}");
        fs::write(&sources, text.replace(from, to)).unwrap();
        let snap = lab.dir.path().join("snap");
        let (code, _, err) = run(lab.cmd("fetch").arg("--to").arg(&snap));
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("sources.toml"), "{err}");
        assert!(
            err.contains("has a `.`, `..` or empty component") || err.contains("is absolute"),
            "{err}"
        );
        assert!(!snap.exists());
        assert!(nothing_named(lab.dir.path(), "escape"));
    }
}

#[test]
fn a_lock_digest_is_never_a_path() {
    let lab = Lab::new();
    ok(&mut lab.cmd("lock"));
    let lock = lab.recipes.join("debforge.lock");
    let text = fs::read_to_string(&lock).unwrap();
    let sha = crate::support::common::first_sha256(&text);
    fs::write(
        &lock,
        text.replacen(&sha, "../../../../../../tmp/debforge-escape", 1),
    )
    .unwrap();
    build_fails(
        &lab,
        &["--locked"],
        "sha256 \"../../../../../../tmp/debforge-escape\" is not 64 lower-case hex digits",
    );
    assert!(!Path::new("/tmp/debforge-escape").exists());
}

#[test]
fn recipes_only_pack_regular_files_from_inside_recipes() {
    let setup = || {
        let lab = Lab::new();
        let meta = lab.add_small_metapackage();
        (lab, meta)
    };
    let (lab, meta) = setup();
    ok(lab
        .cmd("build")
        .arg("--out")
        .arg(lab.dir.path().join("good")));

    let cases: [(&str, &str, &str); 3] = [
        (
            "copyright = \"files/copyright\"",
            "copyright = \"/etc/shadow\"",
            "outside the recipes directory",
        ),
        (
            "copyright = \"files/copyright\"",
            "copyright = \"files/../../../../../../../../../etc/passwd\"",
            "outside the recipes directory",
        ),
        (
            "source = \"files/gpu-stack-check\"",
            "source = \"/dev/zero\"",
            "outside the recipes directory",
        ),
    ];
    for (from, to, needle) in cases {
        assert!(meta.contains(from), "{from}");
        let (lab, meta) = setup();
        fs::write(
            lab.recipes.join("packages/gpu-stack-cu101.toml"),
            meta.replace(from, to),
        )
        .unwrap();
        build_fails(&lab, &[], needle);
    }

    // A directory under recipes/ that is a symlink to /etc.
    let (lab, meta) = setup();
    std::os::unix::fs::symlink("/etc", lab.recipes.join("files/etc")).unwrap();
    fs::write(
        lab.recipes.join("packages/gpu-stack-cu101.toml"),
        meta.replace(
            "copyright = \"files/copyright\"",
            "copyright = \"files/etc/shadow\"",
        ),
    )
    .unwrap();
    build_fails(
        &lab,
        &[],
        "resolves to /etc/shadow, outside the recipes directory",
    );

    // A package file that is a device.
    let lab = Lab::new();
    fs::write(
        lab.recipes.join("packages/zero.toml"),
        "name = \"zero\"\nversion = \"1.0\"\narchitecture = \"all\"\nfrom = { path = \"/dev/zero\" }\n",
    )
    .unwrap();
    build_fails(&lab, &[], "from.path is not a regular file");
}
