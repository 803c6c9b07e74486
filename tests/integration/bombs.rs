//! Small inputs that expand to something huge (made at test time by
//! tests/fixtures/make-bombs.py): each is refused with an error naming the
//! limit, in bounded memory (peak RSS measured with GNU time), and never
//! with a panic or an abort.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::common::{debforge, fixture, ok};
use crate::support::standin::{Lab, TestKey};

/// The peak RSS, in KB, a refused bomb may take (the goal: under 64 MB).
const MAX_RSS_KB: u64 = 64 * 1024;

fn bombs() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bombs");
    ok(Command::new("python3")
        .arg(fixture("make-bombs.py"))
        .arg(&out));
    (dir, out)
}

/// Runs `cmd` under GNU time: (exit code, stderr without time's line, peak RSS in KB).
fn measured(cmd: &mut Command, work: &Path) -> (i32, String, u64) {
    let report = work.join("time");
    let program = cmd.get_program().to_owned();
    let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(&report)
        .arg(program)
        .args(args)
        .output()
        .unwrap();
    let rss = fs::read_to_string(&report)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        rss,
    )
}

#[test]
fn packages_that_expand_to_gigabytes_are_refused_in_little_memory() {
    let (dir, bombs) = bombs();
    let cases: &[(&str, &[&str], &str)] = &[
        (
            "control-bomb.deb",
            &["deb", "info"],
            "entry \"./md5sums\" is larger than 32 MiB, the limit for the control member",
        ),
        (
            "control-many.deb",
            &["deb", "info"],
            "the control member expands to more than 33554432 bytes, the limit for it",
        ),
        (
            "control-longname.deb",
            &["deb", "info"],
            "a GNU long name entry claims 2500000000 bytes, over the limit of 1048576",
        ),
        (
            "data-longname.deb",
            &["deb", "contents"],
            "a GNU long name entry claims 2500000000 bytes, over the limit of 1048576",
        ),
        (
            "data-longname.deb",
            &["deb", "contents", "--json"],
            "a GNU long name entry claims 2500000000 bytes",
        ),
        // The tar end marker comes before the damage: only reading the
        // member to its end (as dpkg-deb does) finds it.
        (
            "data-corrupt-tail.deb",
            &["deb", "contents"],
            "data member is not a readable tar archive: lzma data error",
        ),
    ];
    for (file, args, needle) in cases {
        let deb = bombs.join(file);
        let (code, err, rss) = measured(debforge().args(*args).arg(&deb), dir.path());
        assert_eq!(code, 2, "{file} {args:?}: {err}");
        assert!(
            err.contains(needle),
            "{file} {args:?}: missing {needle:?} in {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        assert!(rss < MAX_RSS_KB, "{file} {args:?}: {rss} KB");
        eprintln!("{file} {args:?}: refused, peak RSS {rss} KB");
    }
    // dpkg-deb refuses the damaged tail too.
    let status = Command::new("dpkg-deb")
        .arg("-c")
        .arg(bombs.join("data-corrupt-tail.deb"))
        .output()
        .unwrap()
        .status;
    assert!(!status.success());
    // Indexing a pool of bombs: refused, no panic.
    let pool = dir.path().join("pool");
    fs::create_dir_all(&pool).unwrap();
    fs::copy(
        bombs.join("control-longname.deb"),
        pool.join("x_1.0_all.deb"),
    )
    .unwrap();
    let (code, err, rss) = measured(
        debforge().args(["index", "--no-cache"]).arg(&pool),
        dir.path(),
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("GNU long name"), "{err}");
    assert!(rss < MAX_RSS_KB, "index: {rss} KB");
}

/// A signed index of a few hundred KB that is almost all blank lines (or one
/// endless line): `lock` keeps memory flat and names the limit.
#[test]
fn a_signed_index_of_blank_lines_or_one_endless_line_stays_small() {
    for (what, tail, needle) in [
        ("blank lines", "\n".repeat(200 << 20), None),
        (
            "an endless line",
            "X".repeat(8 << 20),
            Some("is longer than 1048576 bytes"),
        ),
    ] {
        let tail = tail.clone();
        let lab = Lab::with(move |www, _| {
            let repo = www.join("nvidia");
            let mut text = fs::read(repo.join("Packages")).unwrap();
            text.extend_from_slice(tail.as_bytes());
            let mut xz = Command::new("xz")
                .args(["-T1", "-c"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let mut stdin = xz.stdin.take().unwrap();
            let writer = std::thread::spawn(move || {
                std::io::Write::write_all(&mut stdin, &text).unwrap();
            });
            let out = xz.wait_with_output().unwrap();
            writer.join().unwrap();
            fs::write(repo.join("Packages.xz"), out.stdout).unwrap();
            for f in ["Packages", "Packages.gz"] {
                fs::remove_file(repo.join(f)).unwrap();
            }
            let release = crate::support::standin::write_release(&repo, &[("Origin", "NVIDIA")]);
            TestKey::shared().sign_detached(&release);
        });
        let (code, err, rss) = measured(&mut lab.cmd("lock"), lab.dir.path());
        match needle {
            None => assert_eq!(code, 0, "{what}: {err}"),
            Some(n) => {
                assert_eq!(code, 2, "{what}: {err}");
                assert!(err.contains(n), "{what}: missing {n:?} in {err}");
            }
        }
        assert!(rss < MAX_RSS_KB, "{what}: {rss} KB");
        eprintln!("index with {what}: exit {code}, peak RSS {rss} KB");
    }
}

/// A FIFO at `path` (a read would wait for a writer for ever).
fn fifo(path: &Path) {
    let _ = fs::remove_file(path);
    ok(Command::new("mkfifo").arg(path));
}

/// A link to /dev/zero at `path` (a read would never end).
fn zero(path: &Path) {
    let _ = fs::remove_file(path);
    std::os::unix::fs::symlink("/dev/zero", path).unwrap();
}

/// `debforge ARGS` under a 10 s timeout and GNU time: must exit 2 within it,
/// print `needle`, and stay under [`MAX_RSS_KB`].
fn refused_in_bounds(lab: &Lab, args: &[&str], needle: &str) {
    let debforge = debforge().get_program().to_owned();
    let mut cmd = Command::new("timeout");
    cmd.arg("10").arg(debforge).args(args);
    let work = tempfile::tempdir().unwrap();
    let (code, err, rss) = measured(&mut cmd, work.path());
    assert_eq!(code, 2, "{args:?} (124: timed out): {err}");
    assert!(err.contains(needle), "{args:?}: {needle:?} not in {err}");
    assert!(rss < MAX_RSS_KB, "{args:?}: {rss} KB");
    let _ = lab;
}

/// Every input is read by type and with a bound: a FIFO, a link to
/// /dev/zero or an oversized file in place of a recipe, sources.toml,
/// repository.toml, an upstream key, the signing key, the passphrase file,
/// the lock or a snapshot's Release is refused at once, naming the path.
#[test]
fn inputs_that_are_fifos_devices_or_huge_are_refused_at_once() {
    let lab = Lab::new();
    let r = |rel: &str| lab.recipes.join(rel);
    let s = |p: &Path| p.display().to_string();
    let recipes = s(&lab.recipes);
    let cache = s(&lab.cache);
    let project = lab.recipes.parent().unwrap().to_path_buf();
    let keys = s(&project.join("keys"));
    let base = ["--recipes", &recipes, "--cache", &cache];
    let lock = |extra: &[&str]| -> Vec<String> {
        ["lock"]
            .iter()
            .chain(base.iter())
            .chain(extra)
            .map(|x| x.to_string())
            .collect()
    };
    let build = |extra: &[&str]| -> Vec<String> {
        [
            "build",
            "--keys",
            &keys,
            "--out",
            &s(&project.join("repo-out")),
        ]
        .iter()
        .chain(base.iter())
        .chain(extra)
        .map(|x| x.to_string())
        .collect()
    };
    let call = |args: Vec<String>, needle: &str| {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        refused_in_bounds(&lab, &a, needle);
    };

    // A recipe, sources.toml, repository.toml.
    let recipe = r("packages/evil.toml");
    fifo(&recipe);
    call(
        lock(&[]),
        "evil.toml: cannot read: is a FIFO (named pipe), not a regular file",
    );
    zero(&recipe);
    call(
        lock(&[]),
        "evil.toml: cannot read: is a character device, not a regular file",
    );
    fs::remove_file(&recipe).unwrap();
    fs::write(&recipe, vec![b'#'; 60 << 20]).unwrap();
    call(
        lock(&[]),
        "evil.toml: cannot read: is larger than 1048576 bytes",
    );
    fs::remove_file(&recipe).unwrap();
    let sources = r("sources.toml");
    let sources_text = fs::read(&sources).unwrap();
    fifo(&sources);
    call(lock(&[]), "sources.toml: cannot read: is a FIFO");
    fs::remove_file(&sources).unwrap();
    fs::write(&sources, &sources_text).unwrap();
    zero(&r("repository.toml"));
    call(
        build(&[]),
        "repository.toml: cannot read: is a character device",
    );
    fs::remove_file(r("repository.toml")).unwrap();

    // The upstream key: refused as what it is, not "missing".
    let key = project.join("keys/upstream.asc");
    let key_bytes = fs::read(&key).unwrap();
    zero(&key);
    call(lock(&[]), "is a character device, not a regular file");
    let (_, _, err) = crate::support::common::run(debforge().args(lock(&[])));
    assert!(!err.contains("is missing"), "{err}");
    fs::remove_file(&key).unwrap();
    fs::write(&key, &key_bytes).unwrap();

    // The signing key, the passphrase file.
    let signing = project.join("keys/signing");
    let real: Vec<PathBuf> = fs::read_dir(&signing)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "key"))
        .collect();
    let aside = project.join("aside.key");
    fs::rename(&real[0], &aside).unwrap();
    fifo(&real[0]);
    ok(Command::new("chmod").arg("600").arg(&real[0]));
    call(build(&[]), "is a FIFO (named pipe), not a regular file");
    fs::remove_file(&real[0]).unwrap();
    fs::rename(&aside, &real[0]).unwrap();
    let pass = project.join("pass");
    fifo(&pass);
    call(
        build(&["--passphrase-file", &s(&pass)]),
        "cannot read the passphrase file: is a FIFO",
    );

    // The lock.
    ok(debforge().args(lock(&[])));
    let lock_file = r("debforge.lock");
    let lock_text = fs::read(&lock_file).unwrap();
    zero(&lock_file);
    call(build(&["--locked"]), "debforge.lock: is a character device");
    fs::remove_file(&lock_file).unwrap();
    fs::write(&lock_file, vec![b'#'; 80 << 20]).unwrap();
    call(build(&["--locked"]), "debforge.lock: is larger than");
    fs::write(&lock_file, &lock_text).unwrap();

    // A snapshot whose Release is a FIFO.
    let snap = project.join("snap");
    ok(debforge().args([
        "fetch",
        "--recipes",
        &recipes,
        "--cache",
        &cache,
        "--to",
        &s(&snap),
    ]));
    fifo(&snap.join("nvidia-ml/Release"));
    call(
        build(&["--locked", "--source-dir", &s(&snap)]),
        "Release: is a FIFO (named pipe), not a regular file",
    );
}

/// What a build, a package build and a publish read besides the project:
/// a package tree's `DEBIAN/control` (and `deb repack`'s scripts), the
/// stamp and the generations beside an output, a publish target's Release.
/// A FIFO, a link to /dev/zero or an oversized file in the tree is refused
/// at once, naming the path; the stamp, a cache, is only not used (and
/// written anew); a manifest is named; in a publish target, a FIFO or a
/// link (never followed) is replaced, and one in the output not published.
/// Each but the link hung or grew without bound before.
#[test]
fn package_trees_stamps_and_publish_targets_are_read_by_type_and_bound() {
    let lab = Lab::new();
    let work = lab.dir.path();
    let s = |p: &Path| p.display().to_string();

    // `deb build`: DEBIAN/control.
    let tree = work.join("tree");
    fs::create_dir_all(tree.join("DEBIAN")).unwrap();
    let control = tree.join("DEBIAN/control");
    let deb = s(&work.join("out.deb"));
    let build = ["deb", "build", &s(&tree), "-o", &deb];
    fifo(&control);
    refused_in_bounds(
        &lab,
        &build,
        "DEBIAN/control: is a FIFO (named pipe), not a regular file",
    );
    zero(&control);
    refused_in_bounds(&lab, &build, "DEBIAN/control: is a character device");
    fs::remove_file(&control).unwrap();
    fs::write(&control, vec![b'#'; 80 << 20]).unwrap();
    refused_in_bounds(&lab, &build, "DEBIAN/control: is larger than");
    fs::write(
        &control,
        "Package: fine\nVersion: 1.0\nArchitecture: all\nMaintainer: x <x@example.org>\nDescription: d\n d.\n",
    )
    .unwrap();
    ok(debforge().args(build));
    // Files each within bounds that make a control member larger than a
    // reader takes: refused, not built.
    let big = [tree.join("DEBIAN/md5sums"), tree.join("DEBIAN/shlibs")];
    for f in &big {
        fs::write(f, vec![b'#'; 20 << 20]).unwrap();
    }
    refused_in_bounds(
        &lab,
        &build,
        "more than the 33554432 a package's control may hold",
    );
    for f in &big {
        fs::remove_file(f).unwrap();
    }
    // `deb repack`'s scripts, as a recipe's.
    let script = work.join("postinst");
    fifo(&script);
    let repacked = s(&work.join("repacked/"));
    let repack = [
        "deb",
        "repack",
        &deb,
        "-o",
        &repacked,
        "--postinst",
        &s(&script),
    ];
    refused_in_bounds(&lab, &repack, "cannot read --postinst: is a FIFO");
    zero(&script);
    refused_in_bounds(
        &lab,
        &repack,
        "cannot read --postinst: is a character device",
    );

    // The output's stamp: a FIFO in its place is no stamp; the build is
    // done and the stamp written again.
    let out = work.join("repo-out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    let stamp = work.join(".repo-out.stamp");
    assert!(stamp.is_file());
    for plant in [fifo as fn(&Path), zero] {
        // Past any build stamp (it would answer first), to the output's.
        let _ = fs::remove_file(work.join(".repo-out.build-stamp"));
        plant(&stamp);
        let debforge = debforge().get_program().to_owned();
        let mut cmd = lab.cmd("build");
        cmd.arg("--out").arg(&out);
        let mut timed = Command::new("timeout");
        timed.arg("20").arg(debforge).args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => timed.env(k, v),
                None => timed.env_remove(k),
            };
        }
        let (code, err, rss) = measured(&mut timed, work);
        assert_eq!(code, 0, "(124: timed out) {err}");
        assert!(rss < MAX_RSS_KB, "{rss} KB");
        assert!(fs::symlink_metadata(&stamp).unwrap().is_file());
    }

    // A generation's manifest: `history` names it, at once.
    let manifest = work.join(".repo-out.generations/000009.json");
    let history = ["history", "--out", &s(&out)];
    fifo(&manifest);
    refused_in_bounds(&lab, &history, "000009.json: is a FIFO (named pipe)");
    zero(&manifest);
    refused_in_bounds(&lab, &history, "000009.json: is a character device");
    fs::remove_file(&manifest).unwrap();

    // A publish target whose Release is a FIFO or a link to /dev/zero:
    // neither is a file of the target's (never read, a link never
    // followed); the publish replaces each with ours.
    let www = work.join("www");
    let publish = ["publish", "--to", &s(&www), "--out", &s(&out)];
    ok(debforge().args(publish));
    let release = www.join("dists/bionic/Release");
    assert!(release.is_file());
    let timed = || {
        let mut c = Command::new("timeout");
        c.arg("20").arg(debforge().get_program()).args(publish);
        c
    };
    for plant in [fifo as fn(&Path), zero] {
        plant(&release);
        let (code, err, rss) = measured(&mut timed(), work);
        assert_eq!(code, 0, "(124: timed out) {err}");
        assert!(rss < MAX_RSS_KB, "{rss} KB");
        assert!(fs::symlink_metadata(&release).unwrap().is_file());
    }
    // A FIFO in the output is none of its files: not published.
    fifo(&out.join("dists/bionic/stray"));
    let (code, err, _) = measured(&mut timed(), work);
    assert_eq!(code, 0, "(124: timed out) {err}");
    assert!(!www.join("dists/bionic/stray").exists());
}

/// `verify` of a repository (from a USB stick, a mirror) with a FIFO or a
/// link to /dev/zero in place of its Release, InRelease, a Packages index
/// or a package: each is a problem naming the file, said at once, in
/// bounded memory. Each hung or read without end before.
#[test]
fn verify_refuses_fifos_and_devices_in_a_repository_at_once() {
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    let deb = walkdir::WalkDir::new(out.join("pool"))
        .into_iter()
        .flatten()
        .find(|e| e.path().extension().is_some_and(|x| x == "deb"))
        .expect("a package in the pool")
        .path()
        .strip_prefix(&out)
        .unwrap()
        .to_path_buf();
    let suite = PathBuf::from("dists/bionic");
    type Plant = fn(&Path);
    let cases: [(PathBuf, Plant, &str); 5] = [
        (
            suite.join("Release"),
            fifo,
            "Release: is a FIFO (named pipe)",
        ),
        (
            suite.join("InRelease"),
            zero,
            "InRelease: is a character device",
        ),
        (
            suite.join("main/binary-amd64/Packages"),
            fifo,
            "Packages: listed in Release but is a FIFO",
        ),
        (deb.clone(), fifo, "but is a FIFO (named pipe)"),
        (deb, zero, "but is a character device"),
    ];
    for (rel, plant, needle) in cases {
        let copy = lab.dir.path().join("copy");
        let _ = fs::remove_dir_all(&copy);
        ok(Command::new("cp").arg("-a").arg(&out).arg(&copy));
        plant(&copy.join(&rel));
        let copy = copy.display().to_string();
        refused_in_bounds_exit(&lab, &["verify", &copy], 1, needle);
    }
}

/// Hostile bundles that used to cost gigabytes or flood the terminal: a
/// SHA256SUMS that claims 4 GiB (a sparse tar), a PAX header that claims
/// 3 GiB, and a SHA256SUMS of a million bad lines (the problems are capped).
#[test]
fn bundle_verify_stays_small_on_huge_claims_and_caps_its_problems() {
    let dir = tempfile::tempdir().unwrap();
    let lab = Lab::new();
    let header = |name: &str, kind: tar::EntryType, size: u64| {
        let mut h = tar::Header::new_ustar();
        h.set_path(name).unwrap();
        h.set_entry_type(kind);
        h.set_mode(0o644);
        h.set_size(size);
        h.set_cksum();
        h.as_bytes().to_vec()
    };
    let sparse = |name: &str, bytes: Vec<u8>, claimed: u64| {
        let p = dir.path().join(name);
        let f = fs::File::create(&p).unwrap();
        std::io::Write::write_all(&mut &f, &bytes).unwrap();
        f.set_len(bytes.len() as u64 + claimed + 1024).unwrap();
        p.display().to_string()
    };
    let sums = sparse(
        "sums.tar",
        header(
            "debforge-bundle/SHA256SUMS",
            tar::EntryType::Regular,
            4 << 30,
        ),
        4 << 30,
    );
    refused_in_bounds_exit(
        &lab,
        &["bundle", "verify", &sums],
        1,
        "SHA256SUMS: larger than 16777216 bytes",
    );
    let pax = sparse(
        "pax.tar",
        header("pax", tar::EntryType::XHeader, 3 << 30),
        3 << 30,
    );
    refused_in_bounds_exit(
        &lab,
        &["bundle", "verify", &pax],
        1,
        "the tar archive is damaged",
    );

    let mut b = tar::Builder::new(fs::File::create(dir.path().join("lines.tar")).unwrap());
    let text = "not a line\n".repeat(1_000_000);
    let mut h = tar::Header::new_ustar();
    h.set_size(text.len() as u64);
    h.set_mode(0o644);
    b.append_data(&mut h, "debforge-bundle/SHA256SUMS", text.as_bytes())
        .unwrap();
    b.finish().unwrap();
    let lines = dir.path().join("lines.tar").display().to_string();
    let debforge = debforge().get_program().to_owned();
    let work = tempfile::tempdir().unwrap();
    let out = Command::new("timeout")
        .arg("10")
        .arg(&debforge)
        .args(["bundle", "verify", &lines])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.lines().count() < 110,
        "{} lines",
        stdout.lines().count()
    );
    assert!(stdout.contains("… and 999900 more problems"), "{stdout}");
    let (_, _, rss) = measured(
        Command::new(&debforge).args(["bundle", "verify", &lines]),
        work.path(),
    );
    assert!(rss < MAX_RSS_KB, "{rss} KB");
}

/// [`refused_in_bounds`] for a command whose refusal is exit `code`, with
/// `needle` on stdout or stderr.
fn refused_in_bounds_exit(lab: &Lab, args: &[&str], code: i32, needle: &str) {
    let debforge = debforge().get_program().to_owned();
    let out = Command::new("timeout")
        .arg("10")
        .arg(&debforge)
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(code), "{args:?}: {text}");
    assert!(text.contains(needle), "{args:?}: {needle:?} not in {text}");
    let work = tempfile::tempdir().unwrap();
    let (_, _, rss) = measured(Command::new(&debforge).args(args), work.path());
    assert!(rss < MAX_RSS_KB, "{args:?}: {rss} KB");
    let _ = lab;
}

/// A signed index that repeats the stanza of a package the recipes ask for
/// a million times (the seven million ran by hand: 29 MB as
/// Packages.gz, peak RSS 24 MB; a million keeps the suite fast): `lock` and
/// `diff --upstream` keep only the stanzas the recipes ask for, so memory
/// stays flat in the index's size.
#[test]
fn an_index_repeating_one_stanza_a_million_times_stays_small() {
    const REPEATS: usize = 1_000_000;
    let lab = Lab::with(|www, _| {
        let repo = www.join("nvidia");
        let text = fs::read_to_string(repo.join("Packages")).unwrap();
        let stanza = text
            .split("\n\n")
            .find(|s| {
                s.starts_with("Package: libnccl2\n") && s.contains("Version: 2.4.2-1+cuda10.1\n")
            })
            .unwrap()
            .to_string();
        fs::write(repo.join("head"), &text).unwrap();
        fs::write(repo.join("stanza"), format!("{}\n", stanza.trim_end())).unwrap();
        let lines = stanza.trim_end().lines().count() + 1;
        ok(Command::new("sh").arg("-c").arg(format!(
            "cd {} && (cat head; echo; yes \"$(cat stanza)\n\" | head -n {}) | gzip -1 > Packages.gz && rm head stanza Packages Packages.xz",
            repo.display(),
            REPEATS * lines
        )));
        let release = crate::support::standin::write_release(&repo, &[("Origin", "NVIDIA")]);
        TestKey::shared().sign_detached(&release);
    });
    let gz = fs::metadata(lab.www().join("nvidia/Packages.gz"))
        .unwrap()
        .len();
    let start = std::time::Instant::now();
    let (code, err, rss) = measured(&mut lab.cmd("lock"), lab.dir.path());
    assert_eq!(code, 0, "{err}");
    assert!(rss < MAX_RSS_KB, "lock: {rss} KB");
    eprintln!(
        "lock over a {gz}-byte Packages.gz of {REPEATS} repeated stanzas: peak RSS {rss} KB, {:.1} s (debug build)",
        start.elapsed().as_secs_f64()
    );
    let (code, err, rss) = measured(lab.cmd("diff").arg("--upstream"), lab.dir.path());
    assert!(code == 0 || code == 1, "{err}");
    assert!(rss < MAX_RSS_KB, "diff --upstream: {rss} KB");
}

/// A chain of `levels` directories named `a` under `base`, made relative to
/// each parent's descriptor (no path is ever too long for that).
fn chain(base: &Path, levels: usize) {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let mut dir = rustix::fs::open(base, flags, Mode::empty()).unwrap();
    for _ in 0..levels {
        rustix::fs::mkdirat(&dir, "a", Mode::from_raw_mode(0o755)).unwrap();
        dir = rustix::fs::openat(&dir, "a", flags, Mode::empty()).unwrap();
    }
}

/// Removes [`chain`]'s directories one level at a time (a recursive
/// removal would overflow this process's stack in turn).
fn unchain(base: &Path) {
    let (a, next) = (base.join("a"), base.join("next"));
    while a.exists() {
        match fs::rename(a.join("a"), &next) {
            Ok(()) => {
                fs::remove_dir(&a).unwrap();
                fs::rename(&next, &a).unwrap();
            }
            Err(_) => fs::remove_dir(&a).unwrap(),
        }
    }
}

#[test]
fn a_project_or_output_thousands_of_directories_deep_is_built_not_crashed() {
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    // 100,000 levels in the project, in the pool and beside `dists/` (a
    // directory of the output not ours, which a build removes). Builds
    // walked the first two and removed the third with a stack frame a
    // level and aborted (exit 134). Run here on a 1 MiB stack, so that the
    // old removal overflows before it runs out of descriptors.
    let deep = [
        lab.recipes.join("deep"),
        out.join("pool/deep"),
        out.join("deep"),
    ];
    for d in &deep {
        fs::create_dir_all(d).unwrap();
        chain(d, 100_000);
    }
    let small_stack = || {
        let mut c = lab.cmd("build");
        c.arg("--out").arg(&out);
        // SAFETY: only setrlimit, between fork and exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut c, || {
                let limit = libc::rlimit {
                    rlim_cur: 1 << 20,
                    rlim_max: libc::RLIM_INFINITY,
                };
                if libc::setrlimit(libc::RLIMIT_STACK, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        crate::support::common::run(&mut c)
    };
    let builds = [small_stack(), small_stack()];
    let removed = !out.join("deep").exists();
    // What reads such a tree by path (a package tree, the pool published or
    // bundled) stops at the system's bound on a path's length: each says
    // where and why in a line, not with the path's 200,000 bytes.
    fs::create_dir_all(lab.recipes.join("deep/DEBIAN")).unwrap();
    fs::write(
        lab.recipes.join("deep/DEBIAN/control"),
        "Package: deep\nVersion: 1\nArchitecture: all\nMaintainer: Lab <lab@example.org>\nDescription: deep\n",
    )
    .unwrap();
    let run_on = |args: [&str; 2], input: &Path, flag: &str, dest: &str| {
        crate::support::common::run(
            debforge()
                .args(args)
                .arg(input)
                .arg(flag)
                .arg(lab.dir.path().join(dest)),
        )
    };
    let too_long = [
        run_on(
            ["deb", "build"],
            &lab.recipes.join("deep"),
            "-o",
            "deep.deb",
        ),
        run_on(["publish", "--out"], &out, "--to", "docroot"),
        run_on(["bundle", "--out"], &out, "-o", "lab.tar"),
    ];
    // Removed before any assertion: the temporary directory's own removal
    // would overflow this test's stack.
    for d in &deep {
        unchain(d);
    }
    for (code, _, err) in &builds {
        assert_eq!(*code, 0, "{err}");
    }
    for (code, _, err) in &too_long {
        assert_ne!(*code, 0, "{err}");
        assert!(
            err.len() < 1_000
                && err.contains("characters)…/a/a/a")
                && err.contains("File name too long")
                && err.contains("hint: the path is"),
            "{err}"
        );
    }
    assert!(
        removed,
        "the directory not ours beside dists/ is removed whole"
    );
    // Without them the output's stamp (its walk) answers the next build
    // again. (The lab's project asks signed sources: it has no build stamp,
    // but its walk runs all the same, which overflowed.) Both dated alike:
    // dated by the clock, a second build in the next second is another
    // Release, and wrote it.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .to_string();
    let dated = || {
        let mut c = lab.cmd("build");
        c.arg("--out").arg(&out).env("SOURCE_DATE_EPOCH", &now);
        c
    };
    ok(&mut dated());
    let (_, stdout, _) = crate::support::common::run(&mut dated());
    assert!(
        stdout.contains("unchanged since the last build: nothing was written"),
        "{stdout}"
    );
}
