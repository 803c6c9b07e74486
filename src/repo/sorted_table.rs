//! A table of small fixed-size items by key, held to the end of a build:
//! the records' digests and checked files ([`super::pool`]).
//!
//! Sorted in one vector, with the items added since the last merge in a
//! small hash table. A hash table of every item costs about twice the items
//! themselves: its buckets are a power of two (20,000 records took 32,768,
//! each with the key beside the item), and they grow by doubling. The
//! records' table of a 20,000-package build was 3.96 MB; sorted, it is 1.9.

use std::collections::HashMap;
use std::hash::Hash;

/// An item that carries its own key.
pub(super) trait Keyed: Copy {
    type Key: Ord + Hash + Copy;
    fn key(&self) -> Self::Key;

    /// The keys' order (`Ord`'s), as a lookup compares them: a type may
    /// say it faster.
    fn compare(a: &Self::Key, b: &Self::Key) -> std::cmp::Ordering {
        a.cmp(b)
    }
}

/// Two SHA256 sums in byte order, by their first eight bytes where those
/// differ (nearly always): `Ord` of a byte array calls `memcmp` for each
/// of a lookup's dozen or more steps, and the lookups of every package's
/// records and control were 4% of a one-recipe-gone build's time.
pub(super) fn sha256_order(a: &[u8; 32], b: &[u8; 32]) -> std::cmp::Ordering {
    let head = |k: &[u8; 32]| u64::from_be_bytes([k[0], k[1], k[2], k[3], k[4], k[5], k[6], k[7]]);
    head(a).cmp(&head(b)).then_with(|| a.cmp(b))
}

/// Items unique by key.
#[derive(Clone)]
pub(super) struct SortedTable<T: Keyed> {
    sorted: Vec<T>,
    recent: HashMap<T::Key, T>,
}

impl<T: Keyed> Default for SortedTable<T> {
    fn default() -> Self {
        SortedTable {
            sorted: Vec::new(),
            recent: HashMap::new(),
        }
    }
}

/// The recent items are merged into the sorted ones once they are this
/// many, or a sixteenth of the sorted ones (each merge moves them all).
const MERGE_AT: usize = 1024;

impl<T: Keyed> SortedTable<T> {
    /// The table of `items`; of two with one key, the last is kept.
    pub fn of(mut items: Vec<T>) -> Self {
        // Stable: of equal keys, the last stays last, and is kept.
        items.sort_by_key(T::key);
        items.dedup_by(|later, kept| {
            let same = later.key() == kept.key();
            if same {
                *kept = *later;
            }
            same
        });
        items.shrink_to_fit();
        SortedTable {
            sorted: items,
            recent: HashMap::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.sorted.len() + self.recent.len()
    }

    /// Room for `n` items in all, in one allocation (the table is held to
    /// the end of the build: not grown by doubling).
    pub fn reserve(&mut self, n: usize) {
        self.sorted.reserve_exact(n.saturating_sub(self.len()));
    }

    /// Where `key` is among the sorted items.
    fn find(&self, key: &T::Key) -> Result<usize, usize> {
        self.sorted.binary_search_by(|t| T::compare(&t.key(), key))
    }

    pub fn get(&self, key: T::Key) -> Option<&T> {
        match self.find(&key) {
            Ok(i) => Some(&self.sorted[i]),
            Err(_) => self.recent.get(&key),
        }
    }

    pub fn get_mut(&mut self, key: T::Key) -> Option<&mut T> {
        match self.find(&key) {
            Ok(i) => Some(&mut self.sorted[i]),
            Err(_) => self.recent.get_mut(&key),
        }
    }

    pub fn contains(&self, key: T::Key) -> bool {
        self.find(&key).is_ok() || self.recent.contains_key(&key)
    }

    /// Adds `item`, or replaces the one with its key.
    pub fn insert(&mut self, item: T) {
        if let Some(old) = self.get_mut(item.key()) {
            *old = item;
            return;
        }
        self.recent.insert(item.key(), item);
        if self.recent.len() >= MERGE_AT.max(self.sorted.len() / 16) {
            self.merge();
        }
    }

    /// The recent items into the sorted ones: sorted on their own, then
    /// merged from the back into the room behind the sorted ones (no copy
    /// of the whole table is made).
    fn merge(&mut self) {
        let mut tail: Vec<T> = self.recent.drain().map(|(_, t)| t).collect();
        tail.sort_unstable_by_key(T::key);
        let old = self.sorted.len();
        self.sorted.extend_from_slice(&tail);
        let (mut i, mut j) = (old, tail.len());
        for k in (0..self.sorted.len()).rev() {
            if j == 0 {
                break;
            }
            if i > 0 && self.sorted[i - 1].key() > tail[j - 1].key() {
                self.sorted[k] = self.sorted[i - 1];
                i -= 1;
            } else {
                self.sorted[k] = tail[j - 1];
                j -= 1;
            }
        }
    }

    /// Every item, in no order (the tests' view beside `iter_sorted`).
    #[cfg(test)]
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.sorted.iter().chain(self.recent.values())
    }

    /// Every item, by key: the sorted ones merged with the recent ones
    /// (sorted on their own, at most a sixteenth of the table, or
    /// `MERGE_AT`), with no copy of the whole table.
    pub fn iter_sorted(&self) -> impl Iterator<Item = &T> {
        let mut tail: Vec<&T> = self.recent.values().collect();
        tail.sort_unstable_by_key(|t| t.key());
        let mut sorted = self.sorted.iter().peekable();
        let mut tail = tail.into_iter().peekable();
        std::iter::from_fn(move || match (sorted.peek(), tail.peek()) {
            (Some(a), Some(b)) if b.key() < a.key() => tail.next(),
            (Some(_), _) => sorted.next(),
            (None, _) => tail.next(),
        })
    }
}

/// Its items as a sequence, by key: the same bytes as a sorted list of
/// them, without one made (a build's records are thousands).
impl<T: Keyed + serde::Serialize> serde::Serialize for SortedTable<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.len()))?;
        for item in self.iter_sorted() {
            seq.serialize_element(item)?;
        }
        seq.end()
    }
}

#[cfg(test)]
mod tests {
    use super::{Keyed, MERGE_AT, SortedTable};

    #[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
    struct Item(u32, u32);

    impl Keyed for Item {
        type Key = u32;
        fn key(&self) -> u32 {
            self.0
        }
    }

    #[test]
    fn sha256_order_is_byte_order() {
        // Keys that differ in each byte, some alike in their first eight.
        let mut keys: Vec<[u8; 32]> = Vec::new();
        for at in [0, 3, 7, 8, 20, 31] {
            for v in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut k = [0x55; 32];
                k[at] = v;
                keys.push(k);
            }
        }
        for a in &keys {
            for b in &keys {
                assert_eq!(super::sha256_order(a, b), a.cmp(b), "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn items_are_found_replaced_and_listed_by_key_across_merges() {
        let mut t = SortedTable::of(vec![Item(5, 1), Item(1, 1), Item(5, 2)]);
        assert_eq!(t.len(), 2);
        assert_eq!(
            t.get_mut(5).copied(),
            Some(Item(5, 2)),
            "the last of one key"
        );
        // Keys spread across the sorted ones, over several merges, each
        // added twice (the second replaces the first).
        let n = 3 * MERGE_AT as u32 + 7;
        // Even, from 10: none is 1 or 5.
        let key = |i: u32| 10 + 2 * ((i * 7919) % (4 * n));
        for round in 0..2 {
            for i in 0..n {
                t.insert(Item(key(i), round));
            }
        }
        t.insert(Item(1, 9));
        assert_eq!(t.len(), n as usize + 2);
        for i in 0..n {
            assert_eq!(t.get_mut(key(i)).copied(), Some(Item(key(i), 1)));
        }
        assert!(t.contains(1) && t.contains(5) && !t.contains(0));
        let mut keys: Vec<u32> = t.iter().map(|i| i.0).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), t.len(), "each once");
        assert!(t.sorted.is_sorted_by_key(|i| i.0));
        assert_eq!(t.get_mut(1).copied(), Some(Item(1, 9)));
        assert_eq!(t.get(key(3)).copied(), Some(Item(key(3), 1)));
        assert_eq!(t.get(0), None);
        // By key, with recent items (not yet merged) among the sorted ones.
        assert!(!t.recent.is_empty());
        let by_key: Vec<u32> = t.iter_sorted().map(|i| i.0).collect();
        assert_eq!(by_key, keys);
        // Written as the sorted list of its items would be.
        let mut list: Vec<Item> = t.iter().copied().collect();
        list.sort_unstable_by_key(|i| i.0);
        assert_eq!(
            postcard::to_allocvec(&t).unwrap(),
            postcard::to_allocvec(&list).unwrap()
        );
    }
}
