//! Compressed files made of independently compressed pieces, so that a
//! piece whose input did not change is copied from an earlier file instead
//! of compressed again (the repository's indexes):
//!
//! - xz: one stream whose blocks each hold one piece
//!   (<https://tukaani.org/xz/xz-file-format.txt>, sections 2 and 3);
//!   every xz decoder reads multi-block streams (xz's threaded mode writes
//!   them too).
//! - gzip: one member (RFC 1952) whose deflate data (RFC 1951) is the
//!   pieces' raw deflate segments, each from a fresh compressor ended by a
//!   sync flush (byte-aligned, not final), then an empty final block; what
//!   `pigz --independent` writes.
//!
//! The containers are written by hand because liblzma's Rust binding offers
//! no block-level encoder and flate2 no segment joining; the compressed
//! data inside them is liblzma's and miniz_oxide's.

use std::io::{self, Write};

/// How repository indexes are compressed, recorded with each generation:
/// a build reuses an earlier generation's compressed pieces only where it
/// would make the same bytes (a debforge that compresses otherwise makes
/// them anew). Change it with any change to this module's output or to
/// where `repo` cuts pieces.
pub const INDEX_FORMS: &str = "pieces of up to 128 KiB, each ended by a stanza whose CRC32 is a multiple of 32 and 16 KiB or more after the last such stanza; xz preset 6 with the hc3 match finder, 128 KiB dictionary, a block each; gzip 9, a sync-flushed segment each";

/// The xz dictionary (and so the largest useful piece): what the decoder
/// must allocate is declared in each block's header.
pub const XZ_DICT: u32 = 128 * 1024;

/// The xz preset of every block.
const XZ_PRESET: u32 = 6;

/// Its match finder: hash chains rather than preset 6's binary trees. On a
/// Packages index cut in 128 KiB pieces the output is the same size (within
/// 0.1%) in two thirds of the time, and each encoder holds half the match
/// history (4 bytes a position, not 8): a build compresses a piece per core.
/// Hashing three bytes, not four: the encoder's hash tables are half the
/// size (266 KB, not 528 KB, zeroed for every piece), for 0.3% more bytes
/// and 3% more time on Debian's own Packages (20 MB of bookworm's), none
/// on the bench's (a cold 5,000-package build's peak RSS: 0.5 MB less).
const XZ_MATCH_FINDER: liblzma::stream::MatchFinder = liblzma::stream::MatchFinder::HashChain3;

/// The gzip level of every segment.
const GZIP_LEVEL: u32 = 9;

/// CRC64 in xz's blocks (Check ID 0x04).
const CHECK_CRC64: u8 = 0x04;

/// One xz block: the block header, LZMA2 data, padding and CRC64 of
/// `plain`; with its unpadded size (what the stream's index records).
pub fn xz_block(plain: &[u8]) -> io::Result<(Vec<u8>, u64)> {
    use liblzma::stream::{Action, Filters, LzmaOptions, Status, Stream};
    let mut options = LzmaOptions::new_preset(XZ_PRESET).map_err(io::Error::other)?;
    options.dict_size(XZ_DICT);
    options.match_finder(XZ_MATCH_FINDER);
    let mut filters = Filters::new();
    filters.lzma2(&options);
    let mut encoder = Stream::new_raw_encoder(&filters).map_err(io::Error::other)?;
    let mut data = Vec::with_capacity(plain.len() / 3 + 1024);
    loop {
        let done = encoder.total_in() as usize;
        let status = encoder
            .process_vec(&plain[done..], &mut data, Action::Finish)
            .map_err(io::Error::other)?;
        if status == Status::StreamEnd {
            break;
        }
        data.reserve(data.capacity().max(4096));
    }
    let header = xz_block_header(data.len() as u64, plain.len() as u64);
    let unpadded = (header.len() + data.len() + 8) as u64;
    let mut block = header;
    block.extend_from_slice(&data);
    block.resize(block.len().next_multiple_of(4), 0);
    block.extend_from_slice(&crc64(plain).to_le_bytes());
    Ok((block, unpadded))
}

/// A block header naming both sizes and the one LZMA2 filter.
fn xz_block_header(compressed: u64, uncompressed: u64) -> Vec<u8> {
    // Size byte (filled in below), flags: one filter, both sizes present.
    let mut h = vec![0u8, 0x40 | 0x80];
    varint(&mut h, compressed);
    varint(&mut h, uncompressed);
    // Filter flags: LZMA2 (0x21), one property byte, the dictionary.
    h.extend_from_slice(&[0x21, 0x01, lzma2_dict_byte(XZ_DICT)]);
    h.resize(h.len().next_multiple_of(4), 0);
    h[0] = ((h.len() + 4) / 4 - 1) as u8;
    let crc = crc32fast::hash(&h);
    h.extend_from_slice(&crc.to_le_bytes());
    h
}

/// LZMA2's dictionary property: the smallest size it can name that holds
/// `dict` ((2 | b & 1) << (b / 2 + 11)).
fn lzma2_dict_byte(dict: u32) -> u8 {
    (0u8..40)
        .find(|b| (2u64 | (*b as u64 & 1)) << (*b as u64 / 2 + 11) >= dict as u64)
        .unwrap_or(40)
}

/// xz's multibyte integer: seven bits a byte, least significant first.
fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn crc64(data: &[u8]) -> u64 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc64Xz, data)
}

/// Writes one xz stream block by block ([`xz_block`], or a block copied
/// from an earlier stream with its unpadded size).
pub struct XzStreamWriter<W: Write> {
    out: W,
    /// (unpadded size, uncompressed size) of each block, for the index.
    records: Vec<(u64, u64)>,
}

impl<W: Write> XzStreamWriter<W> {
    pub fn new(mut out: W) -> io::Result<Self> {
        let flags = [0x00, CHECK_CRC64];
        out.write_all(&[0xFD, b'7', b'z', b'X', b'Z', 0x00])?;
        out.write_all(&flags)?;
        out.write_all(&crc32fast::hash(&flags).to_le_bytes())?;
        Ok(XzStreamWriter {
            out,
            records: Vec::new(),
        })
    }

    pub fn block(&mut self, block: &[u8], unpadded: u64, uncompressed: u64) -> io::Result<()> {
        self.out.write_all(block)?;
        self.records.push((unpadded, uncompressed));
        Ok(())
    }

    /// The index and the stream footer; the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        let mut index = vec![0x00];
        varint(&mut index, self.records.len() as u64);
        for (unpadded, uncompressed) in &self.records {
            varint(&mut index, *unpadded);
            varint(&mut index, *uncompressed);
        }
        index.resize(index.len().next_multiple_of(4), 0);
        let crc = crc32fast::hash(&index);
        index.extend_from_slice(&crc.to_le_bytes());
        self.out.write_all(&index)?;
        let mut footer = Vec::with_capacity(12);
        footer.extend_from_slice(&((index.len() / 4 - 1) as u32).to_le_bytes());
        footer.extend_from_slice(&[0x00, CHECK_CRC64]);
        let crc = crc32fast::hash(&footer);
        self.out.write_all(&crc.to_le_bytes())?;
        self.out.write_all(&footer)?;
        self.out.write_all(b"YZ")?;
        Ok(self.out)
    }
}

/// One raw deflate segment of `plain` (gzip level 9), ended by a sync flush:
/// segments of any pieces, joined, are one deflate stream until
/// [`GzipMemberWriter::finish`] ends it.
pub fn deflate_segment(plain: &[u8]) -> io::Result<Vec<u8>> {
    use flate2::{Compress, Compression, FlushCompress};
    let mut c = Compress::new(Compression::new(GZIP_LEVEL), false);
    let mut out = Vec::with_capacity(plain.len() / 3 + 1024);
    loop {
        let done = c.total_in() as usize;
        c.compress_vec(&plain[done..], &mut out, FlushCompress::Sync)
            .map_err(io::Error::other)?;
        // The flush is complete once it left output room unused.
        if c.total_in() as usize == plain.len() && out.len() < out.capacity() {
            return Ok(out);
        }
        out.reserve(out.capacity().max(4096));
    }
}

/// Writes one gzip member segment by segment ([`deflate_segment`]).
pub struct GzipMemberWriter<W: Write> {
    out: W,
}

impl<W: Write> GzipMemberWriter<W> {
    pub fn new(mut out: W) -> io::Result<Self> {
        // ID1 ID2, deflate, no flags, no date, XFL 2 (best compression),
        // OS 255 (unknown): flate2's header for level 9, so the same bytes
        // on any machine.
        out.write_all(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 255])?;
        Ok(GzipMemberWriter { out })
    }

    pub fn segment(&mut self, segment: &[u8]) -> io::Result<()> {
        self.out.write_all(segment)
    }

    /// An empty final block (fixed Huffman, end of block only), then the
    /// CRC32 and size of everything the segments hold; the inner writer.
    pub fn finish(mut self, crc32: u32, size: u64) -> io::Result<W> {
        self.out.write_all(&[0x03, 0x00])?;
        self.out.write_all(&crc32.to_le_bytes())?;
        self.out.write_all(&(size as u32).to_le_bytes())?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn pieces() -> Vec<Vec<u8>> {
        let stanza = |i: usize| {
            format!("Package: p{i}\nVersion: 1.{i}\nDescription: piece {i}\n").into_bytes()
        };
        vec![
            (0..2000).flat_map(stanza).collect(),
            Vec::new(),
            (2000..2003).flat_map(stanza).collect(),
            (0..40_000u32).flat_map(|i| i.to_le_bytes()).collect(),
        ]
    }

    fn xz_of(pieces: &[Vec<u8>]) -> Vec<u8> {
        let mut w = XzStreamWriter::new(Vec::new()).unwrap();
        for p in pieces {
            let (block, unpadded) = xz_block(p).unwrap();
            w.block(&block, unpadded, p.len() as u64).unwrap();
        }
        w.finish().unwrap()
    }

    fn gz_of(pieces: &[Vec<u8>]) -> Vec<u8> {
        let mut w = GzipMemberWriter::new(Vec::new()).unwrap();
        let mut crc = crc32fast::Hasher::new();
        let mut size = 0;
        for p in pieces {
            w.segment(&deflate_segment(p).unwrap()).unwrap();
            crc.update(p);
            size += p.len() as u64;
        }
        w.finish(crc.finalize(), size).unwrap()
    }

    #[test]
    fn pieces_compressed_apart_decompress_as_one_file() {
        for pieces in [pieces(), Vec::new(), vec![b"x".to_vec()]] {
            let whole: Vec<u8> = pieces.concat();
            let mut got = Vec::new();
            liblzma::read::XzDecoder::new(&xz_of(&pieces)[..])
                .read_to_end(&mut got)
                .unwrap();
            assert_eq!(got, whole);
            got.clear();
            flate2::read::GzDecoder::new(&gz_of(&pieces)[..])
                .read_to_end(&mut got)
                .unwrap();
            assert_eq!(got, whole);
        }
    }

    #[test]
    fn the_tools_accept_them() {
        let dir = tempfile::tempdir().unwrap();
        let pieces = pieces();
        std::fs::write(dir.path().join("p.xz"), xz_of(&pieces)).unwrap();
        std::fs::write(dir.path().join("p.gz"), gz_of(&pieces)).unwrap();
        for (tool, file) in [("xz", "p.xz"), ("gzip", "p.gz")] {
            let out = std::process::Command::new(tool)
                .args(["-t", "-v"])
                .arg(dir.path().join(file))
                .output()
                .unwrap();
            assert!(out.status.success(), "{tool}: {out:?}");
        }
        // xz's own listing reads the blocks back from the index.
        let out = std::process::Command::new("xz")
            .args(["--robot", "--list"])
            .arg(dir.path().join("p.xz"))
            .output()
            .unwrap();
        let listing = String::from_utf8(out.stdout).unwrap();
        assert!(listing.contains("\tCRC64\t"), "{listing}");
        let totals = listing.lines().find(|l| l.starts_with("totals")).unwrap();
        assert_eq!(totals.split('\t').nth(2), Some("4"), "{listing}");
    }

    #[test]
    fn the_dictionary_is_named_as_lzma2_names_it() {
        assert_eq!(lzma2_dict_byte(4096), 0);
        assert_eq!(lzma2_dict_byte(128 * 1024), 10);
        assert_eq!(lzma2_dict_byte(192 * 1024), 11);
        assert_eq!(lzma2_dict_byte(8 << 20), 22);
    }
}
