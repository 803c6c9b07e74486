//! `debforge verify`: integrity and installability of a repository.

use super::prelude::*;

pub(crate) fn run_verify(
    dir: &std::path::Path,
    keyring: Option<PathBuf>,
    json: bool,
) -> Result<u8, Failure> {
    let keyring = keyring.unwrap_or_else(|| dir.join(format!("{}.gpg", pipeline::KEYRING_NAME)));
    let bytes = std::fs::read(&keyring).map_err(|e| {
        Failure::new(format!(
            "{}: cannot read the keyring: {e}",
            keyring.display()
        ))
        .hint(Some("pass --keyring FILE"))
    })?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let report = debforge::repo::verify::verify(dir, &bytes, now);
    output::verify_report(&report, dir, json);
    Ok(if report.problems.is_empty() {
        EXIT_OK
    } else {
        EXIT_FALSE
    })
}
