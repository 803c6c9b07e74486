//! `debforge fetch`: fetch and verify into the cache; `--to` writes a snapshot.

use super::prelude::*;

pub(crate) fn run_fetch(
    project: &ProjectArgs,
    to: Option<&std::path::Path>,
    locked: bool,
) -> Result<u8, Failure> {
    let progress = progress::Progress::new();
    let session = open_session(project, &progress)?;
    let (fetched, sources, lock) = resolve_and_fetch(&session, &progress, locked)?;
    let mut summary = format!(
        "{} packages verified in {}",
        fetched.len(),
        session.settings.cache.display()
    );
    if let Some(dir) = to {
        pipeline::write_snapshot(dir, &fetched, &sources, &lock)?;
        summary.push_str(&format!(
            "; snapshot in {} (use it offline with --source-dir)",
            dir.display()
        ));
    }
    output::fetched(&fetched, &summary);
    Ok(EXIT_OK)
}
