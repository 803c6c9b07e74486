//! `debforge lock`: resolve every recipe and write the lock file.

use super::prelude::*;

pub(crate) fn run_lock(project: &ProjectArgs) -> Result<u8, Failure> {
    let progress = progress::Progress::new();
    let session = open_session(project, &progress)?;
    let (fetched, _, lock) = resolve_and_fetch(&session, &progress, false)?;
    session.write_lock(&lock)?;
    output::fetched(
        &fetched,
        &format!(
            "locked {} packages in {}",
            fetched.len(),
            session.lock_path().display()
        ),
    );
    Ok(EXIT_OK)
}
