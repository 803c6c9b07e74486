//! `debforge rollback` and `publish --generation N`: an earlier generation
//! published again to a target, from the build output's pool, with a fresh
//! Date and that generation's pins; safe when killed.

use std::fs;
use std::path::Path;

use crate::support::apt::{Apt, sources};
use crate::support::common::{debforge, ok, run};
use crate::support::server::Server;
use crate::support::standin::Lab;

fn release_date(www: &Path) -> i64 {
    let text = fs::read_to_string(www.join("dists/bionic/Release")).unwrap();
    let line = text.lines().find_map(|l| l.strip_prefix("Date: ")).unwrap();
    let out = ok(std::process::Command::new("date")
        .args(["-u", "+%s", "-d"])
        .arg(line));
    out.trim().parse().unwrap()
}

/// Every recipe's cuDNN 7.5.0.56 made 7.6.5.32 (the next generation).
fn newer_cudnn(lab: &Lab) {
    for e in fs::read_dir(lab.recipes.join("packages")).unwrap() {
        let recipe = e.unwrap().path();
        let text = fs::read_to_string(&recipe).unwrap();
        fs::write(
            &recipe,
            text.replace("7.5.0.56-1+cuda10.1", "7.6.5.32-1+cuda10.1"),
        )
        .unwrap();
    }
}

/// Two generations (cuDNN 7.5.0.56, then 7.6.5.32), each published.
fn two_generations(lab: &Lab, out: &Path, www: &Path) {
    ok(lab
        .cmd("build")
        .arg("--out")
        .arg(out)
        .env("SOURCE_DATE_EPOCH", crate::support::common::EPOCH));
    ok(debforge()
        .arg("publish")
        .arg("--to")
        .arg(www)
        .arg("--out")
        .arg(out));
    newer_cudnn(lab);
    let (code, _, err) = run(lab
        .cmd("build")
        .arg("--out")
        .arg(out)
        .env("SOURCE_DATE_EPOCH", crate::support::common::EPOCH));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("recorded generation 2"), "{err}");
    ok(debforge()
        .arg("publish")
        .arg("--to")
        .arg(www)
        .arg("--out")
        .arg(out));
}

fn rollback(lab: &Lab, out: &Path, www: &Path) -> std::process::Command {
    let mut c = debforge();
    c.arg("rollback")
        .arg("--to")
        .arg(www)
        .arg("--out")
        .arg(out)
        .arg("--keys")
        .arg(lab.keys())
        .arg("--cache")
        .arg(&lab.cache);
    c
}

fn publish_generation(lab: &Lab, out: &Path, www: &Path, n: &str) -> std::process::Command {
    let mut c = debforge();
    c.arg("publish")
        .arg("--to")
        .arg(www)
        .arg("--out")
        .arg(out)
        .arg("--keys")
        .arg(lab.keys())
        .arg("--cache")
        .arg(&lab.cache)
        .args(["--generation", n]);
    c
}

#[test]
fn rollback_publishes_the_previous_generation_again_without_copying_a_pool_file() {
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    let www = lab.dir.path().join("www-mirror");
    two_generations(&lab, &out, &www);
    let keyring = out.join("debforge-archive-keyring.gpg");
    let server = Server::start(www.clone());
    let apt_sources = sources(&server.url(""), &keyring);
    let pins_now = fs::read_to_string(www.join("debforge.pref")).unwrap();
    let apt = Apt::new(&apt_sources, &pins_now);
    assert_eq!(apt.update().0, 0);
    assert_eq!(apt.candidate("libcudnn7"), "7.6.5.32-1+cuda10.1");
    let date_before = release_date(&www);

    let (code, stdout, err) = run(&mut rollback(&lab, &out, &www));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("published generation 1 (7 packages)")
            && err.contains("apt-get update && sudo apt-get dist-upgrade"),
        "{err}"
    );
    // Only indexes, Release files and pins are written: every pool file of
    // generation 1 was still on the target (kept there by `--keep`).
    let copied: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("copied      "))
        .collect();
    assert!(!copied.is_empty(), "{stdout}");
    assert!(
        copied.iter().all(|f| !f.starts_with("pool/")),
        "no pool file copied: {copied:?}"
    );
    // The pins name the repository, not versions: the same in both.
    assert!(!copied.contains(&"debforge.pref"), "{copied:?}");
    assert_eq!(copied.last(), Some(&"dists/bionic/InRelease"), "{copied:?}");
    // A fresh Date: SOURCE_DATE_EPOCH dated both builds in 2019.
    assert!(release_date(&www) > date_before, "a newer Release");
    // The target is the first generation again, signed, with its pins.
    let packages = fs::read_to_string(www.join("dists/bionic/main/binary-amd64/Packages")).unwrap();
    assert!(
        packages.contains("Version: 7.5.0.56-1+cuda10.1"),
        "{packages}"
    );
    assert!(
        !packages.contains("Version: 7.6.5.32-1+cuda10.1"),
        "{packages}"
    );
    let pins_then = fs::read_to_string(www.join("debforge.pref")).unwrap();
    assert!(
        pins_then.contains("Package: libcudnn7\nPin: release o="),
        "{pins_then}"
    );
    ok(debforge()
        .arg("verify")
        .arg(&www)
        .arg("--keyring")
        .arg(&keyring));
    // The second generation's files stay (a roll forward needs no upload).
    assert!(
        www.join("pool/main/libc/libcudnn7/libcudnn7_7.6.5.32-1+cuda10.1_amd64.deb")
            .exists()
    );
    // Nothing of the rollback is left beside the output.
    assert!(!lab.dir.path().join(".repo-out.generation").exists());
    let apt = Apt::new(&apt_sources, &pins_then);
    let (code, problems) = apt.update();
    assert_eq!((code, problems.clone()), (0, vec![]), "{problems:?}");
    assert_eq!(apt.candidate("libcudnn7"), "7.5.0.56-1+cuda10.1");

    // Nothing before the first generation.
    let (code, _, err) = run(&mut rollback(&lab, &out, &www));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("serves generation 1, the first recorded: there is none to go back to"),
        "{err}"
    );
    // Forward again to any generation; a generation that does not exist is named.
    let (code, stdout, err) = run(&mut publish_generation(&lab, &out, &www, "2"));
    assert_eq!(code, 0, "{err}");
    assert!(!stdout.contains("copied      pool/"), "{stdout}");
    let packages = fs::read_to_string(www.join("dists/bionic/main/binary-amd64/Packages")).unwrap();
    assert!(
        packages.contains("Version: 7.6.5.32-1+cuda10.1"),
        "{packages}"
    );
    let (code, _, err) = run(&mut publish_generation(&lab, &out, &www, "7"));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no generation 7") && err.contains("(it has 1, 2)"),
        "{err}"
    );

    // A target that serves something no generation recorded is not guessed at.
    let other = lab.dir.path().join("other");
    fs::create_dir_all(other.join("dists/bionic")).unwrap();
    fs::write(
        other.join("dists/bionic/Release"),
        "Origin: x\nDate: Sat, 01 Jan 2000 00:00:00 UTC\nSHA256:\n",
    )
    .unwrap();
    let (code, _, err) = run(&mut rollback(&lab, &out, &other));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is none of the generations recorded"), "{err}");
}

#[test]
fn a_killed_rollback_leaves_the_repository_in_force_and_the_next_completes_it() {
    use std::process::Stdio;
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    let www = lab.dir.path().join("www-mirror");
    two_generations(&lab, &out, &www);
    let in_force = fs::read(www.join("dists/bionic/InRelease")).unwrap();
    let marker = lab.dir.path().join("paused");
    let mut child = rollback(&lab, &out, &www)
        .env(
            "DEBFORGE_TEST_PAUSE_BEFORE",
            format!("debforge.pref:{}", marker.display()),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !marker.exists() {
        assert!(start.elapsed().as_secs() < 60, "the rollback never paused");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Killed after the new by-hash indexes are in, before the pins, the
    // plain indexes and the Release.
    child.kill().unwrap();
    child.wait().unwrap();
    fs::remove_file(&marker).unwrap();
    assert_eq!(
        fs::read(www.join("dists/bionic/InRelease")).unwrap(),
        in_force
    );
    let keyring = out.join("debforge-archive-keyring.gpg");
    let server = Server::start(www.clone());
    let apt_sources = sources(&server.url(""), &keyring);
    let pins = fs::read_to_string(out.join("debforge.pref")).unwrap();
    let apt = Apt::new(&apt_sources, &pins);
    let (code, problems) = apt.update();
    assert_eq!((code, problems.clone()), (0, vec![]), "{problems:?}");
    assert_eq!(
        apt.candidate("libcudnn7"),
        "7.6.5.32-1+cuda10.1",
        "still generation 2"
    );
    // Every file the Release in force references is still there.
    let (code, stdout, err) = run(debforge()
        .arg("verify")
        .arg(&www)
        .arg("--keyring")
        .arg(&keyring));
    assert_eq!(code, 0, "{stdout}{err}");

    // The next rollback still sees generation 2 in force and completes.
    ok(&mut rollback(&lab, &out, &www));
    let packages = fs::read_to_string(www.join("dists/bionic/main/binary-amd64/Packages")).unwrap();
    assert!(
        packages.contains("Version: 7.5.0.56-1+cuda10.1"),
        "{packages}"
    );
    ok(debforge()
        .arg("verify")
        .arg(&www)
        .arg("--keyring")
        .arg(&keyring));
    assert!(!lab.dir.path().join(".repo-out.generation").exists());
}

/// Any target: an rsync daemon and an S3 bucket (moto) roll back the same
/// way; which generation each serves is read back from the target itself.
#[test]
fn rollback_to_an_rsync_daemon_and_an_s3_bucket() {
    use crate::publish_remote::{RsyncDaemon, S3Server};
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    let daemon_root = lab.dir.path().join("rsyncd");
    let daemon = RsyncDaemon::start(&daemon_root);
    let rsync_target = daemon.url("repo/gpu");
    let s3 = S3Server::start(false);
    s3.create_bucket("lab-apt");
    let endpoint = s3.endpoint();
    let s3_env = |c: &mut std::process::Command| {
        c.args(["--endpoint", &endpoint])
            .env("AWS_ACCESS_KEY_ID", "lab")
            .env("AWS_SECRET_ACCESS_KEY", "lab-secret")
            .env("HOME", "/nonexistent")
            .env_remove("AWS_PROFILE");
    };
    let build = |lab: &Lab| {
        ok(lab
            .cmd("build")
            .arg("--out")
            .arg(&out)
            .env("SOURCE_DATE_EPOCH", crate::support::common::EPOCH));
        ok(debforge()
            .arg("publish")
            .arg("--to")
            .arg(&rsync_target)
            .arg("--out")
            .arg(&out));
        let mut c = debforge();
        c.arg("publish")
            .arg("--to")
            .arg("s3://lab-apt/gpu")
            .arg("--out")
            .arg(&out);
        s3_env(&mut c);
        ok(&mut c);
    };
    build(&lab);
    newer_cudnn(&lab);
    build(&lab);

    let mut on_rsync = rollback(&lab, &out, Path::new(&rsync_target));
    let (code, stdout, err) = run(&mut on_rsync);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("published generation 1"), "{err}");
    assert!(!stdout.contains("copied      pool/"), "{stdout}");
    let packages =
        fs::read_to_string(daemon_root.join("repo/gpu/dists/bionic/main/binary-amd64/Packages"))
            .unwrap();
    assert!(
        packages.contains("Version: 7.5.0.56-1+cuda10.1"),
        "{packages}"
    );

    let mut on_s3 = rollback(&lab, &out, Path::new("s3://lab-apt/gpu"));
    s3_env(&mut on_s3);
    let (code, stdout, err) = run(&mut on_s3);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("published generation 1"), "{err}");
    assert!(!stdout.contains("copied      pool/"), "{stdout}");
    // Read back from the bucket: it now serves generation 1.
    let mut again = rollback(&lab, &out, Path::new("s3://lab-apt/gpu"));
    s3_env(&mut again);
    let (code, _, err) = run(&mut again);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("serves generation 1, the first recorded"),
        "{err}"
    );
}
