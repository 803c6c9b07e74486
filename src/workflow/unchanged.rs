//! Builds answered from stats alone. A build whose every input is local
//! (path recipes, the cache; no signed source asked, no `--source-dir`) is
//! a function of its settings, its date, the files it read and the output it
//! left. It leaves a build stamp (`.<out>.build-stamp`) naming them by
//! identity. The next build stats the same files and, when none changed,
//! answers with the stamp's report without parsing a recipe or opening a
//! package; when only the date moved (no `SOURCE_DATE_EPOCH`: the Release is
//! dated by the clock), only the Release is dated and signed again. Anything
//! else, or any doubt, takes the whole build (which checks again by digest,
//! and writes nothing when the output is already right).
//!
//! Identities are taken before the build reads its inputs (a cache file,
//! named by its digest, once it is in the cache), so an edit made while it
//! runs shows as a change next time; the output's is taken under its lock
//! by `repo` itself. The lock file a build writes is named by the
//! identity it has once written: the one its writer took as it renamed it,
//! where that identity can stand for the bytes written
//! ([`crate::files::FileIdentity::written_before_renamed`]), else after its
//! bytes are read back and checked to be the ones written.

use std::path::{Path, PathBuf};

use super::build::{BuildReport, BuildSettings};
use crate::files::{FileIdentity, tree_digest};
use crate::report::{Event, Reporter};

/// Bumped when what the stamp means changes (3: `project` on its own; 4:
/// identities hashed as bytes; 5: postcard, not JSON; 6: with a CRC-32).
const STAMP_FORMAT: u32 = 6;

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

    /// The reporter it passes events to (for what is not to be kept).
    pub(super) fn inner(&self) -> &'r dyn Reporter {
        self.inner
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

/// `.<out>.build-stamp`: [`StampHead`] first, read on its own.
#[derive(serde::Serialize, serde::Deserialize)]
struct BuildStamp<'r> {
    /// [`settings_key`] of the build.
    settings: String,
    /// The project's digest ([`Before`]'s, without the lock): where it
    /// differs (a recipe edited) nothing else needs a look.
    project: String,
    /// The Release's date.
    date: i64,
    /// The package files the build read outside the project (path recipes'
    /// files, cache files), by path.
    inputs: InputPaths<'r>,
    /// The project, the lock and the package files ([`Before`] and
    /// [`identities`]) as one digest.
    identity: String,
    /// The output's tree digest as the build left it (under its lock).
    tree: String,
    /// `.<out>.generations` as the build left it.
    generations: String,
    said: Vec<Said>,
    /// Borrowed when written (a report lists every package).
    output: std::borrow::Cow<'r, crate::repo::OutputReport>,
    repo_config: Option<(String, Option<String>)>,
}

/// What a build stamp is checked by first, the first fields of
/// [`BuildStamp`]: read without the rest (a stamp of thousands of packages
/// is megabytes).
#[derive(serde::Deserialize)]
struct StampHead<'a> {
    settings: &'a str,
    project: &'a str,
}

/// The build stamp's head ([`crate::files::write_cache`]).
const STAMP_MAGIC: &[u8; 8] = b"dfbuild\0";

/// A build that may be answered from its stamp, or stamped after it ran.
pub(super) struct Probe<'s> {
    s: &'s BuildSettings,
    settings: String,
    path: PathBuf,
    keys: usize,
}

impl<'s> Probe<'s> {
    /// `None` where the build may depend on more than local files and its
    /// settings (`--source-dir`), or under a test hook. (Whether it asks a
    /// signed source is known once it resolved: such a build is not
    /// stamped.)
    pub(super) fn new(
        s: &'s BuildSettings,
        signing: &[crate::openpgp::sign::SigningKey],
    ) -> Option<Self> {
        let eligible = s.pipeline.source_dirs.is_empty()
            && s.hooks.pause_in_swap.is_none()
            && s.hooks.pause_before.is_none();
        eligible.then(|| Probe {
            s,
            settings: settings_key(s, signing),
            path: crate::files::beside(&s.out, "build-stamp"),
            keys: signing.len(),
        })
    }

    /// What the stamp says of this build: nothing to do, only a new date,
    /// or (with any change, or any doubt) build.
    pub(super) fn check(&self, reporter: &dyn Reporter) -> Answer {
        let (stamp, before) = self.matching_stamp();
        let Some((stamp, walked)) = stamp else {
            return Answer::Build(before);
        };
        if stamp.date != self.date() {
            return Answer::Redate(Stamped(stamp, walked));
        }
        drop(walked);
        for s in stamp.said {
            reporter.event(s.event());
        }
        let mut output = stamp.output.into_owned();
        output.unchanged = true;
        Answer::Unchanged(BuildReport {
            output,
            keys: self.keys,
            generation: None,
            repo_config: stamp.repo_config,
            from_stamp: Some(super::build::FromStamp::Unchanged),
        })
    }

    /// The stamp, when the settings are the same and no file it names
    /// changed; and the project as found (for the build, when it did).
    fn matching_stamp(
        &self,
    ) -> (
        Option<(BuildStamp<'static>, crate::repo::Walked)>,
        Option<Before>,
    ) {
        // It holds the output's report: a manifest's bound, not a lock's.
        let bytes = crate::input::read_cache(
            &self.path,
            crate::input::limit::MANIFEST,
            STAMP_MAGIC,
            STAMP_FORMAT,
        );
        let head = bytes
            .as_deref()
            .and_then(|b| postcard::take_from_bytes::<StampHead>(b).ok())
            .map(|(h, _)| h)
            .filter(|h| h.settings == self.settings);
        let Some(head) = head else {
            return (None, self.before());
        };
        // Under the output's lock: a build writing it now is not half seen.
        let Ok(lock) = crate::repo::lock_output(&self.s.out) else {
            return (None, self.before());
        };
        // The project first: where it differs (a recipe edited, added or
        // removed: the usual change) the output needs no walk. Each walk
        // keeps every core busy on its own, so the output's after the
        // project's costs a no-op build nothing.
        let before = self.before();
        if before.as_ref().is_none_or(|b| b.project != head.project) {
            return (None, before);
        }
        // The output's walk on this thread; the stamp read whole, its
        // package files stat'ed and the generations walked on another.
        let (tree, stamped) = std::thread::scope(|scope| {
            let stamped = scope.spawn(|| {
                let stamp = postcard::from_bytes::<BuildStamp<'static>>(bytes.as_deref()?).ok()?;
                let identity = before.as_ref()?.with(&identities(stamp.inputs.read()?)?);
                Some((stamp, identity, self.generations_digest()))
            });
            let walked = crate::files::tree_entries(&self.s.out, &|_| false).ok();
            (walked, stamped.join().ok().flatten())
        });
        let (Some(mut entries), Some((stamp, identity, generations))) = (tree, stamped) else {
            return (None, before);
        };
        let tree = crate::files::digest_entries(&mut entries);
        let same = identity.as_deref() == Some(stamp.identity.as_str())
            && tree == stamp.tree
            && generations.as_deref() == Some(stamp.generations.as_str());
        // Held: a redate goes on from this walk, under this lock.
        let walked = crate::repo::Walked::new(lock, entries);
        (same.then_some((stamp, walked)), before)
    }

    /// The Release's date of this build.
    fn date(&self) -> i64 {
        self.s.dates.source_date_epoch.unwrap_or(self.s.dates.now)
    }

    /// After only the Release was dated anew: the stamp follows the output.
    pub(super) fn redated(&self, Stamped(mut stamp, _): Stamped, tree: String) -> BuildReport {
        stamp.date = self.date();
        stamp.tree = tree.clone();
        stamp.output.to_mut().tree = tree;
        self.write(&stamp);
        BuildReport {
            output: stamp.output.into_owned(),
            keys: self.keys,
            generation: None,
            repo_config: stamp.repo_config,
            from_stamp: None,
        }
    }

    /// Forgets the last stamp: this build may change what it describes.
    pub(super) fn forget(&self) {
        let _ = std::fs::remove_file(&self.path);
    }

    /// The project's and the keys' trees, and the lock file, before the
    /// build reads them.
    pub(super) fn before(&self) -> Option<Before> {
        let out = std::path::absolute(&self.s.out).ok()?;
        let cache = std::path::absolute(&self.s.pipeline.cache).ok()?;
        let lock = std::path::absolute(self.s.recipes.join(crate::recipe::LOCK_FILE)).ok()?;
        let beside = crate::files::beside(&out, "");
        let beside = beside.as_os_str().as_encoded_bytes();
        // Never the output, the cache or what debforge keeps beside the
        // output, should they lie inside the project; the lock file on its
        // own (a build may write it). The walk's paths are absolute: its
        // roots are.
        let skip = |p: &Path| {
            p == out
                || p == cache
                || p == lock
                || p.as_os_str().as_encoded_bytes().starts_with(beside)
        };
        // A project read through a link is not stamped: what it points to
        // may change with no trace here.
        let taken = std::time::SystemTime::now();
        let mut h = crate::digest::KeyHasher::new();
        let mut seen = None;
        for root in [&self.s.recipes, &self.s.keys.dir] {
            let root = std::path::absolute(root).ok()?;
            let mut entries = crate::files::tree_entries_without_links(&root, &skip).ok()?;
            h.update(crate::files::digest_entries(&mut entries));
            seen.get_or_insert_with(|| recipes_seen(&entries, taken));
        }
        let lock_identity = match std::fs::symlink_metadata(&lock) {
            // Through a link, a change to what it points to would not show.
            Ok(m) if m.file_type().is_symlink() => return None,
            Ok(m) => Some(FileIdentity::of(&m)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(_) => return None,
        };
        Some(Before {
            project: h.finish_hex(),
            lock: lock_identity,
            lock_path: lock,
            seen,
        })
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

    /// Records what this build read and left, for the next one: `inputs`
    /// as they were before it read them, `lock` the lock file as it left
    /// it. Best effort: without a stamp the next build does the work.
    pub(super) fn record(
        &self,
        before: Option<Before>,
        inputs: Inputs,
        lock: &crate::pipeline::SettledLock,
        recorder: Recorder,
        report: &BuildReport,
    ) {
        let Some(mut before) = before else { return };
        if report.output.tree.is_empty() || !before.lock_written(lock) {
            return;
        }
        let relinked = report.output.relinked.as_ref();
        let Some(identity) = before.with_after(&inputs, relinked) else {
            return;
        };
        let Some(generations) = self.generations_digest() else {
            return;
        };
        self.write(&BuildStamp {
            settings: self.settings.clone(),
            date: self.date(),
            project: before.project.clone(),
            inputs: InputPaths::Written(&inputs),
            identity,
            tree: report.output.tree.clone(),
            generations,
            said: recorder.said.into_inner().unwrap_or_default(),
            output: std::borrow::Cow::Borrowed(&report.output),
            repo_config: report.repo_config.clone(),
        });
    }

    /// Streamed to the file (a stamp of thousands of packages is megabytes).
    fn write(&self, stamp: &BuildStamp) {
        let _ = crate::files::write_cache(&self.path, STAMP_MAGIC, STAMP_FORMAT, stamp);
    }
}

/// What the stamp says of a build.
pub(super) enum Answer {
    Unchanged(BuildReport),
    /// Only the date moved: date and sign the Release again.
    Redate(Stamped),
    /// Build, with the project as found before anything was read.
    Build(Option<Before>),
}

/// A stamp that matched but for the date, and the output as walked to
/// see it did, still locked.
pub(super) struct Stamped(BuildStamp<'static>, crate::repo::Walked);

impl Stamped {
    /// The output as walked (and locked) when the stamp was found to
    /// describe it.
    pub(super) fn take_walked(&mut self) -> crate::repo::Walked {
        std::mem::take(&mut self.1)
    }
}

/// The project's and the keys' trees (less the lock file) and the lock
/// file, by identity, as a build found them.
pub(super) struct Before {
    project: String,
    lock: Option<FileIdentity>,
    lock_path: PathBuf,
    /// The package recipes among the project's files, as walked.
    seen: Option<crate::recipe::Seen>,
}

/// The package recipes (`packages/<name>`, regular files) of a walk of the
/// recipes directory begun at `taken`.
fn recipes_seen(
    entries: &[crate::files::TreeEntry],
    taken: std::time::SystemTime,
) -> crate::recipe::Seen {
    let files: Vec<_> = entries
        .iter()
        .filter(|e| e.mode & libc::S_IFMT == libc::S_IFREG)
        .filter_map(|e| {
            let name = e.rel.strip_prefix("packages/")?;
            // A name shown lossily names no file.
            (!name.contains(['/', char::REPLACEMENT_CHARACTER])).then(|| (name.into(), e.id))
        })
        .collect();
    crate::recipe::Seen::new(taken, files)
}

impl Before {
    /// The package recipes' files as this walk found them (taken: held
    /// only while the recipes are read).
    pub(super) fn take_seen(&mut self) -> Option<crate::recipe::Seen> {
        self.seen.take()
    }

    /// One digest of these and the package files' identities.
    fn with<P: AsRef<Path>>(&self, inputs: &[(P, FileIdentity)]) -> Option<String> {
        let mut h = self.hasher()?;
        for (f, id) in inputs {
            add_input(&mut h, f.as_ref(), id);
        }
        Some(h.finish_hex())
    }

    /// [`Before::with`] the package files' identities once the build
    /// linked them into the pool (`inputs` as they were before it read
    /// them). Only a file whose links the build changed (`relinked`;
    /// `None`: any) is stat'ed again: a link moves its change time, and
    /// must be all that did. Any other is named as it was read, so a change
    /// made to it since shows next time. `None` where one changed, or is
    /// gone. Stat'ed and digested a chunk at a time (memory: a list of
    /// every identity again, and its paths, was the end of a build's
    /// peak).
    fn with_after(
        &self,
        inputs: &Inputs,
        relinked: Option<&crate::repo::Inodes>,
    ) -> Option<String> {
        let again = |id: &FileIdentity| relinked.is_none_or(|r| r.contains(&(id.dev(), id.ino())));
        let mut h = self.hasher()?;
        let mut read = inputs.each().peekable();
        while read.peek().is_some() {
            let chunk: Vec<(PathBuf, FileIdentity)> = read
                .by_ref()
                .take(STAT_CHUNK)
                .collect::<std::io::Result<_>>()
                .ok()?;
            let stat: Vec<&Path> = chunk
                .iter()
                .filter(|(_, id)| again(id))
                .map(|(f, _)| f.as_path())
                .collect();
            let mut now = identities(&stat)?.into_iter();
            for (f, read) in &chunk {
                let id = if again(read) {
                    let (_, id) = now.next()?;
                    read.same_bytes_ignoring_links(&id).then_some(id)?
                } else {
                    *read
                };
                add_input(&mut h, f, &id);
            }
        }
        Some(h.finish_hex())
    }

    /// The digest's start: the project and the lock (`None` without one).
    fn hasher(&self) -> Option<crate::digest::KeyHasher> {
        let mut h = crate::digest::KeyHasher::new();
        h.update(&self.project);
        h.update(b"\0lock\0");
        h.update(self.lock?.to_bytes());
        Some(h)
    }

    /// Whether the lock file is what this build left (`lock`): the file it
    /// found or the one it wrote, by identity, else read back and hashed.
    /// Its identity follows a lock this build wrote.
    fn lock_written(&mut self, lock: &crate::pipeline::SettledLock) -> bool {
        let written = lock
            .written
            .and_then(|w| w.identity)
            .filter(FileIdentity::written_before_renamed);
        let stat = || {
            std::fs::symlink_metadata(&self.lock_path)
                .ok()
                .map(|m| FileIdentity::of(&m))
        };
        let now = stat();
        if now.is_some() && (now == self.lock || now == written) {
            self.lock = now;
            return true;
        }
        let read = crate::input::read(&self.lock_path, crate::input::limit::LOCK).ok();
        let read = read.map(|text| crate::digest::sha256_hex(&text));
        if now.is_none() || read.as_deref() != Some(lock.sha256.as_str()) || stat() != now {
            return false;
        }
        self.lock = now;
        true
    }
}

/// One package file's part of [`Before::with`].
fn add_input(h: &mut crate::digest::KeyHasher, f: &Path, id: &FileIdentity) {
    h.update(b"\0");
    h.update(f.as_os_str().as_encoded_bytes());
    h.update(b"\0");
    h.update(id.to_bytes());
}

/// Package files stat'ed at a time after a build (on every core).
const STAT_CHUNK: usize = 4096;

/// The package files a build read, each with its identity before it was
/// read, for its stamp: in a file of the cache's, not in memory (a path
/// and an identity a package, held from fetching to the end: 3.8 MB at
/// 20,000 packages, the paths' last holder once the write let the rest go).
/// Each is its path's length (4 bytes), the path, and
/// [`FileIdentity::to_bytes`].
pub(super) struct Inputs {
    spill: crate::files::SpillFile,
    count: usize,
}

impl Inputs {
    /// An empty list in `dir` (the cache); `None` where no file can be made
    /// (no stamp then: the next build does the work).
    pub(super) fn new(dir: &Path) -> Option<Inputs> {
        let spill = crate::files::SpillFile::new(Some(dir)).ok()?;
        Some(Inputs { spill, count: 0 })
    }

    /// Adds `path`, read as `id`.
    pub(super) fn push(&mut self, path: &Path, id: &FileIdentity) -> Option<()> {
        let bytes = path.as_os_str().as_encoded_bytes();
        let len = u32::try_from(bytes.len()).ok()?.to_le_bytes();
        for part in [&len[..], bytes, &id.to_bytes()] {
            self.spill.append(part).ok()?;
        }
        self.count += 1;
        Some(())
    }

    /// Each path and identity, in the order added.
    fn each(&self) -> impl Iterator<Item = std::io::Result<(PathBuf, FileIdentity)>> + '_ {
        use std::io::Read;
        use std::os::unix::ffi::OsStringExt;
        let mut r = self.spill.reader();
        (0..self.count).map(move |_| {
            let mut len = [0; 4];
            r.read_exact(&mut len)?;
            let mut path = vec![0; u32::from_le_bytes(len) as usize];
            r.read_exact(&mut path)?;
            let mut id = [0; 64];
            r.read_exact(&mut id)?;
            let path = PathBuf::from(std::ffi::OsString::from_vec(path));
            Ok((path, FileIdentity::from_bytes(&id)))
        })
    }
}

/// The package files a stamp names: read back from the build's list where
/// it is written (not copied: a path a package), as read otherwise. Either
/// is the same sequence of paths on disk.
enum InputPaths<'r> {
    Read(Vec<PathBuf>),
    Written(&'r Inputs),
}

impl InputPaths<'_> {
    /// The paths of a stamp that was read (`None` for one being written).
    fn read(&self) -> Option<&[PathBuf]> {
        match self {
            InputPaths::Read(paths) => Some(paths),
            InputPaths::Written(_) => None,
        }
    }
}

impl serde::Serialize for InputPaths<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeSeq};
        match self {
            InputPaths::Read(paths) => s.collect_seq(paths),
            InputPaths::Written(inputs) => {
                let mut seq = s.serialize_seq(Some(inputs.count))?;
                for input in inputs.each() {
                    seq.serialize_element(&input.map_err(S::Error::custom)?.0)?;
                }
                seq.end()
            }
        }
    }
}

impl<'de> serde::Deserialize<'de> for InputPaths<'_> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::deserialize(d).map(InputPaths::Read)
    }
}

/// The identity of each package file (`None` if one is gone): of what it
/// resolves to, so that a link pointed elsewhere shows.
/// Stat'ed on all cores: thousands of deep paths are a tenth of a
/// one-recipe-gone build on one.
pub(super) fn identities<P: Clone + AsRef<Path> + Sync>(
    files: &[P],
) -> Option<Vec<(P, FileIdentity)>> {
    let stat = |f: &P| Some(FileIdentity::of(&std::fs::metadata(f).ok()?));
    crate::cores::map_kept(files, stat, |id| id)
        .into_iter()
        .zip(files)
        .map(|(id, f)| Some((f.clone(), id?)))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::Wrote;
    use crate::pipeline::SettledLock;

    /// After a build, the package files' digest is the one a stamp check
    /// takes of them (every file stat'ed), across chunks; a file changed
    /// since it was read voids it; one whose links the build did not change
    /// is named as read, not stat'ed. The stamp's paths, read back from the
    /// build's file, are the bytes a list of paths is and read back as one.
    #[test]
    fn the_files_digest_after_a_build_is_the_stamp_checks_and_its_paths_are_a_list_of_paths() {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<(PathBuf, FileIdentity)> = (0..STAT_CHUNK + 7)
            .map(|i| {
                let f = dir.path().join(format!("{i}.deb"));
                std::fs::write(&f, i.to_string()).unwrap();
                let id = FileIdentity::of(&std::fs::metadata(&f).unwrap());
                (f, id)
            })
            .collect();
        let mut inputs = Inputs::new(dir.path()).unwrap();
        for (f, id) in &files {
            inputs.push(f, id).unwrap();
        }
        // Its file is unlinked.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), files.len());
        let before = Before {
            project: "project".into(),
            lock: Some(files[0].1),
            lock_path: dir.path().join("debforge.lock"),
            seen: None,
        };
        let paths: Vec<PathBuf> = files.iter().map(|(f, _)| f.clone()).collect();
        let checked = before.with(&identities(&paths).unwrap());
        assert!(checked.is_some());
        assert_eq!(before.with_after(&inputs, None), checked);
        let written = postcard::to_allocvec(&InputPaths::Written(&inputs)).unwrap();
        assert_eq!(written, postcard::to_allocvec(&paths).unwrap());
        let read: InputPaths = postcard::from_bytes(&written).unwrap();
        assert_eq!(read.read(), Some(paths.as_slice()));
        // The last file, in the second chunk, rewritten at another size.
        let (last, _) = files.last().unwrap();
        std::fs::write(last, "other bytes").unwrap();
        assert_eq!(before.with_after(&inputs, None), None);
        // Not relinked: named as read, not stat'ed (its change shows at
        // the next build's check).
        let none = crate::repo::Inodes::new();
        assert_eq!(before.with_after(&inputs, Some(&none)), checked);
        let relinked: crate::repo::Inodes = [(files[3].1.dev(), files[3].1.ino())].into();
        assert_eq!(before.with_after(&inputs, Some(&relinked)), checked);
    }

    /// A lock this build wrote is taken by the identity its writer saw only
    /// where the rename came in a later tick than the last write; else (a
    /// write into it after the rename looks the same) it is read back.
    #[test]
    fn a_written_lock_stands_by_its_identity_only_when_renamed_after_its_last_write() {
        let dir = tempfile::tempdir().unwrap();
        let lock_path = dir.path().join("debforge.lock");
        let identity = || FileIdentity::of(&std::fs::symlink_metadata(&lock_path).unwrap());
        let written = |identity| SettledLock {
            sha256: crate::digest::sha256_hex(b"what the build wrote"),
            written: Some(Wrote {
                identity: Some(identity),
            }),
        };
        let before = || Before {
            project: String::new(),
            lock: None,
            lock_path: lock_path.clone(),
            seen: None,
        };
        // Other bytes, written in one tick (created: both times the same).
        std::fs::write(&lock_path, b"another process's bytes").unwrap();
        let same_tick = identity();
        assert!(!same_tick.written_before_renamed());
        assert!(!before().lock_written(&written(same_tick)));
        // Read back where the identity cannot stand: the bytes decide.
        std::fs::write(&lock_path, b"what the build wrote").unwrap();
        assert!(before().lock_written(&written(identity())));
        // The last write in an earlier tick than the change (as a rename
        // after the fsync): the identity stands and nothing is read (here
        // the SHA256 said is not the file's, and it is taken all the same).
        std::thread::sleep(std::time::Duration::from_millis(20));
        let perms = std::fs::symlink_metadata(&lock_path).unwrap().permissions();
        std::fs::set_permissions(&lock_path, perms).unwrap();
        let renamed = identity();
        assert!(renamed.written_before_renamed());
        let mut said = written(renamed);
        said.sha256 = crate::digest::sha256_hex(b"not these bytes");
        let mut b = before();
        assert!(b.lock_written(&said));
        assert_eq!(b.lock, Some(renamed));
        // Written into since: another identity, read back, not the bytes.
        std::fs::write(&lock_path, b"WHAT the build wrote").unwrap();
        assert!(!before().lock_written(&written(renamed)));
    }
}
