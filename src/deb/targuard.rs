//! A guard in front of the `tar` crate for members of untrusted packages.
//! The crate reads a GNU long name (`L`/`K`) or a PAX header (`x`/`g`) into
//! memory whole, whatever size its header claims: a 643 KB package can claim
//! a 2.5 GB name. This reader follows the archive's headers as the bytes go
//! by and fails as soon as one of those metadata entries is larger than a
//! limit, before the crate allocates for it; it also caps what the whole
//! member may expand to.

use std::io::{self, Read};

/// Largest GNU long name / PAX header accepted (PATH_MAX is 4 KiB; PAX
/// records for long paths and times stay far below this).
pub const MAX_META_ENTRY: u64 = 1 << 20;

pub struct TarGuard<R> {
    inner: R,
    /// Bytes of the decompressed member passed through so far.
    pos: u64,
    /// Where the next 512-byte header starts; `None` after the end marker.
    next_header: Option<u64>,
    header: Vec<u8>,
    zero_blocks: u8,
    /// Most bytes the member may expand to.
    limit: u64,
    what: &'static str,
}

impl<R: Read> TarGuard<R> {
    pub fn new(inner: R, limit: u64, what: &'static str) -> Self {
        TarGuard {
            inner,
            pos: 0,
            next_header: Some(0),
            header: Vec::with_capacity(512),
            zero_blocks: 0,
            limit,
            what,
        }
    }

    /// Follows the headers in `buf`, which starts at stream offset `start`.
    fn inspect(&mut self, start: u64, buf: &[u8]) -> io::Result<()> {
        let mut i = 0usize;
        while let Some(at) = self.next_header {
            let end = start + buf.len() as u64;
            if at >= end {
                break;
            }
            if at > start + i as u64 {
                i = (at - start) as usize;
            }
            let take = (512 - self.header.len()).min(buf.len() - i);
            self.header.extend_from_slice(&buf[i..i + take]);
            i += take;
            if self.header.len() < 512 {
                break;
            }
            let h = std::mem::take(&mut self.header);
            self.header = Vec::with_capacity(512);
            if h.iter().all(|&b| b == 0) {
                self.zero_blocks += 1;
                self.next_header = if self.zero_blocks >= 2 {
                    None
                } else {
                    Some(at + 512)
                };
                continue;
            }
            self.zero_blocks = 0;
            let size = header_size(&h).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    "a tar header has an invalid size",
                )
            })?;
            let kind = h[156];
            if matches!(kind, b'L' | b'K' | b'x' | b'g') && size > MAX_META_ENTRY {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "a {} entry claims {size} bytes, over the limit of {MAX_META_ENTRY} (a name or PAX header that large is a bomb, not a path)",
                        match kind {
                            b'L' => "GNU long name",
                            b'K' => "GNU long link name",
                            _ => "PAX header",
                        }
                    ),
                ));
            }
            self.next_header = Some(at + 512 + size.div_ceil(512) * 512);
        }
        Ok(())
    }
}

/// The size field of a tar header: octal, or GNU base-256.
fn header_size(h: &[u8]) -> Option<u64> {
    let f = &h[124..136];
    if f[0] & 0x80 != 0 {
        let mut v: u64 = u64::from(f[0] & 0x7f);
        for &b in &f[1..] {
            v = v.checked_mul(256)?.checked_add(u64::from(b))?;
        }
        return Some(v);
    }
    let text = std::str::from_utf8(f).ok()?;
    let text = text.trim_matches(|c: char| c == '\0' || c == ' ');
    if text.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(text, 8).ok()
}

impl<R: Read> Read for TarGuard<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let start = self.pos;
        self.pos += n as u64;
        if self.pos > self.limit {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the {} member expands to more than {} bytes, the limit for it",
                    self.what, self.limit
                ),
            ));
        }
        self.inspect(start, &buf[..n])?;
        Ok(n)
    }
}

/// Reads `r` to its end (what follows the tar end marker, and the
/// compressor's own end and checksum), so a corrupt or truncated member
/// fails as it does for dpkg-deb instead of passing unread.
pub fn drain(mut r: impl Read) -> io::Result<()> {
    io::copy(&mut r, &mut io::sink()).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_with_long_name(len: usize) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_size(3);
        h.set_mode(0o644);
        h.set_cksum();
        let name = "a".repeat(len);
        b.append_data(&mut h, name, &b"abc"[..]).unwrap();
        b.into_inner().unwrap()
    }

    #[test]
    fn long_names_pass_until_they_are_bombs() {
        let ok = tar_with_long_name(300);
        let mut g = TarGuard::new(&ok[..], 1 << 30, "data");
        let mut a = tar::Archive::new(&mut g);
        let names: Vec<usize> = a
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path_bytes().len())
            .collect();
        assert_eq!(names, [300]);

        // A header that claims a 2.5 GB long name: refused at the header.
        let mut bomb = ok.clone();
        let claim = format!("{:011o}\0", 2_500_000_000u64);
        bomb[124..136].copy_from_slice(claim.as_bytes());
        assert_eq!(bomb[156], b'L');
        let mut g = TarGuard::new(&bomb[..], 1 << 30, "data");
        let err = io::copy(&mut g, &mut io::sink()).unwrap_err();
        assert!(
            err.to_string()
                .contains("GNU long name entry claims 2500000000 bytes"),
            "{err}"
        );
    }

    #[test]
    fn the_member_limit_holds() {
        let ok = tar_with_long_name(10);
        let mut g = TarGuard::new(&ok[..], 1024, "control");
        let err = io::copy(&mut g, &mut io::sink()).unwrap_err();
        assert!(
            err.to_string()
                .contains("the control member expands to more than 1024 bytes"),
            "{err}"
        );
    }
}
