//! `debforge deb build` against the real dpkg-deb and dpkg-gencontrol.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::support::common::{EPOCH, debforge, dpkg_contents, fixture, ok, run, sample_tree};

fn build(tree: &Path, out: &Path, extra: &[&str]) -> String {
    ok(debforge()
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .args(["deb", "build"])
        .arg(tree)
        .arg("-o")
        .arg(out)
        .args(extra))
}

fn ar_members(deb: &Path) -> Vec<String> {
    ok(Command::new("ar").arg("t").arg(deb))
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn every_compression_is_accepted_by_dpkg_deb() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = sample_tree(tmp.path(), "");
    for (flag, ext) in [
        ("xz", ".xz"),
        ("gzip", ".gz"),
        ("zstd", ".zst"),
        ("none", ""),
    ] {
        let deb = tmp.path().join(format!("out-{flag}.deb"));
        build(&tree, &deb, &["-Z", flag]);
        assert_eq!(
            ar_members(&deb),
            vec![
                "debian-binary".to_string(),
                format!("control.tar{ext}"),
                format!("data.tar{ext}")
            ]
        );
        let info = ok(Command::new("dpkg-deb").arg("--info").arg(&deb));
        assert!(info.contains("Package: libnccl2"), "{info}");
        // Our listing is dpkg-deb's, line for line.
        let ours = ok(debforge().args(["deb", "contents"]).arg(&deb));
        assert_eq!(ours, dpkg_contents(&deb), "-Z {flag}");

        let x = tmp.path().join(format!("x-{flag}"));
        ok(Command::new("dpkg-deb").arg("--extract").arg(&deb).arg(&x));
        let lib = "usr/lib/x86_64-linux-gnu/libnccl.so.2.4.2";
        assert_eq!(
            fs::read(x.join(lib)).unwrap(),
            fs::read(tree.join(lib)).unwrap()
        );
        assert_eq!(
            fs::read_link(x.join("usr/lib/x86_64-linux-gnu/libnccl.so.2")).unwrap(),
            Path::new("libnccl.so.2.4.2")
        );
        let helper = fs::metadata(x.join("usr/bin/nccl-helper")).unwrap();
        assert_eq!(helper.permissions().mode() & 0o7777, 0o4755);
        assert!(x.join("usr/share/empty").is_dir());
        assert_eq!(
            fs::read(x.join("usr/share/doc/libnccl2/LICENSE.txt")).unwrap(),
            b"Copyright NVIDIA\n"
        );
        let field = ok(Command::new("dpkg-deb")
            .arg("--field")
            .arg(&deb)
            .arg("Version"));
        assert_eq!(field.trim(), "2.4.2-1+cuda10.1");
    }
}

#[test]
fn same_files_modes_links_and_control_as_dpkg_deb_build() {
    let tmp = tempfile::tempdir().unwrap();
    // With Installed-Size given, debforge leaves the control file as it is.
    let tree = sample_tree(tmp.path(), "Installed-Size: 300\n");
    let ours = tmp.path().join("ours.deb");
    let theirs = tmp.path().join("theirs.deb");
    build(&tree, &ours, &[]);
    ok(Command::new("dpkg-deb")
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .args(["--root-owner-group", "-Zxz", "--build"])
        .arg(&tree)
        .arg(&theirs));
    assert_eq!(dpkg_contents(&ours), dpkg_contents(&theirs));
    let control = |deb: &Path| {
        ok(Command::new("dpkg-deb")
            .arg("--info")
            .arg(deb)
            .arg("control"))
    };
    assert_eq!(control(&ours), control(&theirs));
    let script = |deb: &Path| {
        ok(Command::new("dpkg-deb")
            .arg("--info")
            .arg(deb)
            .arg("postinst"))
    };
    assert_eq!(script(&ours), script(&theirs));
    // Control members: dpkg-deb's, plus the md5sums debforge adds.
    let list = |deb: &Path| -> Vec<String> {
        let x = tmp.path().join(format!(
            "ctrl-{}",
            deb.file_stem().unwrap().to_string_lossy()
        ));
        ok(Command::new("dpkg-deb").arg("--control").arg(deb).arg(&x));
        let mut names: Vec<String> = fs::read_dir(&x)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                format!(
                    "{} {:o}",
                    e.file_name().to_string_lossy(),
                    e.metadata().unwrap().permissions().mode() & 0o7777
                )
            })
            .collect();
        names.sort();
        names
    };
    let mut expected = list(&theirs);
    expected.push("md5sums 644".to_string());
    expected.sort();
    assert_eq!(list(&ours), expected);
    // Same compression, and debforge's package is no larger.
    let (a, b) = (
        fs::metadata(&ours).unwrap().len(),
        fs::metadata(&theirs).unwrap().len(),
    );
    assert!(a <= b + 200, "ours {a} bytes, dpkg-deb {b} bytes");
}

#[test]
fn output_is_the_same_bytes_for_the_same_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = sample_tree(tmp.path(), "");
    let a = tmp.path().join("a.deb");
    let b = tmp.path().join("b.deb");
    build(&tree, &a, &[]);
    // A file touched after SOURCE_DATE_EPOCH is clamped: still the same bytes.
    let f = fs::File::options()
        .write(true)
        .open(tree.join("etc/nccl.conf"))
        .unwrap();
    f.set_modified(std::time::SystemTime::now()).unwrap();
    build(&tree, &b, &[]);
    assert_eq!(fs::read(&a).unwrap(), fs::read(&b).unwrap());
    let listing = dpkg_contents(&a);
    assert!(
        listing.lines().all(|l| l.contains("2019-04-23 06:13")),
        "{listing}"
    );
    // Without SOURCE_DATE_EPOCH the tree's own times decide: still stable.
    let c = tmp.path().join("c.deb");
    let d = tmp.path().join("d.deb");
    for out in [&c, &d] {
        ok(debforge()
            .env_remove("SOURCE_DATE_EPOCH")
            .args(["deb", "build"])
            .arg(&tree)
            .arg("-o")
            .arg(out));
    }
    assert_eq!(fs::read(&c).unwrap(), fs::read(&d).unwrap());
}

#[test]
fn md5sums_and_installed_size_are_filled_in_as_debian_tools_compute_them() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = sample_tree(tmp.path(), "");
    let deb = tmp.path().join("p.deb");
    let report = build(&tree, &deb, &["--json"]);
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(
        report["generated"],
        serde_json::json!(["Installed-Size", "md5sums"])
    );

    // md5sums: what md5sum says of every extracted regular file but the conffile.
    let x = tmp.path().join("x");
    ok(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&x));
    let files = ok(Command::new("find")
        .arg(".")
        .args(["-type", "f", "!", "-path", "./etc/nccl.conf"])
        .current_dir(&x));
    let mut files: Vec<&str> = files.lines().map(|l| l.trim_start_matches("./")).collect();
    files.sort();
    let expected = ok(Command::new("md5sum").args(&files).current_dir(&x));
    let md5sums = ok(Command::new("dpkg-deb")
        .arg("--info")
        .arg(&deb)
        .arg("md5sums"));
    assert_eq!(md5sums, expected);

    // Installed-Size: what dpkg-gencontrol computes for the same tree.
    let src = tmp.path().join("src");
    fs::create_dir_all(src.join("debian")).unwrap();
    fs::write(
        src.join("debian/control"),
        "Source: nccl\nMaintainer: cudatools <cudatools@nvidia.com>\n\nPackage: libnccl2\nArchitecture: amd64\nDescription: test\n long\n",
    )
    .unwrap();
    fs::write(
        src.join("debian/changelog"),
        "nccl (2.4.2-1+cuda10.1) unstable; urgency=low\n\n  * Test.\n\n -- cudatools <cudatools@nvidia.com>  Tue, 23 Apr 2019 06:13:20 +0000\n",
    )
    .unwrap();
    let generated = ok(Command::new("dpkg-gencontrol")
        .args(["-plibnccl2", "-O"])
        .arg(format!("-P{}", tree.display()))
        .current_dir(&src));
    let want = generated
        .lines()
        .find_map(|l| l.strip_prefix("Installed-Size: "))
        .expect("dpkg-gencontrol prints Installed-Size");
    let got = ok(Command::new("dpkg-deb")
        .arg("--field")
        .arg(&deb)
        .arg("Installed-Size"));
    assert_eq!(got.trim(), want);
}

/// Builds `tree` into an empty directory; returns (exit code, stderr, files left).
fn build_into_empty_dir(tmp: &Path, tree: &Path) -> (i32, String, usize) {
    let out = tmp.join("out");
    fs::create_dir_all(&out).unwrap();
    let (code, _, err) = run(debforge()
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .args(["deb", "build"])
        .arg(tree)
        .arg("-o")
        .arg(&out));
    (code, err, fs::read_dir(&out).unwrap().count())
}

/// Each bad control file in tests/fixtures/control/: exit 2, a message naming
/// the file and the problem, and no output (not even a temporary file).
#[test]
fn bad_control_files_fail_clearly_and_write_nothing() {
    let cases = [
        (
            "bad-field.control",
            "DEBIAN/control: line 6: expected 'Name: value'",
        ),
        ("empty-package.control", "field 'Package' is empty"),
        (
            "bad-version.control",
            "field 'Version' value \"2.4.2-\": revision number is empty",
        ),
        (
            "bad-package-name.control",
            "must start with a lower-case letter or digit",
        ),
        (
            "missing-maintainer.control",
            "missing required field 'Maintainer'",
        ),
        ("bad-depends.control", "field 'Depends'"),
        (
            "two-paragraphs.control",
            "line 7: a second paragraph starts here",
        ),
        (
            "duplicate-field.control",
            "line 8: duplicate field \"Package\" (first on line 1)",
        ),
    ];
    let dir = fixture("control");
    assert_eq!(
        fs::read_dir(&dir).unwrap().count(),
        cases.len(),
        "every fixture has a case"
    );
    for (name, needle) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let tree = sample_tree(tmp.path(), "");
        fs::copy(dir.join(name), tree.join("DEBIAN/control")).unwrap();
        let (code, err, left) = build_into_empty_dir(tmp.path(), &tree);
        assert_eq!(code, 2, "{name}: {err}");
        assert!(err.contains(needle), "{name}: {err}");
        assert_eq!(left, 0, "{name}: output left behind");
    }
}

/// Broken trees: the same promise.
#[test]
fn bad_trees_fail_clearly_and_write_nothing() {
    type Break = fn(&Path);
    let cases: [(&str, Break, &str); 4] = [
        (
            "no control",
            |t| fs::remove_file(t.join("DEBIAN/control")).unwrap(),
            "DEBIAN/control: not found",
        ),
        (
            "script mode",
            |t| {
                fs::set_permissions(t.join("DEBIAN/postinst"), fs::Permissions::from_mode(0o644))
                    .unwrap()
            },
            "DEBIAN/postinst: maintainer script has bad permissions 0644",
        ),
        (
            "missing conffile",
            |t| fs::remove_file(t.join("etc/nccl.conf")).unwrap(),
            "conffile \"/etc/nccl.conf\"",
        ),
        (
            "unreadable tree",
            |t| fs::rename(t, t.with_extension("gone")).unwrap(),
            "cannot read the package tree",
        ),
    ];
    for (what, breaker, needle) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let tree = sample_tree(tmp.path(), "");
        breaker(&tree);
        let (code, err, left) = build_into_empty_dir(tmp.path(), &tree);
        assert_eq!(code, 2, "{what}: {err}");
        assert!(err.contains(needle), "{what}: {err}");
        assert_eq!(left, 0, "{what}: output left behind");
    }
}

#[test]
fn a_failed_build_keeps_the_previous_package() {
    let tmp = tempfile::tempdir().unwrap();
    let tree = sample_tree(tmp.path(), "");
    let deb = tmp.path().join("p.deb");
    build(&tree, &deb, &[]);
    let before = fs::read(&deb).unwrap();
    fs::set_permissions(
        tree.join("DEBIAN/postinst"),
        fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let (code, _, _) = run(debforge()
        .args(["deb", "build"])
        .arg(&tree)
        .arg("-o")
        .arg(&deb));
    assert_eq!(code, 2);
    assert_eq!(fs::read(&deb).unwrap(), before);
}

#[test]
fn rebuilding_a_real_package_tree_matches_dpkg_deb() {
    // Unpack a real Debian package and build it again with both tools.
    let tmp = tempfile::tempdir().unwrap();
    let tree = tmp.path().join("hello");
    let real = fixture("real/hello_2.10-3_amd64.deb");
    ok(Command::new("dpkg-deb").arg("-R").arg(&real).arg(&tree));
    let ours = tmp.path().join("ours.deb");
    let theirs = tmp.path().join("theirs.deb");
    build(&tree, &ours, &[]);
    ok(Command::new("dpkg-deb")
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .args(["--root-owner-group", "-b"])
        .arg(&tree)
        .arg(&theirs));
    assert_eq!(dpkg_contents(&ours), dpkg_contents(&theirs));
    // The real package already has md5sums: it is kept as it was.
    let sums = |deb: &Path| ok(Command::new("dpkg-deb").arg("-I").arg(deb).arg("md5sums"));
    assert_eq!(sums(&ours), sums(&real));
}
