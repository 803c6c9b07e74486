//! The output transaction: a complete repository (pool, signed indexes,
//! public keyring, pins) built in a staging directory beside the output and
//! swapped in at the end, so a failed or interrupted build leaves the
//! previous output intact; a lock file beside it keeps a second build from
//! interleaving. Over an earlier output of ours, the pool is updated in
//! place instead and only `dists/` is swapped ([`super::in_place`]).

use crate::error::FileError;
use std::fs;
use std::path::{Path, PathBuf};

use crate::openpgp::sign::SigningKey;
use crate::report::{Event, Reporter, Task};

use super::pool::{DigestStore, place};
use super::stanzas::{IndexEntry, Stanzas};
use super::{
    DistsWriter, IndexReport, IndexStats, KEYRING_NAME, PREFERENCES_NAME, RepoConfig, RepoError,
};

/// What the repository is and who signs it.
pub struct RepoParams<'k> {
    pub config: RepoConfig,
    pub keys: &'k [SigningKey],
    /// `Date` of the Release (SOURCE_DATE_EPOCH or now).
    pub date: i64,
    /// Digests of pool files recorded between builds (the cache's).
    pub records: &'k DigestStore,
    /// Tests only: swap with two renames and, between them, create this
    /// file and wait (so a test can kill the build inside that window).
    pub pause_in_swap: Option<PathBuf>,
    /// Pool files of earlier generations to keep (path, SHA256): linked
    /// from the previous output into the new pool, listed in no index, so
    /// an earlier generation can be published again.
    pub retain: Vec<(String, String)>,
    /// Where the retained files are linked from: the previous output
    /// (`None`), or another repository (a generation published again
    /// keeps the build output's files).
    pub retain_from: Option<PathBuf>,
    /// Compressed pieces of an earlier generation's indexes: a piece with
    /// the bytes this build writes is copied, not compressed again.
    pub kept_pieces: super::KeptPieces,
    /// The lab's base (`[base]` of repository.toml): the packages must
    /// install on it with nothing else, or nothing is written.
    pub base: &'k [super::against::Base],
}

/// One package file for the pool: what its control paragraph gave the
/// indexes (its stanza is in the [`Stanzas`] the write is given) and the
/// size and SHA256 it must still have. Owned: [`write`] drops them once the
/// pool and the indexes are written, before the output is walked.
#[derive(Debug, Clone)]
pub struct PoolInput {
    pub file: std::sync::Arc<Path>,
    pub entry: IndexEntry,
    pub size: u64,
    pub sha256: crate::digest::Sha256Sum,
}

/// A package in the pool: its identity from its control paragraph, its
/// digests from the copy that went into the pool.
///
/// Compact: a build holds one a package from its write to its end (the
/// report, the stamp, the generation's manifest), so its five texts live
/// in one string, each one's end beside it (about 180 bytes a package, not
/// 340: 3 MB at 20,000, at the write's peak). Read and written as the six
/// fields it has always been ([`PoolEntryFields`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolEntry {
    /// Package, version, architecture, filename, then the SHA256 in hex.
    text: Box<str>,
    ends: [u32; 4],
    pub size: u64,
}

impl PoolEntry {
    pub fn new(
        package: &str,
        version: &str,
        architecture: &str,
        filename: &str,
        size: u64,
        sha256: &str,
    ) -> PoolEntry {
        let texts = [package, version, architecture, filename];
        let mut text =
            String::with_capacity(texts.iter().map(|t| t.len()).sum::<usize>() + sha256.len());
        let mut ends = [0; 4];
        for (end, t) in ends.iter_mut().zip(texts) {
            text.push_str(t);
            // Texts read with bounds far below 4 GiB.
            *end = u32::try_from(text.len()).expect("a pool entry is smaller than 4 GiB");
        }
        text.push_str(sha256);
        PoolEntry {
            text: text.into_boxed_str(),
            ends,
            size,
        }
    }

    fn text(&self, i: usize) -> &str {
        super::packed_text(&self.text, &self.ends, i)
    }

    pub fn package(&self) -> &str {
        self.text(0)
    }
    pub fn version(&self) -> &str {
        self.text(1)
    }
    pub fn architecture(&self) -> &str {
        self.text(2)
    }
    /// Its path in the repository (`pool/main/…`).
    pub fn filename(&self) -> &str {
        self.text(3)
    }
    /// Hex, lower case.
    pub fn sha256(&self) -> &str {
        self.text(4)
    }

    fn fields(&self) -> PoolEntryFields<'_> {
        use std::borrow::Cow::Borrowed;
        PoolEntryFields {
            package: Borrowed(self.package()),
            version: Borrowed(self.version()),
            architecture: Borrowed(self.architecture()),
            filename: Borrowed(self.filename()),
            size: self.size,
            sha256: Borrowed(self.sha256()),
        }
    }
}

/// A [`PoolEntry`] field by field: its form in the manifests (JSON) and the
/// stamp (postcard), unchanged.
#[derive(serde::Serialize, serde::Deserialize)]
struct PoolEntryFields<'a> {
    #[serde(borrow)]
    package: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    version: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    architecture: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    filename: std::borrow::Cow<'a, str>,
    size: u64,
    #[serde(borrow)]
    sha256: std::borrow::Cow<'a, str>,
}

impl serde::Serialize for PoolEntry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.fields().serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for PoolEntry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let f = PoolEntryFields::deserialize(d)?;
        Ok(PoolEntry::new(
            &f.package,
            &f.version,
            &f.architecture,
            &f.filename,
            f.size,
            &f.sha256,
        ))
    }
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct OutputReport {
    /// What went into the pool, from each file itself (each pool file once).
    pub packages: Vec<PoolEntry>,
    pub index: IndexReport,
    pub keyring: String,
    pub preferences: String,
    /// Nothing changed since the last build: the output was left as it was.
    #[serde(default)]
    pub unchanged: bool,
    /// The output's tree digest as this build left it, taken under the
    /// output's lock ([`crate::files::tree_digest`]); empty where it could
    /// not be taken.
    #[serde(default)]
    pub tree: String,
    /// The files this build linked into the pool or unlinked from it (their
    /// change times moved); `None` where it cannot say (the output written
    /// whole, or not walked). Not recorded.
    #[serde(skip)]
    pub relinked: Option<super::Inodes>,
}

/// The file that marks a directory as a debforge output (a dot file: never
/// published, bundled or indexed).
pub const OUTPUT_MARKER: &str = ".debforge-output";

/// Whether `build` may replace `out`: absent, empty, or an earlier debforge
/// output (it holds [`OUTPUT_MARKER`]); `force` allows any directory. A
/// file where the directory should be is refused either way. Checked
/// before anything is downloaded.
pub fn check_output(out: &Path, force: bool) -> Result<(), RepoError> {
    let meta = match fs::symlink_metadata(out) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(FileError::at(out)(e).into()),
        Ok(m) => m,
    };
    if !meta.is_dir() {
        return Err(RepoError::OutputNotADirectory {
            out: out.to_path_buf(),
        });
    }
    // The marker, or (from before it existed) the keyring and pins every
    // debforge output has at its top.
    let ours = out.join(OUTPUT_MARKER).is_file()
        || (out.join(format!("{KEYRING_NAME}.gpg")).is_file()
            && out.join(PREFERENCES_NAME).is_file());
    if force || ours {
        return Ok(());
    }
    let mut names: Vec<String> = fs::read_dir(out)
        .map_err(FileError::at(out))?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    names.sort();
    Err(RepoError::OutputNotOurs {
        out: out.to_path_buf(),
        files: crate::report::some_of(&names, 5),
    })
}

/// Holds `.<out>.lock` beside the output while a build writes it (or a
/// generation is published from its pool).
pub struct OutputLock {
    _file: fs::File,
}

/// Takes the output's lock, or says who holds it.
pub fn lock_output(out: &Path) -> Result<OutputLock, RepoError> {
    let lock_path = crate::files::beside(out, "lock");
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(FileError::at(&lock_path))?;
    match file.try_lock() {
        Ok(()) => Ok(OutputLock { _file: file }),
        Err(fs::TryLockError::WouldBlock) => Err(RepoError::Busy {
            out: out.to_path_buf(),
            lock: lock_path,
        }),
        Err(fs::TryLockError::Error(e)) => Err(FileError::at(&lock_path)(e).into()),
    }
}

/// Writes the complete repository for `packages` into `out`; see the
/// module's comment for the transaction.
pub fn write(
    out: &Path,
    packages: Vec<PoolInput>,
    stanzas: &Stanzas,
    params: &RepoParams,
    pins: &str,
    observer: &dyn Reporter,
) -> Result<OutputReport, RepoError> {
    write_then(out, packages, stanzas, params, pins, observer, |_| {
        Ok::<(), ()>(())
    })
    .map(|(report, _)| report)
}

/// [`write`], and `then` of what it wrote, run beside the walk of the
/// output that follows the write (on another core: what the caller records
/// of the new output, which reads it but changes nothing in it). Where
/// `then` fails, the output is left without its stamp.
pub fn write_then<T: Send, E: Send>(
    out: &Path,
    mut packages: Vec<PoolInput>,
    stanzas: &Stanzas,
    params: &RepoParams,
    pins: &str,
    observer: &dyn Reporter,
    then: impl FnOnce(&OutputReport) -> Result<T, E> + Send,
) -> Result<(OutputReport, Result<T, E>), RepoError> {
    let parent = crate::files::parent(out);
    fs::create_dir_all(parent).map_err(FileError::at(parent))?;
    let base = base_name(out);
    let lock = lock_output(out)?;
    // The same inputs over an output nobody touched since: nothing to do.
    let stamp_path = crate::files::beside(out, "stamp");
    let key = inputs_key(&packages, params, pins);
    if let Some(mut report) = Stamp::read_if(&stamp_path, &key)
        .filter(|s| tree_identity(out).is_ok_and(|tree| tree == s.tree))
        .map(|s| s.report.into_owned())
    {
        report.unchanged = true;
        report.relinked = Some(Default::default());
        let then = then(&report);
        return Ok((report, then));
    }
    // From here on the stamp no longer describes the output.
    match fs::remove_file(&stamp_path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(FileError::at(&stamp_path)(e).into());
        }
        _ => {}
    }
    let staging = fresh_staging(parent, &base, out, observer)?;
    // An earlier output of ours is updated in place (its pool kept, only
    // what changed linked or removed, `dists/` swapped whole); anything
    // else, or a pool file that would change bytes under its name, is
    // written whole.
    let in_place = if super::in_place::applies(out, params) {
        super::in_place::write(
            out,
            staging.path(),
            (&mut packages, stanzas),
            params,
            pins,
            observer,
        )?
    } else {
        None
    };
    let updated = in_place.is_some();
    let ((pooled, index), walked) = match in_place {
        Some(done) => done,
        None => (
            write_whole(
                out,
                staging,
                (&mut packages, stanzas),
                params,
                pins,
                observer,
            )?,
            None,
        ),
    };
    drop(packages);
    // The compressing and placing threads' memory is free: given back
    // before the output is walked and the stamp written.
    crate::cores::release_freed_memory();
    let mut report = OutputReport {
        packages: pooled,
        index,
        keyring: format!("{KEYRING_NAME}.gpg"),
        preferences: PREFERENCES_NAME.to_string(),
        unchanged: false,
        tree: String::new(),
        relinked: None,
    };
    let (settled, then) = std::thread::scope(|scope| {
        let then = scope.spawn(|| then(&report));
        let settled = settle(out, &report, updated, walked, params);
        let then = then
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (settled, then)
    });
    // Best effort: without a stamp the next build simply does the work.
    // No stamp where `then` failed: it would answer the next build with
    // these same inputs before `then` runs again (a generation never
    // recorded).
    match settled {
        Ok((tree, relinked)) if then.is_err() => (report.tree, report.relinked) = (tree, relinked),
        Ok((tree, relinked)) => {
            report.tree = tree.clone();
            report.relinked = relinked;
            // Borrowed and streamed: a report lists every package.
            let stamp = Stamp {
                key: key.as_str().into(),
                tree: tree.as_str().into(),
                report: std::borrow::Cow::Borrowed(&report),
            };
            stamp.write(&stamp_path);
        }
        Err(e) => crate::report::warning(
            observer,
            format!(
                "{}: the output could not be walked once written ({e}): pool files no index lists stay, and the next build does all its work again",
                out.display()
            ),
        ),
    }
    drop(lock);
    Ok((report, then))
}

/// The whole repository in `staging`, swapped in for `out`.
fn write_whole(
    out: &Path,
    staging: tempfile::TempDir,
    (packages, stanzas): (&mut Vec<PoolInput>, &Stanzas),
    params: &RepoParams,
    pins: &str,
    observer: &dyn Reporter,
) -> Result<Written, RepoError> {
    let root = staging.path();
    let unique = pool_names(packages, &params.config.component)?;
    // The pool is filled (system calls: directories and links) while the
    // indexes are written (compression), on the cores the other leaves;
    // the indexes list what each package must be, and nothing is swapped
    // in unless every placed file was checked to be it.
    let (filled, index) = std::thread::scope(|scope| {
        let filling = scope.spawn(|| {
            fill_pool(root, &unique, params.records, observer)?;
            let current = unique.iter().map(|(rel, _)| rel.as_str()).collect();
            retain_earlier(root, out, &current, params)
        });
        let index = write_dists(root, (&unique, stanzas), params, observer);
        (
            filling.join().expect("filling the pool does not panic"),
            index,
        )
    });
    filled?;
    let index = index?;
    // In the pool and the indexes: what they hold goes before the check
    // reads the index back.
    let named = pool_positions(packages, unique);
    let pooled = pool_entries(packages, named);
    write_beside_dists(root, params, pins)?;
    let count = pooled.len();
    check_installable(root, out, count, params.base, &params.config.architectures)?;
    let parent = crate::files::parent(out);
    let base = base_name(out);
    let pause = params.pause_in_swap.as_deref();
    swap_in(staging.keep(), out, parent, &base, pause)?;
    Ok((pooled, index))
}

/// What an output step wrote: the pool's packages, the indexes.
pub(super) type Written = (Vec<PoolEntry>, IndexReport);

/// `verify` would reject a repository apt cannot install from: such a
/// build fails here, before its swap, the previous output untouched.
pub(super) fn check_installable(
    root: &Path,
    out: &Path,
    packages: usize,
    base: &[super::against::Base],
    architectures: &[String],
) -> Result<(), RepoError> {
    let problems = super::verify::installability(root, packages);
    if !problems.is_empty() {
        return Err(RepoError::NotInstallable {
            out: out.to_path_buf(),
            problems,
        });
    }
    if base.is_empty() {
        return Ok(());
    }
    let missing = super::against::missing_by_architecture(
        &super::against::packages_of(root),
        base,
        architectures,
    );
    if missing.is_empty() {
        return Ok(());
    }
    Err(RepoError::NotInstallableOnBase {
        out: out.to_path_buf(),
        missing: missing.iter().map(ToString::to_string).collect(),
    })
}

/// A repository whose pool files and indexes were written before (an
/// earlier generation, published again): `pool/` a link to `pool_dir` (the
/// output's pool, which holds every kept generation's files), the indexes
/// copied from `indexes` (path under `dists/<suite>/`, file, its digests),
/// and a new Release dated and signed as `params` say. Nothing is
/// compressed, hashed or linked per package: only the Release is new. The
/// same transaction as [`write`], and the same installability check.
pub fn write_kept(
    out: &Path,
    pool_dir: &Path,
    indexes: &[(String, PathBuf, crate::digest::Digests)],
    params: &RepoParams,
    pins: &str,
    observer: &dyn Reporter,
) -> Result<(), RepoError> {
    let parent = crate::files::parent(out);
    fs::create_dir_all(parent).map_err(FileError::at(parent))?;
    let base = base_name(out);
    let lock = lock_output(out)?;
    let _ = fs::remove_file(crate::files::beside(out, "stamp"));
    let staging = fresh_staging(parent, &base, out, observer)?;
    let root = staging.path();
    let pool_dir = fs::canonicalize(pool_dir).map_err(FileError::at(pool_dir))?;
    std::os::unix::fs::symlink(&pool_dir, root.join("pool")).map_err(FileError::at(root))?;
    let dist = root.join("dists").join(&params.config.suite);
    for (rel, file, _) in indexes {
        // Copied, not linked: the kept file may be linked into the build
        // output too, whose stamp would see a link change its ctime.
        let dest = dist.join(rel);
        fs::create_dir_all(crate::files::parent(&dest)).map_err(FileError::at(&dest))?;
        fs::copy(file, &dest).map_err(FileError::at(&dest))?;
    }
    let listed: Vec<_> = indexes
        .iter()
        .map(|(rel, _, d)| (rel.clone(), d.clone()))
        .collect();
    super::sign_dists(&dist, &params.config, &listed, params.date, params.keys)?;
    write_beside_dists(root, params, pins)?;
    // The count of packages is not known here: the lists grow.
    check_installable(root, out, 0, params.base, &params.config.architectures)?;
    swap_in(
        staging.keep(),
        out,
        parent,
        &base,
        params.pause_in_swap.as_deref(),
    )?;
    drop(lock);
    Ok(())
}

/// The output directory's own name: the staging and moved-aside
/// directories beside it are named after it.
pub(super) fn base_name(out: &Path) -> String {
    out.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A new staging directory beside `out` (0755: the repository is public),
/// after putting back an output a killed swap moved aside and removing
/// what killed builds left. Call it holding the output lock.
pub(super) fn fresh_staging(
    parent: &Path,
    base: &str,
    out: &Path,
    observer: &dyn Reporter,
) -> Result<tempfile::TempDir, RepoError> {
    // A build killed between the two renames of a swap left no output and
    // the previous one moved aside: put it back first. Then what killed
    // builds left (staging directories, a moved-aside output once the
    // output is there) can go.
    restore_moved_aside(parent, base, out, observer)?;
    if let Ok(rd) = fs::read_dir(parent) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(&format!(".{base}.staging-"))
                || (name.starts_with(&format!(".{base}.old-")) && out.exists())
            {
                let _ = crate::files::remove_tree(e.path());
            }
        }
    }
    let staging = tempfile::Builder::new()
        .prefix(&format!(".{base}.staging-"))
        .tempdir_in(parent)
        .map_err(FileError::at(parent))?;
    // The repository is public (served as it is, or published): 0755, not
    // the private mode of a fresh temporary directory.
    fs::set_permissions(
        staging.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .map_err(FileError::at(staging.path()))?;
    Ok(staging)
}

/// `dists/`: the indexes of the pooled packages (`unique`, in pool order),
/// the Release files, signed. Each Packages stanza is read from `stanzas`
/// (rendered where its package was prepared), its file fields added.
pub(super) fn write_dists(
    root: &Path,
    (unique, stanzas): (&[(String, &PoolInput)], &Stanzas),
    params: &RepoParams,
    observer: &dyn Reporter,
) -> Result<IndexReport, RepoError> {
    let total = unique.len() as u64;
    let mut dists = DistsWriter::new(root, &params.config, &params.kept_pieces)?;
    let mut stanza = String::new();
    let mut reader = stanzas.reader();
    // Where the stanzas' spill file is: a failure to read one back is its.
    let spill_dir = stanzas.dir();
    for (i, (filename, p)) in unique.iter().enumerate() {
        // One event per hundred stanzas: a line per package would cost more
        // than the stanza.
        if i % 100 == 0 {
            observer.event(Event::Work {
                task: Task::Index,
                done: i as u64,
                total,
                item: filename.clone(),
            });
        }
        stanza.clear();
        // Each as its artifact says: what the pool holds is checked to be
        // it (by `place_all`, or the in-place check of a kept file).
        let digests = crate::digest::Digests {
            size: p.size,
            sha256: p.sha256.to_hex(),
            ..Default::default()
        };
        reader
            .write(&p.entry, filename, &digests, &mut stanza)
            .map_err(FileError::at(&spill_dir))?;
        dists.add(p.entry.architecture(), filename, &stanza)?;
    }
    observer.event(Event::Work {
        task: Task::Index,
        done: total,
        total,
        item: String::new(),
    });
    let stats = IndexStats {
        read: unique.len(),
        cached: 0,
    };
    let signers = params.keys.len() as u64;
    let suite = &params.config.suite;
    observer.event(Event::Work {
        task: Task::Sign,
        done: 0,
        total: signers,
        item: format!("dists/{suite}/Release"),
    });
    let index = dists.finish(params.date, params.keys, stats)?;
    observer.event(Event::Work {
        task: Task::Sign,
        done: signers,
        total: signers,
        item: format!("dists/{suite}/InRelease"),
    });
    Ok(index)
}

/// The files beside `dists/`: the public keyring (binary and armored), the
/// pins, and the marker that says debforge wrote the directory.
pub(super) fn write_beside_dists(
    root: &Path,
    params: &RepoParams,
    pins: &str,
) -> Result<(), RepoError> {
    let (binary, armored) = crate::openpgp::sign::export_public(params.keys);
    write_public(&root.join(format!("{KEYRING_NAME}.gpg")), &binary)?;
    write_public(&root.join(format!("{KEYRING_NAME}.asc")), &armored)?;
    write_public(&root.join(PREFERENCES_NAME), pins.as_bytes())?;
    write_public(
        &root.join(OUTPUT_MARKER),
        b"This directory is written by `debforge build`, which replaces it whole.\n",
    )
}

/// Puts the new output in place. Where the filesystem can, in one step
/// (`renameat2(RENAME_EXCHANGE)`): at every instant `out` is a complete
/// repository, the old one or the new one. Elsewhere with two renames; a
/// build killed between them leaves the previous output at
/// `.<out>.old-<pid>`, which the next build restores before anything else.
fn swap_in(
    staged: PathBuf,
    out: &Path,
    parent: &Path,
    base: &str,
    pause: Option<&Path>,
) -> Result<(), RepoError> {
    let had_old = fs::symlink_metadata(out).is_ok();
    if !had_old {
        if let Err(e) = fs::rename(&staged, out) {
            let _ = crate::files::remove_tree(&staged);
            return Err(FileError::at(out)(e).into());
        }
        return Ok(());
    }
    if pause.is_none() && exchange(&staged, out).is_ok() {
        // `staged` now holds the previous output.
        let _ = crate::files::remove_tree(&staged);
        return Ok(());
    }
    let old = parent.join(format!(".{base}.old-{}", std::process::id()));
    fs::rename(out, &old).map_err(FileError::at(out))?;
    if let Some(p) = pause {
        crate::files::pause_at(p);
    }
    if let Err(e) = fs::rename(&staged, out) {
        let _ = fs::rename(&old, out);
        let _ = crate::files::remove_tree(&staged);
        return Err(FileError::at(out)(e).into());
    }
    Ok(crate::files::remove_tree(&old).map_err(FileError::at(&old))?)
}

/// Swaps two paths atomically (Linux 3.15+, on filesystems that support it).
pub(super) fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
    };
    let (a, b) = (c(a)?, c(b)?);
    // SAFETY: both are valid NUL-terminated paths; renameat2 only reads them.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// With no output but a moved-aside one (`.<out>.old-<pid>`, from a build
/// killed inside a two-rename swap), renames the newest of those back.
fn restore_moved_aside(
    parent: &Path,
    base: &str,
    out: &Path,
    observer: &dyn Reporter,
) -> Result<(), RepoError> {
    if fs::symlink_metadata(out).is_ok() {
        return Ok(());
    }
    let prefix = format!(".{base}.old-");
    let newest = fs::read_dir(parent)
        .map_err(FileError::at(parent))?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .max();
    if let Some((_, old)) = newest {
        fs::rename(&old, out).map_err(FileError::at(out))?;
        observer.event(Event::Warning {
            message: format!(
                "restored the previous repository {} from {}, where a build killed while swapping it left it",
                out.display(),
                old.display()
            ),
        });
    }
    Ok(())
}

/// What a finished build leaves beside its output (`.<out>.stamp`): a key of
/// everything that went in, and the identity of every file that came out.
#[derive(serde::Serialize, serde::Deserialize)]
struct Stamp<'r> {
    key: std::borrow::Cow<'r, str>,
    /// The output's tree digest when the build finished.
    tree: std::borrow::Cow<'r, str>,
    report: std::borrow::Cow<'r, OutputReport>,
}

/// The output stamp's head ([`crate::files::write_cache`]). 2: postcard,
/// not JSON. 3: with a CRC-32.
const STAMP_MAGIC: &[u8; 8] = b"dfoutput";
const STAMP_VERSION: u32 = 3;

impl Stamp<'_> {
    /// Written whole or not at all: best effort (without it the next build
    /// does its work again).
    fn write(&self, path: &Path) {
        let _ = crate::files::write_cache(path, STAMP_MAGIC, STAMP_VERSION, self);
    }
}

impl Stamp<'static> {
    /// The stamp whose key is `key`: by type and bound, as the build stamp
    /// (a FIFO or a link to a device put in its place is no stamp). Its
    /// report (every package) is read only when the key, first in the file,
    /// is the one asked.
    fn read_if(path: &Path, key: &str) -> Option<Stamp<'static>> {
        let bytes = crate::input::read_cache(
            path,
            crate::input::limit::MANIFEST,
            STAMP_MAGIC,
            STAMP_VERSION,
        )?;
        let (head, _) = postcard::take_from_bytes::<&str>(&bytes).ok()?;
        if head != key {
            return None;
        }
        postcard::from_bytes(&bytes).ok()
    }
}

/// The output's tree digest ([`crate::files::tree_digest`]), the output's
/// own files only.
fn tree_identity(out: &Path) -> std::io::Result<String> {
    crate::files::tree_digest(out, &|_| false)
}

/// The written output, walked once (its pool from `walked`, where the
/// build in place walked it before writing): where it was `updated` in
/// place, the pool files it no longer lists go
/// ([`super::in_place::remove_unlisted`]); the records follow the change
/// times the pool's links moved; and the output's tree digest as it is
/// left, with the files whose links this build changed where it knows
/// them ([`OutputReport::relinked`]). An output that cannot be walked keeps
/// its unlisted files (they are only unlisted) and gets no stamp.
fn settle(
    out: &Path,
    report: &OutputReport,
    updated: bool,
    walked: Option<super::in_place::PoolWalk>,
    params: &RepoParams,
) -> std::io::Result<(String, Option<super::in_place::Inodes>)> {
    let (mut entries, mut relinked, taken) = match walked {
        Some(pool) => {
            let taken = pool.taken();
            let (entries, linked) = pool.patched(out)?;
            (entries, Some(linked), taken)
        }
        None => {
            let taken = std::time::SystemTime::now();
            // A directory and a file a package, and the indexes.
            let expected = 2 * report.packages.len() + 64;
            let entries = crate::files::tree_entries_expecting(out, &|_| false, expected)?;
            (entries, None, taken)
        }
    };
    let listed: std::collections::HashSet<&str> =
        report.packages.iter().map(|e| e.filename()).collect();
    if updated {
        let kept = super::in_place::kept_by_generations(out, &listed, params);
        let unlinked = super::in_place::remove_unlisted(out, &mut entries, &listed, &kept);
        if let Some(r) = &mut relinked {
            r.extend(unlinked);
        }
    }
    for e in entries.iter().filter(|e| listed.contains(e.rel.as_str())) {
        params.records.refresh(e.id);
    }
    let tree = crate::files::digest_entries(&mut entries);
    // Sorted now: the next build lists only the pool's directories that
    // changed since.
    super::in_place::WalkedPool::write(out, taken, &entries);
    Ok((tree, relinked))
}

/// A digest of everything `write` would turn into the output: each
/// package's bytes (by SHA256, in order), the repository's configuration,
/// the date, the signing keys and the pins.
fn inputs_key(packages: &[PoolInput], params: &RepoParams, pins: &str) -> String {
    let mut h = crate::digest::KeyHasher::new();
    h.update(concat!(
        "debforge-output ",
        env!("CARGO_PKG_VERSION"),
        // 2: Packages list Size and SHA256 only.
        " 2\0"
    ));
    for p in packages {
        h.update(p.sha256.hex_digits());
        h.update(b"\0");
    }
    h.update(format!("{:?}\0{}\0", params.config, params.date).as_bytes());
    h.update(crate::openpgp::sign::export_public(params.keys).0);
    h.update(b"\0");
    h.update(pins.as_bytes());
    // The base it must install on: another base, another check.
    for b in params.base {
        h.update(format!("\0base {}", b.sha256).as_bytes());
    }
    // Only what is kept beyond this build's own files changes the output:
    // an earlier file under a name one of them takes is never kept (a
    // package rebuilt at its version), so it keys nothing; else the key
    // moved with the generations kept, and a build of the same inputs
    // wrote the output again.
    let own: std::collections::HashSet<crate::digest::Sha256Sum> =
        packages.iter().map(|p| p.sha256).collect();
    let mut earlier = params
        .retain
        .iter()
        .filter(|(_, sha)| {
            crate::digest::Sha256Sum::from_hex(sha).is_none_or(|sha| !own.contains(&sha))
        })
        .peekable();
    if earlier.peek().is_some() {
        // By hash (8 bytes a package, not a path): a collision would only
        // leave a file out of the key, and the output's tree is checked too.
        use std::hash::BuildHasher;
        let state = std::collections::hash_map::RandomState::new();
        let component = &params.config.component;
        let names: std::collections::HashSet<u64> = packages
            .iter()
            // None for a package whose control names no pool file: the
            // write refuses it (`pool_names`).
            .filter_map(|p| p.entry.pool_path(component).ok())
            .map(|rel| state.hash_one(rel))
            .collect();
        for (rel, sha) in earlier.filter(|(rel, _)| !names.contains(&state.hash_one(rel))) {
            h.update(format!("\0retain {rel} {sha}").as_bytes());
        }
    }
    h.finish_hex()
}

/// Links the earlier generations' pool files that the new pool does not
/// hold from the previous output (same path, same SHA256 by the records),
/// never copying them. A file no longer there, or changed, is not kept.
fn retain_earlier(
    root: &Path,
    out: &Path,
    current: &std::collections::HashSet<&str>,
    params: &RepoParams,
) -> Result<(), RepoError> {
    for (rel, sha) in &params.retain {
        if current.contains(rel.as_str()) || crate::format::path::check_relative(rel).is_err() {
            continue;
        }
        let src = params.retain_from.as_deref().unwrap_or(out).join(rel);
        let Ok(d) = params.records.digests_of(&src) else {
            continue;
        };
        if d.sha256 != *sha {
            continue;
        }
        let dest = root.join(rel);
        if dest.exists() {
            continue;
        }
        fs::create_dir_all(dest.parent().unwrap_or(root)).map_err(FileError::at(&dest))?;
        if fs::hard_link(&src, &dest).is_err() {
            fs::copy(&src, &dest).map_err(FileError::at(&dest))?;
        }
    }
    Ok(())
}

/// Links (or copies) every package into `root/pool/…` under the name its
/// own control paragraph gives, on all cores (linking is system calls, and a
/// package without a record is read).
fn fill_pool(
    root: &Path,
    unique: &[(String, &PoolInput)],
    records: &super::pool::DigestStore,
    observer: &dyn Reporter,
) -> Result<(), RepoError> {
    let total = unique.len() as u64;
    place_all(root, unique, records, observer)?;
    observer.event(Event::Work {
        task: Task::Pool,
        done: total,
        total,
        item: String::new(),
    });
    Ok(())
}

/// What the report lists of each package, sorted by pool file: made once
/// the indexes are written (memory: not beside the compressors), each pool
/// path moved out of `named` ([`pool_positions`]: which packages go into
/// the pool, and what each is called there), each package let go as its
/// entry is made (not every pool input beside every entry).
pub(super) fn pool_entries(
    packages: &mut Vec<PoolInput>,
    named: Vec<(usize, String)>,
) -> Vec<PoolEntry> {
    // Sized once: collected from a filter, the list grew by doubling.
    let mut out = Vec::with_capacity(named.len());
    let mut named = named.into_iter().peekable();
    for (i, p) in std::mem::take(packages).into_iter().enumerate() {
        let Some((_, filename)) = named.next_if(|(at, _)| *at == i) else {
            continue;
        };
        out.push(PoolEntry::new(
            p.entry.package(),
            p.entry.version(),
            p.entry.architecture(),
            &filename,
            p.size,
            &p.sha256.to_hex(),
        ));
    }
    // Each pool path is there once (`pool_names`), so an unstable sort
    // gives the stable one's order without its scratch copy of every entry
    // (2.5 MB at 20,000 packages, at the build's peak).
    out.sort_unstable_by(|a, b| a.filename().cmp(b.filename()));
    out
}

/// [`pool_names`]' list by each package's position in `packages`, in
/// their order (for [`pool_entries`], which takes `packages`).
pub(super) fn pool_positions(
    packages: &[PoolInput],
    unique: Vec<(String, &PoolInput)>,
) -> Vec<(usize, String)> {
    let mut named: Vec<(usize, String)> = unique
        .into_iter()
        .map(|(filename, p)| (position_in(packages, p), filename))
        .collect();
    named.sort_unstable_by_key(|(at, _)| *at);
    named
}

/// Where `p`, borrowed from `packages` ([`pool_names`]), is in it: by its
/// address, as the name list holds no index beside each reference.
fn position_in(packages: &[PoolInput], p: &PoolInput) -> usize {
    let at = (std::ptr::from_ref(p).addr() - packages.as_ptr().addr()) / size_of::<PoolInput>();
    assert!(std::ptr::eq(&packages[at], p), "a package of the list");
    at
}

/// Each package's pool path, from its own control paragraph (checked where
/// it was read: [`super::stanzas::Rendered::of`]), once, in pool order: two recipes that
/// name the same file are one pool entry; the same name, version and
/// architecture with other bytes is refused, as an archive refuses it.
pub(super) fn pool_names<'p>(
    packages: &'p [PoolInput],
    component: &str,
) -> Result<Vec<(String, &'p PoolInput)>, RepoError> {
    let mut named = Vec::with_capacity(packages.len());
    for p in packages {
        let rel = p
            .entry
            .pool_path(component)
            .map_err(|reason| RepoError::BadPackage {
                path: p.file.to_path_buf(),
                reason: reason.to_string(),
            })?;
        named.push((rel, p));
    }
    // Pool order, as a walk of the pool would give (the indexes list the
    // packages in it). The sort is stable: of two packages with one name,
    // the first in `packages` is kept (no map of every name beside them).
    named.sort_by(|(a, _), (b, _)| in_walk_order(a, b));
    let same = |a: &str, b: &str| Path::new(a) == Path::new(b);
    for pair in named.windows(2) {
        let [(rel, first), (other, p)] = pair else {
            unreachable!("windows of two")
        };
        if same(rel, other) && first.sha256 != p.sha256 {
            return Err(RepoError::BadPackage {
                path: p.file.to_path_buf(),
                reason: format!(
                    "another package with the same name, version and architecture ({rel}) has other bytes (sha256 {} here, {} there)",
                    p.sha256, first.sha256
                ),
            });
        }
    }
    named.dedup_by(|(later, _), (kept, _)| same(later, kept));
    Ok(named)
}

/// Paths compared as [`Path`]s are, by component (a walk's order), without
/// splitting them: a `/` sorts before every byte of a name. Pool paths are
/// made of checked names (no empty component, no `.`, no NUL).
fn in_walk_order(a: &str, b: &str) -> std::cmp::Ordering {
    fn key(s: &str) -> impl Iterator<Item = u8> + '_ {
        s.bytes().map(|c| if c == b'/' { 0 } else { c })
    }
    key(a).cmp(key(b))
}

/// Places every package (see [`super::pool::place`]) on all cores. A file
/// whose size or SHA256 is not what its artifact says (changed through a
/// link since it was verified) stops the build.
pub(super) fn place_all(
    root: &Path,
    unique: &[(String, &PoolInput)],
    store: &super::pool::DigestStore,
    observer: &dyn Reporter,
) -> Result<(), RepoError> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let failed = std::sync::atomic::AtomicBool::new(false);
    let placed = AtomicUsize::new(0);
    // The failure of the first package in order that failed (not a slot
    // per package: thousands of them).
    let first_failure: std::sync::Mutex<Option<(usize, RepoError)>> = std::sync::Mutex::new(None);
    let total = unique.len() as u64;
    make_dirs(root, unique)?;
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(unique.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                while !failed.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((rel, p)) = unique.get(i) else { break };
                    if i.is_multiple_of(100) {
                        observer.event(Event::Work {
                            task: Task::Pool,
                            done: i as u64,
                            total,
                            item: rel.clone(),
                        });
                    }
                    match place_one(root, rel, p, store) {
                        Ok(()) => {
                            placed.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            failed.store(true, Ordering::Relaxed);
                            let mut first = first_failure.lock().expect("failure slot");
                            if first.as_ref().is_none_or(|(at, _)| i < *at) {
                                *first = Some((i, e));
                            }
                        }
                    }
                }
            });
        }
    });
    // The first failure in package order (packages are taken in order, so
    // every one before it was placed, or failed later in time and is kept
    // instead); all placed otherwise.
    if let Some((_, e)) = first_failure.into_inner().expect("failure slot") {
        return Err(e);
    }
    assert_eq!(
        placed.into_inner(),
        unique.len(),
        "every package placed or a failure returned"
    );
    Ok(())
}

/// The directories the packages go into, made on one thread before any is
/// placed: making directories in one parent (thousands in a pool's
/// `main/<letter>/`) takes its lock in turn, and threads waiting on it
/// spin: a cold 5,000-package build spent twice the system time, and 15%
/// more in all, making them on two.
fn make_dirs(root: &Path, unique: &[(String, &PoolInput)]) -> Result<(), RepoError> {
    let mut made: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for (rel, _) in unique {
        let dir = rel.rsplit_once('/').map_or("", |(dir, _)| dir);
        if made.insert(dir) {
            let path = root.join(dir);
            fs::create_dir_all(&path).map_err(FileError::at(&path))?;
        }
    }
    Ok(())
}

/// One package into the pool (its directory made by [`make_dirs`]), its
/// size and SHA256 checked against its artifact's.
fn place_one(
    root: &Path,
    rel: &str,
    p: &PoolInput,
    store: &super::pool::DigestStore,
) -> Result<(), RepoError> {
    let dest = root.join(rel);
    // Linked from the cache where the filesystem allows, its digests
    // recorded under the file's identity: an unchanged package is
    // neither copied nor read again.
    let (digests, _) = place(&p.file, &dest, store).map_err(FileError::at(&dest))?;
    if !p.sha256.matches(&digests.sha256) || digests.size != p.size {
        return Err(RepoError::Changed {
            path: p.file.to_path_buf(),
            expected: p.sha256.to_hex(),
            found: digests.sha256,
        });
    }
    Ok(())
}

/// Writes a public file of the repository atomically (0644, fsynced).
fn write_public(path: &Path, data: &[u8]) -> Result<(), RepoError> {
    crate::files::write_atomic(path, data, crate::files::Existing::Replace)?;
    Ok(())
}

#[cfg(test)]
mod pool_entry_tests {
    use super::PoolEntry;

    /// A compact entry gives back each field, and is read and written as
    /// the six fields it always was: the manifests' JSON and the stamp's
    /// postcard are the same bytes as the plain struct's.
    #[test]
    fn a_pool_entry_is_its_six_fields_in_memory_and_on_disk() {
        #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
        struct Plain {
            package: String,
            version: String,
            architecture: String,
            filename: String,
            size: u64,
            sha256: String,
        }
        let sha = "ab".repeat(32);
        let plain = Plain {
            package: "libcudnn7".into(),
            version: "7.5.0.56-1+cuda10.1".into(),
            architecture: "amd64".into(),
            filename: "pool/main/libc/libcudnn7/libcudnn7_7.5.0.56-1+cuda10.1_amd64.deb".into(),
            size: 1 << 33,
            sha256: sha.clone(),
        };
        let e = PoolEntry::new(
            &plain.package,
            &plain.version,
            &plain.architecture,
            &plain.filename,
            plain.size,
            &sha,
        );
        assert_eq!(
            (
                e.package(),
                e.version(),
                e.architecture(),
                e.filename(),
                e.size,
                e.sha256()
            ),
            (
                plain.package.as_str(),
                plain.version.as_str(),
                "amd64",
                plain.filename.as_str(),
                1 << 33,
                sha.as_str()
            )
        );
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(json, serde_json::to_string(&plain).unwrap());
        assert_eq!(serde_json::from_str::<PoolEntry>(&json).unwrap(), e);
        // Escaped in JSON (a borrowed field cannot be): still read.
        let escaped = json.replace("libcudnn7\",", "libcud\\u006en7\",");
        assert_ne!(escaped, json);
        assert_eq!(serde_json::from_str::<PoolEntry>(&escaped).unwrap(), e);
        let bytes = postcard::to_allocvec(&e).unwrap();
        assert_eq!(bytes, postcard::to_allocvec(&plain).unwrap());
        assert_eq!(postcard::from_bytes::<PoolEntry>(&bytes).unwrap(), e);
        // Empty texts keep their places.
        let empty = PoolEntry::new("", "", "all", "", 0, "");
        assert_eq!(
            (
                empty.package(),
                empty.version(),
                empty.architecture(),
                empty.filename(),
                empty.sha256()
            ),
            ("", "", "all", "", "")
        );
    }
}

#[cfg(test)]
mod boundary_tests {
    //! `repo::write` at its boundary: packages in, a signed repository out,
    //! checked by our own `verify`; the same inputs again write nothing; a
    //! pin with no candidate is refused before the swap.
    use super::super::test_support::{key, tiny_deb, write_repo};

    #[test]
    fn write_makes_a_repository_verify_accepts_and_the_same_inputs_write_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let debs = [
            tiny_deb(dir.path(), "liba", "1.0-1", None),
            tiny_deb(dir.path(), "tool", "2.0-1", Some("liba (= 1.0-1)")),
        ];
        let keys = [key()];
        let out = dir.path().join("repo-out");
        let report = write_repo(&out, &debs, &keys, 1_600_000_000, "").unwrap();
        assert!(!report.unchanged);
        let names: Vec<_> = report.packages.iter().map(|p| p.package()).collect();
        assert_eq!(names, ["liba", "tool"]);
        let keyring = crate::openpgp::sign::export_public(&keys).0;
        let v = crate::repo::verify::verify(&out, &keyring, 1_600_000_100);
        assert_eq!(
            (v.problems.clone(), v.packages),
            (vec![], 2),
            "{:?}",
            v.problems
        );
        let again = write_repo(&out, &debs, &keys, 1_600_000_000, "").unwrap();
        assert!(again.unchanged, "the same inputs wrote the output again");
    }

    #[test]
    fn verify_rejects_a_compressed_index_that_is_not_its_plain_index() {
        let dir = tempfile::tempdir().unwrap();
        let keys = [key()];
        let out = dir.path().join("repo-out");
        let debs = [tiny_deb(dir.path(), "liba", "1.0-1", None)];
        write_repo(&out, &debs, &keys, 1_600_000_000, "").unwrap();
        // Packages.xz of other stanzas, listed (and signed) as it is: its
        // digests match the Release, its contents not the plain index.
        let dist = out.join("dists/bionic");
        let xz = dist.join("main/binary-amd64/Packages.xz");
        let mut enc = crate::deb::Compression::Xz
            .encoder(std::fs::File::create(&xz).unwrap(), 6, 1)
            .unwrap();
        std::io::Write::write_all(&mut enc, b"Package: other\nVersion: 1\n").unwrap();
        enc.finish().unwrap();
        let listed: Vec<_> = ["Packages", "Packages.gz", "Packages.xz"]
            .iter()
            .map(|f| {
                let rel = format!("main/binary-amd64/{f}");
                let d = crate::digest::digest_reader(std::fs::File::open(dist.join(&rel)).unwrap());
                (rel, d.unwrap())
            })
            .collect();
        // Signed again as a fresh build signs (its by-hash copies made anew).
        std::fs::remove_dir_all(dist.join("main/binary-amd64/by-hash")).unwrap();
        let config = crate::repo::RepoConfig::default();
        crate::repo::sign_dists(&dist, &config, &listed, 1_600_000_000, &keys).unwrap();
        let keyring = crate::openpgp::sign::export_public(&keys).0;
        let v = crate::repo::verify::verify(&out, &keyring, 1_600_000_100);
        assert_eq!(v.problems.len(), 1, "{:?}", v.problems);
        assert!(
            v.problems[0].contains(
                "Packages.xz: decompresses to other bytes than main/binary-amd64/Packages"
            ),
            "{:?}",
            v.problems
        );
    }

    #[test]
    fn write_refuses_what_verify_would_reject_and_keeps_the_previous_output() {
        let dir = tempfile::tempdir().unwrap();
        let keys = [key()];
        let out = dir.path().join("repo-out");
        let good = [tiny_deb(dir.path(), "liba", "1.0-1", None)];
        write_repo(&out, &good, &keys, 1_600_000_000, "").unwrap();
        let before = std::fs::read(out.join("dists/bionic/InRelease")).unwrap();
        // A package that needs a version the repository does not have.
        let broken = [
            tiny_deb(dir.path(), "liba", "1.0-1", None),
            tiny_deb(dir.path(), "tool", "2.0-1", Some("liba (= 9.9-1)")),
        ];
        let err = write_repo(&out, &broken, &keys, 1_600_000_001, "").unwrap_err();
        assert!(
            matches!(err, crate::repo::RepoError::NotInstallable { .. }),
            "{err}"
        );
        assert_eq!(
            std::fs::read(out.join("dists/bionic/InRelease")).unwrap(),
            before
        );
        let staging: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("staging"))
            .collect();
        assert!(staging.is_empty(), "staging left behind: {staging:?}");
    }

    /// Every file under `root` with its inode, sorted.
    fn inodes(root: &std::path::Path) -> Vec<(String, u64)> {
        use std::os::unix::fs::MetadataExt;
        let mut v: Vec<_> = walkdir::WalkDir::new(root)
            .into_iter()
            .flatten()
            .filter(|e| e.file_type().is_file())
            .map(|e| {
                let rel = e
                    .path()
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                (rel, e.metadata().unwrap().ino())
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_later_build_updates_the_pool_in_place_and_removes_what_no_index_lists() {
        let dir = tempfile::tempdir().unwrap();
        let keys = [key()];
        let out = dir.path().join("repo-out");
        let (liba, libb) = (
            tiny_deb(dir.path(), "liba", "1.0-1", None),
            tiny_deb(dir.path(), "libb", "1.0-1", None),
        );
        let first = write_repo(&out, &[liba, libb], &keys, 1_600_000_000, "").unwrap();
        let before = inodes(&out.join("pool"));
        // Something put into the output by hand: gone, as the output is
        // replaced whole.
        std::fs::create_dir_all(out.join("extras")).unwrap();
        std::fs::write(out.join("extras/note.txt"), "x").unwrap();
        // liba stays, libb goes, libc comes; a later Date.
        let debs = [
            tiny_deb(dir.path(), "liba", "1.0-1", None),
            tiny_deb(dir.path(), "libc", "2.0-1", None),
        ];
        let second = write_repo(&out, &debs, &keys, 1_600_000_100, "").unwrap();
        let after = inodes(&out.join("pool"));
        let liba_path = |v: &[(String, u64)]| v.iter().find(|(p, _)| p.contains("liba_")).cloned();
        assert_eq!(
            liba_path(&before),
            liba_path(&after),
            "liba neither copied nor linked again"
        );
        let names: Vec<&str> = after.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            names,
            [
                "main/liba/liba/liba_1.0-1_amd64.deb",
                "main/libc/libc/libc_2.0-1_amd64.deb"
            ]
        );
        assert!(
            !out.join("pool/main/libb").exists(),
            "the emptied directories go"
        );
        assert!(
            !out.join("extras").exists(),
            "what build did not write goes"
        );
        assert_ne!(first.index.files, Vec::<String>::new());
        assert_eq!(second.packages.len(), 2);
        // The stamp's tree (the pool walked before the write, patched with
        // what was placed and removed) is a fresh walk's.
        assert_eq!(
            second.tree,
            crate::files::tree_digest(&out, &|_| false).unwrap()
        );
        let keyring = crate::openpgp::sign::export_public(&keys).0;
        let v = crate::repo::verify::verify(&out, &keyring, 1_600_000_200);
        assert_eq!(
            (v.problems.clone(), v.packages),
            (vec![], 2),
            "{:?}",
            v.problems
        );
    }

    /// An output of one package (liba), and its files' inodes.
    fn output_of_liba(
        dir: &std::path::Path,
        keys: &[crate::openpgp::sign::SigningKey],
    ) -> (std::path::PathBuf, Vec<(String, u64)>) {
        let out = dir.join("repo-out");
        write_repo(
            &out,
            &[tiny_deb(dir, "liba", "1.0-1", None)],
            keys,
            1_600_000_000,
            "",
        )
        .unwrap();
        let before = inodes(&out);
        (out, before)
    }

    #[test]
    fn a_failed_build_in_place_removes_what_it_linked() {
        let dir = tempfile::tempdir().unwrap();
        let keys = [key()];
        let (out, before) = output_of_liba(dir.path(), &keys);
        let broken = [
            tiny_deb(dir.path(), "liba", "1.0-1", None),
            tiny_deb(dir.path(), "tool", "2.0-1", Some("liba (= 9.9-1)")),
        ];
        let err = write_repo(&out, &broken, &keys, 1_600_000_001, "").unwrap_err();
        assert!(
            matches!(err, crate::repo::RepoError::NotInstallable { .. }),
            "{err}"
        );
        assert_eq!(inodes(&out), before, "the output as it was, file for file");
        assert!(
            !out.join("pool/main/t").exists(),
            "no directory left behind"
        );
    }

    /// A package that is not what its artifact says stops the placing:
    /// neither what was linked nor the directories made for the packages
    /// never placed stay.
    #[test]
    fn a_failed_placing_in_place_leaves_no_directory() {
        let dir = tempfile::tempdir().unwrap();
        let keys = [key()];
        let (out, before) = output_of_liba(dir.path(), &keys);
        let mut debs = vec![tiny_deb(dir.path(), "liba", "1.0-1", None)];
        // First in pool order: the placing stops at it.
        let mut bad = tiny_deb(dir.path(), "aaa-bad", "1.0-1", None);
        bad.sha256 = "0".repeat(64);
        debs.push(bad);
        for i in 0..40 {
            debs.push(tiny_deb(dir.path(), &format!("pkg{i:02}"), "1.0-1", None));
        }
        let err = write_repo(&out, &debs, &keys, 1_600_000_001, "").unwrap_err();
        assert!(
            matches!(err, crate::repo::RepoError::Changed { .. }),
            "{err}"
        );
        assert_eq!(inodes(&out), before, "the output as it was, file for file");
        for gone in ["pool/main/a/aaa-bad", "pool/main/p"] {
            assert!(!out.join(gone).exists(), "{gone} left behind");
        }
    }

    /// Pool paths sorted without splitting them come in a walk's order
    /// (by component), where `-`, `.` and `+` sort before `/`.
    #[test]
    fn pool_paths_sort_as_paths_do() {
        let mut names = Vec::new();
        for dir in ["b", "b-x", "b.x", "b+x", "bx", "lib", "lib-z", "libz"] {
            for file in [
                "b_1_all.deb",
                "b-x_1_all.deb",
                "b_1.0_all.deb",
                "b+x_1_all.deb",
            ] {
                names.push(format!("pool/main/{}/{dir}/{file}", &dir[..1]));
                names.push(format!("pool/main/{dir}/{file}"));
            }
        }
        let mut by_path = names.clone();
        by_path.sort_by(|a, b| std::path::Path::new(a).cmp(std::path::Path::new(b)));
        names.sort_by(|a, b| super::in_walk_order(a, b));
        assert_eq!(names, by_path);
    }

    #[test]
    fn pool_names_are_in_pool_order_each_once_and_a_name_with_two_contents_is_refused() {
        use super::{PoolInput, pool_entries, pool_names, pool_positions};
        use crate::format::deb822::ControlParagraph;
        use std::path::Path;
        let control = |name: &str| {
            ControlParagraph::parse_single(&format!(
                "Package: {name}\nVersion: 1.0-1\nArchitecture: amd64\nMaintainer: m <m@example.org>\nDescription: d\n"
            ))
            .unwrap()
        };
        let (b, ab, abc, lib) = (
            control("bb"),
            control("ab"),
            control("ab-c"),
            control("libz"),
        );
        let mut stanzas = crate::repo::stanzas::Stanzas::default();
        let mut input = |file: &str, control: &ControlParagraph, sha256: &str| PoolInput {
            file: Path::new(file).into(),
            entry: stanzas.add(control).unwrap(),
            size: 1,
            // Two hex digits, as all 64.
            sha256: crate::digest::Sha256Sum::from_hex(&sha256.repeat(32)).unwrap(),
        };
        let mut packages = vec![
            input("/1", &b, "11"),
            input("/2", &lib, "22"),
            input("/3", &abc, "33"),
            input("/4", &b, "11"),
            input("/5", &ab, "55"),
        ];
        let unique = pool_names(&packages, "main").unwrap();
        let named: Vec<(&str, &Path)> =
            unique.iter().map(|(r, p)| (r.as_str(), &*p.file)).collect();
        // Pool order is a walk's (`ab/` before `ab-c/`), not the strings'.
        assert_eq!(
            named,
            [
                ("pool/main/a/ab/ab_1.0-1_amd64.deb", Path::new("/5")),
                ("pool/main/a/ab-c/ab-c_1.0-1_amd64.deb", Path::new("/3")),
                ("pool/main/b/bb/bb_1.0-1_amd64.deb", Path::new("/1")),
                ("pool/main/libz/libz/libz_1.0-1_amd64.deb", Path::new("/2")),
            ]
        );
        // The pool's entries, by name, one for both files of `bb`; the
        // packages are taken.
        let named = pool_positions(&packages, unique);
        let entries = pool_entries(&mut packages, named);
        assert!(packages.is_empty());
        let entries: Vec<(&str, &str, &str)> = entries
            .iter()
            .map(|e| (e.package(), e.filename(), &e.sha256()[62..]))
            .collect();
        assert_eq!(
            entries,
            [
                ("ab-c", "pool/main/a/ab-c/ab-c_1.0-1_amd64.deb", "33"),
                ("ab", "pool/main/a/ab/ab_1.0-1_amd64.deb", "55"),
                ("bb", "pool/main/b/bb/bb_1.0-1_amd64.deb", "11"),
                ("libz", "pool/main/libz/libz/libz_1.0-1_amd64.deb", "22"),
            ]
        );
        let clash = [
            input("/1", &b, "11"),
            input("/2", &lib, "22"),
            input("/6", &b, "66"),
        ];
        let Err(e) = pool_names(&clash, "main") else {
            panic!("a name with two contents is refused")
        };
        let e = e.to_string();
        assert!(e.contains("/6"), "{e}");
        let (here, there) = ("66".repeat(32), "11".repeat(32));
        assert!(
            e.contains(&format!("sha256 {here} here, {there} there")),
            "{e}"
        );
    }

    #[test]
    fn other_bytes_under_a_pool_name_write_the_output_whole() {
        let dir = tempfile::tempdir().unwrap();
        let keys = [key()];
        let out = dir.path().join("repo-out");
        let first = tiny_deb(dir.path(), "liba", "1.0-1", None);
        write_repo(&out, &[first], &keys, 1_600_000_000, "").unwrap();
        // The same name, version and architecture, rebuilt with other bytes:
        // clients of the old index must keep the old file until the swap.
        let other_dir = dir.path().join("other");
        std::fs::create_dir_all(&other_dir).unwrap();
        let rebuilt = tiny_deb(&other_dir, "liba", "1.0-1", Some("libc6"));
        write_repo(
            &out,
            std::slice::from_ref(&rebuilt),
            &keys,
            1_600_000_100,
            "",
        )
        .unwrap();
        let pooled = out.join("pool/main/liba/liba/liba_1.0-1_amd64.deb");
        assert_eq!(crate::digest::sha256_file(&pooled).unwrap(), rebuilt.sha256);
        let keyring = crate::openpgp::sign::export_public(&keys).0;
        let v = crate::repo::verify::verify(&out, &keyring, 1_600_000_200);
        assert_eq!(v.problems, Vec::<String>::new());
    }
}
