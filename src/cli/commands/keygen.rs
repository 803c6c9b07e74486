//! `debforge keygen`: a new signing key.

use super::prelude::*;

#[allow(clippy::too_many_arguments)]
pub(crate) fn run_keygen(
    cx: &Context,
    keys: &std::path::Path,
    algo: AlgoArg,
    name: &str,
    email: Option<&str>,
    expire_days: Option<u32>,
    passphrase_file: Option<&std::path::Path>,
    add: bool,
) -> Result<u8, Failure> {
    use debforge::openpgp::sign::KeyAlgo;
    let uid = match email {
        Some(e) => format!("{name} <{e}>"),
        None => name.to_string(),
    };
    let algo = match algo {
        AlgoArg::Ed25519 => KeyAlgo::Ed25519,
        AlgoArg::Rsa4096 => KeyAlgo::Rsa4096,
    };
    let valid = expire_days.map(|d| Duration::from_secs(u64::from(d) * 86_400));
    let pass = settings::passphrase(passphrase_file)?;
    let (path, fpr) = debforge::keys::keygen(keys, &uid, algo, valid, pass.as_deref(), add)?;
    output::plain(&format!("{fpr}\n"));
    cx.printer.note(&format!(
        "wrote secret key {} (mode 0600); git ignores it ({}/.gitignore); back it up somewhere safe",
        path.display(),
        debforge::keys::signing_dir(keys).display()
    ));
    Ok(EXIT_OK)
}
