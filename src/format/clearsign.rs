//! The cleartext signature framework of OpenPGP, as used by `InRelease`.
//!
//! Spec: RFC 4880 §7 (<https://www.rfc-editor.org/rfc/rfc4880#section-7>).
//! Only the framing lives here (pure text); checking the signature is the
//! signing module's job.

/// The parts of a cleartext-signed message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cleartext {
    /// The `Hash:` armor header values (may be empty: then MD5 by the RFC).
    pub hashes: Vec<String>,
    /// The signed text with dash-escaping undone, ending with a newline as the
    /// `Release` file it carries did.
    pub body: String,
    /// The ASCII-armored signature block, `-----BEGIN PGP SIGNATURE-----` to
    /// `-----END PGP SIGNATURE-----`.
    pub signature: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClearsignError {
    #[error(
        "not a cleartext-signed message: it does not start with '-----BEGIN PGP SIGNED MESSAGE-----'"
    )]
    NoHeader,
    #[error("line {0}: armor header is not 'Name: value'")]
    BadArmorHeader(usize),
    #[error("no '-----BEGIN PGP SIGNATURE-----' after the signed text")]
    NoSignature,
}

const BEGIN: &str = "-----BEGIN PGP SIGNED MESSAGE-----";
const SIG_BEGIN: &str = "-----BEGIN PGP SIGNATURE-----";

pub fn split(text: &str) -> Result<Cleartext, ClearsignError> {
    let mut lines = text.split_inclusive('\n').enumerate();
    match lines.next() {
        Some((_, l)) if l.trim_end() == BEGIN => {}
        _ => return Err(ClearsignError::NoHeader),
    }
    let mut hashes = Vec::new();
    for (i, line) in lines.by_ref() {
        let line = line.trim_end_matches(['\n', '\r']);
        if line.trim().is_empty() {
            break;
        }
        let (name, value) = line
            .split_once(": ")
            .ok_or(ClearsignError::BadArmorHeader(i + 1))?;
        if name == "Hash" {
            hashes.extend(value.split(',').map(|h| h.trim().to_string()));
        }
    }
    let mut body = String::new();
    for (i, line) in lines.by_ref() {
        if line.trim_end() == SIG_BEGIN {
            let start: usize = text.split_inclusive('\n').take(i).map(str::len).sum();
            let signature = text[start..].to_string();
            return Ok(Cleartext {
                hashes,
                body,
                signature,
            });
        }
        body.push_str(line.strip_prefix("- ").unwrap_or(line));
    }
    Err(ClearsignError::NoSignature)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_and_undoes_dash_escaping() {
        let text = "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\nOrigin: x\n- -dashed\n-----BEGIN PGP SIGNATURE-----\n\nabc\n-----END PGP SIGNATURE-----\n";
        let c = split(text).unwrap();
        assert_eq!(c.hashes, vec!["SHA512"]);
        assert_eq!(c.body, "Origin: x\n-dashed\n");
        assert!(
            c.signature.starts_with(SIG_BEGIN)
                && c.signature.ends_with("-----END PGP SIGNATURE-----\n")
        );
        assert_eq!(split("Origin: x\n"), Err(ClearsignError::NoHeader));
        assert_eq!(
            split("-----BEGIN PGP SIGNED MESSAGE-----\n\nbody\n"),
            Err(ClearsignError::NoSignature)
        );
    }
}
