//! Publishing to a directory (an nginx or Apache docroot, an NFS mount).
//! Each file is written under a temporary name, synced and renamed, so a
//! reader never sees half a file. Copies keep the built file's time, which
//! is how unchanged pool files are recognised next time; leftovers of a
//! publish that was killed are removed by the next one.

use crate::error::FileError;
use std::fs;
use std::io;
use std::path::Path;

use super::{
    PublishError, Recorder, Step, named_by_content, refuse_changed_pool, stale, tree_files,
};

const PART_SUFFIX: &str = ".debforge-part";

pub(super) fn publish(
    out: &Path,
    files: &[String],
    target: &Path,
    dry_run: bool,
    rec: &mut Recorder<'_>,
) -> Result<(), PublishError> {
    let read_only = |e: io::Error| PublishError::ReadOnly {
        target: target.display().to_string(),
        detail: e.to_string(),
    };
    // One publish to a directory at a time: a second waits for nothing
    // and says so.
    let _lock = if dry_run {
        None
    } else {
        fs::create_dir_all(target).map_err(read_only)?;
        tempfile::Builder::new()
            .prefix(".debforge-probe-")
            .tempfile_in(target)
            .map_err(read_only)?;
        let lock_path = target.join(".debforge-publish.lock");
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(FileError::at(&lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                return Err(PublishError::Busy {
                    target: target.display().to_string(),
                    lock: lock_path.display().to_string(),
                });
            }
            Err(fs::TryLockError::Error(e)) => return Err(FileError::at(&lock_path)(e).into()),
        }
        remove_parts(target).map_err(FileError::at(target))?;
        Some(lock)
    };
    // What the Release in force until now still needs.
    let (existing, previous) = current(target)?;
    refuse_changed_pool(out, files, &previous, &target.display().to_string())?;
    for rel in files {
        let src = out.join(rel);
        let dst = target.join(rel);
        let meta = fs::metadata(&src).map_err(FileError::at(&src))?;
        if unchanged(rel, &src, &meta, &dst)? {
            rec.step(Step::Keep, rel);
            continue;
        }
        rec.step(Step::Copy, rel);
        if !dry_run {
            copy_in(&src, &meta, &dst, !named_by_content(rel))?;
        }
    }
    for rel in stale(&existing, files, &previous) {
        rec.step(Step::Delete, rel);
        if !dry_run {
            let path = target.join(rel);
            fs::remove_file(&path).map_err(FileError::at(&path))?;
        }
    }
    if !dry_run {
        remove_empty_dirs(target);
    }
    Ok(())
}

/// The target's files, and what its Releases reference.
pub(super) fn current(target: &Path) -> Result<(Vec<String>, super::Referenced), PublishError> {
    let existing = tree_files(target).map_err(FileError::at(target))?;
    let previous = super::referenced_in(target, &existing)?;
    Ok((existing, previous))
}

fn unchanged(rel: &str, src: &Path, meta: &fs::Metadata, dst: &Path) -> Result<bool, PublishError> {
    let Ok(d) = fs::metadata(dst) else {
        return Ok(false);
    };
    // Anything but a regular file there (a FIFO, a device) is replaced,
    // never read.
    if !d.is_file() || d.len() != meta.len() {
        return Ok(false);
    }
    if rel.contains("/by-hash/") {
        // The name is the digest: same size, same file.
        return Ok(true);
    }
    if named_by_content(rel) {
        return Ok(d.modified().ok() == meta.modified().ok());
    }
    // Indexes and Release files are small, and a rebuilt one may keep its size.
    // The target's copy by type and no longer than ours (changed under us
    // or not: it is replaced).
    let a = fs::read(src).map_err(FileError::at(src))?;
    let Ok(b) = crate::input::read(dst, meta.len()) else {
        return Ok(false);
    };
    Ok(a == b)
}

/// `newer`: the file replaces one of other content under the same name (an
/// index, a Release): its time must be later than the old one's, or a web
/// server's validators (Last-Modified, nginx's and our ETag of size and
/// time, both in seconds) could still match what a client has, and
/// `If-Modified-Since` would get a 304 for a changed InRelease.
fn copy_in(src: &Path, meta: &fs::Metadata, dst: &Path, newer: bool) -> Result<(), PublishError> {
    let mut mtime = meta.modified().ok();
    if newer
        && let (Some(m), Ok(old)) = (mtime, fs::metadata(dst).and_then(|d| d.modified()))
        && old + std::time::Duration::from_secs(1) > m
    {
        mtime = Some(old + std::time::Duration::from_secs(1));
    }
    let dir = dst.parent().expect("file in a directory");
    fs::create_dir_all(dir).map_err(FileError::at(dir))?;
    let tmp = dir.join(format!(
        ".{}{PART_SUFFIX}",
        dst.file_name().unwrap_or_default().to_string_lossy()
    ));
    let result = (|| {
        fs::copy(src, &tmp).map_err(FileError::at(&tmp))?;
        let f = fs::File::options()
            .write(true)
            .open(&tmp)
            .map_err(FileError::at(&tmp))?;
        if let Some(m) = mtime {
            f.set_modified(m).map_err(FileError::at(&tmp))?;
        }
        // Everything published is public, whatever mode the source file had.
        f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .map_err(FileError::at(&tmp))?;
        f.sync_all().map_err(FileError::at(&tmp))?;
        fs::rename(&tmp, dst).map_err(FileError::at(dst))
    })();
    // A full disk (or any failure) leaves no half-copied file behind.
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    Ok(result?)
}

/// Half-copied files of a publish that was killed (dot directories, ours
/// or not, are left alone).
fn remove_parts(dir: &Path) -> io::Result<()> {
    let dot = |e: &walkdir::DirEntry| e.file_name().as_encoded_bytes().starts_with(b".");
    let walk = walkdir::WalkDir::new(dir)
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !(e.file_type().is_dir() && dot(e)));
    for entry in walk {
        let entry = entry.map_err(crate::error::walk_error)?;
        let name = entry.file_name().to_string_lossy();
        if !entry.file_type().is_dir() && name.starts_with('.') && name.ends_with(PART_SUFFIX) {
            fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

fn remove_empty_dirs(dir: &Path) {
    // Deepest first, so a directory emptied below is removed too.
    let walk = walkdir::WalkDir::new(dir).min_depth(1).contents_first(true);
    for entry in walk.into_iter().flatten() {
        if entry.file_type().is_dir() {
            let _ = fs::remove_dir(entry.path());
        }
    }
}
