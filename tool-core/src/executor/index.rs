//! An executor's index from a tool's name to its place in the view, built once with the executor.
//!
//! The view finds a name by binary search, comparing whole names through each probed definition; the executor
//! looks up every call, so it keeps this open-addressing table instead: a slot holds a position and its name's
//! hash, so a probe that is not the name is told apart without reading the name, and the one that is costs one
//! comparison. The table is at most half full, so every probe sequence ends at an empty slot.
//!
//! The names are the view's (registered, not chosen by the model), and nothing is ever inserted after the build:
//! a name the model sends only reads the table, so no choice of names can lengthen the probes of others. The hash
//! is fixed, and fast for short names rather than keyed.

use keel_tools_schema::text::{word4, word8};

/// A slot's position when it is empty.
const EMPTY: usize = usize::MAX;

#[derive(Debug)]
pub(super) struct NameIndex {
    /// `(hash, position)`; a power of two long.
    slots: Box<[(u64, usize)]>,
    mask: usize,
}

impl NameIndex {
    /// The index of `names`, in their positions' order.
    pub(super) fn new<'n>(names: impl ExactSizeIterator<Item = &'n str>) -> NameIndex {
        let len = names.len().saturating_mul(2).next_power_of_two().max(2);
        let mut slots = vec![(0, EMPTY); len].into_boxed_slice();
        let mask = len - 1;
        for (position, name) in names.enumerate() {
            let h = hash(name);
            let mut i = h as usize & mask;
            while slots[i].1 != EMPTY {
                i = (i + 1) & mask;
            }
            slots[i] = (h, position);
        }
        NameIndex { slots, mask }
    }

    /// The position of `name`, where `name_at` gives the name at a position.
    #[inline]
    pub(super) fn get<'a>(&self, name: &str, name_at: impl Fn(usize) -> &'a str) -> Option<usize> {
        let h = hash(name);
        let mut i = h as usize & self.mask;
        loop {
            let (slot_hash, position) = self.slots[i];
            if position == EMPTY {
                return None;
            }
            if slot_hash == h && keel_tools_schema::text::same(name_at(position), name) {
                return Some(position);
            }
            i = (i + 1) & self.mask;
        }
    }
}

/// A fixed 64-bit hash of a name, eight bytes a step (a multiply-rotate step in the manner of rustc's `FxHasher`),
/// with a final mix so that the low bits, which pick the first slot, depend on every byte. A name of 4 to 16 bytes
/// (most are) is read as its first and last word, overlapping when shorter than two words, as `text::same` reads
/// it: two steps, no loop.
#[inline]
fn hash(name: &str) -> u64 {
    const K: u64 = 0xf135_7aea_2e62_a9c5;
    let bytes = name.as_bytes();
    let n = bytes.len();
    let step = |h: u64, word: u64| (h ^ word).wrapping_mul(K).rotate_left(26);
    let mut h = step(0, n as u64);
    match n {
        8..=16 => h = step(step(h, word8(bytes, 0)), word8(bytes, n - 8)),
        4..=7 => h = step(h, u64::from(word4(bytes, 0)) << 32 | u64::from(word4(bytes, n - 4))),
        17.. => {
            let mut chunks = bytes.chunks_exact(8);
            for chunk in &mut chunks {
                h = step(h, u64::from_le_bytes(chunk.try_into().unwrap_or_default()));
            }
            if !chunks.remainder().is_empty() {
                h = step(h, word8(bytes, n - 8));
            }
        }
        _ => h = step(h, bytes.iter().rev().fold(0u64, |w, &b| (w << 8) | u64::from(b))),
    }
    (h ^ (h >> 29)).wrapping_mul(K) ^ (h >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(names: &[&str]) -> NameIndex {
        NameIndex::new(names.iter().copied())
    }

    #[test]
    fn finds_every_name_and_nothing_else() {
        let names: Vec<String> = (0..1000).map(|i| format!("tool_{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let idx = index(&refs);
        for (i, name) in refs.iter().enumerate() {
            assert_eq!(idx.get(name, |p| refs[p]), Some(i), "{name}");
        }
        for missing in ["", "tool_", "tool_1000", "TOOL_1", "tool_1 ", "tool_01", "tool_\u{0}1"] {
            assert_eq!(idx.get(missing, |p| refs[p]), None, "{missing:?}");
        }
    }

    #[test]
    fn names_of_every_length_near_a_word_are_told_apart() {
        // Lengths 0 to 24 of one letter, and the same with one byte changed: the tail and overlap paths.
        let mut names: Vec<String> = (0..=24).map(|n| "a".repeat(n)).collect();
        names.extend((1..=24).map(|n| format!("{}b", "a".repeat(n - 1))));
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let idx = index(&refs);
        for (i, name) in refs.iter().enumerate() {
            assert_eq!(idx.get(name, |p| refs[p]), Some(i), "{name:?}");
        }
        assert_eq!(idx.get(&"a".repeat(25), |p| refs[p]), None);
    }

    #[test]
    fn every_byte_of_a_name_changes_its_hash() {
        // Every length up to five words, so each way of reading a name (bytes, two overlapping words, a loop of
        // words and a last overlapping one) is covered.
        for n in 0..=40 {
            let name: String = (0..n).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
            for at in 0..n {
                let mut other = name.clone().into_bytes();
                other[at] = b'Z';
                let other = String::from_utf8(other).expect("ascii");
                assert_ne!(hash(&name), hash(&other), "{name:?} vs {other:?}");
            }
            assert_ne!(hash(&name), hash(&format!("{name}a")), "{name:?} and one more byte");
        }
    }

    #[test]
    fn an_empty_view_finds_nothing() {
        let idx = index(&[]);
        assert_eq!(idx.get("anything", |_| unreachable!("no position")), None);
    }

    #[test]
    fn the_table_is_at_most_half_full() {
        for n in [0usize, 1, 2, 3, 5, 8, 9, 200] {
            let names: Vec<String> = (0..n).map(|i| i.to_string()).collect();
            let idx = index(&names.iter().map(String::as_str).collect::<Vec<_>>());
            assert!(idx.slots.len() >= 2 * n, "{n} names in {} slots", idx.slots.len());
            assert!(idx.slots.len().is_power_of_two());
        }
    }
}
