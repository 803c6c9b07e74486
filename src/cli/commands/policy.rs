//! `debforge policy`: what apt would pick, like `apt-cache policy`.

use super::prelude::*;

pub(crate) fn run_policy(
    packages: &[String],
    out: &Path,
    preferences: Option<PathBuf>,
    with_index: &[PathBuf],
) -> Result<u8, Failure> {
    let pref_path = preferences.unwrap_or_else(|| out.join(pipeline::PREFERENCES_NAME));
    let entries = debforge::repo::policy::policy(out, &pref_path, with_index, packages)?;
    output::policy(&entries);
    Ok(EXIT_OK)
}
