//! Anthropic Messages: the body is the assistant message (`content` blocks); cache reads and writes are counted
//! apart from `input_tokens`; system messages go apart, as `system`.

use keel_tools_core::events::Usage;
use serde_json::{Value, json};

use super::{WireApi, count, object_at};
use crate::model::{AssistantMessage, ModelError};

/// [`WireFormat::Anthropic`](crate::WireFormat::Anthropic).
pub(super) struct Anthropic;

impl WireApi for Anthropic {
    fn recognizes(&self, body: &Value) -> bool {
        body.get("type").and_then(Value::as_str) == Some("message")
    }

    fn message<'b>(&self, body: &'b Value) -> Result<&'b Value, ModelError> {
        object_at(body, "", "message")
    }

    /// keel's input is all three of `input_tokens` and the cache reads and writes; the reads are the cached ones.
    fn usage(&self, body: &Value) -> Option<Usage> {
        let read = count(body, "/usage/cache_read_input_tokens");
        let written = count(body, "/usage/cache_creation_input_tokens").unwrap_or(0);
        Some(Usage {
            input_tokens: count(body, "/usage/input_tokens")? + read.unwrap_or(0) + written,
            output_tokens: count(body, "/usage/output_tokens").unwrap_or(0),
            cached_input_tokens: read,
        })
    }

    fn recorded_body(&self, a: &AssistantMessage) -> Value {
        let mut body = a.wire.clone();
        if let Value::Object(m) = &mut body {
            m.insert("type".into(), json!("message"));
            m.insert("stop_reason".into(), json!(if a.calls.is_empty() { "end_turn" } else { "tool_use" }));
        }
        body
    }

    fn system_message(&self, _text: &str) -> Option<Value> {
        None
    }
}
