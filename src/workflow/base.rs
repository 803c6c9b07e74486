//! The lab's base (`[base]` of repository.toml) in the workflows: the base
//! read from the project's files and from sources' signed indexes, and the
//! closure, the packages a build pulls for what the base lacks. A picked
//! package is recorded in the lock (`for-base = true`) and read back from
//! there as a recipe by the next run, so that `--locked` holds it like any
//! other.

use std::collections::BTreeSet;

use super::WorkflowError;
use crate::pipeline::{Artifact, Session};
use crate::recipe::{BaseConfig, PackageRecipe, RecipeSet};
use crate::repo::against::{self, Base};
use crate::report::{self, Reporter};

/// The base's project files, read before anything is fetched (a wrong
/// file is said first).
pub(super) fn read_files(config: &BaseConfig) -> Result<Vec<Base>, WorkflowError> {
    Ok(config
        .files
        .iter()
        .map(|f| Base::read(f))
        .collect::<Result<Vec<_>, _>>()?)
}

/// The index of each base source for each architecture, through its
/// signed Release.
pub(super) fn read_sources(
    config: &BaseConfig,
    session: &Session,
    architectures: &[String],
) -> Result<Vec<Base>, WorkflowError> {
    let mut out = Vec::new();
    for name in &config.sources {
        for arch in architectures {
            let mut base = Base::read(&session.source_index(name, arch)?)?;
            base.architecture = Some(arch.clone());
            out.push(base);
        }
    }
    Ok(out)
}

/// The signed files and whole indexes (each repository architecture) of
/// every source `[base]` reads (its `sources`, the closure's): what an
/// offline build (`--source-dir`) reads of them, for `fetch --to`.
pub fn source_files(
    session: &Session,
) -> Result<Vec<crate::pipeline::OpenSourceFiles>, WorkflowError> {
    let dir = &session.recipes.dir;
    let config = crate::recipe::load_base(dir)?;
    let names: BTreeSet<&String> = config.sources.iter().chain(&config.closure).collect();
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let architectures = crate::recipe::load_repository(dir)?.architectures;
    names
        .into_iter()
        .map(|n| Ok(session.source_files(n, &architectures)?))
        .collect()
}

/// For `lock` and `fetch`, which resolve the recipes but prepare nothing:
/// with `[base] closure`, what the lock holds of it, and who picks it.
pub fn closure_note(session: &Session) -> Option<String> {
    let config = crate::recipe::load_base(&session.recipes.dir).ok()?;
    let source = config.closure?;
    let picked = session
        .recipes
        .packages
        .iter()
        .filter(|p| p.for_base)
        .count();
    Some(format!(
        "[base] closure: `debforge build` picks from '{source}' what the base lacks and records it in the lock ({picked} package(s) recorded now, kept as they are here)"
    ))
}

/// Every source `[base]` names is one of sources.toml's: a typo is said
/// before anything is fetched.
pub(super) fn check_sources(config: &BaseConfig, recipes: &RecipeSet) -> Result<(), WorkflowError> {
    for name in config.sources.iter().chain(&config.closure) {
        if !recipes.sources.contains_key(name) {
            return Err(crate::recipe::RecipeError {
                file: recipes.dir.join("repository.toml"),
                line: None,
                message: format!(
                    "[base] names the source {name:?}, which sources.toml does not have (it has: {})",
                    recipes.sources.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            }
            .into());
        }
    }
    Ok(())
}

/// The packages the last build picked for the base (the lock's `for-base`
/// entries from the closure's source), added to `recipes` unless a recipe
/// of the project names the same package.
pub(super) fn add_picked_from_lock(
    recipes: &mut RecipeSet,
    config: &BaseConfig,
) -> Result<(), WorkflowError> {
    let Some(source) = &config.closure else {
        return Ok(());
    };
    let path = recipes.dir.join(crate::recipe::LOCK_FILE);
    let text = match crate::input::read_to_string(&path, crate::input::limit::LOCK) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(
                crate::pipeline::PipelineError::from(crate::error::FileError::at(&path)(e)).into(),
            );
        }
    };
    let lock = crate::recipe::lock::Lock::parse(&text).map_err(|source| {
        crate::pipeline::PipelineError::Lock {
            path: path.clone(),
            source,
        }
    })?;
    let picked: Vec<PackageRecipe> = lock
        .package
        .iter()
        .filter(|l| l.for_base && l.origin() == source)
        .map(|l| {
            crate::recipe::picked_recipe(
                &path,
                (l.name(), l.version(), l.architecture()),
                source,
                &recipes.sources,
            )
        })
        .collect::<Result<_, _>>()?;
    add_picked(recipes, picked);
    Ok(())
}

/// Whether the lock in `dir` records `name` `version` as picked for the
/// base from `source`.
pub(super) fn picked_in_lock(
    dir: &std::path::Path,
    source: &str,
    name: &str,
    version: &str,
) -> bool {
    crate::input::read_to_string(
        &dir.join(crate::recipe::LOCK_FILE),
        crate::input::limit::LOCK,
    )
    .ok()
    .and_then(|t| crate::recipe::lock::Lock::parse(&t).ok())
    .is_some_and(|l| {
        l.package.iter().any(|p| {
            p.for_base && p.origin() == source && p.name() == name && p.version() == version
        })
    })
}

/// Adds picked packages to the project's recipes; the project's own recipe
/// of a package wins.
pub(super) fn add_picked(recipes: &mut RecipeSet, picked: Vec<PackageRecipe>) {
    for p in picked {
        // An `all` package answers for every architecture.
        let named = recipes.packages.iter().any(|r| {
            r.name == p.name
                && (r.architecture == p.architecture
                    || r.architecture == "all"
                    || p.architecture == "all")
        });
        if !named {
            recipes.packages.push(std::sync::Arc::new(p));
        }
    }
}

/// The closure of the prepared packages against the base, picked from
/// `source`'s signed index as apt would pick: `None` when it is what the
/// session already holds, else the recipes of the packages to pull now.
/// With `locked`, a change is an error: the lock must say every package.
pub(super) fn closure_change(
    session: &Session,
    artifacts: &[Artifact],
    bases: &[Base],
    source: &str,
    architectures: &[String],
    locked: bool,
    reporter: &dyn Reporter,
) -> Result<Option<Vec<PackageRecipe>>, WorkflowError> {
    type Key = (String, String, String);
    let in_use: BTreeSet<Key> = session
        .recipes
        .packages
        .iter()
        .filter(|p| p.for_base)
        .map(|p| (p.name.clone(), p.version.clone(), p.architecture.clone()))
        .collect();
    let mut ours: Vec<against::Package> = Vec::new();
    for a in artifacts.iter().filter(|a| !a.for_base) {
        ours.extend(against::Package::of(&session.control_of_artifact(a)?));
    }
    let mut wanted: BTreeSet<Key> = BTreeSet::new();
    for arch in architectures {
        let offered = Base::read(&session.source_index(source, arch)?)?;
        let (mine, theirs) = against::of_architecture(&ours, bases, arch);
        let (pulled, _lacking) = against::closure(&mine, &theirs, &offered);
        for p in pulled {
            wanted.insert((p.name, p.version, p.architecture));
        }
    }
    if wanted == in_use {
        return Ok(None);
    }
    let text = |set: &BTreeSet<Key>, other: &BTreeSet<Key>| -> Vec<String> {
        set.difference(other)
            .map(|(n, v, a)| format!("{n} {v} ({a})"))
            .collect()
    };
    let (added, removed) = (text(&wanted, &in_use), text(&in_use, &wanted));
    if locked {
        return Err(WorkflowError::ClosureChanged {
            lock: session.lock_path().to_path_buf(),
            added,
            removed,
        });
    }
    let mut said = format!(
        "for the base (repository.toml [base]): {} package(s) from source '{source}', each through its signed index",
        wanted.len()
    );
    if !added.is_empty() {
        said.push_str(&format!("; new: {}", added.join(", ")));
    }
    if !removed.is_empty() {
        said.push_str(&format!("; no longer needed: {}", removed.join(", ")));
    }
    report::note(reporter, said);
    let lock = session.lock_path();
    let recipes = wanted
        .iter()
        .map(|(n, v, a)| {
            crate::recipe::picked_recipe(lock, (n, v, a), source, &session.recipes.sources)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(recipes))
}
