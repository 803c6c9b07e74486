//! The chain behind `debforge lock`, `fetch` and `build`, one stage per
//! module, each handing the next a typed value:
//!
//! ```text
//! resolve ──▶ Resolved ──▶ fetch ──▶ Fetched ──▶ prepare (keep | repack) ──▶ Artifact
//!                                                 build (action = "build") ──▶ Artifact
//!                                                 repo::write(artifacts) ──▶ the repository
//! ```
//!
//! An [`Artifact`] is what goes into the pool: its file, what the control
//! paragraph *of that file* gives the indexes (read once, when the file was
//! made or fetched: its names, its pool path and its stanza, on disk until
//! the write, see [`crate::repo::stanzas`]) and the digests taken while it
//! was written. Everything downstream (pool names, index stanzas, exact
//! dependencies, pins, what `build` prints) comes from it, never from what
//! the recipe or the lock said it would be.

mod build;
mod fetch;
mod prepare;
mod resolve;
mod snapshot;
pub mod suffix;

use crate::error::FileError;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::deb::DebFile;
use crate::fetch::{FetchError, Http, HttpOptions, Reporter};
use crate::format::deb822::ControlParagraph;
use crate::recipe::lock::{Lock, LockEntry, LockError, LockedPackage};
use crate::recipe::{PackageRecipe, RecipeError, RecipeSet};
use crate::repo::stanzas::{IndexEntry, Stanzas};
use crate::upstream::{DirTransport, HttpTransport, Transport, UpstreamError};

pub use crate::repo::{KEYRING_NAME, PREFERENCES_NAME};
pub use fetch::Fetched;
pub use resolve::{Resolved, UpstreamChange};
pub use snapshot::{OpenSourceFiles, write_snapshot};

/// The lock file as a run leaves it ([`Session::settle_lock`]).
#[derive(Debug, Clone, Default)]
pub struct SettledLock {
    /// The SHA256 of its bytes, written or read (empty where there is none).
    pub sha256: String,
    /// Where this run wrote it, what it wrote: the stamp's check that the
    /// lock is still what the run left may need no reading back.
    pub written: Option<crate::files::Wrote>,
}

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
    #[error("{}: {source}", crate::error::ShortPath(path))]
    Lock { path: PathBuf, source: LockError },
    #[error("{0}")]
    Upstream(Box<UpstreamError>),
    #[error("{package}: {source}")]
    Fetch { package: String, source: FetchError },
    #[error(transparent)]
    Io(#[from] crate::error::FileError),
    #[error("--source {0}: no such source in sources.toml")]
    UnknownOverride(String),
    #[error(
        "source '{source_name}': not in sources.toml, or not reachable here (offline, no --source-dir snapshot of it)"
    )]
    NoSuchSource { source_name: String },
    #[error(
        "{} does not exist: run `debforge lock` first (--locked needs it)",
        crate::error::ShortPath(path)
    )]
    NoLock { path: PathBuf },
    #[error("the lock file {} does not match what the recipes resolve to:\n  {}", crate::error::ShortPath(path), differences.join("\n  "))]
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
        crate::error::ShortPath(dir)
    )]
    SnapshotIncomplete {
        source_name: String,
        dir: PathBuf,
        missing: String,
    },
    #[error("{}: {reason}", crate::error::ShortPath(path))]
    BadPackage { path: PathBuf, reason: String },
    #[error("{package}: {file} is not in any --source-dir ({dirs})")]
    FileNotFound {
        package: String,
        file: String,
        dirs: String,
    },
    #[error("{}: {source}", crate::error::ShortPath(path))]
    Deb {
        path: PathBuf,
        source: crate::deb::DebError,
    },
    #[error("{0}")]
    Repo(Box<crate::repo::RepoError>),
    #[error("{}: {message}", crate::error::ShortPath(path))]
    Script { path: PathBuf, message: String },
    #[error("{package}: {source}")]
    Native {
        package: String,
        source: crate::native::NativeError,
    },
    #[error("{0}")]
    NotWhatWasVouchedFor(Box<IdentityMismatch>),
    #[error("{package}: {source}")]
    Repack {
        package: String,
        source: crate::deb::repack::RepackError,
    },
}

impl PipelineError {
    /// The package and version source `source`'s signed index no longer
    /// offers, where that is this error.
    pub fn not_offered(&self, source: &str) -> Option<(&str, &str)> {
        match self {
            PipelineError::Upstream(u) if u.source_name == source => match &u.kind {
                crate::upstream::UpstreamErrorKind::NotInIndex { name, version, .. } => {
                    Some((name, version))
                }
                _ => None,
            },
            _ => None,
        }
    }
}

impl From<UpstreamError> for PipelineError {
    fn from(e: UpstreamError) -> Self {
        PipelineError::Upstream(Box::new(e))
    }
}

/// A file whose control names another package, version or architecture
/// than what vouched for it.
#[derive(Debug, thiserror::Error)]
#[error(
    "{package}: {} is not the package {vouched} vouched for: its control says {field} {found:?}, {vouched} says {expected:?}",
    crate::error::ShortPath(file)
)]
pub struct IdentityMismatch {
    pub package: String,
    pub file: PathBuf,
    /// "source NAME's signed index", or "the recipe".
    pub vouched: String,
    pub field: &'static str,
    pub expected: String,
    pub found: String,
}

/// Stage 3's output: a package file ready for the pool.
#[derive(Debug, Clone)]
pub struct Artifact {
    /// Picked for the base's closure (`[base] closure`), not named by a
    /// recipe file of the project. (The recipe itself is not kept: the
    /// repository is written without them.)
    pub for_base: bool,
    /// Published under another version than the one that vouched for its
    /// upstream file (a version suffix): such a package is pinned. Its lock
    /// entry is not kept (memory: an entry per package).
    pub version_changed: bool,
    /// The file that goes into the pool (the fetched file, its repack, or a
    /// package built from a recipe).
    pub file: std::sync::Arc<Path>,
    /// What the indexes take from the control paragraph of `file`, read
    /// from that file (its stanza is in the session's spill file).
    pub entry: IndexEntry,
    /// Size and SHA256 of `file`, taken while it was written (or, for a
    /// fetched file, as the chain of trust vouched for it).
    pub size: u64,
    pub sha256: crate::digest::Sha256Sum,
}

impl Artifact {
    pub fn package(&self) -> &str {
        self.entry.package()
    }
    pub fn version(&self) -> &str {
        self.entry.version()
    }
    pub fn architecture(&self) -> &str {
        self.entry.architecture()
    }
    /// What `repo::write` needs of it, moved.
    pub fn into_pool_input(self) -> crate::repo::PoolInput {
        crate::repo::PoolInput {
            file: self.file,
            entry: self.entry,
            size: self.size,
            sha256: self.sha256,
        }
    }
}

/// The SHA256 of the package file at `path`, `sha256` in hex, as bytes:
/// taken by this build or checked against the file, so a text that is not
/// one is named, not trusted.
fn sha256_sum(path: &Path, sha256: &str) -> Result<crate::digest::Sha256Sum, PipelineError> {
    crate::digest::Sha256Sum::from_hex(sha256).ok_or_else(|| PipelineError::BadPackage {
        path: path.to_path_buf(),
        reason: format!("its SHA256 {sha256:?} is not 64 hex digits"),
    })
}

/// The control paragraph of a package file (only its control member is read).
fn read_control(path: &Path) -> Result<ControlParagraph, PipelineError> {
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

impl Session<'_> {
    /// The control paragraph of a verified file with this SHA256: read from
    /// the file the first time, then from the records (a file's control
    /// paragraph is a function of its bytes), so an unchanged package is not
    /// opened again.
    fn control_of(&self, file: &Path, sha256: &str) -> Result<ControlParagraph, PipelineError> {
        self.control_from(file, sha256, |sha256| self.records.control(sha256))
    }

    /// [`Session::control_of`], the record handed over (see
    /// [`crate::repo::pool::DigestStore::take_control`]): for the last
    /// reading of a package's control in a build.
    fn take_control_of(
        &self,
        file: &Path,
        sha256: &str,
    ) -> Result<ControlParagraph, PipelineError> {
        self.control_from(file, sha256, |sha256| self.records.take_control(sha256))
    }

    fn control_from(
        &self,
        file: &Path,
        sha256: &str,
        recorded: impl FnOnce(&str) -> Option<String>,
    ) -> Result<ControlParagraph, PipelineError> {
        if !crate::format::path::is_hex_digest(sha256, 64) {
            return read_control(file);
        }
        if let Some(p) = recorded(sha256).and_then(|t| ControlParagraph::parse_single(&t).ok()) {
            return Ok(p);
        }
        let p = read_control(file)?;
        self.records.put_control(sha256, &p.to_string());
        Ok(p)
    }
}

/// What a package file's control says it is.
#[derive(Debug, Default)]
struct Says {
    package: String,
    version: String,
    architecture: String,
}

impl Says {
    fn of(control: &ControlParagraph) -> Says {
        let get = |f: &str| control.get(f).unwrap_or_default().to_string();
        Says {
            package: get("Package"),
            version: get("Version"),
            architecture: get("Architecture"),
        }
    }

    /// From a control's text without parsing it, where it is plain (see
    /// [`crate::format::deb822::simple_fields`]).
    fn peek(text: &str) -> Option<Says> {
        let [package, version, architecture] =
            crate::format::deb822::simple_fields(text, ["Package", "Version", "Architecture"])?;
        let own = |v: Option<&str>| v.unwrap_or_default().to_string();
        Some(Says {
            package: own(package),
            version: own(version),
            architecture: own(architecture),
        })
    }

    fn get(&self, field: &str) -> &str {
        match field {
            "Package" => &self.package,
            "Version" => &self.version,
            _ => &self.architecture,
        }
    }
}

/// A package's identity comes from the file itself, checked against what
/// vouched for it: the signed index stanza (the lock entry made from it) for
/// an upstream file, the recipe for a direct one. Package, Version and
/// Architecture must be what both say.
///
/// The entry's name and version are its recipe's (every resolve copies
/// them): the recipe itself is not kept to be compared again.
fn check_identity(
    locked: &LockedPackage,
    repacked: bool,
    file: &Path,
    says: &Says,
    records: &crate::repo::pool::DigestStore,
) -> Result<(), PipelineError> {
    let vouched = match locked.origin() {
        "url" | "path" => "the recipe".to_string(),
        source => format!("source {source}'s signed index"),
    };
    // A file only the recipe's hash vouches for is read to its end as
    // dpkg-deb would (a repack does that itself, so not twice; a signed
    // index's files are checked when repacked). Once per SHA256: the
    // answer is a function of the bytes.
    let direct = matches!(locked.origin(), "url" | "path") && !repacked;
    if direct && !records.data_checked(locked.sha256()) {
        DebFile::open(file)
            .and_then(|d| d.check_data())
            .map_err(|source| PipelineError::Deb {
                path: file.to_path_buf(),
                source,
            })?;
        records.put_data_checked(locked.sha256());
    }
    for (field, expected) in [
        ("Package", locked.name()),
        ("Version", locked.version()),
        ("Architecture", locked.architecture()),
    ] {
        let found = says.get(field);
        // Versions are equal as dpkg compares them (`0:1.0` is `1.0`).
        let same = match field {
            "Version" => match (
                crate::format::version::Version::parse_lenient(found),
                crate::format::version::Version::parse_lenient(expected),
            ) {
                (Ok((a, _)), Ok((b, _))) => a == b,
                _ => found == expected,
            },
            _ => found == expected,
        };
        if !same {
            return Err(PipelineError::NotWhatWasVouchedFor(Box::new(
                IdentityMismatch {
                    package: locked.name().to_string(),
                    file: file.to_path_buf(),
                    vouched: vouched.clone(),
                    field,
                    expected: expected.to_string(),
                    found: found.to_string(),
                },
            )));
        }
    }
    Ok(())
}

/// The newest date among the artifacts' data members (the time dpkg-deb or
/// our repack wrote into each): what packages built around them are dated
/// by when SOURCE_DATE_EPOCH is not set.
pub fn newest_date(artifacts: &[Artifact]) -> Result<Option<i64>, PipelineError> {
    let mut newest = None;
    for a in artifacts {
        let deb = DebFile::open(&a.file).map_err(|source| PipelineError::Deb {
            path: a.file.to_path_buf(),
            source,
        })?;
        let t = deb.data_member().mtime as i64;
        newest = Some(newest.map_or(t, |n: i64| n.max(t)));
    }
    Ok(newest)
}

/// Each package's version as its own file says (prepared artifacts) or as
/// its recipe builds it (`action = "build"`): what exact dependencies,
/// `@VERSION_OF:…@` and the pins use.
pub fn package_versions(prepared: &[Artifact], recipes: &RecipeSet) -> BTreeMap<String, String> {
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

/// The packages the pins hold to our repository (priority 1001 for its
/// builds, -1 for every other origin's), sorted. Pinned where the exact
/// build is the point: repacked packages (and those carried along by a
/// suffix), packages built here, every package a `depends-exact` names, and
/// the packages those name exactly (`=`, `<=`), through any depth. Never a
/// package kept as its distribution built it that nothing needs exactly
/// (c-ares from Ubuntu's archive): pinning that would downgrade or remove
/// the machine's own newer build and what depends on it. A recipe's
/// `pin = true|false` overrides the default for its package. `control`
/// gives a pinned package's control paragraph, read once for its relations.
pub fn pinned_packages(
    prepared: &[Artifact],
    recipes: &RecipeSet,
    control: impl Fn(&Artifact) -> Result<ControlParagraph, PipelineError>,
) -> Result<Vec<String>, PipelineError> {
    use crate::recipe::Action;
    // The project's own recipes before the packages picked for the base: a
    // pick of another architecture (`pin = false`) never unpins the
    // project's package of that name.
    let mut explicit: BTreeMap<&str, bool> = BTreeMap::new();
    let (picks, own): (Vec<_>, Vec<_>) = recipes.packages.iter().partition(|p| p.for_base);
    for p in own.into_iter().rev().chain(picks) {
        if let Some(pin) = p.pin {
            explicit.entry(p.name.as_str()).or_insert(pin);
        }
    }
    let mut pinned: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    for p in &recipes.packages {
        if matches!(p.action, Action::Repack | Action::Build) {
            pinned.insert(p.name.clone());
        }
        if let Some(b) = &p.build {
            pinned.extend(b.depends_exact.iter().cloned());
        }
    }
    for a in prepared {
        if a.version_changed {
            pinned.insert(a.package().to_string());
        }
    }
    pinned.retain(|n| explicit.get(n.as_str()) != Some(&false));
    pinned.extend(
        explicit
            .iter()
            .filter(|(_, p)| **p)
            .map(|(n, _)| n.to_string()),
    );
    let ours: std::collections::BTreeSet<&str> = prepared.iter().map(|a| a.package()).collect();
    // Each pinned package's exact dependencies, by its place in `prepared`.
    let mut exact_of: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    loop {
        let mut more = Vec::new();
        for (i, a) in prepared.iter().enumerate() {
            if !pinned.contains(a.package()) {
                continue;
            }
            let exact = match exact_of.entry(i) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert(exact_dependencies(&control(a)?))
                }
            };
            for name in exact.iter() {
                if ours.contains(name.as_str())
                    && !pinned.contains(name)
                    && explicit.get(name.as_str()) != Some(&false)
                {
                    more.push(name.clone());
                }
            }
        }
        if more.is_empty() {
            return Ok(pinned.into_iter().collect());
        }
        pinned.extend(more);
    }
}

/// The packages `control` depends on at an exact version (`=`, `<=`), in
/// its Pre-Depends and Depends.
fn exact_dependencies(control: &ControlParagraph) -> Vec<String> {
    use crate::format::relation::{Relations, names_exact_version};
    let mut names = Vec::new();
    for field in ["Pre-Depends", "Depends"] {
        let Some(Ok(rel)) = control.field(field).map(|v| Relations::parse(&v.folded())) else {
            continue;
        };
        for r in rel.0.iter().flat_map(|alt| &alt.0) {
            let exact = r
                .constraint
                .as_ref()
                .is_some_and(|(op, _)| names_exact_version(field, *op));
            if exact {
                names.push(r.name.clone());
            }
        }
    }
    names
}

/// Where a source's files come from in this run, decided once.
enum SourceTransport<'a> {
    Open(Box<dyn Transport + 'a>),
    /// Offline and no snapshot of it: a plain directory of debs, vouched
    /// for by the lock file's hashes.
    Plain,
}

/// The lock file as a session read it: its identity, its entries, the
/// SHA256 of its bytes.
type ParsedLock = (crate::files::FileIdentity, Arc<Lock>, String);

/// The state of one run: recipes, settings, and each source's transport.
pub struct Session<'a> {
    pub recipes: RecipeSet,
    pub settings: Settings,
    http: Option<Arc<Http>>,
    observer: &'a dyn Reporter,
    lock_path: PathBuf,
    transports: BTreeMap<String, SourceTransport<'a>>,
    /// Digests and control paragraphs recorded between runs (one file in
    /// the cache, written by [`Session::save_records`]).
    pub records: crate::repo::pool::DigestStore,
    /// The lock file as last parsed, by the file's identity: a run reads
    /// it several times (before resolving, to check, after fetching) and
    /// a 5,000-package lock is megabytes of TOML.
    /// The lock file as last read: its identity, its entries, the SHA256 of
    /// its bytes.
    parsed_lock: std::sync::Mutex<Option<ParsedLock>>,
    /// Each prepared package's index stanza, on disk (in the cache) from
    /// where its control is read to the write.
    stanzas: std::sync::Mutex<Stanzas>,
}

impl<'a> Session<'a> {
    pub fn new(
        recipes: RecipeSet,
        settings: Settings,
        observer: &'a dyn Reporter,
    ) -> Result<Session<'a>, PipelineError> {
        for name in settings.overrides.keys() {
            if !recipes.sources.contains_key(name) {
                return Err(PipelineError::UnknownOverride(name.clone()));
            }
        }
        let http = if settings.source_dirs.is_empty() {
            Some(Arc::new(Http::new(settings.http.clone()).map_err(|e| {
                PipelineError::Fetch {
                    package: "(setup)".into(),
                    source: e,
                }
            })?))
        } else {
            None
        };
        let mut transports = BTreeMap::new();
        for (name, src) in &recipes.sources {
            let t = transport_for(name, src, &settings, http.as_ref(), observer);
            transports.insert(name.clone(), t);
        }
        let lock_path = recipes.dir.join(crate::recipe::LOCK_FILE);
        let records = crate::repo::pool::DigestStore::new(Some(
            settings.cache.join(crate::repo::pool::RECORDS_FILE),
        ));
        let stanzas = Stanzas::new(Some(settings.cache.clone()));
        Ok(Session {
            recipes,
            settings,
            http,
            observer,
            lock_path,
            transports,
            records,
            parsed_lock: std::sync::Mutex::new(None),
            stanzas: std::sync::Mutex::new(stanzas),
        })
    }

    /// What the indexes need of a prepared package: its stanza rendered
    /// into the session's spill file, its control checked, its names and
    /// pool path kept (see [`crate::repo::stanzas`]).
    /// Rendered and checked on the calling thread (a repack's), appended
    /// under the lock.
    fn index_entry(&self, control: &ControlParagraph) -> Result<IndexEntry, PipelineError> {
        let failed = |e| FileError::at(&self.settings.cache)(e).into();
        let rendered = crate::repo::stanzas::Rendered::of(control).map_err(failed)?;
        let mut stanzas = self.stanzas.lock().expect("stanzas");
        stanzas.append(rendered).map_err(failed)
    }

    /// `a`'s control paragraph, read back from its stanza: for what reads
    /// a prepared package's relations (the pinned packages; with a base
    /// closure, every package).
    pub fn control_of_artifact(&self, a: &Artifact) -> Result<ControlParagraph, PipelineError> {
        let stanzas = self.stanzas.lock().expect("stanzas");
        stanzas
            .control(&a.entry)
            .map_err(|e| FileError::at(&self.settings.cache)(e).into())
    }

    /// The stanzas of every package prepared, for the write (none is
    /// added after): the session keeps none.
    pub fn take_stanzas(&self) -> Result<Stanzas, PipelineError> {
        let mut stanzas = std::mem::take(&mut *self.stanzas.lock().expect("stanzas"));
        stanzas
            .flush()
            .map_err(FileError::at(&self.settings.cache))?;
        Ok(stanzas)
    }

    /// Keeps what this run learned about files for the next one.
    pub fn save_records(&self) {
        self.records.save();
    }

    pub fn lock_path(&self) -> &Path {
        &self.lock_path
    }

    /// The parsed lock file is no longer needed: the cache kept for the
    /// second reading goes (a lock entry per package).
    pub fn forget_lock(&self) {
        *self.parsed_lock.lock().expect("lock cache") = None;
    }

    /// The lock as this session last parsed it, without reading the file
    /// (`None` where it was not read, or was let go).
    pub(super) fn lock_if_read(&self) -> Option<Arc<Lock>> {
        let cached = self.parsed_lock.lock().expect("lock cache");
        cached.as_ref().map(|(_, lock, _)| Arc::clone(lock))
    }

    /// The lock file on disk, if there is one.
    /// Shared with the cache (one copy of a lock of thousands of entries).
    pub fn read_lock(&self) -> Result<Option<Arc<Lock>>, PipelineError> {
        let identity = std::fs::metadata(&self.lock_path)
            .ok()
            .map(|m| crate::files::FileIdentity::of(&m));
        if let Some(id) = identity
            && let Some((seen, lock, _)) = self.parsed_lock.lock().expect("lock cache").as_ref()
            && *seen == id
        {
            return Ok(Some(Arc::clone(lock)));
        }
        match crate::input::read_to_string(&self.lock_path, crate::input::limit::LOCK) {
            Ok(text) => {
                let lock = Arc::new(Lock::parse(&text).map_err(|source| PipelineError::Lock {
                    path: self.lock_path.clone(),
                    source,
                })?);
                let sha256 = crate::digest::sha256_hex(text.as_bytes());
                drop(text);
                if let Some(id) = identity {
                    *self.parsed_lock.lock().expect("lock cache") =
                        Some((id, Arc::clone(&lock), sha256));
                }
                Ok(Some(lock))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(FileError::at(&self.lock_path)(e).into()),
        }
    }

    /// The SHA256 of the lock file's bytes as this session last read them,
    /// while the parsed lock is kept.
    pub(super) fn read_lock_sha256(&self) -> Option<String> {
        let cached = self.parsed_lock.lock().expect("lock cache");
        cached.as_ref().map(|(_, _, sha256)| sha256.clone())
    }

    /// Writes the lock file atomically (temporary name, then rename) unless
    /// it holds these bytes already (compared first, never parsed; one of a
    /// newer debforge is an error). The SHA256 of its bytes now, taken as
    /// they are made, and what was written.
    pub fn write_lock_unless_same(&self, lock: &Lock) -> Result<SettledLock, PipelineError> {
        self.write_lock_text(&mut |w| lock.write_text(w))
    }

    /// [`Session::write_lock_unless_same`], each of `lock`'s entries let go
    /// once written ([`Lock::write_text_releasing`]).
    pub fn write_lock_releasing(&self, lock: Lock) -> Result<SettledLock, PipelineError> {
        let mut lock = Some(lock);
        // `write_atomic_unless_same` writes once.
        self.write_lock_text(&mut |w| lock.take().expect("written once").write_text_releasing(w))
    }

    fn write_lock_text(
        &self,
        text: &mut dyn FnMut(&mut dyn std::io::Write) -> std::io::Result<()>,
    ) -> Result<SettledLock, PipelineError> {
        // By type: a FIFO or a device in its place is an error, not replaced.
        let mut old = match crate::input::open_regular(&self.lock_path) {
            Ok(f) => Some(f),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(FileError::at(&self.lock_path)(e).into()),
        };
        if let Some(file) = &mut old {
            self.refuse_newer_lock(file)?;
        }
        let mut sha256 = String::new();
        let mut hashed = |w: &mut dyn std::io::Write| {
            let hasher = crate::digest::Hasher::new(crate::digest::DigestSet::SHA256);
            let mut hashing = crate::digest::HashingWriter::new(w, hasher);
            text(&mut hashing)?;
            sha256 = hashing.finish().1.sha256;
            Ok(())
        };
        let written =
            crate::files::write_atomic_unless_same(&self.lock_path, old.as_mut(), &mut hashed)?;
        Ok(SettledLock { sha256, written })
    }

    /// What writing the lock would refuse, asked before it is written: a
    /// file of another type in its place, or a lock of a newer debforge.
    pub fn check_lock_file(&self) -> Result<(), PipelineError> {
        match crate::input::open_regular(&self.lock_path) {
            Ok(mut file) => self.refuse_newer_lock(&mut file),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(FileError::at(&self.lock_path)(e).into()),
        }
    }

    /// An error where the lock file says it is of a newer debforge (its
    /// first lines): such a lock is never written over with an older
    /// version. `file` is read from its start, and left there.
    fn refuse_newer_lock(&self, file: &mut std::fs::File) -> Result<(), PipelineError> {
        use std::io::{Read, Seek};
        let mut head = Vec::new();
        let io = FileError::at(&self.lock_path);
        (&mut *file)
            .take(4096)
            .read_to_end(&mut head)
            .map_err(&io)?;
        file.rewind().map_err(&io)?;
        match Lock::declared_version(&String::from_utf8_lossy(&head)) {
            Some(v) if v > crate::recipe::lock::LOCK_VERSION => Err(PipelineError::Lock {
                path: self.lock_path.clone(),
                source: LockError::Version(v),
            }),
            _ => Ok(()),
        }
    }

    fn transport(&self, source: &str) -> Option<&(dyn Transport + 'a)> {
        match self.transports.get(source) {
            Some(SourceTransport::Open(t)) => Some(t.as_ref()),
            _ => None,
        }
    }
}

/// A source's transport: its snapshot offline (`--source-dir`), a
/// directory for a `file://` URL, else HTTP (with `--source` overrides).
fn transport_for<'a>(
    name: &str,
    src: &crate::recipe::Source,
    settings: &Settings,
    http: Option<&Arc<Http>>,
    observer: &'a dyn Reporter,
) -> SourceTransport<'a> {
    if !settings.source_dirs.is_empty() {
        // Air-gapped: a snapshot directory holding this source's signed files.
        return settings
            .source_dirs
            .iter()
            .map(|d| d.join(name))
            .find(|d| {
                ["InRelease", "Release"]
                    .iter()
                    .any(|f| d.join(src.release_dir()).join(f).exists())
            })
            .map(|root| SourceTransport::Open(Box::new(DirTransport { root })))
            .unwrap_or(SourceTransport::Plain);
    }
    let base = settings
        .overrides
        .get(name)
        .cloned()
        .unwrap_or_else(|| src.url.clone());
    let base = if base.ends_with('/') {
        base
    } else {
        format!("{base}/")
    };
    if let Some(path) = base.strip_prefix("file://") {
        return SourceTransport::Open(Box::new(DirTransport {
            root: PathBuf::from(path),
        }));
    }
    match http {
        Some(http) => SourceTransport::Open(Box::new(HttpTransport {
            http: Arc::clone(http),
            base,
            observer,
        })),
        // Offline sessions have no HTTP client, and take the branch above.
        None => SourceTransport::Plain,
    }
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
    LockEntry {
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
        for_base: false,
    }
    .into()
}

/// Writes a public file atomically ([`crate::files::write_atomic`]).
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<(), PipelineError> {
    Ok(crate::files::write_atomic(
        path,
        data,
        crate::files::Existing::Replace,
    )?)
}

impl crate::error::Hint for PipelineError {
    fn hint(&self) -> Option<String> {
        match self {
            PipelineError::LockMismatch { .. } => Some(
                "if the change is intended, run `debforge lock` and commit the lock file".into(),
            ),
            PipelineError::Fetch { source, .. } => source.hint(),
            PipelineError::Upstream(u) => u.hint(),
            PipelineError::NotWhatWasVouchedFor(m) => Some(if m.vouched == "the recipe" {
                "check the recipe's name, version and architecture against the file (dpkg-deb -f FILE Package Version Architecture)".into()
            } else {
                "do not use this file: the upstream's signed index lists it under another name or version (a broken or tampered upstream); nothing of it went into the pool".into()
            }),
            PipelineError::Repo(r) => r.hint(),
            PipelineError::Deb { source, .. } => source.hint(),
            PipelineError::Io(e) => e.hint(),
            PipelineError::Native { source, .. } => source.hint(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pick_of_another_architecture_never_unpins_the_projects_package() {
        let f = Path::new("/p/recipes/x.toml");
        let sources = crate::recipe::parse_sources(
            f,
            "[source.u]\nurl = \"http://x/\"\nlayout = \"flat\"\nkey = \"k\"\nfingerprint = \"AE09FE4BBD223A84B2CCFCE3F60F4B3D7FA2AF80\"\n",
        )
        .unwrap();
        let own = crate::recipe::parse_package(
            f,
            "name = \"libx\"\nversion = \"1\"\narchitecture = \"amd64\"\nfrom = { source = \"u\" }\naction = \"keep\"\npin = true\n",
            &sources,
        )
        .unwrap();
        let pick = crate::recipe::picked_recipe(f, ("libx", "1", "arm64"), "u", &sources).unwrap();
        let (own, pick) = (std::sync::Arc::new(own), std::sync::Arc::new(pick));
        for packages in [vec![own.clone(), pick.clone()], vec![pick, own]] {
            let recipes = RecipeSet {
                dir: PathBuf::from("/p/recipes"),
                sources: sources.clone(),
                packages,
            };
            let control = |_: &Artifact| -> Result<ControlParagraph, PipelineError> {
                unreachable!("no package prepared")
            };
            assert_eq!(pinned_packages(&[], &recipes, control).unwrap(), ["libx"]);
        }
    }
}
