//! `debforge deb repack`: the data member is copied byte for byte, the
//! control member is rewritten, and upstream's maintainer scripts run first.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::common::{EPOCH, debforge, ok, run};

/// An upstream-like package built by the real dpkg-deb: a bash postinst that
/// logs its arguments (or fails with `fail`), a perl prerm.
fn upstream(dir: &Path, postinst_exit: i32) -> PathBuf {
    let tree = dir.join("tree");
    let w = |rel: &str, data: &str, mode: u32| {
        let p = tree.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, data).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
    };
    w(
        "DEBIAN/control",
        "Package: libcudnn7-dev\nVersion: 7.5.0.56-1+cuda10.1\nArchitecture: amd64\nMaintainer: cudatools <cudatools@nvidia.com>\nDepends: libcudnn7 (= 7.5.0.56-1+cuda10.1)\nDescription: cuDNN development libraries and headers\n",
        0o644,
    );
    w(
        "DEBIAN/postinst",
        &format!("#!/bin/bash\nset -e\necho \"upstream $*\" >> \"$LOG\"\nexit {postinst_exit}\n"),
        0o755,
    );
    w(
        "DEBIAN/prerm",
        "#!/usr/bin/perl -w\nopen(my $f, '>>', $ENV{LOG}) or die; print $f \"upstream-perl @ARGV\\n\";\n",
        0o755,
    );
    w(
        "usr/include/x86_64-linux-gnu/cudnn_v7.h",
        "#define CUDNN_MAJOR 7\n#define CUDNN_MINOR 5\n#define CUDNN_PATCHLEVEL 0\n",
        0o644,
    );
    let deb = dir.join("libcudnn7-dev_7.5.0.56-1+cuda10.1_amd64.deb");
    ok(Command::new("dpkg-deb")
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .args(["--root-owner-group", "-b"])
        .arg(&tree)
        .arg(&deb));
    deb
}

fn ours(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(format!("ours.{name}"));
    fs::write(&p, "#!/bin/sh\nset -e\necho \"ours $*\" >> \"$LOG\"\n").unwrap();
    p
}

fn member(deb: &Path, name: &str) -> Vec<u8> {
    Command::new("ar")
        .arg("p")
        .arg(deb)
        .arg(name)
        .output()
        .unwrap()
        .stdout
}

/// Runs a maintainer script the way dpkg does: interpreter from its #!, args.
fn run_script(control_dir: &Path, script: &str, args: &[&str], log: &Path) -> i32 {
    Command::new(control_dir.join(script))
        .args(args)
        .env("LOG", log)
        .status()
        .unwrap()
        .code()
        .unwrap_or(-1)
}

#[test]
fn repack_copies_the_data_verbatim_and_merges_scripts() {
    let tmp = tempfile::tempdir().unwrap();
    let input = upstream(tmp.path(), 0);
    let out = tmp.path().join("out/");
    let report = ok(debforge()
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .args(["deb", "repack"])
        .arg(&input)
        .arg("-o")
        .arg(&out)
        .arg("--postinst")
        .arg(ours(tmp.path(), "postinst"))
        .arg("--prerm")
        .arg(ours(tmp.path(), "prerm"))
        .arg("--postrm")
        .arg(ours(tmp.path(), "postrm"))
        .arg("--json"));
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["merged"], serde_json::json!(["postinst", "prerm"]));
    assert_eq!(report["added"], serde_json::json!(["postrm"]));
    let repacked = out.join(input.file_name().unwrap());

    // The data member: the same bytes, so md5sums and contents stay right.
    assert_eq!(
        member(&repacked, "data.tar.xz"),
        member(&input, "data.tar.xz")
    );
    let contents = |d: &Path| ok(Command::new("dpkg-deb").env("TZ", "UTC").arg("-c").arg(d));
    assert_eq!(contents(&repacked), contents(&input));
    let field = |d: &Path, f: &str| {
        ok(Command::new("dpkg-deb").arg("-f").arg(d).arg(f))
            .trim()
            .to_string()
    };
    assert_eq!(
        field(&repacked, "Version"),
        "7.5.0.56-1+cuda10.1",
        "the upstream version by default"
    );

    // The merged scripts, run as dpkg runs them: upstream's postinst first,
    // then ours; our prerm first, then upstream's.
    let ctrl = tmp.path().join("ctrl");
    ok(Command::new("dpkg-deb").arg("-e").arg(&repacked).arg(&ctrl));
    let log = tmp.path().join("log");
    assert_eq!(run_script(&ctrl, "postinst", &["configure", ""], &log), 0);
    assert_eq!(run_script(&ctrl, "prerm", &["remove"], &log), 0);
    assert_eq!(run_script(&ctrl, "postrm", &["purge"], &log), 0);
    assert_eq!(
        fs::read_to_string(&log).unwrap(),
        "upstream configure \nours configure \nours remove\nupstream-perl remove\nours purge\n"
    );
    let mode = fs::metadata(ctrl.join("postinst"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o755);
}

#[test]
fn a_failing_upstream_script_fails_the_merged_one() {
    let tmp = tempfile::tempdir().unwrap();
    let input = upstream(tmp.path(), 3);
    let out = tmp.path().join("r.deb");
    ok(debforge()
        .args(["deb", "repack"])
        .arg(&input)
        .arg("-o")
        .arg(&out)
        .arg("--postinst")
        .arg(ours(tmp.path(), "postinst")));
    let ctrl = tmp.path().join("ctrl");
    ok(Command::new("dpkg-deb").arg("-e").arg(&out).arg(&ctrl));
    let log = tmp.path().join("log");
    assert_eq!(run_script(&ctrl, "postinst", &["configure"], &log), 3);
    assert_eq!(
        fs::read_to_string(&log).unwrap(),
        "upstream configure\n",
        "ours must not run after a failure"
    );
}

#[test]
fn fields_version_suffix_and_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let input = upstream(tmp.path(), 0);
    let out = tmp.path().join("r.deb");
    ok(debforge()
        .args(["deb", "repack"])
        .arg(&input)
        .arg("-o")
        .arg(&out)
        .args([
            "--set",
            "X-Lab=gpu",
            "--set",
            "Section=libdevel",
            "--version-suffix",
            "+lab1",
        ]));
    let field = |f: &str| {
        ok(Command::new("dpkg-deb").arg("-f").arg(&out).arg(f))
            .trim()
            .to_string()
    };
    assert_eq!(field("Version"), "7.5.0.56-1+cuda10.1+lab1");
    assert_eq!(field("X-Lab"), "gpu");
    assert_eq!(field("Section"), "libdevel");

    for (args, needle) in [
        (vec!["--set", "novalue"], "expected Field=Value"),
        (vec!["--version-suffix=_bad"], "version"),
    ] {
        let o = tmp.path().join("bad.deb");
        let (code, _, err) = run(debforge()
            .args(["deb", "repack"])
            .arg(&input)
            .arg("-o")
            .arg(&o)
            .args(&args));
        assert_eq!(code, 2, "{args:?}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!o.exists(), "{args:?}: output written");
    }
    let (code, _, err) = run(debforge()
        .args(["deb", "repack"])
        .arg(crate::support::common::fixture(
            "hostile/truncated-member.deb",
        ))
        .arg("-o")
        .arg(tmp.path().join("x.deb")));
    assert_eq!(code, 2);
    assert!(err.contains("truncated"), "{err}");
    assert!(!tmp.path().join("x.deb").exists());
}

#[test]
fn bad_scripts_and_values_are_refused_with_nothing_written() {
    let tmp = tempfile::tempdir().unwrap();
    let input = upstream(tmp.path(), 0);
    let binary = tmp.path().join("binary");
    fs::write(&binary, [0x7f, b'E', b'L', b'F', 0, 0xff, 0xfe]).unwrap();
    let no_shebang = tmp.path().join("plain");
    fs::write(&no_shebang, "echo hi\n").unwrap();
    let o = tmp.path().join("o.deb");
    let cases: Vec<(Vec<std::ffi::OsString>, &str)> = vec![
        (
            vec!["--postinst".into(), tmp.path().join("missing.sh").into()],
            "cannot read --postinst",
        ),
        (
            vec!["--postinst".into(), binary.clone().into()],
            "not a text file",
        ),
        (
            vec!["--prerm".into(), no_shebang.clone().into()],
            "no #! line",
        ),
        (
            vec!["--set".into(), "Description=one\ntwo".into()],
            "has a newline",
        ),
    ];
    for (args, needle) in cases {
        let (code, _, err) = run(debforge()
            .args(["deb", "repack"])
            .arg(&input)
            .arg("-o")
            .arg(&o)
            .args(&args));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!o.exists(), "{args:?}: output written");
    }
}
