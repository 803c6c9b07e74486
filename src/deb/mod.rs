//! The `.deb` container: reading and writing binary packages.
//!
//! Spec: deb(5) (<https://manpages.debian.org/deb.5>): an ar archive of
//! `debian-binary` (`2.0\n`), `control.tar[.gz|.xz|.zst]` and
//! `data.tar[.gz|.xz|.zst]`, in that order; members named `_…` may stand in
//! between and are skipped. Everything streams: a member is read straight out
//! of the file at its offset, and reading the control part never touches the
//! data part.

pub mod ar;
pub mod blocks;
pub mod build;
pub mod compression;
pub mod listing;
pub mod read;
pub mod repack;
pub mod targuard;

use std::io;
use std::path::PathBuf;

pub use blocks::INDEX_FORMS;
pub use build::{BuildOptions, BuildReport, build_from_dir};
pub use compression::Compression;
pub use read::{ControlFile, ControlFiles, DataEntry, DebFile, EntryKind, Member, MemberRole};

use crate::format::control::ControlError;

/// A `.deb` that cannot be read, naming the file.
#[derive(Debug, thiserror::Error)]
#[error("{}: {kind}", crate::error::ShortPath(path))]
pub struct DebError {
    pub path: PathBuf,
    pub kind: DebErrorKind,
}

#[derive(Debug, thiserror::Error)]
pub enum DebErrorKind {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("{0}")]
    Ar(#[from] ar::ArError),
    #[error("first member is '{0}', expected 'debian-binary'")]
    NotDebianBinaryFirst(String),
    #[error("debian-binary says {0:?}; only package format 2.x is supported")]
    BadFormatVersion(String),
    #[error(
        "member '{found}' comes before '{expected}' (dpkg expects debian-binary, control.tar*, data.tar* in that order)"
    )]
    MemberOutOfOrder {
        found: String,
        expected: &'static str,
    },
    #[error("no '{0}' member: the archive ends before it")]
    MissingMember(&'static str),
    #[error(
        "member '{0}' uses a compression dpkg cannot read here (expected none, .gz, .xz or .zst)"
    )]
    UnknownCompression(String),
    #[error("control member: entry {entry:?} {reason}")]
    UnsafeControlEntry { entry: String, reason: &'static str },
    #[error("control member is not a readable tar archive: {0}")]
    ControlTar(io::Error),
    #[error("control member has no 'control' file")]
    NoControlFile,
    #[error("control file: {0}")]
    Control(#[from] ControlError),
    #[error("data member is not a readable tar archive: {0}")]
    DataTar(io::Error),
}

impl DebError {
    pub(crate) fn new(path: impl Into<PathBuf>, kind: impl Into<DebErrorKind>) -> DebError {
        DebError {
            path: path.into(),
            kind: kind.into(),
        }
    }
}

impl crate::error::Hint for DebError {
    fn hint(&self) -> Option<String> {
        match &self.kind {
            DebErrorKind::Ar(ar::ArError::NotAr) => Some(
                "is this a .deb? `file` tells what it is; an interrupted download leaves HTML or a partial file".into(),
            ),
            DebErrorKind::Ar(
                ar::ArError::TruncatedMember { .. } | ar::ArError::TruncatedHeader { .. },
            ) => Some("the file is incomplete: download or copy it again".into()),
            DebErrorKind::UnsafeControlEntry { .. } => {
                Some("the package is malformed or hostile; do not install it".into())
            }
            _ => None,
        }
    }
}
