//! An MCP server whose tools are all `#[tool]` declarations (every tool the official conformance suite calls, plus
//! a few keel tools that show each outcome of the executor over MCP), composed with a plain rmcp `ServerHandler`
//! that serves the suite's resources, prompts and completion: keel serves the tools, the handler the rest.
//!
//! ```text
//! cargo run -p examples --example conformance_server                            # stdio
//! cargo run -p examples --example conformance_server -- --http 127.0.0.1:8765   # http://127.0.0.1:8765/mcp
//! npx @modelcontextprotocol/conformance@0.2.0-alpha.12 server --url http://127.0.0.1:8765/mcp \
//!     --requirements 2026-07-28
//! ```
//!
//! `--http` accepts loopback addresses only; port 0 picks a free port. In HTTP mode the endpoint is printed on
//! stdout as `listening on http://ADDR/mcp`. Logs go to stderr (`RUST_LOG` to change the level).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use keel_tools_core::content::{Content, ContentBlock, EmbeddedResource};
use keel_tools_core::context::{InputKind, LogLevel};
use keel_tools_core::{CallContext, Executor, Registry, State, ToolError, tool};
use keel_tools_mcp::McpServer;
use keel_tools_mcp::rmcp::model::{
    CacheScope, CompleteRequestParams, CompleteResult, CompletionInfo, ContentBlock as McpBlock,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, ImageContent, InputRequest, InputRequests,
    InputRequiredResult, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    Prompt, PromptArgument, PromptMessage, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Reference, Resource, ResourceContents, ResourceTemplate, Role, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use keel_tools_mcp::rmcp::service::{RequestContext, SubscriptionContext, SubscriptionSink};
use keel_tools_mcp::rmcp::{ErrorData, RoleServer, ServerHandler};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A 1x1 red PNG.
const RED_PIXEL_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";

/// Every tool this server lists, in the order of the conformance scenarios, then keel's own.
const TOOLS: &[&str] = &[
    "test_simple_text",
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_tool_with_logging",
    "test_error_handling",
    "test_tool_with_progress",
    "test_sampling",
    "test_elicitation",
    "test_elicitation_sep1034_defaults",
    "test_elicitation_sep1330_enums",
    "json_schema_2020_12_tool",
    "test_trigger_tool_change",
    "test_trigger_prompt_change",
    "test_logging_tool",
    "test_input_required_result_elicitation",
    "test_input_required_result_sampling",
    "test_input_required_result_list_roots",
    "test_input_required_result_request_state",
    "test_input_required_result_tampered_state",
    "test_input_required_result_multiple_inputs",
    "test_input_required_result_multi_round",
    "test_input_required_result_capabilities",
    "test_missing_capability",
    "test_streaming_elicitation",
    "test_custom_header",
    "greet",
    "slow_compute",
    "failing_job",
    "protocol_error_job",
    "confirm_delete",
    "multi_input",
    "test_tool_with_task",
    "add_numbers",
    "echo_text",
    "lookup_note",
    "delete_note",
    "fail_internally",
];

/// A tiny WAV file: 8 kHz, mono, 8-bit PCM, 80 samples of silence (10 ms).
fn tiny_wav() -> Vec<u8> {
    let samples = 80u32;
    let mut wav = Vec::with_capacity(44 + samples as usize);
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + samples).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&1u16.to_le_bytes()); // mono
    wav.extend_from_slice(&8000u32.to_le_bytes()); // sample rate
    wav.extend_from_slice(&8000u32.to_le_bytes()); // byte rate
    wav.extend_from_slice(&1u16.to_le_bytes()); // block align
    wav.extend_from_slice(&8u16.to_le_bytes()); // bits per sample
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&samples.to_le_bytes());
    wav.resize(44 + samples as usize, 128);
    wav
}

// ---- The conformance suite's tools ----

/// Returns a simple text response.
#[tool(effect = "read", version = "1.0")]
fn test_simple_text() -> Content {
    Content::text("This is a simple text response for testing.")
}

/// Returns a 1x1 red PNG image.
#[tool(effect = "read", version = "1.0")]
fn test_image_content() -> Content {
    Content::image(RED_PIXEL_PNG, "image/png")
}

/// Returns a short silent WAV clip.
#[tool(effect = "read", version = "1.0")]
fn test_audio_content() -> Content {
    Content::from(ContentBlock::audio_bytes(&tiny_wav(), "audio/wav"))
}

/// Returns an embedded text resource.
#[tool(effect = "read", version = "1.0")]
fn test_embedded_resource() -> Content {
    Content::resource(EmbeddedResource::text(
        "test://embedded-resource",
        "text/plain",
        "This is an embedded resource content.",
    ))
}

/// Returns text, an image and an embedded resource in one result.
#[tool(effect = "read", version = "1.0")]
fn test_multiple_content_types() -> Content {
    Content::text("Multiple content types test:").with(ContentBlock::image(RED_PIXEL_PNG, "image/png")).with(
        ContentBlock::resource(EmbeddedResource::text(
            "test://mixed-content-resource",
            "application/json",
            json!({"test": "data", "value": 123}).to_string(),
        )),
    )
}

/// Sends three log messages while it runs, 50 ms apart.
#[tool(effect = "read", version = "1.0")]
async fn test_tool_with_logging(ctx: CallContext) -> Content {
    ctx.log(LogLevel::Info, "Tool execution started");
    tokio::time::sleep(Duration::from_millis(50)).await;
    ctx.log(LogLevel::Info, "Tool processing data");
    tokio::time::sleep(Duration::from_millis(50)).await;
    ctx.log(LogLevel::Info, "Tool execution completed");
    Content::text("Tool with logging executed successfully")
}

/// Always fails with a business error.
#[tool(effect = "read", version = "1.0")]
fn test_error_handling() -> Result<Content, ToolError> {
    Err(keel_tools_core::tool_error!("intentional_error", "This tool intentionally returns an error for testing"))
}

/// Reports progress 0, 50 and 100 of 100, 50 ms apart (when the request carries a progress token).
#[tool(effect = "read", version = "1.0")]
async fn test_tool_with_progress(ctx: CallContext) -> Content {
    ctx.progress(0.0, Some(100.0), Some("started"));
    tokio::time::sleep(Duration::from_millis(50)).await;
    ctx.progress(50.0, Some(100.0), Some("halfway"));
    tokio::time::sleep(Duration::from_millis(50)).await;
    ctx.progress(100.0, Some(100.0), Some("done"));
    Content::text("Tool with progress executed successfully")
}

/// `sampling/createMessage` parameters for one user message.
fn sampling(prompt: &str) -> Value {
    json!({"messages": [{"role": "user", "content": {"type": "text", "text": prompt}}], "maxTokens": 100})
}

/// The text of a `CreateMessageResult`.
fn sampled_text(answer: &Value) -> String {
    answer.pointer("/content/text").and_then(Value::as_str).unwrap_or("(no text)").to_owned()
}

/// Asks the client's LLM (MCP sampling) to answer a prompt.
#[tool(effect = "read", version = "1.0")]
async fn test_sampling(
    ctx: CallContext,
    #[arg(description = "The prompt to send to the LLM")] prompt: String,
) -> Result<Content, ToolError> {
    let answer = ctx.sample("prompt", sampling(&prompt)).await?;
    Ok(Content::text(format!("LLM response: {}", sampled_text(&answer))))
}

/// Asks the user to fill in `schema` with `message` (MCP elicitation), and describes the answer.
async fn elicit(ctx: &CallContext, message: &str, schema: Value, label: &str) -> Result<Content, ToolError> {
    let answer = ctx.elicit("form", message, schema).await?;
    let content = answer.content.unwrap_or(Value::Null);
    Ok(Content::text(format!("{label}: action={}, content={content}", answer.action)))
}

/// Asks the user for a username and an email address (MCP elicitation).
#[tool(effect = "read", version = "1.0")]
async fn test_elicitation(
    ctx: CallContext,
    #[arg(description = "The message to show the user")] message: String,
) -> Result<Content, ToolError> {
    let schema = json!({
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"}
        },
        "required": ["username", "email"]
    });
    elicit(&ctx, &message, schema, "User response").await
}

/// Asks the user for values of every primitive type, each with a default (SEP-1034).
#[tool(effect = "read", version = "1.0")]
async fn test_elicitation_sep1034_defaults(ctx: CallContext) -> Result<Content, ToolError> {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": true}
        }
    });
    elicit(&ctx, "Please review the default values", schema, "Elicitation completed").await
}

/// Asks the user to choose from every kind of enum (SEP-1330).
#[tool(effect = "read", version = "1.0")]
async fn test_elicitation_sep1330_enums(ctx: CallContext) -> Result<Content, ToolError> {
    let schema = json!({
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"}
            ]},
            "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "items": {"anyOf": [
                {"const": "value1", "title": "First Choice"},
                {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"}
            ]}}
        }
    });
    elicit(&ctx, "Please choose options", schema, "Elicitation completed").await
}

/// A postal address.
#[derive(Deserialize, JsonSchema)]
#[schemars(rename = "address", extend("$anchor" = "address"))]
#[allow(dead_code)]
struct Address {
    street: Option<String>,
    city: Option<String>,
}

/// Arguments using JSON Schema 2020-12 features: `$defs` with an `$anchor`, `$ref`, composition (`allOf`, `anyOf`)
/// and conditionals (`if`/`then`/`else`): a name or an address is required, and an address needs its street.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend(
    "allOf" = [{"anyOf": [{"required": ["name"]}, {"required": ["address"]}]}],
    "if" = {"required": ["address"]},
    "then" = {"properties": {"address": {"required": ["street"]}}},
    "else" = {"required": ["name"]},
))]
struct Json2020Args {
    name: Option<String>,
    address: Option<Address>,
}

/// Tool with JSON Schema 2020-12 features
#[tool(effect = "read", version = "1.0")]
fn json_schema_2020_12_tool(args: Json2020Args) -> Content {
    let city = args.address.and_then(|a| a.city).unwrap_or_else(|| "nowhere".to_owned());
    Content::text(format!("{} lives in {city}", args.name.unwrap_or_else(|| "someone".to_owned())))
}

/// Tells every client that the tool list changed (`notifications/tools/list_changed`: to legacy sessions, and to
/// the `subscriptions/listen` streams that asked for it).
#[tool(effect = "read", version = "1.0")]
async fn test_trigger_tool_change(listeners: State<Listeners>) -> Result<Content, ToolError> {
    let server =
        listeners.server.get().ok_or_else(|| keel_tools_core::tool_error!("not_ready", "the server is starting"))?;
    let sent = server.notify_tool_list_changed().await;
    Ok(Content::text(format!("Tool list change sent to {sent} client(s)")))
}

/// Tells every `subscriptions/listen` stream that asked for it that the prompt list changed.
#[tool(effect = "read", version = "1.0")]
async fn test_trigger_prompt_change(listeners: State<Listeners>) -> Content {
    let mut sent = 0;
    for sink in listeners.prompt_streams() {
        if sink.notify_prompt_list_changed().await.is_ok() {
            sent += 1;
        }
    }
    Content::text(format!("Prompt list change sent to {sent} stream(s)"))
}

/// Logs one message: sent to a stateless client only when its request's `_meta` asks for a log level.
#[tool(effect = "read", version = "1.0")]
async fn test_logging_tool(ctx: CallContext) -> Content {
    ctx.log(LogLevel::Info, "a log message from test_logging_tool");
    Content::text("Logging tool completed")
}

// ---- Input from the client, in either era (a session asks; a stateless call returns input-required results) ----

/// The schema of a one-string form.
fn one_string(name: &str) -> Value {
    json!({"type": "object", "properties": {name: {"type": "string"}}, "required": [name]})
}

/// The `content` string `name` of an accepted elicitation.
fn answered(answer: &keel_tools_core::context::Elicitation, name: &str) -> String {
    answer.content.as_ref().and_then(|c| c.get(name)).and_then(Value::as_str).unwrap_or("(none)").to_owned()
}

/// Asks the user's name, then greets them.
#[tool(effect = "read", version = "1.0")]
async fn test_input_required_result_elicitation(ctx: CallContext) -> Result<Content, ToolError> {
    let answer = ctx.elicit("user_name", "What is your name?", one_string("name")).await?;
    Ok(Content::text(format!("Hello, {}!", answered(&answer, "name"))))
}

/// Asks the client's LLM for the capital of France.
#[tool(effect = "read", version = "1.0")]
async fn test_input_required_result_sampling(ctx: CallContext) -> Result<Content, ToolError> {
    let answer = ctx.sample("capital_question", sampling("What is the capital of France?")).await?;
    Ok(Content::text(format!("Sampling response: {}", sampled_text(&answer))))
}

/// Lists the client's roots.
#[tool(effect = "read", version = "1.0")]
async fn test_input_required_result_list_roots(ctx: CallContext) -> Result<Content, ToolError> {
    let answer = ctx.roots("client_roots").await?;
    let uris: Vec<&str> = answer
        .get("roots")
        .and_then(Value::as_array)
        .map(|roots| roots.iter().filter_map(|r| r.get("uri").and_then(Value::as_str)).collect())
        .unwrap_or_default();
    Ok(Content::text(format!("Client roots: [{}]", uris.join(", "))))
}

/// Asks for a confirmation, keeping its own state across the round trip.
#[tool(effect = "read", version = "1.0")]
async fn test_input_required_result_request_state(ctx: CallContext) -> Result<Content, ToolError> {
    let stage = ctx.round_state().and_then(|s| s.get("stage").and_then(Value::as_str).map(str::to_owned));
    ctx.set_round_state(json!({"stage": "confirm"}));
    let answer = ctx
        .elicit("confirm", "Please confirm", json!({"type": "object", "properties": {"ok": {"type": "boolean"}}}))
        .await?;
    Ok(Content::text(format!("Confirmed: {} (stage {})", answer.accepted(), stage.as_deref().unwrap_or("none"))))
}

/// Like `test_input_required_result_request_state`: the suite alters the state it echoes, which must be refused.
#[tool(effect = "read", version = "1.0")]
async fn test_input_required_result_tampered_state(ctx: CallContext) -> Result<Content, ToolError> {
    let answer = ctx
        .elicit("confirm", "Please confirm", json!({"type": "object", "properties": {"ok": {"type": "boolean"}}}))
        .await?;
    Ok(Content::text(format!("Confirmed: {}", answer.accepted())))
}

/// Asks for a name, a greeting from the LLM and the roots at once: one round with three requests.
#[tool(effect = "read", version = "1.0")]
async fn test_input_required_result_multiple_inputs(ctx: CallContext) -> Result<Content, ToolError> {
    let (name, greeting, roots) = tokio::join!(
        ctx.elicit("user_name", "What is your name?", one_string("name")),
        ctx.sample("greeting", sampling("Generate a greeting")),
        ctx.roots("client_roots"),
    );
    let (name, greeting, _roots) = (name?, greeting?, roots?);
    Ok(Content::text(format!("All inputs received: {} / {}", answered(&name, "name"), sampled_text(&greeting))))
}

/// Asks two questions, one round each.
#[tool(effect = "read", version = "1.0")]
async fn test_input_required_result_multi_round(ctx: CallContext) -> Result<Content, ToolError> {
    let name = ctx.elicit("step1", "Step 1: What is your name?", one_string("name")).await?;
    let color = ctx.elicit("step2", "Step 2: What is your favorite color?", one_string("color")).await?;
    Ok(Content::text(format!(
        "Multi-round flow complete: {} likes {}",
        answered(&name, "name"),
        answered(&color, "color")
    )))
}

/// Asks only for what the client declared it can answer.
#[tool(effect = "read", version = "1.0")]
async fn test_input_required_result_capabilities(ctx: CallContext) -> Result<Content, ToolError> {
    let mut asked = Vec::new();
    if ctx.supports_input(InputKind::Elicitation) {
        ctx.elicit("user_name", "What is your name?", one_string("name")).await?;
        asked.push("elicitation");
    }
    if ctx.supports_input(InputKind::Sampling) {
        ctx.sample("greeting", sampling("Generate a greeting")).await?;
        asked.push("sampling");
    }
    if ctx.supports_input(InputKind::Roots) {
        ctx.roots("client_roots").await?;
        asked.push("roots");
    }
    Ok(Content::text(format!("Capability-aware flow complete: asked for [{}]", asked.join(", "))))
}

/// Needs the client's sampling: a client that did not declare it gets `-32021` (missing capability).
#[tool(effect = "read", version = "1.0")]
async fn test_missing_capability(ctx: CallContext) -> Result<Content, ToolError> {
    if !ctx.supports_input(InputKind::Sampling) {
        // Asking is what reports the missing capability.
        ctx.sample("probe", sampling("ping")).await?;
    }
    Ok(Content::text("The client declared sampling"))
}

/// Asks the user for a value: over a stateless request, an input-required result on the response, never a request
/// of the server's own on the stream.
#[tool(effect = "read", version = "1.0")]
async fn test_streaming_elicitation(ctx: CallContext) -> Result<Content, ToolError> {
    let answer = ctx.elicit("streaming_elicitation", "Provide a value", one_string("value")).await?;
    Ok(Content::text(format!("Value: {}", answered(&answer, "value"))))
}

/// Echoes `value`, which MCP clients also send as the `Mcp-Param-Value` header (the server checks they agree).
#[tool(effect = "read", version = "1.0")]
fn test_custom_header(#[arg(description = "Any text", header = "Value")] value: String) -> String {
    value
}

// ---- Tasks: a call that a client supporting tasks gets as a task, to poll ----

/// Greets someone (always answered in the call).
#[tool(effect = "read", version = "1.0")]
fn greet(#[arg(description = "Who to greet")] name: Option<String>) -> Content {
    Content::text(format!("Hello, {}!", name.as_deref().unwrap_or("friend")))
}

/// Waits `seconds` (1 by default), then answers; stops when the task is cancelled.
#[tool(effect = "read", version = "1.0", task = "optional")]
async fn slow_compute(
    ctx: CallContext,
    #[arg(description = "How long to work, in seconds (at most 60)")] seconds: Option<f64>,
    #[arg(description = "A label for the result")] label: Option<String>,
) -> Result<String, ToolError> {
    let seconds = seconds.unwrap_or(1.0).clamp(0.0, 60.0);
    let label = label.unwrap_or_else(|| "compute".to_owned());
    tokio::select! {
        () = tokio::time::sleep(Duration::from_secs_f64(seconds)) => Ok(format!("slow_compute({label}) done after {seconds}s")),
        () = ctx.cancellation().cancelled() => Err(keel_tools_core::tool_error!("stopped", "slow_compute was stopped")),
    }
}

/// Fails with a business error after a second (only as a task).
#[tool(effect = "read", version = "1.0", task = "required")]
async fn failing_job() -> Result<String, ToolError> {
    tokio::time::sleep(Duration::from_secs(1)).await;
    Err(keel_tools_core::tool_error!("job_failed", "failing_job: intentional tool execution error"))
}

/// Fails with an internal error after 200 ms: a task ends `failed`.
#[tool(effect = "read", version = "1.0", task = "optional")]
async fn protocol_error_job() -> Result<String, ToolError> {
    tokio::time::sleep(Duration::from_millis(200)).await;
    Err(ToolError::internal(std::io::Error::other("protocol_error_job: intentional internal failure")))
}

/// Asks the user to confirm deleting a file, from inside its task (only as a task).
#[tool(effect = "read", version = "1.0", task = "required")]
async fn confirm_delete(
    ctx: CallContext,
    #[arg(description = "The file to delete")] filename: Option<String>,
) -> Result<String, ToolError> {
    let filename = filename.unwrap_or_else(|| "file.txt".to_owned());
    let schema = json!({"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]});
    let answer = ctx.elicit("confirm", format!("Delete {filename}?"), schema).await?;
    let confirmed = answer.content.as_ref().and_then(|c| c.get("confirm")).and_then(Value::as_bool).unwrap_or(false);
    Ok(format!("confirm_delete({filename}): confirmed = {confirmed}"))
}

/// Asks for two values at once, from inside its task (only as a task).
#[tool(effect = "read", version = "1.0", task = "required")]
async fn multi_input(ctx: CallContext) -> Result<String, ToolError> {
    let (a, b) = tokio::join!(
        ctx.elicit("input-a", "Provide value A", one_string("value")),
        ctx.elicit("input-b", "Provide value B", one_string("value")),
    );
    let (a, b) = (a?, b?);
    Ok(format!("multi_input: a = {}, b = {}", answered(&a, "value"), answered(&b, "value")))
}

/// Asks the user's name in the request itself, then goes on as a task (only as a task).
#[tool(effect = "read", version = "1.0", task = "required", task_start = "handler")]
async fn test_tool_with_task(ctx: CallContext) -> Result<Content, ToolError> {
    let name = ctx.elicit("user_name", "What is your name?", one_string("name")).await?;
    ctx.begin_task();
    tokio::time::sleep(Duration::from_millis(200)).await;
    Ok(Content::text(format!("Hello, {}! (async)", answered(&name, "name"))))
}

// ---- keel's own: one tool per outcome ----

/// The sum of two integers.
#[derive(Serialize, JsonSchema)]
struct Sum {
    /// `a + b`.
    sum: i64,
}

/// Adds two integers (a structured result).
#[tool(effect = "read", version = "1.0")]
fn add_numbers(
    #[arg(description = "The first term")] a: i64,
    #[arg(description = "The second term")] b: i64,
) -> Result<Sum, ToolError> {
    a.checked_add(b)
        .map(|sum| Sum { sum })
        .ok_or_else(|| keel_tools_core::tool_error!("overflow", "the sum does not fit in 64 bits"))
}

/// Echoes a message (a plain string result).
#[tool(effect = "read", version = "1.0")]
fn echo_text(#[arg(description = "What to echo")] message: String) -> String {
    message
}

/// A note.
#[derive(Serialize, JsonSchema)]
struct Note {
    /// The note's id.
    id: String,
    /// Its text.
    text: String,
}

/// Looks up a note by id; only `n1` exists (a business error otherwise).
#[tool(effect = "read", version = "1.0")]
fn lookup_note(#[arg(description = "The note id, e.g. n1")] id: String) -> Result<Note, ToolError> {
    if id == "n1" {
        Ok(Note { id, text: "remember the milk".to_owned() })
    } else {
        Err(keel_tools_core::tool_error!("not_found", "no note {id:?}").with_details(json!({"known": ["n1"]})))
    }
}

/// Deletes a note (destructive: needs an approval bound to its arguments).
#[tool(effect = "destructive", version = "1.0")]
fn delete_note(#[arg(description = "The note id")] id: String) -> Note {
    Note { id, text: String::new() }
}

/// Fails with an internal error whose text must never reach the client.
#[tool(effect = "read", version = "1.0")]
fn fail_internally() -> Result<Note, ToolError> {
    Err(ToolError::internal(std::io::Error::other(
        "connection to postgres://keel:hunter2@db.internal:5432 failed (src/store.rs:42)",
    )))
}

// ---- Everything but tools, in plain rmcp ----

/// How long clients may cache the fixtures' lists and reads.
const FIXTURE_TTL_MS: u64 = 60_000;

/// What the keel tools above share with the handler below: the server (set once it is built) and the
/// `subscriptions/listen` streams that asked for prompt-list changes.
#[derive(Default)]
struct Listeners {
    server: OnceLock<McpServer>,
    prompt_streams: Mutex<HashMap<u64, SubscriptionSink>>,
    next_stream: AtomicU64,
}

impl Listeners {
    fn prompt_streams(&self) -> Vec<SubscriptionSink> {
        self.prompt_streams.lock().unwrap_or_else(std::sync::PoisonError::into_inner).values().cloned().collect()
    }
}

/// The suite's resources, prompts and completion, written against rmcp alone; keel serves the tools beside it.
struct Fixtures {
    listeners: Arc<Listeners>,
}

fn text_resource(uri: &str, mime: &str, text: impl Into<String>) -> ResourceContents {
    ResourceContents::text(text, uri).with_mime_type(mime)
}

impl ServerHandler for Fixtures {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_completions()
            .build();
        ServerConfig::new(capabilities)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let resources = vec![
            Resource::new("test://static-text", "Static Text Resource")
                .with_description("A text resource with fixed content")
                .with_mime_type("text/plain"),
            Resource::new("test://static-binary", "Static Binary Resource")
                .with_description("A PNG image as a blob")
                .with_mime_type("image/png"),
        ];
        Ok(ListResourcesResult::with_all_items(resources)
            .with_ttl_ms(FIXTURE_TTL_MS)
            .with_cache_scope(CacheScope::Public))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let templates = vec![
            ResourceTemplate::new("test://template/{id}/data", "Templated Data")
                .with_description("JSON data for any id")
                .with_mime_type("application/json"),
        ];
        Ok(ListResourceTemplatesResult::with_all_items(templates)
            .with_ttl_ms(FIXTURE_TTL_MS)
            .with_cache_scope(CacheScope::Public))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.as_str();
        let contents = match uri {
            "test://static-text" => {
                text_resource(uri, "text/plain", "This is the content of the static text resource.")
            }
            "test://static-binary" => ResourceContents::blob(RED_PIXEL_PNG, uri).with_mime_type("image/png"),
            _ => match uri.strip_prefix("test://template/").and_then(|rest| rest.strip_suffix("/data")) {
                Some(id) if !id.is_empty() && !id.contains('/') => text_resource(
                    uri,
                    "application/json",
                    json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")}).to_string(),
                ),
                _ => {
                    return Err(ErrorData::resource_not_found(format!("no resource {uri}"), Some(json!({"uri": uri}))));
                }
            },
        };
        Ok(ReadResourceResult::new(vec![contents])
            .with_ttl_ms(FIXTURE_TTL_MS)
            .with_cache_scope(CacheScope::Public)
            .into())
    }

    async fn subscribe(
        &self,
        _request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn unsubscribe(
        &self,
        _request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let prompts = vec![
            Prompt::new("test_simple_prompt", Some("A prompt without arguments"), None),
            Prompt::new(
                "test_prompt_with_arguments",
                Some("A prompt with two arguments"),
                Some(vec![
                    PromptArgument::new("arg1").with_description("The first argument").with_required(true),
                    PromptArgument::new("arg2").with_description("The second argument").with_required(true),
                ]),
            ),
            Prompt::new("test_prompt_with_embedded_resource", Some("A prompt that embeds a resource"), None),
            Prompt::new("test_prompt_with_image", Some("A prompt with an image"), None),
            Prompt::new(
                "test_input_required_result_prompt",
                Some("A prompt that first asks the user for context (an input-required result)"),
                None,
            ),
        ];
        Ok(ListPromptsResult::with_all_items(prompts).with_ttl_ms(FIXTURE_TTL_MS).with_cache_scope(CacheScope::Public))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let result = match request.name.as_str() {
            // Input from the client, written with rmcp's own types: the answer comes back in the retry.
            "test_input_required_result_prompt" => {
                let answer =
                    request.input_responses.as_ref().and_then(|r| r.get("user_context")).filter(|a| a.is_object());
                let Some(answer) = answer else {
                    let ask: InputRequest = serde_json::from_value(json!({
                        "method": "elicitation/create",
                        "params": {"mode": "form", "message": "What context should the prompt use?",
                                   "requestedSchema": {"type": "object", "properties": {"context": {"type": "string"}},
                                                       "required": ["context"]}},
                    }))
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                    let requests = InputRequests::from([("user_context".to_owned(), ask)]);
                    return Ok(InputRequiredResult::from_input_requests(requests).into());
                };
                let context = answer.pointer("/content/context").and_then(Value::as_str).unwrap_or("(none)");
                GetPromptResult::new(vec![PromptMessage::new_text(Role::User, format!("Context: {context}"))])
            }
            "test_simple_prompt" => {
                GetPromptResult::new(vec![PromptMessage::new_text(Role::User, "This is a simple prompt for testing.")])
            }
            "test_prompt_with_arguments" => {
                let arguments = request.arguments.unwrap_or_default();
                let arg = |name: &str| arguments.get(name).and_then(Value::as_str).unwrap_or_default().to_owned();
                let text = format!("Prompt with arguments: arg1='{}', arg2='{}'", arg("arg1"), arg("arg2"));
                GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
            }
            "test_prompt_with_embedded_resource" => GetPromptResult::new(vec![
                PromptMessage::new_resource(
                    Role::User,
                    "test://example-resource".to_owned(),
                    Some("text/plain".to_owned()),
                    Some("Embedded resource content for testing.".to_owned()),
                    None,
                    None,
                    None,
                ),
                PromptMessage::new_text(Role::User, "Please process the embedded resource above."),
            ]),
            "test_prompt_with_image" => GetPromptResult::new(vec![
                PromptMessage::new(Role::User, McpBlock::Image(ImageContent::new(RED_PIXEL_PNG, "image/png"))),
                PromptMessage::new_text(Role::User, "Please analyze the image above."),
            ]),
            other => return Err(ErrorData::invalid_params(format!("no prompt {other:?}"), None)),
        };
        Ok(result.into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let candidates: &[&str] = match (&request.r#ref, request.argument.name.as_str()) {
            (Reference::Prompt(_), "arg1" | "name") => &["alpha", "beta", "gamma"],
            (Reference::Resource(_), "id") => &["1", "2", "3"],
            _ => &[],
        };
        let prefix = request.argument.value.as_str();
        let values = candidates.iter().filter(|c| c.starts_with(prefix)).map(|c| (*c).to_owned()).collect();
        let completion = CompletionInfo::new(values).map_err(|e| ErrorData::internal_error(e, None))?;
        Ok(CompleteResult::new(completion))
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.prompts_list_changed = requested.prompts_list_changed.filter(|&p| p);
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let id = self.listeners.next_stream.fetch_add(1, Ordering::Relaxed);
        let streams = &self.listeners.prompt_streams;
        streams.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(id, context.sink().clone());
        context.cancelled().await;
        streams.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&id);
        Ok(())
    }
}

// ---- main ----

enum Mode {
    Stdio,
    Http(SocketAddr),
}

fn parse_args() -> Result<Mode, String> {
    let mut args = std::env::args().skip(1);
    let mut mode = Mode::Stdio;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--http" => {
                let addr = args.next().ok_or("--http needs an address, e.g. 127.0.0.1:8765")?;
                let addr: SocketAddr = addr.parse().map_err(|e| format!("--http {addr}: {e}"))?;
                if !addr.ip().is_loopback() {
                    return Err(format!("--http {addr}: only loopback addresses are served"));
                }
                mode = Mode::Http(addr);
            }
            "-h" | "--help" => {
                return Err("usage: conformance_server [--http 127.0.0.1:PORT]  (stdio without --http)".to_owned());
            }
            other => return Err(format!("unknown argument {other:?}; try --help")),
        }
    }
    Ok(mode)
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn,rmcp=error".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    if let Err(message) = run().await {
        eprintln!("conformance_server: {message}");
        std::process::exit(2);
    }
}

async fn run() -> Result<(), String> {
    let mode = parse_args()?;
    let registry = Registry::from_inventory().map_err(|e| e.to_string())?;
    let view = registry.view().names(TOOLS.iter().copied()).build().map_err(|e| e.to_string())?;
    let listeners = Arc::new(Listeners::default());
    let executor = Executor::builder(view).state_arc(listeners.clone()).build().map_err(|e| e.to_string())?;
    let server = McpServer::builder(executor)
        .name("keel-conformance")
        .title("keel conformance server")
        .handler(Fixtures { listeners: listeners.clone() })
        .build()
        .map_err(|e| e.to_string())?;
    let _ = listeners.server.set(server.clone());
    match mode {
        Mode::Stdio => server.serve_stdio().await.map_err(|e| e.to_string()),
        Mode::Http(addr) => {
            let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| format!("binding {addr}: {e}"))?;
            let local = listener.local_addr().map_err(|e| e.to_string())?;
            println!("listening on http://{local}/mcp");
            let shutdown = tokio_util::sync::CancellationToken::new();
            let on_signal = shutdown.clone();
            tokio::spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    on_signal.cancel();
                }
            });
            server.serve_http(listener, "/mcp", shutdown).await.map_err(|e| e.to_string())
        }
    }
}
