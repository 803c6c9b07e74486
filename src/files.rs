//! EFFECT: the filesystem mechanics every writer shares, written once:
//! atomic writes (temporary name in the same directory, fsync, rename;
//! no fsync for a cache file, whose reader checks it whole),
//! the `.<name>.<what>` sibling paths debforge keeps beside an output, and
//! sorted walks of a tree (walkdir).

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::FileError;

/// How [`write_atomic`] treats an existing file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    Replace,
    /// Never replace it (an append-only record): an error instead.
    Keep,
}

/// Writes `data` to `path` so that a reader sees the old file or the new,
/// never a part, and a crash leaves no half-written file under the name:
/// a temporary file in the same directory (created with its parents),
/// mode 0644 (a web server serves what we write; secrets never come
/// through here), written, fsynced, renamed.
pub fn write_atomic(path: &Path, data: &[u8], existing: Existing) -> Result<(), FileError> {
    write_atomic_with(path, existing, &mut |w| w.write_all(data))
}

/// [`write_atomic`] of what `write` writes (streamed: a lock of thousands
/// of packages is never whole in memory).
pub fn write_atomic_with(
    path: &Path,
    existing: Existing,
    write: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), FileError> {
    let tmp = write_temporary(path, write)?;
    persist(tmp, path, existing, Durable::Yes).map(drop)
}

/// What `write` writes, in a new temporary file beside `path` (its
/// parents made), not yet renamed.
fn write_temporary(
    path: &Path,
    write: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
) -> Result<tempfile::NamedTempFile, FileError> {
    let dir = parent(path);
    fs::create_dir_all(dir).map_err(FileError::at(dir))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(FileError::at(dir))?;
    {
        let mut buffered = std::io::BufWriter::new(tmp.as_file_mut());
        write(&mut buffered).map_err(FileError::at(path))?;
        buffered.flush().map_err(FileError::at(path))?;
    }
    Ok(tmp)
}

/// Whether a file is fsynced before its rename.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Durable {
    Yes,
    /// A cache file: its reader checks it whole (magic, version and a
    /// CRC-32 of the rest, [`write_cache`]), so one a crash left empty or
    /// torn is no cache and the build does the work; and what it says is
    /// taken only where the live files' identities (or the content it is
    /// keyed by) still agree, so one a crash left stale is no answer
    /// either. A cache trusted on its own word must be made durable. An
    /// fsync was a millisecond or more per file at the end of every build.
    Checked,
}

/// A written temporary file made 0644, fsynced where `durable` says and
/// renamed to `path`; the file, still open.
fn persist(
    tmp: tempfile::NamedTempFile,
    path: &Path,
    existing: Existing,
    durable: Durable,
) -> Result<fs::File, FileError> {
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(0o644))
        .map_err(FileError::at(path))?;
    if durable == Durable::Yes {
        tmp.as_file().sync_all().map_err(FileError::at(path))?;
    }
    let persisted = match existing {
        Existing::Replace => tmp.persist(path),
        Existing::Keep => tmp.persist_noclobber(path),
    };
    persisted.map_err(|e| FileError::new(path, e.error))
}

/// [`write_atomic_with`], unless `old` (the file at `path`, opened by the
/// caller by type, `None` where there is none) holds exactly the bytes
/// `write` writes: then nothing is made or changed, not even a temporary
/// file (the directory may be read-only, and its times are watched by the
/// build stamp), and the answer is `None`; else what was written
/// ([`Wrote`]). `write` runs once: its bytes
/// are compared with `old` until one differs, and from there go into the
/// temporary file, after the bytes that were the same (read from `old`
/// again). No more of `old` is read than the bytes written and one byte
/// (its same start twice where they differ): it is never held, and a huge
/// one is not read whole.
pub fn write_atomic_unless_same(
    path: &Path,
    old: Option<&mut fs::File>,
    write: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
) -> Result<Option<Wrote>, FileError> {
    // Renamed into place, and its identity taken through its descriptor.
    let place = |tmp| {
        let file = persist(tmp, path, Existing::Replace, Durable::Yes)?;
        let identity = file.metadata().ok().map(|m| FileIdentity::of(&m));
        Ok(Some(Wrote { identity }))
    };
    let Some(old) = old else {
        return place(write_temporary(path, write)?);
    };
    let mut sink = UnlessSame {
        dir: parent(path),
        old: std::io::BufReader::new(old),
        same: 0,
        crc: crc32fast::Hasher::new(),
        buf: Vec::new(),
        new: None,
    };
    write(&mut sink).map_err(FileError::at(path))?;
    // The same bytes, and nothing after them in `old`.
    if sink.new.is_none() && matches!(std::io::Read::read(&mut sink.old, &mut [0]), Ok(0)) {
        return Ok(None);
    }
    sink.differs().map_err(FileError::at(path))?;
    let mut buffered = sink.new.expect("made where the bytes differ");
    buffered.flush().map_err(FileError::at(path))?;
    let tmp = buffered
        .into_inner()
        .map_err(|e| FileError::new(path, e.into_error()))?;
    place(tmp)
}

/// A file [`write_atomic_unless_same`] wrote: its identity, taken through
/// the descriptor that wrote it once it was renamed (`None` where that
/// stat failed). Another process may have written into it in place since
/// the rename, in the same clock tick: see
/// [`FileIdentity::written_before_renamed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wrote {
    pub identity: Option<FileIdentity>,
}

/// The sink of [`write_atomic_unless_same`]: compares what is written with
/// `old` while it is the same (`same` bytes so far, of CRC32 `crc`), then
/// writes it into a temporary file in `dir`.
struct UnlessSame<'f> {
    dir: &'f Path,
    old: std::io::BufReader<&'f mut fs::File>,
    same: u64,
    crc: crc32fast::Hasher,
    buf: Vec<u8>,
    new: Option<std::io::BufWriter<tempfile::NamedTempFile>>,
}

impl UnlessSame<'_> {
    /// From here on the bytes differ: the temporary file, made with the
    /// bytes that were the same, read from `old` again (and checked to be
    /// them: a file rewritten in place meanwhile is an error, not mixed in).
    fn differs(&mut self) -> std::io::Result<()> {
        use std::io::{Read, Seek};
        if self.new.is_some() {
            return Ok(());
        }
        let mut new = std::io::BufWriter::new(tempfile::NamedTempFile::new_in(self.dir)?);
        let old: &mut fs::File = self.old.get_mut();
        old.rewind()?;
        let mut prefix = old.take(self.same);
        let mut crc = crc32fast::Hasher::new();
        let mut chunk = vec![0; 64 * 1024];
        loop {
            let n = prefix.read(&mut chunk)?;
            if n == 0 {
                break;
            }
            crc.update(&chunk[..n]);
            new.write_all(&chunk[..n])?;
        }
        let expected = std::mem::take(&mut self.crc).finalize();
        if prefix.into_inner().stream_position()? != self.same || crc.finalize() != expected {
            return Err(std::io::Error::other("changed while it was read"));
        }
        self.new = Some(new);
        Ok(())
    }
}

impl Write for UnlessSame<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        use std::io::Read;
        if self.new.is_none() {
            self.buf.resize(data.len(), 0);
            if self.old.read_exact(&mut self.buf).is_ok() && self.buf[..] == *data {
                self.same += data.len() as u64;
                self.crc.update(data);
                return Ok(data.len());
            }
            self.differs()?;
        }
        self.new.as_mut().expect("made").write_all(data)?;
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// [`write_atomic`], but for the fsync ([`Durable::Checked`]), of a cache
/// file in debforge's own form: `magic`, the format's `version` (4 bytes,
/// little-endian), then `value` in postcard (a compact serde format),
/// streamed, then a CRC-32 of those postcard bytes (4 bytes,
/// little-endian): a value damaged in place would decode as another
/// value, one nothing checked. Stamps and records list every
/// package: as JSON, writing and reading them again cost a build that
/// changes one package of thousands a tenth of its time. Read back with
/// `read_cache` (input.rs: every input is read there).
pub fn write_cache(
    path: &Path,
    magic: &[u8; 8],
    version: u32,
    value: &impl serde::Serialize,
) -> Result<(), FileError> {
    let tmp = write_temporary(path, &mut |w| {
        w.write_all(magic)?;
        w.write_all(&version.to_le_bytes())?;
        let mut summed = Summed {
            inner: w,
            crc: crc32fast::Hasher::new(),
            block: Vec::with_capacity(SUMMED_BLOCK),
        };
        postcard::to_io(value, &mut summed).map_err(std::io::Error::other)?;
        summed.pass_on()?;
        let sum = summed.crc.finalize();
        w.write_all(&sum.to_le_bytes())
    })?;
    persist(tmp, path, Existing::Replace, Durable::Checked).map(drop)
}

/// A writer that gathers bytes into blocks, sums each and passes it on
/// ([`write_cache`]'s CRC-32): postcard writes each byte of a number on
/// its own, and a CRC update and a call through `dyn Write` for each
/// made writing a stamp of thousands of packages a stretch of its own at
/// the end of every build.
struct Summed<'w> {
    inner: &'w mut dyn Write,
    crc: crc32fast::Hasher,
    block: Vec<u8>,
}

/// [`Summed`]'s block.
const SUMMED_BLOCK: usize = 64 * 1024;

impl Summed<'_> {
    /// The block gathered so far, summed and passed on.
    fn pass_on(&mut self) -> std::io::Result<()> {
        self.crc.update(&self.block);
        self.inner.write_all(&self.block)?;
        self.block.clear();
        Ok(())
    }
}

impl Write for Summed<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.block.extend_from_slice(buf);
        if self.block.len() >= SUMMED_BLOCK {
            self.pass_on()?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.pass_on()?;
        self.inner.flush()
    }
}

/// [`write_atomic`] of `value` as JSON, streamed (stamps, records and
/// manifests list every package).
pub fn write_json(
    path: &Path,
    existing: Existing,
    value: &impl serde::Serialize,
) -> Result<(), FileError> {
    write_atomic_with(path, existing, &mut |w| {
        serde_json::to_writer(w, value).map_err(std::io::Error::from)
    })
}

/// `path`'s directory (`.` for a bare name).
pub fn parent(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// `.<name>.<what>` beside `path`: where debforge keeps a lock, a stamp, a
/// staging directory or the generations of an output (a dot name: never
/// published, bundled or served).
pub fn beside(path: &Path, what: &str) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    parent(path).join(format!(".{name}.{what}"))
}

/// Every regular file under `root`, as `/`-separated paths relative to it,
/// sorted by name at every level (symlinks are not followed).
pub fn sorted_files(root: &Path) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(root).min_depth(1).sort_by_file_name() {
        let entry = entry.map_err(crate::error::walk_error)?;
        if entry.file_type().is_file() {
            let rel = entry.path().strip_prefix(root).unwrap_or(entry.path());
            out.push(rel.to_string_lossy().into_owned());
        }
    }
    Ok(out)
}

/// A test hook's wait: creates `marker`, returns once something removes it
/// (a test kills the process in between).
pub fn pause_at(marker: &Path) {
    let _ = fs::write(marker, b"");
    while marker.exists() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A digest of everything a change under `root` would change: for each
/// entry (sorted by path, links not followed, `skip`ped subtrees left out)
/// its path, mode, inode, size, and modification and change times to the
/// nanosecond. Stats only (one `fstatat` per entry); what a no-op build
/// compares instead of reading a file.
pub fn tree_digest(root: &Path, skip: &Skip<'_>) -> std::io::Result<String> {
    tree_digest_with(root, skip, true)
}

/// [`tree_digest`] of a tree read through no symbolic link: an error at
/// the first link (what a link points to can change with no trace in the
/// tree itself).
pub fn tree_digest_without_links(root: &Path, skip: &Skip<'_>) -> std::io::Result<String> {
    tree_digest_with(root, skip, false)
}

/// One entry's line of a tree digest: its path and what a change to it
/// changes (mode, inode, size, modification and change times).
fn write_entry_line(line: &mut String, e: &TreeEntry) {
    use std::fmt::Write;
    let id = &e.id;
    let _ = writeln!(
        line,
        "{}\0{:o} {} {} {}.{} {}.{}",
        e.rel, e.mode, id.ino, id.size, id.mtime.0, id.mtime.1, id.ctime.0, id.ctime.1
    );
}

/// Which subtrees (and files) a tree digest leaves out.
pub type Skip<'a> = dyn Fn(&Path) -> bool + Sync + 'a;

/// One directory after another, in one thread: a pool is thousands of
/// directories of one file each (system calls, not bytes), and walks on
/// several threads were no faster on two cores and slower with the
/// allocator's one arena (they fought over its lock). The entries are
/// sorted before they are hashed: the digest does not depend on the order
/// the file system lists them in.
fn tree_digest_with(root: &Path, skip: &Skip<'_>, links: bool) -> std::io::Result<String> {
    Ok(digest_entries(&mut walk_tree(root, skip, links)?))
}

/// Removes `path` and, for a directory, everything under it, as
/// `fs::remove_dir_all` does but with no stack frame or descriptor per
/// level (std's recursion overflowed the stack on a chain of 60,000
/// directories put in an output): the directories under `path` are emptied
/// one level at a time, their subdirectories moved up into `path` itself,
/// so at most two directories are open. A link is removed, never followed.
pub fn remove_tree(path: impl AsRef<Path>) -> std::io::Result<()> {
    use rustix::fs::{AtFlags, Mode, OFlags};
    let path = path.as_ref();
    if !fs::symlink_metadata(path)?.is_dir() {
        return fs::remove_file(path);
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let top = rustix::fs::open(path, flags, Mode::empty())?;
    let mut moved = 0u64;
    loop {
        let (files, dirs) = listing(&top)?;
        for f in files {
            rustix::fs::unlinkat(&top, f.as_c_str(), AtFlags::empty())?;
        }
        if dirs.is_empty() {
            break;
        }
        for d in dirs {
            let sub = rustix::fs::openat(&top, d.as_c_str(), flags, Mode::empty())?;
            let (files, subdirs) = listing(&sub)?;
            for f in files {
                rustix::fs::unlinkat(&sub, f.as_c_str(), AtFlags::empty())?;
            }
            for s in subdirs {
                // A name `path` does not hold yet.
                let free = loop {
                    let name = std::ffi::CString::new(format!(".debforge-removing-{moved}"))
                        .expect("no NUL");
                    moved += 1;
                    match rustix::fs::statat(&top, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) {
                        Err(rustix::io::Errno::NOENT) => break name,
                        Err(e) => return Err(e.into()),
                        Ok(_) => {}
                    }
                };
                rustix::fs::renameat(&sub, s.as_c_str(), &top, free.as_c_str())?;
            }
            drop(sub);
            rustix::fs::unlinkat(&top, d.as_c_str(), AtFlags::REMOVEDIR)?;
        }
    }
    drop(top);
    fs::remove_dir(path)
}

/// The names in the directory open as `dir`: what is not a directory, and
/// the directories (links not followed).
type Names = Vec<std::ffi::CString>;
fn listing(dir: &std::os::fd::OwnedFd) -> std::io::Result<(Names, Names)> {
    use rustix::fs::{AtFlags, FileType};
    let (mut files, mut dirs) = (Vec::new(), Vec::new());
    for e in rustix::fs::Dir::read_from(dir)? {
        let e = e?;
        let name = e.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let is_dir = match e.file_type() {
            FileType::Unknown => {
                let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
                FileType::from_raw_mode(st.st_mode) == FileType::Directory
            }
            t => t == FileType::Directory,
        };
        if is_dir { &mut dirs } else { &mut files }.push(name.to_owned());
    }
    Ok((files, dirs))
}

/// One entry under a walked root: its path relative to the root (`/`
/// between names), its mode and its identity (links not followed).
#[derive(serde::Serialize, serde::Deserialize)]
pub struct TreeEntry {
    pub rel: String,
    pub mode: u32,
    pub id: FileIdentity,
}

impl TreeEntry {
    pub fn of(rel: String, meta: &fs::Metadata) -> TreeEntry {
        use std::os::unix::fs::MetadataExt;
        TreeEntry {
            rel,
            mode: meta.mode(),
            id: FileIdentity::of(meta),
        }
    }

    pub fn is_dir(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFDIR
    }
}

/// Every entry under `root` but `skip`ped subtrees, in no set order: what
/// [`tree_digest`] hashes, for a caller that acts on the entries before it
/// takes the digest ([`digest_entries`]), so the tree is walked once.
pub fn tree_entries(root: &Path, skip: &Skip<'_>) -> std::io::Result<Vec<TreeEntry>> {
    walk_tree(root, skip, true)
}

/// [`tree_entries`] with room for `expected` entries made first: a walk of
/// a whole output (two entries a package) grown by doubling held up to
/// twice what it listed, 6.3 MB for 40,000 entries at a cold build's peak.
pub fn tree_entries_expecting(
    root: &Path,
    skip: &Skip<'_>,
    expected: usize,
) -> std::io::Result<Vec<TreeEntry>> {
    walk_tree_with(root, skip, true, None, expected)
}

/// The [`tree_digest`] of a walk's entries (sorted here): each entry's
/// line hashed in the order of the paths, which is the order of the lines
/// (a path is unique in a tree, and a line is its path, then a NUL no path
/// holds), so no line is held.
pub fn digest_entries(entries: &mut [TreeEntry]) -> String {
    // Two names that are not UTF-8 may show as the same path: the lines
    // decide between them.
    let line = |e: &TreeEntry| {
        let mut l = String::new();
        write_entry_line(&mut l, e);
        l
    };
    entries.sort_unstable_by(|a, b| a.rel.cmp(&b.rel).then_with(|| line(a).cmp(&line(b))));
    let mut h = crate::digest::KeyHasher::new();
    let mut line = String::new();
    for e in entries.iter() {
        line.clear();
        write_entry_line(&mut line, e);
        h.update(&line);
    }
    h.finish_hex()
}

/// An earlier walk of the same root, for [`tree_entries_since`].
pub struct WalkedBefore<'a> {
    /// Its entries, sorted by path.
    pub entries: &'a [TreeEntry],
    /// When it began: no identity in it was taken earlier.
    pub taken: std::time::SystemTime,
}

/// [`tree_entries`] of a tree read through no symbolic link (an error at
/// the first, as [`tree_digest_without_links`]).
pub fn tree_entries_without_links(root: &Path, skip: &Skip<'_>) -> std::io::Result<Vec<TreeEntry>> {
    walk_tree(root, skip, false)
}

/// [`tree_entries`], listing only the directories that changed since the
/// walk `before`: a directory with the identity it had then holds the
/// same names (making, removing or renaming an entry moves its change
/// time, which nothing sets back), so those names are stat'ed without the
/// directory being opened and listed. A pool is a directory a package:
/// the open, the listing and the close were two thirds of its walk's
/// system calls. A directory changed within two seconds before `before`
/// began is listed all the same (file times are coarser than the clock: a
/// change just after its stat may have left the time it had; git's index
/// calls such entries racy), as is one whose name was not UTF-8 (kept
/// lossily, it names nothing). An entry gone since its directory's stat is
/// an error (the caller walks afresh). A name is stat'ed by its path from
/// the nearest directory that was opened, so a directory above it swapped
/// for a link during the walk is followed (the walk of a tree nothing else
/// changes meanwhile, as an output under its lock; the next walk sees the
/// link).
pub fn tree_entries_since(
    root: &Path,
    skip: &Skip<'_>,
    before: &WalkedBefore<'_>,
) -> std::io::Result<Vec<TreeEntry>> {
    // The same tree, give or take what changed since.
    walk_tree_with(root, skip, true, Some(before), before.entries.len())
}

fn walk_tree(root: &Path, skip: &Skip<'_>, links: bool) -> std::io::Result<Vec<TreeEntry>> {
    walk_tree_with(root, skip, links, None, 0)
}

fn walk_tree_with(
    root: &Path,
    skip: &Skip<'_>,
    links: bool,
    before: Option<&WalkedBefore<'_>>,
    expected: usize,
) -> std::io::Result<Vec<TreeEntry>> {
    use rustix::fs::{Mode, OFlags};
    let dir = rustix::fs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut walk = TreeWalk {
        skip,
        links,
        before,
        path: root.to_path_buf(),
        rel: String::new(),
        entries: Vec::with_capacity(expected),
        depth: 0,
    };
    walk.read(dir)?;
    Ok(walk.entries)
}

/// A tree walk: where it is (as a path and relative to the root, each
/// grown and cut back as it goes down and up), and the entries so far.
///
/// Every directory is opened, listed and its entries stat'ed relative to
/// its parent's descriptor (`openat`, `getdents64`, `fstatat`): a pool is
/// thousands of directories, and a whole path looked up again for each
/// (and the `fstat` of `opendir`) was a third of a walk's system time.
struct TreeWalk<'a> {
    skip: &'a Skip<'a>,
    links: bool,
    /// An earlier walk whose unchanged directories are not listed again.
    before: Option<&'a WalkedBefore<'a>>,
    path: PathBuf,
    rel: String,
    entries: Vec<TreeEntry>,
    /// Directories open above the one being read.
    depth: usize,
}

/// The deepest a walked tree may go: one descriptor and one stack frame are
/// held per level, and a chain of 100,000 directories made with `mkdirat`
/// (no path is ever too long for it) overflowed the stack. Outputs, projects
/// and key directories are a few levels deep.
pub const MAX_TREE_DEPTH: usize = 256;

impl<'a> TreeWalk<'a> {
    /// The directory open as `dir` (at `path`): its entries, and its
    /// subdirectories'. One descriptor is open per level.
    fn read(&mut self, dir: std::os::fd::OwnedFd) -> std::io::Result<()> {
        use rustix::fs::AtFlags;
        use std::os::unix::ffi::OsStrExt;
        let mut listing = rustix::fs::Dir::new(dir)?;
        // Each subdirectory gone into as it is listed, not listed first: a
        // pool's letter directory holds a directory per source package
        // (20,000 names and identities held at a cold build's peak).
        while let Some(e) = listing.next() {
            let e = e?;
            let name = e.file_name();
            if name == c"." || name == c".." {
                continue;
            }
            let os_name = std::ffi::OsStr::from_bytes(name.to_bytes());
            if self.skipped(os_name) {
                continue;
            }
            let st = rustix::fs::statat(listing.fd()?, name, AtFlags::SYMLINK_NOFOLLOW)?;
            if let Some(id) = self.entry(os_name, &st)? {
                self.check_depth(true)?;
                self.descend(listing.fd()?, name, &id)?;
            }
        }
        Ok(())
    }

    /// The directory `at` (a path from `base`, one or more names), whose
    /// names are `names` as an earlier walk listed them: each stat'ed
    /// through `base`, the directory never opened.
    fn read_as_before(
        &mut self,
        base: std::os::fd::BorrowedFd<'_>,
        at: &std::ffi::CStr,
        names: Vec<&str>,
    ) -> std::io::Result<()> {
        use rustix::fs::AtFlags;
        // Each subdirectory gone into as it is stat'ed (see `read`).
        for name in names {
            if self.skipped(name.as_ref()) {
                continue;
            }
            let mut path = at.to_bytes().to_vec();
            path.push(b'/');
            path.extend_from_slice(name.as_bytes());
            let path = std::ffi::CString::new(path).map_err(std::io::Error::other)?;
            let st = rustix::fs::statat(base, &path, AtFlags::SYMLINK_NOFOLLOW)?;
            if let Some(id) = self.entry(name.as_ref(), &st)? {
                self.check_depth(true)?;
                self.descend(base, &path, &id)?;
            }
        }
        Ok(())
    }

    /// Whether `name`, in the directory being read, is left out.
    fn skipped(&mut self, name: &std::ffi::OsStr) -> bool {
        self.path.push(name);
        let skip = (self.skip)(&self.path);
        self.path.pop();
        skip
    }

    /// `name`'s entry, from its stat; its identity where it is a directory
    /// to go down into.
    fn entry(
        &mut self,
        name: &std::ffi::OsStr,
        st: &rustix::fs::Stat,
    ) -> std::io::Result<Option<FileIdentity>> {
        let mode = st.st_mode;
        let at = self.rel.len();
        if !self.rel.is_empty() {
            self.rel.push('/');
        }
        self.rel.push_str(&name.to_string_lossy());
        if mode & libc::S_IFMT == libc::S_IFLNK && !self.links {
            return Err(std::io::Error::other(format!(
                "{}: a symbolic link",
                self.path.join(name).display()
            )));
        }
        let id = FileIdentity::of_stat(st);
        self.entries.push(TreeEntry {
            rel: self.rel.clone(),
            mode,
            id,
        });
        self.rel.truncate(at);
        Ok((mode & libc::S_IFMT == libc::S_IFDIR).then_some(id))
    }

    fn check_depth(&self, deeper: bool) -> std::io::Result<()> {
        if deeper && self.depth == MAX_TREE_DEPTH {
            return Err(std::io::Error::other(format!(
                "{}: more than {MAX_TREE_DEPTH} directories deep",
                self.path.display()
            )));
        }
        Ok(())
    }

    /// Into the directory `path` (from `base`), stat'ed as `id`: listed
    /// again, or as the earlier walk listed it where it did not change.
    fn descend(
        &mut self,
        base: std::os::fd::BorrowedFd<'_>,
        path: &std::ffi::CStr,
        id: &FileIdentity,
    ) -> std::io::Result<()> {
        use rustix::fs::{Mode, OFlags};
        use std::os::unix::ffi::OsStrExt;
        let bytes = path.to_bytes();
        let name = bytes.rsplit(|b| *b == b'/').next().unwrap_or(bytes);
        let os_name = std::ffi::OsStr::from_bytes(name);
        let at = self.rel.len();
        if !self.rel.is_empty() {
            self.rel.push('/');
        }
        self.rel.push_str(&os_name.to_string_lossy());
        self.path.push(os_name);
        self.depth += 1;
        let read = match self.listed_before(id) {
            Some(names) => self.read_as_before(base, path, names),
            // Not followed: a directory swapped for a link since it was
            // stat'ed is an error, not another tree. (Only its last name:
            // the names above it, where they were not listed again, are
            // resolved as paths, see `tree_entries_since`.)
            None => {
                let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                rustix::fs::openat(base, path, flags, Mode::empty())
                    .map_err(std::io::Error::from)
                    .and_then(|sub| self.read(sub))
            }
        };
        self.depth -= 1;
        self.path.pop();
        self.rel.truncate(at);
        read
    }

    /// The names the earlier walk found in the directory at `rel`, where
    /// it is the same directory, unchanged since (`now`) and not changed
    /// in the racy window before that walk.
    fn listed_before(&self, now: &FileIdentity) -> Option<Vec<&'a str>> {
        let before = self.before?;
        let lossy = |s: &str| s.contains(char::REPLACEMENT_CHARACTER);
        if lossy(&self.rel) {
            return None;
        }
        let entries = before.entries;
        let i = entries
            .binary_search_by(|e| e.rel.as_str().cmp(&self.rel))
            .ok()?;
        let then = &entries[i];
        if !then.is_dir() || then.id != *now || now.changed_since(before.taken, RACY) {
            return None;
        }
        let prefix = format!("{}/", self.rel);
        let from = entries.partition_point(|e| e.rel.as_str() < prefix.as_str());
        let mut names = Vec::new();
        for e in &entries[from..] {
            let Some(rest) = e.rel.strip_prefix(&prefix) else {
                break;
            };
            if rest.contains('/') {
                continue;
            }
            // Only a plain name: a damaged or hand-made walk naming `..`
            // would lead the stats (and what acts on them) out of the tree.
            if matches!(rest, "" | "." | "..") || lossy(rest) {
                return None;
            }
            names.push(rest);
        }
        Some(names)
    }
}

/// How long before a walk a directory's change must be for the walk to
/// stand for its names ([`tree_entries_since`]).
const RACY: std::time::Duration = std::time::Duration::from_secs(2);

/// What says a file is the one seen before, without reading it: device,
/// inode, size, modification time and change time, to the nanosecond. The
/// change time is what a user cannot set back (`touch -d` sets only the
/// modification time); files debforge hard-links into each new pool get a
/// new change time from the link alone, so their check leaves it out
/// ([`FileIdentity::same_bytes_ignoring_links`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileIdentity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    /// Hard links (0 in records written before it was kept).
    #[serde(default)]
    nlink: u64,
}

impl FileIdentity {
    /// From `fstatat`'s answer: the same fields as [`FileIdentity::of`]
    /// gives from the standard library's `statx` (the device number as
    /// `makedev` encodes it: the kernel's own encoding).
    // The stat's field types differ by architecture (`as` is a no-op on x86_64).
    #[allow(clippy::unnecessary_cast)]
    pub fn of_stat(st: &rustix::fs::Stat) -> FileIdentity {
        FileIdentity {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            size: st.st_size as u64,
            mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
            nlink: st.st_nlink as u64,
        }
    }

    pub fn of(meta: &fs::Metadata) -> FileIdentity {
        use std::os::unix::fs::MetadataExt;
        FileIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            nlink: meta.nlink(),
        }
    }

    /// The same inode, untouched since (nothing about it changed).
    pub fn unchanged(&self, now: &FileIdentity) -> bool {
        self == now
    }

    /// The same inode with the same size and modification time, and a
    /// change time that moved only with its link count (a hard link added
    /// or removed). Bytes rewritten with the size and modification time put
    /// back (`touch -d`, `cp -p`) move the change time alone: not the same.
    pub fn same_bytes_ignoring_links(&self, now: &FileIdentity) -> bool {
        // A record without a link count (older) trusts no new change time.
        (self.dev, self.ino, self.size, self.mtime) == (now.dev, now.ino, now.size, now.mtime)
            && (self.ctime == now.ctime || (self.nlink != 0 && self.nlink != now.nlink))
    }

    /// Whether this identity, taken of a file just renamed into place
    /// ([`Wrote`]), can stand for the bytes written: only where the file's
    /// last write (its modification time) came in an earlier clock tick
    /// than its rename (its change time). A write into it by another
    /// process after the rename sets both times to one tick, and so does a
    /// new file made under the name (even on an inode number used again):
    /// file times are coarse (a few milliseconds on kernels without
    /// multigrain timestamps), and such a write in the rename's own tick
    /// leaves an identity equal to this one.
    pub fn written_before_renamed(&self) -> bool {
        self.mtime < self.ctime
    }

    /// The same inode, size and modification time (the change time and
    /// link count aside).
    pub fn same_inode_bytes(&self, now: &FileIdentity) -> bool {
        (self.dev, self.ino, self.size, self.mtime) == (now.dev, now.ino, now.size, now.mtime)
    }

    /// Whether the file changed (its bytes or its inode) at `since` or
    /// later, or within `window` before (file times are coarser than the
    /// clock: a change just after a stat may carry a time from before it):
    /// its identity then proves no later change, as git's index calls such
    /// entries racy.
    pub fn changed_since(&self, since: std::time::SystemTime, window: std::time::Duration) -> bool {
        let latest = self.mtime.max(self.ctime);
        let Ok(at) = since
            .checked_sub(window)
            .unwrap_or(std::time::UNIX_EPOCH)
            .duration_since(std::time::UNIX_EPOCH)
        else {
            return true;
        };
        latest >= (at.as_secs() as i64, i64::from(at.subsec_nanos()))
    }

    /// Every field, as bytes to hash (a stamp's key; not a format kept
    /// apart from the stamp that holds it).
    pub fn to_bytes(&self) -> [u8; 64] {
        let fields = [
            self.dev,
            self.ino,
            self.size,
            self.mtime.0 as u64,
            self.mtime.1 as u64,
            self.ctime.0 as u64,
            self.ctime.1 as u64,
            self.nlink,
        ];
        let mut out = [0; 64];
        for (chunk, f) in out.chunks_exact_mut(8).zip(fields) {
            chunk.copy_from_slice(&f.to_le_bytes());
        }
        out
    }

    /// The identity [`FileIdentity::to_bytes`] gave (what a build spilled
    /// to its own temporary file, [`SpillFile`]).
    pub fn from_bytes(bytes: &[u8; 64]) -> FileIdentity {
        let mut fields = bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("eight bytes")));
        let mut next = || fields.next().expect("eight fields");
        FileIdentity {
            dev: next(),
            ino: next(),
            size: next(),
            mtime: (next() as i64, next() as i64),
            ctime: (next() as i64, next() as i64),
            nlink: next(),
        }
    }

    pub fn dev(&self) -> u64 {
        self.dev
    }

    pub fn ino(&self) -> u64 {
        self.ino
    }

    /// `dev-ino`: where a record of the file is kept.
    pub fn key(&self) -> String {
        format!("{}-{}", self.dev, self.ino)
    }
}

/// An unlinked temporary file a build appends to and reads back: what it
/// would otherwise hold of every package from one stage to a later one
/// (a control paragraph, a path and an identity), kept on disk with only
/// where each one is in memory. Gone with the process, whatever happens.
/// Appends are buffered: one write per [`SPILL_BUFFERED`] bytes, not one
/// per package. After a failed write every use fails: the file's end is
/// no longer known.
pub struct SpillFile {
    /// Shared with the [`WrittenSpan`]s read outside the spill's owner.
    file: std::sync::Arc<fs::File>,
    /// Bytes in the file; `pending` follows them.
    written: u64,
    pending: Vec<u8>,
    failed: bool,
}

/// Bytes appended to a [`SpillFile`] before they are written.
pub const SPILL_BUFFERED: usize = 64 * 1024;

impl SpillFile {
    /// Made in `dir` where it is a directory (beside the cache it serves),
    /// else in the system's temporary directory.
    pub fn new(dir: Option<&Path>) -> std::io::Result<SpillFile> {
        let file = match dir {
            Some(dir) if dir.is_dir() => {
                tempfile::tempfile_in(dir).or_else(|_| tempfile::tempfile())
            }
            _ => tempfile::tempfile(),
        }?;
        Ok(SpillFile {
            file: std::sync::Arc::new(file),
            written: 0,
            pending: Vec::new(),
            failed: false,
        })
    }

    /// Appends `bytes`, and says where they begin.
    pub fn append(&mut self, bytes: &[u8]) -> std::io::Result<u64> {
        self.usable()?;
        let at = self.len();
        if self.pending.capacity() == 0 {
            self.pending.reserve_exact(SPILL_BUFFERED);
        }
        self.pending.extend_from_slice(bytes);
        if self.pending.len() >= SPILL_BUFFERED {
            self.flush()?;
        }
        Ok(at)
    }

    /// Every byte appended.
    pub fn len(&self) -> u64 {
        self.written + self.pending.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The pending bytes written, and their buffer let go (made again, in
    /// the appending thread's memory, by the next append).
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.usable()?;
        if !self.pending.is_empty() {
            // A write cut short leaves the file's end unknown.
            self.failed = true;
            (&*self.file).write_all(&self.pending)?;
            self.failed = false;
            self.written += self.pending.len() as u64;
        }
        self.pending = Vec::new();
        Ok(())
    }

    fn usable(&self) -> std::io::Result<()> {
        match self.failed {
            true => Err(std::io::Error::other(
                "an earlier write to the spill file failed",
            )),
            false => Ok(()),
        }
    }

    /// `buf.len()` bytes from `at`, written or still pending.
    pub fn read_exact_at(&self, buf: &mut [u8], at: u64) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.usable()?;
        let in_file = (self.written.saturating_sub(at) as usize).min(buf.len());
        let (from_file, from_pending) = buf.split_at_mut(in_file);
        self.file.read_exact_at(from_file, at)?;
        if from_pending.is_empty() {
            return Ok(());
        }
        // Past the written bytes: `at + in_file` is where they end, or after.
        let start = (at + in_file as u64 - self.written) as usize;
        let pending = self
            .pending
            .get(start..start + from_pending.len())
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))?;
        from_pending.copy_from_slice(pending);
        Ok(())
    }

    /// `len` bytes from `at`, where all of them are written (none pending):
    /// to be read with no hold on the spill, so that threads that share it
    /// behind a lock do not wait on each other's reads.
    pub fn written_span(&self, at: u64, len: usize) -> Option<WrittenSpan> {
        let end = at.checked_add(len as u64)?;
        (!self.failed && end <= self.written).then(|| WrittenSpan {
            file: std::sync::Arc::clone(&self.file),
            at,
            len,
        })
    }

    /// Everything appended, in order from the start, read in blocks.
    pub fn reader(&self) -> impl std::io::Read + '_ {
        std::io::BufReader::with_capacity(SPILL_BUFFERED, SpillReader { spill: self, at: 0 })
    }
}

/// Bytes of a [`SpillFile`] already in its file (which stays open for
/// them, the spill gone or not).
pub struct WrittenSpan {
    file: std::sync::Arc<fs::File>,
    at: u64,
    len: usize,
}

impl WrittenSpan {
    pub fn read(&self) -> std::io::Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0; self.len];
        self.file.read_exact_at(&mut buf, self.at)?;
        Ok(buf)
    }
}

/// [`SpillFile::reader`] before its buffer.
struct SpillReader<'s> {
    spill: &'s SpillFile,
    at: u64,
}

impl std::io::Read for SpillReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (self.spill.len().saturating_sub(self.at) as usize).min(buf.len());
        self.spill.read_exact_at(&mut buf[..n], self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What was appended comes back from `at` whether written or still
    /// buffered, across the two and across the buffer's end; the reader
    /// gives every byte in order; the file is unlinked; an identity goes
    /// through its bytes and back.
    #[test]
    fn a_spill_gives_back_what_was_appended_written_or_buffered() {
        use std::io::Read;
        let dir = tempfile::tempdir().unwrap();
        let mut spill = SpillFile::new(Some(dir.path())).unwrap();
        let record = |n: usize| format!("{n}:").repeat(n % 97 + 1);
        let mut all = Vec::new();
        let mut at = Vec::new();
        for n in 0..3_000 {
            at.push(spill.append(record(n).as_bytes()).unwrap());
            all.extend_from_slice(record(n).as_bytes());
        }
        assert_eq!(spill.len(), all.len() as u64);
        assert!(spill.written > 0 && !spill.pending.is_empty());
        for n in [0, 1, 1_500, 2_998, 2_999] {
            let mut buf = vec![0; record(n).len()];
            spill.read_exact_at(&mut buf, at[n]).unwrap();
            assert_eq!(buf, record(n).as_bytes());
        }
        // Across the written bytes' end.
        let w = spill.written as usize;
        let mut buf = vec![0; 100];
        spill.read_exact_at(&mut buf, (w - 50) as u64).unwrap();
        assert_eq!(buf, all[w - 50..w + 50]);
        assert!(
            spill
                .read_exact_at(&mut buf, all.len() as u64 - 99)
                .is_err()
        );
        let mut read = Vec::new();
        spill.reader().read_to_end(&mut read).unwrap();
        assert_eq!(read, all);
        spill.flush().unwrap();
        assert_eq!(
            (spill.written, spill.pending.capacity()),
            (all.len() as u64, 0)
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let id = FileIdentity::of(&std::fs::metadata(dir.path()).unwrap());
        assert_eq!(FileIdentity::from_bytes(&id.to_bytes()), id);
        // A write that fails (the file made read-only underneath) leaves
        // the spill refusing every use, not giving other bytes.
        let mut broken = SpillFile::new(Some(dir.path())).unwrap();
        broken.file = std::fs::File::open(dir.path()).unwrap().into();
        broken.append(&[1; SPILL_BUFFERED - 1]).unwrap();
        assert!(broken.append(&[2; 2]).is_err());
        assert!(broken.append(b"x").is_err());
        assert!(broken.read_exact_at(&mut [0; 1], 0).is_err());
    }

    #[test]
    fn a_tree_is_removed_whole_without_following_links_or_a_frame_per_level() {
        let dir = tempfile::tempdir().unwrap();
        let (tree, outside) = (dir.path().join("tree"), dir.path().join("outside"));
        fs::create_dir_all(tree.join("a/b/c")).unwrap();
        fs::create_dir_all(tree.join(".debforge-removing-0/x")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("kept"), b"k").unwrap();
        fs::write(tree.join("a/b/c/f"), b"f").unwrap();
        fs::write(tree.join("a/g"), b"g").unwrap();
        std::os::unix::fs::symlink(&outside, tree.join("a/b/link")).unwrap();
        std::os::unix::fs::symlink(&outside, tree.join("toplink")).unwrap();
        // 20,000 levels, made relative to each parent.
        {
            use rustix::fs::{Mode, OFlags};
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
            let mut d = rustix::fs::open(&tree, flags, Mode::empty()).unwrap();
            rustix::fs::mkdirat(&d, "deep", Mode::from_raw_mode(0o755)).unwrap();
            d = rustix::fs::openat(&d, "deep", flags, Mode::empty()).unwrap();
            for _ in 0..20_000 {
                rustix::fs::mkdirat(&d, "d", Mode::from_raw_mode(0o755)).unwrap();
                d = rustix::fs::openat(&d, "d", flags, Mode::empty()).unwrap();
            }
            rustix::fs::openat(
                &d,
                "leaf",
                OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o644),
            )
            .unwrap();
        }
        // On a 64 KiB stack: a frame per level would overflow it.
        let t = tree.clone();
        std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(move || remove_tree(&t).unwrap())
            .unwrap()
            .join()
            .unwrap();
        assert!(!tree.exists());
        assert_eq!(fs::read(outside.join("kept")).unwrap(), b"k");
        // A link or a file is removed itself; nothing there is an error.
        std::os::unix::fs::symlink(&outside, dir.path().join("l")).unwrap();
        remove_tree(dir.path().join("l")).unwrap();
        assert!(outside.join("kept").exists());
        assert_eq!(
            remove_tree(dir.path().join("l")).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
    }

    #[test]
    fn atomic_writes_replace_or_keep_and_leave_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a/b/file");
        write_atomic(&p, b"one", Existing::Replace).unwrap();
        write_atomic(&p, b"two", Existing::Replace).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert!(write_atomic(&p, b"three", Existing::Keep).is_err());
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o644
        );
        assert_eq!(sorted_files(dir.path()).unwrap(), vec!["a/b/file"]);
    }

    #[test]
    fn siblings_and_sorted_walks() {
        assert_eq!(
            beside(Path::new("repo-out"), "lock"),
            Path::new("./.repo-out.lock")
        );
        assert_eq!(
            beside(Path::new("/x/out"), "stamp"),
            Path::new("/x/.out.stamp")
        );
        let dir = tempfile::tempdir().unwrap();
        for f in ["b/2", "a/1", "a/10", "c"] {
            let p = dir.path().join(f);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, b"").unwrap();
        }
        std::os::unix::fs::symlink("/etc", dir.path().join("d")).unwrap();
        assert_eq!(
            sorted_files(dir.path()).unwrap(),
            ["a/1", "a/10", "b/2", "c"]
        );
    }

    /// The digest as walkdir's walk gives it: every entry's line, sorted.
    fn digest_by_walkdir(root: &Path, skip: &Skip<'_>) -> String {
        let mut lines = Vec::new();
        for e in walkdir::WalkDir::new(root).min_depth(1) {
            let e = e.unwrap();
            if skip(e.path()) {
                continue;
            }
            let m = e.path().symlink_metadata().unwrap();
            let rel = e.path().strip_prefix(root).unwrap().to_string_lossy();
            let mut line = String::new();
            write_entry_line(&mut line, &TreeEntry::of(rel.into_owned(), &m));
            lines.push(line);
        }
        lines.sort_unstable();
        let mut h = crate::digest::KeyHasher::new();
        for l in &lines {
            h.update(l);
        }
        h.finish_hex()
    }

    #[test]
    fn a_tree_digest_is_the_sorted_walk_and_sees_changes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for i in 0..300 {
            let p = root.join(format!("pool/main/p/pkg{i:03}/pkg{i:03}_1_all.deb"));
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, i.to_string()).unwrap();
        }
        fs::create_dir_all(root.join("dists/s/main/binary-all")).unwrap();
        fs::write(root.join("dists/s/Release"), b"r").unwrap();
        let none = |_: &Path| false;
        let first = tree_digest(root, &none).unwrap();
        assert_eq!(first, digest_by_walkdir(root, &none));
        for _ in 0..5 {
            assert_eq!(tree_digest(root, &none).unwrap(), first);
        }
        // Skipped subtrees are left out as the walk leaves them out.
        let dists = root.join("dists");
        let skip = |p: &Path| p == dists;
        assert_eq!(
            tree_digest(root, &skip).unwrap(),
            digest_by_walkdir(root, &|p: &Path| p.starts_with(&dists))
        );
        // One file deep in the pool changes: the digest does.
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(root.join("pool/main/p/pkg150/pkg150_1_all.deb"), b"x").unwrap();
        assert_ne!(tree_digest(root, &none).unwrap(), first);
        // A link deep in the tree is an error without links.
        std::os::unix::fs::symlink("/etc", root.join("pool/main/p/pkg299/l")).unwrap();
        assert!(tree_digest(root, &none).is_ok());
        let e = tree_digest_without_links(root, &none).unwrap_err();
        assert!(e.to_string().contains("pkg299/l: a symbolic link"), "{e}");
        // A walk whose reading panics (here in `skip`, deep in the tree)
        // panics; it never waits for ever.
        let (tx, rx) = std::sync::mpsc::channel();
        let tree = root.to_path_buf();
        std::thread::spawn(move || {
            let deep = |p: &Path| p.ends_with("pkg200") && panic!("a skip that panics");
            let r = std::panic::catch_unwind(|| tree_digest(&tree, &deep));
            let _ = tx.send(r.is_err());
        });
        let panicked = rx.recv_timeout(std::time::Duration::from_secs(20));
        assert_eq!(panicked, Ok(true), "the walk ends, as a panic");
        // An unreadable directory is an error, and the walk ends.
        let locked = root.join("pool/main/p/pkg007");
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
        let unreadable = fs::read_dir(&locked).is_err();
        let r = tree_digest(root, &none);
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o755)).unwrap();
        if unreadable {
            assert!(r.is_err());
        }
    }

    /// A cache file of many blocks reads back as written; one byte
    /// changed anywhere, it is no cache.
    #[test]
    fn a_cache_file_reads_back_whole_and_a_changed_byte_makes_it_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cache");
        let value: Vec<(u64, String)> = (0..40_000u64)
            .map(|i| (i * 7919 % 100_003, format!("entry {i}")))
            .collect();
        write_cache(&path, b"dftest\0\0", 1, &value).unwrap();
        let len = fs::metadata(&path).unwrap().len();
        assert!(
            len > 4 * SUMMED_BLOCK as u64,
            "{len} bytes: more than a block"
        );
        let read = |path: &Path| {
            let bytes = crate::input::read_cache(path, 1 << 30, b"dftest\0\0", 1)?;
            postcard::from_bytes::<Vec<(u64, String)>>(&bytes).ok()
        };
        assert_eq!(read(&path).as_ref(), Some(&value));
        let mut bytes = fs::read(&path).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 1;
        fs::write(&path, bytes).unwrap();
        assert_eq!(read(&path), None);
    }

    /// A walk since an earlier one lists only the directories that
    /// changed, or changed within the racy window before it, and gives
    /// what a fresh walk gives; a name gone from a directory that did not
    /// change is an error.
    #[test]
    fn a_walk_since_an_earlier_one_lists_only_what_changed_since() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in ["pool/a/alpha", "pool/b/beta", "pool/e"] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        fs::write(root.join("pool/a/alpha/alpha.deb"), b"a").unwrap();
        fs::write(root.join("pool/b/beta/beta.deb"), b"b").unwrap();
        fs::write(root.join("top"), b"t").unwrap();
        std::os::unix::fs::symlink("b", root.join("pool/link")).unwrap();
        let sorted = |mut e: Vec<TreeEntry>| {
            e.sort_by(|a, b| a.rel.cmp(&b.rel));
            e
        };
        let lines = |e: &[TreeEntry]| {
            e.iter()
                .map(|e| {
                    let mut l = String::new();
                    write_entry_line(&mut l, e);
                    l
                })
                .collect::<Vec<_>>()
        };
        let before = sorted(tree_entries(root, &|_| false).unwrap());
        // Its directories changed long before it (as far as the rule goes).
        let long_after = std::time::SystemTime::now() + std::time::Duration::from_secs(3);
        let since = |entries: &[TreeEntry], taken| {
            let before = WalkedBefore { entries, taken };
            tree_entries_since(root, &|_| false, &before).map(sorted)
        };
        // Changes since: a file rewritten in place (its directory did not
        // change), a name added to one directory.
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(root.join("pool/a/alpha/alpha.deb"), b"a2").unwrap();
        fs::write(root.join("pool/b/beta/beta.udeb"), b"u").unwrap();
        let fresh = sorted(tree_entries(root, &|_| false).unwrap());
        assert_eq!(lines(&since(&before, long_after).unwrap()), lines(&fresh));
        // The earlier walk's names stand for an unchanged directory: one it
        // did not list is not seen, one it listed that is gone is an error.
        let mut forgot = sorted(tree_entries(root, &|_| false).unwrap());
        forgot.retain(|e| e.rel != "pool/a/alpha/alpha.deb");
        let walked = since(&forgot, long_after).unwrap();
        assert_eq!(walked.len(), fresh.len() - 1);
        let mut ghost = sorted(tree_entries(root, &|_| false).unwrap());
        let mut g = TreeEntry {
            rel: "pool/a/alpha/ghost".into(),
            mode: ghost[0].mode,
            id: ghost[0].id,
        };
        g.mode = libc::S_IFREG | 0o644;
        ghost.push(g);
        let ghost = sorted(ghost);
        assert!(since(&ghost, long_after).is_err());
        // A name that is no plain name (a damaged or hand-made walk) is
        // never followed out of its directory: that directory is listed.
        let mut out_of_it = sorted(tree_entries(root, &|_| false).unwrap());
        out_of_it.retain(|e| e.rel != "pool/a/alpha/alpha.deb");
        out_of_it.push(TreeEntry {
            rel: "pool/a/alpha/..".into(),
            mode: libc::S_IFDIR | 0o755,
            id: out_of_it[0].id,
        });
        let out_of_it = sorted(out_of_it);
        assert_eq!(
            lines(&since(&out_of_it, long_after).unwrap()),
            lines(&fresh)
        );
        // Within the racy window before the earlier walk, every directory
        // is listed again: the same forgetful walk sees everything.
        let now = std::time::SystemTime::now();
        assert_eq!(lines(&since(&forgot, now).unwrap()), lines(&fresh));
        assert!(since(&ghost, now).is_ok());
    }

    #[test]
    fn a_walk_sees_what_the_standard_library_stats() {
        // The walk's own stats (relative to each directory) against
        // `symlink_metadata` of each whole path: a stamp compares
        // identities taken both ways (the records' and the walk's).
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("pool/main/a/alpha")).unwrap();
        fs::create_dir_all(root.join("dists/x")).unwrap();
        fs::write(root.join("pool/main/a/alpha/alpha_1_all.deb"), b"deb").unwrap();
        fs::write(root.join("dists/x/Release"), b"Suite: x\n").unwrap();
        fs::hard_link(root.join("dists/x/Release"), root.join("dists/linked")).unwrap();
        std::os::unix::fs::symlink("x/Release", root.join("dists/link")).unwrap();
        let mut walked: Vec<(String, u32, FileIdentity)> = tree_entries(root, &|_| false)
            .unwrap()
            .into_iter()
            .map(|e| (e.rel, e.mode, e.id))
            .collect();
        walked.sort_by(|a, b| a.0.cmp(&b.0));
        let mut expected = Vec::new();
        for e in walkdir::WalkDir::new(root).min_depth(1) {
            let e = e.unwrap();
            let m = fs::symlink_metadata(e.path()).unwrap();
            let rel = e
                .path()
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            expected.push((
                rel,
                std::os::unix::fs::MetadataExt::mode(&m),
                FileIdentity::of(&m),
            ));
        }
        expected.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(walked.len(), 10, "{walked:?}");
        assert_eq!(walked, expected);
        // Only the root is followed where it is a link; a link inside is an
        // entry, never walked into.
        let outside = tempfile::tempdir().unwrap();
        let via = outside.path().join("via");
        std::os::unix::fs::symlink(root, &via).unwrap();
        assert_eq!(
            tree_digest(&via, &|_| false).unwrap(),
            tree_digest(root, &|_| false).unwrap()
        );
        std::os::unix::fs::symlink(root.join("pool"), root.join("dists/pool")).unwrap();
        assert_eq!(tree_entries(root, &|_| false).unwrap().len(), 11);
    }

    #[test]
    fn a_hard_link_changes_the_identity_but_not_the_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pool.deb");
        fs::write(&p, b"bytes").unwrap();
        let before = FileIdentity::of(&fs::metadata(&p).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::hard_link(&p, dir.path().join("link.deb")).unwrap();
        let after = FileIdentity::of(&fs::metadata(&p).unwrap());
        assert!(!before.unchanged(&after), "a new link changes the ctime");
        assert!(before.same_bytes_ignoring_links(&after));
        assert_eq!(before.key(), after.key());
        fs::write(&p, b"other").unwrap();
        let written = FileIdentity::of(&fs::metadata(&p).unwrap());
        assert!(!before.same_bytes_ignoring_links(&written));
        // Other bytes of the same size, the modification time put back.
        let mtime = fs::metadata(&p).unwrap().modified().unwrap();
        let id = FileIdentity::of(&fs::metadata(&p).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(&p, b"OTHER").unwrap();
        fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let put_back = FileIdentity::of(&fs::metadata(&p).unwrap());
        assert_eq!(put_back.mtime, id.mtime);
        assert!(!id.same_bytes_ignoring_links(&put_back));
    }

    #[test]
    fn a_file_that_holds_the_bytes_already_is_left_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let write = |text: &[u8]| {
            let mut w = |w: &mut dyn std::io::Write| {
                // In pieces, as a lock is written.
                for piece in text.chunks(3) {
                    w.write_all(piece)?;
                }
                Ok(())
            };
            let mut old = std::fs::File::open(&path).ok();
            super::write_atomic_unless_same(&path, old.as_mut(), &mut w)
        };
        let wrote = write(b"hello world").unwrap();
        let identity = |p: &Path| super::FileIdentity::of(&std::fs::metadata(p).unwrap());
        let (file, directory) = (identity(&path), identity(dir.path()));
        // The identity of the file as renamed into place.
        assert_eq!(wrote.and_then(|w| w.identity), Some(file));
        assert_eq!(write(b"hello world").unwrap(), None);
        // Nothing made, not even a temporary file: the directory's times
        // did not move (it may be read-only; the build stamp watches it).
        assert_eq!(identity(&path), file);
        assert_eq!(identity(dir.path()), directory);
        // Longer, shorter, or other bytes: replaced.
        for text in [&b"hello world!"[..], b"hello worl", b"hello_world"] {
            let wrote = write(text).unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), text);
            assert_eq!(wrote.and_then(|w| w.identity), Some(identity(&path)));
        }
        // Only the file is in the directory: no temporary file left.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        // None there: written.
        std::fs::remove_file(&path).unwrap();
        assert!(write(b"hello world").unwrap().is_some());
        // Bytes that differ after a long same start (more than a read
        // buffer of it): the start is copied from the old file.
        let long: Vec<u8> = (0..100_000u32).flat_map(|i| i.to_le_bytes()).collect();
        assert!(write(&long).unwrap().is_some());
        let mut other = long.clone();
        other[300_000] ^= 1;
        assert!(write(&other).unwrap().is_some());
        assert_eq!(std::fs::read(&path).unwrap(), other);
    }

    #[test]
    fn a_file_rewritten_in_place_while_it_is_compared_is_an_error_not_mixed_in() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"hello world").unwrap();
        let mut old = std::fs::File::open(&path).ok();
        let mut w = |w: &mut dyn std::io::Write| {
            w.write_all(b"hello ")?;
            // The same inode, other bytes (an editor saving in place).
            std::fs::write(&path, b"HELLO world")?;
            w.write_all(b"there")
        };
        let e = super::write_atomic_unless_same(&path, old.as_mut(), &mut w).unwrap_err();
        assert!(e.to_string().contains("changed while it was read"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), b"HELLO world");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
