//! Publishing a built repository to a mirror, in an order that keeps clients
//! safe at every moment: pool files first, then by-hash indexes, then the
//! plain indexes and other files, then `Release`, `Release.gpg`, and
//! `InRelease` last. A publish killed half-way leaves the previous Release in
//! force, with everything it references still there (its pool files and,
//! through by-hash, its indexes). Files the previous Release referenced are
//! kept until the next publish, for clients that fetched it moments ago.
//!
//! Three kinds of target share that plan: a directory ([`dir`]), an rsync
//! destination through the system `rsync` ([`rsync`]), and an S3-compatible
//! bucket ([`s3`]). Each decides what "unchanged" means for itself: pool files
//! by size and time, by-hash files by name and size (their names pin their
//! content), everything else by content, since a rebuilt index may keep its
//! size.

pub mod dir;
pub mod rsync;
pub mod s3;

use crate::error::FileError;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::io::{self, BufReader};
use std::path::{Path, PathBuf};

use crate::format::deb822::ParagraphReader;
use crate::format::release::{HashAlgo, Release};

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(transparent)]
    Io(#[from] crate::error::FileError),
    #[error(
        "{}: not a built repository (no dists/*/Release); run `debforge build` first",
        crate::error::ShortPath(path)
    )]
    NotARepository { path: PathBuf },
    #[error("--to {}: {why}", crate::error::ShortText(text))]
    BadTarget { text: String, why: String },
    #[error(
        "{tgt}: the target is not writable: {detail}",
        tgt = crate::error::ShortText(target)
    )]
    ReadOnly { target: String, detail: String },
    #[error(
        "{tgt}: the target cannot be reached: {detail}",
        tgt = crate::error::ShortText(target)
    )]
    Unreachable { target: String, detail: String },
    #[error(
        "{tgt}: credentials refused: {detail}",
        tgt = crate::error::ShortText(target)
    )]
    Credentials { target: String, detail: String },
    #[error(
        "{tgt}: rsync failed ({detail})",
        tgt = crate::error::ShortText(target)
    )]
    Rsync { target: String, detail: String },
    #[error("`rsync` is not installed (apt-get install rsync)")]
    RsyncMissing,
    #[error(
        "{tgt}: {path} would change under clients of the Release in force: it lists sha256 {published}, this build has {built}; a package rebuilt at the same name, version and architecture with other bytes",
        tgt = crate::error::ShortText(target)
    )]
    ChangedInPlace {
        target: String,
        path: String,
        published: String,
        built: String,
    },
    #[error(
        "{tgt}: another debforge publish is writing it (it holds {lk}); wait for it to finish",
        tgt = crate::error::ShortText(target),
        lk = crate::error::ShortText(lock)
    )]
    Busy { target: String, lock: String },
    #[error(
        "{tgt}: {path} is listed ({size} bytes) but was not read: {}",
        if *size > crate::input::limit::INDEX {
            format!("more than the {} bytes debforge reads of an index", crate::input::limit::INDEX)
        } else {
            "it changed while it was copied".to_string()
        },
        tgt = crate::error::ShortText(target)
    )]
    NotRead {
        target: String,
        path: String,
        size: u64,
    },
    #[error(
        "{tgt}: {action} {key}: {detail}",
        tgt = crate::error::ShortText(target)
    )]
    Store {
        target: String,
        action: &'static str,
        key: String,
        detail: String,
    },
}

impl crate::error::Hint for PublishError {
    fn hint(&self) -> Option<String> {
        match self {
            PublishError::Credentials { .. } => Some(
                "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary keys) for a user that may write the bucket".into(),
            ),
            PublishError::Unreachable { .. } => Some(
                "check the host, port and --endpoint; the previous repository on the target is untouched".into(),
            ),
            PublishError::ReadOnly { .. } => {
                Some("give the publishing user write access; nothing was changed".into())
            }
            PublishError::ChangedInPlace { .. } => Some(
                "nothing was published; give the package a new version (bump the recipe's version, or its version-suffix), or build with the SOURCE_DATE_EPOCH of the published build so it comes out byte for byte the same".into(),
            ),
            PublishError::NotRead { .. } => Some(
                "nothing was changed: the pool files it lists could not be protected from removal; remove or replace that file on the target (or publish again, if it was being rewritten)".into(),
            ),
            PublishError::Rsync { .. } | PublishError::Store { .. } => Some(
                "the previous Release is still in force on the target; run the same publish again to complete it".into(),
            ),
            PublishError::Io(e) => crate::error::Hint::hint(e),
            _ => None,
        }
    }
}

/// Where a repository is published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A directory: a web server's docroot, an NFS mount.
    Dir(PathBuf),
    /// An rsync destination: `rsync://host[:port]/module/path` (an rsync
    /// daemon) or `[user@]host:/path` (over ssh, or `RSYNC_RSH`).
    Rsync(String),
    /// `s3://bucket/prefix` on AWS or an S3-compatible store at `endpoint`.
    S3 {
        bucket: String,
        prefix: String,
        endpoint: Option<String>,
    },
}

impl Target {
    /// Reads `--to`. `endpoint` is `--endpoint`, for S3 targets only.
    pub fn parse(text: &str, endpoint: Option<&str>) -> Result<Target, PublishError> {
        let bad = |why: &str| PublishError::BadTarget {
            text: text.to_string(),
            why: why.to_string(),
        };
        let target = if let Some(rest) = text.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(bad("no bucket; write s3://BUCKET/PREFIX"));
            }
            let prefix = prefix.trim_matches('/');
            if prefix.split('/').any(|c| c == "." || c == "..") {
                return Err(bad("the prefix may not hold `.` or `..`"));
            }
            Target::S3 {
                bucket: bucket.to_string(),
                prefix: prefix.to_string(),
                endpoint: endpoint.map(str::to_string),
            }
        } else if text.starts_with("rsync://") {
            Target::Rsync(text.to_string())
        } else if text.contains("://") {
            return Err(bad(
                "unknown scheme; publish to a directory, rsync://HOST/MODULE/PATH, USER@HOST:/PATH or s3://BUCKET/PREFIX",
            ));
        } else if is_ssh_style(text) {
            Target::Rsync(text.to_string())
        } else {
            Target::Dir(PathBuf::from(text))
        };
        if endpoint.is_some() && !matches!(target, Target::S3 { .. }) {
            return Err(bad("--endpoint is for s3:// targets"));
        }
        Ok(target)
    }
}

/// `host:path` or `user@host:path`, as rsync reads it: a colon before any
/// slash. `./a:b` and `/a:b` are local paths.
fn is_ssh_style(text: &str) -> bool {
    match text.find(':') {
        Some(colon) => colon > 0 && !text[..colon].contains('/'),
        None => false,
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Dir(p) => write!(f, "{}", p.display()),
            Target::Rsync(t) => f.write_str(t),
            Target::S3 { bucket, prefix, .. } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            Target::S3 { bucket, prefix, .. } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

pub use crate::report::PublishStep as Step;

/// What publishing did (or, with `dry_run`, would do), in order.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PublishReport {
    pub target: String,
    pub dry_run: bool,
    pub steps: Vec<(Step, String)>,
}

impl PublishReport {
    pub fn count(&self, step: Step) -> usize {
        self.steps.iter().filter(|(s, _)| *s == step).count()
    }
}

/// Collects the report and reports each step as it happens
/// ([`Event::Published`](crate::report::Event::Published)).
pub(crate) struct Recorder<'a> {
    report: PublishReport,
    reporter: &'a dyn crate::report::Reporter,
}

impl<'a> Recorder<'a> {
    fn new(target: &Target, dry_run: bool, reporter: &'a dyn crate::report::Reporter) -> Self {
        Recorder {
            report: PublishReport {
                target: target.to_string(),
                dry_run,
                steps: Vec::new(),
            },
            reporter,
        }
    }

    pub(crate) fn step(&mut self, step: Step, path: &str) {
        self.reporter.event(crate::report::Event::Published {
            step,
            path: path.to_string(),
            dry_run: self.report.dry_run,
        });
        self.report.steps.push((step, path.to_string()));
    }
}

/// Publishes the repository in `out` to `target`. `reporter` sees every
/// step as it happens; the report lists them all.
pub fn publish(
    out: &Path,
    target: &Target,
    dry_run: bool,
    reporter: &dyn crate::report::Reporter,
) -> Result<PublishReport, PublishError> {
    let files = local_files(out)?;
    let mut rec = Recorder::new(target, dry_run, reporter);
    match target {
        Target::Dir(dir) => dir::publish(out, &files, dir, dry_run, &mut rec)?,
        Target::Rsync(dest) => rsync::publish(out, &files, dest, dry_run, &mut rec)?,
        Target::S3 {
            bucket,
            prefix,
            endpoint,
        } => s3::publish(
            out,
            &files,
            &s3::Location {
                bucket,
                prefix,
                endpoint: endpoint.as_deref(),
                display: &target.to_string(),
            },
            dry_run,
            &mut rec,
        )?,
    }
    Ok(rec.report)
}

/// Every regular file under `root` as a relative path, sorted; names
/// starting with `.` (temporary files, locks, staging directories) are left
/// out at every level, and a missing `root` has no files. A FIFO, a device
/// or a socket is none of debforge's files: neither published, bundled nor
/// read (it would block or never end), and replaced where one of ours goes.
/// Shared with bundles.
pub(crate) fn tree_files(root: &Path) -> io::Result<Vec<String>> {
    if !root.exists() {
        return Ok(Vec::new());
    }
    let hidden =
        |e: &walkdir::DirEntry| e.depth() > 0 && e.file_name().as_encoded_bytes().starts_with(b".");
    let mut out = Vec::new();
    for entry in walkdir::WalkDir::new(root)
        .into_iter()
        .filter_entry(|e| !hidden(e))
    {
        let entry = entry.map_err(crate::error::walk_error)?;
        let rel = entry.path().strip_prefix(root).unwrap_or(entry.path());
        if entry.file_type().is_symlink() {
            // No link is published, but the one a generation published
            // again has: `pool`, to its build output's pool.
            if rel == Path::new("pool") && generation_pool(root).is_some() {
                for file in tree_files(&root.join("pool"))? {
                    out.push(format!("pool/{file}"));
                }
            }
        } else if entry.file_type().is_file() {
            out.push(rel.to_string_lossy().into_owned());
        }
    }
    out.sort();
    Ok(out)
}

/// For a generation made a repository again (`.<out>.generation`, see
/// repo::write_kept), its `pool` link's target when that is `<out>/pool`.
fn generation_pool(root: &Path) -> Option<std::path::PathBuf> {
    let name = root.file_name()?.to_str()?;
    let out = name.strip_prefix('.')?.strip_suffix(".generation")?;
    let expected = fs::canonicalize(root.parent()?.join(out).join("pool")).ok()?;
    let target = fs::canonicalize(root.join("pool")).ok()?;
    (target == expected && target.is_dir()).then_some(target)
}

/// The built repository's files in publishing order.
fn local_files(out: &Path) -> Result<Vec<String>, PublishError> {
    let mut files = tree_files(out).map_err(FileError::at(out))?;
    if !files
        .iter()
        .any(|f| f.starts_with("dists/") && f.ends_with("/Release"))
    {
        return Err(PublishError::NotARepository {
            path: out.to_path_buf(),
        });
    }
    files.sort_by_key(|f| (Phase::of(f), f.clone()));
    Ok(files)
}

/// Where a file comes in the publishing order: the pool first, then by-hash
/// indexes, other files, and the Release files last, InRelease the very last
/// (a client that sees a new Release finds everything it names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Phase {
    Pool,
    ByHash,
    Other,
    Release,
    ReleaseGpg,
    InRelease,
}

impl Phase {
    pub(crate) const ALL: [Phase; 6] = [
        Phase::Pool,
        Phase::ByHash,
        Phase::Other,
        Phase::Release,
        Phase::ReleaseGpg,
        Phase::InRelease,
    ];

    pub(crate) fn of(rel: &str) -> Phase {
        if rel.starts_with("pool/") {
            Phase::Pool
        } else if rel.contains("/by-hash/") {
            Phase::ByHash
        } else if rel.ends_with("/Release") {
            Phase::Release
        } else if rel.ends_with("/Release.gpg") {
            Phase::ReleaseGpg
        } else if rel.ends_with("/InRelease") {
            Phase::InRelease
        } else {
            Phase::Other
        }
    }
}

/// Whether a file's name pins its content (pool files are named by package,
/// version and architecture; by-hash files by digest), so size and time are
/// enough to call it unchanged. Others are compared by content.
pub(crate) fn named_by_content(rel: &str) -> bool {
    matches!(Phase::of(rel), Phase::Pool | Phase::ByHash)
}

/// The target files [`referenced`] may read: each suite's Release and its
/// plain Packages indexes (a target that cannot read lazily fetches these).
pub(crate) fn read_by_referenced(rel: &str) -> bool {
    rel.starts_with("dists/")
        && !rel.contains("/by-hash/")
        && (rel.ends_with("/Release") || rel.ends_with("/Packages"))
}

/// Reads one file of a target: None if it is not there.
pub(crate) type ReadTarget<'a> = dyn FnMut(&str) -> Result<Option<Vec<u8>>, PublishError> + 'a;

/// [`referenced`] of the Releases and indexes in the directory `root` (a
/// target, our output, a scratch copy), each read by type and with an
/// index's bound: a FIFO there would hang a publish, a link to /dev/zero
/// fill memory.
pub(crate) fn referenced_in(root: &Path, existing: &[String]) -> Result<Referenced, PublishError> {
    referenced_in_or(root, existing, &mut |_| Ok(None))
}

/// [`referenced_in`], `missing` saying what a file `root` lacks means (a
/// copy of a target that left out what it lists).
pub(crate) fn referenced_in_or(
    root: &Path,
    existing: &[String],
    missing: &mut ReadTarget<'_>,
) -> Result<Referenced, PublishError> {
    referenced(existing, &mut |rel| {
        let path = root.join(rel);
        match crate::input::read(&path, crate::input::limit::INDEX) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => missing(rel),
            Err(e) => Err(FileError::at(&path)(e).into()),
        }
    })
}

/// What a target's Releases reference.
#[derive(Debug, Default)]
pub struct Referenced {
    /// Every file, directly or through the indexes: the Release files, the
    /// listed indexes and their by-hash copies, the pool files.
    pub files: BTreeSet<String>,
    /// Each pool file's SHA256, as the indexes list it.
    pub pool: BTreeMap<String, String>,
    /// The newest `Date` of the Releases: a republished Release must not
    /// be older, or apt 1.6 keeps what it has without a word.
    pub date: Option<i64>,
}

/// What the target's Releases reference (see [`Referenced`]). `existing`
/// is what the target holds; `read` fetches one of its files (None if
/// missing).
pub(crate) fn referenced(
    existing: &[String],
    read: &mut ReadTarget<'_>,
) -> Result<Referenced, PublishError> {
    let mut refs = BTreeSet::new();
    let mut pool = BTreeMap::new();
    let mut newest: Option<i64> = None;
    let releases: Vec<&String> = existing
        .iter()
        .filter(|f| {
            f.strip_prefix("dists/")
                .and_then(|s| s.strip_suffix("/Release"))
                .is_some_and(|suite| !suite.contains('/'))
        })
        .collect();
    for release_path in releases {
        let suite_rel = release_path.strip_suffix("/Release").expect("filtered");
        let Some(bytes) = read(release_path)? else {
            continue;
        };
        let Ok(release) = Release::parse(&String::from_utf8_lossy(&bytes)) else {
            continue;
        };
        if let Ok(Some(d)) = release.date() {
            newest = Some(newest.map_or(d, |n| n.max(d)));
        }
        for f in ["Release", "Release.gpg", "InRelease"] {
            refs.insert(format!("{suite_rel}/{f}"));
        }
        let mut packages = BTreeSet::new();
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
                if f.path.ends_with("/Packages") {
                    packages.insert(format!("{suite_rel}/{}", f.path));
                }
            }
        }
        for p in packages {
            if let Some(bytes) = read(&p)? {
                for para in ParagraphReader::new(BufReader::new(&bytes[..])).flatten() {
                    if let Some(name) = para.get("Filename") {
                        refs.insert(name.to_string());
                        if let Some(sha) = para.get("SHA256") {
                            pool.insert(name.to_string(), sha.to_string());
                        }
                    }
                }
            }
        }
    }
    Ok(Referenced {
        files: refs,
        pool,
        date: newest,
    })
}

/// What the target serves now: its Releases' files, pool files and date,
/// read without changing anything (for `rollback`, which republishes the
/// generation before the one in force).
pub fn published(target: &Target) -> Result<Referenced, PublishError> {
    match target {
        Target::Dir(dir) => Ok(dir::current(dir)?.1),
        Target::Rsync(dest) => Ok(rsync::current(dest)?.1),
        Target::S3 {
            bucket,
            prefix,
            endpoint,
        } => s3::current(&s3::Location {
            bucket,
            prefix,
            endpoint: endpoint.as_deref(),
            display: &target.to_string(),
        }),
    }
}

/// Refuses a publish that would replace a pool file the Release in force
/// lists with other bytes: a client that fetched that Release would get
/// "File has unexpected size" (or a hash mismatch) for it. Checked before
/// anything is copied.
pub(crate) fn refuse_changed_pool(
    out: &Path,
    files: &[String],
    previous: &Referenced,
    target: &str,
) -> Result<(), PublishError> {
    if previous.pool.is_empty() {
        return Ok(());
    }
    let ours = referenced_in(out, files)?;
    for (path, built) in &ours.pool {
        if let Some(published) = previous.pool.get(path)
            && published != built
        {
            return Err(PublishError::ChangedInPlace {
                target: target.to_string(),
                path: path.clone(),
                published: published.clone(),
                built: built.clone(),
            });
        }
    }
    Ok(())
}

/// What goes after the new Release is in: files neither the new repository
/// nor the previous Release references.
pub(crate) fn stale<'a>(
    existing: &'a [String],
    current: &[String],
    previous: &Referenced,
) -> Vec<&'a String> {
    let previous = &previous.files;
    let current: BTreeSet<&String> = current.iter().collect();
    existing
        .iter()
        .filter(|f| !current.contains(f) && !previous.contains(*f))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A target thousands of characters long (a directory that deep) is
    /// shown by its start and end, as every path in an error is.
    #[test]
    fn a_long_target_is_shortened_in_every_message() {
        let target = format!("/srv/{}/repo", "deep/".repeat(800));
        let errors = [
            PublishError::Busy {
                target: target.clone(),
                lock: format!("{target}/.lock"),
            },
            PublishError::ReadOnly {
                target: target.clone(),
                detail: "Read-only file system".into(),
            },
        ];
        for e in errors {
            let text = e.to_string();
            assert!(text.len() < 600, "{text}");
            assert!(text.contains("characters)…"), "{text}");
        }
    }

    /// The publish order at the boundary: a repository written by
    /// `repo::write` published to a directory, every step reported in the
    /// order the target gets it (pool, by-hash, other indexes, Release,
    /// Release.gpg, InRelease last); a second publish copies nothing.
    #[test]
    fn a_directory_target_gets_the_files_in_the_safe_order() {
        use crate::repo::test_support::{key, tiny_deb, write_repo};
        use crate::report::Event;
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("repo-out");
        let debs = [tiny_deb(dir.path(), "liba", "1.0-1", None)];
        write_repo(&out, &debs, &[key()], 1_600_000_000, "").unwrap();
        let target = Target::Dir(dir.path().join("mirror"));
        let steps = std::sync::Mutex::new(Vec::new());
        let collect = |e: Event| {
            if let Event::Published { step, path, .. } = e {
                steps.lock().unwrap().push((step, path));
            }
        };
        let report = publish(&out, &target, false, &collect).unwrap();
        let steps = steps.into_inner().unwrap();
        assert_eq!(steps.len(), report.steps.len());
        let phases: Vec<Phase> = steps.iter().map(|(_, p)| Phase::of(p)).collect();
        assert!(phases.windows(2).all(|w| w[0] <= w[1]), "{steps:?}");
        assert_eq!(phases.first(), Some(&Phase::Pool), "{steps:?}");
        assert!(steps.last().unwrap().1.ends_with("/InRelease"), "{steps:?}");
        assert!(phases.contains(&Phase::ByHash) && phases.contains(&Phase::ReleaseGpg));
        let again = publish(&out, &target, false, &crate::report::Quiet).unwrap();
        assert_eq!(again.count(Step::Copy), 0, "{:?}", again.steps);
    }

    #[test]
    fn targets_are_read_as_rsync_reads_them() {
        let t = |s| Target::parse(s, None).unwrap();
        assert_eq!(t("/var/www/repo"), Target::Dir("/var/www/repo".into()));
        assert_eq!(t("./a:b"), Target::Dir("./a:b".into()));
        assert_eq!(t("www"), Target::Dir("www".into()));
        assert_eq!(
            t("lab@mirror:/srv/repo"),
            Target::Rsync("lab@mirror:/srv/repo".into())
        );
        assert_eq!(t("mirror:repo"), Target::Rsync("mirror:repo".into()));
        assert_eq!(
            t("rsync://mirror:8873/repo/gpu"),
            Target::Rsync("rsync://mirror:8873/repo/gpu".into())
        );
        assert_eq!(
            Target::parse("s3://bucket/gpu/lab/", Some("http://127.0.0.1:9000")).unwrap(),
            Target::S3 {
                bucket: "bucket".into(),
                prefix: "gpu/lab".into(),
                endpoint: Some("http://127.0.0.1:9000".into())
            }
        );
        assert!(Target::parse("ftp://x/y", None).is_err());
        assert!(Target::parse("s3:///x", None).is_err());
        assert!(Target::parse("s3://b/../x", None).is_err());
        assert!(Target::parse("/srv", Some("http://x")).is_err());
    }

    #[test]
    fn publishing_order() {
        let mut files = vec![
            "dists/b/InRelease",
            "dists/b/Release.gpg",
            "dists/b/Release",
            "dists/b/main/binary-amd64/Packages",
            "dists/b/main/binary-amd64/by-hash/SHA256/ab",
            "keyring.gpg",
            "pool/main/a.deb",
        ];
        files.sort_by_key(|f| (Phase::of(f), *f));
        assert_eq!(
            files,
            [
                "pool/main/a.deb",
                "dists/b/main/binary-amd64/by-hash/SHA256/ab",
                "dists/b/main/binary-amd64/Packages",
                "keyring.gpg",
                "dists/b/Release",
                "dists/b/Release.gpg",
                "dists/b/InRelease"
            ]
        );
    }
}
