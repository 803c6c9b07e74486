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
}

pub fn closure(
    s: &ClosureSettings,
    reporter: &dyn Reporter,
) -> Result<ClosureReport, WorkflowError> {
    let recipes = &s.build.recipes;
    let bases = crate::recipe::load_base(recipes)?
        .iter()
        .map(|f| Base::read(f))
        .collect::<Result<Vec<_>, _>>()?;
    if bases.is_empty() {
        return Err(WorkflowError::NoBase {
            file: recipes.join("repository.toml"),
        });
    }
    let ours: Vec<_> = super::build::prepared_controls(&s.build, reporter)?
        .iter()
        .filter_map(against::Package::of)
        .collect();
    let session = super::open_session(recipes, s.build.pipeline.clone(), reporter)?;
    let index = session.source_index(&s.source, &s.architecture)?;
    let offered = Base::read(&index)?;
    let (pulled, lacking) = against::closure(&ours, &bases, &offered);
    let (mut written, mut kept) = (Vec::new(), Vec::new());
    if s.write {
        for p in &pulled {
            let path = recipes.join("packages").join(format!("{}.toml", p.name));
            if path.exists() {
                kept.push(path);
                continue;
            }
            crate::files::write_atomic(
                &path,
                recipe(p, &s.source).as_bytes(),
                crate::files::Existing::Keep,
            )
            .map_err(crate::repo::RepoError::from)?;
            written.push(path);
        }
    }
    Ok(ClosureReport {
        pulled,
        lacking,
        written,
        kept,
    })
}

/// The recipe of a package picked for the closure: the source's exact
/// version, kept as it is, not pinned (the distribution's own build).
fn recipe(p: &Pulled, source: &str) -> String {
    format!(
        "# Picked by `debforge closure` for the lab's base: {} → {}.\nname = \"{}\"\nversion = \"{}\"\narchitecture = \"{}\"\nfrom = {{ source = \"{source}\" }}\naction = \"keep\"\npin = false\n",
        p.chain.join(" → "),
        p.needs,
        p.name,
        p.version,
        p.architecture
    )
}
