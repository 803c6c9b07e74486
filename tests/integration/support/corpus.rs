//! Real packages with real maintainer scripts, repacked with all four of our
//! scripts and put through the real dpkg beside the originals: installed
//! (an older version first, where the archive has one, then upgraded),
//! reinstalled, reconfigured with `dpkg-reconfigure`, removed and purged.
//! After each step the two machines must be in the same state — every file
//! (content, mode, link target), `dpkg -s` of every package, debconf's
//! database — and our part must have logged every call.
//!
//! The corpus covers debconf users (tzdata, ucf, locales, ca-certificates,
//! keyboard-configuration, libssl1.1, man-db …), perl `config` scripts
//! (dictionaries-common, wamerican), bash's ELF preinst, conffiles and
//! triggers. It is downloaded by apt from Ubuntu's bionic archive (run on
//! Ubuntu 18.04) and Debian's bookworm (run on Debian 12) into
//! ~/.cache/debforge-tests/corpus/, never committed.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::chroot::{Chroot, Dist, test_cache};
use crate::support::common::{debforge, ok};

const BIONIC: &[&str] = &[
    "tzdata",
    "ucf",
    "less",
    "libssl1.1",
    "ca-certificates",
    "openssl",
    "bash",
    "netbase",
    "libxml2",
    "xml-core",
    "sgml-base",
    "install-info",
    "mime-support",
    "readline-common",
    "dictionaries-common",
    "wamerican",
    "adduser",
    "libpaper1",
    "emacsen-common",
    "libgdbm5",
    "libpam-modules",
    "shared-mime-info",
    "fontconfig-config",
    "fontconfig",
    "keyboard-configuration",
    "tex-common",
    "man-db",
    "groff-base",
    "bsdmainutils",
    "cpio",
    "locales",
];

const BOOKWORM: &[&str] = &[
    "tzdata",
    "ucf",
    "less",
    "ca-certificates",
    "bash",
    "libpaper1",
    "dictionaries-common",
    "wamerican",
    "sgml-base",
    "xml-core",
    "install-info",
];

/// Our part, for all four scripts: logs each call with the name it was run
/// under, the package and script dpkg says, and the arguments.
const LOGGER: &str = "#!/bin/sh\nset -e\necho \"$DPKG_MAINTSCRIPT_PACKAGE $DPKG_MAINTSCRIPT_NAME $(basename \"$0\") $*\" >> /var/log/debforge-corpus.log\n";

/// The corpus for `dist`: `new/` the packages at the archive's candidate
/// version, `old/` an older version where the archive has one, `deps/`
/// what they need beyond the minimal root. Downloaded once (in a root of
/// that system, by its own apt) and cached.
fn corpus(dist: Dist, targets: &[&str]) -> PathBuf {
    let name = format!("{dist:?}-{}", short_hash(&targets.join(" "))).to_lowercase();
    let dir = test_cache().join("corpus").join(name);
    let lock = {
        fs::create_dir_all(dir.parent().unwrap()).unwrap();
        fs::File::create(dir.with_extension("lock")).unwrap()
    };
    lock.lock().unwrap();
    if dir.join("complete").exists() {
        return dir;
    }
    let c = Chroot::of(dist);
    let list = targets.join(" ");
    let script = format!(
        "set -e\napt-get update -qq\nmkdir -p /corpus/new /corpus/old /corpus/deps\n\
         cd /corpus/new && apt-get download -qq {list}\n\
         cd /corpus/old\n\
         for p in {list}; do\n\
           v=$(apt-cache madison $p | awk '{{print $3}}' | sort -u)\n\
           if [ $(echo \"$v\" | wc -l) -gt 1 ]; then apt-get download -qq \"$p=$(echo \"$v\" | while read x; do echo $x; done | sort -V | head -1)\"; fi\n\
         done\n\
         apt-get install --download-only -y -qq {list} >/dev/null\n\
         cp /var/cache/apt/archives/*.deb /corpus/deps/\n\
         chmod -R a+rX /corpus\n"
    );
    let (code, out) = c.run(&script);
    assert_eq!(
        code, 0,
        "downloading the {dist:?} corpus failed (is the archive reachable?):\n{out}"
    );
    let tmp = dir.with_extension("partial");
    let _ = fs::remove_dir_all(&tmp);
    ok(Command::new("cp")
        .arg("-a")
        .arg(c.path("/corpus"))
        .arg(&tmp));
    // Drop from deps/ what new/ has (same file, or another version of a target).
    for e in fs::read_dir(tmp.join("deps")).unwrap() {
        let p = e.unwrap().path();
        let pkg = package_of(&p);
        if targets.contains(&pkg.as_str()) {
            fs::remove_file(p).unwrap();
        }
    }
    let _ = fs::remove_dir_all(&dir);
    fs::rename(&tmp, &dir).unwrap();
    fs::write(dir.join("complete"), "").unwrap();
    dir
}

fn short_hash(s: &str) -> String {
    debforge::digest::digest_reader(s.as_bytes())
        .unwrap()
        .sha256[..12]
        .to_string()
}

fn package_of(deb: &Path) -> String {
    deb.file_name()
        .unwrap()
        .to_string_lossy()
        .split('_')
        .next()
        .unwrap()
        .to_string()
}

fn has_control_file(deb: &Path, name: &str) -> bool {
    Command::new("dpkg-deb")
        .arg("-I")
        .arg(deb)
        .arg(name)
        .output()
        .unwrap()
        .status
        .success()
}

fn debs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "deb"))
        .collect();
    v.sort();
    v
}

/// A flat apt repository of `files` at `dir` (unsigned: the test trusts it).
fn flat_repo(dir: &Path, files: &[PathBuf]) {
    fs::create_dir_all(dir).unwrap();
    for f in files {
        fs::copy(f, dir.join(f.file_name().unwrap())).unwrap();
    }
    let packages = ok(Command::new("apt-ftparchive")
        .args(["packages", "."])
        .current_dir(dir));
    fs::write(dir.join("Packages"), packages).unwrap();
    let release = ok(Command::new("apt-ftparchive")
        .args(["release", "."])
        .current_dir(dir));
    fs::write(dir.join("Release"), release).unwrap();
}

/// Everything that describes the machine's state, keyed for comparison:
/// files (type, mode, owner, size, SHA256 or link target), every package's
/// `dpkg -s`, and debconf's database. What differs by design (the maintainer
/// scripts in dpkg's info directory) or by time (logs, caches) is left out.
fn state(c: &Chroot) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let skip_dirs = [
        "proc",
        "sys",
        "dev",
        "tmp",
        "run",
        "var/log",
        "var/cache/apt",
        "var/lib/apt",
        "var/cache/man",
        "var/backups",
        "srv",
        "root",
        // ldconfig's aux-cache and fontconfig's caches record inodes and times.
        "var/cache/ldconfig",
        "var/cache/fontconfig",
    ];
    let skip_files = [
        "var/lib/dpkg/status",
        "var/lib/dpkg/status-old",
        "var/lib/dpkg/available",
        "var/lib/dpkg/available-old",
        "var/lib/dpkg/lock",
        "var/lib/dpkg/lock-frontend",
        "var/lib/dpkg/triggers/Lock",
        "var/cache/debconf/config.dat-old",
        "var/cache/debconf/templates.dat-old",
        "var/cache/debconf/passwords.dat",
    ];
    fn walk(
        root: &Path,
        rel: &str,
        skip_dirs: &[&str],
        skip_files: &[&str],
        out: &mut BTreeMap<String, String>,
    ) {
        let dir = root.join(rel);
        let mut entries: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap()).collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            let r = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let m = fs::symlink_metadata(e.path()).unwrap();
            let head = format!("{:o} {}:{}", m.mode(), m.uid(), m.gid());
            if m.file_type().is_symlink() {
                out.insert(
                    r,
                    format!("{head} -> {}", fs::read_link(e.path()).unwrap().display()),
                );
            } else if m.is_dir() {
                if skip_dirs.contains(&r.as_str()) {
                    continue;
                }
                out.insert(r.clone(), format!("{head} dir"));
                walk(root, &r, skip_dirs, skip_files, out);
            } else if m.is_file() {
                if skip_files.contains(&r.as_str()) {
                    continue;
                }
                if r.starts_with("var/lib/dpkg/info/")
                    && ["preinst", "postinst", "prerm", "postrm"]
                        .iter()
                        .any(|s| r.ends_with(&format!(".{s}")))
                {
                    continue;
                }
                let sha = debforge::digest::digest_reader(fs::File::open(e.path()).unwrap())
                    .unwrap()
                    .sha256;
                out.insert(r, format!("{head} {} {sha}", m.len()));
            } else {
                out.insert(r, format!("{head} special"));
            }
        }
    }
    walk(&c.root, "", &skip_dirs, &skip_files, &mut out);
    // Conffiles spans lines: records start with a marker instead.
    let status = c.ok("dpkg-query -W -f='@@@${Package}\\t${Version}\\t${Status}\\t${Installed-Size}\\t${Depends}\\t${Conffiles}'");
    for record in status.split("@@@").filter(|r| !r.is_empty()) {
        let (pkg, rest) = record.split_once('\t').unwrap();
        out.insert(format!("dpkg -s {pkg}"), rest.to_string());
    }
    out
}

fn differences(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Vec<String> {
    let mut d = Vec::new();
    for (k, v) in a {
        match b.get(k) {
            None => d.push(format!("only in the original: {k} {v}")),
            Some(w) if w != v => d.push(format!("{k}: original {v} / repacked {w}")),
            _ => {}
        }
    }
    for (k, v) in b {
        if !a.contains_key(k) {
            d.push(format!("only in the repacked: {k} {v}"));
        }
    }
    d
}

/// The state after each step: (step, package → status and version).
type StepStates = Vec<(String, BTreeMap<String, String>)>;

/// One machine's run through every step; the state after each.
fn run_steps(
    dist: Dist,
    repo: &Path,
    targets: &[&str],
    old: &[(String, String)],
) -> (StepStates, String) {
    let c = Chroot::of(dist);
    ok(Command::new("cp")
        .arg("-a")
        .arg(repo)
        .arg(c.path("/srv/corpus")));
    c.ok("rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*");
    fs::write(
        c.path("/etc/apt/sources.list.d/corpus.list"),
        "deb [trusted=yes] file:/srv/corpus ./\n",
    )
    .unwrap();
    c.ok("apt-get update -qq 2>&1");
    let base: Vec<&str> = targets
        .iter()
        .copied()
        .filter(|p| {
            c.run(&format!(
                "dpkg-query -W -f='${{Status}}' {p} | grep -q '^install ok installed'"
            ))
            .0 == 0
        })
        .collect();
    let fresh: Vec<&str> = targets
        .iter()
        .copied()
        .filter(|p| !base.contains(p))
        .collect();
    let mut states = Vec::new();
    if !old.is_empty() {
        let pins: Vec<String> = old
            .iter()
            .filter(|(p, _)| fresh.contains(&p.as_str()))
            .map(|(p, v)| format!("{p}={v}"))
            .collect();
        c.ok(&format!("apt-get install -y -q {} 2>&1", pins.join(" ")));
        states.push(("install older versions".into(), state(&c)));
    }
    c.ok(&format!("apt-get install -y -q {} 2>&1", fresh.join(" ")));
    states.push(("install / upgrade".into(), state(&c)));
    c.ok(&format!(
        "apt-get install -y -q --reinstall {} 2>&1",
        base.join(" ")
    ));
    states.push(("reinstall what the root had".into(), state(&c)));
    c.ok(&format!(
        "for p in {}; do dpkg-reconfigure -fnoninteractive $p; done 2>&1",
        targets.join(" ")
    ));
    states.push(("dpkg-reconfigure".into(), state(&c)));
    c.ok(&format!("apt-get remove -y -q {} 2>&1", fresh.join(" ")));
    states.push(("remove".into(), state(&c)));
    c.ok(&format!("apt-get purge -y -q {} 2>&1", fresh.join(" ")));
    states.push(("purge".into(), state(&c)));
    let log = fs::read_to_string(c.path("/var/log/debforge-corpus.log")).unwrap_or_default();
    (states, log)
}

fn same_end_state_as_the_originals(dist: Dist, targets: &[&str]) {
    let corpus = corpus(dist, targets);
    let tmp = tempfile::tempdir().unwrap();
    let ours = tmp.path().join("logger");
    fs::write(&ours, LOGGER).unwrap();
    fs::set_permissions(&ours, fs::Permissions::from_mode(0o755)).unwrap();

    let originals: Vec<PathBuf> = debs(&corpus.join("new"))
        .into_iter()
        .chain(debs(&corpus.join("old")))
        .collect();
    let mut repacked = Vec::new();
    let repacked_dir = tmp.path().join("repacked");
    fs::create_dir_all(&repacked_dir).unwrap();
    for deb in &originals {
        let mut cmd = debforge();
        cmd.args(["deb", "repack"])
            .arg(deb)
            .arg("-o")
            .arg(&repacked_dir);
        for s in ["preinst", "postinst", "prerm", "postrm"] {
            cmd.arg(format!("--{s}")).arg(&ours);
        }
        ok(&mut cmd);
        repacked.push(repacked_dir.join(deb.file_name().unwrap()));
    }
    let old: Vec<(String, String)> = debs(&corpus.join("old"))
        .iter()
        .map(|d| {
            let v = ok(Command::new("dpkg-deb").args(["-f"]).arg(d).arg("Version"));
            (package_of(d), v.trim().to_string())
        })
        .collect();
    let deps = debs(&corpus.join("deps"));
    let repo_a = tmp.path().join("original");
    let repo_b = tmp.path().join("with-ours");
    flat_repo(&repo_a, &[originals.clone(), deps.clone()].concat());
    flat_repo(&repo_b, &[repacked.clone(), deps].concat());

    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| run_steps(dist, &repo_a, targets, &old));
        let b = s.spawn(|| run_steps(dist, &repo_b, targets, &old));
        (a.join().unwrap(), b.join().unwrap())
    });
    let (states_a, log_a) = a;
    let (states_b, log) = b;
    assert!(log_a.is_empty(), "the originals have no part of ours");
    // The one difference dpkg itself makes: a package that had no postrm and
    // no conffiles vanishes on `remove`; with our postrm added it stays as
    // `config-files` (its postrm must still run for purge) until purged.
    let stays_for_purge: Vec<String> = originals
        .iter()
        .filter(|d| !has_control_file(d, "postrm") && !has_control_file(d, "conffiles"))
        .map(|d| package_of(d))
        .collect();
    let expected = |line: &String| {
        stays_for_purge.iter().any(|p| {
            line.starts_with(&format!("only in the repacked: dpkg -s {p} "))
                && line.contains("\tdeinstall ok config-files\t")
                || [format!("{p}.list"), format!("{p}:amd64.list")]
                    .iter()
                    .any(|l| {
                        line.starts_with(&format!(
                            "only in the repacked: var/lib/dpkg/info/{l} 100644 0:0 0 "
                        ))
                    })
        })
    };
    for ((step, sa), (_, sb)) in states_a.iter().zip(&states_b) {
        let d: Vec<String> = differences(sa, sb)
            .into_iter()
            .filter(|l| !(step == "remove" && expected(l)))
            .collect();
        assert!(
            d.is_empty(),
            "{dist:?}, after {step}: {} differences:\n{}",
            d.len(),
            d.iter().take(40).cloned().collect::<Vec<_>>().join("\n")
        );
    }
    // Our part ran for every call dpkg made, under the name dpkg gave.
    for line in log.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let (pkg, script, name) = (f[0], f[1], f[2]);
        // dpkg's names: PKG.SCRIPT (PKG:ARCH.SCRIPT for Multi-Arch: same), or
        // tmp.ci/preinst for the preinst of a package being unpacked.
        let ok_name = name == format!("{pkg}.{script}")
            || name == format!("{pkg}:amd64.{script}")
            || (script == "preinst" && name == "preinst");
        assert!(ok_name, "our part ran under another name: {line}");
    }
    for p in targets {
        let calls: Vec<&str> = log
            .lines()
            .filter(|l| l.starts_with(&format!("{p} ")))
            .collect();
        let has = |script: &str, arg: &str| {
            calls
                .iter()
                .any(|l| l.split(' ').nth(1) == Some(script) && l.split(' ').nth(3) == Some(arg))
        };
        assert!(
            has("preinst", "install") || has("preinst", "upgrade"),
            "{p}: {calls:?}"
        );
        assert!(has("postinst", "configure"), "{p}: {calls:?}");
        // Removed and purged, unless the root had it from the start.
        if calls.iter().any(|l| l.ends_with(" purge")) {
            assert!(
                has("prerm", "remove") && has("postrm", "remove"),
                "{p}: {calls:?}"
            );
        }
    }
    let purged = log.lines().filter(|l| l.ends_with("postrm purge")).count();
    assert!(
        purged >= targets.len() - 5,
        "{purged} purges logged:\n{log}"
    );
    eprintln!(
        "{dist:?}: {} packages ({} with an older version) repacked; {} calls of our part logged",
        targets.len(),
        old.len(),
        log.lines().count()
    );
}

#[test]
fn repacked_real_packages_end_as_the_originals_on_ubuntu_18_04() {
    same_end_state_as_the_originals(Dist::Bionic, BIONIC);
}

#[test]
fn repacked_real_packages_end_as_the_originals_on_debian_12() {
    same_end_state_as_the_originals(Dist::Bookworm, BOOKWORM);
}

/// Debs this machine's own apt downloads (Debian 12 here), cached.
fn host_debs(names: &[&str]) -> Vec<PathBuf> {
    let dir = test_cache()
        .join("corpus")
        .join(format!("host-{}", short_hash(&names.join(" "))));
    if !dir.join("complete").exists() {
        let tmp = dir.with_extension("partial");
        let _ = fs::remove_dir_all(&tmp);
        fs::create_dir_all(&tmp).unwrap();
        ok(Command::new("apt-get")
            .args(["download", "-qq"])
            .args(names)
            .current_dir(&tmp));
        let _ = fs::remove_dir_all(&dir);
        fs::rename(&tmp, &dir).unwrap();
        fs::write(dir.join("complete"), "").unwrap();
    }
    debs(&dir)
}

/// Field name → value exactly as written, per Filename.
fn index_stanzas(text: &str) -> BTreeMap<String, Vec<(String, String)>> {
    debforge::format::deb822::Document::parse(text)
        .unwrap()
        .paragraphs()
        .map(|p| {
            (
                p.get("Filename").unwrap().to_string(),
                p.fields()
                    .map(|f| (f.name().to_string(), f.verbatim().to_string()))
                    .collect(),
            )
        })
        .collect()
}

/// `debforge index` and `deb info` against apt-ftparchive, dpkg-scanpackages
/// and `dpkg-deb --info` on every package of the corpora (and dictd, whose
/// templates start with an empty line).
#[test]
fn index_and_info_agree_with_the_reference_tools_on_real_packages() {
    let mut all = Vec::new();
    for (dist, targets) in [(Dist::Bionic, BIONIC), (Dist::Bookworm, BOOKWORM)] {
        let c = corpus(dist, targets);
        for sub in ["new", "old", "deps"] {
            all.extend(debs(&c.join(sub)));
        }
    }
    all.extend(host_debs(&["dictd"]));
    let tmp = tempfile::tempdir().unwrap();
    let pool = tmp.path().join("pool");
    fs::create_dir_all(&pool).unwrap();
    for d in &all {
        fs::copy(d, pool.join(d.file_name().unwrap())).unwrap();
    }
    let in_tmp = |cmd: &mut Command| ok(cmd.current_dir(tmp.path()));
    let ours = in_tmp(debforge().args(["index", "pool", "--no-cache"]));
    // Size and SHA256 are the digests we list (issue 24): apt-ftparchive
    // told to compute that one alone.
    let apt = in_tmp(Command::new("apt-ftparchive").args([
        "-o",
        "APT::FTPArchive::MD5=false",
        "-o",
        "APT::FTPArchive::SHA1=false",
        "-o",
        "APT::FTPArchive::SHA512=false",
        "packages",
        "pool",
    ]));
    let scan = in_tmp(Command::new("dpkg-scanpackages").args(["-m", "pool", "/dev/null"]));
    let (ours, apt, scan) = (
        index_stanzas(&ours),
        index_stanzas(&apt),
        index_stanzas(&scan),
    );
    assert!(ours.len() >= 75, "{} packages", ours.len());
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        apt.keys().collect::<Vec<_>>()
    );
    for (file, fields) in &ours {
        // Every value byte for byte as apt-ftparchive writes it.
        let sorted = |v: &Vec<(String, String)>| {
            let mut v = v.clone();
            v.sort();
            v
        };
        assert_eq!(sorted(fields), sorted(&apt[file]), "{file}");
        // The order dpkg-scanpackages writes, but the digests it adds that
        // we leave out (MD5sum, SHA1).
        let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
        let theirs: Vec<&str> = scan[file]
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| !["MD5sum", "SHA1", "SHA512"].contains(n))
            .collect();
        assert_eq!(names, theirs, "{file}");
    }

    // `deb info`: control files in dpkg-deb's order with its sizes and line counts.
    for d in &all {
        let theirs: Vec<(String, u64, u64)> = ok(Command::new("dpkg-deb").arg("-I").arg(d))
            .lines()
            .filter_map(|l| {
                let (size, rest) = l.trim_start().split_once(" bytes, ")?;
                let (lines, rest) = rest.trim_start().split_once(" lines")?;
                let name = rest
                    .trim_start()
                    .trim_start_matches('*')
                    .split_whitespace()
                    .next()?;
                Some((name.to_string(), size.parse().ok()?, lines.parse().ok()?))
            })
            .collect();
        let json: serde_json::Value =
            serde_json::from_str(&ok(debforge().args(["deb", "info", "--json"]).arg(d))).unwrap();
        let mine: Vec<(String, u64, u64)> = json["control_files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["name"].as_str().unwrap().to_string(),
                    f["size"].as_u64().unwrap(),
                    f["lines"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(mine, theirs, "{}", d.display());
    }
}
