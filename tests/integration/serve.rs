//! `debforge serve`: apt updates from it, and it answers HTTP as it should —
//! ranges, conditional requests, and no way out of its directory.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};

use crate::apt::Apt;
use crate::common::{debforge, ok, run};
use crate::standin::Lab;

struct Served {
    child: Child,
    url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(dir: &std::path::Path) -> Served {
    let mut child = debforge()
        .args(["serve", "--listen", "127.0.0.1:0", "--out"])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().rsplit(' ').next().unwrap().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{line}");
    Served { child, url }
}

/// (status, headers+body) of a curl request.
fn curl(args: &[&str]) -> (u16, String) {
    let (_, out, _) = run(Command::new("curl")
        .args(["-s", "-i", "--path-as-is", "--max-time", "5"])
        .args(args));
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, out)
}

#[test]
fn apt_updates_from_serve_and_http_is_right() {
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    // A symlink pointing out of the served directory.
    std::os::unix::fs::symlink("/etc", out.join("escape")).unwrap();
    let mut s = serve(&out);

    let sources = format!(
        "Types: deb\nURIs: {}\nSuites: bionic\nComponents: main\nSigned-By: {}\n",
        s.url,
        out.join("debforge-archive-keyring.gpg").display()
    );
    let apt = Apt::new(
        &sources,
        &std::fs::read_to_string(out.join("debforge.pref")).unwrap(),
    );
    let (code, problems) = apt.update();
    assert_eq!((code, problems.clone()), (0, vec![]), "{problems:?}");
    assert_eq!(apt.candidate("libcudnn7"), "7.5.0.56-1+cuda10.1");

    let release = format!("{}dists/bionic/Release", s.url);
    let (code, head) = curl(&["-I", &release]);
    assert_eq!(code, 200, "{head}");
    assert!(
        head.contains("Content-Type: text/plain")
            && head.contains("ETag: \"")
            && head.contains("Last-Modified: "),
        "{head}"
    );
    let len = std::fs::metadata(out.join("dists/bionic/Release"))
        .unwrap()
        .len();
    assert!(head.contains(&format!("Content-Length: {len}")), "{head}");
    let (code, part) = curl(&["-r", "0-5", &release]);
    assert_eq!(code, 206, "{part}");
    assert!(
        part.ends_with("Origin") && part.contains(&format!("Content-Range: bytes 0-5/{len}")),
        "{part}"
    );
    let last_modified = head
        .lines()
        .find_map(|l| l.strip_prefix("Last-Modified: "))
        .unwrap()
        .trim()
        .to_string();
    let (code, _) = curl(&[
        "-H",
        &format!("If-Modified-Since: {last_modified}"),
        &release,
    ]);
    assert_eq!(code, 304);
    let etag = head
        .lines()
        .find_map(|l| l.strip_prefix("ETag: "))
        .unwrap()
        .trim()
        .to_string();
    let (code, _) = curl(&["-H", &format!("If-None-Match: {etag}"), &release]);
    assert_eq!(code, 304);
    let (code, deb) = curl(&[
        "-I",
        &format!(
            "{}pool/main/libc/libcudnn7/libcudnn7_7.5.0.56-1+cuda10.1_amd64.deb",
            s.url
        ),
    ]);
    assert_eq!(code, 200);
    assert!(
        deb.contains("application/vnd.debian.binary-package"),
        "{deb}"
    );

    for evil in [
        "../../../etc/passwd",
        "%2e%2e/%2e%2e/etc/passwd",
        "dists/%2E%2E/%2E%2E/%2E%2E/etc/passwd",
        "escape/passwd",
    ] {
        let (code, body) = curl(&[&format!("{}{evil}", s.url)]);
        assert_eq!(code, 403, "{evil}: {body}");
        assert!(!body.contains("root:"), "{evil} leaked a file");
    }
    assert_eq!(curl(&[&format!("{}nothing-here", s.url)]).0, 404);
    assert_eq!(curl(&["-X", "POST", &release]).0, 405);

    // One log line per request.
    let _ = s.child.kill();
    let _ = s.child.wait();
    let mut log = String::new();
    s.child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(log.contains("GET /dists/bionic/InRelease 200"), "{log}");
    assert!(log.contains("GET /escape/passwd 403"), "{log}");
}
