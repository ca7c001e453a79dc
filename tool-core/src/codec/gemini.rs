//! Gemini: tools as `functionDeclarations` entries under their wire names, calls as `functionCall` parts with
//! object arguments, replies as `functionResponse` parts in one `user` content.

pub(super) mod render;

use serde_json::{Map, Value, json};

use super::loss::{join_keywords, show_path, walk};
use super::{
    Codec, LossKind, MessageError, ParsedMessage, arguments_or_empty, object, registered_name, string_field,
    wire_name_loss,
};
use crate::call::{ToolCall, id_or_generated, is_generated_call_id, object_or_null_arguments};
use crate::definition::ToolDefinition;
use crate::result::{ToolResult, error_body_json};
use crate::schema::Provider;
use crate::schema::transform::NUMERIC_FORMATS;
use crate::view::ToolView;
use crate::vocabulary;

/// A content part carrying a function call: `{"functionCall": {"name": "...", "args"?: {...}, "id"?: "..."}}`
/// (`function_call` is accepted too).
///
/// Gemini omits `args` for a function without parameters: missing or `null` reads as `{}`. Gemini often sends no
/// `id`: then a generated one, which [`Codec::reply`] knows not to send back.
pub(super) fn call(view: &ToolView, item: &Value, index: usize) -> ToolCall {
    let call = item.get("functionCall").or_else(|| item.get("function_call"));
    let shown = string_field(call, "name");
    let arguments = object_or_null_arguments(call.and_then(|c| c.get("args")));
    let id = id_or_generated(call.and_then(|c| c.get("id")), index, &shown, &arguments);
    ToolCall::from_parts(id, registered_name(view, Provider::Gemini, &shown), arguments)
}

fn is_call(part: &Value) -> bool {
    part.get("functionCall").or_else(|| part.get("function_call")).is_some()
}

pub(super) fn message(view: &ToolView, content: &Value, first_index: usize) -> Result<ParsedMessage, MessageError> {
    let m = object(content, "the content")?;
    let parts = match m.get("parts") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(parts)) => parts,
        Some(_) => return Err(MessageError::new("`parts` is not an array")),
    };
    let mut text = String::new();
    let mut calls = Vec::new();
    for part in parts {
        if is_call(part) {
            calls.push(call(view, part, first_index + calls.len()));
        } else if let Some(t) = part.get("text").and_then(Value::as_str)
            && part.get("thought").and_then(Value::as_bool) != Some(true)
        {
            text.push_str(t);
        }
    }
    // Generated ids are not written in: Gemini matches replies by name and order, and an id it did not send
    // would be one it does not know.
    let mut echo = m.clone();
    echo.entry("role").or_insert_with(|| Value::String("model".to_owned()));
    Ok(ParsedMessage { text, calls, message: Value::Object(echo) })
}

/// `{"functionResponse": {"name": <wire name>, "id": <call id>, "response": {"output": <data>}}}`, or
/// `"response": {"error": {"code", "message", "details"}}` on failure.
///
/// `id` is left out when the call id is empty or was generated (Gemini sent none).
pub(super) fn reply(codec: &Codec, result: &ToolResult) -> Value {
    let response = match result.error() {
        Some(e) => json!({"error": error_body_json(e)}),
        None => json!({"output": result.data().cloned().unwrap_or(Value::Null)}),
    };
    let mut function_response = Map::new();
    let name = match codec.view().get(&result.tool_name) {
        Some(_) => codec.shown_name(&result.tool_name),
        None => result.tool_name.clone(),
    };
    function_response.insert("name".into(), Value::String(name));
    if !result.call_id.is_empty() && !is_generated_call_id(&result.call_id) {
        function_response.insert("id".into(), Value::String(result.call_id.clone()));
    }
    function_response.insert("response".into(), response);
    json!({ "functionResponse": Value::Object(function_response) })
}

/// The `user` content holding one turn's `functionResponse` parts.
pub(super) fn user_content(parts: Vec<Value>) -> Value {
    json!({"role": "user", "parts": parts})
}

pub(super) fn assistant(codec: &Codec, text: &str, calls: &[ToolCall]) -> Value {
    let mut parts = Vec::with_capacity(calls.len() + 1);
    if !text.is_empty() {
        parts.push(json!({"text": text}));
    }
    parts.extend(calls.iter().map(|c| {
        let mut call = Map::new();
        call.insert("name".into(), Value::String(codec.shown_name(c.name())));
        call.insert("args".into(), arguments_or_empty(c));
        if !c.id().is_empty() && !is_generated_call_id(c.id()) {
            call.insert("id".into(), Value::String(c.id().to_owned()));
        }
        json!({ "functionCall": Value::Object(call) })
    }));
    json!({"role": "model", "parts": parts})
}

/// The keywords of Gemini's documented JSON Schema subset for `parametersJsonSchema`: `type` (string, number,
/// integer, boolean, object, array, null), `title`, `description`; for objects `properties`, `required`,
/// `additionalProperties`; for strings `enum` and `format` ([`FORMATS`]); for numbers `enum`, `minimum`,
/// `maximum`; for arrays `items`, `prefixItems`, `minItems`, `maxItems`; and `anyOf`, `$ref`, `$defs`. Gemini
/// ignores the others.
const SUPPORTED: &[&str] = &[
    "type",
    "title",
    "description",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "format",
    "minimum",
    "maximum",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "anyOf",
    "$ref",
    "$defs",
    "definitions",
];

/// The string formats Gemini documents.
const FORMATS: &[&str] = &["date-time", "date", "time"];

/// Whether Gemini takes `wire` as a function name: it starts with a letter or an underscore, contains letters,
/// digits, underscores, dots, colons and dashes, and is at most 64 characters.
fn name_ok(wire: &str) -> bool {
    let mut chars = wire.chars();
    wire.len() <= 64
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
}

/// The entry's losses: a name Gemini refuses, the wire name, and what the schema has outside Gemini's subset.
pub(super) fn losses(def: &ToolDefinition, entry: &Value, push: &mut dyn FnMut(String, LossKind, String)) {
    if !name_ok(def.wire_name()) {
        push(
            "/name".to_owned(),
            LossKind::Rejected,
            format!(
                "Gemini rejects the name `{}`: a function name starts with a letter or `_`, has only letters, \
                 digits, `_`, `.`, `:` and `-`, and is at most 64 characters",
                def.wire_name()
            ),
        );
    }
    wire_name_loss(def, "Gemini", "/name", push);
    let Some(schema) = entry.get("parametersJsonSchema") else { return };
    walk(schema, &mut |path, pointer, map| {
        let at = format!("/parametersJsonSchema{pointer}");
        let mut validation = Vec::new();
        let mut annotations = Vec::new();
        for (k, v) in map {
            let k = k.as_str();
            if SUPPORTED.contains(&k) {
                if k == "format"
                    && let Value::String(f) = v
                    && !FORMATS.contains(&f.as_str())
                    && !NUMERIC_FORMATS.contains(&f.as_str())
                {
                    validation.push(k);
                }
                continue;
            }
            match (k, v) {
                ("uniqueItems" | "deprecated", Value::Bool(false)) => {}
                _ if vocabulary::asserts_nothing(k) => annotations.push(k),
                _ => validation.push(k),
            }
        }
        validation.sort_unstable();
        annotations.sort_unstable();
        if !validation.is_empty() {
            push(
                at.clone(),
                LossKind::Dropped,
                format!(
                    "{}: {} {} outside Gemini's documented JSON Schema subset and is ignored; the model does not \
                     see it, the executor still enforces it",
                    show_path(path),
                    join_keywords(&validation),
                    if validation.len() == 1 { "is" } else { "are" }
                ),
            );
        }
        if !annotations.is_empty() {
            push(
                at.clone(),
                LossKind::Ignored,
                format!("{}: Gemini ignores the annotation(s) {}", show_path(path), join_keywords(&annotations)),
            );
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            let odd: Vec<String> =
                values.iter().filter(|v| !(v.is_string() || v.is_number())).map(|v| v.to_string()).collect();
            if !odd.is_empty() {
                push(
                    format!("{at}/enum"),
                    LossKind::Dropped,
                    format!(
                        "{}: Gemini documents enum values as strings or numbers; {} may be dropped",
                        show_path(path),
                        odd.join(", ")
                    ),
                );
            }
        }
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_gemini_takes() {
        assert!(super::name_ok("incident-search"));
        assert!(super::name_ok("_x.y:z"));
        assert!(!super::name_ok("1abc"));
        assert!(!super::name_ok(&"a".repeat(65)));
    }
}
