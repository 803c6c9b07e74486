//! `debforge publish` to rsync (a real rsync daemon on loopback, and a
//! remote shell) and to an S3-compatible store (moto's server, from PyPI,
//! started by the test), with the real apt reading what was published.

use std::fs;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::apt::{Apt, sources};
use crate::support::common::{debforge, ok, run, verify_published};
use crate::support::server::Server;
use crate::support::standin::Lab;

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn wait_for_port(port: u16, what: &str, child: &mut Child) {
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited early: {status}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{what} did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// apt, given the published repository at `url`, updates cleanly and picks
/// the pinned cuDNN.
fn apt_accepts(url: &str, out: &Path) {
    apt_accepts_with(url, out, None)
}

/// As [`apt_accepts`], with an apt_auth.conf(5) entry.
fn apt_accepts_with(url: &str, out: &Path, auth: Option<&str>) {
    let apt = Apt::new(
        &sources(url, &out.join("debforge-archive-keyring.gpg")),
        &fs::read_to_string(out.join("debforge.pref")).unwrap(),
    );
    if let Some(auth) = auth {
        let dir = apt.root().join("etc/auth.conf.d");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("lab.conf"), auth).unwrap();
        fs::set_permissions(dir.join("lab.conf"), fs::Permissions::from_mode(0o600)).unwrap();
    }
    let (code, problems) = apt.update();
    assert_eq!((code, problems.clone()), (0, vec![]), "{url}: {problems:?}");
    assert_eq!(apt.candidate("libcudnn7"), "7.5.0.56-1+cuda10.1");
}

pub fn publish(out: &Path, to: &str) -> Command {
    let mut c = debforge();
    c.arg("publish").arg("--to").arg(to).arg("--out").arg(out);
    c
}

pub struct RsyncDaemon {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for RsyncDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RsyncDaemon {
    /// Modules: `repo` (writable, at `root/repo`), `frozen` (read only) and
    /// `locked` (user `lab`, password `s3cret`).
    pub fn start(root: &Path) -> RsyncDaemon {
        let uid = ok(Command::new("id").arg("-u")).trim().to_string();
        let gid = ok(Command::new("id").arg("-g")).trim().to_string();
        for m in ["repo", "frozen", "locked"] {
            fs::create_dir_all(root.join(m)).unwrap();
        }
        let secrets = root.join("secrets");
        fs::write(&secrets, "lab:s3cret\n").unwrap();
        fs::set_permissions(&secrets, fs::Permissions::from_mode(0o600)).unwrap();
        let log = root.join("rsyncd.log");
        let port = free_port();
        let r = root.display();
        let conf = format!(
            "port = {port}\naddress = 127.0.0.1\nuse chroot = false\nuid = {uid}\ngid = {gid}\n\
             log file = {}\ntransfer logging = yes\nlog format = %o %f\n\
             [repo]\npath = {r}/repo\nread only = false\n\
             [frozen]\npath = {r}/frozen\nread only = true\n\
             [locked]\npath = {r}/locked\nread only = false\nauth users = lab\nsecrets file = {}\n",
            log.display(),
            secrets.display()
        );
        let conf_path = root.join("rsyncd.conf");
        fs::write(&conf_path, conf).unwrap();
        let mut child = Command::new("rsync")
            .args(["--daemon", "--no-detach", "--config"])
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("rsync is installed (.ci/run installs it)");
        wait_for_port(port, "rsync --daemon", &mut child);
        RsyncDaemon { child, port, log }
    }

    pub fn url(&self, rest: &str) -> String {
        format!("rsync://127.0.0.1:{}/{rest}", self.port)
    }

    /// The files the daemon received, in order.
    fn received(&self) -> Vec<String> {
        fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once("] recv ").map(|(_, f)| f.to_string()))
            .collect()
    }
}

#[test]
fn publish_over_rsync_in_the_safe_order() {
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    let daemons = lab.dir.path().join("rsyncd");
    let daemon = RsyncDaemon::start(&daemons);
    let mirror = daemons.join("repo/gpu-lab");
    let url = daemon.url("repo/gpu-lab");

    let dry = ok(publish(&out, &url).arg("--dry-run"));
    assert!(dry.contains("would copy  dists/bionic/InRelease"), "{dry}");
    assert!(!mirror.exists(), "a dry run changes nothing");

    let first = ok(&mut publish(&out, &url));
    assert!(first.contains("copied      pool/"), "{first}");
    // The order the mirror received the files in: pool first, InRelease last.
    let got = daemon.received();
    assert!(got.first().unwrap().contains("/pool/"), "{got:?}");
    assert!(
        got.last().unwrap().ends_with("dists/bionic/InRelease"),
        "{got:?}"
    );
    let pos = |suffix: &str| got.iter().position(|f| f.ends_with(suffix)).unwrap();
    assert!(pos("binary-amd64/Packages.xz") < pos("dists/bionic/Release"));
    assert!(pos("dists/bionic/Release") < pos("dists/bionic/Release.gpg"));
    assert!(pos("dists/bionic/Release.gpg") < pos("dists/bionic/InRelease"));
    verify_published(&mirror, &out);
    // World-readable for the web server in front of the mirror.
    let mode = fs::metadata(mirror.join("dists/bionic/InRelease"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644);

    // A rebuild of the same recipes sends only the new Release (its Date
    // moved) and its signatures.
    ok(lab.cmd("build").arg("--out").arg(&out));
    let again = ok(&mut publish(&out, &url));
    assert!(
        again.contains(": 3 copied,") && again.contains("0 removed"),
        "{again}"
    );
    assert!(
        again.contains("copied      dists/bionic/InRelease"),
        "{again}"
    );

    // A package goes: kept one round for clients of the previous Release.
    fs::remove_file(lab.recipes.join("packages/libcudnn7-doc.toml")).unwrap();
    // --keep 1: the output keeps no earlier generation's files, so the
    // package leaves the mirror once no Release references it.
    ok(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .args(["--keep", "1"]));
    let doc =
        mirror.join("pool/main/libc/libcudnn7-doc/libcudnn7-doc_7.5.0.56-1+cuda10.1_amd64.deb");
    let second = ok(&mut publish(&out, &url));
    assert!(doc.exists(), "{second}");
    assert!(!second.contains("copied      pool/"), "{second}");
    verify_published(&mirror, &out);
    let third = ok(&mut publish(&out, &url));
    assert!(!doc.exists(), "{third}");
    assert!(
        third.contains("removed     pool/main/libc/libcudnn7-doc/"),
        "{third}"
    );
    verify_published(&mirror, &out);
    let server = Server::start(mirror.clone());
    apt_accepts(&server.url(""), &out);

    // Over a remote shell (`user@host:/path`): RSYNC_RSH stands in for ssh.
    let shell_log = lab.dir.path().join("ssh.log");
    let fake_ssh = lab.dir.path().join("fake-ssh");
    fs::write(
        &fake_ssh,
        format!(
            "#!/bin/sh\necho \"$@\" >> {}\n\
             while [ $# -gt 0 ]; do case \"$1\" in -l) shift 2;; -*) shift;; *) break;; esac; done\n\
             shift\nexec sh -c \"$*\"\n",
            shell_log.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&fake_ssh, fs::Permissions::from_mode(0o755)).unwrap();
    let over_ssh = lab.dir.path().join("ssh-mirror/www/gpu-lab");
    ok(publish(&out, &format!("lab@mirror1:{}", over_ssh.display())).env("RSYNC_RSH", &fake_ssh));
    verify_published(&over_ssh, &out);
    let calls = fs::read_to_string(&shell_log).unwrap();
    assert!(calls.contains("-l lab mirror1 rsync --server"), "{calls}");
}

#[test]
fn rsync_targets_fail_clearly() {
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    let daemon = RsyncDaemon::start(&lab.dir.path().join("rsyncd"));

    let (code, _, err) = run(&mut publish(&out, &daemon.url("frozen/gpu-lab")));
    assert_eq!(code, 2);
    assert!(
        err.contains("not writable") && err.contains("read only"),
        "{err}"
    );

    let (code, _, err) =
        run(publish(&out, &daemon.url("locked/gpu-lab")).env("RSYNC_PASSWORD", "wrong"));
    assert_eq!(code, 2);
    assert!(
        err.contains("credentials refused") && err.contains("auth failed"),
        "{err}"
    );
    ok(publish(
        &out,
        &format!("rsync://lab@127.0.0.1:{}/locked/gpu-lab", daemon.port),
    )
    .env("RSYNC_PASSWORD", "s3cret"));

    // A target's index larger than debforge reads (sparse: 1 GiB and a
    // byte) is refused from its listed size, never copied to be read.
    ok(&mut publish(&out, &daemon.url("repo/big")));
    let packages = walkdir::WalkDir::new(lab.dir.path().join("rsyncd/repo/big/dists"))
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .find(|p| p.ends_with("binary-amd64/Packages"))
        .expect("a Packages index on the target");
    fs::File::options()
        .write(true)
        .open(&packages)
        .unwrap()
        .set_len((1 << 30) + 1)
        .unwrap();
    let started = Instant::now();
    let (code, _, err) = run(&mut publish(&out, &daemon.url("repo/big")));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(
            "Packages is listed (1073741825 bytes) but was not read: more than the 1073741824"
        ) && err.contains("nothing was changed"),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    // One no Release lists (a stale suite) is not read, so not refused: it
    // goes as stale. A suite named in UTF-8 is read under the C locale
    // (rsync lists `ü` as `\#303\#274` there unless told not to).
    let root = lab.dir.path().join("rsyncd/repo");
    ok(&mut publish(&out, &daemon.url("repo/more")));
    let stale = root.join("more/dists/old/main/binary-amd64/Packages");
    fs::create_dir_all(stale.parent().unwrap()).unwrap();
    fs::File::create(&stale)
        .unwrap()
        .set_len((1 << 30) + 1)
        .unwrap();
    let foreign = root.join("more/dists/bionic-\u{fc}");
    fs::create_dir_all(&foreign).unwrap();
    fs::copy(
        root.join("more/dists/bionic/Release"),
        foreign.join("Release"),
    )
    .unwrap();
    ok(publish(&out, &daemon.url("repo/more")).env("LC_ALL", "C"));
    assert!(!stale.exists(), "the stale index is removed");

    let closed = free_port();
    let (code, _, err) = run(&mut publish(
        &out,
        &format!("rsync://127.0.0.1:{closed}/repo/x"),
    ));
    assert_eq!(code, 2);
    assert!(
        err.contains("cannot be reached") && err.contains("Connection refused"),
        "{err}"
    );
    assert!(
        err.contains("untouched"),
        "the hint says nothing changed: {err}"
    );
}

/// moto's S3 server, installed by `.ci/run` into a cached virtualenv.
pub struct S3Server {
    child: Child,
    port: u16,
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn moto_server() -> PathBuf {
    if let Some(p) = std::env::var_os("DEBFORGE_TEST_MOTO_SERVER") {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("HOME").expect("HOME");
    let cached = PathBuf::from(home).join(".cache/debforge-tests/moto/bin/moto_server");
    assert!(
        cached.exists(),
        "{}: moto's S3 server is missing; run .ci/run (it installs moto[server] there), or set DEBFORGE_TEST_MOTO_SERVER",
        cached.display()
    );
    cached
}

impl S3Server {
    /// `enforce_auth`: refuse unknown access keys (as AWS does).
    pub fn start(enforce_auth: bool) -> S3Server {
        let port = free_port();
        let mut cmd = Command::new(moto_server());
        cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if enforce_auth {
            cmd.env("INITIAL_NO_AUTH_ACTION_COUNT", "0");
        }
        let mut child = cmd.spawn().unwrap();
        wait_for_port(port, "moto_server", &mut child);
        S3Server { child, port }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn create_bucket(&self, name: &str) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "PUT /{name} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        )
        .unwrap();
        let mut reply = String::new();
        std::io::Read::read_to_string(&mut s, &mut reply).unwrap();
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    }
}

pub fn s3_publish(out: &Path, to: &str, endpoint: &str) -> Command {
    let mut c = publish(out, to);
    c.args(["--endpoint", endpoint])
        .env("AWS_ACCESS_KEY_ID", "lab")
        .env("AWS_SECRET_ACCESS_KEY", "lab-secret")
        .env("HOME", "/nonexistent")
        .env_remove("AWS_PROFILE");
    c
}

#[test]
fn publish_to_an_s3_compatible_store() {
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    // A big file beside the repository goes up in parts, streamed.
    let big: Vec<u8> = (0..20_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    fs::create_dir_all(out.join("extras")).unwrap();
    fs::write(out.join("extras/big.bin"), &big).unwrap();
    let s3 = S3Server::start(false);
    s3.create_bucket("lab-apt");
    let endpoint = s3.endpoint();

    let first = ok(&mut s3_publish(&out, "s3://lab-apt/gpu/lab", &endpoint));
    let lines: Vec<&str> = first.lines().filter(|l| l.starts_with("copied")).collect();
    assert!(lines.first().unwrap().contains(" pool/"), "{first}");
    assert!(
        lines.last().unwrap().ends_with("dists/bionic/InRelease"),
        "{first}"
    );
    // apt reads the bucket over plain HTTP, path-style. moto refuses
    // anonymous reads of private objects (and fails on public-read bucket
    // policies), but takes any Authorization header as signed in: apt gets a
    // login from auth.conf, as for a private mirror behind a proxy.
    let auth = format!("machine {endpoint}/lab-apt login lab password lab\n");
    let apt_sees =
        |out: &Path| apt_accepts_with(&format!("{endpoint}/lab-apt/gpu/lab/"), out, Some(&auth));
    apt_sees(&out);

    // Unchanged objects, the multipart one included, are not sent again:
    // their ETags are computed locally as S3 computes them.
    ok(lab.cmd("build").arg("--out").arg(&out));
    fs::create_dir_all(out.join("extras")).unwrap();
    fs::write(out.join("extras/big.bin"), &big).unwrap();
    let again = ok(&mut s3_publish(&out, "s3://lab-apt/gpu/lab", &endpoint));
    assert!(
        again.contains(": 3 copied,") && again.contains("0 removed"),
        "{again}"
    );
    assert!(!again.contains("copied      extras/big.bin"), "{again}");

    // A package goes: kept one round, then removed.
    fs::remove_file(lab.recipes.join("packages/libcudnn7-doc.toml")).unwrap();
    // --keep 1: the output keeps no earlier generation's files, so the
    // package leaves the mirror once no Release references it.
    ok(lab
        .cmd("build")
        .arg("--out")
        .arg(&out)
        .args(["--keep", "1"]));
    let second = ok(&mut s3_publish(&out, "s3://lab-apt/gpu/lab", &endpoint));
    assert!(!second.contains("removed     pool/"), "{second}");
    assert!(second.contains("removed     extras/big.bin"), "{second}");
    apt_sees(&out);
    let third = ok(&mut s3_publish(&out, "s3://lab-apt/gpu/lab", &endpoint));
    assert!(
        third.contains("removed     pool/main/libc/libcudnn7-doc/"),
        "{third}"
    );
    apt_sees(&out);
}

#[test]
fn s3_targets_fail_clearly() {
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    ok(lab.cmd("build").arg("--out").arg(&out));

    // No credentials anywhere: refused at once, with what to set.
    let (code, _, err) = run(publish(&out, "s3://lab-apt/gpu")
        .args(["--endpoint", "http://127.0.0.1:9"])
        .env_remove("AWS_ACCESS_KEY_ID")
        .env("HOME", lab.dir.path()));
    assert_eq!(code, 2);
    assert!(
        err.contains("credentials refused") && err.contains("AWS_ACCESS_KEY_ID"),
        "{err}"
    );

    // The shared credentials file is read when the environment has none.
    let s3 = S3Server::start(true);
    fs::create_dir_all(lab.dir.path().join(".aws")).unwrap();
    fs::write(
        lab.dir.path().join(".aws/credentials"),
        "[default]\naws_access_key_id = AKIAUNKNOWN\naws_secret_access_key = nope\n",
    )
    .unwrap();
    let (code, _, err) = run(publish(&out, "s3://lab-apt/gpu")
        .args(["--endpoint", &s3.endpoint()])
        .env_remove("AWS_ACCESS_KEY_ID")
        .env("HOME", lab.dir.path()));
    assert_eq!(code, 2);
    assert!(err.contains("credentials refused"), "{err}");
    assert!(
        err.contains("AWS_SECRET_ACCESS_KEY"),
        "the hint says what to set: {err}"
    );

    // A store that is not there.
    let closed = free_port();
    let started = Instant::now();
    let (code, _, err) = run(&mut s3_publish(
        &out,
        "s3://lab-apt/gpu",
        &format!("http://127.0.0.1:{closed}"),
    ));
    assert_eq!(code, 2);
    assert!(err.contains("cannot be reached"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "gave up in time"
    );
}
