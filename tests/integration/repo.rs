//! `debforge index` against apt-ftparchive and dpkg-scanpackages, the index
//! cache, signing keys, and atomic builds.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use debforge::format::deb822::Document;

use crate::support::common::{debforge, ok, run};
use crate::support::standin::{Lab, build_deb, nvidia_debs};

fn stanzas(text: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    Document::parse(text)
        .unwrap()
        .paragraphs()
        .map(|p| {
            let fields = p
                .fields()
                .map(|f| (f.name().to_ascii_lowercase(), f.value().to_string()))
                .collect();
            (p.get("Filename").unwrap().to_string(), fields)
        })
        .collect()
}

fn pool(dir: &Path) {
    let work = dir.join("work");
    for d in nvidia_debs("7.5.0.56-1+cuda10.1", "2.4.2-1+cuda10.1")
        .iter()
        .chain(nvidia_debs("7.6.5.32-1+cuda10.1", "2.4.8-1+cuda10.1").iter())
    {
        let sub = dir.join("pool/main").join(&d.name[..4]).join(d.name);
        build_deb(d, "amd64", &sub, &work);
    }
    fs::remove_dir_all(work).unwrap();
}

#[test]
fn index_matches_apt_ftparchive_field_by_field() {
    let tmp = tempfile::tempdir().unwrap();
    pool(tmp.path());
    let cache = tmp.path().join("cache");
    let ours = ok(debforge()
        .arg("index")
        .arg("pool")
        .arg("--cache")
        .arg(&cache)
        .current_dir(tmp.path()));
    // Our stanzas list Size and SHA256, the digest every apt we serve uses
    // (issue 24): apt-ftparchive told to compute that one alone.
    let theirs = ok(Command::new("apt-ftparchive")
        .args([
            "-o",
            "APT::FTPArchive::MD5=false",
            "-o",
            "APT::FTPArchive::SHA1=false",
        ])
        .args(["-o", "APT::FTPArchive::SHA512=false"])
        .arg("packages")
        .arg("pool")
        .current_dir(tmp.path()));
    let (a, b) = (stanzas(&ours), stanzas(&theirs));
    assert_eq!(a.len(), 10);
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (file, fields) in &a {
        assert_eq!(fields, &b[file], "{file}");
    }
    // dpkg-scanpackages: the same fields in the same order, but the digests
    // it adds that we leave out (MD5sum, SHA1).
    let scan = ok(Command::new("dpkg-scanpackages")
        .args(["-m", "pool", "/dev/null"])
        .current_dir(tmp.path()));
    let doc = Document::parse(&scan).unwrap();
    let ours_doc = Document::parse(&ours).unwrap();
    for theirs in doc.paragraphs() {
        let file = theirs.get("Filename").unwrap();
        let mine = ours_doc
            .paragraphs()
            .find(|p| p.get("Filename") == Some(file))
            .unwrap();
        let their_names: Vec<&str> = theirs
            .fields()
            .map(|f| f.name())
            .filter(|n| !["MD5sum", "SHA1", "SHA512"].contains(n))
            .collect();
        let my_names: Vec<&str> = mine.fields().map(|f| f.name()).collect();
        assert_eq!(my_names, their_names, "{file}");
    }
}

#[test]
fn the_index_cache_rereads_changed_files_only() {
    let tmp = tempfile::tempdir().unwrap();
    pool(tmp.path());
    let cache = tmp.path().join("cache");
    let index = || {
        let (code, out, err) = run(debforge()
            .arg("index")
            .arg("pool")
            .arg("--cache")
            .arg(&cache)
            .current_dir(tmp.path()));
        assert_eq!(code, 0, "{err}");
        (out, err)
    };
    let (cold, err) = index();
    assert!(
        err.contains("indexed 10 packages (10 read, 0 from the cache)"),
        "{err}"
    );
    let (warm, err) = index();
    assert!(err.contains("(0 read, 10 from the cache)"), "{err}");
    assert_eq!(cold, warm);
    // Change one byte in place (a digit of the first ar member's date: the
    // package stays one dpkg-deb accepts), keep the size and put the old
    // mtime back: the change time still moves, so the file is re-read.
    let deb = tmp
        .path()
        .join("pool/main/libn/libnccl2/libnccl2_2.4.2-1+cuda10.1_amd64.deb");
    let mtime = fs::metadata(&deb).unwrap().modified().unwrap();
    let mut bytes = fs::read(&deb).unwrap();
    let date = 8 + 16;
    bytes[date] = if bytes[date] == b'1' { b'2' } else { b'1' };
    fs::write(&deb, &bytes).unwrap();
    fs::File::options()
        .write(true)
        .open(&deb)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let (changed, err) = index();
    assert!(err.contains("(1 read, 9 from the cache)"), "{err}");
    assert_ne!(changed, cold);
    let fresh = ok(debforge()
        .arg("index")
        .arg("pool")
        .arg("--no-cache")
        .current_dir(tmp.path()));
    assert_eq!(changed, fresh);
}

#[test]
fn signing_keys_permissions_passphrases_and_rotation() {
    let lab = Lab::new();
    let keys = lab.keys();
    let key_file = fs::read_dir(keys.join("signing"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "key"))
        .unwrap();
    assert_eq!(
        fs::metadata(&key_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let out = lab.dir.path().join("out");

    // A secret key readable by others is refused, with the fix.
    fs::set_permissions(&key_file, fs::Permissions::from_mode(0o644)).unwrap();
    let (code, _, err) = run(lab.cmd("build").arg("--out").arg(&out));
    assert_eq!(code, 2);
    assert!(
        err.contains("readable by group or others") && err.contains("chmod 600"),
        "{err}"
    );
    fs::set_permissions(&key_file, fs::Permissions::from_mode(0o600)).unwrap();

    // A second key, protected by a passphrase: both sign (rotation), which
    // has to be asked for.
    let pass = lab.dir.path().join("pass");
    fs::write(&pass, "s3cret\n").unwrap();
    let (code, _, err) = run(debforge().arg("keygen").arg("--keys").arg(&keys));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("already holds a signing key") && err.contains("pass --add"),
        "{err}"
    );
    assert_eq!(
        fs::read_to_string(keys.join("signing/.gitignore")).unwrap(),
        debforge::keys::SIGNING_GITIGNORE
    );
    ok(debforge()
        .arg("keygen")
        .arg("--add")
        .arg("--keys")
        .arg(&keys)
        .args([
            "--algo",
            "ed25519",
            "--name",
            "next key",
            "--expire-days",
            "10",
        ])
        .arg("--passphrase-file")
        .arg(&pass));
    let (code, _, err) = run(lab.cmd("build").arg("--out").arg(&out));
    assert_eq!(code, 2);
    assert!(err.contains("protected by a passphrase"), "{err}");
    let (code, stdout, err) = run(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .env("DEBFORGE_KEY_PASSPHRASE", "s3cret"));
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("signed by 2 keys"), "{stdout}");
    assert!(
        err.contains("expires in 9 days") || err.contains("expires in 10 days"),
        "{err}"
    );
    // gpgv accepts both forms with the exported keyring; each key alone too.
    let ring = out.join("debforge-archive-keyring.gpg");
    let dist = out.join("dists/bionic");
    ok(Command::new("gpgv")
        .arg("--keyring")
        .arg(&ring)
        .arg(dist.join("Release.gpg"))
        .arg(dist.join("Release")));
    ok(Command::new("gpgv")
        .arg("--keyring")
        .arg(&ring)
        .arg(dist.join("InRelease")));
    let status = Command::new("gpgv")
        .arg("--status-fd=1")
        .arg("--keyring")
        .arg(&ring)
        .arg(dist.join("InRelease"))
        .output()
        .unwrap()
        .stdout;
    let status = String::from_utf8_lossy(&status);
    assert_eq!(status.matches("[GNUPG:] GOODSIG").count(), 2, "{status}");
    assert!(status.contains("VALIDSIG"), "{status}");
    // Secret keys never land in the output.
    // (grep exits 1 when nothing matches.)
    let (code, found, _) = run(Command::new("grep").args(["-rl", "PRIVATE KEY"]).arg(&out));
    assert_eq!(code, 1, "secret key material in the output: {found}");
}

#[test]
fn a_concurrent_build_is_refused_and_a_failed_one_keeps_the_previous_output() {
    let lab = Lab::new();
    let out = lab.dir.path().join("out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    let release = fs::read(out.join("dists/bionic/Release")).unwrap();

    // Hold the build lock as another build would.
    let lock = fs::OpenOptions::new()
        .write(true)
        .open(lab.dir.path().join(".out.lock"))
        .unwrap();
    lock.lock().unwrap();
    let (code, _, err) = run(lab.cmd("build").arg("--out").arg(&out));
    assert_eq!(code, 2);
    assert!(err.contains("another debforge build is writing"), "{err}");
    drop(lock);

    // A build that fails half-way (a package vanishes from the cache and
    // the upstream) leaves the previous repository as it was, and valid.
    fs::remove_dir_all(&lab.cache).unwrap();
    lab.server.fault(
        "nvidia/libnccl-dev_2.4.2-1+cuda10.1_amd64.deb",
        crate::support::server::Fault::Status(404),
    );
    let (code, _, _) = run(lab.cmd("build").arg("--out").arg(&out));
    assert_eq!(code, 2);
    assert_eq!(fs::read(out.join("dists/bionic/Release")).unwrap(), release);
    ok(debforge().arg("verify").arg(&out));
    // A build killed mid-way (here: stuck on a stalled download) leaves the
    // previous repository intact; what a kill during staging leaves behind is
    // removed by the next build.
    lab.server.fault(
        "nvidia/libnccl-dev_2.4.2-1+cuda10.1_amd64.deb",
        crate::support::server::Fault::Stall(10),
    );
    let mut child = lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .args(["--timeout", "30"])
        .stderr(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(fs::read(out.join("dists/bionic/Release")).unwrap(), release);
    ok(debforge().arg("verify").arg(&out));
    fs::create_dir_all(lab.dir.path().join(".out.staging-killed/pool")).unwrap();
    lab.server.clear_faults();
    ok(lab.cmd("build").arg("--out").arg(&out));
    let leftovers: Vec<_> = fs::read_dir(lab.dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("staging") || n.contains(".old-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn the_same_inputs_give_the_same_repository_bytes() {
    let lab = Lab::new();
    let build = |name: &str| {
        let out = lab.dir.path().join(name);
        ok(lab
            .cmd("build")
            .arg("--out")
            .arg(&out)
            .env("SOURCE_DATE_EPOCH", crate::support::common::EPOCH));
        out
    };
    let (a, b) = (build("a"), build("b"));
    let files = ok(Command::new("find")
        .arg(".")
        .arg("-type")
        .arg("f")
        .current_dir(&a));
    let mut n = 0;
    for f in files.lines() {
        let (x, y) = (fs::read(a.join(f)).unwrap(), fs::read(b.join(f)).unwrap());
        if f.ends_with("Release.gpg") {
            // sequoia salts each v4 signature (a notation of random bytes, a
            // defence against hash collisions): the one thing that differs.
            continue;
        }
        if f.ends_with("InRelease") {
            let body = |v: &[u8]| {
                debforge::format::clearsign::split(&String::from_utf8_lossy(v))
                    .unwrap()
                    .body
            };
            assert_eq!(body(&x), body(&y), "{f} signed text differs");
            continue;
        }
        assert_eq!(x, y, "{f} differs");
        n += 1;
    }
    assert!(n > 20, "{files}");
    // And gpgv accepts the signatures made at the key's creation time.
    ok(Command::new("gpgv")
        .arg("--keyring")
        .arg(a.join("debforge-archive-keyring.gpg"))
        .arg(a.join("dists/bionic/InRelease")));
}

#[test]
fn repository_settings_name_the_suite_and_valid_until() {
    let lab = Lab::new();
    fs::write(
        lab.recipes.join("repository.toml"),
        "[repository]\norigin = \"GPU lab\"\nlabel = \"gpu-lab\"\nsuite = \"lab-bionic\"\ncodename = \"bionic\"\ncomponent = \"main\"\narchitectures = [\"amd64\"]\ndescription = \"cuDNN 7.5 and NCCL 2.4 for CUDA 10.1\"\nvalid-for-days = 7\n",
    )
    .unwrap();
    let out = lab.dir.path().join("out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    let release = fs::read_to_string(out.join("dists/lab-bionic/Release")).unwrap();
    let r = debforge::format::release::Release::parse(&release).unwrap();
    assert_eq!(r.paragraph().get("Origin"), Some("GPU lab"));
    assert_eq!(
        r.valid_until().unwrap().unwrap() - r.date().unwrap().unwrap(),
        7 * 86_400
    );
    ok(debforge().arg("verify").arg(&out));
    // An unknown setting is an error that names the file and the line.
    fs::write(
        lab.recipes.join("repository.toml"),
        "[repository]\nsuite = \"x\"\nmirrors = \"http://x\"\n",
    )
    .unwrap();
    let (code, _, err) = run(lab.cmd("build").arg("--out").arg(&out));
    assert_eq!(code, 2);
    assert!(
        err.contains("repository.toml:3: unknown field `mirrors`"),
        "{err}"
    );
}

#[test]
fn rsa4096_keys_sign_what_gpgv_accepts() {
    let lab = Lab::new();
    let keys = lab.dir.path().join("rsa-keys");
    let fpr = ok(debforge().arg("keygen").arg("--keys").arg(&keys).args([
        "--algo",
        "rsa4096",
        "--name",
        "rsa lab key",
        "--email",
        "lab@example.org",
    ]));
    assert_eq!(fpr.trim().len(), 40, "{fpr}");
    let out = lab.dir.path().join("out");
    ok(lab.build_with_keys(&keys).arg("--out").arg(&out));
    let ring = out.join("debforge-archive-keyring.gpg");
    let listing = ok(Command::new("gpg")
        .args(["--show-keys", "--with-colons"])
        .arg(&ring));
    assert!(
        listing
            .lines()
            .any(|l| l.starts_with("pub:") && l.split(':').nth(2) == Some("4096")),
        "{listing}"
    );
    let status = Command::new("gpgv")
        .arg("--status-fd=1")
        .arg("--keyring")
        .arg(&ring)
        .arg(out.join("dists/bionic/InRelease"))
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains("GOODSIG"), "{status}");
    // VALIDSIG's 8th field is the hash algorithm: 10 is SHA512.
    let validsig = status.lines().find(|l| l.contains("VALIDSIG")).unwrap();
    assert_eq!(validsig.split_whitespace().nth(9), Some("10"), "{validsig}");
}

/// After keygen, build, bundle and publish in a git project, `git status`
/// shows no key, and no secret-key material is in the output, the bundle
/// or the published tree.
#[test]
fn secret_keys_stay_out_of_git_and_out_of_everything_published() {
    let lab = Lab::new();
    let project = lab.recipes.parent().unwrap().to_path_buf();
    fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(".gitignore"),
        project.join(".gitignore"),
    )
    .unwrap();
    let git = |args: &[&str]| ok(Command::new("git").arg("-C").arg(&project).args(args));
    git(&["init", "-q"]);
    let keys = project.join("fresh-keys");
    ok(debforge().arg("keygen").arg("--keys").arg(&keys));
    let status = git(&["status", "--porcelain", "--untracked-files=all"]);
    assert!(
        !status.contains("fresh-keys/signing") && !status.contains(".key"),
        "{status}"
    );
    let key_file = fs::read_dir(keys.join("signing"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "key"))
        .unwrap();
    let secret = fs::read(&key_file).unwrap();

    let out = lab.dir.path().join("out");
    ok(lab.build_with_keys(&keys).arg("--out").arg(&out));
    let bundle = lab.dir.path().join("lab.tar");
    ok(debforge()
        .args(["bundle", "-o"])
        .arg(&bundle)
        .arg("--out")
        .arg(&out));
    let published = lab.dir.path().join("published");
    ok(debforge()
        .arg("publish")
        .arg("--to")
        .arg(&published)
        .arg("--out")
        .arg(&out));
    let status = git(&["status", "--porcelain", "--untracked-files=all"]);
    assert!(!status.contains(".key"), "{status}");

    let mut files = vec![bundle];
    for dir in [&out, &published] {
        crate::support::common::walk_files(dir, &mut |p| files.push(p.to_path_buf()));
    }
    // The secret key's last 64 bytes (secret material and checksum) appear
    // nowhere; no armored private key; the keyrings hold public keys only.
    let tail = &secret[secret.len() - 64..];
    for f in &files {
        let bytes = fs::read(f).unwrap();
        assert!(
            !bytes.windows(tail.len()).any(|w| w == tail),
            "{}",
            f.display()
        );
        assert!(
            !String::from_utf8_lossy(&bytes).contains("PRIVATE KEY BLOCK"),
            "{}",
            f.display()
        );
    }
    for ring in [
        "debforge-archive-keyring.gpg",
        "debforge-archive-keyring.asc",
    ] {
        let listing = ok(Command::new("gpg")
            .args(["--list-packets", "--no-default-keyring"])
            .arg(out.join(ring)));
        assert!(!listing.contains("secret key packet"), "{ring}: {listing}");
        assert!(listing.contains("public key packet"), "{ring}: {listing}");
    }
}
