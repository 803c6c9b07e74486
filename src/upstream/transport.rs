//! Where an upstream's files come from: the network, or a directory laid out
//! like the repository (an air-gapped snapshot, a `file://` source).

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::digest::Digests;
use crate::fetch::{Expected, FetchError, FetchErrorKind, Http, Reporter};

pub trait Transport: Sync {
    /// A small file, by path relative to the source's base; `None` if absent.
    fn get_small(&self, rel: &str, limit: u64) -> Result<Option<Vec<u8>>, FetchError>;
    /// A file that must match `expected`, placed at `dest` only when it does.
    fn fetch(
        &self,
        rel: &str,
        expected: &Expected,
        dest: &Path,
        name: &str,
    ) -> Result<Digests, FetchError>;
    /// The URL or path of `rel`, for messages.
    fn describe(&self, rel: &str) -> String;
    /// Files come from a directory (a snapshot, a `file://` source), not
    /// the network.
    fn is_local(&self) -> bool {
        false
    }
}

pub struct HttpTransport<'a> {
    /// Shared by every source's transport and direct URL downloads.
    pub http: std::sync::Arc<Http>,
    /// Ends with `/`.
    pub base: String,
    pub observer: &'a dyn Reporter,
}

impl Transport for HttpTransport<'_> {
    fn get_small(&self, rel: &str, limit: u64) -> Result<Option<Vec<u8>>, FetchError> {
        self.http
            .get_small(&self.describe(rel), limit, self.observer)
    }
    fn fetch(
        &self,
        rel: &str,
        expected: &Expected,
        dest: &Path,
        name: &str,
    ) -> Result<Digests, FetchError> {
        self.http
            .download(&self.describe(rel), expected, dest, name, self.observer)
    }
    fn describe(&self, rel: &str) -> String {
        format!("{}{rel}", self.base)
    }
}

/// A directory with the repository's layout.
pub struct DirTransport {
    pub root: PathBuf,
}

impl Transport for DirTransport {
    fn get_small(&self, rel: &str, limit: u64) -> Result<Option<Vec<u8>>, FetchError> {
        let path = self.root.join(rel);
        let fail = |kind| FetchError {
            url: path.display().to_string(),
            kind,
        };
        match crate::input::read(&path, limit) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::FileTooLarge => {
                Err(fail(FetchErrorKind::TooLarge(limit)))
            }
            Err(e) => Err(fail(FetchErrorKind::Io(crate::error::FileError {
                path: path.clone(),
                source: e,
            }))),
        }
    }

    fn fetch(
        &self,
        rel: &str,
        expected: &Expected,
        dest: &Path,
        _name: &str,
    ) -> Result<Digests, FetchError> {
        let src = self.root.join(rel);
        copy_verified(&src, expected, dest)
    }

    fn describe(&self, rel: &str) -> String {
        self.root.join(rel).display().to_string()
    }

    fn is_local(&self) -> bool {
        true
    }
}

/// Copies `src` to `dest` (through `dest.part`), hashing while copying; only
/// a file with the expected size and hashes is renamed into place.
pub fn copy_verified(src: &Path, expected: &Expected, dest: &Path) -> Result<Digests, FetchError> {
    let fail = |kind| FetchError {
        url: src.display().to_string(),
        kind,
    };
    let io_fail = |path: &Path, e| {
        fail(FetchErrorKind::Io(crate::error::FileError {
            path: path.to_path_buf(),
            source: e,
        }))
    };
    let mut input = crate::input::open_regular(src).map_err(|e| io_fail(src, e))?;
    if let Some(dir) = dest.parent() {
        fs::create_dir_all(dir).map_err(|e| io_fail(dir, e))?;
    }
    let partial = dest.with_extension("part");
    let mut out = File::create(&partial).map_err(|e| io_fail(&partial, e))?;
    let mut hasher = expected.hasher();
    // Sized by what is expected (a package of a few KB does not zero
    // 1 MiB), one byte more to see a longer file.
    let mut buf = vec![
        0u8;
        usize::try_from(expected.size)
            .map_or(1 << 20, |n| n.saturating_add(1).min(1 << 20))
    ];
    let result = (|| -> Result<Digests, FetchError> {
        let mut total = 0u64;
        loop {
            let n = input.read(&mut buf).map_err(|e| io_fail(src, e))?;
            if n == 0 {
                break;
            }
            total += n as u64;
            if total > expected.size {
                return Err(fail(FetchErrorKind::TooLong {
                    expected: expected.size,
                }));
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n]).map_err(|e| io_fail(&partial, e))?;
        }
        out.sync_all().map_err(|e| io_fail(&partial, e))?;
        let d = hasher.finish();
        expected.check(&d).map_err(fail)?;
        Ok(d)
    })();
    match result {
        Ok(d) => {
            fs::rename(&partial, dest).map_err(|e| io_fail(dest, e))?;
            Ok(d)
        }
        Err(e) => {
            let _ = fs::remove_file(&partial);
            Err(e)
        }
    }
}
