//! The output updated in place: what a build over an earlier output of
//! ours does. Its pool stays where it is; the packages it does not hold yet
//! are linked in (an old index never lists them, so clients of the old
//! repository see nothing); the new `dists/` and the files beside it are
//! written in the staging directory and `dists/` is swapped in whole, in one
//! step where the filesystem can (`renameat2(RENAME_EXCHANGE)`); then the
//! pool files no index or kept generation lists go, as the output is walked
//! for its stamp (`write::settle`). At every instant the
//! output is a complete repository, the old one or the new one; a build
//! that fails before the swap removes what it linked. Work is proportional
//! to what changed: no directory of the pool is made again.
//!
//! A pool file that would get other bytes under the same name (the same
//! name, version and architecture rebuilt) cannot change under clients of
//! the old index: such a build writes the whole output instead
//! ([`super::write`]).

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::digest::Digests;
use crate::error::FileError;
use crate::files::TreeEntry;
use crate::report::{Event, Reporter, Task};

use super::stanzas::Stanzas;
use super::write::{
    PoolInput, RepoParams, Written, base_name, check_installable, exchange, fresh_staging,
    place_all, pool_entries, pool_names, pool_positions, write_beside_dists, write_dists,
};
use super::{KEYRING_NAME, OUTPUT_MARKER, PREFERENCES_NAME, RepoError};

/// Whether `out` can be updated in place: an earlier output of ours with
/// its `dists/` and `pool/` directories. Not for a generation published
/// again (its own throwaway directory), nor under the test hook that
/// exercises the whole-output swap.
pub(super) fn applies(out: &Path, params: &RepoParams) -> bool {
    let real_dir = |p: PathBuf| fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    params.pause_in_swap.is_none()
        && params.retain_from.is_none()
        && fs::symlink_metadata(out.join(OUTPUT_MARKER)).is_ok_and(|m| m.is_file())
        && real_dir(out.join("dists"))
        && real_dir(out.join("pool"))
}

/// Updates `out` in place, the new `dists/` and top files written in
/// `staging`; `None` (nothing changed in `out`) when a pool file would
/// change bytes under its name.
pub(super) fn write(
    out: &Path,
    staging: &Path,
    (packages, stanzas): (&mut Vec<PoolInput>, &Stanzas),
    params: &RepoParams,
    pins: &str,
    observer: &dyn Reporter,
) -> Result<Option<(Written, Option<PoolWalk>)>, RepoError> {
    let unique = pool_names(packages, &params.config.component)?;
    // The indexes are written (rendering, hashing, compressing what
    // changed) and checked to be installable while the pool is walked and
    // checked (system calls), each on a core: the indexes list what each
    // package must be, whatever the pool holds. The walk is the pool's part
    // of the output's stamp: the output is not walked again once written,
    // only what this build changed. (The check reads the index back while
    // the pool inputs are still held: a build in place holds both at once,
    // a build of the whole output does not.)
    let (present, index, walked) = std::thread::scope(|scope| {
        let index = scope.spawn(|| {
            let index = write_dists(staging, (&unique, stanzas), params, observer)?;
            write_beside_dists(staging, params, pins)?;
            let count = unique.len();
            check_installable(
                staging,
                out,
                count,
                params.base,
                &params.config.architectures,
            )?;
            Ok::<_, RepoError>(index)
        });
        let walked = walk_pool(out);
        let present = match &walked {
            Some((entries, _)) => present_in(out, entries, &unique, params),
            None => present(out, &unique, params),
        };
        let index = index
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (present, index, walked)
    });
    let Some(present) = present? else {
        // Written whole instead, into the same staging directory, which
        // must hold none of these indexes.
        let dists = staging.join("dists");
        match crate::files::remove_tree(&dists) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(FileError::at(&dists)(e).into());
            }
            _ => return Ok(None),
        }
    };
    let index = index?;
    let missing: Vec<(String, &PoolInput)> = unique
        .iter()
        .zip(&present)
        .filter(|(_, there)| !**there)
        .map(|((rel, p), _)| (rel.clone(), *p))
        .collect();
    let mut added = Added {
        out,
        rels: missing.iter().map(|(rel, _)| rel.clone()).collect(),
        kept: false,
    };
    place_all(out, &missing, params.records, observer)?;
    // Every package is in the pool now, most of them already were.
    let total = unique.len() as u64;
    observer.event(Event::Work {
        task: Task::Pool,
        done: total,
        total,
        item: String::new(),
    });
    drop(missing);
    let named = pool_positions(packages, unique);
    let pooled = pool_entries(packages, named);
    swap_dists(staging, out)?;
    added.kept = true;
    // The new indexes are in: every top file follows, each renamed whole;
    // the first failure is reported after all were tried.
    let mut failed = None;
    for name in top_files() {
        let dest = out.join(&name);
        if let Err(e) = fs::rename(staging.join(&name), &dest) {
            failed.get_or_insert(FileError::at(&dest)(e));
        }
    }
    if let Some(e) = failed {
        return Err(e.into());
    }
    // The old dists/ goes now, not with the staging directory later: its
    // indexes share files with the new one (kept forms), and unlinking
    // them changes those files' ctime, which the output's stamp records.
    let _ = crate::files::remove_tree(staging.join("dists"));
    let _ = crate::files::remove_tree(staging.join("dists.old"));
    remove_not_ours(out);
    // The pool files no longer listed go as the output is walked for its
    // stamp (`write::settle`).
    let walked = walked.map(|(entries, taken)| PoolWalk {
        entries,
        taken,
        placed: std::mem::take(&mut added.rels),
    });
    Ok(Some(((pooled, index), walked)))
}

/// The pool as walked before a build in place changed it, and what the
/// build placed in it since: the output's walk for its stamp, without
/// walking the pool again ([`PoolWalk::patched`]). Nothing else changes
/// the pool meanwhile: the build holds the output's lock, and clients only
/// read.
pub struct PoolWalk {
    entries: Vec<TreeEntry>,
    /// When the walk began.
    taken: SystemTime,
    placed: Vec<String>,
}

impl PoolWalk {
    /// When the walk began: no identity in it is older.
    pub fn taken(&self) -> SystemTime {
        self.taken
    }

    /// The output's entries now: the rest of the output walked, the pool's
    /// from the walk, with the files placed since, the directories made for
    /// them and the ones those were made in stat'ed again, and every other
    /// name of a placed file's inode (a link changes its change time); and
    /// those inodes (device, inode).
    pub fn patched(self, out: &Path) -> std::io::Result<(Vec<TreeEntry>, Inodes)> {
        let pool = out.join("pool");
        let mut rest = crate::files::tree_entries(out, &|p| p.parent() == Some(&*pool))?;
        let PoolWalk {
            mut entries,
            placed,
            ..
        } = self;
        let mut again: HashSet<&str> = HashSet::new();
        for rel in &placed {
            let mut at = rel.as_str();
            while at != "pool" {
                again.insert(at);
                at = at.rsplit_once('/').map_or("pool", |(parent, _)| parent);
            }
        }
        entries.retain(|e| e.rel.starts_with("pool/") && !again.contains(e.rel.as_str()));
        let mut linked: HashSet<(u64, u64)> = HashSet::new();
        for rel in again {
            let Ok(m) = fs::symlink_metadata(out.join(rel)) else {
                continue;
            };
            let e = TreeEntry::of(rel.to_string(), &m);
            if !e.is_dir() {
                linked.insert((e.id.dev(), e.id.ino()));
            }
            entries.push(e);
        }
        for e in entries.iter_mut() {
            if linked.contains(&(e.id.dev(), e.id.ino()))
                && let Ok(m) = fs::symlink_metadata(out.join(&e.rel))
            {
                *e = TreeEntry::of(std::mem::take(&mut e.rel), &m);
            }
        }
        entries.append(&mut rest);
        Ok((entries, linked))
    }
}

/// Files by device and inode number.
pub type Inodes = HashSet<(u64, u64)>;

/// The output's pool walked (`pool` and what it holds, links not
/// followed), and when the walk began; `None` where it cannot be (each
/// package is then checked on its own, and the output walked whole once
/// written). Only the directories that changed since the last build's
/// walk ([`WalkedPool`]) are listed.
fn walk_pool(out: &Path) -> Option<(Vec<TreeEntry>, SystemTime)> {
    let taken = SystemTime::now();
    let pool = out.join("pool");
    let skip = |p: &Path| p.parent() == Some(out) && p != pool;
    let since = WalkedPool::read(out).and_then(|before| {
        let before = crate::files::WalkedBefore {
            entries: &before.entries,
            taken: before.taken,
        };
        crate::files::tree_entries_since(out, &skip, &before).ok()
    });
    since
        .or_else(|| crate::files::tree_entries(out, &skip).ok())
        .map(|entries| (entries, taken))
}

/// The pool as the last build left it (`.<out>.walk`): its entries, sorted
/// by path, and when the walk they were taken from began. A cache in
/// debforge's own form ([`crate::files::write_cache`]); it only spares the
/// next walk the directories that did not change, each checked by its
/// identity ([`crate::files::tree_entries_since`]), so one that is stale
/// or another output's costs only time.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct WalkedPool<E> {
    taken: SystemTime,
    entries: Vec<E>,
}

const WALK_MAGIC: &[u8; 8] = b"dfpwalk\0";
const WALK_VERSION: u32 = 1;

impl WalkedPool<TreeEntry> {
    fn read(out: &Path) -> Option<Self> {
        let bytes = crate::input::read_cache(
            &walk_path(out),
            crate::input::limit::MANIFEST,
            WALK_MAGIC,
            WALK_VERSION,
        )?;
        let walked: Self = postcard::from_bytes(&bytes).ok()?;
        walked
            .entries
            .is_sorted_by(|a, b| a.rel < b.rel)
            .then_some(walked)
    }
}

impl<'e> WalkedPool<&'e TreeEntry> {
    /// Of the output's `entries` (sorted by path) as a build left them, its
    /// walk having begun at `taken`: the pool's, for the next build. Best
    /// effort (a time before the epoch does not serialize: no file).
    pub(super) fn write(out: &Path, taken: SystemTime, entries: &'e [TreeEntry]) {
        let walked = WalkedPool {
            taken,
            entries: entries
                .iter()
                .filter(|e| e.rel == "pool" || e.rel.starts_with("pool/"))
                .collect(),
        };
        let path = walk_path(out);
        if crate::files::write_cache(&path, WALK_MAGIC, WALK_VERSION, &walked).is_err() {
            let _ = fs::remove_file(path);
        }
    }
}

/// Where the pool's walk is kept: beside the output, as its stamps are.
fn walk_path(out: &Path) -> PathBuf {
    crate::files::beside(out, "walk")
}

/// [`present`], from the pool's walk: a package's file must be a regular
/// file reached through real directories only, with its bytes. One the
/// walk did not see is asked of the file system as [`present`] does (a
/// few in a build in place): a path the file system resolves to another
/// name (a `.` component, a case-insensitive file system) must never be
/// taken as absent and written over.
fn present_in(
    out: &Path,
    walked: &[TreeEntry],
    unique: &[(String, &PoolInput)],
    params: &RepoParams,
) -> Result<Option<Vec<bool>>, RepoError> {
    let by_rel: std::collections::HashMap<&str, &TreeEntry> =
        walked.iter().map(|e| (e.rel.as_str(), e)).collect();
    let mut present = Vec::with_capacity(unique.len());
    let mut real_dirs: HashSet<PathBuf> = HashSet::new();
    for (rel, p) in unique {
        // A link (or a file) on the way would put a package outside the
        // output, or read one from there.
        let through_dirs = rel
            .match_indices('/')
            .all(|(i, _)| by_rel.get(&rel[..i]).is_none_or(|e| e.is_dir()));
        if !through_dirs {
            return Ok(None);
        }
        match by_rel.get(rel.as_str()) {
            None => match present_one(out, rel, p, params, &mut real_dirs)? {
                Some(there) => present.push(there),
                None => return Ok(None),
            },
            Some(e) if e.mode & libc::S_IFMT == libc::S_IFREG => {
                let dest = out.join(rel);
                let d = params
                    .records
                    .digests_as(&dest, e.id)
                    .map_err(FileError::at(&dest))?;
                if !p.sha256.matches(&d.sha256) || d.size != p.size {
                    return Ok(None);
                }
                present.push(true);
            }
            Some(_) => return Ok(None),
        }
    }
    Ok(Some(present))
}

/// An output as walked under its lock (which it holds): what a redate
/// goes on from, so that the tree is not walked again to see that it is
/// the one the stamp describes.
#[derive(Default)]
pub struct Walked {
    lock: Option<super::write::OutputLock>,
    entries: Vec<crate::files::TreeEntry>,
}

impl Walked {
    pub fn new(lock: super::write::OutputLock, entries: Vec<crate::files::TreeEntry>) -> Walked {
        Walked {
            lock: Some(lock),
            entries,
        }
    }
}

/// Dates and signs `out`'s Release anew, nothing else changed: what a build
/// of the same inputs at another date writes (the caller knows, by the
/// output's tree digest as `walked`, under the lock it still holds, that
/// `out` is what that Release describes). The indexes it lists are linked
/// into a new `dists/` with their digests from it, the Release written and
/// signed as `params` say, and `dists/` swapped in whole. Returns the
/// output's tree digest, taken under its lock; `None` (nothing changed)
/// where the Release cannot be read as ours, or `walked` holds no lock.
pub fn redate(
    out: &Path,
    params: &RepoParams,
    walked: Walked,
    observer: &dyn Reporter,
) -> Result<Option<String>, RepoError> {
    let Walked {
        lock: Some(lock),
        mut entries,
    } = walked
    else {
        return Ok(None);
    };
    let suite = &params.config.suite;
    let current = out.join("dists").join(suite);
    let Some(listed) = release_files(&current.join("Release")) else {
        return Ok(None);
    };
    // The output's stamp names the old date.
    let _ = fs::remove_file(crate::files::beside(out, "stamp"));
    let staging = fresh_staging(crate::files::parent(out), &base_name(out), out, observer)?;
    let dist = staging.path().join("dists").join(suite);
    for (rel, _) in &listed {
        let (from, to) = (current.join(rel), dist.join(rel));
        fs::create_dir_all(crate::files::parent(&to)).map_err(FileError::at(&to))?;
        if fs::hard_link(&from, &to).is_err() {
            fs::copy(&from, &to).map_err(FileError::at(&to))?;
        }
    }
    let signers = params.keys.len() as u64;
    observer.event(Event::Work {
        task: Task::Sign,
        done: 0,
        total: signers,
        item: format!("dists/{suite}/Release"),
    });
    super::sign_dists(&dist, &params.config, &listed, params.date, params.keys)?;
    observer.event(Event::Work {
        task: Task::Sign,
        done: signers,
        total: signers,
        item: format!("dists/{suite}/InRelease"),
    });
    swap_dists(staging.path(), out)?;
    // The old dists/ goes before the digest: its links to the indexes
    // change their ctime as they go.
    let _ = crate::files::remove_tree(staging.path().join("dists"));
    let _ = crate::files::remove_tree(staging.path().join("dists.old"));
    drop(staging);
    // The pool is as walked (held by the lock; a redate touches only
    // `dists/` and the top files): only the rest is walked again. A pool
    // file's change time moved since by a link made elsewhere (the same
    // cache file linked into another output) only makes the next build's
    // check see a change and build whole.
    let pool = out.join("pool");
    let mut rest = crate::files::tree_entries(out, &|p| p.parent() == Some(&*pool))
        .map_err(FileError::at(out))?;
    entries.retain(|e| e.rel.starts_with("pool/"));
    entries.append(&mut rest);
    let tree = crate::files::digest_entries(&mut entries);
    drop(lock);
    Ok(Some(tree))
}

/// Every file a Release lists, with the digests it gives (SHA256 for each).
pub(super) fn release_files(path: &Path) -> Option<Vec<(String, Digests)>> {
    use crate::format::release::{HashAlgo, Release};
    let text = crate::input::read_to_string(path, crate::input::limit::RELEASE).ok()?;
    let release = Release::parse(&text).ok()?;
    let mut files: std::collections::BTreeMap<String, Digests> = Default::default();
    for f in release.files(HashAlgo::Sha256).ok()? {
        let d = Digests {
            size: f.size,
            sha256: f.digest,
            md5: None,
            sha1: None,
            sha512: None,
        };
        files.insert(f.path, d);
    }
    for algo in [HashAlgo::Md5, HashAlgo::Sha1, HashAlgo::Sha512] {
        for f in release.files(algo).ok()? {
            let d = files.get_mut(&f.path)?;
            if d.size != f.size {
                return None;
            }
            let slot = match algo {
                HashAlgo::Md5 => &mut d.md5,
                HashAlgo::Sha1 => &mut d.sha1,
                _ => &mut d.sha512,
            };
            *slot = Some(f.digest);
        }
    }
    // A listed path stays under dists/<suite>/.
    files
        .keys()
        .all(|p| crate::format::path::check_relative(p).is_ok())
        .then(|| files.into_iter().collect())
}

/// Whether each package is already in `out`'s pool with its bytes;
/// `None` when one is there with other bytes, or something else is in its
/// place.
fn present(
    out: &Path,
    unique: &[(String, &PoolInput)],
    params: &RepoParams,
) -> Result<Option<Vec<bool>>, RepoError> {
    let mut present = Vec::with_capacity(unique.len());
    let mut real_dirs: HashSet<PathBuf> = HashSet::new();
    for (rel, p) in unique {
        match present_one(out, rel, p, params, &mut real_dirs)? {
            Some(there) => present.push(there),
            None => return Ok(None),
        }
    }
    Ok(Some(present))
}

/// Whether one package is in `out`'s pool with its bytes, asked of the
/// file system; `None` as in [`present`].
fn present_one(
    out: &Path,
    rel: &str,
    p: &PoolInput,
    params: &RepoParams,
    real_dirs: &mut HashSet<PathBuf>,
) -> Result<Option<bool>, RepoError> {
    let dest = out.join(rel);
    // Only through real directories of the output: a link on the way
    // would put a package (or read one) outside it.
    if !real_ancestors(out, &dest, real_dirs) {
        return Ok(None);
    }
    match fs::symlink_metadata(&dest) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Some(false)),
        Err(e) => Err(FileError::at(&dest)(e).into()),
        Ok(m) if m.is_file() => {
            // A link to the cache's file: its record says, nothing read.
            let d = params
                .records
                .digests_with(&dest, &m)
                .map_err(FileError::at(&dest))?;
            Ok((p.sha256.matches(&d.sha256) && d.size == p.size).then_some(true))
        }
        Ok(_) => Ok(None),
    }
}

/// Whether every existing directory between `out` and `path` is a real
/// directory (not a link); `seen` holds the ones checked already.
fn real_ancestors(out: &Path, path: &Path, seen: &mut HashSet<PathBuf>) -> bool {
    for dir in path.ancestors().skip(1).take_while(|d| *d != out) {
        if seen.contains(dir) {
            return true; // and so are its ancestors
        }
        match fs::symlink_metadata(dir) {
            Ok(m) if m.is_dir() => {
                seen.insert(dir.to_path_buf());
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            _ => return false,
        }
    }
    true
}

/// `staging/dists` in for `out/dists`: exchanged in one step where the
/// filesystem can, else with two renames (a build killed between them
/// leaves `out` without `dists/`: the next build then writes the output
/// whole, as [`applies`] wants `dists/`).
fn swap_dists(staging: &Path, out: &Path) -> Result<(), RepoError> {
    let new = staging.join("dists");
    let current = out.join("dists");
    if exchange(&new, &current).is_ok() {
        return Ok(());
    }
    let aside = staging.join("dists.old");
    fs::rename(&current, &aside).map_err(FileError::at(&current))?;
    if let Err(e) = fs::rename(&new, &current) {
        let _ = fs::rename(&aside, &current);
        return Err(FileError::at(&current)(e).into());
    }
    Ok(())
}

/// Removes what `build` did not write at the output's top level: the
/// output is replaced whole (its marker says so), in place or not.
fn remove_not_ours(out: &Path) {
    let Ok(entries) = fs::read_dir(out) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == "dists" || name == "pool" || top_files().contains(&name) {
            continue;
        }
        let path = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => {
                let _ = crate::files::remove_tree(&path);
            }
            _ => {
                let _ = fs::remove_file(&path);
            }
        }
    }
}

/// The files `build` writes beside `dists/` and `pool/`
/// (`write_beside_dists`).
fn top_files() -> [String; 4] {
    [
        format!("{KEYRING_NAME}.gpg"),
        format!("{KEYRING_NAME}.asc"),
        PREFERENCES_NAME.to_string(),
        OUTPUT_MARKER.to_string(),
    ]
}

/// Removes the pool files neither the new indexes list nor a kept
/// generation needs ([`kept_by_generations`]), then the directories left empty;
/// `entries` (the output's, as walked) follow: the removed go, and the
/// directories they were in and the files that shared their inodes (a
/// removed link moves their change time) are stat'ed again. Returns the
/// inodes that lost a link. Best effort: a file that stays is only
/// unlisted.
pub(super) fn remove_unlisted(
    out: &Path,
    entries: &mut Vec<TreeEntry>,
    listed: &HashSet<&str>,
    kept: &HashSet<&str>,
) -> Inodes {
    // Directories that lost a file (deepest first: only those can be
    // empty), and the inodes that lost a link.
    let mut emptied: Vec<&str> = Vec::new();
    let mut removed: HashSet<String> = HashSet::new();
    let mut unlinked: HashSet<(u64, u64)> = HashSet::new();
    for e in entries.iter() {
        let rel = e.rel.as_str();
        if !rel.starts_with("pool/")
            || e.is_dir()
            || listed.contains(rel)
            || kept.contains(rel)
            || fs::remove_file(out.join(rel)).is_err()
        {
            continue;
        }
        removed.insert(e.rel.clone());
        unlinked.insert((e.id.dev(), e.id.ino()));
        let mut dir = rel;
        while let Some((parent, _)) = dir.rsplit_once('/')
            && parent != "pool"
        {
            emptied.push(parent);
            dir = parent;
        }
    }
    if removed.is_empty() {
        return unlinked;
    }
    let depth = |d: &str| d.matches('/').count();
    emptied.sort_by(|a, b| (depth(b), a).cmp(&(depth(a), b)));
    emptied.dedup();
    let mut touched: HashSet<String> = HashSet::from(["pool".to_string()]);
    for dir in emptied {
        // Only an empty directory goes; its parent changed either way.
        if fs::remove_dir(out.join(dir)).is_ok() {
            removed.insert(dir.to_string());
        }
        touched.insert(dir.to_string());
    }
    entries.retain(|e| !removed.contains(&e.rel));
    for e in entries.iter_mut() {
        if (touched.contains(&e.rel) || unlinked.contains(&(e.id.dev(), e.id.ino())))
            && let Ok(m) = fs::symlink_metadata(out.join(&e.rel))
        {
            *e = TreeEntry::of(std::mem::take(&mut e.rel), &m);
        }
    }
    unlinked
}

/// The retained generations' pool files (not `listed`) that are still
/// there with their SHA256: they stay.
pub(super) fn kept_by_generations<'p>(
    out: &Path,
    listed: &HashSet<&str>,
    params: &'p RepoParams,
) -> HashSet<&'p str> {
    params
        .retain
        .iter()
        .filter(|(rel, sha)| {
            let path = out.join(rel);
            !listed.contains(rel.as_str())
                && crate::format::path::check_relative(rel).is_ok()
                && fs::symlink_metadata(&path).is_ok_and(|m| m.is_file())
                && params
                    .records
                    .digests_of(&path)
                    .is_ok_and(|d| d.sha256 == *sha)
        })
        .map(|(rel, _)| rel.as_str())
        .collect()
}

/// The pool files a build linked in, removed with the directories they
/// leave empty unless the build got to its swap.
struct Added<'a> {
    out: &'a Path,
    rels: Vec<String>,
    kept: bool,
}

impl Drop for Added<'_> {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        let pool = self.out.join("pool");
        for rel in &self.rels {
            let path = self.out.join(rel);
            // Its directory was made before any package was placed: it
            // goes where it is empty, placed or not.
            let _ = fs::remove_file(&path);
            let mut dir = path.parent();
            while let Some(d) = dir.filter(|d| *d != pool && d.starts_with(&pool)) {
                if fs::remove_dir(d).is_err() {
                    break;
                }
                dir = d.parent();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::{digest_entries, tree_digest, tree_entries};

    /// A file `rel` under `out` holding `bytes`, its directories made.
    fn put(out: &Path, rel: &str, bytes: &str) {
        let p = out.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, bytes).unwrap();
    }

    /// What is left after the unlisted files go digests as a fresh walk
    /// of the output does: removed files and emptied directories gone, the
    /// directories they were in and the links that shared their inodes as
    /// they are now.
    #[test]
    fn entries_after_removal_digest_as_a_fresh_walk() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        let put = |rel: &str, bytes: &str| put(out, rel, bytes);
        put("dists/s/Release", "r");
        put("pool/main/a/a/a_1_all.deb", "a");
        put("pool/main/b/b/b_1_all.deb", "b1");
        put("pool/main/b/b/b_2_all.deb", "b2");
        put("pool/main/c/c/c_1_all.deb", "c");
        put("pool/main/k/k/k_1_all.deb", "k");
        // One inode under two names: removing one moves the other's ctime.
        fs::create_dir_all(out.join("pool/main/d")).unwrap();
        fs::hard_link(
            out.join("pool/main/a/a/a_1_all.deb"),
            out.join("pool/main/d/d_1_all.deb"),
        )
        .unwrap();
        let listed: HashSet<&str> = ["pool/main/b/b/b_2_all.deb", "pool/main/d/d_1_all.deb"].into();
        let kept: HashSet<&str> = ["pool/main/k/k/k_1_all.deb"].into();
        // Change times move by the clock's tick: let some go by.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut entries = tree_entries(out, &|_| false).unwrap();
        remove_unlisted(out, &mut entries, &listed, &kept);
        assert_eq!(
            digest_entries(&mut entries),
            tree_digest(out, &|_| false).unwrap()
        );
        for gone in ["pool/main/a", "pool/main/b/b/b_1_all.deb", "pool/main/c"] {
            assert!(!out.join(gone).exists(), "{gone}");
        }
        for stays in [
            "pool/main/b/b/b_2_all.deb",
            "pool/main/d/d_1_all.deb",
            "pool/main/k/k/k_1_all.deb",
            "dists/s/Release",
        ] {
            assert!(out.join(stays).is_file(), "{stays}");
        }
        // Nothing to remove: the entries stay as walked.
        let mut again = tree_entries(out, &|_| false).unwrap();
        remove_unlisted(out, &mut again, &listed, &kept);
        assert_eq!(
            digest_entries(&mut again),
            tree_digest(out, &|_| false).unwrap()
        );
    }

    /// The pool as walked before the write, patched with what the build
    /// placed since, then the unlisted files removed: the digest of a fresh
    /// walk of the whole output (new directories, the directories they were
    /// made in, another name of a placed file's inode, `dists/` swapped).
    #[test]
    fn a_pool_walked_before_the_write_and_patched_digests_as_a_fresh_walk() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let cache = dir.path().join("cache");
        fs::create_dir_all(&cache).unwrap();
        let put = |rel: &str, bytes: &str| put(&out, rel, bytes);
        put("dists/s/Release", "old");
        put("pool/main/a/a/a_1_all.deb", "a");
        put("pool/main/g/g/g_1_all.deb", "gone");
        // The cache file the new package is linked from is already in the
        // pool under another name (kept by a generation).
        fs::write(cache.join("n.deb"), "n").unwrap();
        fs::create_dir_all(out.join("pool/contrib/n/n")).unwrap();
        fs::hard_link(
            cache.join("n.deb"),
            out.join("pool/contrib/n/n/n_1_all.deb"),
        )
        .unwrap();
        let (walked, taken) = walk_pool(&out).expect("the pool walks");
        std::thread::sleep(std::time::Duration::from_millis(20));
        // The build: a new package in a new directory, one beside an
        // existing one, and dists/ replaced.
        let placed = [
            "pool/main/n/n/n_1_all.deb",
            "pool/main/a/a/a_2_all.deb",
            "pool/new/x/x/x_1_all.deb",
        ];
        fs::create_dir_all(out.join("pool/main/n/n")).unwrap();
        fs::hard_link(cache.join("n.deb"), out.join(placed[0])).unwrap();
        fs::write(out.join(placed[1]), "a2").unwrap();
        // A component new to the pool: a directory right under `pool/`.
        fs::create_dir_all(out.join("pool/new/x/x")).unwrap();
        fs::write(out.join(placed[2]), "x").unwrap();
        fs::remove_dir_all(out.join("dists")).unwrap();
        put("dists/s/Release", "new");
        let walk = PoolWalk {
            entries: walked,
            taken,
            placed: placed.iter().map(|p| p.to_string()).collect(),
        };
        let (mut entries, _) = walk.patched(&out).unwrap();
        let listed: HashSet<&str> = placed.into();
        let kept: HashSet<&str> = ["pool/contrib/n/n/n_1_all.deb"].into();
        remove_unlisted(&out, &mut entries, &listed, &kept);
        assert!(!out.join("pool/main/a/a/a_1_all.deb").exists());
        assert!(!out.join("pool/main/g").exists());
        assert_eq!(
            digest_entries(&mut entries),
            tree_digest(&out, &|_| false).unwrap()
        );
    }

    /// A link or a file where a pool directory should be: the package is
    /// not taken as present (the output is written whole instead).
    #[test]
    fn a_walked_pool_with_a_link_on_the_way_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let elsewhere = dir.path().join("elsewhere/a");
        fs::create_dir_all(&elsewhere).unwrap();
        fs::write(elsewhere.join("a_1_all.deb"), "a").unwrap();
        fs::create_dir_all(out.join("pool/main/a")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, out.join("pool/main/a/a")).unwrap();
        let (walked, _) = walk_pool(&out).unwrap();
        let input = PoolInput {
            file: Path::new("/nonexistent").into(),
            entry: Default::default(),
            size: 1,
            sha256: crate::digest::Sha256Sum::from_hex(&crate::digest::sha256_hex(b"a")).unwrap(),
        };
        let records = super::super::pool::DigestStore::new(None);
        let params = RepoParams {
            config: Default::default(),
            keys: &[],
            date: 0,
            records: &records,
            retain: Vec::new(),
            retain_from: None,
            kept_pieces: Default::default(),
            pause_in_swap: None,
            base: &[],
        };
        let unique = [("pool/main/a/a/a_1_all.deb".to_string(), &input)];
        assert_eq!(present_in(&out, &walked, &unique, &params).unwrap(), None);
        assert_eq!(present(&out, &unique, &params).unwrap(), None);
        // Through real directories, the same file is present.
        fs::remove_file(out.join("pool/main/a/a")).unwrap();
        fs::create_dir_all(out.join("pool/main/a/a")).unwrap();
        fs::write(out.join("pool/main/a/a/a_1_all.deb"), "a").unwrap();
        let (walked, _) = walk_pool(&out).unwrap();
        assert_eq!(
            present_in(&out, &walked, &unique, &params).unwrap(),
            Some(vec![true])
        );
        assert_eq!(present(&out, &unique, &params).unwrap(), Some(vec![true]));
        // The same file under a name the walk does not list: there, as
        // the file system says, never absent (it would be written over).
        let alias = [("pool/./main/a/a/a_1_all.deb".to_string(), &input)];
        assert_eq!(
            present_in(&out, &walked, &alias, &params).unwrap(),
            Some(vec![true])
        );
        let other = PoolInput {
            sha256: crate::digest::Sha256Sum::from_hex(&crate::digest::sha256_hex(b"b")).unwrap(),
            ..input.clone()
        };
        let alias = [("pool/./main/a/a/a_1_all.deb".to_string(), &other)];
        assert_eq!(present_in(&out, &walked, &alias, &params).unwrap(), None);
    }
}
