//! `debforge serve`: a small read-only HTTP/1.1 server for a quick LAN
//! mirror. GET and HEAD, single byte ranges, Last-Modified and
//! If-Modified-Since, ETag and If-None-Match, a Content-Type by extension,
//! keep-alive, one thread per connection. Paths never leave the root: `..`
//! (plain or percent-encoded) is refused, and the resolved file must lie
//! under the canonical root, so a symlink pointing out is refused too.
//! The server reports each request to a callback; the binary prints it.
//!
//! Hardened for a LAN it does not control: the request line and headers are
//! bounded (8 KiB a line, 100 headers, 32 KiB in all) and must arrive within
//! [`HEADER_DEADLINE`] (slowloris); an idle keep-alive connection closes
//! after [`IDLE`]; a request with a body (GET and HEAD take none) is refused
//! and the connection closed, so a body is never read as a request;
//! connections are capped, and at the file-descriptor limit the accept loop
//! backs off instead of spinning; logged paths are escaped; a Range header
//! that is not valid `bytes=` syntax is ignored (RFC 9110: a full 200).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, UNIX_EPOCH};

/// Longest request line or header line.
const MAX_LINE: usize = 8 * 1024;
/// Most header lines, and most header bytes, in one request.
const MAX_HEADERS: usize = 100;
const MAX_HEADER_BYTES: usize = 32 * 1024;
/// From a request's first byte to its blank line.
pub const HEADER_DEADLINE: Duration = Duration::from_secs(10);
/// A keep-alive connection with no new request closes after this.
pub const IDLE: Duration = Duration::from_secs(15);
/// Connections served at once; more get a 503 and are closed.
pub const MAX_CONNECTIONS: usize = 4096;

use crate::format::date::{format_rfc2822, parse_rfc2822};

/// One served request, for the log.
#[derive(Debug, Clone)]
pub struct RequestLog {
    pub peer: SocketAddr,
    pub method: String,
    pub path: String,
    pub status: u16,
    pub bytes: u64,
}

pub type Logger = Arc<dyn Fn(RequestLog) + Send + Sync>;

/// Serves `root` on `listener` until the process ends.
pub fn serve(listener: TcpListener, root: &Path, log: Logger) -> io::Result<()> {
    let root = Arc::new(root.canonicalize()?);
    let open = Arc::new(AtomicUsize::new(0));
    let cap = MAX_CONNECTIONS.min(raise_fd_limit().saturating_sub(64).max(16));
    loop {
        let conn = match listener.accept() {
            Ok((conn, _)) => conn,
            Err(e) => {
                // Out of descriptors (EMFILE/ENFILE) or a transient error:
                // wait for connections to close instead of spinning.
                if matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE)) {
                    std::thread::sleep(Duration::from_millis(50));
                }
                continue;
            }
        };
        if open.load(Ordering::SeqCst) >= cap {
            let mut conn = conn;
            let _ = conn.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = conn.write_all(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\nRetry-After: 1\r\n\r\n",
            );
            continue;
        }
        open.fetch_add(1, Ordering::SeqCst);
        let (root, log, open) = (root.clone(), log.clone(), open.clone());
        let spawned = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                let _ = handle(conn, &root, &*log);
                open.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Raises the soft limit on open files to the hard one (a mirror holds many
/// idle keep-alive connections); returns the limit in force.
fn raise_fd_limit() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write or read only the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        if lim.rlim_cur < lim.rlim_max {
            let want = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
    }
    usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX)
}

/// A request path as it may be printed: control characters, backslashes and
/// non-ASCII bytes as `\xNN`, so nothing a client sends reaches the
/// operator's terminal as an escape sequence.
pub fn escape_for_log(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if (0x21..0x7f).contains(&b) && b != b'\\' {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Why reading a request stopped.
enum ReadError {
    /// The connection closed, timed out idle, or failed: just close it.
    Gone,
    /// Answer with this status, then close.
    Refuse(u16, &'static str),
}

/// One line (up to `\n`) of at most [`MAX_LINE`] bytes, before `deadline`.
fn read_line(
    reader: &mut BufReader<TcpStream>,
    deadline: Instant,
    line: &mut Vec<u8>,
) -> Result<(), ReadError> {
    line.clear();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ReadError::Refuse(408, "Request Timeout"));
        }
        let _ = reader.get_ref().set_read_timeout(Some(left));
        let buf = match reader.fill_buf() {
            Ok([]) => return Err(ReadError::Gone),
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) && !line.is_empty() =>
            {
                return Err(ReadError::Refuse(408, "Request Timeout"));
            }
            Err(_) => return Err(ReadError::Gone),
        };
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if line.len() + take > MAX_LINE {
            return Err(ReadError::Refuse(431, "Request Header Fields Too Large"));
        }
        line.extend_from_slice(&buf[..take]);
        reader.consume(take);
        if done {
            return Ok(());
        }
    }
}

/// A request's line and the headers that matter here.
struct Request {
    method: String,
    target: String,
    range: Option<String>,
    since: Option<String>,
    none_match: Option<String>,
    close: bool,
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Result<Request, ReadError> {
    let mut line = Vec::new();
    // Waiting for the next request on a kept-alive connection: IDLE; once
    // it starts, all of it within HEADER_DEADLINE.
    read_line(reader, Instant::now() + IDLE, &mut line).map_err(|e| match e {
        ReadError::Refuse(408, _) => ReadError::Gone,
        e => e,
    })?;
    let deadline = Instant::now() + HEADER_DEADLINE;
    let text = String::from_utf8_lossy(&line).into_owned();
    let mut parts = text.split_whitespace();
    let (method, target, version) = (
        parts.next().unwrap_or("").to_string(),
        parts.next().unwrap_or("").to_string(),
        parts.next().unwrap_or(""),
    );
    if !version.starts_with("HTTP/1.") || parts.next().is_some() {
        return Err(ReadError::Refuse(400, "Bad Request"));
    }
    let mut req = Request {
        method,
        target,
        range: None,
        since: None,
        none_match: None,
        close: version == "HTTP/1.0",
    };
    let (mut count, mut bytes) = (0, 0);
    let mut lengths = 0;
    loop {
        read_line(reader, deadline, &mut line)?;
        count += 1;
        bytes += line.len();
        if count > MAX_HEADERS || bytes > MAX_HEADER_BYTES {
            return Err(ReadError::Refuse(431, "Request Header Fields Too Large"));
        }
        let h = String::from_utf8_lossy(&line);
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let Some((k, v)) = h.split_once(':') else {
            return Err(ReadError::Refuse(400, "Bad Request"));
        };
        let v = v.trim().to_string();
        match k.to_ascii_lowercase().as_str() {
            "range" => req.range = Some(v),
            "if-modified-since" => req.since = Some(v),
            "if-none-match" => req.none_match = Some(v),
            "connection" => req.close = v.eq_ignore_ascii_case("close"),
            // GET and HEAD carry no body: one announced is refused (it would
            // otherwise be read as the next request).
            "transfer-encoding" => return Err(ReadError::Refuse(400, "Bad Request")),
            "content-length" => {
                lengths += 1;
                if lengths > 1 || v != "0" {
                    return Err(ReadError::Refuse(400, "Bad Request"));
                }
            }
            _ => {}
        }
    }
    Ok(req)
}

/// `%xx` decoding; `None` for malformed escapes or a NUL.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    if out.contains(&0) {
        return None;
    }
    String::from_utf8(out).ok()
}

/// The file for a request path, or the status to answer instead.
fn resolve(root: &Path, target: &str) -> Result<PathBuf, u16> {
    let path = target.split(['?', '#']).next().unwrap_or("/");
    let decoded = percent_decode(path).ok_or(400u16)?;
    if !decoded.starts_with('/') || decoded.split('/').any(|c| c == "..") || decoded.contains('\\')
    {
        return Err(403);
    }
    let mut full = root.join(decoded.trim_start_matches('/'));
    if full.is_dir() {
        full = full.join("index.html");
    }
    let real = full.canonicalize().map_err(|_| 404u16)?;
    if !real.starts_with(root) {
        return Err(403); // a symlink pointing out of the root
    }
    if !real.is_file() {
        return Err(404);
    }
    Ok(real)
}

fn content_type(path: &Path) -> &'static str {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name.rsplit('.').next().unwrap_or("") {
        "deb" => "application/vnd.debian.binary-package",
        "gz" => "application/gzip",
        "xz" => "application/x-xz",
        "gpg" => "application/pgp-signature",
        "asc" => "application/pgp-keys",
        "html" => "text/html; charset=utf-8",
        _ if name == "Release"
            || name == "InRelease"
            || name == "Packages"
            || name.ends_with(".pref") =>
        {
            "text/plain; charset=utf-8"
        }
        _ => "application/octet-stream",
    }
}

fn handle(conn: TcpStream, root: &Path, log: &dyn Fn(RequestLog)) -> io::Result<()> {
    let peer = conn.peer_addr()?;
    conn.set_write_timeout(Some(Duration::from_secs(60)))?;
    // Headers and body go out in one buffered write; without NODELAY,
    // Nagle plus delayed ACKs stall every keep-alive response by ~40 ms.
    conn.set_nodelay(true)?;
    let mut reader = BufReader::with_capacity(MAX_LINE, conn.try_clone()?);
    let mut out = io::BufWriter::with_capacity(64 * 1024, conn);
    loop {
        let req = match read_request(&mut reader) {
            Ok(r) => r,
            Err(ReadError::Gone) => return Ok(()),
            Err(ReadError::Refuse(code, reason)) => {
                let body = format!("{code} {reason}\n");
                let _ = write!(
                    out,
                    "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = out.flush();
                log(RequestLog {
                    peer,
                    method: String::new(),
                    path: String::new(),
                    status: code,
                    bytes: 0,
                });
                return Ok(());
            }
        };
        let close = req.close;
        let (status, bytes) = respond(
            &mut out,
            root,
            &req.method,
            &req.target,
            req.range,
            req.since,
            req.none_match,
            close,
        )?;
        // Every response leaves now, whatever its kind.
        out.flush()?;
        log(RequestLog {
            peer,
            method: escape_for_log(&req.method),
            path: escape_for_log(&req.target),
            status,
            bytes,
        });
        if close {
            return Ok(());
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn respond(
    out: &mut io::BufWriter<TcpStream>,
    root: &Path,
    method: &str,
    target: &str,
    range: Option<String>,
    since: Option<String>,
    none_match: Option<String>,
    close: bool,
) -> io::Result<(u16, u64)> {
    let conn = if close { "close" } else { "keep-alive" };
    let simple = |out: &mut io::BufWriter<TcpStream>,
                  code: u16,
                  reason: &str|
     -> io::Result<(u16, u64)> {
        let body = format!("{code} {reason}\n");
        write!(
            out,
            "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: {conn}\r\n\r\n{body}",
            body.len()
        )?;
        Ok((code, 0))
    };
    if method != "GET" && method != "HEAD" {
        return simple(out, 405, "Method Not Allowed");
    }
    let file = match resolve(root, target) {
        Ok(f) => f,
        Err(400) => return simple(out, 400, "Bad Request"),
        Err(403) => return simple(out, 403, "Forbidden"),
        Err(_) => return simple(out, 404, "Not Found"),
    };
    let mut f = File::open(&file)?;
    let meta = f.metadata()?;
    let len = meta.len();
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs() as i64);
    let etag = format!("\"{len:x}-{mtime:x}\"");
    let last_modified = format_rfc2822(mtime).replace(" UTC", " GMT");
    let not_modified = match (&none_match, &since) {
        (Some(tag), _) => tag == &etag || tag == "*",
        (None, Some(s)) => parse_rfc2822(s).is_some_and(|t| mtime <= t),
        _ => false,
    };
    let headers = |status: &str, extra: &str, length: u64| {
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: {}\r\nContent-Length: {length}\r\nLast-Modified: {last_modified}\r\nETag: {etag}\r\nAccept-Ranges: bytes\r\nConnection: {conn}\r\n{extra}\r\n",
            content_type(&file)
        )
    };
    if not_modified {
        write!(
            out,
            "HTTP/1.1 304 Not Modified\r\nLast-Modified: {last_modified}\r\nETag: {etag}\r\nConnection: {conn}\r\n\r\n"
        )?;
        return Ok((304, 0));
    }
    let span = range.as_deref().and_then(|r| parse_range(r, len));
    let (status, start, count, extra) = match span {
        Some(Span::Unsatisfiable) => {
            write!(
                out,
                "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{len}\r\nContent-Length: 0\r\nConnection: {conn}\r\n\r\n"
            )?;
            return Ok((416, 0));
        }
        Some(Span::Bytes(a, b)) => (
            "206 Partial Content",
            a,
            b - a + 1,
            format!("Content-Range: bytes {a}-{b}/{len}\r\n"),
        ),
        None => ("200 OK", 0, len, String::new()),
    };
    out.write_all(headers(status, &extra, count).as_bytes())?;
    if method == "HEAD" {
        return Ok((status[..3].parse().unwrap_or(200), 0));
    }
    f.seek(SeekFrom::Start(start))?;
    let sent = io::copy(&mut f.take(count), out)?;
    out.flush()?;
    Ok((status[..3].parse().unwrap_or(200), sent))
}

/// A Range header's meaning for a file of `len` bytes (RFC 9110 §14.1.2):
/// `None` when it is not one valid `bytes=` range (ignored: a full 200).
enum Span {
    Bytes(u64, u64),
    Unsatisfiable,
}

fn parse_range(header: &str, len: u64) -> Option<Span> {
    let spec = header.trim().strip_prefix("bytes=")?.trim();
    if spec.contains(',') {
        // Several ranges: allowed to answer with the whole file.
        return None;
    }
    let (a, b) = spec.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    match (a, b) {
        (a, b) if digits(a) && (b.is_empty() || digits(b)) => {
            let first: u64 = a.parse().ok()?;
            let last = if b.is_empty() {
                u64::MAX
            } else {
                b.parse().ok()?
            };
            if last < first {
                return None; // invalid syntax: ignored
            }
            if first >= len {
                return Some(Span::Unsatisfiable);
            }
            Some(Span::Bytes(first, last.min(len - 1)))
        }
        ("", n) if digits(n) => {
            let n: u64 = n.parse().ok()?;
            if n == 0 || len == 0 {
                return Some(Span::Unsatisfiable);
            }
            Some(Span::Bytes(len.saturating_sub(n), len - 1))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_and_traversal() {
        assert_eq!(percent_decode("/a%2e%2e/b").as_deref(), Some("/a../b"));
        assert_eq!(percent_decode("/%2"), None);
        assert_eq!(percent_decode("/a%00"), None);
        let root = std::env::temp_dir().canonicalize().unwrap();
        assert_eq!(resolve(&root, "/%2e%2e/etc/passwd"), Err(403));
        assert_eq!(resolve(&root, "/../etc/passwd"), Err(403));
        assert_eq!(resolve(&root, "/no-such-file-debforge"), Err(404));
    }

    #[test]
    fn ranges_as_rfc_9110_reads_them() {
        let r = |h| match parse_range(h, 100) {
            None => "full".to_string(),
            Some(Span::Unsatisfiable) => "416".to_string(),
            Some(Span::Bytes(a, b)) => format!("{a}-{b}"),
        };
        assert_eq!(r("bytes=0-9"), "0-9");
        assert_eq!(r("bytes=90-"), "90-99");
        assert_eq!(r("bytes=90-500"), "90-99");
        assert_eq!(r("bytes=-10"), "90-99");
        assert_eq!(r("bytes=-500"), "0-99");
        assert_eq!(r("bytes=100-"), "416");
        assert_eq!(r("bytes=-0"), "416");
        for ignored in [
            "bytes=abc",
            "bytes=5-1",
            "bytes=0-1,5-6",
            "items=0-1",
            "bytes=",
            "bytes=-",
            "bytes=1-x",
        ] {
            assert_eq!(r(ignored), "full", "{ignored}");
        }
        assert_eq!(
            escape_for_log("/a\x1b[2J\\b é"),
            "/a\\x1b[2J\\x5cb\\x20\\xc3\\xa9"
        );
    }
}
