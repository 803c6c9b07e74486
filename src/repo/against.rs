//! `verify --against BASE`: whether the repository's packages install on a
//! machine at a known base, resolved as apt resolves them: every `Depends`
//! and `Pre-Depends` of ours, through our own packages, down to what the
//! base has. An air-gapped machine can fetch nothing else, so what neither
//! has is listed with the chain of packages that needs it
//! (`gpu-stack-cu101 → libnccl2 → libc6 (>= 2.38)`).
//!
//! A base is a dpkg status file copied from a lab machine (what is
//! installed there: status `installed`) or a `Packages` index of the
//! release it runs (what its own media offer), plain, `.gz` or `.xz`; a
//! base's packages are taken as installable together (a release is
//! consistent), so their own dependencies are not followed.
//!
//! Not evaluated, as in `verify`'s own checks: architecture qualifiers and
//! restrictions (a lab's machines run one architecture), `Recommends`
//! (apt installs them when it can, but nothing fails without them), and
//! conflicts between what the base has and what we bring.

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::deb::Compression;
use crate::error::FileError;
use crate::format::deb822::{ControlParagraph, ParagraphReader};
use crate::format::relation::{Alternatives, Relations};
use crate::format::version::Version;

/// A base larger than this, once decompressed, is refused (Ubuntu 18.04's
/// main, universe and multiverse indexes together are about 60 MB).
const MAX_BASE: u64 = 1 << 30;

#[derive(Debug, thiserror::Error)]
pub enum AgainstError {
    #[error(transparent)]
    Io(#[from] FileError),
    #[error("{}: line {line}: {message}", crate::error::ShortPath(path))]
    Syntax {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error(
        "{}: neither a dpkg status file (Status fields) nor a Packages index (Filename fields)",
        crate::error::ShortPath(path)
    )]
    NotABase { path: PathBuf },
    #[error("{}: more than {} MiB once decompressed", crate::error::ShortPath(path), MAX_BASE >> 20)]
    TooLarge { path: PathBuf },
}

impl crate::error::Hint for AgainstError {
    fn hint(&self) -> Option<String> {
        match self {
            AgainstError::NotABase { .. } | AgainstError::Syntax { .. } => Some(
                "pass a copy of a lab machine's /var/lib/dpkg/status, or a release's Packages index (e.g. from /var/lib/apt/lists/, or dists/bionic/main/binary-amd64/Packages.xz of the archive)"
                    .into(),
            ),
            AgainstError::Io(e) => crate::error::Hint::hint(e),
            AgainstError::TooLarge { .. } => None,
        }
    }
}

/// What a base file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BaseKind {
    /// A dpkg status file: the packages installed.
    Status,
    /// A Packages index: the packages the release offers.
    Index,
}

/// A package as the resolver sees it.
#[derive(Debug, Clone)]
pub struct Package {
    name: String,
    version: Version,
    version_text: String,
    architecture: String,
    /// Each group of `Pre-Depends` and `Depends`.
    depends: Vec<Alternatives>,
    /// Names it provides, with the version where it says one.
    provides: Vec<(String, Option<Version>)>,
}

impl Package {
    /// From a stanza; `None` without a Package, a Version dpkg would read,
    /// or with relations that do not parse (`verify` reports those).
    pub fn of(stanza: &ControlParagraph) -> Option<Package> {
        let name = stanza.get("Package")?.trim().to_string();
        let version_text = stanza.get("Version")?.trim().to_string();
        let (version, _) = Version::parse_lenient(&version_text).ok()?;
        let mut depends = Vec::new();
        for field in ["Pre-Depends", "Depends"] {
            if let Some(v) = stanza.field(field) {
                depends.extend(Relations::parse(&v.folded()).ok()?.0);
            }
        }
        let provides = match stanza.field("Provides") {
            Some(v) => Relations::parse(&v.folded())
                .ok()?
                .0
                .into_iter()
                .flat_map(|alt| alt.0)
                .map(|r| (r.name, r.constraint.map(|(_, v)| v)))
                .collect(),
            None => Vec::new(),
        };
        let architecture = stanza
            .get("Architecture")
            .unwrap_or("all")
            .trim()
            .to_string();
        Some(Package {
            name,
            version,
            version_text,
            architecture,
            depends,
            provides,
        })
    }

    fn label(&self) -> String {
        format!("{} {}", self.name, self.version_text)
    }
}

/// A base: a status file's installed packages, or an index's packages.
#[derive(Debug, Clone)]
pub struct Base {
    pub path: PathBuf,
    pub kind: BaseKind,
    /// The file's SHA-256: a build's output depends on the base it was
    /// checked against.
    pub sha256: String,
    /// The architecture it is the base of (a source's `binary-ARCH`
    /// index); `None`: of every architecture (a status file, an index the
    /// project holds).
    pub architecture: Option<String>,
    packages: Vec<Package>,
}

impl Base {
    /// Reads a status file or a Packages index (plain, gzip or xz, told by
    /// its first bytes), a regular file only, with a bound.
    pub fn read(path: &Path) -> Result<Base, AgainstError> {
        let file = crate::input::open_regular(path).map_err(FileError::at(path))?;
        // The file's own bytes hashed as they are read (not read twice).
        let hasher = std::cell::RefCell::new(crate::digest::KeyHasher::new());
        let mut input = BufReader::new(Hashed {
            inner: file,
            hasher: &hasher,
        });
        let head = input.fill_buf().map_err(FileError::at(path))?.to_vec();
        let compression = match head.as_slice() {
            [0x1f, 0x8b, ..] => Compression::Gzip,
            [0xfd, b'7', b'z', b'X', b'Z', 0, ..] => Compression::Xz,
            [0x28, 0xb5, 0x2f, 0xfd, ..] => Compression::Zstd,
            _ => Compression::None,
        };
        let text = compression.decoder(input).map_err(FileError::at(path))?;
        let read = std::cell::Cell::new(0u64);
        let counted = Counted {
            inner: text.take(MAX_BASE + 1),
            read: &read,
        };
        let mut kind = None;
        let mut packages = Vec::new();
        for stanza in ParagraphReader::new(BufReader::new(counted)) {
            // Past the bound the stream is cut: nothing read from it counts.
            if read.get() > MAX_BASE {
                return Err(AgainstError::TooLarge {
                    path: path.to_path_buf(),
                });
            }
            let stanza = stanza.map_err(|e| AgainstError::Syntax {
                path: path.to_path_buf(),
                line: e.line,
                message: e.kind.to_string(),
            })?;
            let this = if stanza.get("Status").is_some() {
                BaseKind::Status
            } else if stanza.get("Filename").is_some() {
                BaseKind::Index
            } else {
                continue;
            };
            let kind = *kind.get_or_insert(this);
            if kind == BaseKind::Status && !installed(&stanza) {
                continue;
            }
            packages.extend(Package::of(&stanza));
        }
        if read.get() > MAX_BASE {
            return Err(AgainstError::TooLarge {
                path: path.to_path_buf(),
            });
        }
        let kind = kind.ok_or_else(|| AgainstError::NotABase {
            path: path.to_path_buf(),
        })?;
        Ok(Base {
            path: path.to_path_buf(),
            architecture: None,
            kind,
            sha256: hasher.into_inner().finish_hex(),
            packages,
        })
    }

    /// How many packages it holds (installed, or offered).
    pub fn len(&self) -> usize {
        self.packages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.packages.is_empty()
    }
}

/// A reader that hashes the bytes it gave.
struct Hashed<'h, R> {
    inner: R,
    hasher: &'h std::cell::RefCell<crate::digest::KeyHasher>,
}

impl<R: Read> Read for Hashed<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.borrow_mut().update(&buf[..n]);
        Ok(n)
    }
}

/// A reader that counts the bytes it gave.
struct Counted<'c, R> {
    inner: R,
    read: &'c std::cell::Cell<u64>,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

/// A status stanza of a package dpkg has installed (`install ok
/// installed`, `hold ok installed`), not one removed to its conffiles.
fn installed(stanza: &ControlParagraph) -> bool {
    stanza
        .get("Status")
        .and_then(|s| s.split_whitespace().nth(2))
        .is_some_and(|state| state == "installed")
}

/// A dependency nothing satisfies, and the packages of ours that lead to it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Missing {
    /// From the package a lab installs down to the one that needs it
    /// (`name version` each).
    pub chain: Vec<String>,
    /// The relation (with its alternatives) as the package states it.
    pub needs: String,
    /// What the base and the repository have by those names.
    pub found: Vec<String>,
    /// The architectures whose machines lack it, where the bases are of
    /// one architecture each (a source's index) and not all of them do;
    /// empty otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub architectures: Vec<String>,
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} → {}: ", self.chain.join(" → "), self.needs)?;
        if self.found.is_empty() {
            write!(f, "neither the base nor the repository has it")
        } else {
            write!(f, "only {} there", self.found.join(", "))
        }?;
        if self.architectures.is_empty() {
            return Ok(());
        }
        write!(f, " on {}", self.architectures.join(", "))
    }
}

/// Who can satisfy a relation by name: packages and their provides.
struct Offers<'a> {
    by_name: HashMap<&'a str, Vec<&'a Package>>,
    /// name → (provider, provided version)
    provided: HashMap<&'a str, Vec<(&'a Package, Option<&'a Version>)>>,
}

impl<'a> Offers<'a> {
    fn new(packages: impl Iterator<Item = &'a Package>) -> Offers<'a> {
        let mut o = Offers {
            by_name: HashMap::new(),
            provided: HashMap::new(),
        };
        for p in packages {
            o.by_name.entry(p.name.as_str()).or_default().push(p);
            for (name, v) in &p.provides {
                o.provided
                    .entry(name.as_str())
                    .or_default()
                    .push((p, v.as_ref()));
            }
        }
        o
    }

    /// The packages that satisfy `rel`: by name and version, or by a
    /// Provides (any for an unversioned relation, a versioned one that
    /// matches otherwise).
    fn satisfying(&self, rel: &crate::format::relation::Relation) -> Vec<&'a Package> {
        let mut found: Vec<&'a Package> = self
            .by_name
            .get(rel.name.as_str())
            .into_iter()
            .flatten()
            .filter(|p| rel.matches(&p.name, &p.version))
            .copied()
            .collect();
        for (p, v) in self.provided.get(rel.name.as_str()).into_iter().flatten() {
            let ok = match (&rel.constraint, v) {
                (None, _) => true,
                (Some(_), Some(v)) => rel.matches(&rel.name, v),
                (Some(_), None) => false,
            };
            if ok {
                found.push(p);
            }
        }
        found
    }

    /// `name version` of every package by the names in `group`.
    fn named(&self, group: &Alternatives) -> Vec<String> {
        group
            .0
            .iter()
            .flat_map(|r| self.by_name.get(r.name.as_str()).into_iter().flatten())
            .map(|p| p.label())
            .collect()
    }
}

/// Every dependency of `ours` that neither `bases` nor `ours` can satisfy,
/// each listed once (per package that states it), under the first chain
/// that reaches it. Packages no other package of ours depends on are
/// followed first, so that chains start where a lab starts (`apt install`
/// of the metapackage).
///
/// Which of ours install is a greatest fixpoint: all are taken as
/// installable, then any with a group that neither the base nor an
/// installable one of ours satisfies is dropped, until none is (a cycle of
/// packages that need nothing else stays installable; one that needs what
/// is missing goes whole). What is missing is then said by walking down
/// from each package that does not install.
pub fn missing<B: Borrow<Base>>(ours: &[Package], bases: &[B]) -> Vec<Missing> {
    let base = Offers::new(bases.iter().flat_map(|b| b.borrow().packages.iter()));
    let own = Offers::new(ours.iter());
    let installable = installable(ours, &base, &own);
    let needed: HashSet<&str> = ours
        .iter()
        .flat_map(|p| p.depends.iter().flat_map(|g| g.0.iter()))
        .flat_map(|rel| own.satisfying(rel))
        .map(|p| p.name.as_str())
        .collect();
    let mut roots: Vec<&Package> = ours.iter().collect();
    roots.sort_by_key(|p| (needed.contains(p.name.as_str()), p.name.clone()));
    let mut walk = Walk {
        base: &base,
        own: &own,
        installable: &installable,
        said: HashSet::new(),
        chain: Vec::new(),
        out: Vec::new(),
    };
    for p in roots {
        if !installable.contains(&key(p)) {
            walk.down(p);
        }
    }
    walk.out
}

/// [`missing`] for each of `architectures` where a base is of one
/// architecture: that architecture's packages (and `all`) against the
/// bases of it and of every architecture. Said once each, with the
/// architectures that lack it (none named when every one does).
pub fn missing_by_architecture(
    ours: &[Package],
    bases: &[Base],
    architectures: &[String],
) -> Vec<Missing> {
    if bases.iter().all(|b| b.architecture.is_none()) {
        return missing(ours, bases);
    }
    let mut out: Vec<Missing> = Vec::new();
    for arch in architectures {
        let (mine, theirs) = of_architecture(ours, bases, arch);
        for m in missing(&mine, &theirs) {
            let same =
                |o: &&mut Missing| (&o.chain, &o.needs, &o.found) == (&m.chain, &m.needs, &m.found);
            match out.iter_mut().find(same) {
                Some(o) => o.architectures.push(arch.clone()),
                None => out.push(Missing {
                    architectures: vec![arch.clone()],
                    ..m
                }),
            }
        }
    }
    for m in &mut out {
        if m.architectures.len() == architectures.len() {
            m.architectures.clear();
        }
    }
    out
}

/// The packages of `arch` (and `all`) and the bases that are of it (or of
/// every architecture).
pub fn of_architecture<'b>(
    ours: &[Package],
    bases: &'b [Base],
    arch: &str,
) -> (Vec<Package>, Vec<&'b Base>) {
    let mine = ours
        .iter()
        .filter(|p| p.architecture == arch || p.architecture == "all")
        .cloned()
        .collect();
    let theirs = bases
        .iter()
        .filter(|b| b.architecture.as_deref().is_none_or(|a| a == arch))
        .collect();
    (mine, theirs)
}

/// A package a machine at the base would have to get from a release's
/// index for ours to install, and the chain that needs it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Pulled {
    /// `name version`
    pub package: String,
    pub name: String,
    pub version: String,
    pub architecture: String,
    /// From the package a lab installs down to the one that needs it.
    pub chain: Vec<String>,
    /// The relation it satisfies.
    pub needs: String,
}

/// The dependency closure of `ours` at `bases` from `offered` (a release's
/// index: what the project's trusted source has): the packages to carry
/// with ours so that they install with nothing else, picked as apt would
/// (the first alternative the index satisfies, its highest version), each
/// with the chain that needs it; and what even the index lacks.
pub fn closure<B: Borrow<Base>>(
    ours: &[Package],
    bases: &[B],
    offered: &Base,
) -> (Vec<Pulled>, Vec<Missing>) {
    let index = Offers::new(offered.packages.iter());
    let mut with: Vec<Package> = ours.to_vec();
    let mut pulled: Vec<Pulled> = Vec::new();
    loop {
        let lacking = missing(&with, bases);
        let mut added = false;
        let mut still = Vec::new();
        for m in lacking {
            // One version of a package: a name already among ours (or
            // pulled) at another version cannot be added beside it.
            match pick(&index, &m.needs) {
                Some(p) if !with.iter().any(|w| w.name == p.name) => {
                    pulled.push(Pulled {
                        package: p.label(),
                        name: p.name.clone(),
                        version: p.version_text.clone(),
                        architecture: p.architecture.clone(),
                        chain: m.chain.clone(),
                        needs: m.needs.clone(),
                    });
                    with.push(p.clone());
                    added = true;
                }
                Some(_) | None => still.push(m),
            }
        }
        if !added {
            return (pulled, still);
        }
    }
}

/// The package of `index` apt would take for a group (as `needs` states
/// it): the first alternative it satisfies, by that name at its highest
/// version; only where no package has the name, its one provider (several
/// providers are apt's choice, not ours to guess: none).
fn pick<'a>(index: &Offers<'a>, needs: &str) -> Option<&'a Package> {
    let group = Relations::parse(needs).ok()?.0.into_iter().next()?;
    group.0.iter().find_map(|r| {
        let (named, providers): (Vec<&Package>, Vec<&Package>) = index
            .satisfying(r)
            .into_iter()
            .partition(|p| p.name == r.name);
        if !named.is_empty() {
            return named
                .into_iter()
                .max_by(|a, b| a.version.compare(&b.version));
        }
        let mut names: Vec<&str> = providers.iter().map(|p| p.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        match names.as_slice() {
            [_] => providers
                .into_iter()
                .max_by(|a, b| a.version.compare(&b.version)),
            _ => None,
        }
    })
}

/// A package of ours by name and version.
fn key(p: &Package) -> (&str, &str) {
    (p.name.as_str(), p.version_text.as_str())
}

/// The packages of ours that install (see [`missing`]).
fn installable<'a>(
    ours: &'a [Package],
    base: &Offers<'a>,
    own: &Offers<'a>,
) -> HashSet<(&'a str, &'a str)> {
    let mut set: HashSet<(&str, &str)> = ours.iter().map(key).collect();
    loop {
        let drop: Vec<(&str, &str)> = ours
            .iter()
            .filter(|p| set.contains(&key(p)))
            .filter(|p| {
                p.depends.iter().any(|group| {
                    !group.0.iter().any(|r| {
                        !base.satisfying(r).is_empty()
                            || own.satisfying(r).iter().any(|c| set.contains(&key(c)))
                    })
                })
            })
            .map(key)
            .collect();
        if drop.is_empty() {
            return set;
        }
        for k in drop {
            set.remove(&k);
        }
    }
}

/// The walk that says why packages do not install.
struct Walk<'w, 'a> {
    base: &'w Offers<'a>,
    own: &'w Offers<'a>,
    installable: &'w HashSet<(&'a str, &'a str)>,
    /// (package, relation) said already.
    said: HashSet<(String, String)>,
    chain: Vec<(&'a str, &'a str)>,
    out: Vec<Missing>,
}

impl<'a> Walk<'_, 'a> {
    /// Says why `p` (which does not install) does not: each group nothing
    /// satisfies, and, where only packages of ours that do not install
    /// could, why those do not.
    fn down(&mut self, p: &'a Package) {
        if self.chain.contains(&key(p)) {
            return;
        }
        self.chain.push(key(p));
        for group in &p.depends {
            let by_base = group.0.iter().any(|r| !self.base.satisfying(r).is_empty());
            let candidates: Vec<&'a Package> = group
                .0
                .iter()
                .flat_map(|r| self.own.satisfying(r))
                .collect();
            if by_base
                || candidates
                    .iter()
                    .any(|c| self.installable.contains(&key(c)))
            {
                continue;
            }
            if candidates.is_empty() {
                self.say(p, group);
            }
            for c in candidates {
                self.down(c);
            }
        }
        self.chain.pop();
    }

    fn say(&mut self, p: &Package, group: &Alternatives) {
        let needs: Vec<String> = group.0.iter().map(|r| r.to_string()).collect();
        let needs = needs.join(" | ");
        if !self.said.insert((p.label(), needs.clone())) {
            return;
        }
        let mut found = self.base.named(group);
        found.extend(self.own.named(group));
        self.out.push(Missing {
            chain: self.chain.iter().map(|(n, v)| format!("{n} {v}")).collect(),
            needs,
            found,
            architectures: Vec::new(),
        });
    }
}

/// The packages every `Packages` index of the repository at `root` lists.
pub fn packages_of(root: &Path) -> Vec<Package> {
    let mut out = Vec::new();
    for index in super::verify::package_indexes(root) {
        // Regular files only, with a bound: `verify` may be given a tree
        // nobody here wrote.
        let Ok(file) = crate::input::open_regular(&index) else {
            continue;
        };
        let bounded = BufReader::new(file.take(MAX_BASE));
        for stanza in ParagraphReader::new(bounded).map_while(Result::ok) {
            out.extend(Package::of(&stanza));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkgs(text: &str) -> Vec<Package> {
        crate::format::deb822::Document::parse(text)
            .unwrap()
            .paragraphs()
            .filter_map(Package::of)
            .collect()
    }

    /// A base read from a file holding `text`, compressed as asked.
    fn base_as(text: &str, compression: Compression) -> Base {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("base");
        let mut enc = compression
            .encoder(Vec::new(), compression.default_level(), 1)
            .unwrap();
        std::io::Write::write_all(&mut enc, text.as_bytes()).unwrap();
        std::fs::write(&path, enc.finish().unwrap()).unwrap();
        Base::read(&path).unwrap()
    }

    fn base(text: &str) -> Base {
        base_as(text, Compression::None)
    }

    #[test]
    fn chains_start_at_what_a_lab_installs_and_stop_at_what_is_missing() {
        let ours = pkgs(
            "Package: meta\nVersion: 1\nDepends: lib (= 2), tool\n\nPackage: lib\nVersion: 2\nDepends: libc6 (>= 2.38)\n\nPackage: tool\nVersion: 1\nDepends: python3 | python3-minimal, virtual-thing\n\nPackage: provider\nVersion: 1\nProvides: virtual-thing\n",
        );
        let machine =
            base("Package: libc6\nVersion: 2.27-3ubuntu1\nStatus: install ok installed\n");
        let m = missing(&ours, &[machine]);
        assert_eq!(
            m.iter().map(|m| m.to_string()).collect::<Vec<_>>(),
            [
                "meta 1 → lib 2 → libc6 (>= 2.38): only libc6 2.27-3ubuntu1 there",
                "meta 1 → tool 1 → python3 | python3-minimal: neither the base nor the repository has it",
            ]
        );
    }

    #[test]
    fn a_base_of_one_architecture_answers_for_that_architecture_only() {
        let ours = pkgs(
            "Package: tool\nVersion: 1\nArchitecture: arm64\nDepends: libx\n\nPackage: tool\nVersion: 1\nArchitecture: amd64\nDepends: libx\n\nPackage: doc\nVersion: 1\nArchitecture: all\nDepends: liby\n",
        );
        let mut amd64 = base(
            "Package: libx\nVersion: 1\nArchitecture: amd64\nFilename: pool/x.deb\n\nPackage: liby\nVersion: 1\nArchitecture: all\nFilename: pool/y.deb\n",
        );
        amd64.architecture = Some("amd64".into());
        let mut arm64 =
            base("Package: liby\nVersion: 1\nArchitecture: all\nFilename: pool/y.deb\n");
        arm64.architecture = Some("arm64".into());
        let machine = base("Package: liby\nVersion: 1\nStatus: install ok installed\n");
        let archs = ["amd64".to_string(), "arm64".to_string()];
        let said = |bases: &[Base]| -> Vec<String> {
            missing_by_architecture(&ours, bases, &archs)
                .iter()
                .map(|m| m.to_string())
                .collect()
        };
        // libx only for amd64: arm64's tool lacks it; liby is everywhere.
        assert_eq!(
            said(&[amd64.clone(), arm64.clone()]),
            ["tool 1 → libx: neither the base nor the repository has it on arm64"]
        );
        // Without the arm64 index, doc (all) lacks liby for arm64 only, once;
        // a base of every architecture (a machine's status) answers for both.
        assert_eq!(
            said(&[amd64.clone()]),
            [
                "doc 1 → liby: neither the base nor the repository has it on arm64",
                "tool 1 → libx: neither the base nor the repository has it on arm64",
            ]
        );
        assert_eq!(
            said(&[amd64.clone(), machine]),
            ["tool 1 → libx: neither the base nor the repository has it on arm64"]
        );
        // doc (all) lacks liby on both architectures: said once, naming
        // none (every architecture lacks it).
        let bare = |arch: &str| {
            // libx for amd64 only, liby for neither.
            let lib = if arch == "amd64" { "libx" } else { "libz" };
            let mut b = base(&format!(
                "Package: {lib}\nVersion: 1\nArchitecture: {arch}\nFilename: pool/{lib}.deb\n"
            ));
            b.architecture = Some(arch.into());
            b
        };
        assert_eq!(
            said(&[bare("amd64"), bare("arm64")]),
            [
                "doc 1 → liby: neither the base nor the repository has it",
                "tool 1 → libx: neither the base nor the repository has it on arm64",
            ]
        );
        // Three architectures, two of them lacking it: both named.
        let three = [
            "amd64".to_string(),
            "arm64".to_string(),
            "ppc64el".to_string(),
        ];
        let mut ppc = base("Package: liby\nVersion: 1\nArchitecture: all\nFilename: pool/y.deb\n");
        ppc.architecture = Some("ppc64el".into());
        let lacking: Vec<String> =
            missing_by_architecture(&ours, &[bare("amd64"), bare("arm64"), ppc], &three)
                .iter()
                .map(|m| m.to_string())
                .collect();
        assert!(
            lacking.contains(
                &"doc 1 → liby: neither the base nor the repository has it on amd64, arm64"
                    .to_string()
            ),
            "{lacking:?}"
        );
    }

    #[test]
    fn the_base_or_our_own_packages_satisfy_and_cycles_end() {
        let ours = pkgs(
            "Package: a\nVersion: 1\nDepends: b, libc6 (>= 2.17)\n\nPackage: b\nVersion: 1\nPre-Depends: a\nDepends: vfoo (>= 2)\n\nPackage: c\nVersion: 1\nProvides: vfoo (= 3)\n",
        );
        let machine = base(
            "Package: libc6\nVersion: 2.27\nStatus: install ok installed\n\nPackage: gone\nVersion: 1\nStatus: deinstall ok config-files\n",
        );
        assert_eq!(machine.len(), 1, "a removed package is not installed");
        assert!(missing(&ours, &[machine]).is_empty());
    }

    #[test]
    fn a_package_that_fails_as_an_alternative_is_said_as_a_root_and_cycles_go_whole() {
        // rr installs through zz; aa, tried first for rr, does not: said
        // for aa itself. The cycle c1 <-> c2 needs what is missing: both go.
        let ours = pkgs(
            "Package: rr\nVersion: 1\nDepends: aa | zz\n\nPackage: aa\nVersion: 1\nDepends: missing-thing\n\nPackage: zz\nVersion: 1\n\nPackage: c1\nVersion: 1\nDepends: c2\n\nPackage: c2\nVersion: 1\nDepends: c1, gone\n",
        );
        let machine = base("Package: libc6\nVersion: 2.27\nStatus: install ok installed\n");
        let m: Vec<String> = missing(&ours, &[machine])
            .iter()
            .map(|m| m.to_string())
            .collect();
        assert_eq!(
            m,
            [
                "aa 1 → missing-thing: neither the base nor the repository has it",
                "c1 1 → c2 1 → gone: neither the base nor the repository has it",
            ]
        );
    }

    #[test]
    fn the_closure_pulls_what_the_index_offers_down_to_the_base() {
        let ours = pkgs("Package: tool\nVersion: 1\nDepends: py (>= 3), newlibc (>= 9)\n");
        let machine = base("Package: libc6\nVersion: 2.27\nStatus: install ok installed\n");
        let index = base_as(
            "Package: py\nVersion: 2\nFilename: a\n\nPackage: py\nVersion: 3.6\nDepends: pylib | other\nFilename: b\n\nPackage: pylib\nVersion: 1\nDepends: libc6\nFilename: c\n",
            Compression::None,
        );
        let (pulled, still) = closure(&ours, &[machine], &index);
        assert_eq!(
            pulled
                .iter()
                .map(|p| format!("{} <- {}", p.package, p.chain.join(" → ")))
                .collect::<Vec<_>>(),
            ["py 3.6 <- tool 1", "pylib 1 <- tool 1 → py 3.6"]
        );
        assert_eq!(still.len(), 1);
        assert_eq!(still[0].needs, "newlibc (>= 9)");
    }

    #[test]
    fn the_closure_takes_the_package_by_its_name_and_one_version_of_each() {
        let machine = base("Package: libc6\nVersion: 2.27\nStatus: install ok installed\n");
        // A provider with a higher version does not push out the package
        // of that name; two providers are not guessed between.
        let index = base_as(
            "Package: nd\nVersion: 3.20\nFilename: a\n\nPackage: shell\nVersion: 3.28\nProvides: nd, virt\nFilename: b\n\nPackage: other\nVersion: 1\nProvides: virt\nFilename: c\n\nPackage: foo\nVersion: 1\nFilename: d\n\nPackage: foo\nVersion: 2\nFilename: e\n",
            Compression::None,
        );
        let ours = pkgs("Package: t\nVersion: 1\nDepends: nd, virt\n");
        let (pulled, still) = closure(&ours, std::slice::from_ref(&machine), &index);
        assert_eq!(
            pulled
                .iter()
                .map(|p| p.package.as_str())
                .collect::<Vec<_>>(),
            ["nd 3.20"]
        );
        assert_eq!(still.len(), 1);
        assert_eq!(still[0].needs, "virt");
        // foo (>= 2) and foo (<< 2): one version only; the other lacks.
        let ours = pkgs(
            "Package: a\nVersion: 1\nDepends: foo (>= 2)\n\nPackage: b\nVersion: 1\nDepends: foo (<< 2)\n",
        );
        let (pulled, still) = closure(&ours, std::slice::from_ref(&machine), &index);
        assert_eq!(pulled.len(), 1, "{pulled:?}");
        assert_eq!(still.len(), 1, "{still:?}");
        // Ours at another version: not pulled beside it, said as lacking.
        let ours =
            pkgs("Package: c\nVersion: 1\nDepends: foo (>= 2)\n\nPackage: foo\nVersion: 1+lab1\n");
        let (pulled, still) = closure(&ours, &[machine], &index);
        assert!(pulled.is_empty(), "{pulled:?}");
        assert_eq!(still.len(), 1);
    }

    #[test]
    fn an_unversioned_provides_does_not_satisfy_a_versioned_relation() {
        let ours = pkgs("Package: a\nVersion: 1\nDepends: vfoo (>= 2)\n");
        let machine =
            base("Package: c\nVersion: 1\nProvides: vfoo\nStatus: install ok installed\n");
        let m = missing(&ours, &[machine]);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].needs, "vfoo (>= 2)");
    }

    #[test]
    fn a_base_is_read_plain_gzip_or_xz_and_told_by_its_fields() {
        let index = "Package: libc6\nVersion: 2.27\nFilename: pool/l/libc6.deb\n";
        for c in [Compression::None, Compression::Gzip, Compression::Xz] {
            let b = base_as(index, c);
            assert_eq!((b.kind, b.len()), (BaseKind::Index, 1), "{c:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        let other = dir.path().join("other");
        std::fs::write(&other, "Origin: Ubuntu\nSuite: bionic\n").unwrap();
        assert!(matches!(
            Base::read(&other),
            Err(AgainstError::NotABase { .. })
        ));
        assert!(Base::read(dir.path()).is_err(), "a directory is no base");
    }
}
