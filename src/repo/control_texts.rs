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

use std::collections::HashMap;
use std::path::PathBuf;

use crate::files::SpillFile;

/// A SHA256, as bytes: held by the thousand (hex strings were four
/// allocations' worth more per package).
pub(super) type Sha256 = [u8; 32];

/// The texts, by key; see the module's comment.
#[derive(Default)]
pub(super) struct ControlTexts {
    /// Where the temporary file is made (`None`: the system's temporary
    /// directory).
    dir: Option<PathBuf>,
    spill: Option<SpillFile>,
    /// Each text's offset and length in the spill.
    index: HashMap<Sha256, (u64, u32)>,
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
        self.index.len()
    }

    pub(super) fn reserve(&mut self, n: usize) {
        self.index.reserve(n);
    }

    /// Keeps `text` under `key` (replacing any text before it). Not kept
    /// where the file cannot be made or written.
    pub(super) fn insert(&mut self, key: Sha256, text: &str) {
        let Ok(len) = u32::try_from(text.len()) else {
            return;
        };
        let Some(spill) = self.spill() else { return };
        match spill.append(text.as_bytes()) {
            Ok(at) => _ = self.index.insert(key, (at, len)),
            Err(_) => self.lose_all(),
        }
    }

    /// The text kept under `key`.
    pub(super) fn get(&self, key: &Sha256) -> Option<String> {
        let (at, len) = *self.index.get(key)?;
        self.read(at, len)
    }

    /// The text kept under `key`, no longer kept.
    pub(super) fn remove(&mut self, key: &Sha256) -> Option<String> {
        let (at, len) = self.index.remove(key)?;
        let text = self.read(at, len);
        // The last one taken (a build takes each once): the table goes now,
        // not when the build forgets the store (memory: sized for every
        // package, 1.6 MB at 20,000, held at preparing's peak).
        if self.index.is_empty() {
            self.index = HashMap::new();
            self.spill = None;
        }
        text
    }

    /// Every key, sorted (the same texts make the same file).
    pub(super) fn keys_sorted(&self) -> Vec<Sha256> {
        let mut keys: Vec<Sha256> = self.index.keys().copied().collect();
        keys.sort_unstable();
        keys
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
    /// controls again).
    fn lose_all(&mut self) {
        self.spill = None;
        self.index.clear();
    }

    fn read(&self, at: u64, len: u32) -> Option<String> {
        let mut buf = vec![0; len as usize];
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
        let keys = t.keys_sorted();
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
        assert_eq!(t.index.capacity(), 0);
    }
}
