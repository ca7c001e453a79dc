//! The repair signal: a handler answers "call again differently, because ...", the model reads the reason in
//! its reply, and a run counts such repairs per tool, `invalid_arguments` included, against its limit.

use keel_tools_core::events::Decision;
use keel_tools_core::runs::{Run, StopPolicy};
use keel_tools_core::{Executor, Provider, Registry, ToolCall, ToolError, ToolResult, tool};
use serde_json::{Value, json};

/// Books the meeting room for a day (ISO date); days before 2026-01-01 are past.
#[tool(effect = "read", version = "1.0")]
fn book_room(day: String) -> Result<String, ToolError> {
    if day.as_str() < "2026-01-01" {
        return Err(ToolError::retry(format!("{day} is in the past; give a day from 2026-01-01 on")));
    }
    Ok(format!("booked for {day}"))
}

/// Another tool, whose repairs are counted apart.
#[tool(effect = "read", version = "1.0")]
fn repeat_word(word: String) -> String {
    word
}

fn run(max_retries: u32) -> Run {
    let view = Registry::from_inventory().unwrap().view().names(["book_room", "repeat_word"]).build().unwrap();
    Run::builder(Executor::new(view).unwrap()).stop_policy(StopPolicy { max_steps: 20, max_retries }).build()
}

fn book(id: &str, day: Value) -> ToolCall {
    ToolCall::new(id, "book_room", json!({"day": day}))
}

#[tokio::test]
async fn the_model_reads_the_reason_and_a_repaired_call_succeeds() {
    let mut run = run(1);
    let first = run.process_batch(vec![book("c1", json!("2025-03-01"))]).await;
    let r: &ToolResult = &first.results[0];
    assert_eq!((r.code(), r.executed), (Some("retry"), true), "{r:?}");
    assert_eq!(r.error().unwrap().message, "2025-03-01 is in the past; give a day from 2026-01-01 on");
    assert_eq!(first.decision, Decision::Continue, "one repair is within the limit");
    // What the model reads, in its own format.
    let reply = run.executor().codec(Provider::OpenAiChat).reply(r);
    let content: Value = serde_json::from_str(reply["content"].as_str().unwrap()).unwrap();
    assert_eq!(content["error"]["code"], "retry");
    assert!(content["error"]["message"].as_str().unwrap().contains("give a day from 2026-01-01 on"));
    assert_eq!(run.state().retries("book_room"), 1);

    let second = run.process_batch(vec![book("c2", json!("2026-05-04"))]).await;
    assert_eq!(second.results[0].data(), Some(&json!("booked for 2026-05-04")));
    assert_eq!(second.decision, Decision::Continue);
    assert_eq!((run.state().retries("book_room"), run.state().failures("book_room")), (1, 1));
}

#[tokio::test]
async fn invalid_arguments_count_as_repairs_of_the_same_tool_up_to_the_limit() {
    let mut run = run(1);
    let first = run.process_batch(vec![book("c1", json!(20260504))]).await;
    assert_eq!(first.results[0].code(), Some("invalid_arguments"));
    assert_eq!(first.decision, Decision::Continue);
    // Another tool's repairs do not count against this one.
    let other = run.process_batch(vec![ToolCall::new("e1", "repeat_word", json!({"word": 7}))]).await;
    assert_eq!((other.results[0].code(), other.decision), (Some("invalid_arguments"), Decision::Continue));
    assert_eq!((run.state().retries("book_room"), run.state().retries("repeat_word")), (1, 1));
    // A second repair of the same tool is past `max_retries = 1`: the run stops.
    let second = run.process_batch(vec![book("c2", json!("2025-12-31"))]).await;
    assert_eq!(second.results[0].code(), Some("retry"));
    assert_eq!(second.decision, Decision::Error);
    assert_eq!(run.state().retries("book_room"), 2);
}

#[tokio::test]
async fn the_limit_is_the_runs_own() {
    let mut run = run(3);
    for (i, day) in ["2020-01-01", "2021-01-01", "2022-01-01"].into_iter().enumerate() {
        let out = run.process_batch(vec![book(&format!("c{i}"), json!(day))]).await;
        assert_eq!((out.results[0].code(), out.decision), (Some("retry"), Decision::Continue), "repair {i}");
    }
    let out = run.process_batch(vec![book("c9", json!("2023-01-01"))]).await;
    assert_eq!(out.decision, Decision::Error, "the fourth repair is past max_retries = 3");
}

#[test]
fn retry_is_an_executor_code_no_tool_can_take() {
    assert!(keel_tools_core::results::RESERVED_CODES.contains(&"retry"));
    assert!(keel_tools_core::results::ToolCode::parse("retry".to_owned()).is_err());
}
