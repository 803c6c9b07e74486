//! The trust chain to an upstream repository: the pinned key signs
//! `InRelease` (or `Release` + `Release.gpg`); the Release lists the Packages
//! index with its SHA256/SHA512; the index lists each package's file with its
//! size and SHA256. Every link is checked before the next is used.
//!
//! Files come through a [`Transport`]: HTTP for the network, a directory for
//! air-gapped snapshots (`debforge fetch --to`) and `file://` sources.

// Errors here are cold and rich (URLs, reasons); their size does not matter.
#![allow(clippy::result_large_err)]

mod transport;

pub use transport::{DirTransport, HttpTransport, Transport, copy_verified};

use std::collections::BTreeMap;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use crate::deb::Compression;
use crate::fetch::{Expected, FetchError};
use crate::format::deb822::{ControlParagraph, ParagraphReader};
use crate::format::release::{Release, ReleaseError};
use crate::format::version::Version;
use crate::openpgp::{KeyringError, PinnedKeyring, VerifyError};
use crate::recipe::Source;

/// Upper bound for a Release file or signature held in memory.
const SMALL_LIMIT: u64 = 16 << 20;

#[derive(Debug, thiserror::Error)]
#[error("source '{source_name}': {kind}")]
pub struct UpstreamError {
    pub source_name: String,
    pub kind: UpstreamErrorKind,
}

#[derive(Debug, thiserror::Error)]
pub enum UpstreamErrorKind {
    #[error("{0}")]
    Fetch(#[from] FetchError),
    #[error("key file {}: {source}", crate::error::ShortPath(path))]
    Keyring { path: PathBuf, source: KeyringError },
    #[error("cannot read key file {}: {source}", crate::error::ShortPath(path))]
    KeyFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no InRelease and no Release at {0}")]
    NoRelease(String),
    #[error("{0} has no signature: neither InRelease nor Release.gpg exists")]
    Unsigned(String),
    #[error("{what}: {source}")]
    BadSignature { what: String, source: VerifyError },
    #[error("{what}: {source}")]
    Release { what: String, source: ReleaseError },
    #[error(
        "{what} expired on {until} (Valid-Until); set `archive = true` for this source if it is a frozen archive"
    )]
    Expired { what: String, until: String },
    #[error(
        "{what} is dated {date}, in the future: apt refuses it as not valid yet; check this machine's clock (and the upstream's)"
    )]
    NotYetValid { what: String, date: String },
    #[error("none of {candidates} is listed in {release} (with SHA256 or SHA512)")]
    IndexNotInRelease { candidates: String, release: String },
    #[error("index {index} is not readable: {reason}")]
    BadIndex { index: String, reason: String },
    #[error("{name} {version} ({arch}) is not in {index}{available}")]
    NotInIndex {
        name: String,
        version: String,
        arch: String,
        index: String,
        available: String,
    },
    #[error("{index}: the stanza of {name} {version} {problem}")]
    BadStanza {
        index: String,
        name: String,
        version: String,
        problem: String,
    },
}

/// A package file as a signed index describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedFile {
    /// `Filename`, relative to the source's base URL, without `./`.
    pub path: String,
    pub size: u64,
    pub sha256: String,
    pub sha512: Option<String>,
    /// The digest fields the index gave (`Size`, `SHA256`, `SHA512`).
    pub index_digests: Vec<String>,
    /// The index that listed it (relative to the base URL) and its SHA256.
    pub index: String,
    pub index_sha256: String,
    /// SHA256 of the verified Release that listed the index.
    pub release_sha256: String,
}

/// A source whose Release has been verified; indexes are loaded on demand.
pub struct OpenSource<'t> {
    pub source: Source,
    transport: &'t dyn Transport,
    release: Release,
    release_sha256: String,
    /// The signed files as fetched (relative path, bytes), for snapshots.
    pub signed_files: Vec<(String, Vec<u8>)>,
    /// Verified index files (relative path → local file) for snapshots.
    pub index_files: BTreeMap<String, PathBuf>,
    /// Stanzas by architecture, for the package names asked for.
    stanzas: BTreeMap<String, LoadedIndex>,
}

/// What is kept of a verified index while it streams by: the stanzas of
/// the versions the recipes ask for (the first of each name, version and
/// architecture), and, for the names they ask for, each version offered
/// (at most [`MAX_OFFERS`] a name): memory stays flat in the index's size,
/// however many stanzas a hostile index repeats.
struct LoadedIndex {
    path: String,
    sha256: String,
    stanzas: Vec<ControlParagraph>,
    /// name → (version, architecture, SHA256), first seen first.
    offers: BTreeMap<String, Vec<(String, String, String)>>,
}

impl LoadedIndex {
    /// Keeps what is needed of one stanza: the version it offers (for a
    /// name asked for) and the stanza itself if its version is asked for
    /// and not kept already.
    fn keep(
        &mut self,
        p: ControlParagraph,
        wanted: &[(&str, &str)],
        seen: &mut std::collections::BTreeSet<(String, String, String)>,
    ) {
        let field = |f: &str| p.get(f).unwrap_or_default().to_string();
        let name = field("Package");
        if !wanted.iter().any(|(n, _)| *n == name) {
            return;
        }
        let (version, architecture) = (field("Version"), field("Architecture"));
        let offers = self.offers.entry(name.clone()).or_default();
        if offers.len() < MAX_OFFERS
            && !offers
                .iter()
                .any(|(v, a, _)| *v == version && *a == architecture)
        {
            offers.push((version.clone(), architecture.clone(), field("SHA256")));
        }
        let asked = wanted
            .iter()
            .any(|(n, v)| *n == name && same_version(v, &version));
        if asked && seen.insert((name, version, architecture)) {
            self.stanzas.push(p);
        }
    }
}

/// The most versions of one package kept from an index (Ubuntu's largest
/// list a few dozen).
const MAX_OFFERS: usize = 10_000;

/// Whether two version strings name the same version (dpkg's equality:
/// `1.0` and `0:1.0` are one), or, where one does not parse, the same text.
fn same_version(a: &str, b: &str) -> bool {
    match (Version::parse_lenient(a), Version::parse_lenient(b)) {
        (Ok((a, _)), Ok((b, _))) => a == b,
        _ => a == b,
    }
}

/// Reads the pinned key of `source` (its path relative to `root`).
pub fn load_keyring(source: &Source, root: &Path) -> Result<PinnedKeyring, UpstreamError> {
    let fail = |kind| UpstreamError {
        source_name: source.name.clone(),
        kind,
    };
    let path = root.join(&source.key);
    let bytes = crate::input::read(&path, crate::input::limit::KEY).map_err(|e| {
        fail(UpstreamErrorKind::KeyFile {
            path: path.clone(),
            source: e,
        })
    })?;
    PinnedKeyring::from_bytes(&bytes, &source.fingerprints)
        .map_err(|e| fail(UpstreamErrorKind::Keyring { path, source: e }))
}

/// A verified Release: its text, the signed files as fetched (path, bytes),
/// and where it came from.
type SignedRelease = (Vec<u8>, Vec<(String, Vec<u8>)>, String);

/// The Release of the directory `dir`, verified against `keyring`:
/// InRelease if there is one, else Release and Release.gpg. Returns the
/// signed text, the signed files as fetched, and where it came from.
fn signed_release(
    dir: String,
    keyring: &PinnedKeyring,
    transport: &dyn Transport,
) -> Result<SignedRelease, UpstreamErrorKind> {
    let inrelease = format!("{dir}InRelease");
    if let Some(bytes) = transport.get_small(&inrelease, SMALL_LIMIT)? {
        let what = transport.describe(&inrelease);
        let (mut body, _) =
            keyring
                .verify_cleartext(&bytes)
                .map_err(|e| UpstreamErrorKind::BadSignature {
                    what: what.clone(),
                    source: e,
                })?;
        // The cleartext framework does not sign the line ending before the
        // signature; the Release file published beside InRelease has it,
        // and `release-sha256` is that file's digest.
        if !body.ends_with(b"\n") {
            body.push(b'\n');
        }
        return Ok((body, vec![(inrelease, bytes)], what));
    }
    let release_path = format!("{dir}Release");
    let what = transport.describe(&release_path);
    let release = transport
        .get_small(&release_path, SMALL_LIMIT)?
        .ok_or_else(|| UpstreamErrorKind::NoRelease(transport.describe(&dir)))?;
    let sig_path = format!("{dir}Release.gpg");
    let sig = transport
        .get_small(&sig_path, SMALL_LIMIT)?
        .ok_or_else(|| UpstreamErrorKind::Unsigned(what.clone()))?;
    keyring
        .verify_detached(&release, &sig)
        .map_err(|e| UpstreamErrorKind::BadSignature {
            what: transport.describe(&sig_path),
            source: e,
        })?;
    let files = vec![(release_path, release.clone()), (sig_path, sig)];
    Ok((release, files, what))
}

/// Refuses a Release apt would refuse: past its `Valid-Until` (unless the
/// source is an archive), or dated in the future beyond a little skew.
fn check_dates(
    release: &Release,
    archive: bool,
    now: i64,
    what: &str,
) -> Result<(), UpstreamErrorKind> {
    let rel_err = |e| UpstreamErrorKind::Release {
        what: what.to_string(),
        source: e,
    };
    let field = |name| {
        release
            .paragraph()
            .get(name)
            .unwrap_or_default()
            .to_string()
    };
    if let Some(until) = release.valid_until().map_err(rel_err)?
        && until < now
        && !archive
    {
        return Err(UpstreamErrorKind::Expired {
            what: what.to_string(),
            until: field("Valid-Until"),
        });
    }
    // apt allows a little clock skew, no more (it says "not valid yet").
    if let Some(date) = release.date().map_err(rel_err)?
        && date > now + 10
    {
        return Err(UpstreamErrorKind::NotYetValid {
            what: what.to_string(),
            date: field("Date"),
        });
    }
    Ok(())
}

impl<'t> OpenSource<'t> {
    /// Fetches and verifies the source's Release. `now` (seconds since the
    /// epoch) is compared with `Valid-Until`.
    pub fn open(
        source: &Source,
        keyring: &PinnedKeyring,
        transport: &'t dyn Transport,
        now: i64,
    ) -> Result<OpenSource<'t>, UpstreamError> {
        let fail = |kind| UpstreamError {
            source_name: source.name.clone(),
            kind,
        };
        let (text, signed_files, what) =
            signed_release(source.release_dir(), keyring, transport).map_err(fail)?;
        let release_sha256 = crate::digest::sha256_hex(&text);
        let text = String::from_utf8(text).map_err(|_| {
            fail(UpstreamErrorKind::Release {
                what: what.clone(),
                source: ReleaseError::Empty,
            })
        })?;
        let rel_err = |e| {
            fail(UpstreamErrorKind::Release {
                what: what.clone(),
                source: e,
            })
        };
        let release = Release::parse(&text).map_err(rel_err)?;
        release.require_strong_hashes().map_err(rel_err)?;
        check_dates(&release, source.archive, now, &what).map_err(fail)?;
        Ok(OpenSource {
            source: source.clone(),
            transport,
            release,
            release_sha256,
            signed_files,
            index_files: BTreeMap::new(),
            stanzas: BTreeMap::new(),
        })
    }

    fn fail(&self, kind: UpstreamErrorKind) -> UpstreamError {
        UpstreamError {
            source_name: self.source.name.clone(),
            kind,
        }
    }

    /// Loads (once per architecture) the index listing `arch` packages,
    /// verified against the Release, keeping the stanzas of the `wanted`
    /// (name, version) pairs and the versions offered for their names.
    /// Verified index files are cached under `cache`.
    pub fn load_index(
        &mut self,
        arch: &str,
        wanted: &[(&str, &str)],
        cache: &Path,
    ) -> Result<(), UpstreamError> {
        if self.stanzas.contains_key(arch) {
            return Ok(());
        }
        let (rel_in_release, entry) = self.index_entry(arch)?;
        let index_path = format!("{}{rel_in_release}", self.source.release_dir());
        let (local, index_sha256) = self.fetch_index(&index_path, &entry, cache)?;
        let what = self.transport.describe(&index_path);
        let bad = |reason: String| UpstreamError {
            source_name: self.source.name.clone(),
            kind: UpstreamErrorKind::BadIndex {
                index: what.clone(),
                reason,
            },
        };
        let compression = if index_path.ends_with(".xz") {
            Compression::Xz
        } else if index_path.ends_with(".gz") {
            Compression::Gzip
        } else {
            Compression::None
        };
        let file = crate::input::open_regular(&local).map_err(|e| bad(e.to_string()))?;
        let reader = compression
            .decoder(BufReader::new(file))
            .map_err(|e| bad(e.to_string()))?;
        let mut loaded = LoadedIndex {
            path: index_path.clone(),
            sha256: index_sha256,
            stanzas: Vec::new(),
            offers: BTreeMap::new(),
        };
        let mut seen = std::collections::BTreeSet::new();
        for p in ParagraphReader::new(BufReader::new(reader)) {
            let p = p.map_err(|e| bad(e.to_string()))?;
            loaded.keep(p, wanted, &mut seen);
        }
        self.index_files.insert(index_path, local);
        self.stanzas.insert(arch.to_string(), loaded);
        Ok(())
    }

    /// The index for `arch` the Release lists (xz, else gz, else plain),
    /// with the Release's entry for it.
    /// The source's whole index for `arch`, fetched (or taken from the
    /// cache) and verified against the signed Release: its local path.
    pub fn verified_index(&self, arch: &str, cache: &Path) -> Result<PathBuf, UpstreamError> {
        Ok(self.verified_index_at(arch, cache)?.1)
    }

    /// The same, with the index's path in the repository (what a snapshot
    /// names it by).
    pub fn verified_index_at(
        &self,
        arch: &str,
        cache: &Path,
    ) -> Result<(String, PathBuf), UpstreamError> {
        let (rel_in_release, entry) = self.index_entry(arch)?;
        let index_path = format!("{}{rel_in_release}", self.source.release_dir());
        let local = self.fetch_index(&index_path, &entry, cache)?.0;
        Ok((index_path, local))
    }

    fn index_entry(
        &self,
        arch: &str,
    ) -> Result<(String, crate::format::release::IndexEntry), UpstreamError> {
        let dir = self.source.release_dir();
        let candidates = |arch: &str| -> Vec<String> {
            let index_dir = self.source.index_dir(arch);
            ["Packages.xz", "Packages.gz", "Packages"]
                .iter()
                .map(|n| format!("{index_dir}{n}"))
                .collect()
        };
        // Packages of architecture `all` are listed in every binary-ARCH
        // index (Debian's and Ubuntu's archives have no binary-all): the
        // Release's first architecture's, where there is no binary-all.
        let mut tries = vec![candidates(arch)];
        if arch == "all" {
            let archs = self
                .release
                .paragraph()
                .get("Architectures")
                .unwrap_or_default();
            tries.extend(
                archs
                    .split_whitespace()
                    .filter(|a| *a != "all")
                    .take(1)
                    .map(candidates),
            );
        }
        for c in tries.iter().flatten() {
            let entry = self.release.entry(c).map_err(|e| {
                self.fail(UpstreamErrorKind::Release {
                    what: self.transport.describe(&format!("{dir}Release")),
                    source: e,
                })
            })?;
            if let Some(e) = entry {
                return Ok((c.clone(), e));
            }
        }
        Err(self.fail(UpstreamErrorKind::IndexNotInRelease {
            candidates: tries.concat().join(", "),
            release: self.transport.describe(&format!("{dir}Release")),
        }))
    }

    /// The index in the cache (fetched and verified against the Release's
    /// entry unless a file of its size is there under its digest's name),
    /// and its SHA256.
    fn fetch_index(
        &self,
        index_path: &str,
        entry: &crate::format::release::IndexEntry,
        cache: &Path,
    ) -> Result<(PathBuf, String), UpstreamError> {
        let expected = Expected {
            size: entry.size,
            sha256: entry.sha256.clone(),
            sha512: entry.sha512.clone(),
        };
        let key = entry
            .sha256
            .clone()
            .or(entry.sha512.clone())
            .unwrap_or_default();
        let file_name = index_path.replace('/', "_");
        let local = cache.join("indexes").join(&self.source.name).join(format!(
            "{}-{file_name}",
            key.chars().take(16).collect::<String>()
        ));
        let cached =
            local.exists() && std::fs::metadata(&local).is_ok_and(|m| m.len() == entry.size);
        let digests = if cached {
            None
        } else {
            Some(
                self.transport
                    .fetch(index_path, &expected, &local, index_path)
                    .map_err(|e| self.fail(e.into()))?,
            )
        };
        let sha256 = match digests {
            Some(d) => d.sha256,
            None => entry
                .sha256
                .clone()
                .unwrap_or_else(|| crate::digest::sha256_file(&local).unwrap_or_default()),
        };
        Ok((local, sha256))
    }

    /// Every version of `name` the loaded index for `arch` offers (for
    /// `arch` or `all`), with its SHA256: what `diff --upstream` compares
    /// the lock with.
    pub fn offered(&self, name: &str, arch: &str) -> Vec<(String, String)> {
        let Some(loaded) = self.stanzas.get(arch) else {
            return Vec::new();
        };
        loaded
            .offers
            .get(name)
            .into_iter()
            .flatten()
            .filter(|(_, a, _)| a == arch || a == "all")
            .map(|(v, _, sha)| (v.clone(), sha.clone()))
            .collect()
    }

    /// Finds `name` at exactly `version` for `arch` (or `all`) in the loaded index.
    pub fn find(
        &self,
        name: &str,
        version: &str,
        arch: &str,
    ) -> Result<IndexedFile, UpstreamError> {
        let loaded = self.stanzas.get(arch).expect("load_index() first");
        let (index, index_sha256) = (&loaded.path, &loaded.sha256);
        let what = self.transport.describe(index);
        let stanza = loaded.stanzas.iter().find(|p| {
            p.get("Package") == Some(name)
                && p.get("Version").is_some_and(|v| same_version(version, v))
                && p.get("Architecture")
                    .is_some_and(|a| a == arch || a == "all")
        });
        let Some(p) = stanza else {
            let mut versions: Vec<String> = loaded
                .offers
                .get(name)
                .into_iter()
                .flatten()
                .map(|(v, a, _)| format!("{v} ({a})"))
                .collect();
            versions.sort();
            let available = if versions.is_empty() {
                format!("; the index has no package named {name}")
            } else {
                format!("; it has: {}", versions.join(", "))
            };
            return Err(self.fail(UpstreamErrorKind::NotInIndex {
                name: name.into(),
                version: version.into(),
                arch: arch.into(),
                index: what,
                available,
            }));
        };
        let bad = |problem: &str| {
            self.fail(UpstreamErrorKind::BadStanza {
                index: what.clone(),
                name: name.into(),
                version: version.into(),
                problem: problem.into(),
            })
        };
        let filename = p.get("Filename").ok_or_else(|| bad("has no Filename"))?;
        let path = filename.trim_start_matches("./").to_string();
        // Decoded as the HTTP client would: `%2e%2e/` is `../`.
        if let Err(e) = crate::format::path::check_relative(&path) {
            return Err(bad(&format!("has an unsafe Filename: {e}")));
        }
        let size = p
            .get("Size")
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("has no valid Size"))?;
        let sha256 = p
            .get("SHA256")
            .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| bad("has no SHA256 (MD5sum and SHA1 are not trusted)"))?
            .to_ascii_lowercase();
        let sha512 = p
            .get("SHA512")
            .filter(|h| h.len() == 128 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            .map(str::to_ascii_lowercase);
        let mut index_digests = vec!["Size".to_string(), "SHA256".to_string()];
        if sha512.is_some() {
            index_digests.push("SHA512".into());
        }
        Ok(IndexedFile {
            path,
            size,
            sha256,
            sha512,
            index_digests,
            index: index.clone(),
            index_sha256: index_sha256.clone(),
            release_sha256: self.release_sha256.clone(),
        })
    }

    pub fn transport(&self) -> &dyn Transport {
        self.transport
    }
}

impl crate::error::Hint for UpstreamError {
    fn hint(&self) -> Option<String> {
        use UpstreamErrorKind as U;
        let name = &self.source_name;
        Some(match &self.kind {
            U::Fetch(f) => f.kind.hint_for(Some(name)),
            U::BadSignature { .. } | U::Keyring { .. } => format!(
                "the upstream is not signed as source '{name}' in recipes/sources.toml pins it: check its key file and fingerprint (never turn the check off)"
            ),
            U::KeyFile { source, .. } if source.kind() == std::io::ErrorKind::NotFound => format!(
                "the key file of source '{name}' is missing: keys/README.md says where each shipped key comes from and how to check it"
            ),
            U::KeyFile { .. } => format!(
                "the key of source '{name}' must be a key file (armored or binary) that recipes/sources.toml names: keys/README.md says where each shipped key comes from"
            ),
            U::NotYetValid { .. } | U::Expired { .. } => {
                "check this machine's clock (date -u); apt on the lab machines would refuse the same".into()
            }
            _ => format!("check source '{name}' in recipes/sources.toml"),
        })
    }
}

#[cfg(test)]
mod tests {
    //! The trust chain at its boundary, over a directory transport: a
    //! repository written by `repo::write` (the dists layout) read back as
    //! an upstream — Release verified against the pinned key, index against
    //! the Release, the package's digests from the index; a changed index
    //! or another key is refused.
    use super::*;
    use crate::recipe::Layout;
    use crate::repo::test_support::{key, tiny_deb, write_repo};
    use crate::upstream::transport::DirTransport;

    fn source(key: &crate::openpgp::sign::SigningKey) -> Source {
        Source {
            name: "test".into(),
            url: "file:///unused/".into(),
            layout: Layout::Dists,
            suite: Some("bionic".into()),
            component: Some("main".into()),
            key: PathBuf::from("unused"),
            fingerprints: vec![key.fingerprint()],
            archive: false,
        }
    }

    #[test]
    fn a_package_is_found_through_the_signed_chain_and_a_changed_index_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let signer = key();
        let out = dir.path().join("repo-out");
        let deb = tiny_deb(dir.path(), "liba", "1.0-1", None);
        let sha256 = deb.sha256.clone();
        write_repo(
            &out,
            &[deb],
            std::slice::from_ref(&signer),
            1_600_000_000,
            "",
        )
        .unwrap();
        let public = crate::openpgp::sign::export_public(std::slice::from_ref(&signer)).0;
        let keyring = PinnedKeyring::from_bytes(&public, &[signer.fingerprint()]).unwrap();
        let transport = DirTransport { root: out.clone() };
        let cache = dir.path().join("cache");
        let src = source(&signer);

        let mut open = OpenSource::open(&src, &keyring, &transport, 1_600_000_100).unwrap();
        open.load_index("amd64", &[("liba", "1.0-1")], &cache)
            .unwrap();
        let found = open.find("liba", "1.0-1", "amd64").unwrap();
        assert_eq!(found.sha256, sha256);
        assert!(found.path.starts_with("pool/"), "{}", found.path);
        assert!(open.find("liba", "9.9", "amd64").is_err());

        // Another key: the Release is not trusted.
        let other = key();
        let public = crate::openpgp::sign::export_public(std::slice::from_ref(&other)).0;
        let wrong = PinnedKeyring::from_bytes(&public, &[other.fingerprint()]).unwrap();
        let err = OpenSource::open(&source(&other), &wrong, &transport, 1_600_000_100)
            .err()
            .unwrap();
        assert!(
            matches!(err.kind, UpstreamErrorKind::BadSignature { .. }),
            "{err}"
        );

        // An index changed after signing: no index the Release vouches for.
        for name in ["Packages", "Packages.gz", "Packages.xz"] {
            let p = out.join("dists/bionic/main/binary-amd64").join(name);
            if p.exists() {
                let mut bytes = std::fs::read(&p).unwrap();
                bytes.push(b'\n');
                std::fs::write(&p, bytes).unwrap();
            }
        }
        let mut open = OpenSource::open(&src, &keyring, &transport, 1_600_000_100).unwrap();
        let fresh_cache = dir.path().join("cache2");
        assert!(
            open.load_index("amd64", &[("liba", "1.0-1")], &fresh_cache)
                .is_err()
        );
    }
}
