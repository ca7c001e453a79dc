//! OpenTelemetry (feature `otel`): one span per call, following the GenAI semantic conventions' "Execute tool
//! span", from the global tracer provider (a no-op until the application installs one).
//!
//! Name `execute_tool {gen_ai.tool.name}` (`execute_tool` alone for a name the view does not hold, which the model
//! may have made up), kind `INTERNAL`, the current context as parent. Attributes: `gen_ai.operation.name`
//! (`execute_tool`), `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.type` (`function`),
//! `gen_ai.tool.description`; on failure `error.type` with keel's code and an error status with the message the
//! model reads; with [`ExecutorBuilder::otel_content`](crate::executor::ExecutorBuilder::otel_content),
//! `gen_ai.tool.call.arguments` and `gen_ai.tool.call.result` too.

use std::sync::OnceLock;

use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, InstrumentationScope, KeyValue, global};
use serde_json::Value;

use crate::result::ToolResult;
use crate::tool_definition::ToolDefinition;

/// The name a span shows for a tool the view does not hold is cut to this many bytes.
const MAX_NAME: usize = 128;

/// Starts the call's span as a child of the current context; returns the context that holds it.
pub(crate) fn start(def: Option<&ToolDefinition>, name: &str, call_id: &str, arguments: Option<&Value>) -> Context {
    // The scope is built once; the tracer is asked of the global provider per span, which may be set at any time.
    static SCOPE: OnceLock<InstrumentationScope> = OnceLock::new();
    let scope =
        SCOPE.get_or_init(|| InstrumentationScope::builder("keel").with_version(env!("CARGO_PKG_VERSION")).build());
    let tracer = global::tracer_with_scope(scope.clone());
    let shown = match name.char_indices().nth(MAX_NAME) {
        Some((end, _)) => &name[..end],
        None => name,
    };
    let mut attributes = vec![
        KeyValue::new("gen_ai.operation.name", "execute_tool"),
        KeyValue::new("gen_ai.tool.name", shown.to_owned()),
        KeyValue::new("gen_ai.tool.call.id", call_id.to_owned()),
        KeyValue::new("gen_ai.tool.type", "function"),
    ];
    if let Some(def) = def {
        attributes.push(KeyValue::new("gen_ai.tool.description", def.description().to_owned()));
    }
    if let Some(arguments) = arguments {
        attributes.push(KeyValue::new("gen_ai.tool.call.arguments", arguments.to_string()));
    }
    let span_name = match def {
        Some(def) => format!("execute_tool {}", def.name()),
        None => "execute_tool".to_owned(),
    };
    let parent = Context::current();
    let span = tracer
        .span_builder(span_name)
        .with_kind(SpanKind::Internal)
        .with_attributes(attributes)
        .start_with_context(&tracer, &parent);
    parent.with_span(span)
}

/// Ends the call's span with its outcome.
pub(crate) fn end(cx: &Context, result: &ToolResult, content: bool) {
    let span = cx.span();
    match result.error() {
        Some(error) => {
            span.set_attribute(KeyValue::new("error.type", error.code.as_str().to_owned()));
            span.set_status(Status::error(error.message.clone()));
        }
        None if content => span.set_attribute(KeyValue::new("gen_ai.tool.call.result", result.content_text())),
        None => {}
    }
    span.end();
}
