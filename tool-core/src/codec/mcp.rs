//! MCP: `tools/list` entries under the registered names (the canonical 2020-12 schema, `outputSchema`,
//! annotations), calls as `tools/call` requests, replies as `CallToolResult`s.

pub(super) mod render;

use serde_json::{Map, Value, json};

use super::{Codec, LossKind, ParsedMessage, arguments_or_empty, string_field};
use crate::call::{ToolCall, id_or_generated, object_or_null_arguments};
use crate::content::is_content_schema;
use crate::definition::ToolDefinition;
use crate::result::{ToolResult, error_body_json};
use crate::schema::Provider;

/// A `tools/call` request, `{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "...",
/// "arguments"?: {...}}}`, or its `params` alone. The call id is the request id as text; missing or `null`
/// `arguments` reads as `{}`.
pub(super) fn call(item: &Value, index: usize) -> ToolCall {
    let params = match item.get("params") {
        Some(p) => Some(p),
        None => Some(item),
    };
    let name = string_field(params, "name");
    let arguments = object_or_null_arguments(params.and_then(|p| p.get("arguments")));
    let id = id_or_generated(item.get("id").filter(|_| item.get("params").is_some()), index, &name, &arguments);
    ToolCall::from_parts(id, name, arguments)
}

pub(super) fn message(request: &Value, first_index: usize) -> ParsedMessage {
    ParsedMessage { text: String::new(), calls: vec![call(request, first_index)], message: request.clone() }
}

/// A `CallToolResult`: `{"content": [{"type": "text", "text": <text>}], "structuredContent": ..., "isError":
/// <bool>}`.
///
/// - Success of a [`Content`](crate::Content) tool (its result schema is [`content_schema`](crate::content_schema)):
///   the blocks are the `content`, with no `structuredContent`.
/// - Other success: `structuredContent` is `data` when it is a JSON object (MCP requires an object there), and
///   `content` is one text block with the same data as JSON.
/// - Failure: `isError: true`, a text block with `{"error": {"code", "message", "details"}}`, and the same object
///   as `structuredContent` unless the tool's entry has an `outputSchema` (clients such as the TypeScript SDK check
///   any `structuredContent` against the `outputSchema`, error or not, and would reject the error object).
pub(super) fn reply(codec: &Codec, result: &ToolResult) -> Value {
    let def = codec.view().get(&result.tool_name);
    let mut m = Map::new();
    match result.error() {
        Some(e) => {
            m.insert("content".into(), json!([{"type": "text", "text": result.content_text()}]));
            let has_output_schema = def.is_some_and(|d| d.render(Provider::Mcp).get("outputSchema").is_some());
            if !has_output_schema {
                m.insert("structuredContent".into(), json!({ "error": error_body_json(e) }));
            }
        }
        None => match result.data() {
            Some(blocks @ Value::Array(_)) if def.is_some_and(|d| d.output_schema().is_some_and(is_content_schema)) => {
                m.insert("content".into(), blocks.clone());
            }
            data => {
                m.insert("content".into(), json!([{"type": "text", "text": result.content_text()}]));
                if let Some(data @ Value::Object(_)) = data {
                    m.insert("structuredContent".into(), data.clone());
                }
            }
        },
    }
    m.insert("isError".into(), Value::Bool(!result.is_ok()));
    Value::Object(m)
}

pub(super) fn assistant(calls: &[ToolCall]) -> Value {
    calls
        .iter()
        .map(|c| {
            json!({
                "jsonrpc": "2.0",
                "id": c.id(),
                "method": "tools/call",
                "params": {"name": c.name(), "arguments": arguments_or_empty(c)},
            })
        })
        .collect()
}

/// The entry's losses: a result that is not a JSON object has no `outputSchema` and travels as text.
pub(super) fn losses(def: &ToolDefinition, entry: &Value, push: &mut dyn FnMut(String, LossKind, String)) {
    if let Some(output) = def.output_schema()
        && output.get("type").and_then(Value::as_str) != Some("object")
        && !is_content_schema(output)
        && entry.get("outputSchema").is_none()
    {
        push(
            String::new(),
            LossKind::Adapted,
            "the result is not a JSON object, so the tool has no outputSchema; MCP clients get the result as text \
             content only"
                .into(),
        );
    }
}
