//! `debforge publish --generation N` and `debforge rollback`: an earlier
//! generation published again, from the build output's pool.

use super::prelude::*;

use debforge::publish::Target;
use debforge::workflow::publish::{GenerationSettings, PublishSettings, Which, publish_generation};

#[allow(clippy::too_many_arguments)]
pub(crate) fn run_publish_generation(
    cx: &Context,
    to: &str,
    out: &Path,
    endpoint: Option<&str>,
    dry_run: bool,
    json: bool,
    keys: &KeyArgs,
    cache: Option<PathBuf>,
    which: Which,
) -> Result<u8, Failure> {
    let target = Target::parse(to, endpoint)?;
    let settings = GenerationSettings {
        publish: PublishSettings {
            out: out.to_path_buf(),
            target: target.clone(),
            dry_run,
            hooks: cx.env.hooks.clone(),
        },
        which,
        keys: settings::keys(keys)?,
        records: cache
            .or_else(|| cx.env.cache.clone())
            .map(|c| c.join(debforge::repo::pool::RECORDS_FILE)),
        now: cx.env.dates.now,
    };
    let report = publish_generation(&settings, &cx.printer);
    cx.printer.finish();
    let report = report?;
    output::publish_summary(&report.publish, json);
    if !json {
        cx.printer.note(&format!(
            "{} generation {} ({} packages) to {target}, dated {}; on lab machines: sudo apt-get update && sudo apt-get dist-upgrade",
            if dry_run { "would publish" } else { "published" },
            report.generation,
            report.packages,
            debforge::format::date::format_rfc2822(report.date)
        ));
    }
    Ok(EXIT_OK)
}
