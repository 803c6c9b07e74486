//! Our signing keys on disk: `keys/signing/*.key`, armored OpenPGP secret
//! keys, mode 0600. Every key there signs (several at once for rotation).
//! Secret key files are never copied into the output or a bundle: only the
//! public keyring is exported.

use crate::error::FileError;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::openpgp::sign::{self, KeyAlgo, SignError, SigningKey};

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(transparent)]
    Io(#[from] crate::error::FileError),
    #[error(
        "{}: secret key file is readable by group or others (mode {mode:04o}); run `chmod 600 {}`",
        crate::error::ShortPath(path),
        path.display()
    )]
    Permissions { path: PathBuf, mode: u32 },
    #[error("{}: {source}", crate::error::ShortPath(path))]
    Key { path: PathBuf, source: SignError },
    #[error(
        "no signing key in {}: run `debforge keygen` (or copy your key there, mode 0600)",
        crate::error::ShortPath(dir)
    )]
    NoKeys { dir: PathBuf },
    #[error("{0}")]
    Generate(SignError),
    #[error("{} already holds a signing key ({}); every key there signs, so a second one is a rotation: pass --add if that is what you want", crate::error::ShortPath(dir), existing.join(", "))]
    AlreadyHasKey { dir: PathBuf, existing: Vec<String> },
}

/// A loaded key and what the user should be told about it.
pub struct LoadedKey {
    pub key: SigningKey,
    pub path: PathBuf,
    /// Set when the key expires within 30 days.
    pub expires_soon: Option<SystemTime>,
}

pub fn signing_dir(keys: &Path) -> PathBuf {
    keys.join("signing")
}

/// Loads every `*.key` under `keys/signing/`, refusing files that others can
/// read. `passphrase` unlocks protected keys; a key that expires within 30
/// days of `now` (seconds since the epoch) is marked.
pub fn load_signing_keys(
    keys: &Path,
    passphrase: Option<&str>,
    now: i64,
) -> Result<Vec<LoadedKey>, KeyError> {
    let dir = signing_dir(keys);
    let mut files: Vec<PathBuf> = match fs::read_dir(&dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "key"))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(source) => return Err(KeyError::Io(crate::error::FileError { path: dir, source })),
    };
    files.sort();
    if files.is_empty() {
        return Err(KeyError::NoKeys { dir });
    }
    let soon = SystemTime::UNIX_EPOCH + Duration::from_secs(now.max(0) as u64 + 30 * 86_400);
    let mut out = Vec::new();
    for path in files {
        let meta = fs::metadata(&path).map_err(FileError::at(&path))?;
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(KeyError::Permissions { path, mode });
        }
        let bytes =
            crate::input::read(&path, crate::input::limit::KEY).map_err(FileError::at(&path))?;
        let key = SigningKey::from_bytes(&bytes, passphrase).map_err(|source| KeyError::Key {
            path: path.clone(),
            source,
        })?;
        let expires_soon = key.expires().filter(|t| *t < soon);
        out.push(LoadedKey {
            key,
            path,
            expires_soon,
        });
    }
    Ok(out)
}

/// Generates a key into `keys/signing/<slug>-<fingerprint>.key` (mode 0600,
/// never overwriting). Returns the file and the fingerprint.
/// What `keys/signing/.gitignore` holds: the secret keys never reach git.
pub const SIGNING_GITIGNORE: &str =
    "# Secret signing keys (written by debforge keygen): never commit them.\n*\n";

pub fn keygen(
    keys: &Path,
    uid: &str,
    algo: KeyAlgo,
    valid_for: Option<Duration>,
    passphrase: Option<&str>,
    add: bool,
) -> Result<(PathBuf, String), KeyError> {
    let existing: Vec<String> = fs::read_dir(signing_dir(keys))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".key"))
        .collect();
    if !existing.is_empty() && !add {
        return Err(KeyError::AlreadyHasKey {
            dir: signing_dir(keys),
            existing,
        });
    }
    let secret = sign::generate(uid, algo, valid_for, passphrase).map_err(KeyError::Generate)?;
    let key = SigningKey::from_bytes(&secret, passphrase).map_err(KeyError::Generate)?;
    let fpr = key.fingerprint();
    let dir = signing_dir(keys);
    fs::create_dir_all(&dir).map_err(FileError::at(&dir))?;
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).map_err(FileError::at(&dir))?;
    // Ignored by git from the first key on, whatever the project's own
    // .gitignore says.
    let ignore = dir.join(".gitignore");
    if !ignore.exists() {
        fs::write(&ignore, SIGNING_GITIGNORE).map_err(FileError::at(&ignore))?;
    }
    let slug: String = uid
        .chars()
        .take_while(|&c| c != '<')
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .trim_matches('-')
        .to_string();
    let path = dir.join(format!(
        "{}-{}.key",
        if slug.is_empty() { "signing" } else { &slug },
        &fpr[fpr.len() - 16..]
    ));
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(FileError::at(&path))?;
    f.write_all(&secret).map_err(FileError::at(&path))?;
    f.sync_all().map_err(FileError::at(&path))?;
    Ok((path, fpr))
}

impl crate::error::Hint for KeyError {
    fn hint(&self) -> Option<String> {
        match self {
            KeyError::NoKeys { .. } => Some(
                "`debforge build` makes one on its first run; `debforge keygen` makes one now"
                    .into(),
            ),
            KeyError::Io(e) => crate::error::Hint::hint(e),
            _ => None,
        }
    }
}
