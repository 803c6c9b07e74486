//! Hostile and broken packages (tests/fixtures/hostile/, written by
//! tests/fixtures/make-hostile.py): each gets exit 2 and a message that names
//! the problem, and nothing on stdout.

use std::fs;

use crate::support::common::{debforge, fixture, run};

const EXPECTED: &[(&str, &str)] = &[
    ("not-an-ar-archive.deb", "not an ar archive"),
    ("truncated-member.deb", "member 'data.tar' is truncated"),
    ("truncated-header.deb", "is cut short"),
    ("bad-header-magic.deb", "bad header magic"),
    (
        "data-before-control.deb",
        "member 'data.tar' comes before 'control.tar'",
    ),
    ("missing-debian-binary.deb", "expected 'debian-binary'"),
    ("missing-data.deb", "no 'data.tar' member"),
    ("missing-control.deb", "no 'control.tar' member"),
    ("format-version-3.deb", "only package format 2.x"),
    ("format-version-no-newline.deb", "only package format 2.x"),
    (
        "unknown-compression.deb",
        "'control.tar.bz2' uses a compression",
    ),
    (
        "control-absolute-path.deb",
        "\"/etc/passwd\" is an absolute path",
    ),
    ("control-dotdot.deb", "contains '..'"),
    ("control-symlink.deb", "\"./postinst\" is a link"),
    ("control-device.deb", "is a device or special file"),
    (
        "control-long-name.deb",
        "has a name longer than 255 bytes (NAME_MAX), which dpkg-deb cannot extract",
    ),
    ("control-bad-field.deb", "line 6: expected 'Name: value'"),
    ("control-empty-package.deb", "field 'Package' is empty"),
    ("control-missing-control-file.deb", "has no 'control' file"),
];

#[test]
fn every_hostile_fixture_is_refused_with_its_reason() {
    let dir = fixture("hostile");
    let mut names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut expected: Vec<String> = EXPECTED.iter().map(|(n, _)| n.to_string()).collect();
    expected.sort();
    assert_eq!(
        names, expected,
        "every fixture has an expectation and every expectation a fixture"
    );
    for (name, needle) in EXPECTED {
        let path = dir.join(name);
        let (code, out, err) = run(debforge().args(["deb", "info"]).arg(&path));
        assert_eq!(code, 2, "{name}: {err}");
        assert!(out.is_empty(), "{name}: printed {out}");
        assert!(err.contains(needle), "{name}: {err}");
        assert!(
            err.contains(name),
            "{name}: the message names the file: {err}"
        );
    }
}

#[test]
fn container_errors_stop_contents_too() {
    for name in [
        "not-an-ar-archive.deb",
        "truncated-member.deb",
        "data-before-control.deb",
    ] {
        let (code, out, err) = run(debforge()
            .args(["deb", "contents"])
            .arg(fixture("hostile").join(name)));
        assert_eq!(code, 2, "{name}");
        assert!(out.is_empty() && err.contains("error"), "{name}: {err}");
    }
}
