//! Member compression of a `.deb`: what deb(5) allows and how we read and
//! write each kind. Writing is xz by default, gzip on request, zstd only when
//! asked (Ubuntu 18.04's dpkg reads zstd only through a distribution patch).

use std::fmt;
use std::io::{self, BufRead, Read, Write};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    None,
    Gzip,
    Xz,
    Zstd,
}

impl Compression {
    /// From a member name's suffix after `control.tar` / `data.tar`.
    pub fn from_extension(ext: &str) -> Option<Compression> {
        Some(match ext {
            "" => Compression::None,
            ".gz" => Compression::Gzip,
            ".xz" => Compression::Xz,
            ".zst" => Compression::Zstd,
            _ => return None,
        })
    }

    pub fn extension(self) -> &'static str {
        match self {
            Compression::None => "",
            Compression::Gzip => ".gz",
            Compression::Xz => ".xz",
            Compression::Zstd => ".zst",
        }
    }

    /// dpkg-deb's default level for each compressor.
    pub fn default_level(self) -> u32 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 9,
            Compression::Xz => 6,
            Compression::Zstd => 3,
        }
    }

    pub fn max_level(self) -> u32 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 9,
            Compression::Xz => 9,
            Compression::Zstd => 19,
        }
    }

    /// A decompressing reader over `input`. Concatenated streams are read
    /// whole, as dpkg does.
    pub fn decoder<'a, R: BufRead + 'a>(self, input: R) -> io::Result<Box<dyn Read + 'a>> {
        Ok(match self {
            Compression::None => Box::new(input),
            Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(input)),
            Compression::Xz => Box::new(liblzma::bufread::XzDecoder::new_multi_decoder(input)),
            Compression::Zstd => Box::new(zstd::Decoder::with_buffer(input)?),
        })
    }

    /// A compressing writer over `output`; call [`Encoder::finish`].
    pub fn encoder<W: Write>(self, output: W, level: u32, threads: u32) -> io::Result<Encoder<W>> {
        Ok(match self {
            Compression::None => Encoder::None(output),
            Compression::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(
                output,
                flate2::Compression::new(level),
            )),
            Compression::Xz => {
                // Always the multi-threaded encoder: its output depends on the
                // block size (3 × the preset's dictionary), never on the thread
                // count, so the same tree gives the same bytes on any machine;
                // an input smaller than one block is a single block either way.
                let stream = liblzma::stream::MtStreamBuilder::new()
                    .preset(level)
                    .threads(threads.max(1))
                    .check(liblzma::stream::Check::Crc64)
                    .encoder()
                    .map_err(io::Error::other)?;
                Encoder::Xz(liblzma::write::XzEncoder::new_stream(output, stream))
            }
            Compression::Zstd => Encoder::Zstd(zstd::Encoder::new(output, level as i32)?),
        })
    }

    /// A compressing writer for a repository index (`Packages`): the
    /// default level; for xz, preset 6 in independent blocks of
    /// [`INDEX_XZ_BLOCK`] with a dictionary of that size (a larger one
    /// cannot help inside a block), on up to [`INDEX_XZ_THREADS`] cores.
    /// The bytes depend on the input only. A 2 MB `Packages` (5,000
    /// packages, `xz` 5.4): 210,852 bytes in 256 KiB blocks, in 0.11 s on
    /// two cores with about 4.5 MiB per thread; 209,964 in 512 KiB blocks
    /// (0.14 s, 8 MiB per thread); 208,568 in one block with a 256 KiB
    /// dictionary, on one core (0.22 s).
    pub fn index_encoder<W: Write>(self, output: W) -> io::Result<Encoder<W>> {
        if self != Compression::Xz {
            return self.encoder(output, self.default_level(), 1);
        }
        let mut options = liblzma::stream::LzmaOptions::new_preset(6).map_err(io::Error::other)?;
        options.dict_size(INDEX_XZ_BLOCK as u32);
        let mut filters = liblzma::stream::Filters::new();
        filters.lzma2(&options);
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(INDEX_XZ_THREADS) as u32;
        let stream = liblzma::stream::MtStreamBuilder::new()
            .filters(filters)
            .block_size(INDEX_XZ_BLOCK)
            .threads(threads)
            .check(liblzma::stream::Check::Crc64)
            .encoder()
            .map_err(io::Error::other)?;
        Ok(Encoder::Xz(liblzma::write::XzEncoder::new_stream(
            output, stream,
        )))
    }
}

/// The xz block (and dictionary) size of repository indexes.
pub const INDEX_XZ_BLOCK: u64 = 256 * 1024;

/// How repository indexes are compressed, recorded with each generation:
/// its compressed indexes are reused by a later build only where that build
/// would make the same bytes (a debforge that compresses otherwise makes
/// them anew). Change it with any change to [`Compression::index_encoder`].
pub const INDEX_FORMS: &str = "gzip 9; xz preset 6, 256 KiB blocks and dictionary";

/// At most this many threads compress one index: each holds its own
/// encoder (memory), and an index of 5,000 packages is 8 blocks.
pub const INDEX_XZ_THREADS: usize = 4;

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Xz => "xz",
            Compression::Zstd => "zstd",
        })
    }
}

pub enum Encoder<W: Write> {
    None(W),
    Gzip(flate2::write::GzEncoder<W>),
    Xz(liblzma::write::XzEncoder<W>),
    Zstd(zstd::Encoder<'static, W>),
}

impl<W: Write> Encoder<W> {
    /// Flushes the compressor's trailer and returns the inner writer.
    pub fn finish(self) -> io::Result<W> {
        match self {
            Encoder::None(w) => Ok(w),
            Encoder::Gzip(e) => e.finish(),
            Encoder::Xz(e) => e.finish(),
            Encoder::Zstd(e) => e.finish(),
        }
    }
}

impl<W: Write> Write for Encoder<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Encoder::None(w) => w.write(buf),
            Encoder::Gzip(e) => e.write(buf),
            Encoder::Xz(e) => e.write(buf),
            Encoder::Zstd(e) => e.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Encoder::None(w) => w.flush(),
            Encoder::Gzip(e) => e.flush(),
            Encoder::Xz(e) => e.flush(),
            Encoder::Zstd(e) => e.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for c in [
            Compression::None,
            Compression::Gzip,
            Compression::Xz,
            Compression::Zstd,
        ] {
            let mut enc = c.encoder(Vec::new(), c.default_level(), 2).unwrap();
            enc.write_all(&data).unwrap();
            let packed = enc.finish().unwrap();
            let mut out = Vec::new();
            c.decoder(&packed[..])
                .unwrap()
                .read_to_end(&mut out)
                .unwrap();
            assert_eq!(out, data, "{c}");
        }
    }
}
