//! The signature checks on real-world material: Debian's own InRelease files
//! (RSA keys, SHA512) as apt downloaded them to this machine, and NVIDIA's
//! published key.

use std::fs;
use std::path::Path;
use std::process::Command;

use debforge::openpgp::PinnedKeyring;

use crate::support::common::ok;

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
        err.to_string().contains("holds none of the pinned keys"),
        "{err}"
    );
    // One pinned key missing from a file that holds another: a warning (the
    // key that is there still verifies), not a refusal.
    let ring = PinnedKeyring::from_bytes(
        &key,
        &[
            "AE09FE4BBD223A84B2CCFCE3F60F4B3D7FA2AF80".to_string(),
            "0000000000000000000000000000000F7FA2AF80".to_string(),
        ],
    )
    .unwrap();
    assert_eq!(
        ring.missing,
        vec!["0000000000000000000000000000000F7FA2AF80".to_string()]
    );
}

/// The shipped Ubuntu keyring is the one from ubuntu-keyring
/// 2018.09.18.1~18.04.2 (keys/README.md), and holds the keys the recipes pin.
#[test]
fn the_shipped_ubuntu_keyring_is_ubuntus() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("keys/ubuntu-archive-keyring.gpg");
    let bytes = fs::read(&path).unwrap();
    let digest = debforge::digest::digest_reader(&bytes[..]).unwrap();
    assert_eq!(
        digest.sha256,
        "1a4dd63e5c76728960a2edddae22e2e0fc53df8e8b87806deb971030ac704eb0"
    );
    let pinned = [
        "790BC7277767219C42C86F933B4FE6ACC0B21F32",
        "843938DF228D22F7B3742BC0D94AA3F0EFE21092",
        "F6ECB3762474EDA9D21B7022871920D1991BC93C",
    ]
    .map(String::from);
    let ring = PinnedKeyring::from_bytes(&bytes, &pinned).unwrap();
    assert!(ring.missing.is_empty(), "{:?}", ring.missing);
    let set =
        debforge::recipe::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes")).unwrap();
    let ring = debforge::upstream::load_keyring(&set.sources["ubuntu-bionic-updates"], &set.root())
        .unwrap();
    assert!(ring.missing.is_empty());
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

/// A key like Ubuntu's 2012 archive key: RSA, with a SHA-1 self-signature.
/// Its SHA256 signatures verify (gpgv and apt accept such a key); a
/// signature over SHA-1 is refused, as apt 1.6 refuses it.
#[test]
fn sha1_is_accepted_in_a_pinned_keys_binding_but_never_for_the_release() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("gnupg");
    fs::create_dir_all(&home).unwrap();
    fs::set_permissions(&home, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let gpg = |args: &[&str]| {
        ok(Command::new("gpg")
            .arg("--homedir")
            .arg(&home)
            .args([
                "--batch",
                "--quiet",
                "--pinentry-mode",
                "loopback",
                "--passphrase",
                "",
            ])
            .args(args))
    };
    gpg(&[
        "--cert-digest-algo",
        "SHA1",
        "--quick-gen-key",
        "old archive key <archive@example.org>",
        "rsa2048",
        "sign",
        "never",
    ]);
    let listing = gpg(&["--with-colons", "--list-keys"]);
    let fpr = listing
        .lines()
        .find_map(|l| l.strip_prefix("fpr:"))
        .unwrap()
        .trim_matches(':')
        .to_string();
    // The self-signature really is over SHA-1 (hash algorithm 2).
    let sigs = gpg(&["--with-colons", "--list-sigs", &fpr]);
    assert!(
        sigs.lines()
            .any(|l| l.starts_with("sig:") && l.split(':').nth(15) == Some("2")),
        "self-signature over SHA-1:\n{sigs}"
    );
    let public = dir.path().join("key.gpg");
    gpg(&["--output", public.to_str().unwrap(), "--export", &fpr]);
    let ring =
        PinnedKeyring::from_bytes(&fs::read(&public).unwrap(), std::slice::from_ref(&fpr)).unwrap();

    let release = dir.path().join("Release");
    fs::write(&release, "Origin: Old\nSuite: old\n").unwrap();
    for (algo, good) in [("SHA256", true), ("SHA512", true), ("SHA1", false)] {
        let sig = dir.path().join(format!("Release-{algo}.gpg"));
        gpg(&[
            "--local-user",
            &fpr,
            "--digest-algo",
            algo,
            "--detach-sign",
            "--output",
            sig.to_str().unwrap(),
            release.to_str().unwrap(),
        ]);
        let result = ring.verify_detached(&fs::read(&release).unwrap(), &fs::read(&sig).unwrap());
        assert_eq!(result.is_ok(), good, "{algo}: {result:?}");
        if !good {
            let err = result.unwrap_err().to_string();
            assert!(err.contains("SHA1"), "{err}");
        }
        // gpgv agrees.
        let status = Command::new("gpgv")
            .arg("--keyring")
            .arg(&public)
            .arg(&sig)
            .arg(&release)
            .output()
            .unwrap();
        assert!(status.status.success() || !good, "gpgv refused {algo}");
    }
}
