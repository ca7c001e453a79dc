//! Anthropic Messages: tools as `{"name", "description", "input_schema"}` under their wire names, calls as
//! `tool_use` content blocks with object arguments, replies as `tool_result` blocks in one `user` message.

pub(super) mod render;

use serde_json::{Value, json};

use super::{Codec, MessageError, ParsedMessage, arguments_or_empty, has_id, object, registered_name, string_field};
use crate::call::{ToolCall, id_or_generated, object_arguments};
use crate::result::ToolResult;
use crate::schema::Provider;
use crate::view::ToolView;

/// A content block of type `tool_use`: `{"type": "tool_use", "id": "toolu_...", "name": "...", "input": {...}}`.
pub(super) fn call(view: &ToolView, item: &Value, index: usize) -> ToolCall {
    let shown = string_field(Some(item), "name");
    let arguments = object_arguments(item.get("input"));
    let id = id_or_generated(item.get("id"), index, &shown, &arguments);
    ToolCall::from_parts(id, registered_name(view, Provider::Anthropic, &shown), arguments)
}

pub(super) fn message(view: &ToolView, message: &Value, first_index: usize) -> Result<ParsedMessage, MessageError> {
    let m = object(message, "the message")?;
    let blocks = match m.get("content") {
        Some(Value::Array(blocks)) => blocks.clone(),
        Some(Value::String(s)) => {
            let message = json!({"role": "assistant", "content": s});
            return Ok(ParsedMessage { text: s.clone(), calls: Vec::new(), message });
        }
        None | Some(Value::Null) => Vec::new(),
        Some(_) => return Err(MessageError::new("`content` is neither a list of blocks nor text")),
    };
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut echo = Vec::with_capacity(blocks.len());
    for mut block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("tool_use") => {
                let call = call(view, &block, first_index + calls.len());
                if !has_id(block.get("id"))
                    && let Value::Object(o) = &mut block
                {
                    o.insert("id".to_owned(), Value::String(call.id().to_owned()));
                }
                calls.push(call);
            }
            Some("text") => {
                if let Some(t) = block.get("text").and_then(Value::as_str) {
                    text.push_str(t);
                }
            }
            _ => {}
        }
        echo.push(block);
    }
    Ok(ParsedMessage { text, calls, message: json!({"role": "assistant", "content": echo}) })
}

/// `{"type": "tool_result", "tool_use_id": <call id>, "content": <text>, "is_error": <bool>}`.
pub(super) fn reply(result: &ToolResult) -> Value {
    json!({
        "type": "tool_result",
        "tool_use_id": result.call_id,
        "content": result.content_text(),
        "is_error": !result.is_ok(),
    })
}

/// The `user` message holding one turn's `tool_result` blocks.
pub(super) fn user_message(blocks: Vec<Value>) -> Value {
    json!({"role": "user", "content": blocks})
}

pub(super) fn assistant(codec: &Codec, text: &str, calls: &[ToolCall]) -> Value {
    let mut blocks = Vec::with_capacity(calls.len() + 1);
    if !text.is_empty() {
        blocks.push(json!({"type": "text", "text": text}));
    }
    blocks.extend(calls.iter().map(|c| {
        json!({"type": "tool_use", "id": c.id(), "name": codec.shown_name(c.name()), "input": arguments_or_empty(c)})
    }));
    json!({"role": "assistant", "content": blocks})
}
