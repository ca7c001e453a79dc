//! OpenAI's strict mode: the `parameters` both OpenAI APIs are sent, strict whenever the schema allows it.
//!
//! With `"strict": true` OpenAI constrains decoding to the schema, but it accepts only a subset of JSON Schema.
//! keel converts the canonical schema into that subset:
//!
//! * every `$ref` is inlined (keel does not send `$defs` to OpenAI: inlined schemas are what the other renderers
//!   produce too, and they keep the strict-mode rules checkable field by field);
//! * every object gets `"additionalProperties": false` and lists all its properties in `required`;
//! * a property that was optional becomes nullable instead: `"type": ["string", "null"]` for a plain value,
//!   `"anyOf": [..., {"type": "null"}]` for anything else (an enum also gains `null` among its values). The model
//!   then sends `null` for "not given", and keel's canonical form of arguments
//!   (`ToolDefinition::canonical_arguments`) turns those back into absent properties before the arguments are validated against the canonical schema;
//! * `oneOf` becomes `anyOf` (strict mode rejects `oneOf`; serde's enum branches exclude each other anyway, so the
//!   meaning is the same), `const` becomes a one-value `enum`, an `allOf` is merged;
//! * keywords strict mode rejects but that only narrow a value (`default`, `minLength`, `maxLength`,
//!   `uniqueItems`, formats outside OpenAI's list, ...) are folded into the description, like for Ollama; keel's
//!   executor still enforces them.
//!
//! When the schema cannot be made strict, the tool is sent with `"strict": false` and its schema unchanged apart
//! from inlining (recursive definitions stay under `$defs`), and
//! [`OpenAiParameters::strict`] says why (keel's `ToolDefinition::openai_strictness`). The
//! reasons: a map (`additionalProperties` that is a schema or `true`) or free-form object, a value of any type
//! (`serde_json::Value`), a recursive type (it cannot be inlined), a tuple (`prefixItems`), keywords strict mode
//! has no counterpart for (`not`, `if`/`then`/`else`, `patternProperties`, ...), a top level that is not a
//! single object, object alternatives of a union that start with the same property, and OpenAI's size limits.

use serde_json::{Map, Value, json};

use super::strict::{self, Rules};
use crate::transform::{self, FieldPath, OnRecursion};

/// The `format`s strict mode accepts.
pub const STRICT_FORMATS: &[&str] =
    &["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"];

/// Keywords strict mode keeps.
const KEPT: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "anyOf",
    "enum",
    "description",
    "title",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];

/// Keywords strict mode rejects that are folded into the description (the executor still enforces them).
pub const FOLDED: &[&str] = &[
    "minLength",
    "maxLength",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "default",
    "examples",
    "deprecated",
    "contentEncoding",
    "contentMediaType",
];

/// Keywords strict mode rejects that change which values are valid in ways a description cannot stand in for.
const UNSUPPORTED: &[&str] = &[
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "patternProperties",
    "propertyNames",
    "unevaluatedItems",
    "contains",
    "minContains",
    "maxContains",
    "additionalItems",
    "$dynamicRef",
    "$ref",
];

/// The tables of OpenAI's strict mode.
const RULES: Rules =
    Rules { name: "OpenAI strict mode", formats: STRICT_FORMATS, kept: KEPT, folded: FOLDED, unsupported: UNSUPPORTED };

/// OpenAI's published limits for strict schemas.
const MAX_PROPERTIES: usize = 5000;
/// Object nesting levels, the top level included.
const MAX_NESTING: usize = 10;
const MAX_ENUM_VALUES: usize = 1000;
const MAX_TOTAL_STRING_LENGTH: usize = 120_000;
/// A single string enum with more than `LARGE_ENUM` values may total at most `LARGE_ENUM_STRING_LENGTH` characters.
const LARGE_ENUM: usize = 250;
const LARGE_ENUM_STRING_LENGTH: usize = 15_000;

/// The `parameters` sent to OpenAI and whether they are strict (with the reason when not).
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiParameters {
    /// The schema to send.
    pub parameters: Value,
    /// `Ok` when `parameters` satisfy strict mode; otherwise why the tool is sent with `"strict": false`.
    pub strict: Result<(), String>,
}

/// The canonical input schema as OpenAI is sent it without strict mode: references inlined (recursive
/// definitions stay under `$defs`), without `$schema`, fixed-width integer formats stated as bounds. What
/// [`parameters`] sends for a tool that cannot be strict, and what a tool is sent with strict mode turned off.
pub fn loose_parameters(canonical: &Value) -> Value {
    loose(canonical).0
}

/// [`loose_parameters`], and the first reference that could not be inlined.
fn loose(canonical: &Value) -> (Value, Option<transform::Cut>) {
    let inlined = transform::inline_refs(canonical, OnRecursion::KeepRef);
    let mut loose = inlined.schema;
    if let Value::Object(map) = &mut loose {
        map.shift_remove("$schema");
    }
    // Strict mode drops `uint32` and the other width formats: their ranges go in as bounds, which it keeps.
    transform::bound_narrow_integers(&mut loose);
    (loose, inlined.cuts.into_iter().next())
}

/// Converts the canonical input schema for OpenAI (see the module docs).
pub fn parameters(canonical: &Value) -> OpenAiParameters {
    let (loose, cut) = loose(canonical);
    if let Some(cut) = cut {
        let why = match cut.kind {
            transform::CutKind::Recursive => {
                "keel inlines definitions for OpenAI, and a recursive type cannot be inlined"
            }
            transform::CutKind::Unresolved => "OpenAI strict mode needs every reference resolved",
            transform::CutKind::TooLarge => "the inlined schema would be too large",
        };
        return OpenAiParameters { parameters: loose, strict: Err(format!("{}; {why}", cut.describe())) };
    }
    match strict_schema(&loose) {
        Ok(strict) => OpenAiParameters { parameters: strict, strict: Ok(()) },
        Err(reason) => OpenAiParameters { parameters: loose, strict: Err(reason) },
    }
}

/// The strict form of an inlined schema, or why there is none.
fn strict_schema(inlined: &Value) -> Result<Value, String> {
    RULES.top_level(inlined)?;
    let mut path = FieldPath::default();
    let strict = strict_node(inlined.clone(), &mut path, 0)?;
    check_limits(&strict)?;
    Ok(strict)
}

/// Converts one schema (and everything under it) to strict mode.
fn strict_node(node: Value, path: &mut FieldPath, depth: usize) -> Result<Value, String> {
    let subject = path.subject();
    let mut map = RULES.open(node, &subject, depth)?;
    if let Some(c) = map.shift_remove("const") {
        match map.get_mut("enum") {
            Some(Value::Array(values)) => values.retain(|v| *v == c),
            _ => {
                map.insert("enum".to_owned(), Value::Array(vec![c]));
            }
        }
    }

    let mut notes = Vec::new();
    RULES.fold_format(&mut map, &mut notes);
    RULES.fold_and_keep(&mut map, &mut notes, &["unevaluatedProperties"]);

    if map.contains_key("anyOf") && (map.contains_key("properties") || map.contains_key("required")) {
        distribute(&mut map, &subject)?;
    }

    let types: Vec<String> = match map.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        _ => Vec::new(),
    };
    if types.is_empty() && !map.contains_key("anyOf") && !map.contains_key("enum") {
        if map.contains_key("properties") {
            map.insert("type".to_owned(), Value::String("object".to_owned()));
        } else {
            return Err(RULES.any_value(&subject));
        }
    }
    let is_object = types.iter().any(|t| t == "object") || map.contains_key("properties");
    let is_array = types.iter().any(|t| t == "array");

    if let Some(Value::Array(branches)) = map.shift_remove("anyOf") {
        let mut strict_branches = Vec::with_capacity(branches.len());
        for branch in branches {
            match strict_node(branch, path, depth + 1)? {
                // A branch that is itself only a union (`Option` of a documented enum) is spliced in.
                Value::Object(mut b) if b.keys().all(|k| ["anyOf", "description", "title"].contains(&k.as_str())) => {
                    if let Some(d) = b.shift_remove("description") {
                        map.entry("description").or_insert(d);
                    }
                    if let Some(Value::Array(inner)) = b.shift_remove("anyOf") {
                        strict_branches.extend(inner);
                    }
                }
                other => strict_branches.push(other),
            }
        }
        check_first_keys(&strict_branches, &subject)?;
        map.insert("anyOf".to_owned(), Value::Array(strict_branches));
    }

    if is_object {
        close_object(&mut map, path, depth)?;
    } else {
        for k in ["properties", "required", "additionalProperties", "unevaluatedProperties"] {
            map.shift_remove(k);
        }
    }
    RULES.finish(map, &subject, is_array, &notes, path, |items, path| strict_node(items, path, depth + 1))
}

/// Closes an object for strict mode: no other properties, every property required, optional ones nullable.
fn close_object(map: &mut Map<String, Value>, path: &mut FieldPath, depth: usize) -> Result<(), String> {
    let subject = path.subject();
    let has_properties = strict::has_properties(map);
    let closed_by = |v: Option<&Value>| v == Some(&Value::Bool(false));
    RULES.closed(map, &subject, |map| {
        let unevaluated = map.get("unevaluatedProperties");
        if !has_properties && !closed_by(unevaluated) {
            return Err(RULES.unspecified_properties(&subject));
        }
        if unevaluated.is_some() && !closed_by(unevaluated) {
            return Err(format!(
                "{subject} accepts unlisted properties (unevaluatedProperties); OpenAI strict mode needs every \
                 object closed"
            ));
        }
        Ok(())
    })?;
    map.shift_remove("unevaluatedProperties");

    let required: Vec<String> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    // Taken in place: the converted properties go back where they were, in their order.
    let props = match map.get_mut("properties") {
        Some(Value::Object(props)) => std::mem::take(props),
        _ => Map::new(),
    };
    if let Some(missing) = required.iter().find(|r| !props.contains_key(r.as_str())) {
        return Err(RULES.undescribed_required(&subject, missing));
    }
    let mut strict_props = Map::new();
    for (name, prop) in props {
        path.push_field(&name);
        let converted = strict_node(prop, path, depth + 1);
        path.pop();
        let converted = converted?;
        let converted = if required.contains(&name) { converted } else { nullable(converted) };
        strict_props.insert(name, converted);
    }
    let all: Vec<Value> = strict_props.keys().cloned().map(Value::String).collect();
    map.insert("properties".to_owned(), Value::Object(strict_props));
    map.insert("required".to_owned(), Value::Array(all));
    Ok(())
}

/// Moves an object's own properties into each branch of its `anyOf` (a struct with a flattened enum), so that each
/// branch can be closed on its own. They go after the branch's own (the one place where the declaration order is
/// not kept): OpenAI tells the alternatives apart by their first property, so they must not all start alike.
fn distribute(map: &mut Map<String, Value>, subject: &str) -> Result<(), String> {
    let own_props = match map.shift_remove("properties") {
        Some(Value::Object(p)) => p,
        _ => Map::new(),
    };
    let own_required = match map.shift_remove("required") {
        Some(Value::Array(r)) => r,
        _ => Vec::new(),
    };
    match map.shift_remove("additionalProperties") {
        None | Some(Value::Bool(false)) => {}
        Some(_) => {
            return Err(format!(
                "{subject} is a map (additionalProperties is a schema); OpenAI strict mode needs every object closed"
            ));
        }
    }
    match map.shift_remove("unevaluatedProperties") {
        None | Some(Value::Bool(false)) => {}
        Some(_) => {
            return Err(format!(
                "{subject} accepts unlisted properties (unevaluatedProperties); OpenAI strict mode needs every object \
                 closed"
            ));
        }
    }
    if map.get("type").and_then(Value::as_str) == Some("object") {
        map.shift_remove("type");
    }
    let Some(Value::Array(branches)) = map.get_mut("anyOf") else { return Ok(()) };
    for branch in branches.iter_mut() {
        let Value::Object(b) = branch else {
            return Err(format!("{subject} combines its own properties with a union of non-objects"));
        };
        let is_object = b.contains_key("properties") || b.get("type").and_then(Value::as_str) == Some("object");
        if !is_object {
            return Err(format!("{subject} combines its own properties with a union of non-objects"));
        }
        b.entry("type").or_insert_with(|| Value::String("object".to_owned()));
        let props = b.entry("properties").or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(props) = props {
            for (name, schema) in &own_props {
                match props.get(name) {
                    Some(existing) if existing != schema => {
                        return Err(format!("{subject} declares property `{name}` twice with different schemas"));
                    }
                    Some(_) => {}
                    None => {
                        props.insert(name.clone(), schema.clone());
                    }
                }
            }
        }
        let required = b.entry("required").or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(required) = required {
            for r in &own_required {
                if !required.contains(r) {
                    required.push(r.clone());
                }
            }
        }
        b.shift_remove("unevaluatedProperties");
    }
    Ok(())
}

/// OpenAI rejects an `anyOf` whose object alternatives begin with the same property (same name and schema): it
/// decides the branch from the first key.
fn check_first_keys(branches: &[Value], subject: &str) -> Result<(), String> {
    let mut seen: Vec<(&String, &Value)> = Vec::new();
    for branch in branches {
        let Some(first) = branch.get("properties").and_then(Value::as_object).and_then(|p| p.iter().next()) else {
            continue;
        };
        if seen.contains(&first) {
            return Err(format!(
                "{subject} is a union whose object alternatives start with the same property `{}`; OpenAI strict \
                 mode needs their first properties to differ",
                first.0
            ));
        }
        seen.push(first);
    }
    Ok(())
}

/// A schema that also accepts `null`: `"type": [t, "null"]` for a plain value (an `enum` gains `null` too),
/// `anyOf: [..., {"type": "null"}]` for anything else. Schemas that already accept `null` are returned as they are.
fn nullable(schema: Value) -> Value {
    if transform::accepts_null(&Value::Null, &schema) {
        return schema;
    }
    let Value::Object(mut map) = schema else { return schema };
    let plain = ["string", "integer", "number", "boolean"];
    match map.get("type") {
        Some(Value::String(t)) if plain.contains(&t.as_str()) && !map.contains_key("anyOf") => {
            let t = t.clone();
            map.insert("type".to_owned(), json!([t, "null"]));
            if let Some(Value::Array(values)) = map.get_mut("enum") {
                values.push(Value::Null);
            }
            Value::Object(map)
        }
        Some(Value::Array(ts)) if ts.iter().all(|t| t.as_str().is_some_and(|t| plain.contains(&t))) => {
            if let Some(Value::Array(ts)) = map.get_mut("type") {
                ts.push(Value::String("null".to_owned()));
            }
            if let Some(Value::Array(values)) = map.get_mut("enum") {
                values.push(Value::Null);
            }
            Value::Object(map)
        }
        _ if map.len() == 1 || (map.len() == 2 && map.contains_key("description")) => {
            if let Some(Value::Array(branches)) = map.get_mut("anyOf") {
                branches.push(json!({"type": "null"}));
                return Value::Object(map);
            }
            wrap_nullable(map)
        }
        _ => wrap_nullable(map),
    }
}

fn wrap_nullable(mut map: Map<String, Value>) -> Value {
    let mut out = Map::new();
    if let Some(d) = map.shift_remove("description") {
        out.insert("description".to_owned(), d);
    }
    out.insert("anyOf".to_owned(), json!([Value::Object(map), {"type": "null"}]));
    Value::Object(out)
}

/// Checks OpenAI's size limits for strict schemas.
fn check_limits(schema: &Value) -> Result<(), String> {
    #[derive(Default)]
    struct Counts {
        properties: usize,
        enum_values: usize,
        strings: usize,
    }
    fn walk(schema: &Value, nesting: usize, path: &mut FieldPath, counts: &mut Counts) -> Result<(), String> {
        let Value::Object(map) = schema else { return Ok(()) };
        let mut nesting = nesting;
        if let Some(Value::Object(props)) = map.get("properties") {
            nesting += 1;
            if nesting > MAX_NESTING {
                return Err(format!(
                    "{} nests objects {nesting} levels deep; OpenAI strict mode allows {MAX_NESTING}",
                    path.subject()
                ));
            }
            counts.properties += props.len();
            counts.strings += props.keys().map(|k| k.chars().count()).sum::<usize>();
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            counts.enum_values += values.len();
            let length: usize = values.iter().filter_map(Value::as_str).map(|s| s.chars().count()).sum();
            counts.strings += length;
            if values.len() > LARGE_ENUM && length > LARGE_ENUM_STRING_LENGTH {
                return Err(format!(
                    "{} has {} enum values totalling {length} characters; OpenAI strict mode allows \
                     {LARGE_ENUM_STRING_LENGTH} characters for an enum of more than {LARGE_ENUM} values",
                    path.subject(),
                    values.len()
                ));
            }
        }
        if let Some(Value::Object(props)) = map.get("properties") {
            for (name, prop) in props {
                path.push_field(name);
                let r = walk(prop, nesting, path, counts);
                path.pop();
                r?;
            }
        }
        if let Some(items) = map.get("items") {
            path.push_raw("[]");
            let r = walk(items, nesting, path, counts);
            path.pop();
            r?;
        }
        if let Some(Value::Array(branches)) = map.get("anyOf") {
            for b in branches {
                walk(b, nesting, path, counts)?;
            }
        }
        Ok(())
    }
    let mut counts = Counts::default();
    walk(schema, 0, &mut FieldPath::default(), &mut counts)?;
    if counts.properties > MAX_PROPERTIES {
        return Err(format!(
            "the schema has {} properties; OpenAI strict mode allows {MAX_PROPERTIES}",
            counts.properties
        ));
    }
    if counts.enum_values > MAX_ENUM_VALUES {
        return Err(format!(
            "the schema has {} enum values; OpenAI strict mode allows {MAX_ENUM_VALUES}",
            counts.enum_values
        ));
    }
    if counts.strings > MAX_TOTAL_STRING_LENGTH {
        return Err(format!(
            "the schema's property names and enum values total {} characters; OpenAI strict mode allows \
             {MAX_TOTAL_STRING_LENGTH}",
            counts.strings
        ));
    }
    Ok(())
}
