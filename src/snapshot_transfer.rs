//! How a snapshot (spec 4.5) crosses from the wasm to JS: one string holding every distinct client id
//! and name once, and one array of numbers. Building the `LockInfo` objects field by field from wasm cost
//! four JS calls per entry and a UTF-8 decoding per distinct string; with this form, JS decodes the text
//! once and builds each dictionary as an object literal (`js/lock_api.js`, `decodeSnapshot`).
//!
//! The numbers: `[held count, pending count, string count, the UTF-16 length of each string...,` then
//! for each held lock and then each pending request: `client string index, name string index × 2 + 1
//! if exclusive]`.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;

use crate::scheduler::{LockInfo, LockMode, Snapshot};

/// A snapshot in transfer form: the distinct strings concatenated, and the numbers described above.
#[derive(Debug, PartialEq, Eq)]
pub struct SnapshotTransfer {
    pub text: String,
    pub numbers: Vec<u32>,
}

/// Spec 4.5's result in transfer form. Strings are shared by `Rc` address (the core keeps one `Rc<str>`
/// per client id and per name), so each is copied once however many entries use it.
pub fn encode_snapshot(snapshot: &Snapshot) -> SnapshotTransfer {
    let entries = snapshot.held.len() + snapshot.pending.len();
    let mut text = String::new();
    let mut lengths: Vec<u32> = Vec::new();
    let mut index: HashMap<*const u8, u32, BuildHasherDefault<AddressHasher>> =
        HashMap::with_capacity_and_hasher(entries + 1, Default::default());
    let mut body: Vec<u32> = Vec::with_capacity(2 * entries);
    // Entries of one client usually follow each other: its id is found without a lookup.
    let mut last_client: (*const u8, u32) = (std::ptr::null(), 0);
    let mut string_index = |s: &Rc<str>| {
        *index.entry(s.as_ptr()).or_insert_with(|| {
            text.push_str(s);
            let utf16_len = if s.is_ascii() {
                s.len()
            } else {
                s.encode_utf16().count()
            };
            lengths.push(utf16_len as u32);
            lengths.len() as u32 - 1
        })
    };
    let infos = snapshot.held.iter().chain(snapshot.pending.iter());
    for LockInfo {
        name,
        mode,
        client_id,
    } in infos
    {
        if client_id.as_ptr() != last_client.0 {
            last_client = (client_id.as_ptr(), string_index(client_id));
        }
        body.push(last_client.1);
        let exclusive = u32::from(*mode == LockMode::Exclusive);
        body.push(string_index(name) * 2 + exclusive);
    }
    let mut numbers = Vec::with_capacity(3 + lengths.len() + body.len());
    numbers.extend([
        snapshot.held.len() as u32,
        snapshot.pending.len() as u32,
        lengths.len() as u32,
    ]);
    numbers.extend(lengths);
    numbers.extend(body);
    SnapshotTransfer { text, numbers }
}

/// Hashes a string's address: a multiplication and a fold (std's SipHash made the index most of the
/// encoding's time, and addresses need no protection against chosen collisions).
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_usize(&mut self, address: usize) {
        self.write_u64(address as u64);
    }

    fn write_u64(&mut self, x: u64) {
        let h = (self.0 ^ x).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut strings = Vec::new();
        let mut at = 0;
        for &len in &n[3..3 + count] {
            strings.push(String::from_utf16(&utf16[at..at + len as usize]).unwrap());
            at += len as usize;
        }
        assert_eq!(at, utf16.len(), "every string used");
        let body = &n[3 + count..];
        assert_eq!(body.len(), 2 * (held + pending));
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
        assert_eq!(t.text, "client-axclient-by");
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
        assert_eq!(&t.numbers[3..8], [1, 1, 7, 0, 2]);
        let names_back: Vec<String> = decode(&t).into_iter().map(|e| e.2).collect();
        assert_eq!(names_back, ["é", "𝄞 clef", "", "日本"]);
    }
}
