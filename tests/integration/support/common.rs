//! Helpers shared by the integration tests.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn debforge() -> Command {
    Command::new(env!("CARGO_BIN_EXE_debforge"))
}

/// Runs a command, returning (exit code, stdout, stderr).
pub fn run(cmd: &mut Command) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("command starts");
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

/// Runs a command that must succeed; returns its stdout.
pub fn ok(cmd: &mut Command) -> String {
    let (code, out, err) = run(cmd);
    assert_eq!(code, 0, "{cmd:?} failed:\n{err}");
    out
}

/// `debforge verify DIR` against the keyring of the build in `out`.
pub fn verify_published(dir: &Path, out: &Path) {
    ok(debforge()
        .arg("verify")
        .arg(dir)
        .arg("--keyring")
        .arg(out.join("debforge-archive-keyring.gpg")));
}

pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

pub const EPOCH: &str = "1556000000";

/// A package tree like the lab's: a library with its soname link, a hard
/// link, a conffile, a maintainer script, a long path, a setuid file.
pub fn sample_tree(root: &Path, control_extra: &str) -> PathBuf {
    let dir = root.join("pkgroot");
    let w = |rel: &str, data: &[u8], mode: u32| {
        let p = dir.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, data).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
    };
    w(
        "DEBIAN/control",
        format!(
            "Package: libnccl2\nVersion: 2.4.2-1+cuda10.1\nArchitecture: amd64\nMaintainer: cudatools <cudatools@nvidia.com>\n{control_extra}Depends: libc6 (>= 2.3.4), libgcc1 (>= 1:3.0), libstdc++6 (>= 4.1.1)\nDescription: NVIDIA Collectives Communication Library (NCCL) Runtime\n NCCL (pronounced \"Nickel\") is a stand-alone library.\n .\n It is a test fixture here.\n"
        )
        .as_bytes(),
        0o644,
    );
    w("DEBIAN/postinst", b"#!/bin/sh\nset -e\nldconfig\n", 0o755);
    w("DEBIAN/conffiles", b"/etc/nccl.conf\n", 0o644);
    w("etc/nccl.conf", b"NCCL_DEBUG=WARN\n", 0o644);
    let lib: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    w("usr/lib/x86_64-linux-gnu/libnccl.so.2.4.2", &lib, 0o644);
    std::os::unix::fs::symlink(
        "libnccl.so.2.4.2",
        dir.join("usr/lib/x86_64-linux-gnu/libnccl.so.2"),
    )
    .unwrap();
    w(
        "usr/share/doc/libnccl2/copyright",
        b"Copyright NVIDIA\n",
        0o644,
    );
    fs::hard_link(
        dir.join("usr/share/doc/libnccl2/copyright"),
        dir.join("usr/share/doc/libnccl2/LICENSE.txt"),
    )
    .unwrap();
    let long = format!(
        "usr/share/doc/libnccl2/{}/{}.txt",
        "a-long-directory-name".repeat(4),
        "f".repeat(60)
    );
    w(&long, b"long\n", 0o644);
    w("usr/bin/nccl-helper", b"#!/bin/sh\n", 0o4755);
    fs::create_dir_all(dir.join("usr/share/empty")).unwrap();
    for p in ["", "usr", "usr/share", "usr/share/empty"] {
        fs::set_permissions(dir.join(p), fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

/// `dpkg-deb -c` with times in UTC.
pub fn dpkg_contents(deb: &Path) -> String {
    ok(Command::new("dpkg-deb").env("TZ", "UTC").arg("-c").arg(deb))
}

/// Calls `f` for every file (not directory) below `dir`.
pub fn walk_files(dir: &Path, f: &mut dyn FnMut(&Path)) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            walk_files(&p, f);
        } else {
            f(&p);
        }
    }
}

/// True (and says so, past the test harness's capture) when the suite was
/// asked not to reach the real archives (`DEBFORGE_TEST_OFFLINE=1`).
pub fn skipped_offline(test: &str) -> bool {
    if std::env::var_os("DEBFORGE_TEST_OFFLINE").is_some_and(|v| v == "1") {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: DEBFORGE_TEST_OFFLINE=1 (it needs the real archive)"
        );
        return true;
    }
    false
}

/// The first `sha256 = "…"` of a lock file's text.
pub fn first_sha256(lock: &str) -> String {
    lock.lines()
        .find_map(|l| l.strip_prefix("sha256 = \""))
        .expect("a sha256 line")
        .trim_end_matches('"')
        .to_string()
}
