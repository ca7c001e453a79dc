//! Every call shows up as one `tool_call` span with its outcome, without the user writing code, and internal
//! failure details go to a `tracing` event tagged with the call id, never into the result.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use keel_tools_core::{Executor, Registry, ToolCall, ToolResult, tool};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// Echoes a word.
#[tool(effect = "read", version = "2.3")]
fn echo_word(word: String) -> String {
    word
}

/// Logs from a plain `fn`, which runs in line.
#[tool(effect = "read", version = "1.0")]
fn logs_in_line() -> String {
    tracing::info!(marker = "in line");
    "done".into()
}

/// Logs from an `async fn` before and after it yields, so that it is polled again later.
#[tool(effect = "read", version = "1.0")]
async fn logs_across_a_yield() -> String {
    tracing::info!(marker = "first poll");
    tokio::task::yield_now().await;
    tracing::info!(marker = "later poll");
    "done".into()
}

/// Fails with a detail that belongs in the logs only.
#[tool(effect = "read", version = "1.0")]
fn leaky() -> Result<String, std::io::Error> {
    Err(std::io::Error::other("password=hunter2 at /srv/app/config.toml"))
}

#[derive(Default)]
struct Fields(HashMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}").trim_matches('"').to_owned());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

#[derive(Clone, Default)]
struct Capture {
    closed_spans: Arc<Mutex<Vec<HashMap<String, String>>>>,
    events: Arc<Mutex<Vec<HashMap<String, String>>>>,
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut f = Fields::default();
        attrs.record(&mut f);
        f.0.insert("span_name".into(), attrs.metadata().name().into());
        ctx.span(id).unwrap().extensions_mut().insert(f);
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(f) = ctx.span(id).unwrap().extensions_mut().get_mut::<Fields>() {
            values.record(f);
        }
    }
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut f = Fields::default();
        event.record(&mut f);
        // The span the event happened in, and its call id: `in_span` and `in_call`.
        if let Some(span) = ctx.event_span(event) {
            f.0.insert("in_span".into(), span.name().into());
            if let Some(id) = span.extensions().get::<Fields>().and_then(|s| s.0.get("call_id").cloned()) {
                f.0.insert("in_call".into(), id);
            }
        }
        self.events.lock().unwrap().push(f.0);
    }
    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(f) = ctx.span(&id).unwrap().extensions_mut().remove::<Fields>() {
            self.closed_spans.lock().unwrap().push(f.0);
        }
    }
}

/// Makes `calls`, one after another, on an executor of the tools `names`, with [`Capture`] as the subscriber:
/// their results, and what was captured.
///
/// The calls are made twice, and only the second round is captured. `tracing` caches, for the whole process, whether
/// anyone listens at each callsite, and the thread that reaches a callsite first decides it: a test beside this one
/// that runs a call on a thread without a subscriber marks the executor's span "never", and then this thread's
/// subscriber would not see it. The first round reaches every callsite these calls use; rebuilding the cache then
/// asks this thread's subscriber again, and no later registration can change what it answered.
fn captured_calls<const N: usize>(names: &[&str], calls: [ToolCall; N]) -> ([ToolResult; N], Capture) {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let _guard = tracing::subscriber::set_default(subscriber);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let registry = Registry::from_inventory().unwrap();
    let ex = Executor::new(registry.view().names(names).build().unwrap()).unwrap();
    let run = |calls: [ToolCall; N]| {
        rt.block_on(async {
            let mut results = Vec::with_capacity(N);
            for call in calls {
                results.push(ex.call(call).await);
            }
            results
        })
    };
    run(calls.clone());
    tracing::callsite::rebuild_interest_cache();
    capture.closed_spans.lock().unwrap().clear();
    capture.events.lock().unwrap().clear();
    let results = run(calls);
    (results.try_into().expect("one result per call"), capture)
}

#[test]
fn each_call_is_one_span_with_its_outcome_and_details_stay_in_events() {
    let ([ok, bad, unknown], capture) = captured_calls(
        &["echo_word", "leaky"],
        [
            ToolCall::new("c-ok", "echo_word", json!({"word": "hi"})),
            ToolCall::new("c-bad", "leaky", json!({})),
            ToolCall::new("c-unknown", "nope", json!({})),
        ],
    );
    assert!(ok.is_ok() && !bad.is_ok() && !unknown.is_ok());

    let spans = capture.closed_spans.lock().unwrap().clone();
    let calls: Vec<_> = spans.iter().filter(|s| s["span_name"] == "tool_call").collect();
    assert_eq!(calls.len(), 3, "{spans:?}");
    let by_id = |id: &str| calls.iter().find(|s| s["call_id"] == id).unwrap();
    let s = by_id("c-ok");
    assert_eq!(s["tool_name"], "echo_word");
    assert_eq!(s["tool_version"], "2.3");
    assert_eq!(s["effect"], "read");
    assert_eq!(s["outcome"], "ok");
    assert_eq!(s["executed"], "true");
    assert!(s.contains_key("duration_us"));
    assert_eq!(by_id("c-bad")["outcome"], "tool_internal_error");
    assert_eq!(by_id("c-unknown")["outcome"], "unknown_tool");
    assert_eq!(by_id("c-unknown")["executed"], "false");

    let events = capture.events.lock().unwrap().clone();
    let detail =
        events.iter().find(|e| e.get("call_id").map(String::as_str) == Some("c-bad")).expect("an event for c-bad");
    assert!(detail["error"].contains("hunter2"), "the detail is logged: {detail:?}");
    let json = serde_json::to_string(&bad).unwrap();
    assert!(!json.contains("hunter2") && !json.contains("/srv/"), "{json}");
}

/// A handler runs inside its call's span: a plain `fn` run in line, and an `async fn` on its first poll and on the
/// polls after it yields.
#[test]
fn a_handlers_own_events_are_inside_its_calls_span() {
    let ([a, b], capture) = captured_calls(
        &["logs_in_line", "logs_across_a_yield"],
        [
            ToolCall::new("c-line", "logs_in_line", json!({})),
            ToolCall::new("c-yield", "logs_across_a_yield", json!({})),
        ],
    );
    assert!(a.is_ok() && b.is_ok(), "{a:?} {b:?}");

    let events = capture.events.lock().unwrap().clone();
    let by_marker = |marker: &str| {
        events
            .iter()
            .find(|e| e.get("marker").map(String::as_str) == Some(marker))
            .unwrap_or_else(|| panic!("no event {marker:?} in {events:?}"))
    };
    for (marker, call) in [("in line", "c-line"), ("first poll", "c-yield"), ("later poll", "c-yield")] {
        let e = by_marker(marker);
        assert_eq!(e.get("in_span").map(String::as_str), Some("tool_call"), "{marker}: {e:?}");
        assert_eq!(e.get("in_call").map(String::as_str), Some(call), "{marker}: {e:?}");
    }
}
