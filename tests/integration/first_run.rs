//! A new user's first runs: the output directory is debforge's or refused,
//! a key is made when there is none, the wrong directory and a missing key
//! file are named before anything is contacted, and errors say what to do
//! (whole messages pinned, like uv's snapshot tests).

use std::fs;

use crate::support::common::{debforge, ok, run};
use crate::support::standin::Lab;

#[test]
fn build_replaces_only_its_own_output() {
    let lab = Lab::new();
    // A docroot with someone's files.
    let docroot = lab.dir.path().join("docroot");
    fs::create_dir_all(&docroot).unwrap();
    fs::write(docroot.join("index.html"), "<h1>lab</h1>").unwrap();
    fs::write(docroot.join("notes.txt"), "notes").unwrap();
    let (code, _, err) = run(lab.cmd("build").arg("--out").arg(&docroot));
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        err,
        format!(
            "debforge: error: {}: not written by debforge (it holds index.html, notes.txt); `debforge build` replaces its output directory whole\n  hint: choose another --out, or pass --force to replace it (what it holds is deleted)\n",
            docroot.display()
        )
    );
    assert!(docroot.join("index.html").exists() && docroot.join("notes.txt").exists());
    assert!(lab.cached_debs().is_empty(), "checked before any download");

    // A file where the directory should be.
    let file = lab.dir.path().join("repo-out");
    fs::write(&file, "a .deb written by mistake").unwrap();
    let (code, _, err) = run(lab.cmd("build").arg("-o").arg(&file));
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        err,
        format!(
            "debforge: error: {}: is a file, not a directory; `debforge build` writes a repository (a directory) there\n  hint: remove the file or choose another --out\n",
            file.display()
        )
    );

    // An empty directory, then its own output again, then --force.
    let out = lab.dir.path().join("fresh");
    fs::create_dir_all(&out).unwrap();
    ok(lab.cmd("build").arg("--out").arg(&out));
    assert!(out.join(".debforge-output").is_file());
    ok(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .env("SOURCE_DATE_EPOCH", "1600000000"));
    ok(lab.cmd("build").arg("--out").arg(&docroot).arg("--force"));
    assert!(!docroot.join("index.html").exists());
    ok(debforge().arg("verify").arg(&docroot));
}

#[test]
fn the_first_build_makes_its_key_and_says_what_comes_next() {
    let lab = Lab::new();
    let keys = lab.dir.path().join("new-keys");
    let out = lab.dir.path().join("repo-out");
    let (code, _, err) = run(lab.build_with_keys(&keys).arg("--out").arg(&out));
    assert_eq!(code, 0, "{err}");
    let key = fs::read_dir(keys.join("signing"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "key"))
        .unwrap();
    assert!(
        err.contains(&format!(
            "debforge: no signing key yet: made {}",
            key.display()
        )) && err.contains("git ignores it"),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "debforge: next: serve it on the LAN with `debforge serve --out {}`",
            out.display()
        )),
        "{err}"
    );
    ok(debforge().arg("verify").arg(&out));
    // A second build signs with the same key.
    ok(lab.build_with_keys(&keys).arg("--out").arg(&out));
    assert_eq!(
        fs::read_dir(keys.join("signing")).unwrap().count(),
        2,
        "the key and .gitignore"
    );
}

#[test]
fn the_wrong_directory_and_a_missing_key_file_are_named_first() {
    let lab = Lab::new();
    let elsewhere = lab.dir.path().join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    let (code, _, err) = run(debforge().arg("build").current_dir(&elsewhere));
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        err,
        format!(
            "debforge: error: not a debforge project here: no recipes/ (with sources.toml or packages/) in {}\n  hint: run it from the project's root, or pass --recipes DIR\n",
            elsewhere.display()
        )
    );
    assert_eq!(
        fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "no keys or output made there"
    );

    // A key file missing for the second source: said before the first
    // source is contacted.
    let sources = lab.recipes.join("sources.toml");
    let text = fs::read_to_string(&sources).unwrap();
    let edited = text.replacen(
        "key = \"keys/upstream.asc\"",
        "key = \"keys/ubuntu-archive-keyring.gpg\"",
        2,
    );
    let edited = edited.replacen(
        "key = \"keys/ubuntu-archive-keyring.gpg\"",
        "key = \"keys/upstream.asc\"",
        1,
    );
    fs::write(&sources, &edited).unwrap();
    lab.server.clear_log();
    let (code, _, err) = run(&mut lab.cmd("lock"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("ubuntu-archive-keyring.gpg"), "{err}");
    assert!(
        err.contains("keys/README.md says where each shipped key comes from"),
        "{err}"
    );
    assert!(
        lab.server.requests().is_empty(),
        "contacted: {:?}",
        lab.server.requests()
    );
}

#[test]
fn errors_say_what_to_do() {
    let lab = Lab::new();
    // A host that does not resolve: one line, no retries, the two ways on.
    let (code, _, err) = run(lab
        .cmd("lock")
        .arg("--source")
        .arg("nvidia-ml=http://no-such-host.invalid/nvidia/"));
    assert_eq!(code, 2, "{err}");
    assert!(!err.contains("retrying"), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].starts_with("debforge: error: source 'nvidia-ml': http://no-such-host.invalid/nvidia/InRelease: the host name does not resolve: "),
        "{err}"
    );
    assert_eq!(
        lines[0].matches("http://no-such-host.invalid").count(),
        1,
        "{err}"
    );
    assert_eq!(
        lines[1],
        "  hint: the upstream cannot be reached from here: use a mirror with --source nvidia-ml=URL, or work offline from a snapshot with --source-dir DIR (made by `debforge fetch --to DIR` where it can be reached)"
    );

    // `--locked` with no lock: said before the network.
    let (code, _, err) = run(lab
        .cmd("build")
        .arg("--locked")
        .arg("--source")
        .arg("nvidia-ml=http://no-such-host.invalid/nvidia/"));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("debforge.lock does not exist: run `debforge lock` first"),
        "{err}"
    );

    // verify on a directory that is not a repository.
    let (code, _, err) = run(debforge().arg("verify").arg(lab.dir.path()));
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        err,
        format!(
            "debforge: error: {}: not a repository (no dists/<suite>/Release or InRelease)\n  hint: name a repository's top directory (the one holding dists/ and pool/), e.g. `debforge verify repo-out` after `debforge build`\n",
            lab.dir.path().display()
        )
    );

    // Dates apt would refuse.
    let out = lab.dir.path().join("repo-out");
    let future = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 86_400)
        .to_string();
    let (code, _, err) = run(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .env("SOURCE_DATE_EPOCH", &future));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("in the future: apt refuses it as not valid yet"),
        "{err}"
    );
    let repo = lab.recipes.join("repository.toml");
    let text = fs::read_to_string(&repo).unwrap_or_default();
    let text = if text.contains("[repository]") {
        text.replace("[repository]\n", "[repository]\nvalid-for-days = 7\n")
    } else {
        "[repository]\nvalid-for-days = 7\n".to_string()
    };
    fs::write(&repo, text).unwrap();
    let (code, _, err) = run(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .env("SOURCE_DATE_EPOCH", "1556000000"));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("give a Release valid until Tue, 30 Apr 2019 06:13:20 UTC, already past: apt refuses it as expired"),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn the_example_mirror_is_named_and_mirror_sets_the_real_one() {
    let lab = Lab::new();
    let repo = lab.recipes.join("repository.toml");
    let text = fs::read_to_string(&repo).unwrap_or_else(|_| "[repository]\n".into());
    fs::write(
        &repo,
        text.replace(
            "[repository]\n",
            "[repository]\nmirror = \"http://mirror.gpu-lab.example/debforge/\"\n",
        ),
    )
    .unwrap();
    let out = lab.dir.path().join("repo-out");
    let (code, _, err) = run(lab.cmd("build").arg("--out").arg(&out));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!(
            "debforge: warning: the repo-config package points lab machines at http://mirror.gpu-lab.example/debforge/, the example host in {}: set `mirror` there, or pass --mirror URL",
            repo.display()
        )),
        "{err}"
    );
    let (code, _, err) = run(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .args(["--mirror", "http://apt.lab.internal/gpu"]));
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("example host"), "{err}");
    let (code, _, err) = run(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .args(["--mirror", "ftp://x"]));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(
            "--mirror \"ftp://x\": \"ftp://x\" must be an http://, https:// or file:/ URL"
        ),
        "{err}"
    );
}

/// `verify` on a repository whose signatures are dated in the future says
/// "not valid yet", not that the file was altered.
#[test]
fn verify_says_not_valid_yet_for_a_future_signature() {
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    let key = crate::support::standin::TestKey::shared();
    let release = out.join("dists/bionic/Release");
    let gpg = crate::support::standin::gpg_lock();
    for (args, to) in [
        (vec!["--armor", "--detach-sign"], "Release.gpg"),
        (vec!["--clearsign"], "InRelease"),
    ] {
        ok(std::process::Command::new("gpg")
            .arg("--homedir")
            .arg(&key.home)
            .args([
                "--batch",
                "--yes",
                "--quiet",
                "--pinentry-mode",
                "loopback",
                "--passphrase",
                "",
            ])
            .args(["--faked-system-time", "20990101T000000!"])
            .args(["--local-user", &key.fingerprint, "--digest-algo", "SHA512"])
            .args(args)
            .arg("--output")
            .arg(out.join("dists/bionic").join(to))
            .arg(&release));
    }
    let _ = std::process::Command::new("gpgconf")
        .arg("--homedir")
        .arg(&key.home)
        .args(["--kill", "gpg-agent"])
        .status();
    drop(gpg);
    let keyring = lab.dir.path().join("upstream.gpg");
    key.binary_keyring(&keyring);
    let (code, stdout, err) = run(debforge()
        .arg("verify")
        .arg(&out)
        .arg("--keyring")
        .arg(&keyring));
    assert_eq!(code, 1, "{stdout}{err}");
    assert!(
        stdout.contains(
            "the signature is dated Thu, 01 Jan 2099 00:00:00 UTC, in the future: not valid yet"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("the file was altered"), "{stdout}");
}
