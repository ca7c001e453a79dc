//! The MCP fuzz target's seed corpus (`fuzz/corpus/mcp/seed-*`), replayed through its own entry point
//! (`keel_fuzz_harness::check_mcp`), and the inputs that pin what the checker itself must catch.

use std::path::Path;

use keel_fuzz_harness::{McpSession, check_mcp};
use serde_json::Value;

fn seeds() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/mcp");
    let mut seeds: Vec<_> = std::fs::read_dir(&dir)
        .expect("the seed corpus")
        .map(|e| e.expect("a corpus entry").path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("seed-")))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).expect("a seed")))
        .collect();
    seeds.sort();
    seeds
}

fn response<'a>(session: &'a McpSession, id: &Value) -> Option<&'a Value> {
    session.messages.iter().find(|m| m.get("id") == Some(id) && m.get("method").is_none())
}

#[test]
fn the_mcp_seed_corpus_replays_clean() {
    let seeds = seeds();
    assert!(seeds.len() >= 10, "seeds: {}", seeds.len());
    let (mut ok_calls, mut failed_calls, mut refused_starts) = (0, 0, 0);
    for (name, data) in &seeds {
        let session = check_mcp(data).unwrap_or_else(|| panic!("{name} is empty"));
        for message in &session.messages {
            if message.pointer("/result/isError") == Some(&Value::Bool(false)) {
                ok_calls += 1;
            }
            if message.pointer("/result/isError") == Some(&Value::Bool(true)) {
                failed_calls += 1;
            }
        }
        if session.serve_error.is_some() {
            refused_starts += 1;
        }
    }
    assert!(ok_calls > 0, "no seed runs a tool");
    assert!(failed_calls > 0, "no seed's tool call fails");
    assert!(refused_starts > 0, "every seed starts a session");
}

#[test]
fn a_tool_call_of_the_input_is_answered_by_that_tool() {
    let data = [&[0u8][..], br#"{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"list_incidents","arguments":{"limit":2}}}"#].concat();
    let session = check_mcp(&data).expect("a session");
    let answer = response(&session, &Value::from(41)).expect("the call is answered");
    assert_eq!(answer.pointer("/result/isError"), Some(&Value::Bool(false)), "{answer}");
    let text = answer.pointer("/result/content/0/text").and_then(Value::as_str).expect("a text block");
    assert_eq!(serde_json::from_str::<Value>(text).ok(), Some(serde_json::json!(["00", "01"])), "{answer}");
}

#[test]
fn a_session_without_a_handshake_ends_with_an_error_and_answers_nothing_else() {
    let data = [&[1u8][..], br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#].concat();
    let session = check_mcp(&data).expect("a session");
    assert!(session.serve_error.is_some(), "{session:?}");
}

#[test]
fn a_line_over_the_servers_limit_is_dropped_and_the_session_goes_on() {
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{{"name":"fx.echo","arguments":{{"text":"{}"}}}}}}"#,
        "x".repeat(2 << 20)
    );
    let data = [&[0u8][..], big.as_bytes(), b"\n", br#"{"jsonrpc":"2.0","id":43,"method":"ping"}"#].concat();
    let session = check_mcp(&data).expect("a session");
    assert!(response(&session, &Value::from(42)).is_none(), "the oversized call was answered: {session:?}");
    assert!(response(&session, &Value::from(43)).is_some(), "the next line was not answered");
}

#[test]
fn a_second_initialize_is_refused_and_changes_nothing() {
    // Of a newer revision than the session's: answered, it would have moved the session to 2026-07-28 mid-way, where
    // `ping` is no method (the MCP target's second finding). `check_mcp` asserts that `ping` is still answered.
    let init = br#"{"jsonrpc":"2.0","id":12,"method":"initialize","params":{"protocolVersion":"4050-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#;
    for revision in 0u8..5 {
        let data = [&[revision << 1][..], init].concat();
        let session = check_mcp(&data).expect("a session");
        let answer = response(&session, &Value::from(12)).expect("answered");
        assert_eq!(answer.pointer("/error/code"), Some(&Value::from(-32600)), "{answer}");
    }
}
