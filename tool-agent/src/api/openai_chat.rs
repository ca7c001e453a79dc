//! OpenAI Chat Completions: the assistant message at `choices[0].message`, the tokens under `usage`.

use keel_tools_core::events::Usage;
use serde_json::{Value, json};

use super::{WireApi, count, object_at};
use crate::model::{AssistantMessage, ModelError};

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
}
