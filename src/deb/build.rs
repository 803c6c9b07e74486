//! Writing a `.deb` from a package tree, as `dpkg-deb --build --root-owner-group`
//! takes it: `DIR/DEBIAN/` holds `control`, maintainer scripts and other
//! control files; everything else under `DIR` is the data.
//!
//! Output is deterministic: entries sorted by name within each directory (as
//! dpkg-deb does), owner root:root (0:0), modification times clamped to
//! `SOURCE_DATE_EPOCH` when given, GNU tar headers, dpkg's ar headers dated
//! `SOURCE_DATE_EPOCH` or else the newest time in the tree. Nothing appears at
//! the output path unless the whole package was written: it is assembled under
//! a temporary name in the same directory and renamed at the end.

use crate::error::FileError;
use std::collections::HashMap;
use std::fs::{self, File, Metadata};
use std::io::{self, BufWriter, Read, Seek, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use md5::{Digest, Md5};

use super::compression::Compression;
use crate::digest::{DigestSet, Hasher, HashingWriter};
use crate::format::control::{ControlError, check_binary_control};
use crate::format::deb822::ControlParagraph;

const MAINTAINER_SCRIPTS: [&str; 5] = ["preinst", "postinst", "prerm", "postrm", "config"];

#[derive(Debug, Clone)]
pub struct BuildOptions {
    pub compression: Compression,
    /// The compressor's level; `None` for dpkg-deb's default.
    pub level: Option<u32>,
    /// `SOURCE_DATE_EPOCH`: clamp every time to it.
    pub source_date_epoch: Option<u64>,
    /// Threads for the xz encoder.
    pub threads: u32,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            compression: Compression::Xz,
            level: None,
            source_date_epoch: None,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        }
    }
}

/// What was written.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BuildReport {
    pub output: PathBuf,
    pub package: String,
    pub version: String,
    pub architecture: String,
    pub installed_size: u64,
    pub data_entries: usize,
    pub size: u64,
    pub sha256: String,
    /// Control data debforge filled in: `md5sums`, `Installed-Size`.
    pub generated: Vec<&'static str>,
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(
        "{}: cannot read the package tree: {source}",
        crate::error::ShortPath(path)
    )]
    UnreadableTree { path: PathBuf, source: io::Error },
    #[error(
        "{}: not found; a package tree needs DEBIAN/control (see `debforge deb build --help`)",
        crate::error::ShortPath(path)
    )]
    NoControl { path: PathBuf },
    #[error("{}: {source}", crate::error::ShortPath(path))]
    Control { path: PathBuf, source: ControlError },
    #[error(
        "{}: is not a plain file; DEBIAN/ may hold only plain files",
        crate::error::ShortPath(path)
    )]
    ControlNotPlainFile { path: PathBuf },
    #[error(
        "{}: maintainer script has bad permissions {mode:04o} (must be >=0555 and <=0775); run `chmod 0755` on it",
        crate::error::ShortPath(path)
    )]
    ScriptMode { path: PathBuf, mode: u32 },
    #[error(
        "{}: conffile {name:?} is not a plain file in the package tree",
        crate::error::ShortPath(path)
    )]
    MissingConffile { path: PathBuf, name: String },
    #[error(
        "{}: conffile {name:?} must be an absolute path",
        crate::error::ShortPath(path)
    )]
    RelativeConffile { path: PathBuf, name: String },
    #[error("{}: sockets cannot be packaged", crate::error::ShortPath(path))]
    Socket { path: PathBuf },
    #[error(
        "{}: file changed size while it was being packaged",
        crate::error::ShortPath(path)
    )]
    Changed { path: PathBuf },
    #[error(
        "{}: its files and the generated md5sums make a control member of {size} bytes, more than the {limit} a package's control may hold (dpkg reads it into memory; so does debforge)",
        crate::error::ShortPath(path)
    )]
    ControlTooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    #[error(transparent)]
    Io(#[from] crate::error::FileError),
    #[error("compression level {level} is out of range for {compression} (0 to {max})")]
    Level {
        compression: Compression,
        level: u32,
        max: u32,
    },
}

/// One filesystem object of the data tree, in archive order.
struct TreeEntry {
    /// Archive name: `./`, `./usr/`, `./usr/bin/tool`.
    name: String,
    path: PathBuf,
    meta: Metadata,
}

/// One file of the control member: (name, mode, mtime, bytes).
type ControlMember = (String, u32, i64, Vec<u8>);

/// Builds `dir` into a `.deb` at `out` (a file path, or a directory to put
/// `<package>_<version>_<arch>.deb` in).
pub fn build_from_dir(
    dir: &Path,
    out: &Path,
    opts: &BuildOptions,
) -> Result<BuildReport, BuildError> {
    let level = checked_level(opts)?;
    check_readable(dir)?;

    // Control: parse and check before any output exists.
    let debian = dir.join("DEBIAN");
    let control_path = debian.join("control");
    let mut control = read_control(&control_path)?;

    let control_entries = control_dir_entries(&debian)?;
    let conffiles = check_conffiles(dir, &debian)?;
    let tree = walk_tree(dir)?;

    let newest = newest_mtime(&tree, &control_entries);
    let reference_time = opts.source_date_epoch.unwrap_or(newest);
    let clamp = |t: i64| clamp_time(t, opts.source_date_epoch);

    let out_path = resolve_output(out, &control)?;
    let out_dir = output_dir(&out_path);

    // Data first, to a temporary file: md5sums and Installed-Size come from it.
    let (mut data_tmp, data) = write_data_tmp(&out_dir, &tree, &conffiles, opts, level, &clamp)?;

    let mut generated = Vec::new();
    let installed_size = fill_installed_size(&mut control, &data, &control_entries, &mut generated);
    let control_files = control_members(
        &control_entries,
        &control,
        &mut generated,
        reference_time,
        data.md5sums,
    )?;
    check_control_size(&debian, &control_files)?;
    let control_tar =
        compressed_control_tar(&debian, &control_path, &control_files, &clamp, opts, level)?;

    let digests = write_deb_file(
        &out_dir,
        &out_path,
        reference_time,
        opts.compression,
        &control_tar,
        data_tmp.as_file_mut(),
    )?;

    Ok(BuildReport {
        output: out_path,
        package: control.get("Package").unwrap_or_default().to_string(),
        version: control.get("Version").unwrap_or_default().to_string(),
        architecture: control.get("Architecture").unwrap_or_default().to_string(),
        installed_size,
        data_entries: tree.len(),
        size: digests.size,
        sha256: digests.sha256,
        generated,
    })
}

/// The compression level to use (asked for, or the default), refused if out of range.
fn checked_level(opts: &BuildOptions) -> Result<u32, BuildError> {
    let level = opts.level.unwrap_or(opts.compression.default_level());
    if level > opts.compression.max_level() {
        return Err(BuildError::Level {
            compression: opts.compression,
            level,
            max: opts.compression.max_level(),
        });
    }
    Ok(level)
}

/// Checks that the package tree `dir` is a directory we can list.
fn check_readable(dir: &Path) -> Result<(), BuildError> {
    fs::read_dir(dir).map_err(|source| BuildError::UnreadableTree {
        path: dir.to_path_buf(),
        source,
    })?;
    Ok(())
}

/// Reads `DEBIAN/control` and checks it as a binary package's control paragraph.
fn read_control(control_path: &Path) -> Result<ControlParagraph, BuildError> {
    // By type and bound: a FIFO would hang the build, a link to /dev/zero
    // fill memory (the other DEBIAN/ files are checked before they are read).
    let control_text = match crate::input::read(control_path, crate::input::limit::CONTROL_FILE) {
        Ok(bytes) => String::from_utf8(bytes).map_err(|_| BuildError::Control {
            path: control_path.to_path_buf(),
            source: crate::format::deb822::ParseError {
                line: 1,
                kind: crate::format::deb822::ParseErrorKind::NotUtf8,
            }
            .into(),
        })?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(BuildError::NoControl {
                path: control_path.to_path_buf(),
            });
        }
        Err(e) => return Err(FileError::at(control_path)(e).into()),
    };
    let control_err = |source: ControlError| BuildError::Control {
        path: control_path.to_path_buf(),
        source,
    };
    let control =
        ControlParagraph::parse_single(&control_text).map_err(|e| control_err(e.into()))?;
    check_binary_control(&control).map_err(control_err)?;
    Ok(control)
}

/// The newest modification time in the data tree and `DEBIAN/` (0 if none).
fn newest_mtime(tree: &[TreeEntry], control_entries: &[TreeEntry]) -> u64 {
    tree.iter()
        .chain(control_entries.iter())
        .map(|e| e.meta.mtime().max(0) as u64)
        .max()
        .unwrap_or(0)
}

/// A time as written to the archive: negative as 0, capped at `SOURCE_DATE_EPOCH` if given.
fn clamp_time(t: i64, source_date_epoch: Option<u64>) -> u64 {
    let t = t.max(0) as u64;
    source_date_epoch.map_or(t, |s| t.min(s))
}

/// The directory holding `path` (`.` for a bare file name), where temporary files go.
pub(super) fn output_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Writes the data member to a new temporary file in `out_dir`; returns it and the summary.
fn write_data_tmp(
    out_dir: &Path,
    tree: &[TreeEntry],
    conffiles: &[String],
    opts: &BuildOptions,
    level: u32,
    clamp: &dyn Fn(i64) -> u64,
) -> Result<(tempfile::NamedTempFile, DataSummary), BuildError> {
    let mut data_tmp = tempfile::Builder::new()
        .prefix(".debforge-data-")
        .tempfile_in(out_dir)
        .map_err(FileError::at(out_dir))?;
    let data = write_data(
        tree,
        conffiles,
        opts.compression,
        level,
        opts.threads,
        clamp,
        data_tmp.as_file_mut(),
    )
    .map_err(|e| match e {
        DataError::Build(b) => b,
        DataError::Io(source) => BuildError::Io(FileError::new(data_tmp.path(), source)),
    })?;
    Ok((data_tmp, data))
}

/// Installed-Size: the paragraph's own, or else computed and added to the paragraph.
fn fill_installed_size(
    control: &mut ControlParagraph,
    data: &DataSummary,
    control_entries: &[TreeEntry],
    generated: &mut Vec<&'static str>,
) -> u64 {
    match control.get("Installed-Size") {
        Some(v) => v.parse().unwrap_or(0),
        None => {
            // dpkg-gencontrol counts DEBIAN/ too: the directory and its files.
            let control_kib: u64 = 1 + control_entries
                .iter()
                .map(|e| e.meta.len().div_ceil(1024))
                .sum::<u64>();
            let total = data.installed_size + control_kib;
            let anchor = if control.contains("Maintainer") {
                "Maintainer"
            } else {
                "Architecture"
            };
            control.insert_after(anchor, "Installed-Size", &total.to_string());
            generated.push("Installed-Size");
            total
        }
    }
}

/// The control member, as a tar of these files, within what a reader of
/// the package (debforge's own among them) holds of it: never a package
/// that `deb info`, the index or `verify` would refuse.
fn check_control_size(debian: &Path, files: &[ControlMember]) -> Result<(), BuildError> {
    let block = |n: u64| n.div_ceil(512) * 512;
    // A header and the padded bytes per file, the directory entry, the end.
    let size = files
        .iter()
        .map(|(_, _, _, bytes)| 512 + block(bytes.len() as u64))
        .sum::<u64>()
        + 512
        + 1024;
    let limit = super::read::MAX_CONTROL_MEMBER;
    if size > limit {
        return Err(BuildError::ControlTooLarge {
            path: debian.to_path_buf(),
            size,
            limit,
        });
    }
    Ok(())
}

/// The control member's files by name: `DEBIAN/`'s (our `control`), plus md5sums if absent.
fn control_members(
    control_entries: &[TreeEntry],
    control: &ControlParagraph,
    generated: &mut Vec<&'static str>,
    reference_time: u64,
    md5sums: String,
) -> Result<Vec<ControlMember>, BuildError> {
    let mut control_files: Vec<ControlMember> = Vec::new();
    for e in control_entries {
        let file_name = e
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let bytes = if file_name == "control" {
            control.to_string().into_bytes()
        } else {
            crate::input::read(&e.path, crate::input::limit::CONTROL_FILE)
                .map_err(FileError::at(&e.path))?
        };
        let mtime = if file_name == "control" && !generated.is_empty() {
            reference_time as i64
        } else {
            e.meta.mtime()
        };
        control_files.push((file_name, e.meta.mode() & 0o7777, mtime, bytes));
    }
    if !control_files.iter().any(|f| f.0 == "md5sums") && !md5sums.is_empty() {
        control_files.push((
            "md5sums".into(),
            0o644,
            reference_time as i64,
            md5sums.into_bytes(),
        ));
        generated.push("md5sums");
    }
    control_files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(control_files)
}

/// The compressed control member, its `./` entry dated like `DEBIAN/`.
fn compressed_control_tar(
    debian: &Path,
    control_path: &Path,
    control_files: &[ControlMember],
    clamp: &dyn Fn(i64) -> u64,
    opts: &BuildOptions,
    level: u32,
) -> Result<Vec<u8>, BuildError> {
    let debian_meta = fs::metadata(debian).map_err(FileError::at(debian))?;
    let control_tar = write_control_tar(
        control_files,
        clamp(debian_meta.mtime()),
        clamp,
        opts.compression,
        level,
        opts.threads,
    )
    .map_err(FileError::at(control_path))?;
    Ok(control_tar)
}

/// Writes the `.deb` via a temporary file in `out_dir`, renamed to `out_path`; returns digests.
fn write_deb_file(
    out_dir: &Path,
    out_path: &Path,
    reference_time: u64,
    compression: Compression,
    control_tar: &[u8],
    data_file: &mut File,
) -> Result<crate::digest::Digests, BuildError> {
    let mut out_tmp = tempfile::Builder::new()
        .prefix(".debforge-deb-")
        .tempfile_in(out_dir)
        .map_err(FileError::at(out_dir))?;
    let data_len = data_file
        .stream_position()
        .map_err(FileError::at(out_dir))?;
    data_file.rewind().map_err(FileError::at(out_dir))?;
    let ext = compression.extension();
    let tmp_path = out_tmp.path().to_path_buf();
    let digests = {
        let writer = HashingWriter::new(
            BufWriter::with_capacity(1 << 20, out_tmp.as_file_mut()),
            Hasher::new(DigestSet::SHA256),
        );
        let writer = super::ar::write_deb(
            writer,
            reference_time,
            (&format!("control.tar{ext}"), control_tar),
            (&format!("data.tar{ext}"), data_len, &mut *data_file),
        )
        .map_err(FileError::at(&tmp_path))?;
        let (mut buffered, digests) = writer.finish();
        buffered.flush().map_err(FileError::at(out_path))?;
        digests
    };
    out_tmp
        .as_file()
        .set_permissions(fs::Permissions::from_mode(0o644))
        .map_err(FileError::at(out_path))?;
    out_tmp
        .as_file()
        .sync_all()
        .map_err(FileError::at(out_path))?;
    out_tmp
        .persist(out_path)
        .map_err(|e| BuildError::Io(FileError::new(out_path, e.error)))?;
    Ok(digests)
}

fn resolve_output(out: &Path, control: &ControlParagraph) -> Result<PathBuf, BuildError> {
    if out.is_dir() {
        let version = crate::format::Version::parse(control.get("Version").unwrap_or_default())
            .map(|v| {
                // Policy: the epoch is not part of the file name.
                let mut s = v.upstream().to_string();
                if !v.revision().is_empty() {
                    s = format!("{s}-{}", v.revision());
                }
                s
            })
            .unwrap_or_default();
        Ok(out.join(format!(
            "{}_{}_{}.deb",
            control.get("Package").unwrap_or_default(),
            version,
            control.get("Architecture").unwrap_or_default()
        )))
    } else {
        Ok(out.to_path_buf())
    }
}

/// The plain files of `DEBIAN/`, sorted; maintainer scripts checked as dpkg-deb does.
fn control_dir_entries(debian: &Path) -> Result<Vec<TreeEntry>, BuildError> {
    let mut entries = sorted_dir(debian)?;
    entries.retain(|(name, _)| name.as_bytes() != b"." && name.as_bytes() != b"..");
    let mut out = Vec::new();
    for (name, path) in entries {
        let meta = fs::symlink_metadata(&path).map_err(FileError::at(&path))?;
        if !meta.is_file() {
            return Err(BuildError::ControlNotPlainFile { path });
        }
        let name = name.to_string_lossy().into_owned();
        let mode = meta.mode() & 0o7777;
        if MAINTAINER_SCRIPTS.contains(&name.as_str()) && mode & 0o7757 != 0o755 {
            return Err(BuildError::ScriptMode { path, mode });
        }
        out.push(TreeEntry { name, path, meta });
    }
    Ok(out)
}

/// Conffiles (absolute paths) that must exist as plain files in the tree.
fn check_conffiles(dir: &Path, debian: &Path) -> Result<Vec<String>, BuildError> {
    let path = debian.join("conffiles");
    let text = match crate::input::read_to_string(&path, crate::input::limit::CONTROL_FILE) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(FileError::at(&path)(e).into()),
    };
    let mut names = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        // dpkg ≥ 1.20.1 allows flags before the name; `remove-on-upgrade`
        // conffiles are by definition not shipped.
        let mut words: Vec<&str> = line.split_whitespace().collect();
        let name = words.pop().unwrap_or_default();
        if !name.starts_with('/') {
            return Err(BuildError::RelativeConffile {
                path,
                name: name.to_string(),
            });
        }
        if words.contains(&"remove-on-upgrade") {
            continue;
        }
        let in_tree = dir.join(name.trim_start_matches('/'));
        if !fs::symlink_metadata(&in_tree).is_ok_and(|m| m.is_file()) {
            return Err(BuildError::MissingConffile {
                path,
                name: name.to_string(),
            });
        }
        names.push(name.to_string());
    }
    Ok(names)
}

fn sorted_dir(dir: &Path) -> Result<Vec<(std::ffi::OsString, PathBuf)>, BuildError> {
    let read = fs::read_dir(dir).map_err(|source| BuildError::UnreadableTree {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut entries = Vec::new();
    for e in read {
        let e = e.map_err(|source| BuildError::UnreadableTree {
            path: dir.to_path_buf(),
            source,
        })?;
        entries.push((e.file_name(), e.path()));
    }
    entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    Ok(entries)
}

/// The data tree in dpkg-deb's order: depth first, names sorted bytewise
/// within each directory, the top-level `DEBIAN` left out, and symlinks moved
/// to the end so that unpacking creates their targets first.
fn walk_tree(dir: &Path) -> Result<Vec<TreeEntry>, BuildError> {
    let meta = fs::metadata(dir).map_err(FileError::at(dir))?;
    let mut out = vec![TreeEntry {
        name: "./".into(),
        path: dir.to_path_buf(),
        meta,
    }];
    walk_into(dir, "./", true, &mut out)?;
    let (mut entries, links): (Vec<_>, Vec<_>) = out
        .into_iter()
        .partition(|e| !e.meta.file_type().is_symlink());
    entries.extend(links);
    Ok(entries)
}

fn walk_into(
    dir: &Path,
    prefix: &str,
    top: bool,
    out: &mut Vec<TreeEntry>,
) -> Result<(), BuildError> {
    for (name, path) in sorted_dir(dir)? {
        if top && name.as_bytes() == b"DEBIAN" {
            continue;
        }
        let meta = fs::symlink_metadata(&path).map_err(|source| BuildError::UnreadableTree {
            path: path.clone(),
            source,
        })?;
        let name = name.to_str().ok_or_else(|| {
            BuildError::Io(crate::error::FileError {
                path: path.clone(),
                source: io::Error::new(io::ErrorKind::InvalidData, "file name is not UTF-8"),
            })
        })?;
        if meta.file_type().is_socket() {
            return Err(BuildError::Socket { path });
        }
        if meta.is_dir() {
            let child = format!("{prefix}{name}/");
            out.push(TreeEntry {
                name: child.clone(),
                path: path.clone(),
                meta,
            });
            walk_into(&path, &child, false, out)?;
        } else {
            out.push(TreeEntry {
                name: format!("{prefix}{name}"),
                path,
                meta,
            });
        }
    }
    Ok(())
}

struct DataSummary {
    installed_size: u64,
    md5sums: String,
}

enum DataError {
    Build(BuildError),
    Io(io::Error),
}
impl From<io::Error> for DataError {
    fn from(e: io::Error) -> Self {
        DataError::Io(e)
    }
}

/// First archive name and MD5 of each multiply-linked inode, by (device, inode).
type FirstLinks = HashMap<(u64, u64), (String, String)>;

/// Writes the compressed data tar to `file`, hashing regular files with MD5
/// as they stream through, and sums the data's part of Installed-Size as
/// dpkg-gencontrol does (KiB rounded up per file or symlink, hard links once,
/// 1 for anything else).
fn write_data(
    tree: &[TreeEntry],
    conffiles: &[String],
    compression: Compression,
    level: u32,
    threads: u32,
    clamp: &dyn Fn(i64) -> u64,
    file: &mut File,
) -> Result<DataSummary, DataError> {
    let encoder = compression.encoder(
        BufWriter::with_capacity(1 << 20, &mut *file),
        level,
        threads,
    )?;
    // Buffer above the compressor too: tar writes 512-byte headers and small chunks.
    let mut tar = tar::Builder::new(BufWriter::with_capacity(1 << 20, encoder));
    let mut installed_kib = 0u64;
    let mut sums: Vec<(String, String)> = Vec::new();
    let mut first_link = FirstLinks::new();
    for e in tree {
        let h = base_header(e.meta.mode() & 0o7777, clamp(e.meta.mtime()));
        installed_kib += entry_kib(&e.meta, &first_link);
        append_data_entry(&mut tar, h, e, conffiles, &mut first_link, &mut sums)?;
    }
    finish_data_tar(tar)?;
    sums.sort();
    let md5sums = sums.iter().map(|(p, s)| format!("{s}  {p}\n")).collect();
    Ok(DataSummary {
        installed_size: installed_kib,
        md5sums,
    })
}

/// One entry's KiB of Installed-Size: a file's or symlink's size (hard links once), else 1.
fn entry_kib(m: &Metadata, first_link: &FirstLinks) -> u64 {
    let ft = m.file_type();
    if ft.is_file() || ft.is_symlink() {
        if m.nlink() > 1 && first_link.contains_key(&(m.dev(), m.ino())) {
            0
        } else {
            m.len().div_ceil(1024)
        }
    } else {
        1
    }
}

/// Appends one data-tree entry of any kind; a regular file's MD5 goes into `sums`.
fn append_data_entry<W: Write>(
    tar: &mut tar::Builder<W>,
    mut h: tar::Header,
    e: &TreeEntry,
    conffiles: &[String],
    first_link: &mut FirstLinks,
    sums: &mut Vec<(String, String)>,
) -> Result<(), DataError> {
    let ft = e.meta.file_type();
    let name = e.name.as_bytes();
    if ft.is_dir() {
        h.set_entry_type(tar::EntryType::Directory);
        append(tar, h, name, None, io::empty())?;
    } else if ft.is_symlink() {
        let target = fs::read_link(&e.path)?;
        h.set_entry_type(tar::EntryType::Symlink);
        append(
            tar,
            h,
            name,
            Some(target.as_os_str().as_bytes()),
            io::empty(),
        )?;
    } else if ft.is_file() {
        append_regular(tar, h, e, conffiles, first_link, sums)?;
    } else {
        append_special(tar, h, &e.meta, name)?;
    }
    Ok(())
}

/// Appends a regular file (or a hard link to it) and lists its MD5 unless it is a conffile.
fn append_regular<W: Write>(
    tar: &mut tar::Builder<W>,
    mut h: tar::Header,
    e: &TreeEntry,
    conffiles: &[String],
    first_link: &mut FirstLinks,
    sums: &mut Vec<(String, String)>,
) -> Result<(), DataError> {
    let m = &e.meta;
    let key = (m.dev(), m.ino());
    let rel = e.name.trim_start_matches("./");
    let listed = !conffiles.iter().any(|c| c.trim_start_matches('/') == rel);
    if let Some((target, md5)) = first_link.get(&key) {
        // Like dh_md5sums, every name of a hard-linked file is listed.
        if listed {
            sums.push((rel.to_string(), md5.clone()));
        }
        h.set_entry_type(tar::EntryType::Link);
        append(
            tar,
            h,
            e.name.as_bytes(),
            Some(target.as_bytes()),
            io::empty(),
        )?;
        return Ok(());
    }
    let md5 = append_file_contents(tar, h, e)?;
    if m.nlink() > 1 {
        first_link.insert(key, (e.name.clone(), md5.clone()));
    }
    if listed {
        sums.push((rel.to_string(), md5));
    }
    Ok(())
}

/// Appends a regular file's contents, streamed from disk; returns their MD5 in hex.
fn append_file_contents<W: Write>(
    tar: &mut tar::Builder<W>,
    mut h: tar::Header,
    e: &TreeEntry,
) -> Result<String, DataError> {
    let len = e.meta.len();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_size(len);
    // Walked as a regular file: never blocking on a FIFO put in its place.
    let f = crate::input::open_regular(&e.path)?;
    let mut reader = Md5Reader {
        inner: io::BufReader::with_capacity(64 * 1024, f.take(len)),
        md5: Md5::new(),
        count: 0,
    };
    append(tar, h, e.name.as_bytes(), None, &mut reader)?;
    if reader.count != len {
        return Err(DataError::Build(BuildError::Changed {
            path: e.path.clone(),
        }));
    }
    Ok(hex::encode(reader.md5.finalize()))
}

/// Appends a FIFO or a character or block device (device numbers in the header).
fn append_special<W: Write>(
    tar: &mut tar::Builder<W>,
    mut h: tar::Header,
    m: &Metadata,
    name: &[u8],
) -> io::Result<()> {
    let ft = m.file_type();
    let (kind, dev) = if ft.is_fifo() {
        (tar::EntryType::Fifo, None)
    } else if ft.is_char_device() {
        (tar::EntryType::Char, Some(m.rdev()))
    } else {
        (tar::EntryType::Block, Some(m.rdev()))
    };
    h.set_entry_type(kind);
    if let Some(rdev) = dev {
        h.set_device_major(((rdev >> 8) & 0xfff | (rdev >> 32) & !0xfff) as u32)?;
        h.set_device_minor((rdev & 0xff | (rdev >> 12) & !0xff) as u32)?;
    }
    append(tar, h, name, None, io::empty())
}

/// Ends the tar stream, finishes the compressor and flushes it all to the file.
fn finish_data_tar<W: Write>(
    tar: tar::Builder<BufWriter<super::compression::Encoder<BufWriter<W>>>>,
) -> io::Result<()> {
    let encoder = tar.into_inner()?.into_inner().map_err(|e| e.into_error())?;
    let mut buffered = encoder.finish()?;
    buffered.flush()
}

/// MD5 while streaming into the tar builder; counts bytes to catch files
/// that shrink underneath us.
struct Md5Reader<R> {
    inner: R,
    md5: Md5,
    count: u64,
}

impl<R: Read> Read for Md5Reader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(out)?;
        self.md5.update(&out[..n]);
        self.count += n as u64;
        Ok(n)
    }
}

/// A control member from (name, mode, bytes), every entry dated `mtime`,
/// at the compressor's default level.
pub(crate) fn control_tar(
    files: &[(String, u32, Vec<u8>)],
    mtime: u64,
    compression: Compression,
) -> io::Result<Vec<u8>> {
    let files: Vec<(String, u32, i64, Vec<u8>)> = files
        .iter()
        .map(|(n, m, d)| (n.clone(), *m, mtime as i64, d.clone()))
        .collect();
    write_control_tar(
        &files,
        mtime,
        &|t| t.max(0) as u64,
        compression,
        compression.default_level(),
        1,
    )
}

fn write_control_tar(
    files: &[(String, u32, i64, Vec<u8>)],
    dir_mtime: u64,
    clamp: &dyn Fn(i64) -> u64,
    compression: Compression,
    level: u32,
    threads: u32,
) -> io::Result<Vec<u8>> {
    let encoder = compression.encoder(Vec::new(), level, threads)?;
    let mut tar = tar::Builder::new(encoder);
    let mut dir = base_header(0o755, dir_mtime);
    dir.set_entry_type(tar::EntryType::Directory);
    append(&mut tar, dir, b"./", None, io::empty())?;
    for (name, mode, mtime, bytes) in files {
        let mut h = base_header(*mode, clamp(*mtime));
        h.set_entry_type(tar::EntryType::Regular);
        h.set_size(bytes.len() as u64);
        append(
            &mut tar,
            h,
            format!("./{name}").as_bytes(),
            None,
            &bytes[..],
        )?;
    }
    tar.into_inner()?.finish()
}

fn base_header(mode: u32, mtime: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_mode(mode);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(mtime);
    h.set_size(0);
    // Cannot fail: both names fit the 32-byte fields.
    let _ = h.set_username("root");
    let _ = h.set_groupname("root");
    h
}

/// Appends one entry with its name written as given (keeping `./`, which the
/// tar crate's path setters would strip), using GNU long-name records for
/// names or link targets of 100 bytes or more, as GNU tar does.
fn append<W: Write, R: Read>(
    tar: &mut tar::Builder<W>,
    mut h: tar::Header,
    name: &[u8],
    link: Option<&[u8]>,
    data: R,
) -> io::Result<()> {
    if name.len() >= 100 {
        append_long_name(tar, b'L', name)?;
    }
    if let Some(link) = link
        && link.len() >= 100
    {
        append_long_name(tar, b'K', link)?;
    }
    let gnu = h.as_gnu_mut().expect("GNU header");
    gnu.name = [0; 100];
    let n = name.len().min(100);
    gnu.name[..n].copy_from_slice(&name[..n]);
    gnu.linkname = [0; 100];
    if let Some(link) = link {
        let n = link.len().min(100);
        gnu.linkname[..n].copy_from_slice(&link[..n]);
    }
    h.set_cksum();
    tar.append(&h, data)
}

fn append_long_name<W: Write>(tar: &mut tar::Builder<W>, kind: u8, bytes: &[u8]) -> io::Result<()> {
    let mut h = base_header(0o644, 0);
    h.set_entry_type(tar::EntryType::new(kind));
    h.set_size(bytes.len() as u64 + 1);
    let gnu = h.as_gnu_mut().expect("GNU header");
    let marker = b"././@LongLink";
    gnu.name[..marker.len()].copy_from_slice(marker);
    h.set_cksum();
    let mut data = bytes.to_vec();
    data.push(0);
    tar.append(&h, &data[..])
}

impl crate::error::Hint for BuildError {
    fn hint(&self) -> Option<String> {
        match self {
            BuildError::Io(e) => crate::error::Hint::hint(e),
            BuildError::UnreadableTree { path, source } => crate::error::io_hint(path, source),
            _ => None,
        }
    }
}
