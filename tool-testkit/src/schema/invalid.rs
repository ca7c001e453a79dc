//! Values a schema must refuse: the dispatch of the breaks, and the breaks of a node itself (a wrong type, a value
//! outside `enum`/`const`, a length, a bound).

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::keywords::asserts_beside;
use super::numbers::numeric_breaks;
use super::types::{inferred_types, types_of, wrong_type};
use super::{At, Broken, Gen, R, show};
use crate::imports::vocabulary;

impl<'a> Gen<'a> {
    /// Values `schema` refuses, each with what is broken; `instance` is where the value sits in the arguments.
    /// `default` is the `default` of the property the value fills, which the executor would read as absent.
    pub(super) fn invalid(
        &self,
        schema: &'a Value,
        pointer: &str,
        instance: &str,
        at: At,
        default: Option<&Value>,
    ) -> R<Vec<Broken>> {
        self.tick(pointer)?;
        let Value::Object(m) = schema else { return Ok(Vec::new()) };
        if at.soft() {
            return Ok(Vec::new());
        }
        if let Some(reference) = m.get("$ref")
            && !asserts_beside(m, &["$ref"])
        {
            let (target, p) = self.resolve(reference, pointer)?;
            let default = default.or_else(|| m.get("default"));
            return self.invalid(target, &p, instance, at.through_ref(), default);
        }
        let default = default.or_else(|| m.get("default")).cloned();
        let mut out: Vec<Broken> = Vec::new();
        // Values broken at this node itself.
        let mut own: Vec<(Value, String)> = Vec::new();
        let mut push = |value: Value, broken: String| own.push((value, broken));
        let declared = types_of(m, pointer)?;
        let union_types = self.union_types(m, pointer, 0);
        let types = declared.clone().or_else(|| union_types.clone());
        let here = show(instance);

        // A value of a type the schema does not accept.
        if let Some(types) = &types
            && let Some(wrong) = wrong_type(types)
        {
            push(wrong.clone(), format!("{here}: {} where the schema wants {}", short(&wrong), types.join(" or ")));
        }
        // A value outside `enum` / `const` (of an accepted type where possible).
        let values: Option<Vec<Value>> = match (m.get("enum"), m.get("const")) {
            (Some(Value::Array(e)), _) => Some(e.clone()),
            (_, Some(c)) => Some(vec![c.clone()]),
            _ => self.union_consts(m, pointer),
        };
        if let Some(values) = &values
            && let Some(outside) = outside_of(values)
        {
            push(outside.clone(), format!("{here}: {} is not one of the allowed values", short(&outside)));
        }
        let allows =
            |t: &str| types.as_ref().is_none_or(|ts| ts.iter().any(|x| x == t || (t == "integer" && x == "number")));
        // Strings.
        if allows("string") {
            if let Some(n) = m.get("minLength").and_then(Value::as_u64).filter(|n| *n > 0 && *n <= 10_000) {
                push(Value::String("a".repeat(n as usize - 1)), format!("{here}: a string shorter than minLength {n}"));
            }
            if let Some(n) = m.get("maxLength").and_then(Value::as_u64).filter(|n| *n < 10_000) {
                push(Value::String("a".repeat(n as usize + 1)), format!("{here}: a string longer than maxLength {n}"));
            }
        }
        // Numbers.
        if allows("integer") || allows("number") {
            let integer = types.as_ref().is_some_and(|ts| ts.iter().all(|t| t != "number")) && allows("integer");
            for (value, broken) in numeric_breaks(m, integer) {
                push(value, format!("{here}: {broken}"));
            }
        }
        out.extend(
            own.into_iter()
                .filter(|(v, _)| default.as_ref().is_none_or(|d| !vocabulary::json_equal(d, v)))
                .map(|case| Just(case).boxed()),
        );
        // Arrays.
        let is = |t: &str| {
            types.as_ref().is_some_and(|ts| ts.iter().any(|x| x == t))
                || (types.is_none() && inferred_types(m).iter().any(|x| x == t))
        };
        if is("array") {
            out.extend(self.array_breaks(m, pointer, instance, at)?);
        }
        // Objects.
        if is("object") {
            out.extend(self.object_breaks(m, schema, pointer, instance, at)?);
        }
        // Every `allOf` part applies.
        if let Some(Value::Array(parts)) = m.get("allOf") {
            for (i, part) in parts.iter().enumerate() {
                out.extend(self.invalid(part, &format!("{pointer}/allOf/{i}"), instance, at.child(), None)?);
            }
        }
        Ok(out)
    }

    /// The types every branch of an `anyOf`/`oneOf` node accepts, when each says.
    fn union_types(&self, m: &'a Map<String, Value>, pointer: &str, depth: usize) -> Option<Vec<String>> {
        if depth > 16 || asserts_beside(m, &["anyOf", "oneOf"]) {
            return None;
        }
        let branches = m.get("anyOf").or_else(|| m.get("oneOf"))?.as_array()?;
        let mut out: Vec<String> = Vec::new();
        for (i, b) in branches.iter().enumerate() {
            let (b, p) = self.resolve_chain(b, format!("{pointer}/{i}")).ok()?;
            let b = b.as_object()?;
            let types = if let Some(t) = types_of(b, &p).ok()? {
                t
            } else if let Some(Value::Array(e)) = b.get("enum") {
                e.iter().map(|v| vocabulary::instance_type(v).to_owned()).collect()
            } else if let Some(c) = b.get("const") {
                vec![vocabulary::instance_type(c).to_owned()]
            } else {
                self.union_types(b, &p, depth + 1)?
            };
            for t in types {
                if !out.contains(&t) {
                    out.push(t);
                }
            }
        }
        Some(out)
    }

    /// The values of an `anyOf`/`oneOf` whose every branch is a `const` or an `enum` (a documented enum).
    fn union_consts(&self, m: &'a Map<String, Value>, pointer: &str) -> Option<Vec<Value>> {
        if asserts_beside(m, &["anyOf", "oneOf"]) {
            return None;
        }
        let branches = m.get("anyOf").or_else(|| m.get("oneOf"))?.as_array()?;
        let mut out = Vec::new();
        for (i, b) in branches.iter().enumerate() {
            let (b, _) = self.resolve_chain(b, format!("{pointer}/{i}")).ok()?;
            let b = b.as_object()?;
            match (b.get("enum"), b.get("const")) {
                (Some(Value::Array(e)), _) => out.extend(e.iter().cloned()),
                (_, Some(c)) => out.push(c.clone()),
                _ => return None,
            }
        }
        Some(out)
    }
}

/// A value equal to none of `values`, of the same kind as the first where possible, never `null`.
fn outside_of(values: &[Value]) -> Option<Value> {
    let fresh = |v: &Value| !values.iter().any(|x| vocabulary::json_equal(x, v));
    let mut candidates = Vec::new();
    match values.first() {
        Some(Value::String(s)) => {
            candidates.push(Value::String(format!("{s}-not-one-of")));
            candidates.push(Value::String("testkit-not-one-of".to_owned()));
        }
        Some(Value::Number(_)) => {
            let max = values.iter().filter_map(Value::as_f64).fold(f64::MIN, f64::max);
            if max < 1e15 {
                candidates.push(json!(max.floor() as i64 + 1));
            }
        }
        Some(Value::Bool(b)) => candidates.push(Value::Bool(!b)),
        _ => {}
    }
    candidates.extend([
        json!("testkit-not-one-of"),
        json!(987_654_321),
        json!(false),
        json!(true),
        json!([]),
        json!({}),
    ]);
    candidates.into_iter().find(|v| fresh(v))
}

pub(super) fn short(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() > 40 { format!("{}…", text.chars().take(40).collect::<String>()) } else { text }
}
