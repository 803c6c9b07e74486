//! `dpkg-deb -c` output: dpkg-deb runs `tar -tv`, so this reproduces GNU tar's
//! verbose listing (src/list.c, `simple_print_header`), with times in UTC.

use super::read::{DataEntry, EntryKind};
use crate::format::date::utc_minutes;

/// Formats entries line by line. GNU tar widens the owner/size column when an
/// entry needs more room and keeps it wide for the rest of the listing, so
/// the formatter carries that width.
pub struct ContentsFormatter {
    ugs_width: usize,
}

impl Default for ContentsFormatter {
    fn default() -> Self {
        ContentsFormatter { ugs_width: 19 }
    }
}

impl ContentsFormatter {
    pub fn line(&mut self, e: &DataEntry) -> String {
        let user = if e.user.is_empty() {
            e.uid.to_string()
        } else {
            e.user.clone()
        };
        let group = if e.group.is_empty() {
            e.gid.to_string()
        } else {
            e.group.clone()
        };
        let size = match e.device {
            Some((major, minor)) => format!("{major},{minor}"),
            None => e.size.to_string(),
        };
        let pad = user.len() + 1 + group.len() + 1 + size.len();
        self.ugs_width = self.ugs_width.max(pad);
        let width = self.ugs_width - pad + size.len();
        let mut line = format!(
            "{} {user}/{group} {size:>width$} {} {}",
            mode_string(e.kind, e.mode),
            utc_minutes(e.mtime as i64),
            quote(&e.path),
        );
        match (e.kind, &e.link) {
            (EntryKind::Symlink, Some(t)) => line.push_str(&format!(" -> {}", quote(t))),
            (EntryKind::HardLink, Some(t)) => line.push_str(&format!(" link to {}", quote(t))),
            _ => {}
        }
        line
    }
}

/// `drwxr-xr-x`-style mode, with GNU tar's type letters.
pub fn mode_string(kind: EntryKind, mode: u32) -> String {
    let t = match kind {
        EntryKind::File | EntryKind::Other => '-',
        EntryKind::Directory => 'd',
        EntryKind::Symlink => 'l',
        EntryKind::HardLink => 'h',
        EntryKind::CharDevice => 'c',
        EntryKind::BlockDevice => 'b',
        EntryKind::Fifo => 'p',
    };
    let bit = |m: u32, c: char| if mode & m != 0 { c } else { '-' };
    let special = |x: u32, s: u32, set: char, unset: char| match (mode & x != 0, mode & s != 0) {
        (true, true) => set,
        (false, true) => unset,
        (true, false) => 'x',
        (false, false) => '-',
    };
    [
        t,
        bit(0o400, 'r'),
        bit(0o200, 'w'),
        special(0o100, 0o4000, 's', 'S'),
        bit(0o040, 'r'),
        bit(0o020, 'w'),
        special(0o010, 0o2000, 's', 'S'),
        bit(0o004, 'r'),
        bit(0o002, 'w'),
        special(0o001, 0o1000, 't', 'T'),
    ]
    .iter()
    .collect()
}

/// GNU tar's default "escape" quoting: backslash and control characters.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\{:03o}", c as u32))
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes() {
        assert_eq!(mode_string(EntryKind::Directory, 0o755), "drwxr-xr-x");
        assert_eq!(mode_string(EntryKind::File, 0o4755), "-rwsr-xr-x");
        assert_eq!(mode_string(EntryKind::File, 0o1644), "-rw-r--r-T");
    }
}

/// The line count `dpkg-deb --info` shows for a control file. dpkg-deb reads
/// the first character (and, after `#`, the second) to look for `#!` before
/// counting newlines, so a newline in those places is not counted (a
/// `templates` file starting with an empty line counts one less); after an
/// interpreter name it counts the newline that ends it.
pub fn dpkg_deb_lines(data: &[u8]) -> usize {
    let mut it = data.iter().copied();
    let mut lines = 0;
    if it.next() == Some(b'#') && it.next() == Some(b'!') {
        let mut c = it.next();
        while c == Some(b' ') {
            c = it.next();
        }
        while let Some(b) = c {
            if b.is_ascii_whitespace() || b == 0x0b {
                break;
            }
            c = it.next();
        }
        if c == Some(b'\n') {
            lines += 1;
        }
    }
    lines + it.filter(|&b| b == b'\n').count()
}

#[cfg(test)]
mod line_tests {
    use super::dpkg_deb_lines;

    #[test]
    fn counts_lines_as_dpkg_deb_info_does() {
        assert_eq!(dpkg_deb_lines(b"#!/bin/sh\nset -e\n"), 2);
        assert_eq!(dpkg_deb_lines(b"#!/bin/sh -e\nx\n"), 2);
        assert_eq!(dpkg_deb_lines(b"Template: a\n"), 1);
        assert_eq!(
            dpkg_deb_lines(b"\nTemplate: a\n"),
            1,
            "a leading newline is not counted"
        );
        assert_eq!(dpkg_deb_lines(b"#\n#\n"), 1);
        assert_eq!(dpkg_deb_lines(b""), 0);
        assert_eq!(dpkg_deb_lines(b"#!\n"), 1);
    }
}
