//! `debforge publish`: to a directory, rsync or S3, in the safe order.

use super::prelude::*;

use debforge::publish::Target;
use debforge::workflow::publish::{PublishSettings, publish};

pub(crate) fn run_publish(
    cx: &Context,
    to: &str,
    out: &Path,
    endpoint: Option<&str>,
    dry_run: bool,
    json: bool,
) -> Result<u8, Failure> {
    let settings = PublishSettings {
        out: out.to_path_buf(),
        target: Target::parse(to, endpoint)?,
        dry_run,
        hooks: cx.env.hooks.clone(),
    };
    let report = publish(&settings, &cx.printer)?;
    output::publish_summary(&report, json);
    Ok(EXIT_OK)
}
