//! W3C trace context over MCP (feature `otel`): a call forwarded to a remote keel server carries the forwarder's
//! `execute_tool` span as `_meta.traceparent`, and the server's `execute_tool` span is its child, in one trace; a
//! `traceparent` that is not well formed is ignored (the call starts a trace of its own), as the W3C specification
//! says.
//!
//! `cargo test -p keel-tools-mcp --features otel,client,server --test otel`

use keel_tools_core::{Executor, Registry, ToolCall, tool};
use keel_tools_mcp::{McpServer, RemoteServer};
use std::sync::LazyLock;

use opentelemetry::trace::{SpanId, TraceContextExt, Tracer};
use opentelemetry::{Context, Value, global};
use opentelemetry_sdk::trace::{InMemorySpanExporter, InMemorySpanExporterBuilder, SdkTracerProvider, SpanData};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Look up one incident.
#[tool(effect = "read", version = "1.0")]
async fn otel_lookup(incident_id: String) -> String {
    format!("found {incident_id}")
}

/// The spans of every test of this binary: the tracer provider is global, so it is installed once, and each test
/// picks its own spans out of the exporter (by trace id or call id).
static EXPORTER: LazyLock<InMemorySpanExporter> = LazyLock::new(|| {
    let exporter = InMemorySpanExporterBuilder::new().build();
    global::set_tracer_provider(SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build());
    exporter
});

/// keel's server of `otel_lookup` on one end of an in-memory pipe: the other end, the client's.
fn serve_lookup() -> tokio::io::DuplexStream {
    let served = Registry::from_inventory().unwrap().view().names(["otel_lookup"]).build().unwrap();
    let server = McpServer::new(Executor::new(served).unwrap()).unwrap();
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(server_io);
    tokio::spawn(async move { server.serve_io(read, write).await });
    client_io
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_call_continues_the_forwarders_trace_on_the_server() {
    use opentelemetry::context::FutureExt as _;
    let exporter = &*EXPORTER;

    let client_io = serve_lookup();
    let remote = RemoteServer::connect("remote", client_io).await.expect("connect");
    let forwarded = remote.import_unpinned().await.expect("import").into_definitions();
    let name = forwarded[0].name().to_owned();
    let registry = Registry::builder().without_inventory().tools(forwarded).build().unwrap();
    let local = Executor::new(registry.view().names([name.as_str()]).build().unwrap()).unwrap();

    let parent_cx = Context::current_with_span(global::tracer("test").start("invoke_agent test"));
    let parent = parent_cx.span().span_context().clone();
    let result = local
        .call(ToolCall::new("call-1", name.clone(), json!({"incident_id": "INC-1"})))
        .with_context(parent_cx.clone())
        .await;
    parent_cx.span().end();
    assert!(result.is_ok(), "{result:?}");

    let spans: Vec<_> = exporter
        .get_finished_spans()
        .unwrap()
        .into_iter()
        .filter(|s| s.span_context.trace_id() == parent.trace_id())
        .collect();
    let forwarder = spans.iter().find(|s| s.name == format!("execute_tool {name}")).expect("the forwarder's span");
    let served = spans.iter().find(|s| s.name == "execute_tool otel_lookup").expect("the server's span, in the trace");
    assert_eq!(forwarder.parent_span_id, parent.span_id());
    assert_eq!(served.parent_span_id, forwarder.span_context.span_id(), "the server's span is the forwarder's child");
    assert!(served.parent_span_is_remote, "its parent came over the wire");
}

/// The server's `execute_tool` span of the call whose JSON-RPC id (the call id) is `call_id`.
fn served_span(exporter: &InMemorySpanExporter, call_id: &str) -> SpanData {
    let id = Value::from(call_id.to_owned());
    let mut spans = exporter.get_finished_spans().unwrap().into_iter().filter(|s| {
        s.name == "execute_tool otel_lookup"
            && s.attributes.iter().any(|kv| kv.key.as_str() == "gen_ai.tool.call.id" && kv.value == id)
    });
    let span = spans.next().unwrap_or_else(|| panic!("no execute_tool span for the call {call_id}"));
    assert!(spans.next().is_none(), "one span per call");
    span
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_continues_a_well_formed_traceparent_and_ignores_any_other() {
    let exporter = &*EXPORTER;
    let client_io = serve_lookup();
    let (client_read, mut client_write) = tokio::io::split(client_io);
    let mut lines = BufReader::new(client_read).lines();
    let mut send = async |message: serde_json::Value| {
        client_write.write_all(format!("{message}\n").as_bytes()).await.unwrap();
    };
    send(json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}))
    .await;
    let answer: serde_json::Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(answer["id"], "init", "{answer}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;

    // The specification's example, then what a reader must not accept: too few parts, an all-zero trace id or
    // span id, upper-case hex, the version `ff`, parts after version 00's four, a short trace id.
    let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let bad = [
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
    ];
    for (i, traceparent) in std::iter::once(good).chain(bad).enumerate() {
        let id = format!("tp-{i}");
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "otel_lookup", "arguments": {"incident_id": "INC-1"}, "_meta": {"traceparent": traceparent}}}))
        .await;
        let answer: serde_json::Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(answer["result"]["isError"], false, "{traceparent:?}: {answer}");
    }

    let continued = served_span(exporter, "tp-0");
    assert_eq!(format!("{:032x}", continued.span_context.trace_id()), "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(format!("{:016x}", continued.parent_span_id), "00f067aa0ba902b7");
    assert!(continued.parent_span_is_remote && continued.span_context.is_sampled());
    for (i, traceparent) in bad.iter().enumerate() {
        let span = served_span(exporter, &format!("tp-{}", i + 1));
        assert_eq!(span.parent_span_id, SpanId::INVALID, "{traceparent:?} was not ignored");
        assert_ne!(
            format!("{:032x}", span.span_context.trace_id()),
            "4bf92f3577b34da6a3ce929d0e0e4736",
            "{traceparent:?} was not ignored"
        );
    }
}
