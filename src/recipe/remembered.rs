//! Recipes as the last build parsed them, each with the identity its file
//! had when it was read: a build that changes one recipe of thousands
//! reads and parses that one, and stats the rest. A recipe is parsed from
//! its own text and `sources.toml` alone (`parse_package`), so its file's
//! identity, the sources' digest and the directory it lies in name what it
//! parses to.
//!
//! One project's recipes are kept in a cache directory at a time: another
//! project built with the same cache replaces them (and is parsed whole).

use std::path::Path;
use std::time::{Duration, SystemTime};

use super::PackageRecipe;
use crate::files::FileIdentity;

/// The file in the cache directory.
pub const FILE: &str = "recipes";

const MAGIC: &[u8; 8] = b"dfrecipe";

/// Bumped when [`PackageRecipe`]'s fields or what `parse_package` accepts
/// change (a recipe kept by a debforge of another version is read again in
/// any case: [`Head::debforge`]). 2: with a CRC-32 (`files::write_cache`).
const FORMAT: u32 = 2;

/// A file changed this close before the build looked at it is read again
/// next time: a change made just after its stat may carry the same times
/// (file systems keep them at a clock tick's or a second's precision).
const RACY: Duration = Duration::from_secs(2);

/// What the recipes were parsed against.
#[derive(serde::Serialize, serde::Deserialize, PartialEq, Eq)]
struct Head {
    /// The version of debforge that parsed them.
    debforge: String,
    /// The absolute `packages/` directory, as bytes (each recipe's `file`
    /// is in it).
    packages: Vec<u8>,
    /// The SHA256 of `sources.toml`'s text (empty: no such file).
    sources: String,
}

/// One recipe as written (borrowed) and read back (owned): the same
/// postcard layout.
#[derive(serde::Serialize)]
struct EntryRef<'a> {
    name: &'a [u8],
    identity: FileIdentity,
    recipe: &'a PackageRecipe,
}

#[derive(serde::Deserialize)]
struct Entry {
    name: Vec<u8>,
    identity: FileIdentity,
    recipe: PackageRecipe,
}

/// The names of the files whose recipes the last build kept, with the
/// identities they had, in name order (looked up by the parsing workers;
/// the recipes are taken by the thread that keeps them).
#[derive(Default)]
pub struct Known(Vec<(Vec<u8>, FileIdentity)>);

impl Known {
    /// Where the recipe of file `name` is, if its identity is still `now`.
    pub fn find(&self, name: &[u8], now: &FileIdentity) -> Option<usize> {
        let i = self
            .0
            .binary_search_by(|(n, _)| n.as_slice().cmp(name))
            .ok()?;
        self.0[i].1.unchanged(now).then_some(i)
    }

    /// The file name of the recipe at `i`.
    pub fn name(&self, i: usize) -> &[u8] {
        &self.0[i].0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }
}

fn head(packages: &Path, sources: &str) -> Head {
    Head {
        debforge: env!("CARGO_PKG_VERSION").to_string(),
        packages: packages.as_os_str().as_encoded_bytes().to_vec(),
        sources: sources.to_string(),
    }
}

/// What `cache` keeps for `packages` (absolute) and a `sources.toml` of
/// SHA256 `sources`; nothing where it keeps another project's, another
/// version's or a damaged file.
pub fn read(cache: &Path, packages: &Path, sources: &str) -> (Known, Vec<Option<PackageRecipe>>) {
    let none = || (Known::default(), Vec::new());
    let Some(bytes) = crate::input::read_cache(
        &cache.join(FILE),
        crate::input::limit::RECORDS,
        MAGIC,
        FORMAT,
    ) else {
        return none();
    };
    let Ok((kept, rest)) = postcard::take_from_bytes::<Head>(&bytes) else {
        return none();
    };
    if kept != head(packages, sources) {
        return none();
    }
    let Ok(entries) = postcard::from_bytes::<Vec<Entry>>(rest) else {
        return none();
    };
    let (names, recipes): (Vec<_>, Vec<_>) = entries
        .into_iter()
        .map(|e| ((e.name, e.identity), Some(e.recipe)))
        .unzip();
    // Written in name order, each once; found by binary search.
    if !names.is_sorted_by(|a, b| a.0 < b.0) {
        return none();
    }
    (Known(names), recipes)
}

/// Keeps `recipes` (each with its file's name and the identity it had
/// before it was read, in name order) in `cache`, but those whose file
/// changed within [`RACY`] of `taken`, when the stats began. Best effort:
/// without it the next build parses every recipe.
pub fn write<'a, I>(cache: &Path, packages: &Path, sources: &str, taken: SystemTime, recipes: I)
where
    I: Iterator<Item = (&'a [u8], FileIdentity, &'a PackageRecipe)> + Clone,
{
    let kept = recipes.filter(move |(_, identity, _)| !identity.changed_since(taken, RACY));
    // Streamed from the recipes the build holds: no list of them beside
    // (a cold build's memory peaks later, but what is freed here is not
    // always reused there).
    let _ = crate::files::write_cache(
        &cache.join(FILE),
        MAGIC,
        FORMAT,
        &(head(packages, sources), Entries(kept)),
    );
}

/// The entries to keep, serialized as a sequence of [`EntryRef`] as they
/// are walked (counted first: postcard writes a sequence's length first).
struct Entries<I>(I);

impl<'a, I> serde::Serialize for Entries<I>
where
    I: Iterator<Item = (&'a [u8], FileIdentity, &'a PackageRecipe)> + Clone,
{
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.0.clone().count()))?;
        for (name, identity, recipe) in self.0.clone() {
            seq.serialize_element(&EntryRef {
                name,
                identity,
                recipe,
            })?;
        }
        seq.end()
    }
}
