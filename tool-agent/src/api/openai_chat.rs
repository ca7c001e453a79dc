//! OpenAI Chat Completions: the assistant message at `choices[0].message`, the tokens under `usage`; a streamed
//! answer is chunks of deltas.

use keel_tools_core::events::Usage;
use serde_json::{Value, json};

use super::{WireApi, count, object_at};
use crate::model::{AssistantMessage, ModelError};
use crate::stream::{Accumulate, Emit, json, reported_error, str_of};

/// [`WireFormat::OpenAiChat`](crate::WireFormat::OpenAiChat).
pub(super) struct Chat;

impl WireApi for Chat {
    fn recognizes(&self, body: &Value) -> bool {
        body.get("choices").is_some()
    }

    fn message<'b>(&self, body: &'b Value) -> Result<&'b Value, ModelError> {
        object_at(body, "/choices/0/message", "`choices[0].message`")
    }

    fn usage(&self, body: &Value) -> Option<Usage> {
        Some(Usage {
            input_tokens: count(body, "/usage/prompt_tokens")?,
            output_tokens: count(body, "/usage/completion_tokens").unwrap_or(0),
            cached_input_tokens: count(body, "/usage/prompt_tokens_details/cached_tokens"),
        })
    }

    fn recorded_body(&self, a: &AssistantMessage) -> Value {
        let finish = if a.calls.is_empty() { "stop" } else { "tool_calls" };
        json!({"choices": [{"index": 0, "message": a.wire, "finish_reason": finish}]})
    }

    fn accumulator(&self) -> Box<dyn Accumulate> {
        Box::<ChatStream>::default()
    }
}

/// Chat Completions: `data: {"choices": [{"delta": {"content", "tool_calls": [{"index", "id", "function":
/// {"name", "arguments"}}]}, "finish_reason"}]}` chunks, a usage chunk (`stream_options.include_usage`), `[DONE]`.
#[derive(Default)]
struct ChatStream {
    text: Option<String>,
    calls: Vec<(Option<String>, String, String)>,
    /// The position in `calls` of each streamed `index`.
    indexes: Vec<u64>,
    finish: Option<Value>,
    usage: Option<Value>,
    done: bool,
}

impl Accumulate for ChatStream {
    fn feed(&mut self, _event: Option<&str>, data: &str, emit: &Emit<'_>) -> Result<(), ModelError> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk = json(data)?;
        if let Some(error) = reported_error(&chunk) {
            return Err(error);
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage.clone());
        }
        let Some(choice) = chunk.get("choices").and_then(Value::as_array).and_then(|c| c.first()) else {
            return Ok(());
        };
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        if let Some(t) = str_of(delta, "content") {
            self.text.get_or_insert_with(String::new).push_str(t);
            emit.text(t);
        }
        for item in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let index = item.get("index").and_then(Value::as_u64).unwrap_or(self.indexes.len() as u64);
            let function = item.get("function").unwrap_or(&Value::Null);
            let at = match self.indexes.iter().position(|i| *i == index) {
                Some(at) => at,
                None => {
                    self.indexes.push(index);
                    let name = str_of(function, "name").unwrap_or_default().to_owned();
                    let id = str_of(item, "id").map(str::to_owned);
                    emit.started(self.calls.len(), id.as_deref(), &name);
                    self.calls.push((id, name, String::new()));
                    self.calls.len() - 1
                }
            };
            let call = &mut self.calls[at];
            if call.0.is_none() {
                call.0 = str_of(item, "id").map(str::to_owned);
            }
            if let Some(a) = str_of(function, "arguments") {
                call.2.push_str(a);
                emit.arguments(at, a);
            }
        }
        if let Some(reason) = choice.get("finish_reason").filter(|r| !r.is_null()) {
            self.finish = Some(reason.clone());
            for at in 0..self.calls.len() {
                emit.complete(at);
            }
        }
        Ok(())
    }

    fn complete(&self) -> bool {
        self.done || self.finish.is_some()
    }

    fn body(self: Box<Self>) -> Value {
        let mut message = json!({"role": "assistant", "content": self.text});
        if !self.calls.is_empty() {
            let calls: Vec<Value> = self
                .calls
                .into_iter()
                .map(|(id, name, arguments)| {
                    let mut call = json!({"type": "function", "function": {"name": name, "arguments": arguments}});
                    if let Some(id) = id {
                        call["id"] = Value::String(id);
                    }
                    call
                })
                .collect();
            message["tool_calls"] = Value::Array(calls);
        }
        let mut body = json!({"choices": [{"index": 0, "message": message, "finish_reason": self.finish}]});
        if let Some(usage) = self.usage {
            body["usage"] = usage;
        }
        body
    }
}
