//! Each package's `Packages` stanza but its file fields, rendered once
//! where its control paragraph is read, and kept on disk until the indexes
//! are written ([`crate::format::packages::write_stanza_without_files`]).
//!
//! Why: a build held every package's control paragraph from preparing to
//! the end of the write, where its memory peaks (300 bytes a package, 6 MB
//! at 20,000), only to render each one's stanza once. What it holds of a
//! package now is an [`IndexEntry`]: its name, version, architecture and
//! pool path in one string, and where its stanza is. The control is
//! checked where it is read, so the write neither parses nor checks it.

use std::io;
use std::path::PathBuf;

use crate::digest::Digests;
use crate::files::SpillFile;
use crate::format::deb822::ControlParagraph;
use crate::format::packages;

/// The stanzas of a build's packages, in a spill file made at the first
/// one (in the cache directory it is given, else the system's temporary
/// directory).
#[derive(Default)]
pub struct Stanzas {
    dir: Option<PathBuf>,
    spill: Option<SpillFile>,
}

/// A package's stanza rendered and its control checked, not yet in the
/// spill file: made on any thread, appended by [`Stanzas::append`] (the
/// check parses every relation: most of the cost, kept out of the lock a
/// session's spill is behind).
pub struct Rendered {
    text: String,
    entry: IndexEntry,
}

impl Rendered {
    pub fn of(control: &ControlParagraph) -> io::Result<Rendered> {
        let mut text = String::new();
        let head = packages::write_stanza_without_files(control, &mut text);
        let (rest, refused) = match crate::format::control::check_binary_control(control) {
            Ok(()) => (packages::pool_path_in_component(control), false),
            Err(e) => (e.to_string(), true),
        };
        let mut names = String::new();
        let mut ends = [0; 3];
        for (end, field) in ends.iter_mut().zip(["Package", "Version", "Architecture"]) {
            names.push_str(control.get(field).unwrap_or_default());
            *end = u32::try_from(names.len()).map_err(|_| too_long("name"))?;
        }
        names.push_str(&rest);
        let length = |n: usize| u32::try_from(n).map_err(|_| too_long("stanza"));
        let entry = IndexEntry {
            text: names.into_boxed_str(),
            ends,
            at: 0,
            head: length(head)?,
            tail: length(text.len() - head)?,
            refused,
        };
        Ok(Rendered { text, entry })
    }
}

/// What a build keeps of one package for the indexes and the report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexEntry {
    /// Package, Version, Architecture and the pool path under
    /// `pool/<component>/` (or, refused, why the control names none), back
    /// to back: one allocation, not four.
    text: Box<str>,
    /// Where each of the first three ends in `text`.
    ends: [u32; 3],
    /// Where the stanza is in the spill: the fields before the file
    /// fields (`head` bytes), then those after them (`tail`).
    at: u64,
    head: u32,
    tail: u32,
    /// The control fails `check_binary_control`: it names no pool file.
    refused: bool,
}

impl IndexEntry {
    fn part(&self, i: usize) -> &str {
        super::packed_text(&self.text, &self.ends, i)
    }
    pub fn package(&self) -> &str {
        self.part(0)
    }
    pub fn version(&self) -> &str {
        self.part(1)
    }
    pub fn architecture(&self) -> &str {
        self.part(2)
    }
    /// Its pool path (`pool/<component>/…`), from its control once
    /// checked; else why the control names none.
    pub fn pool_path(&self, component: &str) -> Result<String, &str> {
        match self.refused {
            false => Ok(format!("pool/{component}/{}", self.part(3))),
            true => Err(self.part(3)),
        }
    }
}

fn too_long(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("a package's {what} is over 4 GiB"),
    )
}

impl Stanzas {
    /// The spill file goes in `dir` where it is a directory.
    pub fn new(dir: Option<PathBuf>) -> Stanzas {
        Stanzas {
            dir,
            ..Stanzas::default()
        }
    }

    /// Renders `control`'s stanza into the spill file and checks the
    /// control (its relations parsed: what names a pool file must be
    /// whole), once, where the package is prepared.
    pub fn add(&mut self, control: &ControlParagraph) -> io::Result<IndexEntry> {
        self.append(Rendered::of(control)?)
    }

    /// `rendered`'s stanza into the spill file: its entry, placed.
    pub fn append(&mut self, rendered: Rendered) -> io::Result<IndexEntry> {
        if self.spill.is_none() {
            self.spill = Some(SpillFile::new(self.dir.as_deref())?);
        }
        let spill = self.spill.as_mut().expect("made above");
        let Rendered { text, mut entry } = rendered;
        entry.at = spill.append(text.as_bytes())?;
        Ok(entry)
    }

    /// Where the spill file is (for what a failure of it names).
    pub fn dir(&self) -> PathBuf {
        self.dir.clone().unwrap_or_else(std::env::temp_dir)
    }

    /// The appended stanzas written out, the buffer let go: nothing more
    /// is added once the packages are prepared.
    pub fn flush(&mut self) -> io::Result<()> {
        self.spill.as_mut().map_or(Ok(()), SpillFile::flush)
    }

    /// A reader of the stanzas, for writing the indexes.
    pub fn reader(&self) -> StanzaReader<'_> {
        StanzaReader {
            stanzas: self,
            start: 0,
            window: Vec::new(),
        }
    }

    /// `entry`'s control paragraph again, parsed from its stanza (the
    /// control's fields but those that say where a file is and its digests,
    /// in the index's order): for what reads a prepared package's relations
    /// (the pinned packages' exact dependencies; with a base closure, every
    /// package's). Its bytes only, read at once: no window.
    pub fn control(&self, entry: &IndexEntry) -> io::Result<ControlParagraph> {
        let spill = self
            .spill
            .as_ref()
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        let mut bytes = vec![0; entry.head as usize + entry.tail as usize];
        spill.read_exact_at(&mut bytes, entry.at)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "a stanza is not UTF-8"))?;
        ControlParagraph::parse_single(&text)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
    }
}

/// Reads stanzas through a window of the spill file: the indexes list the
/// packages in pool order, which is nearly the order they were prepared
/// in, so one read serves many stanzas.
pub struct StanzaReader<'s> {
    stanzas: &'s Stanzas,
    start: u64,
    window: Vec<u8>,
}

/// What one read of the spill file brings in, at least.
const WINDOW: usize = 16 * 1024;

impl StanzaReader<'_> {
    /// `entry`'s stanza with `filename` and `digests` as its file fields,
    /// appended to `out`: the bytes [`packages::write_stanza`] gives.
    pub fn write(
        &mut self,
        entry: &IndexEntry,
        filename: &str,
        digests: &Digests,
        out: &mut String,
    ) -> io::Result<()> {
        let (head, tail) = self.parts(entry)?;
        out.push_str(head);
        packages::write_file_fields(filename, digests, out);
        out.push_str(tail);
        Ok(())
    }

    fn parts(&mut self, entry: &IndexEntry) -> io::Result<(&str, &str)> {
        let (head, tail) = (entry.head as usize, entry.tail as usize);
        let bytes = self.bytes(entry.at, head + tail)?;
        let text = std::str::from_utf8(bytes)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "a stanza is not UTF-8"))?;
        // A stanza was split after a field's newline: a character boundary.
        text.split_at_checked(head)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "a stanza's split"))
    }

    fn bytes(&mut self, at: u64, len: usize) -> io::Result<&[u8]> {
        let spill = self
            .stanzas
            .spill
            .as_ref()
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        let end = at + len as u64;
        if end > spill.len() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let held = self.start + self.window.len() as u64;
        if at < self.start || end > held {
            let want = (len.max(WINDOW) as u64).min(spill.len() - at) as usize;
            self.window.resize(want, 0);
            if let Err(e) = spill.read_exact_at(&mut self.window, at) {
                // Nothing of a window read in part is given again.
                self.window.clear();
                return Err(e);
            }
            self.start = at;
        }
        let from = (at - self.start) as usize;
        Ok(&self.window[from..from + len])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A package's stanza comes back from the spill with its file fields,
    /// the bytes `write_stanza` renders, in any order and across the read
    /// window; its names and pool path are its control's; a control that
    /// names no pool file is refused with the reason `pool_path` gives.
    #[test]
    fn a_stanza_comes_back_as_rendered_with_its_file_fields() {
        let dir = tempfile::tempdir().unwrap();
        let mut stanzas = Stanzas::new(Some(dir.path().to_path_buf()));
        let control = |n: usize| {
            ControlParagraph::parse_single(&format!(
                "Package: libp{n}\nVersion: 1:{n}.0-1\nArchitecture: amd64\nMaintainer: m <m@example.org>\nDepends: libc6 (>= 2.{n})\nDescription: d\n {}\nX-Extra: {n}\n",
                "long ".repeat(n % 50 + 1)
            ))
            .unwrap()
        };
        let entries: Vec<IndexEntry> = (0..2_000)
            .map(|n| stanzas.add(&control(n)).unwrap())
            .collect();
        stanzas.flush().unwrap();
        let digests = |n: usize| Digests {
            size: n as u64,
            sha256: format!("{n:064x}"),
            ..Digests::default()
        };
        let mut reader = stanzas.reader();
        for n in (0..2_000).rev().step_by(7).chain([0, 1, 1_999]) {
            let e = &entries[n];
            assert_eq!(
                (e.package(), e.version(), e.architecture()),
                (
                    format!("libp{n}").as_str(),
                    format!("1:{n}.0-1").as_str(),
                    "amd64"
                )
            );
            let path = e.pool_path("main").unwrap();
            assert_eq!(path, packages::pool_path("main", &control(n)).unwrap());
            let mut got = String::new();
            reader.write(e, &path, &digests(n), &mut got).unwrap();
            let mut want = String::new();
            packages::write_stanza(&control(n), &path, &digests(n), &mut want);
            assert_eq!(got, want);
            let back = stanzas.control(e).unwrap();
            assert_eq!(back.get("Depends"), control(n).get("Depends"));
        }
        let bad = ControlParagraph::parse_single(
            "Package: x\nSource: ../../etc\nVersion: 1\nArchitecture: all\nMaintainer: m\nDescription: d\n",
        )
        .unwrap();
        let e = stanzas.add(&bad).unwrap();
        let reason = packages::pool_path("main", &bad).unwrap_err().to_string();
        assert_eq!(e.pool_path("main"), Err(reason.as_str()));
        assert_eq!(e.package(), "x");
        // Nothing past what was appended is read.
        let past = IndexEntry {
            at: e.at + 1,
            ..e.clone()
        };
        assert!(
            stanzas
                .reader()
                .write(&past, "f", &digests(0), &mut String::new())
                .is_err()
        );
        assert!(
            Stanzas::default()
                .reader()
                .write(&e, "f", &digests(0), &mut String::new())
                .is_err()
        );
    }
}
