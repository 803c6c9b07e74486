//! `bundle`: the repository as one file for an air-gapped machine, whole
//! or as a delta from the last bundle the lab installed.

use std::path::PathBuf;

use super::{KeySettings, WorkflowError};
use crate::report::Reporter;

#[derive(Debug, Clone)]
pub struct BundleSettings {
    /// The build output.
    pub out: PathBuf,
    /// The bundle file to write.
    pub output: PathBuf,
    /// Entries' dates (else the Release's).
    pub source_date_epoch: Option<i64>,
    /// A delta from the state this bundle (full or delta) left.
    pub from: Option<PathBuf>,
    /// The repository's signing keys (a delta's manifest is signed).
    pub keys: KeySettings,
    pub now: i64,
}

/// What `bundle` wrote.
#[derive(Debug, Clone)]
pub struct BundleReport {
    pub files: usize,
    pub delta: Option<DeltaReport>,
}

/// A delta's base and target generations and its size against the whole.
#[derive(Debug, Clone)]
pub struct DeltaReport {
    pub base: String,
    pub target: String,
    pub carried: usize,
    pub carried_bytes: u64,
    pub target_bytes: u64,
}

/// Writes the bundle (a delta with `from`).
pub fn bundle(s: &BundleSettings, reporter: &dyn Reporter) -> Result<BundleReport, WorkflowError> {
    let mtime = s.source_date_epoch.map(|t| t as u64);
    let Some(from) = &s.from else {
        let files = crate::bundle::write_bundle(&s.out, &s.output, mtime, reporter)?;
        return Ok(BundleReport { files, delta: None });
    };
    let base = crate::bundle::read_base(from)?;
    let plan = crate::bundle::plan_delta(&s.out, &base)?;
    let mtime = mtime.unwrap_or_else(|| release_date(&s.out, &base.suite));
    let signed = sign_manifest(s, &plan.manifest_text(), mtime, base.keyring.as_deref())?;
    let files = crate::bundle::write_delta(&s.out, &plan, &signed, &s.output, mtime, reporter)?;
    let (target, _) = plan.generations();
    Ok(BundleReport {
        files,
        delta: Some(DeltaReport {
            base: base.id,
            target,
            carried: plan.carried.len(),
            carried_bytes: plan.carried_bytes,
            target_bytes: plan.target_bytes,
        }),
    })
}

/// The output's Release date (what dates a bundle's entries).
fn release_date(out: &std::path::Path, suite: &str) -> u64 {
    let path = out.join("dists").join(suite).join("Release");
    crate::input::read_to_string(&path, crate::input::limit::RELEASE)
        .ok()
        .and_then(|t| crate::format::release::Release::parse(&t).ok())
        .and_then(|r| r.date().ok().flatten())
        .map_or(0, |d| d.max(0) as u64)
}

/// The manifest signed (cleartext) by each signing key the lab trusts:
/// the keyring the base bundle left (`trusted`; else the output's own).
/// gpgv refuses a message with any signature whose key it lacks, so a key
/// added since (a rotation) does not sign until a bundle carried it over.
fn sign_manifest(
    s: &BundleSettings,
    text: &str,
    date: u64,
    trusted: Option<&[u8]>,
) -> Result<Vec<u8>, WorkflowError> {
    let keys: Vec<_> =
        crate::keys::load_signing_keys(&s.keys.dir, s.keys.passphrase.as_deref(), s.now)?
            .into_iter()
            .map(|k| k.key)
            .collect();
    let own;
    let trusted = match trusted {
        Some(t) => t,
        None => {
            let path = s.out.join(format!("{}.gpg", crate::repo::KEYRING_NAME));
            own = crate::input::read(&path, crate::input::limit::KEY)
                .map_err(crate::error::FileError::at(&path))
                .map_err(crate::repo::RepoError::from)?;
            &own
        }
    };
    let ring = crate::openpgp::PinnedKeyring::all(trusted).ok();
    let dated = std::time::UNIX_EPOCH + std::time::Duration::from_secs(date);
    let sign = |keys: &[crate::openpgp::sign::SigningKey]| {
        let created = keys
            .iter()
            .map(crate::openpgp::sign::SigningKey::created)
            .fold(dated, std::cmp::max);
        crate::openpgp::sign::sign_cleartext(keys, text.as_bytes(), created)
            .map_err(crate::repo::RepoError::from)
    };
    let verifies = |signed: &[u8]| {
        ring.as_ref()
            .is_some_and(|r| r.verify_cleartext(signed).is_ok())
    };
    let mut trusted_keys = Vec::new();
    for k in keys {
        if verifies(&sign(std::slice::from_ref(&k))?) {
            trusted_keys.push(k);
        }
    }
    if trusted_keys.is_empty() {
        return Err(WorkflowError::NotTheRepositorysKeys {
            keys: s.keys.dir.clone(),
            out: s.out.clone(),
        });
    }
    Ok(sign(&trusted_keys)?)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_bundle_names_the_keyring_as_the_repository_does() {
        assert_eq!(
            crate::bundle::KEYRING_FILE,
            format!("{}.gpg", crate::repo::KEYRING_NAME)
        );
    }
}
