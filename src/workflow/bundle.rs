//! `bundle`: the repository as one file for an air-gapped machine.

use std::path::PathBuf;

use super::WorkflowError;
use crate::report::Reporter;

#[derive(Debug, Clone)]
pub struct BundleSettings {
    /// The build output.
    pub out: PathBuf,
    /// The bundle file to write.
    pub output: PathBuf,
    /// Entries' dates (else the Release's).
    pub source_date_epoch: Option<i64>,
}

/// Writes the bundle; returns how many files it holds.
pub fn bundle(s: &BundleSettings, reporter: &dyn Reporter) -> Result<usize, WorkflowError> {
    let mtime = s.source_date_epoch.map(|t| t as u64);
    Ok(crate::bundle::write_bundle(
        &s.out, &s.output, mtime, reporter,
    )?)
}
