//! `debforge verify`: integrity and installability of a repository.

use super::prelude::*;

pub(crate) fn run_verify(
    cx: &Context,
    dir: &std::path::Path,
    keyring: Option<PathBuf>,
    against: &[PathBuf],
    closure_from: Option<&Path>,
    json: bool,
) -> Result<u8, Failure> {
    // A published tree has dists/; anything else is not a repository, which
    // is the first thing to say (not that a keyring is missing).
    let has_release = std::fs::read_dir(dir.join("dists"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| e.path().join("Release").is_file() || e.path().join("InRelease").is_file());
    if !has_release {
        return Err(Failure::new(format!(
            "{}: not a repository (no dists/<suite>/Release or InRelease)",
            dir.display()
        ))
        .hint(Some(
            "name a repository's top directory (the one holding dists/ and pool/), e.g. `debforge verify repo-out` after `debforge build`",
        )));
    }
    let keyring = keyring.unwrap_or_else(|| dir.join(format!("{}.gpg", pipeline::KEYRING_NAME)));
    let bytes = debforge::input::read(&keyring, debforge::input::limit::KEY).map_err(|e| {
        Failure::new(format!(
            "{}: cannot read the keyring: {e}",
            keyring.display()
        ))
        .hint(Some(
            "a published mirror may not carry debforge's keyring: pass the lab's keyring with --keyring FILE (e.g. /usr/share/keyrings/gpu-lab-archive-keyring.gpg)",
        ))
    })?;
    // Every base read before anything is checked: a wrong path is said first.
    let bases = against
        .iter()
        .map(|p| debforge::repo::against::Base::read(p))
        .collect::<Result<Vec<_>, _>>()?;
    let offered = closure_from
        .map(debforge::repo::against::Base::read)
        .transpose()?;
    let mut report = debforge::repo::verify::verify(dir, &bytes, cx.env.dates.now);
    if !bases.is_empty() {
        report.against(dir, &bases);
    }
    if let Some(index) = &offered {
        report.closure(dir, &bases, index);
    }
    output::verify_report(&report, dir, json);
    Ok(if report.problems.is_empty() {
        EXIT_OK
    } else {
        EXIT_FALSE
    })
}
