//! `debforge bundle`: the air-gapped bundle (whole, or a delta), and its
//! check.

use super::prelude::*;

use debforge::workflow::bundle::{BundleSettings, bundle};

pub(crate) fn run_bundle(
    cx: &Context,
    output: Option<PathBuf>,
    out: &Path,
    from: Option<PathBuf>,
    keys: &KeyArgs,
) -> Result<u8, Failure> {
    let output = output.ok_or_else(|| {
        Failure::new("bundle: say where to write it with -o FILE")
            .hint(Some("debforge bundle -o lab.tar"))
    })?;
    let settings = BundleSettings {
        out: out.to_path_buf(),
        output: output.clone(),
        source_date_epoch: cx.env.dates()?.source_date_epoch,
        from,
        keys: settings::keys(keys)?,
        now: cx.env.dates.now,
    };
    let report = bundle(&settings, &cx.printer);
    cx.printer.finish();
    let report = report?;
    let what = match &report.delta {
        None => String::new(),
        Some(d) => format!(
            "a delta from generation {} to {}: {} of the repository's files, {} of {} bytes ({:.1}%); ",
            short(&d.base),
            short(&d.target),
            d.carried,
            d.carried_bytes,
            d.target_bytes,
            100.0 * d.carried_bytes as f64 / d.target_bytes.max(1) as f64
        ),
    };
    output::plain(&format!(
        "wrote {} ({what}{} files); on the offline machine: tar -xf {} && sudo sh debforge-bundle/install.sh\n",
        output.display(),
        report.files,
        output.display()
    ));
    Ok(EXIT_OK)
}

/// A generation's name as people read it (its first 12 hex digits).
fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

pub(crate) fn run_bundle_verify(
    bundle: &Path,
    from: Option<&Path>,
    keyring: Option<&Path>,
) -> Result<u8, Failure> {
    let check = debforge::bundle::verify_bundle(bundle)?;
    let mut problems = check.problems.clone();
    let mut notes = Vec::new();
    if let Some(delta) = &check.delta {
        let base = from.map(debforge::bundle::read_base).transpose()?;
        let (ring, whose) = match (keyring, &base) {
            (Some(k), _) => (
                debforge::input::read(k, debforge::input::limit::KEY)
                    .map_err(|e| Failure::new(format!("{}: {e}", k.display())))?,
                k.display().to_string(),
            ),
            (None, Some(b)) if b.keyring.is_some() => (
                b.keyring.clone().unwrap_or_default(),
                "the base bundle's keyring".to_string(),
            ),
            _ => {
                // The delta's own keyring proves nothing of where it came
                // from: checked, but not good enough to say "all good".
                problems.push(
                    "DELTA: not checked against the keyring the lab trusts: pass --from LAST.tar (the bundle the lab installed last) or --keyring FILE".into(),
                );
                (
                    delta_keyring(bundle)?,
                    "the keyring the delta itself carries".to_string(),
                )
            }
        };
        match debforge::openpgp::PinnedKeyring::all(&ring)
            .map_err(|e| e.to_string())
            .and_then(|r| r.verify_cleartext(delta).map_err(|e| e.to_string()))
        {
            Ok((body, fpr)) => {
                notes.push(format!("DELTA: signed by {fpr}, checked with {whose}"));
                let text = String::from_utf8_lossy(&body);
                problems.extend(debforge::bundle::check_delta(
                    &text,
                    &check.carried,
                    check.installer.as_deref(),
                    base.as_ref(),
                ));
            }
            Err(e) => problems.push(format!("DELTA: not signed by {whose}: {e}")),
        }
    }
    let mut text = String::new();
    for p in &problems {
        text.push_str(&format!("problem: {p}\n"));
    }
    for n in &notes {
        text.push_str(&format!("{n}\n"));
    }
    text.push_str(&format!(
        "{}: {}\n",
        bundle.display(),
        if problems.is_empty() {
            if check.delta.is_some() {
                "all files match SHA256SUMS and the signed manifest".to_string()
            } else {
                "all files match SHA256SUMS".to_string()
            }
        } else {
            format!("{} problem(s); do not install it", problems.len())
        }
    ));
    output::plain(&text);
    Ok(if problems.is_empty() {
        EXIT_OK
    } else {
        EXIT_FALSE
    })
}

/// The keyring a delta carries, if it carries one.
fn delta_keyring(bundle: &Path) -> Result<Vec<u8>, Failure> {
    Ok(debforge::bundle::read_base(bundle)?
        .keyring
        .unwrap_or_default())
}
