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
            out.push(Base::read(&session.source_index(name, arch)?)?);
        }
    }
    Ok(out)
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
        .filter(|l| l.for_base && &l.origin == source)
        .map(|l| {
            crate::recipe::picked_recipe(
                &path,
                (&l.name, &l.version, &l.architecture),
                source,
                &recipes.sources,
            )
        })
        .collect::<Result<_, _>>()?;
    add_picked(recipes, picked);
    Ok(())
}

/// Adds picked packages to the project's recipes; the project's own recipe
/// of a package wins.
pub(super) fn add_picked(recipes: &mut RecipeSet, picked: Vec<PackageRecipe>) {
    for p in picked {
        let named = recipes
            .packages
            .iter()
            .any(|r| r.name == p.name && r.architecture == p.architecture);
        if !named {
            recipes.packages.push(p);
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
    let picked_names: BTreeSet<&str> = in_use.iter().map(|k| k.0.as_str()).collect();
    let ours: Vec<(String, against::Package)> = artifacts
        .iter()
        .filter(|a| !picked_names.contains(a.package()))
        .filter_map(|a| {
            Some((
                a.architecture().to_string(),
                against::Package::of(&a.control)?,
            ))
        })
        .collect();
    let mut wanted: BTreeSet<Key> = BTreeSet::new();
    for arch in architectures {
        let offered = Base::read(&session.source_index(source, arch)?)?;
        let mine: Vec<against::Package> = ours
            .iter()
            .filter(|(a, _)| a == arch || a == "all")
            .map(|(_, p)| p.clone())
            .collect();
        let (pulled, _lacking) = against::closure(&mine, bases, &offered);
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
