//! What the providers' messages share: fields read leniently, arguments written back, and the chat-style
//! assistant message (Ollama, OpenAI Chat).

use serde_json::{Map, Value};

use super::{MessageError, ParsedMessage};
use crate::call::ToolCall;

/// A string field of an optional object; empty when missing or not a string.
pub(super) fn string_field(obj: Option<&Value>, key: &str) -> String {
    obj.and_then(|o| o.get(key)).and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// Whether an id field holds a usable id (a non-empty string, or a number as some compatible servers send).
pub(super) fn has_id(id: Option<&Value>) -> bool {
    match id {
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Number(_)) => true,
        _ => false,
    }
}

/// The arguments of a call for a message written by keel: the object, or `{}` when they were unusable.
pub(super) fn arguments_or_empty(call: &ToolCall) -> Value {
    call.arguments().cloned().unwrap_or_else(|_| Value::Object(Map::new()))
}

/// The text of a `content` that is text, null or a list of parts (`{"text": ...}` or plain strings).
fn content_text(content: Option<&Value>, what: &str) -> Result<String, MessageError> {
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => Ok(parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str).or_else(|| p.as_str()))
            .collect::<Vec<_>>()
            .join("")),
        Some(_) => Err(MessageError::new(format!("`{what}` is neither text nor null"))),
    }
}

/// A chat-style assistant message, `{"role": "assistant", "content": ..., "tool_calls": [...]}` (Ollama, OpenAI
/// Chat), its items read by `read`; generated ids are written into the echoed items.
pub(super) fn chat_message(
    message: &Value,
    first_index: usize,
    read: impl Fn(&Value, usize) -> ToolCall,
) -> Result<ParsedMessage, MessageError> {
    let m = object(message, "the message")?;
    let text = content_text(m.get("content"), "content")?;
    let items = array_field(m, "tool_calls")?;
    let mut echo = m.clone();
    let mut echoed = items.to_vec();
    let mut calls = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let call = read(item, first_index + i);
        if !has_id(item.get("id"))
            && let Some(Value::Object(o)) = echoed.get_mut(i)
        {
            o.insert("id".to_owned(), Value::String(call.id().to_owned()));
        }
        calls.push(call);
    }
    if !echoed.is_empty() {
        echo.insert("tool_calls".to_owned(), Value::Array(echoed));
    }
    echo.entry("role").or_insert_with(|| Value::String("assistant".to_owned()));
    Ok(ParsedMessage { text, calls, message: Value::Object(echo) })
}

/// A chat-style assistant message written by keel, `{"role": "assistant", "content": <text>, "tool_calls":
/// [...]}` (Ollama, OpenAI Chat): `content` is text, even when empty, and `tool_calls` holds each call as `item`
/// writes it, or is left out when there are no calls.
pub(super) fn chat_assistant(text: &str, calls: &[ToolCall], item: impl Fn(&ToolCall) -> Value) -> Value {
    let mut m = Map::new();
    m.insert("role".into(), "assistant".into());
    m.insert("content".into(), text.into());
    if !calls.is_empty() {
        m.insert("tool_calls".into(), Value::Array(calls.iter().map(item).collect()));
    }
    Value::Object(m)
}

/// The array at `key` of a message: empty when missing or null, an error when it is something else.
fn array_field<'a>(message: &'a Map<String, Value>, key: &str) -> Result<&'a [Value], MessageError> {
    match message.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(MessageError::new(format!("`{key}` is not an array"))),
    }
}

pub(super) fn object<'a>(message: &'a Value, what: &str) -> Result<&'a Map<String, Value>, MessageError> {
    message.as_object().ok_or_else(|| MessageError::new(format!("{what} is not a JSON object")))
}
