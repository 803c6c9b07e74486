//! Verifying `Release.gpg` (detached) and `InRelease` (cleartext-signed)
//! against a keyring restricted to pinned fingerprints.

use std::io::Read;

use sequoia_openpgp as openpgp;

use openpgp::cert::{Cert, CertParser};
use openpgp::packet::{Packet, Signature};
use openpgp::parse::Parse;
use openpgp::parse::stream::{
    DetachedVerifierBuilder, MessageLayer, MessageStructure, VerificationHelper, VerifierBuilder,
};
use openpgp::policy::{HashAlgoSecurity, Policy, StandardPolicy};
use openpgp::types::{AEADAlgorithm, HashAlgorithm, SignatureType, SymmetricAlgorithm};
use openpgp::{Fingerprint, KeyHandle};

/// What apt 1.6 and gpgv 2.2 accept, in sequoia's terms.
///
/// The signature over the data (the Release) goes through sequoia's
/// `StandardPolicy`: SHA-1 and MD5 are refused there, as apt refuses them.
/// The pinned certificates' own binding signatures (self-signatures, subkey
/// bindings, revocations) may use SHA-1: Ubuntu's 2012 archive key, which
/// still signs bionic, has a SHA-1 self-signature, and gpgv accepts it.
/// Only pinned certificates ever reach the verifier, so this leniency never
/// applies to a key the user did not name.
#[derive(Debug)]
struct AptPolicy {
    data: StandardPolicy<'static>,
    bindings: StandardPolicy<'static>,
}

impl AptPolicy {
    fn new() -> AptPolicy {
        let mut bindings = StandardPolicy::new();
        bindings.accept_hash(HashAlgorithm::SHA1);
        AptPolicy {
            data: StandardPolicy::new(),
            bindings,
        }
    }
}

impl Policy for AptPolicy {
    fn signature(&self, sig: &Signature, sec: HashAlgoSecurity) -> openpgp::Result<()> {
        match sig.typ() {
            SignatureType::Binary | SignatureType::Text | SignatureType::Standalone => {
                self.data.signature(sig, sec)
            }
            _ => self.bindings.signature(sig, sec),
        }
    }

    fn key(
        &self,
        ka: &openpgp::cert::amalgamation::key::ValidErasedKeyAmalgamation<
            openpgp::packet::key::PublicParts,
        >,
    ) -> openpgp::Result<()> {
        self.data.key(ka)
    }

    fn symmetric_algorithm(&self, algo: SymmetricAlgorithm) -> openpgp::Result<()> {
        self.data.symmetric_algorithm(algo)
    }

    fn aead_algorithm(&self, algo: AEADAlgorithm) -> openpgp::Result<()> {
        self.data.aead_algorithm(algo)
    }

    fn packet(&self, packet: &Packet) -> openpgp::Result<()> {
        self.data.packet(packet)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyringError {
    #[error("not an OpenPGP keyring: {0}")]
    Unreadable(String),
    #[error("holds none of the pinned keys {0} (it holds {1})")]
    NoPinnedKey(String, String),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("the signature file is not an OpenPGP signature: {0}")]
    Malformed(String),
    #[error("no valid signature by the pinned key {pinned}: {reasons}")]
    NotSigned { pinned: String, reasons: String },
    #[error("not one cleartext-signed message: {0}")]
    Shape(#[from] crate::format::clearsign::ClearsignError),
}

/// The certificates of a keyring file whose primary fingerprint is pinned.
#[derive(Debug, Clone)]
pub struct PinnedKeyring {
    certs: Vec<Cert>,
    /// Pinned fingerprints the file does not hold (a warning for the user:
    /// one good signature by any pinned key is enough, as for apt).
    pub missing: Vec<String>,
}

impl PinnedKeyring {
    /// Reads an armored or binary keyring and keeps only the pinned
    /// certificates (upper-case hex fingerprints). At least one pinned key
    /// must be present; the ones missing are listed in `missing`.
    pub fn from_bytes(keyring: &[u8], pinned: &[String]) -> Result<PinnedKeyring, KeyringError> {
        let mut all = Vec::new();
        let parser =
            CertParser::from_bytes(keyring).map_err(|e| KeyringError::Unreadable(e.to_string()))?;
        for cert in parser {
            all.push(cert.map_err(|e| KeyringError::Unreadable(e.to_string()))?);
        }
        if all.is_empty() {
            return Err(KeyringError::Unreadable("no certificate in it".into()));
        }
        let mut certs = Vec::new();
        let mut missing = Vec::new();
        for want in pinned {
            match all.iter().find(|c| c.fingerprint().to_hex() == *want) {
                Some(c) => certs.push(c.clone()),
                None => missing.push(want.clone()),
            }
        }
        if certs.is_empty() {
            let have: Vec<String> = all.iter().map(|c| c.fingerprint().to_hex()).collect();
            return Err(KeyringError::NoPinnedKey(
                pinned.join(", "),
                have.join(", "),
            ));
        }
        Ok(PinnedKeyring { certs, missing })
    }

    /// Trusts every certificate in the keyring (our own exported keyring).
    pub fn all(keyring: &[u8]) -> Result<PinnedKeyring, KeyringError> {
        let parser =
            CertParser::from_bytes(keyring).map_err(|e| KeyringError::Unreadable(e.to_string()))?;
        let certs = parser
            .collect::<Result<Vec<Cert>, _>>()
            .map_err(|e| KeyringError::Unreadable(e.to_string()))?;
        if certs.is_empty() {
            return Err(KeyringError::Unreadable("no certificate in it".into()));
        }
        Ok(PinnedKeyring {
            certs,
            missing: Vec::new(),
        })
    }

    fn pinned_text(&self) -> String {
        let present: Vec<String> = self
            .certs
            .iter()
            .map(|c| c.fingerprint().to_hex())
            .collect();
        present.join(" or ")
    }

    /// Checks a detached signature (`Release.gpg`) over `data`; returns the
    /// fingerprint of the certificate that made a good signature.
    pub fn verify_detached(
        &self,
        data: &[u8],
        signature: &[u8],
    ) -> Result<Fingerprint, VerifyError> {
        let policy = AptPolicy::new();
        let helper = Helper::new(&self.certs);
        let mut verifier = DetachedVerifierBuilder::from_bytes(signature)
            .map_err(|e| VerifyError::Malformed(e.to_string()))?
            .with_policy(&policy, None, helper)
            .map_err(|e| self.not_signed(e))?;
        let result = verifier.verify_bytes(data);
        let helper = verifier.into_helper();
        match (result, helper.good) {
            (Ok(()), Some(fp)) => Ok(fp),
            (r, _) => Err(self.failure(&helper.reasons, r.err())),
        }
    }

    /// Checks a cleartext-signed message (`InRelease`); returns the signed
    /// text (the Release) and the signer's fingerprint.
    pub fn verify_cleartext(&self, message: &[u8]) -> Result<(Vec<u8>, Fingerprint), VerifyError> {
        // Only the signed part would be read; the rest must not be there.
        crate::format::clearsign::check_shape(&String::from_utf8_lossy(message))?;
        let policy = AptPolicy::new();
        let helper = Helper::new(&self.certs);
        let mut verifier = VerifierBuilder::from_bytes(message)
            .map_err(|e| VerifyError::Malformed(e.to_string()))?
            .with_policy(&policy, None, helper)
            .map_err(|e| self.not_signed(e))?;
        let mut body = Vec::new();
        let result = verifier.read_to_end(&mut body);
        let done = verifier.message_processed();
        let helper = verifier.into_helper();
        match (result, done, helper.good) {
            (Ok(_), true, Some(fp)) => Ok((body, fp)),
            (r, _, _) => Err(self.failure(&helper.reasons, r.err().map(anyhow::Error::from))),
        }
    }

    fn not_signed(&self, e: anyhow::Error) -> VerifyError {
        VerifyError::NotSigned {
            pinned: self.pinned_text(),
            reasons: e.to_string(),
        }
    }

    fn failure(&self, reasons: &[String], err: Option<anyhow::Error>) -> VerifyError {
        let mut all = reasons.to_vec();
        if all.is_empty() {
            all.push(err.map_or_else(|| "no signature found".to_string(), |e| e.to_string()));
        }
        VerifyError::NotSigned {
            pinned: self.pinned_text(),
            reasons: all.join("; "),
        }
    }
}

struct Helper<'a> {
    certs: &'a [Cert],
    good: Option<Fingerprint>,
    reasons: Vec<String>,
}

impl<'a> Helper<'a> {
    fn new(certs: &'a [Cert]) -> Self {
        Helper {
            certs,
            good: None,
            reasons: Vec::new(),
        }
    }
}

impl VerificationHelper for Helper<'_> {
    fn get_certs(&mut self, _ids: &[KeyHandle]) -> openpgp::Result<Vec<Cert>> {
        Ok(self.certs.to_vec())
    }

    fn check(&mut self, structure: MessageStructure) -> openpgp::Result<()> {
        for layer in structure {
            if let MessageLayer::SignatureGroup { results } = layer {
                for result in results {
                    match result {
                        Ok(good) => {
                            // Sequoia checks the key was alive when it
                            // signed; gpgv (and so apt) also wants it alive
                            // now: an expired key gives EXPKEYSIG.
                            match expired_now(good.ka.cert(), &good.ka.key().fingerprint()) {
                                Some(why) => self.reasons.push(why),
                                None => {
                                    self.good
                                        .get_or_insert_with(|| good.ka.cert().fingerprint());
                                }
                            }
                        }
                        Err(e) => self.reasons.push(describe(&e)),
                    }
                }
            }
        }
        if self.good.is_some() {
            Ok(())
        } else if self.reasons.is_empty() {
            Err(anyhow::anyhow!("no signature found"))
        } else {
            Err(anyhow::anyhow!(self.reasons.join("; ")))
        }
    }
}

/// Why the signing key `key` of `cert` is not usable now (expired, or its
/// certificate is), as apt would refuse it; `None` when it is alive.
fn expired_now(cert: &Cert, key: &Fingerprint) -> Option<String> {
    let policy = AptPolicy::new();
    let now = std::time::SystemTime::now();
    let valid = match cert.with_policy(&policy, now) {
        Ok(v) => v,
        Err(e) => {
            return Some(format!(
                "the certificate {} is not valid now: {e} (apt refuses its signatures)",
                cert.fingerprint()
            ));
        }
    };
    let expiry = |t: Option<std::time::SystemTime>| {
        t.map(|t| {
            crate::format::date::format_rfc2822(
                t.duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as i64),
            )
        })
        .unwrap_or_default()
    };
    if valid.alive().is_err() {
        return Some(format!(
            "signed by key {} which expired on {} (apt refuses it: EXPKEYSIG)",
            cert.fingerprint(),
            expiry(valid.primary_key().key_expiration_time())
        ));
    }
    let ka = valid.keys().key_handle(key.clone()).next()?;
    if ka.alive().is_err() {
        return Some(format!(
            "signed by key {key} which expired on {} (apt refuses it: EXPKEYSIG)",
            expiry(ka.key_expiration_time())
        ));
    }
    None
}

fn describe(e: &openpgp::parse::stream::VerificationError) -> String {
    use openpgp::parse::stream::VerificationError as E;
    match e {
        E::MissingKey { sig } => {
            let issuers: Vec<String> = sig.get_issuers().iter().map(|h| h.to_hex()).collect();
            format!(
                "signed by key {} which is not the pinned one",
                issuers.join(",")
            )
        }
        E::BadSignature { sig, error, .. } => {
            let when = |t: &std::time::SystemTime| {
                crate::format::date::format_rfc2822(
                    t.duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs() as i64),
                )
            };
            if let Some(openpgp::Error::NotYetLive(t)) = error.downcast_ref::<openpgp::Error>() {
                // Sequoia's time allows for clock skew; the signature's own is clearer.
                let made = sig.signature_creation_time().unwrap_or(*t);
                return format!(
                    "the signature is dated {}, in the future: not valid yet (apt refuses it too); check this machine's clock, or the signer's",
                    when(&made)
                );
            }
            if let Some(openpgp::Error::Expired(t)) = error.downcast_ref::<openpgp::Error>() {
                return format!("the signature expired on {} (apt refuses it)", when(t));
            }
            if let Some(openpgp::Error::PolicyViolation(..)) =
                error.downcast_ref::<openpgp::Error>()
            {
                format!(
                    "the signature is made over {} (apt refuses it, and so does debforge): {error}",
                    sig.hash_algo()
                )
            } else {
                format!("bad signature (the file was altered or signed over other data): {error}")
            }
        }
        E::MalformedSignature { error, .. } => format!("malformed signature: {error}"),
        E::UnboundKey { error, .. } => {
            format!("signing key not bound to the pinned certificate: {error}")
        }
        E::BadKey { error, .. } => format!("signing key not valid: {error}"),
        other => other.to_string(),
    }
}
