//! `debforge fetch`: fetch and verify into the cache; `--to` writes a snapshot.

use super::prelude::*;

pub(crate) fn run_fetch(
    cx: &Context,
    project: &ProjectArgs,
    to: Option<&Path>,
    locked: bool,
) -> Result<u8, Failure> {
    let settings = cx.env.pipeline(project)?;
    let session = debforge::workflow::open_session(&project.recipes, settings, &cx.printer)?;
    if let Some(note) = debforge::workflow::base::closure_note(&session) {
        debforge::report::note(&cx.printer, note);
    }
    let fetched = debforge::workflow::resolve_and_fetch(&session, locked, &cx.printer);
    cx.printer.finish();
    let fetched = fetched?;
    let mut summary = format!(
        "{} packages verified in {}",
        fetched.packages.len(),
        session.settings.cache.display()
    );
    if let Some(dir) = to {
        // And what the lab's base reads whole: the offline build reads it
        // from the snapshot too.
        let mut sources = fetched.sources.clone();
        sources.extend(debforge::workflow::base::source_files(&session)?);
        pipeline::write_snapshot(dir, &fetched.packages, &sources, &fetched.lock)?;
        summary.push_str(&format!(
            "; snapshot in {} (use it offline with --source-dir)",
            dir.display()
        ));
    }
    output::fetched(&fetched.packages, &summary);
    Ok(EXIT_OK)
}
