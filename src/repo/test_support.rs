//! Test helpers (compiled for tests only): tiny packages made with our own
//! `.deb` writer, an Ed25519 signing key, and a repository written by
//! `repo::write` in a temporary directory — no dpkg, no network.

use std::path::{Path, PathBuf};

use crate::deb::{BuildOptions, DebFile, build_from_dir};
use crate::format::ControlParagraph;
use crate::openpgp::sign::{KeyAlgo, SigningKey, generate};

use super::RepoConfig;
use super::pool::DigestStore;
use super::write::{OutputReport, PoolInput, RepoParams, write};

/// A package file with the control paragraph read from it and its SHA256.
pub(crate) struct Tiny {
    pub file: PathBuf,
    pub control: ControlParagraph,
    pub size: u64,
    pub sha256: String,
}

/// Builds `name` `version` (amd64, one file) into `dir`.
pub(crate) fn tiny_deb(dir: &Path, name: &str, version: &str, depends: Option<&str>) -> Tiny {
    let tree = dir.join(format!("tree-{name}-{version}"));
    std::fs::create_dir_all(tree.join("DEBIAN")).unwrap();
    std::fs::create_dir_all(tree.join(format!("usr/share/doc/{name}"))).unwrap();
    let depends = depends.map_or(String::new(), |d| format!("Depends: {d}\n"));
    std::fs::write(
        tree.join("DEBIAN/control"),
        format!(
            "Package: {name}\nVersion: {version}\nArchitecture: amd64\nMaintainer: Test <t@example.org>\n{depends}Description: test package\n a test package\n"
        ),
    )
    .unwrap();
    std::fs::write(
        tree.join(format!("usr/share/doc/{name}/copyright")),
        "none\n",
    )
    .unwrap();
    let file = dir.join(format!("{name}_{version}_amd64.deb"));
    let opts = BuildOptions {
        source_date_epoch: Some(1_500_000_000),
        ..BuildOptions::default()
    };
    build_from_dir(&tree, &file, &opts).unwrap();
    let control = DebFile::open(&file)
        .unwrap()
        .control_files()
        .unwrap()
        .control;
    let sha256 = crate::digest::sha256_file(&file).unwrap();
    Tiny {
        size: std::fs::metadata(&file).unwrap().len(),
        file,
        control,
        sha256,
    }
}

pub(crate) fn key() -> SigningKey {
    let secret = generate("test <t@example.org>", KeyAlgo::Ed25519, None, None).unwrap();
    SigningKey::from_bytes(&secret, None).unwrap()
}

/// `repo::write` of `debs` into `out`, dated `date`, with `pins`.
pub(crate) fn write_repo(
    out: &Path,
    debs: &[Tiny],
    keys: &[SigningKey],
    date: i64,
    pins: &str,
) -> Result<OutputReport, super::RepoError> {
    let records = DigestStore::new(None);
    let params = RepoParams {
        base: &[],
        config: RepoConfig::default(),
        keys,
        date,
        records: &records,
        pause_in_swap: None,
        retain: Vec::new(),
        retain_from: None,
        kept_pieces: Default::default(),
    };
    let mut stanzas = super::stanzas::Stanzas::default();
    let inputs: Vec<_> = debs
        .iter()
        .map(|d| PoolInput {
            file: d.file.as_path().into(),
            entry: stanzas.add(&d.control).unwrap(),
            size: d.size,
            sha256: crate::digest::Sha256Sum::from_hex(&d.sha256).unwrap(),
        })
        .collect();
    write(out, inputs, &stanzas, &params, pins, &crate::report::Quiet)
}
