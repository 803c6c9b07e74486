//! HTTP(S) with reqwest (rustls): small files into memory, large files
//! streamed to disk under a temporary name, hashed while they arrive,
//! resumed with `Range` after a transient failure, and renamed into place
//! only when size and hashes check out.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::Path;
use std::thread;
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::blocking::{Client, Response};
use reqwest::header::{CONTENT_LENGTH, CONTENT_RANGE, RANGE};

use super::{Event, FetchError, FetchErrorKind, Reporter};
use crate::digest::{DigestSet, Digests, Hasher};
use crate::error::FileError;

#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// No data for this long (connect, headers, or between body reads) is a stall.
    pub timeout: Duration,
    /// Further attempts after a transient failure.
    pub retries: u32,
    /// The first wait between attempts; it doubles each time.
    pub backoff: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            timeout: Duration::from_secs(30),
            retries: 3,
            backoff: Duration::from_millis(500),
        }
    }
}

/// What a file must be, from a signed index or a lock file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub size: u64,
    /// At least one of the two is given. SHA256 is checked when given (it is
    /// what apt trusts, and the file's identity here); SHA512 only when
    /// there is no SHA256: a second digest of the same bytes adds nothing a
    /// SHA256 match does not already prove, and costs three times as much.
    pub sha256: Option<String>,
    pub sha512: Option<String>,
}

impl Expected {
    /// The digests to compute to check a file against this.
    pub fn digest_set(&self) -> DigestSet {
        DigestSet {
            sha512: self.sha256.is_none(),
            ..DigestSet::SHA256
        }
    }

    /// A hasher for [`Expected::digest_set`] (two digests on two threads).
    pub fn hasher(&self) -> Hasher {
        Hasher::parallel(self.digest_set())
    }

    /// Checks finished digests; the error names what differed.
    pub fn check(&self, d: &Digests) -> Result<(), FetchErrorKind> {
        if d.size != self.size {
            return Err(FetchErrorKind::TooShort {
                expected: self.size,
                found: d.size,
            });
        }
        if let Some(want) = &self.sha256
            && *want != d.sha256
        {
            return Err(FetchErrorKind::Sha256 {
                expected: want.clone(),
                found: d.sha256.clone(),
            });
        }
        if let (None, Some(want)) = (&self.sha256, &self.sha512)
            && Some(want) != d.sha512.as_ref()
        {
            return Err(FetchErrorKind::Sha512 {
                expected: want.clone(),
                found: d.sha512.clone().unwrap_or_default(),
            });
        }
        Ok(())
    }
}

/// HTTP downloads. The client (a thread with its own runtime, TLS set up)
/// is made at the first request: a build whose packages are all local
/// files makes none.
pub struct Http {
    client: std::sync::OnceLock<Client>,
    opts: HttpOptions,
}

fn err(url: &str, kind: FetchErrorKind) -> FetchError {
    FetchError {
        url: url.to_string(),
        kind,
    }
}

fn classify(e: reqwest::Error, timeout: Duration) -> FetchErrorKind {
    if e.is_timeout() {
        FetchErrorKind::Timeout(timeout)
    } else if e.is_connect() {
        let why = source_chain(&e);
        // A name that does not resolve will not resolve on a retry either.
        if why.contains("dns error") || why.contains("failed to lookup address") {
            FetchErrorKind::Dns(why)
        } else {
            FetchErrorKind::Connect(why)
        }
    } else if e.is_builder() {
        FetchErrorKind::BadUrl(source_chain(&e))
    } else {
        FetchErrorKind::Transfer(source_chain(&e))
    }
}

/// reqwest's top-level message is generic ("error sending request for url
/// (…)", the URL the error already names); the causes say what happened.
fn source_chain(e: &dyn std::error::Error) -> String {
    let top = e.to_string();
    let mut parts = if top.starts_with("error sending request for url")
        || top.starts_with("error decoding response body")
        || top.starts_with("request or response body error")
    {
        Vec::new()
    } else {
        vec![top]
    };
    let mut cur = e.source();
    while let Some(s) = cur {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cur = s.source();
    }
    parts.join(": ")
}

/// What [`Paced`] says when a transfer is too slow.
#[derive(Debug)]
struct TooSlow(String);
impl std::fmt::Display for TooSlow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for TooSlow {}

fn io_kind(e: &io::Error, timeout: Duration) -> FetchErrorKind {
    if let Some(slow) = e.get_ref().and_then(|i| i.downcast_ref::<TooSlow>()) {
        return FetchErrorKind::TooSlow(slow.0.clone());
    }
    // reqwest reports a body stall as an io error wrapping its timeout.
    let text = source_chain(e);
    if e.kind() == io::ErrorKind::TimedOut
        || text.contains("timed out")
        || text.contains("operation timed out")
    {
        FetchErrorKind::Timeout(timeout)
    } else {
        FetchErrorKind::Transfer(text)
    }
}

/// The slowest average a transfer may keep once `timeout` has passed: a
/// server that trickles a few bytes a second never lets the idle timeout
/// fire, so without this a download (and `lock`) could last for ever.
const MIN_RATE: u64 = 1024;

/// A response body that fails when, after the first `timeout`, it has
/// averaged less than [`MIN_RATE`] bytes a second.
struct Paced<R> {
    inner: R,
    start: std::time::Instant,
    timeout: Duration,
    bytes: u64,
}

impl<R: Read> Paced<R> {
    fn new(inner: R, timeout: Duration) -> Self {
        Paced {
            inner,
            start: std::time::Instant::now(),
            timeout,
            bytes: 0,
        }
    }
}

impl<R: Read> Read for Paced<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes += n as u64;
        let elapsed = self.start.elapsed();
        if n > 0 && elapsed > self.timeout {
            let rate = self.bytes as f64 / elapsed.as_secs_f64();
            if rate < MIN_RATE as f64 {
                return Err(io::Error::other(TooSlow(format!(
                    "the server sends {rate:.0} bytes/s, below the {MIN_RATE} bytes/s a transfer must keep up after {:.0}s",
                    self.timeout.as_secs_f64()
                ))));
            }
        }
        Ok(n)
    }
}

impl Http {
    pub fn new(opts: HttpOptions) -> Result<Http, FetchError> {
        Ok(Http {
            client: std::sync::OnceLock::new(),
            opts,
        })
    }

    fn client(&self) -> Result<&Client, FetchError> {
        if let Some(c) = self.client.get() {
            return Ok(c);
        }
        let client = Client::builder()
            .connect_timeout(self.opts.timeout)
            .timeout(self.opts.timeout)
            .user_agent(concat!("debforge/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| err("(client)", FetchErrorKind::Client(source_chain(&e))))?;
        // Two threads may both make one; one is kept.
        Ok(self.client.get_or_init(|| client))
    }

    fn wait(&self, attempt: u32) -> Duration {
        self.opts.backoff.saturating_mul(1 << attempt.min(6))
    }

    /// Retries `op` on transient errors, reporting each retry.
    fn with_retries<T>(
        &self,
        name: &str,
        observer: &dyn Reporter,
        mut op: impl FnMut() -> Result<T, FetchError>,
    ) -> Result<T, FetchError> {
        let mut attempt = 0;
        loop {
            match op() {
                Ok(v) => return Ok(v),
                Err(e) if e.kind.is_transient() && attempt < self.opts.retries => {
                    let wait = self.wait(attempt);
                    attempt += 1;
                    observer.event(Event::Retry {
                        name: name.to_string(),
                        attempt,
                        reason: e.kind.to_string(),
                        wait,
                    });
                    thread::sleep(wait);
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn send(&self, url: &str, range_from: u64) -> Result<Response, FetchError> {
        let mut req = self.client()?.get(url);
        if range_from > 0 {
            req = req.header(RANGE, format!("bytes={range_from}-"));
        }
        req.send()
            .map_err(|e| err(url, classify(e, self.opts.timeout)))
    }

    /// A small file (Release, signature) into memory; `None` when the server
    /// says it does not exist (404, 410).
    pub fn get_small(
        &self,
        url: &str,
        limit: u64,
        observer: &dyn Reporter,
    ) -> Result<Option<Vec<u8>>, FetchError> {
        self.with_retries(url, observer, || {
            let resp = self.send(url, 0)?;
            let status = resp.status();
            if status == StatusCode::NOT_FOUND || status == StatusCode::GONE {
                return Ok(None);
            }
            if !status.is_success() {
                return Err(err(url, FetchErrorKind::Status(status.as_u16())));
            }
            let mut body = Vec::new();
            Paced::new(resp, self.opts.timeout)
                .take(limit + 1)
                .read_to_end(&mut body)
                .map_err(|e| err(url, io_kind(&e, self.opts.timeout)))?;
            if body.len() as u64 > limit {
                return Err(err(url, FetchErrorKind::TooLarge(limit)));
            }
            Ok(Some(body))
        })
    }

    /// Downloads `url` to `dest`, which exists afterwards only if the file has
    /// exactly the expected size and hashes. The data goes to `dest.part`
    /// first; a transient failure resumes from what arrived (HTTP Range), a
    /// verification failure removes it.
    pub fn download(
        &self,
        url: &str,
        expected: &Expected,
        dest: &Path,
        name: &str,
        observer: &dyn Reporter,
    ) -> Result<Digests, FetchError> {
        let partial = dest.with_file_name(format!(
            "{}.part",
            dest.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default()
        ));
        let io_err = |path: &Path, source| {
            err(
                url,
                FetchErrorKind::Io(crate::error::FileError {
                    path: path.to_path_buf(),
                    source,
                }),
            )
        };
        if let Some(dir) = dest.parent() {
            fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
        }
        let result = self.with_retries(name, observer, || {
            self.attempt(url, expected, &partial, name, observer)
        });
        match result {
            Ok(digests) => {
                fs::rename(&partial, dest).map_err(|e| io_err(dest, e))?;
                observer.event(Event::Done {
                    name: name.to_string(),
                });
                Ok(digests)
            }
            Err(e) => {
                // Retries resume from the partial file; after the last one it
                // goes: the cache holds verified files only.
                let _ = fs::remove_file(&partial);
                Err(e)
            }
        }
    }

    fn attempt(
        &self,
        url: &str,
        expected: &Expected,
        partial: &Path,
        name: &str,
        observer: &dyn Reporter,
    ) -> Result<Digests, FetchError> {
        let io_err = |source| err(url, FetchErrorKind::Io(FileError::new(partial, source)));
        let mut have = fs::metadata(partial).map(|m| m.len()).unwrap_or(0);
        if have >= expected.size {
            // Complete or over-long leftovers cannot be trusted: start over.
            have = 0;
        }
        let resp = self.send(url, have)?;
        let start = resume_point(url, &resp, have, expected.size)?;
        let mut hasher = expected.hasher();
        let file = open_partial(partial, start, &mut hasher).map_err(io_err)?;
        observer.event(Event::Start {
            name: name.to_string(),
            total: expected.size,
            resumed_from: start,
        });
        let body = Paced::new(resp, self.opts.timeout);
        let download = Download {
            url,
            name,
            expected_size: expected.size,
            partial,
            timeout: self.opts.timeout,
        };
        let received = download.copy_body(body, file, start, &mut hasher, observer)?;
        if received < expected.size {
            return Err(err(
                url,
                FetchErrorKind::TooShort {
                    expected: expected.size,
                    found: received,
                },
            ));
        }
        let digests = hasher.finish();
        if let Err(kind) = expected.check(&digests) {
            let _ = fs::remove_file(partial);
            return Err(err(url, kind));
        }
        Ok(digests)
    }
}

/// Where the body of `resp` starts in the file: `have` when the server
/// resumed where asked, 0 for a whole answer; any other answer is an error.
fn resume_point(
    url: &str,
    resp: &reqwest::blocking::Response,
    have: u64,
    size: u64,
) -> Result<u64, FetchError> {
    let resumed = match resp.status() {
        StatusCode::PARTIAL_CONTENT if have > 0 => {
            let starts_right = resp
                .headers()
                .get(CONTENT_RANGE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with(&format!("bytes {have}-")));
            if !starts_right {
                return Err(err(
                    url,
                    FetchErrorKind::Transfer(
                        "server answered a Range request with another range".into(),
                    ),
                ));
            }
            true
        }
        s if s.is_success() => false,
        // Asked for what follows the bytes we have, the server says
        // there is nothing: its file is shorter than vouched for.
        StatusCode::RANGE_NOT_SATISFIABLE if have > 0 => {
            return Err(err(
                url,
                FetchErrorKind::EndsShort {
                    expected: size,
                    have,
                },
            ));
        }
        s => return Err(err(url, FetchErrorKind::Status(s.as_u16()))),
    };
    let start = if resumed { have } else { 0 };
    if let Some(len) = resp
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        && start + len > size
    {
        return Err(err(url, FetchErrorKind::TooLong { expected: size }));
    }
    Ok(start)
}

/// The partial file, ready for bytes from `start` on: the first `start`
/// bytes already on disk hashed, then opened to append (or created anew).
fn open_partial(partial: &Path, start: u64, hasher: &mut Hasher) -> io::Result<File> {
    if start == 0 {
        return File::create(partial);
    }
    let mut f = File::open(partial)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut left = start;
    while left > 0 {
        let want = left.min(buf.len() as u64) as usize;
        let n = f.read(&mut buf[..want])?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        left -= n as u64;
    }
    OpenOptions::new().append(true).open(partial)
}

/// One download's fixed facts, for copying its body.
struct Download<'a> {
    url: &'a str,
    name: &'a str,
    expected_size: u64,
    partial: &'a Path,
    timeout: Duration,
}

impl Download<'_> {
    /// Copies the body into `file` (hashing as it goes, reporting progress
    /// every MiB), refusing more bytes than vouched for; returns the bytes
    /// the file now holds, synced.
    fn copy_body(
        &self,
        mut body: impl Read,
        mut file: File,
        start: u64,
        hasher: &mut Hasher,
        observer: &dyn Reporter,
    ) -> Result<u64, FetchError> {
        let io_err = |source| {
            err(
                self.url,
                FetchErrorKind::Io(FileError::new(self.partial, source)),
            )
        };
        let mut received = start;
        let mut buf = vec![0u8; 256 * 1024];
        let mut last_report = received;
        loop {
            let n = match body.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    file.flush().map_err(io_err)?;
                    return Err(err(self.url, io_kind(&e, self.timeout)));
                }
            };
            if received + n as u64 > self.expected_size {
                drop(file);
                let _ = fs::remove_file(self.partial);
                let expected = self.expected_size;
                return Err(err(self.url, FetchErrorKind::TooLong { expected }));
            }
            file.write_all(&buf[..n]).map_err(io_err)?;
            hasher.update(&buf[..n]);
            received += n as u64;
            if received - last_report >= 1 << 20 || received == self.expected_size {
                observer.event(Event::Progress {
                    name: self.name.to_string(),
                    bytes: received,
                });
                last_report = received;
            }
        }
        file.sync_all().map_err(io_err)?;
        Ok(received)
    }
}
