//! The whole chain with the shipped recipes: fetch, repack with the CUDA
//! link scripts, build gpu-stack-cu101 and the repo-config package, publish
//! signed; then lintian, and dpkg plus gpu-stack-check in a Debian chroot.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use std::os::unix::fs::PermissionsExt;

use crate::publish_remote::{RsyncDaemon, S3Server, free_port};
use crate::support::chroot::{Chroot, Dist};
use crate::support::common::{ok, run};
use crate::support::standin::{Lab, OtherRepo};

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// The lab project with the shipped recipes for the NVIDIA packages, the
/// metapackage and the repo-config package; built. Returns the output.
pub(crate) fn shipped_build() -> (Lab, PathBuf) {
    let lab = Lab::new();
    let mirror = lab.server.url("repo/");
    let out = shipped_build_in(&lab, &mirror);
    (lab, out)
}

/// The same, with `mirror` as the repo-config package's URL.
pub(crate) fn shipped_build_in(lab: &Lab, mirror: &str) -> PathBuf {
    shipped_build_with(lab, mirror, |_, text| text)
}

/// The same, each recipe's text passed through `edit(name, text)` first.
pub(crate) fn shipped_build_with(
    lab: &Lab,
    mirror: &str,
    edit: impl Fn(&str, String) -> String,
) -> PathBuf {
    shipped_project(lab, mirror, edit);
    let out = lab.dir.path().join("repo-out");
    ok(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .env("SOURCE_DATE_EPOCH", crate::support::common::EPOCH));
    out
}

/// The lab's project with the shipped recipes (each recipe's text passed
/// through `edit(name, text)`), scripts, files and repository.toml (its
/// mirror `mirror`); not built.
pub(crate) fn shipped_project(lab: &Lab, mirror: &str, edit: impl Fn(&str, String) -> String) {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes");
    copy_dir(&shipped.join("scripts"), &lab.recipes.join("scripts"));
    copy_dir(&shipped.join("files"), &lab.recipes.join("files"));
    for p in [
        "libcudnn7",
        "libcudnn7-dev",
        "libnccl2",
        "libnccl-dev",
        "gpu-stack-cu101",
        "gpu-lab-repo",
    ] {
        let text = fs::read_to_string(shipped.join(format!("packages/{p}.toml"))).unwrap();
        fs::write(
            lab.recipes.join(format!("packages/{p}.toml")),
            edit(p, text),
        )
        .unwrap();
    }
    let settings = fs::read_to_string(shipped.join("repository.toml")).unwrap();
    let settings = settings.replace("http://mirror.gpu-lab.example/debforge/", mirror);
    fs::write(lab.recipes.join("repository.toml"), settings).unwrap();
}

pub(crate) fn pool(out: &Path, dir: &str, file: &str) -> PathBuf {
    out.join("pool/main").join(dir).join(file)
}

#[test]
fn the_metapackage_and_repo_config_are_right_and_lintian_clean() {
    let (_lab, out) = shipped_build();
    let meta = pool(&out, "g/gpu-stack-cu101", "gpu-stack-cu101_1.0-1_all.deb");
    let repo = pool(&out, "g/gpu-lab-repo", "gpu-lab-repo_1.0-1_all.deb");
    let field = |d: &Path, f: &str| {
        ok(Command::new("dpkg-deb").arg("-f").arg(d).arg(f))
            .trim()
            .to_string()
    };
    assert_eq!(
        field(&meta, "Depends"),
        "libcudnn7 (= 7.5.0.56-1+cuda10.1+debforge1), libcudnn7-dev (= 7.5.0.56-1+cuda10.1+debforge1), libnccl2 (= 2.4.2-1+cuda10.1+debforge1), libnccl-dev (= 2.4.2-1+cuda10.1+debforge1), libc-ares-dev, python3 (>= 3.6)"
    );
    let x = out.parent().unwrap().join("x-meta");
    ok(Command::new("dpkg-deb").arg("-x").arg(&meta).arg(&x));
    let check = fs::read_to_string(x.join("usr/bin/gpu-stack-check")).unwrap();
    assert!(
        check.contains("STACK=\"libcudnn7=7.5.0.56-1+cuda10.1+debforge1 libcudnn7-dev=7.5.0.56-1+cuda10.1+debforge1 libnccl2=2.4.2-1+cuda10.1+debforge1 libnccl-dev=2.4.2-1+cuda10.1+debforge1\"")
            && check.contains("PACKAGE=\"gpu-stack-cu101\"")
            && !check.contains("@DEPENDS_EXACT@"),
        "versions filled in"
    );

    let conffiles = ok(Command::new("dpkg-deb")
        .arg("-I")
        .arg(&repo)
        .arg("conffiles"));
    assert_eq!(
        conffiles,
        "/etc/apt/preferences.d/gpu-lab.pref\n/etc/apt/sources.list.d/gpu-lab.sources\n"
    );
    let xr = out.parent().unwrap().join("x-repo");
    ok(Command::new("dpkg-deb").arg("-x").arg(&repo).arg(&xr));
    let sources = fs::read_to_string(xr.join("etc/apt/sources.list.d/gpu-lab.sources")).unwrap();
    assert!(
        sources.contains("Signed-By: /usr/share/keyrings/gpu-lab-archive-keyring.gpg"),
        "{sources}"
    );
    assert!(
        sources.contains("/repo/"),
        "the mirror from repository.toml: {sources}"
    );
    assert_eq!(
        fs::read(xr.join("usr/share/keyrings/gpu-lab-archive-keyring.gpg")).unwrap(),
        fs::read(out.join("debforge-archive-keyring.gpg")).unwrap()
    );
    let pins = fs::read_to_string(xr.join("etc/apt/preferences.d/gpu-lab.pref")).unwrap();
    assert!(
        pins.contains("Package: libcudnn7\nPin: release o=GPU lab,l=gpu-lab\nPin-Priority: 1001"),
        "{pins}"
    );

    for deb in [&meta, &repo] {
        let (_, stdout, stderr) = run(Command::new("lintian")
            .args(["--tag-display-limit", "0"])
            .arg(deb));
        let text = format!("{stdout}{stderr}");
        let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("E:")).collect();
        assert!(
            errors.is_empty(),
            "lintian errors for {}:\n{text}",
            deb.display()
        );
        eprintln!(
            "lintian {}:\n{text}",
            deb.file_name().unwrap().to_string_lossy()
        );
    }
}

#[test]
fn installed_in_a_chroot_gpu_stack_check_passes_and_names_what_breaks() {
    let (_lab, out) = shipped_build();
    let c = Chroot::new();
    let mut files = Vec::new();
    for (dir, f) in [
        (
            "libc/libcudnn7",
            "libcudnn7_7.5.0.56-1+cuda10.1+debforge1_amd64.deb",
        ),
        (
            "libc/libcudnn7-dev",
            "libcudnn7-dev_7.5.0.56-1+cuda10.1+debforge1_amd64.deb",
        ),
        (
            "libn/libnccl2",
            "libnccl2_2.4.2-1+cuda10.1+debforge1_amd64.deb",
        ),
        (
            "libn/libnccl-dev",
            "libnccl-dev_2.4.2-1+cuda10.1+debforge1_amd64.deb",
        ),
        ("libc/libc-ares2", "libc-ares2_1.14.0-1ubuntu0.2_amd64.deb"),
        (
            "libc/libc-ares-dev",
            "libc-ares-dev_1.14.0-1ubuntu0.2_amd64.deb",
        ),
        ("g/gpu-stack-cu101", "gpu-stack-cu101_1.0-1_all.deb"),
        ("g/gpu-lab-repo", "gpu-lab-repo_1.0-1_all.deb"),
    ] {
        files.push(c.put(&pool(&out, dir, f)));
    }
    c.ok(&format!("dpkg -i {}", files.join(" ")));
    // Upstream's alternatives survived the repack, and our links followed.
    c.ok("test \"$(readlink -f /usr/include/cudnn.h)\" = /usr/include/x86_64-linux-gnu/cudnn_v7.h");
    let report = c.ok("gpu-stack-check");
    assert!(report.contains("all checks passed"), "{report}");
    assert!(
        report.contains(
            "/usr/local/cuda/nccl/lib/libnccl.so.2 -> /usr/lib/x86_64-linux-gnu/libnccl.so.2"
        ),
        "{report}"
    );
    let conffiles = c.ok("dpkg-query -W -f='${Conffiles}' gpu-lab-repo");
    assert!(
        conffiles.contains("/etc/apt/sources.list.d/gpu-lab.sources"),
        "{conffiles}"
    );

    // Break a link: the check says what and how to fix it.
    c.ok("rm /usr/local/cuda/lib64/libcudnn.so.7");
    let (code, report) = c.run("gpu-stack-check");
    assert_eq!(code, 1, "{report}");
    assert!(
        report.contains("PROBLEM: /usr/local/cuda/lib64/libcudnn.so.7 is missing (it links to /usr/lib/x86_64-linux-gnu/libcudnn.so.7)\n         fix: sudo dpkg-reconfigure libcudnn7 (or: sudo apt-get install --reinstall libcudnn7)\n"),
        "{report}"
    );

    // Removing everything leaves nothing of ours.
    c.ok("dpkg -P gpu-stack-cu101 gpu-lab-repo libcudnn7-dev libnccl-dev libcudnn7 libnccl2");
    assert!(!c.path("/usr/local/cuda").exists());
    assert!(!c.path("/etc/apt/sources.list.d/gpu-lab.sources").exists());
    assert!(!c.path("/var/lib/debforge").exists());
}

#[test]
fn recipe_mistakes_are_named_before_anything_is_written() {
    let lab = Lab::new();
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes");
    copy_dir(&shipped.join("files"), &lab.recipes.join("files"));
    copy_dir(&shipped.join("scripts"), &lab.recipes.join("scripts"));
    let meta = fs::read_to_string(shipped.join("packages/gpu-stack-cu101.toml")).unwrap();
    let out = lab.dir.path().join("out");
    let fails = |needle: &str| {
        let (code, _, err) = run(lab.cmd("build").arg("--out").arg(&out));
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(needle), "missing {needle:?}:\n{err}");
        assert!(!out.exists(), "output written");
    };
    // A metapackage that names a package no recipe provides.
    fs::write(
        lab.recipes.join("packages/gpu-stack-cu101.toml"),
        meta.replace("\"libnccl-dev\"]", "\"libnccl-dev\", \"libcudnn8\"]"),
    )
    .unwrap();
    fails("gpu-stack-cu101.toml: build.depends-exact names libcudnn8, which no recipe provides");
    fs::remove_file(lab.recipes.join("packages/gpu-stack-cu101.toml")).unwrap();

    // A repack whose script is missing, or uses a placeholder nobody sets.
    let nccl = fs::read_to_string(shipped.join("packages/libnccl2.toml")).unwrap();
    fs::write(
        lab.recipes.join("packages/libnccl2.toml"),
        nccl.replace("scripts/cuda-links.postrm", "scripts/missing.postrm"),
    )
    .unwrap();
    fails("scripts/missing.postrm: cannot read the file: No such file or directory");
    fs::write(
        lab.recipes.join("packages/libnccl2.toml"),
        nccl.replace("vars = { LINKS", "vars = { OTHER"),
    )
    .unwrap();
    fails("uses @LINKS@, which the recipe's [repack.vars] does not set");
    // A repo-config package without a mirror to point at.
    fs::write(lab.recipes.join("packages/libnccl2.toml"), &nccl).unwrap();
    fs::copy(
        shipped.join("packages/gpu-lab-repo.toml"),
        lab.recipes.join("packages/gpu-lab-repo.toml"),
    )
    .unwrap();
    fails("needs the mirror URL: set `mirror` in recipes/repository.toml");
}

#[test]
fn air_gapped_install_from_a_bundle_with_no_server() {
    let (lab, out) = shipped_build();
    let tar = lab.dir.path().join("lab.tar");
    let again = lab.dir.path().join("lab2.tar");
    for t in [&tar, &again] {
        ok(crate::support::common::debforge()
            .args(["bundle", "-o"])
            .arg(t)
            .arg("--out")
            .arg(&out));
    }
    assert_eq!(
        fs::read(&tar).unwrap(),
        fs::read(&again).unwrap(),
        "deterministic bundle"
    );
    let v = ok(crate::support::common::debforge()
        .args(["bundle", "verify"])
        .arg(&tar));
    assert!(v.contains("all files match SHA256SUMS"), "{v}");

    // One flipped byte: verify and install.sh both refuse.
    let mut bytes = fs::read(&tar).unwrap();
    let at = bytes.windows(8).position(|w| w == b"Package:").unwrap();
    bytes[at] ^= 0x20;
    let bad = lab.dir.path().join("bad.tar");
    fs::write(&bad, &bytes).unwrap();
    let (code, out_text, _) = run(crate::support::common::debforge()
        .args(["bundle", "verify"])
        .arg(&bad));
    assert_eq!(code, 1, "{out_text}");
    assert!(
        out_text.contains("SHA256 is") && out_text.contains("do not install it"),
        "{out_text}"
    );

    // The offline machine: no network source, no server running.
    drop(lab.server);
    let c = Chroot::new();
    c.ok("rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*");
    let b = c.put(&bad);
    let (code, msg) = c.run(&format!(
        "cd /tmp && mkdir bad && tar -xf {b} -C bad && sh bad/debforge-bundle/install.sh"
    ));
    assert_ne!(code, 0, "{msg}");
    assert!(msg.contains("the bundle is corrupted"), "{msg}");
    assert!(
        !c.path("/etc/apt/sources.list.d/debforge-bundle.sources")
            .exists()
    );

    let g = c.put(&tar);
    c.ok(&format!(
        "cd /tmp && tar -xf {g} && sh debforge-bundle/install.sh"
    ));
    lab_day(
        &c,
        lab.dir.path(),
        "/etc/apt/sources.list.d/debforge-bundle.sources",
    );
}

/// What our packages leave on a lab machine, checked gone after a purge.
const OURS: &[&str] = &[
    "gpu-stack-cu101",
    "libcudnn7",
    "libcudnn7-dev",
    "libcudnn7-doc",
    "libnccl2",
    "libnccl-dev",
    "libc-ares-dev",
    "libc-ares2",
];

/// `apt-get update` that must print no `W:` and no `E:` line.
pub(crate) fn update_clean(c: &Chroot) {
    let update = c.ok("apt-get update 2>&1");
    let problems: Vec<&str> = update
        .lines()
        .filter(|l| l.starts_with("W:") || l.starts_with("E:"))
        .collect();
    assert!(problems.is_empty(), "{:?}: {update}", c.dist);
}

fn candidate(c: &Chroot, package: &str) -> String {
    let policy = c.ok(&format!("apt-cache policy {package}"));
    policy
        .lines()
        .find_map(|l| l.trim().strip_prefix("Candidate: "))
        .unwrap_or_else(|| panic!("no candidate line: {policy}"))
        .to_string()
}

/// A lab machine's day, once apt knows our repository through `our_source`
/// (a file in /etc/apt/sources.list.d/) and our pins: a second trusted
/// repository that offers other cuDNN and NCCL builds appears; without our
/// source apt finds no candidate rather than falling back; with it apt
/// installs exactly the pinned builds, the links and alternatives are in
/// place, nothing wants upgrading; purging leaves nothing of ours.
fn lab_day(c: &Chroot, work: &Path, our_source: &str) {
    let other = OtherRepo::start(work);
    let other_keyring = "/usr/share/keyrings/other-archive-keyring.gpg";
    fs::copy(&other.keyring, c.path(other_keyring)).unwrap();
    fs::write(
        c.path("/etc/apt/sources.list.d/other.sources"),
        other.source(other_keyring),
    )
    .unwrap();
    update_clean(c);
    let other_versions = c.ok("apt-cache madison libcudnn7 libnccl2");
    for v in [
        "7.0.5.15-1ubuntu1",
        "7.6.5.32-1+cuda10.1",
        "2.4.8-1+cuda10.1",
    ] {
        assert!(other_versions.contains(v), "{other_versions}");
    }

    // Our source gone (pins still there): no installation candidate, no
    // silent fallback to the other repository's builds.
    let aside = c.path("/root/our.sources");
    fs::rename(c.path(our_source), &aside).unwrap();
    update_clean(c);
    let (code, out) = c.run("apt-get install -y libcudnn7 2>&1");
    assert_eq!(code, 100, "{out}");
    assert!(out.contains("has no installation candidate"), "{out}");
    fs::rename(&aside, c.path(our_source)).unwrap();
    update_clean(c);

    assert_eq!(candidate(c, "libcudnn7"), "7.5.0.56-1+cuda10.1+debforge1");
    assert_eq!(
        candidate(c, "libcudnn7-dev"),
        "7.5.0.56-1+cuda10.1+debforge1"
    );
    assert_eq!(candidate(c, "libnccl2"), "2.4.2-1+cuda10.1+debforge1");
    c.ok("apt-get install -y gpu-stack-cu101 2>&1");
    let installed = c.ok(
        "dpkg-query -W -f='${Package} ${Version}\\n' libcudnn7 libcudnn7-dev libnccl2 libnccl-dev",
    );
    assert_eq!(
        installed,
        "libcudnn7 7.5.0.56-1+cuda10.1+debforge1\nlibcudnn7-dev 7.5.0.56-1+cuda10.1+debforge1\nlibnccl-dev 2.4.2-1+cuda10.1+debforge1\nlibnccl2 2.4.2-1+cuda10.1+debforge1\n"
    );
    for (link, target) in [
        (
            "/usr/local/cuda/nccl/lib/libnccl.so.2",
            "/usr/lib/x86_64-linux-gnu/libnccl.so.2.4.2",
        ),
        (
            "/usr/local/cuda/lib64/libcudnn.so.7",
            "/usr/lib/x86_64-linux-gnu/libcudnn.so.7.5.0",
        ),
    ] {
        assert_eq!(
            c.ok(&format!("readlink -f {link}")).trim(),
            target,
            "{link}"
        );
    }
    // NVIDIA's postinst registered the alternatives; our part did not break them.
    let alt = c.ok("update-alternatives --display libcudnn");
    assert!(
        alt.contains("link currently points to /usr/include/x86_64-linux-gnu/cudnn_v7.h")
            && alt.contains("libcudnn_so")
            && alt.contains("libcudnn_stlib"),
        "{alt}"
    );
    assert!(c.ok("gpu-stack-check").contains("all checks passed"));
    // The article's step 5, for mnistCUDNN: the samples, which NVIDIA ties
    // to libcudnn7-dev's exact version; carried along by its suffix.
    assert_eq!(
        candidate(c, "libcudnn7-doc"),
        "7.5.0.56-1+cuda10.1+debforge1"
    );
    c.ok("apt-get install -y libcudnn7-doc 2>&1");
    assert!(
        c.path("/usr/src/cudnn_samples_v7/mnistCUDNN/Makefile")
            .exists()
    );
    let upgrade = c.ok("apt-get -s dist-upgrade 2>&1");
    assert!(
        upgrade.contains("0 upgraded, 0 newly installed, 0 to remove"),
        "{upgrade}"
    );
    assert_eq!(candidate(c, "libcudnn7"), "7.5.0.56-1+cuda10.1+debforge1");
    assert_eq!(candidate(c, "libnccl2"), "2.4.2-1+cuda10.1+debforge1");

    // Remove, then purge: the links and our bookkeeping go.
    c.ok("apt-get remove -y gpu-stack-cu101 libcudnn7 libcudnn7-dev libcudnn7-doc libnccl2 libnccl-dev 2>&1");
    assert!(!c.path("/usr/local/cuda").exists());
    c.ok(&format!(
        "apt-get purge -y --autoremove {} 2>&1",
        OURS.join(" ")
    ));
    for p in OURS {
        let (_, status) = c.run(&format!("dpkg-query -W -f='${{db:Status-Abbrev}}' {p}"));
        assert!(
            !status.starts_with("ii") && !status.starts_with("rc"),
            "{p}: {status}"
        );
    }
    assert!(!c.path("/usr/local/cuda").exists());
    assert!(!c.path("/var/lib/debforge").exists());
    assert!(!c.path("/usr/bin/gpu-stack-check").exists());
    fs::remove_file(c.path("/etc/apt/sources.list.d/other.sources")).unwrap();
}

/// The lab machine of a repository served at the mirror built into
/// gpu-lab-repo: the package sets up source, key and pins, then the day;
/// purging it removes them.
fn lab_day_through_repo_config(c: &Chroot, out: &Path, work: &Path) {
    c.ok("rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*");
    let cfg = c.put(&pool(out, "g/gpu-lab-repo", "gpu-lab-repo_1.0-1_all.deb"));
    c.ok(&format!("dpkg -i {cfg}"));
    lab_day(c, work, "/etc/apt/sources.list.d/gpu-lab.sources");
    c.ok("apt-get purge -y gpu-lab-repo 2>&1");
    for f in [
        "/etc/apt/sources.list.d/gpu-lab.sources",
        "/etc/apt/preferences.d/gpu-lab.pref",
        "/usr/share/keyrings/gpu-lab-archive-keyring.gpg",
    ] {
        assert!(!c.path(f).exists(), "{f} left after purge");
    }
}

/// `debforge serve` on `port`, serving `dir`; stopped when dropped.
pub(crate) struct Serve(std::process::Child);

impl Serve {
    pub(crate) fn start(dir: &Path, port: u16) -> Serve {
        let mut child = crate::support::common::debforge()
            .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--out"])
            .arg(dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert!(line.contains(&format!("127.0.0.1:{port}")), "{line}");
        Serve(child)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn apt_install_gpu_stack_from_debforge_serve_on_ubuntu_18_04_and_debian_12() {
    for dist in [Dist::BionicPython3, Dist::Bookworm] {
        let lab = Lab::new();
        let port = free_port();
        let out = shipped_build_in(&lab, &format!("http://127.0.0.1:{port}/"));
        let _server = Serve::start(&out, port);
        let c = Chroot::of(dist);
        lab_day_through_repo_config(&c, &out, lab.dir.path());
    }
}

/// nginx as it runs on a mirror: its master as root, its workers as the
/// unprivileged www-data, so a file it cannot read is a failed request.
struct Nginx {
    conf: PathBuf,
    dir: PathBuf,
    child: std::process::Child,
}

impl Nginx {
    fn start(docroot: &Path, port: u16, run_dir: &Path) -> Nginx {
        fs::create_dir_all(run_dir).unwrap();
        // www-data must reach the docroot: every directory above it searchable.
        let mut p = docroot.to_path_buf();
        while p.pop() {
            if p == Path::new("/") || p == Path::new("/tmp") {
                break;
            }
            let mode = fs::metadata(&p).unwrap().permissions().mode();
            fs::set_permissions(&p, fs::Permissions::from_mode(mode | 0o711)).unwrap();
        }
        let conf = run_dir.join("nginx.conf");
        fs::write(
            &conf,
            format!(
                "daemon off;\nuser www-data;\nworker_processes 1;\npid {r}/nginx.pid;\nerror_log {r}/error.log;\nevents {{}}\n\
                 http {{\n access_log off;\n client_body_temp_path {r};\n proxy_temp_path {r};\n fastcgi_temp_path {r};\n uwsgi_temp_path {r};\n scgi_temp_path {r};\n\
                 default_type application/octet-stream;\n server {{ listen 127.0.0.1:{port}; root {d}; }}\n}}\n",
                r = run_dir.display(),
                d = docroot.display()
            ),
        )
        .unwrap();
        // No inherited pipes: nginx's workers must not hold the test's output open.
        let child = Command::new("nginx")
            .arg("-c")
            .arg(&conf)
            .arg("-p")
            .arg(run_dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        for _ in 0..50 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let ps = ok(Command::new("ps").args(["-o", "user=,args=", "-C", "nginx"]));
        assert!(
            ps.lines()
                .any(|l| l.starts_with("www-data") && l.contains("worker process")),
            "nginx workers run as www-data: {ps}"
        );
        Nginx {
            conf,
            dir: run_dir.to_path_buf(),
            child,
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // The master stops its workers; a panic above still gets here.
        let _ = Command::new("nginx")
            .arg("-c")
            .arg(&self.conf)
            .arg("-p")
            .arg(&self.dir)
            .args(["-s", "stop"])
            .status();
        let _ = self.child.wait();
    }
}

#[test]
fn publish_to_a_directory_served_by_nginx_then_the_lab_day() {
    let lab = Lab::new();
    let port = free_port();
    let out = shipped_build_in(&lab, &format!("http://127.0.0.1:{port}/gpu-lab/"));
    let docroot = lab.dir.path().join("docroot");
    ok(crate::support::common::debforge()
        .arg("publish")
        .arg("--to")
        .arg(docroot.join("gpu-lab"))
        .arg("--out")
        .arg(&out));
    // Everything published is world-readable; nothing secret went along.
    let mut files = 0;
    crate::support::common::walk_files(&docroot, &mut |p| {
        let mode = fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644, "{}", p.display());
        files += 1;
    });
    assert!(files > 10);
    let _nginx = Nginx::start(&docroot, port, &lab.dir.path().join("nginx"));
    let c = Chroot::new();
    lab_day_through_repo_config(&c, &out, lab.dir.path());
}

#[test]
fn publish_over_rsync_to_an_nginx_mirror_then_the_lab_day() {
    let lab = Lab::new();
    let port = free_port();
    let out = shipped_build_in(&lab, &format!("http://127.0.0.1:{port}/repo/gpu-lab/"));
    let daemons = lab.dir.path().join("rsyncd");
    let daemon = RsyncDaemon::start(&daemons);
    ok(&mut crate::publish_remote::publish(
        &out,
        &daemon.url("repo/gpu-lab"),
    ));
    // The rsync module's directory is the mirror's docroot.
    let _nginx = Nginx::start(&daemons, port, &lab.dir.path().join("nginx"));
    let c = Chroot::new();
    lab_day_through_repo_config(&c, &out, lab.dir.path());
}

#[test]
fn publish_to_s3_then_the_lab_day_from_the_bucket() {
    let s3 = S3Server::start(false);
    s3.create_bucket("lab-apt");
    let lab = Lab::new();
    let out = shipped_build_in(&lab, &format!("{}/lab-apt/gpu-lab/", s3.endpoint()));
    ok(&mut crate::publish_remote::s3_publish(
        &out,
        "s3://lab-apt/gpu-lab",
        &s3.endpoint(),
    ));
    let c = Chroot::new();
    // moto refuses anonymous reads of private objects but takes any
    // Authorization header as signed in: apt sends a login from
    // auth.conf.d, as for a private mirror.
    let auth = c.path("/etc/apt/auth.conf.d/lab.conf");
    fs::create_dir_all(auth.parent().unwrap()).unwrap();
    fs::write(
        &auth,
        // apt 1.6 matches host:port/path (no scheme; apt 1.9+ would need it).
        format!(
            "machine {}/lab-apt login lab password lab\n",
            s3.endpoint().trim_start_matches("http://")
        ),
    )
    .unwrap();
    fs::set_permissions(&auth, fs::Permissions::from_mode(0o600)).unwrap();
    lab_day_through_repo_config(&c, &out, lab.dir.path());
}

/// A local rebuild marked `+lab1` instead of the shipped `+debforge1`: the version every downstream part uses is
/// the one in the repacked files themselves — pool names, the index, the
/// metapackage's exact dependencies, the pins (one text in debforge.pref and
/// in gpu-lab-repo), `policy`, what `build` prints — and apt on Ubuntu 18.04
/// installs the stack with it.
#[test]
fn a_version_suffix_flows_from_the_repacked_files_to_apt() {
    let lab = Lab::new();
    let port = free_port();
    let out = shipped_build_with(&lab, &format!("http://127.0.0.1:{port}/"), |_, text| {
        if text.contains("[repack]") {
            text.replace(
                "version-suffix = \"+debforge1\"",
                "version-suffix = \"+lab1\"",
            )
        } else {
            text
        }
    });
    let nccl = pool(
        &out,
        "libn/libnccl2",
        "libnccl2_2.4.2-1+cuda10.1+lab1_amd64.deb",
    );
    assert!(nccl.exists(), "pool file named from its own control");
    let field = |d: &Path, f: &str| {
        ok(Command::new("dpkg-deb").arg("-f").arg(d).arg(f))
            .trim()
            .to_string()
    };
    let dev = pool(
        &out,
        "libn/libnccl-dev",
        "libnccl-dev_2.4.2-1+cuda10.1+lab1_amd64.deb",
    );
    assert_eq!(field(&dev, "Depends"), "libnccl2 (= 2.4.2-1+cuda10.1+lab1)");
    let meta = pool(&out, "g/gpu-stack-cu101", "gpu-stack-cu101_1.0-1_all.deb");
    assert_eq!(
        field(&meta, "Depends"),
        "libcudnn7 (= 7.5.0.56-1+cuda10.1+lab1), libcudnn7-dev (= 7.5.0.56-1+cuda10.1+lab1), libnccl2 (= 2.4.2-1+cuda10.1+lab1), libnccl-dev (= 2.4.2-1+cuda10.1+lab1), libc-ares-dev, python3 (>= 3.6)"
    );
    let pins = fs::read_to_string(out.join("debforge.pref")).unwrap();
    assert!(
        pins.contains("Package: libnccl2\nPin: release o=GPU lab,l=gpu-lab\nPin-Priority: 1001"),
        "{pins}"
    );
    let x = lab.dir.path().join("x-repo");
    ok(Command::new("dpkg-deb")
        .arg("-x")
        .arg(pool(&out, "g/gpu-lab-repo", "gpu-lab-repo_1.0-1_all.deb"))
        .arg(&x));
    assert_eq!(
        fs::read_to_string(x.join("etc/apt/preferences.d/gpu-lab.pref")).unwrap(),
        pins,
        "one pins text for the output and the repo-config package"
    );
    let policy = ok(crate::support::common::debforge()
        .args(["policy", "libnccl2", "--out"])
        .arg(&out));
    assert!(
        policy.contains("Candidate: 2.4.2-1+cuda10.1+lab1"),
        "{policy}"
    );
    // `build` reports the pool file's own size and digest.
    let (code, stdout, err) = run(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .env("SOURCE_DATE_EPOCH", crate::support::common::EPOCH));
    assert_eq!(code, 0, "{err}");
    // Nothing changed: nothing written, the same report.
    assert!(
        stdout.contains("9 packages in") && stdout.contains("unchanged since the last build"),
        "{stdout}"
    );
    // Progress of the local work, as lines in a pipe: each kind ends with a
    // line of its own (here a rebuild: the stamp is gone).
    fs::remove_file(out.parent().unwrap().join(".repo-out.stamp")).unwrap();
    let (code, stdout, err) = run(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .env("SOURCE_DATE_EPOCH", crate::support::common::EPOCH));
    assert_eq!(code, 0, "{err}");
    // libcudnn7-doc (kept) names libcudnn7-dev's exact version: carried along.
    assert!(
        err.lines().any(|l| l
            == "libcudnn7-doc: +lab1, follows libcudnn7-dev (it depends on that exact version)"),
        "{err}"
    );
    for done in [
        "repack: 5 of 5 done",
        "pool: 9 of 9 done",
        "index: 9 of 9 done",
        "sign: 1 of 1 done",
    ] {
        assert!(err.lines().any(|l| l == done), "{done}: {err}");
    }
    let sha = debforge::digest::digest_reader(fs::File::open(&nccl).unwrap()).unwrap();
    assert!(
        stdout.contains(&format!(
            "libnccl2 2.4.2-1+cuda10.1+lab1 amd64 {} bytes sha256:{}",
            sha.size, sha.sha256
        )),
        "{stdout}"
    );
    ok(crate::support::common::debforge().arg("verify").arg(&out));

    let _server = Serve::start(&out, port);
    let c = Chroot::new();
    c.ok("rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*");
    let cfg = c.put(&pool(&out, "g/gpu-lab-repo", "gpu-lab-repo_1.0-1_all.deb"));
    c.ok(&format!("dpkg -i {cfg}"));
    update_clean(&c);
    c.ok("apt-get install -y gpu-stack-cu101 2>&1");
    assert_eq!(
        c.ok("dpkg-query -W -f='${Package} ${Version}\\n' libnccl2 libcudnn7"),
        "libcudnn7 7.5.0.56-1+cuda10.1+lab1\nlibnccl2 2.4.2-1+cuda10.1+lab1\n"
    );
    assert!(c.ok("gpu-stack-check").contains("all checks passed"));
}

/// Every file under `dir` with its bytes: what "untouched" means for an output.
fn tree_bytes(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push((
                    p.strip_prefix(dir).unwrap().to_path_buf(),
                    fs::read(&p).unwrap(),
                ));
            }
        }
    }
    files.sort();
    files
}

/// `build` never writes what `verify` rejects: an exact dependency no
/// package satisfies is exit 2 with the package, the relation and the fix,
/// before the swap; a package whose file is another package (which would
/// leave its pin no candidate) is refused before anything is built. The
/// previous output stays byte for byte, no staging directory is left.
#[test]
fn build_refuses_a_repository_apt_could_not_install_from_and_keeps_the_previous_one() {
    let lab = Lab::new();
    let out = shipped_build_in(&lab, &lab.server.url("repo/"));
    let before = tree_bytes(&out);
    let build = || {
        run(lab
            .cmd("build")
            .arg("--out")
            .arg(&out)
            .env("SOURCE_DATE_EPOCH", crate::support::common::EPOCH))
    };
    let untouched = || {
        assert!(tree_bytes(&out) == before, "the previous output changed");
        let left: Vec<_> = fs::read_dir(out.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("staging"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    };

    // 1. The metapackage names NVIDIA's version by hand, not through
    //    depends-exact (which follows the suffix).
    let meta = lab.recipes.join("packages/gpu-stack-cu101.toml");
    let text = fs::read_to_string(&meta).unwrap();
    fs::write(
        &meta,
        text.replace(
            "depends = [\"libc-ares-dev\", \"python3 (>= 3.6)\"]",
            "depends = [\"libc-ares-dev\", \"python3 (>= 3.6)\", \"libnccl2 (= 2.4.2-1+cuda10.1)\"]",
        ),
    )
    .unwrap();
    let (code, stdout, err) = build();
    assert_eq!(code, 2, "{stdout}{err}");
    let message = format!(
        "debforge: error: the repository would not install: pool/main/g/gpu-stack-cu101/gpu-stack-cu101_1.0-1_all.deb: gpu-stack-cu101 1.0-1 Depends: libnccl2 (= 2.4.2-1+cuda10.1), which no package in this repository satisfies (it has libnccl2 2.4.2-1+cuda10.1+debforge1); apt cannot install it\n  nothing was written; {} is as it was\n  hint: a package names a version the repository does not have: a relation written by hand in a recipe (use build.depends-exact, which follows the built versions), a package missing from the recipes, or a `pin` on a package the repository lacks\n",
        out.display()
    );
    assert!(err.ends_with(&message), "{err}");
    untouched();
    fs::write(&meta, text).unwrap();

    // 2. A package whose file is another package: refused before anything
    //    is built, as its identity comes from the file (issue 22).
    let tree = lab.dir.path().join("other-tool");
    fs::create_dir_all(tree.join("DEBIAN")).unwrap();
    fs::write(
        tree.join("DEBIAN/control"),
        "Package: other-tool\nVersion: 1.0\nArchitecture: all\nMaintainer: x <x@example.org>\nDescription: x\n",
    )
    .unwrap();
    ok(crate::support::common::debforge()
        .args(["deb", "build"])
        .arg(&tree)
        .arg("-o")
        .arg(lab.recipes.join("lab-tool_1.0_all.deb")));
    fs::write(
        lab.recipes.join("packages/lab-tool.toml"),
        "name = \"lab-tool\"\nversion = \"1.0\"\narchitecture = \"all\"\nfrom = { path = \"lab-tool_1.0_all.deb\" }\npin = true\n",
    )
    .unwrap();
    let (code, stdout, err) = build();
    assert_eq!(code, 2, "{stdout}{err}");
    assert!(
        err.contains("debforge: error: lab-tool: ") && err.contains(" is not the package the recipe vouched for: its control says Package \"other-tool\", the recipe says \"lab-tool\"\n  hint: check the recipe's name, version and architecture against the file (dpkg-deb -f FILE Package Version Architecture)\n"),
        "{err}"
    );
    untouched();
}

/// The output transaction itself refuses pins that leave a package no
/// candidate (here a pin on a package the repository lacks), before the
/// swap: the shape `build` cannot be led into from recipes any more, checked
/// where the guarantee lives (`repo::write`).
#[test]
fn the_output_transaction_refuses_a_pin_with_no_candidate() {
    use debforge::openpgp::sign::KeyAlgo;
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    debforge::keys::keygen(&keys, "test", KeyAlgo::Ed25519, None, None, false).unwrap();
    let signing: Vec<_> = debforge::keys::load_signing_keys(&keys, None, debforge_now())
        .unwrap()
        .into_iter()
        .map(|k| k.key)
        .collect();
    let tree = dir.path().join("tree");
    fs::create_dir_all(tree.join("DEBIAN")).unwrap();
    fs::write(
        tree.join("DEBIAN/control"),
        "Package: tool\nVersion: 1.0\nArchitecture: all\nMaintainer: x <x@example.org>\nDescription: x\n",
    )
    .unwrap();
    let deb = dir.path().join("tool_1.0_all.deb");
    ok(crate::support::common::debforge()
        .args(["deb", "build"])
        .arg(&tree)
        .arg("-o")
        .arg(&deb));
    let control = debforge::deb::DebFile::open(&deb)
        .unwrap()
        .control_files()
        .unwrap()
        .control;
    let sha256 = debforge::digest::digest_reader(fs::File::open(&deb).unwrap())
        .unwrap()
        .sha256;
    let sha256 = debforge::digest::Sha256Sum::from_hex(&sha256).unwrap();
    let records = debforge::repo::pool::DigestStore::new(None);
    let params = debforge::repo::RepoParams {
        base: &[],
        config: debforge::repo::RepoConfig::default(),
        keys: &signing,
        date: 1_556_000_000,
        records: &records,
        pause_in_swap: None,
        retain: vec![],
        retain_from: None,
        kept_pieces: Default::default(),
    };
    let mut stanzas = debforge::repo::stanzas::Stanzas::new(Some(dir.path().to_path_buf()));
    let input = vec![debforge::repo::PoolInput {
        file: deb.as_path().into(),
        entry: stanzas.add(&control).unwrap(),
        size: fs::metadata(&deb).unwrap().len(),
        sha256,
    }];
    let out = dir.path().join("repo-out");
    let pins = debforge::format::preferences::release_pins("debforge", "debforge", ["tool"]);
    debforge::repo::write(
        &out,
        input.clone(),
        &stanzas,
        &params,
        &pins,
        &|_: debforge::report::Event| {},
    )
    .unwrap();
    let before = tree_bytes(&out);
    let pins =
        debforge::format::preferences::release_pins("debforge", "debforge", ["gone", "tool"]);
    let err = debforge::repo::write(
        &out,
        input,
        &stanzas,
        &params,
        &pins,
        &|_: debforge::report::Event| {},
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        err,
        format!(
            "the repository would not install: debforge.pref: pins gone to this repository (priority 1001), which lists no gone; apt would find no candidate\n  nothing was written; {} is as it was",
            out.display()
        )
    );
    assert!(tree_bytes(&out) == before, "the previous output changed");
}

/// `verify` checks that apt could install from the repository, not only
/// that its bytes are signed: a pin on a version no index has, or pins
/// that leave a package no candidate, are named.
#[test]
fn verify_rejects_a_repository_apt_could_not_install_from() {
    // A consistent build verifies; pins that leave apt no candidate do not
    // (here they name a label this repository does not have), nor does an
    // exact pin on a version no index has.
    let lab = Lab::new();
    let out = shipped_build_in(&lab, &lab.server.url("repo/"));
    ok(crate::support::common::debforge().arg("verify").arg(&out));
    let pref = out.join("debforge.pref");
    let pins = fs::read_to_string(&pref).unwrap();
    fs::write(
        &pref,
        pins.replacen(
            "Package: libnccl2\nPin: release o=GPU lab,l=gpu-lab\n",
            "Package: libnccl2\nPin: release o=GPU lab,l=gpu-lab-old\n",
            1,
        ),
    )
    .unwrap();
    let (code, stdout, _) = run(crate::support::common::debforge().arg("verify").arg(&out));
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("debforge.pref: leaves apt no candidate for libnccl2 (this repository has 2.4.2-1+cuda10.1+debforge1 at priority -1); apt would refuse to install it"),
        "{stdout}"
    );
    fs::write(
        &pref,
        format!(
            "Package: libnccl2\nPin: version 2.4.2-1+cuda10.1+lab1\nPin-Priority: 1001\n\n{pins}"
        ),
    )
    .unwrap();
    let (code, stdout, _) = run(crate::support::common::debforge().arg("verify").arg(&out));
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("debforge.pref: pins libnccl2 to 2.4.2-1+cuda10.1+lab1 (priority 1001), which no index lists (it has 2.4.2-1+cuda10.1+debforge1); apt would find no candidate"),
        "{stdout}"
    );
}

/// A lab machine that already has NVIDIA's own builds (installed by hand, as
/// the blog does, so without the links) gets ours with the normal install:
/// the shipped `+debforge1` builds are newer than NVIDIA's same version and
/// pinned, so apt replaces them and the links appear. A machine with newer
/// builds (7.6.5, 2.4.8) needs the downgrade allowed, which apt says and
/// gpu-stack-check's hint names.
#[test]
fn a_machine_with_nvidias_own_builds_gets_ours_with_the_normal_install() {
    let lab = Lab::new();
    let port = free_port();
    let out = shipped_build_in(&lab, &format!("http://127.0.0.1:{port}/"));
    let _server = Serve::start(&out, port);
    for (cudnn, nccl) in [
        ("7.5.0.56-1+cuda10.1", "2.4.2-1+cuda10.1"),
        ("7.6.5.32-1+cuda10.1", "2.4.8-1+cuda10.1"),
    ] {
        let c = Chroot::new();
        c.ok("rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*");
        let debs: Vec<String> = [
            ("libcudnn7", cudnn),
            ("libcudnn7-dev", cudnn),
            ("libnccl2", nccl),
            ("libnccl-dev", nccl),
        ]
        .iter()
        .map(|(p, v)| c.put(&lab.www().join(format!("nvidia/{p}_{v}_amd64.deb"))))
        .collect();
        c.ok(&format!("dpkg -i {} 2>&1", debs.join(" ")));
        assert!(!c.path("/usr/local/cuda/nccl/lib/libnccl.so.2").exists());
        let cfg = c.put(&pool(&out, "g/gpu-lab-repo", "gpu-lab-repo_1.0-1_all.deb"));
        c.ok(&format!("dpkg -i {cfg}"));
        update_clean(&c);
        if cudnn.starts_with("7.6") {
            let (code, text) = c.run("apt-get install -y gpu-stack-cu101 2>&1");
            assert_eq!(code, 100, "{text}");
            assert!(
                text.contains(
                    "E: Packages were downgraded and -y was used without --allow-downgrades."
                ),
                "{text}"
            );
            c.ok("apt-get install -y --allow-downgrades gpu-stack-cu101 2>&1");
        } else {
            c.ok("apt-get install -y gpu-stack-cu101 2>&1");
        }
        assert_eq!(
            c.ok("dpkg-query -W -f='${Package} ${Version}\\n' libcudnn7 libcudnn7-dev libnccl2 libnccl-dev"),
            "libcudnn7 7.5.0.56-1+cuda10.1+debforge1\nlibcudnn7-dev 7.5.0.56-1+cuda10.1+debforge1\nlibnccl-dev 2.4.2-1+cuda10.1+debforge1\nlibnccl2 2.4.2-1+cuda10.1+debforge1\n",
            "{cudnn}"
        );
        let report = c.ok("gpu-stack-check");
        assert!(report.contains("all checks passed"), "{report}");

        // NVIDIA's newer NCCL put back by hand: the check names it and the fix.
        if cudnn.starts_with("7.6") {
            let n = c.put(&lab.www().join(format!("nvidia/libnccl2_{nccl}_amd64.deb")));
            c.ok(&format!("dpkg -i --force-depends {n} 2>&1"));
            let (code, report) = c.run("gpu-stack-check");
            assert_eq!(code, 1, "{report}");
            assert!(
                report.contains("PROBLEM: libnccl2 is 2.4.8-1+cuda10.1, not the lab's 2.4.2-1+cuda10.1+debforge1")
                    && report.contains("fix: sudo apt-get install --allow-downgrades -y gpu-stack-cu101"),
                "{report}"
            );
        }
    }
}

/// Publish never changes a file a live Release references: the packages
/// built here come out byte for byte the same when rebuilt without
/// SOURCE_DATE_EPOCH (dated by the packages they are built around), and a
/// package rebuilt with other bytes at the same version is refused before
/// anything is copied, naming both digests.
#[test]
fn publish_refuses_to_change_a_published_package_in_place() {
    let lab = Lab::new();
    let out = shipped_build_in(&lab, &lab.server.url("repo/"));
    let meta = pool(&out, "g/gpu-stack-cu101", "gpu-stack-cu101_1.0-1_all.deb");
    let target = lab.dir.path().join("mirror");
    let build = || ok(lab.cmd("build").arg("--out").arg(&out));
    let publish = || {
        run(crate::support::common::debforge()
            .arg("publish")
            .arg("--to")
            .arg(&target)
            .arg("--out")
            .arg(&out))
    };
    build();
    let first = fs::read(&meta).unwrap();
    let (code, _, err) = publish();
    assert_eq!(code, 0, "{err}");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    build();
    assert_eq!(
        fs::read(&meta).unwrap(),
        first,
        "a rebuild gives the same bytes"
    );
    let (code, _, err) = publish();
    assert_eq!(code, 0, "{err}");

    // Same version, other contents: refused, the mirror left as it was.
    let recipe = lab.recipes.join("packages/gpu-stack-cu101.toml");
    let text = fs::read_to_string(&recipe).unwrap();
    fs::write(&recipe, text.replace("exactly\"", "exactly, rebuilt\"")).unwrap();
    build();
    let published = debforge::digest::digest_reader(&first[..]).unwrap().sha256;
    let built = debforge::digest::digest_reader(fs::File::open(&meta).unwrap())
        .unwrap()
        .sha256;
    assert_ne!(published, built);
    let release = fs::read(target.join("dists/bionic/InRelease")).unwrap();
    let (code, _, err) = publish();
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        err,
        format!(
            "debforge: error: {}: pool/main/g/gpu-stack-cu101/gpu-stack-cu101_1.0-1_all.deb would change under clients of the Release in force: it lists sha256 {published}, this build has {built}; a package rebuilt at the same name, version and architecture with other bytes\n  hint: nothing was published; give the package a new version (bump the recipe's version, or its version-suffix), or build with the SOURCE_DATE_EPOCH of the published build so it comes out byte for byte the same\n",
            target.display()
        )
    );
    assert_eq!(
        fs::read(target.join("dists/bionic/InRelease")).unwrap(),
        release
    );
    assert_eq!(
        fs::read(target.join("pool/main/g/gpu-stack-cu101/gpu-stack-cu101_1.0-1_all.deb")).unwrap(),
        first
    );
}

/// A lab's update and its rollback on Ubuntu 18.04: generation 1 (NCCL
/// 2.4.2) installed; generation 2 (NCCL 2.4.8, the metapackage 1.0-2)
/// published and taken with one `apt-get update && apt-get dist-upgrade`
/// (the pins name our repository, not a version, so the ones installed let
/// the next generation in); then `debforge rollback` and the same two
/// commands bring 2.4.2 back, with its links. apt asks before downgrading:
/// `-y` alone refuses, as apt says.
#[test]
fn forward_one_generation_then_rollback_on_ubuntu_18_04() {
    let lab = Lab::new();
    let port = free_port();
    let mirror = format!("http://127.0.0.1:{port}/");
    let out = shipped_build_in(&lab, &mirror);
    let pins = fs::read_to_string(out.join("debforge.pref")).unwrap();
    assert!(
        pins.contains(
            "Package: gpu-lab-repo\nPin: release o=GPU lab,l=gpu-lab\nPin-Priority: 1001"
        ) && pins.contains(
            "Package: gpu-stack-cu101\nPin: release o=GPU lab,l=gpu-lab\nPin-Priority: 1001"
        ),
        "{pins}"
    );
    // (Not lab.www(): that is the stand-in upstreams' docroot.)
    let www = lab.dir.path().join("lab-mirror");
    let publish = |extra: &[&str]| {
        let mut c = crate::support::common::debforge();
        c.args(extra)
            .arg("--to")
            .arg(&www)
            .arg("--out")
            .arg(&out)
            .arg("--keys")
            .arg(lab.keys())
            .arg("--cache")
            .arg(&lab.cache);
        c
    };
    ok(&mut publish(&["publish"]));
    let _server = Serve::start(&www, port);
    let c = Chroot::new();
    c.ok("rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*");
    let cfg = c.put(&pool(&out, "g/gpu-lab-repo", "gpu-lab-repo_1.0-1_all.deb"));
    c.ok(&format!("dpkg -i {cfg}"));
    update_clean(&c);
    c.ok("apt-get install -y gpu-stack-cu101 2>&1");
    let installed = |c: &Chroot| {
        c.ok("dpkg-query -W -f='${Package} ${Version}\\n' libnccl2 libnccl-dev gpu-stack-cu101 gpu-lab-repo")
    };
    let first = "gpu-lab-repo 1.0-1\ngpu-stack-cu101 1.0-1\nlibnccl-dev 2.4.2-1+cuda10.1+debforge1\nlibnccl2 2.4.2-1+cuda10.1+debforge1\n";
    assert_eq!(installed(&c), first);
    let nccl_link = |c: &Chroot| {
        c.ok("readlink -f /usr/local/cuda/nccl/lib/libnccl.so.2")
            .trim()
            .to_string()
    };
    assert_eq!(nccl_link(&c), "/usr/lib/x86_64-linux-gnu/libnccl.so.2.4.2");

    // Generation 2: NCCL 2.4.8; the metapackage's Depends change, so its version.
    shipped_build_with(&lab, &mirror, |name, text| match name {
        "gpu-stack-cu101" => text.replace("version = \"1.0-1\"", "version = \"1.0-2\""),
        "libnccl2" | "libnccl-dev" => text.replace("2.4.2-1+cuda10.1", "2.4.8-1+cuda10.1"),
        _ => text,
    });
    ok(&mut publish(&["publish"]));
    update_clean(&c);
    c.ok("apt-get dist-upgrade -y 2>&1");
    assert_eq!(
        installed(&c),
        "gpu-lab-repo 1.0-1\ngpu-stack-cu101 1.0-2\nlibnccl-dev 2.4.8-1+cuda10.1+debforge1\nlibnccl2 2.4.8-1+cuda10.1+debforge1\n",
        "one dist-upgrade takes the next generation"
    );
    assert_eq!(nccl_link(&c), "/usr/lib/x86_64-linux-gnu/libnccl.so.2.4.8");
    assert!(c.ok("gpu-stack-check").contains("all checks passed"));

    // The rollback: generation 1 again, from the output's pool.
    let (code, stdout, err) = run(&mut publish(&["rollback"]));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("published generation 1"), "{err}");
    assert!(!stdout.contains("copied      pool/"), "{stdout}");
    let update = c.ok("apt-get update 2>&1");
    let (code, text) = c.run("apt-get dist-upgrade -y 2>&1");
    assert_eq!(
        code,
        100,
        "{text}\n--- update:\n{update}\n--- policy:\n{}\n--- rollback:\n{stdout}{err}\n--- Packages:\n{}",
        c.ok("apt-cache policy libnccl2 gpu-stack-cu101 2>&1"),
        fs::read_to_string(www.join("dists/bionic/main/binary-amd64/Packages")).unwrap_or_default()
    );
    assert!(
        text.contains("E: Packages were downgraded and -y was used without --allow-downgrades."),
        "{text}"
    );
    c.ok("apt-get dist-upgrade -y --allow-downgrades 2>&1");
    assert_eq!(installed(&c), first, "generation 1 is installed again");
    assert_eq!(nccl_link(&c), "/usr/lib/x86_64-linux-gnu/libnccl.so.2.4.2");
    assert!(c.ok("gpu-stack-check").contains("all checks passed"));
    let upgrade = c.ok("apt-get -s dist-upgrade 2>&1");
    assert!(
        upgrade.contains("0 upgraded, 0 newly installed, 0 to remove"),
        "{upgrade}"
    );
}

/// A machine whose NVIDIA builds are held (`apt-mark hold`, as NVIDIA's CUDA
/// container images and install guides do): `apt-get install
/// gpu-stack-cu101` fails with apt's "held broken packages". Installing
/// gpu-lab-repo names the held packages and the one command that moves
/// them; gpu-stack-check names them too; that command ends with the lab's
/// builds, the links, gpu-stack-check passing and nothing else removed.
#[test]
fn held_nvidia_builds_move_to_the_labs_with_the_one_command_named() {
    let lab = Lab::new();
    let port = crate::publish_remote::free_port();
    let out = shipped_build_in(&lab, &format!("http://127.0.0.1:{port}/"));
    let _server = Serve::start(&out, port);
    let c = Chroot::new();
    c.ok("rm -f /etc/apt/sources.list /etc/apt/sources.list.d/*");
    let held = ["libcudnn7", "libcudnn7-dev", "libnccl-dev", "libnccl2"];
    let mut files = Vec::new();
    for p in held {
        let v = if p.starts_with("libnccl") {
            "2.4.2-1+cuda10.1"
        } else {
            "7.5.0.56-1+cuda10.1"
        };
        files.push(c.put(&lab.www().join(format!("nvidia/{p}_{v}_amd64.deb"))));
    }
    c.ok(&format!("dpkg -i {}", files.join(" ")));
    c.ok(&format!("apt-mark hold {}", held.join(" ")));
    let before = c.ok("dpkg-query -W -f='${Package}\\n'");

    let said = c.ok(&format!(
        "dpkg -i {} 2>&1",
        c.put(&pool(&out, "g/gpu-lab-repo", "gpu-lab-repo_1.0-1_all.deb"))
    ));
    let command = "sudo apt-mark unhold libcudnn7 libcudnn7-dev libnccl-dev libnccl2 && sudo apt-get update && sudo apt-get install gpu-stack-cu101";
    assert!(
        said.contains("gpu-lab-repo: libcudnn7 libcudnn7-dev libnccl-dev libnccl2: held (apt-mark hold), so apt will not move them to the gpu-lab repository's builds and `apt-get install gpu-stack-cu101` fails with \"held broken packages\".\n")
            && said.contains(&format!("gpu-lab-repo: the pins now keep every other build away; to move them: {command}\n")),
        "{said}"
    );
    assert!(
        !said.contains("warning: the gpu-lab repository is built for"),
        "{said}"
    );
    update_clean(&c);
    let (code, refused) = c.run("apt-get install -y gpu-stack-cu101 2>&1");
    assert_eq!(code, 100, "{refused}");
    assert!(refused.contains("held broken packages"), "{refused}");

    // gpu-stack-check, as the metapackage ships it, says the same.
    let x = lab.dir.path().join("x-meta");
    ok(Command::new("dpkg-deb")
        .arg("-x")
        .arg(pool(
            &out,
            "g/gpu-stack-cu101",
            "gpu-stack-cu101_1.0-1_all.deb",
        ))
        .arg(&x));
    let check = c.put(&x.join("usr/bin/gpu-stack-check"));
    let (code, report) = c.run(&format!("sh {check}"));
    assert_eq!(code, 1, "{report}");
    assert!(
        report.contains("PROBLEM: libnccl2 is 2.4.2-1+cuda10.1, not the lab's 2.4.2-1+cuda10.1+debforge1, and held (apt-mark hold): apt will not replace it\n")
            && report.contains(&format!("         fix: {command}\n")),
        "{report}"
    );

    // The command, as root runs it (no sudo in the test root; -y for apt).
    let run = command
        .replace("sudo ", "")
        .replace("apt-get install", "apt-get install -y");
    c.ok(&format!("{run} 2>&1"));
    assert_eq!(
        c.ok("dpkg-query -W -f='${Package} ${Version} ${Status}\\n' libcudnn7 libnccl2"),
        "libcudnn7 7.5.0.56-1+cuda10.1+debforge1 install ok installed\nlibnccl2 2.4.2-1+cuda10.1+debforge1 install ok installed\n"
    );
    for link in [
        "/usr/local/cuda/nccl/lib/libnccl.so.2",
        "/usr/local/cuda/lib64/libcudnn.so.7",
    ] {
        c.ok(&format!("test -L {link} && test -e {link}"));
    }
    let check = c.ok("gpu-stack-check");
    assert!(
        check.contains("all checks passed") && !check.contains("held"),
        "{check}"
    );
    let after = c.ok("dpkg-query -W -f='${Package} ${Status}\\n'");
    for p in before.lines() {
        assert!(
            after.contains(&format!("{p} install ok installed")),
            "{p} was removed:\n{after}"
        );
    }
}

/// Seconds since the epoch, now (what the binary's settings would say).
fn debforge_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
