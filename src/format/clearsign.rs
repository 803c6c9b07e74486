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
    #[error(
        "line {0}: text before the signed message; apt and gpgv refuse unsigned text outside the signature"
    )]
    TextBefore(usize),
    #[error(
        "line {0}: text after the signature; apt and gpgv refuse unsigned text outside the signature"
    )]
    TextAfter(usize),
    #[error("line {0}: a second signed message; an InRelease holds exactly one")]
    SecondMessage(usize),
    #[error("no '-----END PGP SIGNATURE-----' closes the signature")]
    NoSignatureEnd,
}

const BEGIN: &str = "-----BEGIN PGP SIGNED MESSAGE-----";
const SIG_BEGIN: &str = "-----BEGIN PGP SIGNATURE-----";

const SIG_END: &str = "-----END PGP SIGNATURE-----";

/// Checks that `text` is one cleartext-signed message and nothing else:
/// blank lines may surround it, no other text, and no second message (a
/// verifier that takes the signed part would use it and ignore the rest;
/// apt and gpgv refuse the file).
pub fn check_shape(text: &str) -> Result<(), ClearsignError> {
    enum State {
        Before,
        Signed,
        Signature,
        After,
    }
    let mut state = State::Before;
    for (i, line) in text.split('\n').enumerate() {
        let line = line.trim_end_matches('\r');
        let n = i + 1;
        let blank = line.trim().is_empty();
        state = match state {
            State::Before if blank => State::Before,
            State::Before if line.trim_end() == BEGIN => State::Signed,
            State::Before => return Err(ClearsignError::TextBefore(n)),
            State::Signed if line.trim_end() == BEGIN => {
                return Err(ClearsignError::SecondMessage(n));
            }
            State::Signed if line.trim_end() == SIG_BEGIN => State::Signature,
            State::Signed => State::Signed,
            State::Signature if line.trim_end() == SIG_END => State::After,
            State::Signature => State::Signature,
            State::After if blank => State::After,
            State::After if line.trim_end() == BEGIN || line.trim_end() == SIG_BEGIN => {
                return Err(ClearsignError::SecondMessage(n));
            }
            State::After => return Err(ClearsignError::TextAfter(n)),
        };
    }
    match state {
        State::Before => Err(ClearsignError::NoHeader),
        State::Signed => Err(ClearsignError::NoSignature),
        State::Signature => Err(ClearsignError::NoSignatureEnd),
        State::After => Ok(()),
    }
}

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
    fn only_one_signed_message_and_nothing_else() {
        let one = "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\nOrigin: x\n-----BEGIN PGP SIGNATURE-----\n\nabc\n-----END PGP SIGNATURE-----\n";
        check_shape(one).unwrap();
        check_shape(&format!("\n{one}\n\n")).unwrap();
        assert_eq!(
            check_shape(&format!("Origin: evil\n{one}")),
            Err(ClearsignError::TextBefore(1))
        );
        assert_eq!(
            check_shape(&format!("{one}Origin: evil\n")),
            Err(ClearsignError::TextAfter(9))
        );
        assert_eq!(
            check_shape(&format!("{one}{one}")),
            Err(ClearsignError::SecondMessage(9))
        );
        let nested = one.replace(
            "Origin: x\n",
            "Origin: x\n-----BEGIN PGP SIGNED MESSAGE-----\n",
        );
        assert_eq!(check_shape(&nested), Err(ClearsignError::SecondMessage(5)));
        assert_eq!(
            check_shape(
                one.trim_end()
                    .trim_end_matches("-----END PGP SIGNATURE-----")
            ),
            Err(ClearsignError::NoSignatureEnd)
        );
    }

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
