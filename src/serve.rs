//! `debforge serve`: a small read-only HTTP/1.1 server for a quick LAN
//! mirror. GET and HEAD, single byte ranges, Last-Modified and
//! If-Modified-Since, ETag and If-None-Match, a Content-Type by extension,
//! keep-alive, one thread per connection. Paths never leave the root: `..`
//! (plain or percent-encoded) is refused, and the resolved file must lie
//! under the canonical root, so a symlink pointing out is refused too.
//! The server reports each request to a callback; the binary prints it.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

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
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let (root, log) = (root.clone(), log.clone());
        std::thread::spawn(move || {
            let _ = handle(conn, &root, &*log);
        });
    }
    Ok(())
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
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    // Headers and body go out in one buffered write; without NODELAY,
    // Nagle plus delayed ACKs stall every keep-alive response by ~40 ms.
    conn.set_nodelay(true)?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut out = io::BufWriter::with_capacity(64 * 1024, conn);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let (method, target) = (
            parts.next().unwrap_or("").to_string(),
            parts.next().unwrap_or("").to_string(),
        );
        let mut range = None;
        let mut since = None;
        let mut none_match = None;
        let mut close = parts.next() == Some("HTTP/1.0");
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h)? == 0 {
                return Ok(());
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                let v = v.trim().to_string();
                match k.to_ascii_lowercase().as_str() {
                    "range" => range = Some(v),
                    "if-modified-since" => since = Some(v),
                    "if-none-match" => none_match = Some(v),
                    "connection" => close = v.eq_ignore_ascii_case("close"),
                    _ => {}
                }
            }
        }
        let (status, bytes) = respond(
            &mut out, root, &method, &target, range, since, none_match, close,
        )?;
        // Every response leaves now, whatever its kind.
        out.flush()?;
        log(RequestLog {
            peer,
            method,
            path: target,
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
    // One range, `bytes=a-b`, `bytes=a-` or `bytes=-n`; anything else: the whole file.
    let span = range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .filter(|r| !r.contains(','))
        .map(|r| {
            let (a, b) = r.split_once('-').unwrap_or((r, ""));
            match (a.trim().parse::<u64>().ok(), b.trim().parse::<u64>().ok()) {
                (Some(a), Some(b)) => (a, b.min(len.saturating_sub(1))),
                (Some(a), None) => (a, len.saturating_sub(1)),
                (None, Some(n)) => (len.saturating_sub(n), len.saturating_sub(1)),
                (None, None) => (1, 0),
            }
        });
    let (status, start, count, extra) = match span {
        Some((a, b)) if a > b || a >= len => {
            write!(
                out,
                "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{len}\r\nContent-Length: 0\r\nConnection: {conn}\r\n\r\n"
            )?;
            return Ok((416, 0));
        }
        Some((a, b)) => (
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
}
