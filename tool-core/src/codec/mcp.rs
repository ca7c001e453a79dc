//! MCP: `tools/list` entries under the registered names (the canonical 2020-12 schema, `outputSchema`,
//! annotations), calls as `tools/call` requests, replies as `CallToolResult`s.

mod render;

use serde_json::{Map, Value, json};

use super::entry::{examples_loss, fold_examples};
use super::format::{Format, Push};
use super::message::{arguments_or_empty, string_field};
use super::{Codec, LossKind, MessageError, ParsedMessage};
use crate::call::{ToolCall, id_or_generated, object_or_null_arguments};
use crate::content::is_content_schema;
use crate::result::{ToolResult, error_body_json};
use crate::tool_definition::ToolDefinition;
use crate::tool_schemas::Provider;

/// [`Provider::Mcp`].
pub(super) struct Mcp;

impl Format for Mcp {
    fn wire_names(&self) -> bool {
        false
    }

    /// Any JSON Schema: MCP's `inputSchema` is the canonical one as it is.
    fn takes_any_input(&self) -> bool {
        true
    }

    /// The entry from the input schema as written: MCP transports read its `x-mcp-header`s.
    fn tool(&self, def: &ToolDefinition) -> Value {
        let mut entry = render::tool(
            def.name(),
            def.description(),
            def.input_schema(),
            def.output_schema(),
            def.effect(),
            def.idempotent(),
        );
        // The MCP `Tool` has no field for input examples.
        fold_examples(def, &mut entry, "/description");
        entry
    }

    /// The entry's losses: a result that is not a JSON object has no `outputSchema` and travels as text.
    fn entry_losses(&self, def: &ToolDefinition, entry: &Value, push: &mut Push<'_>) {
        examples_loss(def, "/description", push);
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

    /// A `tools/call` request, `{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "...",
    /// "arguments"?: {...}}}`, or its `params` alone. The call id is the request id as text; missing or `null`
    /// `arguments` reads as `{}`.
    fn call(&self, _codec: &Codec, item: &Value, index: usize) -> ToolCall {
        let params = match item.get("params") {
            Some(p) => Some(p),
            None => Some(item),
        };
        let name = string_field(params, "name");
        let arguments = object_or_null_arguments(params.and_then(|p| p.get("arguments")));
        let id = id_or_generated(item.get("id").filter(|_| item.get("params").is_some()), index, &name, &arguments);
        ToolCall::from_parts(id, name, arguments)
    }

    /// One `tools/call` request.
    fn message(&self, codec: &Codec, request: &Value, first_index: usize) -> Result<ParsedMessage, MessageError> {
        Ok(ParsedMessage {
            text: String::new(),
            calls: vec![self.call(codec, request, first_index)],
            message: request.clone(),
        })
    }

    /// The `tools/call` requests (an array).
    fn assistant(&self, _codec: &Codec, _text: &str, calls: &[ToolCall]) -> Value {
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

    /// A `CallToolResult`: [`McpReply`] as JSON.
    fn reply(&self, codec: &Codec, result: &ToolResult) -> Value {
        McpReply::of(codec.view(), result).into_value()
    }
}

/// A result as MCP's `CallToolResult` carries it, before it is JSON: what [`Codec::reply`] writes for
/// [`Provider::Mcp`], for a server that builds its SDK's result type from the parts rather than from that JSON.
///
/// - Success of a [`Content`](crate::content::Content) tool (its result schema is
///   [`content_schema`](crate::content::content_schema)): the blocks are the `content`, with no
///   `structuredContent`.
/// - Other success: `structuredContent` is `data` when it is a JSON object (MCP requires an object there), and
///   `content` is one text block with the same data as JSON.
/// - Failure: `isError: true`, a text block with `{"error": {"code", "message", "details"}}`, and the same object
///   as `structuredContent` unless the tool's entry has an `outputSchema` (clients such as the TypeScript SDK check
///   any `structuredContent` against the `outputSchema`, error or not, and would reject the error object).
#[derive(Debug, Clone, PartialEq)]
pub struct McpReply {
    /// `content`.
    pub content: McpContent,
    /// `structuredContent`, when there is one.
    pub structured_content: Option<Value>,
    /// `isError`.
    pub is_error: bool,
}

/// The `content` of an [`McpReply`].
#[derive(Debug, Clone, PartialEq)]
pub enum McpContent {
    /// One text block: the result as JSON text ([`ToolResult::content_text`]).
    Text(String),
    /// A [`Content`](crate::content::Content) tool's blocks, as its result holds them (a JSON array of MCP
    /// content blocks, checked against the content schema by the executor).
    Blocks(Value),
}

/// What a result's reply is made of.
enum Shape {
    /// A failure, with its `structuredContent` (none when the tool has an `outputSchema`).
    Failure(Option<Value>),
    /// A content tool's blocks.
    Blocks,
    /// Data: its text, and itself as `structuredContent` when it is an object.
    Data,
}

impl Shape {
    fn of(view: &crate::registry::view::ToolView, result: &ToolResult) -> Shape {
        let def = view.get(&result.tool_name);
        match result.error() {
            Some(e) => {
                let has_output_schema = def.is_some_and(|d| d.render(Provider::Mcp).get("outputSchema").is_some());
                Shape::Failure((!has_output_schema).then(|| json!({ "error": error_body_json(e) })))
            }
            None => match result.data() {
                Some(Value::Array(_)) if def.is_some_and(|d| d.output_schema().is_some_and(is_content_schema)) => {
                    Shape::Blocks
                }
                _ => Shape::Data,
            },
        }
    }
}

impl McpReply {
    /// The reply to `result`, a result of a tool of `view` (a tool outside it replies as one without a result
    /// schema). The data is copied; [`McpReply::from_result`] moves it.
    pub fn of(view: &crate::registry::view::ToolView, result: &ToolResult) -> McpReply {
        match Shape::of(view, result) {
            Shape::Failure(structured) => McpReply::failure(result.content_text(), structured),
            Shape::Blocks => McpReply::blocks(result.data().cloned().unwrap_or_default()),
            Shape::Data => McpReply::data(result.content_text(), result.data().filter(|d| d.is_object()).cloned()),
        }
    }

    /// [`McpReply::of`], with the result's data moved into the reply instead of copied.
    pub fn from_result(view: &crate::registry::view::ToolView, result: ToolResult) -> McpReply {
        match Shape::of(view, &result) {
            Shape::Failure(structured) => McpReply::failure(result.content_text(), structured),
            Shape::Blocks => McpReply::blocks(result.into_result().ok().unwrap_or_default()),
            Shape::Data => {
                let text = result.content_text();
                McpReply::data(text, result.into_result().ok().filter(Value::is_object))
            }
        }
    }

    fn failure(text: String, structured_content: Option<Value>) -> McpReply {
        McpReply { content: McpContent::Text(text), structured_content, is_error: true }
    }

    fn blocks(blocks: Value) -> McpReply {
        McpReply { content: McpContent::Blocks(blocks), structured_content: None, is_error: false }
    }

    fn data(text: String, structured_content: Option<Value>) -> McpReply {
        McpReply { content: McpContent::Text(text), structured_content, is_error: false }
    }

    /// The reply as MCP's JSON: `{"content": [...], "structuredContent": ..., "isError": <bool>}`.
    pub fn into_value(self) -> Value {
        let mut m = Map::new();
        let content = match self.content {
            McpContent::Text(text) => json!([{"type": "text", "text": text}]),
            McpContent::Blocks(blocks) => blocks,
        };
        m.insert("content".into(), content);
        if let Some(structured) = self.structured_content {
            m.insert("structuredContent".into(), structured);
        }
        m.insert("isError".into(), Value::Bool(self.is_error));
        Value::Object(m)
    }
}
