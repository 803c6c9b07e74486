//! Delta bundles: from a generation the lab already has (named by the
//! bundle that took it there, full or delta) to the output as it is now.
//! A delta carries only the files the base lacks (new pool files, the new
//! indexes and Release files) and the repository's keyring, `install.sh`,
//! and `DELTA`: a manifest the
//! caller signs with the repository's keys, naming the base and the target
//! (each by its InRelease's SHA-256) and every file of the target with its
//! SHA-256 and size, in this form (deb822, the list last):
//!
//! ```text
//! Format: debforge-delta 1
//! Suite: bionic
//! Base: <sha256 of the base's dists/bionic/InRelease>
//! Target: <sha256 of the target's dists/bionic/InRelease>
//! Installer: <sha256 of the delta's install.sh>
//! Files:
//!  <sha256> <size> <path>
//! ```

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::Path;

use super::{BundleError, TOP, install_script, parse_sums, sha256_file};
use crate::error::FileError;

/// What the manifest's first line says.
const FORMAT: &str = "debforge-delta 1";

/// The repository a lab has: what a full bundle held, or what a delta
/// made. Files by path under the repository's top, with their SHA-256.
#[derive(Debug, Clone)]
pub struct BaseState {
    pub suite: String,
    /// The SHA-256 of `dists/<suite>/InRelease`: the generation's name.
    pub id: String,
    pub files: BTreeMap<String, String>,
    /// The repository's keyring as the bundle carries it (a delta carries
    /// it only when it changed).
    pub keyring: Option<Vec<u8>>,
}

/// Reads the state a bundle (full or delta) leaves on the air-gapped side,
/// from its SHA256SUMS or its manifest: nothing else of it is read.
pub fn read_base(path: &Path) -> Result<BaseState, BundleError> {
    let not_a_bundle = |why: &str| BundleError::NotABundle {
        path: path.to_path_buf(),
        why: why.to_string(),
    };
    let found = bundle_entries(path)?;
    if let Some(data) = found.delta {
        let text = String::from_utf8_lossy(&data);
        let body = crate::format::clearsign::split(&text)
            .map_err(|e| not_a_bundle(&format!("DELTA: {e}")))?
            .body;
        let m = Manifest::parse(&body).ok_or_else(|| not_a_bundle("DELTA is no manifest"))?;
        return Ok(BaseState {
            suite: m.suite,
            id: m.target,
            files: m.files.into_iter().map(|(p, (h, _))| (p, h)).collect(),
            keyring: found.keyring,
        });
    }
    // A full bundle: its SHA256SUMS lists the repository under repo/.
    let data = found.sums.ok_or_else(|| not_a_bundle("no SHA256SUMS"))?;
    let mut problems = super::Problems::default();
    let listed = parse_sums(&data, &mut problems);
    if !problems.is_empty() {
        return Err(not_a_bundle("its SHA256SUMS is malformed"));
    }
    let files: BTreeMap<String, String> = listed
        .into_iter()
        .filter_map(|(p, h)| Some((p.strip_prefix("repo/")?.to_string(), h)))
        .collect();
    let (suite, id) =
        the_inrelease(&files).ok_or_else(|| not_a_bundle("no single dists/<suite>/InRelease"))?;
    Ok(BaseState {
        suite,
        id,
        files,
        keyring: found.keyring,
    })
}

/// The suite and SHA-256 of the one `dists/<suite>/InRelease` in `files`.
fn the_inrelease(files: &BTreeMap<String, String>) -> Option<(String, String)> {
    let mut found = files.iter().filter_map(|(p, h)| {
        let suite = p.strip_prefix("dists/")?.strip_suffix("/InRelease")?;
        (!suite.contains('/')).then(|| (suite.to_string(), h.clone()))
    });
    let one = found.next()?;
    found.next().is_none().then_some(one)
}

/// What [`read_base`] reads of a bundle.
struct BaseEntries {
    sums: Option<Vec<u8>>,
    delta: Option<Vec<u8>>,
    keyring: Option<Vec<u8>>,
}

/// SHA256SUMS, DELTA and the repository's keyring of the bundle at
/// `path`, each read with its bound; the rest skipped.
fn bundle_entries(path: &Path) -> Result<BaseEntries, BundleError> {
    let mut archive = super::open_bundle(path)?;
    let mut found = BaseEntries {
        sums: None,
        delta: None,
        keyring: None,
    };
    let keyring = format!("{TOP}/repo/{}", super::KEYRING_FILE);
    let (sums, delta) = (format!("{TOP}/SHA256SUMS"), format!("{TOP}/DELTA"));
    for entry in archive.entries().map_err(FileError::at(path))? {
        let mut entry = entry.map_err(FileError::at(path))?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let (slot, limit) = match name.as_str() {
            n if n == keyring => (&mut found.keyring, crate::input::limit::KEY),
            n if n == sums => (&mut found.sums, crate::input::limit::SUMS),
            n if n == delta => (&mut found.delta, crate::input::limit::SUMS),
            _ => continue,
        };
        if entry.header().size().unwrap_or(u64::MAX) > limit {
            return Err(BundleError::NotABundle {
                path: path.to_path_buf(),
                why: format!("{name} is too large"),
            });
        }
        let mut data = Vec::new();
        entry.read_to_end(&mut data).map_err(FileError::at(path))?;
        *slot = Some(data);
    }
    Ok(found)
}

/// A delta's manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Manifest {
    suite: String,
    base: String,
    target: String,
    /// The SHA-256 of the install.sh the delta carries (run as root: the
    /// signature covers it too).
    installer: String,
    /// path → (sha256, size)
    files: BTreeMap<String, (String, u64)>,
}

impl Manifest {
    fn render(&self) -> String {
        let mut s = format!(
            "Format: {FORMAT}\nSuite: {}\nBase: {}\nTarget: {}\nInstaller: {}\nFiles:\n",
            self.suite, self.base, self.target, self.installer
        );
        for (path, (sha, size)) in &self.files {
            s.push_str(&format!(" {sha} {size} {path}\n"));
        }
        s
    }

    /// The manifest in `text`; `None` unless every line is as
    /// [`Manifest::render`] writes it (paths checked as a bundle's are).
    fn parse(text: &str) -> Option<Manifest> {
        let mut lines = text.lines();
        let mut field = |name: &str| {
            lines
                .next()?
                .strip_prefix(&format!("{name}: "))
                .map(str::to_string)
        };
        if field("Format")? != FORMAT {
            return None;
        }
        let suite = field("Suite")?;
        let base = field("Base")?;
        let target = field("Target")?;
        let installer = field("Installer")?;
        let hex = |h: &str| crate::format::path::is_hex_digest(h, 64);
        if !hex(&base) || !hex(&target) || !hex(&installer) || lines.next()? != "Files:" {
            return None;
        }
        let mut files = BTreeMap::new();
        for line in lines.filter(|l| !l.is_empty()) {
            let mut w = line.strip_prefix(' ')?.split(' ');
            let (sha, size, path) = (w.next()?, w.next()?.parse().ok()?, w.next()?);
            let sums_line = format!("{sha}  {path}");
            if w.next().is_some() || super::sums_line(&sums_line).is_none() {
                return None;
            }
            files.insert(path.to_string(), (sha.to_string(), size));
        }
        Some(Manifest {
            suite,
            base,
            target,
            installer,
            files,
        })
    }
}

/// What a delta from a base to the output carries.
#[derive(Debug, Clone)]
pub struct DeltaPlan {
    manifest: Manifest,
    component: String,
    /// The files the base lacks (by path or by bytes).
    pub carried: Vec<String>,
    /// Bytes of the files carried, and of the whole target.
    pub carried_bytes: u64,
    pub target_bytes: u64,
}

impl DeltaPlan {
    /// The manifest's text, for the caller to sign (cleartext).
    pub fn manifest_text(&self) -> String {
        self.manifest.render()
    }

    /// The target and base generations (their InReleases' SHA-256).
    pub fn generations(&self) -> (String, String) {
        (self.manifest.target.clone(), self.manifest.base.clone())
    }
}

/// Plans the delta from `base` to the output `out`: every file of the
/// output hashed, and those the base lacks at the same path with the same
/// bytes carried.
pub fn plan_delta(out: &Path, base: &BaseState) -> Result<DeltaPlan, BundleError> {
    let (suite, release) = super::first_suite(out)?;
    if suite != base.suite {
        return Err(BundleError::OtherSuite {
            base: base.suite.clone(),
            out: suite,
        });
    }
    let mut files = BTreeMap::new();
    for f in super::files(out)? {
        let p = out.join(&f);
        let size = fs::metadata(&p).map_err(FileError::at(&p))?.len();
        files.insert(f, (sha256_file(&p)?, size));
    }
    let target = files
        .get(&format!("dists/{suite}/InRelease"))
        .map(|(h, _)| h.clone())
        .ok_or_else(|| BundleError::NotARepository {
            path: out.to_path_buf(),
        })?;
    if target == base.id {
        return Err(BundleError::NothingNew { generation: target });
    }
    // The keyring always: a later delta made --from this one names the key
    // that must sign it (a kilobyte).
    let carried: Vec<String> = files
        .iter()
        .filter(|(p, (h, _))| base.files.get(*p) != Some(h) || *p == super::KEYRING_FILE)
        .map(|(p, _)| p.clone())
        .collect();
    let carried_bytes = carried.iter().map(|p| files[p].1).sum();
    let target_bytes = files.values().map(|(_, s)| s).sum();
    Ok(DeltaPlan {
        manifest: Manifest {
            installer: crate::digest::sha256_hex(
                install_script(&suite, &super::component_of(&release)).as_bytes(),
            ),
            suite,
            base: base.id.clone(),
            target,
            files,
        },
        component: super::component_of(&release),
        carried,
        carried_bytes,
        target_bytes,
    })
}

/// Writes the delta `plan` of the output `out` to `output` (temporary
/// name, then rename), with `signed` the manifest signed (cleartext).
/// Entries are sorted and dated `mtime`. Returns how many files it holds.
pub fn write_delta(
    out: &Path,
    plan: &DeltaPlan,
    signed: &[u8],
    output: &Path,
    mtime: u64,
    observer: &dyn crate::report::Reporter,
) -> Result<usize, BundleError> {
    let script = install_script(&plan.manifest.suite, &plan.component);
    let mut sums = String::new();
    sums.push_str(&format!("{}  DELTA\n", crate::digest::sha256_hex(signed)));
    sums.push_str(&format!(
        "{}  install.sh\n",
        crate::digest::sha256_hex(script.as_bytes())
    ));
    for f in &plan.carried {
        sums.push_str(&format!("{}  repo/{f}\n", plan.manifest.files[f].0));
    }
    let head: [(&str, &[u8], u32); 3] = [
        ("SHA256SUMS", sums.as_bytes(), 0o644),
        ("DELTA", signed, 0o644),
        ("install.sh", script.as_bytes(), 0o755),
    ];
    // Carried files as they are now: one that changed since it was hashed
    // is refused by install.sh's check against the signed list.
    super::write_tar(output, mtime, &head, out, &plan.carried, observer)?;
    Ok(plan.carried.len() + 3)
}

/// Checks a delta's manifest against what the bundle carries (each carried
/// file listed with the same SHA-256) and, with `base`, the chain: the base
/// it names, and every other file of the target in the base with its bytes.
pub fn check_delta(
    manifest_text: &str,
    carried: &BTreeMap<String, String>,
    installer: Option<&str>,
    base: Option<&BaseState>,
) -> Vec<String> {
    let Some(m) = Manifest::parse(manifest_text) else {
        return vec!["DELTA: not a debforge delta manifest".into()];
    };
    let mut problems = Vec::new();
    if installer != Some(m.installer.as_str()) {
        problems.push(format!(
            "install.sh: SHA256 {}, the signed manifest says {}",
            installer.unwrap_or("(none)"),
            m.installer
        ));
    }
    for (path, sha) in carried {
        match m.files.get(path) {
            Some((h, _)) if h == sha => {}
            Some((h, _)) => problems.push(format!(
                "repo/{path}: SHA256 {sha}, the signed manifest says {h}"
            )),
            None => problems.push(format!("repo/{path}: not in the signed manifest")),
        }
    }
    if let Some(base) = base {
        if base.id != m.base {
            problems.push(format!(
                "the delta applies onto generation {}, the base bundle leaves {}",
                m.base, base.id
            ));
        }
        for (path, (sha, _)) in &m.files {
            if !carried.contains_key(path) && base.files.get(path) != Some(sha) {
                problems.push(format!(
                    "{path}: neither carried nor in the base with its bytes"
                ));
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_reads_back_and_anything_else_is_refused() {
        let m = Manifest {
            suite: "bionic".into(),
            base: "a".repeat(64),
            target: "b".repeat(64),
            installer: "d".repeat(64),
            files: [("pool/main/x/x.deb".to_string(), ("c".repeat(64), 12))].into(),
        };
        assert_eq!(Manifest::parse(&m.render()), Some(m.clone()));
        let text = m.render();
        for bad in [
            text.replace("debforge-delta 1", "debforge-delta 2"),
            text.replace(&"a".repeat(64), "a"),
            text.replace("pool/main/x/x.deb", "../x.deb"),
            text.replace("pool/main/x/x.deb", "pool/main/x/x.deb extra"),
            text.replace("Files:\n", ""),
        ] {
            assert_eq!(Manifest::parse(&bad), None, "{bad}");
        }
    }
}
