//! The real trust chains, against archives nobody here wrote: Ubuntu's
//! bionic-updates (signed by Ubuntu's 2012 key, SHA-1 self-signature) with
//! the shipped keyring, and Debian's bookworm (no SHA512 in its index) with
//! debian-archive-keyring. `lock`, `fetch --to`, `build --locked
//! --source-dir`, then the Ubuntu 18.04 root installs the result; the real apt
//! confirms every digest the lock recorded.
//!
//! When an archive cannot be reached the tests fail saying so;
//! `DEBFORGE_TEST_OFFLINE=1` skips them, with a line on stderr.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use debforge::recipe::lock::Lock;

use crate::support::chroot::Chroot;
use crate::support::common::{debforge, ok, run};

fn skipped(test: &str) -> bool {
    crate::support::common::skipped_offline(test)
}

/// Runs a debforge command against a real archive; a failure to reach it
/// fails the test with a message that says so.
fn against(archive: &str, cmd: &mut Command) -> String {
    let (code, out, err) = run(cmd);
    if code != 0 {
        let unreachable = [
            "cannot connect",
            "dns error",
            "Connection refused",
            "timed out",
            "resolve",
        ]
        .iter()
        .any(|w| err.contains(w));
        if unreachable {
            panic!(
                "{archive} cannot be reached from this machine (set DEBFORGE_TEST_OFFLINE=1 to skip the real-archive tests):\n{err}"
            );
        }
        panic!("{cmd:?} failed against {archive}:\n{out}{err}");
    }
    format!("{out}{err}")
}

/// `cmd` under GNU time, which writes its wall time and peak RSS to the
/// returned file (kept in the returned directory).
fn measured(cmd: Command) -> (Command, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("time");
    let mut timed = Command::new("/usr/bin/time");
    timed
        .arg("-f")
        .arg("%e %M")
        .arg("-o")
        .arg(&report)
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => timed.env(k, v),
            None => timed.env_remove(k),
        };
    }
    (timed, report, dir)
}

fn report_figures(what: &str, report: &Path) {
    let text = fs::read_to_string(report).unwrap();
    let mut it = text.split_whitespace();
    let secs: f64 = it.next().unwrap().parse().unwrap();
    let kib: u64 = it.next().unwrap().parse().unwrap();
    let _ = writeln!(
        std::io::stderr(),
        "measured: {what}: {secs:.2} s, peak RSS {:.1} MB",
        kib as f64 / 1024.0
    );
    assert!(kib < 256 * 1024, "{what}: peak RSS {kib} KiB");
}

fn keygen(project: &Path) {
    ok(debforge()
        .arg("keygen")
        .arg("--keys")
        .arg(project.join("keys"))
        .args(["--name", "real archive test"]));
}

/// What the real apt, having verified the archive's signed index itself,
/// says a package's Size and SHA256 are.
fn apt_show(text: &str, field: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}: ")))
        .unwrap_or_else(|| panic!("no {field} in:\n{text}"))
        .to_string()
}

#[test]
fn ubuntu_bionic_updates_locked_snapshotted_built_and_installed_on_18_04() {
    if skipped("ubuntu_bionic_updates_locked_snapshotted_built_and_installed_on_18_04") {
        return;
    }
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let recipes = project.join("recipes");
    fs::create_dir_all(recipes.join("packages")).unwrap();
    fs::create_dir_all(project.join("keys")).unwrap();
    // The shipped sources and keys, as a fresh clone has them.
    fs::copy(
        shipped.join("recipes/sources.toml"),
        recipes.join("sources.toml"),
    )
    .unwrap();
    for k in [
        "ubuntu-archive-keyring.gpg",
        "nvidia-cudatools-7fa2af80.asc",
    ] {
        fs::copy(shipped.join("keys").join(k), project.join("keys").join(k)).unwrap();
    }
    for p in ["libc-ares2", "libc-ares-dev"] {
        fs::copy(
            shipped.join(format!("recipes/packages/{p}.toml")),
            recipes.join(format!("packages/{p}.toml")),
        )
        .unwrap();
    }
    keygen(&project);
    let cache = tmp.path().join("cache");
    let cmd = |sub: &str, cache: &Path| {
        let mut c = debforge();
        c.arg(sub)
            .arg("--recipes")
            .arg(&recipes)
            .arg("--cache")
            .arg(cache);
        c
    };

    let (mut timed, report, _t) = measured(cmd("lock", &cache));
    against("Ubuntu's archive", &mut timed);
    report_figures("debforge lock, Ubuntu bionic-updates (c-ares)", &report);
    let lock = Lock::parse(&fs::read_to_string(recipes.join("debforge.lock")).unwrap()).unwrap();
    let ares = lock.get("libc-ares2", "amd64").unwrap();
    assert_eq!(ares.version(), "1.14.0-1ubuntu0.2");
    assert_eq!(ares.size, 37500);
    assert_eq!(
        ares.sha256(),
        "cff8cadb0d57b6ee92e950bea8d8964fe119086bdeaccba48c83209398c4efa6"
    );
    assert_eq!(ares.index_digests(), ["Size", "SHA256", "SHA512"]);

    // release-sha256 is the digest of the Release file itself, as served.
    let snap = tmp.path().join("snapshot");
    against(
        "Ubuntu's archive",
        cmd("fetch", &cache).arg("--locked").arg("--to").arg(&snap),
    );
    let release = snap.join("ubuntu-bionic-updates/dists/bionic-updates/InRelease");
    let inrelease = fs::read(&release).unwrap();
    let body = debforge::format::clearsign::split(std::str::from_utf8(&inrelease).unwrap())
        .unwrap()
        .body;
    let mut release_text = body.to_string();
    if !release_text.ends_with('\n') {
        release_text.push('\n');
    }
    assert_eq!(
        debforge::digest::digest_reader(release_text.as_bytes())
            .unwrap()
            .sha256,
        ares.release_sha256()
    );
    let mode = |p: &Path| {
        std::os::unix::fs::PermissionsExt::mode(&fs::metadata(p).unwrap().permissions()) & 0o777
    };
    assert_eq!(mode(&release), 0o644);
    assert_eq!(mode(&recipes.join("debforge.lock")), 0o644);

    // Air-gapped: a new cache, only the snapshot.
    let out = tmp.path().join("repo-out");
    ok(cmd("build", &tmp.path().join("offline-cache"))
        .arg("--locked")
        .arg("--source-dir")
        .arg(&snap)
        .arg("--keys")
        .arg(project.join("keys"))
        .arg("--out")
        .arg(&out));

    // The real apt on Ubuntu 18.04, from the archive's own signed index,
    // agrees with every digest the lock holds.
    let c = Chroot::new();
    let update = c.ok("apt-get update 2>&1");
    assert!(
        !update
            .lines()
            .any(|l| l.starts_with("W:") || l.starts_with("E:")),
        "{update}"
    );
    for p in &lock.package {
        let show = c.ok(&format!("apt-cache show {}={}", p.name(), p.version()));
        assert_eq!(apt_show(&show, "Size"), p.size.to_string(), "{}", p.name());
        assert_eq!(apt_show(&show, "SHA256"), p.sha256(), "{}", p.name());
        assert_eq!(apt_show(&show, "Filename"), p.path(), "{}", p.name());
        assert_eq!(
            Some(apt_show(&show, "SHA512").as_str()),
            p.sha512(),
            "{}",
            p.name()
        );
    }

    // Then it installs them from our repository alone.
    c.ok("rm -f /etc/apt/sources.list /etc/apt/sources.list.d/* && rm -rf /var/lib/apt/lists/*");
    ok(Command::new("cp")
        .arg("-a")
        .arg(&out)
        .arg(c.path("/srv/repo")));
    fs::copy(
        out.join("debforge.pref"),
        c.path("/etc/apt/preferences.d/debforge.pref"),
    )
    .unwrap();
    fs::write(
        c.path("/etc/apt/sources.list.d/lab.list"),
        "deb [signed-by=/srv/repo/debforge-archive-keyring.gpg] file:/srv/repo bionic main\n",
    )
    .unwrap();
    let update = c.ok("apt-get update 2>&1");
    assert!(
        !update
            .lines()
            .any(|l| l.starts_with("W:") || l.starts_with("E:")),
        "{update}"
    );
    c.ok("apt-get install -y libc-ares-dev 2>&1");
    assert_eq!(
        c.ok("dpkg-query -W -f='${Package} ${Version}\\n' libc-ares2 libc-ares-dev"),
        "libc-ares-dev 1.14.0-1ubuntu0.2\nlibc-ares2 1.14.0-1ubuntu0.2\n"
    );
    c.ok("test -e /usr/include/ares.h && ldconfig -p | grep -q libcares.so.2");
}

#[test]
fn debian_bookworm_locked_and_built_with_no_sha512_in_its_index() {
    if skipped("debian_bookworm_locked_and_built_with_no_sha512_in_its_index") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let recipes = project.join("recipes");
    fs::create_dir_all(recipes.join("packages")).unwrap();
    fs::write(
        recipes.join("sources.toml"),
        "[source.debian-bookworm]\nurl = \"http://deb.debian.org/debian/\"\nlayout = \"dists\"\n\
         suite = \"bookworm\"\ncomponent = \"main\"\nkey = \"/usr/share/keyrings/debian-archive-keyring.gpg\"\n\
         # Debian 12's archive key and its stable release key.\n\
         fingerprint = [\"B8B80B5B623EAB6AD8775C45B7C5D7D6350947F8\", \"4D64FEC119C2029067D6E791F8D2585B8783D481\"]\n",
    )
    .unwrap();
    // Packages unchanged since bookworm's release: one per architecture index.
    for (name, version, arch) in [
        ("hello", "2.10-3", "amd64"),
        ("cowsay", "3.03+dfsg2-8", "all"),
    ] {
        fs::write(
            recipes.join(format!("packages/{name}.toml")),
            format!("name = \"{name}\"\nversion = \"{version}\"\narchitecture = \"{arch}\"\nfrom = {{ source = \"debian-bookworm\" }}\naction = \"keep\"\n"),
        )
        .unwrap();
    }
    keygen(&project);
    let cache = tmp.path().join("cache");
    let cmd = |sub: &str| {
        let mut c = debforge();
        c.arg(sub)
            .arg("--recipes")
            .arg(&recipes)
            .arg("--cache")
            .arg(&cache);
        c
    };
    let (mut timed, report, _t) = measured(cmd("lock"));
    against("Debian's archive", &mut timed);
    report_figures("debforge lock, Debian bookworm main (9 MB index)", &report);
    let lock = Lock::parse(&fs::read_to_string(recipes.join("debforge.lock")).unwrap()).unwrap();
    for p in &lock.package {
        assert_eq!(
            p.sha512(),
            None,
            "{}: Debian's index gives no SHA512",
            p.name()
        );
        assert_eq!(p.index_digests(), ["Size", "SHA256"]);
    }
    // --locked compares only what the index vouched for: it builds.
    let out = tmp.path().join("repo-out");
    against(
        "Debian's archive",
        cmd("build")
            .arg("--locked")
            .arg("--keys")
            .arg(project.join("keys"))
            .arg("--out")
            .arg(&out),
    );
    ok(debforge().arg("verify").arg(&out));
    // This machine's apt verified bookworm's index itself (.ci/run runs
    // apt-get update): the same digests.
    let hello = lock.get("hello", "amd64").unwrap();
    let show = ok(Command::new("apt-cache").arg("show").arg("hello=2.10-3"));
    assert_eq!(apt_show(&show, "SHA256"), hello.sha256());
    assert_eq!(apt_show(&show, "Size"), hello.size.to_string());
}
