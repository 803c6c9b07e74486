//! The CUDA link scripts, run for real by dpkg in an Ubuntu 18.04 root
//! (bionic, from Ubuntu's archive: apt 1.6, dpkg 1.19, gpgv 2.2), and the
//! chroots every end-to-end test uses.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::common::{ok, run};
use crate::support::standin::Lab;

/// The systems a test can install on. Bionic is the lab's client; bookworm
/// (apt 2.6, close to Ubuntu 22.04's) is the newer one. The `*Cares` roots
/// are the releases a lab machine may run, each with its distribution's own
/// c-ares installed from its archive (and, on 24.04, `sssd-common`, which
/// needs it) and apt's lists kept: what must never be downgraded or
/// removed by the lab's stack. BionicPython3 (a lab machine, [`Chroot::new`]),
/// bookworm and the bionic `*Cares` root have python3 (gpu-stack-cu101
/// depends on it for gpu-stack-check's GPU half), as every install but a
/// minimal one; BionicRelease is the bare machine as released, without it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dist {
    Bionic,
    /// Bionic with python3: a lab machine (gpu-stack-cu101 depends on it).
    BionicPython3,
    /// Ubuntu 18.04 as released: minbase from `bionic main` alone (no
    /// updates), the lab's air-gapped machine installed from the ISO.
    BionicRelease,
    Bookworm,
    BionicCares,
    FocalCares,
    JammyCares,
    NobleCares,
    TrixieCares,
}

const UBUNTU: &str = "http://archive.ubuntu.com/ubuntu/";

impl Dist {
    /// The tarball's name: it changes whenever what goes into it does, so an
    /// old cached root is never used for a new recipe.
    fn tarball_name(self) -> &'static str {
        match self {
            Dist::Bionic => "bionic-minbase-apt-gpgv-gnupg-v1.tar",
            Dist::BionicPython3 => "bionic-minbase-apt-gpgv-gnupg-python3-v2.tar",
            Dist::BionicRelease => "bionic-release-main-minbase-apt-v1.tar",
            Dist::Bookworm => "bookworm-minbase-python3-v2.tar",
            Dist::BionicCares => "bionic-minbase-cares-python3-lists-v3.tar",
            Dist::FocalCares => "focal-minbase-cares-lists-v2.tar",
            Dist::JammyCares => "jammy-minbase-cares-lists-v2.tar",
            Dist::NobleCares => "noble-minbase-cares-sssd-lists-v2.tar",
            Dist::TrixieCares => "trixie-minbase-cares-lists-v2.tar",
        }
    }

    /// The five releases of the `*Cares` roots.
    pub const WITH_CARES: [Dist; 5] = [
        Dist::BionicCares,
        Dist::FocalCares,
        Dist::JammyCares,
        Dist::NobleCares,
        Dist::TrixieCares,
    ];

    fn mmdebstrap(self, out: &Path) -> Command {
        let mut c = Command::new("mmdebstrap");
        c.args(["--variant=minbase", "--quiet"]);
        match self {
            Dist::Bionic | Dist::BionicPython3 => {
                let keyring =
                    Path::new(env!("CARGO_MANIFEST_DIR")).join("keys/ubuntu-archive-keyring.gpg");
                c.arg(if self == Dist::Bionic {
                    "--include=apt,gpgv,gnupg"
                } else {
                    "--include=apt,gpgv,gnupg,python3"
                })
                .arg(format!("--keyring={}", keyring.display()))
                .arg("bionic")
                .arg(out)
                .arg(format!("deb {UBUNTU} bionic main"))
                .arg(format!("deb {UBUNTU} bionic-updates main"));
            }
            Dist::BionicRelease => {
                let keyring =
                    Path::new(env!("CARGO_MANIFEST_DIR")).join("keys/ubuntu-archive-keyring.gpg");
                c.arg("--include=apt")
                    .arg(format!("--keyring={}", keyring.display()))
                    .arg("bionic")
                    .arg(out)
                    .arg(format!("deb {UBUNTU} bionic main"));
            }
            Dist::Bookworm => {
                c.arg("--include=python3").arg("bookworm").arg(out);
            }
            Dist::TrixieCares => {
                c.args(["--include=apt,libcares2", "--skip=cleanup/apt/lists"])
                    .arg("trixie")
                    .arg(out);
            }
            Dist::BionicCares | Dist::FocalCares | Dist::JammyCares | Dist::NobleCares => {
                let (suite, include) = match self {
                    Dist::BionicCares => ("bionic", "apt,gpgv,libc-ares2,python3"),
                    Dist::FocalCares => ("focal", "apt,gpgv,libc-ares2"),
                    Dist::JammyCares => ("jammy", "apt,gpgv,libc-ares2"),
                    _ => ("noble", "apt,gpgv,libcares2,sssd-common"),
                };
                let keyring =
                    Path::new(env!("CARGO_MANIFEST_DIR")).join("keys/ubuntu-archive-keyring.gpg");
                c.arg(format!("--include={include}"))
                    .arg("--skip=cleanup/apt/lists")
                    .arg(format!("--keyring={}", keyring.display()))
                    .arg(suite)
                    .arg(out)
                    .arg(format!("deb {UBUNTU} {suite} main"))
                    .arg(format!("deb {UBUNTU} {suite}-updates main"));
            }
        }
        c
    }
}

/// Where test chroots and downloaded corpora are cached between runs:
/// $DEBFORGE_TEST_CACHE, else ~/.cache/debforge-tests (kept across clean
/// clones, so CI builds each root once per machine).
pub fn test_cache() -> PathBuf {
    std::env::var_os("DEBFORGE_TEST_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/debforge-tests"))
        })
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/debforge-tests"))
}

/// A pristine root as one tarball, made once with mmdebstrap (about half a
/// minute) and reused; each test extracts its own copy.
pub fn base_tarball(dist: Dist) -> PathBuf {
    let dir = test_cache().join("chroots");
    fs::create_dir_all(&dir).unwrap();
    let lock = fs::File::create(dir.join(".lock")).unwrap();
    lock.lock().unwrap();
    let tar = dir.join(dist.tarball_name());
    if !tar.exists() {
        // mmdebstrap decides the output format by the name: keep `.tar`.
        let tmp = dir.join(format!("building-{}", dist.tarball_name()));
        let _ = fs::remove_file(&tmp);
        let (code, out, err) = run(&mut dist.mmdebstrap(&tmp));
        assert_eq!(
            code, 0,
            "mmdebstrap could not make the {dist:?} root (is the archive reachable?):\n{out}{err}"
        );
        fs::rename(&tmp, &tar).unwrap();
    }
    tar
}

pub struct Chroot {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub dist: Dist,
}

impl Chroot {
    /// An Ubuntu 18.04 root, the lab's client.
    /// A lab machine: Ubuntu 18.04 with python3.
    pub fn new() -> Chroot {
        Chroot::of(Dist::BionicPython3)
    }

    pub fn of(dist: Dist) -> Chroot {
        let tar = base_tarball(dist);
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        fs::create_dir_all(&root).unwrap();
        ok(Command::new("tar")
            .args(["--numeric-owner", "-xf"])
            .arg(&tar)
            .arg("-C")
            .arg(&root));
        // mmdebstrap's roots lack it; `apt-get purge` needs it for
        // `dpkg --set-selections`.
        let available = root.join("var/lib/dpkg/available");
        if !available.exists() {
            fs::write(&available, "").unwrap();
        }
        Chroot {
            _tmp: tmp,
            root,
            dist,
        }
    }

    /// Runs a command inside; (exit code, stdout+stderr).
    pub fn run(&self, cmd: &str) -> (i32, String) {
        let (code, out, err) = run(Command::new("chroot")
            .arg(&self.root)
            .args(["/bin/sh", "-c", cmd])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"));
        (code, format!("{out}{err}"))
    }

    /// [`Chroot::run`] in a network namespace of its own: no network at
    /// all, as on an air-gapped machine. Where this machine allows no
    /// namespace, a plain chroot (said once on stderr): the tests that use
    /// it set up no apt source but a `file:` one anyway.
    pub fn run_offline(&self, cmd: &str) -> (i32, String) {
        static NAMESPACES: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let can = *NAMESPACES.get_or_init(|| {
            let ok = Command::new("unshare")
                .args(["-n", "true"])
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr(),
                    "NOTE: `unshare -n` is not allowed here: the offline chroot commands keep the network"
                );
            }
            ok
        });
        if !can {
            return self.run(cmd);
        }
        let (code, out, err) = run(Command::new("unshare")
            .arg("-n")
            .arg("chroot")
            .arg(&self.root)
            .args(["/bin/sh", "-c", cmd])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"));
        (code, format!("{out}{err}"))
    }

    pub fn ok_offline(&self, cmd: &str) -> String {
        let (code, out) = self.run_offline(cmd);
        assert_eq!(code, 0, "{cmd} ({:?}, offline):\n{out}", self.dist);
        out
    }

    pub fn ok(&self, cmd: &str) -> String {
        let (code, out) = self.run(cmd);
        assert_eq!(code, 0, "{cmd} ({:?}):\n{out}", self.dist);
        out
    }

    pub fn put(&self, file: &Path) -> String {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        fs::copy(file, self.root.join("tmp").join(&name)).unwrap();
        format!("/tmp/{name}")
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.root.join(p.trim_start_matches('/'))
    }
}

#[test]
fn the_test_root_is_ubuntu_18_04() {
    let c = Chroot::new();
    let versions = c.ok("dpkg-query -W -f='${Package} ${Version}\\n' apt dpkg gpgv");
    assert!(versions.contains("apt 1.6."), "{versions}");
    assert!(versions.contains("dpkg 1.19.0.5"), "{versions}");
    assert!(versions.contains("gpgv 2.2.4"), "{versions}");
    let release = fs::read_to_string(c.path("/etc/lsb-release")).unwrap();
    assert!(release.contains("DISTRIB_RELEASE=18.04"), "{release}");
}

/// The lab's NCCL packages repacked through the shipped recipes' scripts.
fn repacked_nccl() -> (Lab, PathBuf, PathBuf) {
    let lab = Lab::new();
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes");
    fs::create_dir_all(lab.recipes.join("scripts")).unwrap();
    for s in ["cuda-links.postinst", "cuda-links.postrm"] {
        fs::copy(
            shipped.join("scripts").join(s),
            lab.recipes.join("scripts").join(s),
        )
        .unwrap();
    }
    for p in ["libnccl2", "libnccl-dev"] {
        let text = fs::read_to_string(shipped.join(format!("packages/{p}.toml"))).unwrap();
        fs::write(lab.recipes.join(format!("packages/{p}.toml")), text).unwrap();
    }
    let out = lab.dir.path().join("repo-out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    let pool = out.join("pool/main/libn");
    let a = pool.join("libnccl2/libnccl2_2.4.2-1+cuda10.1+debforge1_amd64.deb");
    let b = pool.join("libnccl-dev/libnccl-dev_2.4.2-1+cuda10.1+debforge1_amd64.deb");
    (lab, a, b)
}

#[test]
fn link_scripts_install_reconfigure_upgrade_remove_and_purge() {
    let (_lab, nccl, dev) = repacked_nccl();
    let c = Chroot::new();
    let (a, b) = (c.put(&nccl), c.put(&dev));

    // /usr/local/cuda absent: created, linked, recorded.
    c.ok(&format!("dpkg -i {a} {b}"));
    let link = "/usr/local/cuda/nccl/lib/libnccl.so.2";
    assert_eq!(
        fs::read_link(c.path(link)).unwrap(),
        Path::new("/usr/lib/x86_64-linux-gnu/libnccl.so.2")
    );
    assert!(
        c.path("/usr/lib/x86_64-linux-gnu/libnccl.so.2").exists(),
        "the link resolves"
    );
    c.ok(&format!(
        "test -e {link} && test -e /usr/local/cuda/nccl/lib/libnccl.so"
    ));

    // Re-configure and reinstall (an upgrade to the same version): harmless.
    c.ok("/var/lib/dpkg/info/libnccl2.postinst configure 2.4.2-1+cuda10.1+debforge1");
    c.ok(&format!("dpkg -i {a}"));
    let dirs = fs::read_to_string(c.path("/var/lib/debforge/cuda-links/dirs")).unwrap();
    assert_eq!(
        dirs.lines().count(),
        3,
        "each created directory listed once: {dirs}"
    );

    // A real upgrade, 2.4.2 -> 2.4.8 (repacked the same way): the link stays ours.
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes/scripts");
    let work = _lab.dir.path().join("upgrade");
    fs::create_dir_all(&work).unwrap();
    let links = "/usr/local/cuda/nccl/lib/libnccl.so.2=/usr/lib/x86_64-linux-gnu/libnccl.so.2";
    for s in ["postinst", "postrm"] {
        let text = fs::read_to_string(scripts.join(format!("cuda-links.{s}")))
            .unwrap()
            .replace("@LINKS@", links);
        fs::write(work.join(s), text).unwrap();
    }
    let newer = work.join("libnccl2_2.4.8-1+cuda10.1_amd64.deb");
    ok(crate::support::common::debforge()
        .args(["deb", "repack"])
        .arg(
            _lab.www()
                .join("nvidia/libnccl2_2.4.8-1+cuda10.1_amd64.deb"),
        )
        .arg("-o")
        .arg(&newer)
        .arg("--postinst")
        .arg(work.join("postinst"))
        .arg("--postrm")
        .arg(work.join("postrm")));
    let n = c.put(&newer);
    c.ok(&format!("dpkg -i {n}"));
    assert_eq!(
        fs::read_link(c.path(link)).unwrap(),
        Path::new("/usr/lib/x86_64-linux-gnu/libnccl.so.2")
    );
    assert_eq!(
        fs::read_link(c.path("/usr/lib/x86_64-linux-gnu/libnccl.so.2")).unwrap(),
        Path::new("libnccl.so.2.4.8")
    );
    c.ok("dpkg -i /tmp/libnccl2_2.4.2-1+cuda10.1+debforge1_amd64.deb");

    // Removing one keeps what the other still uses; removing both leaves nothing of ours.
    c.ok("dpkg -r libnccl-dev");
    c.ok(&format!("test -e {link}"));
    assert!(!c.path("/usr/local/cuda/nccl/lib/libnccl.so").exists());
    c.ok("dpkg -r libnccl2");
    assert!(
        !c.path("/usr/local/cuda").exists(),
        "the directories we created are gone"
    );
    assert!(!c.path("/var/lib/debforge").exists());
    c.ok("dpkg -P libnccl2 libnccl-dev");
    let (code, _) = c.run("dpkg -s libnccl2");
    assert_ne!(code, 0);
}

#[test]
fn link_scripts_never_replace_what_is_not_theirs_and_follow_a_cuda_symlink() {
    let (_lab, nccl, _dev) = repacked_nccl();
    let c = Chroot::new();
    let a = c.put(&nccl);

    // A CUDA install with /usr/local/cuda -> cuda-10.1, and a regular file
    // where our link would go.
    c.ok("mkdir -p /usr/local/cuda-10.1/nccl/lib && ln -s cuda-10.1 /usr/local/cuda && echo mine > /usr/local/cuda/nccl/lib/libnccl.so.2");
    let out = c.ok(&format!("dpkg -i {a} 2>&1"));
    assert!(
        out.contains("exists and is not a link; leaving it"),
        "{out}"
    );
    assert_eq!(
        fs::read_to_string(c.path("/usr/local/cuda-10.1/nccl/lib/libnccl.so.2")).unwrap(),
        "mine\n"
    );
    c.ok("dpkg -P libnccl2");
    assert_eq!(
        fs::read_to_string(c.path("/usr/local/cuda-10.1/nccl/lib/libnccl.so.2")).unwrap(),
        "mine\n"
    );
    assert!(
        fs::symlink_metadata(c.path("/usr/local/cuda"))
            .unwrap()
            .file_type()
            .is_symlink()
    );

    // Without the file: the link goes into the CUDA install, through the symlink.
    c.ok("rm /usr/local/cuda/nccl/lib/libnccl.so.2 && rmdir /usr/local/cuda-10.1/nccl/lib /usr/local/cuda-10.1/nccl");
    c.ok(&format!("dpkg -i {a}"));
    assert!(
        fs::symlink_metadata(c.path("/usr/local/cuda-10.1/nccl/lib/libnccl.so.2"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    c.ok("dpkg -r libnccl2");
    assert!(
        !c.path("/usr/local/cuda-10.1/nccl").exists(),
        "created inside the CUDA install, removed again"
    );
    assert!(
        c.path("/usr/local/cuda-10.1").is_dir(),
        "the CUDA install itself stays"
    );

    // A failed configure (here: /usr/local/cuda is a file, so no directory
    // can be made under it) leaves the package half-configured; once the
    // cause is gone, `dpkg --configure -a` completes it cleanly.
    c.ok("dpkg -P libnccl2 && rm /usr/local/cuda && echo not-a-dir > /usr/local/cuda");
    let (code, out) = c.run(&format!("dpkg -i {a}"));
    assert_ne!(code, 0, "{out}");
    let status = c.ok("dpkg-query -W -f='${db:Status-Abbrev}' libnccl2");
    assert!(status.starts_with("iF"), "half-configured: {status:?}");
    c.ok("rm /usr/local/cuda && ln -s cuda-10.1 /usr/local/cuda && dpkg --configure -a");
    assert!(
        fs::symlink_metadata(c.path("/usr/local/cuda-10.1/nccl/lib/libnccl.so.2"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    c.ok("dpkg -r libnccl2");

    // A link that points elsewhere is left alone too.
    c.ok("mkdir -p /usr/local/cuda/nccl/lib && ln -s /opt/other/libnccl.so.2 /usr/local/cuda/nccl/lib/libnccl.so.2");
    let out = c.ok(&format!("dpkg -i {a} 2>&1"));
    assert!(out.contains("points to /opt/other/libnccl.so.2"), "{out}");
    c.ok("dpkg -r libnccl2");
    assert_eq!(
        fs::read_link(c.path("/usr/local/cuda/nccl/lib/libnccl.so.2")).unwrap(),
        Path::new("/opt/other/libnccl.so.2")
    );
}
