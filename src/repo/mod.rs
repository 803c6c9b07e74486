//! The apt repository debforge writes: `pool/`, then under `dists/<suite>/`
//! the `Packages` indexes (plain, `.gz`, `.xz`, and `by-hash/` copies), the
//! `Release` listing them, and its signatures `Release.gpg` and `InRelease`.
//!
//! Spec: <https://wiki.debian.org/DebianRepository/Format>. Stanzas go
//! straight into the index writers (memory stays flat in the number of
//! packages); each finished index is then read once for its four digests and
//! linked under `by-hash/`. [`write`] is the whole output transaction.

/// The public keyring at the output's top level (`.gpg` for Signed-By, `.asc`).
pub const KEYRING_NAME: &str = "debforge-archive-keyring";
/// The pins (apt preferences) at the output's top level.
pub const PREFERENCES_NAME: &str = "debforge.pref";

pub mod against;
mod control_texts;
pub mod generations;
mod in_place;
pub mod index;
pub mod pieces;
pub mod policy;
pub mod pool;
mod sorted_table;
pub mod stanzas;
#[cfg(test)]
pub(crate) mod test_support;
pub mod verify;
mod write;

pub use in_place::{Inodes, Walked, redate};
pub use write::{
    OUTPUT_MARKER, OutputLock, OutputReport, PoolEntry, PoolInput, RepoParams, check_output,
    lock_output, write, write_kept, write_then,
};

use crate::error::FileError;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::digest::Digests;
use crate::format::release::{ReleaseFields, render};
use crate::openpgp::sign::{SignError, SigningKey, sign_cleartext, sign_detached};
pub use pieces::{KeptPieces, PieceMap};

pub use index::{IndexCache, IndexError, IndexStats, IndexedDeb, index_tree, read_deb, walk_debs};

pub use crate::format::release::RepoConfig;

/// Text `i` of several kept back to back in one string, `ends[j]` where
/// text `j` ends and the last running to the string's end (a build holds
/// thousands of such packed entries: one allocation each, not one a text).
fn packed_text<'t>(text: &'t str, ends: &[u32], i: usize) -> &'t str {
    let start = if i == 0 { 0 } else { ends[i - 1] as usize };
    let end = ends.get(i).map_or(text.len(), |e| *e as usize);
    &text[start..end]
}

#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    #[error("{0}")]
    Index(#[from] IndexError),
    #[error(transparent)]
    Io(#[from] crate::error::FileError),
    #[error("{0}")]
    Sign(#[from] SignError),
    #[error("{}: {reason}", crate::error::ShortPath(path))]
    BadPackage { path: PathBuf, reason: String },
    #[error(
        "{}: the file changed since it was verified (sha256 {expected} expected, {found} found); build again (a file in debforge's cache: remove it first)",
        crate::error::ShortPath(path)
    )]
    Changed {
        path: PathBuf,
        expected: String,
        found: String,
    },
    #[error(
        "another debforge build is writing {} (it holds {}); wait for it to finish",
        crate::error::ShortPath(out),
        crate::error::ShortPath(lock)
    )]
    Busy { out: PathBuf, lock: PathBuf },
    #[error(
        "{}: not written by debforge (it holds {files}); `debforge build` replaces its output directory whole",
        crate::error::ShortPath(out)
    )]
    OutputNotOurs { out: PathBuf, files: String },
    #[error(
        "{}: not a readable generation manifest: {reason}",
        crate::error::ShortPath(path)
    )]
    BadGeneration { path: PathBuf, reason: String },
    #[error(
        "generation {generation}: {} is no longer in the pool of {} (builds keep the last --keep generations' files)",
        crate::error::ShortPath(file),
        crate::error::ShortPath(out)
    )]
    NotKept {
        generation: u32,
        out: PathBuf,
        file: PathBuf,
    },
    #[error(
        "generation {generation} was recorded without its {what} (by an older debforge); it cannot be published again"
    )]
    IncompleteGeneration { generation: u32, what: &'static str },
    #[error(
        "{}: is a file, not a directory; `debforge build` writes a repository (a directory) there",
        crate::error::ShortPath(out)
    )]
    OutputNotADirectory { out: PathBuf },
    #[error(
        "the repository would not install: {}\n  nothing was written; {} is as it was",
        problems.join("\n  "),
        crate::error::ShortPath(out)
    )]
    NotInstallable { out: PathBuf, problems: Vec<String> },
    #[error(
        "the repository would not install on the lab's base (repository.toml [base]), where nothing else can be fetched:\n  {}\n  nothing was written; {} is as it was",
        missing.join("\n  "),
        crate::error::ShortPath(out)
    )]
    NotInstallableOnBase { out: PathBuf, missing: Vec<String> },
    #[error("{filename}: architecture {arch} is not one of the repository's ({archs})")]
    ForeignArch {
        filename: String,
        arch: String,
        archs: String,
    },
}

/// One `Packages` index: the plain file and its compressed forms written
/// as stanzas come (each hashed on the way), the forms in pieces
/// ([`pieces`]), copied where an earlier generation compressed them.
struct PackagesWriter<'k> {
    rel: String,
    path: PathBuf,
    out: crate::digest::HashingWriter<BufWriter<File>>,
    forms: pieces::FormsWriter<'k>,
    first: bool,
}

impl<'k> PackagesWriter<'k> {
    fn create(
        dist: &Path,
        dir: &str,
        kept: &'k KeptPieces,
    ) -> Result<PackagesWriter<'k>, RepoError> {
        let rel = format!("{dir}Packages");
        let path = dist.join(&rel);
        let parent = crate::files::parent(&path);
        fs::create_dir_all(parent).map_err(FileError::at(parent))?;
        let file = File::create(&path).map_err(FileError::at(&path))?;
        let out = crate::digest::HashingWriter::new(
            BufWriter::new(file),
            crate::digest::Hasher::new(crate::digest::DigestSet::ALL),
        );
        let forms =
            pieces::FormsWriter::create(&dist_path(&path, ".xz"), &dist_path(&path, ".gz"), kept)?;
        Ok(PackagesWriter {
            rel,
            path,
            out,
            forms,
            first: true,
        })
    }

    fn write_stanza(&mut self, text: &str) -> Result<(), RepoError> {
        let at = FileError::at(&self.path);
        let separator: &[u8] = if self.first { b"" } else { b"\n" };
        self.first = false;
        self.out.write_all(separator).map_err(&at)?;
        self.out.write_all(text.as_bytes()).map_err(at)?;
        self.forms.stanza(separator, text.as_bytes())
    }

    /// The plain file and its compressed forms, each with its digests, and
    /// the map of the forms' pieces.
    fn finish(self) -> Result<(Vec<(String, Digests)>, PieceMap), RepoError> {
        let PackagesWriter {
            rel,
            path,
            out,
            forms,
            ..
        } = self;
        let (mut buffered, plain) = out.finish();
        buffered.flush().map_err(FileError::at(&path))?;
        let forms = forms.finish()?;
        let map = PieceMap {
            forms: crate::deb::INDEX_FORMS.to_string(),
            xz_sha256: forms.xz.sha256.clone(),
            gz_sha256: forms.gz.sha256.clone(),
            pieces: forms.pieces,
        };
        let listed = vec![
            (rel.clone(), plain),
            (format!("{rel}.gz"), forms.gz),
            (format!("{rel}.xz"), forms.xz),
        ];
        Ok((listed, map))
    }
}

/// `path` with `suffix` appended to its file name.
fn dist_path(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// What writing the indexes produced.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct IndexReport {
    pub packages: usize,
    pub stats: IndexStats,
    /// Index files listed in Release, relative to `dists/<suite>/`.
    pub files: Vec<String>,
    /// The pieces of each index's compressed forms, kept with them for the
    /// next build (not recorded in a stamp).
    #[serde(skip)]
    pub pieces: Vec<PieceMap>,
}

/// Writes `dists/<suite>/` from package entries handed to it one at a time:
/// Packages (plain, gz, xz) per architecture (`all` packages in each), then
/// on `finish` their by-hash copies, Release, and the signatures.
pub struct DistsWriter<'c> {
    dist: PathBuf,
    config: &'c RepoConfig,
    writers: Vec<(String, PackagesWriter<'c>)>,
    count: usize,
}

impl<'c> DistsWriter<'c> {
    /// Over `root`, copying compressed pieces from `kept` where it has them.
    pub fn new(
        root: &Path,
        config: &'c RepoConfig,
        kept: &'c KeptPieces,
    ) -> Result<DistsWriter<'c>, RepoError> {
        let dist = root.join("dists").join(&config.suite);
        let _ = crate::files::remove_tree(&dist);
        let mut writers = Vec::new();
        for arch in &config.architectures {
            writers.push((
                arch.clone(),
                PackagesWriter::create(
                    &dist,
                    &format!("{}/binary-{arch}/", config.component),
                    kept,
                )?,
            ));
        }
        Ok(DistsWriter {
            dist,
            config,
            writers,
            count: 0,
        })
    }

    /// Adds one package's Packages stanza (packages come in pool order).
    pub fn add(
        &mut self,
        architecture: &str,
        filename: &str,
        stanza: &str,
    ) -> Result<(), RepoError> {
        let mut placed = false;
        for (a, w) in &mut self.writers {
            if architecture == "all" || a == architecture {
                w.write_stanza(stanza)?;
                placed = true;
            }
        }
        if !placed {
            return Err(RepoError::ForeignArch {
                filename: filename.to_string(),
                arch: architecture.to_string(),
                archs: self.config.architectures.join(" "),
            });
        }
        self.count += 1;
        Ok(())
    }

    /// Finishes the indexes and writes the Release (dated `date`) and, with
    /// `keys`, Release.gpg and InRelease signed by all of them.
    pub fn finish(
        self,
        date: i64,
        keys: &[SigningKey],
        stats: IndexStats,
    ) -> Result<IndexReport, RepoError> {
        let DistsWriter {
            dist,
            config,
            writers,
            count,
        } = self;
        let mut listed: Vec<(String, Digests)> = Vec::new();
        let mut pieces = Vec::new();
        for (_, w) in writers {
            let (files, map) = w.finish()?;
            listed.extend(files);
            pieces.push(map);
        }
        sign_dists(&dist, config, &listed, date, keys)?;
        Ok(IndexReport {
            packages: count,
            stats,
            files: listed.into_iter().map(|(r, _)| r).collect(),
            pieces,
        })
    }
}

/// Finishes `dist` (`dists/<suite>/`) whose index files `listed` (paths
/// relative to it, with all four digests) are in place: their by-hash links,
/// the Release dated `date`, and with `keys` Release.gpg and InRelease
/// signed by all of them.
pub fn sign_dists(
    dist: &Path,
    config: &RepoConfig,
    listed: &[(String, Digests)],
    date: i64,
    keys: &[SigningKey],
) -> Result<(), RepoError> {
    for (rel, d) in listed {
        let path = dist.join(rel);
        // by-hash copies: apt fetches an index by its hash, so a client
        // never sees a Release and indexes of different generations.
        let dir = path.parent().expect("index in a directory").join("by-hash");
        for field in ["MD5Sum", "SHA1", "SHA256", "SHA512"] {
            let Some(hash) = d.by_field(field) else {
                continue;
            };
            let target = dir.join(field).join(hash);
            fs::create_dir_all(target.parent().expect("by-hash dir"))
                .map_err(FileError::at(&target))?;
            if fs::hard_link(&path, &target).is_err() {
                fs::copy(&path, &target).map_err(FileError::at(&target))?;
            }
        }
    }
    let fields = ReleaseFields {
        origin: config.origin.clone(),
        label: config.label.clone(),
        suite: config.suite.clone(),
        codename: config.codename.clone(),
        date,
        valid_until: config.valid_for.map(|v| date + v),
        architectures: config.architectures.clone(),
        components: vec![config.component.clone()],
        description: config.description.clone(),
        acquire_by_hash: true,
    };
    let release = render(&fields, listed);
    let release_path = dist.join("Release");
    fs::write(&release_path, &release).map_err(FileError::at(&release_path))?;
    if !keys.is_empty() {
        // At the Release's Date, or when the newest key was made if that is
        // later (gpgv rejects a signature older than its key); either way a
        // function of the inputs, so rebuilding gives the same bytes.
        let dated = std::time::UNIX_EPOCH + std::time::Duration::from_secs(date.max(0) as u64);
        let created = keys
            .iter()
            .map(SigningKey::created)
            .fold(dated, std::cmp::max);
        let detached = sign_detached(keys, release.as_bytes(), created)?;
        fs::write(dist.join("Release.gpg"), detached).map_err(FileError::at(dist))?;
        let inline = sign_cleartext(keys, release.as_bytes(), created)?;
        fs::write(dist.join("InRelease"), inline).map_err(FileError::at(dist))?;
    }
    Ok(())
}

impl crate::error::Hint for RepoError {
    fn hint(&self) -> Option<String> {
        match self {
            RepoError::OutputNotOurs { .. } => Some(
                "choose another --out, or pass --force to replace it (what it holds is deleted)"
                    .into(),
            ),
            RepoError::OutputNotADirectory { .. } => {
                Some("remove the file or choose another --out".into())
            }
            RepoError::NotInstallable { .. } => Some(
                "a package names a version the repository does not have: a relation written by hand in a recipe (use build.depends-exact, which follows the built versions), a package missing from the recipes, or a `pin` on a package the repository lacks"
                    .into(),
            ),
            RepoError::NotInstallableOnBase { .. } => Some(
                "add a recipe for each missing package (from the distribution's signed source, e.g. `from = { source = \"ubuntu\" }`), or drop what needs it; `debforge verify --against BASE` lists the same on a published repository"
                    .into(),
            ),
            RepoError::Io(e) => crate::error::Hint::hint(e),
            _ => None,
        }
    }
}
