//! The chain behind `debforge lock`, `fetch` and `build`: resolve every
//! recipe through its trust chain, check or update the lock file, fetch the
//! files into the cache (verified), and write snapshots or the output.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::deb::DebFile;
use crate::digest::strong_digest_reader;
use crate::fetch::{Expected, FetchError, Http, HttpOptions, Observer};
use crate::openpgp::sign::SigningKey;
use crate::recipe::lock::{Lock, LockError, LockedPackage};
use crate::recipe::{Origin, PackageRecipe, RecipeError, RecipeSet};
use crate::repo::{IndexReport, RepoConfig};
use crate::upstream::{self, DirTransport, HttpTransport, OpenSource, Transport, UpstreamError};
use sha2::{Digest, Sha256};

/// Where and how to work.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Verified downloads live here: `debs/<sha256>/<file>`, `indexes/…`.
    pub cache: PathBuf,
    /// `--source NAME=URL`: replace a source's base URL (tests, LAN caches).
    pub overrides: BTreeMap<String, String>,
    /// `--source-dir DIR`: air-gapped; never touch the network.
    pub source_dirs: Vec<PathBuf>,
    pub http: HttpOptions,
    /// Downloads at once.
    pub parallel: usize,
    /// Seconds since the epoch, for `Valid-Until`.
    pub now: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("{0}")]
    Recipe(#[from] RecipeError),
    #[error("{}: {source}", path.display())]
    Lock { path: PathBuf, source: LockError },
    #[error("{0}")]
    Upstream(Box<UpstreamError>),
    #[error("{package}: {source}")]
    Fetch { package: String, source: FetchError },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--source {0}: no such source in sources.toml")]
    UnknownOverride(String),
    #[error("{} does not exist: run `debforge lock` first (--locked needs it)", path.display())]
    NoLock { path: PathBuf },
    #[error("the lock file {} does not match what the recipes resolve to:\n  {}", path.display(), differences.join("\n  "))]
    LockMismatch {
        path: PathBuf,
        differences: Vec<String>,
    },
    #[error(
        "{package}: offline (--source-dir) and no snapshot of source '{source_name}' in {dirs}; a plain directory of debs needs the lock file's hashes"
    )]
    NotInSnapshot {
        package: String,
        source_name: String,
        dirs: String,
    },
    #[error(
        "{}: the snapshot of source '{source_name}' has no {missing}: it is incomplete (the signed Release is what vouches for every file in it); make it again with `debforge fetch --to DIR` where the upstream is reachable",
        dir.display()
    )]
    SnapshotIncomplete {
        source_name: String,
        dir: PathBuf,
        missing: String,
    },
    #[error("{}: {reason}", path.display())]
    BadPackage { path: PathBuf, reason: String },
    #[error("{package}: {file} is not in any --source-dir ({dirs})")]
    FileNotFound {
        package: String,
        file: String,
        dirs: String,
    },
    #[error("{}: {source}", path.display())]
    Deb {
        path: PathBuf,
        source: crate::deb::DebError,
    },
    #[error("{0}")]
    Repo(Box<crate::repo::RepoError>),
    #[error("{}: {message}", path.display())]
    Script { path: PathBuf, message: String },
    #[error("{package}: {message}")]
    Scratch { package: String, message: String },
    #[error("{package}: {source}")]
    Repack {
        package: String,
        source: crate::deb::repack::RepackError,
    },
    #[error("another debforge build is writing {} (it holds {}); wait for it to finish", out.display(), lock.display())]
    Busy { out: PathBuf, lock: PathBuf },
}

impl From<UpstreamError> for PipelineError {
    fn from(e: UpstreamError) -> Self {
        PipelineError::Upstream(Box::new(e))
    }
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> PipelineError + '_ {
    move |source| PipelineError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// How a resolved file will be fetched.
#[derive(Debug, Clone)]
enum FetchFrom {
    /// Through the transport of this source (network or snapshot).
    Source(String),
    /// A direct URL.
    Url(String),
    /// A file on disk (local recipes, plain directories of debs).
    Local(PathBuf),
}

/// One recipe's file, resolved through its trust chain.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub recipe: PackageRecipe,
    pub locked: LockedPackage,
    from: FetchFrom,
}

impl Resolved {
    pub fn file_name(&self) -> &str {
        self.locked
            .path
            .rsplit('/')
            .next()
            .unwrap_or(&self.locked.path)
    }
    fn expected(&self) -> Expected {
        Expected {
            size: self.locked.size,
            sha256: Some(self.locked.sha256.clone()),
            sha512: self.locked.sha512.clone(),
        }
    }
}

/// A verified file in the cache.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub resolved: Resolved,
    pub file: PathBuf,
    /// What goes into the pool: the fetched file itself, or its repack.
    pub publish: PathBuf,
    pub publish_sha256: String,
    /// The control paragraph of `publish`, read from that file: the
    /// package's identity (name, version, architecture) downstream, never
    /// what the recipe or the lock said it would be.
    pub control: crate::format::deb822::ControlParagraph,
}

impl Fetched {
    pub fn package(&self) -> &str {
        self.control.get("Package").unwrap_or_default()
    }
    pub fn version(&self) -> &str {
        self.control.get("Version").unwrap_or_default()
    }
    pub fn architecture(&self) -> &str {
        self.control.get("Architecture").unwrap_or_default()
    }
}

/// The control paragraph of a package file (only its control member is read).
fn read_control(path: &Path) -> Result<crate::format::deb822::ControlParagraph, PipelineError> {
    let deb = DebFile::open(path).map_err(|source| PipelineError::Deb {
        path: path.to_path_buf(),
        source,
    })?;
    let control = deb
        .control_files()
        .map_err(|source| PipelineError::Deb {
            path: path.to_path_buf(),
            source,
        })?
        .control;
    Ok(control)
}

/// Each package's version as its own file says (prepared artifacts) or as
/// its recipe builds it (`action = "build"`): what exact dependencies,
/// `@VERSION_OF:…@` and the pins use.
pub fn package_versions(prepared: &[Fetched], recipes: &RecipeSet) -> BTreeMap<String, String> {
    let mut v: BTreeMap<String, String> = prepared
        .iter()
        .map(|f| (f.package().to_string(), f.version().to_string()))
        .collect();
    for p in &recipes.packages {
        if p.build.is_some() {
            v.insert(p.name.clone(), p.version.clone());
        }
    }
    v
}

/// The state of one run: recipes, transports, opened sources.
pub struct Session<'a> {
    pub recipes: RecipeSet,
    pub settings: Settings,
    http: Option<Http>,
    observer: &'a dyn Observer,
    lock_path: PathBuf,
}

impl<'a> Session<'a> {
    pub fn new(
        recipes: RecipeSet,
        settings: Settings,
        observer: &'a dyn Observer,
    ) -> Result<Session<'a>, PipelineError> {
        for name in settings.overrides.keys() {
            if !recipes.sources.contains_key(name) {
                return Err(PipelineError::UnknownOverride(name.clone()));
            }
        }
        let http = if settings.source_dirs.is_empty() {
            Some(
                Http::new(settings.http.clone()).map_err(|e| PipelineError::Fetch {
                    package: "(setup)".into(),
                    source: e,
                })?,
            )
        } else {
            None
        };
        let lock_path = recipes.dir.join("debforge.lock");
        Ok(Session {
            recipes,
            settings,
            http,
            observer,
            lock_path,
        })
    }

    pub fn lock_path(&self) -> &Path {
        &self.lock_path
    }

    /// The lock file on disk, if there is one.
    pub fn read_lock(&self) -> Result<Option<Lock>, PipelineError> {
        match fs::read_to_string(&self.lock_path) {
            Ok(text) => Lock::parse(&text)
                .map(Some)
                .map_err(|source| PipelineError::Lock {
                    path: self.lock_path.clone(),
                    source,
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(&self.lock_path)(e)),
        }
    }

    /// Writes the lock file atomically (temporary name, then rename).
    pub fn write_lock(&self, lock: &Lock) -> Result<(), PipelineError> {
        write_atomic(&self.lock_path, lock.to_text().as_bytes())
    }

    fn transport_for(&self, source: &str) -> Option<Box<dyn Transport + '_>> {
        let src = &self.recipes.sources[source];
        if !self.settings.source_dirs.is_empty() {
            // Air-gapped: a snapshot directory holding this source's signed files.
            return self
                .settings
                .source_dirs
                .iter()
                .map(|d| d.join(source))
                .find(|d| {
                    ["InRelease", "Release"]
                        .iter()
                        .any(|f| d.join(src.release_dir()).join(f).exists())
                })
                .map(|root| Box::new(DirTransport { root }) as Box<dyn Transport>);
        }
        let base = self
            .settings
            .overrides
            .get(source)
            .cloned()
            .unwrap_or_else(|| src.url.clone());
        let base = if base.ends_with('/') {
            base
        } else {
            format!("{base}/")
        };
        if let Some(path) = base.strip_prefix("file://") {
            return Some(Box::new(DirTransport {
                root: PathBuf::from(path),
            }));
        }
        Some(Box::new(HttpTransport {
            http: self.http.as_ref().expect("online"),
            base,
            observer: self.observer,
        }))
    }

    /// Resolves every recipe. Upstream packages go through their source's
    /// signed Release and index; offline, a source with no snapshot falls back
    /// to the lock file's hashes and a plain directory of debs.
    pub fn resolve(
        &self,
        lock: Option<&Lock>,
    ) -> Result<(Vec<Resolved>, Vec<OpenSourceFiles>), PipelineError> {
        let mut out = Vec::new();
        let mut opened = Vec::new();
        let mut by_source: BTreeMap<&str, Vec<&PackageRecipe>> = BTreeMap::new();
        for p in &self.recipes.packages {
            match &p.origin {
                Origin::Upstream { source } => {
                    by_source.entry(source.as_str()).or_default().push(p)
                }
                Origin::Url { url, sha256, size } => {
                    out.push(self.resolve_url(p, url, sha256, *size, lock)?)
                }
                Origin::Path { path } => out.push(self.resolve_path(p, path)?),
                // Made by the build, after fetching: nothing to resolve.
                Origin::Built => {}
            }
        }
        let root = self.recipes.root();
        for (name, recipes) in by_source {
            let source = &self.recipes.sources[name];
            let Some(transport) = self.transport_for(name) else {
                // A directory named after the source is a snapshot: without
                // its signed files it is broken, not a plain directory of debs.
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
                for p in recipes {
                    out.push(self.resolve_plain(p, name, lock)?);
                }
                continue;
            };
            let keyring = upstream::load_keyring(source, &root)?;
            for fp in &keyring.missing {
                self.observer.event(crate::fetch::Event::Warning {
                    message: format!(
                        "source '{name}': the key file {} does not hold the pinned key {fp}; a signature by another pinned key is still accepted",
                        source.key.display()
                    ),
                });
            }
            let mut open =
                OpenSource::open(source, &keyring, transport.as_ref(), self.settings.now)?;
            let names: Vec<&str> = recipes.iter().map(|p| p.name.as_str()).collect();
            for p in &recipes {
                open.load_index(&p.architecture, &names, &self.settings.cache)?;
                let f = open.find(&p.name, &p.version, &p.architecture)?;
                let url = format!("{}{}", source.url, f.path);
                out.push(Resolved {
                    recipe: (*p).clone(),
                    locked: LockedPackage {
                        name: p.name.clone(),
                        version: p.version.clone(),
                        architecture: p.architecture.clone(),
                        origin: name.to_string(),
                        path: f.path,
                        url,
                        size: f.size,
                        sha256: f.sha256,
                        sha512: f.sha512,
                        index_digests: f.index_digests,
                        index: f.index,
                        index_sha256: f.index_sha256,
                        release_sha256: f.release_sha256,
                    },
                    from: FetchFrom::Source(name.to_string()),
                });
            }
            opened.push(OpenSourceFiles {
                source: name.to_string(),
                signed: open.signed_files.clone(),
                indexes: open.index_files.clone(),
            });
        }
        out.sort_by(|a, b| {
            (&a.locked.name, &a.locked.architecture).cmp(&(&b.locked.name, &b.locked.architecture))
        });
        Ok((out, opened))
    }

    fn resolve_url(
        &self,
        p: &PackageRecipe,
        url: &str,
        sha256: &str,
        size: u64,
        lock: Option<&Lock>,
    ) -> Result<Resolved, PipelineError> {
        let file = url.rsplit('/').next().unwrap_or("package.deb").to_string();
        let sha512 = lock
            .and_then(|l| l.get(&p.name, &p.architecture))
            .filter(|l| l.sha256 == sha256 && l.size == size)
            .and_then(|l| l.sha512.clone());
        let from = if self.settings.source_dirs.is_empty() {
            FetchFrom::Url(url.to_string())
        } else {
            FetchFrom::Local(self.find_in_dirs(&p.name, &file)?)
        };
        Ok(Resolved {
            recipe: p.clone(),
            locked: direct_entry(
                p,
                "url",
                file,
                url.to_string(),
                size,
                sha256.to_string(),
                sha512,
            ),
            from,
        })
    }

    fn resolve_path(&self, p: &PackageRecipe, path: &Path) -> Result<Resolved, PipelineError> {
        let full = self.recipes.dir.join(path);
        // A local file vouches for itself; unchanged since the last run, it
        // is not read again.
        let d = crate::repo::pool::DigestStore::new(Some(self.settings.cache.join("digests")))
            .digests_of(&full)
            .map_err(io(&full))?;
        let url = format!("file://{}", full.display());
        Ok(Resolved {
            recipe: p.clone(),
            locked: direct_entry(
                p,
                "path",
                path.display().to_string(),
                url,
                d.size,
                d.sha256,
                Some(d.sha512),
            ),
            from: FetchFrom::Local(full),
        })
    }

    /// Offline, no snapshot of the source: the lock's entry vouches for a
    /// file of that name in one of the directories.
    fn resolve_plain(
        &self,
        p: &PackageRecipe,
        source: &str,
        lock: Option<&Lock>,
    ) -> Result<Resolved, PipelineError> {
        let dirs = self.dirs_text();
        let Some(locked) = lock
            .and_then(|l| l.get(&p.name, &p.architecture))
            .filter(|l| l.version == p.version)
        else {
            return Err(PipelineError::NotInSnapshot {
                package: p.name.clone(),
                source_name: source.into(),
                dirs,
            });
        };
        let file = locked
            .path
            .rsplit('/')
            .next()
            .unwrap_or(&locked.path)
            .to_string();
        let local = self.find_in_dirs(&p.name, &file)?;
        Ok(Resolved {
            recipe: p.clone(),
            locked: locked.clone(),
            from: FetchFrom::Local(local),
        })
    }

    fn dirs_text(&self) -> String {
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

    /// Compares with the lock file: with `locked`, any difference is an error;
    /// otherwise the lock is (re)written when it changed. Returns the lock in force.
    pub fn check_lock(
        &self,
        resolved: &[Resolved],
        locked: bool,
    ) -> Result<(Lock, bool), PipelineError> {
        let new = Lock::new(resolved.iter().map(|r| r.locked.clone()).collect());
        let old = self.read_lock()?;
        match (old, locked) {
            (None, true) => Err(PipelineError::NoLock {
                path: self.lock_path.clone(),
            }),
            (Some(old), true) => {
                let differences = old.differences(&new);
                if differences.is_empty() {
                    Ok((old, false))
                } else {
                    Err(PipelineError::LockMismatch {
                        path: self.lock_path.clone(),
                        differences,
                    })
                }
            }
            (old, false) => {
                let changed = old.as_ref() != Some(&new);
                Ok((new, changed))
            }
        }
    }

    /// Fetches every resolved file into the cache, verified, a few at a time.
    /// Files already in the cache are not downloaded again.
    pub fn fetch(&self, resolved: &[Resolved]) -> Result<Vec<Fetched>, PipelineError> {
        // Two recipes may name the same file (same digest and name): it is
        // fetched once, then found in the cache, never by two workers at once.
        let mut seen = std::collections::BTreeSet::new();
        let (first, again): (Vec<_>, Vec<_>) = resolved
            .iter()
            .enumerate()
            .partition(|(_, r)| seen.insert(self.cache_path(r)));
        let queue = Mutex::new(first);
        let results: Mutex<Vec<(usize, Result<Fetched, PipelineError>)>> = Mutex::new(Vec::new());
        let transports: BTreeMap<String, Box<dyn Transport + '_>> = resolved
            .iter()
            .filter_map(|r| match &r.from {
                FetchFrom::Source(s) => Some(s.clone()),
                _ => None,
            })
            .filter_map(|s| self.transport_for(&s).map(|t| (s, t)))
            .collect();
        let workers = self
            .settings
            .parallel
            .clamp(1, 16)
            .min(resolved.len().max(1));
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| {
                    loop {
                        let Some((i, r)) = queue.lock().expect("queue").pop() else {
                            break;
                        };
                        let result = self.fetch_one(r, &transports);
                        let failed = result.is_err();
                        results.lock().expect("results").push((i, result));
                        if failed {
                            // Stop handing out work; running downloads finish.
                            queue.lock().expect("queue").clear();
                        }
                    }
                });
            }
        });
        let mut results = results.into_inner().expect("results");
        if results.iter().all(|(_, r)| r.is_ok()) {
            for (i, r) in again {
                results.push((i, self.fetch_one(r, &transports)));
            }
        }
        results.sort_by_key(|(i, _)| *i);
        results.into_iter().map(|(_, r)| r).collect()
    }

    /// Where the verified file of `r` lives in the cache.
    fn cache_path(&self, r: &Resolved) -> PathBuf {
        self.settings
            .cache
            .join("debs")
            .join(&r.locked.sha256)
            .join(r.file_name())
    }

    fn fetch_one(
        &self,
        r: &Resolved,
        transports: &BTreeMap<String, Box<dyn Transport + '_>>,
    ) -> Result<Fetched, PipelineError> {
        let dest = self.cache_path(r);
        let name = r.file_name().to_string();
        let fail = |source| PipelineError::Fetch {
            package: r.locked.name.clone(),
            source,
        };
        if fs::metadata(&dest).is_ok_and(|m| m.len() == r.locked.size) {
            // Only verified files are ever renamed into the cache.
            self.observer.event(crate::fetch::Event::Cached { name });
        } else {
            let expected = r.expected();
            // The lock records only what vouched for the file (the index or
            // the recipe), not the digests computed here.
            match &r.from {
                FetchFrom::Source(s) => {
                    let t = transports.get(s).expect("transport for every source");
                    t.fetch(&r.locked.path, &expected, &dest, &name)
                        .map_err(fail)?;
                    if t.is_local() {
                        self.observer.event(crate::fetch::Event::Copied {
                            name,
                            from: t.describe(&r.locked.path),
                        });
                    }
                }
                FetchFrom::Url(url) => {
                    self.http
                        .as_ref()
                        .expect("online")
                        .download(url, &expected, &dest, &name, self.observer)
                        .map_err(fail)?;
                }
                FetchFrom::Local(path) => {
                    upstream::copy_verified(path, &expected, &dest).map_err(fail)?;
                    self.observer.event(crate::fetch::Event::Copied {
                        name,
                        from: path.display().to_string(),
                    });
                }
            };
        }
        let resolved = r.clone();
        let publish_sha256 = resolved.locked.sha256.clone();
        let control = read_control(&dest)?;
        Ok(Fetched {
            resolved,
            publish: dest.clone(),
            file: dest,
            publish_sha256,
            control,
        })
    }
}

impl Session<'_> {
    /// Applies `action = "repack"` recipes: each such package is repacked
    /// (once: the result is cached under a key of its inputs) and published
    /// instead of the upstream file. `mtime` dates the new control member
    /// (SOURCE_DATE_EPOCH, else the upstream's own ar date).
    pub fn repack(
        &self,
        fetched: Vec<Fetched>,
        source_date_epoch: Option<u64>,
    ) -> Result<Vec<Fetched>, PipelineError> {
        let mut out = Vec::with_capacity(fetched.len());
        for mut f in fetched {
            let Some(r) = f.resolved.recipe.repack.clone() else {
                out.push(f);
                continue;
            };
            let locked = &f.resolved.locked;
            let mut scripts = Vec::new();
            let mut key = Sha256::new();
            key.update(b"debforge-repack-1\0");
            key.update(locked.sha256.as_bytes());
            for (name, rel) in &r.scripts {
                let path = self.recipes.dir.join(rel);
                let script = load_script(&path, &r.vars, &locked.name, &locked.version)?;
                key.update(name.as_bytes());
                key.update(b"\0");
                key.update(&script);
                key.update(b"\0");
                scripts.push((name.clone(), script));
            }
            let set: Vec<(String, String)> =
                r.set.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            for (k, v) in &set {
                key.update(format!("set {k}={v}\0").as_bytes());
            }
            if let Some(sfx) = &r.version_suffix {
                key.update(format!("suffix {sfx}\0").as_bytes());
            }
            let mtime = match source_date_epoch {
                Some(t) => t,
                None => {
                    DebFile::open(&f.file)
                        .map_err(|source| PipelineError::Deb {
                            path: f.file.clone(),
                            source,
                        })?
                        .data_member()
                        .mtime
                }
            };
            key.update(format!("mtime {mtime}").as_bytes());
            let key = hex::encode(key.finalize());
            let dir = self.settings.cache.join("repacked").join(&key[..32]);
            let dest = dir.join(f.resolved.file_name());
            let sidecar = dir.join("sha256");
            let cached = fs::read_to_string(&sidecar).ok().filter(|_| dest.exists());
            let sha256 = match cached {
                Some(s) => s.trim().to_string(),
                None => {
                    fs::create_dir_all(&dir).map_err(io(&dir))?;
                    let opts = crate::deb::repack::RepackOptions {
                        scripts,
                        set,
                        version_suffix: r.version_suffix.clone(),
                        mtime,
                    };
                    let report =
                        crate::deb::repack::repack(&f.file, &dest, &opts).map_err(|source| {
                            PipelineError::Repack {
                                package: locked.name.clone(),
                                source,
                            }
                        })?;
                    write_atomic(&sidecar, report.sha256.as_bytes())?;
                    report.sha256
                }
            };
            f.control = read_control(&dest)?;
            f.publish = dest;
            f.publish_sha256 = sha256;
            out.push(f);
        }
        Ok(out)
    }
}

impl Session<'_> {
    /// Builds the `action = "build"` recipes (the metapackage, the
    /// repo-config package) into the cache, dated `date`; the repo-config
    /// package gets `keyring` and the pins of every recipe.
    pub fn build_from_recipes(
        &self,
        config: &RepoConfig,
        keyring: &[u8],
        date: i64,
        versions: &BTreeMap<String, String>,
        pins: &str,
    ) -> Result<Vec<Fetched>, PipelineError> {
        let input = crate::scratch::RepoConfigInput {
            config,
            keyring,
            preferences: pins,
        };
        let mut out = Vec::new();
        for p in &self.recipes.packages {
            let Some(b) = &p.build else { continue };
            let dir = self.settings.cache.join("built").join(&p.name);
            let _ = fs::remove_dir_all(&dir);
            let deb = crate::scratch::build_package(
                &self.recipes,
                versions,
                p,
                b,
                Some(&input),
                date,
                &dir,
            )
            .map_err(|e| PipelineError::Scratch {
                package: p.name.clone(),
                message: e.to_string(),
            })?;
            let d =
                strong_digest_reader(fs::File::open(&deb).map_err(io(&deb))?).map_err(io(&deb))?;
            let file_name = deb
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let locked = direct_entry(
                p,
                "built",
                file_name,
                String::new(),
                d.size,
                d.sha256.clone(),
                Some(d.sha512),
            );
            out.push(Fetched {
                resolved: Resolved {
                    recipe: p.clone(),
                    locked,
                    from: FetchFrom::Local(deb.clone()),
                },
                control: read_control(&deb)?,
                file: deb.clone(),
                publish: deb,
                publish_sha256: d.sha256,
            });
        }
        Ok(out)
    }
}

/// Reads one of our maintainer scripts and fills in `@NAME@` placeholders.
fn load_script(
    path: &Path,
    vars: &BTreeMap<String, String>,
    package: &str,
    version: &str,
) -> Result<Vec<u8>, PipelineError> {
    let fail = |message: String| PipelineError::Script {
        path: path.to_path_buf(),
        message,
    };
    let bytes =
        fs::read(path).map_err(|e| fail(format!("cannot read the maintainer script: {e}")))?;
    let mut text =
        String::from_utf8(bytes).map_err(|_| fail("is not a text file (not UTF-8)".into()))?;
    if text.contains('\0') {
        return Err(fail("is not a text file (NUL bytes)".into()));
    }
    if !text.starts_with("#!") {
        return Err(fail(
            "has no #! line; a maintainer script names its interpreter".into(),
        ));
    }
    for (k, v) in vars.iter().chain([
        (&"PACKAGE".to_string(), &package.to_string()),
        (&"VERSION".to_string(), &version.to_string()),
    ]) {
        text = text.replace(&format!("@{k}@"), v);
    }
    if let Some(start) = text.find('@') {
        let rest = &text[start + 1..];
        if let Some(end) = rest.find('@') {
            let name = &rest[..end];
            if !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b == b'_' || b.is_ascii_digit())
            {
                return Err(fail(format!(
                    "uses @{name}@, which the recipe's [repack.vars] does not set"
                )));
            }
        }
    }
    Ok(text.into_bytes())
}

/// The lock entry of a file that no index vouches for (a direct URL with the
/// recipe's hash, or a local file).
fn direct_entry(
    p: &PackageRecipe,
    origin: &str,
    path: String,
    url: String,
    size: u64,
    sha256: String,
    sha512: Option<String>,
) -> LockedPackage {
    LockedPackage {
        name: p.name.clone(),
        version: p.version.clone(),
        architecture: p.architecture.clone(),
        origin: origin.into(),
        path,
        url,
        size,
        sha256,
        sha512,
        index_digests: Vec::new(),
        index: String::new(),
        index_sha256: String::new(),
        release_sha256: String::new(),
    }
}

/// The signed files and indexes of an opened source, for snapshots.
#[derive(Debug, Clone)]
pub struct OpenSourceFiles {
    pub source: String,
    pub signed: Vec<(String, Vec<u8>)>,
    pub indexes: BTreeMap<String, PathBuf>,
}

/// Writes `data` to `path` through a temporary file in the same directory,
/// readable by all (0644: a web server serves what we write; secrets are
/// never written through here).
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<(), PipelineError> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(io(dir))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io(dir))?;
    std::io::Write::write_all(&mut tmp, data).map_err(io(path))?;
    tmp.as_file()
        .set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .map_err(io(path))?;
    tmp.as_file().sync_all().map_err(io(path))?;
    tmp.persist(path).map_err(|e| PipelineError::Io {
        path: path.to_path_buf(),
        source: e.error,
    })?;
    Ok(())
}

/// Copies a verified file (hashing while copying: the cache is re-checked on
/// the way out) to `dest`.
fn copy_checked(src: &Path, locked: &LockedPackage, dest: &Path) -> Result<(), PipelineError> {
    let expected = Expected {
        size: locked.size,
        sha256: Some(locked.sha256.clone()),
        sha512: None,
    };
    upstream::copy_verified(src, &expected, dest)
        .map(|_| ())
        .map_err(|source| PipelineError::Fetch {
            package: locked.name.clone(),
            source,
        })
}

/// `debforge fetch --to DIR`: a self-contained snapshot with each source's
/// signed Release files, verified indexes and debs at their repository paths
/// (`DIR/<source>/…`), direct files under `DIR/direct/`, and the lock file.
pub fn write_snapshot(
    dir: &Path,
    fetched: &[Fetched],
    sources: &[OpenSourceFiles],
    lock: &Lock,
) -> Result<(), PipelineError> {
    for s in sources {
        let root = dir.join(&s.source);
        for (rel, bytes) in &s.signed {
            write_atomic(&root.join(rel), bytes)?;
        }
        for (rel, local) in &s.indexes {
            let dest = root.join(rel);
            fs::create_dir_all(dest.parent().unwrap_or(&root)).map_err(io(&root))?;
            let tmp = dest.with_extension("part");
            fs::copy(local, &tmp).map_err(io(&dest))?;
            fs::rename(&tmp, &dest).map_err(io(&dest))?;
        }
    }
    for f in fetched {
        let dest = match f.resolved.locked.origin.as_str() {
            "url" | "path" => dir.join("direct").join(f.resolved.file_name()),
            source => dir.join(source).join(&f.resolved.locked.path),
        };
        copy_checked(&f.file, &f.resolved.locked, &dest)?;
    }
    write_atomic(&dir.join("debforge.lock"), lock.to_text().as_bytes())
}

/// What the repository is and who signs it.
pub struct RepoParams<'k> {
    pub config: RepoConfig,
    pub keys: &'k [SigningKey],
    /// `Date` of the Release (SOURCE_DATE_EPOCH or now).
    pub date: i64,
    /// Where digests of pool files are recorded between builds (the cache).
    pub digest_records: Option<PathBuf>,
}

/// A package in the pool: its identity from its control paragraph, its
/// digests from the copy that went into the pool.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PoolEntry {
    pub package: String,
    pub version: String,
    pub architecture: String,
    pub filename: String,
    pub size: u64,
    pub sha256: String,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct OutputReport {
    pub pool: Vec<String>,
    /// What went into the pool, from each file itself.
    pub packages: Vec<PoolEntry>,
    pub index: IndexReport,
    pub keyring: String,
    pub preferences: String,
}

/// The exported public keyring and the pins, at the output's top level.
pub use crate::repo::{KEYRING_NAME, PREFERENCES_NAME};

/// Writes the complete repository for `fetched` into `out`: the pool, the
/// signed indexes, the public keyring (`.gpg` for `Signed-By`, `.asc`) and
/// the pins. It is built in a staging directory beside `out` and swapped in
/// at the end, so a failed or interrupted build leaves the previous `out`
/// intact; a lock file beside `out` keeps a second build from interleaving.
pub fn write_output(
    out: &Path,
    fetched: &[Fetched],
    params: &RepoParams,
    pins: &str,
) -> Result<OutputReport, PipelineError> {
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(parent).map_err(io(parent))?;
    let base = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let lock_path = parent.join(format!(".{base}.lock"));
    let lock = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io(&lock_path))?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            return Err(PipelineError::Busy {
                out: out.to_path_buf(),
                lock: lock_path,
            });
        }
        Err(fs::TryLockError::Error(e)) => return Err(io(&lock_path)(e)),
    }
    // Holding the lock, no other build is running: what a killed build left
    // behind (a staging or a moved-aside directory) can go.
    if let Ok(rd) = fs::read_dir(parent) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(&format!(".{base}.staging-"))
                || name.starts_with(&format!(".{base}.old-"))
            {
                let _ = fs::remove_dir_all(e.path());
            }
        }
    }
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{base}.staging-"))
        .tempdir_in(parent)
        .map_err(io(parent))?;
    let root = staging.path();
    // The repository is public (served as it is, or published): 0755, not
    // the private mode of a fresh temporary directory.
    fs::set_permissions(root, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .map_err(io(root))?;
    // Each package goes into the pool linked from the cache (its control
    // paragraph was read when it was prepared). Its digests come from the
    // record kept under the file's identity, or from one read when there is
    // none; the SHA256 is checked against the lock (or the repack) again, so
    // a cache file changed through a link in an earlier output is caught.
    let store = crate::repo::pool::DigestStore::new(params.digest_records.clone());
    let mut entries = Vec::with_capacity(fetched.len());
    let mut packages = Vec::with_capacity(fetched.len());
    for f in fetched {
        let control = &f.control;
        // The pool name comes from the package's own control paragraph.
        let rel =
            crate::format::packages::pool_path(&params.config.component, control).map_err(|e| {
                PipelineError::BadPackage {
                    path: f.publish.clone(),
                    reason: e.to_string(),
                }
            })?;
        if let Some(e) = entries
            .iter()
            .find(|e: &&crate::repo::IndexedDeb| e.filename == rel)
        {
            // Two recipes that name the same file: one pool entry. The same
            // name, version and architecture with other bytes: refused, as
            // an archive refuses it.
            if e.digests.sha256 == f.publish_sha256 {
                continue;
            }
            return Err(PipelineError::BadPackage {
                path: f.publish.clone(),
                reason: format!(
                    "another package with the same name, version and architecture ({rel}) has other bytes (sha256 {} here, {} there)",
                    f.publish_sha256, e.digests.sha256
                ),
            });
        }
        let dest = root.join(&rel);
        fs::create_dir_all(dest.parent().expect("pool path has a directory")).map_err(io(&dest))?;
        // Linked from the cache where the filesystem allows, its digests
        // recorded under the file's identity: an unchanged package is
        // neither copied nor read again.
        let (digests, _) =
            crate::repo::pool::place(&f.publish, &dest, &store).map_err(io(&dest))?;
        if digests.sha256 != f.publish_sha256 {
            return Err(PipelineError::Fetch {
                package: f.resolved.locked.name.clone(),
                source: FetchError {
                    url: f.publish.display().to_string(),
                    kind: crate::fetch::FetchErrorKind::Sha256 {
                        expected: f.publish_sha256.clone(),
                        found: digests.sha256,
                    },
                },
            });
        }
        packages.push(PoolEntry {
            package: f.package().to_string(),
            version: f.version().to_string(),
            architecture: f.architecture().to_string(),
            filename: rel.clone(),
            size: digests.size,
            sha256: digests.sha256.clone(),
        });
        entries.push(crate::repo::IndexedDeb {
            architecture: f.architecture().to_string(),
            stanza: crate::format::packages::stanza(control, &rel, &digests).to_string(),
            filename: rel,
            digests,
        });
    }
    // Pool order, as a walk of the pool would give.
    entries.sort_by(|a, b| Path::new(&a.filename).cmp(Path::new(&b.filename)));
    let repo_err = |e| PipelineError::Repo(Box::new(e));
    let mut dists = crate::repo::DistsWriter::new(root, &params.config).map_err(repo_err)?;
    for e in &entries {
        dists.add(e).map_err(repo_err)?;
    }
    let stats = crate::repo::IndexStats {
        read: entries.len(),
        cached: 0,
    };
    let index = dists
        .finish(params.date, params.keys, stats)
        .map_err(repo_err)?;
    let pool: Vec<String> = entries.into_iter().map(|e| e.filename).collect();
    let (binary, armored) = crate::openpgp::sign::export_public(params.keys);
    write_atomic(&root.join(format!("{KEYRING_NAME}.gpg")), &binary)?;
    write_atomic(&root.join(format!("{KEYRING_NAME}.asc")), &armored)?;
    write_atomic(&root.join(PREFERENCES_NAME), pins.as_bytes())?;

    // Swap: the previous output moves aside, the new one takes its name.
    let staged = staging.keep();
    let old = parent.join(format!(".{base}.old-{}", std::process::id()));
    let had_old = out.exists();
    if had_old {
        fs::rename(out, &old).map_err(io(out))?;
    }
    if let Err(e) = fs::rename(&staged, out) {
        if had_old {
            let _ = fs::rename(&old, out);
        }
        let _ = fs::remove_dir_all(&staged);
        return Err(io(out)(e));
    }
    if had_old {
        fs::remove_dir_all(&old).map_err(io(&old))?;
    }
    drop(lock);
    packages.sort_by(|a, b| a.filename.cmp(&b.filename));
    Ok(OutputReport {
        pool,
        packages,
        index,
        keyring: format!("{KEYRING_NAME}.gpg"),
        preferences: PREFERENCES_NAME.to_string(),
    })
}
