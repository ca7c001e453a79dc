//! The OpenTelemetry spans of feature `otel` in the agent loop, over HTTP against the local stub, exported to an
//! in-memory exporter: a `chat {model}` span per turn and an `execute_tool` span per call, siblings under the
//! caller's span, in the order they ran.
//!
//! `cargo test -p keel-tools-agent --features otel,stub --test agent -- otel::`

use keel_tools_agent::stub::{OPENAI_CHAT, StubResponse, StubServer};
use keel_tools_agent::{Agent, Message, OpenAiClient};
use keel_tools_core::runs::Run;
use keel_tools_core::{Executor, Registry, tool};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, global};
use opentelemetry_sdk::trace::{InMemorySpanExporterBuilder, SdkTracerProvider, SpanData};
use serde_json::json;

/// Look up one incident.
#[tool(name = "incident.lookup", effect = "read", version = "1.0")]
async fn lookup(incident_id: String) -> String {
    format!("found {incident_id}")
}

fn attr(span: &SpanData, key: &str) -> Option<String> {
    span.attributes.iter().find(|kv| kv.key.as_str() == key).map(|kv| kv.value.to_string())
}

#[tokio::test]
async fn turns_and_calls_are_sibling_spans_under_the_callers() {
    use opentelemetry::context::FutureExt as _;
    let exporter = InMemorySpanExporterBuilder::new().build();
    global::set_tracer_provider(SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build());

    let stub = StubServer::start().await.unwrap();
    stub.respond(
        OPENAI_CHAT,
        StubResponse::json(&json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "incident-lookup", "arguments": "{\"incident_id\": \"INC-1\"}"}}]}}],
            "usage": {"prompt_tokens": 90, "completion_tokens": 12, "prompt_tokens_details": {"cached_tokens": 64}}})),
    );
    stub.respond(
        OPENAI_CHAT,
        StubResponse::json(&json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "Found."}}]})),
    );
    stub.respond(OPENAI_CHAT, StubResponse::raw(401, r#"{"error": {"message": "bad key"}}"#));
    let model = OpenAiClient::new(format!("{}/v1", stub.url()), "smollm2").unwrap();
    let view = Registry::from_inventory().unwrap().view().names(["incident.lookup"]).build().unwrap();
    let executor = Executor::new(view).unwrap();

    let tracer = global::tracer("test");
    let parent_cx = Context::current_with_span(tracer.start("invoke_agent test"));
    let parent = parent_cx.span().span_context().clone();
    let outcome = async {
        let mut run = Run::new(executor.clone());
        let outcome = Agent::new(&model).run(&mut run, &mut vec![Message::user("Look up INC-1.")]).await.unwrap();
        let failed = Agent::new(&model)
            .retry(keel_tools_agent::RetryPolicy::none())
            .run(&mut Run::new(executor.clone()), &mut vec![Message::user("Again.")])
            .await;
        assert!(failed.is_err());
        outcome
    }
    .with_context(parent_cx.clone())
    .await;
    parent_cx.span().end();
    assert_eq!(outcome.turns, 2);

    let mut spans: Vec<SpanData> = exporter
        .get_finished_spans()
        .unwrap()
        .into_iter()
        .filter(|s| s.span_context.trace_id() == parent.trace_id() && s.span_context.span_id() != parent.span_id())
        .collect();
    spans.sort_by_key(|s| s.start_time);
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
    assert_eq!(names, ["chat smollm2", "execute_tool incident.lookup", "chat smollm2", "chat smollm2"]);
    assert!(spans.iter().all(|s| s.parent_span_id == parent.span_id()), "all under the caller's span");
    assert!(spans[0].end_time <= spans[1].start_time && spans[1].end_time <= spans[2].start_time, "in order");

    let chat = &spans[0];
    assert_eq!(chat.span_kind, SpanKind::Client);
    assert_eq!(attr(chat, "gen_ai.operation.name").as_deref(), Some("chat"));
    assert_eq!(attr(chat, "gen_ai.request.model").as_deref(), Some("smollm2"));
    assert_eq!(attr(chat, "gen_ai.provider.name").as_deref(), Some("openai"));
    assert_eq!(chat.status, Status::Unset);
    // The tokens the response counted; the second turn's response counted none, so its span says nothing.
    assert_eq!(attr(chat, "gen_ai.usage.input_tokens").as_deref(), Some("90"));
    assert_eq!(attr(chat, "gen_ai.usage.output_tokens").as_deref(), Some("12"));
    assert_eq!(attr(chat, "gen_ai.usage.cache_read.input_tokens").as_deref(), Some("64"));
    assert_eq!(attr(&spans[2], "gen_ai.usage.input_tokens"), None);
    let tool = &spans[1];
    assert_eq!(tool.span_kind, SpanKind::Internal);
    assert_eq!(attr(tool, "gen_ai.tool.call.id").as_deref(), Some("call_1"));
    let failed = &spans[3];
    assert_eq!(attr(failed, "error.type").as_deref(), Some("status"));
    assert!(matches!(failed.status, Status::Error { .. }));
}
