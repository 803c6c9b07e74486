//! What the library has to say while it works: progress of downloads and
//! local work, steps of a publish, notes and warnings. The library never
//! prints; it reports [`Event`]s to a [`Reporter`], and the binary's one
//! printer decides what the user sees (bars on a terminal, plain lines in a
//! pipe, nothing with `--quiet`). `debforge serve` has its own concern,
//! `serve::ServeReporter`, drawn by the same printer.

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

/// What the library reports, for the one printer in the binary.
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
    /// What a workflow did or what to do next (a key made, a lock written,
    /// a generation recorded).
    Note { message: String },
    /// The bytes about to be downloaded, for a total bar.
    Total { bytes: u64 },
    /// A file of a publish, in the order the target gets it (a user, or a
    /// test, sees how far a long publish has gone).
    Published {
        step: PublishStep,
        path: String,
        dry_run: bool,
    },
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

/// What a publish does with one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PublishStep {
    Copy,
    Keep,
    Delete,
}

/// Where events go. The printer in the binary is one; tests collect them.
pub trait Reporter: Sync {
    fn event(&self, event: Event);
    /// Whether a [`Event::Total`] is worth computing (a bar will show it).
    fn wants_total(&self) -> bool {
        false
    }
}

impl<F: Fn(Event) + Sync> Reporter for F {
    fn event(&self, event: Event) {
        self(event)
    }
}

/// An observer that ignores everything (tests, library use).
pub struct Quiet;
impl Reporter for Quiet {
    fn event(&self, _: Event) {}
}

/// Short for reporting a note or a warning.
pub fn note(r: &dyn Reporter, message: impl Into<String>) {
    r.event(Event::Note {
        message: message.into(),
    });
}

pub fn warning(r: &dyn Reporter, message: impl Into<String>) {
    r.event(Event::Warning {
        message: message.into(),
    });
}

/// The first `shown` of `names` and how many more: a message names a few
/// of thousands, not all on one line.
pub fn some_of<S: AsRef<str>>(names: &[S], shown: usize) -> String {
    let listed: Vec<&str> = names.iter().take(shown).map(AsRef::as_ref).collect();
    let mut text = listed.join(", ");
    if names.len() > shown {
        text.push_str(&format!(" and {} more", names.len() - shown));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::some_of;

    #[test]
    fn a_long_list_is_named_by_its_first_few_and_a_count() {
        assert_eq!(some_of(&["a", "b"], 3), "a, b");
        assert_eq!(some_of(&["a", "b", "c"], 3), "a, b, c");
        assert_eq!(some_of(&["a", "b", "c", "d", "e"], 3), "a, b, c and 2 more");
        assert_eq!(some_of::<&str>(&[], 3), "");
    }
}
