//! `debforge build`: the whole signed repository.

use super::prelude::*;

/// 1980-01-01T00:00:00Z: the date of packages built with nothing to date them.
const REPRODUCIBLE_EPOCH: i64 = 315_532_800;

pub(crate) fn run_build(
    project: &ProjectArgs,
    keys: &KeyArgs,
    locked: bool,
    out: &std::path::Path,
) -> Result<u8, Failure> {
    // Keys and settings first: a build that cannot sign fails before downloading.
    let loaded = debforge::keys::load_signing_keys(
        &keys.keys,
        passphrase(keys.passphrase_file.as_deref())?.as_deref(),
    )
    .map_err(Failure::new)?;
    for k in &loaded {
        if let Some(t) = k.expires_soon {
            let days = t
                .duration_since(std::time::SystemTime::now())
                .map(|d| d.as_secs() / 86_400)
                .unwrap_or(0);
            output::warning(&format!(
                "signing key {} expires in {days} days: rotate it (debforge keygen)",
                k.path.display()
            ));
        }
    }
    let config = debforge::recipe::load_repository(&project.recipes).map_err(Failure::new)?;
    let progress = progress::Progress::new();
    let session = open_session(project, &progress)?;
    let (fetched, _, _) = resolve_and_fetch(&session, &progress, locked)?;
    let sde = source_date_epoch()?;
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
    let pins = debforge::format::preferences::exact_pins(
        versions.iter().map(|(n, v)| (n.as_str(), v.as_str())),
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
    artifacts.extend(session.build_from_recipes(&config, &keyring, built_date, &versions, &pins)?);
    let params = debforge::repo::RepoParams {
        config,
        keys: &signing,
        date,
        records: &session.records,
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
    Ok(EXIT_OK)
}
