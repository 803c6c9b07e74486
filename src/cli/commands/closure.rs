//! `debforge closure`: what the lab's base lacks, from a trusted source.

use super::prelude::*;

use debforge::workflow::closure::{ClosureSettings, closure};

pub(crate) fn run_closure(
    cx: &Context,
    project: &ProjectArgs,
    keys: &KeyArgs,
    source: String,
    architecture: String,
    write: bool,
) -> Result<u8, Failure> {
    let settings = ClosureSettings {
        build: debforge::workflow::build::BuildSettings {
            pipeline: cx.env.pipeline(project)?,
            recipes: project.recipes.clone(),
            keys: settings::keys(keys)?,
            locked: false,
            out: PathBuf::from("repo-out"),
            force: false,
            mirror: None,
            keep: 1,
            dates: cx.env.dates()?,
            hooks: cx.env.hooks.clone(),
        },
        source: source.clone(),
        architecture,
        write,
    };
    let report = closure(&settings, &cx.printer);
    cx.printer.finish();
    let r = report?;
    let mut text = format!(
        "{} package(s) from source '{source}' for the base:\n",
        r.pulled.len()
    );
    text.push_str(&output::closure_lines(
        &r.pulled,
        &r.lacking,
        &format!("'{source}'"),
    ));
    for w in &r.written {
        text.push_str(&format!("wrote {}\n", w.display()));
    }
    for f in &r.refused {
        text.push_str(&format!("refused {f}\n"));
    }
    for k in &r.kept {
        text.push_str(&format!(
            "kept {} (a recipe of that name exists)\n",
            k.display()
        ));
    }
    if !r.written.is_empty() {
        text.push_str(
            "next: debforge build (it locks and fetches them through the source's signed index)\n",
        );
    }
    output::plain(&text);
    Ok(if r.lacking.is_empty() {
        EXIT_OK
    } else {
        EXIT_FALSE
    })
}
