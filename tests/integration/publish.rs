//! `debforge publish --to DIR`: safe order, incremental, old pool files kept
//! for one publish, and apt happy with the result.

use std::fs;

use crate::support::apt::{Apt, sources};
use crate::support::common::{debforge, ok, run, verify_published};
use crate::support::server::Server;
use crate::support::standin::Lab;

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
    verify_published(&www, &out);

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
    // --keep 1: the output keeps no earlier generation's files, so the
    // package leaves the mirror once no Release references it.
    ok(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .args(["--keep", "1"]));
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
    verify_published(&www, &out);
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
    let sources = sources(&server.url(""), &out.join("debforge-archive-keyring.gpg"));
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

#[test]
fn a_killed_publish_leaves_the_previous_repository_in_force() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    let www = lab.dir.path().join("www-mirror");
    ok(lab.cmd("build").arg("--out").arg(&out));
    ok(debforge()
        .arg("publish")
        .arg("--to")
        .arg(&www)
        .arg("--out")
        .arg(&out));
    let old_inrelease = fs::read(www.join("dists/bionic/InRelease")).unwrap();

    // A new build, made slow to publish by many incompressible pool files.
    fs::remove_file(lab.recipes.join("packages/libcudnn7-doc.toml")).unwrap();
    // --keep 1: the output keeps no earlier generation's files, so the
    // package leaves the mirror once no Release references it.
    ok(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .args(["--keep", "1"]));
    let filler = out.join("pool/main/z/filler");
    fs::create_dir_all(&filler).unwrap();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..60 {
        let data: Vec<u8> = (0..1_000_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        fs::write(filler.join(format!("filler-{i:02}.bin")), data).unwrap();
    }

    let mut child = debforge()
        .arg("publish")
        .arg("--to")
        .arg(&www)
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut pool_lines = 0;
    for line in lines.by_ref() {
        if line.unwrap().starts_with("copied      pool/") {
            pool_lines += 1;
            if pool_lines == 3 {
                break;
            }
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(pool_lines, 3);

    // The mirror still serves the previous repository, whole and consistent.
    assert_eq!(
        fs::read(www.join("dists/bionic/InRelease")).unwrap(),
        old_inrelease
    );
    verify_published(&www, &out);
    let server = Server::start(www.clone());
    let sources = sources(&server.url(""), &out.join("debforge-archive-keyring.gpg"));
    let pref = fs::read_to_string(out.join("debforge.pref")).unwrap();
    let apt = Apt::new(&sources, &pref);
    let (code, problems) = apt.update();
    assert_eq!((code, problems.clone()), (0, vec![]), "{problems:?}");
    assert_eq!(
        apt.candidate("libcudnn7-doc"),
        "7.5.0.56-1+cuda10.1",
        "the old repository"
    );

    // The next publish completes the new one and clears the leftovers.
    ok(debforge()
        .arg("publish")
        .arg("--to")
        .arg(&www)
        .arg("--out")
        .arg(&out));
    assert_eq!(
        fs::read(www.join("dists/bionic/InRelease")).unwrap(),
        fs::read(out.join("dists/bionic/InRelease")).unwrap()
    );
    verify_published(&www, &out);
    let mut leftovers = Vec::new();
    let mut stack = vec![www.clone()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else if name.ends_with(".debforge-part") || name.starts_with(".debforge-probe") {
                leftovers.push(e.path());
            }
        }
    }
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let apt = Apt::new(&sources, &pref);
    let (code, problems) = apt.update();
    assert_eq!((code, problems.clone()), (0, vec![]), "{problems:?}");
    assert_eq!(
        apt.candidate("libcudnn7-doc"),
        "",
        "the new repository has no doc package"
    );
}
