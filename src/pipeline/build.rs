//! Stage 3, for `action = "build"` recipes: packages made here (the
//! metapackage, the repo-config package), after the prepared artifacts'
//! versions and pins are known.

use crate::error::FileError;
use std::collections::BTreeMap;
use std::fs;

use crate::digest::{DigestSet, Hasher, digest_with};
use crate::repo::RepoConfig;

use super::{Artifact, PipelineError, Session};

impl Session<'_> {
    /// Builds the `action = "build"` recipes (the metapackage, the
    /// repo-config package) into the cache, dated `date`; the repo-config
    /// package gets `keyring` and the pins of every recipe.
    pub fn build_from_recipes(
        &self,
        config: &RepoConfig,
        keyring: &[u8],
        date: i64,
        versions: &BTreeMap<String, String>,
        pins: &str,
        pinned: &[String],
    ) -> Result<Vec<Artifact>, PipelineError> {
        let install: Vec<String> = self
            .recipes
            .packages
            .iter()
            .filter(|p| p.build.as_ref().is_some_and(|b| b.repo_config.is_none()))
            .map(|p| p.name.clone())
            .collect();
        let input = crate::native::RepoConfigInput {
            config,
            keyring,
            preferences: pins,
            pinned,
            install: &install,
        };
        let mut out = Vec::new();
        for p in &self.recipes.packages {
            let Some(b) = &p.build else { continue };
            // Built in a fresh directory, then kept under its SHA256: a
            // rebuild with the same bytes leaves the earlier file (and the
            // output's link to it) untouched.
            let home = self.settings.cache.join("built").join(&p.name);
            fs::create_dir_all(&home).map_err(FileError::at(&home))?;
            let scratch = tempfile::Builder::new()
                .prefix(".build-")
                .tempdir_in(&home)
                .map_err(FileError::at(&home))?;
            let built = crate::native::build_package(
                &self.recipes,
                versions,
                p,
                b,
                Some(&input),
                date,
                scratch.path(),
            )
            .map_err(|source| PipelineError::Native {
                package: p.name.clone(),
                source,
            })?;
            let d = digest_with(
                fs::File::open(&built).map_err(FileError::at(&built))?,
                Hasher::new(DigestSet::SHA256),
            )
            .map_err(FileError::at(&built))?;
            let name = built.file_name().unwrap_or_default().to_owned();
            let keep = home.join(&d.sha256);
            let deb = keep.join(&name);
            if !deb.is_file() {
                let _ = crate::files::remove_tree(&keep);
                fs::create_dir_all(&keep).map_err(FileError::at(&keep))?;
                fs::rename(&built, &deb).map_err(FileError::at(&deb))?;
            }
            drop(scratch);
            // Earlier builds of this recipe are no longer wanted.
            if let Ok(rd) = fs::read_dir(&home) {
                for e in rd.flatten() {
                    if e.file_name() != d.sha256.as_str() {
                        let _ = crate::files::remove_tree(e.path());
                    }
                }
            }
            out.push(Artifact {
                for_base: p.for_base,
                version_changed: false,
                entry: self.index_entry(&self.control_of(&deb, &d.sha256)?)?,
                sha256: super::sha256_sum(&deb, &d.sha256)?,
                file: deb.into(),
                size: d.size,
            });
        }
        Ok(out)
    }
}
