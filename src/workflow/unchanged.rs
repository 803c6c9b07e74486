//! The no-op `build --locked`, from stats alone. A `--locked` build whose
//! every input is local (path recipes, the cache; no signed source to ask,
//! no `--source-dir`) and dated by `SOURCE_DATE_EPOCH` is a function of its
//! settings, the files it read and the output it left. It leaves a build
//! stamp (`.<out>.build-stamp`) naming all three by identity; the next such
//! build stats the same files and, when nothing changed, answers with the
//! stamp's report without parsing a recipe or opening a package. Anything
//! else, or any doubt, takes the whole build (which checks again by
//! digest, and writes nothing when the output is already right).
//!
//! Identities are taken before the build reads its inputs, so an edit made
//! while it runs shows as a change next time; the output's is taken under
//! its lock by `repo::write` itself.

use std::path::{Path, PathBuf};

use super::build::{BuildReport, BuildSettings};
use crate::files::{FileIdentity, tree_digest};
use crate::report::{Event, Reporter};

/// Bumped when what the stamp means changes.
const STAMP_FORMAT: u32 = 1;

/// What a stamped build said that a user should see again from the no-op
/// (progress is not replayed).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
enum Said {
    Warning(String),
    Note(String),
    Carried {
        package: String,
        suffix: String,
        follows: String,
    },
}

impl Said {
    fn of(e: &Event) -> Option<Said> {
        Some(match e {
            Event::Warning { message } => Said::Warning(message.clone()),
            Event::Note { message } => Said::Note(message.clone()),
            Event::Carried {
                package,
                suffix,
                follows,
            } => Said::Carried {
                package: package.clone(),
                suffix: suffix.clone(),
                follows: follows.clone(),
            },
            _ => return None,
        })
    }

    fn event(self) -> Event {
        match self {
            Said::Warning(message) => Event::Warning { message },
            Said::Note(message) => Event::Note { message },
            Said::Carried {
                package,
                suffix,
                follows,
            } => Event::Carried {
                package,
                suffix,
                follows,
            },
        }
    }
}

/// Passes every event on and keeps those worth saying again.
pub(super) struct Recorder<'r> {
    inner: &'r dyn Reporter,
    said: std::sync::Mutex<Vec<Said>>,
}

impl<'r> Recorder<'r> {
    pub(super) fn new(inner: &'r dyn Reporter) -> Self {
        Recorder {
            inner,
            said: Default::default(),
        }
    }
}

impl Reporter for Recorder<'_> {
    fn event(&self, event: Event) {
        if let Some(s) = Said::of(&event) {
            self.said.lock().expect("recorder").push(s);
        }
        self.inner.event(event);
    }
    fn wants_total(&self) -> bool {
        self.inner.wants_total()
    }
}

/// `.<out>.build-stamp`.
#[derive(serde::Serialize, serde::Deserialize)]
struct BuildStamp {
    format: u32,
    /// [`settings_key`] of the build.
    settings: String,
    /// The package files the build read outside the project (path recipes'
    /// files, cache files), by path.
    inputs: Vec<PathBuf>,
    /// [`Probe::inputs_digest`] before the build read them.
    identity: String,
    /// The output's tree digest as the build left it (under its lock).
    tree: String,
    /// `.<out>.generations` as the build left it.
    generations: String,
    said: Vec<Said>,
    output: crate::repo::OutputReport,
    repo_config: Option<(String, Option<String>)>,
}

/// A build that may be answered from its stamp, or stamped after it ran.
pub(super) struct Probe<'s> {
    s: &'s BuildSettings,
    settings: String,
    path: PathBuf,
    keys: usize,
}

impl<'s> Probe<'s> {
    /// `None` where the build depends on more than local files and its
    /// settings: without `--locked` (a recipe may resolve anew), without
    /// `SOURCE_DATE_EPOCH` (the Release is dated by the clock), with
    /// `--source-dir`, or with a test hook.
    pub(super) fn new(
        s: &'s BuildSettings,
        signing: &[crate::openpgp::sign::SigningKey],
    ) -> Option<Self> {
        let eligible = s.locked
            && s.dates.source_date_epoch.is_some()
            && s.pipeline.source_dirs.is_empty()
            && s.hooks.pause_in_swap.is_none()
            && s.hooks.pause_before.is_none();
        eligible.then(|| Probe {
            s,
            settings: settings_key(s, signing),
            path: crate::files::beside(&s.out, "build-stamp"),
            keys: signing.len(),
        })
    }

    /// The stamp's report when nothing it names changed (replaying what
    /// the stamped build said); `None` to build.
    pub(super) fn unchanged(&self, reporter: &dyn Reporter) -> Option<BuildReport> {
        let bytes = crate::input::read(&self.path, crate::input::limit::LOCK).ok()?;
        let stamp: BuildStamp = serde_json::from_slice(&bytes).ok()?;
        if stamp.format != STAMP_FORMAT || stamp.settings != self.settings {
            return None;
        }
        // Under the output's lock: a build writing it now is not half seen.
        let _lock = crate::repo::lock_output(&self.s.out).ok()?;
        let (identity, tree, generations) = std::thread::scope(|scope| {
            let tree = scope.spawn(|| tree_digest(&self.s.out, &|_| false).ok());
            let generations = scope.spawn(|| self.generations_digest());
            let identity = self.inputs_digest(&stamp.inputs);
            (
                identity,
                tree.join().ok().flatten(),
                generations.join().ok().flatten(),
            )
        });
        let same = identity.as_deref() == Some(stamp.identity.as_str())
            && tree.as_deref() == Some(stamp.tree.as_str())
            && generations.as_deref() == Some(stamp.generations.as_str());
        if !same {
            return None;
        }
        for s in stamp.said {
            reporter.event(s.event());
        }
        let mut output = stamp.output;
        output.unchanged = true;
        Some(BuildReport {
            output,
            keys: self.keys,
            generation: None,
            repo_config: stamp.repo_config,
            from_stamp: true,
        })
    }

    /// Forgets the last stamp: this build may change what it describes.
    pub(super) fn forget(&self) {
        let _ = std::fs::remove_file(&self.path);
    }

    /// The project's and the keys' trees, before the build reads them.
    pub(super) fn project_digest(&self) -> Option<String> {
        let out = std::path::absolute(&self.s.out).ok()?;
        let cache = std::path::absolute(&self.s.pipeline.cache).ok()?;
        let beside = crate::files::beside(&out, "");
        let beside = beside.as_os_str().as_encoded_bytes();
        // Never the output, the cache or what debforge keeps beside the
        // output, should they lie inside the project (the walk's paths are
        // absolute: its roots are).
        let skip = |p: &Path| {
            p == out || p == cache || p.as_os_str().as_encoded_bytes().starts_with(beside)
        };
        let mut h = crate::digest::KeyHasher::new();
        for root in [&self.s.recipes, &self.s.keys.dir] {
            h.update(tree_digest(&std::path::absolute(root).ok()?, &skip).ok()?);
        }
        Some(h.finish_hex())
    }

    /// The project digest and the identity of every package file, as one.
    fn inputs_digest(&self, inputs: &[PathBuf]) -> Option<String> {
        let mut h = crate::digest::KeyHasher::new();
        h.update(self.project_digest()?);
        for f in inputs {
            let id = FileIdentity::of(&std::fs::metadata(f).ok()?);
            h.update(format!("\0{}\0{id:?}", f.display()));
        }
        Some(h.finish_hex())
    }

    fn generations_digest(&self) -> Option<String> {
        let dir = crate::repo::generations::dir_of(&self.s.out);
        if !dir.exists() {
            return Some(String::new());
        }
        // The records and the kept indexes' directory, not each kept index.
        let top = |p: &Path| p.parent() != Some(dir.as_path());
        tree_digest(&dir, &top).ok()
    }

    /// Records what this build read and left, for the next one. Best
    /// effort: without a stamp the next build does the work.
    pub(super) fn record(
        &self,
        project: Option<String>,
        inputs: Vec<(PathBuf, FileIdentity)>,
        recorder: Recorder,
        report: &BuildReport,
    ) {
        let Some(project) = project else { return };
        if report.output.tree.is_empty() {
            return;
        }
        // A package file whose change time alone moved since it was first
        // stat'ed was linked into the pool by this build: the same bytes.
        let mut h = crate::digest::KeyHasher::new();
        h.update(project);
        for (f, before) in &inputs {
            let Ok(m) = std::fs::metadata(f) else { return };
            let now = FileIdentity::of(&m);
            if !before.same_bytes_ignoring_links(&now) {
                return;
            }
            h.update(format!("\0{}\0{now:?}", f.display()));
        }
        let Some(generations) = self.generations_digest() else {
            return;
        };
        let stamp = BuildStamp {
            format: STAMP_FORMAT,
            settings: self.settings.clone(),
            inputs: inputs.into_iter().map(|(f, _)| f).collect(),
            identity: h.finish_hex(),
            tree: report.output.tree.clone(),
            generations,
            said: recorder.said.into_inner().unwrap_or_default(),
            output: report.output.clone(),
            repo_config: report.repo_config.clone(),
        };
        if let Ok(bytes) = serde_json::to_vec(&stamp) {
            let _ = crate::files::write_atomic(&self.path, &bytes, crate::files::Existing::Replace);
        }
    }
}

/// The identity of each package file, before the build reads it.
pub(super) fn identities(files: &[PathBuf]) -> Vec<(PathBuf, FileIdentity)> {
    files
        .iter()
        .filter_map(|f| Some((f.clone(), FileIdentity::of(&std::fs::metadata(f).ok()?))))
        .collect()
}

/// Everything of the settings that shapes the output: this binary, where
/// the project, the cache, the keys and the output are, the options, the
/// date, the signing keys. Not the clock, not the passphrase.
fn settings_key(s: &BuildSettings, signing: &[crate::openpgp::sign::SigningKey]) -> String {
    let mut h = crate::digest::KeyHasher::new();
    h.update(format!(
        "debforge-build-stamp {} {STAMP_FORMAT}\0",
        env!("CARGO_PKG_VERSION")
    ));
    // A rebuilt binary of the same version may write other bytes.
    let exe = std::env::current_exe()
        .and_then(std::fs::metadata)
        .map(|m| format!("{:?}", FileIdentity::of(&m)))
        .unwrap_or_default();
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    h.update(format!(
        "{exe}\0{:?}\0{:?}\0{:?}\0{:?}\0{:?}\0{:?}\0{}\0{}\0{:?}\0",
        abs(&s.recipes),
        abs(&s.pipeline.cache),
        abs(&s.keys.dir),
        abs(&s.out),
        s.pipeline.overrides,
        s.mirror,
        s.keep,
        s.force,
        s.dates.source_date_epoch,
    ));
    for k in signing {
        h.update(k.fingerprint());
        h.update("\0");
    }
    h.finish_hex()
}
