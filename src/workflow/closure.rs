//! `closure`: what the project's base lacks for the repository's packages
//! to install (prepared as `build` prepares them), picked from a trusted source's signed index (as apt
//! would pick it), and, with `write`, a recipe for each: the next `build`
//! locks and fetches them through that index like any recipe, so that the
//! repository (and its bundle) alone installs on a machine at the base.

use std::path::PathBuf;

use super::WorkflowError;
use crate::repo::against::{self, Base, Missing, Pulled};
use crate::report::Reporter;

#[derive(Debug, Clone)]
pub struct ClosureSettings {
    /// The project as `build` would take it (its packages are prepared as
    /// `build` prepares them; nothing is written but the lock).
    pub build: super::build::BuildSettings,
    /// The trusted source (sources.toml) to pick from.
    pub source: String,
    /// The architecture of its index.
    pub architecture: String,
    /// Write a recipe per package picked (never over an existing one).
    pub write: bool,
}

/// What `closure` found, and the recipes it wrote.
pub struct ClosureReport {
    pub pulled: Vec<Pulled>,
    /// What even the source lacks.
    pub lacking: Vec<Missing>,
    pub written: Vec<PathBuf>,
    /// Recipes not written: one of that name exists already.
    pub kept: Vec<PathBuf>,
    /// Packages not written as recipes: the index names them with values
    /// no recipe may hold (what is wrong).
    pub refused: Vec<String>,
}

pub fn closure(
    s: &ClosureSettings,
    reporter: &dyn Reporter,
) -> Result<ClosureReport, WorkflowError> {
    let recipes = &s.build.recipes;
    let config = crate::recipe::load_base(recipes)?;
    if config.is_empty() {
        return Err(WorkflowError::NoBase {
            file: recipes.join("repository.toml"),
        });
    }
    let mut bases = super::base::read_files(&config)?;
    let ours: Vec<_> = super::build::prepared_controls(&s.build, reporter)?
        .iter()
        .filter_map(against::Package::of)
        .collect();
    let session = super::open_session(recipes, s.build.pipeline.clone(), reporter)?;
    bases.extend(super::base::read_sources(
        &config,
        &session,
        std::slice::from_ref(&s.architecture),
    )?);
    let index = session.source_index(&s.source, &s.architecture)?;
    let offered = Base::read(&index)?;
    let (pulled, lacking) = against::closure(&ours, &bases, &offered);
    let (mut written, mut kept, mut refused) = (Vec::new(), Vec::new(), Vec::new());
    if s.write {
        for p in &pulled {
            // The values come from a foreign index: checked before they
            // become a file name and a recipe.
            let why = format!("{} → {}", p.chain.join(" → "), p.needs);
            let text = match crate::recipe::picked_recipe_text(
                &p.name,
                &p.version,
                &p.architecture,
                &s.source,
                &why,
            ) {
                Ok(t) => t,
                Err(e) => {
                    refused.push(format!("{}: {e}", p.package));
                    continue;
                }
            };
            let path = recipes.join("packages").join(format!("{}.toml", p.name));
            if path.exists() {
                kept.push(path);
                continue;
            }
            crate::files::write_atomic(&path, text.as_bytes(), crate::files::Existing::Keep)
                .map_err(crate::repo::RepoError::from)?;
            written.push(path);
        }
    }
    Ok(ClosureReport {
        pulled,
        lacking,
        written,
        kept,
        refused,
    })
}
