//! The workflows behind the commands, whole: `build`, `publish` (of the
//! output or of a recorded generation, and `rollback`), `bundle`, and the
//! resolve-and-fetch that lock, fetch and build share. Each takes one
//! settings value — resolved once by the binary from the arguments and the
//! environment (dates, the cache, the passphrase, test hooks) — and a
//! [`Reporter`]; each returns a report for the binary to print. Nothing here
//! reads the environment or prints (uv's `settings.rs` + `commands/` split).

pub mod base;
pub mod build;
pub mod bundle;
pub mod closure;
pub mod publish;
mod unchanged;

use std::path::{Path, PathBuf};

use crate::error::Hint;
use crate::pipeline::{self, PipelineError, Session};
use crate::report::{Event, Reporter};

/// The clock and `SOURCE_DATE_EPOCH`, read once per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dates {
    /// Seconds since the epoch, now.
    pub now: i64,
    pub source_date_epoch: Option<i64>,
}

/// The signing keys' directory and their passphrase.
#[derive(Debug, Clone)]
pub struct KeySettings {
    pub dir: PathBuf,
    pub passphrase: Option<String>,
}

/// Points where a test stops a workflow to kill it there (the fault tests);
/// empty in every normal run. The binary fills them from `DEBFORGE_TEST_*`.
#[derive(Debug, Clone, Default)]
pub struct TestHooks {
    /// Inside the output swap of `build`: create this file, wait until it
    /// is removed.
    pub pause_in_swap: Option<PathBuf>,
    /// Before publishing this path (relative to the repository): create
    /// the marker, wait until it is removed.
    pub pause_before: Option<(String, PathBuf)>,
}

/// A workflow's failure: the library error that stopped it, or a check of
/// the workflow's own. Every variant has its hint ([`Hint`]).
#[derive(Debug, thiserror::Error)]
pub enum WorkflowError {
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    #[error(transparent)]
    Repo(#[from] crate::repo::RepoError),
    #[error(transparent)]
    Keys(#[from] crate::keys::KeyError),
    #[error(transparent)]
    Recipe(#[from] crate::recipe::RecipeError),
    #[error(transparent)]
    Publish(#[from] crate::publish::PublishError),
    #[error(transparent)]
    Bundle(#[from] crate::bundle::BundleError),
    #[error(transparent)]
    Base(#[from] crate::repo::against::AgainstError),
    #[error(
        "SOURCE_DATE_EPOCH={date} dates the Release {}, in the future: apt refuses it as not valid yet",
        crate::format::date::format_rfc2822(*date)
    )]
    DatedInTheFuture { date: i64 },
    #[error(
        "SOURCE_DATE_EPOCH={date} and valid-for-days give a Release valid until {}, already past: apt refuses it as expired",
        crate::format::date::format_rfc2822(*until)
    )]
    AlreadyExpired { date: i64, until: i64 },
    #[error(
        "none of the keys in {} is one the lab trusts (the keyring the base bundle left, else {}'s): the air-gapped side would refuse the delta",
        crate::error::ShortPath(keys),
        crate::error::ShortPath(out)
    )]
    NotTheRepositorysKeys { keys: PathBuf, out: PathBuf },
    #[error(
        "{}: no [base] (files = [...] or sources = [...]): the closure is what that base lacks",
        crate::error::ShortPath(file)
    )]
    NoBase { file: PathBuf },
    #[error(
        "the packages the base lacks are not the ones {} records (--locked):{}{}",
        crate::error::ShortPath(lock),
        if added.is_empty() { String::new() } else { format!("\n  lacking now: {}", added.join(", ")) },
        if removed.is_empty() { String::new() } else { format!("\n  no longer needed: {}", removed.join(", ")) }
    )]
    ClosureChanged {
        lock: PathBuf,
        added: Vec<String>,
        removed: Vec<String>,
    },
    #[error("--mirror {mirror:?}: {reason}")]
    BadMirror { mirror: String, reason: String },
    #[error("{}: no generations recorded (none in {})", crate::error::ShortPath(out), crate::error::ShortPath(&crate::repo::generations::dir_of(out)))]
    NoGenerations { out: PathBuf },
    #[error("no generation {number} in {} (it has {have})", crate::error::ShortPath(&crate::repo::generations::dir_of(out)))]
    NoSuchGeneration {
        number: u32,
        out: PathBuf,
        have: String,
    },
    #[error(
        "{target}: what it serves ({packages} packages) is none of the generations recorded in {}",
        crate::error::ShortPath(&crate::repo::generations::dir_of(out))
    )]
    ServesNoGeneration {
        target: String,
        packages: usize,
        out: PathBuf,
    },
    #[error("{target} serves generation {number}, the first recorded: there is none to go back to")]
    NothingBefore { target: String, number: u32 },
    #[error(
        "generation {number} was signed by {signed}; the keys in {} are {ours}: machines that went back to it would refuse every later Release",
        crate::error::ShortPath(keys)
    )]
    KeyNotTrusted {
        number: u32,
        signed: String,
        keys: PathBuf,
        ours: String,
    },
}

impl Hint for WorkflowError {
    fn hint(&self) -> Option<String> {
        use WorkflowError as W;
        let text = match self {
            W::Pipeline(e) => return e.hint(),
            W::Repo(e) => return e.hint(),
            W::Keys(e) => return e.hint(),
            W::Recipe(e) => return e.hint(),
            W::Publish(e) => return e.hint(),
            W::Bundle(e) => return e.hint(),
            W::Base(e) => return e.hint(),
            W::DatedInTheFuture { .. } => {
                "set SOURCE_DATE_EPOCH to a time in the past (e.g. $(git log -1 --format=%ct)), or unset it"
            }
            W::AlreadyExpired { .. } => {
                "use a later SOURCE_DATE_EPOCH, a longer valid-for-days in repository.toml, or unset SOURCE_DATE_EPOCH"
            }
            W::BadMirror { .. } => "e.g. --mirror http://apt.lab.example/gpu/",
            W::ClosureChanged { .. } => {
                "the recipes or the base changed: build once without --locked (it picks the closure and writes the lock), review and commit the lock"
            }
            W::NoBase { .. } => {
                "name the lab machines' base in repository.toml: [base] files = [\"base/lab-01.status\"] (a copy of a lab machine's /var/lib/dpkg/status)"
            }
            W::NoGenerations { .. } => {
                "each `debforge build` that changes something records one; pass that build's --out"
            }
            W::NoSuchGeneration { .. } | W::NothingBefore { .. } => "`debforge history` lists them",
            W::ServesNoGeneration { .. } => {
                "choose one with `debforge publish --to TARGET --generation N` (`debforge history` lists them)"
            }
            W::NotTheRepositorysKeys { .. } => {
                "pass the --keys directory the repository was built with; after a key rotation with no old key left, carry a full bundle"
            }
            W::KeyNotTrusted { .. } => {
                "sign with a key that generation trusts (keep the old key beside the new one in KEYS/signing/), or publish a generation built with the current key"
            }
        };
        Some(text.into())
    }
}

/// What lock, fetch and build share: resolve, check the lock, fetch.
pub struct Fetched {
    pub packages: Vec<pipeline::Fetched>,
    pub sources: Vec<pipeline::OpenSourceFiles>,
    pub lock: crate::recipe::lock::Lock,
    /// The SHA256 of the lock file as this run leaves it: of the bytes it
    /// wrote, or read (empty where there is none).
    pub lock_sha256: String,
}

/// A session on the project in `recipes` (the recipes loaded, with the
/// packages the last build picked for the base, the sources checked
/// against `settings`).
pub fn open_session<'a>(
    recipes: &Path,
    settings: pipeline::Settings,
    reporter: &'a dyn Reporter,
) -> Result<Session<'a>, WorkflowError> {
    open_session_with(recipes, settings, reporter, None, None)
}

/// The same, with `picked` as the packages picked for the base (`None`:
/// the lock's).
fn open_session_with<'a>(
    dir: &Path,
    settings: pipeline::Settings,
    reporter: &'a dyn Reporter,
    picked: Option<Vec<crate::recipe::PackageRecipe>>,
    seen: Option<crate::recipe::Seen>,
) -> Result<Session<'a>, WorkflowError> {
    let mut recipes = crate::recipe::load_remembering(dir, Some(&settings.cache), seen)?;
    let config = crate::recipe::load_base(dir)?;
    base::check_sources(&config, &recipes)?;
    match picked {
        Some(p) => base::add_picked(&mut recipes, p),
        None => base::add_picked_from_lock(&mut recipes, &config)?,
    }
    Ok(Session::new(recipes, settings, reporter)?)
}

/// Resolves every recipe, checks the lock (with `locked`, before anything
/// is downloaded), fetches and verifies, and writes the lock if it changed.
pub fn resolve_and_fetch(
    session: &Session,
    locked: bool,
    reporter: &dyn Reporter,
) -> Result<Fetched, WorkflowError> {
    let (packages, sources) = resolve_and_fetch_unsettled(session, locked, reporter)?;
    let entries = packages.iter().map(pipeline::Fetched::lock_entry);
    let (lock, settled) = settle_lock(session, entries, locked, reporter)?;
    Ok(Fetched {
        packages,
        sources,
        lock,
        lock_sha256: settled.sha256,
    })
}

/// [`resolve_and_fetch`] but for the lock: the packages resolved, checked
/// against the lock (with `locked`, before anything is downloaded) and
/// fetched, and the sources read; [`settle_lock`] then, on its own thread
/// where the caller has other work.
pub fn resolve_and_fetch_unsettled(
    session: &Session,
    locked: bool,
    reporter: &dyn Reporter,
) -> Result<(Vec<pipeline::Fetched>, Vec<pipeline::OpenSourceFiles>), WorkflowError> {
    require_lock(session, locked)?;
    let resolved = session.resolve()?;
    fetch_unsettled(session, resolved, locked, reporter)
}

/// Said before the network: `--locked` cannot work without the lock.
pub fn require_lock(session: &Session, locked: bool) -> Result<(), WorkflowError> {
    if locked && session.read_lock()?.is_none() {
        return Err(PipelineError::NoLock {
            path: session.lock_path().to_path_buf(),
        }
        .into());
    }
    Ok(())
}

/// [`resolve_and_fetch_unsettled`] once resolved (by
/// [`Session::resolve_releasing`], for a build).
pub fn fetch_unsettled(
    session: &Session,
    (resolved, sources): (Vec<pipeline::Resolved>, Vec<pipeline::OpenSourceFiles>),
    locked: bool,
    reporter: &dyn Reporter,
) -> Result<(Vec<pipeline::Fetched>, Vec<pipeline::OpenSourceFiles>), WorkflowError> {
    if locked {
        session.check_locked(&resolved)?;
    }
    if reporter.wants_total() {
        reporter.event(Event::Total {
            bytes: session.bytes_to_fetch(&resolved),
        });
    }
    let fetched = session.fetch(resolved);
    session.save_records();
    Ok((fetched?, sources))
}

/// The lock of the packages whose `entries` these are: written unless it
/// says the same (compared with the file, with `locked`), and the lock
/// file as the run leaves it.
pub fn settle_lock(
    session: &Session,
    entries: impl Iterator<Item = std::sync::Arc<crate::recipe::lock::LockedPackage>>,
    locked: bool,
    reporter: &dyn Reporter,
) -> Result<(crate::recipe::lock::Lock, pipeline::SettledLock), WorkflowError> {
    let (lock, settled) = session.settle_lock(entries, locked)?;
    say_written(session, &settled, reporter);
    Ok((lock, settled))
}

/// [`settle_lock`] where the caller keeps no lock (a build): each entry
/// goes once written ([`Session::settle_lock_releasing`]).
pub fn settle_lock_releasing(
    session: &Session,
    entries: impl Iterator<Item = std::sync::Arc<crate::recipe::lock::LockedPackage>>,
    locked: bool,
    reporter: &dyn Reporter,
) -> Result<pipeline::SettledLock, WorkflowError> {
    let settled = session.settle_lock_releasing(entries, locked)?;
    say_written(session, &settled, reporter);
    Ok(settled)
}

fn say_written(session: &Session, settled: &pipeline::SettledLock, reporter: &dyn Reporter) {
    if settled.written.is_some() {
        crate::report::note(reporter, format!("wrote {}", session.lock_path().display()));
    }
}
