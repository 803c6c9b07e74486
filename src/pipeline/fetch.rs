//! Stage 2: every resolved file into the cache, verified, a few at a time.
//! Only verified files are ever renamed into the cache, so a file found
//! there under its SHA256 is not read from its source again.

use std::fs;
use std::path::PathBuf;
use std::sync::Mutex;

use std::path::Path;

use crate::digest::Digests;
use crate::fetch::{Event, Expected, FetchError, FetchErrorKind};
use crate::upstream;

use super::resolve::{FetchFrom, Resolved};
use super::{PipelineError, Session};

/// A resolved package whose file is fetched and verified: in the cache, or
/// the project's own file where it is. The file is its resolved origin
/// ([`FetchFrom::InPlace`]), so the resolved packages become fetched ones
/// in their own memory (a list of every package is not made twice).
#[derive(Debug, Clone)]
pub struct Fetched {
    pub resolved: Resolved,
}

impl Fetched {
    /// The verified file, shared with the artifact made of it and the
    /// build stamp's inputs (memory: a path per package, not three).
    pub fn file(&self) -> &std::sync::Arc<Path> {
        match &self.resolved.from {
            FetchFrom::InPlace(file) => file,
            _ => unreachable!("fetching leaves every file in place"),
        }
    }

    /// Its lock entry (shared).
    pub fn lock_entry(&self) -> std::sync::Arc<crate::recipe::lock::LockedPackage> {
        std::sync::Arc::clone(&self.resolved.locked)
    }
}

/// The fetched `file` of `r`, where it is not its resolved path (a
/// project file used where its recipe names it: that path is shared, not
/// copied).
fn elsewhere(r: &Resolved, file: PathBuf) -> Option<PathBuf> {
    match &r.from {
        FetchFrom::InPlace(path) if **path == *file => None,
        _ => Some(file),
    }
}

/// What a fetching worker takes from the end of `queue` (the biggest
/// files): one file, or several of the project's own files (used where
/// they are: nothing is downloaded) while they hold [`TAKE_BYTES`] in all,
/// up to [`TAKE_MAX`]. One at a time, each of thousands of small project
/// files was a turn of the queue's lock, and four workers on two cores
/// waited on it (a futex call each); a download still goes alone, so
/// downloads spread over the workers to the last one.
fn taken_from(queue: &mut Vec<usize>, resolved: &[Resolved]) -> Vec<usize> {
    let mut taken: Vec<usize> = Vec::new();
    let mut bytes = 0;
    let in_place = |i: usize| matches!(resolved[i].from, FetchFrom::InPlace(_));
    while let Some(&i) = queue.last() {
        let size = resolved[i].locked.size;
        let batched = in_place(i) && taken.first().is_none_or(|&t| in_place(t));
        if !taken.is_empty() && (!batched || taken.len() == TAKE_MAX || bytes + size > TAKE_BYTES) {
            break;
        }
        queue.pop();
        taken.push(i);
        bytes += size;
    }
    taken
}

/// See [`taken_from`].
const TAKE_BYTES: u64 = 1 << 20;
const TAKE_MAX: usize = 32;

impl Session<'_> {
    /// The bytes `fetch` will really download or copy: files already in the
    /// cache do not count (the total progress bar shows only real work).
    pub fn bytes_to_fetch(&self, resolved: &[Resolved]) -> u64 {
        let mut seen = std::collections::HashSet::new();
        resolved
            .iter()
            .filter(|r| !self.in_cache(r))
            .filter(|r| seen.insert(self.cache_path(r)))
            .map(|r| r.locked.size)
            .sum()
    }

    /// Fetches every resolved file into the cache, verified, a few at a time.
    /// Files already in the cache are not downloaded again. Each resolved
    /// package moves into its `Fetched` (memory: none is held twice).
    pub fn fetch(&self, resolved: Vec<Resolved>) -> Result<Vec<Fetched>, PipelineError> {
        // Two recipes may name the same file (same digest and name): it is
        // fetched once, then found in the cache, never by two workers at once.
        // A project file is used where it is: no cache path to share.
        let mut seen = std::collections::HashSet::new();
        let (first, again): (Vec<_>, Vec<_>) = (0..resolved.len()).partition(|&i| {
            let r = &resolved[i];
            matches!(r.from, FetchFrom::InPlace(_)) || seen.insert(self.cache_path(r))
        });
        drop(seen);
        // The biggest first (workers pop from the end): the last file to
        // start is a small one, so no core idles while one hashes a big file.
        let mut first = first;
        first.sort_by_key(|&i| (resolved[i].locked.size, std::cmp::Reverse(i)));
        let queue = Mutex::new(first);
        let take = || taken_from(&mut queue.lock().expect("queue"), &resolved);
        // Only the files fetched elsewhere than their resolved path, and
        // the failures, by package: a project's own files (thousands, used
        // where they are) leave nothing here (memory: a result a package
        // was held beside every resolved package, at the build's peak).
        let moved: Mutex<Vec<(usize, PathBuf)>> = Mutex::new(Vec::new());
        let failed: Mutex<Vec<(usize, PipelineError)>> = Mutex::new(Vec::new());
        let keep = |i: usize, result: Result<PathBuf, PipelineError>| match result {
            Ok(file) => {
                if let Some(file) = elsewhere(&resolved[i], file) {
                    moved.lock().expect("moved").push((i, file));
                }
                true
            }
            Err(e) => {
                failed.lock().expect("failed").push((i, e));
                false
            }
        };
        let workers = self
            .settings
            .parallel
            .clamp(1, 16)
            .min(resolved.len().max(1));
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| {
                    'work: loop {
                        let taken = take();
                        if taken.is_empty() {
                            break;
                        }
                        for i in taken {
                            if !keep(i, self.fetch_checked(&resolved[i])) {
                                // Stop handing out work; running downloads
                                // finish (and none this worker took starts).
                                queue.lock().expect("queue").clear();
                                break 'work;
                            }
                        }
                    }
                });
            }
        });
        if failed.lock().expect("failed").is_empty() {
            for i in again {
                keep(i, self.fetch_checked(&resolved[i]));
            }
        }
        // The first failure in recipe order; without one, every package
        // was fetched.
        let failed = failed.into_inner().expect("failed");
        if let Some((_, e)) = failed.into_iter().min_by_key(|(i, _)| *i) {
            return Err(e);
        }
        let moved = moved.into_inner().expect("moved");
        let mut resolved = resolved;
        // A file used where it was resolved keeps its path; any other is
        // copied into this thread's memory (a worker's is freed now, see
        // the `cores` module).
        for (i, file) in moved {
            resolved[i].from = FetchFrom::InPlace(std::sync::Arc::from(file.as_path()));
        }
        // Each in its own place (same size: the list is not copied).
        Ok(resolved
            .into_iter()
            .map(|resolved| Fetched { resolved })
            .collect())
    }

    /// The verified file of `r`, fetched, and checked to be what vouched
    /// for it.
    fn fetch_checked(&self, r: &Resolved) -> Result<PathBuf, PipelineError> {
        let file = self.fetch_one(r)?;
        self.check_fetched(r, &file)?;
        Ok(file)
    }

    /// Its hash is what vouched for it; its identity is what it says: read
    /// from its recorded control without parsing it where it can be (a
    /// build checks every package), else from the parsed control.
    fn check_fetched(&self, r: &Resolved, file: &Path) -> Result<(), PipelineError> {
        let recorded = self
            .records
            .with_control(r.locked.sha256(), super::Says::peek)
            .flatten();
        let says = match recorded {
            Some(says) => says,
            None => super::Says::of(&self.control_of(file, r.locked.sha256())?),
        };
        super::check_identity(&r.locked, r.repack.is_some(), file, &says, &self.records)
    }

    /// Where the verified file of `r` lives in the cache.
    pub(super) fn cache_path(&self, r: &Resolved) -> PathBuf {
        self.settings
            .cache
            .join("debs")
            .join(r.locked.sha256())
            .join(r.file_name())
    }

    /// A project file checked against what its recipe (the lock) says:
    /// its digests from the record kept under its identity when it is
    /// unchanged since it was resolved, else read again. Returns the file
    /// itself (a link's target: the pool links this path, and a link as the
    /// last component would be linked as a link).
    fn check_project_file(&self, path: &Path, expected: &Expected) -> Result<PathBuf, FetchError> {
        let fail = |kind| FetchError {
            url: path.display().to_string(),
            kind,
        };
        let io = |p: &Path, e| fail(FetchErrorKind::Io(crate::error::FileError::new(p, e)));
        let lstat = fs::symlink_metadata(path).map_err(|e| io(path, e))?;
        let (file, meta) = if lstat.is_symlink() {
            let file = fs::canonicalize(path).map_err(|e| io(path, e))?;
            let meta = fs::metadata(&file).map_err(|e| io(&file, e))?;
            (file, meta)
        } else {
            (path.to_path_buf(), lstat)
        };
        if !meta.is_file() {
            return Err(io(&file, std::io::Error::other("not a regular file")));
        }
        let d = if expected.sha256.is_some() {
            self.records.digests_with(&file, &meta)
        } else {
            // Opened by type: it may have changed since it was stat'ed.
            crate::input::open_regular(&file)
                .and_then(|f| crate::digest::digest_with(f, expected.hasher()))
        }
        .map_err(|e| io(&file, e))?;
        expected.check(&d).map_err(fail)?;
        Ok(file)
    }

    fn in_cache(&self, r: &Resolved) -> bool {
        if matches!(r.from, FetchFrom::InPlace(_)) {
            return true;
        }
        fs::metadata(self.cache_path(r)).is_ok_and(|m| m.len() == r.locked.size)
    }

    fn fetch_one(&self, r: &Resolved) -> Result<PathBuf, PipelineError> {
        if let FetchFrom::InPlace(path) = &r.from {
            // The project's own file is used where it is (the pool links it):
            // a copy in the cache would only cost a directory and a link.
            // Resolved this run, it was stat'ed and its digests taken from it
            // then; the pool checks the file it links by its identity again.
            if r.seen.is_some() {
                return Ok(path.to_path_buf());
            }
            return self
                .check_project_file(path, &r.expected())
                .map_err(|source| PipelineError::Fetch {
                    package: r.locked.name().to_string(),
                    source,
                });
        }
        let dest = self.cache_path(r);
        if self.in_cache(r) {
            let name = r.file_name().to_string();
            self.observer.event(Event::Cached { name });
        } else if let Some(d) = self.bring_into_cache(r, &dest)? {
            // Every byte was hashed once, on the way in: the pool takes
            // these digests from the record instead of reading the file again.
            self.records.record(&dest, &d);
        }
        Ok(dest)
    }

    /// Downloads or copies the file of `r` into the cache at `dest`,
    /// verified; its digests when they are not recorded already. The lock
    /// records only what vouched for the file (the index or the recipe),
    /// not the digests computed here.
    fn bring_into_cache(
        &self,
        r: &Resolved,
        dest: &Path,
    ) -> Result<Option<Digests>, PipelineError> {
        let name = r.file_name().to_string();
        let fail = |source| PipelineError::Fetch {
            package: r.locked.name().to_string(),
            source,
        };
        let expected = r.expected();
        match &r.from {
            FetchFrom::Source(s) => {
                // Resolved through this source's transport, so it has one.
                let t = self
                    .transport(s)
                    .ok_or_else(|| PipelineError::NotInSnapshot {
                        package: r.locked.name().to_string(),
                        source_name: s.clone(),
                        dirs: self.dirs_text(),
                    })?;
                // Copied, never linked, from a directory debforge does not
                // own (a snapshot, a `file://` mirror): its files' later
                // rewrites and modes stay out of the served pool.
                let d = t
                    .fetch(r.locked.path(), &expected, dest, &name)
                    .map_err(fail)?;
                if t.is_local() {
                    let from = t.describe(r.locked.path());
                    self.observer.event(Event::Copied { name, from });
                }
                Ok(Some(d))
            }
            FetchFrom::Url(url) => {
                let http = self
                    .http
                    .as_ref()
                    .ok_or_else(|| PipelineError::FileNotFound {
                        package: r.locked.name().to_string(),
                        file: name.clone(),
                        dirs: self.dirs_text(),
                    })?;
                let d = http
                    .download(url, &expected, dest, &name, self.observer)
                    .map_err(fail)?;
                Ok(Some(d))
            }
            FetchFrom::Local(path) => {
                let d = upstream::copy_verified(path, &expected, dest).map_err(fail)?;
                let from = path.display().to_string();
                self.observer.event(Event::Copied { name, from });
                Ok(Some(d))
            }
            FetchFrom::InPlace(_) => unreachable!("used in place by fetch_one"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn resolved(size: u64, in_place: bool) -> Resolved {
        let entry = crate::recipe::lock::LockEntry {
            name: "p".into(),
            version: "1".into(),
            architecture: "amd64".into(),
            origin: "path".into(),
            size,
            sha256: "a".repeat(64),
            ..Default::default()
        };
        Resolved {
            repack: None,
            for_base: false,
            locked: Arc::new(crate::recipe::lock::LockedPackage::from(entry)),
            from: match in_place {
                true => FetchFrom::InPlace(Path::new("/d/p.deb").into()),
                false => FetchFrom::Url("https://example.org/p.deb".into()),
            },
            seen: None,
        }
    }

    /// Project files go a batch at a time (up to a count and a size); a
    /// download goes alone, and ends a batch of project files before it.
    #[test]
    fn a_worker_takes_project_files_by_the_batch_and_a_download_alone() {
        let mut all: Vec<Resolved> = (0..40).map(|_| resolved(1000, true)).collect();
        all.push(resolved(10, false));
        all.extend((0..3).map(|_| resolved(400 << 10, true)));
        all.push(resolved(5 << 20, false));
        // Taken from the end, as the queue is: the biggest first.
        let mut queue: Vec<usize> = (0..all.len()).collect();
        let mut turns = Vec::new();
        loop {
            let taken = taken_from(&mut queue, &all);
            if taken.is_empty() {
                break;
            }
            turns.push(taken);
        }
        let sizes: Vec<usize> = turns.iter().map(Vec::len).collect();
        // The download; two 400 KiB files (a third would pass 1 MiB); the
        // third; the small download; 32 small files, then the other 8.
        assert_eq!(sizes, [1, 2, 1, 1, 32, 8], "{turns:?}");
        assert_eq!(turns[0], [44]);
        assert_eq!(turns[3], [40]);
        let mut every: Vec<usize> = turns.concat();
        every.sort();
        assert_eq!(every, (0..all.len()).collect::<Vec<_>>());
    }
}
