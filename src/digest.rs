//! One pass over a stream computes every digest apt and dpkg use: MD5 (dpkg's
//! md5sums, Packages' MD5sum), SHA1, SHA256 and SHA512 (Release, Packages).

use std::io::{self, Read, Write};

use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha512};

/// The size and digests of a byte stream, as lower-case hex.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Digests {
    pub size: u64,
    pub md5: String,
    pub sha1: String,
    pub sha256: String,
    pub sha512: String,
}

/// A `Write` sink that feeds all four hashes; also usable as a tee target.
#[derive(Clone, Default)]
pub struct MultiHasher {
    size: u64,
    md5: Md5,
    sha1: Sha1,
    sha256: Sha256,
    sha512: Sha512,
}

impl MultiHasher {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn update(&mut self, data: &[u8]) {
        self.size += data.len() as u64;
        self.md5.update(data);
        self.sha1.update(data);
        self.sha256.update(data);
        self.sha512.update(data);
    }

    pub fn finish(self) -> Digests {
        Digests {
            size: self.size,
            md5: hex::encode(self.md5.finalize()),
            sha1: hex::encode(self.sha1.finalize()),
            sha256: hex::encode(self.sha256.finalize()),
            sha512: hex::encode(self.sha512.finalize()),
        }
    }
}

impl Write for MultiHasher {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A reader that hashes what passes through it (hash while copying).
pub struct HashingReader<R> {
    inner: R,
    hasher: MultiHasher,
}

impl<R: Read> HashingReader<R> {
    pub fn new(inner: R) -> Self {
        HashingReader {
            inner,
            hasher: MultiHasher::new(),
        }
    }
    pub fn finish(self) -> Digests {
        self.hasher.finish()
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
}

/// Size, SHA256 and SHA512: what downloads are checked against and what the
/// lock file records (cheaper than all four when MD5/SHA1 are not needed).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StrongDigests {
    pub size: u64,
    pub sha256: String,
    pub sha512: String,
}

#[derive(Clone, Default)]
pub struct StrongHasher {
    size: u64,
    sha256: Sha256,
    sha512: Sha512,
}

impl StrongHasher {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn update(&mut self, data: &[u8]) {
        self.size += data.len() as u64;
        self.sha256.update(data);
        self.sha512.update(data);
    }
    pub fn finish(self) -> StrongDigests {
        StrongDigests {
            size: self.size,
            sha256: hex::encode(self.sha256.finalize()),
            sha512: hex::encode(self.sha512.finalize()),
        }
    }
}

/// Size, SHA256 and SHA512 of everything `reader` yields.
pub fn strong_digest_reader(mut reader: impl Read) -> io::Result<StrongDigests> {
    let mut hasher = StrongHasher::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => return Ok(hasher.finish()),
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// A writer that hashes what passes through it on the way to `inner`.
pub struct HashingWriter<W> {
    inner: W,
    hasher: MultiHasher,
}

impl<W: Write> HashingWriter<W> {
    pub fn new(inner: W) -> Self {
        HashingWriter {
            inner,
            hasher: MultiHasher::new(),
        }
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

/// A writer that computes only size and SHA256 on the way to `inner`: for
/// large copies where nothing else is needed (SHA256 runs on the CPU's SHA
/// instructions where there are some; all four hashes cost several times more).
pub struct Sha256Writer<W> {
    inner: W,
    size: u64,
    sha256: Sha256,
}

impl<W: Write> Sha256Writer<W> {
    pub fn new(inner: W) -> Self {
        Sha256Writer {
            inner,
            size: 0,
            sha256: Sha256::new(),
        }
    }
    /// The inner writer, the size and the SHA256 (hex).
    pub fn finish(self) -> (W, u64, String) {
        (self.inner, self.size, hex::encode(self.sha256.finalize()))
    }
}

impl<W: Write> Write for Sha256Writer<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.size += n as u64;
        self.sha256.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Reads `reader` to the end and returns its digests.
pub fn digest_reader(mut reader: impl Read) -> io::Result<Digests> {
    let mut hasher = MultiHasher::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finish())
}

/// SHA-256 of `data`, lowercase hex: the one helper for a digest of bytes
/// in memory (cache keys, pins, scripts).
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(data))
}

/// SHA-256 of a file, streamed in 1 MiB reads, lowercase hex.
pub fn sha256_file(path: &std::path::Path) -> io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut h = KeyHasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Ok(h.finish_hex()),
            Ok(n) => h.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
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
        assert_eq!(d.md5, "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(d.sha1, "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(
            d.sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(d.sha512.starts_with("ddaf35a193617aba"));
        let mut r = HashingReader::new(&b"abc"[..]);
        io::copy(&mut r, &mut io::sink()).unwrap();
        assert_eq!(r.finish(), d);
    }
}
