//! EFFECT: reading the project's input files — recipes, the lock, keys, a
//! passphrase, a snapshot's Release, a bundle's SHA256SUMS, a package
//! tree's `DEBIAN/`, the stamps and records beside an output — by type and
//! with a bound. Only a regular file is read (a FIFO would hang a run for
//! ever, a link to `/dev/zero` would grow it until memory runs out); the
//! type is checked before opening (following links, so a link to a device
//! is a device) and again on what was opened (the path may change in
//! between), which is opened non-blocking. Errors are `io::Error`s whose
//! text says what was wrong, for the caller to wrap with the path.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// How large each kind of input may be. Generous for what a project really
/// holds (the shipped recipes are under 2 KiB each, a 20,000-package lock
/// about 20 MiB, Ubuntu's InRelease about 300 KiB), small against memory.
pub mod limit {
    /// A recipe, `sources.toml`, `repository.toml`, a maintainer script.
    pub const RECIPE: u64 = 1 << 20;
    /// The lock file.
    pub const LOCK: u64 = 32 << 20;
    /// A key or keyring.
    pub const KEY: u64 = 4 << 20;
    /// A file of a package tree's `DEBIAN/` (`control`, scripts, `md5sums`:
    /// a package of 100,000 files lists about 6 MB of them): no more than
    /// the whole control member may hold (`deb::MAX_CONTROL_MEMBER`).
    pub const CONTROL_FILE: u64 = 32 << 20;
    /// Pins (`debforge.pref`, apt's preferences): about 310 bytes a pinned
    /// package.
    pub const PREFERENCES: u64 = 64 << 20;
    /// An uncompressed index of a repository (`Packages`: about 1 KB a
    /// package).
    pub const INDEX: u64 = 1 << 30;
    /// A passphrase file.
    pub const PASSPHRASE: u64 = 4 << 10;
    /// A Release or InRelease.
    pub const RELEASE: u64 = 32 << 20;
    /// A bundle's SHA256SUMS (about 130 bytes a file: 120,000 files).
    pub const SUMS: u64 = 16 << 20;
    /// The map of an index's compressed pieces (about 200 bytes a piece of
    /// up to 128 KiB).
    pub const PIECE_MAP: u64 = 16 << 20;
    /// The cache's records or controls file (about 0.5 KB a package).
    pub const RECORDS: u64 = 256 << 20;
    /// A generation's manifest, or the stamp beside an output (about 250
    /// bytes a package).
    pub const MANIFEST: u64 = 256 << 20;
    /// A file a built package installs, or its copyright file.
    pub const PAYLOAD: u64 = 1 << 30;
}

/// What kind of file `mode` (a stat's) describes, when it is not a
/// regular file.
fn not_regular(mode: u32) -> Option<&'static str> {
    match mode & libc::S_IFMT {
        libc::S_IFREG => None,
        libc::S_IFDIR => Some("a directory"),
        libc::S_IFIFO => Some("a FIFO (named pipe)"),
        libc::S_IFCHR => Some("a character device"),
        libc::S_IFBLK => Some("a block device"),
        libc::S_IFSOCK => Some("a socket"),
        _ => Some("not a regular file"),
    }
}

fn check(meta: &Metadata) -> io::Result<()> {
    check_mode(std::os::unix::fs::MetadataExt::mode(meta))
}

fn check_mode(mode: u32) -> io::Result<()> {
    match not_regular(mode) {
        None => Ok(()),
        Some(what) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("is {what}, not a regular file; debforge reads only regular files here"),
        )),
    }
}

/// Opens `path` for reading if it is a regular file (without blocking on a
/// FIFO put there in between).
pub fn open_regular(path: &Path) -> io::Result<File> {
    open_regular_sized(path).map(|(file, _)| file)
}

/// [`open_regular`], and the size the opened file says it has.
fn open_regular_sized(path: &Path) -> io::Result<(File, u64)> {
    check(&fs::metadata(path)?)?;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    check(&meta)?;
    Ok((file, meta.len()))
}

/// The whole of `path`, a regular file of at most `limit` bytes.
pub fn read(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let (file, size) = open_regular_sized(path)?;
    read_opened(file, size, limit)
}

/// [`read`] of the file `name` in the directory open as `dir`, looked up
/// relative to it: a project's thousands of recipes walk their directory's
/// path once, not once each.
pub fn read_in(dir: &File, name: &std::ffi::OsStr, limit: u64) -> io::Result<Vec<u8>> {
    read_in_as(dir, name, &stat_in(dir, name)?, limit).map(|(bytes, _)| bytes)
}

/// The stat of the file `name` in the directory open as `dir` (links
/// followed, as [`read_in`] follows them).
pub fn stat_in(dir: &File, name: &std::ffi::OsStr) -> io::Result<rustix::fs::Stat> {
    Ok(rustix::fs::statat(dir, name, rustix::fs::AtFlags::empty())?)
}

/// [`read_in`] of a file already stat'ed as `stat` ([`stat_in`]): a caller
/// that decides by the stat whether to read it at all stats it once. With
/// the bytes, the opened file's own metadata, taken before they were read
/// (the name may have been pointed at another file since `stat`).
pub fn read_in_as(
    dir: &File,
    name: &std::ffi::OsStr,
    stat: &rustix::fs::Stat,
    limit: u64,
) -> io::Result<(Vec<u8>, Metadata)> {
    use rustix::fs::{Mode, OFlags};
    check_mode(stat.st_mode)?;
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let file = File::from(rustix::fs::openat(dir, name, flags, Mode::empty())?);
    let meta = file.metadata()?;
    check(&meta)?;
    let bytes = read_opened(file, meta.len(), limit)?;
    Ok((bytes, meta))
}

/// [`read_in`], as UTF-8 text.
pub fn read_in_to_string(dir: &File, name: &std::ffi::OsStr, limit: u64) -> io::Result<String> {
    utf8(read_in(dir, name, limit)?)
}

/// The rest of `file`, which says it holds `size` bytes, up to `limit`.
fn read_opened(file: File, size: u64, limit: u64) -> io::Result<Vec<u8>> {
    // Refused before a byte is read when it says so itself.
    if size > limit {
        return Err(too_large(limit));
    }
    // Sized as the file says, and one more byte, so that a file of the
    // size it says is read in one call and the end found in the next
    // (thousands of recipes: an empty buffer grows from a 32-byte read).
    let mut buf = Vec::with_capacity(size as usize + 1);
    file.take(limit + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > limit {
        return Err(too_large(limit));
    }
    Ok(buf)
}

fn too_large(limit: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::FileTooLarge,
        format!("is larger than {limit} bytes, the most debforge reads for this kind of file"),
    )
}

/// [`read`], as UTF-8 text.
pub fn read_to_string(path: &Path, limit: u64) -> io::Result<String> {
    utf8(read(path, limit)?)
}

/// `bytes` as UTF-8 text (an error a reader's caller can name the file by).
pub fn utf8(bytes: Vec<u8>) -> io::Result<String> {
    String::from_utf8(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "is not UTF-8 text".to_string()))
}

/// The postcard bytes of a cache file that `write_cache` (files.rs) wrote
/// with this `magic` and `version`: a regular file of at most `limit`
/// bytes whose CRC-32 matches (any other, as any torn or damaged cache file
/// or another version's, is none).
pub fn read_cache(path: &Path, limit: u64, magic: &[u8; 8], version: u32) -> Option<Vec<u8>> {
    let mut bytes = read(path, limit).ok()?;
    let head = bytes.get(..magic.len() + 4)?;
    if head[..magic.len()] != magic[..] || head[magic.len()..] != version.to_le_bytes() {
        return None;
    }
    let (rest, sum) = bytes[magic.len() + 4..].split_last_chunk::<4>()?;
    if crc32fast::hash(rest).to_le_bytes() != *sum {
        return None;
    }
    bytes.truncate(bytes.len() - 4);
    bytes.drain(..magic.len() + 4);
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_their_bound() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        fs::write(&f, b"12345").unwrap();
        assert_eq!(read(&f, 5).unwrap(), b"12345");
        let e = read(&f, 4).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::FileTooLarge);
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(
            read(&fifo, 10)
                .unwrap_err()
                .to_string()
                .contains("is a FIFO (named pipe)")
        );
        let zero = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(
            read(&zero, 10)
                .unwrap_err()
                .to_string()
                .contains("is a character device")
        );
        assert!(
            read(dir.path(), 10)
                .unwrap_err()
                .to_string()
                .contains("is a directory")
        );
        assert_eq!(
            read(&dir.path().join("none"), 10).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        // The same, relative to the directory open once.
        let open = File::open(dir.path()).unwrap();
        let at = |name: &str, limit| read_in(&open, std::ffi::OsStr::new(name), limit);
        assert_eq!(at("f", 5).unwrap(), b"12345");
        assert_eq!(at("f", 4).unwrap_err().kind(), io::ErrorKind::FileTooLarge);
        for (name, says) in [
            ("fifo", "is a FIFO (named pipe)"),
            ("zero", "is a character device"),
            (".", "is a directory"),
        ] {
            let e = at(name, 10).unwrap_err().to_string();
            assert!(e.contains(says), "{name}: {e}");
        }
        assert_eq!(at("none", 10).unwrap_err().kind(), io::ErrorKind::NotFound);
        std::fs::write(dir.path().join("latin1"), b"caf\xe9").unwrap();
        assert!(
            read_in_to_string(&open, std::ffi::OsStr::new("latin1"), 10)
                .unwrap_err()
                .to_string()
                .contains("not UTF-8")
        );
    }
}
