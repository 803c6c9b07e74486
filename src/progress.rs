//! Progress events: the library reports long work here and never prints;
//! the binary's one printer decides what the user sees (bars on a terminal,
//! plain lines in a pipe). Depends on nothing else in the crate.

use std::time::Duration;

/// The kinds of local work that report [`Event::Work`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Task {
    /// Repacking upstream packages (new control member, scripts merged).
    Repack,
    /// Placing package files into the pool (linked or copied, hashed).
    Pool,
    /// Writing the Packages indexes.
    Index,
    /// Signing Release files.
    Sign,
    /// Writing a bundle.
    Bundle,
    /// Publishing files to a target.
    Publish,
}

impl Task {
    /// What the printer calls it.
    pub fn label(self) -> &'static str {
        match self {
            Task::Repack => "repack",
            Task::Pool => "pool",
            Task::Index => "index",
            Task::Sign => "sign",
            Task::Bundle => "bundle",
            Task::Publish => "publish",
        }
    }
}

/// Progress of long work, for the one printer in the binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A download starts (or resumes from `resumed_from` bytes).
    Start {
        name: String,
        total: u64,
        resumed_from: u64,
    },
    /// `bytes` of `name` have arrived so far (cumulative).
    Progress { name: String, bytes: u64 },
    /// `name` is complete and verified.
    Done { name: String },
    /// `name` was already in the cache, verified earlier (not read again
    /// from its source).
    Cached { name: String },
    /// `name` was copied, verified, from a local file (a snapshot).
    Copied { name: String, from: String },
    /// Something the user should know that does not stop the run.
    Warning { message: String },
    /// `package` is rebuilt with `suffix` although its recipe sets none: it
    /// names the exact version of `follows`, which has one.
    Carried {
        package: String,
        suffix: String,
        follows: String,
    },
    /// Local work in steps: `done` of `total` steps of `task` are
    /// finished; `item` is what is being worked on now (a package, a file).
    Work {
        task: Task,
        done: u64,
        total: u64,
        item: String,
    },
    /// A transient failure; the next attempt starts after `wait`.
    Retry {
        name: String,
        attempt: u32,
        reason: String,
        wait: Duration,
    },
}

pub trait Observer: Sync {
    fn event(&self, event: Event);
}

impl<F: Fn(Event) + Sync> Observer for F {
    fn event(&self, event: Event) {
        self(event)
    }
}

/// An observer that ignores everything (tests, library use).
pub struct Quiet;
impl Observer for Quiet {
    fn event(&self, _: Event) {}
}
