//! How a snapshot (spec 4.5) crosses from the wasm to JS: one string holding every distinct client id
//! and name once, and one array of numbers. Building the `LockInfo` objects field by field from wasm cost
//! four JS calls per entry and a UTF-8 decoding per distinct string; with this form, JS decodes the text
//! once and builds each dictionary as an object literal (`js/lock_api.js`, `decodeSnapshot`).
//!
//! The numbers: `[held count, pending count, string count,` then for each held lock and then each
//! pending request `client string index, name string index × 2 + 1 if exclusive,` then `the UTF-16
//! length of each string...]`.

use crate::scheduler::{LockMode, Snapshot};

/// A snapshot in transfer form: the distinct strings concatenated, and the numbers described above.
#[derive(Debug, PartialEq, Eq)]
pub struct SnapshotTransfer {
    pub text: String,
    pub numbers: Vec<u32>,
}

/// Spec 4.5's result in transfer form. Strings are shared by `Rc` address (the core keeps one `Rc<str>`
/// per client id and per name), so each is copied once however many entries use it, in the order of
/// first use. They are found in a [`StringTable`], one pass over the entries: sorting the 2 × entries
/// addresses instead took half of a `query()` of 2,000 entries (the size build's sort is a heapsort).
pub fn encode_snapshot(snapshot: &Snapshot) -> SnapshotTransfer {
    let entries = snapshot.held.len() + snapshot.pending.len();
    let mut strings = StringTable::new(2 * entries);
    // The entries go straight into `numbers`, the lengths after them (known only at the end): one
    // pass and no second copy. Pushed one by one, as everything here: no `Vec::append` code in the wasm.
    let mut numbers = Vec::with_capacity(3 + 4 * entries);
    numbers.push(snapshot.held.len() as u32);
    numbers.push(snapshot.pending.len() as u32);
    numbers.push(0);
    // Most entries of a snapshot share their client id with the entry before: no lookup for those.
    let mut last_client: (*const u8, u32) = (std::ptr::null(), 0);
    for list in [&snapshot.held, &snapshot.pending] {
        for info in list {
            if info.client_id.as_ptr() != last_client.0 {
                last_client = (info.client_id.as_ptr(), strings.index_of(&info.client_id));
            }
            numbers.push(last_client.1);
            numbers.push(
                strings.index_of(&info.name) * 2 + u32::from(info.mode == LockMode::Exclusive),
            );
        }
    }
    numbers[2] = strings.lengths.len() as u32;
    for &n in &strings.lengths {
        numbers.push(n);
    }
    SnapshotTransfer {
        text: strings.text,
        numbers,
    }
}

/// The distinct strings of a snapshot by `Rc` address: an open-addressing hash table of at most half
/// load (no `HashMap`: its code would cost more wasm), and the strings' text and UTF-16 lengths.
struct StringTable {
    /// `(address, index)`; address 0 marks a free slot (no string lives at 0).
    slots: Vec<(usize, u32)>,
    /// `slots.len()` is `1 << bits`.
    bits: u32,
    text: String,
    lengths: Vec<u32>,
}

impl StringTable {
    /// A table for up to `capacity` distinct strings.
    fn new(capacity: usize) -> Self {
        let bits = (2 * capacity).max(2).next_power_of_two().trailing_zeros();
        StringTable {
            slots: vec![(0, 0); 1 << bits],
            bits,
            text: String::new(),
            lengths: Vec::new(),
        }
    }

    /// The index of `s`, added to the text when first seen.
    fn index_of(&mut self, s: &str) -> u32 {
        let address = s.as_ptr() as usize;
        let mask = self.slots.len() - 1;
        // Fibonacci hashing of the address's low 32 bits (allocations are 4- or 8-byte aligned: the high
        // bits of the product mix in every bit of the address).
        let mut at = ((address as u32).wrapping_mul(0x9E37_79B9) >> (32 - self.bits)) as usize;
        loop {
            match self.slots[at] {
                (0, _) => break,
                (a, index) if a == address => return index,
                _ => at = (at + 1) & mask,
            }
        }
        let index = self.lengths.len() as u32;
        self.slots[at] = (address, index);
        self.text.push_str(s);
        self.lengths.push(utf16_len(s));
        index
    }
}

/// The length of `s` in UTF-16 code units, from its UTF-8 bytes: one per character (every byte but the
/// continuation bytes `10xxxxxx` starts one) and one more per character outside the BMP (led by
/// `11110xxx`). An indexed loop: the size-optimised build inlines no iterator adapter, and
/// `bytes().map().sum()` would cost a call per byte.
fn utf16_len(s: &str) -> u32 {
    let bytes = s.as_bytes();
    let mut length = 0;
    let mut at = 0;
    while at < bytes.len() {
        let b = bytes[at];
        length += u32::from(b & 0xC0 != 0x80) + u32::from(b >= 0xF0);
        at += 1;
    }
    length
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::*;
    use crate::scheduler::LockInfo;

    fn info(name: &Rc<str>, mode: LockMode, client: &Rc<str>) -> LockInfo {
        LockInfo {
            name: name.clone(),
            mode,
            client_id: client.clone(),
        }
    }

    /// The inverse, as `decodeSnapshot` in js/lock_api.js does it (UTF-16 slicing).
    fn decode(t: &SnapshotTransfer) -> Vec<(String, bool, String)> {
        let n = &t.numbers;
        let (held, pending, count) = (n[0] as usize, n[1] as usize, n[2] as usize);
        let utf16: Vec<u16> = t.text.encode_utf16().collect();
        let body = &n[3..3 + 2 * (held + pending)];
        let lengths = &n[3 + body.len()..];
        assert_eq!(lengths.len(), count);
        let mut strings = Vec::new();
        let mut at = 0;
        for &len in lengths {
            strings.push(String::from_utf16(&utf16[at..at + len as usize]).unwrap());
            at += len as usize;
        }
        assert_eq!(at, utf16.len(), "every string used");
        body.chunks(2)
            .map(|e| {
                let (c, v) = (e[0] as usize, e[1] as usize);
                (strings[c].clone(), v & 1 == 1, strings[v >> 1].clone())
            })
            .collect()
    }

    #[test]
    fn an_empty_snapshot_is_three_zeros() {
        let t = encode_snapshot(&Snapshot::default());
        assert_eq!(t.text, "");
        assert_eq!(t.numbers, [0, 0, 0]);
    }

    #[test]
    fn held_then_pending_with_each_shared_string_sent_once() {
        let (a, b): (Rc<str>, Rc<str>) = ("client-a".into(), "client-b".into());
        let (x, y): (Rc<str>, Rc<str>) = ("x".into(), "y".into());
        let snapshot = Snapshot {
            held: vec![
                info(&x, LockMode::Shared, &a),
                info(&x, LockMode::Shared, &b),
            ],
            pending: vec![
                info(&x, LockMode::Exclusive, &a),
                info(&y, LockMode::Exclusive, &b),
            ],
        };
        let t = encode_snapshot(&snapshot);
        assert_eq!(t.text.len(), "client-axclient-by".len(), "each string once");
        assert_eq!(&t.numbers[..3], [2, 2, 4]);
        assert_eq!(
            decode(&t),
            [
                ("client-a".into(), false, "x".into()),
                ("client-b".into(), false, "x".into()),
                ("client-a".into(), true, "x".into()),
                ("client-b".into(), true, "y".into()),
            ]
        );
    }

    #[test]
    fn thousands_of_entries_decode_in_order_with_each_string_once() {
        let clients: Vec<Rc<str>> = (0..7).map(|i| Rc::from(format!("client-{i}"))).collect();
        let names: Vec<Rc<str>> = (0..1500).map(|i| Rc::from(format!("n{i}"))).collect();
        let entry = |i: usize| {
            let mode = if i.is_multiple_of(3) {
                LockMode::Shared
            } else {
                LockMode::Exclusive
            };
            info(
                &names[i * 7 % names.len()],
                mode,
                &clients[i % clients.len()],
            )
        };
        let snapshot = Snapshot {
            held: (0..1000).map(entry).collect(),
            pending: (1000..3000).map(entry).collect(),
        };
        let t = encode_snapshot(&snapshot);
        assert_eq!(t.numbers[2] as usize, clients.len() + names.len());
        let expected: Vec<(String, bool, String)> = snapshot
            .held
            .iter()
            .chain(&snapshot.pending)
            .map(|e| {
                let exclusive = e.mode == LockMode::Exclusive;
                (e.client_id.to_string(), exclusive, e.name.to_string())
            })
            .collect();
        assert_eq!(decode(&t), expected);
    }

    #[test]
    fn lengths_count_utf16_code_units() {
        let c: Rc<str> = "c".into();
        let names: Vec<Rc<str>> = ["é", "𝄞 clef", "", "日本"]
            .into_iter()
            .map(Rc::from)
            .collect();
        let snapshot = Snapshot {
            held: names
                .iter()
                .map(|n| info(n, LockMode::Exclusive, &c))
                .collect(),
            pending: vec![],
        };
        let t = encode_snapshot(&snapshot);
        let mut lengths = t.numbers[t.numbers.len() - 5..].to_vec();
        lengths.sort_unstable();
        assert_eq!(lengths, [0, 1, 1, 2, 7]);
        let names_back: Vec<String> = decode(&t).into_iter().map(|e| e.2).collect();
        assert_eq!(names_back, ["é", "𝄞 clef", "", "日本"]);
    }

    #[test]
    fn utf16_len_is_that_of_encode_utf16() {
        // Characters of 1, 2, 3 and 4 UTF-8 bytes, at the edges of each range.
        let chars = [
            '\0', 'a', '\u{7f}', '\u{80}', 'é', '\u{7ff}', '\u{800}', '日', '\u{ffff}',
        ];
        let more = ['\u{10000}', '𝄞', '\u{10ffff}'];
        for (i, a) in chars.iter().chain(&more).enumerate() {
            for b in chars.iter().chain(&more).skip(i) {
                let s = format!("{a}x{b}{a}");
                assert_eq!(utf16_len(&s) as usize, s.encode_utf16().count(), "{s:?}");
            }
        }
    }
}
