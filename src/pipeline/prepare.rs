//! Stage 3: each fetched file becomes an [`Artifact`], kept as it is or
//! repacked with our control fields and maintainer scripts.

use crate::error::FileError;
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use crate::deb::DebFile;
use crate::fetch::{Event, Task};
use crate::recipe::RepackRecipe;

use super::suffix::{Member, SuffixPlan};
use super::{Artifact, Fetched, PipelineError, Session, write_atomic};

/// The version suffix `f`'s own recipe sets.
fn own_suffix(f: &Fetched) -> Option<&str> {
    f.resolved
        .repack
        .as_ref()
        .and_then(|r| r.version_suffix.as_deref())
}

/// The standard library collects a vector's iterator into a vector of
/// another type in the same allocation where the new items are no bigger
/// and aligned alike: `prepare` counts on it (memory: 20,000 packages'
/// artifacts were 2.7 MB beside the fetched files' 2.4 MB).
const _: () = assert!(
    std::mem::size_of::<Artifact>() <= std::mem::size_of::<Fetched>()
        && std::mem::align_of::<Artifact>() == std::mem::align_of::<Fetched>()
);

/// Each artifact made in its fetched file's place: collected from the
/// vector's own iterator, the artifacts reuse its allocation (no bigger:
/// asserted above), so the build never holds a list of every package twice.
fn made_in_place(
    fetched: Vec<Fetched>,
    make: impl FnMut((usize, Fetched)) -> Result<Artifact, PipelineError>,
) -> Result<Vec<Artifact>, PipelineError> {
    fetched.into_iter().enumerate().map(make).collect()
}

impl Session<'_> {
    /// Turns each fetched file into an artifact: kept as it is, or, for
    /// `action = "repack"` recipes and the packages carried along by their
    /// version suffix (`suffix::SuffixPlan`), repacked (once: the result is
    /// cached under a key of its inputs) and published instead of the
    /// upstream file. `mtime` dates the new control member
    /// (SOURCE_DATE_EPOCH, else the upstream's own ar date).
    ///
    /// Memory: each control is taken from the records (their file is
    /// written first), and each fetched file's lock entry goes as its
    /// artifact is made, so the build never holds a package twice.
    pub fn prepare(
        &self,
        fetched: Vec<Fetched>,
        source_date_epoch: Option<u64>,
    ) -> Result<Vec<Artifact>, PipelineError> {
        // The suffix plan reads every package's control at once, so they
        // are all taken first only where a recipe sets a suffix. Otherwise
        // each is taken as its artifact is made, while the fetched file's
        // lock entry goes (memory: never every control beside every entry).
        let suffixed = fetched.iter().any(|f| own_suffix(f).is_some());
        let upstream = if suffixed {
            fetched
                .iter()
                .map(|f| self.take_control_of(f.file(), f.resolved.locked.sha256()))
                .collect::<Result<Vec<_>, _>>()?
        } else {
            Vec::new()
        };
        let members: Vec<Member> = fetched
            .iter()
            .zip(&upstream)
            .map(|(f, control)| Member {
                control,
                suffix: own_suffix(f),
            })
            .collect();
        let plan = SuffixPlan::new(&members);
        drop(members);
        for c in &plan.carried {
            self.observer.event(Event::Carried {
                package: c.package.clone(),
                suffix: c.suffix.clone(),
                follows: c.follows.clone(),
            });
        }
        let retargets = plan.retargets();
        // Only the packages repacked, by index (memory: a list as long as
        // the packages, of which nearly every item is none, was 1.9 MB at
        // 20,000 packages, beside every recipe still held).
        let repacks: Vec<(usize, RepackRecipe)> = fetched
            .iter()
            .enumerate()
            .filter_map(|(i, f)| {
                match (
                    &f.resolved.repack,
                    plan.carried_suffix(f.resolved.locked.name()),
                ) {
                    (Some(r), _) => Some((i, RepackRecipe::clone(r))),
                    (None, Some(c)) => Some((
                        i,
                        RepackRecipe {
                            version_suffix: Some(c.suffix.clone()),
                            ..RepackRecipe::default()
                        },
                    )),
                    (None, None) => None,
                }
            })
            .collect();
        let mut repacked = self.repack_all(&fetched, &repacks, &retargets, source_date_epoch)?;
        drop((plan, repacks, retargets));
        let mut upstream = upstream.into_iter();
        made_in_place(fetched, |(i, f)| {
            let taken = upstream.next();
            if let Some(a) = repacked.remove(&i) {
                return Ok(a);
            }
            let control = match taken {
                Some(control) => control,
                None => self.take_control_of(f.file(), f.resolved.locked.sha256())?,
            };
            let file = std::sync::Arc::clone(f.file());
            let Fetched { resolved } = f;
            let version_changed = control.get("Version") != Some(resolved.locked.version());
            let size = resolved.locked.size;
            let sha256 = super::sha256_sum(&file, resolved.locked.sha256())?;
            // The entry's last holder, unless the caller keeps the lock.
            drop(resolved.locked);
            // The control goes here: its stanza waits on disk for the write.
            let entry = self.index_entry(&control)?;
            Ok(Artifact {
                for_base: resolved.for_base,
                version_changed,
                entry,
                file,
                size,
                sha256,
            })
        })
    }

    /// The repacks, a few at a time: each reads its data member to its end
    /// (xz on one core), so packages are repacked side by side. By index in
    /// `fetched`; the first failure in that order is the one reported.
    fn repack_all(
        &self,
        fetched: &[Fetched],
        repacks: &[(usize, RepackRecipe)],
        retargets: &BTreeMap<(String, String), String>,
        source_date_epoch: Option<u64>,
    ) -> Result<BTreeMap<usize, Artifact>, PipelineError> {
        use std::sync::Mutex;
        use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
        let total = repacks.len() as u64;
        let next = AtomicUsize::new(0);
        let done = AtomicU64::new(0);
        let results = Mutex::new(BTreeMap::new());
        let workers = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 4)
            .min(repacks.len().max(1));
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| {
                    while let Some((i, r)) = repacks.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let (i, f) = (*i, &fetched[*i]);
                        let item = f.resolved.locked.name().to_string();
                        let work = |done| Event::Work {
                            task: Task::Repack,
                            done,
                            total,
                            item: item.clone(),
                        };
                        self.observer.event(work(done.load(Ordering::Relaxed)));
                        let result = self.repack_one(f, r, retargets, source_date_epoch);
                        results.lock().expect("results").insert(i, result);
                        self.observer
                            .event(work(done.fetch_add(1, Ordering::Relaxed) + 1));
                    }
                });
            }
        });
        let mut out = BTreeMap::new();
        for (i, r) in results.into_inner().expect("results") {
            out.insert(i, r?);
        }
        Ok(out)
    }

    /// One repack, from the cache when the same inputs were repacked before.
    fn repack_one(
        &self,
        f: &Fetched,
        r: &RepackRecipe,
        retargets: &BTreeMap<(String, String), String>,
        source_date_epoch: Option<u64>,
    ) -> Result<Artifact, PipelineError> {
        let locked = &f.resolved.locked;
        let mut scripts = Vec::new();
        let mut key = crate::digest::KeyHasher::new();
        key.update(b"debforge-repack-2\0");
        key.update(locked.sha256().as_bytes());
        for (name, rel) in &r.scripts {
            let path = self.recipes.file(rel).map_err(PipelineError::Recipe)?;
            let script = load_script(&path, &r.vars, locked.name(), locked.version())?;
            key.update(name.as_bytes());
            key.update(b"\0");
            key.update(&script);
            key.update(b"\0");
            scripts.push((name.clone(), script));
        }
        let set: Vec<(String, String)> =
            r.set.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        for (k, v) in &set {
            key.update(format!("set {k}={v}\0").as_bytes());
        }
        if let Some(sfx) = &r.version_suffix {
            key.update(format!("suffix {sfx}\0").as_bytes());
        }
        for ((name, old), new) in retargets {
            key.update(format!("retarget {name} {old} {new}\0").as_bytes());
        }
        let mtime = match source_date_epoch {
            Some(t) => t,
            None => {
                DebFile::open(f.file())
                    .map_err(|source| PipelineError::Deb {
                        path: f.file().to_path_buf(),
                        source,
                    })?
                    .data_member()
                    .mtime
            }
        };
        key.update(format!("mtime {mtime}").as_bytes());
        let key = key.finish_hex();
        let dir = self.settings.cache.join("repacked").join(&key[..32]);
        let dest = dir.join(f.resolved.file_name());
        let sidecar = dir.join("sha256");
        let cached = crate::input::read_to_string(&sidecar, crate::input::limit::KEY)
            .ok()
            .filter(|_| dest.exists());
        let sha256 = match cached {
            Some(s) => s.trim().to_string(),
            None => {
                fs::create_dir_all(&dir).map_err(FileError::at(&dir))?;
                let opts = crate::deb::repack::RepackOptions {
                    scripts,
                    set,
                    version_suffix: r.version_suffix.clone(),
                    retarget: Some(retargets.clone()),
                    mtime,
                };
                let report =
                    crate::deb::repack::repack(f.file(), &dest, &opts).map_err(|source| {
                        PipelineError::Repack {
                            package: locked.name().to_string(),
                            source,
                        }
                    })?;
                write_atomic(&sidecar, report.sha256.as_bytes())?;
                report.sha256
            }
        };
        let size = fs::metadata(&dest).map_err(FileError::at(&dest))?.len();
        let control = self.control_of(&dest, &sha256)?;
        Ok(Artifact {
            for_base: f.resolved.for_base,
            version_changed: control.get("Version") != Some(locked.version()),
            entry: self.index_entry(&control)?,
            sha256: super::sha256_sum(&dest, &sha256)?,
            file: dest.into(),
            size,
        })
    }
}

/// Reads one of our maintainer scripts and fills in `@NAME@` placeholders.
fn load_script(
    path: &Path,
    vars: &BTreeMap<String, String>,
    package: &str,
    version: &str,
) -> Result<Vec<u8>, PipelineError> {
    let fail = |message: String| PipelineError::Script {
        path: path.to_path_buf(),
        message,
    };
    let bytes = crate::input::read(path, crate::input::limit::RECIPE)
        .map_err(|e| fail(format!("cannot read the maintainer script: {e}")))?;
    let mut text =
        String::from_utf8(bytes).map_err(|_| fail("is not a text file (not UTF-8)".into()))?;
    if text.contains('\0') {
        return Err(fail("is not a text file (NUL bytes)".into()));
    }
    if !text.starts_with("#!") {
        return Err(fail(
            "has no #! line; a maintainer script names its interpreter".into(),
        ));
    }
    for (k, v) in vars.iter().chain([
        (&"PACKAGE".to_string(), &package.to_string()),
        (&"VERSION".to_string(), &version.to_string()),
    ]) {
        text = text.replace(&format!("@{k}@"), v);
    }
    if let Some(start) = text.find('@') {
        let rest = &text[start + 1..];
        if let Some(end) = rest.find('@') {
            let name = &rest[..end];
            if !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b == b'_' || b.is_ascii_digit())
            {
                return Err(fail(format!(
                    "uses @{name}@, which the recipe's [repack.vars] does not set"
                )));
            }
        }
    }
    Ok(text.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifacts_are_made_in_the_fetched_files_memory() {
        let f = Path::new("/p/recipes/libx.toml");
        let recipe = crate::recipe::parse_package(
            f,
            "name = \"libx\"\nversion = \"1\"\narchitecture = \"amd64\"\nfrom = { path = \"x.deb\" }\n",
            &Default::default(),
        )
        .unwrap();
        let recipe = std::sync::Arc::new(recipe);
        let file: std::sync::Arc<Path> = Path::new("/p/x.deb").into();
        let fetched: Vec<Fetched> = (0..1000)
            .map(|_| Fetched {
                resolved: super::super::resolve::Resolved {
                    repack: recipe.repack.clone(),
                    for_base: recipe.for_base,
                    locked: std::sync::Arc::new(crate::recipe::lock::LockEntry::default().into()),
                    from: super::super::resolve::FetchFrom::InPlace(std::sync::Arc::clone(&file)),
                    seen: None,
                },
            })
            .collect();
        let at = fetched.as_ptr() as usize;
        let made = made_in_place(fetched, |(_, f)| {
            Ok(Artifact {
                for_base: false,
                version_changed: false,
                entry: Default::default(),
                file: std::sync::Arc::clone(f.file()),
                size: 0,
                sha256: Default::default(),
            })
        })
        .unwrap();
        assert_eq!(made.len(), 1000);
        assert_eq!(made.as_ptr() as usize, at, "a second list of every package");
    }
}
