//! The CUDA link scripts, run for real by dpkg in a Debian chroot
//! (mmdebstrap minbase, built once and cached under target/).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{ok, run};
use crate::standin::Lab;

/// A pristine minbase chroot, built once (about half a minute) and reused
/// from `target/test-chroot/` (or $DEBFORGE_TEST_CHROOT); each test works
/// on a copy.
pub fn base_chroot() -> PathBuf {
    let dir = std::env::var_os("DEBFORGE_TEST_CHROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-chroot/bookworm")
        });
    let parent = dir.parent().unwrap().to_path_buf();
    fs::create_dir_all(&parent).unwrap();
    let lock = fs::File::create(parent.join(".lock")).unwrap();
    lock.lock().unwrap();
    if !dir.join("usr/bin/dpkg").exists() {
        let tmp = parent.join("building");
        let _ = fs::remove_dir_all(&tmp);
        ok(Command::new("mmdebstrap")
            .args(["--variant=minbase", "--quiet", "bookworm"])
            .arg(&tmp));
        fs::rename(&tmp, &dir).unwrap();
    }
    dir
}

pub struct Chroot {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
}

impl Chroot {
    pub fn new() -> Chroot {
        let base = base_chroot();
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        ok(Command::new("cp").arg("-a").arg(&base).arg(&root));
        Chroot { _tmp: tmp, root }
    }

    /// Runs a command inside; (exit code, stdout+stderr).
    pub fn run(&self, cmd: &str) -> (i32, String) {
        let (code, out, err) = run(Command::new("chroot")
            .arg(&self.root)
            .args(["/bin/sh", "-c", cmd]));
        (code, format!("{out}{err}"))
    }

    pub fn ok(&self, cmd: &str) -> String {
        let (code, out) = self.run(cmd);
        assert_eq!(code, 0, "{cmd}:\n{out}");
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
    let a = pool.join("libnccl2/libnccl2_2.4.2-1+cuda10.1_amd64.deb");
    let b = pool.join("libnccl-dev/libnccl-dev_2.4.2-1+cuda10.1_amd64.deb");
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
    c.ok("/var/lib/dpkg/info/libnccl2.postinst configure 2.4.2-1+cuda10.1");
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
    ok(crate::common::debforge()
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
    c.ok("dpkg -i /tmp/libnccl2_2.4.2-1+cuda10.1_amd64.deb");

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
