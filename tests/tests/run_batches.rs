//! The batch semantics, exactly: steps count executed calls, a terminal decision stops the batch,
//! the rest is reported as not executed, a repeated call id is a terminal error.

use std::sync::Arc;

use examples::cards;
use keel_tools_core::ToolCall;
use keel_tools_core::events::{Decision, EventKind, JsonLinesWriter};
use keel_tools_core::runs::Run;
use serde_json::json;

fn lines(run: &Run) -> Vec<String> {
    run.log().events().iter().map(|e| e.display_line()).collect()
}

#[tokio::test]
async fn seed_004_scenarios() {
    let scenarios = cards::scenarios().await;
    let by_name = |n: &str| scenarios.iter().find(|s| s.name == n).unwrap();

    let two = by_name("two-calls");
    assert_eq!(
        lines(&two.run),
        [
            "event: tool_requested | call_id: call-1 | tool: read_task_cards",
            "event: tool_observation | call_id: call-1 | tool: read_task_cards | execution: performed | outcome: result | decision: continue",
            "event: tool_requested | call_id: call-2 | tool: validate_task_card",
            "event: tool_observation | call_id: call-2 | tool: validate_task_card | execution: performed | outcome: tool error (card_not_found) | decision: needs_input | error: there is no card with that id",
            "event: run_finished | terminal: needs_input | reason: after_observation | steps: 2",
        ]
    );
    assert_eq!(two.run.terminal(), Some(Decision::NeedsInput));
    assert_eq!(two.batches[0].results.len(), 2);
    assert!(two.batches[0].results[0].is_ok(), "the first result survives the second error");

    let stop = by_name("stop-after-decision");
    assert_eq!(
        lines(&stop.run),
        [
            "event: tool_requested | call_id: call-X | tool: delete_everything",
            "event: tool_observation | call_id: call-X | tool: delete_everything | execution: not performed | outcome: tool error (unknown_tool) | decision: error | error: no tool named \"delete_everything\" is available; call one of the tools you were given, by its exact name",
            "event: run_finished | terminal: error | reason: after_observation | steps: 0\nnot executed: call-2 read_task_cards",
        ]
    );
    assert_eq!(stop.run.state().steps(), 0);
    assert_eq!(stop.batches[0].not_executed.len(), 1);
    assert_eq!(stop.batches[0].not_executed[0].call_id, "call-2");

    let missing = by_name("missing-file");
    let decisions: Vec<Decision> = missing
        .run
        .log()
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolObservation { decision, executed, code, .. } => {
                assert!(*executed);
                assert_eq!(code.as_deref(), Some("cards_unavailable"));
                Some(*decision)
            }
            _ => None,
        })
        .collect();
    assert_eq!(decisions, [Decision::Continue, Decision::Error]);
    assert_eq!(missing.run.state().steps(), 2);
    assert_eq!(missing.run.terminal(), Some(Decision::Error));
}

#[tokio::test]
async fn a_repeated_call_id_is_a_terminal_error_and_nothing_after_it_runs() {
    let mut run = Run::new(cards::executor(cards::store(true)));
    let b = run
        .process_batch(vec![
            ToolCall::new("call-1", "read_task_cards", json!({})),
            ToolCall::new("call-1", "read_task_cards", json!({})),
            ToolCall::new("call-3", "read_task_cards", json!({})),
        ])
        .await;
    assert_eq!(b.decision, Decision::Error);
    assert_eq!(b.results.len(), 1);
    assert_eq!(b.not_executed.iter().map(|n| n.call_id.as_str()).collect::<Vec<_>>(), ["call-3"]);
    assert_eq!(run.state().steps(), 1);
    assert!(
        run.log()
            .events()
            .iter()
            .any(|e| matches!(&e.kind, EventKind::ToolRejected { code, .. } if code == "duplicate_call_id"))
    );

    // A finished run executes nothing more.
    let after = run.process_batch(vec![ToolCall::new("call-9", "read_task_cards", json!({}))]).await;
    assert!(after.results.is_empty());
    assert_eq!(after.not_executed.len(), 1);
}

/// A call's events name it with the strings of its request, shared, and a registered tool's name is the
/// executor's one string for every call of it; an unknown name too long to echo whole is logged whole when
/// requested and as the result gives it (cut) when observed.
#[tokio::test]
async fn a_calls_events_share_its_strings_and_a_long_unknown_name_is_observed_cut() {
    let long = "x".repeat(4096);
    let mut run = Run::new(cards::executor(cards::store(true)));
    let b = run
        .process_batch(vec![
            ToolCall::new("call-1", "read_task_cards", json!({})),
            ToolCall::new("call-2", "read_task_cards", json!({})),
            ToolCall::new("call-3", long.as_str(), json!({})),
        ])
        .await;
    assert_eq!(b.results.len(), 3);
    let events = run.log().events();
    let (
        EventKind::ToolRequested { call_id: id_a, tool_name: name_a },
        EventKind::ToolObservation { call_id: id_b, tool_name: name_b, .. },
    ) = (&events[0].kind, &events[1].kind)
    else {
        panic!("{events:?}")
    };
    assert_eq!((&**id_a, &**name_a), ("call-1", "read_task_cards"));
    assert!(Arc::ptr_eq(id_a, id_b) && Arc::ptr_eq(name_a, name_b), "one copy of each string per call");
    let EventKind::ToolRequested { call_id, tool_name: again } = &events[2].kind else { panic!("{events:?}") };
    assert_eq!(&**call_id, "call-2");
    assert!(Arc::ptr_eq(name_a, again), "the tool's name is not copied per call");

    let (
        EventKind::ToolRequested { tool_name: requested, .. },
        EventKind::ToolObservation { tool_name: observed, code, .. },
    ) = (&events[4].kind, &events[5].kind)
    else {
        panic!("{events:?}")
    };
    assert_eq!(**requested, *long);
    assert_eq!(code.as_deref(), Some("unknown_tool"));
    assert_eq!(**observed, *b.results[2].tool_name);
    assert!(observed.len() < long.len(), "the observed name is cut: {} bytes", observed.len());
}

#[tokio::test]
async fn steps_count_executed_calls_only_and_max_steps_stops_the_run() {
    let mut run = Run::builder(cards::executor(cards::store(true)))
        .stop_policy(keel_tools_core::runs::StopPolicy { max_steps: 2, max_retries: 1 })
        .build();
    let b = run
        .process_batch(vec![
            ToolCall::new("a", "read_task_cards", json!({"unexpected": 1})), // rejected: not a step
            ToolCall::new("b", "read_task_cards", json!({})),
            ToolCall::new("c", "build_status_report", json!({})),
            ToolCall::new("d", "read_task_cards", json!({})),
        ])
        .await;
    assert_eq!(run.state().steps(), 2);
    assert_eq!(b.decision, Decision::Error, "the step budget is exhausted after c");
    assert_eq!(b.not_executed.iter().map(|n| n.call_id.as_str()).collect::<Vec<_>>(), ["d"]);
}

#[tokio::test]
async fn events_stream_to_a_json_lines_sink() {
    let sink = Arc::new(JsonLinesWriter::new(Vec::new()));
    let mut run = Run::builder(cards::executor(cards::store(true))).id("jsonl").sink(sink.clone()).build();
    run.process_batch(vec![ToolCall::new("call-1", "read_task_cards", json!({}))]).await;
    run.finish(Decision::Done, "model_finished");
    drop(run);
    let bytes = Arc::try_unwrap(sink).ok().unwrap().into_inner();
    let text = String::from_utf8(bytes).unwrap();
    let events: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["tool_requested", "tool_observation", "run_finished"]);
    assert!(events.iter().all(|e| e["run_id"] == "jsonl"));
    assert_eq!(events[1]["call_id"], "call-1");
    assert_eq!(events[2]["terminal"], "done");
    assert_eq!(events.iter().map(|e| e["seq"].as_u64().unwrap()).collect::<Vec<_>>(), [0, 1, 2]);
}
