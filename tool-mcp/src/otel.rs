//! W3C trace context over MCP (feature `otel`): a forwarded call carries the current span as `_meta.traceparent`
//! (SEP-414), and the server runs a call under the `traceparent` it was sent, so that the remote `execute_tool`
//! span is a child of the forwarder's.

use opentelemetry::Context;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use rmcp::model::MetaObject;

/// `00-<trace id>-<span id>-<flags>` of the current span, if there is a valid one.
pub(crate) fn current_traceparent() -> Option<String> {
    let cx = Context::current();
    let span = cx.span();
    let sc = span.span_context();
    sc.is_valid().then(|| format!("00-{:032x}-{:016x}-{:02x}", sc.trace_id(), sc.span_id(), sc.trace_flags().to_u8()))
}

/// Sets `_meta.traceparent` to the current span, when there is one.
pub(crate) fn inject(meta: &mut MetaObject) {
    if let Some(value) = current_traceparent() {
        meta.set_traceparent(&value);
    }
}

/// The context to run a call under: the current one, with the remote span of `_meta.traceparent` as parent when
/// the request carries a well-formed one (anything else is ignored, as the W3C specification says).
pub(crate) fn extract(meta: &MetaObject) -> Context {
    let cx = Context::current();
    match meta.get_traceparent().and_then(parse) {
        Some(sc) => cx.with_remote_span_context(sc),
        None => cx,
    }
}

fn parse(value: &str) -> Option<SpanContext> {
    let mut parts = value.trim().split('-');
    let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version.len() != 2 || version == "ff" || (version == "00" && parts.next().is_some()) {
        return None;
    }
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !hex(version, 2) || !hex(trace, 32) || !hex(span, 16) || !hex(flags, 2) {
        return None;
    }
    let flags = TraceFlags::new(u8::from_str_radix(flags, 16).ok()? & 1);
    let sc = SpanContext::new(
        TraceId::from_hex(trace).ok()?,
        SpanId::from_hex(span).ok()?,
        flags,
        true,
        TraceState::default(),
    );
    sc.is_valid().then_some(sc)
}
