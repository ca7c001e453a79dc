//! OpenAI Chat Completions: tools as `{"type": "function", "function": {...}}` under their wire names, calls with
//! JSON-text arguments, replies as `tool` messages.

use serde_json::{Map, Value, json};

use super::openai::Envelope;
use super::{Codec, MessageError, ParsedMessage, arguments_or_empty, chat_message, registered_name, string_field};
use crate::call::{ToolCall, id_or_generated, text_or_object_arguments};
use crate::result::ToolResult;
use crate::schema::Provider;

/// Where the parts of an entry are.
pub(super) const ENVELOPE: Envelope =
    Envelope { name: "/function/name", parameters: "/function/parameters", strict: "/function/strict" };

/// `choices[0].message.tool_calls[i]`: `{"id": "call_...", "type": "function", "function": {"name": "...",
/// "arguments": "<JSON text>"}}`.
///
/// `arguments` is parsed as in [`ToolCall::from_json_text_with_limits`], with the codec's [`Codec::limits`]; an object instead of text (sent by some compatible
/// servers) is accepted as is. The wire name is mapped back through the view.
pub(super) fn call(codec: &Codec, item: &Value, index: usize) -> ToolCall {
    let function = item.get("function");
    let shown = string_field(function, "name");
    let arguments = text_or_object_arguments(function.and_then(|f| f.get("arguments")), &codec.limits);
    let id = id_or_generated(item.get("id"), index, &shown, &arguments);
    ToolCall::from_parts(id, registered_name(&codec.view, Provider::OpenAiChat, &shown), arguments)
}

pub(super) fn message(codec: &Codec, message: &Value, first_index: usize) -> Result<ParsedMessage, MessageError> {
    chat_message(message, first_index, |item, index| call(codec, item, index))
}

/// `{"role": "tool", "tool_call_id": <call id>, "content": <text>}`.
pub(super) fn reply(result: &ToolResult) -> Value {
    json!({
        "role": "tool",
        "tool_call_id": result.call_id,
        "content": result.content_text(),
    })
}

pub(super) fn assistant(codec: &Codec, text: &str, calls: &[ToolCall]) -> Value {
    let mut m = Map::new();
    m.insert("role".into(), "assistant".into());
    m.insert("content".into(), if text.is_empty() { Value::Null } else { text.into() });
    if !calls.is_empty() {
        let items = calls
            .iter()
            .map(|c| {
                json!({
                    "id": c.id(),
                    "type": "function",
                    "function": {"name": codec.shown_name(c.name()), "arguments": arguments_or_empty(c).to_string()},
                })
            })
            .collect();
        m.insert("tool_calls".into(), Value::Array(items));
    }
    Value::Object(m)
}
