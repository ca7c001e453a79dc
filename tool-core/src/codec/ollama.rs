//! Ollama `/api/chat`: tools as `{"type": "function", "function": {...}}` under their registered names, calls with
//! object arguments, replies as `tool` messages.

mod loss;
mod render;

use serde_json::{Value, json};

use super::entry::{examples_loss, fold_examples, model_input};
use super::format::{Format, Push};
use super::message::{arguments_or_empty, chat_assistant, chat_message, string_field};
use super::{Codec, MessageError, ParsedMessage};
use crate::call::{ToolCall, id_or_generated, object_or_null_arguments};
use crate::result::ToolResult;
use crate::tool_definition::ToolDefinition;

/// [`Provider::Ollama`](crate::Provider::Ollama).
pub(super) struct Ollama;

impl Format for Ollama {
    fn wire_names(&self) -> bool {
        false
    }

    fn tool(&self, def: &ToolDefinition) -> Value {
        let mut entry = render::tool(def.name(), def.description(), &model_input(def));
        fold_examples(def, &mut entry, "/function/description");
        entry
    }

    fn entry_losses(&self, def: &ToolDefinition, entry: &Value, push: &mut Push<'_>) {
        loss::entry_losses(def, entry, push);
        examples_loss(def, "/function/description", push);
    }

    /// `message.tool_calls[index]`: `{"id"?: "...", "function": {"name": "...", "arguments": {...}, "index"?: n}}`.
    ///
    /// `arguments` is an object; missing or `null` reads as `{}` (Ollama is written in Go, where an empty map may
    /// serialize as `null`). `id` only exists on servers from late 2025 on; without it the id is generated.
    fn call(&self, _codec: &Codec, item: &Value, index: usize) -> ToolCall {
        let function = item.get("function");
        let name = string_field(function, "name");
        let arguments = object_or_null_arguments(function.and_then(|f| f.get("arguments")));
        let id = id_or_generated(item.get("id"), index, &name, &arguments);
        ToolCall::from_parts(id, name, arguments)
    }

    fn message(&self, codec: &Codec, message: &Value, first_index: usize) -> Result<ParsedMessage, MessageError> {
        chat_message(message, first_index, |item, index| self.call(codec, item, index))
    }

    fn assistant(&self, _codec: &Codec, text: &str, calls: &[ToolCall]) -> Value {
        chat_assistant(
            text,
            calls,
            |c| json!({"id": c.id(), "function": {"name": c.name(), "arguments": arguments_or_empty(c)}}),
        )
    }

    /// `{"role": "tool", "tool_name": <tool name>, "tool_call_id": <call id>, "content": <text>}`.
    fn reply(&self, _codec: &Codec, result: &ToolResult) -> Value {
        json!({
            "role": "tool",
            "tool_name": result.tool_name,
            "tool_call_id": result.call_id,
            "content": result.content_text(),
        })
    }

    fn reply_losses(&self, push: &mut Push<'_>) {
        loss::reply_losses(push);
    }
}
