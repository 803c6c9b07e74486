//! `debforge serve`: apt updates from it, and it answers HTTP as it should —
//! ranges, conditional requests, and no way out of its directory.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};

use crate::support::apt::Apt;
use crate::support::common::{debforge, ok, run};
use crate::support::standin::Lab;

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
    let mut cmd = debforge();
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--out"])
        .arg(dir)
        .stderr(Stdio::piped());
    started(cmd)
}

/// Starts `cmd` (a `debforge serve`) and waits for its `serving … on URL` line.
fn started(mut cmd: Command) -> Served {
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
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

/// A header's value in a `curl -i` answer (names compare case-blind).
fn header(answer: &str, name: &str) -> String {
    answer
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
        .unwrap_or_default()
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
            && header(&head, "etag").starts_with('"')
            && !header(&head, "last-modified").is_empty(),
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
    let last_modified = header(&head, "last-modified");
    let (code, _) = curl(&[
        "-H",
        &format!("If-Modified-Since: {last_modified}"),
        &release,
    ]);
    assert_eq!(code, 304);
    let etag = header(&head, "etag");
    let (code, _) = curl(&["-H", &format!("If-None-Match: {etag}"), &release]);
    assert_eq!(code, 304);
    // Weak comparison and lists (RFC 9110 §13.1.2).
    for tags in [
        format!("W/{etag}"),
        format!("\"other\", {etag}"),
        "*".into(),
    ] {
        let (code, _) = curl(&["-H", &format!("If-None-Match: {tags}"), &release]);
        assert_eq!(code, 304, "If-None-Match: {tags}");
    }
    // If-Range, as apt sends it when it resumes: the range only while the
    // file is the one it started (strong ETag or the exact date); else all.
    for (if_range, want) in [
        (etag.clone(), 206),
        (last_modified.clone(), 206),
        ("\"0-0\"".to_string(), 200),
        (format!("W/{etag}"), 200),
        ("Sat, 01 Jan 2000 00:00:00 GMT".to_string(), 200),
    ] {
        let (code, answer) = curl(&[
            "-r",
            "0-5",
            "-H",
            &format!("If-Range: {if_range}"),
            &release,
        ]);
        assert_eq!(code, want, "If-Range: {if_range}: {answer}");
        if want == 200 {
            assert!(
                answer.contains(&format!("Content-Length: {len}")),
                "{answer}"
            );
        }
    }
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
    let (code, answer) = curl(&["-X", "POST", &release]);
    assert_eq!(code, 405);
    assert!(answer.contains("Allow: GET, HEAD"), "{answer}");

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

/// The server's resident memory, in KB.
fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// Sends raw bytes, then reads until the server closes (or 5 s pass).
fn raw(addr: &str, request: &[u8]) -> String {
    use std::io::Write;
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    c.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// What a hostile LAN client can try: headers without end, a body smuggled
/// behind a GET, a bad Range, escape sequences for the operator's log; and
/// 1,000 idle connections plus slow-header clients while a normal client
/// keeps getting answers quickly.
#[test]
fn serve_holds_up_against_hostile_clients() {
    use std::io::Write;
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    let mut s = serve(&out);
    let addr = s
        .url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let pid = s.child.id();
    let release_len = std::fs::metadata(out.join("dists/bionic/Release"))
        .unwrap()
        .len();

    // Headers that never end: each connection is cut off at the line limit;
    // the server's memory stays small.
    let bombers: Vec<_> = (0..4)
        .map(|_| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let mut c = std::net::TcpStream::connect(&addr).unwrap();
                c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nX-Bomb: ")
                    .unwrap();
                let chunk = vec![b'a'; 1 << 20];
                let mut sent = 0usize;
                while sent < 300 << 20 {
                    if c.write_all(&chunk).is_err() {
                        break;
                    }
                    sent += chunk.len();
                }
                sent
            })
        })
        .collect();
    for b in bombers {
        let sent = b.join().unwrap();
        assert!(sent < 300 << 20, "the server read a 300 MB header");
    }
    assert!(rss_kb(pid) < 64 * 1024, "serve RSS {} KB", rss_kb(pid));

    // A body behind a GET is refused, never read as a second request.
    for smuggle in [
        "GET /dists/bionic/Release HTTP/1.1\r\nHost: x\r\nContent-Length: 41\r\n\r\nGET /dists/bionic/InRelease HTTP/1.1\r\n\r\n",
        "GET /dists/bionic/Release HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 41\r\n\r\nGET /dists/bionic/InRelease HTTP/1.1\r\n\r\n",
        "GET /dists/bionic/Release HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n29\r\nGET /dists/bionic/InRelease HTTP/1.1\r\n\r\n\r\n0\r\n\r\n",
        // Not HTTP/1.1 as RFC 9112 writes it: a space before the colon, a
        // folded header, a bare CR, no Host, a version with a tail.
        "GET /dists/bionic/Release HTTP/1.1\r\nHost: x\r\nContent-Length : 41\r\n\r\nGET /dists/bionic/InRelease HTTP/1.1\r\n\r\n",
        "GET /dists/bionic/Release HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n Content-Length: 41\r\n\r\nGET /dists/bionic/InRelease HTTP/1.1\r\n\r\n",
        "GET /dists/bionic/Release HTTP/1.1\r\nHost: x\rX-A: 1\r\n\r\nGET /dists/bionic/InRelease HTTP/1.1\r\n\r\n",
        "GET /dists/bionic/Release HTTP/1.1\r\nConnection: close\r\n\r\n",
        "GET /dists/bionic/Release HTTP/1.1\r\nHost: x\r\nHost: y\r\nConnection: close\r\n\r\n",
        "GET /dists/bionic/Release HTTP/1.1x\r\nHost: x\r\nConnection: close\r\n\r\n",
    ] {
        let answer = raw(&addr, smuggle.as_bytes());
        assert_eq!(answer.matches("HTTP/1.1 ").count(), 1, "{answer}");
        assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    }

    // Range syntax that is not `bytes=N-M`: ignored, the whole file.
    let answer = raw(
        &addr,
        b"GET /dists/bionic/Release HTTP/1.1\r\nHost: x\r\nRange: bytes=abc\r\nConnection: close\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert!(
        answer.contains(&format!("Content-Length: {release_len}\r\n")),
        "{answer}"
    );

    // An escape sequence in the path: refused as a malformed request, and
    // nothing of it reaches the log raw.
    let answer = raw(
        &addr,
        b"GET /\x1b[2J\x1b]0;owned\x07 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    // An HTTP/1.0 request needs no Host.
    let answer = raw(&addr, b"HEAD /dists/bionic/Release HTTP/1.0\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.0 200 OK"), "{answer}");

    // 1,000 idle connections and 100 that send headers a byte a second.
    let idle: Vec<_> = (0..1000)
        .map(|_| std::net::TcpStream::connect(&addr).unwrap())
        .collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let slow: Vec<_> = (0..100)
        .map(|_| {
            let (addr, stop) = (addr.clone(), stop.clone());
            std::thread::spawn(move || {
                let Ok(mut c) = std::net::TcpStream::connect(&addr) else {
                    return;
                };
                let _ = c.write_all(b"GET /dists/bionic/Release HTTP/1.1\r\nX-Slow: ");
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    if c.write_all(b"a").is_err() {
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1000));
                }
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let mut times = Vec::new();
    for _ in 0..200 {
        let t = std::time::Instant::now();
        let answer = raw(
            &addr,
            b"GET /dists/bionic/Release HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        times.push(t.elapsed());
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    }
    times.sort();
    let p99 = times[times.len() * 99 / 100];
    eprintln!(
        "serve under 1,000 idle + 100 slow clients: p50 {:?}, p99 {p99:?}",
        times[times.len() / 2]
    );
    assert!(p99 < std::time::Duration::from_millis(100), "p99 {p99:?}");
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for t in slow {
        t.join().unwrap();
    }
    drop(idle);

    let _ = s.child.kill();
    let mut log = String::new();
    s.child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(!log.contains('\x1b'), "a raw escape reached the log");
    assert!(log.contains(" - - refused: "), "{log}");
}

/// 5,000 connections, more than the cap (3,000 here), under a 1.5 GB
/// address-space limit (a thread per connection aborted the process at
/// ~4,300): the ones past the cap get a 503, the process lives on, and once
/// clients go away a normal request is answered again.
#[test]
fn serve_degrades_with_503_and_never_aborts() {
    let lab = Lab::new();
    let out = lab.dir.path().join("repo-out");
    ok(lab.cmd("build").arg("--out").arg(&out));
    // Room for 5,000 sockets in this test process.
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write only the struct given.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max.min(65536);
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
    if lim.rlim_cur < 6000 {
        eprintln!("skipped: the open-files limit is {}", lim.rlim_cur);
        return;
    }
    let mut cmd = Command::new("prlimit");
    cmd.arg("--as=1610612736")
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_debforge"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--max-connections",
            "3000",
            "--out",
        ])
        .arg(&out)
        .stderr(Stdio::null());
    let s = started(cmd);
    let addr = s
        .url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let conns: Vec<_> = (0..5000)
        .filter_map(|_| std::net::TcpStream::connect(&addr).ok())
        .collect();
    assert!(conns.len() > 4500, "only {} connections", conns.len());
    // Past the cap: a 503, then the connection closes. Connections beyond
    // the listen backlog are accepted only as the kernel retries them, so
    // poll them all for a while rather than expect any one at once.
    for c in &conns {
        c.set_nonblocking(true).unwrap();
    }
    let mut busy = 0;
    let started = std::time::Instant::now();
    while busy == 0 && started.elapsed() < std::time::Duration::from_secs(30) {
        for mut c in &conns {
            let mut buf = [0u8; 64];
            if let Ok(n) = c.read(&mut buf) {
                busy += usize::from(buf[..n].starts_with(b"HTTP/1.1 503 "));
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(busy > 0, "no connection past the cap got a 503");
    let pid_alive = || std::path::Path::new(&format!("/proc/{}", s.child.id())).exists();
    assert!(pid_alive(), "serve died under 5,000 connections");
    drop(conns);
    let started = std::time::Instant::now();
    loop {
        let answer = raw(
            &addr,
            b"GET /dists/bionic/Release HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        );
        if answer.starts_with("HTTP/1.1 200 OK") {
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(15),
            "no answer after the clients left: {answer}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(pid_alive());
}
