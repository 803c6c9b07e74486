//! The lock file (`recipes/debforge.lock`): for every package, the file that
//! was resolved and verified, and what vouched for it. Users commit it;
//! `debforge build --locked` refuses to build anything else, so a rebuild
//! months later gets the same bytes or a clear error.

use serde::{Deserialize, Serialize};

pub const LOCK_VERSION: u32 = 1;

const HEADER: &str = "# Written by `debforge lock` (and `debforge build`). Commit it:\n# `debforge build --locked` refuses to use anything that differs from it.\n";

/// One resolved, verified package file, field by field: what the lock file
/// says of it (read and written through this), and what makes a
/// [`LockedPackage`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LockEntry {
    pub name: String,
    pub version: String,
    pub architecture: String,
    /// The source name, or `url` / `path` for direct files.
    pub origin: String,
    /// The file's path relative to the source's base URL (or the recipe dir).
    pub path: String,
    /// Where it was fetched from when locked (informational under `--source`).
    pub url: String,
    pub size: u64,
    pub sha256: String,
    /// Present when something vouched for it: the upstream index listed it,
    /// or the file was at hand (direct paths, built packages). Debian's
    /// archive lists no SHA512, so its entries have none.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "empty_is_none"
    )]
    pub sha512: Option<String>,
    /// The digests the upstream index gave for the file (`Size`, `SHA256`,
    /// `SHA512`): what `--locked` compares against a fresh resolution,
    /// besides the file's SHA256, which is always checked. Empty for direct
    /// files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub index_digests: Vec<String>,
    /// The index that listed it, relative to the source's base URL, and its
    /// SHA256 when locked. Empty for direct files.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub index: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub index_sha256: String,
    /// SHA256 of the signed Release that listed the index.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub release_sha256: String,
    /// Picked by the base's closure (`[base] closure` in repository.toml),
    /// not named by a recipe: the next build reads its recipe from here.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub for_base: bool,
}

/// One resolved, verified package file ([`LockEntry`]'s fields), compact:
/// a build holds every package's entry from resolving to preparing, so
/// its texts live in one string (back to back, each one's end beside it)
/// in two allocations, not eleven (about 400 bytes a package, not 720).
#[derive(Clone, PartialEq, Eq)]
pub struct LockedPackage {
    text: Box<str>,
    ends: [u32; TEXTS],
    pub size: u64,
    index_digests: Box<[String]>,
    pub for_base: bool,
    /// The URL is its text at `URL` followed by the path: only the part
    /// before the path is kept (a source's base URL, or `file://` and the
    /// recipes' directory), as nearly every URL ends with its path (memory:
    /// 85 bytes a package, held from resolving to preparing).
    url_ends_in_path: bool,
}

/// The texts of an entry, in `LockedPackage::text`'s order.
const TEXTS: usize = 11;
const NAME: usize = 0;
const VERSION: usize = 1;
const ARCHITECTURE: usize = 2;
const ORIGIN: usize = 3;
const PATH: usize = 4;
const URL: usize = 5;
const SHA256: usize = 6;
/// Empty for none.
const SHA512: usize = 7;
const INDEX: usize = 8;
const INDEX_SHA256: usize = 9;
const RELEASE_SHA256: usize = 10;

impl From<LockEntry> for LockedPackage {
    fn from(e: LockEntry) -> LockedPackage {
        let sha512 = e.sha512.unwrap_or_default();
        let base = e.url.strip_suffix(&e.path).filter(|_| !e.path.is_empty());
        let texts: [&str; TEXTS] = [
            &e.name,
            &e.version,
            &e.architecture,
            &e.origin,
            &e.path,
            base.unwrap_or(&e.url),
            &e.sha256,
            &sha512,
            &e.index,
            &e.index_sha256,
            &e.release_sha256,
        ];
        let mut text = String::with_capacity(texts.iter().map(|t| t.len()).sum());
        let mut ends = [0; TEXTS];
        for (end, t) in ends.iter_mut().zip(texts) {
            text.push_str(t);
            // A lock is read with a bound far below 4 GiB.
            *end = u32::try_from(text.len()).expect("a lock entry is smaller than 4 GiB");
        }
        LockedPackage {
            text: text.into_boxed_str(),
            ends,
            size: e.size,
            index_digests: e.index_digests.into_boxed_slice(),
            for_base: e.for_base,
            url_ends_in_path: base.is_some(),
        }
    }
}

impl LockedPackage {
    fn text(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }

    pub fn name(&self) -> &str {
        self.text(NAME)
    }
    pub fn version(&self) -> &str {
        self.text(VERSION)
    }
    pub fn architecture(&self) -> &str {
        self.text(ARCHITECTURE)
    }
    /// The source name, or `url` / `path` for direct files.
    pub fn origin(&self) -> &str {
        self.text(ORIGIN)
    }
    /// The file's path relative to the source's base URL (or the recipe dir).
    pub fn path(&self) -> &str {
        self.text(PATH)
    }
    /// Where it was fetched from when locked.
    pub fn url(&self) -> std::borrow::Cow<'_, str> {
        match self.url_ends_in_path {
            true => [self.text(URL), self.path()].concat().into(),
            false => self.text(URL).into(),
        }
    }
    pub fn sha256(&self) -> &str {
        self.text(SHA256)
    }
    pub fn sha512(&self) -> Option<&str> {
        Some(self.text(SHA512)).filter(|s| !s.is_empty())
    }
    pub fn index_digests(&self) -> &[String] {
        &self.index_digests
    }
    pub fn index(&self) -> &str {
        self.text(INDEX)
    }
    pub fn index_sha256(&self) -> &str {
        self.text(INDEX_SHA256)
    }
    pub fn release_sha256(&self) -> &str {
        self.text(RELEASE_SHA256)
    }

    /// Its fields, each on its own.
    pub fn entry(&self) -> LockEntry {
        LockEntry {
            name: self.name().to_string(),
            version: self.version().to_string(),
            architecture: self.architecture().to_string(),
            origin: self.origin().to_string(),
            path: self.path().to_string(),
            url: self.url().into_owned(),
            size: self.size,
            sha256: self.sha256().to_string(),
            sha512: self.sha512().map(str::to_string),
            index_digests: self.index_digests.to_vec(),
            index: self.index().to_string(),
            index_sha256: self.index_sha256().to_string(),
            release_sha256: self.release_sha256().to_string(),
            for_base: self.for_base,
        }
    }
}

/// By name, then architecture: the lock file's order.
fn in_lock_order(a: &LockedPackage, b: &LockedPackage) -> std::cmp::Ordering {
    (a.name(), a.architecture()).cmp(&(b.name(), b.architecture()))
}

/// `packages` in lock order (stable: of two entries with one name and
/// architecture, the later stays later), for [`with_name_of`]: 8 bytes a
/// package, where a hash table of a lock was over 1 MB at 20,000 packages.
pub fn in_lock_order_sorted<P: std::ops::Deref<Target = LockedPackage>>(
    packages: impl IntoIterator<Item = P>,
) -> Vec<P> {
    let mut v: Vec<P> = packages.into_iter().collect();
    v.sort_by(|a, b| in_lock_order(a, b));
    v
}

/// The entries of `sorted` ([`in_lock_order_sorted`]) with `p`'s name and
/// architecture, in their order.
pub fn with_name_of<'s, P: std::ops::Deref<Target = LockedPackage>>(
    sorted: &'s [P],
    p: &LockedPackage,
) -> &'s [P] {
    let start = sorted.partition_point(|q| in_lock_order(q, p).is_lt());
    let end = sorted.partition_point(|q| in_lock_order(q, p).is_le());
    &sorted[start..end]
}

/// The lock's text of `sorted`, each entry dropped once its table is
/// written.
fn write_tables<P: std::ops::Deref<Target = LockedPackage>>(
    sorted: Vec<P>,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    // This debforge's version, whatever the lock was read with.
    writeln!(out, "{HEADER}version = {LOCK_VERSION}")?;
    if sorted.is_empty() {
        out.write_all(b"package = []\n")?;
    }
    let mut table = String::new();
    for p in sorted {
        table.clear();
        p.write_table(&mut table);
        write!(out, "\n[[package]]\n{table}")?;
    }
    Ok(())
}

impl LockedPackage {
    /// Its `[[package]]` table's lines, as `toml` writes [`LockEntry`] (a
    /// test holds them equal): each value through `toml_writer`, the crate
    /// `toml` writes values with. Not through a serializer per entry: that
    /// was most of a lock's writing (60 ms at 20,000 packages, while the
    /// build held every entry beside every prepared control, see
    /// `workflow::build`).
    fn write_table(&self, out: &mut String) {
        use toml_writer::{TomlWrite, WriteTomlValue};
        fn line(out: &mut String, key: &str, value: &(impl WriteTomlValue + ?Sized)) {
            out.push_str(key);
            out.push_str(" = ");
            out.value(value).expect("a String takes any text");
            out.push('\n');
        }
        line(out, "name", self.name());
        line(out, "version", self.version());
        line(out, "architecture", self.architecture());
        line(out, "origin", self.origin());
        line(out, "path", self.path());
        line(out, "url", &*self.url());
        line(out, "size", &self.size);
        line(out, "sha256", self.sha256());
        if let Some(sha512) = self.sha512() {
            line(out, "sha512", sha512);
        }
        if !self.index_digests.is_empty() {
            line(out, "index-digests", &*self.index_digests);
        }
        for (key, value) in [
            ("index", self.index()),
            ("index-sha256", self.index_sha256()),
            ("release-sha256", self.release_sha256()),
        ] {
            if !value.is_empty() {
                line(out, key, value);
            }
        }
        if self.for_base {
            line(out, "for-base", &true);
        }
    }
}

impl std::fmt::Debug for LockedPackage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.entry().fmt(f)
    }
}

impl Serialize for LockedPackage {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.entry().serialize(s)
    }
}

impl<'de> Deserialize<'de> for LockedPackage {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<LockedPackage, D::Error> {
        LockEntry::deserialize(d).map(LockedPackage::from)
    }
}

/// Old lock files wrote `sha512 = ""` for "unknown".
mod empty_is_none {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.serialize_str(v),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        Ok(Option::<String>::deserialize(d)?.filter(|v| !v.is_empty()))
    }
}

impl LockedPackage {
    /// What must not change between lock and build: the file itself. SHA512
    /// counts only where both sides know it (an index that gives none, like
    /// Debian's, must not make every comparison fail).
    fn same_file(&self, other: &LockedPackage) -> bool {
        (
            &self.name(),
            &self.version(),
            &self.architecture(),
            &self.path(),
            self.size,
            &self.sha256(),
        ) == (
            &other.name(),
            &other.version(),
            &other.architecture(),
            &other.path(),
            other.size,
            &other.sha256(),
        ) && !sha512_differs(self, other)
    }
}

fn sha512_differs(a: &LockedPackage, b: &LockedPackage) -> bool {
    matches!((&a.sha512(), &b.sha512()), (Some(x), Some(y)) if x != y)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    pub version: u32,
    /// Shared with what is resolved from them (a build of thousands of
    /// packages would hold a copy of each entry beside the lock).
    #[serde(default)]
    pub package: Vec<std::sync::Arc<LockedPackage>>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LockError {
    #[error("line {line}: {message}")]
    Syntax { line: usize, message: String },
    #[error("lock file version {0} is not supported (this debforge writes version {LOCK_VERSION})")]
    Version(u32),
    #[error("{package}: {field} {value:?} {problem}")]
    Bad {
        package: String,
        field: &'static str,
        value: String,
        problem: String,
    },
}

impl Lock {
    pub fn new(
        packages: impl IntoIterator<Item = impl Into<std::sync::Arc<LockedPackage>>>,
    ) -> Lock {
        let mut packages: Vec<std::sync::Arc<LockedPackage>> =
            packages.into_iter().map(Into::into).collect();
        packages.sort_by(|a, b| in_lock_order(a, b));
        Lock {
            version: LOCK_VERSION,
            package: packages,
        }
    }

    /// The version a lock file's text says before its first table, where
    /// it says one in the first lines (`head`: as much of the file as was
    /// read): what a build that writes the lock without parsing the old one
    /// checks, so that a lock of a newer debforge is never written over.
    pub fn declared_version(head: &str) -> Option<u32> {
        #[derive(Deserialize)]
        struct Head {
            version: u32,
        }
        let lines = head.rfind('\n').map_or("", |end| &head[..end + 1]);
        let top = lines
            .match_indices('\n')
            .map(|(i, _)| i + 1)
            .find(|&i| lines[i..].trim_start().starts_with('['))
            .map_or(lines, |i| &lines[..i]);
        toml::from_str::<Head>(top).ok().map(|h| h.version)
    }

    pub fn parse(text: &str) -> Result<Lock, LockError> {
        let lock = match Lock::parse_by_package(text) {
            Some(lock) => lock,
            None => Lock::parse_whole(text)?,
        };
        lock.check()?;
        Ok(lock)
    }

    /// The lock read one `[[package]]` table at a time: a TOML document
    /// parsed whole is a tree of spanned values about ten times the size
    /// of its text (25 MB for 5,000 packages), the largest thing a build
    /// held. `None` where a table does not parse on its own (cut inside a
    /// multi-line string, say): the whole document then says what is wrong,
    /// with its line.
    fn parse_by_package(text: &str) -> Option<Lock> {
        const HEADER: &str = "[[package]]\n";
        // (A lock starts with its version: a table at the very start is
        // left to the whole document, which says the version is missing.)
        let starts: Vec<usize> = text
            .match_indices(&format!("\n{HEADER}"))
            .map(|(i, _)| i + 1)
            .collect();
        let first = starts.first().copied().unwrap_or(text.len());
        let mut lock: Lock = toml::from_str(&text[..first]).ok()?;
        lock.package.reserve(starts.len());
        for (i, start) in starts.iter().enumerate() {
            let end = starts.get(i + 1).copied().unwrap_or(text.len());
            let one: Lock = toml::from_str(&format!("version = 0\n{}", &text[*start..end])).ok()?;
            let [p] = <[std::sync::Arc<LockedPackage>; 1]>::try_from(one.package).ok()?;
            lock.package.push(p);
        }
        Some(lock)
    }

    fn parse_whole(text: &str) -> Result<Lock, LockError> {
        let lock: Lock = toml::from_str(text).map_err(|e| LockError::Syntax {
            line: e.span().map_or(1, |s| {
                text[..s.start.min(text.len())].matches('\n').count() + 1
            }),
            message: e
                .message()
                .lines()
                .next()
                .unwrap_or("invalid TOML")
                .to_string(),
        })?;
        Ok(lock)
    }

    /// What parsing cannot say: the version, and each digest and path.
    fn check(&self) -> Result<(), LockError> {
        let lock = self;
        if lock.version != LOCK_VERSION {
            return Err(LockError::Version(lock.version));
        }
        // Digests name cache directories and paths name files in
        // snapshots: both are checked before anything uses them.
        use crate::format::path::{check_relative, is_hex_digest};
        for p in &lock.package {
            let bad = |field, value: &str, problem: &str| LockError::Bad {
                package: p.name().to_string(),
                field,
                value: value.to_string(),
                problem: problem.to_string(),
            };
            if !is_hex_digest(p.sha256(), 64) {
                return Err(bad("sha256", p.sha256(), "is not 64 lower-case hex digits"));
            }
            if let Some(h) = &p.sha512()
                && !is_hex_digest(h, 128)
            {
                return Err(bad("sha512", h, "is not 128 lower-case hex digits"));
            }
            // Local files (`path`) are named as the recipe names them.
            if p.origin() != "path" {
                check_relative(p.path()).map_err(|e| bad("path", p.path(), &e.to_string()))?;
            }
            if !p.index().is_empty() {
                check_relative(p.index()).map_err(|e| bad("index", p.index(), &e.to_string()))?;
            }
        }
        Ok(())
    }

    /// Deterministic text: packages sorted by name and architecture.
    pub fn to_text(&self) -> String {
        let mut out = Vec::new();
        self.write_text(&mut out).expect("a Vec takes any text");
        String::from_utf8(out).expect("TOML is UTF-8")
    }

    /// [`Lock::to_text`] into `out`, a package at a time: the same text as
    /// the whole lock through `toml` (a test holds them equal) without a
    /// document of every package in memory (~10 MB for 5,000 packages).
    pub fn write_text(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        let mut sorted: Vec<&LockedPackage> = self.package.iter().map(|p| &**p).collect();
        sorted.sort_by(|a, b| in_lock_order(a, b));
        write_tables(sorted, out)
    }

    /// [`Lock::write_text`], each entry let go once its table is written:
    /// a build prepares its packages meanwhile, each fetched file's entry
    /// going as its artifact is made, so the entries this held were the
    /// last of them (memory: held until the file was written and synced,
    /// every entry stood beside every prepared control, 5 MB at 20,000
    /// packages).
    pub fn write_text_releasing(self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        let mut sorted = self.package;
        sorted.sort_by(|a, b| in_lock_order(a, b));
        write_tables(sorted, out)
    }

    pub fn get(&self, name: &str, architecture: &str) -> Option<&LockedPackage> {
        self.package
            .iter()
            .find(|p| p.name() == name && p.architecture() == architecture)
            .map(|p| &**p)
    }

    /// How `new` differs from this lock in what it would build, one line per
    /// difference; empty when the same files would be used.
    pub fn differences(&self, new: &Lock) -> Vec<String> {
        // Sorted once, each package looked up by name and architecture (at
        // the peak of a `--locked` build, both locks held: no hash tables).
        fn sorted(l: &Lock) -> Vec<&LockedPackage> {
            in_lock_order_sorted(l.package.iter().map(|p| &**p))
        }
        // The last entry with `p`'s name and architecture, as a map
        // collected from the list would keep.
        fn find<'l>(sorted: &[&'l LockedPackage], p: &LockedPackage) -> Option<&'l LockedPackage> {
            with_name_of(sorted, p).last().copied()
        }
        let (olds, news) = (sorted(self), sorted(new));
        let mut out = Vec::new();
        for p in &new.package {
            match find(&olds, p) {
                None => out.push(format!(
                    "{} {} ({}) is not in the lock file",
                    p.name(),
                    p.version(),
                    p.architecture()
                )),
                Some(old) if !old.same_file(p) || old.for_base != p.for_base => {
                    let mut what = Vec::new();
                    if old.for_base != p.for_base {
                        let by = |picked| {
                            if picked {
                                "picked for the base"
                            } else {
                                "named by a recipe"
                            }
                        };
                        what.push(format!("{} -> {}", by(old.for_base), by(p.for_base)));
                    }
                    if old.version() != p.version() {
                        what.push(format!("version {} -> {}", old.version(), p.version()));
                    }
                    if old.path() != p.path() {
                        what.push(format!("file {} -> {}", old.path(), p.path()));
                    }
                    if old.size != p.size {
                        what.push(format!("size {} -> {}", old.size, p.size));
                    }
                    if old.sha256() != p.sha256() {
                        what.push(format!("sha256 {} -> {}", old.sha256(), p.sha256()));
                    }
                    if sha512_differs(old, p) {
                        what.push("sha512 differs".to_string());
                    }
                    out.push(format!(
                        "{} ({}): {}",
                        p.name(),
                        p.architecture(),
                        what.join(", ")
                    ));
                }
                Some(_) => {}
            }
        }
        for old in &self.package {
            if find(&news, old).is_none() {
                out.push(format!(
                    "{} ({}) is locked but no recipe asks for it",
                    old.name(),
                    old.architecture()
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkg(name: &str, sha: char) -> LockedPackage {
        entry(name, sha).into()
    }

    fn entry(name: &str, sha: char) -> LockEntry {
        LockEntry {
            name: name.into(),
            version: "2.4.2-1+cuda10.1".into(),
            architecture: "amd64".into(),
            origin: "nvidia-ml".into(),
            path: format!("{name}_2.4.2-1+cuda10.1_amd64.deb"),
            url: format!("http://127.0.0.1/{name}.deb"),
            size: 10,
            sha256: sha.to_string().repeat(64),
            sha512: Some(sha.to_string().repeat(128)),
            index_digests: vec!["Size".into(), "SHA256".into(), "SHA512".into()],
            index: "Packages".into(),
            index_sha256: "c".repeat(64),
            release_sha256: "d".repeat(64),
            for_base: false,
        }
    }

    /// The compact entry gives back every field as it was made, empty ones
    /// and texts of several bytes a character included; without what
    /// vouched for it, only its identity is left.
    #[test]
    fn a_compact_entry_gives_back_each_field() {
        let mut e = entry("libnccl2", 'a');
        e.url = String::new();
        e.path = "pool/ü/libnccl2_2.4.2-1+cuda10.1_amd64.deb".into();
        e.for_base = true;
        let p = LockedPackage::from(e.clone());
        assert_eq!(p.entry(), e);
        assert_eq!(
            (p.name(), p.version(), p.architecture(), p.origin()),
            ("libnccl2", "2.4.2-1+cuda10.1", "amd64", "nvidia-ml")
        );
        assert_eq!((p.path(), &*p.url()), (e.path.as_str(), ""));
        // A URL that ends in the path keeps only what is before it; one
        // that does not (or a path that is empty) is kept whole.
        for (url, path) in [
            ("file:///p/recipes/debs/x.deb", "debs/x.deb"),
            ("file:///abs/x.deb", "/abs/x.deb"),
            ("http://127.0.0.1/pool/x.deb", "pool/x.deb"),
            ("http://127.0.0.1/other.deb", "pool/x.deb"),
            ("http://127.0.0.1/", ""),
            ("pool/x.deb", "pool/x.deb"),
        ] {
            let e = LockEntry {
                url: url.into(),
                path: path.into(),
                ..e.clone()
            };
            let p = LockedPackage::from(e.clone());
            assert_eq!((&*p.url(), p.path()), (url, path));
            assert_eq!(p.entry(), e);
        }
        assert_eq!(p.sha512(), e.sha512.as_deref());
        assert_eq!(
            (p.index(), p.index_sha256()),
            ("Packages", &*"c".repeat(64))
        );
        assert_eq!(p.release_sha256(), "d".repeat(64));
        assert_eq!(p.index_digests(), ["Size", "SHA256", "SHA512"]);
        assert_eq!(format!("{p:?}"), format!("{:?}", p.entry()));
    }

    #[test]
    fn the_text_written_a_package_at_a_time_is_the_whole_lock_through_toml() {
        let mut full = entry("libnccl2", 'a');
        full.sha512 = Some("c".repeat(128));
        full.index_digests = vec!["Size: 1".into(), "SHA256: x \"quoted\"".into()];
        full.index = "dists/x/main/binary-amd64/Packages.xz".into();
        full.for_base = true;
        let full = LockedPackage::from(full);
        // Texts `toml` writes in other forms: literal, escaped, multi-line.
        let mut odd = entry("odd", 'e');
        odd.path = "dir with 'quotes' and \\back\\slashes/ü\tx.deb".into();
        odd.url = "file:///a\"b\nc\u{7f}\u{1}".into();
        odd.version = "1:2.0~rc1+ü".into();
        odd.index_digests = vec![String::new(), "'\"\"\"'".into(), "a\r\nb".into()];
        odd.release_sha256 = "x".into();
        let odd = LockedPackage::from(odd);
        for lock in [
            Lock::new(Vec::<LockedPackage>::new()),
            Lock::new(vec![pkg("b", 'b'), full.clone(), pkg("a", 'a')]),
            Lock::new(vec![odd, pkg("a", 'a')]),
        ] {
            let whole = format!("{HEADER}{}", toml::to_string(&lock).unwrap());
            assert_eq!(lock.to_text(), whole);
        }
        // A lock not built by `Lock::new` (unsorted, another version) is
        // written sorted, as this debforge's version.
        let unsorted = Lock {
            version: 9,
            package: vec![
                pkg("b", 'b').into(),
                full.clone().into(),
                pkg("a", 'a').into(),
            ],
        };
        let sorted = Lock::new(vec![pkg("a", 'a'), pkg("b", 'b'), full]);
        assert_eq!(unsorted.to_text(), sorted.to_text());
    }

    #[test]
    fn a_lock_written_releasing_lets_each_entry_go_once_its_table_is_written() {
        use std::sync::{Arc, Weak};
        struct Watch {
            entries: Vec<Weak<LockedPackage>>,
            text: Vec<u8>,
            live_at_b: Option<usize>,
        }
        impl std::io::Write for Watch {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                if buf.windows(10).any(|w| w == b"name = \"b\"") {
                    let live = self.entries.iter().filter(|e| e.strong_count() > 0);
                    self.live_at_b = Some(live.count());
                }
                self.text.extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let lock = Lock::new(vec![pkg("b", 'b'), pkg("a", 'a')]);
        let text = lock.to_text();
        let mut watch = Watch {
            entries: lock.package.iter().map(Arc::downgrade).collect(),
            text: Vec::new(),
            live_at_b: None,
        };
        lock.write_text_releasing(&mut watch).unwrap();
        assert_eq!(String::from_utf8(watch.text).unwrap(), text);
        // `a` went once written, before `b`'s table was.
        assert_eq!(watch.live_at_b, Some(1));
        assert!(watch.entries.iter().all(|e| e.strong_count() == 0));
    }

    #[test]
    fn a_lock_read_a_package_at_a_time_is_the_lock_read_whole() {
        let mut full = entry("libnccl2", 'a');
        full.index_digests = vec!["Size: 1".into(), "[[package]]".into()];
        let full = LockedPackage::from(full);
        let lock = Lock::new(vec![pkg("a", 'a'), full, pkg("b", 'b')]);
        let text = lock.to_text();
        assert_eq!(Lock::parse_by_package(&text), Some(lock.clone()));
        assert_eq!(Lock::parse(&text).unwrap(), lock);
        // A table cut inside a multi-line string does not parse on its own:
        // the whole document is read, as TOML reads it.
        let cut = format!(
            "{text}\n[[package]]\nname = \"\"\"x\n[[package]]\ny\"\"\"\nversion = \"1\"\narchitecture = \"all\"\norigin = \"path\"\npath = \"x.deb\"\nurl = \"file:///x.deb\"\nsize = 1\nsha256 = \"{}\"\n",
            "e".repeat(64)
        );
        assert_eq!(Lock::parse_by_package(&cut), None);
        let whole = Lock::parse(&cut).unwrap();
        assert_eq!(whole.package.last().unwrap().name(), "x\n[[package]]\ny");
        // A syntax error names its line in the whole document.
        let bad = text.replace("size = 10", "size = ");
        assert!(
            matches!(Lock::parse(&bad), Err(LockError::Syntax { line, .. }) if line > 5),
            "{:?}",
            Lock::parse(&bad)
        );
    }

    #[test]
    fn round_trips_sorted_and_reports_differences() {
        let lock = Lock::new(vec![pkg("libnccl2", 'a'), pkg("libnccl-dev", 'b')]);
        let text = lock.to_text();
        assert!(text.find("libnccl-dev").unwrap() < text.find("libnccl2").unwrap());
        assert_eq!(Lock::parse(&text).unwrap(), lock);
        assert!(lock.differences(&lock).is_empty());
        let mut moved = entry("libnccl2", 'e');
        moved.index_sha256 = "f".repeat(64);
        let changed = Lock::new(vec![moved.into(), pkg("libnccl-dev", 'b')]);
        let d = lock.differences(&changed);
        assert_eq!(d.len(), 1);
        assert!(d[0].starts_with("libnccl2 (amd64): sha256 aaaa"), "{d:?}");
        assert_eq!(
            lock.differences(&Lock::new(vec![pkg("libnccl2", 'a')]))
                .len(),
            1
        );
        // The same file, now named by a recipe instead of picked for the
        // base: `--locked` says so.
        let mut picked = pkg("libnccl-dev", 'b');
        picked.for_base = true;
        let d = lock.differences(&Lock::new(vec![pkg("libnccl2", 'a'), picked]));
        assert_eq!(
            d,
            ["libnccl-dev (amd64): named by a recipe -> picked for the base"]
        );
        // Looked up by name and architecture among many: what is new, what
        // changed and what is gone, in the new lock's order, then the old's.
        let arch = |name: &str, sha: char, arch: &str| {
            let mut e = entry(name, sha);
            e.architecture = arch.into();
            LockedPackage::from(e)
        };
        let mut old: Vec<LockedPackage> = (0..300).map(|n| pkg(&format!("p{n:03}"), 'a')).collect();
        old.push(arch("p001", 'a', "arm64"));
        old.push(arch("gone", 'a', "all"));
        let mut new = old.clone();
        new.retain(|p| p.name() != "gone");
        new[150] = pkg("p150", 'c');
        new.push(arch("p001", 'a', "i386"));
        let d = Lock::new(old).differences(&Lock::new(new));
        assert_eq!(d.len(), 3, "{d:?}");
        assert!(d[0].starts_with("p001 "), "{d:?}");
        assert!(d[0].ends_with("(i386) is not in the lock file"), "{d:?}");
        assert!(d[1].starts_with("p150 (amd64): sha256 aaaa"), "{d:?}");
        assert_eq!(d[2], "gone (all) is locked but no recipe asks for it");
        assert!(matches!(
            Lock::parse("version = 9\n"),
            Err(LockError::Version(9))
        ));
        assert!(matches!(
            Lock::parse("version = 1\n[[package]]\nname = 1\n"),
            Err(LockError::Syntax { line: 3, .. })
        ));
    }

    #[test]
    fn sha512_is_compared_only_where_both_sides_know_it() {
        let with = pkg("libc-ares2", 'a');
        let mut without = entry("libc-ares2", 'a');
        without.sha512 = None;
        without.index_digests = vec!["Size".into(), "SHA256".into()];
        let without = LockedPackage::from(without);
        let old = Lock::new(vec![with.clone()]);
        assert!(
            old.differences(&Lock::new(vec![without.clone()]))
                .is_empty()
        );
        assert!(
            Lock::new(vec![without.clone()])
                .differences(&old)
                .is_empty()
        );
        let text = Lock::new(vec![without]).to_text();
        assert!(!text.contains("sha512"), "{text}");
        // An old lock's empty string means unknown.
        let old_text = old.to_text().replace(&"a".repeat(128), "");
        assert_eq!(Lock::parse(&old_text).unwrap().package[0].sha512(), None);
        let mut other = entry("libc-ares2", 'a');
        other.sha512 = Some("b".repeat(128));
        let d = old.differences(&Lock::new(vec![LockedPackage::from(other)]));
        assert_eq!(d, vec!["libc-ares2 (amd64): sha512 differs".to_string()]);
    }

    #[test]
    fn the_version_a_lock_declares_is_read_from_its_first_lines() {
        let lock =
            "# Written by debforge.\nversion = 2\n\n[[package]]\nname = \"a\"\nversion = \"1.0\"\n";
        assert_eq!(Lock::declared_version(lock), Some(2));
        // Cut anywhere after its version line: the same.
        assert_eq!(Lock::declared_version(&lock[..40]), Some(2));
        // Cut inside it: none.
        assert_eq!(Lock::declared_version(&lock[..30]), None);
        // Only a table's version, or none, or not TOML: none.
        assert_eq!(
            Lock::declared_version("[[package]]\nversion = \"3\"\n"),
            None
        );
        assert_eq!(Lock::declared_version("<<<<<<< ours\nversion = 1\n"), None);
        assert_eq!(Lock::declared_version(""), None);
    }
}
