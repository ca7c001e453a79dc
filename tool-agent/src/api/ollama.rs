//! Ollama `/api/chat` (`stream: false`): the assistant message at `message`, the counts at the top of the body.

use keel_tools_core::events::Usage;
use serde_json::{Value, json};

use super::{WireApi, count, object_at};
use crate::model::{AssistantMessage, ModelError};

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
}
