//! One vocabulary for failures. Every library error is a typed enum in its
//! own module; beside it, that module implements [`Hint`]: what the user can
//! do about it lives next to the error it explains. An I/O failure on a
//! named file is one type, [`FileError`], wherever it happens.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// What the user can do about an error, if the error knows.
pub trait Hint {
    fn hint(&self) -> Option<String> {
        None
    }
}

/// An I/O error on a file, with the file's path.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct FileError {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

impl FileError {
    pub fn new(path: impl Into<PathBuf>, source: io::Error) -> FileError {
        FileError {
            path: path.into(),
            source,
        }
    }

    /// For `map_err`: the error of an operation on `path`.
    pub fn at(path: &Path) -> impl Fn(io::Error) -> FileError + '_ {
        move |source| FileError::new(path, source)
    }

    pub fn kind(&self) -> io::ErrorKind {
        self.source.kind()
    }
}

impl Hint for FileError {
    fn hint(&self) -> Option<String> {
        match self.source.kind() {
            io::ErrorKind::PermissionDenied => {
                Some("check the file's owner and mode (or run as its owner)".into())
            }
            io::ErrorKind::StorageFull => {
                Some("the disk is full: free space, then run the command again".into())
            }
            _ => None,
        }
    }
}

/// An error with its hint, as the binary shows it: the message, and on the
/// next line what to do.
pub struct Shown<'a, E: fmt::Display + Hint + ?Sized>(pub &'a E);

impl<E: fmt::Display + Hint + ?Sized> fmt::Display for Shown<'_, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        if let Some(h) = self.0.hint() {
            write!(f, "\n  hint: {h}")?;
        }
        Ok(())
    }
}
