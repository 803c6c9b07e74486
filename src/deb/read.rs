//! Reading a `.deb`: the member list, the control files, the data entries.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::ar::{ArMember, ArReader};
use super::compression::Compression;
use super::{DebError, DebErrorKind};
use crate::format::control::check_binary_control;
use crate::format::deb822::ControlParagraph;

/// Upper bound for the control member once decompressed, so for all control
/// files held in memory together (the largest real `md5sums` are a few MB).
pub const MAX_CONTROL_MEMBER: u64 = 32 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemberRole {
    DebianBinary,
    Control,
    Data,
    /// `_`-prefixed members, which dpkg skips.
    Ignored,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Member {
    pub name: String,
    pub size: u64,
    /// Offset of the member's data in the file.
    pub offset: u64,
    pub role: MemberRole,
    /// For the control and data members.
    pub compression: Option<Compression>,
    /// The ar header's date.
    pub mtime: u64,
}

/// An open `.deb` whose container has been checked; members are read lazily.
pub struct DebFile {
    path: PathBuf,
    file: File,
    len: u64,
    format_version: String,
    members: Vec<Member>,
}

impl DebFile {
    /// Opens and checks the container as dpkg does: `debian-binary` first with
    /// format 2.x, then `control.tar*`, then `data.tar*` (`_…` members
    /// skipped). Reads only member headers and `debian-binary`.
    pub fn open(path: impl AsRef<Path>) -> Result<DebFile, DebError> {
        let path = path.as_ref();
        let err = |kind: DebErrorKind| DebError::new(path, kind);
        // By type: a FIFO in a package's place is refused, never waited on.
        let file = crate::input::open_regular(path).map_err(|e| err(e.into()))?;
        let len = file.metadata().map_err(|e| err(e.into()))?.len();
        let mut ar = ArReader::new(BufReader::with_capacity(512, &file), len)
            .map_err(|e| err(e.into()))?
            .map_err(|e| err(e.into()))?;
        let mut next = || -> Result<Option<ArMember>, DebError> {
            ar.next_member()
                .map_err(|e| err(e.into()))?
                .map_err(|e| err(e.into()))
        };

        let first = next()?.ok_or_else(|| err(DebErrorKind::MissingMember("debian-binary")))?;
        if first.name != "debian-binary" {
            return Err(err(DebErrorKind::NotDebianBinaryFirst(first.name)));
        }
        let format_version = read_format_version(&file, &first).map_err(err)?;
        let mut members = vec![Member {
            name: first.name,
            size: first.size,
            offset: first.data_offset,
            role: MemberRole::DebianBinary,
            compression: None,
            mtime: first.mtime,
        }];

        for (prefix, role, expected) in [
            ("control.tar", MemberRole::Control, "control.tar"),
            ("data.tar", MemberRole::Data, "data.tar"),
        ] {
            loop {
                let m = next()?.ok_or_else(|| err(DebErrorKind::MissingMember(expected)))?;
                if m.name.starts_with('_') {
                    members.push(Member {
                        name: m.name,
                        size: m.size,
                        offset: m.data_offset,
                        role: MemberRole::Ignored,
                        compression: None,
                        mtime: m.mtime,
                    });
                    continue;
                }
                let Some(ext) = m.name.strip_prefix(prefix) else {
                    return Err(err(DebErrorKind::MemberOutOfOrder {
                        found: m.name,
                        expected,
                    }));
                };
                let compression = Compression::from_extension(ext)
                    .ok_or_else(|| err(DebErrorKind::UnknownCompression(m.name.clone())))?;
                members.push(Member {
                    name: m.name,
                    size: m.size,
                    offset: m.data_offset,
                    role,
                    compression: Some(compression),
                    mtime: m.mtime,
                });
                break;
            }
        }
        // Like dpkg, nothing after data.tar is looked at.
        Ok(DebFile {
            path: path.to_path_buf(),
            file,
            len,
            format_version,
            members,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn len(&self) -> u64 {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The content of `debian-binary` without its newline, e.g. `2.0`.
    pub fn format_version(&self) -> &str {
        &self.format_version
    }
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    fn member(&self, role: MemberRole) -> &Member {
        self.members
            .iter()
            .find(|m| m.role == role)
            .expect("open() checked that the member exists")
    }
    pub fn control_member(&self) -> &Member {
        self.member(MemberRole::Control)
    }
    pub fn data_member(&self) -> &Member {
        self.member(MemberRole::Data)
    }

    /// The member's bytes as stored (still compressed): for copying verbatim.
    pub fn raw_member(&self, member: &Member) -> impl Read + '_ {
        Region {
            file: &self.file,
            pos: member.offset,
            end: member.offset + member.size,
        }
    }

    /// The opened file's own metadata (`fstat`): the file read, whatever
    /// its path names now.
    pub fn metadata(&self) -> io::Result<std::fs::Metadata> {
        self.file.metadata()
    }

    /// The whole file, read positionally from the open handle (for hashing
    /// without opening it again).
    pub fn raw_whole(&self) -> impl Read + '_ {
        Region {
            file: &self.file,
            pos: 0,
            end: self.len,
        }
    }

    /// The member's tar stream, decompressed and guarded (see
    /// [`super::targuard`]): at most `limit` bytes, no oversized long names.
    pub fn member_tar(&self, member: &Member, limit: u64) -> io::Result<Box<dyn Read + '_>> {
        // Buffers sized to the member: a small package costs no large
        // allocations (each one above 128 KiB is an mmap and page faults).
        let raw = BufReader::with_capacity(buffer_for(member.size), self.raw_member(member));
        let decoder = member
            .compression
            .unwrap_or(Compression::None)
            .decoder(raw)?;
        // tar reads in 512-byte headers and 8 KiB chunks: buffer above the
        // decompressor so each call into it does real work.
        let what = if member.role == MemberRole::Control {
            "control"
        } else {
            "data"
        };
        Ok(Box::new(super::targuard::TarGuard::new(
            BufReader::with_capacity(64 * 1024, decoder),
            limit,
            what,
        )))
    }

    /// Reads and checks the control member: plain files at its top level only
    /// (no absolute paths, `..`, links or devices), a `control` file among
    /// them, and a valid binary control paragraph in it.
    pub fn control_files(&self) -> Result<ControlFiles, DebError> {
        let err = |kind| DebError::new(&self.path, kind);
        let tar_err = |e: io::Error| err(DebErrorKind::ControlTar(e));
        let reader = self
            .member_tar(self.control_member(), MAX_CONTROL_MEMBER)
            .map_err(tar_err)?;
        let mut archive = tar::Archive::new(reader);
        let mut files = Vec::new();
        for entry in archive.entries().map_err(tar_err)? {
            let mut entry = entry.map_err(tar_err)?;
            let raw_path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            // A hostile name may be megabytes long: the message shows its start.
            let shown = match raw_path.char_indices().nth(80) {
                Some((cut, _)) => format!("{}…", &raw_path[..cut]),
                None => raw_path.clone(),
            };
            let unsafe_entry = |reason| {
                err(DebErrorKind::UnsafeControlEntry {
                    entry: shown.clone(),
                    reason,
                })
            };
            if raw_path.starts_with('/') {
                return Err(unsafe_entry("is an absolute path"));
            }
            if raw_path.split('/').any(|c| c == "..") {
                return Err(unsafe_entry("contains '..'"));
            }
            let kind = entry.header().entry_type();
            let name = raw_path.trim_start_matches("./").trim_end_matches('/');
            match kind {
                tar::EntryType::Directory if name.is_empty() || name == "." => continue,
                tar::EntryType::Directory => {
                    return Err(unsafe_entry("is a subdirectory; control files are flat"));
                }
                tar::EntryType::Regular | tar::EntryType::Continuous => {}
                tar::EntryType::Symlink | tar::EntryType::Link => {
                    return Err(unsafe_entry("is a link"));
                }
                tar::EntryType::Char | tar::EntryType::Block | tar::EntryType::Fifo => {
                    return Err(unsafe_entry("is a device or special file"));
                }
                _ => return Err(unsafe_entry("has an entry type that is not a plain file")),
            }
            if name.contains('/') {
                return Err(unsafe_entry(
                    "is inside a subdirectory; control files are flat",
                ));
            }
            if name.len() > 255 {
                return Err(unsafe_entry(
                    "has a name longer than 255 bytes (NAME_MAX), which dpkg-deb cannot extract",
                ));
            }
            let size = entry.header().size().map_err(tar_err)?;
            if size > MAX_CONTROL_MEMBER {
                return Err(unsafe_entry(
                    "is larger than 32 MiB, the limit for the control member",
                ));
            }
            let mode = entry.header().mode().map_err(tar_err)?;
            let mut data = Vec::with_capacity(size as usize);
            entry.read_to_end(&mut data).map_err(tar_err)?;
            files.push(ControlFile {
                name: name.to_string(),
                mode,
                data,
            });
        }
        // What follows the end marker, and the compressor's checksum.
        super::targuard::drain(archive.into_inner()).map_err(tar_err)?;
        let control = files
            .iter()
            .find(|f| f.name == "control")
            .ok_or_else(|| err(DebErrorKind::NoControlFile))?;
        let text = std::str::from_utf8(&control.data).map_err(|_| {
            err(DebErrorKind::Control(
                crate::format::deb822::ParseError {
                    line: 1,
                    kind: crate::format::deb822::ParseErrorKind::NotUtf8,
                }
                .into(),
            ))
        })?;
        let paragraph = ControlParagraph::parse_single(text)
            .map_err(|e| err(DebErrorKind::Control(e.into())))?;
        check_binary_control(&paragraph).map_err(|e| err(e.into()))?;
        Ok(ControlFiles {
            control: paragraph,
            files,
        })
    }

    /// Reads the data member to its end as dpkg-deb does (decompressed, every
    /// tar header and entry, the end of the stream): a member cut short or
    /// of random bytes is refused, not copied on.
    pub fn check_data(&self) -> Result<(), DebError> {
        self.visit_data(|_| Ok(()))
    }

    /// Streams the data member's entries to `visit`, in archive order, without
    /// reading file contents into memory.
    pub fn visit_data(
        &self,
        mut visit: impl FnMut(DataEntry) -> io::Result<()>,
    ) -> Result<(), DebError> {
        let tar_err = |e: io::Error| DebError::new(&self.path, DebErrorKind::DataTar(e));
        let reader = self
            .member_tar(self.data_member(), u64::MAX)
            .map_err(tar_err)?;
        let mut archive = tar::Archive::new(reader);
        for entry in archive.entries().map_err(tar_err)? {
            let entry = entry.map_err(tar_err)?;
            let h = entry.header();
            let kind = EntryKind::from_tar(h.entry_type());
            let link = entry
                .link_name_bytes()
                .map(|l| String::from_utf8_lossy(&l).into_owned())
                .filter(|_| matches!(kind, EntryKind::Symlink | EntryKind::HardLink));
            let device = match kind {
                EntryKind::CharDevice | EntryKind::BlockDevice => Some((
                    h.device_major().ok().flatten().unwrap_or(0),
                    h.device_minor().ok().flatten().unwrap_or(0),
                )),
                _ => None,
            };
            let data_entry = DataEntry {
                path: String::from_utf8_lossy(&entry.path_bytes()).into_owned(),
                kind,
                mode: h.mode().map_err(tar_err)? & 0o7777,
                uid: h.uid().map_err(tar_err)?,
                gid: h.gid().map_err(tar_err)?,
                user: h.username().ok().flatten().unwrap_or("").to_string(),
                group: h.groupname().ok().flatten().unwrap_or("").to_string(),
                size: entry.size(),
                mtime: h.mtime().map_err(tar_err)?,
                link,
                device,
            };
            visit(data_entry).map_err(tar_err)?;
        }
        super::targuard::drain(archive.into_inner()).map_err(tar_err)?;
        Ok(())
    }
}

/// A read buffer for `size` bytes: at least 8 KiB, at most 64 KiB.
fn buffer_for(size: u64) -> usize {
    size.clamp(8 * 1024, 64 * 1024) as usize
}

fn read_format_version(file: &File, m: &ArMember) -> Result<String, DebErrorKind> {
    if m.size > 64 {
        return Err(DebErrorKind::BadFormatVersion(format!(
            "<{} bytes>",
            m.size
        )));
    }
    let mut buf = vec![0u8; m.size as usize];
    file.read_exact_at(&mut buf, m.data_offset)?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    // dpkg: "2.<digits>" up to the first newline; the newline is required.
    let Some((first, _)) = text.split_once('\n') else {
        return Err(DebErrorKind::BadFormatVersion(text));
    };
    let ok = first
        .strip_prefix("2.")
        .is_some_and(|minor| !minor.is_empty() && minor.bytes().all(|b| b.is_ascii_digit()));
    if !ok {
        return Err(DebErrorKind::BadFormatVersion(text));
    }
    Ok(first.to_string())
}

/// A byte range of the file, read positionally (no shared file offset).
struct Region<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
}

impl Read for Region<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = (self.end - self.pos).min(buf.len() as u64) as usize;
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.pos)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "file shrank while reading",
            ));
        }
        self.pos += n as u64;
        Ok(n)
    }
}

/// The files of the control member.
#[derive(Debug, Clone)]
pub struct ControlFiles {
    pub control: ControlParagraph,
    pub files: Vec<ControlFile>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct ControlFile {
    pub name: String,
    pub mode: u32,
    #[serde(skip)]
    pub data: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EntryKind {
    File,
    Directory,
    Symlink,
    HardLink,
    CharDevice,
    BlockDevice,
    Fifo,
    Other,
}

impl EntryKind {
    fn from_tar(t: tar::EntryType) -> EntryKind {
        match t {
            tar::EntryType::Regular | tar::EntryType::Continuous => EntryKind::File,
            tar::EntryType::Directory => EntryKind::Directory,
            tar::EntryType::Symlink => EntryKind::Symlink,
            tar::EntryType::Link => EntryKind::HardLink,
            tar::EntryType::Char => EntryKind::CharDevice,
            tar::EntryType::Block => EntryKind::BlockDevice,
            tar::EntryType::Fifo => EntryKind::Fifo,
            _ => EntryKind::Other,
        }
    }
}

/// One entry of the data member, as `tar -tv` sees it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DataEntry {
    /// As stored, e.g. `./usr/lib/`.
    pub path: String,
    pub kind: EntryKind,
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
    pub user: String,
    pub group: String,
    pub size: u64,
    pub mtime: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<(u32, u32)>,
}
