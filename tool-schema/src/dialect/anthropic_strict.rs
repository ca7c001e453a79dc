//! Anthropic's strict tool use: the `input_schema` a tool is sent with `"strict": true`, when its schema allows it.
//!
//! With `"strict": true` on a tool, Anthropic constrains the model's tool input to the schema by grammar, and takes
//! only a subset of JSON Schema (its structured outputs' "JSON Schema limitations"). keel converts the canonical
//! schema into that subset:
//!
//! * every `$ref` is inlined, as in the tool's ordinary entry; a recursive type cannot be, and is not strict;
//! * every object must be closed: `"additionalProperties": false` (keel's canonical schemas close them already); a
//!   map or a free-form object cannot be strict;
//! * `required` stays as it is: unlike OpenAI, Anthropic does not need every property required, so an optional
//!   property stays optional and the model leaves it out. A model may still send `null` for an `Option`'s
//!   absence, which the canonical schema allows; keel's canonical form of arguments removes such nulls before
//!   validation either way;
//! * `oneOf` becomes `anyOf` (serde's branches exclude each other, so the meaning is the same), an `allOf` is
//!   merged; a list of types (`["integer", "null"]`) becomes an `anyOf` of one type each, and fixed values
//!   (`enum`, `const`) go without a `type` beside them: the shapes Anthropic's SDK sends;
//! * keywords Anthropic's subset does not take but that only narrow a value (`minimum`, `maximum`, `multipleOf`,
//!   `minLength`, `maxLength`, `pattern`, `maxItems`, `minItems` other than 0 or 1, `uniqueItems`, `default`,
//!   formats outside its list, ...) are folded into the description, as Anthropic's own SDK does with them; keel's
//!   executor still enforces them.
//!
//! When the schema cannot be made strict, [`AnthropicInput::strict`] says why: a recursive type, a map or an object
//! with unspecified properties, a value of any type, a tuple, an enum of objects or arrays, keywords with no
//! counterpart (`not`, `if`/`then`/`else`, `patternProperties`, `unevaluatedProperties`, ...), or a top level that
//! is not a single object.

use serde_json::{Map, Value};

use super::strict::{self, Rules};
use crate::transform::{self, FieldPath, OnRecursion};

/// The `format`s Anthropic's strict subset accepts.
pub const STRICT_FORMATS: &[&str] =
    &["date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"];

/// Keywords the strict subset keeps.
const KEPT: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "anyOf",
    "enum",
    "const",
    "description",
    "title",
    "format",
    "minItems",
];

/// Keywords the strict subset does not take that are folded into the description (the executor still enforces
/// them).
pub const FOLDED: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "default",
    "examples",
    "deprecated",
    "contentEncoding",
    "contentMediaType",
];

/// Keywords that change which values are valid in ways the strict subset cannot express.
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
    "unevaluatedProperties",
    "unevaluatedItems",
    "contains",
    "minContains",
    "maxContains",
    "additionalItems",
    "$dynamicRef",
    "$ref",
];

/// The tables of Anthropic's strict tool use.
const RULES: Rules = Rules {
    name: "Anthropic strict tool use",
    formats: STRICT_FORMATS,
    kept: KEPT,
    folded: FOLDED,
    unsupported: UNSUPPORTED,
};

/// The `input_schema` sent to Anthropic in strict mode, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub struct AnthropicInput {
    /// The strict schema when `strict` is `Ok`; otherwise the schema the tool is sent with anyway (inlined, as in
    /// its ordinary entry).
    pub schema: Value,
    /// `Ok` when `schema` is in the strict subset; otherwise why the tool cannot be sent with `"strict": true`.
    pub strict: Result<(), String>,
}

/// Converts the canonical input schema for Anthropic's strict tool use (see the module docs).
pub fn input_schema(canonical: &Value) -> AnthropicInput {
    let inlined = transform::inline_refs(canonical, OnRecursion::KeepRef);
    let mut loose = inlined.schema;
    if let Value::Object(map) = &mut loose {
        map.shift_remove("$schema");
    }
    if let Some(cut) = inlined.cuts.first() {
        let why = match cut.kind {
            transform::CutKind::Recursive => "Anthropic strict tool use does not support recursive schemas",
            transform::CutKind::Unresolved => "Anthropic strict tool use needs every reference resolved",
            transform::CutKind::TooLarge => "the inlined schema would be too large",
        };
        return AnthropicInput { schema: loose, strict: Err(format!("{}; {why}", cut.describe())) };
    }
    if let Err(why) = RULES.top_level(&loose) {
        return AnthropicInput { schema: loose, strict: Err(why) };
    }
    match strict_node(loose.clone(), &mut FieldPath::default(), 0) {
        Ok(strict) => AnthropicInput { schema: strict, strict: Ok(()) },
        Err(reason) => AnthropicInput { schema: loose, strict: Err(reason) },
    }
}

/// Converts one schema (and everything under it) to the strict subset.
fn strict_node(node: Value, path: &mut FieldPath, depth: usize) -> Result<Value, String> {
    let subject = path.subject();
    let mut map = RULES.open(node, &subject, depth)?;
    let literals = map.get("enum").into_iter().flat_map(|e| e.as_array().into_iter().flatten()).chain(map.get("const"));
    if literals.clone().any(|v| v.is_object() || v.is_array()) {
        return Err(format!(
            "{subject} has an object or array among its fixed values; Anthropic strict tool use takes only strings, \
             numbers, booleans and null there"
        ));
    }

    let mut notes = Vec::new();
    RULES.fold_format(&mut map, &mut notes);
    if map.get("minItems").is_some_and(|n| n.as_u64().is_none_or(|n| n > 1)) {
        notes.extend(transform::fold_keywords(&mut map, &["minItems", "maxItems"]));
    }
    RULES.fold_and_keep(&mut map, &mut notes, &[]);
    split_type_list(&mut map);

    let types: Vec<&str> = match map.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let is_object = types.contains(&"object") || map.contains_key("properties");
    let is_array = types.contains(&"array");
    let typed = !types.is_empty() || ["anyOf", "enum", "const"].iter().any(|k| map.contains_key(*k));
    if !typed {
        if map.contains_key("properties") {
            map.insert("type".to_owned(), Value::String("object".to_owned()));
        } else {
            return Err(RULES.any_value(&subject));
        }
    }

    if let Some(Value::Array(branches)) = map.shift_remove("anyOf") {
        if is_object {
            return Err(format!(
                "{subject} combines its own properties with a union, which Anthropic strict tool use cannot express"
            ));
        }
        let mut strict_branches = Vec::with_capacity(branches.len());
        for branch in branches {
            strict_branches.push(strict_node(branch, path, depth + 1)?);
        }
        map.insert("anyOf".to_owned(), Value::Array(strict_branches));
    }
    if is_object {
        close_object(&mut map, path, depth)?;
    } else {
        map.shift_remove("properties");
        map.shift_remove("required");
        map.shift_remove("additionalProperties");
    }
    RULES.finish(map, &subject, is_array, &notes, path, |items, path| strict_node(items, path, depth + 1))
}

/// The shapes Anthropic's SDK sends (its `transform_schema`): fixed values without a `type` beside them, and a list
/// of types (`["integer", "null"]`, an `Option`) as an `anyOf` of one type each, every type with its own keywords.
fn split_type_list(map: &mut Map<String, Value>) {
    if map.contains_key("enum") || map.contains_key("const") {
        map.shift_remove("type");
        return;
    }
    let types = match map.get("type") {
        Some(Value::Array(ts)) if ts.len() > 1 && !map.contains_key("anyOf") => ts.clone(),
        Some(Value::Array(ts)) if ts.len() == 1 => {
            let t = ts[0].clone();
            map.insert("type".to_owned(), t);
            return;
        }
        _ => return,
    };
    const OWN: &[(&str, &[&str])] = &[
        ("object", &["properties", "required", "additionalProperties"]),
        ("array", &["items", "minItems"]),
        ("string", &["format"]),
    ];
    let mut branches = Vec::with_capacity(types.len());
    for t in types {
        let mut branch = Map::new();
        if let Some((_, keys)) = OWN.iter().find(|(name, _)| t.as_str() == Some(*name)) {
            for k in *keys {
                if let Some(v) = map.get(*k) {
                    branch.insert((*k).to_owned(), v.clone());
                }
            }
        }
        branch.insert("type".to_owned(), t);
        branches.push(Value::Object(branch));
    }
    for (_, keys) in OWN {
        for k in *keys {
            map.shift_remove(*k);
        }
    }
    map.shift_remove("type");
    map.insert("anyOf".to_owned(), Value::Array(branches));
}

/// Closes an object: no other properties; its properties converted; `required` as it was.
fn close_object(map: &mut Map<String, Value>, path: &mut FieldPath, depth: usize) -> Result<(), String> {
    let subject = path.subject();
    let has_properties = strict::has_properties(map);
    RULES.closed(
        map,
        &subject,
        |_| if has_properties { Ok(()) } else { Err(RULES.unspecified_properties(&subject)) },
    )?;
    let props = match map.get_mut("properties") {
        Some(Value::Object(props)) => std::mem::take(props),
        _ => Map::new(),
    };
    if let Some(Value::Array(required)) = map.get("required")
        && let Some(missing) = required.iter().filter_map(Value::as_str).find(|r| !props.contains_key(*r))
    {
        return Err(RULES.undescribed_required(&subject, missing));
    }
    let mut strict_props = Map::new();
    for (name, prop) in props {
        path.push_field(&name);
        let converted = strict_node(prop, path, depth + 1);
        path.pop();
        strict_props.insert(name, converted?);
    }
    map.insert("properties".to_owned(), Value::Object(strict_props));
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_closed_object_is_strict_with_optional_properties_kept_optional_and_narrowing_folded() {
        let canonical = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "ticket": {"type": "string", "pattern": "^INC-[0-9]+$", "minLength": 5},
                "since": {"type": "string", "format": "date-time"},
                "limit": {"type": ["integer", "null"], "format": "uint32", "minimum": 1, "maximum": 100},
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2, "uniqueItems": true},
                "kind": {"oneOf": [{"const": "a", "type": "string"}, {"const": "b", "type": "string"}]},
                "at": {"$ref": "#/$defs/Place"}
            },
            "required": ["ticket"],
            "additionalProperties": false,
            "$defs": {"Place": {"type": "object", "properties": {"zip": {"type": "string"}},
                "required": ["zip"], "additionalProperties": false}}
        });
        let out = input_schema(&canonical);
        assert_eq!(out.strict, Ok(()));
        let s = &out.schema;
        assert!(s.get("$schema").is_none() && s.get("$defs").is_none());
        assert_eq!(s["required"], json!(["ticket"]), "optional properties stay optional");
        assert_eq!(s["additionalProperties"], false);
        assert_eq!(
            s["properties"]["ticket"],
            json!({"type": "string", "description": "Minimum length: 5. Pattern: ^INC-[0-9]+$."})
        );
        assert_eq!(s["properties"]["since"]["format"], "date-time");
        assert_eq!(s["properties"]["limit"]["anyOf"], json!([{"type": "integer"}, {"type": "null"}]));
        assert_eq!(s["properties"]["limit"]["description"], "Minimum: 1. Maximum: 100.");
        assert!(s["properties"]["limit"].get("format").is_none());
        assert!(s["properties"]["tags"].get("minItems").is_none());
        assert_eq!(s["properties"]["tags"]["description"], "Minimum items: 2. Items must be unique.");
        assert_eq!(s["properties"]["kind"]["anyOf"][1], json!({"const": "b"}));
        assert_eq!(s["properties"]["at"]["properties"]["zip"]["type"], "string");
        assert_eq!(s["properties"]["at"]["additionalProperties"], false);
    }

    #[test]
    fn min_items_of_zero_or_one_is_kept() {
        let canonical = json!({"type": "object", "additionalProperties": false,
            "properties": {"a": {"type": "array", "items": {"type": "integer"}, "minItems": 1}}});
        assert_eq!(input_schema(&canonical).schema["properties"]["a"]["minItems"], 1);
    }

    #[test]
    fn what_cannot_be_strict_says_why() {
        let object = |props: Value| json!({"type": "object", "properties": props, "additionalProperties": false});
        let cases = [
            (
                object(json!({"m": {"type": "object", "additionalProperties": {"type": "string"}}})),
                "field `m` is a map",
            ),
            (object(json!({"o": {"type": "object"}})), "field `o` is an object with unspecified properties"),
            (object(json!({"v": true})), "field `v` accepts any JSON value"),
            (object(json!({"v": {}})), "field `v` accepts any JSON value"),
            (object(json!({"t": {"type": "array", "prefixItems": [{"type": "string"}]}})), "field `t` is a tuple"),
            (object(json!({"n": {"type": "string", "not": {"const": "x"}}})), "uses `not`"),
            (object(json!({"a": {"type": "array"}})), "array of unspecified items"),
            (object(json!({"e": {"enum": [{"x": 1}]}})), "an object or array among its fixed values"),
            (json!({"type": "string"}), "the top-level arguments are not a single object schema"),
            (json!({"type": "object", "anyOf": [{"properties": {}}]}), "(they are a union"),
            (
                json!({"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#"}}}}),
                "recursive",
            ),
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "ghost"],
                    "additionalProperties": false}),
                "requires `ghost` without describing it",
            ),
        ];
        for (schema, expected) in cases {
            let out = input_schema(&schema);
            let reason = out.strict.err().unwrap_or_default();
            assert!(reason.contains(expected), "{schema}: {reason}");
            assert!(reason.contains("Anthropic") || reason.contains("recursive"), "{reason}");
        }
    }

    #[test]
    fn hostile_inputs_do_not_panic() {
        let mut deep = json!({"type": "string"});
        for _ in 0..200 {
            deep = json!({"type": "object", "properties": {"x": deep}, "additionalProperties": false});
        }
        for s in [
            deep,
            json!(null),
            json!([]),
            json!({"type": 5}),
            json!({"type": "object", "properties": 3}),
            json!({"type": "object", "properties": {"a": {"anyOf": 7}}}),
            json!({"allOf": [1, 2]}),
        ] {
            let _ = input_schema(&s);
        }
    }
}
