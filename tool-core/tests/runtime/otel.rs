//! The OpenTelemetry spans of feature `otel`, exported to an in-memory exporter: names, kinds, attributes, status
//! and parent links, for calls one at a time and for a batch whose calls run concurrently.
//!
//! `cargo test -p keel-tools-core --features otel --test runtime -- otel::`

use std::sync::OnceLock;

use keel_tools_core::runs::{Concurrency, Run};
use keel_tools_core::{Executor, Registry, ToolCall, tool};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, global};
use opentelemetry_sdk::trace::{InMemorySpanExporter, InMemorySpanExporterBuilder, SdkTracerProvider, SpanData};
use serde_json::json;

/// Look up one incident.
#[tool(name = "otel.lookup", effect = "read", version = "1.0")]
async fn lookup(incident_id: String) -> String {
    format!("found {incident_id}")
}

/// The exporter every test reads (one global provider per process).
fn exporter() -> &'static InMemorySpanExporter {
    static EXPORTER: OnceLock<InMemorySpanExporter> = OnceLock::new();
    EXPORTER.get_or_init(|| {
        let exporter = InMemorySpanExporterBuilder::new().build();
        let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
        global::set_tracer_provider(provider);
        exporter
    })
}

/// An executor over `otel.lookup` alone. The registry leaves the schema checks to the executor: this binary's
/// inventory holds `examples::misdated_window`, whose refused example fails every registry built with them, and the
/// executor still compiles `otel.lookup`'s schemas when it is built.
fn executor(content: bool) -> Executor {
    let registry = Registry::builder().defer_schema_checks().build().unwrap();
    let view = registry.view().names(["otel.lookup"]).build().unwrap();
    Executor::builder(view).otel_content(content).build().unwrap()
}

/// Runs `f` under a parent span of its own; returns the spans of that trace but the parent, and the parent's span
/// context.
async fn traced<F: std::future::Future<Output = ()>>(
    f: impl FnOnce() -> F,
) -> (Vec<SpanData>, opentelemetry::trace::SpanContext) {
    use opentelemetry::context::FutureExt as _;
    let exporter = exporter();
    let tracer = global::tracer("test");
    let parent = tracer.start("test parent");
    let parent_cx = Context::current_with_span(parent);
    let parent_sc = parent_cx.span().span_context().clone();
    f().with_context(parent_cx.clone()).await;
    parent_cx.span().end();
    let spans = exporter.get_finished_spans().unwrap();
    let mine = spans
        .into_iter()
        .filter(|s| {
            s.span_context.trace_id() == parent_sc.trace_id() && s.span_context.span_id() != parent_sc.span_id()
        })
        .collect();
    (mine, parent_sc)
}

fn attr(span: &SpanData, key: &str) -> Option<String> {
    span.attributes.iter().find(|kv| kv.key.as_str() == key).map(|kv| kv.value.to_string())
}

#[tokio::test]
async fn a_call_is_one_execute_tool_span_under_the_current_context() {
    let executor = executor(false);
    let (spans, parent) = traced(|| async {
        let r = executor.call(ToolCall::new("call-1", "otel.lookup", json!({"incident_id": "INC-1"}))).await;
        assert!(r.is_ok());
    })
    .await;
    assert_eq!(spans.len(), 1, "{spans:#?}");
    let span = &spans[0];
    assert_eq!(span.name, "execute_tool otel.lookup");
    assert_eq!(span.span_kind, SpanKind::Internal);
    assert_eq!(span.parent_span_id, parent.span_id(), "the current context is the parent");
    assert_eq!(attr(span, "gen_ai.operation.name").as_deref(), Some("execute_tool"));
    assert_eq!(attr(span, "gen_ai.tool.name").as_deref(), Some("otel.lookup"));
    assert_eq!(attr(span, "gen_ai.tool.call.id").as_deref(), Some("call-1"));
    assert_eq!(attr(span, "gen_ai.tool.type").as_deref(), Some("function"));
    assert_eq!(attr(span, "gen_ai.tool.description").as_deref(), Some("Look up one incident."));
    assert_eq!(attr(span, "error.type"), None);
    assert_eq!(span.status, Status::Unset);
    assert_eq!(attr(span, "gen_ai.tool.call.arguments"), None, "content only when opted in");
    assert_eq!(attr(span, "gen_ai.tool.call.result"), None);
    assert_eq!(span.instrumentation_scope.name(), "keel");
}

#[tokio::test]
async fn failures_carry_keels_code_as_the_error_type() {
    let executor = executor(false);
    let (spans, _) = traced(|| async {
        executor.call(ToolCall::new("bad-args", "otel.lookup", json!({"incident_id": 7}))).await;
        executor.call(ToolCall::new("no-tool", "otel.delete_everything", json!({}))).await;
    })
    .await;
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let by_id = |id: &str| spans.iter().find(|s| attr(s, "gen_ai.tool.call.id").as_deref() == Some(id)).unwrap();
    let invalid = by_id("bad-args");
    assert_eq!(attr(invalid, "error.type").as_deref(), Some("invalid_arguments"));
    assert!(matches!(invalid.status, Status::Error { .. }), "{:?}", invalid.status);
    let unknown = by_id("no-tool");
    assert_eq!(unknown.name, "execute_tool", "a name the view does not hold stays out of the span name");
    assert_eq!(attr(unknown, "gen_ai.tool.name").as_deref(), Some("otel.delete_everything"));
    assert_eq!(attr(unknown, "error.type").as_deref(), Some("unknown_tool"));
}

#[tokio::test]
async fn arguments_and_results_are_recorded_when_opted_in() {
    let executor = executor(true);
    let (spans, _) = traced(|| async {
        executor.call(ToolCall::new("call-c", "otel.lookup", json!({"incident_id": "INC-2"}))).await;
    })
    .await;
    assert_eq!(attr(&spans[0], "gen_ai.tool.call.arguments").as_deref(), Some(r#"{"incident_id":"INC-2"}"#));
    assert_eq!(attr(&spans[0], "gen_ai.tool.call.result").as_deref(), Some(r#""found INC-2""#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_of_a_batch_keep_the_batchs_parent() {
    let executor = executor(false);
    let (spans, parent) = traced(|| async {
        let mut run = Run::builder(executor.clone()).concurrency(Concurrency::new(3)).build();
        let calls =
            (0..3).map(|i| ToolCall::new(format!("p{i}"), "otel.lookup", json!({"incident_id": "X"}))).collect();
        let batch = run.process_batch(calls).await;
        assert!(batch.results.iter().all(|r| r.is_ok()));
    })
    .await;
    assert_eq!(spans.len(), 3, "{spans:#?}");
    assert!(spans.iter().all(|s| s.parent_span_id == parent.span_id()), "spawned calls keep the parent");
}
