//! A response body read and a conversation written, for any of the HTTP APIs: the API ([`crate::api`]) finds the
//! assistant message and the tokens and says how the conversation's messages are written, the provider's codec
//! reads the calls and writes the messages. Shared by the HTTP clients and [`crate::Replay`], so a replayed response
//! goes through exactly the parsing a live one does.

use std::sync::Arc;

use keel_tools_core::{ToolResult, ToolView};
use serde_json::Value;

use crate::api;
use crate::model::{AssistantMessage, Message, Mode, ModelError, WireFormat};

/// A response body of `format`, read by the codec of the turn's view:
///
/// | format | the assistant message |
/// |---|---|
/// | Ollama `/api/chat` (`stream: false`) | `message` |
/// | Chat Completions | `choices[0].message` |
/// | Responses | `output` (`status: failed` is the server's error) |
/// | Anthropic Messages | the body itself (`content` blocks) |
/// | Gemini `generateContent` | `candidates[0].content` (a blocked prompt or candidate is the server's error) |
///
/// Wire names are mapped back to the registered names; a name that maps to nothing is kept as sent (the executor
/// answers `unknown_tool`). Calls without an id get [`ToolCall::generated_id`](keel_tools_core::ToolCall::generated_id)
/// at index `first_index + i`, deterministic and unique across the turns of a conversation.
pub(crate) fn parse(
    format: WireFormat,
    body: &Value,
    view: &ToolView,
    first_index: usize,
    mode: Mode,
) -> Result<AssistantMessage, ModelError> {
    let api = api::of(format);
    let codec = view.codec(format.provider());
    let message = api.message(body)?;
    let parsed = codec.message(message, first_index).map_err(|e| ModelError::Malformed {
        message: format!("the assistant message: {e}"),
        source: Some(Arc::new(e)),
    })?;
    Ok(AssistantMessage {
        content: parsed.text,
        calls: parsed.calls,
        wire: parsed.message,
        format,
        mode,
        usage: api.usage(body),
    })
}

/// A conversation as one API's request wants it.
pub(crate) struct Conversation {
    /// The system messages, joined by a blank line, for the APIs that take them apart from the messages
    /// (Anthropic's `system`, Gemini's `systemInstruction`); `None` for the others or when there are none.
    pub(crate) system: Option<String>,
    /// The messages (Responses: the input items).
    pub(crate) messages: Vec<Value>,
}

/// The conversation as `format`'s request messages: assistant messages that arrived in `format` are echoed
/// verbatim, others are written by the codec; the results of consecutive tool calls go back together, as the
/// codec groups one turn's replies (one `user` message for Anthropic, one `user` content for Gemini).
pub(crate) fn conversation(view: &ToolView, format: WireFormat, conversation: &[Message]) -> Conversation {
    let api = api::of(format);
    let codec = view.codec(format.provider());
    let mut system: Vec<&str> = Vec::new();
    let mut out = Vec::with_capacity(conversation.len());
    let push = |out: &mut Vec<Value>, v: Value| match v {
        Value::Array(items) if api.assistant_items() => out.extend(items),
        v => out.push(v),
    };
    let mut i = 0;
    while i < conversation.len() {
        match &conversation[i] {
            Message::System(c) => match api.system_message(c) {
                Some(message) => out.push(message),
                None => system.push(c),
            },
            Message::User(c) => out.push(api.user_message(c)),
            Message::Assistant(a) if a.format == format => push(&mut out, a.wire.clone()),
            Message::Assistant(a) => push(&mut out, codec.assistant_message(&a.content, &a.calls)),
            Message::Tool(_) => {
                let start = i;
                while i + 1 < conversation.len() && matches!(conversation[i + 1], Message::Tool(_)) {
                    i += 1;
                }
                let results: Vec<ToolResult> = conversation[start..=i]
                    .iter()
                    .filter_map(|m| match m {
                        Message::Tool(r) => Some(r.clone()),
                        _ => None,
                    })
                    .collect();
                out.extend(codec.replies(&results));
            }
        }
        i += 1;
    }
    Conversation { system: (!system.is_empty()).then(|| system.join("\n\n")), messages: out }
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
        let a = parse(WireFormat::Ollama, &body, &ToolView::new(Vec::new()), 0, Mode::Live).unwrap();
        let b = parse(WireFormat::Ollama, &body, &ToolView::new(Vec::new()), 0, Mode::Live).unwrap();
        assert_eq!(a, b, "deterministic");
        assert_ne!(a.calls[0].id(), a.calls[1].id(), "unique within a turn");
        assert!(ToolCall::is_generated_id(a.calls[0].id()));
        assert_eq!(a.wire["tool_calls"][1]["id"], a.calls[1].id());
        let later = parse(WireFormat::Ollama, &body, &ToolView::new(Vec::new()), 2, Mode::Live).unwrap();
        assert_ne!(later.calls[0].id(), a.calls[0].id(), "unique across turns");
    }

    #[test]
    fn ollama_keeps_server_ids_and_reports_errors() {
        let body = json!({"message": {"role": "assistant", "content": "x", "tool_calls": [
            {"id": "call_abc", "function": {"name": "t", "arguments": null}}
        ]}});
        let a = parse(WireFormat::Ollama, &body, &ToolView::new(Vec::new()), 0, Mode::Live).unwrap();
        assert_eq!(a.calls[0].id(), "call_abc");
        assert_eq!(a.calls[0].arguments(), Ok(&json!({})));
        assert_eq!(a.wire, body["message"]);
        for (body, expected) in [
            (json!([]), "not a JSON object"),
            (json!({"done": true}), "no `message` object"),
            (json!({"message": {"content": 5}}), "neither text nor null"),
            (json!({"message": {"content": "", "tool_calls": {}}}), "not an array"),
        ] {
            let e = parse(WireFormat::Ollama, &body, &ToolView::new(Vec::new()), 0, Mode::Live).unwrap_err();
            assert!(e.to_string().contains(expected), "{e}");
        }
        let e = parse(
            WireFormat::Ollama,
            &json!({"error": "model 'x' not found"}),
            &ToolView::new(Vec::new()),
            0,
            Mode::Live,
        )
        .unwrap_err();
        assert_eq!(e, ModelError::Server { message: "model 'x' not found".into() });
    }

    #[test]
    fn a_message_the_codec_refuses_keeps_the_codecs_error() {
        let body = json!({"message": {"content": "", "tool_calls": {}}});
        let e = parse(WireFormat::Ollama, &body, &ToolView::new(Vec::new()), 0, Mode::Live).unwrap_err();
        let source = std::error::Error::source(&e).expect("the codec's error is kept");
        let codec = source.downcast_ref::<keel_tools_core::codecs::MessageError>().expect("a MessageError");
        assert_eq!(e.to_string(), format!("malformed model response: the assistant message: {codec}"));
        assert!(matches!(&e, ModelError::Malformed { source: Some(_), .. }));
        // Found wrong by the client itself: no source.
        let e =
            parse(WireFormat::Ollama, &json!({"done": true}), &ToolView::new(Vec::new()), 0, Mode::Live).unwrap_err();
        assert!(std::error::Error::source(&e).is_none());
    }

    #[test]
    fn openai_text_arguments_and_errors() {
        let view = ToolView::new(Vec::new());
        let body = json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "incident-search", "arguments": "{\"q\":1}"}},
            {"type": "function", "function": {"name": "x", "arguments": "not json"}}
        ]}}]});
        let a = parse(WireFormat::OpenAiChat, &body, &view, 0, Mode::Replay).unwrap();
        assert_eq!(a.content, "");
        assert_eq!(a.calls[0].arguments(), Ok(&json!({"q": 1})));
        // Not in the view: kept as sent.
        assert_eq!(a.calls[0].name(), "incident-search");
        assert!(a.calls[1].arguments().is_err());
        assert!(ToolCall::is_generated_id(a.calls[1].id()));
        assert_eq!(a.wire["tool_calls"][1]["id"], a.calls[1].id());
        let e = parse(WireFormat::OpenAiChat, &json!({"choices": []}), &view, 0, Mode::Live).unwrap_err();
        assert!(matches!(e, ModelError::Malformed { .. }));
        let e =
            parse(WireFormat::OpenAiChat, &json!({"error": {"message": "bad key"}}), &view, 0, Mode::Live).unwrap_err();
        assert_eq!(e, ModelError::Server { message: "bad key".into() });
    }
}
