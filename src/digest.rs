//! Digests of byte streams: the four apt and dpkg use (MD5 for dpkg's
//! md5sums, SHA1, SHA256 and SHA512 for Release and Packages), any subset of
//! them in one pass. SHA256 is always computed: it is a file's identity here
//! (cache names, the lock, pool records). Several digests of one big stream
//! run on threads of their own ([`Hasher::parallel`]), each fed the same
//! chunks, so the wall time is the slowest digest's, not their sum.

use std::io::{self, Read, Write};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha512};

/// Which digests to compute besides SHA256 (always computed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DigestSet {
    pub md5: bool,
    pub sha1: bool,
    pub sha512: bool,
}

impl DigestSet {
    /// SHA256 alone: what a pool file is listed with and checked by.
    pub const SHA256: DigestSet = DigestSet {
        md5: false,
        sha1: false,
        sha512: false,
    };
    /// All four: Release files list their indexes with every digest.
    pub const ALL: DigestSet = DigestSet {
        md5: true,
        sha1: true,
        sha512: true,
    };

    fn algorithms(self) -> Vec<Algorithm> {
        let mut v = vec![Algorithm::Sha256(Sha256::new())];
        if self.sha512 {
            v.push(Algorithm::Sha512(Sha512::new()));
        }
        if self.md5 {
            v.push(Algorithm::Md5(Md5::new()));
        }
        if self.sha1 {
            v.push(Algorithm::Sha1(Sha1::new()));
        }
        v
    }
}

/// The size and digests of a byte stream, as lower-case hex; the ones not
/// asked for are `None`.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Digests {
    pub size: u64,
    pub sha256: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub md5: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha1: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha512: Option<String>,
}

impl Digests {
    /// The digest Release and Packages name `field` (MD5Sum/MD5sum, SHA1,
    /// SHA256, SHA512), if it was computed.
    pub fn by_field(&self, field: &str) -> Option<&str> {
        match field {
            "MD5Sum" | "MD5sum" => self.md5.as_deref(),
            "SHA1" => self.sha1.as_deref(),
            "SHA256" => Some(&self.sha256),
            "SHA512" => self.sha512.as_deref(),
            _ => None,
        }
    }
}

enum Algorithm {
    Md5(Md5),
    Sha1(Sha1),
    Sha256(Sha256),
    Sha512(Sha512),
}

impl Algorithm {
    fn update(&mut self, data: &[u8]) {
        match self {
            Algorithm::Md5(h) => h.update(data),
            Algorithm::Sha1(h) => h.update(data),
            Algorithm::Sha256(h) => h.update(data),
            Algorithm::Sha512(h) => h.update(data),
        }
    }

    fn finish_into(self, d: &mut Digests) {
        match self {
            Algorithm::Md5(h) => d.md5 = Some(hex::encode(h.finalize())),
            Algorithm::Sha1(h) => d.sha1 = Some(hex::encode(h.finalize())),
            Algorithm::Sha256(h) => d.sha256 = hex::encode(h.finalize()),
            Algorithm::Sha512(h) => d.sha512 = Some(hex::encode(h.finalize())),
        }
    }
}

/// One digest on a thread of its own, fed shared chunks.
struct Worker {
    chunks: SyncSender<Arc<[u8]>>,
    done: JoinHandle<Algorithm>,
}

impl Worker {
    fn spawn(mut algorithm: Algorithm) -> Worker {
        // A few chunks in flight: enough to keep every digest busy, little
        // memory (4 × 1 MiB per digest with `copy`'s chunks).
        let (chunks, rx): (_, Receiver<Arc<[u8]>>) = sync_channel(4);
        let done = std::thread::spawn(move || {
            for chunk in rx {
                algorithm.update(&chunk);
            }
            algorithm
        });
        Worker { chunks, done }
    }
}

/// Computes a [`DigestSet`] over what it is fed. Inline by default; with
/// [`Hasher::parallel`] and more than one digest, each digest beyond the
/// first runs on its own thread.
pub struct Hasher {
    size: u64,
    /// Computed on the caller's thread.
    inline: Vec<Algorithm>,
    workers: Vec<Worker>,
}

impl Hasher {
    pub fn new(set: DigestSet) -> Hasher {
        Hasher {
            size: 0,
            inline: set.algorithms(),
            workers: Vec::new(),
        }
    }

    /// Like [`Hasher::new`], the digests beyond the first on threads of their
    /// own when the machine has more than one core: for big streams (a
    /// thread costs tens of microseconds; a small file should not pay it).
    pub fn parallel(set: DigestSet) -> Hasher {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut algorithms = set.algorithms();
        if cores < 2 || algorithms.len() < 2 {
            return Hasher::new(set);
        }
        let workers = algorithms
            .split_off(1)
            .into_iter()
            .map(Worker::spawn)
            .collect();
        Hasher {
            size: 0,
            inline: algorithms,
            workers,
        }
    }

    pub fn update(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        self.size += data.len() as u64;
        if !self.workers.is_empty() {
            let chunk: Arc<[u8]> = Arc::from(data);
            for w in &self.workers {
                // A worker only stops when its sender is dropped.
                let _ = w.chunks.send(Arc::clone(&chunk));
            }
        }
        for a in &mut self.inline {
            a.update(data);
        }
    }

    pub fn finish(self) -> Digests {
        let mut d = Digests {
            size: self.size,
            ..Digests::default()
        };
        for a in self.inline {
            a.finish_into(&mut d);
        }
        for w in self.workers {
            drop(w.chunks);
            let a = w.done.join().expect("a digest thread does not panic");
            a.finish_into(&mut d);
        }
        d
    }
}

/// A writer that hashes what passes through it on the way to `inner`.
pub struct HashingWriter<W> {
    inner: W,
    hasher: Hasher,
}

impl<W: Write> HashingWriter<W> {
    pub fn new(inner: W, hasher: Hasher) -> Self {
        HashingWriter { inner, hasher }
    }
    pub fn finish(self) -> (W, Digests) {
        (self.inner, self.hasher.finish())
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The first read's buffer, and the largest: most packages are a few KB,
/// and a zeroed 1 MiB per file (fresh pages each time, once freed memory
/// went back to the system) was most of a 5,000-package build's page
/// faults; a big file is read in 1 MiB reads once 64 KiB of it is read.
const FIRST_READ: usize = 64 << 10;
const BIG_READ: usize = 1 << 20;

/// Reads `reader` to the end, feeding `hasher` (reads grow from 64 KiB to
/// 1 MiB).
pub fn digest_with(mut reader: impl Read, mut hasher: Hasher) -> io::Result<Digests> {
    let mut buf = vec![0u8; FIRST_READ];
    let mut total = 0;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        // By what was read, not by one read's size: a decompressor's reads
        // may never fill the buffer.
        total += n;
        if total >= FIRST_READ && buf.len() < BIG_READ {
            buf.resize(BIG_READ, 0);
        }
    }
    Ok(hasher.finish())
}

/// All four digests of what `reader` yields (small inputs: indexes, tests).
pub fn digest_reader(reader: impl Read) -> io::Result<Digests> {
    digest_with(reader, Hasher::new(DigestSet::ALL))
}

/// SHA-256 of `data`, lowercase hex: the one helper for a digest of bytes
/// in memory (cache keys, pins, scripts).
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(data))
}

/// A file's SHA-256, as its 32 bytes: a build holds one for each package
/// from preparing it to writing the repository (as a hex `String`, 24
/// bytes and 64 more on the heap). Shown as the lowercase hex the indexes,
/// the lock and the reports write.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sha256Sum([u8; 32]);

impl Sha256Sum {
    /// From its 64 hex digits; `None` for anything else.
    pub fn from_hex(hex_text: &str) -> Option<Sha256Sum> {
        let mut out = [0; 32];
        hex::decode_to_slice(hex_text, &mut out).ok()?;
        Some(Sha256Sum(out))
    }

    pub fn into_bytes(self) -> [u8; 32] {
        self.0
    }

    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Its 64 lowercase hex digits, without an allocation.
    pub fn hex_digits(&self) -> [u8; 64] {
        let mut text = [0; 64];
        hex::encode_to_slice(self.0, &mut text).expect("64 digits for 32 bytes");
        text
    }

    /// Whether `hex_text` (as [`Digests`] hold it) is this digest.
    pub fn matches(&self, hex_text: &str) -> bool {
        Sha256Sum::from_hex(hex_text) == Some(*self)
    }
}

impl std::fmt::Display for Sha256Sum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = self.hex_digits();
        f.write_str(std::str::from_utf8(&text).expect("hex is ASCII"))
    }
}

impl std::fmt::Debug for Sha256Sum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

/// SHA-256 of a file, streamed (as [`digest_with`] reads), lowercase hex.
pub fn sha256_file(path: &std::path::Path) -> io::Result<String> {
    let d = digest_with(std::fs::File::open(path)?, Hasher::new(DigestSet::SHA256))?;
    Ok(d.sha256)
}

/// A digest over several parts (a cache key): feed the parts, take the hex.
#[derive(Default)]
pub struct KeyHasher(sha2::Sha256);

impl KeyHasher {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn update(&mut self, part: impl AsRef<[u8]>) {
        sha2::Digest::update(&mut self.0, part.as_ref());
    }
    pub fn finish_hex(self) -> String {
        hex::encode(sha2::Digest::finalize(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        let d = digest_reader(&b"abc"[..]).unwrap();
        assert_eq!(d.size, 3);
        assert_eq!(d.md5.as_deref(), Some("900150983cd24fb0d6963f7d28e17f72"));
        assert_eq!(
            d.sha1.as_deref(),
            Some("a9993e364706816aba3e25717850c26c9cd0d89d")
        );
        assert_eq!(
            d.sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(d.sha512.unwrap().starts_with("ddaf35a193617aba"));
        let only = digest_with(&b"abc"[..], Hasher::new(DigestSet::SHA256)).unwrap();
        assert_eq!((only.size, &only.sha256, only.md5), (3, &d.sha256, None));
    }

    #[test]
    fn parallel_digests_equal_inline_ones_over_many_chunks() {
        let data: Vec<u8> = (0..5_000_000u32).map(|i| (i * 7 + i / 3) as u8).collect();
        let mut a = Hasher::new(DigestSet::ALL);
        let mut b = Hasher::parallel(DigestSet::ALL);
        for chunk in data.chunks(65_537) {
            a.update(chunk);
            b.update(chunk);
        }
        let (a, b) = (a.finish(), b.finish());
        assert_eq!(a, b);
        assert_eq!(a.size, 5_000_000);
        assert!(a.md5.is_some() && a.sha1.is_some() && a.sha512.is_some());
    }
}
