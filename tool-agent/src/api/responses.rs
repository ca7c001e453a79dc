//! OpenAI Responses: the assistant turn is the `output` items (`status: failed` is the server's error), the tokens
//! under `usage`; the conversation is sent as items, an assistant turn's several of them.

use keel_tools_core::events::Usage;
use serde_json::{Value, json};

use super::{WireApi, checked, count};
use crate::model::{AssistantMessage, ModelError};

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
}
