//! Putting package files into the pool without copying or hashing them
//! again when nothing changed.
//!
//! A pool file is a hard link to the verified file in the cache (the
//! download, or the repacked file) where the filesystem allows, else a copy.
//! Its digests come from a record kept under the cache file's identity
//! (device, inode, size, modification time): a file whose identity changed
//! is read and hashed again. The change time is not part of the identity:
//! linking the file into each new output changes it.

use std::fs::{self, File};
use std::io::{self, BufWriter};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::digest::{Digests, HashingWriter, digest_reader};

/// How a file went into the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// Linked, digests from the record: nothing read.
    Linked,
    /// Linked, then read once to hash it (no record yet).
    LinkedHashed,
    /// Copied (another filesystem), hashed while copying.
    Copied,
}

/// Digest records by file identity, in one directory of small JSON files.
pub struct DigestStore {
    dir: Option<PathBuf>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Record {
    identity: [i64; 5],
    digests: Digests,
}

fn identity(meta: &fs::Metadata) -> [i64; 5] {
    [
        meta.dev() as i64,
        meta.ino() as i64,
        meta.size() as i64,
        meta.mtime(),
        meta.mtime_nsec(),
    ]
}

impl DigestStore {
    /// Records under `dir`; `None` keeps none (everything is hashed).
    pub fn new(dir: Option<PathBuf>) -> DigestStore {
        DigestStore { dir }
    }

    fn record_path(&self, meta: &fs::Metadata) -> Option<PathBuf> {
        Some(
            self.dir
                .as_ref()?
                .join(format!("{}-{}.json", meta.dev(), meta.ino())),
        )
    }

    fn get(&self, meta: &fs::Metadata) -> Option<Digests> {
        let text = fs::read(self.record_path(meta)?).ok()?;
        let r: Record = serde_json::from_slice(&text).ok()?;
        (r.identity == identity(meta)).then_some(r.digests)
    }

    /// A record that cannot be written only costs a hash next time.
    fn put(&self, meta: &fs::Metadata, digests: &Digests) {
        let Some(path) = self.record_path(meta) else {
            return;
        };
        let r = Record {
            identity: identity(meta),
            digests: digests.clone(),
        };
        let Some(dir) = path.parent() else { return };
        let _ = fs::create_dir_all(dir);
        // One write of the whole record (serde_json writes field by field).
        let Ok(bytes) = serde_json::to_vec(&r) else {
            return;
        };
        if let Ok(mut tmp) = tempfile::NamedTempFile::new_in(dir)
            && std::io::Write::write_all(&mut tmp, &bytes).is_ok()
        {
            let _ = tmp.persist(&path);
        }
    }
}

impl DigestStore {
    /// The digests of `path`: from its record when its identity is
    /// unchanged, else read (and recorded).
    pub fn digests_of(&self, path: &Path) -> io::Result<Digests> {
        let meta = fs::metadata(path)?;
        if let Some(d) = self.get(&meta) {
            return Ok(d);
        }
        let d = digest_reader(File::open(path)?)?;
        self.put(&meta, &d);
        Ok(d)
    }
}

/// Puts `src` into the pool at `dest` (which must not exist): linked where
/// possible, copied otherwise (keeping `src`'s modification time, which is
/// how `publish` knows an unchanged package). Returns the digests of what is
/// now at `dest` and how it got there.
pub fn place(src: &Path, dest: &Path, store: &DigestStore) -> io::Result<(Digests, Placed)> {
    let meta = fs::metadata(src)?;
    if fs::hard_link(src, dest).is_ok() {
        if let Some(d) = store.get(&meta) {
            return Ok((d, Placed::Linked));
        }
        let d = digest_reader(File::open(dest)?)?;
        // The identity of the file as it is now (the link count changed, the
        // identity's fields did not).
        store.put(&fs::metadata(dest)?, &d);
        return Ok((d, Placed::LinkedHashed));
    }
    let out = File::create(dest)?;
    let mut w = HashingWriter::new(BufWriter::with_capacity(64 * 1024, out));
    io::copy(&mut File::open(src)?, &mut w)?;
    let (buffered, d) = w.finish();
    let file = buffered.into_inner().map_err(|e| e.into_error())?;
    file.set_modified(meta.modified()?)?;
    Ok((d, Placed::Copied))
}
