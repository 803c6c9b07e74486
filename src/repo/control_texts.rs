//! EFFECT: the packages' control paragraphs a build holds between reading
//! each file and preparing it, by the SHA256 of the file: the texts in an
//! unlinked temporary file, memory only for where each one is.
//!
//! A build of thousands of packages reads each control once (resolving a
//! file seen for the first time, or from the records' `controls`) and
//! takes it once (preparing). Held in memory, the texts were the second
//! largest thing a cold build held at its peak (about 450 bytes a package:
//! 9 MB at 20,000 packages); here each costs an index entry of 48 bytes.
//! The store is a cache like the records around it: a text that cannot be
//! written or read back is simply not there, and the caller reads the
//! control from the package file again.

use std::path::PathBuf;

use super::sorted_table::{Keyed, SortedTable};
use crate::files::{SpillFile, WrittenSpan};

/// A SHA256, as bytes: held by the thousand (hex strings were four
/// allocations' worth more per package).
pub(super) type Sha256 = [u8; 32];

/// A text found: read already (it was still buffered), or where it is in
/// the spill's file. Reading it there needs no hold on the store: the
/// fetching and preparing threads each read thousands of texts, and one
/// `pread` at a time under the records' lock kept them waiting on it.
pub(super) enum Found {
    Read(String),
    Written(WrittenSpan),
}

impl Found {
    /// The text (`None` where it cannot be read back: a cache's miss).
    pub(super) fn read(self) -> Option<String> {
        match self {
            Found::Read(text) => Some(text),
            Found::Written(span) => String::from_utf8(span.read().ok()?).ok(),
        }
    }
}

/// Where one text is in the spill, beside its key: 40 bytes in a sorted
/// table (a hash table's entry was 48, and it had 1.6 times as many: 1.6 MB
/// at 20,000 packages, held at resolving's peak; this is 0.8 MB).
#[derive(Clone, Copy)]
struct TextAt {
    key: Sha256,
    /// The offset (the low `AT_BITS`: a terabyte) and the length (the
    /// rest: 16 MiB, far above a control paragraph; a longer one is not
    /// kept); `TAKEN` once removed (a removal from the middle of a sorted
    /// table would move the rest).
    at_len: u64,
}

const AT_BITS: u32 = 40;
const TAKEN: u64 = u64::MAX;

impl TextAt {
    fn new(key: Sha256, at: u64, len: usize) -> Option<TextAt> {
        let len = u64::try_from(len).ok()?;
        let at_len = (len << AT_BITS) | at;
        (at >> AT_BITS == 0 && len >> (64 - AT_BITS) == 0 && at_len != TAKEN)
            .then_some(TextAt { key, at_len })
    }

    /// Its offset and length, `None` once taken.
    fn span(self) -> Option<(u64, usize)> {
        let at = self.at_len & ((1 << AT_BITS) - 1);
        let len = (self.at_len >> AT_BITS) as usize;
        (self.at_len != TAKEN).then_some((at, len))
    }
}

impl Keyed for TextAt {
    type Key = Sha256;
    fn key(&self) -> Sha256 {
        self.key
    }

    fn compare(a: &Sha256, b: &Sha256) -> std::cmp::Ordering {
        super::sorted_table::sha256_order(a, b)
    }
}

/// The texts, by key; see the module's comment.
#[derive(Default)]
pub(super) struct ControlTexts {
    /// Where the temporary file is made (`None`: the system's temporary
    /// directory).
    dir: Option<PathBuf>,
    spill: Option<SpillFile>,
    /// Each text's offset and length in the spill.
    index: SortedTable<TextAt>,
    /// How many of them are not taken.
    live: usize,
}

impl ControlTexts {
    /// An empty store whose file, once needed, is made in `dir`.
    pub(super) fn in_dir(dir: Option<PathBuf>) -> ControlTexts {
        ControlTexts {
            dir,
            ..ControlTexts::default()
        }
    }

    /// The index copied into the calling thread's memory (see
    /// `Records::kept`); the spill's file moves, its buffer written out
    /// and made again here.
    pub(super) fn kept(mut self) -> ControlTexts {
        self.flush();
        ControlTexts {
            index: self.index.clone(),
            ..self
        }
    }

    pub(super) fn len(&self) -> usize {
        self.live
    }

    pub(super) fn reserve(&mut self, n: usize) {
        self.index.reserve(n);
    }

    /// Keeps `text` under `key` (replacing any text before it). Not kept
    /// where the file cannot be made or written, or the text is too long.
    pub(super) fn insert(&mut self, key: Sha256, text: &str) {
        self.remove_span(&key);
        let Some(spill) = self.spill() else { return };
        let at = match spill.append(text.as_bytes()) {
            Ok(at) => at,
            Err(_) => return self.lose_all(),
        };
        if let Some(item) = TextAt::new(key, at, text.len()) {
            self.index.insert(item);
            self.live += 1;
        }
    }

    /// The text kept under `key`.
    pub(super) fn get(&self, key: &Sha256) -> Option<String> {
        self.find(key)?.read()
    }

    /// The text kept under `key`, no longer kept (the tests' view of
    /// `take`).
    #[cfg(test)]
    pub(super) fn remove(&mut self, key: &Sha256) -> Option<String> {
        self.take(key)?.read()
    }

    /// The text kept under `key`, to be read where the store is no longer
    /// held (threads share it behind a lock: see [`Found`]).
    pub(super) fn find(&self, key: &Sha256) -> Option<Found> {
        let (at, len) = self.index.get(*key)?.span()?;
        self.found(at, len)
    }

    /// [`ControlTexts::find`], no longer kept.
    pub(super) fn take(&mut self, key: &Sha256) -> Option<Found> {
        let (at, len) = self.remove_span(key)?;
        let found = self.found(at, len);
        // The last one taken (a build takes each once): the table goes now,
        // not when the build forgets the store (memory: sized for every
        // package, held at preparing's peak).
        if self.live == 0 {
            self.lose_all();
        }
        found
    }

    fn found(&self, at: u64, len: usize) -> Option<Found> {
        let spill = self.spill.as_ref()?;
        Some(match spill.written_span(at, len) {
            Some(span) => Found::Written(span),
            None => Found::Read(self.read(at, len)?),
        })
    }

    /// Marks the text under `key` taken, and says where it was.
    fn remove_span(&mut self, key: &Sha256) -> Option<(u64, usize)> {
        let item = self.index.get_mut(*key)?;
        let span = item.span()?;
        item.at_len = TAKEN;
        self.live -= 1;
        Some(span)
    }

    /// Every key kept, in order (the same texts make the same file).
    pub(super) fn keys_sorted(&self) -> impl Iterator<Item = Sha256> {
        self.index
            .iter_sorted()
            .filter(|t| t.span().is_some())
            .map(|t| t.key)
    }

    fn spill(&mut self) -> Option<&mut SpillFile> {
        if self.spill.is_none() {
            // Beside the records, else in the system's temporary directory.
            self.spill = Some(SpillFile::new(self.dir.as_deref()).ok()?);
        }
        self.spill.as_mut()
    }

    /// The pending bytes to the file (their buffer let go).
    fn flush(&mut self) {
        if self.spill.as_mut().is_some_and(|s| s.flush().is_err()) {
            self.lose_all();
        }
    }

    /// On a failure every text is lost (a cache: the callers read the
    /// controls again); once every one is taken, the table and the file go.
    fn lose_all(&mut self) {
        self.spill = None;
        self.index = SortedTable::default();
        self.live = 0;
    }

    fn read(&self, at: u64, len: usize) -> Option<String> {
        let mut buf = vec![0; len];
        self.spill.as_ref()?.read_exact_at(&mut buf, at).ok()?;
        String::from_utf8(buf).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u16) -> Sha256 {
        let mut k = [0; 32];
        k[..2].copy_from_slice(&n.to_be_bytes());
        k
    }

    /// Texts come back as they were put, whether still buffered, written,
    /// or across the buffer's end; a replaced text gives the new one, a
    /// removed one nothing; the keys come sorted.
    #[test]
    fn texts_come_back_from_the_buffer_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = ControlTexts::in_dir(Some(dir.path().to_path_buf()));
        assert_eq!(t.get(&key(0)), None);
        let text = |n: u16| {
            format!(
                "Package: p{n}\nDescription: {}\n",
                "x".repeat(n as usize % 700)
            )
        };
        // Enough to flush the buffer several times.
        for n in (0..600).rev() {
            t.insert(key(n), &text(n));
        }
        assert_eq!(t.len(), 600);
        assert!(
            t.spill.as_ref().unwrap().len() > 2 * crate::files::SPILL_BUFFERED as u64,
            "the buffer was written out"
        );
        for n in [0, 1, 299, 598, 599] {
            assert_eq!(t.get(&key(n)).as_deref(), Some(text(n).as_str()));
        }
        t.insert(key(7), "Package: seven\n");
        assert_eq!(t.get(&key(7)).as_deref(), Some("Package: seven\n"));
        assert_eq!(t.remove(&key(8)).as_deref(), Some(text(8).as_str()));
        assert_eq!(t.remove(&key(8)), None);
        assert_eq!(t.get(&key(8)), None);
        let keys: Vec<_> = t.keys_sorted().collect();
        assert_eq!(keys.len(), 599);
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        // The file is unlinked: nothing is left in the directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // Each taken once: every text comes back, and with the last one the
        // table and the file go.
        for k in keys {
            assert!(t.remove(&k).is_some());
            assert_eq!(t.spill.is_some(), t.len() > 0);
        }
        assert_eq!(t.index.len(), 0);
        // A text too long for the index is not kept; nor one under a key
        // taken before, until it is put again.
        t.insert(key(1), &"x".repeat(1 << (64 - AT_BITS)));
        assert_eq!((t.get(&key(1)), t.len()), (None, 0));
        t.insert(key(1), "Package: one\n");
        assert_eq!(t.get(&key(1)).as_deref(), Some("Package: one\n"));
    }
}
