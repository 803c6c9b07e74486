//! The command line: `args` (clap definitions), `commands/` (one file per
//! command), `output` (the one place that decides what the user sees) and
//! `progress` (bars or lines). Errors become a `Failure`: message, hint,
//! exit code 2.

pub(crate) mod args;
mod commands;
pub(crate) mod output;
pub(crate) mod progress;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;


use debforge::pipeline::{self, PipelineError, Session};

use args::{BundleCommand, Cli, Command, DebCommand, ProjectArgs};
use commands::{
    build, bundle, fetch, history, index, keygen, lock, policy, publish, rollback, serve, vercmp,
    verify,
};

/// Exit codes, documented in the README.
pub const EXIT_OK: u8 = 0;
pub const EXIT_FALSE: u8 = 1;
pub const EXIT_ERROR: u8 = 2;

pub(crate) fn passphrase(file: Option<&std::path::Path>) -> Result<Option<String>, Failure> {
    if let Some(f) = file {
        let text = debforge::input::read_to_string(f, debforge::input::limit::PASSPHRASE).map_err(
            |e| {
                Failure::new(format!(
                    "{}: cannot read the passphrase file: {e}",
                    f.display()
                ))
            },
        )?;
        return Ok(Some(text.trim_end_matches(['\n', '\r']).to_string()));
    }
    Ok(std::env::var("DEBFORGE_KEY_PASSPHRASE")
        .ok()
        .filter(|p| !p.is_empty()))
}

/// A failure to show the user: the message, and what to do about it.
pub struct Failure {
    message: String,
    hint: Option<String>,
}

impl Failure {
    pub(crate) fn new(message: impl ToString) -> Failure {
        Failure {
            message: message.to_string(),
            hint: None,
        }
    }
    pub(crate) fn hint(mut self, hint: Option<impl ToString>) -> Failure {
        self.hint = hint.map(|h| h.to_string());
        self
    }
}

/// Any library error: its message, and its hint (which lives beside it).
impl<E: std::fmt::Display + debforge::error::Hint> From<E> for Failure {
    fn from(e: E) -> Self {
        let hint = e.hint();
        Failure::new(&e).hint(hint)
    }
}

pub fn run() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Vercmp { a, op, b } => vercmp::vercmp(&a, &op, &b),
        Command::Lock(project) => lock::run_lock(&project),
        Command::Fetch {
            project,
            to,
            locked,
        } => fetch::run_fetch(&project, to.as_deref(), locked),
        Command::Build {
            project,
            keys,
            locked,
            out,
            force,
            mirror,
            keep,
        } => build::run_build(
            &project,
            &keys,
            locked,
            &out,
            force,
            mirror.as_deref(),
            keep,
        ),
        Command::Keygen {
            keys,
            algo,
            name,
            email,
            expire_days,
            passphrase_file,
            add,
        } => keygen::run_keygen(
            &keys,
            algo,
            &name,
            email.as_deref(),
            expire_days,
            passphrase_file.as_deref(),
            add,
        ),
        Command::Index {
            dir,
            cache,
            no_cache,
        } => index::run_index(&dir, cache, no_cache),
        Command::Verify { dir, keyring, json } => verify::run_verify(&dir, keyring, json),
        Command::Bundle {
            verify: Some(BundleCommand::Verify { bundle }),
            ..
        } => bundle::run_bundle_verify(&bundle),
        Command::Bundle {
            verify: None,
            output,
            out,
        } => bundle::run_bundle(output, &out),
        Command::Serve { listen, out } => serve::run_serve(&listen, &out),
        Command::Publish {
            to,
            out,
            endpoint,
            dry_run,
            json,
            generation: None,
            ..
        } => publish::run_publish(&to, &out, endpoint.as_deref(), dry_run, json),
        Command::Publish {
            to,
            out,
            endpoint,
            dry_run,
            json,
            generation: Some(n),
            keys,
            cache,
        } => rollback::run_publish_generation(
            &to,
            &out,
            endpoint.as_deref(),
            dry_run,
            json,
            &keys,
            cache,
            rollback::Which::Number(n),
        ),
        Command::Rollback {
            to,
            out,
            endpoint,
            dry_run,
            json,
            keys,
            cache,
        } => rollback::run_publish_generation(
            &to,
            &out,
            endpoint.as_deref(),
            dry_run,
            json,
            &keys,
            cache,
            rollback::Which::BeforeTheServed,
        ),
        Command::History { out, json } => history::run_history(&out, json),
        Command::Diff {
            upstream: true,
            json,
            project,
            ..
        } => history::run_diff_upstream(&project, json),
        Command::Diff {
            a, b, out, json, ..
        } => history::run_diff(a, b, &out, json),
        Command::Policy {
            packages,
            out,
            preferences,
            with_index,
        } => policy::run_policy(&packages, &out, preferences, &with_index),
        Command::Deb(DebCommand::Info { file, json }) => commands::deb::deb_info(&file, json),
        Command::Deb(DebCommand::Contents { file, json }) => {
            commands::deb::deb_contents(&file, json)
        }
        Command::Deb(DebCommand::Build(args)) => commands::deb::deb_build(args),
        Command::Deb(DebCommand::Repack(args)) => commands::deb::deb_repack(args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            output::error(&f.message, f.hint.as_deref());
            ExitCode::from(EXIT_ERROR)
        }
    }
}

pub(crate) fn open_session<'a>(
    project: &ProjectArgs,
    progress: &'a progress::Progress,
) -> Result<Session<'a>, Failure> {
    project.check_project()?;
    let recipes = debforge::recipe::load(&project.recipes)?;
    Ok(Session::new(recipes, project.settings()?, progress)?)
}

/// Resolve, check the lock, fetch: what lock, fetch and build share.
pub(crate) fn resolve_and_fetch(
    session: &Session,
    progress: &progress::Progress,
    locked: bool,
) -> Result<
    (
        Vec<pipeline::Fetched>,
        Vec<pipeline::OpenSourceFiles>,
        debforge::recipe::lock::Lock,
    ),
    Failure,
> {
    let old = session.read_lock()?;
    if locked && old.is_none() {
        // Said before the network: --locked cannot work without the lock.
        return Err(PipelineError::NoLock {
            path: session.lock_path().to_path_buf(),
        }
        .into());
    }
    let (resolved, sources) = session.resolve(old.as_ref())?;
    if locked {
        // Fail before downloading anything that the lock does not allow.
        session.check_lock(&resolved, true)?;
    }
    if progress.has_bars() {
        progress.expect_total(session.bytes_to_fetch(&resolved));
    }
    let fetched = session.fetch(&resolved);
    progress.finish();
    session.save_records();
    let fetched = fetched?;
    let resolved: Vec<_> = fetched.iter().map(|f| f.resolved.clone()).collect();
    let (lock, changed) = session.check_lock(&resolved, locked)?;
    if changed {
        session.write_lock(&lock)?;
        output::note(&format!("wrote {}", session.lock_path().display()));
    }
    Ok((fetched, sources, lock))
}

pub(crate) fn source_date_epoch() -> Result<Option<u64>, Failure> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) if !v.is_empty() => v.trim().parse::<u64>().map(Some).map_err(|_| {
            Failure::new(format!(
                "SOURCE_DATE_EPOCH={v:?} is not a whole number of seconds"
            ))
            .hint(Some(
                "set it to e.g. $(git log -1 --format=%ct), or unset it",
            ))
        }),
        _ => Ok(None),
    }
}

pub(crate) fn default_cache_dir() -> Result<PathBuf, Failure> {
    match (std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME")) {
        (Some(x), _) if !x.is_empty() => Ok(PathBuf::from(x).join("debforge")),
        (_, Some(h)) => Ok(PathBuf::from(h).join(".cache/debforge")),
        _ => Err(Failure::new(
            "no cache directory: set --cache, XDG_CACHE_HOME or HOME",
        )),
    }
}
