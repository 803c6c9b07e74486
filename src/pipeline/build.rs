//! Stage 3, for `action = "build"` recipes: packages made here (the
//! metapackage, the repo-config package), after the prepared artifacts'
//! versions and pins are known.

use std::collections::BTreeMap;
use std::fs;

use crate::digest::strong_digest_reader;
use crate::repo::RepoConfig;

use super::{Artifact, PipelineError, Session, io, read_control};

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
    ) -> Result<Vec<Artifact>, PipelineError> {
        let input = crate::scratch::RepoConfigInput {
            config,
            keyring,
            preferences: pins,
        };
        let mut out = Vec::new();
        for p in &self.recipes.packages {
            let Some(b) = &p.build else { continue };
            let dir = self.settings.cache.join("built").join(&p.name);
            let _ = fs::remove_dir_all(&dir);
            let deb = crate::scratch::build_package(
                &self.recipes,
                versions,
                p,
                b,
                Some(&input),
                date,
                &dir,
            )
            .map_err(|e| PipelineError::Scratch {
                package: p.name.clone(),
                message: e.to_string(),
            })?;
            let d =
                strong_digest_reader(fs::File::open(&deb).map_err(io(&deb))?).map_err(io(&deb))?;
            out.push(Artifact {
                recipe: p.clone(),
                locked: None,
                control: read_control(&deb)?,
                file: deb,
                size: d.size,
                sha256: d.sha256,
            });
        }
        Ok(out)
    }
}
