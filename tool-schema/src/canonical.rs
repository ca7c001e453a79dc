//! Canonical JSON: one byte-exact text per JSON value, whatever the order its objects were built in.
//!
//! The form: object keys sorted by Unicode code point (byte order of their UTF-8, which is the same thing), no
//! whitespace, strings and numbers written exactly as `serde_json` writes them. Key order is sorted explicitly, so the
//! result does not depend on whether some dependency enables `serde_json`'s `preserve_order` feature.
//!
//! This is *not* RFC 8785 (JCS): JCS sorts by UTF-16 code units and re-formats numbers. It is stable for keel's
//! purposes: comparing argument values, deriving call ids, cache keys.
//!
//! Both functions walk the value with an explicit stack, so a deeply nested value cannot overflow the thread's
//! stack.

use std::io::{self, Write};

use serde_json::Value;

/// The canonical text of `v`: keys sorted by code point, no whitespace, `serde_json`'s string and number syntax.
///
/// Two values are equal as JSON (ignoring object key order) exactly when their canonical texts are equal.
pub fn canonical_json(v: &Value) -> String {
    let mut out = Vec::with_capacity(64);
    // Writing into a `Vec<u8>` cannot fail.
    let _ = write_canonical(v, &mut out);
    // Everything written is UTF-8 (serde_json output and ASCII punctuation); the fallback is never taken.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// A 64-bit FNV-1a hash of [`canonical_json`]`(v)`, computed without building the string.
///
/// Stable across runs, platforms and Rust versions (it does not use `std`'s `DefaultHasher`). It is meant for
/// short, deterministic identifiers and hash-map keys; a hash match does not prove equality: compare the
/// [`canonical_json`] strings for that.
pub fn canonical_hash(v: &Value) -> u64 {
    let mut h = Fnv1a::new();
    let _ = write_canonical(v, &mut h);
    h.finish()
}

/// Writes the canonical text of `v` into `out`.
///
/// # Errors
///
/// Only the errors of `out` itself.
pub fn write_canonical<W: Write>(v: &Value, out: &mut W) -> io::Result<()> {
    enum Step<'a> {
        Value(&'a Value),
        Key(&'a str),
        Byte(u8),
    }
    let mut stack: Vec<Step<'_>> = vec![Step::Value(v)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Byte(b) => out.write_all(&[b])?,
            Step::Key(k) => {
                serde_json::to_writer(&mut *out, k).map_err(io::Error::other)?;
                out.write_all(b":")?;
            }
            Step::Value(value) => match value {
                Value::Null => out.write_all(b"null")?,
                Value::Bool(true) => out.write_all(b"true")?,
                Value::Bool(false) => out.write_all(b"false")?,
                Value::Number(n) => serde_json::to_writer(&mut *out, n).map_err(io::Error::other)?,
                Value::String(s) => serde_json::to_writer(&mut *out, s).map_err(io::Error::other)?,
                Value::Array(items) => {
                    out.write_all(b"[")?;
                    stack.push(Step::Byte(b']'));
                    // Pushed in reverse, so popped in order.
                    for (i, item) in items.iter().enumerate().rev() {
                        stack.push(Step::Value(item));
                        if i > 0 {
                            stack.push(Step::Byte(b','));
                        }
                    }
                }
                Value::Object(map) => {
                    out.write_all(b"{")?;
                    let mut entries: Vec<(&str, &Value)> = map.iter().map(|(k, v)| (k.as_str(), v)).collect();
                    // `str`'s order is byte order of UTF-8, which is code point order.
                    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                    stack.push(Step::Byte(b'}'));
                    for (i, (k, item)) in entries.into_iter().enumerate().rev() {
                        stack.push(Step::Value(item));
                        stack.push(Step::Key(k));
                        if i > 0 {
                            stack.push(Step::Byte(b','));
                        }
                    }
                }
            },
        }
    }
    Ok(())
}

/// 64-bit FNV-1a, fed through `io::Write`.
#[derive(Debug, Clone)]
pub struct Fnv1a(u64);

impl Fnv1a {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    /// The hash of no bytes (the FNV offset basis).
    pub fn new() -> Fnv1a {
        Fnv1a(Self::OFFSET)
    }

    /// Feeds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    /// The hash of the bytes fed so far.
    pub fn finish(&self) -> u64 {
        self.0
    }
}

impl Default for Fnv1a {
    fn default() -> Fnv1a {
        Fnv1a::new()
    }
}

impl Write for Fnv1a {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// 128-bit FNV-1a, for identifiers that must not collide by chance (idempotency keys).
#[derive(Debug, Clone)]
pub struct Fnv1a128(u128);

impl Fnv1a128 {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;

    /// The hash of no bytes (the FNV offset basis).
    pub fn new() -> Fnv1a128 {
        Fnv1a128(Self::OFFSET)
    }

    /// Feeds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u128::from(b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    /// The hash of the bytes fed so far.
    pub fn finish(&self) -> u128 {
        self.0
    }
}

impl Default for Fnv1a128 {
    fn default() -> Fnv1a128 {
        Fnv1a128::new()
    }
}

impl Write for Fnv1a128 {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_128_matches_the_published_test_vectors() {
        let hash = |bytes: &[u8]| {
            let mut h = Fnv1a128::new();
            h.update(bytes);
            h.finish()
        };
        assert_eq!(hash(b""), 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d);
        assert_eq!(hash(b"a"), 0xd228_cb69_6f1a_8caf_7891_2b70_4e4a_8964);
    }
    use serde_json::json;

    #[test]
    fn scalars_are_written_as_serde_json_writes_them() {
        assert_eq!(canonical_json(&json!(null)), "null");
        assert_eq!(canonical_json(&json!(true)), "true");
        assert_eq!(canonical_json(&json!(false)), "false");
        assert_eq!(canonical_json(&json!(42)), "42");
        assert_eq!(canonical_json(&json!(-7)), "-7");
        assert_eq!(canonical_json(&json!(1.5)), "1.5");
        assert_eq!(canonical_json(&json!(u64::MAX)), u64::MAX.to_string());
        assert_eq!(canonical_json(&json!("a\"b\\c\nd\u{1}é")), serde_json::to_string("a\"b\\c\nd\u{1}é").unwrap());
    }

    #[test]
    fn empty_containers() {
        assert_eq!(canonical_json(&json!({})), "{}");
        assert_eq!(canonical_json(&json!([])), "[]");
        assert_eq!(canonical_json(&json!([[], {}, [{}]])), "[[],{},[{}]]");
    }

    #[test]
    fn keys_are_sorted_and_whitespace_dropped() {
        let v = json!({"b": 1, "a": [3, 2, {"z": null, "y": "x"}], "c": {"k2": true, "k1": false}});
        assert_eq!(canonical_json(&v), r#"{"a":[3,2,{"y":"x","z":null}],"b":1,"c":{"k1":false,"k2":true}}"#);
    }

    #[test]
    fn key_order_is_by_code_point() {
        let v = json!({"é": 1, "z": 2, "Z": 3, "a": 4, "_": 5, "😀": 6, "\u{ff}": 7});
        // U+005A < U+005F < U+0061 < U+007A < U+00E9 < U+00FF < U+1F600.
        assert_eq!(canonical_json(&v), r#"{"Z":3,"_":5,"a":4,"z":2,"é":1,"ÿ":7,"😀":6}"#);
    }

    #[test]
    fn independent_of_insertion_order() {
        let mut a = serde_json::Map::new();
        a.insert("x".into(), json!(1));
        a.insert("m".into(), json!({"q": [1, {"b": 2, "a": 1}], "p": "s"}));
        a.insert("b".into(), json!([]));
        let mut b = serde_json::Map::new();
        b.insert("b".into(), json!([]));
        b.insert("m".into(), json!({"p": "s", "q": [1, {"a": 1, "b": 2}]}));
        b.insert("x".into(), json!(1));
        let (a, b) = (Value::Object(a), Value::Object(b));
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(canonical_hash(&a), canonical_hash(&b));
        assert_eq!(canonical_json(&a), r#"{"b":[],"m":{"p":"s","q":[1,{"a":1,"b":2}]},"x":1}"#);
    }

    #[test]
    fn array_order_matters() {
        assert_ne!(canonical_json(&json!([1, 2])), canonical_json(&json!([2, 1])));
        assert_ne!(canonical_hash(&json!([1, 2])), canonical_hash(&json!([2, 1])));
    }

    #[test]
    fn canonical_text_round_trips() {
        let v = json!({"n": [1, 2.25, -3, "s", null, {"deep": [[["x"]]]}], "a": {"": ""}});
        let text = canonical_json(&v);
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
        assert_eq!(canonical_json(&back), text);
    }

    #[test]
    fn hash_is_fnv1a_of_the_text_and_stable() {
        let v = json!({"b": [1, "two"], "a": null});
        let mut h = Fnv1a::new();
        h.update(canonical_json(&v).as_bytes());
        assert_eq!(canonical_hash(&v), h.finish());
        // FNV-1a 64 test vectors.
        let mut empty = Fnv1a::new();
        empty.update(b"");
        assert_eq!(empty.finish(), 0xcbf2_9ce4_8422_2325);
        let mut a = Fnv1a::new();
        a.update(b"a");
        assert_eq!(a.finish(), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn deep_nesting_does_not_overflow_the_stack() {
        let depth = 100_000;
        let mut v = json!(0);
        for _ in 0..depth {
            v = Value::Array(vec![v]);
        }
        let text = canonical_json(&v);
        assert_eq!(text.len(), 2 * depth + 1);
        assert!(text.starts_with("[[[") && text.ends_with("]]]"));
        crate::validate::tests_support::drop_deep(v);
    }
}
