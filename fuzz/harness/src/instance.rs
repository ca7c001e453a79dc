//! The generator: valid instances of a schema, as proptest strategies.

use proptest::prelude::*;
use proptest::strategy::SBoxedStrategy;
use serde_json::{Map, Value, json};

use crate::oracle::{Num, Oracle, integer_range, num};

/// Past this depth of `$ref`s, arrays are generated at their minimum length and optional properties left out, so
/// recursive schemas stay finite.
const MAX_GEN_DEPTH: usize = 4;

/// Characters of generated strings: mostly lowercase letters, sometimes punctuation, escapes, control characters,
/// non-ASCII and invisible characters. Picked by index from one table (a union per character would make generation
/// several times slower).
const TEXT_CHARS: [char; 44] = [
    'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l', 'm', 'n', 'o', 'p', 'q', 'r', 's', 't', 'u', 'v', 'w',
    'x', 'y', 'z', 'A', 'Z', '0', '9', ' ', '-', '_', '.', '/', ':', '"', '\\', '\n', '\u{0}', 'é', '中', '😀',
    '\u{200b}',
];

fn string_of(min: usize, max: usize) -> SBoxedStrategy<Value> {
    prop::collection::vec(0..TEXT_CHARS.len(), min..=max)
        .prop_map(|ix| Value::String(ix.into_iter().map(|i| TEXT_CHARS[i]).collect()))
        .sboxed()
}

fn bound(s: &Map<String, Value>, key: &str) -> Option<Num> {
    s.get(key).and_then(Value::as_number).map(num)
}

fn integer_strategy(s: &Map<String, Value>) -> SBoxedStrategy<Value> {
    let (mut lo, mut hi) = (i128::from(i64::MIN), i128::from(u64::MAX));
    if let Some((flo, fhi)) = s.get("format").and_then(Value::as_str).and_then(integer_range) {
        lo = lo.max(flo);
        hi = hi.min(fhi);
    }
    if let Some(Num::Int(m)) = bound(s, "minimum") {
        lo = lo.max(m);
    }
    if let Some(Num::Int(m)) = bound(s, "maximum") {
        hi = hi.min(m);
    }
    assert!(lo <= hi, "empty integer range in {s:?}");
    let to_value = |i: i128| match i64::try_from(i) {
        Ok(i) => Value::from(i),
        Err(_) => Value::from(u64::try_from(i).expect("within u64")),
    };
    let (l, h) = (to_value(lo), to_value(hi));
    let zero = to_value(0i128.clamp(lo, hi));
    let middle: SBoxedStrategy<Value> = if hi <= i128::from(i64::MAX) {
        ((lo as i64)..=(hi as i64)).prop_map(Value::from).sboxed()
    } else if lo >= 0 {
        ((lo as u64)..=(hi as u64)).prop_map(Value::from).sboxed()
    } else {
        prop_oneof![((lo as i64)..=-1i64).prop_map(Value::from), (0u64..=(hi as u64)).prop_map(Value::from)].sboxed()
    };
    let small = ((lo.max(-3) as i64)..=(hi.min(300).max(lo.max(-3)) as i64)).prop_map(Value::from);
    prop_oneof![1 => Just(l), 1 => Just(h), 1 => Just(zero), 3 => small, 4 => middle].sboxed()
}

fn number_strategy(s: &Map<String, Value>) -> SBoxedStrategy<Value> {
    let as_f64 = |n: Option<Num>| match n {
        Some(Num::Int(i)) => Some(i as f64),
        Some(Num::Float(f)) => Some(f),
        None => None,
    };
    let lo = as_f64(bound(s, "minimum")).unwrap_or(-1e12);
    let hi = as_f64(bound(s, "maximum")).unwrap_or(1e12);
    let finite = |f: f64| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number);
    prop_oneof![
        1 => Just(finite(lo)),
        1 => Just(finite(hi)),
        4 => (lo..=hi).prop_map(finite),
        2 => ((lo.max(-1000.0) as i64)..=(hi.min(1000.0) as i64)).prop_map(Value::from),
    ]
    .sboxed()
}

/// Valid instances of `schema` (within `root`); `depth` counts the `$ref`s followed so far.
pub fn instance(root: &Value, schema: &Value, depth: usize) -> SBoxedStrategy<Value> {
    let s = match schema {
        Value::Bool(true) => return Just(json!("anything")).sboxed(),
        Value::Object(s) => s,
        other => panic!("cannot generate instances of {other}"),
    };
    if let Some(r) = s.get("$ref") {
        let target = Oracle::new(root, false).resolve(r);
        return instance(root, target, depth + 1);
    }
    if let Some(values) = s.get("enum").and_then(Value::as_array) {
        return prop::sample::select(values.clone()).sboxed();
    }
    if let Some(c) = s.get("const") {
        return Just(c.clone()).sboxed();
    }
    for keyword in ["anyOf", "oneOf"] {
        if let Some(branches) = s.get(keyword).and_then(Value::as_array) {
            let branches: Vec<_> = branches.iter().map(|b| instance(root, b, depth)).collect();
            return proptest::strategy::Union::new(branches).sboxed();
        }
    }
    let types: Vec<&str> = match s.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ if s.contains_key("properties") => vec!["object"],
        _ => vec!["null", "boolean", "integer", "string"],
    };
    let per_type: Vec<SBoxedStrategy<Value>> = types
        .into_iter()
        .map(|t| match t {
            "null" => Just(Value::Null).sboxed(),
            "boolean" => any::<bool>().prop_map(Value::Bool).sboxed(),
            "integer" => integer_strategy(s),
            "number" => number_strategy(s),
            "string" => {
                let min = s.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
                let max = s.get("maxLength").and_then(Value::as_u64).map_or(min + 24, |m| m as usize).min(min + 24);
                string_of(min, max)
            }
            "array" => {
                let min = s.get("minItems").and_then(Value::as_u64).unwrap_or(0) as usize;
                let max = if depth >= MAX_GEN_DEPTH {
                    min
                } else {
                    s.get("maxItems").and_then(Value::as_u64).map_or(min + 4, |m| m as usize).min(min + 4)
                };
                if max == 0 {
                    return Just(json!([])).sboxed();
                }
                let items =
                    s.get("items").map_or_else(|| instance(root, &json!({}), depth), |i| instance(root, i, depth));
                prop::collection::vec(items, min..=max).prop_map(Value::Array).sboxed()
            }
            "object" => object_strategy(root, s, depth),
            other => panic!("cannot generate type {other}"),
        })
        .collect();
    proptest::strategy::Union::new(per_type).sboxed()
}

fn object_strategy(root: &Value, s: &Map<String, Value>, depth: usize) -> SBoxedStrategy<Value> {
    let required: Vec<&str> =
        s.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let mut fields: Vec<SBoxedStrategy<Option<(String, Value)>>> = Vec::new();
    for (name, ps) in s.get("properties").and_then(Value::as_object).into_iter().flatten() {
        let name = name.clone();
        if required.contains(&name.as_str()) {
            let value = instance(root, ps, depth);
            fields.push(value.prop_map(move |v| Some((name.clone(), v))).sboxed());
        } else if depth < MAX_GEN_DEPTH {
            let value = instance(root, ps, depth);
            fields.push(prop::option::weighted(0.6, value.prop_map(move |v| (name.clone(), v))).sboxed());
        }
    }
    let extra: SBoxedStrategy<Vec<(String, Value)>> = match s.get("additionalProperties") {
        Some(extra @ Value::Object(_)) if depth < MAX_GEN_DEPTH => {
            prop::collection::vec(("[a-z]{1,6}", instance(root, extra, depth)), 0..3).sboxed()
        }
        _ => Just(Vec::new()).sboxed(),
    };
    (fields, extra)
        .prop_map(|(fields, extra)| {
            let mut o = Map::new();
            // Extra keys first, so that a declared property of the same name wins.
            o.extend(extra);
            o.extend(fields.into_iter().flatten());
            Value::Object(o)
        })
        .sboxed()
}
