//! Limits before allocation: argument text beyond the executor's limits is refused before it is parsed, through
//! every entry point that reads text (a call's JSON text, a provider's message, MCP's stdio transport), and a
//! result beyond the output limits stops being serialised there. What each costs is measured by an allocator that
//! counts what each thread holds (the binary's: tests/tests/integration.rs).

use std::time::Duration;

use keel_tools_core::schema::Limits;
use keel_tools_core::{Executor, Provider, Registry, ToolCall, tool};
use keel_tools_mcp::McpServer;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use keel_tests::alloc::peak_during;

const MIB: usize = 1024 * 1024;
const GIB: usize = 1024 * MIB;

/// Echoes its items.
#[tool(effect = "read", version = "1.0")]
fn echo_items(items: Vec<Value>) -> usize {
    items.len()
}

/// Returns `count` strings of 1 KiB.
#[tool(effect = "read", version = "1.0")]
fn kibibytes(count: usize) -> Vec<String> {
    vec!["x".repeat(1024); count]
}

/// Returns `count` control characters, each six bytes of JSON once escaped (`\u0001`).
#[tool(effect = "read", version = "1.0")]
fn controls(count: usize) -> String {
    "\u{1}".repeat(count)
}

fn executor(limits: Limits) -> Executor {
    let view = Registry::from_inventory().unwrap().view().names(["echo_items", "kibibytes"]).build().unwrap();
    Executor::builder(view).limits(limits).build().unwrap()
}

#[test]
fn a_result_past_the_output_limits_stops_being_serialised_there() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let view = Registry::from_inventory().unwrap().view().names(["kibibytes"]).build().unwrap();
    let ex = Executor::builder(view).output_limits(Limits { max_depth: 8, max_bytes: MIB }).build().unwrap();
    let call = |count: usize| ex.call(ToolCall::new("k", "kibibytes", json!({"count": count})));
    let r = rt.block_on(call(512));
    assert_eq!(r.data().and_then(Value::as_array).map(Vec::len), Some(512), "within the limit");
    // 64 MiB of strings: the handler holds them; serialised whole, the result would hold as much again.
    let (r, peak) = peak_during(|| rt.block_on(call(64 * 1024)));
    assert_eq!((r.code(), r.executed), (Some("invalid_tool_output"), true), "{r:?}");
    assert!(r.error().unwrap().message.contains("at most 1048576 bytes"), "{r:?}");
    let handlers_own = 64 * MIB + 64 * 1024 * std::mem::size_of::<String>();
    assert!(peak < handlers_own + 4 * MIB, "the call held {peak} bytes at once; the handler's own are {handlers_own}");
}

/// The serializer counts a string's bytes, not its escapes: a result within that count but beyond the limit once
/// escaped is still refused (the executor leaves compiled tools' results to the serializer's own checks).
#[test]
fn a_result_beyond_the_output_limits_only_once_escaped_is_refused() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let view = Registry::from_inventory().unwrap().view().names(["controls"]).build().unwrap();
    let ex = Executor::builder(view).output_limits(Limits { max_depth: 8, max_bytes: 1000 }).build().unwrap();
    let call = |count: usize| ex.call(ToolCall::new("c", "controls", json!({"count": count})));
    // 300 bytes unescaped, 1,802 escaped.
    let r = rt.block_on(call(300));
    assert_eq!((r.code(), r.executed), (Some("invalid_tool_output"), true), "{r:?}");
    assert!(r.error().unwrap().message.contains("at most 1000 bytes"), "{r:?}");
    // 165 escaped: 992 bytes, within.
    let r = rt.block_on(call(165));
    assert_eq!(r.data().and_then(Value::as_str).map(str::len), Some(165), "{r:?}");
}

fn arguments_error(call: &ToolCall) -> String {
    call.arguments().expect_err("the arguments are refused").to_string()
}

#[test]
fn a_gibibyte_of_brackets_is_refused_without_being_read() {
    let text = "[".repeat(GIB);
    let (call, peak) = peak_during(|| ToolCall::from_json_text("c", "echo_items", &text));
    assert!(arguments_error(&call).contains("over the limit of 1048576 bytes"), "{}", arguments_error(&call));
    assert!(peak < 64 * 1024, "refusing held {peak} bytes");
}

#[test]
fn a_large_flat_array_is_refused_before_it_is_parsed() {
    // 64 MiB of `1,`: shallow, so only the size limit can stop it; parsed, it would take several times that.
    let mut text = String::with_capacity(64 * MIB + 16);
    text.push_str(r#"{"items":["#);
    while text.len() < 64 * MIB {
        text.push_str("1,");
    }
    text.push_str("1]}");
    let (call, peak) = peak_during(|| ToolCall::from_json_text("c", "echo_items", &text));
    assert!(arguments_error(&call).contains("over the limit"), "{}", arguments_error(&call));
    assert!(peak < 64 * 1024, "refusing held {peak} bytes");
}

#[test]
fn nesting_is_measured_outside_strings_before_parsing() {
    let nested = |depth: usize| format!(r#"{{"items":{}{}}}"#, "[".repeat(depth - 1), "]".repeat(depth - 1));
    // 64 levels (the object included) are allowed; 65 are refused, before the parser builds anything.
    let call = ToolCall::from_json_text("c", "echo_items", &nested(64));
    assert!(call.arguments().is_ok(), "{:?}", call.arguments());
    let (call, peak) = peak_during(|| ToolCall::from_json_text("c", "echo_items", &nested(65)));
    assert!(arguments_error(&call).contains("deeper than 64 levels"), "{}", arguments_error(&call));
    assert!(peak < 1024, "refusing held {peak} bytes");
    // Brackets inside strings, escaped quotes included, are text.
    let text = format!(r#"{{"items":["\"{}"]}}"#, "[".repeat(200));
    assert!(ToolCall::from_json_text("c", "echo_items", &text).arguments().is_ok());
}

#[tokio::test]
async fn an_executors_limits_hold_for_text_read_by_its_codecs() {
    let ex = executor(Limits { max_depth: 64, max_bytes: 1000 });
    let codec = ex.codec(Provider::OpenAiChat);
    assert_eq!(codec.limits().max_bytes, 1000);
    let message = |arguments: String| json!({"id": "call_1", "type": "function", "function": {"name": "echo_items", "arguments": arguments}});
    let fits = format!(r#"{{"items":[{}]}}"#, vec!["1"; 400].join(","));
    assert!(fits.len() < 1000);
    let r = ex.call(codec.call(&message(fits), 0)).await;
    assert_eq!(r.data(), Some(&json!(400)), "{r:?}");
    let over = format!(r#"{{"items":[{}]}}"#, vec!["1"; 600].join(","));
    let r = ex.call(codec.call(&message(over), 0)).await;
    assert_eq!((r.code(), r.executed), (Some("invalid_arguments"), false), "{r:?}");
    assert!(r.error().unwrap().message.contains("over the limit of 1000 bytes"), "{r:?}");
    // A gibibyte of brackets in a provider's message: refused as cheaply as the text alone.
    let item = message("[".repeat(GIB));
    let (call, peak) = peak_during(|| ex.codec(Provider::OpenAiChat).call(&item, 0));
    assert!(arguments_error(&call).contains("over the limit"), "{}", arguments_error(&call));
    assert!(peak < 64 * 1024, "refusing held {peak} bytes");
    drop(item);
    let item =
        json!({"type": "function_call", "call_id": "call_2", "name": "echo_items", "arguments": "[".repeat(GIB)});
    let (call, peak) = peak_during(|| ex.codec(Provider::OpenAiResponses).call(&item, 0));
    assert!(arguments_error(&call).contains("over the limit"), "{}", arguments_error(&call));
    assert!(peak < 64 * 1024, "refusing held {peak} bytes");
}

/// Over MCP's stdio transport (`McpServer::serve_io`, which `serve_stdio` is), a gibibyte-long line of brackets is
/// dropped as it is read: the server never holds much more than the executor's argument limit, and the session
/// goes on to answer the next call.
#[test]
fn an_mcp_stdio_line_past_the_limit_is_dropped_as_it_is_read() {
    // One thread runs the server and the client, so the allocator's counters see all of the server's memory.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let ((), peak) = peak_during(|| {
        rt.block_on(async {
            let server = McpServer::builder(executor(Limits::DEFAULT)).build().unwrap();
            let (client, server_side) = tokio::io::duplex(64 * 1024);
            let (server_read, server_write) = tokio::io::split(server_side);
            let serving = tokio::spawn(async move { server.serve_io(server_read, server_write).await });
            let (client_read, mut client_write) = tokio::io::split(client);
            let mut lines = BufReader::new(client_read).lines();
            let send = |v: Value| format!("{v}\n");
            client_write
                .write_all(
                    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                        "protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "limits-test", "version": "1.0"}}}))
                    .as_bytes(),
                )
                .await
                .unwrap();
            let init: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
            assert_eq!(init["id"], 1, "{init}");
            client_write
                .write_all(send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).as_bytes())
                .await
                .unwrap();
            // A gibibyte of `[` on one line, written in chunks: nothing in the test holds it whole.
            let chunk = vec![b'['; 64 * 1024];
            for _ in 0..GIB / chunk.len() {
                client_write.write_all(&chunk).await.unwrap();
            }
            client_write.write_all(b"\n").await.unwrap();
            let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                              "params": {"name": "echo_items", "arguments": {"items": [1, 2, 3]}}});
            client_write.write_all(send(call).as_bytes()).await.unwrap();
            let answer = tokio::time::timeout(Duration::from_secs(60), async {
                loop {
                    let line = lines.next_line().await.unwrap().expect("the server answers");
                    let v: Value = serde_json::from_str(&line).unwrap();
                    if v["id"] == 2 {
                        return v;
                    }
                }
            })
            .await
            .expect("the call after the long line is answered");
            assert_eq!(answer["result"]["content"][0]["text"], "3", "{answer}");
            drop(client_write);
            drop(lines);
            let _ = tokio::time::timeout(Duration::from_secs(10), serving).await;
        })
    });
    // The argument limit (1 MiB) and its envelope, plus what a session costs, far below the gibibyte sent.
    assert!(peak < 8 * MIB, "serving held {peak} bytes at once");
}
