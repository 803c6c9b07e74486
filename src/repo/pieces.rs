//! A `Packages` index's compressed forms, written piece by piece as its
//! stanzas come ([`crate::deb::blocks`]). Where pieces end is decided by
//! the stanzas alone ([`Cuts`]), not by where the piece before ended, so a
//! package added or removed changes the piece it is in (or joins it to the
//! next) and leaves the others as they were. A piece an earlier generation
//! compressed is copied from its kept forms (each kept with a
//! [`PieceMap`]) instead of being compressed again. A copied piece is
//! checked by the digests of its
//! compressed forms, which its record keeps from when it was compressed
//! (decompressing the whole index to check it took longer than the rest of
//! a build that changes one package); one whose forms or record are not
//! what they were, or whose record has no digests (a map of an older
//! debforge), is compressed anew.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::deb::blocks::{self, GzipMemberWriter, XzStreamWriter};
use crate::digest::{DigestSet, Digests, Hasher, HashingWriter};
use crate::error::FileError;

use super::RepoError;

/// The fewest bytes from one stanza that may end a piece to the next for
/// that one to end it: every piece but the last holds as many, unless
/// [`PIECE_MAX`] ended the one before.
pub const PIECE_MIN: usize = 16 * 1024;
/// The largest piece (but for a single larger stanza): xz's dictionary.
pub const PIECE_MAX: usize = blocks::XZ_DICT as usize;
/// About one stanza in this many may end a piece (its CRC32 says so).
const CUT_ONE_IN: u32 = 32;

/// Where pieces end. A stanza whose CRC32 is a multiple of [`CUT_ONE_IN`]
/// ends one when [`PIECE_MIN`] bytes or more came since the last such
/// stanza; a stanza that would take a piece past [`PIECE_MAX`] starts one.
/// The rule looks back to the last such stanza, not to where the piece
/// began: a stanza gone or added moves at most the one end after it (but
/// in a run of 128 KiB with no such end, where the size ends pieces). (A
/// rule of "this many bytes since the piece began" moved every end after
/// it until two ends met again by chance: one stanza gone out of 5,000
/// made four pieces anew, not one.)
#[derive(Debug, Default)]
struct Cuts {
    /// Bytes since the last stanza that could end a piece.
    since: usize,
}

impl Cuts {
    /// For `stanza`, `len` bytes with its separator, coming after `piece`
    /// bytes of the piece so far: whether the piece ends before it, and
    /// whether it ends after it.
    fn at(&mut self, piece: usize, len: usize, stanza: &[u8]) -> (bool, bool) {
        let before = piece > 0 && piece + len > PIECE_MAX;
        self.since += len;
        let after = crc32fast::hash(stanza).is_multiple_of(CUT_ONE_IN)
            && std::mem::take(&mut self.since) >= PIECE_MIN;
        (before, after)
    }
}

/// Where one piece's compressed forms lie in the kept forms of the index it
/// was cut from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PieceRecord {
    /// SHA256 of the piece's plain bytes.
    pub sha256: String,
    pub size: u64,
    /// Offset, length and unpadded size of its xz block.
    pub xz: [u64; 3],
    /// Offset and length of its deflate segment.
    pub gz: [u64; 2],
    /// [`block_digest`] of its xz block and of its deflate segment, taken
    /// when they were compressed; `None` in a map of an older debforge (its
    /// pieces are not copied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forms_sha256: Option<[String; 2]>,
}

/// The pieces of one index's `.xz` and `.gz` forms (named by their SHA256),
/// kept beside them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PieceMap {
    /// [`crate::deb::INDEX_FORMS`] of the debforge that compressed them.
    pub forms: String,
    pub xz_sha256: String,
    pub gz_sha256: String,
    pub pieces: Vec<PieceRecord>,
}

/// One kept piece: its record and the kept files it lies in.
#[derive(Debug, Clone)]
struct KeptPiece {
    record: PieceRecord,
    xz_file: Arc<Path>,
    gz_file: Arc<Path>,
}

/// The pieces an earlier generation compressed, by the SHA256 of their
/// plain bytes.
#[derive(Debug, Clone, Default)]
pub struct KeptPieces {
    by_sha256: HashMap<String, KeptPiece>,
}

impl KeptPieces {
    /// Adds the pieces of `map`, whose forms are the files `xz` and `gz`.
    pub fn add(&mut self, map: PieceMap, xz: &Path, gz: &Path) {
        let (xz_file, gz_file): (Arc<Path>, Arc<Path>) = (xz.into(), gz.into());
        for record in map.pieces {
            let piece = KeptPiece {
                record,
                xz_file: xz_file.clone(),
                gz_file: gz_file.clone(),
            };
            self.by_sha256.insert(piece.record.sha256.clone(), piece);
        }
    }

    pub fn len(&self) -> usize {
        self.by_sha256.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_sha256.is_empty()
    }
}

/// One piece's forms, as written.
struct Compressed {
    sha256: String,
    size: u64,
    xz: Vec<u8>,
    xz_unpadded: u64,
    gz: Vec<u8>,
    /// [`block_digest`]s of `xz` and `gz` (`None` until kept forms are
    /// copied in).
    forms_sha256: Option<[String; 2]>,
}

/// The digest a piece's record keeps of one of its compressed forms: the
/// piece's plain SHA256 and size (a record that names another piece's
/// forms is caught), for an xz block its unpadded size (which the stream's
/// index repeats), and the form's bytes.
fn block_digest(plain_sha256: &str, size: u64, unpadded: Option<u64>, bytes: &[u8]) -> String {
    let mut h = crate::digest::KeyHasher::new();
    h.update(plain_sha256);
    h.update(size.to_le_bytes());
    h.update(unpadded.map_or([0xff; 8], u64::to_le_bytes));
    h.update(bytes);
    h.finish_hex()
}

/// Both forms' [`block_digest`]s.
fn forms_digests(c: &Compressed) -> [String; 2] {
    [
        block_digest(&c.sha256, c.size, Some(c.xz_unpadded), &c.xz),
        block_digest(&c.sha256, c.size, None, &c.gz),
    ]
}

/// Both compressed forms of one plain index, written as its stanzas come.
pub struct FormsWriter<'k> {
    xz: XzStreamWriter<HashingWriter<BufWriter<File>>>,
    xz_path: PathBuf,
    xz_at: u64,
    gz: GzipMemberWriter<HashingWriter<BufWriter<File>>>,
    gz_path: PathBuf,
    gz_at: u64,
    /// CRC32 and size of everything so far (gzip's trailer).
    crc: crc32fast::Hasher,
    size: u64,
    piece: Vec<u8>,
    cuts: Cuts,
    pending: Vec<Vec<u8>>,
    records: Vec<PieceRecord>,
    kept: &'k KeptPieces,
    open: HashMap<Arc<Path>, File>,
    reused: usize,
    threads: usize,
}

/// The two forms' digests and the map of their pieces.
pub struct Forms {
    pub xz: Digests,
    pub gz: Digests,
    pub pieces: Vec<PieceRecord>,
    /// How many pieces were copied from kept forms.
    pub reused: usize,
}

impl<'k> FormsWriter<'k> {
    /// Creates `xz` and `gz`.
    pub fn create(xz: &Path, gz: &Path, kept: &'k KeptPieces) -> Result<Self, RepoError> {
        let hashing = |path: &Path| -> Result<_, RepoError> {
            let file = File::create(path).map_err(FileError::at(path))?;
            Ok(HashingWriter::new(
                BufWriter::new(file),
                Hasher::new(DigestSet::ALL),
            ))
        };
        let xz_writer = XzStreamWriter::new(hashing(xz)?).map_err(FileError::at(xz))?;
        let gz_writer = GzipMemberWriter::new(hashing(gz)?).map_err(FileError::at(gz))?;
        Ok(FormsWriter {
            xz: xz_writer,
            xz_path: xz.to_path_buf(),
            xz_at: 12,
            gz: gz_writer,
            gz_path: gz.to_path_buf(),
            gz_at: 10,
            crc: crc32fast::Hasher::new(),
            size: 0,
            piece: Vec::new(),
            cuts: Cuts::default(),
            pending: Vec::new(),
            records: Vec::new(),
            kept,
            open: HashMap::new(),
            reused: 0,
            threads: std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(4),
        })
    }

    /// One stanza: `separator` (the blank line before all but the first),
    /// then `stanza`, whose CRC32 says whether a piece ends after it.
    pub fn stanza(&mut self, separator: &[u8], stanza: &[u8]) -> Result<(), RepoError> {
        let len = separator.len() + stanza.len();
        let (before, after) = self.cuts.at(self.piece.len(), len, stanza);
        if before {
            self.cut()?;
        }
        self.piece.extend_from_slice(separator);
        self.piece.extend_from_slice(stanza);
        if after {
            self.cut()?;
        }
        Ok(())
    }

    /// The piece so far ends here.
    fn cut(&mut self) -> Result<(), RepoError> {
        let piece = std::mem::take(&mut self.piece);
        self.piece(piece)
    }

    /// One whole piece (pieces compress a few at a time, side by side).
    fn piece(&mut self, piece: Vec<u8>) -> Result<(), RepoError> {
        self.pending.push(piece);
        if self.pending.len() >= self.threads {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the pending pieces: copied where kept, else compressed on
    /// their own threads.
    fn flush(&mut self) -> Result<(), RepoError> {
        let pending = std::mem::take(&mut self.pending);
        let kept = self.kept;
        let made: Vec<std::io::Result<Compressed>> = std::thread::scope(|scope| {
            let handles: Vec<_> = pending
                .iter()
                .map(|p| scope.spawn(move || compress_piece(p, kept)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("compressing does not panic"))
                .collect()
        });
        for (plain, c) in pending.iter().zip(made) {
            let c = c.map_err(FileError::at(&self.xz_path))?;
            let c = if c.xz.is_empty() {
                self.copy_kept(plain, c)
                    .map_err(FileError::at(&self.xz_path))?
            } else {
                c
            };
            self.write(plain, c)?;
        }
        Ok(())
    }

    /// A kept piece's forms, read from the kept files; compressed anew
    /// where they cannot be read.
    fn copy_kept(&mut self, plain: &[u8], c: Compressed) -> std::io::Result<Compressed> {
        let piece = &self.kept.by_sha256[&c.sha256];
        let [xz_at, xz_len, unpadded] = piece.record.xz;
        let [gz_at, gz_len] = piece.record.gz;
        let xz = read_at(&mut self.open, &piece.xz_file, xz_at, xz_len);
        let gz = read_at(&mut self.open, &piece.gz_file, gz_at, gz_len);
        let (Some(xz), Some(gz)) = (xz, gz) else {
            return compress_piece(plain, &KeptPieces::default());
        };
        let mut copied = Compressed {
            xz,
            xz_unpadded: unpadded,
            gz,
            ..c
        };
        // The bytes compressed for this piece, or none of them: a damaged
        // kept file or record is compressed anew.
        let digests = forms_digests(&copied);
        if piece.record.forms_sha256.as_ref() != Some(&digests) {
            return compress_piece(plain, &KeptPieces::default());
        }
        copied.forms_sha256 = Some(digests);
        self.reused += 1;
        Ok(copied)
    }

    fn write(&mut self, plain: &[u8], c: Compressed) -> Result<(), RepoError> {
        self.xz
            .block(&c.xz, c.xz_unpadded, c.size)
            .map_err(FileError::at(&self.xz_path))?;
        self.gz
            .segment(&c.gz)
            .map_err(FileError::at(&self.gz_path))?;
        self.crc.update(plain);
        self.size += c.size;
        self.records.push(PieceRecord {
            sha256: c.sha256,
            size: c.size,
            xz: [self.xz_at, c.xz.len() as u64, c.xz_unpadded],
            gz: [self.gz_at, c.gz.len() as u64],
            forms_sha256: c.forms_sha256,
        });
        self.xz_at += c.xz.len() as u64;
        self.gz_at += c.gz.len() as u64;
        Ok(())
    }

    /// The last piece, both forms' ends, and their digests.
    pub fn finish(mut self) -> Result<Forms, RepoError> {
        if !self.piece.is_empty() {
            let piece = std::mem::take(&mut self.piece);
            self.pending.push(piece);
        }
        self.flush()?;
        let FormsWriter {
            xz,
            xz_path,
            gz,
            gz_path,
            crc,
            size,
            records,
            reused,
            ..
        } = self;
        let done = |w: HashingWriter<BufWriter<File>>, path: &Path| {
            let (mut buffered, digests) = w.finish();
            buffered.flush().map_err(FileError::at(path))?;
            Ok::<_, RepoError>(digests)
        };
        let xz = done(xz.finish().map_err(FileError::at(&xz_path))?, &xz_path)?;
        let gz = done(
            gz.finish(crc.finalize(), size)
                .map_err(FileError::at(&gz_path))?,
            &gz_path,
        )?;
        Ok(Forms {
            xz,
            gz,
            pieces: records,
            reused,
        })
    }
}

/// A piece's digest and, unless `kept` has it (forms left empty for the
/// caller to copy), both its forms.
fn compress_piece(plain: &[u8], kept: &KeptPieces) -> std::io::Result<Compressed> {
    let sha256 = crate::digest::sha256_hex(plain);
    let size = plain.len() as u64;
    if kept.by_sha256.get(&sha256).is_some_and(|k| {
        k.record.size == size && plausible(&k.record) && k.record.forms_sha256.is_some()
    }) {
        return Ok(Compressed {
            sha256,
            size,
            xz: Vec::new(),
            xz_unpadded: 0,
            gz: Vec::new(),
            forms_sha256: None,
        });
    }
    let (xz, xz_unpadded) = blocks::xz_block(plain)?;
    let gz = blocks::deflate_segment(plain)?;
    let mut c = Compressed {
        sha256,
        size,
        xz,
        xz_unpadded,
        gz,
        forms_sha256: None,
    };
    c.forms_sha256 = Some(forms_digests(&c));
    Ok(c)
}

/// A record whose lengths a piece's forms can have (a damaged map is
/// compressed anew, not read at any length).
fn plausible(r: &PieceRecord) -> bool {
    let bound = 2 * r.size + 4096;
    r.xz[1] > 0 && r.xz[1] <= bound && r.xz[2] <= r.xz[1] && r.gz[1] > 0 && r.gz[1] <= bound
}

fn read_at(
    open: &mut HashMap<Arc<Path>, File>,
    path: &Arc<Path>,
    at: u64,
    len: u64,
) -> Option<Vec<u8>> {
    if !open.contains_key(path) {
        open.insert(path.clone(), crate::input::open_regular(path).ok()?);
    }
    let mut buf = vec![0; len as usize];
    open[path].read_exact_at(&mut buf, at).ok()?;
    Some(buf)
}

/// Whether both forms decompress to bytes of SHA256 `plain_sha256`.
#[cfg(test)]
fn decompress_to(xz: &Path, gz: &Path, plain_sha256: &str) -> bool {
    use std::io::Read;
    let sha = |path: &Path, xz: bool| -> Option<String> {
        let file = std::io::BufReader::new(crate::input::open_regular(path).ok()?);
        let reader: Box<dyn Read> = if xz {
            Box::new(liblzma::read::XzDecoder::new(file))
        } else {
            Box::new(flate2::read::GzDecoder::new(file))
        };
        crate::digest::digest_with(reader, Hasher::new(DigestSet::SHA256))
            .ok()
            .map(|d| d.sha256)
    };
    std::thread::scope(|scope| {
        let x = scope.spawn(|| sha(xz, true));
        let g = sha(gz, false);
        let x = x.join().expect("decompressing does not panic");
        x.as_deref() == Some(plain_sha256) && g.as_deref() == Some(plain_sha256)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Synthetic stanzas, as the repository writes them.
    fn stanzas(skip: Option<usize>) -> Vec<String> {
        (0..3000)
            .filter(|i| Some(*i) != skip)
            .map(|i| {
                format!(
                    "Package: bench-pkg{i:05}\nVersion: 1.{i}-1\nArchitecture: amd64\nFilename: pool/main/b/bench-pkg{i:05}/bench-pkg{i:05}_1.{i}-1_amd64.deb\nSize: {}\nSHA256: {:064x}\nDescription: synthetic package {i}\n",
                    1000 + i,
                    i * 7919
                )
            })
            .collect()
    }

    /// Writes `stanzas` as an index into `dir` (plain, .xz, .gz), copying
    /// pieces from `kept`.
    fn write(dir: &Path, stanzas: &[String], kept: &KeptPieces) -> (Forms, Vec<u8>, Vec<u8>) {
        let (plain, xz, gz) = (
            dir.join("Packages"),
            dir.join("Packages.xz"),
            dir.join("Packages.gz"),
        );
        let mut text = Vec::new();
        let mut w = FormsWriter::create(&xz, &gz, kept).unwrap();
        for (i, s) in stanzas.iter().enumerate() {
            let separator: &[u8] = if i == 0 { b"" } else { b"\n" };
            text.extend_from_slice(separator);
            text.extend_from_slice(s.as_bytes());
            w.stanza(separator, s.as_bytes()).unwrap();
        }
        std::fs::write(&plain, &text).unwrap();
        let forms = w.finish().unwrap();
        assert!(decompress_to(&xz, &gz, &crate::digest::sha256_hex(&text)));
        (
            forms,
            std::fs::read(&xz).unwrap(),
            std::fs::read(&gz).unwrap(),
        )
    }

    fn kept_from(dir: &Path, forms: &Forms) -> KeptPieces {
        let map = PieceMap {
            forms: crate::deb::INDEX_FORMS.into(),
            xz_sha256: forms.xz.sha256.clone(),
            gz_sha256: forms.gz.sha256.clone(),
            pieces: forms.pieces.clone(),
        };
        let mut kept = KeptPieces::default();
        kept.add(map, &dir.join("Packages.xz"), &dir.join("Packages.gz"));
        kept
    }

    #[test]
    fn one_stanza_gone_compresses_one_piece_and_makes_the_same_bytes() {
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let (first, _, _) = write(dirs[0].path(), &stanzas(None), &KeptPieces::default());
        let n = first.pieces.len();
        assert!(n >= 6, "{n} pieces");
        assert!(first.pieces.iter().all(|p| p.size as usize <= PIECE_MAX));
        assert_eq!(first.reused, 0);
        // One stanza gone: every other piece is copied; the bytes are those
        // of a build with nothing to copy.
        let kept = kept_from(dirs[0].path(), &first);
        let (second, xz, gz) = write(dirs[1].path(), &stanzas(Some(1500)), &kept);
        assert!(second.reused >= n - 2, "{} of {n} copied", second.reused);
        let (fresh, fresh_xz, fresh_gz) =
            write(dirs[2].path(), &stanzas(Some(1500)), &KeptPieces::default());
        assert_eq!((fresh.reused, &fresh_xz, &fresh_gz), (0, &xz, &gz));
        assert_eq!(second.pieces, fresh.pieces);
    }

    /// The pieces [`Cuts`] makes of `stanzas`, each as its stanzas' keys.
    fn pieces_of(stanzas: &[(usize, String)]) -> Vec<Vec<usize>> {
        let (mut cuts, mut pieces) = (Cuts::default(), Vec::new());
        let (mut piece, mut bytes) = (Vec::new(), 0);
        for (i, (key, stanza)) in stanzas.iter().enumerate() {
            let len = stanza.len() + usize::from(i > 0);
            let (before, after) = cuts.at(bytes, len, stanza.as_bytes());
            if before {
                pieces.push(std::mem::take(&mut piece));
                bytes = 0;
            }
            piece.push(*key);
            bytes += len;
            if after {
                pieces.push(std::mem::take(&mut piece));
                bytes = 0;
            }
        }
        pieces.extend((!piece.is_empty()).then_some(piece));
        pieces
    }

    #[test]
    fn any_one_stanza_gone_changes_one_piece_or_two() {
        // Stanzas of many lengths, as a real index has (descriptions of a
        // line to a few paragraphs), each gone in turn.
        let all: Vec<(usize, String)> = stanzas(None)
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                (
                    i,
                    s + &" more of the long description.\n".repeat(i * 7919 % 13),
                )
            })
            .collect();
        let before: HashSet<Vec<usize>> = pieces_of(&all).into_iter().collect();
        assert!(before.len() >= 20, "{} pieces", before.len());
        let mut changed = [0; 3];
        for gone in 0..all.len() {
            let mut less = all.clone();
            less.remove(gone);
            let after = pieces_of(&less);
            let new = after.iter().filter(|p| !before.contains(*p)).count();
            assert!(
                (1..=2).contains(&new),
                "stanza {gone} gone: {new} pieces new"
            );
            changed[new] += 1;
        }
        // Two only where the stanza gone decided an end.
        assert!(changed[2] * 10 < all.len(), "{changed:?}");
    }

    /// Damages the kept forms in `dir` (written as `first`) as `damage`
    /// says, then writes the same stanzas from them: they must come out as
    /// the bytes of forms with nothing to copy. Returns how many pieces
    /// there are and how many were copied.
    fn written_over_damage(
        damage: impl FnOnce(&Path, &mut Forms),
        strip_digests: bool,
    ) -> (usize, usize) {
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let (mut first, _, _) = write(dirs[0].path(), &stanzas(None), &KeptPieces::default());
        if strip_digests {
            first.pieces.iter_mut().for_each(|p| p.forms_sha256 = None);
        }
        damage(dirs[0].path(), &mut first);
        let kept = kept_from(dirs[0].path(), &first);
        let (forms, xz, gz) = write(dirs[1].path(), &stanzas(None), &kept);
        let (fresh, fresh_xz, fresh_gz) =
            write(dirs[2].path(), &stanzas(None), &KeptPieces::default());
        assert_eq!((&xz, &gz), (&fresh_xz, &fresh_gz));
        assert_eq!(forms.pieces, fresh.pieces);
        (fresh.pieces.len(), forms.reused)
    }

    /// Flips a byte in the middle of piece 2's xz block.
    fn flip_xz_byte(dir: &Path, first: &mut Forms) {
        let path = dir.join("Packages.xz");
        let mut xz = std::fs::read(&path).unwrap();
        let [at, len, _] = first.pieces[2].xz;
        xz[(at + len / 2) as usize] ^= 0x55;
        std::fs::write(path, &xz).unwrap();
    }

    #[test]
    fn a_kept_piece_that_is_not_what_its_record_says_is_compressed_anew() {
        // Other bytes in a block (its own check no longer holds).
        let (n, reused) = written_over_damage(flip_xz_byte, false);
        assert_eq!(reused, n - 1);
        // A record pointing at another piece's forms (a damaged map).
        let (n, reused) = written_over_damage(
            |_, first| {
                let (xz, gz) = (first.pieces[3].xz, first.pieces[3].gz);
                (first.pieces[2].xz, first.pieces[2].gz) = (xz, gz);
            },
            false,
        );
        assert_eq!(reused, n - 1);
        // Two records' pieces swapped, each naming the other's forms.
        let (n, reused) = written_over_damage(
            |_, first| {
                let (a, b) = (first.pieces[2].clone(), first.pieces[3].clone());
                (first.pieces[2].sha256, first.pieces[2].size) = (b.sha256, b.size);
                (first.pieces[3].sha256, first.pieces[3].size) = (a.sha256, a.size);
            },
            false,
        );
        assert_eq!(reused, n - 2);
        // A block's unpadded size off by one (the stream's index repeats it).
        let (n, reused) = written_over_damage(|_, first| first.pieces[2].xz[2] -= 1, false);
        assert_eq!(reused, n - 1);
        // A deflate segment with other bytes.
        let (n, reused) = written_over_damage(
            |dir, first| {
                let path = dir.join("Packages.gz");
                let mut gz = std::fs::read(&path).unwrap();
                let [at, len] = first.pieces[4].gz;
                gz[(at + len / 2) as usize] ^= 0x55;
                std::fs::write(path, &gz).unwrap();
            },
            false,
        );
        assert_eq!(reused, n - 1);
    }

    #[test]
    fn kept_pieces_of_a_map_without_digests_are_compressed_anew() {
        // An older debforge's map: nothing copied, the same bytes made.
        let (_, reused) = written_over_damage(|_, _| {}, true);
        assert_eq!(reused, 0);
    }
}
