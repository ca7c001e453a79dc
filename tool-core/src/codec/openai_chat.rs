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

/// The message for the transcript is the one received, with its call ids, and with `content` as text: Chat
/// Completions allows `"content": null` (or none) beside tool calls, and sends it so, but compatible servers do not
/// all take it back (llama-cpp-python 0.3's server refuses both), while every one takes `""`, which says the same.
pub(super) fn message(codec: &Codec, message: &Value, first_index: usize) -> Result<ParsedMessage, MessageError> {
    let mut parsed = chat_message(message, first_index, |item, index| call(codec, item, index))?;
    if let Value::Object(m) = &mut parsed.message
        && matches!(m.get("content"), None | Some(Value::Null))
    {
        m.insert("content".to_owned(), Value::String(String::new()));
    }
    Ok(parsed)
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
    // Text, even when empty (see `message`).
    m.insert("content".into(), text.into());
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
