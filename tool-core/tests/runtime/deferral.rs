//! Deferred tools under the run's allowlist: a deferred tool not surfaced yet is refused exactly as a tool the view
//! lacks; keel's search tool surfaces what it returns; the run logs each surfacing, and a run made again from the
//! log starts with the same tools surfaced.

use std::sync::{Arc, Mutex};

use keel_tools_core::deferral::{DeferralError, SEARCH_TOOL, Surfaced, surfaced_in};
use keel_tools_core::definition::{Effect, ToolDefinition};
use keel_tools_core::events::{Decision, EventKind};
use keel_tools_core::runs::{Concurrency, Decider, DefaultDecider, Run, RunState, StopPolicy};
use keel_tools_core::{Executor, ToolCall, ToolResult, ToolView};
use serde_json::{Value, json};

/// What ran, by tool.
static RAN: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// The tests share [`RAN`]: one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn tool(name: &'static str, description: &'static str, deferred: bool) -> Arc<ToolDefinition> {
    let schema = json!({"type": "object", "properties": {"id": {"type": "string", "description": "Which one."}}});
    let def = ToolDefinition::builder(name)
        .description(description)
        .version("1.0")
        .effect(Effect::Read)
        .input_schema(schema)
        .defer(deferred)
        .handler(move |_arguments: Value, _ctx| async move {
            RAN.lock().unwrap().push(name.to_owned());
            Ok(json!(format!("{name} done")))
        })
        .build()
        .unwrap();
    Arc::new(def)
}

/// Two tools shown from the start, three deferred.
fn view() -> ToolView {
    ToolView::new(vec![
        tool("today", "Says which day it is.", false),
        tool("incident.lookup", "Look up one incident by its id.", false),
        tool("billing.invoice.refund", "Refund an invoice, fully or in part.", true),
        tool("billing.invoice.void", "Void an unpaid invoice.", true),
        tool("shipping.label.print", "Print a shipping label for a parcel.", true),
    ])
}

/// The default rules, but a refused tool lets the run go on.
fn go_on(observation: &ToolResult, state: &RunState, stop: &StopPolicy) -> Decision {
    if observation.code() == Some("unknown_tool") {
        return Decision::Continue;
    }
    DefaultDecider.decide(observation, state, stop)
}

fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall::new(id, name, arguments)
}

fn names(view: &ToolView) -> Vec<&str> {
    view.names().collect()
}

#[tokio::test]
async fn a_deferred_tool_not_surfaced_is_refused_exactly_as_an_absent_one_and_runs_nothing() {
    let _turn = ONE_AT_A_TIME.lock().await;
    RAN.lock().unwrap().clear();
    let executor = Executor::new(view().with_tool_search().unwrap()).unwrap();
    let mut run = Run::builder(executor).decider(go_on).build();
    assert_eq!(names(run.shown()), ["incident.lookup", SEARCH_TOOL, "today"]);
    let batch = run
        .process_batch(vec![
            call("c1", "billing.invoice.refund", json!({"id": "I-1"})),
            call("c2", "billing.invoice.nothing", json!({"id": "I-1"})),
        ])
        .await;
    let (deferred, absent) = (&batch.results[0], &batch.results[1]);
    assert_eq!(deferred.code(), Some("unknown_tool"));
    assert!(!deferred.executed);
    assert_eq!(deferred.tool_version, None, "nothing of the tool is told");
    // The same answer as for a name the view lacks, but for the name itself.
    let mut expected = serde_json::to_value(absent).unwrap();
    let mut got = serde_json::to_value(deferred).unwrap();
    for v in [&mut expected, &mut got] {
        v["call_id"] = json!("*");
        v["tool_name"] = json!("*");
        if let Some(m) = v.pointer_mut("/error/message") {
            *m = json!(m.as_str().unwrap().replace("billing.invoice.nothing", "billing.invoice.refund"));
        }
    }
    assert_eq!(got, expected);
    assert!(RAN.lock().unwrap().is_empty(), "nothing ran");
}

#[tokio::test]
async fn a_search_surfaces_what_it_returns_the_run_logs_it_and_the_tool_runs_after() {
    let _turn = ONE_AT_A_TIME.lock().await;
    RAN.lock().unwrap().clear();
    let mut run = Run::new(Executor::new(view().with_tool_search().unwrap()).unwrap());
    let found =
        run.process_batch(vec![call("s1", SEARCH_TOOL, json!({"query": "refund an invoice", "limit": 1}))]).await;
    let data = found.results[0].data().expect("the search answers").clone();
    assert_eq!(data["tools"].as_array().unwrap().len(), 1, "{data}");
    let hit = &data["tools"][0];
    assert_eq!(hit["name"], "billing-invoice-refund", "the name the model calls (the wire name)");
    assert_eq!(hit["description"], "Refund an invoice, fully or in part.");
    assert_eq!(hit["input_schema"]["properties"]["id"]["description"], "Which one.");

    assert_eq!(run.surfaced().names().collect::<Vec<_>>(), ["billing.invoice.refund"]);
    assert_eq!(names(run.shown()), ["billing.invoice.refund", "incident.lookup", SEARCH_TOOL, "today"]);
    let surfaced: Vec<_> = run
        .log()
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolsSurfaced { tools, via, call_id } => Some((tools.clone(), via.clone(), call_id.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(surfaced, [(vec!["billing.invoice.refund".to_owned()], SEARCH_TOOL.to_owned(), Some("s1".into()))]);

    let paid = run.process_batch(vec![call("c1", "billing.invoice.refund", json!({"id": "I-1"}))]).await;
    assert!(paid.results[0].is_ok(), "{:?}", paid.results[0]);
    // The other deferred tools are still refused.
    let void = run.process_batch(vec![call("c2", "billing.invoice.void", json!({"id": "I-1"}))]).await;
    assert_eq!(void.results[0].code(), Some("unknown_tool"));
    assert_eq!(*RAN.lock().unwrap(), ["billing.invoice.refund"]);

    // The same search again surfaces nothing new, and logs nothing.
    run.process_batch(vec![call("s2", SEARCH_TOOL, json!({"query": "refund an invoice", "limit": 1}))]).await;
    let count = run.log().events().iter().filter(|e| matches!(e.kind, EventKind::ToolsSurfaced { .. })).count();
    assert_eq!(count, 1);
}

#[tokio::test]
async fn a_run_made_again_from_the_log_starts_with_the_same_tools_surfaced() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let executor = Executor::new(view().with_tool_search().unwrap()).unwrap();
    let mut first = Run::builder(executor.clone()).id("run-a").build();
    first.process_batch(vec![call("s1", SEARCH_TOOL, json!({"query": "print a shipping label"}))]).await;
    assert!(first.surfaced().contains("shipping.label.print"));
    // The log, as a sink would have kept it, read back.
    let text = first.log().to_json_lines();
    let events: Vec<keel_tools_core::events::Event> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let restored = surfaced_in(&events);
    assert_eq!(restored.names().collect::<Vec<_>>(), first.surfaced().names().collect::<Vec<_>>());

    let mut again = Run::builder(executor).id("run-a").surfaced(restored.names()).build();
    assert!(again.shown().contains("shipping.label.print"));
    let printed = again.process_batch(vec![call("c1", "shipping.label.print", json!({"id": "P-1"}))]).await;
    assert!(printed.results[0].is_ok(), "{:?}", printed.results[0]);
}

#[tokio::test]
async fn parallel_batches_and_allowed_subsets_are_held_to_the_shown_tools_too() {
    let _turn = ONE_AT_A_TIME.lock().await;
    RAN.lock().unwrap().clear();
    let executor = Executor::new(view().with_tool_search().unwrap()).unwrap();
    let mut run = Run::builder(executor).concurrency(Concurrency::new(4)).decider(go_on).build();
    let batch = run
        .process_batch(vec![
            call("c1", "today", json!({})),
            call("c2", "billing.invoice.void", json!({"id": "I-1"})),
            call("c3", "incident.lookup", json!({"id": "INC-1"})),
        ])
        .await;
    let codes: Vec<_> = batch.results.iter().map(|r| r.code()).collect();
    assert_eq!(codes, [None, Some("unknown_tool"), None]);
    // A turn that allows a deferred tool does not surface it.
    let batch = run
        .process_batch_allowed(
            vec![call("c4", "billing.invoice.void", json!({"id": "I-1"}))],
            &["billing.invoice.void"],
        )
        .await;
    assert_eq!(batch.results[0].code(), Some("unknown_tool"));
    let mut ran = RAN.lock().unwrap().clone();
    ran.sort();
    assert_eq!(ran, ["incident.lookup", "today"]);
}

#[test]
fn views_defer_by_name_or_all_and_the_search_is_added_only_when_something_is_deferred() {
    let plain = ToolView::new(vec![tool("today", "Says which day it is.", false)]);
    assert!(!plain.has_deferred());
    assert_eq!(names(&plain.with_tool_search().unwrap()), ["today"], "nothing deferred: no search");

    let view = view().defer(["today"]).unwrap();
    assert!(view.get("today").unwrap().deferred());
    assert!(!view.get("incident.lookup").unwrap().deferred());
    assert_eq!(names(&view.shown(&Surfaced::new())), ["incident.lookup"]);
    assert_eq!(view.defer(["nope", "today"]).unwrap_err().0, ["nope"]);

    let all = view.with_tool_search().unwrap().defer_all();
    assert_eq!(names(&all.shown(&Surfaced::new())), [SEARCH_TOOL], "the search itself is never deferred");
    let surfaced: Surfaced = ["today"].into_iter().collect();
    assert_eq!(names(&all.shown(&surfaced)), [SEARCH_TOOL, "today"]);

    // A tool of the user's named like keel's search is not replaced.
    let taken = ToolView::new(vec![tool("search_tools", "Searches the web.", false), tool("x", "X.", true)]);
    assert_eq!(taken.with_tool_search().unwrap_err(), DeferralError::NameTaken);
}

#[tokio::test]
async fn the_search_takes_only_valid_arguments_and_bounds_its_results() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let executor = Executor::new(view().with_tool_search().unwrap()).unwrap();
    for bad in [json!({}), json!({"query": ""}), json!({"query": "x", "limit": 11}), json!({"query": "x", "other": 1})]
    {
        let result = executor.call(call("s", SEARCH_TOOL, bad.clone())).await;
        assert_eq!(result.code(), Some("invalid_arguments"), "{bad}: {result:?}");
    }
    let all = executor.call(call("s", SEARCH_TOOL, json!({"query": "invoice", "limit": 10}))).await;
    let tools = all.data().unwrap()["tools"].as_array().unwrap().clone();
    let found: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found.contains(&"billing-invoice-refund") && found.contains(&"billing-invoice-void"), "{found:?}");
    // Shown tools are not searched: only deferred ones.
    let none = executor.call(call("s", SEARCH_TOOL, json!({"query": "which day it is"}))).await;
    assert_eq!(none.data().unwrap()["tools"], json!([]));
}

/// A toy embedder: money words point one way, everything else another.
struct Money;

impl keel_tools_core::deferral::Embedder for Money {
    fn embed(&self, text: &str) -> Vec<f32> {
        let text = text.to_lowercase();
        if ["refund", "money", "reimburse"].iter().any(|w| text.contains(w)) { vec![1.0, 0.0] } else { vec![0.0, 1.0] }
    }
}

/// Vectors of a different size each time.
struct Broken(std::sync::atomic::AtomicUsize);

impl keel_tools_core::deferral::Embedder for Broken {
    fn embed(&self, _text: &str) -> Vec<f32> {
        vec![1.0; 1 + self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed)]
    }
}

#[tokio::test]
async fn an_embedder_finds_tools_by_meaning_and_a_broken_one_fails_the_search_not_the_process() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let plain = Executor::new(view().with_tool_search().unwrap()).unwrap();
    let query = json!({"query": "reimburse the customer", "limit": 1});
    let found = plain.call(call("s", SEARCH_TOOL, query.clone())).await;
    assert_eq!(found.data().unwrap()["tools"], json!([]), "no word of the query is in any tool");

    let embedded = Executor::new(view().with_tool_search_embedded(Money).unwrap()).unwrap();
    let found = embedded.call(call("s", SEARCH_TOOL, query.clone())).await;
    assert_eq!(found.data().unwrap()["tools"][0]["name"], "billing-invoice-refund", "{found:?}");

    let broken = Executor::new(view().with_tool_search_embedded(Broken(Default::default())).unwrap()).unwrap();
    let failed = broken.call(call("s", SEARCH_TOOL, query)).await;
    assert_eq!(failed.code(), Some("tool_internal_error"), "{failed:?}");
    assert!(!failed.error().unwrap().message.contains("dimensions"), "nothing internal reaches the model");
}
