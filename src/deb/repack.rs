//! Repacking a `.deb`: a new control member (fields set, maintainer scripts
//! merged), the data member copied verbatim — never decompressed and
//! recompressed — so repacking a 300 MB package costs little more than
//! copying it, and `md5sums` stays right because the data is the same bytes.

use std::fs;
use std::io::{BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::compression::Compression;
use super::read::{ControlFile, DebFile};
use super::{DebError, DebErrorKind};
use crate::error::FileError;
use crate::format::control::check_binary_control;
use crate::format::deb822::ControlParagraph;
use crate::format::scripts::{SCRIPT_NAMES, merge};
use crate::format::version::Version;

#[derive(Debug, Clone, Default)]
pub struct RepackOptions {
    /// Our maintainer scripts, by name (`postinst`, …), merged with upstream's
    /// (see `format::scripts` for the order and how each part runs).
    pub scripts: Vec<(String, Vec<u8>)>,
    /// Control fields to set (added when absent).
    pub set: Vec<(String, String)>,
    /// Appended to the version, to mark a local rebuild.
    pub version_suffix: Option<String>,
    /// Exact relations to move: (package, upstream version) → the version
    /// it is rebuilt as (`pipeline::suffix`, which knows the project's other
    /// packages). `None`: on its own, a package with a suffix moves every
    /// exact relation on its own upstream version (siblings built from one
    /// source version, as `libnccl-dev` names `libnccl2 (= 2.4.2-1+cuda10.1)`).
    pub retarget: Option<std::collections::BTreeMap<(String, String), String>>,
    /// Time for the new control member's entries and the ar headers.
    pub mtime: u64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct RepackReport {
    pub output: PathBuf,
    pub package: String,
    pub version: String,
    /// Scripts that now run upstream's part and ours.
    pub merged: Vec<String>,
    /// Scripts that are ours alone (upstream had none).
    pub added: Vec<String>,
    pub size: u64,
    pub sha256: String,
}

#[derive(Debug, thiserror::Error)]
pub enum RepackError {
    #[error("{0}")]
    Deb(#[from] DebError),
    #[error(transparent)]
    Io(#[from] crate::error::FileError),
    #[error("--{name}: not a maintainer script name (preinst, postinst, prerm, postrm)")]
    BadScriptName { name: String },
    #[error("--set {0:?}: expected Field=Value")]
    BadSet(String),
    #[error("--set {field}: the value has a newline; control fields set this way are one line")]
    SetNewline { field: String },
    #[error("--{name}: not a text file (a maintainer script is a text file starting with #!)")]
    ScriptNotText { name: String },
    #[error("--{name}: no #! line; the script must name its interpreter")]
    ScriptNoInterpreter { name: String },
    #[error("the repacked control paragraph is invalid: {0}")]
    Control(String),
}

/// Moves the exact relations that must follow a suffix (see
/// [`RepackOptions::retarget`]); every other byte of each field stays.
fn retarget_relations(
    paragraph: &mut crate::format::deb822::ControlParagraph,
    old: &str,
    opts: &RepackOptions,
) {
    let new_own = paragraph.get("Version").unwrap_or_default().to_string();
    let lookup = |name: &str, version: &str| match &opts.retarget {
        Some(map) => map.get(&(name.to_string(), version.to_string())).cloned(),
        None => (opts.version_suffix.is_some() && version == old).then(|| new_own.clone()),
    };
    for field in crate::format::control::RELATION_FIELDS {
        if let Some(value) = paragraph.field(field).map(|f| f.verbatim().to_string()) {
            let (rewritten, moved) = crate::format::relation::retarget(field, &value, &lookup);
            if !moved.is_empty() {
                paragraph.set_verbatim(field, &rewritten);
            }
        }
    }
}

/// Repacks `input` into `output` (written under a temporary name and renamed).
pub fn repack(
    input: &Path,
    output: &Path,
    opts: &RepackOptions,
) -> Result<RepackReport, RepackError> {
    let deb = DebFile::open(input)?;
    let control = deb.control_files()?;
    // The data member is copied byte for byte: read it to its end first, so
    // that a package dpkg-deb would refuse is never written again.
    deb.check_data()?;
    let mut paragraph = control.control.clone();
    apply_set(&mut paragraph, &opts.set)?;
    check_scripts(&opts.scripts)?;
    let old = paragraph.get("Version").unwrap_or_default().to_string();
    if let Some(suffix) = &opts.version_suffix {
        let v = format!("{old}{suffix}");
        Version::parse(&v).map_err(|e| RepackError::Control(format!("version {v:?}: {e}")))?;
        paragraph.set("Version", &v);
    }
    retarget_relations(&mut paragraph, &old, opts);
    check_binary_control(&paragraph).map_err(|e| RepackError::Control(e.to_string()))?;

    let mut files = control_files_with(&control.files, &paragraph);
    let (merged, added) = merge_scripts(&mut files, &opts.scripts)?;
    files.sort_by(|a, b| a.0.cmp(&b.0));

    let compression = control_compression(&deb);
    let control_tar =
        super::build::control_tar(&files, opts.mtime, compression).map_err(FileError::at(input))?;
    let (size, sha256) = write_repacked(&deb, output, opts.mtime, compression, &control_tar)?;
    check_written(output)?;
    Ok(RepackReport {
        output: output.to_path_buf(),
        package: paragraph.get("Package").unwrap_or_default().to_string(),
        version: paragraph.get("Version").unwrap_or_default().to_string(),
        merged,
        added,
        size,
        sha256,
    })
}

/// Sets the `--set` fields in `paragraph`, refusing bad names and multi-line values.
fn apply_set(
    paragraph: &mut ControlParagraph,
    set: &[(String, String)],
) -> Result<(), RepackError> {
    for (k, v) in set {
        if k.is_empty() || k.contains(char::is_whitespace) || k.contains(':') || k.starts_with('-')
        {
            return Err(RepackError::BadSet(format!("{k}={v}")));
        }
        if v.contains(['\n', '\r']) {
            return Err(RepackError::SetNewline { field: k.clone() });
        }
        paragraph.set(k, v);
    }
    Ok(())
}

/// Checks that each of our maintainer scripts is text starting with a `#!` line.
fn check_scripts(scripts: &[(String, Vec<u8>)]) -> Result<(), RepackError> {
    for (name, script) in scripts {
        if std::str::from_utf8(script).is_err() || script.contains(&0) {
            return Err(RepackError::ScriptNotText { name: name.clone() });
        }
        if !script.starts_with(b"#!") {
            return Err(RepackError::ScriptNoInterpreter { name: name.clone() });
        }
    }
    Ok(())
}

/// Upstream's control files as (name, mode, bytes), `control` replaced by `paragraph`.
fn control_files_with(
    files: &[ControlFile],
    paragraph: &ControlParagraph,
) -> Vec<(String, u32, Vec<u8>)> {
    let mut files: Vec<(String, u32, Vec<u8>)> = files
        .iter()
        .map(|f| (f.name.clone(), f.mode, f.data.clone()))
        .collect();
    if let Some(c) = files.iter_mut().find(|f| f.0 == "control") {
        c.2 = paragraph.to_string().into_bytes();
    }
    files
}

/// Merges our scripts into `files` (mode 0755); returns the names merged and the names added.
fn merge_scripts(
    files: &mut Vec<(String, u32, Vec<u8>)>,
    scripts: &[(String, Vec<u8>)],
) -> Result<(Vec<String>, Vec<String>), RepackError> {
    let (mut merged, mut added) = (Vec::new(), Vec::new());
    for (name, ours) in scripts {
        if !SCRIPT_NAMES.contains(&name.as_str()) {
            return Err(RepackError::BadScriptName { name: name.clone() });
        }
        match files.iter_mut().find(|f| f.0 == *name) {
            Some(f) => {
                f.2 = merge(name, Some(&f.2), ours);
                f.1 = 0o755;
                merged.push(name.clone());
            }
            None => {
                files.push((name.clone(), 0o755, merge(name, None, ours)));
                added.push(name.clone());
            }
        }
    }
    Ok((merged, added))
}

/// The compression for the new control member.
fn control_compression(deb: &DebFile) -> Compression {
    // The control member keeps upstream's compression (zstd becomes xz: not
    // every client reads zstd).
    match deb.control_member().compression {
        Some(Compression::Zstd) | None => Compression::Xz,
        Some(c) => c,
    }
}

/// Writes the new package via a temporary file beside `output`; returns its size and SHA-256.
fn write_repacked(
    deb: &DebFile,
    output: &Path,
    mtime: u64,
    compression: Compression,
    control_tar: &[u8],
) -> Result<(u64, String), RepackError> {
    let out_dir = super::build::output_dir(output);
    let mut tmp = tempfile::Builder::new()
        .prefix(".debforge-repack-")
        .tempfile_in(&out_dir)
        .map_err(FileError::at(&out_dir))?;
    let data = deb.data_member().clone();
    let digests = {
        let writer = crate::digest::HashingWriter::new(
            BufWriter::with_capacity(1 << 20, tmp.as_file_mut()),
            crate::digest::Hasher::new(crate::digest::DigestSet::SHA256),
        );
        // The data member's bytes as they are.
        let writer = super::ar::write_deb(
            writer,
            mtime,
            (
                &format!("control.tar{}", compression.extension()),
                control_tar,
            ),
            (&data.name, data.size, &mut deb.raw_member(&data)),
        )
        .map_err(FileError::at(output))?;
        let (mut buffered, d) = writer.finish();
        buffered.flush().map_err(FileError::at(output))?;
        (d.size, d.sha256)
    };
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(0o644))
        .map_err(FileError::at(output))?;
    tmp.persist(output)
        .map_err(|e| FileError::new(output, e.error))?;
    Ok(digests)
}

/// Re-reads what was written: a repack that dpkg could not open is a bug.
fn check_written(output: &Path) -> Result<(), RepackError> {
    DebFile::open(output)?
        .control_files()
        .map_err(|e| match e.kind {
            DebErrorKind::Control(c) => RepackError::Control(c.to_string()),
            _ => RepackError::Deb(e),
        })?;
    Ok(())
}

impl crate::error::Hint for RepackError {
    fn hint(&self) -> Option<String> {
        match self {
            RepackError::Io(e) => crate::error::Hint::hint(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{RepackOptions, retarget_relations};
    use crate::format::deb822::ControlParagraph;

    fn depends_after(depends: &str, opts: &RepackOptions) -> String {
        let mut p = ControlParagraph::parse_single(&format!(
            "Package: libnccl-dev\nVersion: 1.0+x\nDepends: {depends}\n"
        ))
        .unwrap();
        retarget_relations(&mut p, "1.0", opts);
        p.get("Depends").unwrap().to_string()
    }

    #[test]
    fn on_its_own_exact_relations_on_the_own_version_follow_a_suffix() {
        let opts = RepackOptions {
            version_suffix: Some("+x".into()),
            ..RepackOptions::default()
        };
        assert_eq!(
            depends_after("a (=1.0), b (>= 1.0), c (= 1.0.1)", &opts),
            "a (= 1.0+x), b (>= 1.0), c (= 1.0.1)"
        );
    }

    #[test]
    fn in_a_project_only_the_packages_that_moved_are_retargeted() {
        let opts = RepackOptions {
            version_suffix: Some("+x".into()),
            retarget: Some([(("a".to_string(), "1.0".to_string()), "1.0+y".to_string())].into()),
            ..RepackOptions::default()
        };
        assert_eq!(
            depends_after("a (=1.0), b (= 1.0)", &opts),
            "a (= 1.0+y), b (= 1.0)"
        );
    }
}
