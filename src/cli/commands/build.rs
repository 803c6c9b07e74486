//! `debforge build`: the whole signed repository.

use super::prelude::*;

/// 1980-01-01T00:00:00Z: the date of packages built with nothing to date them.
const REPRODUCIBLE_EPOCH: i64 = 315_532_800;

/// The example mirror the shipped repository.toml names until a lab sets its own.
const EXAMPLE_MIRROR: &str = "mirror.gpu-lab.example";

pub(crate) fn run_build(
    project: &ProjectArgs,
    keys: &KeyArgs,
    locked: bool,
    out: &std::path::Path,
    force: bool,
    mirror: Option<&str>,
    keep: u32,
) -> Result<u8, Failure> {
    // Everything that can be checked here is, before anything is downloaded:
    // the project, the output directory, the dates, the keys.
    project.check_project()?;
    debforge::repo::check_output(out, force)
        .map_err(|e| Failure::from(PipelineError::Repo(Box::new(e))))?;
    let mut config = debforge::recipe::load_repository(&project.recipes)?;
    if let Some(m) = mirror {
        config.mirror = Some(debforge::recipe::check_mirror(m).map_err(|e| {
            Failure::new(format!("--mirror {m:?}: {e}"))
                .hint(Some("e.g. --mirror http://apt.lab.example/gpu/"))
        })?);
    }
    let sde = source_date_epoch()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    check_dates(sde, config.valid_for, now)?;
    let pass = passphrase(keys.passphrase_file.as_deref())?;
    let loaded = match debforge::keys::load_signing_keys(&keys.keys, pass.as_deref()) {
        Err(debforge::keys::KeyError::NoKeys { .. }) => {
            // The first build makes the key it signs with.
            let (path, fpr) = debforge::keys::keygen(
                &keys.keys,
                "debforge repository signing key",
                debforge::openpgp::sign::KeyAlgo::Ed25519,
                None,
                pass.as_deref(),
                false,
            )
            ?;
            output::note(&format!(
                "no signing key yet: made {} ({fpr}, mode 0600); git ignores it ({}/.gitignore); back it up",
                path.display(),
                debforge::keys::signing_dir(&keys.keys).display()
            ));
            debforge::keys::load_signing_keys(&keys.keys, pass.as_deref())?
        }
        other => other?,
    };
    for k in &loaded {
        if let Some(t) = k.expires_soon {
            let days = t
                .duration_since(std::time::SystemTime::now())
                .map(|d| d.as_secs() / 86_400)
                .unwrap_or(0);
            output::warning(&format!(
                "signing key {} expires in {days} days: rotate it (debforge keygen --add)",
                k.path.display()
            ));
        }
    }
    if config
        .mirror
        .as_deref()
        .is_some_and(|m| m.contains(EXAMPLE_MIRROR))
    {
        output::warning(&format!(
            "the repo-config package points lab machines at {}, the example host in {}: set `mirror` there, or pass --mirror URL",
            config.mirror.as_deref().unwrap_or_default(),
            project.recipes.join("repository.toml").display()
        ));
    }
    let progress = progress::Progress::new();
    let session = open_session(project, &progress)?;
    let (fetched, _, _) = resolve_and_fetch(&session, &progress, locked)?;
    let mut artifacts = session.prepare(&fetched, sde)?;
    let date = match sde {
        Some(t) => t as i64,
        None => session.settings.now,
    };
    let signing: Vec<_> = loaded.into_iter().map(|k| k.key).collect();
    let (keyring, _) = debforge::openpgp::sign::export_public(&signing);
    // Versions and pins once, from the prepared packages' own control
    // paragraphs: the metapackage, the repo-config package and the output's
    // debforge.pref all get the same.
    let versions = pipeline::package_versions(&artifacts, &session.recipes);
    // The packages whose exact build is the point are pinned to the
    // repository (its Release's Origin and Label): apt takes whatever
    // version it offers, a later generation or an earlier one published
    // again, and no other build from anywhere. The rest (a distribution's
    // own library) is offered like any repository's (see format::preferences
    // and pipeline::pinned_packages).
    let names = pipeline::pinned_packages(&artifacts, &session.recipes);
    let unpinned: Vec<&str> = artifacts
        .iter()
        .map(|a| a.package())
        .filter(|n| !names.iter().any(|p| p == n))
        .collect();
    if !unpinned.is_empty() {
        output::note(&format!(
            "not pinned (their distribution's builds stay in charge; `pin = true` in a recipe to change it): {}",
            unpinned.join(", ")
        ));
    }
    let pins = debforge::format::preferences::release_pins(
        &config.origin,
        &config.label,
        names.iter().map(String::as_str),
    );
    // Packages built here are dated by SOURCE_DATE_EPOCH, else by the newest
    // of the packages they are built around (a function of the lock), else
    // 1980-01-01 (as zip and Python wheels do), never by the clock:
    // rebuilding the same inputs gives the same bytes, so a published
    // package never changes under its name and version.
    let built_date = match sde {
        Some(t) => t as i64,
        None => pipeline::newest_date(&artifacts)?.unwrap_or(REPRODUCIBLE_EPOCH),
    };
    artifacts.extend(
        session.build_from_recipes(&config, &keyring, built_date, &versions, &pins, &names)?,
    );
    let params = debforge::repo::RepoParams {
        config,
        keys: &signing,
        date,
        records: &session.records,
        // The last keep-1 generations' files stay in the pool (with this
        // build's, that is `keep` generations).
        retain: retained(out, keep)?,
        retain_from: None,
        // A test hook (tests/integration/faults.rs): pause inside the swap.
        pause_in_swap: std::env::var_os("DEBFORGE_TEST_PAUSE_IN_SWAP").map(PathBuf::from),
    };
    let inputs: Vec<_> = artifacts.iter().map(|a| a.pool_input()).collect();
    let report = debforge::repo::write(out, &inputs, &params, &pins, &progress)
        .map_err(|e| Failure::from(PipelineError::Repo(Box::new(e))))?;
    progress.finish();
    session.save_records();
    let keys = format!(
        "signed by {} key{}; keyring {}, pins {}",
        signing.len(),
        if signing.len() == 1 { "" } else { "s" },
        report.keyring,
        report.preferences
    );
    let summary = if report.unchanged {
        format!(
            "{} packages in {}, unchanged since the last build: nothing was written ({keys})",
            report.pool.len(),
            out.display()
        )
    } else {
        format!(
            "wrote {} packages into {} ({keys})",
            report.pool.len(),
            out.display()
        )
    };
    output::built(&report.packages, &summary);
    if !report.unchanged {
        record_generation(
            out,
            &report,
            &session,
            &signing,
            &pins,
            date,
            &params.config,
        )?;
    }
    next_steps(out, &report, &session.recipes, &params.config);
    Ok(EXIT_OK)
}

/// Records what this build made as a generation (unless it is the same as
/// the last one but for the Release's date), and says which.
fn record_generation(
    out: &Path,
    report: &debforge::repo::OutputReport,
    session: &debforge::pipeline::Session,
    signing: &[debforge::openpgp::sign::SigningKey],
    pins: &str,
    date: i64,
    config: &debforge::repo::RepoConfig,
) -> Result<(), Failure> {
    let suite = &config.suite;
    use sha2::{Digest, Sha256};
    let sha = |b: &[u8]| hex::encode(Sha256::digest(b));
    let release = std::fs::read(out.join("dists").join(suite).join("Release"))
        .map(|b| sha(&b))
        .unwrap_or_default();
    let lock = std::fs::read(session.lock_path())
        .map(|b| sha(&b))
        .unwrap_or_default();
    let g = debforge::repo::generations::Generation {
        number: 0,
        date,
        release_sha256: release,
        packages: report.packages.clone(),
        lock_sha256: lock,
        keys: signing.iter().map(|k| k.fingerprint()).collect(),
        pins_sha256: sha(pins.as_bytes()),
        pins: Some(pins.to_string()),
        repository: Some(config.clone()),
    };
    let (g, new) = debforge::repo::generations::record(out, g)
        .map_err(|e| Failure::from(PipelineError::Repo(Box::new(e))))?;
    output::note(&if new {
        format!(
            "recorded generation {} (debforge history, debforge diff)",
            g.number
        )
    } else {
        format!(
            "generation {} still in force (the same packages, pins and keys)",
            g.number
        )
    });
    Ok(())
}

/// The pool files of the last `keep - 1` recorded generations.
fn retained(out: &Path, keep: u32) -> Result<Vec<(String, String)>, Failure> {
    let all = debforge::repo::generations::list(out)
        .map_err(|e| Failure::from(PipelineError::Repo(Box::new(e))))?;
    let skip = all.len().saturating_sub(keep.saturating_sub(1) as usize);
    let mut files: Vec<(String, String)> = all[skip..]
        .iter()
        .flat_map(|g| {
            g.packages
                .iter()
                .map(|p| (p.filename.clone(), p.sha256.clone()))
        })
        .collect();
    files.sort();
    files.dedup();
    Ok(files)
}

/// What to do with the repository now.
fn next_steps(
    out: &Path,
    report: &debforge::repo::OutputReport,
    recipes: &debforge::recipe::RecipeSet,
    config: &debforge::repo::RepoConfig,
) {
    let mut text = format!(
        "next: serve it on the LAN with `debforge serve --out {o}`, or publish it with `debforge publish --out {o} --to DIR|rsync://HOST/MODULE/PATH|s3://BUCKET/PREFIX`",
        o = out.display()
    );
    let repo_config = recipes
        .packages
        .iter()
        .find(|p| p.build.as_ref().is_some_and(|b| b.repo_config.is_some()));
    if let Some(p) = repo_config
        && let Some(e) = report.packages.iter().find(|e| e.package == p.name)
    {
        let name = p
            .build
            .as_ref()
            .and_then(|b| b.repo_config.as_deref())
            .unwrap_or("debforge");
        text.push_str(&format!(
            "\n  on each lab machine: sudo apt install ./{} (from {}), then sudo apt-get update",
            e.filename.rsplit('/').next().unwrap_or(&e.filename),
            out.join(&e.filename).display()
        ));
        if let Some(m) = &config.mirror {
            text.push_str(&format!(
                "\n  (its apt source: deb [signed-by=/usr/share/keyrings/{name}-archive-keyring.gpg] {m} {} {})",
                config.suite, config.component
            ));
        }
    }
    output::note(&text);
}

/// Refuses a Release apt would refuse on arrival: dated in the future
/// (SOURCE_DATE_EPOCH ahead of the clock), or already past its Valid-Until.
fn check_dates(sde: Option<u64>, valid_for: Option<i64>, now: i64) -> Result<(), Failure> {
    let Some(date) = sde.map(|t| t as i64) else {
        return Ok(());
    };
    let show = |t: i64| debforge::format::date::format_rfc2822(t);
    if date > now + 10 {
        return Err(Failure::new(format!(
            "SOURCE_DATE_EPOCH={date} dates the Release {}, in the future: apt refuses it as not valid yet",
            show(date)
        ))
        .hint(Some("set SOURCE_DATE_EPOCH to a time in the past (e.g. $(git log -1 --format=%ct)), or unset it")));
    }
    if let Some(v) = valid_for
        && date + v < now
    {
        return Err(Failure::new(format!(
            "SOURCE_DATE_EPOCH={date} and valid-for-days give a Release valid until {}, already past: apt refuses it as expired",
            show(date + v)
        ))
        .hint(Some("use a later SOURCE_DATE_EPOCH, a longer valid-for-days in repository.toml, or unset SOURCE_DATE_EPOCH")));
    }
    Ok(())
}
