//! Publishing a built repository to a directory (an nginx or Apache docroot,
//! an NFS mount) in an order that keeps clients safe at every moment:
//! pool files first, then by-hash indexes, then the plain indexes and other
//! files, then `Release`, `Release.gpg`, and `InRelease` last. Each file is
//! written under a temporary name and renamed, so a reader never sees half a
//! file; a publish killed half-way leaves the previous Release in force, with
//! everything it references still there (its pool files and, through
//! by-hash, its indexes). Pool and by-hash files that the previous Release
//! referenced are kept until the next publish. Unchanged files (same size and
//! modification time, which publishing preserves) are not rewritten.

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, BufReader};
use std::path::{Path, PathBuf};

use crate::format::deb822::ParagraphReader;
use crate::format::release::{HashAlgo, Release};

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("{}: not a built repository (no dists/*/Release); run `debforge build` first", path.display())]
    NotARepository { path: PathBuf },
    #[error("{}: the target is not writable: {source}", path.display())]
    ReadOnly { path: PathBuf, source: io::Error },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Step {
    Copy,
    Keep,
    Delete,
}

/// What publishing did (or, with `dry_run`, would do), in order.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PublishReport {
    pub steps: Vec<(Step, String)>,
}

impl PublishReport {
    pub fn count(&self, step: Step) -> usize {
        self.steps.iter().filter(|(s, _)| *s == step).count()
    }
}

fn io_err(path: &Path) -> impl Fn(io::Error) -> PublishError + '_ {
    move |source| PublishError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Every file under `root` as a relative path, sorted; names starting with
/// `.` (temporary files, locks, staging directories) are left out at every
/// level, and a missing `root` has no files. Shared with bundles.
pub(crate) fn tree_files(root: &Path) -> io::Result<Vec<String>> {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<String>) -> io::Result<()> {
        let rd = match fs::read_dir(dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound && rel.is_empty() => return Ok(()),
            Err(e) => return Err(e),
        };
        for e in rd {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let child = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            if e.file_type()?.is_dir() {
                walk(&e.path(), &child, out)?;
            } else {
                out.push(child);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(root, "", &mut out)?;
    out.sort();
    Ok(out)
}

fn files(root: &Path) -> Result<Vec<String>, PublishError> {
    tree_files(root).map_err(io_err(root))
}

/// The files a repository's Releases reference, directly or through their
/// indexes: the Release files, the listed indexes and their by-hash copies,
/// and the pool files of the plain Packages indexes.
fn referenced(root: &Path) -> Result<BTreeSet<String>, PublishError> {
    let mut refs = BTreeSet::new();
    let Ok(rd) = fs::read_dir(root.join("dists")) else {
        return Ok(refs);
    };
    for suite in rd.flatten() {
        let suite_rel = format!("dists/{}", suite.file_name().to_string_lossy());
        let Ok(text) = fs::read_to_string(suite.path().join("Release")) else {
            continue;
        };
        let Ok(release) = Release::parse(&text) else {
            continue;
        };
        for f in ["Release", "Release.gpg", "InRelease"] {
            refs.insert(format!("{suite_rel}/{f}"));
        }
        for algo in [
            HashAlgo::Md5,
            HashAlgo::Sha1,
            HashAlgo::Sha256,
            HashAlgo::Sha512,
        ] {
            for f in release.files(algo).unwrap_or_default() {
                refs.insert(format!("{suite_rel}/{}", f.path));
                let dir = f.path.rsplit_once('/').map_or("", |(d, _)| d);
                let by_hash = if dir.is_empty() {
                    String::new()
                } else {
                    format!("{dir}/")
                };
                refs.insert(format!(
                    "{suite_rel}/{by_hash}by-hash/{}/{}",
                    algo.release_field(),
                    f.digest
                ));
                if f.path.ends_with("/Packages")
                    && let Ok(file) = fs::File::open(suite.path().join(&f.path))
                {
                    for p in ParagraphReader::new(BufReader::new(file)).flatten() {
                        if let Some(name) = p.get("Filename") {
                            refs.insert(name.to_string());
                        }
                    }
                }
            }
        }
    }
    Ok(refs)
}

/// The publishing order: pool, by-hash, other files, Release, Release.gpg, InRelease.
fn rank(rel: &str) -> u8 {
    if rel.starts_with("pool/") {
        0
    } else if rel.contains("/by-hash/") {
        1
    } else if rel.ends_with("/Release") {
        3
    } else if rel.ends_with("/Release.gpg") {
        4
    } else if rel.ends_with("/InRelease") {
        5
    } else {
        2
    }
}

fn unchanged(src: &fs::Metadata, dst: &Path) -> bool {
    match fs::metadata(dst) {
        Ok(d) => d.len() == src.len() && d.modified().ok() == src.modified().ok(),
        Err(_) => false,
    }
}

/// Publishes the repository in `out` to the directory `target`.
pub fn publish_dir(
    out: &Path,
    target: &Path,
    dry_run: bool,
) -> Result<PublishReport, PublishError> {
    let source_files = files(out)?;
    if !source_files
        .iter()
        .any(|f| f.starts_with("dists/") && f.ends_with("/Release"))
    {
        return Err(PublishError::NotARepository {
            path: out.to_path_buf(),
        });
    }
    if !dry_run {
        fs::create_dir_all(target).map_err(|source| PublishError::ReadOnly {
            path: target.to_path_buf(),
            source,
        })?;
        let probe = tempfile::Builder::new()
            .prefix(".debforge-probe-")
            .tempfile_in(target);
        probe.map_err(|source| PublishError::ReadOnly {
            path: target.to_path_buf(),
            source,
        })?;
    }
    // What the previous Release (the one in force) still needs.
    let previous = referenced(target)?;
    let mut ordered = source_files.clone();
    ordered.sort_by_key(|f| (rank(f), f.clone()));
    let mut report = PublishReport::default();
    for rel in &ordered {
        let src = out.join(rel);
        let dst = target.join(rel);
        let meta = fs::metadata(&src).map_err(io_err(&src))?;
        if unchanged(&meta, &dst) {
            report.steps.push((Step::Keep, rel.clone()));
            continue;
        }
        report.steps.push((Step::Copy, rel.clone()));
        if dry_run {
            continue;
        }
        let dir = dst.parent().expect("file in a directory");
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let tmp = dir.join(format!(
            ".{}.debforge-part",
            dst.file_name().unwrap_or_default().to_string_lossy()
        ));
        fs::copy(&src, &tmp).map_err(io_err(&tmp))?;
        let f = fs::File::options()
            .write(true)
            .open(&tmp)
            .map_err(io_err(&tmp))?;
        if let Ok(m) = meta.modified() {
            f.set_modified(m).map_err(io_err(&tmp))?;
        }
        f.sync_all().map_err(io_err(&tmp))?;
        fs::rename(&tmp, &dst).map_err(io_err(&dst))?;
    }
    // Old files: gone unless the Release that was in force until now still
    // references them (they go with the next publish).
    let current: BTreeSet<&String> = source_files.iter().collect();
    for rel in files(target)? {
        if current.contains(&rel) || previous.contains(&rel) {
            continue;
        }
        report.steps.push((Step::Delete, rel.clone()));
        if !dry_run {
            fs::remove_file(target.join(&rel)).map_err(io_err(&target.join(&rel)))?;
        }
    }
    if !dry_run {
        remove_empty_dirs(target);
    }
    Ok(report)
}

fn remove_empty_dirs(dir: &Path) {
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_empty_dirs(&e.path());
                let _ = fs::remove_dir(e.path());
            }
        }
    }
}
