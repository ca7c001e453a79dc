//! The two wire formats: reading an assistant message out of a response body and writing a conversation as the
//! request's `messages`. Shared by the HTTP clients and [`crate::Replay`], so a replayed response goes through
//! exactly the parsing a live one does.

use serde_json::{Map, Value, json};
use tool_core::{ToolCall, ToolView};

use crate::model::{AssistantMessage, Message, Mode, ModelError, WireFormat};

/// The error message of an error body: `{"error": "..."}` (Ollama) or `{"error": {"message": "..."}}` (OpenAI).
pub(crate) fn error_message(body: &Value) -> Option<String> {
    match body.get("error")? {
        Value::String(s) => Some(s.clone()),
        Value::Object(e) => Some(
            e.get("message")
                .and_then(Value::as_str)
                .map_or_else(|| Value::Object(e.clone()).to_string(), str::to_owned),
        ),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

fn content_of(message: &Map<String, Value>) -> Result<String, ModelError> {
    match message.get("content") {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        // Some compatible servers send content parts: keep their text.
        Some(Value::Array(parts)) => Ok(parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str).or_else(|| p.as_str()))
            .collect::<Vec<_>>()
            .join("")),
        Some(_) => Err(ModelError::malformed("`message.content` is neither text nor null")),
    }
}

fn tool_calls_of(message: &Map<String, Value>) -> Result<Vec<Value>, ModelError> {
    match message.get("tool_calls") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(calls)) => Ok(calls.clone()),
        Some(_) => Err(ModelError::malformed("`message.tool_calls` is not an array")),
    }
}

fn has_id(call: &Value) -> bool {
    match call.get("id") {
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Number(_)) => true,
        _ => false,
    }
}

/// Writes a generated id into the echoed call, so the transcript the server sees next time is consistent with the
/// `tool_call_id`s of the results.
fn fill_id(wire_calls: &mut [Value], index: usize, id: &str) {
    if let Some(Value::Object(call)) = wire_calls.get_mut(index) {
        call.insert("id".to_owned(), Value::String(id.to_owned()));
    }
}

/// The assistant message object at `pointer` of a response body, once the body is known to be an object that
/// reports no error; `what` names the place in the error.
fn response_message<'a>(body: &'a Value, pointer: &str, what: &str) -> Result<&'a Map<String, Value>, ModelError> {
    if !body.is_object() {
        return Err(ModelError::malformed("the response is not a JSON object"));
    }
    if let Some(message) = error_message(body) {
        return Err(ModelError::Server { message });
    }
    match body.pointer(pointer) {
        Some(Value::Object(message)) => Ok(message),
        _ => Err(ModelError::malformed(format!("the response has no {what} object"))),
    }
}

/// An Ollama `/api/chat` response body (`stream: false`): `{"message": {"role": "assistant", "content": ...,
/// "tool_calls": [{"function": {"name", "arguments": {...}}}]}, "done": true, ...}`.
///
/// Calls are read with [`ToolCall::from_ollama`] at index `first_index + i`: a server older than late 2025 sends
/// no `id`, and the generated one is deterministic and unique across the turns of a conversation. Names are kept
/// as sent: Ollama is given the registered names, so nothing is mapped.
pub(crate) fn parse_ollama(body: &Value, first_index: usize, mode: Mode) -> Result<AssistantMessage, ModelError> {
    let message = response_message(body, "/message", "`message`")?;
    let content = content_of(message)?;
    let raw_calls = tool_calls_of(message)?;
    let mut wire = message.clone();
    let mut wire_calls = raw_calls.clone();
    let mut calls = Vec::with_capacity(raw_calls.len());
    for (i, raw) in raw_calls.iter().enumerate() {
        let call = ToolCall::from_ollama(raw, first_index + i);
        if !has_id(raw) {
            fill_id(&mut wire_calls, i, call.id());
        }
        calls.push(call);
    }
    if !wire_calls.is_empty() {
        wire.insert("tool_calls".to_owned(), Value::Array(wire_calls));
    }
    wire.entry("role").or_insert_with(|| Value::String("assistant".to_owned()));
    Ok(AssistantMessage { content, calls, wire: Value::Object(wire), format: WireFormat::Ollama, mode })
}

/// An OpenAI Chat Completions response body: `{"choices": [{"message": {"role": "assistant", "content": ...,
/// "tool_calls": [{"id", "type": "function", "function": {"name", "arguments": "<JSON text>"}}]}}]}`.
///
/// Names are wire names (`incident-search`); each is mapped back to the registered name with
/// [`ToolView::get_by_wire_name`]. A name that maps to nothing is kept as sent (the executor answers
/// `unknown_tool`). A call without `id` gets [`ToolCall::generated_id`] at index `first_index + i`.
pub(crate) fn parse_openai(
    body: &Value,
    view: &ToolView,
    first_index: usize,
    mode: Mode,
) -> Result<AssistantMessage, ModelError> {
    let message = response_message(body, "/choices/0/message", "`choices[0].message`")?;
    let content = content_of(message)?;
    let raw_calls = tool_calls_of(message)?;
    let mut wire = message.clone();
    let mut wire_calls = raw_calls.clone();
    let mut calls = Vec::with_capacity(raw_calls.len());
    for (i, raw) in raw_calls.iter().enumerate() {
        let (mut id, name, arguments) = ToolCall::from_openai(raw).into_parts();
        if !has_id(raw) {
            id = ToolCall::generated_id(first_index + i, &name, arguments.as_ref().ok());
            fill_id(&mut wire_calls, i, &id);
        }
        let name = match view.get_by_wire_name(&name) {
            Some(def) => def.name().to_owned(),
            None => name,
        };
        calls.push(ToolCall::from_parts(id, name, arguments));
    }
    if !wire_calls.is_empty() {
        wire.insert("tool_calls".to_owned(), Value::Array(wire_calls));
    }
    wire.entry("role").or_insert_with(|| Value::String("assistant".to_owned()));
    Ok(AssistantMessage { content, calls, wire: Value::Object(wire), format: WireFormat::OpenAiChat, mode })
}

fn arguments_or_empty(call: &ToolCall) -> Value {
    call.arguments().cloned().unwrap_or_else(|_| json!({}))
}

/// The conversation as Ollama `messages`.
pub(crate) fn ollama_messages(messages: &[Message]) -> Vec<Value> {
    messages
        .iter()
        .map(|m| match m {
            Message::System(c) => json!({"role": "system", "content": c}),
            Message::User(c) => json!({"role": "user", "content": c}),
            Message::Assistant(a) if a.format == WireFormat::Ollama => a.wire.clone(),
            Message::Assistant(a) => {
                let mut msg = json!({"role": "assistant", "content": a.content});
                if !a.calls.is_empty() {
                    msg["tool_calls"] = a
                        .calls
                        .iter()
                        .map(|c| json!({"id": c.id(), "function": {"name": c.name(), "arguments": arguments_or_empty(c)}}))
                        .collect();
                }
                msg
            }
            Message::Tool(r) => r.to_ollama_message(),
        })
        .collect()
}

/// The conversation as Chat Completions `messages`.
pub(crate) fn openai_messages(messages: &[Message]) -> Vec<Value> {
    messages
        .iter()
        .map(|m| match m {
            Message::System(c) => json!({"role": "system", "content": c}),
            Message::User(c) => json!({"role": "user", "content": c}),
            Message::Assistant(a) if a.format == WireFormat::OpenAiChat => a.wire.clone(),
            Message::Assistant(a) => {
                let content = if a.content.is_empty() { Value::Null } else { Value::String(a.content.clone()) };
                let mut msg = json!({"role": "assistant", "content": content});
                if !a.calls.is_empty() {
                    msg["tool_calls"] = a
                        .calls
                        .iter()
                        .map(|c| {
                            json!({
                                "id": c.id(),
                                "type": "function",
                                "function": {
                                    "name": tool_core::name::to_wire(c.name()),
                                    "arguments": arguments_or_empty(c).to_string(),
                                },
                            })
                        })
                        .collect();
                }
                msg
            }
            Message::Tool(r) => r.to_openai_message(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tool_core::ToolCall;

    use super::*;

    #[test]
    fn ollama_without_ids_gets_stable_unique_ids() {
        let body = json!({"model": "m", "message": {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "read_task_cards", "arguments": {}}},
            {"function": {"name": "read_task_cards", "arguments": {}}}
        ]}, "done": true});
        let a = parse_ollama(&body, 0, Mode::Live).unwrap();
        let b = parse_ollama(&body, 0, Mode::Live).unwrap();
        assert_eq!(a, b, "deterministic");
        assert_ne!(a.calls[0].id(), a.calls[1].id(), "unique within a turn");
        assert!(ToolCall::is_generated_id(a.calls[0].id()));
        assert_eq!(a.wire["tool_calls"][1]["id"], a.calls[1].id());
        let later = parse_ollama(&body, 2, Mode::Live).unwrap();
        assert_ne!(later.calls[0].id(), a.calls[0].id(), "unique across turns");
    }

    #[test]
    fn ollama_keeps_server_ids_and_reports_errors() {
        let body = json!({"message": {"role": "assistant", "content": "x", "tool_calls": [
            {"id": "call_abc", "function": {"name": "t", "arguments": null}}
        ]}});
        let a = parse_ollama(&body, 0, Mode::Live).unwrap();
        assert_eq!(a.calls[0].id(), "call_abc");
        assert_eq!(a.calls[0].arguments(), Ok(&json!({})));
        assert_eq!(a.wire, body["message"]);
        for (body, expected) in [
            (json!([]), "not a JSON object"),
            (json!({"done": true}), "no `message` object"),
            (json!({"message": {"content": 5}}), "neither text nor null"),
            (json!({"message": {"content": "", "tool_calls": {}}}), "not an array"),
        ] {
            let e = parse_ollama(&body, 0, Mode::Live).unwrap_err();
            assert!(e.to_string().contains(expected), "{e}");
        }
        let e = parse_ollama(&json!({"error": "model 'x' not found"}), 0, Mode::Live).unwrap_err();
        assert_eq!(e, ModelError::Server { message: "model 'x' not found".into() });
    }

    #[test]
    fn openai_text_arguments_and_errors() {
        let view = ToolView::new(Vec::new());
        let body = json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "incident-search", "arguments": "{\"q\":1}"}},
            {"type": "function", "function": {"name": "x", "arguments": "not json"}}
        ]}}]});
        let a = parse_openai(&body, &view, 0, Mode::Replay).unwrap();
        assert_eq!(a.content, "");
        assert_eq!(a.calls[0].arguments(), Ok(&json!({"q": 1})));
        // Not in the view: kept as sent.
        assert_eq!(a.calls[0].name(), "incident-search");
        assert!(a.calls[1].arguments().is_err());
        assert!(ToolCall::is_generated_id(a.calls[1].id()));
        assert_eq!(a.wire["tool_calls"][1]["id"], a.calls[1].id());
        let e = parse_openai(&json!({"choices": []}), &view, 0, Mode::Live).unwrap_err();
        assert!(matches!(e, ModelError::Malformed { .. }));
        let e = parse_openai(&json!({"error": {"message": "bad key"}}), &view, 0, Mode::Live).unwrap_err();
        assert_eq!(e, ModelError::Server { message: "bad key".into() });
    }
}
