//! Anthropic Messages: the body is the assistant message (`content` blocks); cache reads and writes are counted
//! apart from `input_tokens`; system messages go apart, as `system`; a streamed answer is typed events, one content
//! block at a time; the provider's tool search answers in `tool_search_tool_result` blocks.

use keel_tools_core::events::Usage;
use serde_json::{Map, Value, json};

use super::{WireApi, count, object_at};
use crate::model::{AssistantMessage, ModelError, error_message};
use crate::stream::{Accumulate, Emit, json, str_of, stream_error};

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

    fn accumulator(&self) -> Box<dyn Accumulate> {
        Box::<AnthropicStream>::default()
    }

    /// The `tool_reference`s of the `tool_search_tool_result` blocks.
    fn loaded_by_search(&self, wire: &Value) -> Vec<String> {
        let mut names = Vec::new();
        let blocks = wire.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        for block in blocks.iter().filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_search_tool_result"))
        {
            let references = block.pointer("/content/tool_references").and_then(Value::as_array);
            for reference in references.map(Vec::as_slice).unwrap_or_default() {
                if let Some(name) = reference.get("tool_name").and_then(Value::as_str) {
                    names.push(name.to_owned());
                }
            }
        }
        names
    }
}

/// Anthropic Messages: `message_start`, then per content block `content_block_start`, its deltas (`text_delta`,
/// `input_json_delta`) and `content_block_stop`, then `message_delta` (stop reason, output tokens) and
/// `message_stop`; `ping`s anywhere; an `error` event ends it.
#[derive(Default)]
struct AnthropicStream {
    message: Map<String, Value>,
    blocks: Vec<(u64, Value, String)>,
    stopped: bool,
}

impl AnthropicStream {
    fn block(&mut self, e: &Value) -> Option<&mut (u64, Value, String)> {
        let index = e.get("index").and_then(Value::as_u64)?;
        self.blocks.iter_mut().find(|b| b.0 == index)
    }

    /// `content_block_start`: a text block or a `tool_use` block begins.
    fn start_block(&mut self, e: &Value, emit: &Emit<'_>) {
        let index = e.get("index").and_then(Value::as_u64).unwrap_or(self.blocks.len() as u64);
        let block = e.get("content_block").cloned().unwrap_or(Value::Null);
        if str_of(&block, "type") == Some("tool_use") {
            emit.started(index as usize, str_of(&block, "id"), str_of(&block, "name").unwrap_or_default());
        } else if let Some(t) = str_of(&block, "text") {
            emit.text(t);
        }
        self.blocks.push((index, block, String::new()));
    }

    /// `content_block_delta`: the next piece of a started block's text, input, thinking or signature.
    fn delta(&mut self, e: &Value, emit: &Emit<'_>) -> Result<(), ModelError> {
        let delta = e.get("delta").cloned().unwrap_or(Value::Null);
        let Some((index, block, json_text)) = self.block(e) else {
            return Err(ModelError::malformed("a content_block_delta for a block that was not started"));
        };
        let index = *index as usize;
        match str_of(&delta, "type") {
            Some("text_delta") => {
                let t = str_of(&delta, "text").unwrap_or_default();
                if let Some(Value::String(text)) = block.get_mut("text") {
                    text.push_str(t);
                }
                emit.text(t);
            }
            Some("input_json_delta") => {
                let piece = str_of(&delta, "partial_json").unwrap_or_default();
                json_text.push_str(piece);
                emit.arguments(index, piece);
            }
            Some("thinking_delta") => {
                if let (Some(Value::String(t)), Some(piece)) = (block.get_mut("thinking"), str_of(&delta, "thinking")) {
                    t.push_str(piece);
                }
            }
            Some("signature_delta") => {
                if let (Value::Object(b), Some(s)) = (&mut *block, str_of(&delta, "signature")) {
                    b.insert("signature".into(), Value::String(s.to_owned()));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// `content_block_stop`: a `tool_use` block's input is complete.
    fn stop_block(&mut self, e: &Value, emit: &Emit<'_>) {
        if let Some((index, block, json_text)) = self.block(e)
            && str_of(block, "type") == Some("tool_use")
        {
            // The input as streamed; text that is not JSON stays text, which the executor answers with
            // invalid_arguments.
            let input = if json_text.trim().is_empty() {
                block.get("input").cloned().unwrap_or_else(|| json!({}))
            } else {
                serde_json::from_str(json_text).unwrap_or_else(|_| Value::String(json_text.clone()))
            };
            block["input"] = input;
            emit.complete(*index as usize);
        }
    }

    /// `message_delta`: the message's last fields (the stop reason) and its usage so far.
    fn message_delta(&mut self, e: &Value) {
        if let Some(Value::Object(delta)) = e.get("delta") {
            for (k, v) in delta {
                self.message.insert(k.clone(), v.clone());
            }
        }
        if let Some(Value::Object(usage)) = e.get("usage") {
            let entry = self.message.entry("usage").or_insert_with(|| json!({}));
            if let Value::Object(total) = entry {
                for (k, v) in usage.iter().filter(|(_, v)| !v.is_null()) {
                    total.insert(k.clone(), v.clone());
                }
            }
        }
    }
}

/// The error of an `error` event, worth a retry when the API is overloaded or failed on its side.
fn error_event(e: &Value) -> ModelError {
    let kind = e.pointer("/error/type").and_then(Value::as_str).unwrap_or_default();
    let message = error_message(e).unwrap_or_else(|| e.to_string());
    stream_error(format!("{kind}: {message}"), matches!(kind, "overloaded_error" | "api_error"))
}

impl Accumulate for AnthropicStream {
    fn feed(&mut self, event: Option<&str>, data: &str, emit: &Emit<'_>) -> Result<(), ModelError> {
        let e = json(data)?;
        match str_of(&e, "type").or(event).unwrap_or_default() {
            "message_start" => {
                if let Some(Value::Object(m)) = e.get("message") {
                    self.message = m.clone();
                }
            }
            "content_block_start" => self.start_block(&e, emit),
            "content_block_delta" => self.delta(&e, emit)?,
            "content_block_stop" => self.stop_block(&e, emit),
            "message_delta" => self.message_delta(&e),
            "message_stop" => self.stopped = true,
            "error" => return Err(error_event(&e)),
            _ => {}
        }
        Ok(())
    }

    fn complete(&self) -> bool {
        self.stopped
    }

    fn body(self: Box<Self>) -> Value {
        let mut message = self.message;
        message.insert("type".into(), json!("message"));
        message.entry("role").or_insert_with(|| json!("assistant"));
        let mut blocks = self.blocks;
        blocks.sort_by_key(|b| b.0);
        message.insert("content".into(), Value::Array(blocks.into_iter().map(|b| b.1).collect()));
        Value::Object(message)
    }
}
