//! Publishing through the system `rsync`, to an rsync daemon
//! (`rsync://host/module/path`, `RSYNC_PASSWORD` for its secret) or over a
//! remote shell (`user@host:/path`; ssh unless `RSYNC_RSH` says otherwise).
//!
//! One rsync run per phase of the safe order (pool, by-hash, indexes,
//! Release, Release.gpg, InRelease), each given exactly that phase's files,
//! then one run that only deletes, protecting what the previous Release
//! references. rsync writes every file under a temporary name and renames
//! it, so readers of the mirror never see half a file. Pool and by-hash
//! files are compared by size and time (`-t` keeps the built times);
//! the rest by checksum, since a rebuilt index may keep its size.

use crate::error::FileError;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use super::{Phase, PublishError, Recorder, Step, referenced_in_or, refuse_changed_pool};

/// The destination's files, and what its Releases reference, read from a
/// copy of its Release and Packages files.
pub(super) fn current(dest: &str) -> Result<(Vec<String>, super::Referenced), PublishError> {
    let dest_dir = format!("{}/", dest.trim_end_matches('/'));
    let listed = list(&dest_dir, dest)?;
    let existing: Vec<String> = listed.keys().cloned().collect();
    let scratch = tempfile::tempdir().map_err(FileError::at(&std::env::temp_dir()))?;
    // Copied, then read whole: none larger than a local index may be (a
    // huge one would fill the disk before it was refused).
    let bound = crate::input::limit::INDEX;
    if existing.iter().any(|f| f.starts_with("dists/")) {
        // Filters rather than --files-from: rsync daemons mis-resolve a
        // file list under a module's subdirectory ("file has vanished").
        let mut cmd = rsync(dest);
        cmd.args([
            "-rt",
            "--prune-empty-dirs",
            "--include=*/",
            "--include=Release",
            "--include=Packages",
            "--exclude=*",
        ])
        .arg(format!("--max-size={bound}"))
        .arg(format!("{dest_dir}dists/"))
        .arg(format!("{}/", scratch.path().join("dists").display()))
        .arg("--mkpath");
        run(cmd, b"", dest, &mut |_| {})?;
    }
    // The target's Releases and the indexes they list, from the copy. One
    // listed but not copied (too large, or changed since it was listed)
    // stops the publish: the pool files it lists would go unprotected.
    let previous = referenced_in_or(
        scratch.path(),
        &existing,
        &mut |rel| match listed.get(rel) {
            Some(&size) => Err(PublishError::NotRead {
                target: dest.to_string(),
                path: rel.to_string(),
                size,
            }),
            None => Ok(None),
        },
    )?;
    Ok((existing, previous))
}

pub(super) fn publish(
    out: &Path,
    files: &[String],
    dest: &str,
    dry_run: bool,
    rec: &mut Recorder<'_>,
) -> Result<(), PublishError> {
    let dirs = Dirs {
        src: format!("{}/", out.display()),
        dest: format!("{}/", dest.trim_end_matches('/')),
        target: dest,
        dry_run,
    };
    // What the Release in force until now still needs.
    let (_, previous) = current(dest)?;
    refuse_changed_pool(out, files, &previous, dest)?;
    let mut first = true;
    for phase in Phase::ALL {
        let batch: Vec<&str> = files
            .iter()
            .filter(|f| Phase::of(f) == phase)
            .map(String::as_str)
            .collect();
        if batch.is_empty() {
            continue;
        }
        let copied = dirs.send(phase, &batch, first)?;
        first = false;
        for f in batch {
            let step = if copied.contains(f) {
                Step::Copy
            } else {
                Step::Keep
            };
            rec.step(step, f);
        }
    }
    for d in dirs.delete_stale(&previous.files)? {
        rec.step(Step::Delete, &d);
    }
    Ok(())
}

/// One publish's rsync source and destination.
struct Dirs<'a> {
    src: String,
    dest: String,
    target: &'a str,
    dry_run: bool,
}

impl Dirs<'_> {
    /// One phase's files in one rsync run (the first also makes a new
    /// mirror's parent directories); returns the files it copied.
    fn send(
        &self,
        phase: Phase,
        batch: &[&str],
        first: bool,
    ) -> Result<BTreeSet<String>, PublishError> {
        let mut cmd = rsync(self.target);
        // Files world-readable for the web server that serves the mirror.
        cmd.args([
            "-rt",
            "--perms",
            "--chmod=D755,F644",
            "--from0",
            "--files-from=-",
            "--itemize-changes",
            // A generation published again has `pool` as a link to the
            // output's pool (repo::write_kept): sent as the directory it is.
            "--copy-dirlinks",
        ]);
        match phase {
            // A by-hash name is its digest: same size, same file.
            Phase::ByHash => cmd.arg("--size-only"),
            Phase::Pool => &mut cmd,
            _ => cmd.arg("--checksum"),
        };
        if first {
            // A new mirror's parent directories, as for a directory target.
            cmd.arg("--mkpath");
        }
        if self.dry_run {
            cmd.arg("--dry-run");
        }
        cmd.arg(&self.src).arg(&self.dest);
        let mut copied = BTreeSet::new();
        run(
            cmd,
            &list_bytes(batch.iter().copied()),
            self.target,
            &mut |line| {
                if let Some(name) = itemized_file(line, &[">f", "<f"]) {
                    copied.insert(name.to_string());
                }
            },
        )?;
        Ok(copied)
    }

    /// Deletes what the new repository no longer has, except what the
    /// previous Release references (`protected`: kept one more round);
    /// returns the files deleted, sorted. Only deletions: nothing is sent
    /// (`--existing --ignore-existing`).
    fn delete_stale(&self, protected: &BTreeSet<String>) -> Result<Vec<String>, PublishError> {
        let mut protect =
            tempfile::NamedTempFile::new().map_err(FileError::at(&std::env::temp_dir()))?;
        for p in protected {
            writeln!(protect, "P /{p}").map_err(FileError::at(protect.path()))?;
        }
        protect.flush().map_err(FileError::at(protect.path()))?;
        let mut cmd = rsync(self.target);
        cmd.args([
            "-r",
            "--delete",
            "--existing",
            "--ignore-existing",
            "--itemize-changes",
        ])
        .arg(format!("--filter=merge {}", protect.path().display()))
        .arg("--exclude=.*");
        if self.dry_run {
            cmd.arg("--dry-run");
        }
        cmd.arg(&self.src).arg(&self.dest);
        let mut deleted = Vec::new();
        run(cmd, b"", self.target, &mut |line| {
            if let Some(name) = line.strip_prefix("*deleting") {
                let name = name.trim_start();
                if !name.ends_with('/') {
                    deleted.push(name.to_string());
                }
            }
        })?;
        deleted.sort();
        Ok(deleted)
    }
}

/// Give up on a dead peer instead of hanging: 10 s to connect to a daemon,
/// 120 s without any I/O.
fn rsync(dest: &str) -> Command {
    let mut cmd = Command::new("rsync");
    cmd.arg("--timeout=120");
    if dest.starts_with("rsync://") {
        cmd.arg("--contimeout=10");
    }
    cmd
}

fn list_bytes<'a>(names: impl Iterator<Item = &'a str>) -> Vec<u8> {
    let mut v = Vec::new();
    for n in names {
        v.extend_from_slice(n.as_bytes());
        v.push(0);
    }
    v
}

/// The file name of an `--itemize-changes` line whose update type and file
/// type is one of `kinds` (`>f` is a file sent to the target).
fn itemized_file<'a>(line: &'a str, kinds: &[&str]) -> Option<&'a str> {
    let (code, name) = line.split_once(' ')?;
    (code.len() == 11 && kinds.iter().any(|k| code.starts_with(k))).then_some(name)
}

/// The regular files under the target and their sizes (none if it does not
/// exist yet), names starting with `.` left out as everywhere.
fn list(dest_dir: &str, dest: &str) -> Result<BTreeMap<String, u64>, PublishError> {
    let mut cmd = rsync(dest);
    // `-8`: names as they are, not escaped by the locale (`\#303\#274`
    // for `ü` where it is C); what is still escaped is undone below.
    cmd.args([
        "-r",
        "-8",
        "--list-only",
        "--no-human-readable",
        "--exclude=.*",
    ])
    .arg(dest_dir);
    let mut files = BTreeMap::new();
    let res = run(cmd, b"", dest, &mut |line| {
        // -rw-r--r--   1234 2026/12/02 18:00:00 pool/main/a.deb
        if line.starts_with('-')
            && let Some(idx) = nth_field_start(line, 4)
        {
            // A size that does not parse is taken as too large to read.
            let size = line
                .split_whitespace()
                .nth(1)
                .and_then(|s| s.replace(',', "").parse().ok())
                .unwrap_or(u64::MAX);
            files.insert(unescape(&line[idx..]), size);
        }
    });
    match res {
        Ok(()) => {}
        Err(PublishError::Rsync { detail, .. }) if detail.contains("No such file or directory") => {
            return Ok(Default::default());
        }
        Err(e) => return Err(e),
    }
    Ok(files)
}

/// A name as rsync lists it, its `\#ooo` escapes (octal bytes: control
/// characters, and any byte its locale cannot print) undone.
fn unescape(listed: &str) -> String {
    let bytes = listed.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escape = bytes.get(i..i + 5).filter(|e| {
            e[0] == b'\\' && e[1] == b'#' && e[2..].iter().all(|d| (b'0'..=b'7').contains(d))
        });
        match escape.map(|e| {
            u32::from(e[2] - b'0') * 64 + u32::from(e[3] - b'0') * 8 + u32::from(e[4] - b'0')
        }) {
            Some(byte) if byte <= 0xff => {
                out.push(byte as u8);
                i += 5;
            }
            _ => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Byte offset of the `n`th (0-based) whitespace-separated field.
fn nth_field_start(line: &str, n: usize) -> Option<usize> {
    let mut count = 0;
    let mut in_field = false;
    for (i, c) in line.char_indices() {
        if c.is_whitespace() {
            in_field = false;
        } else if !in_field {
            if count == n {
                return Some(i);
            }
            count += 1;
            in_field = true;
        }
    }
    None
}

/// Runs one rsync, feeding `stdin` and handing each stdout line to
/// `on_line` as it comes; a failure is classified from rsync's exit code
/// and its messages.
fn run(
    mut cmd: Command,
    stdin: &[u8],
    dest: &str,
    on_line: &mut dyn FnMut(&str),
) -> Result<(), PublishError> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => PublishError::RsyncMissing,
        _ => PublishError::Rsync {
            target: dest.to_string(),
            detail: format!("could not start rsync: {e}"),
        },
    })?;
    let mut input = child.stdin.take().expect("piped");
    let stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let (status, err_text) = std::thread::scope(|s| {
        s.spawn(move || {
            // rsync may exit before reading it all; its status says why.
            let _ = input.write_all(stdin);
        });
        let err = s.spawn(move || {
            let mut text = String::new();
            let _ = io::Read::read_to_string(&mut stderr, &mut text);
            text
        });
        // Every line, whatever bytes a name holds (a line that is not
        // UTF-8 ended the reading, and the rest of a listing was lost).
        for line in BufReader::new(stdout).split(b'\n').map_while(Result::ok) {
            on_line(&String::from_utf8_lossy(&line));
        }
        let status = child.wait();
        (status, err.join().unwrap_or_default())
    });
    let status = status.map_err(|e| PublishError::Rsync {
        target: dest.to_string(),
        detail: e.to_string(),
    })?;
    if status.success() {
        return Ok(());
    }
    Err(classify(status.code(), &err_text, dest))
}

fn classify(code: Option<i32>, stderr: &str, dest: &str) -> PublishError {
    let detail = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("rsync error:"))
        .take(3)
        .collect::<Vec<_>>()
        .join("; ");
    let target = dest.to_string();
    let has = |s: &str| stderr.contains(s);
    if has("change_dir") && has("No such file or directory") {
        // A target that does not exist yet (see `list`).
        PublishError::Rsync { target, detail }
    } else if has("auth failed")
        || has("Permission denied (publickey")
        || has("Host key verification failed")
    {
        PublishError::Credentials { target, detail }
    } else if has("read only") || has("Read-only file system") || has("Permission denied") {
        PublishError::ReadOnly { target, detail }
    } else if has("Connection refused")
        || has("No route to host")
        || has("Could not resolve")
        || has("Name or service not known")
        || has("timed out")
        || has("Connection reset")
        || code == Some(10)
        || code == Some(255)
    {
        PublishError::Unreachable { target, detail }
    } else {
        let code = code.map_or("killed".to_string(), |c| format!("exit code {c}"));
        PublishError::Rsync {
            target,
            detail: if detail.is_empty() {
                code
            } else {
                format!("{code}: {detail}")
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_itemized_lines() {
        assert_eq!(
            itemized_file(">f+++++++++ pool/a b.deb", &[">f"]),
            Some("pool/a b.deb")
        );
        assert_eq!(
            itemized_file(">f.st...... dists/x/Release", &[">f"]),
            Some("dists/x/Release")
        );
        assert_eq!(itemized_file("cd+++++++++ pool/", &[">f"]), None);
        assert_eq!(itemized_file(".f...p..... pool/a.deb", &[">f"]), None);
        assert_eq!(
            nth_field_start("-rw-r--r--  12 2026/12/02 18:00:00 a  b", 4),
            Some(35)
        );
    }
}
