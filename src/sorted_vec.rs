//! [`SortedMap`] and [`SortedSet`]: ordered collections kept as one sorted `Vec`, with the part of
//! `BTreeMap`/`BTreeSet`'s API this crate uses and the same iteration order (by key).
//!
//! Why not the std collections: in the wasm every `BTreeMap<K, V>` instantiation brings its own node,
//! balancing and iterator code, and every `HashMap` its hashbrown table and SipHash. A sorted `Vec` is a
//! binary search plus `Vec::insert`/`remove`, little code per instantiation, and no slower for the small
//! maps of a lock manager (tens to a few thousand entries; an insert or a remove moves at most the
//! entries after it).
use std::borrow::Borrow;

/// A map ordered by key, as one `Vec` of entries sorted by key (no two equal keys).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SortedMap<K, V> {
    entries: Vec<(K, V)>,
}

impl<K, V> Default for SortedMap<K, V> {
    fn default() -> Self {
        SortedMap {
            entries: Vec::new(),
        }
    }
}

impl<K: Ord, V> SortedMap<K, V> {
    pub const fn new() -> Self {
        SortedMap {
            entries: Vec::new(),
        }
    }
    /// `Ok(index)` of the key, or `Err(index)` where it would be inserted.
    fn find<Q: Ord + ?Sized>(&self, key: &Q) -> Result<usize, usize>
    where
        K: Borrow<Q>,
    {
        self.entries.binary_search_by(|(k, _)| k.borrow().cmp(key))
    }
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (key, value));
                None
            }
        }
    }
    pub fn remove<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        self.find(key).ok().map(|i| self.entries.remove(i).1)
    }
    pub fn get<Q: Ord + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.find(key).ok().map(|i| &self.entries[i].1)
    }
    pub fn get_mut<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        self.find(key).ok().map(|i| &mut self.entries[i].1)
    }
    pub fn contains_key<Q: Ord + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.find(key).is_ok()
    }
    /// The key's position in key order.
    pub fn index_of<Q: Ord + ?Sized>(&self, key: &Q) -> Option<usize>
    where
        K: Borrow<Q>,
    {
        self.find(key).ok()
    }
    pub fn entry(&mut self, key: K) -> Entry<'_, K, V> {
        Entry { map: self, key }
    }
    pub fn retain(&mut self, mut f: impl FnMut(&K, &mut V) -> bool) {
        self.entries.retain_mut(|(k, v)| f(k, v))
    }
    /// [`SortedMap::retain`] by key alone, with a `dyn` predicate: one instantiation per map type.
    pub fn retain_keys(&mut self, f: &dyn Fn(&K) -> bool) {
        self.entries.retain(|(k, _)| f(k))
    }
}

impl<K, V> SortedMap<K, V> {
    /// The entry at position `i` in key order (see [`SortedMap::index_of`]).
    pub fn at(&self, i: usize) -> (&K, &V) {
        let (k, v) = &self.entries[i];
        (k, v)
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub fn clear(&mut self) {
        self.entries.clear()
    }
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&K, &V)> + ExactSizeIterator + Clone {
        self.entries.iter().map(|(k, v)| (k, v))
    }
    pub fn iter_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = (&K, &mut V)> + ExactSizeIterator {
        self.entries.iter_mut().map(|(k, v)| (&*k, v))
    }
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &K> + ExactSizeIterator + Clone {
        self.entries.iter().map(|(k, _)| k)
    }
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator + Clone {
        self.entries.iter().map(|(_, v)| v)
    }
    pub fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut V> + ExactSizeIterator {
        self.entries.iter_mut().map(|(_, v)| v)
    }
}

/// A key's place in a [`SortedMap`], from [`SortedMap::entry`].
pub struct Entry<'a, K, V> {
    map: &'a mut SortedMap<K, V>,
    key: K,
}
impl<'a, K: Ord, V> Entry<'a, K, V> {
    pub fn or_insert_with(self, f: impl FnOnce() -> V) -> &'a mut V {
        let i = match self.map.find(&self.key) {
            Ok(i) => i,
            Err(i) => {
                self.map.entries.insert(i, (self.key, f()));
                i
            }
        };
        &mut self.map.entries[i].1
    }
    pub fn or_insert(self, v: V) -> &'a mut V {
        self.or_insert_with(|| v)
    }
    pub fn or_default(self) -> &'a mut V
    where
        V: Default,
    {
        self.or_insert_with(V::default)
    }
}

impl<K: Ord, V> FromIterator<(K, V)> for SortedMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut m = SortedMap::new();
        for (k, v) in iter {
            m.insert(k, v);
        }
        m
    }
}
impl<K: Ord, V> Extend<(K, V)> for SortedMap<K, V> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}
impl<K, V> IntoIterator for SortedMap<K, V> {
    type Item = (K, V);
    type IntoIter = std::vec::IntoIter<(K, V)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}
impl<'a, K, V> IntoIterator for &'a SortedMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (K, V)>, fn(&'a (K, V)) -> (&'a K, &'a V)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter().map(|(k, v)| (k, v))
    }
}
impl<'a, K, V> IntoIterator for &'a mut SortedMap<K, V> {
    type Item = (&'a K, &'a mut V);
    type IntoIter =
        std::iter::Map<std::slice::IterMut<'a, (K, V)>, fn(&'a mut (K, V)) -> (&'a K, &'a mut V)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter_mut().map(|(k, v)| (&*k, v))
    }
}
impl<K: Ord + Borrow<Q>, Q: Ord + ?Sized, V> std::ops::Index<&Q> for SortedMap<K, V> {
    type Output = V;
    fn index(&self, key: &Q) -> &V {
        self.get(key).expect("no such key")
    }
}

/// A set ordered by value, as one sorted `Vec` without duplicates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SortedSet<T> {
    items: Vec<T>,
}
impl<T> Default for SortedSet<T> {
    fn default() -> Self {
        SortedSet { items: Vec::new() }
    }
}
impl<T: Ord> SortedSet<T> {
    pub const fn new() -> Self {
        SortedSet { items: Vec::new() }
    }
    /// `Ok(index)` of the item, or `Err(index)` where it would be inserted: the one search of
    /// `insert`, `remove` and `contains` (one instantiation where they look up the item type itself).
    fn find<Q: Ord + ?Sized>(&self, q: &Q) -> Result<usize, usize>
    where
        T: Borrow<Q>,
    {
        self.items.binary_search_by(|t| t.borrow().cmp(q))
    }
    pub fn insert(&mut self, t: T) -> bool {
        match self.find(&t) {
            Ok(_) => false,
            Err(i) => {
                self.items.insert(i, t);
                true
            }
        }
    }
    pub fn remove<Q: Ord + ?Sized>(&mut self, q: &Q) -> bool
    where
        T: Borrow<Q>,
    {
        match self.find(q) {
            Ok(i) => {
                self.items.remove(i);
                true
            }
            Err(_) => false,
        }
    }
    pub fn contains<Q: Ord + ?Sized>(&self, q: &Q) -> bool
    where
        T: Borrow<Q>,
    {
        self.find(q).is_ok()
    }
    /// Keeps the items `f` selects. A `dyn` predicate: one instantiation per item type, not per call.
    pub fn retain(&mut self, f: &dyn Fn(&T) -> bool) {
        self.items.retain(f)
    }
    pub fn first(&self) -> Option<&T> {
        self.items.first()
    }
    pub fn last(&self) -> Option<&T> {
        self.items.last()
    }
}
impl<T> SortedSet<T> {
    pub fn len(&self) -> usize {
        self.items.len()
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    pub fn clear(&mut self) {
        self.items.clear()
    }
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.items.iter()
    }
}
impl<T: Ord> FromIterator<T> for SortedSet<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut items: Vec<T> = iter.into_iter().collect();
        items.sort_unstable();
        items.dedup();
        SortedSet { items }
    }
}
impl<T: Ord> Extend<T> for SortedSet<T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        for t in iter {
            self.insert(t);
        }
    }
}
impl<T> IntoIterator for SortedSet<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter()
    }
}
impl<'a, T> IntoIterator for &'a SortedSet<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}
impl<T: Ord, const N: usize> From<[T; N]> for SortedSet<T> {
    fn from(items: [T; N]) -> Self {
        items.into_iter().collect()
    }
}
impl<K: Ord, V, const N: usize> From<[(K, V); N]> for SortedMap<K, V> {
    fn from(items: [(K, V); N]) -> Self {
        items.into_iter().collect()
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use proptest::prelude::*;

    use super::{SortedMap, SortedSet};

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u8, u16),
        Remove(u8),
        Entry(u8, u16),
        RetainOdd,
        Clear,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (any::<u8>(), any::<u16>()).prop_map(|(k, v)| Op::Insert(k, v)),
            4 => any::<u8>().prop_map(Op::Remove),
            2 => (any::<u8>(), any::<u16>()).prop_map(|(k, v)| Op::Entry(k, v)),
            1 => Just(Op::RetainOdd),
            1 => Just(Op::Clear),
        ]
    }

    proptest! {
        /// Any sequence of operations leaves the map as BTreeMap would: same answers, same order.
        #[test]
        fn map_behaves_as_btree_map(ops in proptest::collection::vec(op(), 0..200)) {
            let (mut ours, mut std) = (SortedMap::new(), BTreeMap::new());
            for op in ops {
                match op {
                    Op::Insert(k, v) => prop_assert_eq!(ours.insert(k, v), std.insert(k, v)),
                    Op::Remove(k) => prop_assert_eq!(ours.remove(&k), std.remove(&k)),
                    Op::Entry(k, v) => {
                        let (a, b) = (ours.entry(k).or_insert(v), std.entry(k).or_insert(v));
                        (*a, *b) = (a.wrapping_add(1), b.wrapping_add(1));
                    }
                    Op::RetainOdd => {
                        ours.retain(|_, v| *v % 2 == 1);
                        std.retain(|_, v| *v % 2 == 1);
                    }
                    Op::Clear => {
                        ours.clear();
                        std.clear();
                    }
                }
                prop_assert_eq!(ours.len(), std.len());
                prop_assert!(ours.iter().eq(std.iter()));
                for k in [0u8, 7, 128, 255] {
                    prop_assert_eq!(ours.get(&k), std.get(&k));
                    prop_assert_eq!(ours.contains_key(&k), std.contains_key(&k));
                }
            }
        }

        /// Likewise for the set, built both by inserts and by collecting.
        #[test]
        fn set_behaves_as_btree_set(items in proptest::collection::vec((any::<bool>(), any::<u8>()), 0..200)) {
            let (mut ours, mut std) = (SortedSet::new(), BTreeSet::new());
            for &(insert, x) in &items {
                if insert {
                    prop_assert_eq!(ours.insert(x), std.insert(x));
                } else {
                    prop_assert_eq!(ours.remove(&x), std.remove(&x));
                }
                prop_assert!(ours.iter().eq(std.iter()));
                prop_assert_eq!(ours.first(), std.first());
                prop_assert_eq!(ours.last(), std.last());
                prop_assert_eq!(ours.contains(&x), std.contains(&x));
            }
            let collected: SortedSet<u8> = items.iter().map(|&(_, x)| x).collect();
            let expected: BTreeSet<u8> = items.iter().map(|&(_, x)| x).collect();
            prop_assert!(collected.iter().eq(expected.iter()));
        }
    }
}
