//! Equality of short strings in line.
//!
//! Names compared on the per-call path (member names against a plan's properties, enum values, tool names) are
//! mostly 4 to 16 bytes long. For those, comparing the first and the last machine word of each (overlapping when
//! shorter than two words) is two loads and two comparisons, without the call to `memcmp` that `==` on slices makes.

/// Whether `a` and `b` are equal.
#[inline(always)]
pub fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    match n {
        8..=16 => word8(a, 0) == word8(b, 0) && word8(a, n - 8) == word8(b, n - 8),
        4..=7 => word4(a, 0) == word4(b, 0) && word4(a, n - 4) == word4(b, n - 4),
        _ => a == b,
    }
}

/// The 8 bytes of `s` from `at` as a little-endian word (0 when there are fewer).
#[inline(always)]
pub fn word8(s: &[u8], at: usize) -> u64 {
    s.get(at..at + 8).and_then(|w| <[u8; 8]>::try_from(w).ok()).map_or(0, u64::from_le_bytes)
}

/// The 4 bytes of `s` from `at` as a little-endian word (0 when there are fewer).
#[inline(always)]
pub fn word4(s: &[u8], at: usize) -> u32 {
    s.get(at..at + 4).and_then(|w| <[u8; 4]>::try_from(w).ok()).map_or(0, u32::from_le_bytes)
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn agrees_with_eq_on_every_length_and_every_differing_byte() {
        for n in 0..=40 {
            let a: String = (0..n).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
            assert!(same(&a, &a.clone()), "{a:?}");
            for at in 0..n {
                let mut b = a.clone().into_bytes();
                b[at] = b'Z';
                let b = String::from_utf8(b).expect("ascii");
                assert!(!same(&a, &b), "{a:?} vs {b:?}");
            }
            let longer = format!("{a}x");
            assert!(!same(&a, &longer) && !same(&longer, &a));
        }
    }

    #[test]
    fn multibyte_text_compares_by_bytes() {
        assert!(same("sévérité", "sévérité"));
        assert!(!same("sévérité", "sévèrité"));
        assert!(!same("é", "e"));
    }
}
