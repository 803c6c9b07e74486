//! Hostile input, third round: configuration values that would land in
//! apt's or dpkg's files unescaped are refused where they are read, naming
//! the file and the key; and a package is what vouched for it (the signed
//! index stanza, or the recipe), else nothing of it is built.

use std::fs;

use crate::support::common::run;
use crate::support::standin::{FakeDeb, Lab, TestKey, build_deb, write_packages, write_release};

/// `debforge build` must fail with exit 2, print `message` in its error, and
/// leave no output.
fn refused(lab: &Lab, message: &str) {
    let out = lab.dir.path().join("repo-out");
    let (code, stdout, err) = run(lab.cmd("build").arg("--out").arg(&out));
    assert_eq!(code, 2, "{stdout}{err}");
    assert!(err.contains(message), "{message}:\n{err}");
    assert!(!out.exists(), "an output was written");
}

fn with_metapackage(lab: &Lab, edit: impl Fn(String) -> String) {
    lab.add_small_metapackage();
    let meta = lab.recipes.join("packages/gpu-stack-cu101.toml");
    let text = fs::read_to_string(&meta).unwrap();
    fs::write(&meta, edit(text)).unwrap();
}

#[test]
fn values_that_would_add_lines_to_apt_or_dpkg_files_are_refused_where_read() {
    let repo = |lab: &Lab, line: &str| {
        fs::write(
            lab.recipes.join("repository.toml"),
            format!("[repository]\n{line}\nmirror = \"http://mirror.lab/x/\"\n"),
        )
        .unwrap();
    };
    // The issue's reproduction: an extra pin record for origin "Evil".
    let lab = Lab::new();
    repo(
        &lab,
        r#"origin = "RT\nPin-Priority: 1001\n\nPackage: *\nPin: release o=Evil\nPin-Priority: 1001\nExplanation: x""#,
    );
    refused(
        &lab,
        "recipes/repository.toml:2: repository.origin \"RT\\nPin-Priority: 1001\\n\\nPackage: *\\nPin: release o=Evil\\nPin-Priority: 1001\\nExplanation: x\" holds the control character '\\n': a value here is one line of text",
    );
    for (line, message) in [
        (
            r#"label = "gpu-lab\r""#,
            "repository.label \"gpu-lab\\r\" holds the control character '\\r'",
        ),
        (
            r#"label = "lab*""#,
            "repository.label \"lab*\" holds '*', which apt's `Pin: release o=…,l=…` reads as syntax",
        ),
        (
            r#"origin = "GPU lab,l=x""#,
            "repository.origin \"GPU lab,l=x\" holds ','",
        ),
        (
            r#"description = "x\nSuite: evil""#,
            "repository.description \"x\\nSuite: evil\" holds the control character '\\n'",
        ),
        (
            r#"suite = "bionic\nevil""#,
            "repository.suite \"bionic\\nevil\" must be one word",
        ),
        (
            r#"codename = "../x""#,
            "repository.codename \"../x\" must be one word",
        ),
        (
            r#"component = "..""#,
            "repository.component \"..\" must be one word",
        ),
        (r#"suite = ".""#, "repository.suite \".\" must be one word"),
    ] {
        let lab = Lab::new();
        repo(&lab, line);
        refused(&lab, message);
    }
    // --mirror, and mirror in the file.
    let lab = Lab::new();
    repo(&lab, r#"suite = "bionic""#);
    let out = lab.dir.path().join("repo-out");
    let (code, _, err) = run(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .args(["--mirror", "http://x/\nTypes: deb"]));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("holds a space or a control character"),
        "{err}"
    );

    // A built package's control file and data.
    for (edit, message) in [
        (
            (
                "maintainer = \"GPU lab administrators <gpu-lab@example.org>\"",
                "maintainer = \"x <x@x>\\nPre-Depends: evil\"",
            ),
            "build.maintainer \"x <x@x>\\nPre-Depends: evil\" holds the control character '\\n'",
        ),
        (
            ("section = \"metapackages\"", "section = \"admin\\rx\""),
            "build.section \"admin\\rx\" holds the control character '\\r'",
        ),
        (
            (
                "description = \"\"\"\n",
                "description = \"\"\"\n\nPackage: evil\n",
            ),
            "build.description: line 1 is blank, which would end the control paragraph",
        ),
        (
            (
                "{ path = \"/usr/bin/gpu-stack-check\"",
                "{ path = \"/DEBIAN/postinst\"",
            ),
            "build.files: path \"/DEBIAN/postinst\" is under /DEBIAN, where a package's control files and maintainer scripts live",
        ),
        (
            (
                "{ path = \"/usr/bin/gpu-stack-check\"",
                "{ path = \"/etc/x\\n/etc/passwd\"",
            ),
            "build.files: path \"/etc/x\\n/etc/passwd\" holds the control character '\\n'",
        ),
    ] {
        let lab = Lab::new();
        with_metapackage(&lab, |t| {
            assert!(t.contains(edit.0), "{}: {t}", edit.0);
            t.replacen(edit.0, edit.1, 1)
        });
        refused(&lab, message);
    }

    // A repack's vars land inside a script's double quotes.
    let lab = Lab::new();
    let recipe = lab.recipes.join("packages/libnccl2.toml");
    let text = fs::read_to_string(&recipe).unwrap();
    fs::create_dir_all(lab.recipes.join("scripts")).unwrap();
    fs::write(lab.recipes.join("scripts/p"), "#!/bin/sh\nX=\"@X@\"\n").unwrap();
    fs::write(
        &recipe,
        text.replace("action = \"keep\"\n", "action = \"repack\"\n")
            + "[repack]\npostinst = \"scripts/p\"\nvars = { X = \"\\\"; rm -rf /; \\\"\" }\n",
    )
    .unwrap();
    refused(
        &lab,
        "repack.vars: value of \"X\" \"\\\"; rm -rf /; \\\"\" holds '\"', which the shell would read inside the script's double quotes",
    );
}

/// The issue's reproduction: NVIDIA's signed index lists `libnccl2
/// 2.4.2-1+cuda10.1` with the right size and digests for a file whose
/// control says `Package: evilpkg`, `Version: 6.6`. `lock` and `build`
/// refuse it, naming both, and write nothing.
#[test]
fn a_file_that_is_another_package_than_its_signed_index_says_is_refused() {
    let lab = Lab::with(|root, work| {
        let repo = root.join("nvidia");
        let evil = FakeDeb {
            name: "evilpkg",
            version: "6.6",
            depends: "",
            other: "",
            files: vec![("usr/bin/evil".into(), b"#!/bin/sh\n".to_vec())],
            links: vec![],
            scripts: vec![],
        };
        let name = build_deb(&evil, "amd64", work, work);
        fs::rename(
            work.join(name),
            repo.join("libnccl2_2.4.2-1+cuda10.1_amd64.deb"),
        )
        .unwrap();
        // The stanza apt-ftparchive writes for it, renamed: what a hostile
        // (or broken) upstream signs.
        write_packages(&repo, ".", &repo.join("Packages"), false);
        let index = fs::read_to_string(repo.join("Packages")).unwrap();
        let index = index
            .replace("Package: evilpkg\n", "Package: libnccl2\n")
            .replace("Version: 6.6\n", "Version: 2.4.2-1+cuda10.1\n");
        fs::write(repo.join("Packages"), index).unwrap();
        for f in ["Packages.xz", "Packages.gz", "Release", "Release.gpg"] {
            let _ = fs::remove_file(repo.join(f));
        }
        let release = write_release(
            &repo,
            &[
                ("Origin", "NVIDIA"),
                ("Label", "NVIDIA CUDA"),
                ("Architecture", "x86_64"),
            ],
        );
        TestKey::shared().sign_detached(&release);
    });
    let message = "debforge: error: libnccl2: ";
    let tail = "libnccl2_2.4.2-1+cuda10.1_amd64.deb is not the package source nvidia-ml's signed index vouched for: its control says Package \"evilpkg\", source nvidia-ml's signed index says \"libnccl2\"\n  hint: do not use this file: the upstream's signed index lists it under another name or version (a broken or tampered upstream); nothing of it went into the pool\n";
    let (code, _, err) = run(&mut lab.cmd("lock"));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(message) && err.ends_with(tail), "{err}");
    assert!(
        !lab.recipes.join("debforge.lock").exists(),
        "no lock written"
    );
    let out = lab.dir.path().join("repo-out");
    let (code, _, err) = run(lab.cmd("build").arg("--out").arg(&out));
    assert_eq!(code, 2, "{err}");
    assert!(err.ends_with(tail), "{err}");
    assert!(!out.exists());
}

/// An InRelease with unsigned text after its signature, or a second signed
/// message, is refused naming the shape, as apt and gpgv refuse it (only
/// the signed part would have been used).
#[test]
fn an_inrelease_with_text_outside_its_signature_is_refused() {
    for (what, edit, needle) in [
        (
            "text after",
            Box::new(|t: String| format!("{t}Origin: evil\n")) as Box<dyn Fn(String) -> String>,
            "text after the signature; apt and gpgv refuse unsigned text outside the signature",
        ),
        (
            "text before",
            Box::new(|t: String| format!("Origin: evil\n\n{t}")),
            "line 1: text before the signed message",
        ),
        (
            "two messages",
            Box::new(|t: String| format!("{t}{t}")),
            "a second signed message; an InRelease holds exactly one",
        ),
    ] {
        let lab = Lab::with(move |www, _| {
            let p = www.join("ubuntu/dists/bionic-updates/InRelease");
            let text = fs::read_to_string(&p).unwrap();
            fs::write(&p, edit(text)).unwrap();
        });
        let (code, _, err) = run(&mut lab.cmd("lock"));
        assert_eq!(code, 2, "{what}: {err}");
        assert!(err.contains(needle), "{what}: {needle:?} not in {err}");
    }
}

/// A direct download whose URL ends in `..` (or nothing) is refused where
/// the recipe is read: its last segment would name the file in the cache.
#[test]
fn a_url_that_names_no_file_is_refused_before_any_download() {
    for tail in ["..", "", "x.deb?a=b"] {
        let lab = Lab::new();
        let url = lab.server.url(&format!("nvidia/{tail}"));
        std::fs::write(
            lab.recipes.join("packages/direct.toml"),
            format!("name = \"direct\"\nversion = \"1.0\"\narchitecture = \"all\"\nfrom = {{ url = \"{url}\", sha256 = \"{}\", size = 1 }}\n", "0".repeat(64)),
        )
        .unwrap();
        let (code, _, err) = run(&mut lab.cmd("fetch"));
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains(&format!("direct.toml:4: from.url {url:?} must end in a file name such as x_1.0_all.deb (letters, digits and ._+~-), not {tail:?}")),
            "{err}"
        );
        assert!(!lab.cache.join("debs").exists(), "nothing fetched");
    }
}

/// A server whose file is shorter than what vouched for it: the first
/// transfer ends short, the resumed one is refused with HTTP 416, and the
/// error says the file is short (not "run the command again later").
#[test]
fn a_file_shorter_than_vouched_for_is_named_as_such() {
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    crate::support::common::ok(lab.cmd("build").arg("--out").arg(&out));
    let port = crate::publish_remote::free_port();
    let _server = crate::stack::Serve::start(&out, port);
    let rel = "pool/main/libn/libnccl2/libnccl2_2.4.2-1+cuda10.1_amd64.deb";
    let size = std::fs::metadata(out.join(rel)).unwrap().len();
    let url = format!("http://127.0.0.1:{port}/{rel}");
    for p in std::fs::read_dir(lab.recipes.join("packages")).unwrap() {
        std::fs::remove_file(p.unwrap().path()).unwrap();
    }
    std::fs::write(
        lab.recipes.join("packages/libnccl2.toml"),
        format!("name = \"libnccl2\"\nversion = \"2.4.2-1+cuda10.1\"\narchitecture = \"amd64\"\nfrom = {{ url = \"{url}\", sha256 = \"{}\", size = {} }}\n", "0".repeat(64), size + 100),
    )
    .unwrap();
    let (code, _, err) = run(&mut lab.cmd("fetch"));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!("{url}: the server's file ends before the {} bytes the index announces: it refused the bytes after the {size} already fetched (HTTP 416)\n", size + 100))
            && err.contains("hint: nothing unverified was kept: the upstream's file is not the one its signed index (or the lock) vouches for"),
        "{err}"
    );
    assert!(lab.unverified_in_cache().is_empty());
}
