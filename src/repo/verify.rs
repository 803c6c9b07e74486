//! `debforge verify`: checks a built or published repository as apt would,
//! and lists every problem instead of stopping at the first.

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use crate::deb::{Compression, DebFile};
use crate::digest::{DigestSet, Digests, Hasher, digest_reader, digest_with};
use crate::format::deb822::{ControlParagraph, ParagraphReader};
use crate::format::preferences::{Offer, Pin, Preferences, candidate};
use crate::format::release::{HashAlgo, IndexEntry, Release, ReleaseFile};
use crate::openpgp::PinnedKeyring;

/// What `verify` found, and what it looked at.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct VerifyReport {
    pub problems: Vec<String>,
    pub suites: usize,
    pub indexes: usize,
    pub packages: usize,
    /// The bases checked against (`verify --against`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bases: Vec<BaseSummary>,
    /// What the packages need that neither the bases nor the repository
    /// have (each also a problem).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<super::against::Missing>,
    /// With `--closure-from`: the index read, what it would have to add
    /// for the packages to install on the bases, and what even it lacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closure: Option<Closure>,
}

/// What `verify --closure-from` found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Closure {
    pub index: PathBuf,
    pub pulled: Vec<super::against::Pulled>,
    pub lacking: Vec<super::against::Missing>,
}

/// A base as `verify --against` read it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BaseSummary {
    pub path: PathBuf,
    pub kind: super::against::BaseKind,
    /// Installed (a status file) or offered (an index).
    pub packages: usize,
}

impl VerifyReport {
    /// Resolves the repository's packages at `root` against `bases`
    /// ([`super::against`]); what is missing is a problem.
    pub fn against(&mut self, root: &Path, bases: &[super::against::Base]) {
        use super::against;
        self.bases = bases
            .iter()
            .map(|b| BaseSummary {
                path: b.path.clone(),
                kind: b.kind,
                packages: b.len(),
            })
            .collect();
        self.missing = against::missing(&against::packages_of(root), bases);
        for m in &self.missing {
            self.problems
                .push(format!("not installable on the base: {m}"));
        }
    }

    /// What `index` would have to add to the repository at `root` for its
    /// packages to install on `bases` ([`super::against::closure`]).
    pub fn closure(
        &mut self,
        root: &Path,
        bases: &[super::against::Base],
        index: &super::against::Base,
    ) {
        let (pulled, lacking) =
            super::against::closure(&super::against::packages_of(root), bases, index);
        self.closure = Some(Closure {
            index: index.path.clone(),
            pulled,
            lacking,
        });
    }
}

/// A package as an index lists it: what the installability checks need.
#[derive(Debug, Clone)]
struct Listed {
    /// The index that lists it (one allocation for all its packages).
    index: std::sync::Arc<Path>,
    /// Its name, then its version: one allocation (held for every package
    /// of every index).
    text: Box<str>,
    name_len: u32,
    /// Boxed: nearly every package provides nothing.
    provides: Box<[String]>,
}

impl Listed {
    fn name(&self) -> &str {
        &self.text[..self.name_len as usize]
    }

    fn version(&self) -> &str {
        &self.text[self.name_len as usize..]
    }
}

/// Verifies every suite under `root/dists/` against `keyring` (binary or
/// armored; every certificate in it is trusted). `now` is compared with
/// `Valid-Until` and `Date`. Beyond integrity it checks that apt can install
/// from it: every version our pins raise to 1000 or more is in an index,
/// every dependency on a package the repository has is satisfied by a
/// version it has, and each pool file is named as its control says.
pub fn verify(root: &Path, keyring: &[u8], now: i64) -> VerifyReport {
    let mut listed = Vec::new();
    let mut r = verify_integrity(root, keyring, now, &mut listed);
    check_pins(root, &listed, &mut r);
    r
}

fn verify_integrity(
    root: &Path,
    keyring: &[u8],
    now: i64,
    listed: &mut Vec<Listed>,
) -> VerifyReport {
    let mut r = VerifyReport::default();
    let ring = match PinnedKeyring::all(keyring) {
        Ok(k) => Some(k),
        Err(e) => {
            r.problems.push(format!("keyring: {e}"));
            None
        }
    };
    let dists = root.join("dists");
    let mut suites: Vec<PathBuf> = match std::fs::read_dir(&dists) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect(),
        Err(e) => {
            r.problems.push(format!("{}: {e}", dists.display()));
            return r;
        }
    };
    suites.sort();
    for suite in suites {
        r.suites += 1;
        verify_suite(root, &suite, ring.as_ref(), now, &mut r, listed);
    }
    if r.suites == 0 {
        r.problems.push(format!("{}: no suite", dists.display()));
    }
    r
}

/// A path as a problem names it: relative to the repository root.
fn shown(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

/// Checks one suite: its signatures, its Release fields, and every index
/// its Release lists.
fn verify_suite(
    root: &Path,
    suite: &Path,
    ring: Option<&PinnedKeyring>,
    now: i64,
    r: &mut VerifyReport,
    listed: &mut Vec<Listed>,
) {
    let release_path = suite.join("Release");
    let Some(text) = release_text(root, suite, ring, r) else {
        return;
    };
    let text = String::from_utf8_lossy(&text).into_owned();
    let release = match Release::parse(&text) {
        Ok(rel) => rel,
        Err(e) => {
            r.problems
                .push(format!("{}: {e}", shown(root, &release_path)));
            return;
        }
    };
    check_release_fields(&release, &shown(root, &release_path), now, r);
    let by_hash = release.paragraph().get("Acquire-By-Hash") == Some("yes");
    let Ok(sha256) = release.files(HashAlgo::Sha256) else {
        return;
    };
    for f in sha256 {
        verify_index(root, suite, &release, &f, by_hash, r, listed);
    }
}

/// Checks the suite's signatures and returns the Release text to go on
/// with (verified where a signature holds), or `None` if there is none.
fn release_text(
    root: &Path,
    suite: &Path,
    ring: Option<&PinnedKeyring>,
    r: &mut VerifyReport,
) -> Option<Vec<u8>> {
    let show = |p: &Path| shown(root, p);
    let mut top = |name: &str| top_file(&suite.join(name), root, r);
    let release_bytes = top("Release");
    let inrelease = top("InRelease");
    let detached = top("Release.gpg");
    let mut text = verified_inrelease(
        root,
        suite,
        ring,
        inrelease.as_deref(),
        release_bytes.as_deref(),
        r,
    );
    match (&release_bytes, &detached, ring) {
        (Some(rel), Some(sig), Some(ring)) => match ring.verify_detached(rel, sig) {
            Ok(_) => {
                text.get_or_insert_with(|| rel.clone());
            }
            Err(e) => r
                .problems
                .push(format!("{}: {e}", show(&suite.join("Release.gpg")))),
        },
        (Some(_), None, _) => r.problems.push(format!(
            "{}: missing (Release is not signed)",
            show(&suite.join("Release.gpg"))
        )),
        (None, _, _) if inrelease.is_none() => {
            r.problems
                .push(format!("{}: no InRelease and no Release", show(suite)));
            return None;
        }
        _ => {}
    }
    // Go on with the unverified text, if that is all there is, to report the rest.
    text.or(release_bytes).or(inrelease.and_then(|i| {
        crate::format::clearsign::split(&String::from_utf8_lossy(&i))
            .ok()
            .map(|c| c.body.into_bytes())
    }))
}

/// A suite's Release, InRelease or Release.gpg, by type and bound (a
/// repository from a USB stick or a mirror may hold a FIFO or a link to a
/// device there); `None` where it is missing, or said to be unreadable.
fn top_file(path: &Path, root: &Path, r: &mut VerifyReport) -> Option<Vec<u8>> {
    match crate::input::read(path, crate::input::limit::RELEASE) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            r.problems.push(format!("{}: {e}", shown(root, path)));
            None
        }
    }
}

/// A file the Release or an index lists, opened by type (never waiting on
/// a FIFO) and read no further than one byte past the `size` listed: more
/// than that is a mismatch already.
fn open_listed(path: &Path, size: Option<u64>) -> std::io::Result<Box<dyn std::io::Read + Send>> {
    let file = crate::input::open_regular(path)?;
    Ok(match size {
        Some(size) => Box::new(file.take(size.saturating_add(1))),
        None => Box::new(file),
    })
}

/// Checks InRelease's signature and that its text is Release's; returns
/// its signed text if the signature holds.
fn verified_inrelease(
    root: &Path,
    suite: &Path,
    ring: Option<&PinnedKeyring>,
    inrelease: Option<&[u8]>,
    release_bytes: Option<&[u8]>,
    r: &mut VerifyReport,
) -> Option<Vec<u8>> {
    let (Some(ring), Some(msg)) = (ring, inrelease) else {
        return None;
    };
    match ring.verify_cleartext(msg) {
        Ok((body, _)) => {
            if let Some(rel) = release_bytes
                && *rel != *body
            {
                r.problems.push(format!(
                    "{}: its text differs from Release",
                    shown(root, &suite.join("InRelease"))
                ));
            }
            Some(body)
        }
        Err(e) => {
            r.problems
                .push(format!("{}: {e}", shown(root, &suite.join("InRelease"))));
            None
        }
    }
}

/// Checks the Release's hashes are strong, it has not expired, and its
/// Date is given and not in the future.
fn check_release_fields(release: &Release, shown_path: &str, now: i64, r: &mut VerifyReport) {
    if let Err(e) = release.require_strong_hashes() {
        r.problems.push(format!("{shown_path}: {e}"));
    }
    match release.valid_until() {
        Ok(Some(t)) if t < now => r
            .problems
            .push(format!("{shown_path}: expired (Valid-Until has passed)")),
        Err(e) => r.problems.push(format!("{shown_path}: {e}")),
        _ => {}
    }
    match release.date() {
        Ok(Some(t)) if t > now + 10 => r.problems.push(format!(
            "{shown_path}: Date is in the future; apt says \"not valid yet\""
        )),
        Ok(None) => r.problems.push(format!("{shown_path}: no Date field")),
        Err(e) => r.problems.push(format!("{shown_path}: {e}")),
        _ => {}
    }
}

/// Checks one index the Release lists: its size and hashes, its by-hash
/// copy, and, for a Packages index, the packages it lists.
fn verify_index(
    root: &Path,
    suite: &Path,
    release: &Release,
    f: &ReleaseFile,
    by_hash: bool,
    r: &mut VerifyReport,
    listed: &mut Vec<Listed>,
) {
    let show = |p: &Path| shown(root, p);
    let path = suite.join(&f.path);
    let entry = release.entry(&f.path).ok().flatten();
    let d = match open_listed(&path, Some(f.size)).and_then(digest_reader) {
        Ok(d) => d,
        Err(e) => {
            r.problems
                .push(format!("{}: listed in Release but {e}", show(&path)));
            return;
        }
    };
    r.indexes += 1;
    if d.size > f.size {
        // Read no further than a byte past the size listed: no digest of
        // the whole file to give.
        r.problems.push(format!(
            "{}: does not match Release (larger than the {} bytes it lists)",
            show(&path),
            f.size
        ));
        return;
    }
    if d.size != f.size
        || d.sha256 != f.digest
        || entry
            .as_ref()
            .and_then(|e| e.sha512.as_ref())
            .is_some_and(|h| Some(h) != d.sha512.as_ref())
    {
        r.problems.push(format!(
            "{}: does not match Release (size {} sha256 {}, Release says size {} sha256 {})",
            show(&path),
            d.size,
            d.sha256,
            f.size,
            f.digest
        ));
        return;
    }
    if by_hash {
        let copy = path
            .parent()
            .unwrap_or(suite)
            .join("by-hash/SHA256")
            .join(&d.sha256);
        if !copy.exists() {
            r.problems.push(format!(
                "{}: missing (Release says Acquire-By-Hash: yes)",
                show(&copy)
            ));
        }
    }
    check_compressed_form(root, &path, f, release, r);
    if f.path.ends_with("/Packages") {
        let mut in_index = Vec::new();
        verify_packages(root, &path, r, &mut in_index);
        in_index.shrink_to_fit();
        check_dependencies(&path, &in_index, r);
        listed.extend(in_index);
    }
}

/// A compressed index (`X.gz`, `X.xz`) whose plain form `X` the Release
/// lists too must decompress to it: apt reads one form and never compares
/// it with the others. Read with a bound (the plain form's size), so a
/// bomb stops at that size.
fn check_compressed_form(
    root: &Path,
    path: &Path,
    f: &ReleaseFile,
    release: &Release,
    r: &mut VerifyReport,
) {
    let Some((plain, compression)) = [(".gz", Compression::Gzip), (".xz", Compression::Xz)]
        .into_iter()
        .find_map(|(suffix, c)| f.path.strip_suffix(suffix).map(|p| (p, c)))
    else {
        return;
    };
    let Some(IndexEntry {
        size,
        sha256: Some(sha256),
        ..
    }) = release.entry(plain).ok().flatten()
    else {
        return;
    };
    let decompressed = crate::input::open_regular(path).and_then(|file| {
        let reader = compression.decoder(BufReader::new(file))?;
        digest_reader(reader.take(size + 1))
    });
    match decompressed {
        Ok(d) if d.size == size && d.sha256 == sha256 => {}
        Ok(d) => r.problems.push(format!(
            "{}: decompresses to other bytes than {plain} (size {}, sha256 {}; {plain} is size {size}, sha256 {sha256})",
            shown(root, path),
            d.size,
            d.sha256
        )),
        Err(e) => r.problems.push(format!(
            "{}: does not decompress: {e}",
            shown(root, path)
        )),
    }
}

/// Checks every package a Packages index lists, and adds each to `listed`.
fn verify_packages(root: &Path, index: &Path, r: &mut VerifyReport, listed: &mut Vec<Listed>) {
    let Ok(file) = crate::input::open_regular(index) else {
        return;
    };
    let index: std::sync::Arc<Path> = index.into();
    let index = &index;
    let reader = match Compression::None.decoder(BufReader::new(file)) {
        Ok(rd) => rd,
        Err(e) => {
            r.problems.push(format!("{}: {e}", shown(root, index)));
            return;
        }
    };
    for stanza in ParagraphReader::new(BufReader::new(reader)) {
        let stanza = match stanza {
            Ok(s) => s,
            Err(e) => {
                r.problems.push(format!("{}: {e}", shown(root, index)));
                return;
            }
        };
        r.packages += 1;
        verify_stanza(root, index, &stanza, r, listed);
    }
}

/// Checks one stanza of a Packages index: its file name, and that the
/// package file is there with the digests and control fields it gives.
fn verify_stanza(
    root: &Path,
    index: &std::sync::Arc<Path>,
    stanza: &ControlParagraph,
    r: &mut VerifyReport,
    listed: &mut Vec<Listed>,
) {
    let name = stanza.get("Package").unwrap_or("?").to_string();
    let Some(filename) = stanza.get("Filename") else {
        r.problems
            .push(format!("{}: {name} has no Filename", shown(root, index)));
        return;
    };
    let version = stanza.get("Version").unwrap_or_default().to_string();
    let arch = stanza.get("Architecture").unwrap_or_default();
    let expected = format!(
        "{name}_{}_{arch}.deb",
        version.split_once(':').map_or(version.as_str(), |(_, v)| v)
    );
    if filename.rsplit('/').next() != Some(expected.as_str()) {
        r.problems.push(format!(
            "{filename}: the file name does not match its control paragraph (expected {expected})"
        ));
    }
    listed.push(listed_of(index, stanza));
    let deb_path = root.join(filename);
    // Exactly the digests the stanza lists, on threads of their own.
    let set = DigestSet {
        md5: stanza.get("MD5sum").is_some(),
        sha1: stanza.get("SHA1").is_some(),
        sha512: stanza.get("SHA512").is_some(),
    };
    let size = stanza.get("Size").and_then(|s| s.parse().ok());
    let d = match open_listed(&deb_path, size).and_then(|f| digest_with(f, Hasher::parallel(set))) {
        Ok(d) => d,
        Err(e) => {
            r.problems.push(format!(
                "{filename}: listed for {name} in {} but {e}",
                shown(root, index)
            ));
            return;
        }
    };
    check_package_digests(filename, stanza, d, r);
    check_package_control(filename, &deb_path, stanza, r);
}

/// Checks the size and hashes a stanza gives against the package file's.
fn check_package_digests(
    filename: &str,
    stanza: &ControlParagraph,
    d: Digests,
    r: &mut VerifyReport,
) {
    if let Some(listed) = stanza.get("Size")
        && listed.parse::<u64>().is_ok_and(|listed| d.size > listed)
    {
        // Read no further than a byte past the size listed: no digest of
        // the whole file to give.
        r.problems.push(format!(
            "{filename}: larger than the {listed} bytes the index says"
        ));
        return;
    }
    let size = d.size.to_string();
    for field in ["Size", "MD5sum", "SHA1", "SHA256", "SHA512"] {
        let actual = match field {
            "Size" => &size,
            _ => d.by_field(field).unwrap_or_default(),
        };
        match stanza.get(field) {
            Some(v) if v.eq_ignore_ascii_case(actual) => {}
            Some(v) => r.problems.push(format!(
                "{filename}: {field} is {actual}, the index says {v}"
            )),
            None if field == "SHA256" || field == "Size" => r
                .problems
                .push(format!("{filename}: the index gives no {field}")),
            None => {}
        }
    }
}

/// Checks that every field of the package's control is in the stanza as is.
fn check_package_control(
    filename: &str,
    deb_path: &Path,
    stanza: &ControlParagraph,
    r: &mut VerifyReport,
) {
    match DebFile::open(deb_path).and_then(|deb| deb.control_files()) {
        Ok(c) => {
            for f in c.control.fields() {
                if stanza.get(f.name()) != Some(f.value()) {
                    r.problems.push(format!(
                        "{filename}: field {} in the index differs from the package's control",
                        f.name()
                    ));
                }
            }
        }
        Err(e) => r.problems.push(format!("{filename}: {e}")),
    }
}

/// What the installability checks need of a stanza.
fn listed_of(index: &std::sync::Arc<Path>, stanza: &ControlParagraph) -> Listed {
    let name = stanza.get("Package").unwrap_or("?");
    let version = stanza.get("Version").unwrap_or_default();
    Listed {
        index: std::sync::Arc::clone(index),
        text: [name, version].concat().into_boxed_str(),
        // A stanza is read with a bound far below 4 GiB.
        name_len: u32::try_from(name.len()).expect("a stanza is smaller than 4 GiB"),
        provides: stanza
            .field("Provides")
            .map(|p| {
                p.folded()
                    .split(',')
                    .filter_map(|e| e.split_whitespace().next().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// The checks of [`verify`] that say whether apt could install from the
/// repository at `root` — dependencies among its packages, a candidate
/// under its pins for each — without a signature check or hashing a
/// package: what `build` runs on its staged output before swapping it in,
/// so that it never writes a repository `verify` rejects. `packages`: how
/// many it wrote, at most what an index lists (room made once: grown by
/// doubling, then shrunk, the lists were the build's peak).
pub fn installability(root: &Path, packages: usize) -> Vec<String> {
    let mut r = VerifyReport::default();
    let mut listed = Vec::new();
    for index in package_indexes(root) {
        let Ok(file) = crate::input::open_regular(&index) else {
            continue;
        };
        let read = read_index(&index.into(), file, packages);
        r.problems.extend(read.problem);
        check_relating(&read.listed, &read.relating, &mut r);
        // The first index's list is taken as it is, not copied.
        if listed.is_empty() {
            listed = read.listed;
        } else {
            listed.extend(read.listed);
        }
    }
    check_pins(root, &listed, &mut r);
    r.problems
}

/// The plain `Packages` index of every suite under `root/dists/`, as each
/// suite's Release lists them (suites in name order).
pub(super) fn package_indexes(root: &Path) -> Vec<PathBuf> {
    let mut suites: Vec<PathBuf> = std::fs::read_dir(root.join("dists"))
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    suites.sort();
    let mut out = Vec::new();
    for suite in suites {
        let release = suite.join("Release");
        let Ok(text) = crate::input::read_to_string(&release, crate::input::limit::RELEASE) else {
            continue;
        };
        let Ok(files) = Release::parse(&text).and_then(|r| r.files(HashAlgo::Sha256)) else {
            continue;
        };
        out.extend(
            files
                .iter()
                .filter(|f| f.path.ends_with("/Packages"))
                .filter(|f| crate::format::path::check_relative(&f.path).is_ok())
                .map(|f| suite.join(&f.path)),
        );
    }
    out
}

/// Every Depends/Pre-Depends group that names a package this index has (by
/// name or Provides) must be satisfied by a version this index has: else apt
/// on a lab machine cannot install it from us. Here, of the packages
/// `index` lists with a Filename (`listed`, read from it: what `verify`
/// lists); the relations are read from the index again, a stanza at a
/// time, not held beside what `verify` holds of every stanza.
fn check_dependencies(index: &Path, listed: &[Listed], r: &mut VerifyReport) {
    let known = Known::new(listed);
    let Ok(file) = crate::input::open_regular(index) else {
        return;
    };
    // A stanza that does not read was reported when `listed` was read.
    for stanza in ParagraphReader::new(BufReader::new(file)).map_while(Result::ok) {
        if !stanza.contains("Filename") {
            continue; // not in `listed`: reported for its missing Filename
        }
        let who = Who::of(&stanza);
        for field in ["Pre-Depends", "Depends"] {
            if let Some(text) = stanza.field(field).map(|f| f.folded()) {
                known.check(&who, field, &text, r);
            }
        }
    }
}

/// One index as the build's check reads it, once ([`installability`]):
/// what each stanza lists, the relations of each that has any, and the
/// problem of a stanza that does not read (the reading stops there).
struct IndexRead {
    listed: Vec<Listed>,
    relating: Vec<Relating>,
    problem: Option<String>,
}

/// `room`: the stanzas it may have.
fn read_index(index: &std::sync::Arc<Path>, file: impl std::io::Read, room: usize) -> IndexRead {
    let mut read = IndexRead {
        listed: Vec::with_capacity(room),
        // Nearly every stanza of a real index relates (Depends); shrunk
        // after, where fewer did.
        relating: Vec::with_capacity(room),
        problem: None,
    };
    for stanza in ParagraphReader::new(BufReader::new(file)) {
        match stanza {
            Ok(s) => {
                let at = read.listed.len() as u32;
                read.relating.extend(Relating::of(at, &s));
                read.listed.push(listed_of(index, &s));
            }
            Err(e) => {
                read.problem = Some(format!("{}: {e}", index.display()));
                break;
            }
        }
    }
    read.listed.shrink_to_fit();
    read.relating.shrink_to_fit();
    read
}

/// The relations of one stanza of an index, kept from the one reading of
/// the build's check ([`installability`]): of every stanza that has any.
/// Compact (held for every package at the check's peak): both fields in
/// one allocation; no Filename, which only a problem needs (read again
/// then, [`Filename::At`]). An empty field checks as an absent one: it
/// names nothing.
struct Relating {
    /// The stanza's position in the index (in what it lists).
    at: u32,
    /// Where `Depends` begins in `text`, after `Pre-Depends`.
    split: u32,
    text: Box<str>,
}

impl Relating {
    fn of(at: u32, stanza: &ControlParagraph) -> Option<Relating> {
        let field = |name| stanza.field(name).map(|f| f.folded());
        let (pre_depends, depends) = (field("Pre-Depends"), field("Depends"));
        if pre_depends.is_none() && depends.is_none() {
            return None;
        }
        let (pre_depends, depends) = (pre_depends.unwrap_or_default(), depends.unwrap_or_default());
        Some(Relating {
            at,
            split: u32::try_from(pre_depends.len()).expect("a stanza is smaller than 4 GiB"),
            text: [pre_depends, depends].concat().into_boxed_str(),
        })
    }

    fn fields(&self) -> [(&'static str, &str); 2] {
        let (pre_depends, depends) = self.text.split_at(self.split as usize);
        [("Pre-Depends", pre_depends), ("Depends", depends)]
    }
}

/// [`check_dependencies`] of every stanza of an index (the build's own
/// check), from what one reading of it kept: `listed` of every stanza,
/// `relating` of those with relations.
fn check_relating(listed: &[Listed], relating: &[Relating], r: &mut VerifyReport) {
    let filenames = std::cell::RefCell::new(FilenameCursor::default());
    check_relating_with(listed, relating, r, &filenames);
}

/// [`check_relating`], the problems' Filenames read through `filenames`.
fn check_relating_with(
    listed: &[Listed],
    relating: &[Relating],
    r: &mut VerifyReport,
    filenames: &std::cell::RefCell<FilenameCursor>,
) {
    let known = Known::new(listed);
    for rel in relating {
        let l = &listed[rel.at as usize];
        let who = Who {
            filename: Filename::At {
                index: &l.index,
                at: rel.at,
                cursor: filenames,
            },
            package: l.name(),
            version: l.version(),
        };
        for (field, text) in rel.fields().into_iter().filter(|(_, t)| !t.is_empty()) {
            known.check(&who, field, text, r);
        }
    }
}

/// The stanza a problem is said of.
struct Who<'a> {
    filename: Filename<'a>,
    package: &'a str,
    version: &'a str,
}

impl<'a> Who<'a> {
    fn of(stanza: &'a ControlParagraph) -> Who<'a> {
        Who {
            filename: Filename::Known(stanza.get("Filename").unwrap_or_default()),
            package: stanza.get("Package").unwrap_or("?"),
            version: stanza.get("Version").unwrap_or_default(),
        }
    }
}

/// A stanza's Filename, as read, or where to read it again.
enum Filename<'a> {
    Known(&'a str),
    /// The stanza at position `at` of `index`, read through `cursor`.
    At {
        index: &'a Path,
        at: u32,
        cursor: &'a std::cell::RefCell<FilenameCursor>,
    },
}

impl std::fmt::Display for Filename<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Filename::Known(name) => f.write_str(name),
            Filename::At { index, at, cursor } => {
                f.write_str(&cursor.borrow_mut().filename(index, *at))
            }
        }
    }
}

/// Reads an index forward for the Filenames its problems are said of: they
/// are said in index order, so the index is read again once, however many
/// problems it has (read from its start for each, thousands of problems
/// took minutes).
#[derive(Default)]
struct FilenameCursor {
    reading: Option<(PathBuf, ParagraphReader<BufReader<std::fs::File>>)>,
    /// The position of the stanza `reading` gives next.
    next: u32,
    /// The last stanza's position and Filename (a stanza may have several
    /// problems).
    last: Option<(u32, String)>,
    /// Times an index was opened (for the tests).
    opened: u32,
}

impl FilenameCursor {
    /// The Filename of the stanza at `at` in `index` (empty where it has
    /// none or cannot be read again).
    fn filename(&mut self, index: &Path, at: u32) -> String {
        let same_index = self.reading.as_ref().is_some_and(|(p, _)| p == index);
        if same_index
            && let Some((p, f)) = &self.last
            && *p == at
        {
            return f.clone();
        }
        if !same_index || at < self.next {
            self.last = None;
            self.next = 0;
            self.opened += 1;
            self.reading = crate::input::open_regular(index)
                .ok()
                .map(|f| (index.to_path_buf(), ParagraphReader::new(BufReader::new(f))));
        }
        let Some((_, stanzas)) = &mut self.reading else {
            return String::new();
        };
        while self.next <= at {
            let stanza = stanzas.next();
            self.next += 1;
            match stanza {
                Some(Ok(s)) if self.next - 1 == at => {
                    let filename = s.get("Filename").unwrap_or_default().to_string();
                    self.last = Some((at, filename.clone()));
                    return filename;
                }
                Some(Ok(_)) => {}
                _ => break,
            }
        }
        String::new()
    }
}

/// Listed packages by name: their positions sorted by name, then position
/// (4 bytes a package, where a map of names to lists was about 80).
struct ByName<'a> {
    order: Vec<u32>,
    listed: &'a [Listed],
}

impl<'a> ByName<'a> {
    fn new(listed: &'a [Listed]) -> ByName<'a> {
        let mut order: Vec<u32> = (0..listed.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| {
            (listed[a as usize].name(), a).cmp(&(listed[b as usize].name(), b))
        });
        ByName { order, listed }
    }

    /// The positions in `listed` of the packages named `name`.
    fn range(&self, name: &str) -> &[u32] {
        let from = self
            .order
            .partition_point(|&i| self.listed[i as usize].name() < name);
        let len = self.order[from..]
            .iter()
            .take_while(|&&i| self.listed[i as usize].name() == name)
            .count();
        &self.order[from..from + len]
    }

    /// The packages named `name`, in the order they are listed.
    fn named<'s>(&'s self, name: &str) -> impl Iterator<Item = &'a Listed> + 's {
        self.range(name).iter().map(|&i| &self.listed[i as usize])
    }

    /// Each name, in name order, with its packages in the order listed.
    fn groups(&self) -> impl Iterator<Item = (&'a str, Vec<&'a Listed>)> + '_ {
        let listed = self.listed;
        self.order
            .chunk_by(move |&a, &b| listed[a as usize].name() == listed[b as usize].name())
            .map(move |run| {
                let of_name: Vec<&Listed> = run.iter().map(|&i| &listed[i as usize]).collect();
                (of_name[0].name(), of_name)
            })
    }
}

/// What one index lists, by name, for [`check_dependencies`].
struct Known<'a> {
    by_name: ByName<'a>,
    provided: std::collections::HashSet<&'a str>,
}

impl<'a> Known<'a> {
    /// By name ([`ByName`]), versions parsed only where a relation names
    /// them.
    fn new(listed: &'a [Listed]) -> Known<'a> {
        let provided = listed
            .iter()
            .flat_map(|l| l.provides.iter().map(String::as_str))
            .collect();
        Known {
            by_name: ByName::new(listed),
            provided,
        }
    }

    /// The packages named `name`.
    fn named<'s>(&'s self, name: &str) -> impl Iterator<Item = &'a Listed> + 's {
        self.by_name.named(name)
    }

    /// The positions of the packages with any of `names`, in index order.
    fn positions<'s>(&self, names: impl Iterator<Item = &'s str>) -> Vec<usize> {
        let mut at: Vec<usize> = names
            .flat_map(|name| self.by_name.range(name).iter().map(|&i| i as usize))
            .collect();
        at.sort_unstable();
        at.dedup();
        at
    }

    fn ours(&self, name: &str) -> bool {
        self.named(name).next().is_some() || self.provided.contains(name)
    }

    /// Checks one relation field of one stanza.
    fn check(&self, who: &Who<'_>, field: &str, text: &str, r: &mut VerifyReport) {
        use crate::format::relation::Relations;
        use crate::format::version::Version;
        // Most relations name only other repositories' packages (libc6):
        // those are not parsed.
        if !Relations::names(text).any(|name| self.ours(name)) {
            return;
        }
        let Ok(relations) = Relations::parse(text) else {
            return; // the control checks report syntax
        };
        for group in &relations.0 {
            if !group.0.iter().any(|rel| self.ours(&rel.name)) {
                continue; // another repository's business
            }
            let satisfied = group.0.iter().any(|rel| {
                self.named(&rel.name).any(|l| {
                    Version::parse_lenient(l.version())
                        .is_ok_and(|(v, _)| rel.matches(&rel.name, &v))
                }) || (rel.constraint.is_none() && self.provided.contains(rel.name.as_str()))
            });
            if !satisfied {
                let have: Vec<String> = self
                    .positions(group.0.iter().map(|rel| rel.name.as_str()))
                    .into_iter()
                    .map(|i| &self.by_name.listed[i])
                    .map(|o| format!("{} {}", o.name(), o.version()))
                    .collect();
                let group_text: Vec<String> = group.0.iter().map(|rel| rel.to_string()).collect();
                r.problems.push(format!(
                    "{}: {} {} {field}: {}, which no package in this repository satisfies (it has {}); apt cannot install it",
                    who.filename,
                    who.package,
                    who.version,
                    group_text.join(" | "),
                    have.join(", ")
                ));
            }
        }
    }
}

/// Under our pins apt must find a candidate for every package we list, and
/// a pin of 1000 or more on an exact version must name one we list.
fn check_pins(root: &Path, listed: &[Listed], r: &mut VerifyReport) {
    let path = root.join(super::PREFERENCES_NAME);
    let text = match crate::input::read_to_string(&path, crate::input::limit::PREFERENCES) {
        Ok(text) => text,
        // A repository need not ship pins.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => {
            r.problems.push(format!("{}: {e}", super::PREFERENCES_NAME));
            return;
        }
    };
    let prefs = match Preferences::parse(&text) {
        Ok(p) => p,
        Err(e) => {
            r.problems.push(format!("{}: {e}", super::PREFERENCES_NAME));
            return;
        }
    };
    // By name once: thousands of pins are checked against thousands of
    // packages.
    let by_name = ByName::new(listed);
    check_version_pins(&prefs, &by_name, r);
    check_release_pins(&prefs, &by_name, r);
    check_candidates(&prefs, &by_name, r);
}

/// The versions of `name` that the indexes list.
fn versions_of<'a>(listed: &ByName<'a>, name: &str) -> Vec<&'a str> {
    listed.named(name).map(Listed::version).collect()
}

/// Reports each pin of 1000 or more on an exact version that no index lists.
fn check_version_pins(prefs: &Preferences, listed: &ByName, r: &mut VerifyReport) {
    for rec in &prefs.records {
        let Pin::Version(version) = &rec.pin else {
            continue;
        };
        if rec.priority < 1000 || version.contains(['*', '?']) {
            continue;
        }
        for name in &rec.packages {
            if !versions_of(listed, name).contains(&version.as_str()) {
                let have = versions_of(listed, name);
                r.problems.push(format!(
                    "{}: pins {name} to {version} (priority {}), which no index lists (it has {}); apt would find no candidate",
                    super::PREFERENCES_NAME,
                    rec.priority,
                    if have.is_empty() { "none".to_string() } else { have.join(", ") }
                ));
            }
        }
    }
}

/// Reports each pin of 1000 or more to this repository on a package it
/// does not list.
fn check_release_pins(prefs: &Preferences, listed: &ByName, r: &mut VerifyReport) {
    for rec in &prefs.records {
        if rec.priority < 1000 || !matches!(rec.pin, Pin::Release(_)) {
            continue;
        }
        for name in rec.packages.iter().filter(|n| !n.contains(['*', '?'])) {
            if versions_of(listed, name).is_empty() {
                r.problems.push(format!(
                    "{}: pins {name} to this repository (priority {}), which lists no {name}; apt would find no candidate",
                    super::PREFERENCES_NAME,
                    rec.priority
                ));
            }
        }
    }
}

/// Reports each package we list for which the pins leave apt no candidate.
fn check_candidates(prefs: &Preferences, listed: &ByName, r: &mut VerifyReport) {
    // Each index's Release, read where a pin may name one of its packages.
    let mut releases = std::collections::BTreeMap::new();
    let parses = |l: &&Listed| crate::format::version::Version::parse_lenient(l.version()).is_ok();
    for (name, of_name) in listed.groups() {
        // No pin names it: a version that parses is its candidate (what
        // `candidate` says for offers all at the index's priority), with no
        // offer made for each of thousands of packages.
        if !prefs.may_name(name) && of_name.iter().any(parses) {
            continue;
        }
        let offers: Vec<Offer> = of_name
            .iter()
            .filter_map(|l| {
                Some(Offer {
                    version: crate::format::version::Version::parse_lenient(l.version())
                        .ok()?
                        .0,
                    index_priority: 500,
                    release: releases
                        .entry(l.index.clone())
                        .or_insert_with(|| super::policy::release_of(&l.index))
                        .clone(),
                })
            })
            .collect();
        let (best, table) = candidate(prefs, name, &offers);
        if best.is_none() {
            r.problems.push(format!(
                "{}: leaves apt no candidate for {name} (this repository has {}); apt would refuse to install it",
                super::PREFERENCES_NAME,
                table
                    .iter()
                    .map(|(v, p)| format!("{v} at priority {p}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `verify` lists of an index, as `verify_stanza` would.
    fn listed(index: &std::sync::Arc<Path>, text: &str) -> Vec<Listed> {
        crate::format::deb822::Document::parse(text)
            .unwrap()
            .paragraphs()
            .filter(|p| p.contains("Filename"))
            .map(|p| listed_of(index, p))
            .collect()
    }

    /// Thousands of problems, several on one stanza: each names its own
    /// stanza's Filename, and the index is read again once for all of them.
    #[test]
    fn many_problems_read_the_index_again_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("Packages");
        let mut text = String::from("Package: a\nVersion: 1\nFilename: pool/a.deb\n\n");
        for n in 0..3000 {
            // Every third stanza has no Filename; each has two problems.
            let filename = if n % 3 == 0 {
                String::new()
            } else {
                format!("Filename: pool/p{n}.deb\n")
            };
            text.push_str(&format!(
                "Package: p{n}\nVersion: 1\n{filename}Pre-Depends: a (>= 3)\nDepends: a (>= 2)\n\n"
            ));
        }
        std::fs::write(&path, &text).unwrap();
        let index: std::sync::Arc<Path> = path.as_path().into();
        let read = read_index(&index, text.as_bytes(), 0);
        let (mut r, filenames) = (VerifyReport::default(), Default::default());
        check_relating_with(&read.listed, &read.relating, &mut r, &filenames);
        assert_eq!(r.problems.len(), 6000);
        for (i, p) in r.problems.iter().enumerate() {
            let n = i / 2;
            let filename = if n % 3 == 0 {
                String::new()
            } else {
                format!("pool/p{n}.deb")
            };
            let field = if i % 2 == 0 {
                "Pre-Depends: a (>= 3)"
            } else {
                "Depends: a (>= 2)"
            };
            assert!(
                p.starts_with(&format!("{filename}: p{n} 1 {field}, ")),
                "{p}"
            );
        }
        assert_eq!(filenames.borrow().opened, 1);
    }

    /// A relation nothing satisfies names what the index has in index
    /// order; `verify` checks only the stanzas it lists (those with a
    /// Filename), the build's check every stanza.
    #[test]
    fn unsatisfied_relations_name_what_the_index_has_in_its_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("Packages");
        let text = "Package: b\nVersion: 1\nFilename: pool/b_1_all.deb\n\n\
                    Package: a\nVersion: 1\nFilename: pool/a_1_all.deb\n\n\
                    Package: b\nVersion: 0.5\nFilename: pool/b_0.5_all.deb\n\n\
                    Package: c\nVersion: 1\nFilename: pool/c_1_all.deb\nDepends: a (>= 2) | b (>= 2), b\n\n\
                    Package: d\nVersion: 1\nDepends: a (>= 2)\n";
        std::fs::write(&path, text).unwrap();
        let index: std::sync::Arc<Path> = path.as_path().into();
        let listed = listed(&index, text);
        let mut r = VerifyReport::default();
        check_dependencies(&path, &listed, &mut r);
        let c = "pool/c_1_all.deb: c 1 Depends: a (>= 2) | b (>= 2), which no package in this repository satisfies (it has b 1, a 1, b 0.5); apt cannot install it";
        assert_eq!(r.problems, [c]);
        // The build's check: every stanza, from what one reading kept.
        let read = read_index(&index, text.as_bytes(), 0);
        assert!(read.problem.is_none());
        assert_eq!(read.listed.len(), 5);
        assert_eq!(read.relating.len(), 2);
        let mut r = VerifyReport::default();
        check_relating(&read.listed, &read.relating, &mut r);
        assert_eq!(r.problems.len(), 2, "{:?}", r.problems);
        assert_eq!(r.problems[0], c);
        assert!(r.problems[1].starts_with(": d 1 Depends: a (>= 2), which no package"));
        // A stanza that does not read ends the reading: what came before it
        // is still checked, and each relation names its own stanza.
        let torn = "Package: b\nVersion: 1\n\n\
                    Package: a\nVersion: 1\nFilename: pool/a_1_all.deb\nDepends: b (>= 2)\n\n\
                    not a field\n\n\
                    Package: c\nVersion: 1\nDepends: b (>= 3)\n";
        // (A problem's Filename is read from the index again.)
        std::fs::write(&path, torn).unwrap();
        let read = read_index(&index, torn.as_bytes(), 9);
        assert!(read.problem.is_some());
        assert_eq!(read.listed.len(), 2);
        let mut r = VerifyReport::default();
        check_relating(&read.listed, &read.relating, &mut r);
        assert_eq!(
            r.problems,
            [
                "pool/a_1_all.deb: a 1 Depends: b (>= 2), which no package in this repository satisfies (it has b 1); apt cannot install it"
            ]
        );
    }
}
