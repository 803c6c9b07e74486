//! The command line: `args` (clap definitions), `commands/` (one file per
//! command), `output` (the one place that decides what the user sees) and
//! `progress` (bars or lines). Errors become a `Failure`: message, hint,
//! exit code 2.

pub(crate) mod args;
mod commands;
pub(crate) mod output;
pub(crate) mod printer;
pub(crate) mod settings;

use std::process::ExitCode;

use clap::Parser;

use args::{BundleCommand, Cli, Command, DebCommand};
use commands::{
    build, bundle, closure, fetch, history, index, keygen, lock, policy, publish, rollback, serve,
    vercmp, verify,
};

/// Exit codes, documented in the README.
pub const EXIT_OK: u8 = 0;
pub const EXIT_FALSE: u8 = 1;
pub const EXIT_ERROR: u8 = 2;

/// What every command gets: the one printer and the environment, read once.
pub(crate) struct Context {
    pub(crate) printer: printer::Printer,
    pub(crate) env: settings::Environment,
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
    let json = matches!(
        &cli.command,
        Command::Publish { json: true, .. } | Command::Rollback { json: true, .. }
    );
    let cx = Context {
        printer: printer::Printer::new(cli.quiet, json),
        env: settings::Environment::read(),
    };
    match dispatch(&cx, cli.command) {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            output::error(&f.message, f.hint.as_deref());
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// One command to its file in `commands/`.
fn dispatch(cx: &Context, command: Command) -> Result<u8, Failure> {
    match command {
        Command::Vercmp { a, op, b } => vercmp::vercmp(cx, &a, &op, &b),
        Command::Lock(project) => lock::run_lock(cx, &project),
        Command::Closure {
            project,
            source,
            keys,
            architecture,
            write,
        } => closure::run_closure(cx, &project, &keys, source, architecture, write),
        Command::Fetch {
            project,
            to,
            locked,
        } => fetch::run_fetch(cx, &project, to.as_deref(), locked),
        c @ Command::Build { .. } => dispatch_build(cx, c),
        c @ Command::Keygen { .. } => dispatch_keygen(cx, c),
        Command::Index {
            dir,
            cache,
            no_cache,
        } => index::run_index(cx, &dir, cache, no_cache),
        Command::Verify {
            dir,
            keyring,
            against,
            closure_from,
            json,
        } => verify::run_verify(cx, &dir, keyring, &against, closure_from.as_deref(), json),
        Command::Bundle {
            verify:
                Some(BundleCommand::Verify {
                    bundle,
                    from,
                    keyring,
                }),
            ..
        } => bundle::run_bundle_verify(&bundle, from.as_deref(), keyring.as_deref()),
        Command::Bundle {
            verify: None,
            output,
            out,
            from,
            keys,
        } => bundle::run_bundle(cx, output, &out, from, &keys),
        Command::Serve {
            listen,
            out,
            max_connections,
        } => serve::run_serve(cx, &listen, &out, max_connections),
        c @ (Command::Publish { .. } | Command::Rollback { .. }) => dispatch_publish(cx, c),
        c @ (Command::History { .. } | Command::Diff { .. } | Command::Policy { .. }) => {
            dispatch_history(cx, c)
        }
        Command::Deb(DebCommand::Info { file, json }) => commands::deb::deb_info(&file, json),
        Command::Deb(DebCommand::Contents { file, json }) => {
            commands::deb::deb_contents(&file, json)
        }
        Command::Deb(DebCommand::Build(args)) => commands::deb::deb_build(cx, args),
        Command::Deb(DebCommand::Repack(args)) => commands::deb::deb_repack(cx, args),
    }
}

fn dispatch_build(cx: &Context, command: Command) -> Result<u8, Failure> {
    let Command::Build {
        project,
        keys,
        locked,
        out,
        force,
        mirror,
        keep,
    } = command
    else {
        unreachable!("dispatch sends Build here")
    };
    let mirror = mirror.as_deref();
    build::run_build(cx, &project, &keys, locked, &out, force, mirror, keep)
}

fn dispatch_keygen(cx: &Context, command: Command) -> Result<u8, Failure> {
    let Command::Keygen {
        keys,
        algo,
        name,
        email,
        expire_days,
        passphrase_file,
        add,
    } = command
    else {
        unreachable!("dispatch sends Keygen here")
    };
    let (email, passphrase_file) = (email.as_deref(), passphrase_file.as_deref());
    keygen::run_keygen(
        cx,
        &keys,
        algo,
        &name,
        email,
        expire_days,
        passphrase_file,
        add,
    )
}

/// `publish` (of the output, or of a generation) and `rollback`.
fn dispatch_publish(cx: &Context, command: Command) -> Result<u8, Failure> {
    use debforge::workflow::publish::Which;
    match command {
        Command::Publish {
            to,
            out,
            endpoint,
            dry_run,
            json,
            generation: None,
            ..
        } => publish::run_publish(cx, &to, &out, endpoint.as_deref(), dry_run, json),
        Command::Publish {
            to,
            out,
            endpoint,
            dry_run,
            json,
            generation: Some(n),
            keys,
            cache,
        } => {
            let endpoint = endpoint.as_deref();
            let which = Which::Number(n);
            rollback::run_publish_generation(
                cx, &to, &out, endpoint, dry_run, json, &keys, cache, which,
            )
        }
        Command::Rollback {
            to,
            out,
            endpoint,
            dry_run,
            json,
            keys,
            cache,
        } => {
            let endpoint = endpoint.as_deref();
            let which = Which::BeforeTheServed;
            rollback::run_publish_generation(
                cx, &to, &out, endpoint, dry_run, json, &keys, cache, which,
            )
        }
        _ => unreachable!("dispatch sends publish and rollback here"),
    }
}

/// `history`, `diff` and `policy`: what a repository holds.
fn dispatch_history(cx: &Context, command: Command) -> Result<u8, Failure> {
    match command {
        Command::History { out, json } => history::run_history(&out, json),
        Command::Diff {
            upstream: true,
            json,
            project,
            ..
        } => history::run_diff_upstream(cx, &project, json),
        Command::Diff {
            a, b, out, json, ..
        } => history::run_diff(a, b, &out, json),
        Command::Policy {
            packages,
            out,
            preferences,
            with_index,
        } => policy::run_policy(&packages, &out, preferences, &with_index),
        _ => unreachable!("dispatch sends history, diff and policy here"),
    }
}
