//! The five HTTP APIs: finding the assistant message in a response body (read by the provider's codec), the tokens
//! it reports, and writing a conversation as the request's messages (each message written by the codec). Shared by
//! the HTTP clients and [`crate::Replay`], so a replayed response goes through exactly the parsing a live one does.

use std::sync::Arc;

use keel_tools_core::events::Usage;
use keel_tools_core::{ToolResult, ToolView};
use serde_json::{Map, Value, json};

use crate::model::{AssistantMessage, Message, Mode, ModelError, WireFormat};

/// The error message of an error body: `{"error": "..."}` (Ollama) or `{"error": {"message": "..."}}` (OpenAI,
/// Anthropic, Gemini).
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

/// The format a recorded response body is in, from its shape: `choices` (Chat Completions), `output` (Responses),
/// `candidates` (Gemini), `"type": "message"` (Anthropic), `message` or an error (Ollama).
pub(crate) fn detect(body: &Value) -> Option<WireFormat> {
    if body.get("choices").is_some() {
        Some(WireFormat::OpenAiChat)
    } else if body.get("output").is_some() && body.get("object").and_then(Value::as_str) != Some("chat.completion") {
        Some(WireFormat::OpenAiResponses)
    } else if body.get("candidates").is_some() || body.get("promptFeedback").is_some() {
        Some(WireFormat::Gemini)
    } else if body.get("type").and_then(Value::as_str) == Some("message") {
        Some(WireFormat::Anthropic)
    } else if body.get("message").is_some() || body.get("error").is_some() {
        Some(WireFormat::Ollama)
    } else {
        None
    }
}

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
    let codec = view.codec(format.provider());
    let message = match format {
        WireFormat::Ollama => Value::Object(response_message(body, "/message", "`message`")?.clone()),
        WireFormat::OpenAiChat => {
            Value::Object(response_message(body, "/choices/0/message", "`choices[0].message`")?.clone())
        }
        WireFormat::Anthropic => Value::Object(response_message(body, "", "message")?.clone()),
        WireFormat::OpenAiResponses => {
            if !body.is_object() {
                return Err(ModelError::malformed("the response is not a JSON object"));
            }
            if let Some(message) = error_message(body) {
                return Err(ModelError::Server { message });
            }
            if body.get("status").and_then(Value::as_str) == Some("failed") {
                return Err(ModelError::Server { message: "the response failed".into() });
            }
            match body.get("output") {
                Some(output @ Value::Array(_)) => output.clone(),
                _ => return Err(ModelError::malformed("the response has no `output` array")),
            }
        }
        WireFormat::Gemini => {
            if !body.is_object() {
                return Err(ModelError::malformed("the response is not a JSON object"));
            }
            if let Some(message) = error_message(body) {
                return Err(ModelError::Server { message });
            }
            if let Some(reason) = body.pointer("/promptFeedback/blockReason").and_then(Value::as_str) {
                return Err(ModelError::Server { message: format!("the prompt was blocked ({reason})") });
            }
            match body.pointer("/candidates/0/content") {
                Some(content @ Value::Object(_)) => content.clone(),
                _ => {
                    return Err(match body.pointer("/candidates/0/finishReason").and_then(Value::as_str) {
                        Some(reason) => {
                            ModelError::Server { message: format!("the model stopped without content ({reason})") }
                        }
                        None => ModelError::malformed("the response has no `candidates[0].content` object"),
                    });
                }
            }
        }
    };
    let parsed = codec.message(&message, first_index).map_err(|e| ModelError::Malformed {
        message: format!("the assistant message: {e}"),
        source: Some(Arc::new(e)),
    })?;
    Ok(AssistantMessage {
        content: parsed.text,
        calls: parsed.calls,
        wire: parsed.message,
        format,
        mode,
        usage: usage(format, body),
    })
}

/// The tokens a response body of `format` reports, when it reports them.
pub(crate) fn usage(format: WireFormat, body: &Value) -> Option<Usage> {
    let n = |p: &str| body.pointer(p).and_then(Value::as_u64);
    let (input, output, cached) = match format {
        WireFormat::Ollama => (n("/prompt_eval_count")?, n("/eval_count").unwrap_or(0), None),
        WireFormat::OpenAiChat => (
            n("/usage/prompt_tokens")?,
            n("/usage/completion_tokens").unwrap_or(0),
            n("/usage/prompt_tokens_details/cached_tokens"),
        ),
        WireFormat::OpenAiResponses => (
            n("/usage/input_tokens")?,
            n("/usage/output_tokens").unwrap_or(0),
            n("/usage/input_tokens_details/cached_tokens"),
        ),
        // Anthropic counts cache reads and writes apart from `input_tokens`; keel's input is all three.
        WireFormat::Anthropic => {
            let read = n("/usage/cache_read_input_tokens");
            let written = n("/usage/cache_creation_input_tokens").unwrap_or(0);
            (n("/usage/input_tokens")? + read.unwrap_or(0) + written, n("/usage/output_tokens").unwrap_or(0), read)
        }
        WireFormat::Gemini => (
            n("/usageMetadata/promptTokenCount")?,
            n("/usageMetadata/candidatesTokenCount").unwrap_or(0) + n("/usageMetadata/thoughtsTokenCount").unwrap_or(0),
            n("/usageMetadata/cachedContentTokenCount"),
        ),
    };
    Some(Usage { input_tokens: input, output_tokens: output, cached_input_tokens: cached })
}

/// A response body of the assistant message's format that [`parse`] reads back into the same message: for a
/// replay script recorded from a conversation.
pub(crate) fn recorded_body(a: &AssistantMessage) -> Value {
    let calls = !a.calls.is_empty();
    match a.format {
        WireFormat::OpenAiChat => json!({"choices": [{"index": 0, "message": a.wire,
            "finish_reason": if calls { "tool_calls" } else { "stop" }}]}),
        WireFormat::Ollama => json!({"message": a.wire, "done": true}),
        WireFormat::OpenAiResponses => json!({"object": "response", "status": "completed", "output": a.wire}),
        WireFormat::Anthropic => {
            let mut body = a.wire.clone();
            if let Value::Object(m) = &mut body {
                m.insert("type".into(), json!("message"));
                m.insert("stop_reason".into(), json!(if calls { "tool_use" } else { "end_turn" }));
            }
            body
        }
        WireFormat::Gemini => json!({"candidates": [{"index": 0, "content": a.wire, "finishReason": "STOP"}]}),
    }
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
    let codec = view.codec(format.provider());
    let separate_system = matches!(format, WireFormat::Anthropic | WireFormat::Gemini);
    let mut system: Vec<&str> = Vec::new();
    let mut out = Vec::with_capacity(conversation.len());
    let push = |out: &mut Vec<Value>, v: Value| match v {
        // Responses: an assistant turn is several output items.
        Value::Array(items) if format == WireFormat::OpenAiResponses => out.extend(items),
        v => out.push(v),
    };
    let mut i = 0;
    while i < conversation.len() {
        match &conversation[i] {
            Message::System(c) if separate_system => system.push(c),
            Message::System(c) => out.push(json!({"role": "system", "content": c})),
            Message::User(c) if format == WireFormat::Gemini => {
                out.push(json!({"role": "user", "parts": [{"text": c}]}))
            }
            Message::User(c) => out.push(json!({"role": "user", "content": c})),
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
