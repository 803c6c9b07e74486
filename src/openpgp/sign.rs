//! Our own repository keys: generating them, reading them, signing Release.
//!
//! Keys and signatures are OpenPGP v4 (RFC 4880 profile, what gpgv 2.2 on
//! Ubuntu 18.04 reads); signatures use SHA512. `Release.gpg` is a detached,
//! armored signature; `InRelease` a cleartext-signed copy of the Release.

use std::io::Write;
use std::time::{Duration, SystemTime};

use sequoia_openpgp as openpgp;

use openpgp::armor;
use openpgp::cert::{Cert, CertBuilder, CipherSuite};
use openpgp::crypto::{KeyPair, Password};
use openpgp::parse::Parse;
use openpgp::policy::StandardPolicy;
use openpgp::serialize::stream::{Armorer, Message, Signer};
use openpgp::serialize::{Serialize, SerializeInto};
use openpgp::types::HashAlgorithm;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAlgo {
    Ed25519,
    Rsa4096,
}

#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("cannot generate a key: {0}")]
    Generate(String),
    #[error("not an OpenPGP secret key: {0}")]
    Unreadable(String),
    #[error("key {0} has no secret signing key that is valid now (expired or revoked?)")]
    NoSigningKey(String),
    #[error(
        "key {0} is protected by a passphrase: set DEBFORGE_KEY_PASSPHRASE or --passphrase-file"
    )]
    NeedsPassphrase(String),
    #[error("key {0}: the passphrase does not unlock it")]
    WrongPassphrase(String),
    #[error("signing failed: {0}")]
    Sign(String),
}

/// A secret key that can sign, with what the user should know about it.
pub struct SigningKey {
    cert: Cert,
    keypair: KeyPair,
}

impl SigningKey {
    /// Reads a secret key (armored or binary TSK); `passphrase` unlocks an
    /// encrypted one.
    pub fn from_bytes(bytes: &[u8], passphrase: Option<&str>) -> Result<SigningKey, SignError> {
        let cert = Cert::from_bytes(bytes).map_err(|e| SignError::Unreadable(e.to_string()))?;
        if !cert.is_tsk() {
            return Err(SignError::Unreadable(
                "the file holds a public key only".into(),
            ));
        }
        let fpr = cert.fingerprint().to_hex();
        let policy = StandardPolicy::new();
        let ka = cert
            .keys()
            .with_policy(&policy, None)
            .secret()
            .alive()
            .revoked(false)
            .for_signing()
            .next()
            .ok_or_else(|| SignError::NoSigningKey(fpr.clone()))?;
        let mut key = ka.key().clone();
        if key.secret().is_encrypted() {
            let pw = passphrase.ok_or_else(|| SignError::NeedsPassphrase(fpr.clone()))?;
            key = key
                .decrypt_secret(&Password::from(pw))
                .map_err(|_| SignError::WrongPassphrase(fpr.clone()))?;
        }
        let keypair = key
            .into_keypair()
            .map_err(|e| SignError::Unreadable(e.to_string()))?;
        Ok(SigningKey { cert, keypair })
    }

    pub fn fingerprint(&self) -> String {
        self.cert.fingerprint().to_hex()
    }

    /// When the signing key was created: no signature may be older.
    pub fn created(&self) -> SystemTime {
        self.keypair
            .public()
            .creation_time()
            .max(self.cert.primary_key().key().creation_time())
    }

    /// When the primary key (or the signing subkey) stops being valid.
    pub fn expires(&self) -> Option<SystemTime> {
        let policy = StandardPolicy::new();
        let valid = self.cert.with_policy(&policy, None).ok()?;
        let primary = valid.primary_key().key_expiration_time();
        let signing = valid
            .keys()
            .for_signing()
            .alive()
            .revoked(false)
            .filter_map(|k| k.key_expiration_time())
            .max();
        match (primary, signing) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The public certificate, binary (for `Signed-By` and gpgv).
    pub fn public_binary(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.cert
            .serialize(&mut out)
            .expect("serializing to memory");
        out
    }
}

/// Generates a v4 key with a certification-only primary key and a signing
/// subkey; returns the secret key, armored.
pub fn generate(
    uid: &str,
    algo: KeyAlgo,
    valid_for: Option<Duration>,
    passphrase: Option<&str>,
) -> Result<Vec<u8>, SignError> {
    let suite = match algo {
        KeyAlgo::Ed25519 => CipherSuite::Cv25519,
        KeyAlgo::Rsa4096 => CipherSuite::RSA4k,
    };
    let mut builder = CertBuilder::new()
        .set_profile(openpgp::Profile::RFC4880)
        .map_err(|e| SignError::Generate(e.to_string()))?
        .set_cipher_suite(suite)
        .add_userid(uid)
        .add_signing_subkey()
        .set_validity_period(valid_for);
    if let Some(pw) = passphrase {
        builder = builder.set_password(Some(Password::from(pw)));
    }
    let (cert, _revocation) = builder
        .generate()
        .map_err(|e| SignError::Generate(e.to_string()))?;
    cert.as_tsk()
        .armored()
        .to_vec()
        .map_err(|e| SignError::Generate(e.to_string()))
}

/// Public certificates of `keys`, concatenated: binary (`.gpg`) and armored (`.asc`).
pub fn export_public(keys: &[SigningKey]) -> (Vec<u8>, Vec<u8>) {
    let mut binary = Vec::new();
    for k in keys {
        binary.extend(k.public_binary());
    }
    let mut armored = Vec::new();
    {
        let mut w = armor::Writer::new(&mut armored, armor::Kind::PublicKey).expect("armor writer");
        w.write_all(&binary).expect("to memory");
        w.finalize().expect("to memory");
    }
    (binary, armored)
}

fn signer<'a>(
    message: Message<'a>,
    keys: &[SigningKey],
    created: SystemTime,
) -> Result<Signer<'a>, SignError> {
    let err = |e: anyhow::Error| SignError::Sign(e.to_string());
    let (first, rest) = keys
        .split_first()
        .ok_or_else(|| SignError::Sign("no signing key".into()))?;
    // A fixed creation time (the Release's Date), so that the signatures
    // say when what they sign was made. They still differ from one build to
    // the next: Sequoia salts every v4 signature (a random
    // `salt@notations.sequoia-pgp.org` notation, found by the test that
    // compares builds in place with builds from nothing); what they sign
    // is the same bytes for the same inputs.
    let mut s = Signer::new(message, first.keypair.clone())
        .map_err(err)?
        .hash_algo(HashAlgorithm::SHA512)
        .map_err(err)?
        .creation_time(created);
    for k in rest {
        s = s.add_signer(k.keypair.clone()).map_err(err)?;
    }
    Ok(s)
}

/// `Release.gpg`: one armored block with a detached signature by each key,
/// made at `created`.
pub fn sign_detached(
    keys: &[SigningKey],
    data: &[u8],
    created: SystemTime,
) -> Result<Vec<u8>, SignError> {
    let err = |e: anyhow::Error| SignError::Sign(e.to_string());
    let mut sink = Vec::new();
    {
        let message = Message::new(&mut sink);
        let message = Armorer::new(message)
            .kind(armor::Kind::Signature)
            .build()
            .map_err(err)?;
        let mut w = signer(message, keys, created)?
            .detached()
            .build()
            .map_err(err)?;
        w.write_all(data)
            .map_err(|e| SignError::Sign(e.to_string()))?;
        w.finalize().map_err(err)?;
    }
    Ok(sink)
}

/// `InRelease`: `data` cleartext-signed by each key. The cleartext framework
/// strips trailing whitespace, so `data` must have none (a Release has none).
pub fn sign_cleartext(
    keys: &[SigningKey],
    data: &[u8],
    created: SystemTime,
) -> Result<Vec<u8>, SignError> {
    let err = |e: anyhow::Error| SignError::Sign(e.to_string());
    let mut sink = Vec::new();
    {
        let message = Message::new(&mut sink);
        let mut w = signer(message, keys, created)?
            .cleartext()
            .build()
            .map_err(err)?;
        w.write_all(data)
            .map_err(|e| SignError::Sign(e.to_string()))?;
        w.finalize().map_err(err)?;
    }
    Ok(sink)
}

impl crate::error::Hint for SignError {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openpgp::PinnedKeyring;

    #[test]
    fn signs_what_the_verifier_accepts() {
        let secret = generate(
            "debforge test <t@example.org>",
            KeyAlgo::Ed25519,
            None,
            Some("pw"),
        )
        .unwrap();
        assert!(matches!(
            SigningKey::from_bytes(&secret, None),
            Err(SignError::NeedsPassphrase(_))
        ));
        assert!(matches!(
            SigningKey::from_bytes(&secret, Some("nope")),
            Err(SignError::WrongPassphrase(_))
        ));
        let key = SigningKey::from_bytes(&secret, Some("pw")).unwrap();
        let (public, armored) = export_public(std::slice::from_ref(&key));
        assert!(
            String::from_utf8_lossy(&armored).starts_with("-----BEGIN PGP PUBLIC KEY BLOCK-----")
        );
        let ring = PinnedKeyring::from_bytes(&public, &[key.fingerprint()]).unwrap();
        let release = b"Origin: debforge\nSuite: bionic\n";
        let now = SystemTime::now();
        let sig = sign_detached(std::slice::from_ref(&key), release, now).unwrap();
        ring.verify_detached(release, &sig).unwrap();
        assert!(ring.verify_detached(b"Origin: other\n", &sig).is_err());
        let inline = sign_cleartext(std::slice::from_ref(&key), release, now).unwrap();
        let (body, _) = ring.verify_cleartext(&inline).unwrap();
        assert_eq!(body, release);
        assert_eq!(key.expires(), None);
    }
}
