//! [`SequenceMap`]: a map ordered by key for keys that mostly arrive in increasing order and mostly
//! leave from the front (request ids, grant orders), kept as one `VecDeque` of entries sorted by key.
//!
//! Why: `BTreeMap` brought its own node, balancing and iterator code into the wasm for each of the two
//! maps that used it (~4 KB gzipped), and [`crate::sorted_vec::SortedMap`] is a `Vec`, whose removals
//! from the front are O(n): a queue of 100,000 requests draining in order would be quadratic. Here an
//! insert after the last key is a push, a removal moves the entries on the shorter side of it (none at
//! either end), and a lookup is a binary search: a FIFO drain is linear, as with `BTreeMap`.
use std::collections::VecDeque;

/// A map ordered by key, as a `VecDeque` of entries sorted by key (no two equal keys).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SequenceMap<K, V> {
    entries: VecDeque<(K, V)>,
}

impl<K, V> Default for SequenceMap<K, V> {
    fn default() -> Self {
        SequenceMap {
            entries: VecDeque::new(),
        }
    }
}

impl<K: Ord, V> SequenceMap<K, V> {
    pub const fn new() -> Self {
        SequenceMap {
            entries: VecDeque::new(),
        }
    }

    /// `Ok(index)` of the key, or `Err(index)` where it would be inserted.
    fn find(&self, key: &K) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| k.cmp(key))
    }

    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        if self.entries.back().is_none_or(|(last, _)| *last < key) {
            self.entries.push_back((key, value));
            return None;
        }
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (key, value));
                None
            }
        }
    }

    pub fn remove(&mut self, key: &K) -> Option<V> {
        let i = self.find(key).ok()?;
        self.entries.remove(i).map(|(_, v)| v)
    }

    pub fn get(&self, key: &K) -> Option<&V> {
        self.find(key).ok().map(|i| &self.entries[i].1)
    }

    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.find(key).ok().map(|i| &mut self.entries[i].1)
    }

    pub fn contains_key(&self, key: &K) -> bool {
        self.find(key).is_ok()
    }
}

impl<K, V> SequenceMap<K, V> {
    pub fn clear(&mut self) {
        self.entries.clear()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&K, &V)> + ExactSizeIterator + Clone {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator + Clone {
        self.entries.iter().map(|(_, v)| v)
    }

    pub fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut V> + ExactSizeIterator {
        self.entries.iter_mut().map(|(_, v)| v)
    }
}

impl<K: Ord, V> std::ops::Index<&K> for SequenceMap<K, V> {
    type Output = V;
    fn index(&self, key: &K) -> &V {
        self.get(key).expect("no such key")
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::SequenceMap;

    #[derive(Clone, Debug)]
    enum Op {
        /// Insert after the largest key so far (the common case), by this much.
        Append(u8, u16),
        Insert(u16, u16),
        RemoveFirst,
        Remove(u16),
        Get(u16),
        Bump(u16),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (1..4u8, any::<u16>()).prop_map(|(d, v)| Op::Append(d, v)),
            2 => (0..600u16, any::<u16>()).prop_map(|(k, v)| Op::Insert(k, v)),
            4 => Just(Op::RemoveFirst),
            2 => (0..600u16).prop_map(Op::Remove),
            1 => (0..600u16).prop_map(Op::Get),
            1 => (0..600u16).prop_map(Op::Bump),
        ]
    }

    proptest! {
        /// Any sequence of operations leaves the map as BTreeMap would: same answers, same order.
        #[test]
        fn map_behaves_as_btree_map(ops in proptest::collection::vec(op(), 0..300)) {
            let (mut ours, mut std) = (SequenceMap::new(), BTreeMap::new());
            let mut next: u16 = 0;
            for op in ops {
                match op {
                    Op::Append(d, v) => {
                        next = next.saturating_add(u16::from(d));
                        prop_assert_eq!(ours.insert(next, v), std.insert(next, v));
                    }
                    Op::Insert(k, v) => prop_assert_eq!(ours.insert(k, v), std.insert(k, v)),
                    Op::RemoveFirst => {
                        let first = std.keys().next().copied();
                        if let Some(k) = first {
                            prop_assert_eq!(ours.remove(&k), std.remove(&k));
                        }
                    }
                    Op::Remove(k) => prop_assert_eq!(ours.remove(&k), std.remove(&k)),
                    Op::Get(k) => {
                        prop_assert_eq!(ours.get(&k), std.get(&k));
                        prop_assert_eq!(ours.contains_key(&k), std.contains_key(&k));
                    }
                    Op::Bump(k) => {
                        if let (Some(a), Some(b)) = (ours.get_mut(&k), std.get_mut(&k)) {
                            (*a, *b) = (a.wrapping_add(1), b.wrapping_add(1));
                        }
                    }
                }
                prop_assert_eq!(ours.len(), std.len());
                prop_assert_eq!(ours.is_empty(), std.is_empty());
            }
            let a: Vec<(u16, u16)> = ours.iter().map(|(k, v)| (*k, *v)).collect();
            let b: Vec<(u16, u16)> = std.iter().map(|(k, v)| (*k, *v)).collect();
            prop_assert_eq!(a, b);
            let a: Vec<u16> = ours.values().copied().collect();
            prop_assert_eq!(a, std.values().copied().collect::<Vec<_>>());
            for v in ours.values_mut() {
                *v = 0;
            }
            prop_assert!(ours.values().all(|v| *v == 0));
        }
    }
}
