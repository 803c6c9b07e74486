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
    /// The records file still being read, on a thread of its own: a build
    /// reads and parses its lock meanwhile (each is a single-threaded tenth
    /// of a one-recipe-gone build). Joined by the first use of the records.
    reading: std::sync::Mutex<Option<std::thread::JoinHandle<Records>>>,
    /// `reading` was joined: each use of the records takes one lock, not
    /// two (thousands of packages are checked on several threads at once).
    read: std::sync::atomic::AtomicBool,
    changed: std::sync::atomic::AtomicBool,
    /// The controls live in a file of their own beside `path`
    /// ([`DigestStore::forget_controls`] writes and drops them once the
    /// packages are prepared, while the digests still change).
    controls_changed: std::sync::atomic::AtomicBool,
}

use super::control_texts::{ControlTexts, Sha256};
use super::sorted_table::{Keyed, SortedTable};

fn sha256_bytes(hex_text: &str) -> Option<Sha256> {
    crate::digest::Sha256Sum::from_hex(hex_text).map(crate::digest::Sha256Sum::into_bytes)
}

/// The records in memory, compact; [`RecordsFile`] and [`ControlsFile`]
/// are their form on disk.
#[derive(Default)]
struct Records {
    /// By device and inode.
    digests: SortedTable<Record>,
    /// Their texts on disk, where each is in memory (see
    /// [`super::control_texts`]).
    controls: ControlTexts,
    /// The controls were written and dropped: none is added or answered.
    controls_forgotten: bool,
    data_checked: SortedTable<Sha256>,
}

impl Keyed for Record {
    type Key = (u64, u64);
    fn key(&self) -> (u64, u64) {
        (self.identity.dev(), self.identity.ino())
    }
}

impl Keyed for Sha256 {
    type Key = Sha256;
    fn key(&self) -> Sha256 {
        *self
    }

    fn compare(a: &Sha256, b: &Sha256) -> std::cmp::Ordering {
        super::sorted_table::sha256_order(a, b)
    }
}

#[derive(Clone, Copy, serde::Serialize, serde::Deserialize)]
struct Record {
    identity: crate::files::FileIdentity,
    size: u64,
    sha256: Sha256,
}

impl Record {
    fn digests(&self) -> Digests {
        Digests {
            size: self.size,
            sha256: hex::encode(self.sha256),
            ..Digests::default()
        }
    }
}

/// The head of the records' and the controls' files
/// ([`crate::files::write_cache`]: thousands of fixed-size records, parsed
/// from JSON with hex digests, were a tenth of the CPU of a build that
/// changes one package of 5,000).
const MAGIC: &[u8; 8] = b"dfrecord";

/// The records file.
#[derive(serde::Deserialize)]
struct RecordsFile {
    digests: Vec<Record>,
    /// SHA256 of the package files whose data member was read to its end
    /// without a fault.
    data_checked: Vec<Sha256>,
}

/// The controls file (beside the records file): SHA256 of a package file
/// and its control paragraph's text (borrowed from the file's bytes).
#[derive(serde::Deserialize)]
struct ControlsFile<'a> {
    #[serde(borrow)]
    controls: Vec<Option<(Sha256, &'a str)>>,
}

/// A records or controls file's bytes after its head.
fn read_file(path: &Path) -> Option<Vec<u8>> {
    crate::input::read_cache(path, crate::input::limit::RECORDS, MAGIC, RECORDS_VERSION)
}

/// `controls` beside `records`.
fn controls_path(records: &Path) -> PathBuf {
    records.with_file_name(CONTROLS_FILE)
}

/// The records file's name in the cache.
pub const RECORDS_FILE: &str = "records";
const CONTROLS_FILE: &str = "controls";
/// The files of the JSON records (versions 1 to 4), removed by the first
/// save of these.
const JSON_FILES: [&str; 2] = ["records.json", "controls.json"];

/// 3: a pool file's digests are its size and SHA256. 4: the controls in
/// a file of their own. 5: postcard, not JSON. 6: with a CRC-32.
const RECORDS_VERSION: u32 = 6;

impl Records {
    /// No records, their controls spilled beside `path` (the records file).
    fn none_beside(path: Option<&Path>) -> Records {
        Records {
            controls: ControlTexts::in_dir(path.and_then(Path::parent).map(Path::to_path_buf)),
            ..Records::default()
        }
    }

    /// The tables copied into the calling thread's memory, the reader's
    /// freed (they are held to the end of the build: see the `cores`
    /// module). Each is one block of plain entries.
    fn kept(self) -> Records {
        Records {
            digests: self.digests.clone(),
            controls: self.controls.kept(),
            controls_forgotten: self.controls_forgotten,
            data_checked: self.data_checked.clone(),
        }
    }

    /// The records in `path` and the controls beside it, each file on its
    /// own: a torn records file costs its digests, not the controls (a
    /// package's control is a function of its bytes, named by their SHA256).
    fn read(path: &Path) -> Records {
        let mut controls = Records::none_beside(Some(path)).controls;
        Self::read_controls(&controls_path(path), &mut controls);
        let f = read_file(path).and_then(|b| postcard::from_bytes::<RecordsFile>(&b).ok());
        let Some(f) = f else {
            return Records {
                controls,
                ..Records::default()
            };
        };
        Records {
            digests: SortedTable::of(f.digests),
            controls,
            controls_forgotten: false,
            data_checked: SortedTable::of(f.data_checked),
        }
    }

    fn read_controls(path: &Path, into: &mut ControlTexts) {
        let Some(bytes) = read_file(path) else {
            return;
        };
        let Ok(f) = postcard::from_bytes::<ControlsFile>(&bytes) else {
            return;
        };
        into.reserve(f.controls.len());
        for (k, v) in f.controls.into_iter().flatten() {
            into.insert(k, v);
        }
    }
}

/// The records, sorted (the same records give the same file), in
/// [`RecordsFile`]'s shape.
impl serde::Serialize for Records {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Records", 2)?;
        st.serialize_field("digests", &self.digests)?;
        st.serialize_field("data_checked", &self.data_checked)?;
        st.end()
    }
}

/// The controls, sorted, in [`ControlsFile`]'s shape, streamed from where
/// they are kept (one that cannot be read back is written as none).
struct Controls<'a>(&'a ControlTexts);

impl serde::Serialize for Controls<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeSeq, SerializeStruct};
        struct Texts<'a>(&'a ControlTexts);
        impl serde::Serialize for Texts<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let keys = self.0.keys_sorted();
                let mut seq = s.serialize_seq(Some(self.0.len()))?;
                for k in keys {
                    seq.serialize_element(&self.0.get(&k).map(|v| (k, v)))?;
                }
                seq.end()
            }
        }
        let mut st = s.serialize_struct("Controls", 1)?;
        st.serialize_field("controls", &Texts(self.0))?;
        st.end()
    }
}

/// Writes `value` to `path` after the head (best effort: the records are a
/// cache), and removes the JSON records beside it.
fn save(path: &Path, value: &impl serde::Serialize) {
    let _ = crate::files::write_cache(path, MAGIC, RECORDS_VERSION, value);
    for old in JSON_FILES {
        let _ = fs::remove_file(path.with_file_name(old));
    }
}

impl DigestStore {
    /// The records in `path` (a file); `None` keeps none (everything is
    /// hashed, every control member read).
    pub fn new(path: Option<PathBuf>) -> DigestStore {
        let reading = path.clone().and_then(|p| {
            std::thread::Builder::new()
                .name("records".into())
                .spawn(move || Records::read(&p))
                .ok()
        });
        // Without a thread, read here.
        let records = match (&path, &reading) {
            (Some(p), None) => Records::read(p),
            _ => Records::default(),
        };
        DigestStore {
            path,
            records: std::sync::Mutex::new(records),
            read: std::sync::atomic::AtomicBool::new(reading.is_none()),
            reading: std::sync::Mutex::new(reading),
            changed: std::sync::atomic::AtomicBool::new(false),
            controls_changed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The records, once read (see `reading`).
    fn records(&self) -> std::sync::LockResult<std::sync::MutexGuard<'_, Records>> {
        use std::sync::atomic::Ordering;
        let mut records = self.records.lock()?;
        if self.read.load(Ordering::Acquire) {
            return Ok(records);
        }
        let read = self.reading.lock().ok().and_then(|mut r| r.take());
        self.read.store(true, Ordering::Release);
        if let Some(read) = read {
            // A reader that panicked leaves none: files are read again.
            *records = match read.join() {
                Ok(read) => read.kept(),
                Err(_) => Records::none_beside(self.path.as_deref()),
            };
        }
        Ok(records)
    }

    fn get(&self, now: crate::files::FileIdentity) -> Option<Digests> {
        let mut records = self.records().ok()?;
        let r = records.digests.get_mut((now.dev(), now.ino()))?;
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
        Some(r.digests())
    }

    fn put(&self, identity: crate::files::FileIdentity, digests: &Digests) {
        // What the pool lists a file with, whatever else was computed on
        // the way: the same output for the same bytes.
        let Some(sha256) = sha256_bytes(&digests.sha256) else {
            return;
        };
        if let Ok(mut records) = self.records() {
            records.digests.insert(Record {
                identity,
                size: digests.size,
                sha256,
            });
            self.changed
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// `read` of the control paragraph's text recorded for the file with
    /// this SHA256 (read back from where the records keep it).
    pub fn with_control<R>(&self, sha256: &str, read: impl FnOnce(&str) -> R) -> Option<R> {
        let text = self.control(sha256)?;
        Some(read(&text))
    }

    pub fn control(&self, sha256: &str) -> Option<String> {
        let key = sha256_bytes(sha256)?;
        // Read once the records' lock is let go.
        let found = self.records().ok()?.controls.find(&key);
        found?.read()
    }

    /// Whether the file with this SHA256 had its data member read to its
    /// end without a fault.
    pub fn data_checked(&self, sha256: &str) -> bool {
        sha256_bytes(sha256)
            .is_some_and(|key| self.records().is_ok_and(|r| r.data_checked.contains(key)))
    }

    pub fn put_data_checked(&self, sha256: &str) {
        let Some(key) = sha256_bytes(sha256) else {
            return;
        };
        if let Ok(mut records) = self.records() {
            records.data_checked.insert(key);
            self.changed
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// The control recorded for this SHA256, handed over rather than
    /// copied: the first take writes the controls' file (if they changed)
    /// and from then on the file is final, as after
    /// [`DigestStore::forget_controls`] (nothing is added). Preparing takes
    /// each package's control once, so a build never holds the text and the
    /// parsed paragraph of every package at once.
    pub fn take_control(&self, sha256: &str) -> Option<String> {
        let key = sha256_bytes(sha256)?;
        let mut records = self.records().ok()?;
        if !records.controls_forgotten {
            self.write_controls(&records);
            records.controls_forgotten = true;
        }
        let found = records.controls.take(&key);
        // Read once the records' lock is let go.
        drop(records);
        found?.read()
    }

    fn write_controls(&self, records: &Records) {
        if self
            .controls_changed
            .swap(false, std::sync::atomic::Ordering::SeqCst)
            && let Some(path) = &self.path
        {
            save(&controls_path(path), &Controls(&records.controls));
        }
    }

    /// Room for `n` files' records in all, made by the calling thread (the
    /// tables are held to the end of the build: see the `cores` module).
    pub fn reserve(&self, n: usize) {
        if let Ok(mut records) = self.records() {
            let r = &mut *records;
            r.digests.reserve(n);
            r.controls.reserve(n.saturating_sub(r.controls.len()));
            r.data_checked.reserve(n);
        }
    }

    pub fn put_control(&self, sha256: &str, text: &str) {
        let Some(key) = sha256_bytes(sha256) else {
            return;
        };
        if let Ok(mut records) = self.records()
            && !records.controls_forgotten
        {
            records.controls.insert(key, text);
            self.controls_changed
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Writes the records back (through a temporary file and a rename) if
    /// anything was added. A failure only costs reading files again.
    pub fn save(&self) {
        let Some(path) = &self.path else { return };
        let Ok(records) = self.records() else {
            return;
        };
        use std::sync::atomic::Ordering::SeqCst;
        if self.controls_changed.swap(false, SeqCst) {
            save(&controls_path(path), &Controls(&records.controls));
        }
        if self.changed.swap(false, SeqCst) {
            save(path, &*records);
        }
    }

    /// Writes the controls if they changed, and drops them: called once the
    /// packages are prepared (nothing asks for a control after that), so
    /// that a build does not hold every package's control twice while it
    /// writes the repository.
    pub fn forget_controls(&self) {
        let Ok(mut records) = self.records() else {
            return;
        };
        if !records.controls_forgotten {
            self.write_controls(&records);
        }
        records.controls = Default::default();
        records.controls_forgotten = true;
    }
}

impl DigestStore {
    /// Records the digests of the file now at `path`, taken while it was
    /// written (best effort: without a record the file is read again).
    /// The digests recorded for the file `meta` describes, if its record
    /// still holds.
    pub fn recorded(&self, meta: &fs::Metadata) -> Option<Digests> {
        self.get(crate::files::FileIdentity::of(meta))
    }

    /// The record of the file at `path` follows its change time and link
    /// count, where nothing else about it changed: called on the pool
    /// files a build linked or unlinked, so that the next build's check of
    /// the change time starts from what this one left. `now`: the file's
    /// identity as it is now.
    pub fn refresh(&self, now: crate::files::FileIdentity) {
        let Ok(mut records) = self.records() else {
            return;
        };
        if let Some(r) = records.digests.get_mut((now.dev(), now.ino()))
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
        self.put(crate::files::FileIdentity::of(meta), digests);
    }

    pub fn record(&self, path: &Path, digests: &Digests) {
        if let Ok(meta) = fs::metadata(path) {
            self.put(crate::files::FileIdentity::of(&meta), digests);
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
        self.digests_as(path, crate::files::FileIdentity::of(meta))
    }

    /// [`DigestStore::digests_with`] with the file's identity from a walk.
    pub fn digests_as(
        &self,
        path: &Path,
        identity: crate::files::FileIdentity,
    ) -> io::Result<Digests> {
        if let Some(d) = self.get(identity) {
            return Ok(d);
        }
        // Opened by type: what was stat'ed may have been replaced since,
        // so the digests go under the identity of what was read.
        let file = crate::input::open_regular(path)?;
        let read = crate::files::FileIdentity::of(&file.metadata()?);
        let d = digest_with(file, Hasher::new(DigestSet::SHA256))?;
        self.put(read, &d);
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
        if let Some(d) = store.get(crate::files::FileIdentity::of(&meta)) {
            return Ok((d, Placed::Linked));
        }
        let d = digest_with(
            crate::input::open_regular(dest)?,
            Hasher::new(DigestSet::SHA256),
        )?;
        // The identity of the file as it is now (the link count changed, the
        // identity's fields did not).
        store.put(crate::files::FileIdentity::of(&fs::metadata(dest)?), &d);
        return Ok((d, Placed::LinkedHashed));
    }
    // Never over a file already there (its name, which the caller took
    // for absent, may be another's).
    let out = File::options().write(true).create_new(true).open(dest)?;
    let mut w = HashingWriter::new(
        BufWriter::with_capacity(1 << 20, out),
        Hasher::new(DigestSet::SHA256),
    );
    io::copy(&mut crate::input::open_regular(src)?, &mut w)?;
    let (buffered, d) = w.finish();
    let file = buffered.into_inner().map_err(|e| e.into_error())?;
    file.set_modified(meta.modified()?)?;
    Ok((d, Placed::Copied))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The compact records go to disk and come back: digests by identity,
    /// controls and checked data by SHA256; the same records write the same
    /// file, and a file that changed is not answered for.
    #[test]
    fn records_survive_the_file_and_follow_identities() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RECORDS_FILE);
        let files: Vec<PathBuf> = (0..3).map(|i| dir.path().join(format!("f{i}"))).collect();
        let store = DigestStore::new(Some(path.clone()));
        let mut digests = Vec::new();
        for (i, f) in files.iter().enumerate() {
            fs::write(f, format!("bytes {i}")).unwrap();
            digests.push(store.digests_of(f).unwrap());
        }
        let sha = digests[1].sha256.clone();
        store.put_control(&sha, "Package: a\n");
        store.put_data_checked(&sha);
        // An older debforge's JSON records beside: removed by the save.
        for old in JSON_FILES {
            fs::write(dir.path().join(old), "{}").unwrap();
        }
        store.save();
        let first = fs::read(&path).unwrap();
        for old in JSON_FILES {
            assert!(!dir.path().join(old).exists(), "{old}");
        }

        // Each kind of record answers as the first question to a store
        // whose file is still being read.
        assert!(DigestStore::new(Some(path.clone())).data_checked(&sha));
        assert_eq!(
            DigestStore::new(Some(path.clone()))
                .control(&sha)
                .as_deref(),
            Some("Package: a\n")
        );
        let again = DigestStore::new(Some(path.clone()));
        for (f, d) in files.iter().zip(&digests) {
            assert_eq!(again.recorded(&fs::metadata(f).unwrap()).as_ref(), Some(d));
        }
        assert_eq!(again.control(&sha).as_deref(), Some("Package: a\n"));
        assert!(again.data_checked(&sha));
        assert!(!again.data_checked(&digests[0].sha256));
        assert_eq!(again.control("not hex"), None);
        // Saved again with nothing new: the same bytes.
        again
            .changed
            .store(true, std::sync::atomic::Ordering::SeqCst);
        again.save();
        assert_eq!(fs::read(&path).unwrap(), first);
        // The controls, written and dropped once the packages are prepared,
        // are in their own file for the next build.
        again.forget_controls();
        assert_eq!(again.control(&sha), None);
        again.put_control(&sha, "Package: b\n");
        again.save();
        let third = DigestStore::new(Some(path.clone()));
        assert_eq!(third.control(&sha).as_deref(), Some("Package: a\n"));
        // New bytes, a new identity: no answer from the record.
        std::thread::sleep(std::time::Duration::from_millis(10));
        fs::write(&files[2], "other bytes!").unwrap();
        assert_eq!(again.recorded(&fs::metadata(&files[2]).unwrap()), None);
        let d = again.digests_of(&files[2]).unwrap();
        assert_eq!(d.sha256, crate::digest::sha256_hex(b"other bytes!"));
        // A torn records file: its digests are gone, the controls beside it
        // stay.
        fs::write(&path, &first[..first.len() / 2]).unwrap();
        let torn = DigestStore::new(Some(path.clone()));
        assert_eq!(torn.recorded(&fs::metadata(&files[0]).unwrap()), None);
        assert_eq!(torn.control(&sha).as_deref(), Some("Package: a\n"));
        // Another version's file: ignored whole.
        let mut other = first.clone();
        other[MAGIC.len()] ^= 1;
        fs::write(&path, &other).unwrap();
        let other = DigestStore::new(Some(path.clone()));
        assert_eq!(other.recorded(&fs::metadata(&files[0]).unwrap()), None);
    }

    /// Preparing takes each control once: the first take writes the
    /// controls' file whole (with controls put since it was read), later
    /// puts are not recorded (the file is final), and what was taken is not
    /// answered again; the next build reads every control back.
    #[test]
    fn controls_taken_are_written_first_and_answered_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RECORDS_FILE);
        let sha = |n: u8| hex::encode([n; 32]);
        let store = DigestStore::new(Some(path.clone()));
        store.put_control(&sha(1), "Package: one\n");
        store.put_control(&sha(2), "Package: two\n");
        assert!(!controls_path(&path).exists(), "written when first taken");
        assert_eq!(
            store.take_control(&sha(1)).as_deref(),
            Some("Package: one\n")
        );
        assert!(controls_path(&path).exists());
        assert_eq!(store.take_control(&sha(1)), None);
        assert_eq!(store.control(&sha(2)).as_deref(), Some("Package: two\n"));
        store.put_control(&sha(3), "Package: three\n");
        assert_eq!(store.control(&sha(3)), None);
        store.forget_controls();
        store.save();
        let next = DigestStore::new(Some(path.clone()));
        assert_eq!(next.control(&sha(1)).as_deref(), Some("Package: one\n"));
        assert_eq!(next.control(&sha(2)).as_deref(), Some("Package: two\n"));
        assert_eq!(next.control(&sha(3)), None);
    }
}
