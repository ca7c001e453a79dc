//! OpenAI Responses: the assistant turn is the `output` items (`status: failed` is the server's error), the tokens
//! under `usage`; the conversation is sent as items, an assistant turn's several of them; a streamed answer is typed
//! events, the last of which carries the whole response; the provider's tool search answers in
//! `tool_search_output` items.

use keel_tools_core::events::Usage;
use serde_json::{Value, json};

use super::{WireApi, checked, count};
use crate::model::{AssistantMessage, ModelError};
use crate::stream::{Accumulate, Emit, json, reported_error, str_of, stream_error};

/// [`WireFormat::OpenAiResponses`](crate::WireFormat::OpenAiResponses).
pub(super) struct Responses;

impl WireApi for Responses {
    fn recognizes(&self, body: &Value) -> bool {
        body.get("output").is_some() && body.get("object").and_then(Value::as_str) != Some("chat.completion")
    }

    fn message<'b>(&self, body: &'b Value) -> Result<&'b Value, ModelError> {
        checked(body)?;
        if body.get("status").and_then(Value::as_str) == Some("failed") {
            return Err(ModelError::Server { message: "the response failed".into() });
        }
        match body.get("output") {
            Some(output @ Value::Array(_)) => Ok(output),
            _ => Err(ModelError::malformed("the response has no `output` array")),
        }
    }

    fn usage(&self, body: &Value) -> Option<Usage> {
        Some(Usage {
            input_tokens: count(body, "/usage/input_tokens")?,
            output_tokens: count(body, "/usage/output_tokens").unwrap_or(0),
            cached_input_tokens: count(body, "/usage/input_tokens_details/cached_tokens"),
        })
    }

    fn recorded_body(&self, a: &AssistantMessage) -> Value {
        json!({"object": "response", "status": "completed", "output": a.wire})
    }

    fn assistant_items(&self) -> bool {
        true
    }

    fn accumulator(&self) -> Box<dyn Accumulate> {
        Box::<ResponsesStream>::default()
    }

    /// The tools of the `tool_search_output` items (the output items, or a body's `output`).
    fn loaded_by_search(&self, wire: &Value) -> Vec<String> {
        let mut names = Vec::new();
        let items = match wire {
            Value::Array(items) => items.as_slice(),
            other => other.get("output").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default(),
        };
        for item in items.iter().filter(|i| i.get("type").and_then(Value::as_str) == Some("tool_search_output")) {
            for tool in item.get("tools").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
                // A namespace holds its tools, named within it; a function is one.
                let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
                match tool.get("tools").and_then(Value::as_array) {
                    Some(inner) => names
                        .extend(inner.iter().filter_map(|t| t.get("name")?.as_str()).map(|n| format!("{name}-{n}"))),
                    None if !name.is_empty() => names.push(name.to_owned()),
                    None => {}
                }
            }
        }
        names
    }
}

/// Responses: typed events; `response.completed` carries the whole response.
#[derive(Default)]
struct ResponsesStream {
    response: Option<Value>,
}

impl Accumulate for ResponsesStream {
    fn feed(&mut self, event: Option<&str>, data: &str, emit: &Emit<'_>) -> Result<(), ModelError> {
        let e = json(data)?;
        let index = || e.get("output_index").and_then(Value::as_u64).unwrap_or(0) as usize;
        match str_of(&e, "type").or(event).unwrap_or_default() {
            "response.output_text.delta" => emit.text(str_of(&e, "delta").unwrap_or_default()),
            "response.output_item.added" => {
                let item = e.get("item").unwrap_or(&Value::Null);
                if str_of(item, "type") == Some("function_call") {
                    let name = str_of(item, "name").unwrap_or_default();
                    // A function of a namespace: named as the codec joins the two.
                    match str_of(item, "namespace").filter(|n| !n.is_empty()) {
                        Some(namespace) => {
                            emit.started(index(), str_of(item, "call_id"), &format!("{namespace}-{name}"))
                        }
                        None => emit.started(index(), str_of(item, "call_id"), name),
                    }
                }
            }
            "response.function_call_arguments.delta" => {
                emit.arguments(index(), str_of(&e, "delta").unwrap_or_default())
            }
            "response.function_call_arguments.done" => emit.complete(index()),
            "response.completed" | "response.incomplete" => self.response = e.get("response").cloned(),
            "response.failed" => {
                let response = e.get("response").unwrap_or(&Value::Null);
                return Err(
                    reported_error(response).unwrap_or_else(|| stream_error("the response failed".into(), false))
                );
            }
            "error" => {
                // `{"type": "error", "code", "message", "param"}`: the error's fields at the top.
                let wrapped = json!({"error": e});
                return Err(reported_error(&wrapped).unwrap_or_else(|| stream_error(e.to_string(), false)));
            }
            _ => {}
        }
        Ok(())
    }

    fn complete(&self) -> bool {
        self.response.is_some()
    }

    fn body(self: Box<Self>) -> Value {
        self.response.unwrap_or(Value::Null)
    }
}
