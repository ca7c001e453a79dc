//! A handler's result turned into a `Value` within the output [`Limits`], stopping as soon as it is certainly too
//! large or too deep: a tool that returns a gigabyte costs the process about the limit, not the gigabyte twice.
//!
//! The result is serialised by `serde_json`'s own value serializer, through a proxy that counts on the way. It
//! keeps two counts of the compact JSON size: a lower bound (a string counts its bytes and quotes but not its
//! escapes, a float one byte), past which it stops, so stopping is never wrong; and an upper bound (every byte of a
//! string escaped as `\u00XX`, a float 24 bytes). Depth is counted exactly. When the upper bound is within the
//! limits the value certainly is; otherwise the caller checks the finished value exactly (`Within::Unsure`).

use std::cell::Cell;
use std::fmt::Display;

use serde::ser::{
    self, Serialize, SerializeMap, SerializeSeq, SerializeStruct, SerializeStructVariant, SerializeTuple,
    SerializeTupleStruct, SerializeTupleVariant, Serializer,
};
use serde_json::Value;

use crate::limits::Limits;

/// Why a result could not be made a `Value`.
#[derive(Debug)]
pub(crate) enum OutputError {
    /// It is certainly beyond the limits: what it would exceed, in the words of a `Violation`'s `expected`.
    Exceeded(String),
    /// `serde_json` refused it (a map key that is not a string, a failing `Serialize` impl).
    Serde(serde_json::Error),
}

/// Whether a serialised value is known to be within the limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Within {
    /// Certainly: its size's upper bound and its depth are within them.
    Certainly,
    /// Perhaps not: check the value exactly (its escapes may make it too large, or `serde_json` built part of it
    /// from text it was handed: a `RawValue`, an arbitrary-precision number).
    Unsure,
}

/// `value` as a `Value`, unless it is certainly beyond `limits`; and whether it is certainly within them.
pub(crate) fn to_value_within<T: Serialize + ?Sized>(
    value: &T,
    limits: &Limits,
) -> Result<(Value, Within), OutputError> {
    let budget = Budget {
        bytes: Cell::new(0),
        slack: Cell::new(0),
        opaque: Cell::new(false),
        depth: Cell::new(0),
        limits: *limits,
        exceeded: Cell::new(None),
    };
    match (Bounded { value, budget: &budget }).serialize(serde_json::value::Serializer) {
        Ok(v) => {
            let upper = budget.bytes.get().saturating_add(budget.slack.get());
            let within =
                if budget.opaque.get() || upper > limits.max_bytes { Within::Unsure } else { Within::Certainly };
            Ok((v, within))
        }
        Err(e) => match budget.exceeded.take() {
            Some(what) => Err(OutputError::Exceeded(what)),
            None => Err(OutputError::Serde(e)),
        },
    }
}

struct Budget {
    /// The lower bound of the compact JSON size so far.
    bytes: Cell<usize>,
    /// What the upper bound adds to `bytes` (escapes, float digits, the quotes of a non-string map key).
    slack: Cell<usize>,
    /// Set when `serde_json` is handed a value as text (its private struct names): neither count holds for it.
    opaque: Cell<bool>,
    depth: Cell<usize>,
    limits: Limits,
    /// Set when a limit is passed, so that the error it causes is told apart from `serde_json`'s own.
    exceeded: Cell<Option<String>>,
}

impl Budget {
    fn add<E: ser::Error>(&self, n: usize) -> Result<(), E> {
        let used = self.bytes.get().saturating_add(n);
        self.bytes.set(used);
        if used > self.limits.max_bytes {
            return Err(self.fail(format!("at most {} bytes", self.limits.max_bytes)));
        }
        Ok(())
    }

    /// Adds `n` to the upper bound only.
    fn slack(&self, n: usize) {
        self.slack.set(self.slack.get().saturating_add(n));
    }

    /// Counts a string of `len` bytes: its quotes and bytes, each byte perhaps escaped as `\u00XX` (6 bytes).
    fn text<E: ser::Error>(&self, len: usize, around: usize) -> Result<(), E> {
        self.slack(len.saturating_mul(5));
        self.add(len.saturating_add(around))
    }

    fn enter<E: ser::Error>(&self) -> Result<(), E> {
        let depth = self.depth.get() + 1;
        self.depth.set(depth);
        if depth > self.limits.max_depth {
            return Err(self.fail(format!("at most {} levels of nested arrays and objects", self.limits.max_depth)));
        }
        Ok(())
    }

    fn leave(&self) {
        self.depth.set(self.depth.get().saturating_sub(1));
    }

    fn fail<E: ser::Error>(&self, what: String) -> E {
        let error = E::custom(&what);
        self.exceeded.set(Some(what));
        error
    }
}

/// A value serialised through the [`Proxy`].
struct Bounded<'a, 'b, T: ?Sized> {
    value: &'a T,
    budget: &'b Budget,
}

impl<T: Serialize + ?Sized> Serialize for Bounded<'_, '_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(Proxy { inner: serializer, budget: self.budget })
    }
}

/// Counts what passes through to `inner`, and stops it past the budget.
struct Proxy<'b, S> {
    inner: S,
    budget: &'b Budget,
}

/// A container being serialised: each element goes through the proxy, one comma (or colon) counted per element.
struct Compound<'b, C> {
    inner: C,
    budget: &'b Budget,
    first: bool,
    /// How many levels `end` closes: two for a variant's `{"variant": [...]}`.
    levels: usize,
}

impl<C> Compound<'_, C> {
    fn separator<E: ser::Error>(&mut self) -> Result<(), E> {
        if std::mem::replace(&mut self.first, false) { Ok(()) } else { self.budget.add(1) }
    }

    fn close(&self) {
        for _ in 0..self.levels {
            self.budget.leave();
        }
    }
}

/// A length hint as passed on: the serializer reserves room for that many elements at once, so a long sequence
/// is reserved for only in part; the rest grows as elements arrive, within the budget.
fn capped(len: usize) -> usize {
    len.min(1024)
}

/// What a float may add to its one counted byte: 24 bytes at most.
const FLOAT_SLACK: usize = 23;

fn digits(mut n: u128) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

fn signed_digits(n: i128) -> usize {
    digits(n.unsigned_abs()) + usize::from(n < 0)
}

impl<'b, S: Serializer> Proxy<'b, S> {
    fn compound<C>(budget: &'b Budget, inner: C) -> Compound<'b, C> {
        Compound { inner, budget, first: true, levels: 1 }
    }

    fn variant_compound<C>(budget: &'b Budget, inner: C) -> Compound<'b, C> {
        Compound { inner, budget, first: true, levels: 2 }
    }

    /// Opens a container: one level deeper, and its two brackets.
    fn open(&self) -> Result<(), S::Error> {
        self.budget.enter()?;
        self.budget.add(2)
    }
}

/// The integer methods of [`Proxy`]: count the digits (and sign), then pass the value on.
macro_rules! integers {
    ($($method:ident($ty:ty) $count:ident),* $(,)?) => {
        $(
            fn $method(self, v: $ty) -> Result<S::Ok, S::Error> {
                self.budget.add($count(v.into()))?;
                self.inner.$method(v)
            }
        )*
    };
}

impl<'b, S: Serializer> Serializer for Proxy<'b, S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = Compound<'b, S::SerializeSeq>;
    type SerializeTuple = Compound<'b, S::SerializeTuple>;
    type SerializeTupleStruct = Compound<'b, S::SerializeTupleStruct>;
    type SerializeTupleVariant = Compound<'b, S::SerializeTupleVariant>;
    type SerializeMap = Compound<'b, S::SerializeMap>;
    type SerializeStruct = Compound<'b, S::SerializeStruct>;
    type SerializeStructVariant = Compound<'b, S::SerializeStructVariant>;

    fn serialize_bool(self, v: bool) -> Result<S::Ok, S::Error> {
        self.budget.add(if v { 4 } else { 5 })?;
        self.inner.serialize_bool(v)
    }
    integers! {
        serialize_i8(i8) signed_digits,
        serialize_i16(i16) signed_digits,
        serialize_i32(i32) signed_digits,
        serialize_i64(i64) signed_digits,
        serialize_i128(i128) signed_digits,
        serialize_u8(u8) digits,
        serialize_u16(u16) digits,
        serialize_u32(u32) digits,
        serialize_u64(u64) digits,
        serialize_u128(u128) digits,
    }
    fn serialize_f32(self, v: f32) -> Result<S::Ok, S::Error> {
        // At least one digit; at most 24 bytes (`-2.2250738585072014e-308`), `null` for a non-finite one.
        self.budget.slack(FLOAT_SLACK);
        self.budget.add(1)?;
        self.inner.serialize_f32(v)
    }
    fn serialize_f64(self, v: f64) -> Result<S::Ok, S::Error> {
        self.budget.slack(FLOAT_SLACK);
        self.budget.add(1)?;
        self.inner.serialize_f64(v)
    }
    fn serialize_char(self, v: char) -> Result<S::Ok, S::Error> {
        self.budget.text(v.len_utf8(), 2)?;
        self.inner.serialize_char(v)
    }
    fn serialize_str(self, v: &str) -> Result<S::Ok, S::Error> {
        self.budget.text(v.len(), 2)?;
        self.inner.serialize_str(v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<S::Ok, S::Error> {
        // An array of numbers: at least a digit and a comma each.
        self.budget.enter()?;
        // At most three digits each.
        self.budget.slack(v.len().saturating_mul(2));
        self.budget.add(2 + (2 * v.len()).saturating_sub(1))?;
        self.budget.leave();
        self.inner.serialize_bytes(v)
    }
    fn serialize_none(self) -> Result<S::Ok, S::Error> {
        self.budget.add(4)?;
        self.inner.serialize_none()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<S::Ok, S::Error> {
        self.inner.serialize_some(&Bounded { value, budget: self.budget })
    }
    fn serialize_unit(self) -> Result<S::Ok, S::Error> {
        self.budget.add(4)?;
        self.inner.serialize_unit()
    }
    fn serialize_unit_struct(self, name: &'static str) -> Result<S::Ok, S::Error> {
        self.budget.add(4)?;
        self.inner.serialize_unit_struct(name)
    }
    fn serialize_unit_variant(self, name: &'static str, index: u32, variant: &'static str) -> Result<S::Ok, S::Error> {
        self.budget.text(variant.len(), 2)?;
        self.inner.serialize_unit_variant(name, index, variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, name: &'static str, value: &T) -> Result<S::Ok, S::Error> {
        self.inner.serialize_newtype_struct(name, &Bounded { value, budget: self.budget })
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        // `{"variant": value}`.
        self.open()?;
        self.budget.text(variant.len(), 3)?;
        let out = self.inner.serialize_newtype_variant(name, index, variant, &Bounded { value, budget: self.budget });
        self.budget.leave();
        out
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Self::SerializeSeq, S::Error> {
        self.open()?;
        Ok(Self::compound(self.budget, self.inner.serialize_seq(len.map(capped))?))
    }
    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple, S::Error> {
        self.open()?;
        Ok(Self::compound(self.budget, self.inner.serialize_tuple(len)?))
    }
    fn serialize_tuple_struct(self, name: &'static str, len: usize) -> Result<Self::SerializeTupleStruct, S::Error> {
        self.open()?;
        Ok(Self::compound(self.budget, self.inner.serialize_tuple_struct(name, len)?))
    }
    fn serialize_tuple_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleVariant, S::Error> {
        // `{"variant": [...]}`: two levels, both closed by `end`.
        self.open()?;
        self.budget.text(variant.len(), 3)?;
        self.open()?;
        Ok(Self::variant_compound(self.budget, self.inner.serialize_tuple_variant(name, index, variant, len)?))
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Self::SerializeMap, S::Error> {
        self.open()?;
        Ok(Self::compound(self.budget, self.inner.serialize_map(len.map(capped))?))
    }
    fn serialize_struct(self, name: &'static str, len: usize) -> Result<Self::SerializeStruct, S::Error> {
        if name.starts_with("$serde_json::private::") {
            self.budget.opaque.set(true);
        }
        self.open()?;
        Ok(Self::compound(self.budget, self.inner.serialize_struct(name, len)?))
    }
    fn serialize_struct_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStructVariant, S::Error> {
        // `{"variant": {...}}`: two levels, both closed by `end`.
        self.open()?;
        self.budget.text(variant.len(), 3)?;
        self.open()?;
        Ok(Self::variant_compound(self.budget, self.inner.serialize_struct_variant(name, index, variant, len)?))
    }
    fn collect_str<T: Display + ?Sized>(self, value: &T) -> Result<S::Ok, S::Error> {
        self.serialize_str(&value.to_string())
    }
    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

impl<C: SerializeSeq> SerializeSeq for Compound<'_, C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), C::Error> {
        self.separator()?;
        self.inner.serialize_element(&Bounded { value, budget: self.budget })
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.close();
        self.inner.end()
    }
}

impl<C: SerializeTuple> SerializeTuple for Compound<'_, C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), C::Error> {
        self.separator()?;
        self.inner.serialize_element(&Bounded { value, budget: self.budget })
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.close();
        self.inner.end()
    }
}

impl<C: SerializeTupleStruct> SerializeTupleStruct for Compound<'_, C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), C::Error> {
        self.separator()?;
        self.inner.serialize_field(&Bounded { value, budget: self.budget })
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.close();
        self.inner.end()
    }
}

impl<C: SerializeTupleVariant> SerializeTupleVariant for Compound<'_, C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), C::Error> {
        self.separator()?;
        self.inner.serialize_field(&Bounded { value, budget: self.budget })
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.close();
        self.inner.end()
    }
}

impl<C: SerializeMap> SerializeMap for Compound<'_, C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), C::Error> {
        self.separator()?;
        // The colon; and the quotes `serde_json` puts around a key that is not a string (an integer, say).
        self.budget.slack(2);
        self.budget.add(1)?;
        self.inner.serialize_key(&Bounded { value: key, budget: self.budget })
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), C::Error> {
        self.inner.serialize_value(&Bounded { value, budget: self.budget })
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.close();
        self.inner.end()
    }
}

impl<C: SerializeStruct> SerializeStruct for Compound<'_, C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), C::Error> {
        self.separator()?;
        self.budget.text(key.len(), 3)?;
        self.inner.serialize_field(key, &Bounded { value, budget: self.budget })
    }
    fn skip_field(&mut self, key: &'static str) -> Result<(), C::Error> {
        self.inner.skip_field(key)
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.close();
        self.inner.end()
    }
}

impl<C: SerializeStructVariant> SerializeStructVariant for Compound<'_, C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), C::Error> {
        self.separator()?;
        self.budget.text(key.len(), 3)?;
        self.inner.serialize_field(key, &Bounded { value, budget: self.budget })
    }
    fn skip_field(&mut self, key: &'static str) -> Result<(), C::Error> {
        self.inner.skip_field(key)
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.close();
        self.inner.end()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Serialize;
    use serde_json::json;

    use super::*;
    use crate::validate::check_limits;

    #[derive(Serialize)]
    enum Shape {
        Unit,
        Newtype(u8),
        Tuple(i32, String),
        Struct { side: f64, label: Option<String> },
    }

    #[derive(Serialize)]
    struct Everything {
        name: String,
        count: u64,
        negative: i64,
        flag: bool,
        ratio: f32,
        letter: char,
        bytes: Vec<u8>,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
        shapes: Vec<Shape>,
        by_key: BTreeMap<u32, Vec<()>>,
        tuple: (u8, (), String),
        nested: Vec<Vec<Vec<u8>>>,
    }

    fn everything() -> Everything {
        Everything {
            name: "a \"quoted\"\nname".into(),
            count: u64::MAX,
            negative: i64::MIN,
            flag: false,
            ratio: 0.25,
            letter: 'é',
            bytes: vec![0, 255, 7],
            skipped: None,
            shapes: vec![
                Shape::Unit,
                Shape::Newtype(3),
                Shape::Tuple(-1, "t".into()),
                Shape::Struct { side: 1.5, label: None },
            ],
            by_key: BTreeMap::from([(1, vec![()]), (20, vec![])]),
            tuple: (1, (), "x".into()),
            nested: vec![vec![vec![1, 2], vec![]]],
        }
    }

    #[test]
    fn within_the_limits_the_value_is_serde_jsons() {
        let expected = serde_json::to_value(everything()).unwrap();
        let (v, within) = to_value_within(&everything(), &Limits::DEFAULT).unwrap();
        assert_eq!(within, Within::Certainly);
        assert_eq!(v, expected);
        assert_eq!(serde_json::to_string(&v).unwrap(), serde_json::to_string(&expected).unwrap());
    }

    #[test]
    fn it_never_stops_a_value_the_exact_check_accepts() {
        // At every byte limit and depth around the value's own, stopping implies the exact check refuses.
        let exact = serde_json::to_value(everything()).unwrap();
        let size = serde_json::to_string(&exact).unwrap().len();
        for max_bytes in [0, 1, size / 2, size - 1, size, size + 1] {
            for max_depth in [0, 1, 2, 3, 4, 5, 64] {
                let limits = Limits { max_depth, max_bytes };
                match to_value_within(&everything(), &limits) {
                    Ok((v, within)) => {
                        assert_eq!(v, exact);
                        if within == Within::Certainly {
                            assert_eq!(check_limits(&exact, &limits), Ok(()), "certainly within {limits:?}");
                        }
                    }
                    Err(OutputError::Exceeded(what)) => {
                        let verdict = check_limits(&exact, &limits);
                        assert!(verdict.is_err(), "stopped ({what}) a value within {limits:?}");
                    }
                    Err(OutputError::Serde(e)) => panic!("{e}"),
                }
            }
        }
        // The full size and depth pass.
        assert!(to_value_within(&everything(), &Limits { max_depth: 5, max_bytes: size }).is_ok());
    }

    #[test]
    fn a_large_result_stops_near_the_limit() {
        let big = vec!["x".repeat(1024); 64 * 1024];
        let limits = Limits { max_depth: 8, max_bytes: 1024 * 1024 };
        match to_value_within(&big, &limits) {
            Err(OutputError::Exceeded(what)) => assert_eq!(what, "at most 1048576 bytes"),
            other => panic!("{other:?}"),
        }
        let deep = json!([[[[[[1]]]]]]);
        match to_value_within(&deep, &Limits { max_depth: 5, max_bytes: 100 }) {
            Err(OutputError::Exceeded(what)) => assert_eq!(what, "at most 5 levels of nested arrays and objects"),
            other => panic!("{other:?}"),
        }
    }

    /// "Certainly within" is never said of a value the exact check refuses: around the exact size of values whose
    /// escapes, floats and integer keys make the upper bound loose.
    #[test]
    fn certainly_within_means_the_exact_check_accepts() {
        #[derive(Serialize)]
        struct Escapes {
            controls: String,
            quotes: Vec<String>,
            floats: Vec<f64>,
            keys: BTreeMap<i64, char>,
        }
        let values = [
            Escapes { controls: "\u{1}".repeat(40), quotes: vec![], floats: vec![], keys: BTreeMap::new() },
            Escapes {
                controls: String::new(),
                quotes: vec!["\"\\".into(); 5],
                floats: vec![f64::MIN_POSITIVE, -1.5, 1e300, f64::NAN],
                keys: BTreeMap::from([(-7, '\n'), (123_456, 'x')]),
            },
        ];
        let (mut certain, mut unsure) = (0, 0);
        for value in &values {
            let exact = serde_json::to_value(value).unwrap();
            let size = serde_json::to_string(&exact).unwrap().len();
            for max_bytes in (size.saturating_sub(8)..size + 400).step_by(3) {
                let limits = Limits { max_depth: 3, max_bytes };
                if let Ok((v, within)) = to_value_within(value, &limits) {
                    assert_eq!(v, exact);
                    match within {
                        Within::Certainly => {
                            certain += 1;
                            assert_eq!(check_limits(&exact, &limits), Ok(()), "{limits:?}");
                        }
                        Within::Unsure => unsure += 1,
                    }
                }
            }
        }
        assert!(certain > 0 && unsure > 0, "{certain} certain, {unsure} unsure");
        // Within its lower bound but beyond the limit once escaped: the caller is told to check.
        let (v, within) = to_value_within(&"\u{1}".repeat(100), &Limits { max_depth: 1, max_bytes: 300 }).unwrap();
        assert_eq!(within, Within::Unsure);
        assert!(check_limits(&v, &Limits { max_depth: 1, max_bytes: 300 }).is_err());
    }

    /// A value `serde_json` is handed as text (its private struct names) is never certainly within the limits.
    #[test]
    fn text_handed_to_serde_json_is_checked() {
        struct Opaque;
        impl Serialize for Opaque {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeStruct as _;
                let mut s = serializer.serialize_struct("$serde_json::private::RawValue", 1)?;
                s.serialize_field("$serde_json::private::RawValue", "[[[[1]]]]")?;
                s.end()
            }
        }
        let (_, within) = to_value_within(&Opaque, &Limits::DEFAULT).unwrap();
        assert_eq!(within, Within::Unsure);
    }

    #[test]
    fn serde_jsons_own_refusals_are_kept_apart() {
        let map = BTreeMap::from([(vec![1u8], 1)]);
        assert!(matches!(to_value_within(&map, &Limits::DEFAULT), Err(OutputError::Serde(_))));
    }
}
