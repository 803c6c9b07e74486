//! `debforge publish --to DIR`: safe order, incremental, old pool files kept
//! for one publish, and apt happy with the result.

use std::fs;

use crate::apt::Apt;
use crate::common::{debforge, ok, run};
use crate::server::Server;
use crate::standin::Lab;

#[test]
fn publish_to_a_directory_incrementally_and_safely() {
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    let www = lab.dir.path().join("www-mirror");
    ok(lab.cmd("build").arg("--out").arg(&out));

    // A dry run changes nothing.
    let dry = ok(debforge()
        .arg("publish")
        .arg("--to")
        .arg(&www)
        .arg("--out")
        .arg(&out)
        .arg("--dry-run"));
    assert!(
        dry.contains("would copy  dists/bionic/InRelease")
            && dry.contains("dry run, nothing changed"),
        "{dry}"
    );
    assert!(!www.exists());

    let first = ok(debforge()
        .arg("publish")
        .arg("--to")
        .arg(&www)
        .arg("--out")
        .arg(&out)
        .arg("--json"));
    let first: serde_json::Value = serde_json::from_str(&first).unwrap();
    let steps: Vec<String> = first["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s[1].as_str().unwrap().to_string())
        .collect();
    // Pool first, InRelease last.
    assert!(steps.first().unwrap().starts_with("pool/"), "{steps:?}");
    assert_eq!(steps.last().unwrap(), "dists/bionic/InRelease");
    let pos = |f: &str| steps.iter().position(|s| s == f).unwrap();
    assert!(pos("dists/bionic/main/binary-amd64/Packages.xz") < pos("dists/bionic/Release"));
    assert!(pos("dists/bionic/Release") < pos("dists/bionic/Release.gpg"));
    ok(debforge()
        .arg("verify")
        .arg(&www)
        .arg("--keyring")
        .arg(out.join("debforge-archive-keyring.gpg")));

    // Nothing changed: nothing rewritten.
    let again = ok(debforge()
        .arg("publish")
        .arg("--to")
        .arg(&www)
        .arg("--out")
        .arg(&out));
    assert!(
        again.contains(": 0 copied,") && again.contains("0 removed"),
        "{again}"
    );

    // A package leaves the recipes: its pool file stays while the previous
    // Release (still cached by clients) references it, and goes next time.
    fs::remove_file(lab.recipes.join("packages/libcudnn7-doc.toml")).unwrap();
    ok(lab.cmd("build").arg("--out").arg(&out));
    let doc = www.join("pool/main/libc/libcudnn7-doc/libcudnn7-doc_7.5.0.56-1+cuda10.1_amd64.deb");
    let second = ok(debforge()
        .arg("publish")
        .arg("--to")
        .arg(&www)
        .arg("--out")
        .arg(&out));
    assert!(doc.exists(), "kept for clients of the previous Release");
    assert!(
        !second.contains("copied      pool/"),
        "unchanged packages are not copied again:\n{second}"
    );
    ok(debforge()
        .arg("verify")
        .arg(&www)
        .arg("--keyring")
        .arg(out.join("debforge-archive-keyring.gpg")));
    let third = ok(debforge()
        .arg("publish")
        .arg("--to")
        .arg(&www)
        .arg("--out")
        .arg(&out));
    assert!(!doc.exists(), "{third}");
    assert!(
        third.contains("removed     pool/main/libc/libcudnn7-doc/"),
        "{third}"
    );

    // The real apt, served from the published directory.
    let server = Server::start(www.clone());
    let sources = format!(
        "Types: deb\nURIs: {}\nSuites: bionic\nComponents: main\nSigned-By: {}\n",
        server.url(""),
        out.join("debforge-archive-keyring.gpg").display()
    );
    let apt = Apt::new(
        &sources,
        &fs::read_to_string(out.join("debforge.pref")).unwrap(),
    );
    let (code, problems) = apt.update();
    assert_eq!((code, problems.clone()), (0, vec![]), "{problems:?}");
    assert_eq!(apt.candidate("libcudnn7"), "7.5.0.56-1+cuda10.1");
}

#[test]
fn publish_errors_are_clear() {
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    // Not built yet.
    let (code, _, err) = run(debforge()
        .arg("publish")
        .arg("--to")
        .arg(lab.dir.path().join("t"))
        .arg("--out")
        .arg(&out));
    assert_eq!(code, 2);
    assert!(
        err.contains("not a built repository") && err.contains("debforge build"),
        "{err}"
    );
    ok(lab.cmd("build").arg("--out").arg(&out));
    // A target that cannot be written (a file stands where its directory would be).
    let blocker = lab.dir.path().join("blocker");
    fs::write(&blocker, "x").unwrap();
    let (code, _, err) = run(debforge()
        .arg("publish")
        .arg("--to")
        .arg(blocker.join("www"))
        .arg("--out")
        .arg(&out));
    assert_eq!(code, 2);
    assert!(err.contains("the target is not writable"), "{err}");
    let (code, _, err) = run(debforge()
        .arg("publish")
        .args(["--to", "ftp://mirror/prefix"])
        .arg("--out")
        .arg(&out));
    assert_eq!(code, 2);
    assert!(
        err.contains("unknown scheme") && err.contains("s3://BUCKET/PREFIX"),
        "{err}"
    );
}
