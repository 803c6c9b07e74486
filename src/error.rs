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

/// An I/O error on a file, with the file's path (its middle left out
/// where it is longer than a screen: see [`ShortPath`]).
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", ShortPath(path))]
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
        io_hint(&self.path, &self.source)
    }
}

/// What to do about `e`, an I/O error on `path`, where there is something.
pub fn io_hint(path: &Path, e: &io::Error) -> Option<String> {
    // A walk's error names the path it failed at (see `walk_error`).
    if let Some(inner) = e.get_ref().and_then(|i| i.downcast_ref::<FileError>()) {
        return inner.hint();
    }
    match e.kind() {
        io::ErrorKind::PermissionDenied => {
            Some("check the file's owner and mode (or run as its owner)".into())
        }
        io::ErrorKind::StorageFull => {
            Some("the disk is full: free space, then run the command again".into())
        }
        _ if e.raw_os_error() == Some(libc::ENAMETOOLONG) => Some(too_long(path)),
        _ => None,
    }
}

/// A path as an error shows it: whole up to [`ShortPath::MAX`] characters;
/// longer (a tree thousands of directories deep reaches the system's bound
/// of 4,096 bytes), its start and its end with how much was left out
/// between them, so that the message stays readable.
pub struct ShortPath<'a>(pub &'a Path);

impl ShortPath<'_> {
    pub const MAX: usize = 200;
    const HEAD: usize = 60;
    const TAIL: usize = 100;
}

impl fmt::Display for ShortPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.0.display().to_string();
        let chars = text.chars().count();
        if chars <= ShortPath::MAX {
            return f.write_str(&text);
        }
        let head: String = text.chars().take(ShortPath::HEAD).collect();
        let tail: String = text.chars().skip(chars - ShortPath::TAIL).collect();
        let left_out = chars - ShortPath::HEAD - ShortPath::TAIL;
        write!(f, "{head}…({left_out} characters)…{tail}")
    }
}

/// A target named by text (a directory, an rsync or S3 URL), shown as
/// [`ShortPath`] shows a path.
pub struct ShortText<'a>(pub &'a str);

impl fmt::Display for ShortText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        ShortPath(Path::new(self.0)).fmt(f)
    }
}

/// What is too long in `path`, which the system refused as such: the whole
/// path (a tree too deep) or one name in it.
fn too_long(path: &Path) -> String {
    const PATH_MAX: usize = libc::PATH_MAX as usize - 1;
    const NAME_MAX: usize = 255;
    let len = path.as_os_str().len();
    let longest = path
        .components()
        .map(|c| c.as_os_str().len())
        .max()
        .unwrap_or(0);
    if len <= PATH_MAX && longest > NAME_MAX {
        return format!(
            "a name in the path is {longest} bytes long, more than the system takes ({NAME_MAX} at most): rename it"
        );
    }
    format!(
        "the path is {len} bytes long, more than the system takes ({PATH_MAX} at most): a tree that deep cannot be read by path; move or remove what is that deep"
    )
}

/// A directory walk's error as a [`FileError`] at the path it failed at
/// (`root` where it names none): walkdir's own message holds the whole
/// path, which a tree thousands of levels deep makes kilobytes long.
pub fn walk_file_error(e: walkdir::Error, root: &Path) -> FileError {
    let path = e.path().unwrap_or(root).to_path_buf();
    let source = if e.io_error().is_some() {
        e.into_io_error().expect("an I/O error")
    } else {
        // A loop of links, where links are followed.
        io::Error::from(e)
    };
    FileError { path, source }
}

/// [`walk_file_error`] as an I/O error (its kind, the file error inside).
pub fn walk_error(e: walkdir::Error) -> io::Error {
    if e.path().is_none() {
        return io::Error::from(e);
    }
    let f = walk_file_error(e, Path::new(""));
    io::Error::new(f.source.kind(), f)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_longer_than_a_screen_shows_its_ends_and_what_was_left_out() {
        let short = Path::new("/var/cache/debforge/debs/x.deb");
        assert_eq!(ShortPath(short).to_string(), short.display().to_string());
        let exact = "/".to_string() + &"é".repeat(ShortPath::MAX - 1);
        assert_eq!(ShortPath(Path::new(&exact)).to_string(), exact);
        let deep = format!("/tmp/deeppkg{}/file", "/a".repeat(2_000));
        let e = FileError::new(&deep, io::Error::from_raw_os_error(libc::ENAMETOOLONG));
        let shown = Shown(&e).to_string();
        assert!(shown.starts_with("/tmp/deeppkg/a/a/"), "{shown}");
        assert!(shown.contains("…(3857 characters)…"), "{shown}");
        assert!(shown.contains("/a/a/file: File name too long"), "{shown}");
        assert!(
            shown.contains(
                "hint: the path is 4017 bytes long, more than the system takes (4095 at most)"
            ),
            "{shown}"
        );
        assert!(shown.len() < 500, "{shown}");
        let long_name = format!("/tmp/{}", "a".repeat(300));
        let e = FileError::new(&long_name, io::Error::from_raw_os_error(libc::ENAMETOOLONG));
        assert_eq!(
            e.hint().as_deref(),
            Some(
                "a name in the path is 300 bytes long, more than the system takes (255 at most): rename it"
            )
        );
    }
}
