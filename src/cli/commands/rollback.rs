//! `debforge publish --generation N` and `debforge rollback`: an earlier
//! generation published again, from the build output's pool.

use super::prelude::*;

use debforge::publish::{PublishError, Target, publish, published};
use debforge::repo::generations::{self, Generation};

/// Which generation to publish.
pub(crate) enum Which {
    Number(u32),
    /// The one before the generation the target serves now (`rollback`).
    BeforeTheServed,
}

fn publish_failure(e: PublishError) -> Failure {
    Failure::from(e)
}

fn repo_failure(e: debforge::repo::RepoError) -> Failure {
    Failure::from(e)
}

pub(crate) fn run_publish_generation(
    to: &str,
    out: &Path,
    endpoint: Option<&str>,
    dry_run: bool,
    json: bool,
    keys: &KeyArgs,
    cache: Option<PathBuf>,
    which: Which,
) -> Result<u8, Failure> {
    let target = Target::parse(to, endpoint).map_err(publish_failure)?;
    let all = generations::list(out).map_err(repo_failure)?;
    if all.is_empty() {
        return Err(super::history::none_recorded(out));
    }
    // What the target serves now: the Release in force (its Date is the
    // floor for ours) and, for a rollback, which generation that is.
    let served = published(&target).map_err(publish_failure)?;
    let g: &Generation = match which {
        Which::Number(n) => all.iter().find(|g| g.number == n).ok_or_else(|| {
            Failure::new(format!(
                "no generation {n} in {} (it has {})",
                generations::dir_of(out).display(),
                numbers(&all)
            ))
            .hint(Some("`debforge history` lists them"))
        })?,
        Which::BeforeTheServed => {
            let current = generations::matching(&all, &served.pool).ok_or_else(|| {
                Failure::new(format!(
                    "{target}: what it serves ({} packages) is none of the generations recorded in {}",
                    served.pool.len(),
                    generations::dir_of(out).display()
                ))
                .hint(Some(
                    "choose one with `debforge publish --to TARGET --generation N` (`debforge history` lists them)",
                ))
            })?;
            all.iter()
                .rev()
                .find(|g| g.number < current.number)
                .ok_or_else(|| {
                    Failure::new(format!(
                        "{target} serves generation {}, the first recorded: there is none to go back to",
                        current.number
                    ))
                    .hint(Some("`debforge history` lists the generations"))
                })?
        }
    };
    let pass = passphrase(keys.passphrase_file.as_deref())?;
    let signing: Vec<_> = debforge::keys::load_signing_keys(&keys.keys, pass.as_deref())
        ?
        .into_iter()
        .map(|k| k.key)
        .collect();
    // Lab machines that go back install that generation's repo-config
    // package, and with it its keyring: the Releases after it must be
    // signed by a key it has.
    let ours: Vec<String> = signing.iter().map(|k| k.fingerprint()).collect();
    if !g.keys.is_empty() && !ours.iter().any(|f| g.keys.contains(f)) {
        return Err(Failure::new(format!(
            "generation {} was signed by {}; the keys in {} are {}: machines that went back to it would refuse every later Release",
            g.number,
            g.keys.join(", "),
            keys.keys.display(),
            ours.join(", ")
        ))
        .hint(Some(
            "sign with a key that generation trusts (keep the old key beside the new one in KEYS/signing/), or publish a generation built with the current key",
        )));
    }
    // A fresh Date, later than the Release in force: apt 1.6 treats an
    // older Release as if nothing had changed and says nothing.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let date = served.date.map_or(now, |d| now.max(d + 1));
    // The build's records (digests by file identity, control paragraphs by
    // SHA256): a pool file unchanged since it was recorded is not read
    // again; any other is hashed as it is linked and so checked against the
    // manifest's SHA256.
    let cache = match cache {
        Some(c) => Some(c),
        None => default_cache_dir().ok(),
    };
    let records = debforge::repo::pool::DigestStore::new(cache.map(|c| c.join("records.json")));
    let progress = progress::Progress::new();
    let dir = generations::materialize(out, g, &all, &signing, date, &records, &progress)
        .map_err(repo_failure);
    progress.finish();
    let dir = dir?;
    records.save();
    let mut printer = output::PublishPrinter::new(json);
    // A test hook (tests/integration/rollback.rs): `REL:MARKER` stops just
    // before REL is published, creating MARKER and waiting for it to go,
    // so a test can kill the rollback there.
    let pause = std::env::var("DEBFORGE_TEST_PAUSE_BEFORE").ok();
    let pause = pause.as_deref().and_then(|p| p.split_once(':'));
    let report = publish(&dir, &target, dry_run, &mut |event| {
        printer.event(&event);
        if let Some((rel, marker)) = pause
            && event.path == rel
        {
            let _ = std::fs::write(marker, b"");
            while Path::new(marker).exists() {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    });
    // The materialized copy is links and small indexes; it goes either way
    // (a killed run's is replaced by the next).
    let _ = std::fs::remove_dir_all(&dir);
    if let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) {
        for what in ["stamp", "lock"] {
            let _ =
                std::fs::remove_file(parent.join(format!(".{}.{what}", name.to_string_lossy())));
        }
    }
    let report = report.map_err(publish_failure)?;
    printer.summary(&report);
    if !json {
        output::note(&format!(
            "{} generation {} ({} packages) to {target}, dated {}; on lab machines: sudo apt-get update && sudo apt-get dist-upgrade",
            if dry_run {
                "would publish"
            } else {
                "published"
            },
            g.number,
            g.packages.len(),
            debforge::format::date::format_rfc2822(date)
        ));
    }
    Ok(EXIT_OK)
}

fn numbers(all: &[Generation]) -> String {
    all.iter()
        .map(|g| g.number.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
