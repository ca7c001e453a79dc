//! Anthropic Messages: tools as `{"name", "description", "input_schema"}` under their wire names, calls as
//! `tool_use` content blocks with object arguments, replies as `tool_result` blocks in one `user` message.

mod render;

use serde_json::{Value, json};

use super::entry::model_input;
use super::format::{Format, Push};
use super::loss::wire_name_loss;
use super::message::{arguments_or_empty, has_id, object, string_field};
use super::{Codec, MessageError, ParsedMessage};
use crate::call::{ToolCall, id_or_generated, object_arguments};
use crate::result::ToolResult;
use crate::tool_definition::ToolDefinition;

/// [`Provider::Anthropic`](crate::Provider::Anthropic).
pub(super) struct Anthropic;

impl Format for Anthropic {
    fn tool(&self, def: &ToolDefinition) -> Value {
        render::tool(def.wire_name(), def.description(), &model_input(def), def.examples())
    }

    /// The wire name: Anthropic takes the schema as it is.
    fn entry_losses(&self, def: &ToolDefinition, _entry: &Value, push: &mut Push<'_>) {
        wire_name_loss(def, "Anthropic", "/name", push);
    }

    /// A content block of type `tool_use`: `{"type": "tool_use", "id": "toolu_...", "name": "...", "input": {...}}`.
    fn call(&self, codec: &Codec, item: &Value, index: usize) -> ToolCall {
        let shown = string_field(Some(item), "name");
        let arguments = object_arguments(item.get("input"));
        let id = id_or_generated(item.get("id"), index, &shown, &arguments);
        ToolCall::from_parts(id, codec.registered_name(&shown), arguments)
    }

    fn message(&self, codec: &Codec, message: &Value, first_index: usize) -> Result<ParsedMessage, MessageError> {
        let m = object(message, "the message")?;
        let blocks = match m.get("content") {
            Some(Value::Array(blocks)) => blocks.clone(),
            Some(Value::String(s)) => {
                let message = json!({"role": "assistant", "content": s});
                return Ok(ParsedMessage { text: s.clone(), calls: Vec::new(), message });
            }
            None | Some(Value::Null) => Vec::new(),
            Some(_) => return Err(MessageError::new("`content` is neither a list of blocks nor text")),
        };
        let mut text = String::new();
        let mut calls = Vec::new();
        let mut echo = Vec::with_capacity(blocks.len());
        for mut block in blocks {
            match block.get("type").and_then(Value::as_str) {
                Some("tool_use") => {
                    let call = self.call(codec, &block, first_index + calls.len());
                    if !has_id(block.get("id"))
                        && let Value::Object(o) = &mut block
                    {
                        o.insert("id".to_owned(), Value::String(call.id().to_owned()));
                    }
                    calls.push(call);
                }
                Some("text") => {
                    if let Some(t) = block.get("text").and_then(Value::as_str) {
                        text.push_str(t);
                    }
                }
                _ => {}
            }
            echo.push(block);
        }
        Ok(ParsedMessage { text, calls, message: json!({"role": "assistant", "content": echo}) })
    }

    fn assistant(&self, codec: &Codec, text: &str, calls: &[ToolCall]) -> Value {
        let mut blocks = Vec::with_capacity(calls.len() + 1);
        if !text.is_empty() {
            blocks.push(json!({"type": "text", "text": text}));
        }
        blocks.extend(calls.iter().map(|c| {
            json!({"type": "tool_use", "id": c.id(), "name": codec.shown_name(c.name()), "input": arguments_or_empty(c)})
        }));
        json!({"role": "assistant", "content": blocks})
    }

    /// `{"type": "tool_result", "tool_use_id": <call id>, "content": <text>, "is_error": <bool>}`.
    fn reply(&self, _codec: &Codec, result: &ToolResult) -> Value {
        json!({
            "type": "tool_result",
            "tool_use_id": result.call_id,
            "content": result.content_text(),
            "is_error": !result.is_ok(),
        })
    }

    /// The `user` message holding one turn's `tool_result` blocks.
    fn replies(&self, codec: &Codec, results: &[ToolResult]) -> Vec<Value> {
        let blocks: Vec<Value> = results.iter().map(|r| self.reply(codec, r)).collect();
        vec![json!({"role": "user", "content": blocks})]
    }
}
