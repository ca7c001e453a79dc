//! OpenAI Responses: tools as `{"type": "function", "name": ...}` under their wire names, calls as
//! `function_call` output items with JSON-text arguments, replies as `function_call_output` input items.

use serde_json::{Value, json};

use super::{Envelope, entry_losses};
use crate::call::{ToolCall, id_or_generated, text_or_object_arguments};
use crate::codec::entry::examples_loss;
use crate::codec::format::{Format, Push};
use crate::codec::message::{arguments_or_empty, has_id, string_field};
use crate::codec::{Codec, MessageError, ParsedMessage};
use crate::result::ToolResult;
use crate::tool_definition::ToolDefinition;
use crate::tool_schemas::Provider;

/// Where the parts of an entry are.
const ENVELOPE: Envelope = Envelope { name: "/name", parameters: "/parameters", strict: "/strict" };

/// [`Provider::OpenAiResponses`].
pub(in crate::codec) struct Responses;

impl Format for Responses {
    /// `{"type": "function", "name", "description", "parameters", "strict"}`: the Chat Completions entry in the
    /// Responses envelope, with the same parameters and strictness.
    fn tool(&self, def: &ToolDefinition) -> Value {
        let function = &def.render(Provider::OpenAiChat)["function"];
        json!({
            "type": "function",
            "name": function["name"],
            "description": function["description"],
            "parameters": function["parameters"],
            "strict": function["strict"],
        })
    }

    /// The examples are in the description, taken from the Chat Completions entry.
    fn entry_losses(&self, def: &ToolDefinition, entry: &Value, push: &mut Push<'_>) {
        entry_losses(def, entry, &ENVELOPE, push);
        examples_loss(def, "/description", push);
    }

    /// An output item of type `function_call`: `{"type": "function_call", "id": "fc_...", "call_id": "call_...",
    /// "name": "...", "arguments": "<JSON text>"}`.
    ///
    /// The call id is `call_id` (what `function_call_output` must echo), not the item `id`.
    fn call(&self, codec: &Codec, item: &Value, index: usize) -> ToolCall {
        // A function of a namespace (deferred tools grouped by their name's first part) is named within it:
        // `billing` and `invoice-refund` are `billing-invoice-refund`.
        let shown = match item.get("namespace").and_then(Value::as_str) {
            Some(namespace) if !namespace.is_empty() => format!("{namespace}-{}", string_field(Some(item), "name")),
            _ => string_field(Some(item), "name"),
        };
        let arguments = text_or_object_arguments(item.get("arguments"), codec.limits());
        let id = id_or_generated(item.get("call_id"), index, &shown, &arguments);
        ToolCall::from_parts(id, codec.registered_name(&shown), arguments)
    }

    /// The response's `output` items, or the response object holding them.
    fn message(&self, codec: &Codec, output: &Value, first_index: usize) -> Result<ParsedMessage, MessageError> {
        let items = match output {
            Value::Array(items) => items,
            Value::Object(o) => match o.get("output") {
                Some(Value::Array(items)) => items,
                _ => return Err(MessageError::new("the response has no `output` array")),
            },
            _ => return Err(MessageError::new("the output is neither an array of items nor a response object")),
        };
        let mut text = String::new();
        let mut calls = Vec::new();
        let mut echo = Vec::with_capacity(items.len());
        for item in items {
            let mut item = item.clone();
            match item.get("type").and_then(Value::as_str) {
                Some("function_call") => {
                    let call = self.call(codec, &item, first_index + calls.len());
                    if !has_id(item.get("call_id"))
                        && let Value::Object(o) = &mut item
                    {
                        o.insert("call_id".to_owned(), Value::String(call.id().to_owned()));
                    }
                    calls.push(call);
                }
                Some("message") => {
                    if let Some(Value::Array(parts)) = item.get("content") {
                        for part in parts {
                            if part.get("type").and_then(Value::as_str) == Some("output_text")
                                && let Some(t) = part.get("text").and_then(Value::as_str)
                            {
                                text.push_str(t);
                            }
                        }
                    }
                }
                _ => {}
            }
            echo.push(item);
        }
        Ok(ParsedMessage { text, calls, message: Value::Array(echo) })
    }

    /// The output items (an array).
    fn assistant(&self, codec: &Codec, text: &str, calls: &[ToolCall]) -> Value {
        let mut items = Vec::with_capacity(calls.len() + 1);
        if !text.is_empty() {
            items.push(json!({
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }));
        }
        items.extend(calls.iter().map(|c| {
            json!({
                "type": "function_call",
                "call_id": c.id(),
                "name": codec.shown_name(c.name()),
                "arguments": arguments_or_empty(c).to_string(),
            })
        }));
        Value::Array(items)
    }

    /// `{"type": "function_call_output", "call_id": <call id>, "output": <text>}`.
    fn reply(&self, _codec: &Codec, result: &ToolResult) -> Value {
        json!({
            "type": "function_call_output",
            "call_id": result.call_id,
            "output": result.content_text(),
        })
    }
}
