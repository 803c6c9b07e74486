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
    let (mut written, mut kept, mut refused) = (Vec::new(), Vec::new(), Vec::new());
    if s.write {
        for p in &pulled {
            // The values come from a foreign index: checked before they
            // become a file name and a recipe.
            if let Err(why) = check_pulled(p) {
                refused.push(format!("{}: {why}", p.package));
                continue;
            }
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
        refused,
    })
}

/// A package's name (Debian policy), version (dpkg's syntax, no quote or
/// space) and architecture (one word) as a recipe may hold them.
fn check_pulled(p: &Pulled) -> Result<(), String> {
    crate::format::control::check_package_name(&p.name)?;
    crate::format::version::Version::parse(&p.version).map_err(|e| e.to_string())?;
    let plain = |v: &str| {
        !v.is_empty()
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".+~:-".contains(&b))
    };
    if !plain(&p.version)
        || !plain(&p.architecture)
        || p.architecture.contains([':', '.', '+', '~'])
    {
        return Err(format!(
            "version {:?} or architecture {:?} is not one plain word",
            p.version, p.architecture
        ));
    }
    Ok(())
}

/// The recipe of a package picked for the closure: the source's exact
/// version, kept as it is, not pinned (the distribution's own build).
fn recipe(p: &Pulled, source: &str) -> String {
    // The chain is for people: one line, whatever it holds.
    let why: String = format!("{} → {}", p.chain.join(" → "), p.needs)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    format!(
        "# Picked by `debforge closure` for the lab's base: {why}.\nname = \"{}\"\nversion = \"{}\"\narchitecture = \"{}\"\nfrom = {{ source = \"{source}\" }}\naction = \"keep\"\npin = false\n",
        p.name, p.version, p.architecture
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pulled(name: &str, version: &str, arch: &str) -> Pulled {
        Pulled {
            package: format!("{name} {version}"),
            name: name.into(),
            version: version.into(),
            architecture: arch.into(),
            chain: vec!["tool 1\nname = \"evil\"".into()],
            needs: "x".into(),
        }
    }

    #[test]
    fn values_from_the_index_are_checked_before_they_become_a_recipe() {
        assert!(check_pulled(&pulled("python3", "3.6.5-3", "amd64")).is_ok());
        assert!(check_pulled(&pulled("libc6", "1:2.27-3ubuntu1", "all")).is_ok());
        for (n, v, a) in [
            ("Python3", "1", "amd64"),
            ("x\"y", "1", "amd64"),
            ("ok-name", "1\"\nname = \"evil", "amd64"),
            ("ok-name", "1", "am d64"),
            ("ok-name", "1", "amd64:x"),
        ] {
            assert!(check_pulled(&pulled(n, v, a)).is_err(), "{n} {v} {a}");
        }
        let text = recipe(&pulled("python3", "3.6.5-3", "amd64"), "ubuntu");
        assert_eq!(
            text.lines().filter(|l| l.starts_with("name = ")).count(),
            1,
            "{text}"
        );
        let parsed: toml::Value = toml::from_str(&text).unwrap();
        assert_eq!(parsed["name"].as_str(), Some("python3"));
    }
}
