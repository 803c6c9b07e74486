//! `debforge lock`, `fetch` and `build` against stand-in upstreams on
//! loopback: the trust chain, the lock file, the cache, air-gapped
//! snapshots, and every way a download or a signature can go wrong.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::support::common::{ok, run};
use crate::support::server::Fault;
use crate::support::standin::{Lab, TestKey, write_release};

const CUDNN: &str = "libcudnn7_7.5.0.56-1+cuda10.1_amd64.deb";

fn sha256_of(path: &Path) -> String {
    let out = ok(std::process::Command::new("sha256sum").arg(path));
    out.split_whitespace().next().unwrap().to_string()
}

fn lock_text(lab: &Lab) -> String {
    fs::read_to_string(lab.recipes.join("debforge.lock")).unwrap()
}

/// (exit code, stderr) of a command that must fail.
fn fails(cmd: &mut std::process::Command) -> (i32, String) {
    let (code, out, err) = run(cmd);
    assert_ne!(code, 0, "expected a failure, got:\n{out}{err}");
    (code, err)
}

#[test]
fn lock_then_build_verifies_the_whole_chain() {
    let lab = Lab::new();
    let out = ok(&mut lab.cmd("lock"));
    assert!(out.contains("locked 7 packages"), "{out}");
    let lock = lock_text(&lab);
    // The exact versions, never the newer 7.6.5 that the same repo offers.
    assert!(lock.contains("version = \"7.5.0.56-1+cuda10.1\""), "{lock}");
    assert!(!lock.contains("7.6.5.32"), "{lock}");
    let served = lab.www().join("nvidia").join(CUDNN);
    assert!(
        lock.contains(&format!("sha256 = \"{}\"", sha256_of(&served))),
        "{lock}"
    );
    assert!(lock.contains("index = \"Packages.xz\""), "{lock}");
    assert!(
        lock.contains("path = \"pool/main/c/c-ares/libc-ares2_1.14.0-1ubuntu0.2_amd64.deb\""),
        "{lock}"
    );
    assert!(lock.contains("sha512 = \""), "{lock}");

    let out_dir = lab.dir.path().join("repo-out");
    let out = ok(lab.cmd("build").arg("--locked").arg("--out").arg(&out_dir));
    assert!(out.contains("wrote 7 packages"), "{out}");
    let pooled = out_dir.join("pool/main/libc/libcudnn7").join(CUDNN);
    assert_eq!(sha256_of(&pooled), sha256_of(&served));
    assert!(
        out_dir
            .join("pool/main/libc/libc-ares2/libc-ares2_1.14.0-1ubuntu0.2_amd64.deb")
            .exists()
    );
    assert!(lab.unverified_in_cache().is_empty());
}

#[test]
fn a_second_run_downloads_nothing() {
    let lab = Lab::new();
    ok(&mut lab.cmd("fetch"));
    lab.server.clear_log();
    let (code, _, err) = run(&mut lab.cmd("fetch"));
    assert_eq!(code, 0, "{err}");
    let debs: Vec<_> = lab
        .server
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with(".deb"))
        .collect();
    assert!(debs.is_empty(), "downloaded again: {debs:?}");
    assert!(err.contains(&format!("cached  {CUDNN}")), "{err}");
}

#[test]
fn locked_refuses_an_upstream_that_changed() {
    let lab = Lab::new();
    ok(&mut lab.cmd("lock"));
    let before = lock_text(&lab);
    // Upstream rebuilds libnccl2 with other bytes and re-signs its index.
    let repo = lab.www().join("nvidia");
    let mut nccl =
        crate::support::standin::nvidia_debs("7.5.0.56-1+cuda10.1", "2.4.2-1+cuda10.1").remove(3);
    nccl.files[0].1 = b"\x7fELF rebuilt libnccl, other bytes\n".to_vec();
    crate::support::standin::build_deb(&nccl, "amd64", &repo, &lab.dir.path().join("rebuild"));
    crate::support::standin::write_packages(&repo, ".", &repo.join("Packages"), true);
    let release = write_release(&repo, &[("Origin", "NVIDIA")]);
    TestKey::shared().sign_detached(&release);

    let (code, err) = fails(
        lab.cmd("build")
            .arg("--locked")
            .arg("--out")
            .arg(lab.dir.path().join("out")),
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("does not match what the recipes resolve to"),
        "{err}"
    );
    assert!(err.contains("libnccl2 (amd64): size"), "{err}");
    assert!(err.contains("run `debforge lock`"), "{err}");
    assert_eq!(lock_text(&lab), before, "--locked never rewrites the lock");
    assert!(!lab.dir.path().join("out").exists());
}

#[test]
fn locked_without_a_lock_file_is_an_error() {
    let lab = Lab::new();
    let (code, err) = fails(lab.cmd("fetch").arg("--locked"));
    assert_eq!(code, 2);
    assert!(err.contains("run `debforge lock` first"), "{err}");
}

#[test]
fn air_gapped_from_a_snapshot_and_from_a_plain_directory() {
    let lab = Lab::new();
    let snap = lab.dir.path().join("usb/snapshot");
    ok(lab.cmd("fetch").arg("--to").arg(&snap));
    assert!(snap.join("nvidia-ml/Release").exists() && snap.join("nvidia-ml/Release.gpg").exists());
    assert!(
        snap.join("ubuntu-bionic-updates/dists/bionic-updates/InRelease")
            .exists()
    );
    assert!(snap.join("nvidia-ml/Packages.xz").exists());
    assert!(snap.join("nvidia-ml").join(CUDNN).exists());
    assert!(snap.join("debforge.lock").exists());

    // The offline machine: a fresh cache, and no server at all.
    let Lab {
        dir,
        server,
        recipes,
        ..
    } = lab;
    drop(server);
    let offline = |source_dir: &Path, cache: &str| {
        let out = dir.path().join(format!("out-{cache}"));
        let mut c = crate::support::common::debforge();
        c.arg("build")
            .arg("--recipes")
            .arg(&recipes)
            .arg("--cache")
            .arg(dir.path().join(cache));
        c.arg("--keys").arg(recipes.parent().unwrap().join("keys"));
        c.arg("--locked")
            .arg("--source-dir")
            .arg(source_dir)
            .arg("--out")
            .arg(&out);
        (run(&mut c), out)
    };
    let ((code, stdout, err), out) = offline(&snap, "offline-cache");
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("wrote 7 packages"), "{stdout}");
    assert!(
        out.join("pool/main/libn/libnccl2/libnccl2_2.4.2-1+cuda10.1_amd64.deb")
            .exists()
    );

    // A plain directory of .deb files works when the lock has their hashes.
    let plain = dir.path().join("plain");
    fs::create_dir_all(&plain).unwrap();
    for e in fs::read_dir(snap.join("nvidia-ml"))
        .unwrap()
        .chain(fs::read_dir(snap.join("ubuntu-bionic-updates/pool/main/c/c-ares")).unwrap())
    {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "deb") {
            fs::copy(&p, plain.join(p.file_name().unwrap())).unwrap();
        }
    }
    let ((code, _, err), _) = offline(&plain, "plain-cache");
    assert_eq!(code, 0, "{err}");

    // A tampered deb in the plain directory is caught by the lock's hash.
    let bad = plain.join(CUDNN);
    let mut bytes = fs::read(&bad).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    fs::write(&bad, bytes).unwrap();
    let ((code, _, err), _) = offline(&plain, "tampered-cache");
    assert_eq!(code, 2);
    assert!(err.contains("SHA256 mismatch: expected"), "{err}");
    // It says what happened: nothing entered the cache, and the snapshot's
    // file is still there (it was never "removed").
    assert!(err.contains("nothing was written to the cache"), "{err}");
    assert!(!err.contains("removed"), "{err}");
    assert!(bad.exists());

    // With a warm cache the verified copy is used, and the output says so.
    let ((code, _, err), _) = offline(&plain, "plain-cache");
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!(
            "cached  {CUDNN} (verified earlier; its source was not read again)"
        )),
        "{err}"
    );
    // With a cold cache it names the copy it read.
    let ((code, _, err), _) = offline(&snap, "cold-cache");
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!(
            "copied  {CUDNN} from {}",
            snap.join("nvidia-ml").join(CUDNN).display()
        )),
        "{err}"
    );

    // A snapshot missing its signed InRelease is named as such, not as a
    // missing deb.
    let inrelease = snap.join("ubuntu-bionic-updates/dists/bionic-updates/InRelease");
    let mode = fs::metadata(&inrelease).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644, "snapshot files are readable by all");
    let lock_mode = fs::metadata(snap.join("debforge.lock"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(lock_mode, 0o644);
    fs::remove_file(&inrelease).unwrap();
    let ((code, _, err), _) = offline(&snap, "broken-cache");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("the snapshot of source 'ubuntu-bionic-updates' has no dists/bionic-updates/InRelease (nor Release): it is incomplete"),
        "{err}"
    );
}

#[test]
fn an_interrupted_download_resumes_with_range() {
    let lab = Lab::new();
    lab.server
        .fault(&format!("nvidia/{CUDNN}"), Fault::DropAfter(100));
    let (code, _, err) = run(&mut lab.cmd("fetch"));
    assert_eq!(code, 0, "{err}");
    let ranged: Vec<_> = lab
        .server
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with(CUDNN) && r.range.is_some())
        .collect();
    assert_eq!(ranged.len(), 1, "{:?}", lab.server.requests());
    assert_eq!(ranged[0].range.as_deref(), Some("bytes=100-"));
    assert!(err.contains(&format!("retrying {CUDNN}")), "{err}");
    assert!(lab.cached_debs().contains(&CUDNN.to_string()));
}

#[test]
fn transient_server_errors_are_retried() {
    let lab = Lab::new();
    lab.server
        .fault(&format!("nvidia/{CUDNN}"), Fault::StatusTimes(503, 2));
    let (code, _, err) = run(&mut lab.cmd("fetch"));
    assert_eq!(code, 0, "{err}");
    assert_eq!(err.matches("HTTP 503").count(), 2, "{err}");
}

/// Each failure: exit 2, a message saying what and where, and no
/// unverified file in the cache.
#[test]
fn download_failures_fail_clearly_and_keep_nothing_unverified() {
    type Setup = fn(&Lab);
    let cases: Vec<(&str, Setup, Vec<&str>)> = vec![
        (
            "hash mismatch",
            |lab| {
                // Same size, other bytes: only the hash can tell.
                let p = lab.www().join("nvidia").join(CUDNN);
                let mut b = fs::read(&p).unwrap();
                let last = b.len() - 1;
                b[last] ^= 0xff;
                fs::write(&p, b).unwrap();
            },
            vec![
                "SHA256 mismatch: expected",
                "found",
                "nothing was written to the cache",
                "/nvidia/libcudnn7_7.5.0.56-1+cuda10.1_amd64.deb",
            ],
        ),
        (
            "more bytes than announced",
            |lab| {
                let p = lab.www().join("nvidia").join(CUDNN);
                let mut b = fs::read(&p).unwrap();
                b.extend_from_slice(&[0u8; 4096]);
                fs::write(&p, b).unwrap();
            },
            vec!["sent more than the", "bytes the index announces", CUDNN],
        ),
        (
            "404",
            |lab| {
                lab.server
                    .fault(&format!("nvidia/{CUDNN}"), Fault::Status(404))
            },
            vec!["HTTP 404", CUDNN],
        ),
        (
            "500 every time",
            |lab| {
                lab.server
                    .fault(&format!("nvidia/{CUDNN}"), Fault::Status(500))
            },
            vec!["HTTP 500", CUDNN],
        ),
        (
            "stall",
            |lab| {
                lab.server
                    .fault(&format!("nvidia/{CUDNN}"), Fault::Stall(10))
            },
            vec!["stalled", CUDNN],
        ),
    ];
    for (what, setup, needles) in cases {
        let lab = Lab::new();
        setup(&lab);
        let (code, err) = fails(lab.cmd("fetch").args(["--retries", "1"]));
        assert_eq!(code, 2, "{what}: {err}");
        for n in needles {
            assert!(err.contains(n), "{what}: missing {n:?} in:\n{err}");
        }
        assert!(
            lab.unverified_in_cache().is_empty(),
            "{what}: {:?}",
            lab.unverified_in_cache()
        );
        assert!(
            !lab.cached_debs().contains(&CUDNN.to_string()),
            "{what}: kept the bad file"
        );
    }
}

#[test]
fn connection_refused_is_a_clear_error() {
    let lab = Lab::new();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let (code, err) = fails(
        lab.cmd("fetch")
            .args(["--retries", "0", "--source"])
            .arg(format!("nvidia-ml=http://127.0.0.1:{port}/nvidia/")),
    );
    assert_eq!(code, 2);
    assert!(err.contains("cannot connect"), "{err}");
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
}

/// Each broken link of the trust chain: exit 2 and a message naming it.
#[test]
fn trust_chain_failures() {
    type Tweak = fn(&Path, &Path);
    let cases: Vec<(&str, Tweak, &str)> = vec![
        (
            "Release altered after signing",
            |www, _| {
                let r = www.join("nvidia/Release");
                let t = fs::read_to_string(&r)
                    .unwrap()
                    .replace("Origin: NVIDIA", "Origin: NVIDlA");
                fs::write(r, t).unwrap();
            },
            "bad signature",
        ),
        (
            "no Release.gpg",
            |www, _| fs::remove_file(www.join("nvidia/Release.gpg")).unwrap(),
            "has no signature",
        ),
        (
            "signed by another key",
            |www, _| TestKey::other().sign_detached(&www.join("nvidia/Release")),
            "not the pinned one",
        ),
        (
            "InRelease signed by another key",
            |www, _| {
                let dist = www.join("ubuntu/dists/bionic-updates");
                let body = fs::read_to_string(dist.join("InRelease")).unwrap();
                let release = debforge::format::clearsign::split(&body).unwrap().body;
                fs::write(dist.join("Release"), release).unwrap();
                TestKey::other().sign_inline(&dist.join("Release"));
                fs::remove_file(dist.join("Release")).unwrap();
            },
            "not the pinned one",
        ),
        (
            "index missing from Release",
            |www, _| {
                let repo = www.join("nvidia");
                for f in ["Packages", "Packages.gz", "Packages.xz"] {
                    fs::rename(repo.join(f), www.join(f)).unwrap();
                }
                let release = write_release(&repo, &[("Origin", "NVIDIA")]);
                TestKey::shared().sign_detached(&release);
            },
            "none of Packages.xz, Packages.gz, Packages is listed in",
        ),
        (
            "MD5 and SHA1 only",
            |www, _| {
                let repo = www.join("nvidia");
                let release = write_release(&repo, &[("Origin", "NVIDIA")]);
                crate::support::standin::edit_release(&release, |p| {
                    p.remove("SHA256");
                    p.remove("SHA512");
                });
                TestKey::shared().sign_detached(&release);
            },
            "no SHA256 or SHA512 checksums",
        ),
        (
            "version not in the index",
            |www, _| {
                // The upstream dropped 7.5.0.56: only 7.6.5.32 is left.
                let repo = www.join("nvidia");
                for e in fs::read_dir(&repo).unwrap() {
                    let p = e.unwrap().path();
                    if p.to_string_lossy().contains("7.5.0.56") {
                        fs::remove_file(p).unwrap();
                    }
                }
                crate::support::standin::write_packages(&repo, ".", &repo.join("Packages"), true);
                let release = write_release(&repo, &[("Origin", "NVIDIA")]);
                TestKey::shared().sign_detached(&release);
            },
            "7.5.0.56-1+cuda10.1 (amd64) is not in",
        ),
        (
            "a Filename that leaves the source's base once decoded",
            |www, _| {
                let repo = www.join("nvidia");
                let index = repo.join("Packages");
                let text = fs::read_to_string(&index).unwrap();
                assert!(text.contains("Filename: ./libcudnn7_7.5.0.56"));
                fs::write(
                    &index,
                    text.replace(
                        "Filename: ./libcudnn7_7.5.0.56",
                        "Filename: %2e%2e/other/libcudnn7_7.5.0.56",
                    ),
                )
                .unwrap();
                for f in ["Packages.gz", "Packages.xz"] {
                    fs::remove_file(repo.join(f)).unwrap();
                }
                let release = write_release(&repo, &[("Origin", "NVIDIA")]);
                TestKey::shared().sign_detached(&release);
            },
            "has an unsafe Filename: \"%2e%2e/other/libcudnn7_7.5.0.56-1+cuda10.1_amd64.deb\" has a `.`, `..` or empty component (after %-decoding)",
        ),
        (
            "a Release dated in the future",
            |www, _| {
                let release = www.join("nvidia/Release");
                crate::support::standin::edit_release(&release, |p| {
                    p.set("Date", "Thu, 01 Jan 2099 00:00:00 UTC");
                });
                TestKey::shared().sign_detached(&release);
            },
            "/nvidia/Release is dated Thu, 01 Jan 2099 00:00:00 UTC, in the future: apt refuses it as not valid yet",
        ),
        (
            "expired Valid-Until on a live source",
            |www, work| {
                crate::support::standin::dists_repo(
                    www,
                    work,
                    TestKey::shared(),
                    Some("Tue, 23 Apr 2019 06:13:20 UTC"),
                )
            },
            "expired on",
        ),
    ];
    for (what, tweak, needle) in cases {
        let lab = Lab::with(tweak);
        let (code, err) = fails(&mut lab.cmd("lock"));
        assert_eq!(code, 2, "{what}: {err}");
        assert!(
            err.contains(needle),
            "{what}: missing {needle:?} in:\n{err}"
        );
        assert!(
            lab.cached_debs().is_empty(),
            "{what}: downloaded debs anyway"
        );
        assert!(
            !lab.recipes.join("debforge.lock").exists(),
            "{what}: wrote a lock"
        );
    }
}

#[test]
fn an_archived_source_may_be_past_valid_until() {
    // nvidia-ml is declared `archive = true` in the stand-in project.
    let lab = Lab::with(|www, _| {
        let repo = www.join("nvidia");
        let release = write_release(&repo, &[("Origin", "NVIDIA")]);
        crate::support::standin::edit_release(&release, |p| {
            p.insert_after("Date", "Valid-Until", "Tue, 23 Apr 2019 06:13:20 UTC")
        });
        TestKey::shared().sign_detached(&release);
    });
    let (code, _, err) = run(&mut lab.cmd("lock"));
    assert_eq!(code, 0, "{err}");
}

#[test]
fn recipe_errors_name_file_line_and_field() {
    let lab = Lab::new();
    let f = lab.recipes.join("packages/libnccl2.toml");
    let text = fs::read_to_string(&f).unwrap();
    fs::write(&f, format!("{text}flavour = \"extra\"\n")).unwrap();
    let (code, err) = fails(&mut lab.cmd("lock"));
    assert_eq!(code, 2);
    assert!(
        err.contains("libnccl2.toml:7: unknown field `flavour`"),
        "{err}"
    );
    fs::write(&f, text.replace("nvidia-ml", "nvidia")).unwrap();
    let (_, err) = fails(&mut lab.cmd("lock"));
    assert!(
        err.contains("libnccl2.toml:4: from.source \"nvidia\" is not in sources.toml"),
        "{err}"
    );
}

#[test]
fn direct_url_and_local_path_recipes() {
    let lab = Lab::new();
    // A direct download trusted through the recipe's own hash, and a local file.
    let served = lab.www().join("nvidia").join(CUDNN);
    let size = fs::metadata(&served).unwrap().len();
    let sha = sha256_of(&served);
    let url = lab.server.url(&format!("nvidia/{CUDNN}"));
    let recipe = |sha: &str| {
        format!(
            "name = \"libcudnn7\"\nversion = \"7.5.0.56-1+cuda10.1\"\narchitecture = \"amd64\"\nfrom = {{ url = \"{url}\", sha256 = \"{sha}\", size = {size} }}\n"
        )
    };
    // The recipes of those packages say where they come from now (a
    // package is what its file says: the recipe is named after it).
    for p in ["libcudnn7", "libnccl-dev"] {
        fs::remove_file(lab.recipes.join(format!("packages/{p}.toml"))).unwrap();
    }
    fs::write(lab.recipes.join("packages/direct.toml"), recipe(&sha)).unwrap();
    fs::create_dir_all(lab.recipes.join("local")).unwrap();
    fs::copy(
        lab.www()
            .join("nvidia/libnccl-dev_2.4.2-1+cuda10.1_amd64.deb"),
        lab.recipes.join("local/x.deb"),
    )
    .unwrap();
    fs::write(
        lab.recipes.join("packages/local.toml"),
        "name = \"libnccl-dev\"\nversion = \"2.4.2-1+cuda10.1\"\narchitecture = \"amd64\"\nfrom = { path = \"local/x.deb\" }\n",
    )
    .unwrap();
    let out = lab.dir.path().join("out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    let lock = lock_text(&lab);
    assert!(
        lock.contains("origin = \"url\"") && lock.contains("origin = \"path\""),
        "{lock}"
    );
    assert!(out.join("pool/main/libc/libcudnn7").join(CUDNN).exists());
    ok(lab.cmd("build").arg("--locked").arg("--out").arg(&out));

    // A wrong hash in the recipe: the download is refused and not kept.
    fs::write(
        lab.recipes.join("packages/direct.toml"),
        recipe(&"0".repeat(64)),
    )
    .unwrap();
    fs::remove_dir_all(&lab.cache).unwrap();
    let (code, err) = fails(lab.cmd("fetch").arg("-j").arg("1"));
    assert_eq!(code, 2);
    assert!(
        err.contains(&format!(
            "SHA256 mismatch: expected {}, found {sha}",
            "0".repeat(64)
        )),
        "{err}"
    );
    assert!(lab.unverified_in_cache().is_empty());
}

#[test]
fn an_unknown_source_override_is_refused() {
    let lab = Lab::new();
    let (code, err) = fails(
        lab.cmd("fetch")
            .args(["--source", "nvidia=http://127.0.0.1:1/"]),
    );
    assert_eq!(code, 2);
    assert!(err.contains("--source nvidia: no such source"), "{err}");
}

#[test]
fn one_good_signature_by_a_pinned_key_is_enough() {
    let lab = Lab::new();
    // A second pinned key the key file does not hold (as the shipped Ubuntu
    // source pins the 2018 key beside the 2012 one that signs bionic).
    let sources = lab.recipes.join("sources.toml");
    let text = fs::read_to_string(&sources).unwrap();
    let fp = TestKey::shared().fingerprint.clone();
    let absent = "F6ECB3762474EDA9D21B7022871920D1991BC93C";
    fs::write(
        &sources,
        text.replace(
            &format!("fingerprint = \"{fp}\""),
            &format!("fingerprint = [\"{absent}\", \"{fp}\"]"),
        ),
    )
    .unwrap();
    let (code, out, err) = run(&mut lab.cmd("lock"));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!(
            "warning: source 'nvidia-ml': the key file keys/upstream.asc does not hold the pinned key {absent}; a signature by another pinned key is still accepted"
        )),
        "{err}"
    );
    assert!(out.contains("locked 7 packages"), "{out}");
    // None of the pinned keys in the file: refused.
    fs::write(&sources, text.replace(&fp, absent)).unwrap();
    let (code, err) = fails(&mut lab.cmd("lock"));
    assert_eq!(code, 2);
    assert!(err.contains("holds none of the pinned keys"), "{err}");
}

/// The pool links the verified cache files instead of copying them; a
/// cache file changed behind debforge's back (through such a link) is
/// caught by its digest on the next build, never published.
#[test]
fn the_pool_links_cached_files_and_catches_a_changed_one() {
    use std::os::unix::fs::MetadataExt;
    let lab = Lab::new();
    let out = lab.dir.path().join("out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    ok(lab.cmd("build").arg("--locked").arg("--out").arg(&out));
    let pooled = out.join("pool/main/libc/libcudnn7").join(CUDNN);
    let lock = lock_text(&lab);
    let cached = fs::read_dir(lab.cache.join("debs"))
        .unwrap()
        .map(|e| e.unwrap().path().join(CUDNN))
        .find(|p| p.exists())
        .unwrap();
    assert!(lock.contains(&sha256_of(&cached)));
    let (a, b) = (
        fs::metadata(&pooled).unwrap(),
        fs::metadata(&cached).unwrap(),
    );
    assert_eq!((a.dev(), a.ino()), (b.dev(), b.ino()), "one copy on disk");
    // The records file (a cache in debforge's own format) answers for
    // every package file in the cache, by its identity, with its SHA256.
    let records = debforge::repo::pool::DigestStore::new(Some(
        lab.cache.join(debforge::repo::pool::RECORDS_FILE),
    ));
    let cached_debs: Vec<PathBuf> = fs::read_dir(lab.cache.join("debs"))
        .unwrap()
        .flat_map(|e| fs::read_dir(e.unwrap().path()).unwrap())
        .map(|e| e.unwrap().path())
        .collect();
    assert!(cached_debs.len() >= 7, "{cached_debs:?}");
    for f in &cached_debs {
        let d = records.recorded(&fs::metadata(f).unwrap());
        assert_eq!(d.map(|d| d.sha256), Some(sha256_of(f)), "{}", f.display());
    }

    // Same size, other bytes, a new time: the record no longer vouches.
    let verified = sha256_of(&cached);
    let mut bytes = fs::read(&pooled).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    fs::write(&pooled, bytes).unwrap();
    let (code, err) = fails(lab.cmd("build").arg("--locked").arg("--out").arg(&out));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!(
            "{CUDNN}: the file changed since it was verified (sha256 {} expected, {} found); build again (a file in debforge's cache: remove it first)",
            verified,
            sha256_of(&pooled)
        )),
        "{err}"
    );
}

/// A build with the same inputs over an output nobody touched writes
/// nothing (the output's files keep their inodes and times); any change to
/// the output, or to an input, makes it build again, and what it builds
/// verifies.
#[test]
fn a_build_with_nothing_changed_writes_nothing_and_a_touched_output_is_rebuilt() {
    use std::os::unix::fs::MetadataExt;
    let lab = Lab::new();
    let out = lab.dir.path().join("out");
    let build = || {
        let (code, stdout, err) = run(lab
            .cmd("build")
            .arg("--out")
            .arg(&out)
            .env("SOURCE_DATE_EPOCH", crate::support::common::EPOCH));
        assert_eq!(code, 0, "{err}");
        stdout
    };
    let first = build();
    assert!(first.contains("wrote 7 packages into"), "{first}");
    let release = out.join("dists/bionic/InRelease");
    let before = fs::metadata(&release).unwrap();
    let again = build();
    assert!(
        again.contains(&format!(
            "7 packages in {}, unchanged since the last build: nothing was written",
            out.display()
        )),
        "{again}"
    );
    // The same package lines as the build that wrote them.
    let lines = |s: &str| {
        s.lines()
            .filter(|l| l.contains(" sha256:"))
            .map(String::from)
            .collect::<Vec<_>>()
    };
    assert_eq!(lines(&first), lines(&again));
    let after = fs::metadata(&release).unwrap();
    assert_eq!(
        (before.ino(), before.mtime_nsec()),
        (after.ino(), after.mtime_nsec())
    );

    // A file of the output removed by hand: built again, complete.
    fs::remove_file(out.join("dists/bionic/main/binary-amd64/Packages.gz")).unwrap();
    let third = build();
    assert!(third.contains("wrote 7 packages into"), "{third}");
    assert!(
        out.join("dists/bionic/main/binary-amd64/Packages.gz")
            .exists()
    );
    ok(crate::support::common::debforge().arg("verify").arg(&out));

    // Another date is another Release.
    let (code, stdout, err) = run(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .env("SOURCE_DATE_EPOCH", "1700000000"));
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("wrote 7 packages into"), "{stdout}");
    assert!(
        fs::read_to_string(out.join("dists/bionic/Release"))
            .unwrap()
            .contains("Date: Tue, 14 Nov 2023 22:13:20 UTC")
    );
    // Re-dated, the same packages: the compressed indexes have the bytes of
    // the ones the last generation kept (made of its pieces, copied, not
    // compressed again: repo::pieces tests that), the pool files are the
    // ones already there.
    let xz = out.join("dists/bionic/main/binary-amd64/Packages.xz");
    let pooled = out.join("pool/main/libc/libcudnn7/libcudnn7_7.5.0.56-1+cuda10.1_amd64.deb");
    let pool_before = fs::metadata(&pooled).unwrap().ino();
    let (code, _, err) = run(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .env("SOURCE_DATE_EPOCH", "1700000100"));
    assert_eq!(code, 0, "{err}");
    let kept = lab
        .dir
        .path()
        .join(".out.generations/indexes")
        .join(debforge::digest::sha256_file(&xz).unwrap());
    assert_eq!(fs::read(&xz).unwrap(), fs::read(&kept).unwrap());
    assert!(kept.with_extension("pieces").is_file());
    assert_eq!(fs::metadata(&pooled).unwrap().ino(), pool_before);
    ok(crate::support::common::debforge().arg("verify").arg(&out));
}

/// A Release signed by a key that was valid when it signed but has expired
/// since: apt refuses it (gpgv's EXPKEYSIG), so `lock` does too.
#[test]
fn a_signature_by_a_key_that_has_expired_is_refused() {
    let lab = Lab::new();
    let expired = TestKey::expired();
    expired.sign_detached(&lab.www().join("nvidia/Release"));
    let project = lab.recipes.parent().unwrap();
    fs::write(project.join("keys/upstream.asc"), &expired.public).unwrap();
    let sources = lab.recipes.join("sources.toml");
    let text = fs::read_to_string(&sources).unwrap();
    fs::write(
        &sources,
        text.replace(&TestKey::shared().fingerprint, &expired.fingerprint),
    )
    .unwrap();
    let (code, err) = fails(&mut lab.cmd("lock"));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!(
            "signed by key {} which expired on Thu, 02 Jan 2020 00:00:00 UTC (apt refuses it: EXPKEYSIG)",
            expired.fingerprint
        )),
        "{err}"
    );
    assert!(lab.cached_debs().is_empty());
}

/// A server that trickles a byte every half second never lets the idle
/// timeout fire; the transfer's average rate does: `lock --timeout 2
/// --retries 1` ends within seconds, saying why.
#[test]
fn a_trickling_server_cannot_hold_a_run_for_ever() {
    let lab = Lab::new();
    lab.server.fault("nvidia/Release", Fault::Trickle);
    let start = std::time::Instant::now();
    let (code, err) = fails(lab.cmd("lock").args(["--retries", "1"]));
    let took = start.elapsed();
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("too slow: the server sends")
            && err.contains("bytes/s, below the 1024 bytes/s"),
        "{err}"
    );
    assert!(took < std::time::Duration::from_secs(20), "took {took:?}");
}
