//! Ollama `/api/chat`: the assistant message at `message`, the counts at the top of the body; a streamed answer
//! (`stream: true`) is JSON Lines.

use keel_tools_core::events::Usage;
use serde_json::{Map, Value, json};

use super::{WireApi, count, object_at};
use crate::model::{AssistantMessage, ModelError};
use crate::stream::{Accumulate, Emit, Framing, json, reported_error, str_of};

/// [`WireFormat::Ollama`](crate::WireFormat::Ollama).
pub(super) struct Ollama;

impl WireApi for Ollama {
    fn recognizes(&self, body: &Value) -> bool {
        body.get("message").is_some() || body.get("error").is_some()
    }

    fn message<'b>(&self, body: &'b Value) -> Result<&'b Value, ModelError> {
        object_at(body, "/message", "`message`")
    }

    fn usage(&self, body: &Value) -> Option<Usage> {
        Some(Usage {
            input_tokens: count(body, "/prompt_eval_count")?,
            output_tokens: count(body, "/eval_count").unwrap_or(0),
            cached_input_tokens: None,
        })
    }

    fn recorded_body(&self, a: &AssistantMessage) -> Value {
        json!({"message": a.wire, "done": true})
    }

    fn framing(&self) -> Framing {
        Framing::JsonLines
    }

    fn accumulator(&self) -> Box<dyn Accumulate> {
        Box::<OllamaStream>::default()
    }
}

/// Ollama `/api/chat` with `"stream": true`: JSON Lines of `{"message": {"content", "tool_calls"?}, "done": false}`,
/// the last with `"done": true` and the counts.
#[derive(Default)]
struct OllamaStream {
    text: String,
    thinking: Option<String>,
    calls: Vec<Value>,
    last: Option<Map<String, Value>>,
}

impl Accumulate for OllamaStream {
    fn feed(&mut self, _event: Option<&str>, data: &str, emit: &Emit<'_>) -> Result<(), ModelError> {
        let line = json(data)?;
        if let Some(error) = reported_error(&line) {
            return Err(error);
        }
        let message = line.get("message").unwrap_or(&Value::Null);
        if let Some(t) = str_of(message, "content") {
            self.text.push_str(t);
            emit.text(t);
        }
        if let Some(t) = str_of(message, "thinking") {
            self.thinking.get_or_insert_with(String::new).push_str(t);
        }
        for call in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let function = call.get("function").unwrap_or(&Value::Null);
            emit.whole_call(
                self.calls.len(),
                str_of(call, "id"),
                str_of(function, "name").unwrap_or_default(),
                function.get("arguments"),
            );
            self.calls.push(call.clone());
        }
        if line.get("done").and_then(Value::as_bool) == Some(true)
            && let Value::Object(m) = line
        {
            self.last = Some(m);
        }
        Ok(())
    }

    fn complete(&self) -> bool {
        self.last.is_some()
    }

    fn body(self: Box<Self>) -> Value {
        let mut body = self.last.unwrap_or_default();
        let mut message = json!({"role": "assistant", "content": self.text});
        if let Some(t) = self.thinking {
            message["thinking"] = Value::String(t);
        }
        if !self.calls.is_empty() {
            message["tool_calls"] = Value::Array(self.calls);
        }
        body.insert("message".into(), message);
        Value::Object(body)
    }
}
