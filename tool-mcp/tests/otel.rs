//! W3C trace context over MCP (feature `otel`): a call forwarded to a remote keel server carries the forwarder's
//! `execute_tool` span as `_meta.traceparent`, and the server's `execute_tool` span is its child, in one trace.
//!
//! `cargo test -p keel-tools-mcp --features otel,client,server --test otel`

use keel_tools_core::{Executor, Registry, ToolCall, tool};
use keel_tools_mcp::{McpServer, RemoteServer};
use opentelemetry::trace::{TraceContextExt, Tracer};
use opentelemetry::{Context, global};
use opentelemetry_sdk::trace::{InMemorySpanExporterBuilder, SdkTracerProvider};
use serde_json::json;

/// Look up one incident.
#[tool(effect = "read", version = "1.0")]
async fn otel_lookup(incident_id: String) -> String {
    format!("found {incident_id}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_call_continues_the_forwarders_trace_on_the_server() {
    use opentelemetry::context::FutureExt as _;
    let exporter = InMemorySpanExporterBuilder::new().build();
    global::set_tracer_provider(SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build());

    let served = Registry::from_inventory().unwrap().view().names(["otel_lookup"]).build().unwrap();
    let server = McpServer::new(Executor::new(served).unwrap()).unwrap();
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(server_io);
    tokio::spawn(async move { server.serve_io(read, write).await });
    let remote = RemoteServer::connect("remote", client_io).await.expect("connect");
    let forwarded = remote.import().await.expect("import").into_definitions();
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
