//! Ollama `/api/chat`: tools as `{"type": "function", "function": {...}}` under their registered names, calls with
//! object arguments, replies as `tool` messages.

use serde_json::{Map, Value, json};

use super::loss::segment;
use super::{LossKind, MessageError, ParsedMessage, arguments_or_empty, chat_message, string_field};
use crate::call::{ToolCall, id_or_generated, object_or_null_arguments};
use crate::result::ToolResult;

/// `message.tool_calls[index]`: `{"id"?: "...", "function": {"name": "...", "arguments": {...}, "index"?: n}}`.
///
/// `arguments` is an object; missing or `null` reads as `{}` (Ollama is written in Go, where an empty map may
/// serialize as `null`). `id` only exists on servers from late 2025 on; without it the id is generated.
pub(super) fn call(item: &Value, index: usize) -> ToolCall {
    let function = item.get("function");
    let name = string_field(function, "name");
    let arguments = object_or_null_arguments(function.and_then(|f| f.get("arguments")));
    let id = id_or_generated(item.get("id"), index, &name, &arguments);
    ToolCall::from_parts(id, name, arguments)
}

pub(super) fn message(message: &Value, first_index: usize) -> Result<ParsedMessage, MessageError> {
    chat_message(message, first_index, call)
}

/// `{"role": "tool", "tool_name": <tool name>, "tool_call_id": <call id>, "content": <text>}`.
pub(super) fn reply(result: &ToolResult) -> Value {
    json!({
        "role": "tool",
        "tool_name": result.tool_name,
        "tool_call_id": result.call_id,
        "content": result.content_text(),
    })
}

pub(super) fn assistant(text: &str, calls: &[ToolCall]) -> Value {
    let mut m = Map::new();
    m.insert("role".into(), "assistant".into());
    m.insert("content".into(), text.into());
    if !calls.is_empty() {
        let items = calls
            .iter()
            .map(|c| json!({"id": c.id(), "function": {"name": c.name(), "arguments": arguments_or_empty(c)}}))
            .collect();
        m.insert("tool_calls".into(), Value::Array(items));
    }
    Value::Object(m)
}

/// What the ollama Python client keeps of a property of `parameters` (its `Tool.Function.Parameters.Property`):
/// it re-reads every tool into that type before sending it.
const CLIENT_PROPERTY_KEYS: &[&str] = &["type", "items", "description", "enum"];

/// What the ollama Python client keeps of `parameters`.
const CLIENT_PARAMETERS_KEYS: &[&str] = &["type", "$defs", "items", "required", "properties"];

/// The entry's losses: what the ollama Python client (`ollama.Tool`) drops when a tool list goes through it.
/// keel's own client sends the entry as it is.
pub(super) fn losses(entry: &Value, push: &mut dyn FnMut(String, LossKind, String)) {
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
pub(super) fn reply_losses(push: &mut dyn FnMut(String, LossKind, String)) {
    push(
        "/tool_call_id".to_owned(),
        LossKind::Adapted,
        "the ollama Python client's `Message` has no `tool_call_id`: through it, a result is matched to its call by \
         `tool_name` and order"
            .to_owned(),
    );
}
