//! `build`: the whole signed repository, from the recipes to `--out`.

use std::path::{Path, PathBuf};

use super::{Dates, KeySettings, TestHooks, WorkflowError, unchanged};
use crate::openpgp::sign::SigningKey;
use crate::pipeline::{self, Session};
use crate::recipe::{PackageRecipe, RecipeSet};
use crate::repo::generations::{self, Generation};
use crate::repo::{OutputReport, RepoConfig};
use crate::report::{self, Reporter};

/// 1980-01-01T00:00:00Z: the date of packages built with nothing to date them.
const REPRODUCIBLE_EPOCH: i64 = 315_532_800;

/// The example mirror the shipped repository.toml names until a lab sets its own.
const EXAMPLE_MIRROR: &str = "mirror.gpu-lab.example";

/// Everything `build` needs, resolved once.
#[derive(Debug, Clone)]
pub struct BuildSettings {
    /// The project's recipes directory.
    pub recipes: PathBuf,
    pub pipeline: pipeline::Settings,
    pub keys: KeySettings,
    /// Refuse to resolve anything the lock file does not say.
    pub locked: bool,
    pub out: PathBuf,
    /// Replace an `--out` that debforge did not write.
    pub force: bool,
    /// Overrides repository.toml's `mirror`.
    pub mirror: Option<String>,
    /// Generations whose pool files stay.
    pub keep: u32,
    pub dates: Dates,
    pub hooks: TestHooks,
}

/// What `build` did.
pub struct BuildReport {
    pub output: OutputReport,
    pub keys: usize,
    /// The generation in force after it, and whether this build recorded it.
    pub generation: Option<(u32, bool)>,
    /// The repo-config package's pool file, and the apt source it sets up.
    pub repo_config: Option<(String, Option<String>)>,
    /// How the last build's stamp answered this one, if it did.
    pub from_stamp: Option<FromStamp>,
}

/// How a build was answered from the last build's stamp
/// ([`super::unchanged`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FromStamp {
    /// No input or output file changed: nothing was read or written.
    Unchanged,
    /// Only the clock's date moved: only the Release was dated and signed
    /// again.
    Redated,
}

/// Builds the repository: checks what can be checked before the network
/// (the output directory, the dates, the keys), fetches and verifies,
/// repacks, builds the project's own packages, writes and signs the
/// repository, and records the generation.
pub fn build(s: &BuildSettings, reporter: &dyn Reporter) -> Result<BuildReport, WorkflowError> {
    crate::repo::check_output(&s.out, s.force)?;
    let config = repository_config(s)?;
    check_dates(s.dates, config.valid_for)?;
    let signing = signing_keys(&s.keys, s.dates.now, reporter)?;
    warn_example_mirror(&config, &s.recipes, reporter);
    let probe = unchanged::Probe::new(s, &signing);
    let mut before = None;
    match probe.as_ref().map(|p| p.check(reporter)) {
        Some(unchanged::Answer::Unchanged(report)) => return Ok(report),
        Some(unchanged::Answer::Redate(stamp)) => {
            let p = probe.as_ref().expect("probed");
            if let Some(report) = redate(s, &config, &signing, reporter, p, stamp)? {
                return Ok(report);
            }
        }
        Some(unchanged::Answer::Build(found)) => before = found,
        None => {}
    }
    // The project as found before anything is read; the last stamp is void
    // from here on.
    if let Some(p) = &probe {
        p.forget();
        before = before.or_else(|| p.before());
    }
    let recorder = unchanged::Recorder::new(reporter);
    // The recipe files as the probe's walk stat'ed them: not stat'ed again.
    let seen = before.as_mut().and_then(unchanged::Before::take_seen);
    let (report, inputs, lock) = build_all(s, config, &signing, &recorder, probe.is_some(), seen)?;
    if let (Some(p), Some(inputs)) = (&probe, inputs) {
        p.record(before, inputs, &lock, recorder, &report);
    }
    Ok(report)
}

/// Only the date moved since the stamped build: the Release dated and
/// signed again, the rest of the output as it is. `None` to build whole.
fn redate(
    s: &BuildSettings,
    config: &RepoConfig,
    signing: &[SigningKey],
    reporter: &dyn Reporter,
    probe: &unchanged::Probe,
    mut stamp: unchanged::Stamped,
) -> Result<Option<BuildReport>, WorkflowError> {
    let params = crate::repo::RepoParams {
        config: config.clone(),
        keys: signing,
        date: s.dates.source_date_epoch.unwrap_or(s.dates.now),
        records: &crate::repo::pool::DigestStore::new(None),
        retain: Vec::new(),
        retain_from: None,
        kept_pieces: Default::default(),
        pause_in_swap: None,
        base: &[],
    };
    let walked = stamp.take_walked();
    let Some(tree) = crate::repo::redate(&s.out, &params, walked, reporter)? else {
        return Ok(None);
    };
    let mut report = probe.redated(stamp, tree);
    report.from_stamp = Some(FromStamp::Redated);
    // The same packages, pins and keys: the last generation stays in force.
    report.generation = generations::last(&s.out, 1)?
        .pop()
        .map(|g| (g.number, false));
    Ok(Some(report))
}

/// The package files' identities before a build read them, for its stamp.
type Inputs = unchanged::Inputs;

/// Each package file by its identity: a path recipe's as it was before it
/// was read, under the path as written too (a link pointed elsewhere
/// resolves to another file); a cache file's (named by its digest) now.
/// Kept in a file in `cache` (`None` where it cannot be: no stamp).
fn stamp_inputs(packages: &[pipeline::Fetched], cache: &Path) -> Option<Inputs> {
    // The path as written, where it is another path than the file's.
    fn written(f: &pipeline::Fetched) -> Option<std::path::PathBuf> {
        f.resolved
            .locked
            .url()
            .strip_prefix("file://")
            .map(std::path::PathBuf::from)
            .filter(|w| **w != **f.file())
    }
    let mut out = Inputs::new(cache)?;
    for f in packages {
        match f.resolved.seen {
            Some(id) => {
                out.push(f.file(), &id)?;
                if let Some(written) = written(f) {
                    out.push(&written, &id)?;
                }
            }
            None => {
                for (f, id) in unchanged::identities(std::slice::from_ref(f.file()))? {
                    out.push(&f, &id)?;
                }
            }
        }
    }
    Some(out)
}

/// The whole build; the identities of the package files it read where a
/// stamp may record them (`stamp`, and no signed source was asked), and the
/// lock file as it left it. What preparing the packages says (pins,
/// carried suffixes) is kept by `recorder` to be said again; what is done
/// (a lock written, an output restored) is not.
fn build_all(
    s: &BuildSettings,
    config: RepoConfig,
    signing: &[SigningKey],
    recorder: &unchanged::Recorder,
    stamp: bool,
    mut seen: Option<crate::recipe::Seen>,
) -> Result<(BuildReport, Option<Inputs>, pipeline::SettledLock), WorkflowError> {
    let reporter = recorder.inner();
    // The lab's base: its files read before anything is fetched (a wrong
    // file is said first), its sources' signed indexes once the session is
    // open.
    let base_config = crate::recipe::load_base(&s.recipes)?;
    let mut base = super::base::read_files(&base_config)?;
    // A stamp only where nothing but the project's files and the package
    // files can change the output: no signed source asked, none read for
    // the base.
    let stamp = stamp && base_config.sources.is_empty() && base_config.closure.is_none();
    let mut pass = match fetch_and_prepare(s, &config, signing, recorder, None, stamp, &mut seen) {
        // A package the last build picked for the base that its source no
        // longer offers (a mirror refreshed): picked again from what it
        // offers now. `--locked` keeps the error: the lock says that file.
        Err(e)
            if !s.locked
                && base_config.closure.as_ref().is_some_and(|c| {
                    not_offered(&e, c).is_some_and(|(name, version)| {
                        super::base::picked_in_lock(&s.recipes, c, name, version)
                    })
                }) =>
        {
            report::warning(
                reporter,
                format!("{e}: the packages picked for the base are picked again"),
            );
            fetch_and_prepare(
                s,
                &config,
                signing,
                recorder,
                Some(Vec::new()),
                stamp,
                &mut seen,
            )?
        }
        other => other?,
    };
    base.extend(super::base::read_sources(
        &base_config,
        &pass.session,
        &config.architectures,
    )?);
    if let Some(source) = &base_config.closure {
        let change = super::base::closure_change(
            &pass.session,
            &pass.artifacts,
            &base,
            source,
            &config.architectures,
            s.locked,
            reporter,
        )?;
        if let Some(picked) = change {
            // Resolved, fetched and prepared again with the packages
            // picked, all together (only when the closure changed): what
            // the project builds is dated by, suffixed with and versioned
            // after every package, picks included, as the next build will.
            pass = fetch_and_prepare(
                s,
                &config,
                signing,
                recorder,
                Some(picked),
                stamp,
                &mut seen,
            )?;
        }
    }
    let Pass {
        mut session,
        artifacts,
        pins,
        inputs,
        lock,
    } = pass;
    // Every control is read: any the records still hold go. The recipes
    // too, but for what the report needs of them (memory: the repository
    // is written from the artifacts).
    session.records.forget_controls();
    let repo_config_recipe = repo_config_recipe(&session.recipes);
    session.recipes.packages = Vec::new();
    let date = s.dates.source_date_epoch.unwrap_or(s.dates.now);
    // Read just before the write: a short window for another build of the
    // output to record a generation this one would not keep.
    let (retain, kept_pieces, last) = earlier_generations(&s.out, s.keep)?;
    let params = crate::repo::RepoParams {
        config,
        keys: signing,
        date,
        records: &session.records,
        retain,
        retain_from: None,
        kept_pieces,
        pause_in_swap: s.hooks.pause_in_swap.clone(),
        base: &base,
    };
    // The controls, the recipes and the resolve's tables are gone; the
    // writing threads allocate afresh (their compressors).
    crate::cores::release_freed_memory();
    // Moved: `repo::write` drops them once the pool and the indexes are
    // written.
    let pool: Vec<_> = artifacts
        .into_iter()
        .map(pipeline::Artifact::into_pool_input)
        .collect();
    let stanzas = session.take_stanzas()?;
    // The generation is recorded (from the new Release, the lock and the
    // report) while the written output is walked for its stamp.
    let (output, generation) =
        crate::repo::write_then(&s.out, pool, &stanzas, &params, &pins, reporter, |output| {
            (!output.unchanged)
                .then(|| {
                    let at = (s.out.as_path(), last.as_ref());
                    record_generation(
                        at,
                        output,
                        &lock.sha256,
                        signing,
                        &pins,
                        date,
                        &params.config,
                    )
                })
                .transpose()
        })?;
    let config = params.config;
    // Saved whatever the generation's record says: the walk refreshed them.
    session.save_records();
    drop(session);
    let generation = generation?;
    let repo_config = repo_config_recipe.and_then(|r| repo_config(&output, &r, &config));
    let report = BuildReport {
        repo_config,
        output,
        keys: signing.len(),
        generation,
        from_stamp: None,
    };
    Ok((report, inputs, lock))
}

/// The package and version source `source`'s index no longer offers,
/// where that is `e`.
fn not_offered<'e>(e: &'e WorkflowError, source: &str) -> Option<(&'e str, &'e str)> {
    match e {
        WorkflowError::Pipeline(p) => p.not_offered(source),
        _ => None,
    }
}

/// One resolve, fetch and prepare of the project.
struct Pass<'r> {
    session: Session<'r>,
    artifacts: Vec<pipeline::Artifact>,
    pins: String,
    /// The package files read, for the build stamp (`None`: no stamp).
    inputs: Option<Inputs>,
    /// The lock file as this build leaves it, for the stamp and the
    /// generation.
    lock: pipeline::SettledLock,
}

use generations::Earlier;

/// Resolves, fetches and prepares every package (with `picked` as the
/// packages picked for the base; `None`: the lock's).
fn fetch_and_prepare<'r>(
    s: &BuildSettings,
    config: &RepoConfig,
    signing: &[SigningKey],
    recorder: &'r unchanged::Recorder,
    picked: Option<Vec<crate::recipe::PackageRecipe>>,
    stamp: bool,
    seen: &mut Option<crate::recipe::Seen>,
) -> Result<Pass<'r>, WorkflowError> {
    let reporter = recorder.inner();
    let mut session = super::open_session_with(
        &s.recipes,
        s.pipeline.clone(),
        reporter,
        picked,
        // The probe's stats serve reading the recipes, and go with it
        // (memory: a name and an identity a recipe). A second pass (the
        // base's picks changed) stats them itself.
        seen.take(),
    )?;
    // The recipes the rest of the build does not read (a plain `keep`) go
    // as their packages are resolved; the few it asks of (pins, versions,
    // what it builds, the base's picks) stay in the session.
    super::require_lock(&session, s.locked)?;
    let resolved = session.resolve_releasing()?;
    let (packages, sources) = super::fetch_unsettled(&session, resolved, s.locked, reporter)?;
    // What the stamp needs of the fetched files, taken before preparing.
    let inputs = if stamp && sources.is_empty() {
        stamp_inputs(&packages, &s.pipeline.cache)
    } else {
        None
    };
    drop(sources);
    let entries: Vec<_> = packages.iter().map(pipeline::Fetched::lock_entry).collect();
    // The resolving and fetching threads' memory (their reads, their
    // results before they were copied) is free: given back before the
    // packages are prepared on this thread.
    crate::cores::release_freed_memory();
    // With --locked the lock is compared before anything is prepared, as
    // is what writing it would refuse (another file in its place, a newer
    // debforge's lock); then it is rendered, compared and written on a
    // thread of its own while the packages are prepared on this one
    // (neither reads what the other makes). Only a failing write is said
    // after the preparing. Its entries go as their tables are written, the
    // rest of each package's as its artifact is made: held until the file
    // was synced, every entry stood beside every prepared control.
    let (settled, prepared) = if s.locked {
        let settled = super::settle_lock_releasing(&session, entries.into_iter(), true, reporter)?;
        let prepared = prepare_all(&session, packages, config, signing, s.dates, recorder);
        (Ok(settled), prepared)
    } else {
        session.check_lock_file()?;
        std::thread::scope(|scope| {
            let session = &session;
            let settled = scope.spawn(move || {
                super::settle_lock_releasing(session, entries.into_iter(), false, reporter)
            });
            let prepared = prepare_all(session, packages, config, signing, s.dates, recorder);
            let settled = settled
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (settled, prepared)
        })
    };
    // The lock's problem first, as when it was settled before preparing.
    let lock = settled?;
    let (artifacts, pins) = prepared?;
    Ok(Pass {
        session,
        artifacts,
        pins,
        inputs,
        lock,
    })
}

/// The control paragraph of every package the build would put in the
/// repository: resolved, fetched and verified, repacked, built, as `build`
/// does, and nothing written but the lock and the cache (what `closure`
/// resolves). The signing keys must exist (none is made).
pub(super) fn prepared_controls(
    s: &BuildSettings,
    reporter: &dyn Reporter,
) -> Result<Vec<crate::format::deb822::ControlParagraph>, WorkflowError> {
    let config = repository_config(s)?;
    // The keys as they are: a missing one is an error here, never made (the
    // repo-config package carries the keyring).
    let signing: Vec<SigningKey> =
        crate::keys::load_signing_keys(&s.keys.dir, s.keys.passphrase.as_deref(), s.dates.now)?
            .into_iter()
            .map(|k| k.key)
            .collect();
    let session = super::open_session(&s.recipes, s.pipeline.clone(), reporter)?;
    let fetched = super::resolve_and_fetch(&session, s.locked, reporter)?;
    let (artifacts, _) = prepare_all(
        &session,
        fetched.packages,
        &config,
        &signing,
        s.dates,
        reporter,
    )?;
    let controls = artifacts
        .iter()
        .map(|a| session.control_of_artifact(a))
        .collect::<Result<_, _>>()?;
    session.save_records();
    Ok(controls)
}

/// repository.toml with `--mirror` over its `mirror`.
fn repository_config(s: &BuildSettings) -> Result<RepoConfig, WorkflowError> {
    let mut config = crate::recipe::load_repository(&s.recipes)?;
    if let Some(m) = &s.mirror {
        let checked = crate::recipe::check_mirror(m).map_err(|e| WorkflowError::BadMirror {
            mirror: m.clone(),
            reason: e.to_string(),
        })?;
        config.mirror = Some(checked);
    }
    Ok(config)
}

/// A warning while the mirror is still the shipped example host.
fn warn_example_mirror(config: &RepoConfig, recipes: &Path, reporter: &dyn Reporter) {
    let example = config
        .mirror
        .as_deref()
        .filter(|m| m.contains(EXAMPLE_MIRROR));
    if let Some(m) = example {
        report::warning(
            reporter,
            format!(
                "the repo-config package points lab machines at {m}, the example host in {}: set `mirror` there, or pass --mirror URL",
                recipes.join("repository.toml").display()
            ),
        );
    }
}

/// Every package of the repository, ready for the pool, and the pins:
/// upstream packages kept or repacked, then the project's own, built with
/// the versions and pins read from the prepared packages.
fn prepare_all(
    session: &Session,
    fetched: Vec<pipeline::Fetched>,
    config: &RepoConfig,
    signing: &[SigningKey],
    dates: Dates,
    reporter: &dyn Reporter,
) -> Result<(Vec<pipeline::Artifact>, String), WorkflowError> {
    let sde = dates.source_date_epoch.map(|t| t as u64);
    let mut artifacts = session.prepare(fetched, sde)?;
    let (keyring, _) = crate::openpgp::sign::export_public(signing);
    let builds = session.recipes.packages.iter().any(|p| p.build.is_some());
    // Versions and pins once, from the prepared packages' own control
    // paragraphs: the metapackage, the repo-config package and the output's
    // debforge.pref all get the same. The versions only where a package is
    // built (memory: a map of every package, 2.3 MB at 20,000).
    let versions = if builds {
        pipeline::package_versions(&artifacts, &session.recipes)
    } else {
        Default::default()
    };
    // The packages whose exact build is the point are pinned to the
    // repository (its Release's Origin and Label); the rest (a
    // distribution's own library) is offered like any repository's (see
    // format::preferences and pipeline::pinned_packages).
    let names = pipeline::pinned_packages(&artifacts, &session.recipes, |a| {
        session.control_of_artifact(a)
    })?;
    report_unpinned(&artifacts, &names, reporter);
    let pins = crate::format::preferences::release_pins(
        &config.origin,
        &config.label,
        names.iter().map(String::as_str),
    );
    // Packages built here are dated by SOURCE_DATE_EPOCH, else by the newest
    // of the packages they are built around (a function of the lock), else
    // 1980-01-01, never by the clock: the same inputs give the same bytes,
    // so a published package never changes under its name and version.
    // (Opening every artifact for its date only when something is built.)
    let built_date = match dates.source_date_epoch {
        Some(t) => t,
        None if builds => pipeline::newest_date(&artifacts)?.unwrap_or(REPRODUCIBLE_EPOCH),
        None => REPRODUCIBLE_EPOCH,
    };
    let own = session.build_from_recipes(config, &keyring, built_date, &versions, &pins, &names)?;
    artifacts.extend(own);
    Ok((artifacts, pins))
}

/// The signing keys; the first build makes the one it signs with. A key
/// about to expire is reported.
fn signing_keys(
    keys: &KeySettings,
    now: i64,
    reporter: &dyn Reporter,
) -> Result<Vec<SigningKey>, WorkflowError> {
    let pass = keys.passphrase.as_deref();
    let loaded = match crate::keys::load_signing_keys(&keys.dir, pass, now) {
        Err(crate::keys::KeyError::NoKeys { .. }) => {
            let (path, fpr) = crate::keys::keygen(
                &keys.dir,
                "debforge repository signing key",
                crate::openpgp::sign::KeyAlgo::Ed25519,
                None,
                pass,
                false,
            )?;
            report::note(
                reporter,
                format!(
                    "no signing key yet: made {} ({fpr}, mode 0600); git ignores it ({}/.gitignore); back it up",
                    path.display(),
                    crate::keys::signing_dir(&keys.dir).display()
                ),
            );
            crate::keys::load_signing_keys(&keys.dir, pass, now)?
        }
        other => other?,
    };
    for k in &loaded {
        if let Some(t) = k.expires_soon {
            let expires = t
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            report::warning(
                reporter,
                format!(
                    "signing key {} expires in {} days: rotate it (debforge keygen --add)",
                    k.path.display(),
                    (expires - now).max(0) / 86_400
                ),
            );
        }
    }
    Ok(loaded.into_iter().map(|k| k.key).collect())
}

fn report_unpinned(artifacts: &[pipeline::Artifact], pinned: &[String], reporter: &dyn Reporter) {
    let pinned: std::collections::HashSet<&str> = pinned.iter().map(String::as_str).collect();
    let unpinned: Vec<&str> = artifacts
        .iter()
        .map(|a| a.package())
        .filter(|n| !pinned.contains(n))
        .collect();
    if !unpinned.is_empty() {
        report::note(
            reporter,
            format!(
                "not pinned (their distribution's builds stay in charge; `pin = true` in a recipe to change it): {}",
                report::some_of(&unpinned, UNPINNED_SHOWN)
            ),
        );
    }
}

/// How many unpinned packages the note names (a project of thousands
/// would be a line of thousands).
const UNPINNED_SHOWN: usize = 10;

/// Records what this build made as a generation of `out` (unless it is
/// the same as the last one, `last` as read before the write, but for the
/// Release's date), and says which.
fn record_generation(
    (out, last): (&Path, Option<&generations::LastRead>),
    report: &OutputReport,
    lock_sha256: &str,
    signing: &[SigningKey],
    pins: &str,
    date: i64,
    config: &RepoConfig,
) -> Result<(u32, bool), WorkflowError> {
    let sha = |path: &Path| crate::digest::sha256_file(path).unwrap_or_default();
    let g = Generation {
        number: 0,
        date,
        release_sha256: sha(&out.join("dists").join(&config.suite).join("Release")),
        packages: report.packages.as_slice(),
        lock_sha256: lock_sha256.to_string(),
        keys: signing.iter().map(|k| k.fingerprint()).collect(),
        pins_sha256: crate::digest::sha256_hex(pins.as_bytes()),
        pins: Some(pins.to_string()),
        repository: Some(config.clone()),
        indexes: generations::keep_indexes(out, &config.suite, &report.index),
        forms: generations::INDEX_FORMS.to_string(),
    };
    Ok(generations::record_after(out, g, last)?)
}

/// The pool files (name, SHA256) the last `keep - 1` generations of `out`
/// list, which stay in the pool (with this build's, that is `keep`
/// generations), and the last generation's compressed index pieces. Each
/// manifest is read once and dropped before the next (one of thousands of
/// packages is megabytes; a lab keeps five).
fn earlier_generations(out: &Path, keep: u32) -> Result<Earlier, WorkflowError> {
    Ok(generations::earlier(out, keep.saturating_sub(1) as usize)?)
}

/// The repo-config package's pool file and the apt source line it installs.
fn repo_config(
    report: &OutputReport,
    p: &PackageRecipe,
    config: &RepoConfig,
) -> Option<(String, Option<String>)> {
    let e = report.packages.iter().find(|e| e.package() == p.name)?;
    let name = p
        .build
        .as_ref()
        .and_then(|b| b.repo_config.as_deref())
        .unwrap_or("debforge");
    let source = config.mirror.as_ref().map(|m| {
        format!(
            "deb [signed-by=/usr/share/keyrings/{name}-archive-keyring.gpg] {m} {} {}",
            config.suite, config.component
        )
    });
    Some((e.filename().to_string(), source))
}

/// The recipe of the project's repo-config package, if it has one.
fn repo_config_recipe(recipes: &RecipeSet) -> Option<std::sync::Arc<PackageRecipe>> {
    recipes
        .packages
        .iter()
        .find(|p| p.build.as_ref().is_some_and(|b| b.repo_config.is_some()))
        .cloned()
}

/// Refuses a Release apt would refuse on arrival: dated in the future
/// (SOURCE_DATE_EPOCH ahead of the clock), or already past its Valid-Until.
fn check_dates(dates: Dates, valid_for: Option<i64>) -> Result<(), WorkflowError> {
    let Some(date) = dates.source_date_epoch else {
        return Ok(());
    };
    if date > dates.now + 10 {
        return Err(WorkflowError::DatedInTheFuture { date });
    }
    if let Some(v) = valid_for
        && date + v < dates.now
    {
        return Err(WorkflowError::AlreadyExpired {
            date,
            until: date + v,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_apt_would_refuse_are_refused_before_anything_is_built() {
        let at = |sde| Dates {
            now: 1_000_000,
            source_date_epoch: sde,
        };
        assert!(check_dates(at(None), Some(10)).is_ok());
        assert!(check_dates(at(Some(1_000_005)), None).is_ok());
        assert!(matches!(
            check_dates(at(Some(1_000_100)), None),
            Err(WorkflowError::DatedInTheFuture { date: 1_000_100 })
        ));
        assert!(matches!(
            check_dates(at(Some(900_000)), Some(50_000)),
            Err(WorkflowError::AlreadyExpired { until: 950_000, .. })
        ));
        assert!(check_dates(at(Some(900_000)), Some(200_000)).is_ok());
    }
}
