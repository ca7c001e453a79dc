//! The types a schema allows, and a valid value of one of them: the dispatch of the valid values (`true`, `$ref`,
//! compositions, `const`, `enum`, each `type`).

use proptest::prelude::*;
use proptest::strategy::Union;
use serde_json::{Map, Value, json};

use super::keywords::asserts_beside;
use super::strings::{FORMATS, lower, string_of};
use super::{At, Gen, Kind, R, S, Unsupported};
use crate::imports::vocabulary;

/// The JSON types a value of `type` may have; `None` without `type`.
pub(super) fn types_of(m: &Map<String, Value>, pointer: &str) -> R<Option<Vec<String>>> {
    match m.get("type") {
        None => Ok(None),
        Some(Value::String(t)) => Ok(Some(vec![t.clone()])),
        Some(Value::Array(ts)) => ts
            .iter()
            .map(|t| {
                t.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| Unsupported::new(pointer, "a `type` list that holds a non-string"))
            })
            .collect::<R<Vec<_>>>()
            .map(Some),
        Some(_) => Err(Unsupported::new(pointer, "a `type` that is neither a string nor a list")),
    }
}

/// The types a schema without `type` describes, from its keywords; empty when it describes any value.
pub(super) fn inferred_types(m: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    let has = |keys: &[&str]| keys.iter().any(|k| m.contains_key(*k));
    if has(&[
        "properties",
        "required",
        "additionalProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "unevaluatedProperties",
    ]) {
        out.push("object".to_owned());
    }
    if has(&["items", "prefixItems", "minItems", "maxItems", "uniqueItems"]) {
        out.push("array".to_owned());
    }
    if has(&["minLength", "maxLength", "pattern"])
        || m.get("format").and_then(Value::as_str).is_some_and(|f| FORMATS.contains(&f))
    {
        out.push("string".to_owned());
    }
    if has(&["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]) {
        out.push("number".to_owned());
    }
    out
}

/// Whether `v` is of one of `types`.
fn type_fits(types: &[String], v: &Value) -> bool {
    types.iter().any(|t| vocabulary::is_instance_of(v, t))
}

/// A value of none of `types`, never `null` (which the executor reads as "absent" for an optional property).
pub(super) fn wrong_type(types: &[String]) -> Option<Value> {
    let candidates = [json!("not-a-valid-value"), json!(7), json!(0.5), json!(true), json!({}), json!([])];
    candidates.into_iter().find(|v| !type_fits(types, v))
}

/// A small JSON value of any type (for `true` schemas and untyped items).
pub(super) fn any_value(at: At) -> S {
    let scalar = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-1000i64..=1000).prop_map(Value::from),
        string_of(0, 8).prop_map(Value::String),
    ];
    if at.soft() {
        return scalar.boxed();
    }
    prop_oneof![
        4 => scalar.clone(),
        1 => proptest::collection::vec(scalar.clone(), 0..=3).prop_map(Value::Array),
        1 => proptest::collection::vec((lower(1, 6), scalar), 0..=3).prop_map(|kv| Value::Object(kv.into_iter().collect())),
    ]
    .boxed()
}

impl<'a> Gen<'a> {
    /// Values `schema` accepts; `pointer` is where it sits in the root schema.
    pub(super) fn valid(&self, schema: &'a Value, pointer: &str, at: At) -> R<S> {
        self.tick(pointer)?;
        if at.hard() {
            return Err(
                Unsupported::new(pointer, "the schema nests (or recurses) too deep to end").with_kind(Kind::TooDeep)
            );
        }
        let m = match schema {
            Value::Bool(true) => return Ok(any_value(at)),
            Value::Bool(false) => return Err(Unsupported::new(pointer, "the schema `false` accepts no value")),
            Value::Object(m) => m,
            _ => return Err(Unsupported::new(pointer, "not a schema")),
        };
        self.check_keywords(m, pointer)?;
        if let Some(reference) = m.get("$ref") {
            if asserts_beside(m, &["$ref"]) {
                return self.composed(m, pointer, at);
            }
            let (target, target_pointer) = self.resolve(reference, pointer)?;
            self.refs_followed.set(self.refs_followed.get() + 1);
            return self.valid(target, &target_pointer, at.through_ref());
        }
        if ["allOf", "anyOf", "oneOf"].iter().any(|k| m.contains_key(*k)) {
            return self.composed(m, pointer, at);
        }
        self.typed(m, pointer, at)
    }

    /// Values of a node that is no `$ref` or composition: its `const`, one of its `enum`, or a value of a type it
    /// allows.
    fn typed(&self, m: &'a Map<String, Value>, pointer: &str, at: At) -> R<S> {
        let declared = types_of(m, pointer)?;
        if let Some(c) = m.get("const") {
            return Ok(Just(c.clone()).boxed());
        }
        if let Some(e) = m.get("enum") {
            let Value::Array(values) = e else { return Err(Unsupported::new(pointer, "an `enum` that is not a list")) };
            let mut candidates: Vec<Value> =
                values.iter().filter(|v| declared.as_ref().is_none_or(|t| type_fits(t, v))).cloned().collect();
            if asserts_beside(m, &["enum", "type"]) && !candidates.is_empty() {
                let check = self.compile(&Value::Object(m.clone()), pointer)?;
                candidates.retain(|v| check.is_valid(v));
            }
            if candidates.is_empty() {
                return Err(Unsupported::new(pointer, "no value of the `enum` fits the rest of the schema"));
            }
            return Ok(proptest::sample::select(candidates).boxed());
        }
        let types = declared.unwrap_or_else(|| inferred_types(m));
        if types.is_empty() {
            return Ok(any_value(at));
        }
        let mut strategies = Vec::new();
        for t in &types {
            strategies.push(match t.as_str() {
                "null" => Just(Value::Null).boxed(),
                "boolean" => any::<bool>().prop_map(Value::Bool).boxed(),
                "integer" => self.integer(m, pointer)?,
                "number" => self.number(m, pointer)?,
                "string" => self.string(m, pointer)?,
                "array" => self.array(m, pointer, at)?,
                "object" => self.object(&self.object_spec(m, pointer)?, pointer, at)?,
                other => return Err(Unsupported::new(pointer, format!("the type `{other}`"))),
            });
        }
        Ok(if strategies.len() == 1 { strategies.remove(0) } else { Union::new(strategies).boxed() })
    }
}
