//! How a snapshot (spec 4.5) crosses from the wasm to JS: one string holding every distinct client id
//! and name once, and one array of numbers. Building the `LockInfo` objects field by field from wasm cost
//! four JS calls per entry and a UTF-8 decoding per distinct string; with this form, JS decodes the text
//! once and builds each dictionary as an object literal (`js/lock_api.js`, `decodeSnapshot`).
//!
//! The numbers: `[held count, pending count, string count, the UTF-16 length of each string...,` then
//! for each held lock and then each pending request: `client string index, name string index × 2 + 1
//! if exclusive]`.

use crate::scheduler::{LockInfo, LockMode, Snapshot};

/// A snapshot in transfer form: the distinct strings concatenated, and the numbers described above.
#[derive(Debug, PartialEq, Eq)]
pub struct SnapshotTransfer {
    pub text: String,
    pub numbers: Vec<u32>,
}

/// Spec 4.5's result in transfer form. Strings are shared by `Rc` address (the core keeps one `Rc<str>`
/// per client id and per name), so each is copied once however many entries use it. They are found by
/// sorting the entries' string addresses (no hash map: its code would cost more wasm than the sort), so
/// the strings come in address order.
pub fn encode_snapshot(snapshot: &Snapshot) -> SnapshotTransfer {
    let mut infos: Vec<&LockInfo> = Vec::new();
    for list in [&snapshot.held, &snapshot.pending] {
        for info in list {
            infos.push(info);
        }
    }
    // Slot 2e is entry e's client id, slot 2e + 1 its name.
    let string_at = |slot: usize| {
        let info = infos[slot / 2];
        if slot.is_multiple_of(2) {
            &info.client_id
        } else {
            &info.name
        }
    };
    // (address, slot) as `u64` pairs: the sort instantiation the crate's other pairs use.
    let mut slots: Vec<(u64, u64)> = Vec::new();
    for slot in 0..2 * infos.len() {
        slots.push((string_at(slot).as_ptr() as u64, slot as u64));
    }
    slots.sort_unstable();
    let mut text = String::new();
    // The header, its string count filled in below, then the strings' lengths as they are found.
    let mut numbers = vec![snapshot.held.len() as u32, snapshot.pending.len() as u32, 0];
    let mut body = vec![0u32; 2 * infos.len()];
    let mut last_address = None;
    for (address, slot) in slots {
        let slot = slot as usize;
        if last_address != Some(address) {
            last_address = Some(address);
            let s = string_at(slot);
            text.push_str(s);
            numbers.push(utf16_len(s));
        }
        let index = numbers.len() as u32 - 4;
        body[slot] = if slot.is_multiple_of(2) {
            index
        } else {
            index * 2 + u32::from(infos[slot / 2].mode == LockMode::Exclusive)
        };
    }
    numbers[2] = numbers.len() as u32 - 3;
    numbers.append(&mut body);
    SnapshotTransfer { text, numbers }
}

/// The length of `s` in UTF-16 code units, from its UTF-8 bytes: one per character (every byte but the
/// continuation bytes `10xxxxxx` starts one) and one more per character outside the BMP (led by
/// `11110xxx`). Smaller in the wasm than `encode_utf16().count()`.
fn utf16_len(s: &str) -> u32 {
    s.bytes()
        .map(|b| u32::from(b & 0xC0 != 0x80) + u32::from(b >= 0xF0))
        .sum()
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

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
        let mut lengths = t.numbers[3..8].to_vec();
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
