//! Ollama's subset of JSON Schema: the `parameters` of an Ollama `/api/chat` tool.
//!
//! Ollama reads each tool's `parameters` into a fixed structure and silently loses what does not fit: a `$ref`
//! property becomes `{}`, and `oneOf`, `anyOf`, `allOf`, `const`, `format`, `pattern`, numeric bounds,
//! `minLength`/`maxLength`, `minItems`/`maxItems` and `default` are dropped. So the parameters keel sends are
//! rewritten into the subset that survives, and what would be lost is said in words instead:
//!
//! * every `$ref` is inlined; `$defs`, `$schema` and `title` go. A recursive type cannot be inlined: at the point
//!   where it would repeat, a stand-in `{"type": "object", "description": "... Recursive: same shape as `tree`."}`
//!   takes its place;
//! * an `Option<T>` (`anyOf [T, null]`, `"type": [t, "null"]`) becomes plain `T` (it is already absent from
//!   `required`);
//! * a unit enum becomes `{"type": "string", "enum": [...]}`, with the variants' doc comments in the description
//!   (`Values: "low" = Lowest; "high" = Highest.`);
//! * a data enum (tagged, untagged, externally tagged) becomes one object whose properties are all the variants'
//!   (the tag's values merged into one `enum`; `required` only what every variant requires), described as
//!   `One of: {kind: "circle", r} | {kind: "square", side}.`;
//! * constraints become description sentences: `Format: date-time. Minimum: 0. Pattern: ^INC-[0-9]+$.`; maps
//!   (`additionalProperties` with a schema) say `Map with any keys; each value: string.`
//! * the top level keeps its `description` (the args struct's doc comment, with the notes folded into it); Ollama
//!   keeps none there, so keel's Ollama codec moves it into the function's description.
//!
//! The result is a description for the model, not a validator: keel's executor still validates the
//! arguments against the canonical schema, so anything the model gets wrong comes back as `invalid_arguments`.

use serde_json::{Map, Value, json};

use crate::transform::{self, OnRecursion};
use crate::vocabulary::MAX_DEPTH;

/// Keywords Ollama drops that are worth a sentence, in the order the sentences appear.
pub const FOLDED: &[&str] = &[
    "format",
    "pattern",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "minItems",
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

/// Keywords removed without a trace: metadata, and validation that has no readable short form.
pub const DROPPED: &[&str] = &[
    "$schema",
    "$id",
    "$anchor",
    "$dynamicAnchor",
    "$dynamicRef",
    "$ref",
    "$comment",
    "$defs",
    "definitions",
    "title",
    "readOnly",
    "writeOnly",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contentSchema",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "contains",
    "minContains",
    "maxContains",
];

/// The canonical input schema in the subset Ollama keeps (see the module docs).
pub fn parameters(canonical: &Value) -> Value {
    let inlined = transform::inline_refs(canonical, OnRecursion::Stub).schema;
    let mut params = simplify(inlined, 0);
    if let Value::Object(map) = &mut params {
        // Ollama's parameters always carry `type`, `properties` and `required`.
        if !map.contains_key("type") && map.contains_key("properties") {
            map.insert("type".to_owned(), Value::String("object".to_owned()));
        }
        if map.get("type").and_then(Value::as_str) == Some("object") {
            map.entry("properties").or_insert_with(|| Value::Object(Map::new()));
            map.entry("required").or_insert_with(|| Value::Array(Vec::new()));
        }
    }
    params
}

/// Rewrites one (already inlined) schema and everything under it.
fn simplify(schema: Value, depth: usize) -> Value {
    let mut map = match schema {
        Value::Object(map) => map,
        Value::Bool(true) => return json!({"description": "Any JSON value."}),
        Value::Bool(false) => return json!({"description": "No value is accepted."}),
        other => return other,
    };
    let mut notes = shallow(&mut map, depth);
    if depth > MAX_DEPTH {
        return Value::Object(map);
    }

    // Rewritten in place, so that the keywords keep their order (and the properties theirs).
    if let Some(Value::Object(props)) = map.get_mut("properties") {
        let taken = std::mem::take(props);
        *props = taken.into_iter().map(|(k, v)| (k, simplify(v, depth + 1))).collect();
    }

    let tuple = match map.shift_remove("prefixItems") {
        Some(Value::Array(items)) => Some(items),
        other => {
            if let Some(v) = other {
                map.insert("prefixItems".to_owned(), v);
            }
            if map.get("items").is_some_and(Value::is_array) {
                map.shift_remove("items").and_then(|items| match items {
                    Value::Array(items) => Some(items),
                    _ => None,
                })
            } else {
                if let Some(items) = map.get_mut("items") {
                    let taken = std::mem::take(items);
                    *items = simplify(taken, depth + 1);
                }
                None
            }
        }
    };
    map.shift_remove("prefixItems");
    map.shift_remove("additionalItems");
    if let Some(items) = tuple {
        // The tuple's length is in the note already.
        let len = Value::from(items.len());
        if map.get("minItems") == Some(&len) && map.get("maxItems") == Some(&len) {
            map.shift_remove("minItems");
            map.shift_remove("maxItems");
        }
        let parts: Vec<String> = items.into_iter().map(|i| transform::summarize(&simplify(i, depth + 1))).collect();
        notes.push(format!("Tuple: [{}].", parts.join(", ")));
    }

    let has_properties = map.get("properties").and_then(Value::as_object).is_some_and(|p| !p.is_empty());
    match map.shift_remove("additionalProperties") {
        Some(Value::Bool(true)) if !has_properties => notes.push("Any keys and values.".to_owned()),
        Some(values @ Value::Object(_)) => {
            let values = transform::summarize(&simplify(values, depth + 1));
            let lead = if has_properties { "Other keys allowed" } else { "Map with any keys" };
            notes.push(format!("{lead}; each value: {values}."));
        }
        _ => {}
    }
    if let Some(Value::Object(patterns)) = map.shift_remove("patternProperties") {
        for (pattern, values) in patterns {
            notes.push(format!("Keys matching {pattern}: {}.", transform::summarize(&simplify(values, depth + 1))));
        }
    }
    if let Some(Value::Object(names)) = map.shift_remove("propertyNames") {
        if let Some(Value::String(p)) = names.get("pattern") {
            notes.push(format!("Keys must match {p}."));
        } else if let Some(Value::Array(values)) = names.get("enum") {
            let values: Vec<String> = values.iter().map(transform::short_json).collect();
            notes.push(format!("Keys: {}.", values.join(" | ")));
        }
    }

    notes.extend(transform::fold_keywords(&mut map, FOLDED));
    for k in DROPPED {
        map.shift_remove(*k);
    }
    transform::append_notes(&mut map, &notes);
    Value::Object(map)
}

/// The rewrites at this level only (no recursion into properties or items): metadata removal, `allOf` merging,
/// null stripping, literal unions to `enum`, `const` to `enum`, data unions to one object. Returns the notes they
/// produced.
fn shallow(map: &mut Map<String, Value>, depth: usize) -> Vec<String> {
    let mut notes = Vec::new();
    for k in ["$schema", "$id", "$anchor", "$comment", "title", "$defs", "definitions", "readOnly", "writeOnly"] {
        map.shift_remove(k);
    }
    if depth > MAX_DEPTH {
        return notes;
    }
    if !transform::merge_all_of(map) {
        // What cannot be merged exactly is merged loosely: the first branch to say something wins.
        if let Some(Value::Array(branches)) = map.shift_remove("allOf") {
            for branch in branches {
                if let Value::Object(mut b) = branch {
                    notes.extend(shallow(&mut b, depth + 1));
                    for (k, v) in b {
                        map.entry(k).or_insert(v);
                    }
                }
            }
        }
    }
    transform::strip_null(map);
    notes.extend(transform::collapse_documented_enum(map));
    if let Some(c) = map.shift_remove("const") {
        map.insert("enum".to_owned(), Value::Array(vec![c]));
    }
    for keyword in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = map.shift_remove(keyword) {
            notes.extend(merge_union(map, branches, depth));
        }
    }
    notes
}

/// Folds a union Ollama would drop into the schema itself: the branches' types side by side, the object branches'
/// properties merged, and a note listing the alternatives.
fn merge_union(map: &mut Map<String, Value>, branches: Vec<Value>, depth: usize) -> Vec<String> {
    let mut types: Vec<String> = Vec::new();
    let mut add_type = |t: &str| {
        if !types.iter().any(|x| x == t) {
            types.push(t.to_owned());
        }
    };
    let mut summaries = Vec::new();
    let mut object_required: Option<Vec<Value>> = None;
    let mut merged_props: Map<String, Value> = Map::new();

    for branch in branches {
        let mut b = match branch {
            Value::Object(b) => b,
            Value::Bool(true) => {
                summaries.push("any value".to_owned());
                continue;
            }
            _ => continue,
        };
        let branch_notes = shallow(&mut b, depth + 1);
        let is_object = b.get("properties").is_some()
            || b.get("type").and_then(Value::as_str) == Some("object")
            || b.get("additionalProperties").is_some();
        // Primitive branches keep their constraints in their own summary.
        let mut constraint_notes = if is_object { Vec::new() } else { transform::fold_keywords(&mut b, FOLDED) };
        let mut summary = transform::summarize(&Value::Object(b.clone()));
        if let Some(rest) = summary.strip_prefix("object ") {
            summary = rest.to_owned();
        }
        constraint_notes.splice(0..0, branch_notes);
        let doc = b.get("description").and_then(Value::as_str).map(str::trim).filter(|d| !d.is_empty());
        let extra: Vec<String> =
            doc.map(|d| d.trim_end_matches('.').to_owned()).into_iter().chain(constraint_notes).collect();
        if !extra.is_empty() {
            summary = format!("{summary} ({})", extra.join(" ").trim_end_matches('.'));
        }
        summaries.push(summary);

        match b.get("type") {
            Some(Value::String(t)) => add_type(t),
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).for_each(&mut add_type),
            _ if is_object => add_type("object"),
            _ => {
                if let Some(Value::Array(values)) = b.get("enum") {
                    for v in values {
                        add_type(crate::vocabulary::instance_type(v));
                    }
                }
            }
        }

        if is_object {
            let required: Vec<Value> = b.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
            object_required = Some(match object_required {
                None => required,
                Some(so_far) => so_far.into_iter().filter(|r| required.contains(r)).collect(),
            });
            if let Some(Value::Object(props)) = b.shift_remove("properties") {
                for (name, prop) in props {
                    match merged_props.get_mut(&name) {
                        Some(existing) => merge_property(existing, prop),
                        None => {
                            merged_props.insert(name, prop);
                        }
                    }
                }
            }
        }
    }

    if !map.contains_key("type") {
        match types.len() {
            0 => {}
            1 => {
                map.insert("type".to_owned(), Value::String(types.remove(0)));
            }
            _ => {
                map.insert("type".to_owned(), Value::Array(types.into_iter().map(Value::String).collect()));
            }
        }
    }
    if !merged_props.is_empty() {
        let props = map.entry("properties").or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(props) = props {
            for (name, prop) in merged_props {
                props.entry(name).or_insert(prop);
            }
        }
    }
    if let Some(required) = object_required
        && !required.is_empty()
    {
        let own = map.entry("required").or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(own) = own {
            for r in required {
                if !own.contains(&r) {
                    own.push(r);
                }
            }
        }
    }
    if summaries.is_empty() { Vec::new() } else { vec![format!("One of: {}.", summaries.join(" | "))] }
}

/// Merges a property that several union branches declare: a tag's values become one `enum`; otherwise the first
/// branch's schema stays, with the types of both.
fn merge_property(existing: &mut Value, other: Value) {
    let (Value::Object(a), Value::Object(b)) = (existing, other) else { return };
    let literals = |m: &Map<String, Value>| -> Option<Vec<Value>> {
        match (m.get("const"), m.get("enum")) {
            (Some(c), _) => Some(vec![c.clone()]),
            (None, Some(Value::Array(v))) => Some(v.clone()),
            _ => None,
        }
    };
    if let (Some(mut values), Some(more)) = (literals(a), literals(&b)) {
        for v in more {
            if !values.contains(&v) {
                values.push(v);
            }
        }
        a.shift_remove("const");
        a.insert("enum".to_owned(), Value::Array(values));
    }
    if let (Some(ta), Some(tb)) = (a.get("type").cloned(), b.get("type")) {
        let mut all: Vec<Value> = match ta {
            Value::Array(ts) => ts,
            t => vec![t],
        };
        let more: Vec<Value> = match tb {
            Value::Array(ts) => ts.clone(),
            t => vec![t.clone()],
        };
        for t in more {
            if !all.contains(&t) {
                all.push(t);
            }
        }
        let merged = if all.len() == 1 { all.remove(0) } else { Value::Array(all) };
        a.insert("type".to_owned(), merged);
    }
    if !a.contains_key("description")
        && let Some(d) = b.get("description")
    {
        a.insert("description".to_owned(), d.clone());
    }
}
