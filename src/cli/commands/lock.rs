//! `debforge lock`: resolve every recipe and write the lock file.

use super::prelude::*;

pub(crate) fn run_lock(cx: &Context, project: &ProjectArgs) -> Result<u8, Failure> {
    let settings = cx.env.pipeline(project)?;
    let session = debforge::workflow::open_session(&project.recipes, settings, &cx.printer)?;
    if let Some(note) = debforge::workflow::base::closure_note(&session) {
        debforge::report::note(&cx.printer, note);
    }
    let fetched = debforge::workflow::resolve_and_fetch(&session, false, &cx.printer);
    cx.printer.finish();
    // Written by `resolve_and_fetch`, where it did not hold this already.
    let fetched = fetched?;
    output::fetched(
        &fetched.packages,
        &format!(
            "locked {} packages in {}",
            fetched.packages.len(),
            session.lock_path().display()
        ),
    );
    Ok(EXIT_OK)
}
