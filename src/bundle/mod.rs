//! Air-gapped bundles: one deterministic tar holding the repository, its
//! keyring and pins, a `SHA256SUMS` of everything, and an `install.sh` that
//! checks the bundle and sets up a `file:` apt source with `Signed-By` and
//! the pins. `SHA256SUMS` is the tar's first entry, so `verify` checks a
//! bundle in one streaming pass.

use crate::error::FileError;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::{BufReader, BufWriter, Read};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

mod delta;
mod install;

pub use delta::{BaseState, DeltaPlan, check_delta, plan_delta, read_base, write_delta};
use install::install_script;

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error(transparent)]
    Io(#[from] crate::error::FileError),
    #[error(
        "{}: not a built repository (no dists/<suite>/Release); run `debforge build` first",
        crate::error::ShortPath(path)
    )]
    NotARepository { path: PathBuf },
    #[error("{}: not a debforge bundle ({why})", crate::error::ShortPath(path))]
    NotABundle { path: PathBuf, why: String },
    #[error("the base bundle is of suite {base}, the output of suite {out}")]
    OtherSuite { base: String, out: String },
    #[error(
        "the base bundle already leaves generation {generation} (the output's InRelease): there is nothing to carry"
    )]
    NothingNew { generation: String },
}

const TOP: &str = "debforge-bundle";

/// The repository's public keyring at its top (`repo::KEYRING_NAME`.gpg;
/// named here too: bundles sit below the repository in the layering).
pub const KEYRING_FILE: &str = "debforge-archive-keyring.gpg";

/// A line of SHA256SUMS, as both `install.sh` (this pattern, with `grep
/// -E`) and `bundle verify` ([`sums_line`]) accept it: one list of rules.
/// A path starts with a letter, digit or `_` (never `-`, which a shell
/// command would read as an option) and holds only `A-Za-z0-9._+~/-`; no
/// carriage return.
const SUMS_LINE_ERE: &str = "^[0-9a-f]{64}  [A-Za-z0-9_][A-Za-z0-9._+~/-]*$";

/// The (digest, path) of a SHA256SUMS line that [`SUMS_LINE_ERE`] matches
/// and whose path has no empty, `.` or `..` component (install.sh's second
/// check).
fn sums_line(line: &str) -> Option<(&str, &str)> {
    let (h, rest) = (line.get(..64)?, line.get(64..)?);
    let f = rest.strip_prefix("  ")?;
    let hex = h
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let first = f
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_');
    let chars = f
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._+~/-".contains(&b));
    let parts = f.split('/').all(|c| !c.is_empty() && c != "." && c != "..");
    (hex && first && chars && parts).then_some((h, f))
}

/// At most this many problems are listed; the rest are counted.
const MAX_PROBLEMS: usize = 100;

/// The problems `verify_bundle` found: the first [`MAX_PROBLEMS`], and how
/// many more (a hostile SHA256SUMS may hold a million bad lines).
#[derive(Default)]
struct Problems {
    list: Vec<String>,
    more: usize,
}

impl Problems {
    fn push(&mut self, problem: String) {
        if self.list.len() < MAX_PROBLEMS {
            self.list.push(problem);
        } else {
            self.more += 1;
        }
    }

    fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    fn into_list(mut self) -> Vec<String> {
        if self.more > 0 {
            self.list.push(format!("… and {} more problems", self.more));
        }
        self.list
    }
}

fn files(root: &Path) -> Result<Vec<String>, BundleError> {
    Ok(crate::publish::tree_files(root).map_err(FileError::at(root))?)
}

fn header(size: u64, mode: u32, mtime: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_size(size);
    h.set_mode(mode);
    h.set_mtime(mtime);
    h.set_uid(0);
    h.set_gid(0);
    let _ = h.set_username("root");
    let _ = h.set_groupname("root");
    h.set_entry_type(tar::EntryType::Regular);
    h
}

fn sha256_file(path: &Path) -> Result<String, BundleError> {
    Ok(crate::digest::sha256_file(path).map_err(FileError::at(path))?)
}

/// Writes the bundle of the repository `out` to `output` (temporary name,
/// then rename). Entries are sorted and dated `mtime`, or else the Release's
/// Date, so the same repository gives the same bundle bytes.
pub fn write_bundle(
    out: &Path,
    output: &Path,
    mtime: Option<u64>,
    observer: &dyn crate::report::Reporter,
) -> Result<usize, BundleError> {
    let (suite, release) = first_suite(out)?;
    let mtime = mtime.unwrap_or_else(|| {
        crate::format::release::Release::parse(&release)
            .ok()
            .and_then(|r| r.date().ok().flatten())
            .map_or(0, |d| d.max(0) as u64)
    });
    let component = component_of(&release);
    let repo_files = files(out)?;
    let script = install_script(&suite, &component);
    let mut sums = String::new();
    for f in &repo_files {
        sums.push_str(&format!("{}  repo/{f}\n", sha256_file(&out.join(f))?));
    }
    sums.push_str(&format!(
        "{}  install.sh\n",
        crate::digest::sha256_hex(script.as_bytes())
    ));
    let head: [(&str, &[u8], u32); 2] = [
        ("SHA256SUMS", sums.as_bytes(), 0o644),
        ("install.sh", script.as_bytes(), 0o755),
    ];
    write_tar(output, mtime, &head, out, &repo_files, observer)?;
    Ok(repo_files.len() + 2)
}

/// Writes a bundle's tar to `output` (a temporary name beside it, fsynced,
/// renamed): the `head` entries (name, bytes, mode) first, SHA256SUMS
/// leading, then `repo_files` of `out` under `repo/`; every entry dated
/// `mtime`.
fn write_tar(
    output: &Path,
    mtime: u64,
    head: &[(&str, &[u8], u32)],
    out: &Path,
    repo_files: &[String],
    observer: &dyn crate::report::Reporter,
) -> Result<(), BundleError> {
    let dir = crate::files::parent(output);
    let mut tmp = tempfile::Builder::new()
        .prefix(".debforge-bundle-")
        .tempfile_in(dir)
        .map_err(FileError::at(dir))?;
    let tar = tar::Builder::new(BufWriter::with_capacity(1 << 20, tmp.as_file_mut()));
    let mut entries = Entries { tar, mtime, output };
    for (name, bytes, mode) in head.iter().copied() {
        entries.add(name, &mut &bytes[..], bytes.len() as u64, mode)?;
    }
    entries.add_repository(out, repo_files, observer)?;
    entries.finish()?;
    tmp.as_file().sync_all().map_err(FileError::at(output))?;
    tmp.persist(output)
        .map_err(|e| FileError::new(output, e.error))?;
    Ok(())
}

/// The first component a Release names.
fn component_of(release: &str) -> String {
    release
        .lines()
        .find_map(|l| l.strip_prefix("Components: "))
        .and_then(|c| c.split_whitespace().next())
        .unwrap_or("main")
        .to_string()
}

/// The first suite of `out` with a Release, and that Release's text.
fn first_suite(out: &Path) -> Result<(String, String), BundleError> {
    let not_a_repository = || BundleError::NotARepository {
        path: out.to_path_buf(),
    };
    let suites: Vec<String> = fs::read_dir(out.join("dists"))
        .map_err(|_| not_a_repository())?
        .flatten()
        .filter(|e| e.path().join("Release").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let suite = suites.first().ok_or_else(not_a_repository)?.clone();
    let path = out.join("dists").join(&suite).join("Release");
    let release = crate::input::read_to_string(&path, crate::input::limit::RELEASE)
        .map_err(FileError::at(&path))?;
    Ok((suite, release))
}

/// The bundle's tar, entries under `debforge-bundle/`, dated `mtime`.
struct Entries<'a, W: std::io::Write> {
    tar: tar::Builder<W>,
    mtime: u64,
    output: &'a Path,
}

impl<W: std::io::Write> Entries<'_, W> {
    fn add(
        &mut self,
        path: &str,
        data: &mut dyn Read,
        size: u64,
        mode: u32,
    ) -> Result<(), BundleError> {
        let mut h = header(size, mode, self.mtime);
        self.tar
            .append_data(&mut h, format!("{TOP}/{path}"), data)
            .map_err(FileError::at(self.output))?;
        Ok(())
    }

    /// Every file of the repository under `repo/`, reporting progress.
    fn add_repository(
        &mut self,
        out: &Path,
        repo_files: &[String],
        observer: &dyn crate::report::Reporter,
    ) -> Result<(), BundleError> {
        use crate::report::{Event, Task};
        let total = repo_files.len() as u64;
        for (i, f) in repo_files.iter().enumerate() {
            observer.event(Event::Work {
                task: Task::Bundle,
                done: i as u64,
                total,
                item: f.clone(),
            });
            let p = out.join(f);
            let size = fs::metadata(&p).map_err(FileError::at(&p))?.len();
            let mut file = File::open(&p).map_err(FileError::at(&p))?;
            let mut h = header(size, 0o644, self.mtime);
            self.tar
                .append_data(&mut h, format!("{TOP}/repo/{f}"), &mut file)
                .map_err(FileError::at(&p))?;
        }
        observer.event(Event::Work {
            task: Task::Bundle,
            done: total,
            total,
            item: String::new(),
        });
        Ok(())
    }

    fn finish(self) -> Result<(), BundleError> {
        let mut w = self.tar.into_inner().map_err(FileError::at(self.output))?;
        w.flush().map_err(FileError::at(self.output))?;
        Ok(())
    }
}

/// What [`verify_bundle`] found.
#[derive(Debug, Default)]
pub struct BundleCheck {
    /// Empty: every file matches SHA256SUMS.
    pub problems: Vec<String>,
    /// A delta's signed manifest (`DELTA`), as it is in the bundle.
    pub delta: Option<Vec<u8>>,
    /// The repository files it carries (path under `repo/` → SHA-256).
    pub carried: BTreeMap<String, String>,
    /// The SHA-256 of its install.sh.
    pub installer: Option<String>,
}

/// The bundle at `path` as a tar stream, a regular file only. The guard
/// refuses a GNU long name or PAX header over 1 MiB at its header, before
/// the tar crate would read it into memory whole.
pub(crate) fn open_bundle(
    path: &Path,
) -> Result<tar::Archive<crate::deb::targuard::TarGuard<BufReader<std::fs::File>>>, BundleError> {
    let file = crate::input::open_regular(path).map_err(FileError::at(path))?;
    Ok(tar::Archive::new(crate::deb::targuard::TarGuard::new(
        BufReader::with_capacity(1 << 20, file),
        u64::MAX,
        "the bundle",
    )))
}

/// Checks a bundle in one pass: every file against `SHA256SUMS`, nothing
/// missing, nothing extra; keeps a delta's manifest for the caller to check
/// (its signature, [`check_delta`]).
pub fn verify_bundle(path: &Path) -> Result<BundleCheck, BundleError> {
    let mut archive = open_bundle(path)?;
    let mut expected: Option<BTreeMap<String, String>> = None;
    let mut problems = Problems::default();
    let mut seen = BTreeSet::new();
    let mut delta = None;
    let mut carried = BTreeMap::new();
    let mut installer = None;
    let entries = archive.entries().map_err(FileError::at(path))?;
    for entry in entries {
        let mut entry = match entry {
            Ok(e) => e,
            Err(e) => {
                problems.push(format!("the tar archive is damaged: {e}"));
                break;
            }
        };
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let kind = entry.header().entry_type();
        let Some(rel) = file_entry_path(&name, kind, &mut seen, &mut problems) else {
            continue;
        };
        let is_sums = rel == "SHA256SUMS";
        let is_delta = rel == "DELTA";
        if (is_sums || is_delta)
            && entry.header().size().unwrap_or(u64::MAX) > crate::input::limit::SUMS
        {
            problems.push(format!(
                "{rel}: larger than {} bytes: not a debforge bundle",
                crate::input::limit::SUMS
            ));
            break;
        }
        let (found, data) = read_entry(&mut entry, &rel, is_sums || is_delta, &mut problems);
        if is_sums {
            expected = Some(parse_sums(&data, &mut problems));
            continue;
        }
        if is_delta {
            delta = Some(data);
        } else if rel == "install.sh" {
            installer = Some(found.clone());
        } else if let Some(path) = rel.strip_prefix("repo/") {
            carried.insert(path.to_string(), found.clone());
        }
        let Some(sums) = expected.as_mut() else {
            problems.push("SHA256SUMS is not the first entry: not a debforge bundle".into());
            break;
        };
        check_listed(sums, &rel, &found, &mut problems);
    }
    report_unseen(expected, &mut problems);
    Ok(BundleCheck {
        problems: problems.into_list(),
        delta,
        carried,
        installer,
    })
}

/// The path under `debforge-bundle/` of an entry to check against
/// SHA256SUMS, or `None` for an entry to skip: a directory, or one with a
/// problem, which it reports.
fn file_entry_path(
    name: &str,
    kind: tar::EntryType,
    seen: &mut BTreeSet<String>,
    problems: &mut Problems,
) -> Option<String> {
    if kind.is_dir() && (name == TOP || name == format!("{TOP}/")) {
        return None;
    }
    let Some(rel) = name
        .strip_prefix(&format!("{TOP}/"))
        .map(|r| r.trim_end_matches('/').to_string())
    else {
        problems.push(format!("{name}: outside {TOP}/"));
        return None;
    };
    if let Err(e) = crate::format::path::check_relative(&rel) {
        problems.push(format!("{name}: {e}"));
        return None;
    }
    if kind.is_dir() {
        return None;
    }
    if !matches!(kind, tar::EntryType::Regular | tar::EntryType::Continuous) {
        let what = match kind {
            tar::EntryType::Symlink => "a symlink",
            tar::EntryType::Link => "a hard link",
            tar::EntryType::Fifo => "a FIFO",
            tar::EntryType::Char | tar::EntryType::Block => "a device",
            _ => "not a regular file",
        };
        problems.push(format!(
            "{rel}: is {what}; a bundle holds only regular files and directories"
        ));
        return None;
    }
    if !seen.insert(rel.clone()) {
        problems.push(format!("{rel}: appears twice in the archive"));
        return None;
    }
    Some(rel)
}

/// Reads an entry to its end: the hex SHA-256 of its bytes and, if `keep`,
/// the bytes themselves. A read error is reported and ends the reading.
fn read_entry(
    entry: &mut dyn Read,
    rel: &str,
    keep: bool,
    problems: &mut Problems,
) -> (String, Vec<u8>) {
    let mut data_hash = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut kept = Vec::new();
    loop {
        let n = match entry.read(&mut buf) {
            Ok(n) => n,
            Err(e) => {
                problems.push(format!("{rel}: unreadable: {e}"));
                break;
            }
        };
        if n == 0 {
            break;
        }
        data_hash.update(&buf[..n]);
        if keep {
            kept.extend_from_slice(&buf[..n]);
        }
    }
    (hex::encode(data_hash.finalize()), kept)
}

/// Parses SHA256SUMS into path → digest, reporting each line that is
/// malformed or lists a path again.
fn parse_sums(sums_text: &[u8], problems: &mut Problems) -> BTreeMap<String, String> {
    let text = String::from_utf8_lossy(sums_text);
    let mut sums = BTreeMap::new();
    // Lines end at '\n' alone, as for grep: a '\r' is refused.
    for line in text.strip_suffix('\n').unwrap_or(&text).split('\n') {
        let Some((h, f)) = sums_line(line) else {
            problems.push(format!("SHA256SUMS: {line:?} is not '<sha256>  <path>'"));
            continue;
        };
        if sums.insert(f.to_string(), h.to_string()).is_some() {
            problems.push(format!("SHA256SUMS lists {f} twice"));
        }
    }
    sums
}

/// Checks a file's SHA-256 against what SHA256SUMS says, and crosses the
/// file off the list.
fn check_listed(
    sums: &mut BTreeMap<String, String>,
    rel: &str,
    found: &str,
    problems: &mut Problems,
) {
    match sums.remove(rel) {
        Some(want) if want == found => {}
        Some(want) => problems.push(format!("{rel}: SHA256 is {found}, SHA256SUMS says {want}")),
        None => problems.push(format!("{rel}: not listed in SHA256SUMS")),
    }
}

/// Reports each file SHA256SUMS lists that the archive lacks, or, when
/// nothing else was wrong, that there was no SHA256SUMS at all.
fn report_unseen(expected: Option<BTreeMap<String, String>>, problems: &mut Problems) {
    match expected {
        None if problems.is_empty() => problems.push("no SHA256SUMS: not a debforge bundle".into()),
        Some(rest) => {
            for f in rest.into_keys() {
                problems.push(format!("{f}: listed in SHA256SUMS but missing"));
            }
        }
        None => {}
    }
}

impl crate::error::Hint for BundleError {
    fn hint(&self) -> Option<String> {
        match self {
            BundleError::Io(e) => crate::error::Hint::hint(e),
            BundleError::NotABundle { .. } => Some(
                "--from names the last bundle the lab installed (full or delta), as `debforge bundle` wrote it".into(),
            ),
            _ => None,
        }
    }
}
