//! Repository history: each build that changes what lab machines would get
//! (a package, a pin, a signing key) records a generation, a small JSON
//! manifest in `.<out>.generations/NNNNNN.json` beside the output. The
//! directory is append-only: a manifest is written once (temporary name,
//! then rename) and never changed. A rebuild that only re-dates the Release
//! records nothing.

use crate::error::FileError;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::pool::DigestStore;
use super::{PoolEntry, RepoError};
use crate::openpgp::sign::SigningKey;
use crate::report::Reporter;

/// One generation of the repository. Its packages are a list it owns when
/// read; a build records its new generation from the report's own list
/// (`Generation<&[PoolEntry]>`: a copy was every package's strings again
/// while the build settled).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Generation<P = Vec<PoolEntry>> {
    pub number: u32,
    /// The Release's `Date`, seconds since the epoch.
    pub date: i64,
    /// SHA256 of `dists/<suite>/Release`.
    pub release_sha256: String,
    pub packages: P,
    /// SHA256 of the lock file the build used (empty without one).
    pub lock_sha256: String,
    /// Fingerprints of the keys that signed it.
    pub keys: Vec<String>,
    /// SHA256 of the pins (`debforge.pref`).
    pub pins_sha256: String,
    /// The pins themselves, published again with this generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pins: Option<String>,
    /// The Release fields this generation was written with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<super::RepoConfig>,
    /// Its index files (kept in [`indexes_dir`] under their SHA256), so it
    /// is published again without writing and compressing them anew.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub indexes: Vec<KeptIndex>,
    /// How its compressed indexes were made ([`crate::deb::INDEX_FORMS`]):
    /// a build reuses them only where it would make the same bytes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub forms: String,
}

/// One index file of a generation: its path under `dists/<suite>/` and its
/// digests (all four, as the Release lists them).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeptIndex {
    pub path: String,
    pub digests: crate::digest::Digests,
}

/// How this debforge compresses indexes: what a generation records.
pub use crate::deb::INDEX_FORMS;

/// Where the generations' index files are kept, by SHA256: written once,
/// never changed (the same indexes in two generations are one file).
pub fn indexes_dir(out: &Path) -> PathBuf {
    dir_of(out).join("indexes")
}

/// Keeps the index files `files` (paths under `dists/<suite>/` of the
/// output `out`) in [`indexes_dir`]: copied, not linked (a link would change
/// the output files' ctime, which the output's stamp watches). Each must be
/// what the output's Release lists (a build that swapped in meanwhile makes
/// them disagree). Best effort: with any problem nothing is kept, and the
/// generation is published again by writing its indexes anew. Returns what
/// a generation records of them.
pub fn keep_indexes(out: &Path, suite: &str, index: &super::IndexReport) -> Vec<KeptIndex> {
    let kept = try_keep_indexes(out, suite, &index.files).unwrap_or_default();
    keep_piece_maps(out, &kept, index);
    kept
}

fn try_keep_indexes(out: &Path, suite: &str, files: &[String]) -> Option<Vec<KeptIndex>> {
    let dist = out.join("dists").join(suite);
    // The Release just written gives each index's four digests: the copy
    // is checked against its SHA256 and size, not hashed four times again.
    let listed = super::in_place::release_files(&dist.join("Release"))?;
    let store = indexes_dir(out);
    fs::create_dir_all(&store).ok()?;
    let mut kept = Vec::with_capacity(files.len());
    for rel in files {
        let (_, digests) = listed.iter().find(|(path, _)| path == rel)?;
        // Copied and hashed in one streamed pass (an index may be large).
        let mut src = crate::input::open_regular(&dist.join(rel)).ok()?;
        let tmp = tempfile::NamedTempFile::new_in(&store).ok()?;
        let mut w = crate::digest::HashingWriter::new(
            tmp,
            crate::digest::Hasher::new(crate::digest::DigestSet::SHA256),
        );
        std::io::copy(&mut src, &mut w).ok()?;
        let (tmp, copied) = w.finish();
        if (copied.sha256.as_str(), copied.size) != (digests.sha256.as_str(), digests.size) {
            return None;
        }
        let dest = store.join(&digests.sha256);
        if !dest.is_file() {
            // Written once: an existing file of that name has these bytes.
            use std::os::unix::fs::PermissionsExt;
            tmp.as_file()
                .set_permissions(fs::Permissions::from_mode(0o644))
                .ok()?;
            tmp.as_file().sync_all().ok()?;
            tmp.persist_noclobber(&dest).ok()?;
        }
        kept.push(KeptIndex {
            path: rel.clone(),
            digests: digests.clone(),
        });
    }
    Some(kept)
}

/// [`kept_pieces_of`] a generation read whole: the old reading, which the
/// tests hold [`earlier`] to.
#[cfg(test)]
pub fn kept_pieces(out: &Path, g: &Generation) -> super::KeptPieces {
    kept_pieces_of(out, &g.forms, &g.indexes)
}

/// The compressed pieces a generation's kept `indexes` hold, by the SHA256
/// of their plain bytes ([`super::pieces`]): what a build copies instead of
/// compressing again. Only from maps written by a debforge that compresses
/// as this one does (`forms`), each of whose two forms the generation kept
/// (a wrong map costs nothing but time: a piece is copied only where the
/// digests its record keeps of its forms hold; an older map has none, and
/// its pieces are compressed anew).
fn kept_pieces_of(out: &Path, forms: &str, indexes: &[KeptIndex]) -> super::KeptPieces {
    use crate::format::path::is_hex_digest;
    let mut kept = super::KeptPieces::default();
    if forms != INDEX_FORMS {
        return kept;
    }
    let store = indexes_dir(out);
    for k in indexes.iter().filter(|k| k.path.ends_with(".xz")) {
        let listed =
            |sha: &str| is_hex_digest(sha, 64) && indexes.iter().any(|i| i.digests.sha256 == sha);
        let path = store.join(format!("{}.pieces", k.digests.sha256));
        let Ok(text) = crate::input::read_to_string(&path, crate::input::limit::PIECE_MAP) else {
            continue;
        };
        let Ok(map) = serde_json::from_str::<super::PieceMap>(&text) else {
            continue;
        };
        if map.forms == INDEX_FORMS
            && map.xz_sha256 == k.digests.sha256
            && listed(&map.xz_sha256)
            && listed(&map.gz_sha256)
        {
            let (xz, gz) = (store.join(&map.xz_sha256), store.join(&map.gz_sha256));
            kept.add(map, &xz, &gz);
        }
    }
    kept
}

/// Keeps each piece map of `index` whose two forms were kept, beside them
/// as `<xz sha256>.pieces` (best effort, like the forms). The same forms
/// have the same map, left as it is; one an older debforge wrote of them
/// (without the digests of each piece's forms) is replaced.
fn keep_piece_maps(out: &Path, kept: &[KeptIndex], index: &super::IndexReport) {
    let store = indexes_dir(out);
    let is_kept = |sha: &str| kept.iter().any(|k| k.digests.sha256 == sha);
    for map in &index.pieces {
        let path = store.join(format!("{}.pieces", map.xz_sha256));
        if !is_kept(&map.xz_sha256) || !is_kept(&map.gz_sha256) {
            continue;
        }
        let Ok(json) = serde_json::to_vec(map) else {
            continue;
        };
        let old = crate::input::read(&path, crate::input::limit::PIECE_MAP);
        if old.is_ok_and(|old| old == json) {
            continue;
        }
        let _ = crate::files::write_atomic(&path, &json, crate::files::Existing::Replace);
    }
}

/// The kept index files of `g` with their digests, each checked (size and
/// SHA256) against the manifest; `None` when any is missing or differs (an
/// older debforge kept none): the indexes are then written anew.
fn kept_indexes(
    out: &Path,
    g: &Generation,
) -> Option<Vec<(String, PathBuf, crate::digest::Digests)>> {
    if g.indexes.is_empty() {
        return None;
    }
    let store = indexes_dir(out);
    g.indexes
        .iter()
        .map(|k| {
            crate::format::path::check_relative(&k.path).ok()?;
            if !crate::format::path::is_hex_digest(&k.digests.sha256, 64) {
                return None;
            }
            let file = store.join(&k.digests.sha256);
            // Every digest from the bytes themselves (the Release lists all
            // four), streamed, checked against what the manifest recorded.
            let d = crate::input::open_regular(&file)
                .and_then(crate::digest::digest_reader)
                .ok()?;
            (d.size == k.digests.size && d.sha256 == k.digests.sha256)
                .then(|| (k.path.clone(), file, d))
        })
        .collect()
}

impl<P: std::ops::Deref<Target = [PoolEntry]>> Generation<P> {
    /// What decides whether a build is a new generation: everything but the
    /// number, the date and the Release's digest (a re-dated Release).
    fn same_content(&self, other: &Generation<impl std::ops::Deref<Target = [PoolEntry]>>) -> bool {
        *self.packages == *other.packages
            && self.keys == other.keys
            && self.pins_sha256 == other.pins_sha256
    }

    /// [`Generation::same_content`]'s fields as one digest.
    fn content_key(&self) -> String {
        let mut key = ContentKey::default();
        for p in self.packages.iter() {
            key.package(
                [
                    p.package(),
                    p.version(),
                    p.architecture(),
                    p.filename(),
                    p.sha256(),
                ],
                p.size,
            );
        }
        key.finish(&self.keys, &self.pins_sha256)
    }
}

/// A digest of what [`Generation::same_content`] compares, each string
/// after its length (no two contents give the same bytes).
#[derive(Default)]
struct ContentKey(crate::digest::KeyHasher);

impl ContentKey {
    fn part(&mut self, text: &str) {
        self.0.update((text.len() as u64).to_le_bytes());
        self.0.update(text);
    }

    fn package(&mut self, fields: [&str; 5], size: u64) {
        self.0.update(b"p");
        fields.into_iter().for_each(|f| self.part(f));
        self.0.update(size.to_le_bytes());
    }

    fn finish(mut self, keys: &[impl AsRef<str>], pins_sha256: &str) -> String {
        self.0.update(b"k");
        self.0.update((keys.len() as u64).to_le_bytes());
        keys.iter().for_each(|k| self.part(k.as_ref()));
        self.part(pins_sha256);
        self.0.finish_hex()
    }
}

/// What [`earlier`] reads: the pool files (path, SHA256) the earlier
/// generations keep, the last one's compressed index pieces, and the last
/// one as read.
pub type Earlier = (Vec<(String, String)>, super::KeptPieces, Option<LastRead>);

/// The last generation as [`earlier`] read it: what [`record_after`] needs
/// to tell a build that made it again, without reading it a second time.
#[derive(Debug, Clone)]
pub struct LastRead {
    number: u32,
    /// Its manifest's (manifests are written once, never changed).
    identity: crate::files::FileIdentity,
    /// [`Generation::content_key`].
    content: String,
}

/// The generations directory of the output `out`.
pub fn dir_of(out: &Path) -> PathBuf {
    crate::files::beside(out, "generations")
}

/// Every recorded generation, oldest first. Unreadable manifests are
/// reported, not skipped: history is not to be guessed.
pub fn list(out: &Path) -> Result<Vec<Generation>, RepoError> {
    last(out, usize::MAX)
}

/// The last `count` recorded generations, oldest first: only their
/// manifests are read (a build needs the last one or few; the history of a
/// busy lab is hundreds, each listing every package).
pub fn last(out: &Path, count: usize) -> Result<Vec<Generation>, RepoError> {
    let mut all = Vec::new();
    each_of_last(out, count, |g| all.push(g))?;
    Ok(all)
}

/// [`last`], each generation handed to `f` as it is read, oldest first:
/// one manifest held at a time.
pub fn each_of_last(
    out: &Path,
    count: usize,
    mut f: impl FnMut(Generation),
) -> Result<(), RepoError> {
    let files = manifests(out)?;
    let skip = files.len().saturating_sub(count);
    for (number, path) in &files[skip..] {
        let g = read(path)?;
        // The file's name orders the history: a manifest copied under
        // another number would make `record` reuse one.
        if g.number != *number {
            return Err(RepoError::BadGeneration {
                path: path.clone(),
                reason: format!("it says generation {}, its name {number}", g.number),
            });
        }
        f(g);
    }
    Ok(())
}

/// What [`earlier`] reads of one manifest, kept beside it (`pools/NNNNNN`,
/// [`crate::files::write_cache`]) under the manifest's identity: a manifest
/// lists every package as pretty JSON, and a build keeping five generations
/// parsed four of them (a tenth of a build that changes one package of
/// 5,000). Made when the manifest is written, or the first time one is read
/// without it (a manifest of an older debforge); one whose manifest is not
/// the file it was made from is made again.
#[derive(serde::Serialize, serde::Deserialize)]
struct Summary {
    /// The manifest's identity when it was made from it.
    manifest: Option<crate::files::FileIdentity>,
    number: u32,
    /// Its packages' pool files: name and SHA256.
    files: Vec<(String, String)>,
    /// [`Generation::content_key`].
    content: String,
    forms: String,
    /// Its index files: path and SHA256 (what [`kept_pieces_of`] reads).
    indexes: Vec<(String, String)>,
}

const SUMMARY_MAGIC: &[u8; 8] = b"dfpools\0";
/// 2: with a CRC-32 ([`crate::files::write_cache`]).
const SUMMARY_VERSION: u32 = 2;

impl Summary {
    fn path(out: &Path, number: u32) -> PathBuf {
        dir_of(out).join("pools").join(format!("{number:06}"))
    }

    /// Generation `number`'s, while its manifest is still `manifest`.
    fn read(out: &Path, number: u32, manifest: crate::files::FileIdentity) -> Option<Summary> {
        let bytes = crate::input::read_cache(
            &Summary::path(out, number),
            crate::input::limit::MANIFEST,
            SUMMARY_MAGIC,
            SUMMARY_VERSION,
        )?;
        postcard::from_bytes::<Summary>(&bytes)
            .ok()
            .filter(|s| s.number == number && s.manifest == Some(manifest))
    }

    /// Kept for generation `g`, whose manifest's identity is `manifest`:
    /// written from `g` itself (a copy of every pool file's name and
    /// SHA256 was megabytes beside it while the build settled), in
    /// [`Summary`]'s shape.
    fn write_of(
        out: &Path,
        g: &Generation<impl std::ops::Deref<Target = [PoolEntry]>>,
        manifest: crate::files::FileIdentity,
    ) {
        #[derive(serde::Serialize)]
        struct Of<'g> {
            manifest: Option<crate::files::FileIdentity>,
            number: u32,
            files: Pairs<'g, PoolEntry>,
            content: String,
            forms: &'g str,
            indexes: Pairs<'g, KeptIndex>,
        }
        /// A sequence of two strings of each item, as `Vec<(String,
        /// String)>` is written.
        struct Pairs<'g, T>(&'g [T], fn(&T) -> (&str, &str));
        impl<T> serde::Serialize for Pairs<'_, T> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq(self.0.iter().map(self.1))
            }
        }
        let of = Of {
            manifest: Some(manifest),
            number: g.number,
            files: Pairs(&g.packages, |p| (p.filename(), p.sha256())),
            content: g.content_key(),
            forms: &g.forms,
            indexes: Pairs(&g.indexes, |k| (&k.path, &k.digests.sha256)),
        };
        let _ = crate::files::write_cache(
            &Summary::path(out, g.number),
            SUMMARY_MAGIC,
            SUMMARY_VERSION,
            &of,
        );
    }

    /// Its index files as [`kept_pieces_of`] reads them.
    fn kept_indexes(&self) -> Vec<KeptIndex> {
        self.indexes
            .iter()
            .map(|(path, sha256)| KeptIndex {
                path: path.clone(),
                digests: crate::digest::Digests {
                    sha256: sha256.clone(),
                    ..Default::default()
                },
            })
            .collect()
    }

    /// Kept for the next build (best effort: without it the manifest is
    /// read).
    fn write(&self, out: &Path) {
        let _ = crate::files::write_cache(
            &Summary::path(out, self.number),
            SUMMARY_MAGIC,
            SUMMARY_VERSION,
            self,
        );
    }
}

/// The pool files (path, SHA256) the last `count` generations list, each
/// once, sorted, and the last generation's kept index pieces: what a build
/// reads of the generations before it writes. Each manifest is read
/// through its [`Summary`], made the first time it is needed.
pub fn earlier(out: &Path, count: usize) -> Result<Earlier, RepoError> {
    let files = manifests(out)?;
    // The last one is read for its pieces even where no pool file is kept.
    let skip = files.len().saturating_sub(count.max(1));
    let mut pool: Vec<(String, String)> = Vec::new();
    // Most generations list what the one before listed: each content's
    // files are taken once.
    let mut contents: Vec<String> = Vec::new();
    let mut kept = super::KeptPieces::default();
    let mut last = None;
    for (i, (number, path)) in files.iter().enumerate().skip(skip) {
        // A manifest that is a link has no identity of its own to watch
        // (what it points to may change under the same link): read whole
        // every time, and no summary of it is kept.
        let identity = fs::symlink_metadata(path)
            .ok()
            .filter(|m| m.is_file())
            .map(|m| crate::files::FileIdentity::of(&m));
        let summary = match identity.and_then(|id| Summary::read(out, *number, id)) {
            Some(s) => s,
            None => summarize(out, *number, path, identity)?,
        };
        if i + 1 == files.len() {
            last = identity.map(|identity| LastRead {
                number: *number,
                identity,
                content: summary.content.clone(),
            });
            kept = kept_pieces_of(out, &summary.forms, &summary.kept_indexes());
        }
        if files.len() - i <= count && !contents.contains(&summary.content) {
            contents.push(summary.content);
            pool.extend(summary.files);
        }
    }
    // Each list is in its manifest's order, sorted by path where this
    // debforge wrote it: a stable sort merges such runs in one pass each.
    pool.sort();
    pool.dedup();
    Ok((pool, kept, last))
}

/// The [`Summary`] of generation `number`'s manifest at `path`, read whole
/// (one that does not read is refused, as [`read`] refuses it), kept
/// beside it where its identity is known.
fn summarize(
    out: &Path,
    number: u32,
    path: &Path,
    identity: Option<crate::files::FileIdentity>,
) -> Result<Summary, RepoError> {
    use std::borrow::Cow;
    /// A manifest as [`Generation`] reads it (the same fields, the same
    /// types), its strings borrowed from the file where they can be.
    #[derive(serde::Deserialize)]
    #[allow(dead_code)] // Read to be checked, not used.
    struct PoolList<'a> {
        number: u32,
        date: i64,
        #[serde(borrow)]
        release_sha256: Cow<'a, str>,
        #[serde(borrow)]
        packages: Vec<PoolFile<'a>>,
        #[serde(borrow)]
        lock_sha256: Cow<'a, str>,
        #[serde(borrow)]
        keys: Vec<Cow<'a, str>>,
        #[serde(borrow)]
        pins_sha256: Cow<'a, str>,
        #[serde(default, borrow)]
        pins: Option<Cow<'a, str>>,
        #[serde(default)]
        repository: Option<super::RepoConfig>,
        #[serde(default)]
        indexes: Vec<KeptIndex>,
        #[serde(default, borrow)]
        forms: Cow<'a, str>,
    }
    #[derive(serde::Deserialize)]
    struct PoolFile<'a> {
        #[serde(borrow)]
        package: Cow<'a, str>,
        #[serde(borrow)]
        version: Cow<'a, str>,
        #[serde(borrow)]
        architecture: Cow<'a, str>,
        #[serde(borrow)]
        filename: Cow<'a, str>,
        size: u64,
        #[serde(borrow)]
        sha256: Cow<'a, str>,
    }
    let bytes =
        crate::input::read(path, crate::input::limit::MANIFEST).map_err(FileError::at(path))?;
    let list: PoolList =
        serde_json::from_slice(&bytes).map_err(|err| RepoError::BadGeneration {
            path: path.to_path_buf(),
            reason: err.to_string(),
        })?;
    if list.number != number {
        return Err(RepoError::BadGeneration {
            path: path.to_path_buf(),
            reason: format!("it says generation {}, its name {number}", list.number),
        });
    }
    let mut key = ContentKey::default();
    for p in &list.packages {
        let fields = [
            &p.package,
            &p.version,
            &p.architecture,
            &p.filename,
            &p.sha256,
        ];
        key.package(fields.map(|f| &**f), p.size);
    }
    let summary = Summary {
        manifest: identity,
        number,
        content: key.finish(&list.keys, &list.pins_sha256),
        files: list
            .packages
            .into_iter()
            .map(|p| (p.filename.into_owned(), p.sha256.into_owned()))
            .collect(),
        forms: list.forms.into_owned(),
        indexes: list
            .indexes
            .into_iter()
            .map(|k| (k.path, k.digests.sha256))
            .collect(),
    };
    if identity.is_some() {
        summary.write(out);
    }
    Ok(summary)
}

/// The manifests' numbers (from their names) and paths, in order.
fn manifests(out: &Path) -> Result<Vec<(u32, PathBuf)>, RepoError> {
    let dir = dir_of(out);
    let rd = match fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(FileError::at(&dir)(e).into()),
    };
    let mut out: Vec<(u32, PathBuf)> = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let number = name
            .strip_suffix(".json")
            .filter(|n| n.len() == 6 && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse().ok());
        if let Some(n) = number {
            out.push((n, e.path()));
        }
    }
    out.sort();
    Ok(out)
}

fn read(path: &Path) -> Result<Generation, RepoError> {
    // By type and bound: the generations' directory lies beside the output,
    // where anything may have been put.
    let bytes =
        crate::input::read(path, crate::input::limit::MANIFEST).map_err(FileError::at(path))?;
    serde_json::from_slice(&bytes).map_err(|err| RepoError::BadGeneration {
        path: path.to_path_buf(),
        reason: err.to_string(),
    })
}

/// Records `g` (numbered after the last) unless its content equals the last
/// generation's. Returns the number of the generation in force and whether
/// it is new.
pub fn record<P>(out: &Path, g: Generation<P>) -> Result<(u32, bool), RepoError>
where
    P: std::ops::Deref<Target = [PoolEntry]> + serde::Serialize,
{
    let before = last(out, 1)?.pop();
    if let Some(last) = &before
        && last.same_content(&g)
    {
        return Ok((last.number, false));
    }
    let number = before.map_or(1, |l| l.number + 1);
    write_new(out, g, number).map(|number| (number, true))
}

/// [`record`], where `seen` is the last generation as [`earlier`] read it:
/// while it is still the last, its manifest is not read again. Returns the
/// number of the generation in force and whether it is new.
pub fn record_after<P>(
    out: &Path,
    g: Generation<P>,
    seen: Option<&LastRead>,
) -> Result<(u32, bool), RepoError>
where
    P: std::ops::Deref<Target = [PoolEntry]> + serde::Serialize,
{
    let files = manifests(out)?;
    let still_last = |seen: &&LastRead| {
        files.last().is_some_and(|(number, path)| {
            *number == seen.number
                && fs::symlink_metadata(path)
                    .is_ok_and(|m| crate::files::FileIdentity::of(&m) == seen.identity)
        })
    };
    let Some(seen) = seen.filter(still_last) else {
        return record(out, g);
    };
    if seen.content == g.content_key() {
        return Ok((seen.number, false));
    }
    write_new(out, g, seen.number + 1).map(|number| (number, true))
}

/// Writes `g` as generation `number`; returns `number`.
fn write_new<P>(out: &Path, mut g: Generation<P>, number: u32) -> Result<u32, RepoError>
where
    P: std::ops::Deref<Target = [PoolEntry]> + serde::Serialize,
{
    g.number = number;
    let dir = dir_of(out);
    let path = dir.join(format!("{:06}.json", g.number));
    // An existing manifest is never replaced. Streamed: it lists every
    // package.
    crate::files::write_atomic_with(&path, crate::files::Existing::Keep, &mut |w| {
        serde_json::to_writer_pretty(w, &g).map_err(std::io::Error::from)
    })?;
    if let Ok(m) = fs::symlink_metadata(&path)
        && m.is_file()
    {
        Summary::write_of(out, &g, crate::files::FileIdentity::of(&m));
    }
    Ok(number)
}

/// How one package differs between two generations.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "change")]
pub enum Change {
    Added {
        package: String,
        architecture: String,
        version: String,
    },
    Removed {
        package: String,
        architecture: String,
        version: String,
    },
    Upgraded {
        package: String,
        architecture: String,
        from: String,
        to: String,
    },
    Downgraded {
        package: String,
        architecture: String,
        from: String,
        to: String,
    },
    /// The red flag: the same name, version and architecture, other bytes.
    ChangedBytes {
        package: String,
        architecture: String,
        version: String,
        from: String,
        to: String,
    },
}

/// What changed from `a` to `b`: packages (by name and architecture), then
/// whether the pins or the keys changed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Diff {
    pub from: u32,
    pub to: u32,
    pub changes: Vec<Change>,
    pub pins_changed: bool,
    pub keys_changed: bool,
}

impl Diff {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty() && !self.pins_changed && !self.keys_changed
    }
}

pub fn diff(a: &Generation, b: &Generation) -> Diff {
    let key = |p: &PoolEntry| (p.package().to_string(), p.architecture().to_string());
    let olds: BTreeMap<_, _> = a.packages.iter().map(|p| (key(p), p)).collect();
    let news: BTreeMap<_, _> = b.packages.iter().map(|p| (key(p), p)).collect();
    let mut changes = Vec::new();
    for (k, n) in &news {
        match olds.get(k) {
            None => changes.push(Change::Added {
                package: k.0.clone(),
                architecture: k.1.clone(),
                version: n.version().to_string(),
            }),
            Some(o) if o.version() == n.version() && o.sha256() != n.sha256() => {
                changes.push(Change::ChangedBytes {
                    package: k.0.clone(),
                    architecture: k.1.clone(),
                    version: n.version().to_string(),
                    from: o.sha256().to_string(),
                    to: n.sha256().to_string(),
                })
            }
            Some(o) if o.version() != n.version() => {
                let newer = match (
                    crate::format::version::Version::parse_lenient(o.version()),
                    crate::format::version::Version::parse_lenient(n.version()),
                ) {
                    (Ok((ov, _)), Ok((nv, _))) => nv.compare(&ov).is_gt(),
                    _ => n.version() > o.version(),
                };
                let (package, architecture, from, to) = (
                    k.0.clone(),
                    k.1.clone(),
                    o.version().to_string(),
                    n.version().to_string(),
                );
                changes.push(if newer {
                    Change::Upgraded {
                        package,
                        architecture,
                        from,
                        to,
                    }
                } else {
                    Change::Downgraded {
                        package,
                        architecture,
                        from,
                        to,
                    }
                });
            }
            Some(_) => {}
        }
    }
    for (k, o) in &olds {
        if !news.contains_key(k) {
            changes.push(Change::Removed {
                package: k.0.clone(),
                architecture: k.1.clone(),
                version: o.version().to_string(),
            });
        }
    }
    Diff {
        from: a.number,
        to: b.number,
        changes,
        pins_changed: a.pins_sha256 != b.pins_sha256,
        keys_changed: a.keys != b.keys,
    }
}

/// One line per change, for people.
pub fn render(d: &Diff) -> String {
    let mut s = String::new();
    for c in &d.changes {
        s.push_str(&match c {
            Change::Added { package, architecture, version } => {
                format!("+ {package} {version} ({architecture})\n")
            }
            Change::Removed { package, architecture, version } => {
                format!("- {package} {version} ({architecture})\n")
            }
            Change::Upgraded { package, architecture, from, to } => {
                format!("↑ {package} {from} -> {to} ({architecture})\n")
            }
            Change::Downgraded { package, architecture, from, to } => {
                format!("↓ {package} {from} -> {to} ({architecture})\n")
            }
            Change::ChangedBytes { package, architecture, version, from, to } => format!(
                "! {package} {version} ({architecture}): OTHER BYTES AT THE SAME VERSION (sha256 {from} -> {to}); clients that have it will not see the change\n"
            ),
        });
    }
    if d.pins_changed {
        s.push_str("pins changed\n");
    }
    if d.keys_changed {
        s.push_str("signing keys changed\n");
    }
    s
}

/// The one-line summary `history` shows for `g` against its predecessor.
pub fn summary(prev: Option<&Generation>, g: &Generation) -> String {
    let Some(p) = prev else {
        return format!("{} packages (first generation)", g.packages.len());
    };
    let d = diff(p, g);
    let count = |f: fn(&Change) -> bool| d.changes.iter().filter(|c| f(c)).count();
    let mut parts = vec![format!("{} packages", g.packages.len())];
    for (n, what) in [
        (count(|c| matches!(c, Change::Added { .. })), "added"),
        (count(|c| matches!(c, Change::Removed { .. })), "removed"),
        (count(|c| matches!(c, Change::Upgraded { .. })), "upgraded"),
        (
            count(|c| matches!(c, Change::Downgraded { .. })),
            "downgraded",
        ),
        (
            count(|c| matches!(c, Change::ChangedBytes { .. })),
            "CHANGED AT THE SAME VERSION",
        ),
    ] {
        if n > 0 {
            parts.push(format!("{n} {what}"));
        }
    }
    if d.keys_changed {
        parts.push("keys changed".into());
    }
    parts.join(", ")
}

/// Removes what [`materialize`] wrote, with its stamp and lock (best
/// effort: a killed run's copy is replaced by the next).
pub fn remove_materialized(dir: &Path) {
    let _ = crate::files::remove_tree(dir);
    for what in ["stamp", "walk", "lock"] {
        let _ = fs::remove_file(crate::files::beside(dir, what));
    }
}

/// Where [`materialize`] writes a generation: `.<out>.generation` beside the
/// output (a dot name: never published, bundled or served).
pub fn materialized_dir(out: &Path) -> PathBuf {
    crate::files::beside(out, "generation")
}

/// The generation whose packages are exactly `pool` (filename → SHA256, as a
/// target's indexes list them): the newest such, as a rollback needs "the
/// one in force" and content can repeat (a rollback, then the same build).
pub fn matching<'a>(
    all: &'a [Generation],
    pool: &std::collections::BTreeMap<String, String>,
) -> Option<&'a Generation> {
    all.iter().rev().find(|g| {
        g.packages.len() == pool.len()
            && g.packages
                .iter()
                .all(|p| pool.get(p.filename()).map(String::as_str) == Some(p.sha256()))
    })
}

/// The pool files of generation `g`, each still in the output's pool.
fn kept_files(out: &Path, g: &Generation) -> Result<Vec<PathBuf>, RepoError> {
    let mut files = Vec::with_capacity(g.packages.len());
    for p in &g.packages {
        if crate::format::path::check_relative(p.filename()).is_err() {
            return Err(RepoError::BadGeneration {
                path: dir_of(out).join(format!("{:06}.json", g.number)),
                reason: format!("pool path {:?} leaves the repository", p.filename()),
            });
        }
        let file = out.join(p.filename());
        if !file.is_file() {
            return Err(RepoError::NotKept {
                generation: g.number,
                out: out.to_path_buf(),
                file,
            });
        }
        files.push(file);
    }
    Ok(files)
}

/// Each package's control paragraph: recorded by its SHA256, else read
/// from the file.
fn controls_of(
    g: &Generation,
    files: &[PathBuf],
    records: &DigestStore,
) -> Result<Vec<crate::format::ControlParagraph>, RepoError> {
    let mut controls = Vec::with_capacity(files.len());
    for (p, file) in g.packages.iter().zip(files) {
        let recorded = records
            .control(p.sha256())
            .and_then(|t| crate::format::ControlParagraph::parse_single(&t).ok());
        let control = match recorded {
            Some(c) => c,
            None => {
                let bad = |e: crate::deb::DebError| RepoError::BadPackage {
                    path: file.clone(),
                    reason: e.to_string(),
                };
                crate::deb::DebFile::open(file)
                    .map_err(bad)?
                    .control_files()
                    .map_err(bad)?
                    .control
            }
        };
        controls.push(control);
    }
    Ok(controls)
}

/// Generation `g` of the output `out` made a complete repository again, in
/// [`materialized_dir`]: its packages linked from the output's pool (where
/// `--keep` kept them, checked against the manifest's SHA256), its pins and
/// Release fields, a new `date`, signed by `keys`. Every other kept file of
/// the recorded generations is linked too, so publishing it leaves a later
/// generation's files on the target (clients mid-download, a roll forward).
/// Nothing is copied; the indexes and Release files are written anew.
pub fn materialize(
    out: &Path,
    g: &Generation,
    all: &[Generation],
    keys: &[SigningKey],
    date: i64,
    records: &DigestStore,
    observer: &dyn Reporter,
) -> Result<PathBuf, RepoError> {
    let pins = g.pins.as_deref().ok_or(RepoError::IncompleteGeneration {
        generation: g.number,
        what: "pins",
    })?;
    let config = g
        .repository
        .clone()
        .ok_or(RepoError::IncompleteGeneration {
            generation: g.number,
            what: "Release fields",
        })?;
    let files = kept_files(out, g)?;
    let mut retain: Vec<(String, String)> = all
        .iter()
        .flat_map(|g| {
            g.packages
                .iter()
                .map(|p| (p.filename().to_string(), p.sha256().to_string()))
        })
        .filter(|(rel, _)| out.join(rel).is_file())
        .collect();
    retain.sort();
    retain.dedup();
    let params = super::RepoParams {
        // A generation published again was checked when it was built.
        base: &[],
        config,
        keys,
        date,
        records,
        pause_in_swap: None,
        retain,
        retain_from: Some(out.to_path_buf()),
        kept_pieces: super::KeptPieces::default(),
    };
    let dest = materialized_dir(out);
    // Each of its files still has the bytes the manifest says (the output's
    // pool is published through a link): by the records, read only when a
    // file changed since it was recorded.
    let unchanged = g.packages.iter().zip(&files).all(|(p, file)| {
        records
            .digests_of(file)
            .is_ok_and(|d| d.sha256 == p.sha256())
    });
    if unchanged && let Some(indexes) = kept_indexes(out, g) {
        // Its own indexes, as they were when it was built and checked, and
        // the output's pool, which holds its files (checked above) and the
        // other kept generations': only the Release is new.
        super::write_kept(&dest, &out.join("pool"), &indexes, &params, pins, observer)?;
        return Ok(dest);
    }
    let controls = controls_of(g, &files, records)?;
    let mut stanzas = super::stanzas::Stanzas::new(None);
    let spill_dir = std::env::temp_dir();
    let inputs: Vec<super::PoolInput> = g
        .packages
        .iter()
        .zip(&files)
        .zip(controls)
        .map(|((p, file), control)| {
            let sha256 = crate::digest::Sha256Sum::from_hex(p.sha256()).ok_or_else(|| {
                RepoError::BadPackage {
                    path: file.clone(),
                    reason: format!(
                        "the generation's manifest gives it SHA256 {:?}, not 64 hex digits",
                        p.sha256()
                    ),
                }
            })?;
            let entry = stanzas
                .add(&control)
                .map_err(crate::error::FileError::at(&spill_dir))?;
            Ok(super::PoolInput {
                file: file.as_path().into(),
                entry,
                size: p.size,
                sha256,
            })
        })
        .collect::<Result<_, RepoError>>()?;
    super::write(&dest, inputs, &stanzas, &params, pins, observer)?;
    Ok(dest)
}

#[cfg(test)]
mod tests {
    //! Generations at their boundary: recorded from a written repository,
    //! an earlier one made a repository again from the pool (later Date,
    //! same packages), and the same content recorded once.
    use super::*;
    use crate::repo::test_support::{key, tiny_deb, write_repo};

    fn generation(
        out: &Path,
        report: &crate::repo::OutputReport,
        keys: &[SigningKey],
        date: i64,
    ) -> Generation {
        Generation {
            number: 0,
            date,
            release_sha256: crate::digest::sha256_file(&out.join("dists/bionic/Release")).unwrap(),
            packages: report.packages.clone(),
            lock_sha256: String::new(),
            keys: keys.iter().map(|k| k.fingerprint()).collect(),
            pins_sha256: crate::digest::sha256_hex(b""),
            pins: Some(String::new()),
            repository: Some(crate::repo::RepoConfig::default()),
            indexes: keep_indexes(out, "bionic", &report.index),
            forms: crate::deb::INDEX_FORMS.to_string(),
        }
    }

    #[test]
    fn a_build_records_after_the_last_generation_it_read_without_reading_it_again() {
        let dir = tempfile::tempdir().unwrap();
        let keys = [key()];
        let out = dir.path().join("repo-out");
        let v1 = [tiny_deb(dir.path(), "liba", "1.0-1", None)];
        let r1 = write_repo(&out, &v1, &keys, 1_600_000_000, "").unwrap();
        let seen = |out: &Path| earlier(out, 1).unwrap().2;
        // None yet: the first.
        assert!(seen(&out).is_none());
        let g1 = generation(&out, &r1, &keys, 1_600_000_000);
        assert_eq!(record_after(&out, g1.clone(), None).unwrap(), (1, true));
        // The same content as the last one read: nothing recorded, and the
        // key says so where the whole comparison does.
        let last_read = seen(&out).unwrap();
        assert_eq!(last_read.content, g1.content_key());
        let again = generation(&out, &r1, &keys, 1_600_000_050);
        assert!(again.same_content(&g1));
        assert_eq!(
            record_after(&out, again, Some(&last_read)).unwrap(),
            (1, false)
        );
        // Other content: the next number.
        let v2 = [tiny_deb(dir.path(), "liba", "1.1-1", None)];
        let r2 = write_repo(&out, &v2, &keys, 1_600_000_100, "").unwrap();
        let g2 = generation(&out, &r2, &keys, 1_600_000_100);
        assert_ne!(g2.content_key(), g1.content_key());
        assert_eq!(
            record_after(&out, g2.clone(), Some(&last_read)).unwrap(),
            (2, true)
        );
        // What it read is no longer the last (another build recorded one
        // since): the last manifest is read, as by `record`.
        assert_eq!(
            record_after(&out, g2.clone(), Some(&last_read)).unwrap(),
            (2, false)
        );
        let mut g3 = generation(&out, &r1, &keys, 1_600_000_200);
        assert_eq!(
            record_after(&out, g3.clone(), Some(&last_read)).unwrap(),
            (3, true)
        );
        // Another key or other pins: other content.
        g3.keys.push("another".into());
        assert_ne!(g3.content_key(), g1.content_key());
        g3.keys.pop();
        g3.pins_sha256 = crate::digest::sha256_hex(b"pins");
        assert_ne!(g3.content_key(), g1.content_key());
        let numbers: Vec<u32> = list(&out).unwrap().iter().map(|g| g.number).collect();
        assert_eq!(numbers, [1, 2, 3]);
        // The last manifest put back under its number with other content
        // (another file): what was read of it no longer answers.
        let read3 = seen(&out).unwrap();
        let third = dir_of(&out).join("000003.json");
        let text = std::fs::read_to_string(&third).unwrap();
        let g2_text = std::fs::read_to_string(dir_of(&out).join("000002.json")).unwrap();
        // Another size, and the old file kept aside: another identity.
        let swapped = g2_text.replacen("\"number\": 2", "\"number\": 3", 1) + "\n";
        assert_ne!(swapped.len(), text.len());
        std::fs::rename(&third, dir.path().join("aside.json")).unwrap();
        std::fs::write(&third, swapped).unwrap();
        let now = crate::files::FileIdentity::of(&std::fs::symlink_metadata(&third).unwrap());
        assert_ne!(now, read3.identity);
        let again = generation(&out, &r1, &keys, 1_600_000_300);
        assert_eq!(record_after(&out, again, Some(&read3)).unwrap(), (4, true));
    }

    #[test]
    fn an_earlier_generation_is_materialized_from_the_pool_with_a_later_date() {
        let dir = tempfile::tempdir().unwrap();
        let keys = [key()];
        let out = dir.path().join("repo-out");
        let v1 = [tiny_deb(dir.path(), "liba", "1.0-1", None)];
        let r1 = write_repo(&out, &v1, &keys, 1_600_000_000, "").unwrap();
        let recorded = record(&out, generation(&out, &r1, &keys, 1_600_000_000)).unwrap();
        assert_eq!(recorded, (1, true));
        // The same content again: still generation 1.
        let again = record(&out, generation(&out, &r1, &keys, 1_600_000_050)).unwrap();
        assert_eq!(again, (1, false));
        // Generation 2 with a newer liba; generation 1's file stays (retain
        // is the build's job: here the old pool file is kept by hand).
        let v2 = [tiny_deb(dir.path(), "liba", "1.1-1", None)];
        let r2 = write_repo(&out, &v2, &keys, 1_600_000_100, "").unwrap();
        record(&out, generation(&out, &r2, &keys, 1_600_000_100)).unwrap();
        let old = out.join(r1.packages[0].filename());
        std::fs::create_dir_all(old.parent().unwrap()).unwrap();
        std::fs::copy(&v1[0].file, &old).unwrap();
        let all = list(&out).unwrap();
        assert_eq!(all.iter().map(|g| g.number).collect::<Vec<_>>(), [1, 2]);
        // The pool files the last generations keep, each once, sorted.
        let file = |g: &Generation| {
            (
                g.packages[0].filename().to_string(),
                g.packages[0].sha256().to_string(),
            )
        };
        let mut both = vec![file(&all[0]), file(&all[1])];
        both.sort();
        assert_eq!(earlier(&out, 2).unwrap().0, both);
        assert_eq!(earlier(&out, 9).unwrap().0, both);
        assert_eq!(earlier(&out, 1).unwrap().0, [file(&all[1])]);
        // Its compressed pieces are offered for reuse, unless they were made
        // otherwise than this debforge makes them (an older manifest says
        // nothing of how).
        assert_eq!(kept_pieces(&out, &all[1]).len(), 1);
        let mut other = all[1].clone();
        other.forms = "xz preset 6, 512 KiB blocks".into();
        assert!(kept_pieces(&out, &other).is_empty());
        other.forms.clear();
        assert!(kept_pieces(&out, &other).is_empty());
        // A build reads the last manifests only; the history reads all and
        // says what it cannot read.
        let first = dir_of(&out).join("000001.json");
        let kept = std::fs::read(&first).unwrap();
        std::fs::write(&first, b"{").unwrap();
        let last_one = last(&out, 1).unwrap();
        assert_eq!(last_one.iter().map(|g| g.number).collect::<Vec<_>>(), [2]);
        assert_eq!(earlier(&out, 1).unwrap().0, [file(&all[1])]);
        assert!(matches!(
            earlier(&out, 2).map(|(files, _, _)| files),
            Err(RepoError::BadGeneration { path, .. }) if path == first
        ));
        assert!(matches!(
            list(&out),
            Err(RepoError::BadGeneration { path, .. }) if path == first
        ));
        // One that would not read whole (a field gone, another of the
        // wrong type) is refused as the whole reading refuses it.
        let text = String::from_utf8(kept.clone()).unwrap();
        let keys_not_a_list = text.replacen("\"keys\": [", "\"keys\": \"x\", \"k\": [", 1);
        for bad in [text.replacen("\"date\":", "\"dated\":", 1), keys_not_a_list] {
            assert_ne!(bad, text);
            std::fs::write(&first, &bad).unwrap();
            assert!(last(&out, 2).is_err());
            assert!(matches!(
                earlier(&out, 2).map(|(files, _, _)| files),
                Err(RepoError::BadGeneration { path, .. }) if path == first
            ));
        }
        std::fs::write(&first, kept).unwrap();
        assert_eq!(earlier(&out, 2).unwrap().0, both);
        let records = DigestStore::new(None);
        let dir1 = materialize(
            &out,
            &all[0],
            &all,
            &keys,
            1_600_000_200,
            &records,
            &crate::report::Quiet,
        )
        .unwrap();
        let release = std::fs::read_to_string(dir1.join("dists/bionic/Release")).unwrap();
        assert!(
            release.contains("Date: Sun, 13 Sep 2020 12:30:00 UTC"),
            "{release}"
        );
        let keyring = crate::openpgp::sign::export_public(&keys).0;
        let v = crate::repo::verify::verify(&dir1, &keyring, 1_600_000_300);
        assert!(v.problems.is_empty(), "{:?}", v.problems);
        let packages =
            std::fs::read_to_string(dir1.join("dists/bionic/main/binary-amd64/Packages")).unwrap();
        assert!(
            packages.contains("Version: 1.0-1") && !packages.contains("Version: 1.1-1"),
            "{packages}"
        );
        remove_materialized(&dir1);
        assert!(!dir1.exists());
        // Without its kept indexes (a manifest of an older debforge, or a
        // kept file that changed), the indexes are written anew: the same.
        let mut older = all[0].clone();
        older.indexes.clear();
        let mut tampered = all[0].clone();
        tampered.indexes[0].digests.size += 1;
        for g in [older, tampered] {
            let again = materialize(
                &out,
                &g,
                &all,
                &keys,
                1_600_000_200,
                &records,
                &crate::report::Quiet,
            )
            .unwrap();
            let text =
                std::fs::read_to_string(again.join("dists/bionic/main/binary-amd64/Packages"))
                    .unwrap();
            assert_eq!(text, packages);
            remove_materialized(&again);
        }
        // A pool file that no longer has the manifest's bytes is never
        // published under the generation's indexes.
        let other_dir = dir.path().join("other");
        std::fs::create_dir_all(&other_dir).unwrap();
        let rebuilt = tiny_deb(&other_dir, "liba", "1.0-1", Some("libc6"));
        std::fs::remove_file(&old).unwrap();
        std::fs::copy(&rebuilt.file, &old).unwrap();
        let err = materialize(
            &out,
            &all[0],
            &all,
            &keys,
            1_600_000_300,
            &records,
            &crate::report::Quiet,
        )
        .unwrap_err();
        assert!(matches!(err, RepoError::Changed { .. }), "{err}");
        remove_materialized(&materialized_dir(&out));
    }

    /// `n` generations recorded in a fresh output, each with one more
    /// package than the one before and each package at a new version.
    fn generations_recorded(n: i64) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let keys = [key()];
        let out = dir.path().join("repo-out");
        for g in 0..n {
            let debs: Vec<_> = (0..=g)
                .map(|i| tiny_deb(dir.path(), &format!("lib{i}"), &format!("1.{g}-1"), None))
                .collect();
            let date = 1_600_000_000 + 100 * g;
            let r = write_repo(&out, &debs, &keys, date, "").unwrap();
            record(&out, generation(&out, &r, &keys, date)).unwrap();
        }
        (dir, out)
    }

    /// `earlier` reads each manifest through its summary, made when it was
    /// recorded, and answers as from the manifests themselves: with the
    /// summaries there, gone (made again), damaged, or made from a file
    /// that is no longer the manifest (other content under its number).
    #[test]
    fn earlier_answers_the_same_from_summaries_as_from_manifests() {
        let (_dir, out) = generations_recorded(3);
        let answer = || format!("{:?}", earlier(&out, 3).unwrap());
        let summary = |n: u32| Summary::path(&out, n);
        let from_summaries = answer();
        let written: Vec<Vec<u8>> = (1..=3)
            .map(|n| std::fs::read(summary(n)).unwrap())
            .collect();
        // Gone: the manifests are read, and the summaries made again, the
        // same bytes as those written with the generations.
        std::fs::remove_dir_all(summary(1).parent().unwrap()).unwrap();
        assert_eq!(answer(), from_summaries);
        let again: Vec<Vec<u8>> = (1..=3)
            .map(|n| std::fs::read(summary(n)).unwrap())
            .collect();
        assert_eq!(again, written);
        // A manifest that is a link: read through it every time, never
        // summarized (what it points to may change under the link).
        let second = dir_of(&out).join("000002.json");
        let target = dir_of(&out).join("target");
        std::fs::rename(&second, &target).unwrap();
        std::os::unix::fs::symlink(&target, &second).unwrap();
        std::fs::remove_file(summary(2)).unwrap();
        assert_eq!(answer(), from_summaries);
        assert!(!summary(2).exists());
        let kept = std::fs::read(&target).unwrap();
        std::fs::write(&target, "not json").unwrap();
        assert!(earlier(&out, 3).is_err());
        std::fs::remove_file(&second).unwrap();
        std::fs::write(&second, kept).unwrap();
        assert_eq!(answer(), from_summaries);
        // Damaged, or of another version: ignored.
        std::fs::write(summary(2), b"dfpools\0\x01\0\0\0garbage").unwrap();
        let mut other = std::fs::read(summary(3)).unwrap();
        other[8] = 9;
        std::fs::write(summary(3), other).unwrap();
        assert_eq!(answer(), from_summaries);
        // Generation 2's content put in as generation 3: the summary of the
        // old file no longer answers.
        let third = dir_of(&out).join("000003.json");
        let second = std::fs::read_to_string(dir_of(&out).join("000002.json")).unwrap();
        std::fs::remove_file(&third).unwrap();
        std::fs::write(&third, second.replacen("\"number\": 2", "\"number\": 3", 1)).unwrap();
        let now = answer();
        assert_ne!(now, from_summaries);
        std::fs::remove_dir_all(summary(1).parent().unwrap()).unwrap();
        assert_eq!(answer(), now);
    }

    /// `earlier` reads each manifest once and says what reading the last
    /// `count` whole and the last one again said: the same pool files, the
    /// pieces of the last one (none where its forms are another
    /// debforge's), the same errors; with 0 to 4 manifests there.
    #[test]
    fn the_earlier_generations_read_once_say_what_they_said_read_whole() {
        let (dir, out) = generations_recorded(4);
        let gdir = dir_of(&out);
        let aside = dir.path().join("aside");
        std::fs::create_dir_all(&aside).unwrap();
        let old = |count: usize| -> Result<(Vec<(String, String)>, String), RepoError> {
            let mut files = std::collections::BTreeSet::new();
            if count > 0 {
                for g in last(&out, count)? {
                    files.extend(
                        g.packages
                            .iter()
                            .map(|p| (p.filename().to_string(), p.sha256().to_string())),
                    );
                }
            }
            let kept = last(&out, 1)?
                .pop()
                .map(|g| kept_pieces(&out, &g))
                .unwrap_or_default();
            Ok((files.into_iter().collect(), format!("{kept:?}")))
        };
        let new = |count: usize| earlier(&out, count).map(|(f, k, _)| (f, format!("{k:?}")));
        for present in (0..=4).rev() {
            for count in [0, 1, 2, 3, 4, 5, 9] {
                let (o, n) = (old(count).unwrap(), new(count).unwrap());
                assert_eq!(o, n, "present {present} count {count}");
                if present > 0 {
                    assert_eq!(n.1.matches("xz_file").count(), 1, "{}", n.1);
                }
            }
            if present > 0 {
                let name = format!("{present:06}.json");
                std::fs::rename(gdir.join(&name), aside.join(&name)).unwrap();
            }
        }
        for i in 1..=4 {
            let name = format!("{i:06}.json");
            std::fs::rename(aside.join(&name), gdir.join(&name)).unwrap();
        }
        // A corrupt first manifest: read only where the count reaches it.
        let first = gdir.join("000001.json");
        let kept = std::fs::read(&first).unwrap();
        std::fs::write(&first, b"{").unwrap();
        for count in [0, 1, 2, 3, 4, 5] {
            assert_eq!(old(count).is_ok(), new(count).is_ok(), "count {count}");
        }
        std::fs::write(&first, &kept).unwrap();
        // A corrupt last one: an error whatever the count.
        let lastp = gdir.join("000004.json");
        let kept = std::fs::read(&lastp).unwrap();
        std::fs::write(&lastp, b"{").unwrap();
        for count in [0, 1, 3] {
            assert!(old(count).is_err() && new(count).is_err(), "count {count}");
        }
        // The last one's pieces come from its own manifest: other forms, none.
        let text = String::from_utf8(kept.clone()).unwrap();
        let other = text.replacen(crate::deb::INDEX_FORMS, "other forms", 1);
        assert_ne!(other, text);
        std::fs::write(&lastp, other).unwrap();
        for count in [0, 1, 3] {
            assert_eq!(old(count).unwrap(), new(count).unwrap());
            assert_eq!(new(count).unwrap().1.matches("xz_file").count(), 0);
        }
    }
}
