//! The real apt against the repository debforge builds, in a sandbox: a
//! private APT_CONFIG (no /etc/apt), state, cache and lists per test case.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::common::{ok, run};
use crate::support::server::Server;
use crate::support::standin::{Lab, TestKey, build_deb, nvidia_debs, write_packages};

/// An apt that sees only what the test gives it.
pub struct Apt {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Apt {
    /// `sources`: deb822 `.sources` text; `preferences`: apt preferences text.
    pub fn new(sources: &str, preferences: &str) -> Apt {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        for d in [
            "etc/apt.conf.d",
            "etc/sources.list.d",
            "etc/preferences.d",
            "etc/trusted.gpg.d",
            "state/lists/partial",
            "cache/archives/partial",
            "log",
        ] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        fs::write(root.join("state/status"), "").unwrap();
        fs::write(root.join("etc/sources.list.d/lab.sources"), sources).unwrap();
        fs::write(root.join("etc/preferences.d/lab.pref"), preferences).unwrap();
        let r = root.display();
        let conf = format!(
            "Dir::Etc \"{r}/etc\";\nDir::Etc::main \"/dev/null\";\nDir::Etc::parts \"{r}/etc/apt.conf.d\";\n\
             Dir::Etc::sourcelist \"{r}/etc/sources.list\";\nDir::Etc::sourceparts \"{r}/etc/sources.list.d\";\n\
             Dir::Etc::preferences \"{r}/etc/preferences\";\nDir::Etc::preferencesparts \"{r}/etc/preferences.d\";\n\
             Dir::Etc::trusted \"{r}/etc/trusted.gpg\";\nDir::Etc::trustedparts \"{r}/etc/trusted.gpg.d\";\n\
             Dir::State \"{r}/state\";\nDir::State::status \"{r}/state/status\";\nDir::Cache \"{r}/cache\";\nDir::Log \"{r}/log\";\n\
             APT::Architecture \"amd64\";\nAPT::Architectures {{ \"amd64\"; }};\nAcquire::Languages \"none\";\n\
             APT::Sandbox::User \"root\";\nDebug::NoLocking \"true\";\n"
        );
        fs::write(root.join("apt.conf"), conf).unwrap();
        Apt { _dir: dir, root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("APT_CONFIG", self.root.join("apt.conf"));
        c
    }

    /// `apt-get update`: (exit code, the W: and E: lines).
    pub fn update(&self) -> (i32, Vec<String>) {
        let (code, out, err) = run(self.cmd("apt-get").args(["update", "-q"]));
        let problems = out
            .lines()
            .chain(err.lines())
            .filter(|l| l.starts_with("W:") || l.starts_with("E:"))
            .map(String::from)
            .collect();
        (code, problems)
    }

    /// The candidate `apt-cache policy` reports for `package`.
    pub fn candidate(&self, package: &str) -> String {
        let out = ok(self.cmd("apt-cache").args(["policy", package]));
        out.lines()
            .find_map(|l| l.trim().strip_prefix("Candidate: "))
            .unwrap_or("")
            .to_string()
    }
}

/// The deb822 source for a built repository at `url`, signed by `keyring`.
pub fn sources(url: &str, keyring: &Path) -> String {
    format!(
        "Types: deb\nURIs: {url}\nSuites: bionic\nComponents: main\nSigned-By: {}\n",
        keyring.display()
    )
}

/// A built repository, served.
struct Served {
    lab: Lab,
    out: PathBuf,
    server: Server,
}

fn served() -> Served {
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    let server = Server::start(out.clone());
    Served { lab, out, server }
}

impl Served {
    fn keyring(&self) -> PathBuf {
        self.out.join("debforge-archive-keyring.gpg")
    }
    fn pins(&self) -> String {
        fs::read_to_string(self.out.join("debforge.pref")).unwrap()
    }
}

/// Another repository offering the versions apt must not pick: Ubuntu's
/// 7.0.5 and NVIDIA's newer 7.6.5, flat and trusted.
fn other_repo(work: &Path) -> (Server, String) {
    let root = work.join("other");
    let mut debs = nvidia_debs("7.6.5.32-1+cuda10.1", "2.4.8-1+cuda10.1");
    debs.truncate(1);
    debs.extend(
        nvidia_debs("7.0.5.15-1ubuntu1", "2.1.4-1")
            .into_iter()
            .take(1),
    );
    for d in &debs {
        build_deb(d, "amd64", &root, &work.join("other-work"));
    }
    write_packages(&root, ".", &root.join("Packages"), false);
    let server = Server::start(root);
    let entry = format!(
        "\nTypes: deb\nURIs: {}\nSuites: ./\nTrusted: yes\n",
        server.url("")
    );
    (server, entry)
}

#[test]
fn apt_accepts_the_repository_and_obeys_the_pins() {
    let s = served();
    let ours = sources(&s.server.url(""), &s.keyring());
    let (other, other_entry) = other_repo(s.lab.dir.path());

    // debforge verify agrees.
    let (code, out, err) = run(crate::support::common::debforge().arg("verify").arg(&s.out));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("7 package(s) checked; all good"), "{out}");

    // Our repository alone: a clean update.
    let apt = Apt::new(&ours, &s.pins());
    let (code, problems) = apt.update();
    assert_eq!((code, problems.clone()), (0, vec![]), "{problems:?}");
    assert_eq!(apt.candidate("libcudnn7"), "7.5.0.56-1+cuda10.1");
    assert_eq!(apt.candidate("libnccl2"), "2.4.2-1+cuda10.1");

    // With a repository offering 7.0.5 and 7.6.5 next to it: still ours.
    let apt = Apt::new(&format!("{ours}{other_entry}"), &s.pins());
    let (code, problems) = apt.update();
    assert_eq!(code, 0, "{problems:?}");
    assert!(
        problems.iter().all(|p| !p.starts_with("E:")),
        "{problems:?}"
    );
    assert_eq!(apt.candidate("libcudnn7"), "7.5.0.56-1+cuda10.1");
    let policy = ok(apt.cmd("apt-cache").args(["policy", "libcudnn7"]));
    assert!(
        policy.contains("7.6.5.32-1+cuda10.1") && policy.contains("7.0.5.15-1ubuntu1"),
        "{policy}"
    );

    // Without our repository, the pins refuse to fall back.
    let apt = Apt::new(other_entry.trim_start(), &s.pins());
    apt.update();
    let (code, out, err) = run(apt.cmd("apt-get").args(["-s", "install", "libcudnn7"]));
    assert_eq!(code, 100, "{out}{err}");
    assert!(
        format!("{out}{err}").contains("has no installation candidate"),
        "{out}{err}"
    );
    drop(other);
}

#[test]
fn apt_refuses_tampering_bad_signatures_and_wrong_keys() {
    // A tampered index (by-hash copies are hard links: the same bytes).
    let s = served();
    let packages = s.out.join("dists/bionic/main/binary-amd64/Packages.xz");
    let mut b = fs::read(&packages).unwrap();
    b[20] ^= 0x55;
    fs::write(&packages, &b).unwrap();
    let apt = Apt::new(&sources(&s.server.url(""), &s.keyring()), "");
    let (code, problems) = apt.update();
    assert!(code != 0 || !problems.is_empty(), "tampered index accepted");
    assert!(
        problems
            .iter()
            .any(|p| p.contains("Hash Sum mismatch") || p.contains("File has unexpected size")),
        "{problems:?}"
    );

    // A Release changed after signing.
    let s = served();
    for f in ["InRelease", "Release"] {
        let p = s.out.join("dists/bionic").join(f);
        let t = fs::read_to_string(&p)
            .unwrap()
            .replace("Origin: debforge", "Origin: debforgf");
        fs::write(&p, t).unwrap();
    }
    let apt = Apt::new(&sources(&s.server.url(""), &s.keyring()), "");
    let (_, problems) = apt.update();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("BADSIG") || p.contains("not signed") || p.contains("invalid")),
        "{problems:?}"
    );

    // The right repository, the wrong keyring.
    let s = served();
    let wrong = s.lab.dir.path().join("wrong.gpg");
    let gpg = Command::new("gpg")
        .arg("--homedir")
        .arg(&TestKey::other().home)
        .args(["--batch", "--export", &TestKey::other().fingerprint])
        .output()
        .unwrap();
    fs::write(&wrong, gpg.stdout).unwrap();
    let apt = Apt::new(&sources(&s.server.url(""), &wrong), "");
    let (_, problems) = apt.update();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("NO_PUBKEY") || p.contains("not signed")),
        "{problems:?}"
    );
}
