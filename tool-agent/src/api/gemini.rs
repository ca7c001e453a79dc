//! Gemini `generateContent`: the assistant message at `candidates[0].content` (a blocked prompt or a candidate
//! stopped without content is the server's error), the tokens under `usageMetadata`; system messages go apart, as
//! `systemInstruction`, and a user message is text `parts`.

use keel_tools_core::events::Usage;
use serde_json::{Value, json};

use super::{WireApi, checked, count};
use crate::model::{AssistantMessage, ModelError};

/// [`WireFormat::Gemini`](crate::WireFormat::Gemini).
pub(super) struct Gemini;

impl WireApi for Gemini {
    fn recognizes(&self, body: &Value) -> bool {
        body.get("candidates").is_some() || body.get("promptFeedback").is_some()
    }

    fn message<'b>(&self, body: &'b Value) -> Result<&'b Value, ModelError> {
        checked(body)?;
        if let Some(reason) = body.pointer("/promptFeedback/blockReason").and_then(Value::as_str) {
            return Err(ModelError::Server { message: format!("the prompt was blocked ({reason})") });
        }
        match body.pointer("/candidates/0/content") {
            Some(content @ Value::Object(_)) => Ok(content),
            _ => Err(match body.pointer("/candidates/0/finishReason").and_then(Value::as_str) {
                Some(reason) => ModelError::Server { message: format!("the model stopped without content ({reason})") },
                None => ModelError::malformed("the response has no `candidates[0].content` object"),
            }),
        }
    }

    /// The output counts the thoughts too.
    fn usage(&self, body: &Value) -> Option<Usage> {
        let thoughts = count(body, "/usageMetadata/thoughtsTokenCount").unwrap_or(0);
        Some(Usage {
            input_tokens: count(body, "/usageMetadata/promptTokenCount")?,
            output_tokens: count(body, "/usageMetadata/candidatesTokenCount").unwrap_or(0) + thoughts,
            cached_input_tokens: count(body, "/usageMetadata/cachedContentTokenCount"),
        })
    }

    fn recorded_body(&self, a: &AssistantMessage) -> Value {
        json!({"candidates": [{"index": 0, "content": a.wire, "finishReason": "STOP"}]})
    }

    fn system_message(&self, _text: &str) -> Option<Value> {
        None
    }

    fn user_message(&self, text: &str) -> Value {
        json!({"role": "user", "parts": [{"text": text}]})
    }
}
