//! A stand-in for the upstreams, served over loopback: NVIDIA's flat
//! machine-learning repository (same package names, versions and file paths,
//! tiny fake libraries) and an Ubuntu-style dists repository, indexed by the
//! real `apt-ftparchive` and signed by the real `gpg` with a test key.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::support::common::{EPOCH, debforge, ok, run};
use crate::support::server::Server;

/// A throwaway GnuPG home with one signing key.
pub struct TestKey {
    pub home: PathBuf,
    pub fingerprint: String,
    /// The armored public key.
    pub public: Vec<u8>,
    /// gpg's `--faked-system-time` for everything this key does.
    faked_time: Option<&'static str>,
}

impl TestKey {
    fn generate(dir: &Path, uid: &str) -> TestKey {
        TestKey::generate_at(dir, uid, None, "never")
    }

    /// A key made at `faked_time` (gpg's `--faked-system-time`), valid for
    /// `expire` (`never`, `1d`, …).
    fn generate_at(
        dir: &Path,
        uid: &str,
        faked_time: Option<&'static str>,
        expire: &str,
    ) -> TestKey {
        let home = dir.to_path_buf();
        fs::create_dir_all(&home).unwrap();
        fs::set_permissions(&home, fs::Permissions::from_mode(0o700)).unwrap();
        let gpg = |args: &[&str]| {
            let mut c = Command::new("gpg");
            c.arg("--homedir").arg(&home).args(["--batch", "--quiet"]);
            if let Some(t) = faked_time {
                c.args(["--faked-system-time", t]);
            }
            ok(c.args(args))
        };
        gpg(&[
            "--pinentry-mode",
            "loopback",
            "--passphrase",
            "",
            "--quick-gen-key",
            uid,
            "ed25519",
            "sign",
            expire,
        ]);
        let listing = gpg(&["--with-colons", "--list-keys", uid]);
        let fingerprint = listing
            .lines()
            .find_map(|l| l.strip_prefix("fpr:"))
            .unwrap()
            .trim_matches(':')
            .to_string();
        let public = gpg(&["--armor", "--export", &fingerprint]).into_bytes();
        stop_agent(&home);
        TestKey {
            home,
            fingerprint,
            public,
            faked_time,
        }
    }

    /// A key made on 2020-01-01 that expired a day later; it signs as of
    /// 2020-01-01 06:00, when it was still valid.
    pub fn expired() -> &'static TestKey {
        static KEY: OnceLock<(tempfile::TempDir, TestKey)> = OnceLock::new();
        &KEY.get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let key = TestKey::generate_at(
                &dir.path().join("gnupg"),
                "expired upstream <expired@example.org>",
                Some("20200101T000000!"),
                "1d",
            );
            (
                dir,
                TestKey {
                    faked_time: Some("20200101T060000!"),
                    ..key
                },
            )
        })
        .1
    }

    /// The key of every stand-in (generated once per test run).
    pub fn shared() -> &'static TestKey {
        static KEY: OnceLock<(tempfile::TempDir, TestKey)> = OnceLock::new();
        &KEY.get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let key = TestKey::generate(
                &dir.path().join("gnupg"),
                "debforge upstream test <upstream@example.org>",
            );
            (dir, key)
        })
        .1
    }

    /// Another key, for "signed by the wrong key" cases.
    pub fn other() -> &'static TestKey {
        static KEY: OnceLock<(tempfile::TempDir, TestKey)> = OnceLock::new();
        &KEY.get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let key =
                TestKey::generate(&dir.path().join("gnupg"), "someone else <else@example.org>");
            (dir, key)
        })
        .1
    }

    fn gpg(&self) -> Command {
        let mut c = Command::new("gpg");
        c.arg("--homedir").arg(&self.home).args([
            "--batch",
            "--yes",
            "--quiet",
            "--pinentry-mode",
            "loopback",
            "--passphrase",
            "",
        ]);
        if let Some(t) = self.faked_time {
            c.args(["--faked-system-time", t]);
        }
        c.args(["--local-user", &self.fingerprint, "--digest-algo", "SHA512"]);
        c
    }

    /// Writes `Release.gpg` (detached, armored) next to `release`.
    pub fn sign_detached(&self, release: &Path) {
        let _gpg = gpg_lock();
        let out = release.with_file_name("Release.gpg");
        self.sign(&["--armor", "--detach-sign", "--output"], &out, release);
    }

    /// Writes `InRelease` (cleartext-signed) next to `release`.
    pub fn sign_inline(&self, release: &Path) {
        let _gpg = gpg_lock();
        let out = release.with_file_name("InRelease");
        self.sign(&["--clearsign", "--output"], &out, release);
    }

    /// One signature, tried up to three times: gpg starts a fresh agent for
    /// each use, and one that loses its agent mid-use fails with "signing
    /// failed: Broken pipe" (CI met it once) with nothing wrong in the input.
    fn sign(&self, args: &[&str], out: &Path, release: &Path) {
        let mut last = String::new();
        for _ in 0..3 {
            let (code, _, err) = run(self.gpg().args(args).arg(out).arg(release));
            stop_agent(&self.home);
            if code == 0 {
                return;
            }
            last = err;
        }
        panic!(
            "gpg could not sign {} three times:\n{last}",
            release.display()
        );
    }
}

/// One gpg use of a stand-in key at a time: tests run in parallel, and the
/// agent stopped after one use must not be stopped under another.
pub fn gpg_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The stand-in keys live for the whole run in static homes that are never
/// dropped: their gpg-agent is stopped after each use, so none outlives the
/// suite (the next gpg call starts it again).
///
/// `gpgconf --kill` only asks the agent to exit; the next gpg call could
/// reach the dying agent's socket, so this waits (up to 5 s) for the agent
/// to remove it.
fn stop_agent(home: &Path) {
    let socket = Command::new("gpgconf")
        .arg("--homedir")
        .arg(home)
        .args(["--list-dirs", "agent-socket"])
        .output()
        .ok()
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let _ = Command::new("gpgconf")
        .arg("--homedir")
        .arg(home)
        .args(["--kill", "gpg-agent"])
        .status();
    let Some(socket) = socket.filter(|s| !s.as_os_str().is_empty()) else {
        return;
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while socket.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A fake package at the real paths.
pub struct FakeDeb {
    pub name: &'static str,
    pub version: &'static str,
    pub depends: &'static str,
    /// Other control fields, verbatim (`Provides: …\n`); VERSION is replaced.
    pub other: &'static str,
    pub files: Vec<(String, Vec<u8>)>,
    pub links: Vec<(String, String)>,
    /// Maintainer scripts (name, text).
    pub scripts: Vec<(&'static str, String)>,
}

/// A real, tiny shared library with `soname` (so ldconfig lists it), built
/// once per test run with the C compiler, with `code` (C) in it: a stand-in's own functions, such as
/// `ncclGetVersion`, so that a check loading it can call them.
pub fn shared_lib_with(soname: &str, code: &str) -> Vec<u8> {
    use std::collections::HashMap;
    use std::sync::Mutex;
    /// Built libraries by (soname, code).
    type Built = HashMap<(String, String), Vec<u8>>;
    static LIBS: OnceLock<Mutex<Built>> = OnceLock::new();
    let libs = LIBS.get_or_init(Default::default);
    let key = (soname.to_string(), code.to_string());
    if let Some(b) = libs.lock().unwrap().get(&key) {
        return b.clone();
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("stub.c");
    fs::write(
        &src,
        format!(
            "#include <stddef.h>\nint debforge_stub_{}(void) {{ return 0; }}\n{code}\n",
            soname.replace(['.', '-'], "_")
        ),
    )
    .unwrap();
    let out = dir.path().join("lib.so");
    ok(Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&out)
        .arg(format!("-Wl,-soname,{soname}"))
        .arg(&src));
    let bytes = fs::read(out).unwrap();
    libs.lock().unwrap().insert(key, bytes.clone());
    bytes
}

/// `ncclGetVersion`'s code for NCCL `x.y.z` (major*10000 + minor*100 +
/// patch since 2.9, major*1000 + minor*100 + patch before), and
/// `cudnnGetVersion`'s for cuDNN (the same change at 9).
fn version_code(short: &str, ten_thousands_from: (u32, u32)) -> u32 {
    let v: Vec<u32> = short
        .split('.')
        .take(3)
        .map(|p| p.parse().unwrap())
        .collect();
    if (v[0], v[1]) >= ten_thousands_from {
        v[0] * 10000 + v[1] * 100 + v[2]
    } else {
        v[0] * 1000 + v[1] * 100 + v[2]
    }
}

/// A stand-in libnccl.so.2 whose `ncclGetVersion` says `short`.
pub fn nccl_lib(short: &str) -> Vec<u8> {
    let code = version_code(short, (2, 9));
    shared_lib_with(
        "libnccl.so.2",
        &format!("int ncclGetVersion(int *v) {{ *v = {code}; return 0; }}"),
    )
}

/// A stand-in libcudnn.so.N whose `cudnnGetVersion` says `short`.
pub fn cudnn_lib(short: &str) -> Vec<u8> {
    let code = version_code(short, (9, 0));
    let major = short.split('.').next().unwrap();
    shared_lib_with(
        &format!("libcudnn.so.{major}"),
        &format!("size_t cudnnGetVersion(void) {{ return {code}; }}"),
    )
}

pub fn nvidia_debs(cudnn: &'static str, nccl: &'static str) -> Vec<FakeDeb> {
    let cudnn_short = cudnn.split('-').next().unwrap();
    let cudnn_so: String = cudnn_short.split('.').take(3).collect::<Vec<_>>().join(".");
    let nccl_short: String = nccl.split('-').next().unwrap().to_string();
    let lib = "usr/lib/x86_64-linux-gnu";
    let fake = |what: &str| format!("\x7fELF fake {what}\n").into_bytes();
    let mut parts = cudnn_short.split('.');
    let (major, minor, patch) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let header = format!(
        "#define CUDNN_MAJOR {major}\n#define CUDNN_MINOR {minor}\n#define CUDNN_PATCHLEVEL {patch}\n"
    );
    // As NVIDIA's libcudnn7-dev does: the header and the development link
    // through the alternatives system.
    let alternatives_postinst = format!(
        "#!/bin/sh\nset -e\nupdate-alternatives --install /usr/include/cudnn.h libcudnn /usr/include/x86_64-linux-gnu/cudnn_v7.h 110 --slave /{lib}/libcudnn.so libcudnn_so /{lib}/libcudnn.so.7 --slave /{lib}/libcudnn_static.a libcudnn_stlib /{lib}/libcudnn_static_v7.a\n"
    );
    let alternatives_prerm = "#!/bin/sh\nset -e\nif [ \"$1\" = remove ]; then update-alternatives --remove libcudnn /usr/include/x86_64-linux-gnu/cudnn_v7.h; fi\n".to_string();
    vec![
        FakeDeb {
            name: "libcudnn7",
            version: cudnn,
            depends: "",
            other: "",
            files: vec![(
                format!("{lib}/libcudnn.so.{cudnn_so}"),
                cudnn_lib(&cudnn_so),
            )],
            links: vec![(
                format!("{lib}/libcudnn.so.7"),
                format!("libcudnn.so.{cudnn_so}"),
            )],
            scripts: vec![],
        },
        FakeDeb {
            name: "libcudnn7-dev",
            version: cudnn,
            depends: "libcudnn7 (= VERSION)",
            other: "",
            files: vec![
                (
                    "usr/include/x86_64-linux-gnu/cudnn_v7.h".into(),
                    header.into_bytes(),
                ),
                (format!("{lib}/libcudnn_static_v7.a"), fake("static")),
            ],
            links: vec![],
            scripts: vec![
                ("postinst", alternatives_postinst),
                ("prerm", alternatives_prerm),
            ],
        },
        FakeDeb {
            name: "libcudnn7-doc",
            version: cudnn,
            // As NVIDIA's: the samples need the headers, exactly.
            depends: "libcudnn7-dev (= VERSION)",
            other: "",
            files: vec![(
                "usr/src/cudnn_samples_v7/mnistCUDNN/Makefile".into(),
                b"all:\n".to_vec(),
            )],
            links: vec![],
            scripts: vec![],
        },
        FakeDeb {
            name: "libnccl2",
            version: nccl,
            depends: "libc6 (>= 2.3.4), libgcc1 (>= 1:3.0), libstdc++6 (>= 4.1.1)",
            other: "",
            files: vec![(
                format!("{lib}/libnccl.so.{nccl_short}"),
                nccl_lib(&nccl_short),
            )],
            links: vec![(
                format!("{lib}/libnccl.so.2"),
                format!("libnccl.so.{nccl_short}"),
            )],
            scripts: vec![],
        },
        FakeDeb {
            name: "libnccl-dev",
            version: nccl,
            depends: "libnccl2 (= VERSION)",
            other: "",
            files: vec![(
                "usr/include/nccl.h".into(),
                b"#define NCCL_MAJOR 2\n".to_vec(),
            )],
            links: vec![(format!("{lib}/libnccl.so"), "libnccl.so.2".into())],
            scripts: vec![],
        },
    ]
}

/// NVIDIA's current packages for CUDA 13 (ubuntu2404), with the relations
/// read from the real ones on the H200 machine (FACTS.md and tests/gpu's
/// run): cuDNN 9 split into runtime, -dev and -headers, -dev depending on
/// both exactly, each providing, conflicting with and replacing its
/// virtual name (`libcudnn9`, `libcudnn9-dev`, `libcudnn9-headers`); NCCL
/// as before.
pub fn cuda13_debs(cudnn: &'static str, nccl: &'static str) -> Vec<FakeDeb> {
    let lib = "usr/lib/x86_64-linux-gnu";
    let inc = "usr/include/x86_64-linux-gnu";
    let cudnn_so: String = cudnn
        .split('-')
        .next()
        .unwrap()
        .split('.')
        .take(3)
        .collect::<Vec<_>>()
        .join(".");
    let mut parts = cudnn_so.split('.');
    let (major, minor, patch) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let nccl_short = nccl.split('-').next().unwrap();
    vec![
        FakeDeb {
            name: "libcudnn9-cuda-13",
            version: cudnn,
            depends: "zlib1g",
            other: "Section: multiverse/libs\nSource: cudnn\nProvides: libcudnn9\nConflicts: libcudnn9\nReplaces: libcudnn9\n",
            files: vec![(
                format!("{lib}/libcudnn.so.{cudnn_so}"),
                cudnn_lib(&cudnn_so),
            )],
            links: vec![(format!("{lib}/libcudnn.so.9"), format!("libcudnn.so.{cudnn_so}"))],
            scripts: vec![],
        },
        FakeDeb {
            name: "libcudnn9-headers-cuda-13",
            version: cudnn,
            depends: "",
            other: "Source: cudnn\nProvides: libcudnn9-headers\nConflicts: libcudnn8-dev, libcudnn9-dev-cuda-12 (<< 9.14.0.64), libcudnn9-headers\nReplaces: libcudnn9-dev-cuda-12 (<< 9.14.0.64), libcudnn9-headers\nBreaks: libcudnn9-dev-cuda-12 (<< 9.14.0.64)\n",
            files: vec![(
                format!("{inc}/cudnn_version_v9.h"),
                format!("#define CUDNN_MAJOR {major}\n#define CUDNN_MINOR {minor}\n#define CUDNN_PATCHLEVEL {patch}\n").into_bytes(),
            )],
            links: vec![(format!("{inc}/cudnn_version.h"), "cudnn_version_v9.h".into())],
            scripts: vec![],
        },
        FakeDeb {
            name: "libcudnn9-dev-cuda-13",
            version: cudnn,
            depends: "libcudnn9-headers-cuda-13 (= VERSION), libcudnn9-cuda-13 (= VERSION)",
            other: "Source: cudnn\nProvides: libcudnn9-dev\nConflicts: libcudnn9-dev, libcudnn9-jit, libcudnn9-jit-dev, libcudnn9-jit-static\nReplaces: libcudnn9-dev\nBreaks: libcudnn9-dev-cuda-12 (<< 9.14.0.64)\n",
            files: vec![],
            links: vec![(format!("{lib}/libcudnn.so"), "libcudnn.so.9".into())],
            scripts: vec![(
                "preinst",
                "#!/bin/sh\nset -ex\nupdate-alternatives --remove-all libcudnn >/dev/null 2>&1 || true\n".into(),
            )],
        },
        FakeDeb {
            name: "libnccl2",
            version: nccl,
            depends: "libc6 (>= 2.38), libgcc-s1 (>= 3.4), libstdc++6 (>= 12)",
            other: "Section: libs\nSource: nccl\n",
            files: vec![(format!("{lib}/libnccl.so.{nccl_short}"), nccl_lib(nccl_short))],
            links: vec![(format!("{lib}/libnccl.so.2"), format!("libnccl.so.{nccl_short}"))],
            scripts: vec![],
        },
        FakeDeb {
            name: "libnccl-dev",
            version: nccl,
            depends: "libc6 (>= 2.38), libnccl2 (= VERSION)",
            other: "Section: libdevel\nSource: nccl\n",
            files: vec![("usr/include/nccl.h".into(), b"#define NCCL_MAJOR 2\n".to_vec())],
            links: vec![(format!("{lib}/libnccl.so"), "libnccl.so.2".into())],
            scripts: vec![],
        },
    ]
}

/// The flat stand-in of NVIDIA's CUDA repository for ubuntu2404 under
/// `root/cuda13/`: the current versions and an older cuDNN 9 (which must
/// not be picked), `Release` + `Release.gpg`.
pub fn cuda13_repo(root: &Path, work: &Path, key: &TestKey) {
    let debs = cuda13_debs("9.14.0.64-1", "2.28.3-1+cuda13.0")
        .into_iter()
        .chain(cuda13_debs("9.10.2.21-1", "2.27.7-1+cuda13.0"));
    nvidia_flat(&root.join("cuda13"), debs, work, key);
}

/// A flat repository signed as NVIDIA's are: the debs, `Packages` (also
/// .xz and .gz), `Release` with NVIDIA's Origin and Label, `Release.gpg`.
fn nvidia_flat(repo: &Path, debs: impl Iterator<Item = FakeDeb>, work: &Path, key: &TestKey) {
    for deb in debs {
        build_deb(&deb, "amd64", repo, work);
    }
    write_packages(repo, ".", &repo.join("Packages"), true);
    let release = write_release(
        repo,
        &[
            ("Origin", "NVIDIA"),
            ("Label", "NVIDIA CUDA"),
            ("Architecture", "x86_64"),
        ],
    );
    key.sign_detached(&release);
}

/// Builds a fake deb with debforge into `dir`; returns its file name.
pub fn build_deb(deb: &FakeDeb, arch: &str, dir: &Path, work: &Path) -> String {
    let tree = work.join(format!("tree-{}-{}", deb.name, deb.version));
    let _ = fs::remove_dir_all(&tree);
    fs::create_dir_all(tree.join("DEBIAN")).unwrap();
    let depends = if deb.depends.is_empty() {
        String::new()
    } else {
        format!("Depends: {}\n", deb.depends.replace("VERSION", deb.version))
    };
    let other = deb.other.replace("VERSION", deb.version);
    fs::write(
        tree.join("DEBIAN/control"),
        format!("Package: {}\nVersion: {}\nArchitecture: {arch}\nMaintainer: cudatools <cudatools@nvidia.com>\n{other}{depends}Description: stand-in for {}\n", deb.name, deb.version, deb.name),
    )
    .unwrap();
    for (path, data) in &deb.files {
        let p = tree.join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, data).unwrap();
    }
    for (name, text) in &deb.scripts {
        let p = tree.join("DEBIAN").join(name);
        fs::write(&p, text).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    }
    for (path, target) in &deb.links {
        let p = tree.join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, p).unwrap();
    }
    let file = format!("{}_{}_{arch}.deb", deb.name, deb.version);
    fs::create_dir_all(dir).unwrap();
    ok(debforge()
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .args(["deb", "build"])
        .arg(&tree)
        .arg("-o")
        .arg(dir.join(&file)));
    file
}

/// Runs `apt-ftparchive packages` in `root` over `dir` (relative), writing
/// `index` (plus `.xz`/`.gz` when asked).
pub fn write_packages(root: &Path, dir: &str, index: &Path, compressed: bool) {
    let out = ok(Command::new("apt-ftparchive")
        .arg("packages")
        .arg(dir)
        .current_dir(root));
    fs::create_dir_all(index.parent().unwrap()).unwrap();
    fs::write(index, &out).unwrap();
    if compressed {
        ok(Command::new("xz").args(["-k", "-f"]).arg(index));
        ok(Command::new("gzip")
            .args(["-k", "-f", "-9", "-n"])
            .arg(index));
    }
}

/// Runs `apt-ftparchive release` over `dir`, with extra `-o` settings.
pub fn write_release(dir: &Path, settings: &[(&str, &str)]) -> PathBuf {
    let mut cmd = Command::new("apt-ftparchive");
    for (k, v) in settings {
        cmd.arg("-o")
            .arg(format!("APT::FTPArchive::Release::{k}={v}"));
    }
    let out = ok(cmd.arg("release").arg(".").current_dir(dir));
    let release = dir.join("Release");
    let _ = fs::remove_file(&release);
    fs::write(&release, out).unwrap();
    release
}

/// Rewrites a Release file's paragraph in place (before signing).
pub fn edit_release(release: &Path, edit: impl FnOnce(&mut debforge::format::ControlParagraph)) {
    let text = fs::read_to_string(release).unwrap();
    let mut p = debforge::format::ControlParagraph::parse_single(&text).unwrap();
    edit(&mut p);
    fs::write(release, p.to_string()).unwrap();
}

/// The flat NVIDIA stand-in under `root/nvidia/`: the lab's versions plus a
/// newer cuDNN (which must not be picked), `Release` + `Release.gpg`.
pub fn flat_repo(root: &Path, work: &Path, key: &TestKey) {
    let debs = nvidia_debs("7.5.0.56-1+cuda10.1", "2.4.2-1+cuda10.1")
        .into_iter()
        .chain(nvidia_debs("7.6.5.32-1+cuda10.1", "2.4.8-1+cuda10.1"));
    nvidia_flat(&root.join("nvidia"), debs, work, key);
}

/// The Ubuntu-style stand-in under `root/ubuntu/`: `dists/bionic-updates`
/// with `InRelease`, the debs in `pool/`.
pub fn dists_repo(root: &Path, work: &Path, key: &TestKey, valid_until: Option<&str>) {
    let repo = root.join("ubuntu");
    let pool = repo.join("pool/main/c/c-ares");
    for (name, files) in [
        (
            "libc-ares2",
            vec![(
                "usr/lib/x86_64-linux-gnu/libcares.so.2.2.0".to_string(),
                b"\x7fELF cares\n".to_vec(),
            )],
        ),
        (
            "libc-ares-dev",
            vec![("usr/include/ares.h".to_string(), b"/* ares */\n".to_vec())],
        ),
    ] {
        // As Ubuntu's: the -dev package needs its library exactly.
        let depends = if name == "libc-ares-dev" {
            "libc-ares2 (= VERSION)"
        } else {
            "libc6 (>= 2.17)"
        };
        let deb = FakeDeb {
            name,
            version: "1.14.0-1ubuntu0.2",
            depends,
            other: "",
            files,
            links: vec![],
            scripts: vec![],
        };
        build_deb(&deb, "amd64", &pool, work);
    }
    let dist = repo.join("dists/bionic-updates");
    write_packages(
        &repo,
        "pool",
        &dist.join("main/binary-amd64/Packages"),
        true,
    );
    let settings = [
        ("Suite", "bionic-updates"),
        ("Codename", "bionic"),
        ("Components", "main"),
        ("Architectures", "amd64"),
    ];
    let release = write_release(&dist, &settings);
    if let Some(v) = valid_until {
        edit_release(&release, |p| p.insert_after("Date", "Valid-Until", v));
    }
    key.sign_inline(&release);
    fs::remove_file(&release).unwrap();
}

/// A project (recipes/, keys/) that asks for the lab's packages from both
/// stand-ins served by `server`.
pub fn project(dir: &Path, server: &Server, key: &TestKey, archive: bool) -> PathBuf {
    let recipes = dir.join("recipes");
    fs::create_dir_all(recipes.join("packages")).unwrap();
    fs::create_dir_all(dir.join("keys")).unwrap();
    ok(debforge()
        .arg("keygen")
        .arg("--keys")
        .arg(dir.join("keys"))
        .args(["--name", "lab test repository"]));
    fs::write(dir.join("keys/upstream.asc"), &key.public).unwrap();
    fs::write(
        recipes.join("sources.toml"),
        format!(
            "[source.nvidia-ml]\nurl = \"{}\"\nlayout = \"flat\"\nkey = \"keys/upstream.asc\"\nfingerprint = \"{fp}\"\narchive = true\n\n\
             [source.ubuntu-bionic-updates]\nurl = \"{}\"\nlayout = \"dists\"\nsuite = \"bionic-updates\"\ncomponent = \"main\"\nkey = \"keys/upstream.asc\"\nfingerprint = \"{fp}\"\narchive = {archive}\n",
            server.url("nvidia/"),
            server.url("ubuntu/"),
            fp = key.fingerprint
        ),
    )
    .unwrap();
    for (name, version, source) in [
        ("libcudnn7", "7.5.0.56-1+cuda10.1", "nvidia-ml"),
        ("libcudnn7-dev", "7.5.0.56-1+cuda10.1", "nvidia-ml"),
        ("libcudnn7-doc", "7.5.0.56-1+cuda10.1", "nvidia-ml"),
        ("libnccl2", "2.4.2-1+cuda10.1", "nvidia-ml"),
        ("libnccl-dev", "2.4.2-1+cuda10.1", "nvidia-ml"),
        ("libc-ares2", "1.14.0-1ubuntu0.2", "ubuntu-bionic-updates"),
        (
            "libc-ares-dev",
            "1.14.0-1ubuntu0.2",
            "ubuntu-bionic-updates",
        ),
    ] {
        fs::write(
            recipes.join(format!("packages/{name}.toml")),
            // NVIDIA's builds kept as they are: pinned by the recipe, as
            // nothing here (no repack, no metapackage) makes them exact.
            format!(
                "name = \"{name}\"\nversion = \"{version}\"\narchitecture = \"amd64\"\nfrom = {{ source = \"{source}\" }}\naction = \"keep\"\n{}",
                if source == "nvidia-ml" { "pin = true\n" } else { "" }
            ),
        )
        .unwrap();
    }
    recipes
}

/// Everything a fetch test needs: served stand-ins and a project.
pub struct Lab {
    pub dir: tempfile::TempDir,
    pub server: Server,
    pub recipes: PathBuf,
    pub cache: PathBuf,
}

impl Lab {
    pub fn new() -> Lab {
        Lab::with(|_, _| {})
    }

    /// `tweak(root, work)` may change the served files before the project is made.
    pub fn with(tweak: impl FnOnce(&Path, &Path)) -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("www");
        let work = dir.path().join("work");
        let key = TestKey::shared();
        flat_repo(&root, &work, key);
        dists_repo(&root, &work, key, None);
        tweak(&root, &work);
        let server = Server::start(root);
        let recipes = project(&dir.path().join("project"), &server, key, false);
        let cache = dir.path().join("cache");
        Lab {
            dir,
            server,
            recipes,
            cache,
        }
    }

    /// Adds the shipped gpu-stack-cu101 recipe (and its files), depending
    /// only on libcudnn7 and libnccl2, which this lab has; returns its text.
    pub fn add_small_metapackage(&self) -> String {
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes");
        fs::create_dir_all(self.recipes.join("files")).unwrap();
        for f in ["copyright", "gpu-stack-check", "gpu_check.py"] {
            fs::copy(
                shipped.join("files").join(f),
                self.recipes.join("files").join(f),
            )
            .unwrap();
        }
        let meta = fs::read_to_string(shipped.join("packages/gpu-stack-cu101.toml"))
            .unwrap()
            .replace(
                "depends-exact = [\"libcudnn7\", \"libcudnn7-dev\", \"libnccl2\", \"libnccl-dev\"]",
                "depends-exact = [\"libcudnn7\", \"libnccl2\"]",
            );
        fs::write(self.recipes.join("packages/gpu-stack-cu101.toml"), &meta).unwrap();
        meta
    }

    /// `debforge build --recipes … --cache … --keys KEYS` (another keys
    /// directory than the lab's).
    pub fn build_with_keys(&self, keys: &Path) -> Command {
        let mut c = debforge();
        c.arg("build")
            .arg("--recipes")
            .arg(&self.recipes)
            .arg("--cache")
            .arg(&self.cache)
            .arg("--keys")
            .arg(keys);
        c
    }

    /// `debforge <cmd> --recipes … --cache …` with fast retries and timeouts.
    pub fn cmd(&self, sub: &str) -> Command {
        let mut c = debforge();
        c.arg(sub)
            .arg("--recipes")
            .arg(&self.recipes)
            .arg("--cache")
            .arg(&self.cache);
        c.args(["--retry-wait", "0.05", "--timeout", "2"]);
        if sub == "build" {
            c.arg("--keys").arg(self.keys());
        }
        c
    }

    /// The project's keys directory (a signing key made by `debforge keygen`).
    pub fn keys(&self) -> PathBuf {
        self.recipes.parent().unwrap().join("keys")
    }

    pub fn www(&self) -> &Path {
        self.server.root()
    }

    /// Files in the cache that are not verified downloads (`.part` leftovers
    /// or anything outside debs/ and indexes/).
    pub fn unverified_in_cache(&self) -> Vec<String> {
        let mut out = Vec::new();
        walk(&self.cache, &mut |p| {
            let s = p.display().to_string();
            if s.ends_with(".part") {
                out.push(s);
            }
        });
        out
    }

    pub fn cached_debs(&self) -> Vec<String> {
        let mut out = Vec::new();
        walk(&self.cache.join("debs"), &mut |p| {
            out.push(p.file_name().unwrap().to_string_lossy().into_owned())
        });
        out.sort();
        out
    }
}

fn walk(dir: &Path, f: &mut dyn FnMut(&Path)) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, f);
        } else {
            f(&p);
        }
    }
}

impl TestKey {
    /// The public key as a binary keyring (what `Signed-By` takes on every
    /// apt, and the only form gpgv reads).
    pub fn binary_keyring(&self, path: &Path) {
        let _gpg = gpg_lock();
        ok(Command::new("gpg")
            .arg("--homedir")
            .arg(&self.home)
            .args(["--batch", "--yes", "--output"])
            .arg(path)
            .args(["--export", &self.fingerprint]));
    }
}

/// A second repository a lab machine may also have: signed (by another key)
/// and offering what must never be picked: Ubuntu's old cuDNN
/// 7.0.5.15-1ubuntu1, NVIDIA's newer 7.6.5.32 and NCCL 2.4.8.
pub struct OtherRepo {
    pub server: Server,
    /// Its binary keyring, for `Signed-By`.
    pub keyring: PathBuf,
}

impl OtherRepo {
    pub fn start(work: &Path) -> OtherRepo {
        let root = work.join("other-repo");
        let build = work.join("other-repo-work");
        let newer = nvidia_debs("7.6.5.32-1+cuda10.1", "2.4.8-1+cuda10.1");
        let old = nvidia_debs("7.0.5.15-1ubuntu1", "2.1.4-1");
        for d in newer
            .iter()
            .filter(|d| ["libcudnn7", "libcudnn7-dev", "libnccl2", "libnccl-dev"].contains(&d.name))
            .chain(old.iter().filter(|d| d.name == "libcudnn7"))
        {
            build_deb(d, "amd64", &root, &build);
        }
        write_packages(&root, ".", &root.join("Packages"), true);
        let release = write_release(&root, &[("Origin", "Other"), ("Label", "other")]);
        let key = TestKey::other();
        key.sign_detached(&release);
        let keyring = work.join("other-archive-keyring.gpg");
        key.binary_keyring(&keyring);
        OtherRepo {
            server: Server::start(root),
            keyring,
        }
    }

    /// A deb822 source for it, with the keyring at `keyring_path` on the machine.
    pub fn source(&self, keyring_path: &str) -> String {
        format!(
            "Types: deb\nURIs: {}\nSuites: ./\nSigned-By: {keyring_path}\n",
            self.server.url("")
        )
    }
}

/// The NVIDIA stand-in has the real repository's shape (FACTS.md): flat,
/// Release + Release.gpg and no InRelease, `Filename: ./<file>.deb`, all four
/// digests in each stanza, and libcudnn7-dev's postinst registering the
/// `libcudnn` alternatives as NVIDIA's does.
#[test]
fn the_nvidia_stand_in_is_shaped_like_nvidias_repository() {
    let lab = Lab::new();
    let repo = lab.www().join("nvidia");
    assert!(repo.join("Release").is_file() && repo.join("Release.gpg").is_file());
    assert!(!repo.join("InRelease").exists());
    assert!(!repo.join("dists").exists(), "flat: no dists/");
    let packages = fs::read_to_string(repo.join("Packages")).unwrap();
    let stanzas: Vec<&str> = packages
        .split("\n\n")
        .filter(|s| !s.trim().is_empty())
        .collect();
    assert!(stanzas.len() >= 10);
    for s in &stanzas {
        let filename = s
            .lines()
            .find_map(|l| l.strip_prefix("Filename: "))
            .unwrap();
        assert!(
            filename.starts_with("./") && filename.ends_with(".deb"),
            "{filename}"
        );
        for f in ["Size: ", "MD5sum: ", "SHA1: ", "SHA256: ", "SHA512: "] {
            assert!(s.lines().any(|l| l.starts_with(f)), "{f} in {s}");
        }
    }
    let dev = repo.join("libcudnn7-dev_7.5.0.56-1+cuda10.1_amd64.deb");
    let postinst = ok(Command::new("dpkg-deb").arg("-I").arg(&dev).arg("postinst"));
    assert!(
        postinst.contains("update-alternatives --install /usr/include/cudnn.h libcudnn ")
            && postinst.contains("--slave /usr/lib/x86_64-linux-gnu/libcudnn.so libcudnn_so ")
            && postinst
                .contains("--slave /usr/lib/x86_64-linux-gnu/libcudnn_static.a libcudnn_stlib "),
        "{postinst}"
    );
}
