//! Indexing a pool: one `Packages` stanza per `.deb`, streamed in path order,
//! with a cache so that an unchanged file is never read again and a changed
//! one always is.
//!
//! The cache of a tree is one file: the previous run's records, in the walk's
//! order (depth first, names sorted per directory, which is `Path`'s
//! component-wise order). Each record holds a file's identity (device,
//! inode, size, modification and change times in nanoseconds) and its
//! finished stanza. A run walks the tree and the old cache side by side (a
//! merge, so memory stays flat in the number of packages), takes a record
//! whose path and identity match, reads every other file, and writes the new
//! cache next to the old one, renamed into place at the end. Any write to a
//! file moves its change time, which no user can set: a changed file always
//! misses.

use std::cmp::Ordering;
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::deb::{DebError, DebFile};
use crate::digest::{DigestSet, Digests, Hasher, digest_with};
use crate::format::packages::write_stanza;

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error(transparent)]
    Io(#[from] crate::error::FileError),
    #[error("{0}")]
    Deb(#[from] DebError),
    #[error(
        "{}: the file name is not UTF-8; debforge writes Packages indexes as text and cannot name it there: rename it (e.g. `convmv` or `mv`)",
        crate::error::ShortPath(path)
    )]
    NotUtf8Name { path: PathBuf },
}

/// One indexed package file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedDeb {
    /// Relative to the repository root, e.g. `pool/main/libn/libnccl2/…deb`.
    pub filename: String,
    pub architecture: String,
    /// The finished Packages stanza, ending with a newline.
    pub stanza: String,
    pub digests: Digests,
}

/// Counts of what an indexing run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IndexStats {
    pub read: usize,
    pub cached: usize,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Record {
    path: String,
    id: crate::files::FileIdentity,
    arch: String,
    stanza: String,
    digests: Digests,
}

impl Record {
    fn into_deb(self) -> IndexedDeb {
        IndexedDeb {
            filename: self.path,
            architecture: self.arch,
            stanza: self.stanza,
            digests: self.digests,
        }
    }

    fn from_deb(d: &IndexedDeb, id: crate::files::FileIdentity) -> Record {
        Record {
            path: d.filename.clone(),
            id,
            arch: d.architecture.clone(),
            stanza: d.stanza.clone(),
            digests: d.digests.clone(),
        }
    }
}

/// Bumped whenever `format::packages::stanza` renders differently or a
/// record changes shape (3: `FileIdentity`; 4: SHA256 alone).
const STANZA_FORMAT: u32 = 4;

/// Where index caches live; `None` disables caching.
pub struct IndexCache {
    dir: Option<PathBuf>,
}

impl IndexCache {
    pub fn new(dir: Option<PathBuf>) -> IndexCache {
        IndexCache { dir }
    }

    fn file_for(&self, root: &Path, sub: &str) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        let abs = std::path::absolute(root.join(sub)).unwrap_or_else(|_| root.join(sub));
        // The stanza format is part of the name: a cache written by a
        // debforge that rendered stanzas differently is never read.
        let mut key = format!("stanza-v{STANZA_FORMAT}\0").into_bytes();
        key.extend_from_slice(abs.as_os_str().as_encoded_bytes());
        let h = crate::digest::sha256_hex(&key);
        Some(dir.join(format!("{}.jsonl", &h[..32])))
    }
}

/// Reads a package file: its control paragraph and digests, into a stanza.
pub fn read_deb(file: &Path, filename: &str) -> Result<IndexedDeb, IndexError> {
    let deb = DebFile::open(file)?;
    let control = deb.control_files()?.control;
    deb.check_data()?;
    let digests =
        digest_with(deb.raw_whole(), Hasher::new(DigestSet::SHA256)).map_err(|source| {
            IndexError::Io(crate::error::FileError {
                path: file.to_path_buf(),
                source,
            })
        })?;
    Ok(IndexedDeb {
        filename: filename.to_string(),
        architecture: control.get("Architecture").unwrap_or_default().to_string(),
        stanza: {
            let mut text = String::new();
            write_stanza(&control, filename, &digests, &mut text);
            text
        },
        digests,
    })
}

/// Every `.deb` under `root/sub`, as paths relative to `root`, in walk order.
pub fn walk_debs<E: From<IndexError>>(
    root: &Path,
    sub: &str,
    visit: &mut dyn FnMut(&Path, &str) -> Result<(), E>,
) -> Result<(), E> {
    let start = root.join(sub);
    // A missing root has no packages; a missing `sub` is an error.
    if sub.is_empty() && !root.exists() {
        return Ok(());
    }
    for entry in walkdir::WalkDir::new(&start).sort_by_file_name() {
        let entry = entry.map_err(|e| IndexError::Io(crate::error::walk_file_error(e, &start)))?;
        let is_dir = entry.file_type().is_dir();
        let bytes = entry.file_name().as_encoded_bytes();
        if entry.depth() == 0 || !(is_dir || bytes.ends_with(b".deb")) {
            continue;
        }
        // Only what would be indexed matters; say so instead of failing to
        // open a mangled name.
        if entry.file_name().to_str().is_none() {
            return Err(IndexError::NotUtf8Name {
                path: entry.path().to_path_buf(),
            }
            .into());
        }
        if !is_dir {
            let rel = entry.path().strip_prefix(root).unwrap_or(entry.path());
            visit(entry.path(), &rel.to_string_lossy())?;
        }
    }
    Ok(())
}

/// The previous run's records, read one at a time.
struct OldCache {
    lines: Option<io::Lines<BufReader<File>>>,
    next: Option<Record>,
}

impl OldCache {
    fn open(path: Option<&Path>) -> OldCache {
        let lines = path
            .and_then(|p| crate::input::open_regular(p).ok())
            .map(|f| BufReader::new(f).lines());
        let mut c = OldCache { lines, next: None };
        c.advance();
        c
    }

    fn advance(&mut self) {
        self.next = None;
        let Some(lines) = &mut self.lines else { return };
        for line in lines.by_ref() {
            // A torn or foreign line is skipped: its file is simply re-read.
            if let Ok(r) = line
                .map_err(|_| ())
                .and_then(|l| serde_json::from_str::<Record>(&l).map_err(|_| ()))
            {
                self.next = Some(r);
                return;
            }
        }
    }

    /// The record for `rel` if it is still valid for `id`.
    fn take(&mut self, rel: &str, id: crate::files::FileIdentity) -> Option<IndexedDeb> {
        loop {
            let order = Path::new(&self.next.as_ref()?.path).cmp(Path::new(rel));
            match order {
                Ordering::Less => self.advance(),
                Ordering::Greater => return None,
                Ordering::Equal => {
                    let r = self.next.take().expect("peeked");
                    self.advance();
                    return r.id.unchanged(&id).then(|| r.into_deb());
                }
            }
        }
    }
}

/// The new cache being written, in a temporary file, and where it goes.
type NewCache = Option<(BufWriter<tempfile::NamedTempFile>, PathBuf)>;

/// A package file met in the walk, with its cached result if any.
struct Item {
    path: PathBuf,
    rel: String,
    id: crate::files::FileIdentity,
    hit: Option<IndexedDeb>,
}

/// Indexes every `.deb` under `root/sub` and hands the results to `emit` in
/// path order. Files the cache does not vouch for are read a batch at a time
/// on all cores; a batch is all that is held in memory.
pub fn index_tree<E: From<IndexError>>(
    cache: &IndexCache,
    root: &Path,
    sub: &str,
    stats: &mut IndexStats,
    emit: &mut dyn FnMut(&IndexedDeb) -> Result<(), E>,
) -> Result<(), E> {
    const BATCH: usize = 64;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    let cache_file = cache.file_for(root, sub);
    let mut old = OldCache::open(cache_file.as_deref());
    let mut new = open_new_cache(cache_file.as_deref());
    let mut batch: Vec<Item> = Vec::with_capacity(BATCH);
    walk_debs(root, sub, &mut |path, rel| -> Result<(), E> {
        batch.push(walk_item(path, rel, &mut old)?);
        if batch.len() == BATCH {
            flush_batch(&mut batch, threads, stats, &mut new, emit)?;
        }
        Ok(())
    })?;
    flush_batch(&mut batch, threads, stats, &mut new, emit)?;
    if let Some((w, target)) = new
        && let Ok(tmp) = w.into_inner()
    {
        let _ = tmp.persist(&target);
    }
    Ok(())
}

/// Opens a temporary file beside `cache_file` for the new cache, or `None`
/// if there is no cache or the file cannot be made.
fn open_new_cache(cache_file: Option<&Path>) -> NewCache {
    // The new cache is written beside the old and renamed at the end.
    let f = cache_file?;
    let dir = f.parent().expect("cache file in a directory");
    fs::create_dir_all(dir)
        .ok()
        .and_then(|_| tempfile::NamedTempFile::new_in(dir).ok())
        .map(|t| (BufWriter::new(t), f.to_path_buf()))
}

/// The item for a file the walk found: its identity, and the old cache's
/// record of it if that is still valid.
fn walk_item(path: &Path, rel: &str, old: &mut OldCache) -> Result<Item, IndexError> {
    let meta = fs::metadata(path).map_err(|source| {
        IndexError::Io(crate::error::FileError {
            path: path.to_path_buf(),
            source,
        })
    })?;
    let id = crate::files::FileIdentity::of(&meta);
    let hit = old.take(rel, id);
    Ok(Item {
        path: path.to_path_buf(),
        rel: rel.to_string(),
        id,
        hit,
    })
}

/// Reads the batch's cache misses, then writes each item to the new cache
/// and hands it to `emit`, in order, emptying the batch.
fn flush_batch<E: From<IndexError>>(
    batch: &mut Vec<Item>,
    threads: usize,
    stats: &mut IndexStats,
    new: &mut NewCache,
    emit: &mut dyn FnMut(&IndexedDeb) -> Result<(), E>,
) -> Result<(), E> {
    let misses: Vec<usize> = (0..batch.len())
        .filter(|&i| batch[i].hit.is_none())
        .collect();
    for (i, r) in read_misses(batch, &misses, threads) {
        batch[i].hit = Some(r?);
        stats.read += 1;
    }
    stats.cached += batch.len() - misses.len();
    for item in batch.drain(..) {
        let deb = item.hit.expect("every item indexed");
        write_record(new, &deb, item.id);
        emit(&deb)?;
    }
    Ok(())
}

/// Reads the items at `misses` on up to `threads` threads; each result
/// comes with its item's position, grouped by thread.
fn read_misses(
    items: &[Item],
    misses: &[usize],
    threads: usize,
) -> Vec<(usize, Result<IndexedDeb, IndexError>)> {
    let workers = threads.min(misses.len()).max(1);
    let read: Vec<Vec<(usize, Result<IndexedDeb, IndexError>)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|t| {
                scope.spawn(move || {
                    misses
                        .iter()
                        .skip(t)
                        .step_by(workers)
                        .map(|&i| (i, read_deb(&items[i].path, &items[i].rel)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("index worker"))
            .collect()
    });
    read.into_iter().flatten().collect()
}

/// Appends the record of `deb` to the new cache, dropping the new cache if
/// the write fails.
fn write_record(new: &mut NewCache, deb: &IndexedDeb, id: crate::files::FileIdentity) {
    if let Some((w, _)) = new.as_mut() {
        let line = serde_json::to_string(&Record::from_deb(deb, id)).expect("record serializes");
        if w.write_all(line.as_bytes())
            .and_then(|_| w.write_all(b"\n"))
            .is_err()
        {
            // A cache that cannot be written only costs time next run.
            *new = None;
        }
    }
}

impl crate::error::Hint for IndexError {
    fn hint(&self) -> Option<String> {
        match self {
            IndexError::Io(e) => crate::error::Hint::hint(e),
            _ => None,
        }
    }
}
