//! The two HTTP APIs: finding the assistant message in a response body (read by the provider's codec) and
//! writing a conversation as the request's `messages` (each message written by the codec). Shared by the HTTP
//! clients and [`crate::Replay`], so a replayed response goes through exactly the parsing a live one does.

use std::sync::Arc;

use keel_tools_core::{Codec, Provider, ToolView};
use serde_json::{Map, Value, json};

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
/// The message is read by the Ollama [`Codec`](keel_tools_core::Codec) of the turn's view; calls without an id (a
/// server older than late 2025) get [`ToolCall::generated_id`](keel_tools_core::ToolCall::generated_id) at index
/// `first_index + i`, deterministic and unique across the turns of a conversation.
pub(crate) fn parse_ollama(
    body: &Value,
    view: &ToolView,
    first_index: usize,
    mode: Mode,
) -> Result<AssistantMessage, ModelError> {
    let message = response_message(body, "/message", "`message`")?;
    parsed(view.codec(Provider::Ollama), message, first_index, WireFormat::Ollama, mode)
}

/// An OpenAI Chat Completions response body: `{"choices": [{"message": {"role": "assistant", "content": ...,
/// "tool_calls": [{"id", "type": "function", "function": {"name", "arguments": "<JSON text>"}}]}}]}`.
///
/// The message is read by the OpenAI Chat [`Codec`](keel_tools_core::Codec) of the turn's view: wire names
/// (`incident-search`) are mapped back to the registered names; a name that maps to nothing is kept as sent (the
/// executor answers `unknown_tool`).
pub(crate) fn parse_openai(
    body: &Value,
    view: &ToolView,
    first_index: usize,
    mode: Mode,
) -> Result<AssistantMessage, ModelError> {
    let message = response_message(body, "/choices/0/message", "`choices[0].message`")?;
    parsed(view.codec(Provider::OpenAiChat), message, first_index, WireFormat::OpenAiChat, mode)
}

fn parsed(
    codec: Codec,
    message: &Map<String, Value>,
    first_index: usize,
    format: WireFormat,
    mode: Mode,
) -> Result<AssistantMessage, ModelError> {
    let message = Value::Object(message.clone());
    let parsed = codec.message(&message, first_index).map_err(|e| ModelError::Malformed {
        message: format!("the assistant message: {e}"),
        source: Some(Arc::new(e)),
    })?;
    Ok(AssistantMessage { content: parsed.text, calls: parsed.calls, wire: parsed.message, format, mode })
}

/// The conversation as `codec`'s messages: assistant messages that arrived in `format` are echoed verbatim,
/// others are written by the codec, as are the tool results.
fn messages(codec: &Codec, format: WireFormat, messages: &[Message]) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        match m {
            Message::System(c) => out.push(json!({"role": "system", "content": c})),
            Message::User(c) => out.push(json!({"role": "user", "content": c})),
            Message::Assistant(a) if a.format == format => out.push(a.wire.clone()),
            Message::Assistant(a) => out.push(codec.assistant_message(&a.content, &a.calls)),
            Message::Tool(r) => out.extend(codec.replies(std::slice::from_ref(r))),
        }
    }
    out
}

/// The conversation as Ollama `messages`.
pub(crate) fn ollama_messages(view: &ToolView, conversation: &[Message]) -> Vec<Value> {
    messages(&view.codec(Provider::Ollama), WireFormat::Ollama, conversation)
}

/// The conversation as Chat Completions `messages`.
pub(crate) fn openai_messages(view: &ToolView, conversation: &[Message]) -> Vec<Value> {
    messages(&view.codec(Provider::OpenAiChat), WireFormat::OpenAiChat, conversation)
}

#[cfg(test)]
mod tests {
    use keel_tools_core::ToolCall;
    use serde_json::json;

    use super::*;

    #[test]
    fn ollama_without_ids_gets_stable_unique_ids() {
        let body = json!({"model": "m", "message": {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "read_task_cards", "arguments": {}}},
            {"function": {"name": "read_task_cards", "arguments": {}}}
        ]}, "done": true});
        let a = parse_ollama(&body, &ToolView::new(Vec::new()), 0, Mode::Live).unwrap();
        let b = parse_ollama(&body, &ToolView::new(Vec::new()), 0, Mode::Live).unwrap();
        assert_eq!(a, b, "deterministic");
        assert_ne!(a.calls[0].id(), a.calls[1].id(), "unique within a turn");
        assert!(ToolCall::is_generated_id(a.calls[0].id()));
        assert_eq!(a.wire["tool_calls"][1]["id"], a.calls[1].id());
        let later = parse_ollama(&body, &ToolView::new(Vec::new()), 2, Mode::Live).unwrap();
        assert_ne!(later.calls[0].id(), a.calls[0].id(), "unique across turns");
    }

    #[test]
    fn ollama_keeps_server_ids_and_reports_errors() {
        let body = json!({"message": {"role": "assistant", "content": "x", "tool_calls": [
            {"id": "call_abc", "function": {"name": "t", "arguments": null}}
        ]}});
        let a = parse_ollama(&body, &ToolView::new(Vec::new()), 0, Mode::Live).unwrap();
        assert_eq!(a.calls[0].id(), "call_abc");
        assert_eq!(a.calls[0].arguments(), Ok(&json!({})));
        assert_eq!(a.wire, body["message"]);
        for (body, expected) in [
            (json!([]), "not a JSON object"),
            (json!({"done": true}), "no `message` object"),
            (json!({"message": {"content": 5}}), "neither text nor null"),
            (json!({"message": {"content": "", "tool_calls": {}}}), "not an array"),
        ] {
            let e = parse_ollama(&body, &ToolView::new(Vec::new()), 0, Mode::Live).unwrap_err();
            assert!(e.to_string().contains(expected), "{e}");
        }
        let e = parse_ollama(&json!({"error": "model 'x' not found"}), &ToolView::new(Vec::new()), 0, Mode::Live)
            .unwrap_err();
        assert_eq!(e, ModelError::Server { message: "model 'x' not found".into() });
    }

    #[test]
    fn a_message_the_codec_refuses_keeps_the_codecs_error() {
        let body = json!({"message": {"content": "", "tool_calls": {}}});
        let e = parse_ollama(&body, &ToolView::new(Vec::new()), 0, Mode::Live).unwrap_err();
        let source = std::error::Error::source(&e).expect("the codec's error is kept");
        let codec = source.downcast_ref::<keel_tools_core::codecs::MessageError>().expect("a MessageError");
        assert_eq!(e.to_string(), format!("malformed model response: the assistant message: {codec}"));
        assert!(matches!(&e, ModelError::Malformed { source: Some(_), .. }));
        // Found wrong by the client itself: no source.
        let e = parse_ollama(&json!({"done": true}), &ToolView::new(Vec::new()), 0, Mode::Live).unwrap_err();
        assert!(std::error::Error::source(&e).is_none());
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
