//! `debforge publish`: to a directory, rsync or S3, in the safe order.

use super::prelude::*;

pub(crate) fn run_publish(
    to: &str,
    out: &std::path::Path,
    endpoint: Option<&str>,
    dry_run: bool,
    json: bool,
) -> Result<u8, Failure> {
    use debforge::publish::{Target, publish};
    let target = Target::parse(to, endpoint).map_err(Failure::from)?;
    let mut printer = output::PublishPrinter::new(json);
    let report =
        publish(out, &target, dry_run, &mut |event| printer.event(&event)).map_err(Failure::from)?;
    printer.summary(&report);
    Ok(EXIT_OK)
}
