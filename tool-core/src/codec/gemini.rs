//! Gemini: tools as `functionDeclarations` entries under their wire names, calls as `functionCall` parts with
//! object arguments, replies as `functionResponse` parts in one `user` content.

mod loss;
mod render;

use serde_json::{Map, Value, json};

use super::entry::{examples_loss, fold_examples, model_input};
use super::format::{Format, Push};
use super::message::{arguments_or_empty, object, string_field};
use super::{Codec, MessageError, ParsedMessage};
use crate::call::{ToolCall, id_or_generated, is_generated_call_id, object_or_null_arguments};
use crate::result::{ToolResult, error_body_json};
use crate::tool_definition::ToolDefinition;

/// [`Provider::Gemini`](crate::Provider::Gemini).
pub(super) struct Gemini;

impl Format for Gemini {
    fn tool(&self, def: &ToolDefinition) -> Value {
        let mut entry = render::declaration(def.wire_name(), def.description(), &model_input(def));
        fold_examples(def, &mut entry, "/description");
        entry
    }

    fn entry_losses(&self, def: &ToolDefinition, entry: &Value, push: &mut Push<'_>) {
        loss::entry_losses(def, entry, push);
        examples_loss(def, "/description", push);
    }

    /// A content part carrying a function call: `{"functionCall": {"name": "...", "args"?: {...}, "id"?: "..."}}`
    /// (`function_call` is accepted too).
    ///
    /// Gemini omits `args` for a function without parameters: missing or `null` reads as `{}`. Gemini often sends
    /// no `id`: then a generated one, which [`Codec::reply`] knows not to send back.
    fn call(&self, codec: &Codec, item: &Value, index: usize) -> ToolCall {
        let call = item.get("functionCall").or_else(|| item.get("function_call"));
        let shown = string_field(call, "name");
        let arguments = object_or_null_arguments(call.and_then(|c| c.get("args")));
        let id = id_or_generated(call.and_then(|c| c.get("id")), index, &shown, &arguments);
        ToolCall::from_parts(id, codec.registered_name(&shown), arguments)
    }

    fn message(&self, codec: &Codec, content: &Value, first_index: usize) -> Result<ParsedMessage, MessageError> {
        let m = object(content, "the content")?;
        let parts = match m.get("parts") {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(parts)) => parts,
            Some(_) => return Err(MessageError::new("`parts` is not an array")),
        };
        let mut text = String::new();
        let mut calls = Vec::new();
        for part in parts {
            if is_call(part) {
                calls.push(self.call(codec, part, first_index + calls.len()));
            } else if let Some(t) = part.get("text").and_then(Value::as_str)
                && part.get("thought").and_then(Value::as_bool) != Some(true)
            {
                text.push_str(t);
            }
        }
        // Generated ids are not written in: Gemini matches replies by name and order, and an id it did not send
        // would be one it does not know.
        let mut echo = m.clone();
        echo.entry("role").or_insert_with(|| Value::String("model".to_owned()));
        Ok(ParsedMessage { text, calls, message: Value::Object(echo) })
    }

    fn assistant(&self, codec: &Codec, text: &str, calls: &[ToolCall]) -> Value {
        let mut parts = Vec::with_capacity(calls.len() + 1);
        if !text.is_empty() {
            parts.push(json!({"text": text}));
        }
        parts.extend(calls.iter().map(|c| {
            let mut call = Map::new();
            call.insert("name".into(), Value::String(codec.shown_name(c.name())));
            call.insert("args".into(), arguments_or_empty(c));
            if !c.id().is_empty() && !is_generated_call_id(c.id()) {
                call.insert("id".into(), Value::String(c.id().to_owned()));
            }
            json!({ "functionCall": Value::Object(call) })
        }));
        json!({"role": "model", "parts": parts})
    }

    /// `{"functionResponse": {"name": <wire name>, "id": <call id>, "response": {"output": <data>}}}`, or
    /// `"response": {"error": {"code", "message", "details"}}` on failure.
    ///
    /// `id` is left out when the call id is empty or was generated (Gemini sent none).
    fn reply(&self, codec: &Codec, result: &ToolResult) -> Value {
        let response = match result.error() {
            Some(e) => json!({"error": error_body_json(e)}),
            None => json!({"output": result.data().cloned().unwrap_or(Value::Null)}),
        };
        let mut function_response = Map::new();
        let name = match codec.view().get(&result.tool_name) {
            Some(_) => codec.shown_name(&result.tool_name),
            None => result.tool_name.clone(),
        };
        function_response.insert("name".into(), Value::String(name));
        if !result.call_id.is_empty() && !is_generated_call_id(&result.call_id) {
            function_response.insert("id".into(), Value::String(result.call_id.clone()));
        }
        function_response.insert("response".into(), response);
        json!({ "functionResponse": Value::Object(function_response) })
    }

    /// The `user` content holding one turn's `functionResponse` parts.
    fn replies(&self, codec: &Codec, results: &[ToolResult]) -> Vec<Value> {
        let parts: Vec<Value> = results.iter().map(|r| self.reply(codec, r)).collect();
        vec![json!({"role": "user", "parts": parts})]
    }
}

fn is_call(part: &Value) -> bool {
    part.get("functionCall").or_else(|| part.get("function_call")).is_some()
}
