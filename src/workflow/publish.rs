//! `publish`: the repository to a target; `publish --generation N` and
//! `rollback`: a recorded generation published again.

use std::path::{Path, PathBuf};

use super::{KeySettings, TestHooks, WorkflowError};
use crate::openpgp::sign::SigningKey;
use crate::publish::{PublishReport, Target};
use crate::repo::generations::{self, Generation};
use crate::report::{Event, Reporter};

/// Which generation to publish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    Number(u32),
    /// The one before the generation the target serves now (`rollback`).
    BeforeTheServed,
}

/// Everything `publish` needs, resolved once.
#[derive(Debug, Clone)]
pub struct PublishSettings {
    /// The build output.
    pub out: PathBuf,
    pub target: Target,
    pub dry_run: bool,
    pub hooks: TestHooks,
}

/// Everything publishing a recorded generation needs, resolved once.
#[derive(Debug, Clone)]
pub struct GenerationSettings {
    pub publish: PublishSettings,
    pub which: Which,
    pub keys: KeySettings,
    /// The build's records (digests by file identity), when there is a cache.
    pub records: Option<PathBuf>,
    /// Seconds since the epoch, now.
    pub now: i64,
}

/// What publishing a generation did.
pub struct GenerationReport {
    pub publish: PublishReport,
    pub generation: u32,
    pub packages: usize,
    /// The Release's Date.
    pub date: i64,
}

/// Publishes `out` to the target, in the safe order.
pub fn publish(
    s: &PublishSettings,
    reporter: &dyn Reporter,
) -> Result<PublishReport, WorkflowError> {
    publish_dir(&s.out, s, reporter)
}

fn publish_dir(
    dir: &Path,
    s: &PublishSettings,
    reporter: &dyn Reporter,
) -> Result<PublishReport, WorkflowError> {
    let report = match &s.hooks.pause_before {
        None => crate::publish::publish(dir, &s.target, s.dry_run, reporter),
        Some((rel, marker)) => {
            let paused = PauseBefore {
                rel,
                marker,
                inner: reporter,
            };
            crate::publish::publish(dir, &s.target, s.dry_run, &paused)
        }
    };
    Ok(report?)
}

/// A reporter that stops before one path is published (a test hook).
struct PauseBefore<'a> {
    rel: &'a str,
    marker: &'a Path,
    inner: &'a dyn Reporter,
}

impl Reporter for PauseBefore<'_> {
    fn event(&self, event: Event) {
        let here = matches!(&event, Event::Published { path, .. } if path == self.rel);
        self.inner.event(event);
        if here {
            crate::files::pause_at(self.marker);
        }
    }
}

/// Publishes a recorded generation again: re-signed with a fresh Date
/// (later than the Release in force), from the build output's pool.
pub fn publish_generation(
    s: &GenerationSettings,
    reporter: &dyn Reporter,
) -> Result<GenerationReport, WorkflowError> {
    let out = &s.publish.out;
    let all = generations::list(out)?;
    if all.is_empty() {
        return Err(WorkflowError::NoGenerations { out: out.clone() });
    }
    // What the target serves now: the Release in force (its Date is the
    // floor for ours) and, for a rollback, which generation that is.
    let served = crate::publish::published(&s.publish.target)?;
    let g = choose(&all, s.which, &served.pool, out, &s.publish.target)?;
    let signing = trusted_keys(g, &s.keys, s.now)?;
    // A fresh Date, later than the Release in force: apt 1.6 treats an
    // older Release as if nothing had changed and says nothing.
    let date = served.date.map_or(s.now, |d| s.now.max(d + 1));
    // The build's records: a pool file unchanged since it was recorded is
    // not read again; any other is hashed as it is linked and so checked
    // against the manifest's SHA256.
    let records = crate::repo::pool::DigestStore::new(s.records.clone());
    // The generation is published from the output's pool: no build may
    // change it meanwhile.
    let _building = crate::repo::lock_output(out)?;
    let dir = generations::materialize(out, g, &all, &signing, date, &records, reporter)?;
    records.save();
    let report = publish_dir(&dir, &s.publish, reporter);
    // The materialized copy is links and small indexes; it goes either way
    // (a killed run's is replaced by the next).
    generations::remove_materialized(&dir);
    Ok(GenerationReport {
        publish: report?,
        generation: g.number,
        packages: g.packages.len(),
        date,
    })
}

fn choose<'a>(
    all: &'a [Generation],
    which: Which,
    served: &std::collections::BTreeMap<String, String>,
    out: &Path,
    target: &Target,
) -> Result<&'a Generation, WorkflowError> {
    match which {
        Which::Number(n) => {
            all.iter()
                .find(|g| g.number == n)
                .ok_or_else(|| WorkflowError::NoSuchGeneration {
                    number: n,
                    out: out.to_path_buf(),
                    have: all
                        .iter()
                        .map(|g| g.number.to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                })
        }
        Which::BeforeTheServed => {
            let current = generations::matching(all, served).ok_or_else(|| {
                WorkflowError::ServesNoGeneration {
                    target: target.to_string(),
                    packages: served.len(),
                    out: out.to_path_buf(),
                }
            })?;
            all.iter()
                .rev()
                .find(|g| g.number < current.number)
                .ok_or_else(|| WorkflowError::NothingBefore {
                    target: target.to_string(),
                    number: current.number,
                })
        }
    }
}

/// The signing keys, if one of them is a key generation `g` trusts: lab
/// machines that go back install that generation's repo-config package, and
/// with it its keyring, so the Releases after it must be signed by a key it
/// has.
fn trusted_keys(
    g: &Generation,
    keys: &KeySettings,
    now: i64,
) -> Result<Vec<SigningKey>, WorkflowError> {
    let signing: Vec<_> =
        crate::keys::load_signing_keys(&keys.dir, keys.passphrase.as_deref(), now)?
            .into_iter()
            .map(|k| k.key)
            .collect();
    let ours: Vec<String> = signing.iter().map(|k| k.fingerprint()).collect();
    if !g.keys.is_empty() && !ours.iter().any(|f| g.keys.contains(f)) {
        return Err(WorkflowError::KeyNotTrusted {
            number: g.number,
            signed: g.keys.join(", "),
            keys: keys.dir.clone(),
            ours: ours.join(", "),
        });
    }
    Ok(signing)
}
