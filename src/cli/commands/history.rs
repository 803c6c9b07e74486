//! `debforge history` and `debforge diff`: the repository's generations.

use super::prelude::*;

use debforge::repo::generations::{self, Generation};

fn load(out: &Path) -> Result<Vec<Generation>, Failure> {
    generations::list(out).map_err(|e| Failure::from(PipelineError::Repo(Box::new(e))))
}

/// The failure of a command that needs a generation where none is recorded.
pub(crate) fn none_recorded(out: &Path) -> Failure {
    Failure::new(format!(
        "{}: no generations recorded (none in {})",
        out.display(),
        generations::dir_of(out).display()
    ))
    .hint(Some(
        "each `debforge build` that changes something records one; pass that build's --out",
    ))
}

pub(crate) fn run_history(out: &Path, json: bool) -> Result<u8, Failure> {
    let all = load(out)?;
    if json {
        output::plain(&format!(
            "{}\n",
            serde_json::to_string_pretty(&all).unwrap_or_default()
        ));
        return Ok(EXIT_OK);
    }
    if all.is_empty() {
        return Err(none_recorded(out));
    }
    let mut text = String::new();
    for (i, g) in all.iter().enumerate() {
        let prev = i.checked_sub(1).map(|p| &all[p]);
        text.push_str(&format!(
            "{:>4}  {}  {}\n",
            g.number,
            debforge::format::date::format_rfc2822(g.date),
            generations::summary(prev, g)
        ));
    }
    output::plain(&text);
    Ok(EXIT_OK)
}

pub(crate) fn run_diff(
    a: Option<u32>,
    b: Option<u32>,
    out: &Path,
    json: bool,
) -> Result<u8, Failure> {
    let all = load(out)?;
    let find = |n: u32| {
        all.iter().find(|g| g.number == n).ok_or_else(|| {
            Failure::new(format!(
                "no generation {n} in {} (it has {})",
                generations::dir_of(out).display(),
                all.iter()
                    .map(|g| g.number.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .hint(Some("`debforge history` lists them"))
        })
    };
    let newer = match b {
        Some(n) => find(n)?,
        None => all.last().ok_or_else(|| {
            Failure::new(format!("{}: no generations recorded", out.display())).hint(Some(
                "each `debforge build` that changes something records one",
            ))
        })?,
    };
    let older = match a {
        Some(n) => find(n)?,
        None => all
            .iter()
            .rev()
            .find(|g| g.number < newer.number)
            .ok_or_else(|| {
                Failure::new(format!("generation {} has none before it", newer.number))
                    .hint(Some("`debforge history` lists them"))
            })?,
    };
    let d = generations::diff(older, newer);
    if json {
        output::plain(&format!(
            "{}\n",
            serde_json::to_string_pretty(&d).unwrap_or_default()
        ));
    } else if d.is_empty() {
        output::plain(&format!(
            "generations {} and {}: no difference\n",
            d.from, d.to
        ));
    } else {
        output::plain(&format!(
            "generation {} -> {}:\n{}",
            d.from,
            d.to,
            generations::render(&d)
        ));
    }
    Ok(if d.is_empty() { EXIT_OK } else { EXIT_FALSE })
}

/// `diff --upstream`: the lock against what each upstream offers now.
pub(crate) fn run_diff_upstream(
    cx: &Context,
    project: &ProjectArgs,
    json: bool,
) -> Result<u8, Failure> {
    use debforge::pipeline::UpstreamChange as C;
    let settings = cx.env.pipeline(project)?;
    let session = debforge::workflow::open_session(&project.recipes, settings, &cx.printer)?;
    let lock = session.read_lock()?.ok_or_else(|| {
        Failure::from(PipelineError::NoLock {
            path: session.lock_path().to_path_buf(),
        })
    })?;
    let changes = session.upstream_changes(&lock);
    cx.printer.finish();
    let changes = changes?;
    if json {
        output::plain(&format!(
            "{}\n",
            serde_json::to_string_pretty(&changes).unwrap_or_default()
        ));
    } else if changes.is_empty() {
        output::plain(&format!(
            "{}: every locked file is still offered, unchanged, and nothing newer\n",
            session.lock_path().display()
        ));
    } else {
        let mut text = String::new();
        for c in &changes {
            text.push_str(&match c {
                C::Removed { package, architecture, version } => format!(
                    "- {package} {version} ({architecture}): no longer offered upstream; a build with this lock needs the cache or a snapshot\n"
                ),
                C::ChangedBytes { package, architecture, version, locked, offered } => format!(
                    "! {package} {version} ({architecture}): UPSTREAM'S BYTES CHANGED AT THE SAME VERSION (locked sha256 {locked}, offered {offered})\n"
                ),
                C::Newer { package, architecture, locked, offered } => format!(
                    "↑ {package} {locked} ({architecture}): upstream also offers {}\n",
                    offered.join(", ")
                ),
            });
        }
        output::plain(&text);
    }
    Ok(if changes.is_empty() {
        EXIT_OK
    } else {
        EXIT_FALSE
    })
}
