//! The ar container of a `.deb`, read as strictly as dpkg reads it.
//!
//! Spec: deb(5) (<https://manpages.debian.org/deb.5>) and ar(5); dpkg's reader
//! is lib/dpkg/ar.c and dpkg-deb/extract.c. Only the common ar format is valid
//! in a `.deb` (no symbol tables, no long-name tables), so the reader here is
//! ours: it checks each header's magic and never reads member data to find the
//! next header (it seeks). Writing uses the `ar` crate's `Builder`, whose
//! headers are byte-for-byte dpkg's.

use std::io::{self, Read, Seek, SeekFrom};

pub const MAGIC: &[u8; 8] = b"!<arch>\n";
const HEADER_LEN: u64 = 60;

/// One member's header and where its data lies in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArMember {
    /// The name with its padding and any GNU-style trailing `/` removed.
    pub name: String,
    pub size: u64,
    /// Byte offset of the member's header.
    pub header_offset: u64,
    /// Byte offset of the member's data.
    pub data_offset: u64,
    pub mtime: u64,
    pub mode: u32,
}

/// What is wrong with the container itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArError {
    #[error("not an ar archive: the file does not start with '!<arch>'")]
    NotAr,
    #[error("member header at byte {offset} is cut short ({available} of 60 bytes)")]
    TruncatedHeader { offset: u64, available: u64 },
    #[error("member header at byte {offset} is corrupt: {reason}")]
    BadHeader { offset: u64, reason: String },
    #[error(
        "member '{name}' is truncated: its header says {declared} bytes but only {available} remain in the file"
    )]
    TruncatedMember {
        name: String,
        declared: u64,
        available: u64,
    },
}

/// Walks the member headers of an ar archive, one at a time, by seeking.
pub struct ArReader<R> {
    inner: R,
    len: u64,
    next: u64,
}

impl<R: Read + Seek> ArReader<R> {
    /// Checks the global magic. `len` is the file's length.
    pub fn new(mut inner: R, len: u64) -> io::Result<Result<ArReader<R>, ArError>> {
        let mut magic = [0u8; 8];
        inner.seek(SeekFrom::Start(0))?;
        if len < 8 {
            return Ok(Err(ArError::NotAr));
        }
        inner.read_exact(&mut magic)?;
        if &magic != MAGIC {
            return Ok(Err(ArError::NotAr));
        }
        Ok(Ok(ArReader {
            inner,
            len,
            next: 8,
        }))
    }

    /// The next member's header, or `None` at the end of the file.
    pub fn next_member(&mut self) -> io::Result<Result<Option<ArMember>, ArError>> {
        let offset = self.next;
        if offset >= self.len {
            return Ok(Ok(None));
        }
        if self.len - offset < HEADER_LEN {
            return Ok(Err(ArError::TruncatedHeader {
                offset,
                available: self.len - offset,
            }));
        }
        let mut h = [0u8; HEADER_LEN as usize];
        self.inner.seek(SeekFrom::Start(offset))?;
        self.inner.read_exact(&mut h)?;
        let bad = |reason: String| Ok(Err(ArError::BadHeader { offset, reason }));
        if &h[58..60] != b"`\n" {
            return bad(
                "bad header magic (expected '`\\n' at the end of the 60-byte header)".into(),
            );
        }
        let Ok(name) = std::str::from_utf8(&h[0..16]) else {
            return bad("member name is not ASCII".into());
        };
        let name = name.trim_end_matches(' ');
        let name = name.strip_suffix('/').unwrap_or(name).to_string();
        if name.is_empty() {
            return bad("empty member name".into());
        }
        // As dpkg's ar reader (lib/dpkg/ar.c) reads a number: leading
        // spaces, then digits only (no '+'), then spaces; and, stricter than
        // it, not empty (a member of no bytes is refused later by dpkg-deb).
        let number = |field: &[u8], radix: u32, what: &str| -> Result<u64, String> {
            let text = std::str::from_utf8(field).unwrap_or("?");
            let digits = text.trim_matches(' ');
            if digits.is_empty() {
                return Err(format!("{what} field is empty"));
            }
            if !digits.chars().all(|c| c.is_digit(radix)) {
                return Err(format!("{what} field {text:?} is not a number"));
            }
            u64::from_str_radix(digits, radix)
                .map_err(|_| format!("{what} field {text:?} is not a number"))
        };
        let size = match number(&h[48..58], 10, "size") {
            Ok(s) => s,
            Err(e) => return bad(e),
        };
        let mtime = number(&h[16..28], 10, "date").unwrap_or(0);
        let mode = number(&h[40..48], 8, "mode").unwrap_or(0) as u32;
        let data_offset = offset + HEADER_LEN;
        let available = self.len - data_offset;
        if size > available {
            return Ok(Err(ArError::TruncatedMember {
                name,
                declared: size,
                available,
            }));
        }
        self.next = data_offset + size + (size & 1);
        Ok(Ok(Some(ArMember {
            name,
            size,
            header_offset: offset,
            data_offset,
            mtime,
            mode,
        })))
    }

    pub fn into_inner(self) -> R {
        self.inner
    }
}

/// A dpkg-style member header (`ar` crate): mode 100644, owner 0:0.
fn member_header(name: &str, size: u64, mtime: u64) -> ar::Header {
    let mut h = ar::Header::new(name.as_bytes().to_vec(), size);
    h.set_mtime(mtime);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mode(0o100644);
    h
}

/// The one ar writer for `.deb` files (build and repack): `debian-binary`
/// (`2.0`), the control member, the data member streamed from `data`, every
/// header dated `mtime` as dpkg-deb writes it. Returns the writer.
pub fn write_deb<W: std::io::Write>(
    out: W,
    mtime: u64,
    control: (&str, &[u8]),
    data: (&str, u64, &mut dyn Read),
) -> io::Result<W> {
    let mut ar = ar::Builder::new(out);
    ar.append(&member_header("debian-binary", 4, mtime), &b"2.0\n"[..])?;
    let (name, bytes) = control;
    ar.append(&member_header(name, bytes.len() as u64, mtime), bytes)?;
    let (name, size, reader) = data;
    ar.append(&member_header(name, size, mtime), reader)?;
    ar.into_inner()
}
