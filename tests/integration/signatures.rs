//! The signature checks on real-world material: Debian's own InRelease files
//! (RSA keys, SHA512) as apt downloaded them to this machine, and NVIDIA's
//! published key.

use std::fs;
use std::path::Path;
use std::process::Command;

use debforge::openpgp::PinnedKeyring;

use crate::common::ok;

const DEBIAN_KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

fn fingerprints(keyring: &Path) -> Vec<String> {
    let out = ok(Command::new("gpg")
        .args(["--show-keys", "--with-colons"])
        .arg(keyring));
    // Primary fingerprints only: the fpr line right after each pub line.
    let mut fprs = Vec::new();
    let mut want = false;
    for line in out.lines() {
        if line.starts_with("pub:") {
            want = true;
        } else if want && line.starts_with("fpr:") {
            fprs.push(
                line.trim_start_matches("fpr:")
                    .trim_matches(':')
                    .to_string(),
            );
            want = false;
        }
    }
    fprs
}

#[test]
fn debians_inrelease_files_verify_and_tampering_is_caught() {
    let keyring = fs::read(DEBIAN_KEYRING).expect("debian-archive-keyring is installed");
    let pinned =
        PinnedKeyring::from_bytes(&keyring, &fingerprints(Path::new(DEBIAN_KEYRING))).unwrap();
    let mut checked = 0;
    for e in fs::read_dir("/var/lib/apt/lists").unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with("deb.debian.org_") && name.ends_with("_InRelease")) {
            continue;
        }
        let bytes = fs::read(&p).unwrap();
        let (body, _signer) = pinned
            .verify_cleartext(&bytes)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let text = String::from_utf8(body).unwrap();
        assert!(text.contains("\nSHA256:\n"), "{name}");
        // One changed character in the signed text: refused.
        let tampered =
            String::from_utf8(bytes)
                .unwrap()
                .replacen("Origin: Debian", "Origin: Debiam", 1);
        let err = pinned
            .verify_cleartext(tampered.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(err.contains("bad signature"), "{name}: {err}");
        checked += 1;
    }
    assert!(
        checked > 0,
        "no Debian InRelease in /var/lib/apt/lists: run apt-get update"
    );
}

#[test]
fn nvidia_key_is_pinned_by_its_full_fingerprint() {
    let key =
        fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("keys/nvidia-cudatools-7fa2af80.asc"))
            .unwrap();
    PinnedKeyring::from_bytes(
        &key,
        &["AE09FE4BBD223A84B2CCFCE3F60F4B3D7FA2AF80".to_string()],
    )
    .unwrap();
    // A fingerprint the file does not hold (same short ID suffix, other key).
    let err = PinnedKeyring::from_bytes(
        &key,
        &["0000000000000000000000000000000F7FA2AF80".to_string()],
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("does not hold the pinned key"),
        "{err}"
    );
}

#[test]
fn the_shipped_recipes_ask_for_the_lab_versions() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes");
    let set = debforge::recipe::load(&dir).unwrap();
    let version = |name: &str| {
        set.packages
            .iter()
            .find(|p| p.name == name)
            .unwrap()
            .version
            .clone()
    };
    for p in ["libcudnn7", "libcudnn7-dev", "libcudnn7-doc"] {
        assert_eq!(version(p), "7.5.0.56-1+cuda10.1");
    }
    for p in ["libnccl2", "libnccl-dev"] {
        assert_eq!(version(p), "2.4.2-1+cuda10.1");
    }
    let nvidia = &set.sources["nvidia-ml"];
    assert_eq!(
        nvidia.url,
        "https://developer.download.nvidia.com/compute/machine-learning/repos/ubuntu1804/x86_64/"
    );
    assert!(nvidia.archive);
    debforge::upstream::load_keyring(nvidia, &set.root()).unwrap();
    assert_eq!(
        set.sources["ubuntu-bionic-updates"].suite.as_deref(),
        Some("bionic-updates")
    );
}
