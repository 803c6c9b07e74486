//! Putting package files into the pool without copying or hashing them
//! again when nothing changed.
//!
//! A pool file is a hard link to the verified file in the cache (the
//! download, or the repacked file) where the filesystem allows, else a copy.
//! Its digests come from a record kept under the cache file's identity
//! (device, inode, size, modification and change times, link count): a
//! file whose identity changed is read and hashed again. The records live in
//! one file ([`DigestStore`]). A change time that moved with the link count
//! is a link added or removed (the pool's own work), not new bytes; the
//! record then follows the file.

use std::fs::{self, File};
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};

use crate::digest::{DigestSet, Digests, Hasher, HashingWriter, digest_with};

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

/// Records kept between builds, in one file read at the start and written
/// once at the end (thousands of packages cost two file operations, not
/// thousands): each file's digests by its identity, and each package's
/// control paragraph by its SHA256. The file is only a cache: one that is
/// missing, torn or from another version is ignored, and an identity that
/// changed means the file is read again.
pub struct DigestStore {
    path: Option<PathBuf>,
    records: std::sync::Mutex<Records>,
    changed: std::sync::atomic::AtomicBool,
}

#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Records {
    version: u32,
    /// `dev-ino` → identity and digests.
    digests: std::collections::BTreeMap<String, Record>,
    /// SHA256 of a package file → its control paragraph's text.
    controls: std::collections::BTreeMap<String, String>,
    /// SHA256 of the package files whose data member was read to its end
    /// without a fault.
    #[serde(default)]
    data_checked: std::collections::BTreeSet<String>,
}

/// 3: a pool file's digests are its size and SHA256.
const RECORDS_VERSION: u32 = 3;

#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct Record {
    identity: crate::files::FileIdentity,
    digests: Digests,
}

impl DigestStore {
    /// The records in `path` (a file); `None` keeps none (everything is
    /// hashed, every control member read).
    pub fn new(path: Option<PathBuf>) -> DigestStore {
        let records = path
            .as_ref()
            .and_then(|p| fs::read(p).ok())
            .and_then(|b| serde_json::from_slice::<Records>(&b).ok())
            .filter(|r| r.version == RECORDS_VERSION)
            .unwrap_or(Records {
                version: RECORDS_VERSION,
                ..Records::default()
            });
        DigestStore {
            path,
            records: std::sync::Mutex::new(records),
            changed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn get(&self, meta: &fs::Metadata) -> Option<Digests> {
        let mut records = self.records.lock().ok()?;
        let now = crate::files::FileIdentity::of(meta);
        let r = records.digests.get_mut(&now.key())?;
        // Pool files are hard-linked into new outputs: a link alone changes
        // their ctime (and their link count). The record follows the file,
        // so the next change of ctime is judged from here.
        if !r.identity.same_bytes_ignoring_links(&now) {
            return None;
        }
        if r.identity != now {
            r.identity = now;
            self.changed
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Some(r.digests.clone())
    }

    fn put(&self, meta: &fs::Metadata, digests: &Digests) {
        if let Ok(mut records) = self.records.lock() {
            let identity = crate::files::FileIdentity::of(meta);
            records.digests.insert(
                identity.key(),
                Record {
                    identity,
                    // What the pool lists a file with, whatever else was
                    // computed on the way: the same output for the same bytes.
                    digests: Digests {
                        size: digests.size,
                        sha256: digests.sha256.clone(),
                        ..Digests::default()
                    },
                },
            );
            self.changed
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// The control paragraph's text recorded for the file with this SHA256.
    pub fn control(&self, sha256: &str) -> Option<String> {
        self.records.lock().ok()?.controls.get(sha256).cloned()
    }

    /// Whether the file with this SHA256 had its data member read to its
    /// end without a fault.
    pub fn data_checked(&self, sha256: &str) -> bool {
        crate::format::path::is_hex_digest(sha256, 64)
            && self
                .records
                .lock()
                .is_ok_and(|r| r.data_checked.contains(sha256))
    }

    pub fn put_data_checked(&self, sha256: &str) {
        if let Ok(mut records) = self.records.lock() {
            records.data_checked.insert(sha256.to_string());
            self.changed
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    pub fn put_control(&self, sha256: &str, text: &str) {
        if let Ok(mut records) = self.records.lock() {
            records
                .controls
                .insert(sha256.to_string(), text.to_string());
            self.changed
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Writes the records back (through a temporary file and a rename) if
    /// anything was added. A failure only costs reading files again.
    pub fn save(&self) {
        let Some(path) = &self.path else { return };
        if !self
            .changed
            .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        let Ok(records) = self.records.lock() else {
            return;
        };
        let Ok(bytes) = serde_json::to_vec(&*records) else {
            return;
        };
        let Some(dir) = path.parent() else { return };
        let _ = fs::create_dir_all(dir);
        if let Ok(mut tmp) = tempfile::NamedTempFile::new_in(dir)
            && std::io::Write::write_all(&mut tmp, &bytes).is_ok()
        {
            let _ = tmp.persist(path);
        }
    }
}

impl DigestStore {
    /// Records the digests of the file now at `path`, taken while it was
    /// written (best effort: without a record the file is read again).
    /// The digests recorded for the file `meta` describes, if its record
    /// still holds.
    pub fn recorded(&self, meta: &fs::Metadata) -> Option<Digests> {
        self.get(meta)
    }

    /// The record of the file at `path` follows its change time and link
    /// count, where nothing else about it changed: called on the pool
    /// files a build linked or unlinked, so that the next build's check of
    /// the change time starts from what this one left.
    pub fn refresh(&self, path: &Path) {
        let Ok(meta) = fs::metadata(path) else { return };
        let now = crate::files::FileIdentity::of(&meta);
        let Ok(mut records) = self.records.lock() else {
            return;
        };
        if let Some(r) = records.digests.get_mut(&now.key())
            && r.identity.same_inode_bytes(&now)
            && r.identity != now
        {
            r.identity = now;
            self.changed
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Records `digests` for the file `meta` describes.
    pub fn put_digests(&self, meta: &fs::Metadata, digests: &Digests) {
        self.put(meta, digests);
    }

    pub fn record(&self, path: &Path, digests: &Digests) {
        if let Ok(meta) = fs::metadata(path) {
            self.put(&meta, digests);
        }
    }

    /// The digests of `path`: from its record when its identity is
    /// unchanged, else read (and recorded).
    pub fn digests_of(&self, path: &Path) -> io::Result<Digests> {
        self.digests_with(path, &fs::metadata(path)?)
    }

    /// [`DigestStore::digests_of`] with the file's metadata already at
    /// hand (one `stat` per file, not two).
    pub fn digests_with(&self, path: &Path, meta: &fs::Metadata) -> io::Result<Digests> {
        if let Some(d) = self.get(meta) {
            return Ok(d);
        }
        let d = digest_with(File::open(path)?, Hasher::new(DigestSet::SHA256))?;
        self.put(meta, &d);
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
        let d = digest_with(File::open(dest)?, Hasher::new(DigestSet::SHA256))?;
        // The identity of the file as it is now (the link count changed, the
        // identity's fields did not).
        store.put(&fs::metadata(dest)?, &d);
        return Ok((d, Placed::LinkedHashed));
    }
    let out = File::create(dest)?;
    let mut w = HashingWriter::new(
        BufWriter::with_capacity(1 << 20, out),
        Hasher::new(DigestSet::SHA256),
    );
    io::copy(&mut File::open(src)?, &mut w)?;
    let (buffered, d) = w.finish();
    let file = buffered.into_inner().map_err(|e| e.into_error())?;
    file.set_modified(meta.modified()?)?;
    Ok((d, Placed::Copied))
}
