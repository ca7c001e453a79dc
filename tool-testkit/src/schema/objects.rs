//! Objects: valid ones (declared, required and map properties, `propertyNames`, the number of properties) and
//! broken ones (a required property missing, an unknown one where the object is closed, a property broken).

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::strings::lower;
use super::types::any_value;
use super::{At, Broken, Gen, MAX_ITEMS, R, S, Unsupported, join, show};

/// The name of the property added where objects are closed.
const UNKNOWN: &str = "testkit_unknown_property";

/// An object to generate, read from one schema or merged from several.
#[derive(Default)]
pub(super) struct ObjectSpec<'a> {
    /// Name, schema, schema pointer; in declaration order.
    pub(super) properties: Vec<(String, &'a Value, String)>,
    pub(super) required: Vec<String>,
    pub(super) additional: Additional<'a>,
    names: Option<(&'a Value, String)>,
    min: Option<usize>,
    max: Option<usize>,
}

/// What an object holds beside its declared properties.
#[derive(Default)]
pub(super) enum Additional<'a> {
    /// Other properties are allowed; none is generated.
    #[default]
    Open,
    /// Only the declared properties.
    Closed,
    /// A map: other properties with values of this schema.
    Map(&'a Value, String),
}

impl<'a> Gen<'a> {
    /// The object `m` describes.
    pub(super) fn object_spec(&self, m: &'a Map<String, Value>, pointer: &str) -> R<ObjectSpec<'a>> {
        let mut spec = ObjectSpec::default();
        match m.get("properties") {
            None => {}
            Some(Value::Object(props)) => {
                for (name, schema) in props {
                    spec.properties.push((name.clone(), schema, join(&format!("{pointer}/properties"), name)));
                }
            }
            Some(_) => return Err(Unsupported::new(pointer, "`properties` that is not an object")),
        }
        for r in m.get("required").and_then(Value::as_array).into_iter().flatten() {
            let r = r.as_str().ok_or_else(|| Unsupported::new(pointer, "a `required` name that is not a string"))?;
            if !spec.required.iter().any(|x| x == r) {
                spec.required.push(r.to_owned());
            }
        }
        spec.additional = match m.get("additionalProperties") {
            None | Some(Value::Bool(true)) => {
                if m.get("unevaluatedProperties") == Some(&Value::Bool(false)) {
                    Additional::Closed
                } else {
                    Additional::Open
                }
            }
            Some(Value::Bool(false)) => Additional::Closed,
            Some(schema) => Additional::Map(schema, format!("{pointer}/additionalProperties")),
        };
        spec.names = m.get("propertyNames").map(|n| (n, format!("{pointer}/propertyNames")));
        spec.min = m.get("minProperties").and_then(Value::as_u64).map(|n| n as usize);
        if spec.min.is_some_and(|n| n > MAX_ITEMS) {
            return Err(Unsupported::new(pointer, format!("a `minProperties` above {MAX_ITEMS}")));
        }
        spec.max = m.get("maxProperties").and_then(Value::as_u64).map(|n| n as usize);
        Ok(spec)
    }

    /// Objects with every required property, each optional one or not, and a few map entries.
    pub(super) fn object(&self, spec: &ObjectSpec<'a>, pointer: &str, at: At) -> R<S> {
        let mut fields: Vec<BoxedStrategy<Option<(String, Value)>>> = Vec::new();
        for (name, schema, p) in &spec.properties {
            let required = spec.required.contains(name);
            if !required && (at.soft() || **schema == Value::Bool(false)) {
                continue;
            }
            let value = match self.valid(schema, p, at.child()) {
                Ok(v) => v,
                // An optional property is left out: the object is valid without it.
                Err(e) if !required => {
                    self.leave_out(format!("the optional property `{p}`"), &e);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let name = name.clone();
            let field = value.prop_map(move |v| (name.clone(), v));
            fields.push(if required { field.prop_map(Some).boxed() } else { proptest::option::of(field).boxed() });
        }
        for name in &spec.required {
            if spec.properties.iter().any(|(n, _, _)| n == name) {
                continue;
            }
            let value = match &spec.additional {
                Additional::Open => any_value(at.child()),
                Additional::Map(schema, p) => self.valid(schema, p, at.child())?,
                Additional::Closed => {
                    return Err(Unsupported::new(pointer, format!("`{name}` is required but not allowed")));
                }
            };
            let name = name.clone();
            fields.push(value.prop_map(move |v| Some((name.clone(), v))).boxed());
        }
        let declared: Vec<String> = spec.properties.iter().map(|(n, _, _)| n.clone()).collect();
        let extra: BoxedStrategy<Vec<(String, Value)>> = match &spec.additional {
            Additional::Map(schema, p) => {
                let lo = spec.min.unwrap_or(0).saturating_sub(spec.required.len());
                let hi = if at.soft() {
                    lo
                } else {
                    (lo + 3).min(spec.max.unwrap_or(usize::MAX).saturating_sub(spec.required.len()).max(lo))
                };
                if hi == 0 {
                    Just(Vec::new()).boxed()
                } else {
                    let key = match &spec.names {
                        Some((names, np)) => self
                            .valid(names, np, at.child())?
                            .prop_filter_map("a string property name", |k| k.as_str().map(str::to_owned))
                            .boxed(),
                        None => lower(1, 8),
                    };
                    let value = self.valid(schema, p, at.child())?;
                    proptest::collection::vec((key, value), lo..=hi).boxed()
                }
            }
            _ => Just(Vec::new()).boxed(),
        };
        let (min, max) = (spec.min, spec.max);
        let strategy = (fields, extra).prop_map(move |(fields, extra)| {
            let mut out = Map::new();
            for (k, v) in fields.into_iter().flatten() {
                out.insert(k, v);
            }
            for (k, v) in extra {
                if !declared.contains(&k) && !out.contains_key(&k) {
                    out.insert(k, v);
                }
            }
            Value::Object(out)
        });
        if min.is_some() || max.is_some() {
            Ok(strategy
                .prop_filter("the number of properties within minProperties and maxProperties", move |v| {
                    let n = v.as_object().map_or(0, Map::len);
                    min.is_none_or(|min| n >= min) && max.is_none_or(|max| n <= max)
                })
                .boxed())
        } else {
            Ok(strategy.boxed())
        }
    }

    /// Objects `m` refuses: a required property missing, an unknown one where the object is closed, a property or a
    /// map entry broken.
    pub(super) fn object_breaks(
        &self,
        m: &'a Map<String, Value>,
        schema: &'a Value,
        pointer: &str,
        instance: &str,
        at: At,
    ) -> R<Vec<Broken>> {
        let mut out = Vec::new();
        let here = show(instance);
        // A valid object to break; lenient, since the broken value is refused anyway.
        let base = match self.valid(schema, pointer, at) {
            Ok(base) => base,
            Err(_) => return Ok(out),
        };
        let properties = m.get("properties").and_then(Value::as_object);
        for r in m.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            let name = r.to_owned();
            let broken = format!("{here}: the required property `{r}` is missing");
            out.push(
                base.clone()
                    .prop_map(move |mut v| {
                        if let Value::Object(o) = &mut v {
                            o.shift_remove(&name);
                        }
                        (v, broken.clone())
                    })
                    .boxed(),
            );
        }
        let closed = match m.get("additionalProperties") {
            Some(Value::Bool(false)) => true,
            None => {
                m.get("unevaluatedProperties") == Some(&Value::Bool(false)) && self.nothing_else_evaluates(m, pointer)
            }
            _ => false,
        };
        let declares_unknown = |m: &Map<String, Value>| {
            m.get("properties").and_then(Value::as_object).is_some_and(|p| p.contains_key(UNKNOWN))
        };
        if closed && !declares_unknown(m) && !m.contains_key("patternProperties") {
            let broken = format!("{here}: the unknown property `{UNKNOWN}` where the object is closed");
            out.push(
                base.clone()
                    .prop_map(move |mut v| {
                        if let Value::Object(o) = &mut v {
                            o.insert(UNKNOWN.to_owned(), json!(1));
                        }
                        (v, broken.clone())
                    })
                    .boxed(),
            );
        }
        for (name, sub) in properties.into_iter().flatten() {
            let p = join(&format!("{pointer}/properties"), name);
            let default = sub.get("default");
            for broken_value in self.invalid(sub, &p, &join(instance, name), at.child(), default)? {
                let name = name.clone();
                out.push(
                    (base.clone(), broken_value)
                        .prop_map(move |(mut v, (x, broken))| {
                            if let Value::Object(o) = &mut v {
                                o.insert(name.clone(), x);
                            }
                            (v, broken)
                        })
                        .boxed(),
                );
            }
        }
        if let Some(map) = m.get("additionalProperties").filter(|a| a.is_object())
            && !m.contains_key("propertyNames")
            && !m.contains_key("patternProperties")
            && properties.is_none_or(|p| !p.contains_key("testkit_key"))
        {
            let p = format!("{pointer}/additionalProperties");
            for broken_value in self.invalid(map, &p, &join(instance, "testkit_key"), at.child(), None)? {
                out.push(
                    (base.clone(), broken_value)
                        .prop_map(|(mut v, (x, broken))| {
                            if let Value::Object(o) = &mut v {
                                o.insert("testkit_key".to_owned(), x);
                            }
                            (v, broken)
                        })
                        .boxed(),
                );
            }
        }
        Ok(out)
    }

    /// Whether no subschema applied in place (through `$ref`, `allOf`, `anyOf`, `oneOf`) may evaluate a property
    /// it does not name, nor names the probe: then `unevaluatedProperties: false` refuses the probe.
    fn nothing_else_evaluates(&self, m: &'a Map<String, Value>, pointer: &str) -> bool {
        fn walk<'a>(g: &Gen<'a>, m: &'a Map<String, Value>, pointer: &str, depth: usize, top: bool) -> bool {
            if depth > 16 {
                return false;
            }
            if !top
                && (m.get("additionalProperties").is_some_and(|a| a != &Value::Bool(false))
                    || m.contains_key("patternProperties")
                    || m.get("unevaluatedProperties").is_some_and(|a| a != &Value::Bool(false))
                    || m.get("properties").and_then(Value::as_object).is_some_and(|p| p.contains_key(UNKNOWN)))
            {
                return false;
            }
            if let Some(r) = m.get("$ref") {
                let Ok((t, p)) = g.resolve(r, pointer) else { return false };
                match t {
                    Value::Object(t) => {
                        if !walk(g, t, &p, depth + 1, false) {
                            return false;
                        }
                    }
                    Value::Bool(false) => {}
                    _ => return false,
                }
            }
            for k in ["allOf", "anyOf", "oneOf"] {
                for b in m.get(k).and_then(Value::as_array).into_iter().flatten() {
                    match b {
                        Value::Object(b) => {
                            if !walk(g, b, pointer, depth + 1, false) {
                                return false;
                            }
                        }
                        Value::Bool(false) => {}
                        _ => return false,
                    }
                }
            }
            true
        }
        walk(self, m, pointer, 0, true)
    }
}
