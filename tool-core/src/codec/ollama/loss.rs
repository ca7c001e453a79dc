//! What Ollama's entries and replies do not carry: found by comparing the canonical schema with the parameters it
//! became, and by what the ollama Python client keeps.

use serde_json::{Map, Value};

use super::render;
use crate::codec::LossKind;
use crate::codec::format::Push;
use crate::codec::loss::{child_path, join_keywords, segment, show_path};
use crate::tool_definition::ToolDefinition;
use keel_tools_schema::transform::{self, NUMERIC_FORMATS, OnRecursion};
use keel_tools_schema::vocabulary::{self, MAX_DEPTH};

/// What the ollama Python client keeps of a property of `parameters` (its `Tool.Function.Parameters.Property`):
/// it re-reads every tool into that type before sending it.
const CLIENT_PROPERTY_KEYS: &[&str] = &["type", "items", "description", "enum"];

/// What the ollama Python client keeps of `parameters`.
const CLIENT_PARAMETERS_KEYS: &[&str] = &["type", "$defs", "items", "required", "properties"];

/// Keywords whose absence from what Ollama is sent is not worth a loss: metadata, the closing of objects (the
/// executor enforces it), and structure keel rewrites into what Ollama keeps.
const NOT_LOST: &[&str] = &[
    "$schema",
    "$id",
    "$anchor",
    "$comment",
    "$defs",
    "definitions",
    "title",
    "description",
    "readOnly",
    "writeOnly",
    "type",
    "properties",
    "required",
    "items",
    "enum",
    "const",
    "allOf",
    "unevaluatedProperties",
];

/// The entry's losses: what the rendering could only say in words or not at all (found by comparing the
/// canonical schema with the parameters it became), recursive types cut to a stand-in, and what the ollama
/// Python client drops.
pub(super) fn entry_losses(def: &ToolDefinition, entry: &Value, push: &mut Push<'_>) {
    let inlined = transform::inline_refs(def.input_schema(), OnRecursion::Stub);
    for cut in &inlined.cuts {
        push(
            "/function/parameters".to_owned(),
            LossKind::Dropped,
            format!(
                "{}; Ollama cannot follow references, so the model sees a described stand-in object there",
                cut.describe()
            ),
        );
    }
    // The parameters before the top level's description moves into the function's: what the model reads for the
    // top level is there, and the comparison needs it next to the schema it describes.
    let rendered = render::parameters(def.input_schema());
    compare(&inlined.schema, &rendered, "", "/function/parameters", 0, push);
    client_losses(entry, push);
}

/// Whether a union is only `T | null` (an `Option`): Ollama's plain `T` loses nothing, as the field is optional.
fn is_option_union(branches: &[Value]) -> bool {
    branches.iter().filter(|b| !transform::is_null_only(b)).count() <= 1
}

fn compare(canonical: &Value, rendered: &Value, path: &str, pointer: &str, depth: usize, push: &mut Push<'_>) {
    let (Value::Object(c), Value::Object(r)) = (canonical, rendered) else { return };
    if depth > MAX_DEPTH {
        return;
    }
    let mut folded = Vec::new();
    let mut silent = Vec::new();
    for (k, v) in c {
        if r.contains_key(k) || NOT_LOST.contains(&k.as_str()) {
            continue;
        }
        match (k.as_str(), v) {
            ("additionalProperties", Value::Bool(_)) => continue,
            ("format", Value::String(f)) if NUMERIC_FORMATS.contains(&f.as_str()) => continue,
            ("anyOf" | "oneOf", Value::Array(branches)) if is_option_union(branches) => continue,
            ("uniqueItems" | "deprecated", Value::Bool(false)) => continue,
            _ => {}
        }
        if render::DROPPED.contains(&k.as_str()) {
            silent.push(k.as_str());
        } else {
            folded.push(k.as_str());
        }
    }
    folded.sort_unstable();
    silent.sort_unstable();
    let (notes, folded): (Vec<&str>, Vec<&str>) = folded.into_iter().partition(|k| vocabulary::asserts_nothing(k));
    let described = |m: &Map<String, Value>| m.get("description").and_then(Value::as_str).unwrap_or("").to_owned();
    let in_words = described(r) != described(c);
    if !folded.is_empty() {
        let them = if folded.len() == 1 { "it" } else { "them" };
        let (kind, how) = if in_words {
            (LossKind::Adapted, format!("keel states {them} in the description; the executor still enforces {them}"))
        } else {
            (LossKind::Dropped, format!("the model does not see {them}; the executor still enforces {them}"))
        };
        push(
            pointer.to_owned(),
            kind,
            format!("{}: Ollama ignores {}; {how}", show_path(path), join_keywords(&folded)),
        );
    }
    if !notes.is_empty() {
        let (kind, how) = if in_words {
            (LossKind::Adapted, "keel states it in the description")
        } else {
            (LossKind::Ignored, "the model does not see it")
        };
        push(
            pointer.to_owned(),
            kind,
            format!("{}: Ollama ignores the annotation(s) {}; {how}", show_path(path), join_keywords(&notes)),
        );
    }
    if !silent.is_empty() {
        push(
            pointer.to_owned(),
            LossKind::Dropped,
            format!(
                "{}: Ollama drops {} and keel cannot say it in words; the model does not see this rule, the \
                 executor still enforces it",
                show_path(path),
                join_keywords(&silent)
            ),
        );
    }
    if let (Some(Value::Object(cp)), Some(Value::Object(rp))) = (c.get("properties"), r.get("properties")) {
        for (k, v) in cp {
            if let Some(rv) = rp.get(k) {
                let at = format!("{pointer}/properties/{}", segment(k));
                compare(v, rv, &child_path(path, k), &at, depth + 1, push);
            }
        }
    }
    if let (Some(ci @ Value::Object(_)), Some(ri)) = (c.get("items"), r.get("items")) {
        compare(ci, ri, &child_path(path, "[]"), &format!("{pointer}/items"), depth + 1, push);
    }
}

/// What the ollama Python client (`ollama.Tool`) drops when a tool list goes through it. keel's own client sends
/// the entry as it is.
fn client_losses(entry: &Value, push: &mut Push<'_>) {
    let Some(Value::Object(parameters)) = entry.pointer("/function/parameters") else { return };
    for key in parameters.keys().filter(|k| !CLIENT_PARAMETERS_KEYS.contains(&k.as_str())) {
        push(
            format!("/function/parameters/{}", segment(key)),
            LossKind::Dropped,
            format!("the ollama Python client keeps no `{key}` of the parameters"),
        );
    }
    let Some(Value::Object(properties)) = parameters.get("properties") else { return };
    for (name, property) in properties {
        let Value::Object(property) = property else { continue };
        for key in property.keys().filter(|k| !CLIENT_PROPERTY_KEYS.contains(&k.as_str())) {
            push(
                format!("/function/parameters/properties/{}/{}", segment(name), segment(key)),
                LossKind::Dropped,
                format!(
                    "`{name}`: the ollama Python client keeps only `type`, `items`, `description` and `enum` of a \
                     property, so its `{key}` does not reach the model through that client"
                ),
            );
        }
    }
}

/// The reply format's losses.
pub(super) fn reply_losses(push: &mut Push<'_>) {
    push(
        "/tool_call_id".to_owned(),
        LossKind::Adapted,
        "the ollama Python client's `Message` has no `tool_call_id`: through it, a result is matched to its call by \
         `tool_name` and order"
            .to_owned(),
    );
}
