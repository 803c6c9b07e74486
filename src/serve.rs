//! `debforge serve`: a read-only HTTP/1.1 server for a quick LAN mirror.
//!
//! The protocol is hyper's: strict HTTP/1.1 parsing (no space before a
//! header's colon, no obs-fold, no bare CR, the version exactly `HTTP/1.x`),
//! keep-alive, limits on header count and size, and a deadline for a
//! request's head that also closes idle keep-alive connections (slowloris).
//! Ours are the decisions RFC 9110 leaves to the server, each a pure, tested
//! function: which file a path names ([`resolve`]), what a conditional
//! request gets ([`Validators::precondition`]: `If-None-Match`, weak and
//! lists; `If-Modified-Since`; `If-Range`, as apt sends it when it resumes),
//! and a `Range` ([`parse_range`]).
//!
//! Connections are tasks on a small tokio runtime, not threads: at most
//! [`MAX_CONNECTIONS`] (fewer if the descriptor limit says so) are served at
//! once; past that a connection gets a 503 and is closed, and the process
//! never aborts for want of memory or threads.

use std::convert::Infallible;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, Version, header};
use hyper::body::{Body, Frame, SizeHint};
use tokio::io::AsyncWriteExt;

/// From the moment the server waits for a request's head (on a new or a
/// kept-alive connection) to its blank line.
pub const HEADER_DEADLINE: Duration = Duration::from_secs(10);
/// Connections served at once by default; more get a 503 and are closed.
pub const MAX_CONNECTIONS: usize = 4096;
/// Most header lines, and most bytes of a request's head.
const MAX_HEADERS: usize = 100;
const MAX_HEAD_BYTES: usize = 32 * 1024;
/// A file body goes out in reads of this size; after [`TURN`] of them the
/// connection yields to the others, so one fast reader does not hold a
/// worker while the rest wait (that unfairness was the tail latency:
/// benches/serve.sh measured 1 the fairest, 2 to 32 worse).
const CHUNK: usize = 64 * 1024;
const TURN: u32 = 1;

/// One answered request, for the log.
#[derive(Debug, Clone)]
pub struct RequestLog {
    pub peer: SocketAddr,
    /// Method and path as sent, escaped for a terminal ([`escape_for_log`]).
    pub method: String,
    pub path: String,
    pub status: u16,
    /// The body's length as answered.
    pub bytes: u64,
}

/// What the server reports; the binary's printer shows it.
pub trait ServeReporter: Send + Sync {
    fn request(&self, log: RequestLog);
    /// A connection closed without an answer of ours: a malformed request
    /// (hyper answered 400/431 itself), a timeout, or too many connections.
    fn refused(&self, peer: SocketAddr, reason: String);
}

/// Serves `root` on `listener` until the process ends, at most
/// `max_connections` at once (fewer if the open-files limit says so).
pub fn serve(
    listener: std::net::TcpListener,
    root: &Path,
    max_connections: usize,
    reporter: Arc<dyn ServeReporter>,
) -> io::Result<()> {
    let root: Arc<Path> = root.canonicalize()?.into();
    let cap = max_connections.min(raise_fd_limit().saturating_sub(64).max(16));
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .max_blocking_threads(2)
        .enable_io()
        .enable_time()
        .build()?;
    listener.set_nonblocking(true)?;
    // A deeper accept queue than std's 128: a burst of clients (a lab
    // booting) waits in the kernel instead of retrying SYNs for seconds.
    // Linux takes a second listen() on a listening socket as a new backlog.
    // SAFETY: listen() on the listener's own descriptor.
    unsafe {
        libc::listen(std::os::fd::AsRawFd::as_raw_fd(&listener), 4096);
    }
    runtime.block_on(accept_loop(listener, root, reporter, cap))
}

async fn accept_loop(
    listener: std::net::TcpListener,
    root: Arc<Path>,
    reporter: Arc<dyn ServeReporter>,
    cap: usize,
) -> io::Result<()> {
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let slots = Arc::new(tokio::sync::Semaphore::new(cap));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Out of descriptors (EMFILE/ENFILE) or a transient error:
                // wait for connections to close instead of spinning.
                if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            reporter.refused(peer, "too many connections: answered 503".into());
            tokio::spawn(busy(stream));
            continue;
        };
        let (root, reporter) = (root.clone(), reporter.clone());
        tokio::spawn(async move {
            let _slot = slot;
            connection(stream, peer, root, reporter).await;
        });
    }
}

/// The answer past the connection cap: 503, then close.
async fn busy(mut stream: tokio::net::TcpStream) {
    let answer = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\nRetry-After: 1\r\n\r\n";
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(answer)).await;
}

async fn connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    root: Arc<Path>,
    reporter: Arc<dyn ServeReporter>,
) {
    // Without NODELAY, Nagle plus delayed ACKs stall keep-alive answers ~40 ms.
    let _ = stream.set_nodelay(true);
    limit_send_buffer(&stream, SEND_BUFFER);
    let log = reporter.clone();
    let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
        let (response, entry) = answer(&root, peer, &req);
        log.request(entry);
        async move { Ok::<_, Infallible>(response) }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        // `Content-Length:` as every server writes it (clients must not care;
        // people reading a trace do).
        .title_case_headers(true)
        .header_read_timeout(HEADER_DEADLINE)
        .max_headers(MAX_HEADERS)
        .max_buf_size(MAX_HEAD_BYTES)
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
        .await;
    if let Err(e) = served {
        // A client that goes away mid-answer is not news.
        if e.is_parse() || e.is_parse_too_large() || e.is_timeout() {
            reporter.refused(peer, e.to_string());
        }
    }
}

/// The answer to one request, and its log line.
fn answer<B>(root: &Path, peer: SocketAddr, req: &Request<B>) -> (Response<ServeBody>, RequestLog) {
    let response = respond(root, req);
    let entry = RequestLog {
        peer,
        method: escape_for_log(req.method().as_str()),
        path: escape_for_log(
            req.uri()
                .path_and_query()
                .map_or_else(|| req.uri().to_string(), |p| p.to_string())
                .as_str(),
        ),
        status: response.status().as_u16(),
        bytes: match req.method() {
            &Method::HEAD => 0,
            _ => response.body().size_hint().exact().unwrap_or(0),
        },
    };
    (response, entry)
}

fn respond<B>(root: &Path, req: &Request<B>) -> Response<ServeBody> {
    let headers = req.headers();
    // GET and HEAD carry no body: one announced is refused and the
    // connection closed, so a body is never read as a request.
    let has_body = headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0");
    // RFC 9112 §3.2: an HTTP/1.1 request has exactly one Host.
    let host_missing =
        req.version() == Version::HTTP_11 && headers.get_all(header::HOST).iter().count() != 1;
    if has_body || host_missing {
        return close(status_only(StatusCode::BAD_REQUEST));
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = status_only(StatusCode::METHOD_NOT_ALLOWED);
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let file = match resolve(root, req.uri().path()) {
        Ok(f) => f,
        Err(code) => return status_only(code),
    };
    match serve_file(&file, req.method() == Method::HEAD, headers) {
        Ok(r) => r,
        Err(_) => status_only(StatusCode::NOT_FOUND),
    }
}

fn serve_file(path: &Path, head: bool, headers: &HeaderMap) -> io::Result<Response<ServeBody>> {
    // Non-blocking, and checked again once open: what `resolve` saw as a
    // file may have been replaced by a FIFO, which would hold this worker.
    let mut file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)?
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let len = meta.len();
    let validators = Validators::of(len, meta.modified().unwrap_or(UNIX_EPOCH));
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let mut builder = Response::builder()
        .header(header::LAST_MODIFIED, validators.last_modified())
        .header(header::ETAG, &validators.etag)
        .header(header::ACCEPT_RANGES, "bytes");
    let precondition = validators.precondition(
        text(header::IF_NONE_MATCH),
        text(header::IF_MODIFIED_SINCE),
        text(header::IF_RANGE),
    );
    let range = match precondition {
        Precondition::NotModified => {
            return Ok(builder
                .status(StatusCode::NOT_MODIFIED)
                .body(ServeBody::empty())
                .expect("valid response"));
        }
        Precondition::Full => None,
        Precondition::RangeAllowed => text(header::RANGE).and_then(|r| parse_range(r, len)),
    };
    builder = builder.header(header::CONTENT_TYPE, content_type(path));
    let (status, start, count) = match range {
        Some(Span::Unsatisfiable) => {
            return Ok(builder
                .status(StatusCode::RANGE_NOT_SATISFIABLE)
                .header(header::CONTENT_RANGE, format!("bytes */{len}"))
                .body(ServeBody::empty())
                .expect("valid response"));
        }
        Some(Span::Bytes(a, b)) => {
            builder = builder.header(header::CONTENT_RANGE, format!("bytes {a}-{b}/{len}"));
            (StatusCode::PARTIAL_CONTENT, a, b - a + 1)
        }
        None => (StatusCode::OK, 0, len),
    };
    file.seek(SeekFrom::Start(start))?;
    let body = if head {
        ServeBody::head(count)
    } else {
        ServeBody::file(file, count)
    };
    Ok(builder
        .status(status)
        .header(header::CONTENT_LENGTH, count)
        .body(body)
        .expect("valid response"))
}

fn status_only(code: StatusCode) -> Response<ServeBody> {
    let text = format!(
        "{} {}\n",
        code.as_u16(),
        code.canonical_reason().unwrap_or("")
    );
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "text/plain")
        .body(ServeBody::text(text))
        .expect("valid response")
}

fn close(mut r: Response<ServeBody>) -> Response<ServeBody> {
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// A file's validators (RFC 9110 §8.8): a strong ETag from its length and
/// modification time, and that time as `Last-Modified`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validators {
    pub etag: String,
    pub modified: SystemTime,
}

/// What the preconditions of a request allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    /// 304.
    NotModified,
    /// The whole file, whatever `Range` says (`If-Range` did not match).
    Full,
    /// Answer `Range` if there is one.
    RangeAllowed,
}

impl Validators {
    pub fn of(len: u64, modified: SystemTime) -> Validators {
        // Whole seconds: that is all Last-Modified can say.
        let secs = modified
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Validators {
            etag: format!("\"{len:x}-{secs:x}\""),
            modified: UNIX_EPOCH + Duration::from_secs(secs),
        }
    }

    pub fn last_modified(&self) -> String {
        httpdate::fmt_http_date(self.modified)
    }

    /// RFC 9110 §13.2.2's order: `If-None-Match` (weak comparison, a list or
    /// `*`) and only without it `If-Modified-Since`; then `If-Range` (strong
    /// comparison: our ETag exactly, or our Last-Modified date exactly).
    pub fn precondition(
        &self,
        if_none_match: Option<&str>,
        if_modified_since: Option<&str>,
        if_range: Option<&str>,
    ) -> Precondition {
        let not_modified = match (if_none_match, if_modified_since) {
            (Some(list), _) => list
                .split(',')
                .map(str::trim)
                .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == self.etag),
            (None, Some(date)) => {
                httpdate::parse_http_date(date).is_ok_and(|since| self.modified <= since)
            }
            (None, None) => false,
        };
        if not_modified {
            return Precondition::NotModified;
        }
        match if_range.map(str::trim) {
            None => Precondition::RangeAllowed,
            Some(tag) if tag.starts_with('"') || tag.starts_with("W/") => {
                if tag == self.etag {
                    Precondition::RangeAllowed
                } else {
                    Precondition::Full
                }
            }
            Some(date) => match httpdate::parse_http_date(date) {
                Ok(t) if t == self.modified => Precondition::RangeAllowed,
                _ => Precondition::Full,
            },
        }
    }
}

/// A response body: nothing, a short text, the length of a HEAD answer, or
/// a part of a file read in [`CHUNK`]s. Reads are plain blocking reads on
/// the worker: a mirror's files are on a local disk and mostly in the page
/// cache, where a hop to a blocking pool costs more than the read.
pub struct ServeBody(BodyKind);

enum BodyKind {
    Text(Option<Bytes>),
    Head(u64),
    File { file: File, left: u64, turn: u32 },
}

impl ServeBody {
    fn empty() -> ServeBody {
        ServeBody(BodyKind::Text(None))
    }
    fn text(s: String) -> ServeBody {
        ServeBody(BodyKind::Text(Some(Bytes::from(s))))
    }
    fn head(len: u64) -> ServeBody {
        ServeBody(BodyKind::Head(len))
    }
    fn file(file: File, len: u64) -> ServeBody {
        ServeBody(BodyKind::File {
            file,
            left: len,
            turn: 0,
        })
    }
}

impl Body for ServeBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match &mut self.get_mut().0 {
            BodyKind::Text(t) => Poll::Ready(t.take().map(|b| Ok(Frame::data(b)))),
            BodyKind::Head(_) => Poll::Ready(None),
            BodyKind::File { file, left, turn } => {
                if *left == 0 {
                    return Poll::Ready(None);
                }
                *turn += 1;
                if *turn > TURN {
                    *turn = 0;
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                let want = (*left).min(CHUNK as u64) as usize;
                let mut buf = vec![0u8; want];
                let result = file.read_exact(&mut buf).map(|()| {
                    *left -= want as u64;
                    Frame::data(Bytes::from(buf))
                });
                Poll::Ready(Some(result))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.0 {
            BodyKind::Text(t) => t.is_none(),
            BodyKind::Head(_) => true,
            BodyKind::File { left, .. } => *left == 0,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            BodyKind::Text(t) => SizeHint::with_exact(t.as_ref().map_or(0, |b| b.len() as u64)),
            // A HEAD answer announces the length of what GET would send.
            BodyKind::Head(n) | BodyKind::File { left: n, .. } => SizeHint::with_exact(*n),
        }
    }
}

/// A connection's kernel send buffer: small enough that a fast reader's
/// writes wait for the network like everyone's (loopback autotunes to
/// megabytes, which let one connection hold a worker), large enough for a LAN.
const SEND_BUFFER: i32 = 256 * 1024;

fn limit_send_buffer(stream: &tokio::net::TcpStream, bytes: i32) {
    let fd = std::os::fd::AsRawFd::as_raw_fd(stream);
    // SAFETY: setsockopt on the stream's own descriptor, with a c_int value.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&bytes as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        );
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

/// The file a request path names under `root` (canonical), or the status
/// to answer instead. `..` (plain or percent-encoded), a backslash or a NUL
/// is refused; the resolved file must lie under the root, so a symlink
/// pointing out is refused too.
pub fn resolve(root: &Path, path: &str) -> Result<PathBuf, StatusCode> {
    let decoded = percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .map_err(|_| StatusCode::BAD_REQUEST)?;
    if decoded.contains('\0') || !valid_escapes(path) {
        return Err(StatusCode::BAD_REQUEST);
    }
    if !decoded.starts_with('/') || decoded.split('/').any(|c| c == "..") || decoded.contains('\\')
    {
        return Err(StatusCode::FORBIDDEN);
    }
    let mut full = root.join(decoded.trim_start_matches('/'));
    if full.is_dir() {
        full = full.join("index.html");
    }
    let real = full.canonicalize().map_err(|_| StatusCode::NOT_FOUND)?;
    if !real.starts_with(root) {
        return Err(StatusCode::FORBIDDEN); // a symlink pointing out of the root
    }
    if !real.is_file() {
        return Err(StatusCode::NOT_FOUND);
    }
    Ok(real)
}

/// Every `%` starts a two-digit hex escape (percent-encoding passes a bad
/// one through as text; a request with one is malformed).
fn valid_escapes(path: &str) -> bool {
    let b = path.as_bytes();
    b.iter().enumerate().all(|(i, &c)| {
        c != b'%'
            || (b.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    })
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

/// A Range header's meaning for a file of `len` bytes (RFC 9110 §14.1.2):
/// `None` when it is not one valid `bytes=` range (ignored: a full 200).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    Bytes(u64, u64),
    Unsatisfiable,
}

pub fn parse_range(header: &str, len: u64) -> Option<Span> {
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
        let root = std::env::temp_dir().canonicalize().unwrap();
        assert_eq!(
            resolve(&root, "/%2e%2e/etc/passwd"),
            Err(StatusCode::FORBIDDEN)
        );
        assert_eq!(resolve(&root, "/../etc/passwd"), Err(StatusCode::FORBIDDEN));
        assert_eq!(resolve(&root, "/a%5c..%5cb"), Err(StatusCode::FORBIDDEN));
        assert_eq!(resolve(&root, "/%2"), Err(StatusCode::BAD_REQUEST));
        assert_eq!(resolve(&root, "/a%00"), Err(StatusCode::BAD_REQUEST));
        assert_eq!(resolve(&root, "/%ff"), Err(StatusCode::BAD_REQUEST));
        assert_eq!(
            resolve(&root, "/no-such-file-debforge"),
            Err(StatusCode::NOT_FOUND)
        );
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

    #[test]
    fn preconditions_as_rfc_9110_orders_them() {
        let t = UNIX_EPOCH + Duration::from_secs(1_553_321_600); // Sat, 23 Mar 2019 06:13:20 GMT
        let v = Validators::of(100, t + Duration::from_millis(700));
        assert_eq!(v.etag, "\"64-5c95ce80\"");
        assert_eq!(v.last_modified(), "Sat, 23 Mar 2019 06:13:20 GMT");
        use Precondition::*;
        let p = |inm, ims, ir| v.precondition(inm, ims, ir);
        // If-None-Match: weak comparison, lists, `*`.
        assert_eq!(p(Some("\"64-5c95ce80\""), None, None), NotModified);
        assert_eq!(p(Some("W/\"64-5c95ce80\""), None, None), NotModified);
        assert_eq!(p(Some("\"x\", W/\"64-5c95ce80\""), None, None), NotModified);
        assert_eq!(p(Some("*"), None, None), NotModified);
        assert_eq!(p(Some("\"x\""), None, None), RangeAllowed);
        // If-Modified-Since only without If-None-Match.
        let date = "Sat, 23 Mar 2019 06:13:20 GMT";
        assert_eq!(p(None, Some(date), None), NotModified);
        assert_eq!(
            p(None, Some("Sat, 23 Mar 2019 06:13:19 GMT"), None),
            RangeAllowed
        );
        assert_eq!(p(Some("\"x\""), Some(date), None), RangeAllowed);
        assert_eq!(p(None, Some("yesterday"), None), RangeAllowed);
        // If-Range: strong ETag or the exact date; anything else, the whole file.
        assert_eq!(p(None, None, Some("\"64-5c95ce80\"")), RangeAllowed);
        assert_eq!(p(None, None, Some("W/\"64-5c95ce80\"")), Full);
        assert_eq!(p(None, None, Some("\"65-5c95ce80\"")), Full);
        assert_eq!(p(None, None, Some(date)), RangeAllowed);
        assert_eq!(p(None, None, Some("Sat, 23 Mar 2019 06:13:21 GMT")), Full);
        assert_eq!(p(None, None, Some("not a date")), Full);
    }
}
