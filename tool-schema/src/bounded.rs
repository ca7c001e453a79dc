//! A handler's result turned into a `Value` within the output [`Limits`], stopping as soon as it is certainly too
//! large or too deep: a tool that returns a gigabyte costs the process about the limit, not the gigabyte twice.
//!
//! The result is serialised straight into a `Value` by `ValueSerializer`, which builds what `serde_json`'s own
//! value serializer builds (map keys go through `serde_json`'s rules, text it is handed as a value through
//! `serde_json` itself) and counts on the way. It keeps two counts of the compact JSON size: a lower bound (a
//! string counts its bytes and quotes but not its escapes, a float one byte), past which it stops, so stopping is
//! never wrong; and an upper bound (every byte of a string escaped as `\u00XX`, a float 24 bytes). Depth is counted
//! exactly. When the upper bound is within the limits the value certainly is; otherwise the caller checks the
//! finished value exactly (`Within::Unsure`).

use std::cell::Cell;
use std::fmt::Display;

use serde::ser::{
    self, Impossible, Serialize, SerializeMap, SerializeSeq, SerializeStruct, SerializeStructVariant, SerializeTuple,
    SerializeTupleStruct, SerializeTupleVariant, Serializer,
};
use serde_json::{Error, Map, Value};

use crate::limits::Limits;

/// Why a result could not be made a `Value`.
#[derive(Debug)]
pub enum OutputError {
    /// It is certainly beyond the limits: what it would exceed, in the words of a `Violation`'s `expected`.
    Exceeded(String),
    /// `serde_json` refused it (a map key that is not a string, a failing `Serialize` impl).
    Serde(serde_json::Error),
}

/// Whether a serialised value is known to be within the limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Within {
    /// Certainly: its size's upper bound and its depth are within them.
    Certainly,
    /// Perhaps not: check the value exactly (its escapes may make it too large, or `serde_json` built part of it
    /// from text it was handed: a `RawValue`, an arbitrary-precision number).
    Unsure,
}

/// `value` as a `Value`, unless it is certainly beyond `limits`; and whether it is certainly within them.
pub fn to_value_within<T: Serialize + ?Sized>(value: &T, limits: &Limits) -> Result<(Value, Within), OutputError> {
    let budget = Budget {
        bytes: Cell::new(0),
        slack: Cell::new(0),
        opaque: Cell::new(false),
        depth: Cell::new(0),
        limits: *limits,
        exceeded: Cell::new(None),
    };
    match value.serialize(ValueSerializer { budget: &budget }) {
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
    /// What the upper bound adds to `bytes` (escapes, float digits).
    slack: Cell<usize>,
    /// Set when `serde_json` is handed a value as text (its private struct names): neither count holds for it.
    opaque: Cell<bool>,
    depth: Cell<usize>,
    limits: Limits,
    /// Set when a limit is passed, so that the error it causes is told apart from `serde_json`'s own.
    exceeded: Cell<Option<String>>,
}

impl Budget {
    #[inline]
    fn add(&self, n: usize) -> Result<(), Error> {
        let used = self.bytes.get().saturating_add(n);
        self.bytes.set(used);
        if used > self.limits.max_bytes {
            return Err(self.fail(format!("at most {} bytes", self.limits.max_bytes)));
        }
        Ok(())
    }

    /// Adds `n` to the upper bound only.
    #[inline]
    fn slack(&self, n: usize) {
        self.slack.set(self.slack.get().saturating_add(n));
    }

    /// Counts a string of `len` bytes and `around` more (its quotes, a colon, a comma): each of its bytes perhaps
    /// escaped as `\u00XX` (6 bytes).
    #[inline]
    fn text(&self, len: usize, around: usize) -> Result<(), Error> {
        self.slack(len.saturating_mul(5));
        self.add(len.saturating_add(around))
    }

    /// Opens `levels` arrays or objects: deeper by as many, and their brackets.
    #[inline]
    fn open(&self, levels: usize) -> Result<(), Error> {
        let depth = self.depth.get() + levels;
        self.depth.set(depth);
        if depth > self.limits.max_depth {
            return Err(self.fail(format!("at most {} levels of nested arrays and objects", self.limits.max_depth)));
        }
        self.add(2 * levels)
    }

    #[inline]
    fn close(&self, levels: usize) {
        self.depth.set(self.depth.get().saturating_sub(levels));
    }

    #[cold]
    fn fail(&self, what: String) -> Error {
        let error = ser::Error::custom(&what);
        self.exceeded.set(Some(what));
        error
    }
}

/// Builds a `Value` as `serde_json::value::Serializer` does, counting what it builds against the budget.
#[derive(Clone, Copy)]
struct ValueSerializer<'b> {
    budget: &'b Budget,
}

/// A length hint as used: room is reserved for that many elements at once, so a long sequence is reserved for only
/// in part; the rest grows as elements arrive, within the budget.
fn capped(len: usize) -> usize {
    len.min(1024)
}

/// What a float may add to its one counted byte: 24 bytes at most.
const FLOAT_SLACK: usize = 23;

fn digits(n: u128) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

fn signed_digits(n: i128) -> usize {
    digits(n.unsigned_abs()) + usize::from(n < 0)
}

/// The integer methods of [`ValueSerializer`]: count the digits (and sign), then build as `serde_json` does.
macro_rules! integers {
    ($($method:ident($ty:ty) $count:ident),* $(,)?) => {
        $(
            fn $method(self, v: $ty) -> Result<Value, Error> {
                self.budget.add($count(v.into()))?;
                serde_json::value::Serializer.$method(v)
            }
        )*
    };
}

impl<'b> Serializer for ValueSerializer<'b> {
    type Ok = Value;
    type Error = Error;
    type SerializeSeq = Array<'b>;
    type SerializeTuple = Array<'b>;
    type SerializeTupleStruct = Array<'b>;
    type SerializeTupleVariant = Array<'b>;
    type SerializeMap = Object<'b>;
    type SerializeStruct = Struct<'b>;
    type SerializeStructVariant = Object<'b>;

    fn serialize_bool(self, v: bool) -> Result<Value, Error> {
        self.budget.add(if v { 4 } else { 5 })?;
        Ok(Value::Bool(v))
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
    fn serialize_f32(self, v: f32) -> Result<Value, Error> {
        // At least one digit; at most 24 bytes (`-2.2250738585072014e-308`), `null` for a non-finite one.
        self.budget.slack(FLOAT_SLACK);
        self.budget.add(1)?;
        serde_json::value::Serializer.serialize_f32(v)
    }
    fn serialize_f64(self, v: f64) -> Result<Value, Error> {
        self.budget.slack(FLOAT_SLACK);
        self.budget.add(1)?;
        serde_json::value::Serializer.serialize_f64(v)
    }
    fn serialize_char(self, v: char) -> Result<Value, Error> {
        self.budget.text(v.len_utf8(), 2)?;
        Ok(Value::String(v.into()))
    }
    #[inline]
    fn serialize_str(self, v: &str) -> Result<Value, Error> {
        self.budget.text(v.len(), 2)?;
        Ok(Value::String(v.to_owned()))
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<Value, Error> {
        // An array of numbers: at least a digit and a comma each, at most three digits each.
        self.budget.open(1)?;
        self.budget.slack(v.len().saturating_mul(2));
        self.budget.add(v.len().saturating_mul(2).saturating_sub(1))?;
        self.budget.close(1);
        serde_json::value::Serializer.serialize_bytes(v)
    }
    fn serialize_none(self) -> Result<Value, Error> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Value, Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<Value, Error> {
        self.budget.add(4)?;
        Ok(Value::Null)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<Value, Error> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> Result<Value, Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _name: &'static str, value: &T) -> Result<Value, Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Value, Error> {
        // `{"variant": value}`.
        self.budget.open(1)?;
        self.budget.text(variant.len(), 3)?;
        let inner = value.serialize(self)?;
        self.budget.close(1);
        let mut object = Map::with_capacity(1);
        object.insert(variant.to_owned(), inner);
        Ok(Value::Object(object))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Array<'b>, Error> {
        self.budget.open(1)?;
        Ok(Array::new(self.budget, len.unwrap_or(0), None))
    }
    fn serialize_tuple(self, len: usize) -> Result<Array<'b>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Array<'b>, Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Array<'b>, Error> {
        // `{"variant": [...]}`: two levels, both closed by `end`.
        self.budget.open(2)?;
        self.budget.text(variant.len(), 3)?;
        Ok(Array::new(self.budget, len, Some(variant)))
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Object<'b>, Error> {
        self.budget.open(1)?;
        Ok(Object::new(self.budget, len.unwrap_or(0), None))
    }
    fn serialize_struct(self, name: &'static str, len: usize) -> Result<Struct<'b>, Error> {
        if name.starts_with("$serde_json::private::") {
            // A value handed over as text (a `RawValue`, an arbitrary-precision number): `serde_json` builds it,
            // and the finished value is checked exactly.
            self.budget.opaque.set(true);
            return Ok(Struct::Text(serde_json::value::Serializer.serialize_struct(name, len)?));
        }
        self.budget.open(1)?;
        Ok(Struct::Object(Object::new(self.budget, len, None)))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Object<'b>, Error> {
        // `{"variant": {...}}`: two levels, both closed by `end`.
        self.budget.open(2)?;
        self.budget.text(variant.len(), 3)?;
        Ok(Object::new(self.budget, len, Some(variant)))
    }
    fn collect_str<T: Display + ?Sized>(self, value: &T) -> Result<Value, Error> {
        let s = value.to_string();
        self.budget.text(s.len(), 2)?;
        Ok(Value::String(s))
    }
}

/// A finished array or object, closed: as it is, or inside `{"variant": ...}` (two levels closed).
#[inline(always)]
fn closed(budget: &Budget, variant: Option<&'static str>, value: Value) -> Value {
    match variant {
        None => {
            budget.close(1);
            value
        }
        Some(variant) => in_variant(budget, variant, value),
    }
}

/// `{"variant": value}`, two levels closed.
#[inline(never)]
fn in_variant(budget: &Budget, variant: &'static str, value: Value) -> Value {
    budget.close(2);
    let mut outer = Map::with_capacity(1);
    outer.insert(variant.to_owned(), value);
    Value::Object(outer)
}

/// An array being built (or, with `variant`, the array of `{"variant": [...]}`).
struct Array<'b> {
    values: Vec<Value>,
    budget: &'b Budget,
    variant: Option<&'static str>,
}

impl<'b> Array<'b> {
    fn new(budget: &'b Budget, len: usize, variant: Option<&'static str>) -> Array<'b> {
        Array { values: Vec::with_capacity(capped(len)), budget, variant }
    }

    #[inline]
    fn push<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        if !self.values.is_empty() {
            self.budget.add(1)?;
        }
        let value = value.serialize(ValueSerializer { budget: self.budget })?;
        self.values.push(value);
        Ok(())
    }

    fn finish(self) -> Result<Value, Error> {
        Ok(closed(self.budget, self.variant, Value::Array(self.values)))
    }
}

/// The sequence traits of [`Array`]: each element goes to `push`, `end` to `finish`.
macro_rules! array_traits {
    ($($trait:ident::$method:ident),* $(,)?) => {$(
        impl $trait for Array<'_> {
            type Ok = Value;
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
                self.push(value)
            }
            fn end(self) -> Result<Value, Error> {
                self.finish()
            }
        }
    )*};
}

array_traits! {
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field,
}

/// An object being built (or, with `variant`, the object of `{"variant": {...}}`).
struct Object<'b> {
    members: Map<String, Value>,
    budget: &'b Budget,
    variant: Option<&'static str>,
    /// A map's key, between `serialize_key` and `serialize_value`.
    key: Option<String>,
}

impl<'b> Object<'b> {
    #[inline(always)]
    fn new(budget: &'b Budget, len: usize, variant: Option<&'static str>) -> Object<'b> {
        Object { members: Map::with_capacity(capped(len)), budget, variant, key: None }
    }

    /// Counts a member's key: its quotes and colon, and the comma before it.
    #[inline]
    fn count_key(&self, len: usize) -> Result<(), Error> {
        self.budget.text(len, 3 + usize::from(!self.members.is_empty()))
    }

    #[inline]
    fn member<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        self.count_key(key.len())?;
        let value = value.serialize(ValueSerializer { budget: self.budget })?;
        self.members.insert(key.to_owned(), value);
        Ok(())
    }

    fn finish(self) -> Result<Value, Error> {
        Ok(closed(self.budget, self.variant, Value::Object(self.members)))
    }
}

impl SerializeMap for Object<'_> {
    type Ok = Value;
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        let key = key.serialize(KeySerializer)?;
        // A key named twice is counted twice, as the text `serde_json` writes of the type holds it twice; the
        // `Value` keeps the last member of that name, as `serde_json`'s does.
        self.count_key(key.len())?;
        self.key = Some(key);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        let Some(key) = self.key.take() else {
            return Err(ser::Error::custom("serialize_value called before serialize_key"));
        };
        let value = value.serialize(ValueSerializer { budget: self.budget })?;
        self.members.insert(key, value);
        Ok(())
    }
    fn end(self) -> Result<Value, Error> {
        self.finish()
    }
}

impl SerializeStructVariant for Object<'_> {
    type Ok = Value;
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        self.member(key, value)
    }
    fn end(self) -> Result<Value, Error> {
        self.finish()
    }
}

/// A struct being built: an object, or a value `serde_json` is handed as text, built by `serde_json` itself.
enum Struct<'b> {
    Object(Object<'b>),
    Text(<serde_json::value::Serializer as Serializer>::SerializeStruct),
}

impl SerializeStruct for Struct<'_> {
    type Ok = Value;
    type Error = Error;
    #[inline]
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        match self {
            Struct::Object(object) => object.member(key, value),
            Struct::Text(text) => text.serialize_field(key, value),
        }
    }
    fn end(self) -> Result<Value, Error> {
        match self {
            Struct::Object(object) => object.finish(),
            Struct::Text(text) => SerializeStruct::end(text),
        }
    }
}

/// A map key, by `serde_json`'s rules: a string as it is; anything else as `serde_json` makes it a key (integers,
/// booleans and finite floats written out) or refuses it, with its own error.
struct KeySerializer;

/// The key `serde_json` makes of `key`, or its error: the key of a one-member map it builds.
fn serde_json_key<T: Serialize + ?Sized>(key: &T) -> Result<String, Error> {
    let mut map = serde_json::value::Serializer.serialize_map(Some(1))?;
    map.serialize_key(key)?;
    map.serialize_value(&())?;
    match SerializeMap::end(map)? {
        Value::Object(members) => members.into_iter().next().map(|(k, _)| k),
        _ => None,
    }
    .ok_or_else(|| ser::Error::custom("a map key was lost"))
}

/// What `serde_json` answers a key that is no string, number or boolean.
fn key_must_be_a_string() -> Error {
    match serde_json_key(&()) {
        Err(e) => e,
        Ok(_) => ser::Error::custom("key must be a string"),
    }
}

/// The key methods that `serde_json` decides: they hand the value to [`serde_json_key`].
macro_rules! keys_by_serde_json {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(
            fn $method(self, v: $ty) -> Result<String, Error> {
                serde_json_key(&v)
            }
        )*
    };
}

impl Serializer for KeySerializer {
    type Ok = String;
    type Error = Error;
    type SerializeSeq = Impossible<String, Error>;
    type SerializeTuple = Impossible<String, Error>;
    type SerializeTupleStruct = Impossible<String, Error>;
    type SerializeTupleVariant = Impossible<String, Error>;
    type SerializeMap = Impossible<String, Error>;
    type SerializeStruct = Impossible<String, Error>;
    type SerializeStructVariant = Impossible<String, Error>;

    #[inline]
    fn serialize_str(self, v: &str) -> Result<String, Error> {
        Ok(v.to_owned())
    }
    fn serialize_char(self, v: char) -> Result<String, Error> {
        Ok(v.into())
    }
    keys_by_serde_json! {
        serialize_bool(bool),
        serialize_i8(i8), serialize_i16(i16), serialize_i32(i32), serialize_i64(i64), serialize_i128(i128),
        serialize_u8(u8), serialize_u16(u16), serialize_u32(u32), serialize_u64(u64), serialize_u128(u128),
        serialize_f32(f32), serialize_f64(f64),
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_none(self) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit(self) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> Result<String, Error> {
        Ok(variant.to_owned())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _name: &'static str, value: &T) -> Result<String, Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<String, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeTupleStruct, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeStruct, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(key_must_be_a_string())
    }
    fn collect_str<T: Display + ?Sized>(self, value: &T) -> Result<String, Error> {
        Ok(value.to_string())
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

    /// What `serde_json::to_value` makes of `value`, or its error's words; the same from `to_value_within`.
    fn both<T: Serialize>(value: &T) -> (Result<Value, String>, Result<Value, String>) {
        let theirs = serde_json::to_value(value).map_err(|e| e.to_string());
        let ours = match to_value_within(value, &Limits::DEFAULT) {
            Ok((v, _)) => Ok(v),
            Err(OutputError::Serde(e)) => Err(e.to_string()),
            Err(OutputError::Exceeded(what)) => panic!("{what}"),
        };
        (ours, theirs)
    }

    /// Map keys follow `serde_json`'s rules: strings, chars, unit variants and newtypes of them as they are;
    /// integers, booleans and finite floats written out; anything else refused with `serde_json`'s own words.
    #[test]
    fn map_keys_and_refusals_are_serde_jsons() {
        #[derive(Serialize, PartialEq, Eq, PartialOrd, Ord)]
        enum Key {
            North,
        }
        #[derive(Serialize, PartialEq, Eq, PartialOrd, Ord)]
        struct Id(u16);
        macro_rules! same {
            ($($value:expr),* $(,)?) => {$(
                let (ours, theirs) = both(&$value);
                assert_eq!(ours, theirs, "{}", stringify!($value));
            )*};
        }
        same![
            BTreeMap::from([(true, 1), (false, 2)]),
            BTreeMap::from([(-3i8, 'a'), (i8::MAX, 'b')]),
            BTreeMap::from([(u128::MAX, ()), (0, ())]),
            BTreeMap::from([(i128::MIN, 1)]),
            BTreeMap::from([('k', 1)]),
            BTreeMap::from([(Key::North, 1)]),
            BTreeMap::from([(Id(7), "seven")]),
            BTreeMap::from([(vec![1u8], 1)]),
            BTreeMap::from([((), 1)]),
            BTreeMap::from([(Some("x"), 1)]),
            // Numbers beyond what a `Value` holds.
            u128::MAX,
            i128::MIN,
            vec![f64::NAN, f64::INFINITY, -0.0, 1e300],
            vec![f32::NAN, 0.1],
        ];
        // Float keys, finite and not, through a `Serialize` that writes them as keys.
        struct FloatKeys(Vec<f64>);
        impl Serialize for FloatKeys {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap as _;
                let mut map = serializer.serialize_map(Some(self.0.len()))?;
                for (i, k) in self.0.iter().enumerate() {
                    map.serialize_entry(k, &i)?;
                }
                map.end()
            }
        }
        same![FloatKeys(vec![1.5, -2.0, 1e21]), FloatKeys(vec![f64::NAN])];
        let (ours, _) = both(&FloatKeys(vec![f64::NAN]));
        assert!(ours.is_err(), "a non-finite float key is refused");
    }

    #[test]
    fn serde_jsons_own_refusals_are_kept_apart() {
        let map = BTreeMap::from([(vec![1u8], 1)]);
        assert!(matches!(to_value_within(&map, &Limits::DEFAULT), Err(OutputError::Serde(_))));
    }
}
