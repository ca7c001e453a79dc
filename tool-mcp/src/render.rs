//! Between keel results and MCP `CallToolResult`s, in both directions.
//!
//! Serving ([`call_tool_result`]) converts the MCP [`Codec`]'s reply (see [`Codec::reply`]) into the SDK's type:
//! a [`Content`](keel_tools_core::content::Content) tool's blocks as `content`; other data as a text block and, when it is an
//! object, `structuredContent`; failures with `isError: true`.
//!
//! Importing ([`remote_outcome`]) maps a remote `CallToolResult` back to a handler outcome.

use keel_tools_core::codecs::{McpContent, McpReply};
use keel_tools_core::results::ErrorBody;
use keel_tools_core::results::{ErrorCode, ToolCode};
use keel_tools_core::{Codec, ToolError, ToolResult};
use rmcp::model::{CallToolResult, ContentBlock, ResultType};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// Longest remote text carried into an error message, in characters.
const MAX_REMOTE_TEXT: usize = 2000;

/// Renders an executor result as an MCP `CallToolResult`: the reply of `codec` (the MCP codec of the view the
/// result came from), in the SDK's type. The parts of the reply ([`McpReply`]) go into the SDK's type as they are:
/// a text block and `structuredContent` without a round trip through JSON; only a content tool's blocks are read
/// into the SDK's content types.
pub fn call_tool_result(result: &ToolResult, codec: &Codec) -> CallToolResult {
    match sdk_result(McpReply::of(codec.view(), result)) {
        Ok(r) => r,
        Err(e) => {
            // The executor validated the data against the tool's result schema, so this is a mismatch between
            // that schema (the content schema) and the SDK's content types: an internal error, logged, not shown.
            tracing::error!(
                call_id = %result.call_id,
                tool_name = %result.tool_name,
                error = %e,
                "the result could not be converted to an MCP CallToolResult"
            );
            let failed = ToolResult::failure(
                result.call_id.clone(),
                result.tool_name.clone(),
                result.tool_version.clone(),
                result.executed,
                ErrorBody::new(
                    ErrorCode::ToolInternalError,
                    format!("the tool failed with an internal error; it was logged under call id {:?}", result.call_id),
                ),
            );
            sdk_result(McpReply::of(codec.view(), &failed))
                .unwrap_or_else(|_| complete(CallToolResult::error(vec![ContentBlock::text(failed.content_text())])))
        }
    }
}

/// [`call_tool_result`], with the result's data moved into the `CallToolResult` instead of copied: what the server
/// answers a `tools/call` with.
pub fn into_call_tool_result(result: ToolResult, codec: &Codec) -> CallToolResult {
    // Content blocks are read into the SDK's content types, which may refuse them: the borrowing path keeps the
    // result for the error it then answers.
    if matches!(result.data(), Some(Value::Array(_))) {
        return call_tool_result(&result, codec);
    }
    // Anything else is one text block, which the SDK's types always take.
    let reply = McpReply::from_result(codec.view(), result);
    sdk_result(reply).unwrap_or_else(|_| {
        complete(CallToolResult::error(vec![ContentBlock::text("the tool failed with an internal error")]))
    })
}

/// The SDK's `CallToolResult` of `reply`; the error of a content block the SDK's types do not read.
fn sdk_result(reply: McpReply) -> Result<CallToolResult, serde_json::Error> {
    let content = match reply.content {
        McpContent::Text(text) => vec![ContentBlock::text(text)],
        McpContent::Blocks(blocks) => Vec::<ContentBlock>::deserialize(blocks)?,
    };
    let mut r = if reply.is_error { CallToolResult::error(content) } else { CallToolResult::success(content) };
    r.structured_content = reply.structured_content;
    Ok(complete(r))
}

fn complete(mut r: CallToolResult) -> CallToolResult {
    r.result_type = Some(ResultType::COMPLETE);
    r
}

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// The text blocks of a result, joined by newlines.
fn joined_text(r: &CallToolResult) -> String {
    r.content.iter().filter_map(|c| c.as_text().map(|t| t.text.as_str())).collect::<Vec<_>>().join("\n")
}

/// What a remote tool call amounts to for the local executor.
///
/// * `isError: true`: a business error. A keel-style `{"error": {"code", "message", "details"}}` (in
///   `structuredContent` or as the text) keeps its code when the code is one a tool may use; an executor code of
///   the remote (`invalid_arguments`, `approval_required`, ...) becomes `remote_<code>`; anything else is
///   `remote_error` with the remote's text.
/// * success of a tool with an `outputSchema` (`structured`): the `structuredContent` (`null` when missing, which
///   the executor's output check then rejects);
/// * other success: the content blocks as JSON, i.e. a [`Content`](keel_tools_core::content::Content) value.
pub fn remote_outcome(r: CallToolResult, structured: bool) -> Result<Value, ToolError> {
    if r.is_error == Some(true) {
        return Err(remote_error(&r));
    }
    if structured {
        return Ok(r.structured_content.unwrap_or(Value::Null));
    }
    serde_json::to_value(&r.content).map_err(ToolError::internal)
}

fn keel_error(r: &CallToolResult) -> Option<Map<String, Value>> {
    let from_structured = r.structured_content.as_ref().and_then(|s| s.get("error")).and_then(Value::as_object);
    if let Some(e) = from_structured {
        return Some(e.clone());
    }
    let text = r.content.first()?.as_text()?;
    let parsed: Value = serde_json::from_str(&text.text).ok()?;
    parsed.get("error").and_then(Value::as_object).cloned()
}

fn remote_error(r: &CallToolResult) -> ToolError {
    if let Some(e) = keel_error(r)
        && let Some(code) = e.get("code").and_then(Value::as_str)
    {
        let message = truncate(e.get("message").and_then(Value::as_str).unwrap_or_default(), MAX_REMOTE_TEXT);
        let details = e.get("details").cloned().unwrap_or(Value::Null);
        // A remote code that is reserved here (or malformed) is prefixed, never passed through.
        let local_code = ToolCode::parse(code.to_owned())
            .or_else(|_| ToolCode::parse(format!("remote_{code}")))
            .unwrap_or(ToolCode::from_static("remote_error"));
        let err = ToolError::new(local_code, message);
        return if details.is_null() { err } else { err.with_details(details) };
    }
    let text = joined_text(r);
    let message = if text.trim().is_empty() {
        "the remote tool reported an error without a message".to_owned()
    } else {
        truncate(&text, MAX_REMOTE_TEXT)
    };
    keel_tools_core::tool_error!("remote_error", "{message}")
}

/// `{"code": ..., "message": ...}` of a remote JSON-RPC error, for a business error's details.
pub fn rpc_error_details(code: i32, message: &str) -> Value {
    json!({ "rpc_code": code, "rpc_message": truncate(message, MAX_REMOTE_TEXT) })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use keel_tools_core::definition::ToolDefinition;
    use keel_tools_core::{Provider, ToolView};

    use super::*;

    /// The MCP codec of a view holding one tool `t` with this result schema.
    fn codec(output: Option<Value>) -> Codec {
        let mut b = ToolDefinition::builder("t")
            .description("A tool.")
            .input_schema(json!({"type": "object", "properties": {}}))
            .handler(|_v, _c| async { Ok(Value::Null) });
        if let Some(o) = output {
            b = b.output_schema(o);
        }
        ToolView::new(vec![Arc::new(b.build().unwrap())]).codec(Provider::Mcp)
    }

    fn plain() -> Codec {
        codec(None)
    }

    fn structured() -> Codec {
        codec(Some(json!({"type": "object", "properties": {"a": {"type": "integer"}}})))
    }

    fn content() -> Codec {
        codec(Some(keel_tools_core::content::content_schema()))
    }

    fn ok(data: Value) -> ToolResult {
        ToolResult::success("1", "t", Some("1.0".into()), data)
    }

    fn failed() -> ToolResult {
        ToolResult::failure(
            "2",
            "t",
            Some("1.0".into()),
            true,
            ErrorBody::new(ErrorCode::parse("not_found").unwrap(), "no such thing"),
        )
    }

    #[test]
    fn success_object_is_structured_and_text() {
        let r = call_tool_result(&ok(json!({"a": 1})), &structured());
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["structuredContent"], json!({"a": 1}));
        assert_eq!(v["content"], json!([{"type": "text", "text": "{\"a\":1}"}]));
        assert_eq!(v["isError"], false);
    }

    #[test]
    fn the_sdk_result_is_the_codecs_json_reply_read_by_the_sdk() {
        let blocks = json!([{"type": "text", "text": "hi \"there\"\n"}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}]);
        let cases = [
            (ok(json!({"a": 1, "b": ["x", null]})), structured()),
            (ok(json!({"a": 1})), plain()),
            (ok(json!("a string")), plain()),
            (ok(json!([1, 2])), plain()),
            (ok(Value::Null), plain()),
            (ok(blocks), content()),
            (failed(), plain()),
            (failed(), structured()),
            // A tool outside the view.
            (ToolResult::success("3", "other", None, json!({"a": 1})), content()),
        ];
        for (result, codec) in cases {
            let via_json = serde_json::to_string(&complete(
                serde_json::from_value::<CallToolResult>(codec.reply(&result)).unwrap(),
            ))
            .unwrap();
            let direct = serde_json::to_string(&call_tool_result(&result, &codec)).unwrap();
            assert_eq!(direct, via_json, "{result:?}");
            let moved = serde_json::to_string(&into_call_tool_result(result.clone(), &codec)).unwrap();
            assert_eq!(moved, via_json, "{result:?}");
        }
    }

    #[test]
    fn content_tool_serves_blocks() {
        let data = json!([{"type": "text", "text": "hi"}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}]);
        let v = serde_json::to_value(call_tool_result(&ok(data.clone()), &content())).unwrap();
        assert_eq!(v["content"], data);
        assert!(v.get("structuredContent").is_none());
    }

    #[test]
    fn errors_keep_structure_unless_an_output_schema_forbids_it() {
        let v = serde_json::to_value(call_tool_result(&failed(), &plain())).unwrap();
        assert_eq!(v["isError"], true);
        assert_eq!(v["structuredContent"]["error"]["code"], "not_found");
        let v = serde_json::to_value(call_tool_result(&failed(), &structured())).unwrap();
        assert!(v.get("structuredContent").is_none());
        let text: Value = serde_json::from_str(v["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text["error"]["code"], "not_found");
    }

    #[test]
    fn remote_errors_map_to_business_codes() {
        let keel = |code: &str| {
            let r = call_tool_result(
                &ToolResult::failure(
                    "1",
                    "t",
                    None,
                    false,
                    ErrorBody::new(ErrorCode::parse(code).unwrap(), "m").with_details(json!({"x": 1})),
                ),
                &structured(),
            );
            remote_outcome(r, false).unwrap_err()
        };
        assert_eq!(keel("not_found").code(), "not_found");
        assert_eq!(keel("approval_required").code(), "remote_approval_required");
        assert_eq!(keel("tool_internal_error").code(), "remote_tool_internal_error");
        let plain = CallToolResult::error(vec![ContentBlock::text("boom")]);
        let e = remote_outcome(plain, false).unwrap_err();
        assert_eq!(e.code(), "remote_error");
        assert!(e.to_string().contains("boom"));
    }

    #[test]
    fn remote_success() {
        let r = CallToolResult::structured(json!({"sum": 3}));
        assert_eq!(remote_outcome(r.clone(), true).unwrap(), json!({"sum": 3}));
        assert_eq!(remote_outcome(r, false).unwrap(), json!([{"type": "text", "text": "{\"sum\":3}"}]));
        let r = CallToolResult::success(vec![ContentBlock::text("x")]);
        assert_eq!(remote_outcome(r, true).unwrap(), Value::Null);
    }
}
