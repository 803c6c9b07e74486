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
}

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
