//! Indexing a pool: one `Packages` stanza per `.deb`, streamed in path order,
//! with an on-disk cache so that an unchanged file is never read again and a
//! changed one always is.
//!
//! The cache is a directory of small JSON files, one per package file, named
//! by the SHA256 of the file's identity: its path, device, inode, size,
//! modification and change times (nanoseconds). Any write to a file changes
//! its ctime, which no user can set, so a changed file always misses. Memory
//! stays flat in the number of packages: nothing is held but the current one.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::deb::{DebError, DebFile};
use crate::digest::{Digests, digest_reader};
use crate::format::deb822::{Paragraph, ParseError};
use crate::format::packages::stanza;

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("{0}")]
    Deb(#[from] DebError),
    #[error("{}: cached control paragraph is corrupt: {source}", path.display())]
    Cache { path: PathBuf, source: ParseError },
}

/// One indexed package file.
#[derive(Debug, Clone)]
pub struct IndexedDeb {
    /// Relative to the repository root, e.g. `pool/main/libn/libnccl2/…deb`.
    pub filename: String,
    pub control: Paragraph,
    pub digests: Digests,
}

impl IndexedDeb {
    pub fn stanza(&self) -> Paragraph {
        stanza(&self.control, &self.filename, &self.digests)
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct CacheEntry {
    control: String,
    size: u64,
    md5: String,
    sha1: String,
    sha256: String,
    sha512: String,
}

/// Counts of what an indexing run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct IndexStats {
    pub read: usize,
    pub cached: usize,
}

pub struct IndexCache {
    dir: Option<PathBuf>,
}

impl IndexCache {
    /// A cache in `dir` (created when needed); `None` disables caching.
    pub fn new(dir: Option<PathBuf>) -> IndexCache {
        IndexCache { dir }
    }

    fn key_path(&self, file: &Path, meta: &fs::Metadata) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        let abs = fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
        let identity = format!(
            "{}\0{}\0{}\0{}\0{}.{}\0{}.{}",
            abs.display(),
            meta.dev(),
            meta.ino(),
            meta.size(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec()
        );
        let h = hex::encode(Sha256::digest(identity.as_bytes()));
        Some(dir.join(&h[..2]).join(&h))
    }

    /// The control paragraph and digests of `file`, from the cache when its
    /// identity is unchanged, else read (and cached).
    pub fn get(
        &self,
        file: &Path,
        filename: &str,
        stats: &mut IndexStats,
    ) -> Result<IndexedDeb, IndexError> {
        let io_err = |e| IndexError::Io {
            path: file.to_path_buf(),
            source: e,
        };
        let meta = fs::metadata(file).map_err(io_err)?;
        let key = self.key_path(file, &meta);
        if let Some(k) = &key
            && let Ok(text) = fs::read(k)
            && let Ok(e) = serde_json::from_slice::<CacheEntry>(&text)
        {
            let control =
                Paragraph::parse_single(&e.control).map_err(|source| IndexError::Cache {
                    path: k.clone(),
                    source,
                })?;
            stats.cached += 1;
            return Ok(IndexedDeb {
                filename: filename.to_string(),
                control,
                digests: Digests {
                    size: e.size,
                    md5: e.md5,
                    sha1: e.sha1,
                    sha256: e.sha256,
                    sha512: e.sha512,
                },
            });
        }
        let deb = DebFile::open(file)?;
        let control = deb.control_files()?.control;
        let digests = digest_reader(fs::File::open(file).map_err(io_err)?).map_err(io_err)?;
        stats.read += 1;
        if let Some(k) = key {
            let entry = CacheEntry {
                control: control.to_string(),
                size: digests.size,
                md5: digests.md5.clone(),
                sha1: digests.sha1.clone(),
                sha256: digests.sha256.clone(),
                sha512: digests.sha512.clone(),
            };
            // A cache that cannot be written only costs speed next time.
            let _ = write_entry(&k, &serde_json::to_vec(&entry).expect("serializes"));
        }
        Ok(IndexedDeb {
            filename: filename.to_string(),
            control,
            digests,
        })
    }
}

fn write_entry(path: &Path, data: &[u8]) -> io::Result<()> {
    let dir = path.parent().expect("cache entries are in a directory");
    fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(data)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Every `.deb` under `root/sub`, as paths relative to `root`, sorted per
/// directory (deterministic, and only one directory listing in memory).
pub fn walk_debs<E: From<IndexError>>(
    root: &Path,
    sub: &str,
    visit: &mut dyn FnMut(&Path, &str) -> Result<(), E>,
) -> Result<(), E> {
    fn walk<E: From<IndexError>>(
        dir: &Path,
        rel: &str,
        visit: &mut dyn FnMut(&Path, &str) -> Result<(), E>,
    ) -> Result<(), E> {
        let rd = match fs::read_dir(dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound && rel.is_empty() => return Ok(()),
            Err(e) => {
                return Err(IndexError::Io {
                    path: dir.to_path_buf(),
                    source: e,
                }
                .into());
            }
        };
        let mut entries: Vec<(String, bool)> = Vec::new();
        for e in rd {
            let e = e.map_err(|source| IndexError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
            let name = e.file_name().to_string_lossy().into_owned();
            let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
            entries.push((name, is_dir));
        }
        entries.sort();
        for (name, is_dir) in entries {
            let child_rel = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let child = dir.join(&name);
            if is_dir {
                walk(&child, &child_rel, visit)?;
            } else if name.ends_with(".deb") {
                visit(&child, &child_rel)?;
            }
        }
        Ok(())
    }
    let start = if sub.is_empty() {
        root.to_path_buf()
    } else {
        root.join(sub)
    };
    walk(&start, sub.trim_end_matches('/'), visit)
}
