//! [`SequenceMap`]: a map ordered by key for keys that mostly arrive in increasing order (request ids,
//! grant orders), kept as one `Vec` of entries sorted by key, where a removal leaves a hole.
//!
//! Why: `BTreeMap` brings its own node, balancing and iterator code into the wasm for each map type, and
//! [`crate::sorted_vec::SortedMap`] is a `Vec`, whose removals from the front are O(n): a queue of
//! 100,000 requests draining in order would be quadratic. Here an
//! insert after the last key is a push, a removal takes the value out of its entry and moves nothing
//! (the holes are dropped all at once when they are half the entries: amortized O(1) per removal,
//! wherever it is), and a lookup is a binary search: a FIFO drain is linear, as with `BTreeMap`.

/// A map ordered by key, as one `Vec` of entries sorted by key (no two equal keys). A removal only
/// takes the value out and leaves its key as a hole (`None`), so it moves nothing; the holes go at
/// the next compaction, once they are half the entries.
#[derive(Clone, Debug)]
pub struct SequenceMap<K, V> {
    entries: Vec<(K, Option<V>)>,
    holes: usize,
}

impl<K, V> Default for SequenceMap<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Ord, V> SequenceMap<K, V> {
    /// The entry of the key, a hole or not.
    fn find(&self, key: &K) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| k.cmp(key))
    }

    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        // After the last key (the common case) without a search; `Vec::insert` at the end is a push.
        let at = match self.entries.last() {
            Some((last, _)) if *last >= key => match self.find(&key) {
                Ok(i) => {
                    let old = self.entries[i].1.replace(value);
                    if old.is_none() {
                        self.holes -= 1;
                    }
                    return old;
                }
                Err(i) => i,
            },
            _ => self.entries.len(),
        };
        self.entries.insert(at, (key, Some(value)));
        None
    }

    pub fn remove(&mut self, key: &K) -> Option<V> {
        let i = self.find(key).ok()?;
        let value = self.entries[i].1.take()?;
        self.holes += 1;
        if self.holes * 2 > self.entries.len() {
            self.entries.retain(|(_, v)| v.is_some());
            self.holes = 0;
        }
        Some(value)
    }

    pub fn get(&self, key: &K) -> Option<&V> {
        self.find(key).ok().and_then(|i| self.entries[i].1.as_ref())
    }

    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.find(key).ok().and_then(|i| self.entries[i].1.as_mut())
    }

    pub fn contains_key(&self, key: &K) -> bool {
        self.get(key).is_some()
    }
}

impl<K, V> SequenceMap<K, V> {
    pub const fn new() -> Self {
        SequenceMap {
            entries: Vec::new(),
            holes: 0,
        }
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.holes = 0;
    }

    pub fn len(&self) -> usize {
        self.entries.len() - self.holes
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&K, &V)> + Clone {
        self.entries
            .iter()
            .filter_map(|(k, v)| Some((k, v.as_ref()?)))
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + Clone {
        self.entries.iter().filter_map(|(_, v)| v.as_ref())
    }

    pub fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut V> {
        self.entries.iter_mut().filter_map(|(_, v)| v.as_mut())
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
