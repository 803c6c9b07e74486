//! Stage 1: every recipe resolved through its trust chain (signed Release →
//! index → file), and the lock file checked against the result.

use crate::error::FileError;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::fetch::Expected;
use crate::recipe::lock::{Lock, LockEntry, LockedPackage};
use crate::recipe::{Origin, PackageRecipe};
use crate::upstream::{self, OpenSource};
use std::sync::Arc;

use super::{OpenSourceFiles, PipelineError, Session, direct_entry};

/// How a resolved file will be fetched.
#[derive(Debug, Clone)]
pub(super) enum FetchFrom {
    /// Through the transport of this source (network or snapshot).
    Source(String),
    /// A direct URL.
    Url(String),
    /// A file on disk outside the project (a snapshot, a plain directory of
    /// debs, often on removable media): copied into the cache.
    Local(PathBuf),
    /// A file used where it is (the pool links it): a `from.path` recipe's
    /// file, and once fetched, every package's verified file (see
    /// [`super::Fetched::file`]; memory: a path per package, held once).
    InPlace(Arc<Path>),
}

/// One recipe's file, resolved through its trust chain.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// What the recipe asks of preparing the file: its repack, where it has
    /// one. (The recipe itself is not kept: a build's go as their packages
    /// are resolved, see [`super::Session::resolve_releasing`].)
    pub repack: Option<Box<crate::recipe::RepackRecipe>>,
    /// Picked for the base's closure, not named by a recipe file.
    pub for_base: bool,
    /// Shared with the artifact prepared from it.
    pub locked: Arc<LockedPackage>,
    pub(super) from: FetchFrom,
    /// A path recipe's file as it was stat'ed before it was read (what a
    /// build stamp names it by); `None` where it was replaced or changed as
    /// it was read (the fetch checks it again).
    pub seen: Option<crate::files::FileIdentity>,
}

impl Resolved {
    pub fn file_name(&self) -> &str {
        self.locked
            .path()
            .rsplit('/')
            .next()
            .unwrap_or(self.locked.path())
    }
    /// A deep copy, in the calling thread's memory (see `crate::cores`);
    /// its lock entry the lock file's where that says the same (`--locked`
    /// holds the file's lock from the start: one entry a package, not two).
    fn kept(self, lock: Option<&LockShare>) -> Resolved {
        let same = lock.and_then(|l| l.same_as(&self.locked));
        Resolved {
            repack: self.repack.clone(),
            for_base: self.for_base,
            locked: same.unwrap_or_else(|| Arc::new(LockedPackage::clone(&self.locked))),
            // A path recipe's file is made by the calling thread already
            // (`resolve_paths`).
            from: self.from,
            seen: self.seen,
        }
    }

    pub(super) fn expected(&self) -> Expected {
        Expected {
            size: self.locked.size,
            sha256: Some(self.locked.sha256().to_string()),
            sha512: self.locked.sha512().map(str::to_string),
        }
    }
}

/// The lock file's entries, as the session has read them, by name and
/// architecture: a resolved package takes the file's entry where it says
/// the same.
struct LockShare {
    sorted: Vec<Arc<LockedPackage>>,
}

impl LockShare {
    fn of(lock: Arc<Lock>) -> LockShare {
        let sorted = crate::recipe::lock::in_lock_order_sorted(lock.package.iter().map(Arc::clone));
        LockShare { sorted }
    }

    /// The file's entry equal to `p`, if there is one.
    fn same_as(&self, p: &LockedPackage) -> Option<Arc<LockedPackage>> {
        crate::recipe::lock::with_name_of(&self.sorted, p)
            .iter()
            .find(|q| ***q == *p)
            .map(Arc::clone)
    }
}

impl Session<'_> {
    /// Resolves every recipe. Upstream packages go through their source's
    /// signed Release and index; offline, a source with no snapshot falls back
    /// to the lock file's hashes and a plain directory of debs.
    ///
    /// The lock file is read here only where a recipe needs it (a direct
    /// URL's SHA512, a plain directory's hashes): for path and upstream
    /// recipes it says nothing the resolution does not, and a lock of
    /// thousands of entries is the slowest file a build parses. (`--locked`
    /// reads it before, and the base's closure when the session opens.)
    pub fn resolve(&self) -> Result<(Vec<Resolved>, Vec<OpenSourceFiles>), PipelineError> {
        self.resolve_list(self.recipes.packages.clone())
    }

    /// [`Session::resolve`] for a build: the recipes the rest of it does
    /// not read ([`PackageRecipe::needed_after_prepare`]) go from the
    /// session, and each as its package is resolved (memory: a recipe per
    /// package, 7 MB at 20,000, was held beside every resolved package at
    /// the build's peak).
    pub fn resolve_releasing(
        &mut self,
    ) -> Result<(Vec<Resolved>, Vec<OpenSourceFiles>), PipelineError> {
        let all = std::mem::take(&mut self.recipes.packages);
        self.recipes.packages = all
            .iter()
            .filter(|p| p.needed_after_prepare())
            .cloned()
            .collect();
        self.resolve_list(all)
    }

    /// The recipes of `list` resolved, in its order; each path recipe goes
    /// (unless another holds it) as its package is resolved.
    fn resolve_list(
        &self,
        list: Vec<Arc<PackageRecipe>>,
    ) -> Result<(Vec<Resolved>, Vec<OpenSourceFiles>), PipelineError> {
        // Read at the first recipe that needs it, then kept ("none" too).
        let mut read: Option<Option<Arc<Lock>>> = None;
        let mut lock = move || -> Result<Option<Arc<Lock>>, PipelineError> {
            if read.is_none() {
                read = Some(self.read_lock()?);
            }
            Ok(read.clone().flatten())
        };
        let mut opened = Vec::new();
        // Path recipes by value, each with its file's path, made here one
        // after another: it is held to the end of the build, and made
        // between the lock entries (which go once the packages are
        // prepared) it would keep every page they leave from being given
        // back. The rest, each after how many path recipes come before it.
        // Sized once (held while they are resolved, at the build's peak:
        // grown by doubling, it was a third larger).
        let paths_count = list
            .iter()
            .filter(|p| matches!(p.origin, Origin::Path { .. }))
            .count();
        let mut path_recipes = Vec::with_capacity(paths_count);
        let mut rest = Vec::new();
        for p in list {
            if let Origin::Path { path } = &p.origin {
                let file: Arc<Path> = self.recipes.dir.join(path).into();
                path_recipes.push((p, file));
            } else {
                rest.push((path_recipes.len(), p));
            }
        }
        // The path recipes' results become the list of every package (the
        // rest is added): one list of them is held, not two.
        let mut paths = self.resolve_paths(path_recipes);
        // The first problem in recipe order: a path recipe's before one of
        // the rest's.
        let mut checked = 0;
        let mut first_error_before =
            |n: usize, paths: &mut Vec<Result<Resolved, PipelineError>>| match (checked..n)
                .find(|&i| paths[i].is_err())
            {
                Some(i) => Err(paths.swap_remove(i).expect_err("an error")),
                None => {
                    checked = n;
                    Ok(())
                }
            };
        let mut by_source: BTreeMap<&str, Vec<&Arc<PackageRecipe>>> = BTreeMap::new();
        let mut urls = Vec::new();
        for (before, p) in &rest {
            first_error_before(*before, &mut paths)?;
            match &p.origin {
                Origin::Upstream { source } => {
                    by_source.entry(source.as_str()).or_default().push(p)
                }
                Origin::Url { url, sha256, size } => {
                    urls.push(self.resolve_url(p, url, sha256, *size, lock()?.as_deref())?)
                }
                Origin::Path { .. } => unreachable!("path recipes are resolved above"),
                // Made by the build, after fetching: nothing to resolve.
                Origin::Built => {}
            }
        }
        first_error_before(paths.len(), &mut paths)?;
        // In place: every path result is a package now.
        let mut out: Vec<Resolved> = paths.into_iter().map(|r| r.expect("no error")).collect();
        out.reserve_exact(rest.len());
        out.append(&mut urls);
        let root = self.recipes.root();
        // Every source's key file first: a missing one is said before any
        // upstream is contacted.
        let mut keyrings = BTreeMap::new();
        for name in by_source.keys() {
            keyrings.insert(
                *name,
                upstream::load_keyring(&self.recipes.sources[*name], &root)?,
            );
        }
        for (name, recipes) in by_source {
            let keyring = &keyrings[name];
            match self.resolve_signed(name, &recipes, keyring)? {
                Some((resolved, files)) => {
                    out.extend(resolved);
                    opened.push(files);
                }
                None => {
                    let old = lock()?;
                    for p in recipes {
                        out.push(self.resolve_plain(p, name, old.as_deref())?);
                    }
                }
            }
        }
        // Unstable, so no second list: a recipe set holds each name and
        // architecture once.
        out.sort_unstable_by(|a, b| {
            (&a.locked.name(), &a.locked.architecture())
                .cmp(&(&b.locked.name(), &b.locked.architecture()))
        });
        Ok((out, opened))
    }

    /// The recipes of source `name` through its signed Release and index:
    /// `None` where the source is a plain directory of debs (no transport:
    /// offline, and no snapshot of it).
    fn resolve_signed(
        &self,
        name: &str,
        recipes: &[&Arc<PackageRecipe>],
        keyring: &crate::openpgp::PinnedKeyring,
    ) -> Result<Option<(Vec<Resolved>, OpenSourceFiles)>, PipelineError> {
        let source = &self.recipes.sources[name];
        let Some(transport) = self.transport(name) else {
            // A directory named after the source is a snapshot: without its
            // signed files it is broken, not a plain directory of debs.
            if let Some(dir) = self
                .settings
                .source_dirs
                .iter()
                .map(|d| d.join(name))
                .find(|d| d.is_dir())
            {
                return Err(PipelineError::SnapshotIncomplete {
                    source_name: name.to_string(),
                    missing: format!("{}InRelease (nor Release)", source.release_dir()),
                    dir,
                });
            }
            return Ok(None);
        };
        for fp in &keyring.missing {
            self.observer.event(crate::fetch::Event::Warning {
                message: format!(
                    "source '{name}': the key file {} does not hold the pinned key {fp}; a signature by another pinned key is still accepted",
                    source.key.display()
                ),
            });
        }
        let mut open = OpenSource::open(source, keyring, transport, self.settings.now)?;
        let wanted: Vec<(&str, &str)> = recipes
            .iter()
            .map(|p| (p.name.as_str(), p.version.as_str()))
            .collect();
        let mut out = Vec::new();
        for p in recipes {
            open.load_index(&p.architecture, &wanted, &self.settings.cache)?;
            let f = open.find(&p.name, &p.version, &p.architecture)?;
            out.push(Resolved {
                repack: p.repack.clone(),
                for_base: p.for_base,
                locked: Arc::new(LockedPackage::from(LockEntry {
                    name: p.name.clone(),
                    version: p.version.clone(),
                    architecture: p.architecture.clone(),
                    origin: name.to_string(),
                    url: format!("{}{}", source.url, f.path),
                    path: f.path,
                    size: f.size,
                    sha256: f.sha256,
                    sha512: f.sha512,
                    index_digests: f.index_digests,
                    index: f.index,
                    index_sha256: f.index_sha256,
                    release_sha256: f.release_sha256,
                    for_base: p.for_base,
                })),
                from: FetchFrom::Source(name.to_string()),
                seen: None,
            });
        }
        let files = OpenSourceFiles {
            source: name.to_string(),
            signed: open.signed_files.clone(),
            indexes: open.index_files.clone(),
        };
        Ok(Some((out, files)))
    }

    fn resolve_url(
        &self,
        p: &Arc<PackageRecipe>,
        url: &str,
        sha256: &str,
        size: u64,
        lock: Option<&Lock>,
    ) -> Result<Resolved, PipelineError> {
        let file = url.rsplit('/').next().unwrap_or("package.deb").to_string();
        let sha512 = lock
            .and_then(|l| l.get(&p.name, &p.architecture))
            .filter(|l| l.sha256() == sha256 && l.size == size)
            .and_then(|l| l.sha512().map(str::to_string));
        let from = if self.settings.source_dirs.is_empty() {
            FetchFrom::Url(url.to_string())
        } else {
            FetchFrom::Local(self.find_in_dirs(&p.name, &file)?)
        };
        Ok(Resolved {
            repack: p.repack.clone(),
            for_base: p.for_base,
            locked: Arc::new(direct_entry(
                p,
                "url",
                file,
                url.to_string(),
                size,
                sha256.to_string(),
                sha512,
            )),
            from,
            seen: None,
        })
    }

    /// Source `name`'s whole index for `arch`, through its signed Release
    /// (the local, verified file): what a closure is picked from.
    pub fn source_index(&self, name: &str, arch: &str) -> Result<PathBuf, PipelineError> {
        let open = self.open_whole(name)?;
        Ok(open.verified_index(arch, &self.settings.cache)?)
    }

    /// Source `name`'s signed files and its whole index for each of
    /// `archs`, verified: what a snapshot holds of a source read whole
    /// (the lab's base, the closure's source).
    pub fn source_files(
        &self,
        name: &str,
        archs: &[String],
    ) -> Result<OpenSourceFiles, PipelineError> {
        let open = self.open_whole(name)?;
        let mut indexes = BTreeMap::new();
        for arch in archs {
            let (path, local) = open.verified_index_at(arch, &self.settings.cache)?;
            indexes.insert(path, local);
        }
        Ok(OpenSourceFiles {
            source: name.to_string(),
            signed: open.signed_files.clone(),
            indexes,
        })
    }

    /// Source `name` opened through its signed Release, to read an index
    /// whole.
    fn open_whole(&self, name: &str) -> Result<OpenSource<'_>, PipelineError> {
        let source = self
            .recipes
            .sources
            .get(name)
            .ok_or_else(|| PipelineError::NoSuchSource {
                source_name: name.to_string(),
            })?;
        let keyring = upstream::load_keyring(source, &self.recipes.root())?;
        let transport = self
            .transport(name)
            .ok_or_else(|| PipelineError::NoSuchSource {
                source_name: name.to_string(),
            })?;
        Ok(OpenSource::open(
            source,
            &keyring,
            transport,
            self.settings.now,
        )?)
    }

    /// Every path recipe (with its file's path), in order, resolved on all
    /// cores: thousands of local files are read at once, not one after
    /// another. Each recipe comes back with its result and goes here (its
    /// memory is this thread's), unless another holds it.
    fn resolve_paths(
        &self,
        recipes: Vec<(Arc<PackageRecipe>, Arc<Path>)>,
    ) -> Vec<Result<Resolved, PipelineError>> {
        // Held to the end of the build: each resolved package, and the
        // control of a file seen for the first time, are kept in this
        // thread's memory (see `crate::cores`).
        self.records.reserve(recipes.len());
        // Only a lock read already (`--locked` reads it first): a build
        // that does not need the file does not parse it for this.
        let share = self.lock_if_read().map(LockShare::of);
        crate::cores::map_kept_owned(
            recipes,
            |(p, file)| {
                let Origin::Path { path } = &p.origin else {
                    unreachable!("only path recipes")
                };
                let resolved = self.resolve_path(&p, path, &file);
                (resolved, p)
            },
            |(r, recipe)| {
                drop(recipe);
                r.map(|(resolved, control)| {
                    if let Some(text) = control {
                        self.records.put_control(resolved.locked.sha256(), &text);
                    }
                    resolved.kept(share.as_ref())
                })
            },
        )
    }

    /// A local package file not seen before: opened once for its digests,
    /// its control paragraph and (where no repack reads it anyway) the check
    /// of its data member, each recorded (the control by the caller), so
    /// that nothing opens it again this run. A file that is no package is
    /// only hashed: the steps that read it later say what is wrong with it.
    fn first_sight(
        &self,
        path: &Path,
        meta: &fs::Metadata,
        check_data: bool,
    ) -> std::io::Result<FirstSight> {
        use crate::digest::{DigestSet, Hasher, digest_with};
        let Ok(deb) = crate::deb::DebFile::open(path) else {
            let digests = self.records.digests_with(path, meta)?;
            return Ok(FirstSight {
                digests,
                control: None,
                as_stat: false,
            });
        };
        let d = digest_with(deb.raw_whole(), Hasher::new(DigestSet::SHA256))?;
        let control = deb.control_files().ok().map(|f| f.control.to_string());
        let data_checked = check_data && deb.check_data().is_ok();
        // All of it read from the file stat'ed, unchanged since (its own
        // fstat, after the reading), or nothing recorded: the digests are
        // what was read, and the file is checked again where it is used.
        let read = crate::files::FileIdentity::of(&deb.metadata()?);
        let as_stat = d.size == meta.len() && read == crate::files::FileIdentity::of(meta);
        if as_stat {
            self.records.put_digests(meta, &d);
            if data_checked {
                self.records.put_data_checked(&d.sha256);
            }
        }
        Ok(FirstSight {
            digests: d,
            control: control.filter(|_| as_stat),
            as_stat,
        })
    }

    /// A path recipe's file, and its control where it was read for the
    /// first time (for the records).
    fn resolve_path(
        &self,
        p: &Arc<PackageRecipe>,
        path: &Path,
        file: &Arc<Path>,
    ) -> Result<(Resolved, Option<String>), PipelineError> {
        let full: &Path = file;
        // A package file may live outside recipes/ (a build's output
        // directory), but it must be a regular file: `/dev/zero` would be
        // read for ever. A link's target is the file (the pool links it;
        // a link as the last component would be linked as a link).
        let (file, meta) = match fs::symlink_metadata(full) {
            Ok(m) if m.is_symlink() => {
                let target = fs::canonicalize(full).map_err(FileError::at(full))?;
                let m = fs::metadata(&target).map_err(FileError::at(&target))?;
                (Arc::from(target.as_path()), Ok(m))
            }
            lstat => (Arc::clone(file), lstat),
        };
        let meta = match meta {
            Ok(m) if m.is_file() => m,
            Ok(_) => {
                return Err(PipelineError::BadPackage {
                    path: full.to_path_buf(),
                    reason: format!("{}: from.path is not a regular file", p.name),
                });
            }
            Err(e) => return Err(FileError::at(full)(e).into()),
        };
        // A local file vouches for itself; unchanged since the last run, it
        // is not read again.
        // The file stat'ed is the one read (a link pointed elsewhere
        // meanwhile is not followed again). One replaced or changed as it
        // was read is named by no identity here: the fetch checks it again,
        // and the build stamp takes it as it is then.
        let stat = crate::files::FileIdentity::of(&meta);
        let (d, control, seen) = match self.records.recorded(&meta) {
            Some(d) => (d, None, Some(stat)),
            None => {
                let first = self
                    .first_sight(&file, &meta, p.repack.is_none())
                    .map_err(FileError::at(&file))?;
                (first.digests, first.control, first.as_stat.then_some(stat))
            }
        };
        let url = format!("file://{}", full.display());
        let resolved = Resolved {
            repack: p.repack.clone(),
            for_base: p.for_base,
            locked: Arc::new(direct_entry(
                p,
                "path",
                path.display().to_string(),
                url,
                d.size,
                d.sha256,
                d.sha512,
            )),
            from: FetchFrom::InPlace(file),
            seen,
        };
        Ok((resolved, control))
    }

    /// Offline, no snapshot of the source: the lock's entry vouches for a
    /// file of that name in one of the directories.
    fn resolve_plain(
        &self,
        p: &Arc<PackageRecipe>,
        source: &str,
        lock: Option<&Lock>,
    ) -> Result<Resolved, PipelineError> {
        let dirs = self.dirs_text();
        let Some(locked) = lock
            .and_then(|l| l.get(&p.name, &p.architecture))
            .filter(|l| l.version() == p.version)
        else {
            return Err(PipelineError::NotInSnapshot {
                package: p.name.clone(),
                source_name: source.into(),
                dirs,
            });
        };
        let file = locked
            .path()
            .rsplit('/')
            .next()
            .unwrap_or(locked.path())
            .to_string();
        let local = self.find_in_dirs(&p.name, &file)?;
        Ok(Resolved {
            repack: p.repack.clone(),
            for_base: p.for_base,
            locked: Arc::new(locked.clone()),
            from: FetchFrom::Local(local),
            seen: None,
        })
    }

    pub(super) fn dirs_text(&self) -> String {
        self.settings
            .source_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn find_in_dirs(&self, package: &str, file: &str) -> Result<PathBuf, PipelineError> {
        for d in &self.settings.source_dirs {
            for candidate in [d.join(file), d.join("direct").join(file)] {
                if candidate.is_file() {
                    return Ok(candidate);
                }
            }
        }
        Err(PipelineError::FileNotFound {
            package: package.into(),
            file: file.into(),
            dirs: self.dirs_text(),
        })
    }

    /// With `--locked`, before anything is fetched: any difference from
    /// the lock file is an error.
    pub fn check_locked(&self, resolved: &[Resolved]) -> Result<(), PipelineError> {
        let new = Lock::new(resolved.iter().map(|r| Arc::clone(&r.locked)));
        self.compare_lock(&new).map(drop)
    }

    /// The lock in force after fetching. With `locked`, the lock file's,
    /// and any difference from what was fetched is an error. Otherwise the
    /// lock `entries` make, written where the file does not hold its text
    /// already: the file is not parsed, only compared (a lock file that says
    /// the same in other words is written in debforge's). Returns the lock,
    /// and the lock file as the run leaves it.
    pub fn settle_lock(
        &self,
        entries: impl Iterator<Item = Arc<LockedPackage>>,
        locked: bool,
    ) -> Result<(Lock, super::SettledLock), PipelineError> {
        let new = Lock::new(entries);
        if !locked {
            // A reading a resolve needed goes: its share is not held on.
            self.forget_lock();
            let settled = self.write_lock_unless_same(&new)?;
            return Ok((new, settled));
        }
        let old = self.compare_lock(&new)?;
        let read = self.read_lock_sha256().unwrap_or_default();
        // The last reading: the cache's share goes, so that the lock in
        // force is not a copy (an entry per package).
        self.forget_lock();
        drop(new);
        let settled = super::SettledLock {
            sha256: read,
            written: None,
        };
        Ok((Arc::unwrap_or_clone(old), settled))
    }

    /// [`Session::settle_lock`] where the caller keeps no lock (a build):
    /// written, each entry goes once its table is
    /// ([`Session::write_lock_releasing`]).
    pub fn settle_lock_releasing(
        &self,
        entries: impl Iterator<Item = Arc<LockedPackage>>,
        locked: bool,
    ) -> Result<super::SettledLock, PipelineError> {
        if locked {
            return self.settle_lock(entries, true).map(|(_, settled)| settled);
        }
        let new = Lock::new(entries);
        self.forget_lock();
        self.write_lock_releasing(new)
    }

    /// The lock file, where it says what `new` says; an error where it
    /// differs or there is none.
    fn compare_lock(&self, new: &Lock) -> Result<Arc<Lock>, PipelineError> {
        let Some(old) = self.read_lock()? else {
            return Err(PipelineError::NoLock {
                path: self.lock_path.clone(),
            });
        };
        let differences = old.differences(new);
        if differences.is_empty() {
            Ok(old)
        } else {
            Err(PipelineError::LockMismatch {
                path: self.lock_path.clone(),
                differences,
            })
        }
    }
}

/// How what an upstream offers now differs from the lock, for one package.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "change")]
pub enum UpstreamChange {
    /// The locked version is gone from the signed index.
    Removed {
        package: String,
        architecture: String,
        version: String,
    },
    /// The red flag: the locked version, with other bytes.
    ChangedBytes {
        package: String,
        architecture: String,
        version: String,
        locked: String,
        offered: String,
    },
    /// Newer versions are offered (the recipe still asks for the locked one).
    Newer {
        package: String,
        architecture: String,
        locked: String,
        offered: Vec<String>,
    },
}

impl Session<'_> {
    /// What each upstream offers now, through its signed Release and index,
    /// against the lock: versions gone, bytes changed, newer versions.
    pub fn upstream_changes(&self, lock: &Lock) -> Result<Vec<UpstreamChange>, PipelineError> {
        use crate::format::version::Version;
        let mut out = Vec::new();
        let root = self.recipes.root();
        let mut by_source: BTreeMap<&str, Vec<&Arc<PackageRecipe>>> = BTreeMap::new();
        for p in &self.recipes.packages {
            if let Origin::Upstream { source } = &p.origin {
                by_source.entry(source.as_str()).or_default().push(p);
            }
        }
        for (name, recipes) in by_source {
            let source = &self.recipes.sources[name];
            let Some(transport) = self.transport(name) else {
                continue;
            };
            let keyring = upstream::load_keyring(source, &root)?;
            let mut open = OpenSource::open(source, &keyring, transport, self.settings.now)?;
            let wanted: Vec<(&str, &str)> = recipes
                .iter()
                .map(|p| (p.name.as_str(), p.version.as_str()))
                .collect();
            for p in recipes {
                open.load_index(&p.architecture, &wanted, &self.settings.cache)?;
                let Some(locked) = lock.get(&p.name, &p.architecture) else {
                    continue;
                };
                let offered = open.offered(&p.name, &p.architecture);
                let parse = |v: &str| Version::parse_lenient(v).ok().map(|(v, _)| v);
                let locked_v = parse(locked.version());
                let same = |v: &str| match (parse(v), &locked_v) {
                    (Some(a), Some(b)) => a == *b,
                    _ => v == locked.version(),
                };
                match offered.iter().find(|(v, _)| same(v)) {
                    None => out.push(UpstreamChange::Removed {
                        package: p.name.clone(),
                        architecture: p.architecture.clone(),
                        version: locked.version().to_string(),
                    }),
                    Some((_, sha)) if *sha != locked.sha256() => {
                        out.push(UpstreamChange::ChangedBytes {
                            package: p.name.clone(),
                            architecture: p.architecture.clone(),
                            version: locked.version().to_string(),
                            locked: locked.sha256().to_string(),
                            offered: sha.clone(),
                        })
                    }
                    Some(_) => {}
                }
                let mut newer: Vec<(Version, String)> = offered
                    .iter()
                    .filter_map(|(v, _)| Some((parse(v)?, v.clone())))
                    .filter(|(v, _)| locked_v.as_ref().is_some_and(|l| v.compare(l).is_gt()))
                    .collect();
                newer.sort_by(|a, b| a.0.compare(&b.0));
                newer.dedup_by(|a, b| a.1 == b.1);
                if !newer.is_empty() {
                    out.push(UpstreamChange::Newer {
                        package: p.name.clone(),
                        architecture: p.architecture.clone(),
                        locked: locked.version().to_string(),
                        offered: newer.into_iter().map(|(_, s)| s).collect(),
                    });
                }
            }
        }
        Ok(out)
    }
}

/// What [`Session::first_sight`] read of a package file: its digests, its
/// control, and whether it was the file stat'ed, unchanged as it was read
/// (else nothing was recorded of it).
struct FirstSight {
    digests: crate::digest::Digests,
    control: Option<String>,
    as_stat: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A resolved package takes the lock's own entry only where it says
    /// the same in every field; among entries of one name, the one of its
    /// architecture.
    #[test]
    fn a_lock_entry_is_shared_only_where_it_says_the_same() {
        let entry = |name: &str, arch: &str, sha: char| crate::recipe::lock::LockEntry {
            name: name.into(),
            version: "1".into(),
            architecture: arch.into(),
            origin: "path".into(),
            path: format!("/d/{name}.deb"),
            url: format!("file:///d/{name}.deb"),
            size: 1,
            sha256: sha.to_string().repeat(64),
            ..Default::default()
        };
        let lock = Arc::new(Lock::new(
            [("b", "amd64"), ("a", "arm64"), ("a", "amd64"), ("c", "all")]
                .map(|(n, a)| LockedPackage::from(entry(n, a, 'a'))),
        ));
        let share = LockShare::of(Arc::clone(&lock));
        let same = LockedPackage::from(entry("a", "amd64", 'a'));
        let shared = share.same_as(&same).expect("the lock's entry");
        assert!(lock.package.iter().any(|p| Arc::ptr_eq(p, &shared)));
        assert_eq!(shared.architecture(), "amd64");
        for other in [
            entry("a", "amd64", 'b'),
            entry("a", "i386", 'a'),
            entry("d", "all", 'a'),
            crate::recipe::lock::LockEntry {
                for_base: true,
                ..entry("c", "all", 'a')
            },
        ] {
            assert_eq!(share.same_as(&LockedPackage::from(other)), None);
        }
    }

    /// A session over `dir`'s `recipes/` and `cache/`, offline, looking
    /// for files in `source_dirs`.
    fn session_in(
        dir: &Path,
        source_dirs: Vec<PathBuf>,
        packages: Vec<Arc<PackageRecipe>>,
    ) -> Session<'static> {
        let settings = super::super::Settings {
            cache: dir.join("cache"),
            overrides: Default::default(),
            source_dirs,
            http: Default::default(),
            parallel: 1,
            now: 0,
        };
        let recipes = crate::recipe::RecipeSet {
            dir: dir.join("recipes"),
            sources: Default::default(),
            packages,
        };
        Session::new(recipes, settings, &crate::report::Quiet).unwrap()
    }

    #[test]
    fn a_package_file_is_recorded_only_under_the_identity_of_the_file_read() {
        use crate::repo::test_support::tiny_deb;
        let dir = tempfile::tempdir().unwrap();
        let session = session_in(dir.path(), Vec::new(), Vec::new());
        let a = tiny_deb(dir.path(), "liba", "1.0-1", None).file;
        let b = tiny_deb(dir.path(), "liba", "1.1-1", None).file;
        let (meta_a, meta_b) = (
            std::fs::metadata(&a).unwrap(),
            std::fs::metadata(&b).unwrap(),
        );
        // B read where A was stat'ed (A replaced by B in between): B's
        // digests, recorded under no identity, its control not kept.
        let seen = session.first_sight(&b, &meta_a, true).unwrap();
        assert_eq!(seen.digests.sha256, crate::digest::sha256_file(&b).unwrap());
        assert!(!seen.as_stat && seen.control.is_none());
        assert!(session.records.recorded(&meta_a).is_none());
        assert!(session.records.recorded(&meta_b).is_none());
        // The file stat'ed, read: recorded under its identity.
        let seen = session.first_sight(&b, &meta_b, true).unwrap();
        assert!(seen.as_stat && seen.control.is_some());
        let recorded = session.records.recorded(&meta_b).unwrap();
        assert_eq!(recorded.sha256, seen.digests.sha256);
    }

    #[test]
    fn the_first_problem_is_in_recipe_order_and_a_build_lets_its_plain_recipes_go() {
        use crate::repo::test_support::tiny_deb;
        let dir = tempfile::tempdir().unwrap();
        let debs = dir.path().join("debs");
        std::fs::create_dir_all(&debs).unwrap();
        let good = tiny_deb(&debs, "libc1", "1", None).file;
        let recipe = |name: &str, from: &str| {
            let text = format!(
                "name = \"{name}\"\nversion = \"1\"\narchitecture = \"amd64\"\nfrom = {from}\n"
            );
            let file = dir.path().join(format!("recipes/packages/{name}.toml"));
            Arc::new(crate::recipe::parse_package(&file, &text, &Default::default()).unwrap())
        };
        let path = |p: &Path| format!("{{ path = \"{}\" }}", p.display());
        let url = format!(
            "{{ url = \"https://e.org/libb1.deb\", sha256 = \"{}\", size = 1 }}",
            "a".repeat(64)
        );
        // The URL's file is looked for in offline/, and not found.
        let session = |packages| session_in(dir.path(), vec![dir.path().join("offline")], packages);
        let missing = |name: &str| recipe(name, &path(&debs.join(format!("{name}.deb"))));
        // A path recipe's problem, then a URL's, then a path recipe's: each
        // said first when it comes first.
        let e = session(vec![
            missing("liba1"),
            recipe("libb1", &url),
            missing("libc1"),
        ])
        .resolve()
        .unwrap_err();
        assert!(e.to_string().contains("liba1.deb"), "{e}");
        let e = session(vec![
            recipe("liba1", &path(&good)),
            recipe("libb1", &url),
            missing("libc1"),
        ])
        .resolve()
        .unwrap_err();
        assert!(matches!(e, PipelineError::FileNotFound { .. }), "{e}");
        let e = session(vec![recipe("libb1", &path(&good)), missing("libc1")])
            .resolve()
            .unwrap_err();
        assert!(e.to_string().contains("libc1.deb"), "{e}");
        // A build's resolve: the plain recipes leave the session and go once
        // resolved; what fetching and preparing read of them comes along.
        let plain = recipe("libc1", &path(&good));
        let mut build = session(vec![Arc::clone(&plain)]);
        let (resolved, _) = build.resolve_releasing().unwrap();
        assert!(build.recipes.packages.is_empty());
        assert_eq!(Arc::strong_count(&plain), 1, "the recipe is held still");
        assert_eq!(resolved.len(), 1);
        assert!(resolved[0].repack.is_none() && !resolved[0].for_base);
        assert_eq!(resolved[0].locked.name(), "libc1");
    }
}
