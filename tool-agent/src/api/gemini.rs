//! Gemini `generateContent`: the assistant message at `candidates[0].content` (a blocked prompt or a candidate
//! stopped without content is the server's error), the tokens under `usageMetadata`; system messages go apart, as
//! `systemInstruction`, and a user message is text `parts`; a streamed answer (`streamGenerateContent?alt=sse`) is
//! responses of the next parts.

use keel_tools_core::events::Usage;
use serde_json::{Map, Value, json};

use super::{WireApi, checked, count};
use crate::model::{AssistantMessage, ModelError};
use crate::stream::{Accumulate, Emit, json, reported_error, str_of};

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

    fn accumulator(&self) -> Box<dyn Accumulate> {
        Box::<GeminiStream>::default()
    }
}

/// Gemini `streamGenerateContent?alt=sse`: each event a `GenerateContentResponse` with the next parts; the last
/// has `finishReason` and the usage.
#[derive(Default)]
struct GeminiStream {
    parts: Vec<Value>,
    calls: usize,
    finish: Option<Value>,
    usage: Option<Value>,
    feedback: Option<Value>,
}

impl Accumulate for GeminiStream {
    fn feed(&mut self, _event: Option<&str>, data: &str, emit: &Emit<'_>) -> Result<(), ModelError> {
        let chunk = json(data)?;
        if let Some(error) = reported_error(&chunk) {
            return Err(error);
        }
        if let Some(u) = chunk.get("usageMetadata") {
            self.usage = Some(u.clone());
        }
        if let Some(f) = chunk.get("promptFeedback") {
            self.feedback = Some(f.clone());
        }
        let Some(candidate) = chunk.pointer("/candidates/0") else { return Ok(()) };
        for part in candidate.pointer("/content/parts").and_then(Value::as_array).into_iter().flatten() {
            if let Some(call) = part.get("functionCall").or_else(|| part.get("function_call")) {
                emit.whole_call(
                    self.calls,
                    str_of(call, "id"),
                    str_of(call, "name").unwrap_or_default(),
                    call.get("args"),
                );
                self.calls += 1;
                self.parts.push(part.clone());
                continue;
            }
            let thought = part.get("thought").and_then(Value::as_bool) == Some(true);
            if let Some(t) = str_of(part, "text") {
                if !thought {
                    emit.text(t);
                }
                let merge = self.parts.last_mut().filter(|p| {
                    p.get("text").is_some()
                        && p.get("thoughtSignature").is_none()
                        && (p.get("thought").and_then(Value::as_bool) == Some(true)) == thought
                });
                if let Some(Value::Object(prev)) = merge {
                    if let Some(Value::String(s)) = prev.get_mut("text") {
                        s.push_str(t);
                    }
                    if let Some(signature) = part.get("thoughtSignature") {
                        prev.insert("thoughtSignature".into(), signature.clone());
                    }
                    continue;
                }
            }
            self.parts.push(part.clone());
        }
        if let Some(f) = candidate.get("finishReason").filter(|f| !f.is_null()) {
            self.finish = Some(f.clone());
        }
        Ok(())
    }

    fn complete(&self) -> bool {
        self.finish.is_some() || self.feedback.as_ref().is_some_and(|f| f.get("blockReason").is_some())
    }

    fn body(self: Box<Self>) -> Value {
        let mut body = Map::new();
        if self.finish.is_some() || !self.parts.is_empty() {
            let mut candidate = json!({"index": 0, "content": {"role": "model", "parts": self.parts}});
            if let Some(f) = self.finish {
                candidate["finishReason"] = f;
            }
            body.insert("candidates".into(), json!([candidate]));
        }
        if let Some(u) = self.usage {
            body.insert("usageMetadata".into(), u);
        }
        if let Some(f) = self.feedback {
            body.insert("promptFeedback".into(), f);
        }
        Value::Object(body)
    }
}
