//! `debforge build`: the whole signed repository.

use super::prelude::*;

use debforge::workflow::build::{BuildSettings, build};

#[allow(clippy::too_many_arguments)]
pub(crate) fn run_build(
    cx: &Context,
    project: &ProjectArgs,
    keys: &KeyArgs,
    locked: bool,
    out: &Path,
    force: bool,
    mirror: Option<&str>,
    keep: u32,
) -> Result<u8, Failure> {
    let settings = BuildSettings {
        pipeline: cx.env.pipeline(project)?,
        recipes: project.recipes.clone(),
        keys: settings::keys(keys)?,
        locked,
        out: out.to_path_buf(),
        force,
        mirror: mirror.map(str::to_string),
        keep,
        dates: cx.env.dates()?,
        hooks: cx.env.hooks.clone(),
    };
    let report = build(&settings, &cx.printer);
    cx.printer.finish();
    let report = report?;
    let r = &report.output;
    let keys = format!(
        "signed by {} key{}; keyring {}, pins {}",
        report.keys,
        if report.keys == 1 { "" } else { "s" },
        r.keyring,
        r.preferences
    );
    use debforge::workflow::build::FromStamp;
    let summary = if report.from_stamp == Some(FromStamp::Redated) {
        format!(
            "{} packages in {}, unchanged since the last build but for the date: only the Release was dated and signed again ({keys})",
            r.packages.len(),
            out.display()
        )
    } else if report.from_stamp == Some(FromStamp::Unchanged) {
        format!(
            "{} packages in {}, unchanged since the last build (no input or output file changed): nothing was read or written ({keys})",
            r.packages.len(),
            out.display()
        )
    } else if r.unchanged {
        format!(
            "{} packages in {}, unchanged since the last build: nothing was written ({keys})",
            r.packages.len(),
            out.display()
        )
    } else {
        format!(
            "wrote {} packages into {} ({keys})",
            r.packages.len(),
            out.display()
        )
    };
    output::built(&r.packages, &summary);
    if let Some((n, new)) = report.generation {
        cx.printer.note(&if new {
            format!("recorded generation {n} (debforge history, debforge diff)")
        } else {
            format!("generation {n} still in force (the same packages, pins and keys)")
        });
    }
    cx.printer.note(&next_steps(out, &report));
    Ok(EXIT_OK)
}

/// What to do with the repository now.
fn next_steps(out: &Path, report: &debforge::workflow::build::BuildReport) -> String {
    let mut text = format!(
        "next: serve it on the LAN with `debforge serve --out {o}`, or publish it with `debforge publish --out {o} --to DIR|rsync://HOST/MODULE/PATH|s3://BUCKET/PREFIX`",
        o = out.display()
    );
    if let Some((filename, source)) = &report.repo_config {
        text.push_str(&format!(
            "\n  on each lab machine: sudo apt install ./{} (from {}), then sudo apt-get update",
            filename.rsplit('/').next().unwrap_or(filename),
            out.join(filename).display()
        ));
        if let Some(line) = source {
            text.push_str(&format!("\n  (its apt source: {line})"));
        }
    }
    text
}
