//! OpenAI Chat Completions: tools as `{"type": "function", "function": {...}}` under their wire names, calls with
//! JSON-text arguments, replies as `tool` messages.

use serde_json::{Value, json};

use super::{Envelope, entry_losses, strict};
use crate::call::{ToolCall, id_or_generated, text_or_object_arguments};
use crate::codec::entry::{examples_loss, fold_examples, model_input};
use crate::codec::format::{Format, Push};
use crate::codec::message::{arguments_or_empty, chat_assistant, chat_message, string_field};
use crate::codec::{Codec, MessageError, ParsedMessage};
use crate::result::ToolResult;
use crate::tool_definition::ToolDefinition;

/// Where the parts of an entry are.
const ENVELOPE: Envelope =
    Envelope { name: "/function/name", parameters: "/function/parameters", strict: "/function/strict" };

/// [`Provider::OpenAiChat`](crate::Provider::OpenAiChat).
pub(in crate::codec) struct Chat;

impl Format for Chat {
    /// `{"type": "function", "function": {"name", "description", "parameters", "strict"}}`.
    fn tool(&self, def: &ToolDefinition) -> Value {
        let p = strict::parameters(&model_input(def));
        let mut entry = json!({
            "type": "function",
            "function": {
                "name": def.wire_name(),
                "description": def.description(),
                "parameters": p.parameters,
                "strict": p.strict.is_ok(),
            }
        });
        fold_examples(def, &mut entry, "/function/description");
        entry
    }

    fn entry_losses(&self, def: &ToolDefinition, entry: &Value, push: &mut Push<'_>) {
        entry_losses(def, entry, &ENVELOPE, push);
        examples_loss(def, "/function/description", push);
    }

    /// `choices[0].message.tool_calls[i]`: `{"id": "call_...", "type": "function", "function": {"name": "...",
    /// "arguments": "<JSON text>"}}`.
    ///
    /// `arguments` is parsed as in [`ToolCall::from_json_text_with_limits`], with the codec's [`Codec::limits`]; an
    /// object instead of text (sent by some compatible servers) is accepted as is. The wire name is mapped back
    /// through the view.
    fn call(&self, codec: &Codec, item: &Value, index: usize) -> ToolCall {
        let function = item.get("function");
        let shown = string_field(function, "name");
        let arguments = text_or_object_arguments(function.and_then(|f| f.get("arguments")), codec.limits());
        let id = id_or_generated(item.get("id"), index, &shown, &arguments);
        ToolCall::from_parts(id, codec.registered_name(&shown), arguments)
    }

    /// The message for the transcript is the one received, with its call ids, and with `content` as text: Chat
    /// Completions allows `"content": null` (or none) beside tool calls, and sends it so, but compatible servers do
    /// not all take it back (llama-cpp-python 0.3's server refuses both), while every one takes `""`, which says the
    /// same.
    fn message(&self, codec: &Codec, message: &Value, first_index: usize) -> Result<ParsedMessage, MessageError> {
        let mut parsed = chat_message(message, first_index, |item, index| self.call(codec, item, index))?;
        if let Value::Object(m) = &mut parsed.message
            && matches!(m.get("content"), None | Some(Value::Null))
        {
            m.insert("content".to_owned(), Value::String(String::new()));
        }
        Ok(parsed)
    }

    /// `content` is text, even when empty (see `message`).
    fn assistant(&self, codec: &Codec, text: &str, calls: &[ToolCall]) -> Value {
        chat_assistant(text, calls, |c| {
            json!({
                "id": c.id(),
                "type": "function",
                "function": {"name": codec.shown_name(c.name()), "arguments": arguments_or_empty(c).to_string()},
            })
        })
    }

    /// `{"role": "tool", "tool_call_id": <call id>, "content": <text>}`.
    fn reply(&self, _codec: &Codec, result: &ToolResult) -> Value {
        json!({
            "role": "tool",
            "tool_call_id": result.call_id,
            "content": result.content_text(),
        })
    }
}
