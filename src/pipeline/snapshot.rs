//! `debforge fetch --to DIR`: a self-contained snapshot for air-gapped use.

use crate::error::FileError;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::fetch::Expected;
use crate::recipe::lock::{Lock, LockedPackage};
use crate::upstream;

use super::{Fetched, PipelineError, write_atomic};

/// The signed files and indexes of an opened source, for snapshots.
#[derive(Debug, Clone)]
pub struct OpenSourceFiles {
    pub source: String,
    pub signed: Vec<(String, Vec<u8>)>,
    pub indexes: BTreeMap<String, PathBuf>,
}

/// Copies a verified file (hashing while copying: the cache is re-checked on
/// the way out) to `dest`.
fn copy_checked(src: &Path, locked: &LockedPackage, dest: &Path) -> Result<(), PipelineError> {
    let expected = Expected {
        size: locked.size,
        sha256: Some(locked.sha256().to_string()),
        sha512: None,
    };
    upstream::copy_verified(src, &expected, dest)
        .map(|_| ())
        .map_err(|source| PipelineError::Fetch {
            package: locked.name().to_string(),
            source,
        })
}

/// `debforge fetch --to DIR`: a self-contained snapshot with each source's
/// signed Release files, verified indexes and debs at their repository paths
/// (`DIR/<source>/…`), direct files under `DIR/direct/`, and the lock file.
pub fn write_snapshot(
    dir: &Path,
    fetched: &[Fetched],
    sources: &[OpenSourceFiles],
    lock: &Lock,
) -> Result<(), PipelineError> {
    for s in sources {
        let root = dir.join(&s.source);
        for (rel, bytes) in &s.signed {
            write_atomic(&root.join(rel), bytes)?;
        }
        for (rel, local) in &s.indexes {
            let dest = root.join(rel);
            fs::create_dir_all(dest.parent().unwrap_or(&root)).map_err(FileError::at(&root))?;
            let tmp = dest.with_extension("part");
            fs::copy(local, &tmp).map_err(FileError::at(&dest))?;
            fs::rename(&tmp, &dest).map_err(FileError::at(&dest))?;
        }
    }
    for f in fetched {
        let dest = match f.resolved.locked.origin() {
            "url" | "path" => dir.join("direct").join(f.resolved.file_name()),
            source => dir.join(source).join(f.resolved.locked.path()),
        };
        copy_checked(f.file(), &f.resolved.locked, &dest)?;
    }
    write_atomic(&dir.join("debforge.lock"), lock.to_text().as_bytes())
}
