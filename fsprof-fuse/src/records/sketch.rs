//! The space-saving sketch (Metwally, Agrawal and El Abbadi, 2005): the heaviest keys of a
//! stream of weighted keys in `n` counters. A key already counted adds to its counter; a new
//! one takes the smallest counter over and starts from its value, which it remembers as its
//! possible overcount (`error`). Every key whose true weight exceeds the smallest counter is
//! held, each counter is at most `error` above its key's true weight, and `value - error` is a
//! weight the key certainly has. Memory is `n` entries whatever the number of keys; adding a
//! key already held is a hash lookup, a new one a scan of the `n` counters.

use std::collections::HashMap;

/// One counted key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    pub key: u64,
    /// Weight counted (at most `error` above the truth).
    pub value: u64,
    /// Possible overcount.
    pub error: u64,
}

impl Entry {
    /// The weight the key certainly has.
    pub fn sure(&self) -> u64 {
        self.value - self.error
    }
}

/// A sketch of at most `n` entries (see the module documentation).
#[derive(Debug)]
pub(crate) struct Sketch {
    n: usize,
    entries: Vec<Entry>,
    index: HashMap<u64, usize>,
}

impl Sketch {
    /// An empty sketch of `n` (at least 1) counters.
    pub fn new(n: usize) -> Sketch {
        Sketch {
            n: n.max(1),
            entries: Vec::new(),
            index: HashMap::new(),
        }
    }

    /// Adds `w` to `key`'s weight; returns its entry as it is now.
    pub fn add(&mut self, key: u64, w: u64) -> Entry {
        if let Some(&i) = self.index.get(&key) {
            let e = &mut self.entries[i];
            e.value = e.value.saturating_add(w);
            return *e;
        }
        if self.entries.len() < self.n {
            self.index.insert(key, self.entries.len());
            let e = Entry {
                key,
                value: w,
                error: 0,
            };
            self.entries.push(e);
            return e;
        }
        let (i, min) = self
            .entries
            .iter()
            .enumerate()
            .min_by_key(|(_, e)| e.value)
            .map(|(i, e)| (i, *e))
            .expect("n >= 1");
        self.index.remove(&min.key);
        self.index.insert(key, i);
        let e = Entry {
            key,
            value: min.value.saturating_add(w),
            error: min.value,
        };
        self.entries[i] = e;
        e
    }

    /// Whether `key` has a counter.
    pub fn contains(&self, key: u64) -> bool {
        self.index.contains_key(&key)
    }

    /// Takes `key` out (its weight is counted elsewhere from now on).
    pub fn remove(&mut self, key: u64) -> Option<Entry> {
        let i = self.index.remove(&key)?;
        let e = self.entries.swap_remove(i);
        if let Some(moved) = self.entries.get(i) {
            self.index.insert(moved.key, i);
        }
        Some(e)
    }

    /// The entries, heaviest first (ties by key).
    pub fn ranked(&self) -> Vec<Entry> {
        let mut v = self.entries.clone();
        v.sort_by(|a, b| b.value.cmp(&a.value).then(a.key.cmp(&b.key)));
        v
    }

    /// Forgets every key.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.index.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heavy_key_is_held_exactly_among_a_stream_of_one_offs() {
        let mut s = Sketch::new(3);
        for i in 0..1000u64 {
            s.add(10, 100);
            s.add(1000 + i, 1);
        }
        let r = s.ranked();
        assert_eq!(r.len(), 3);
        assert_eq!(
            r[0],
            Entry {
                key: 10,
                value: 100_000,
                error: 0
            }
        );
        // The one-offs' counters overcount by at most the smallest counter.
        assert!(r[1..].iter().all(|e| e.sure() <= 1));
    }

    #[test]
    fn a_removed_key_leaves_the_others_found() {
        let mut s = Sketch::new(4);
        for k in 1..=4 {
            s.add(k, k * 10);
        }
        assert_eq!(s.remove(2).map(|e| e.value), Some(20));
        assert_eq!(s.remove(2), None);
        // Key 4 moved into the hole: still found, and adds to its own counter.
        assert_eq!(s.add(4, 1).value, 41);
        assert_eq!(
            s.add(5, 5),
            Entry {
                key: 5,
                value: 5,
                error: 0
            }
        );
        assert_eq!(s.ranked().len(), 4);
        s.clear();
        assert!(s.ranked().is_empty());
    }
}
