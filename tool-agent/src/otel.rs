//! OpenTelemetry (feature `otel`): a `chat {model}` span per model turn, following the GenAI semantic conventions'
//! inference span: kind `CLIENT`, the current context as parent, `gen_ai.operation.name` (`chat`),
//! `gen_ai.request.model`, `gen_ai.provider.name`, the tokens the provider counted (`gen_ai.usage.input_tokens`,
//! cached ones included, `gen_ai.usage.output_tokens`, `gen_ai.usage.cache_read.input_tokens`), and on failure
//! `error.type` (the [`ModelError`]'s kind) with an error status. The turn's tool calls get their `execute_tool` spans from the executor, as siblings under the
//! same parent.

use std::sync::OnceLock;

use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, InstrumentationScope, KeyValue, global};

use crate::model::{AssistantMessage, ChatModel, ModelError};

/// Starts the turn's span; returns the context that holds it.
pub(crate) fn start(model: &dyn ChatModel) -> Context {
    // The scope is built once; the tracer is asked of the global provider per span, which may be set at any time.
    static SCOPE: OnceLock<InstrumentationScope> = OnceLock::new();
    let scope = SCOPE
        .get_or_init(|| InstrumentationScope::builder("keel-agent").with_version(env!("CARGO_PKG_VERSION")).build());
    let tracer = global::tracer_with_scope(scope.clone());
    let mut attributes = vec![KeyValue::new("gen_ai.operation.name", "chat")];
    let name = match model.telemetry() {
        Some((model, provider)) => {
            attributes.push(KeyValue::new("gen_ai.request.model", model.to_owned()));
            attributes.push(KeyValue::new("gen_ai.provider.name", provider));
            format!("chat {model}")
        }
        None => "chat".to_owned(),
    };
    let parent = Context::current();
    let span = tracer
        .span_builder(name)
        .with_kind(SpanKind::Client)
        .with_attributes(attributes)
        .start_with_context(&tracer, &parent);
    parent.with_span(span)
}

/// Ends the turn's span with its outcome.
pub(crate) fn end(cx: &Context, reply: &Result<AssistantMessage, ModelError>) {
    let span = cx.span();
    if let Ok(AssistantMessage { usage: Some(usage), .. }) = reply {
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        span.set_attribute(KeyValue::new("gen_ai.usage.input_tokens", count(usage.input_tokens)));
        span.set_attribute(KeyValue::new("gen_ai.usage.output_tokens", count(usage.output_tokens)));
        if let Some(cached) = usage.cached_input_tokens {
            span.set_attribute(KeyValue::new("gen_ai.usage.cache_read.input_tokens", count(cached)));
        }
    }
    if let Err(error) = reply {
        span.set_attribute(KeyValue::new("error.type", kind(error)));
        span.set_status(Status::error(error.to_string()));
    }
    span.end();
}

fn kind(error: &ModelError) -> &'static str {
    match error {
        ModelError::Config { .. } => "config",
        ModelError::Connect { .. } => "connect",
        ModelError::Timeout { .. } => "timeout",
        ModelError::Status { .. } => "status",
        ModelError::TooLarge { .. } => "too_large",
        ModelError::Http { .. } => "http",
        ModelError::Server { .. } => "server",
        ModelError::Stream { .. } => "stream",
        ModelError::Malformed { .. } => "malformed",
        ModelError::ReplayExhausted { .. } => "replay_exhausted",
        ModelError::Replay { .. } => "replay",
    }
}
