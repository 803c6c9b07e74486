//! `debforge policy`: the candidate apt would pick for each package, from a
//! repository's own indexes (and any others given) under its pins, as
//! `apt-cache policy` shows it on a machine with nothing installed.

use crate::error::FileError;
use std::collections::BTreeMap;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use crate::deb::Compression;
use crate::format::deb822::ParagraphReader;
use crate::format::preferences::{Offer, Preferences, candidate};
use crate::format::version::Version;

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error(
        "{}: cannot read the preferences: {source}",
        crate::error::ShortPath(path)
    )]
    Preferences {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {message}", crate::error::ShortPath(path))]
    BadPreferences { path: PathBuf, message: String },
    #[error(transparent)]
    Io(#[from] crate::error::FileError),
    #[error(
        "{}: lz4 indexes are not read; decompress it with `lz4 -d`",
        crate::error::ShortPath(path)
    )]
    Lz4 { path: PathBuf },
    #[error("{}: {message}", crate::error::ShortPath(path))]
    BadIndex { path: PathBuf, message: String },
}

impl crate::error::Hint for PolicyError {
    fn hint(&self) -> Option<String> {
        match self {
            PolicyError::Io(crate::error::FileError { .. }) => {
                Some("build the repository first, or pass --out".into())
            }
            _ => None,
        }
    }
}

/// One package's line of `apt-cache policy`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PolicyEntry {
    pub package: String,
    pub candidate: Option<String>,
    /// Every version offered, with the priority apt gives it, best first.
    pub table: Vec<(String, i32)>,
}

/// The policy for `packages` (all of the repository's own when empty):
/// offers from `out/dists/**/Packages` and from `with_index`, pins from
/// `preferences`.
pub fn policy(
    out: &Path,
    preferences: &Path,
    with_index: &[PathBuf],
    packages: &[String],
) -> Result<Vec<PolicyEntry>, PolicyError> {
    // By type and bound, as every input (a FIFO would hang, a link to a
    // device read without end).
    let text = crate::input::read_to_string(preferences, crate::input::limit::PREFERENCES)
        .map_err(|source| PolicyError::Preferences {
            path: preferences.to_path_buf(),
            source,
        })?;
    let prefs = Preferences::parse(&text).map_err(|e| PolicyError::BadPreferences {
        path: preferences.to_path_buf(),
        message: e.to_string(),
    })?;
    let mut indexes = own_indexes(&out.join("dists"))?;
    let ours = indexes.len();
    indexes.extend(with_index.iter().cloned());
    let mut offers: BTreeMap<String, Vec<Offer>> = BTreeMap::new();
    let mut our_names: Vec<String> = Vec::new();
    for (i, path) in indexes.iter().enumerate() {
        let release = release_of(path);
        for (package, version) in read_offers(path)? {
            if i < ours && !our_names.contains(&package) {
                our_names.push(package.clone());
            }
            offers.entry(package).or_default().push(Offer {
                version,
                index_priority: 500,
                release: release.clone(),
            });
        }
    }
    let wanted = if packages.is_empty() {
        our_names
    } else {
        packages.to_vec()
    };
    Ok(wanted
        .into_iter()
        .map(|name| {
            let (best, table) = candidate(
                &prefs,
                &name,
                offers.get(&name).map(Vec::as_slice).unwrap_or(&[]),
            );
            PolicyEntry {
                candidate: best.map(|v| v.to_string()),
                table: table.into_iter().map(|(v, p)| (v.to_string(), p)).collect(),
                package: name,
            }
        })
        .collect())
}

/// The Release an index belongs to, for release pins: `…/dists/SUITE/Release`
/// above a repository's `…/dists/SUITE/COMPONENT/binary-ARCH/Packages`, or
/// apt's list `…_dists_SUITE_InRelease` (or `_Release`) beside its
/// `…_dists_SUITE_COMPONENT_binary-ARCH_Packages`. None when there is none.
pub(crate) fn release_of(index: &Path) -> Option<crate::format::preferences::ReleaseMeta> {
    let read = |p: &Path| -> Option<crate::format::release::Release> {
        let text = crate::input::read_to_string(p, crate::input::limit::RELEASE).ok()?;
        let body = match crate::format::clearsign::split(&text) {
            Ok(c) => c.body,
            Err(_) => text,
        };
        crate::format::release::Release::parse(&body).ok()
    };
    let text = index.to_string_lossy();
    if let Some(at) = text.rfind("/dists/") {
        let rest = &text[at + "/dists/".len()..];
        let mut parts = rest.split('/');
        let suite = parts.next()?;
        let component = parts.next()?;
        let root = Path::new(&text[..at]).join("dists").join(suite);
        return read(&root.join("InRelease"))
            .or_else(|| read(&root.join("Release")))
            .map(|r| r.meta(component));
    }
    let name = index.file_name()?.to_string_lossy().into_owned();
    let at = name.find("_dists_")?;
    let rest = &name[at + "_dists_".len()..];
    let mut parts = rest.split('_');
    let suite = parts.next()?;
    let component = parts.next()?;
    let prefix = format!("{}_dists_{suite}", &name[..at]);
    let dir = index.parent()?;
    read(&dir.join(format!("{prefix}_InRelease")))
        .or_else(|| read(&dir.join(format!("{prefix}_Release"))))
        .map(|r| r.meta(component))
}

/// The plain `Packages` files under `dists/` (by-hash copies skipped), sorted.
fn own_indexes(dists: &Path) -> Result<Vec<PathBuf>, PolicyError> {
    let mut indexes = Vec::new();
    let mut stack = vec![dists.to_path_buf()];
    while let Some(d) = stack.pop() {
        let rd = std::fs::read_dir(&d).map_err(FileError::at(&d))?;
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() && p.file_name().is_some_and(|n| n != "by-hash") {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "Packages") {
                indexes.push(p);
            }
        }
    }
    indexes.sort();
    Ok(indexes)
}

/// (Package, Version) of every stanza of an index (plain, .gz or .xz).
fn read_offers(path: &Path) -> Result<Vec<(String, Version)>, PolicyError> {
    let name = path.to_string_lossy();
    let compression = if name.ends_with(".xz") {
        Compression::Xz
    } else if name.ends_with(".gz") {
        Compression::Gzip
    } else if name.ends_with(".lz4") {
        return Err(PolicyError::Lz4 {
            path: path.to_path_buf(),
        });
    } else {
        Compression::None
    };
    let io = |source| {
        PolicyError::Io(crate::error::FileError {
            path: path.to_path_buf(),
            source,
        })
    };
    let file = crate::input::open_regular(path).map_err(io)?;
    let reader = compression
        .decoder(BufReader::new(file))
        .map_err(|e| PolicyError::BadIndex {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
    let mut out = Vec::new();
    for p in ParagraphReader::new(BufReader::new(reader)) {
        let p = p.map_err(|e| PolicyError::BadIndex {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let (Some(pkg), Some(ver)) = (p.get("Package"), p.get("Version")) else {
            continue;
        };
        // apt skips what it cannot parse; so does the policy.
        let Ok((version, _)) = Version::parse_lenient(ver) else {
            continue;
        };
        out.push((pkg.to_string(), version));
    }
    Ok(out)
}
