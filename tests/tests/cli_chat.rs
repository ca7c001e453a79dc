//! `keel chat` over HTTP against the local stub: the request options on the wire, `--approve` resuming a call that
//! waits for an approval, the answer alone and whole on stdout, the calls as lines on stderr (or the JSON log), and
//! a transcript that `--replay` plays back.

use std::sync::Mutex;

use keel_tools_agent::stub::{OPENAI_CHAT, StubResponse, StubServer};
use keel_tools_core::{ToolError, tool};
use serde_json::{Value, json};

/// What the ticket tool closed, in order.
static CLOSED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Close a ticket.
#[tool(name = "chat.close_ticket", effect = "write", version = "1.0")]
async fn close_ticket(ticket: String) -> Result<String, ToolError> {
    CLOSED.lock().unwrap().push(ticket.clone());
    Ok(format!("closed {ticket}"))
}

fn reply_with_call(ticket: &str) -> Value {
    let arguments = json!({"ticket": ticket}).to_string();
    json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "chat-close_ticket", "arguments": arguments}}]}}]})
}

/// How many times the tool closed `ticket` (the tests share the tool, each with its own ticket).
fn closed(ticket: &str) -> usize {
    CLOSED.lock().unwrap().iter().filter(|t| *t == ticket).count()
}

fn reply_with_text() -> Value {
    json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Closed T-7."}}]})
}

fn keel(args: &[&str]) -> (u8, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = keel_tools_cli::Cli::new().run(std::iter::once("keel").chain(args.iter().copied()), &mut out, &mut err);
    (code, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
}

#[test]
fn chat_approves_by_name_streams_the_events_and_writes_a_replayable_transcript() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let stub = runtime.block_on(StubServer::start()).unwrap();
    stub.respond(OPENAI_CHAT, StubResponse::json(&reply_with_call("T-7")));
    stub.respond(OPENAI_CHAT, StubResponse::json(&reply_with_text()));
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cli-chat-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let transcript = dir.join("transcript.jsonl");
    let url = format!("{}/v1", stub.url());

    let (code, out, err) = keel(&[
        "chat",
        "--events",
        "json",
        "--url",
        &url,
        "--model",
        "m",
        "--tool-choice",
        "chat.close_ticket",
        "--then-tool-choice",
        "none",
        "--temperature",
        "0",
        "--seed",
        "7",
        "--approve",
        "chat.close_ticket",
        "--transcript",
        transcript.to_str().unwrap(),
        "Close ticket T-7.",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(closed("T-7"), 1, "approved by --approve, run once");
    assert_eq!(out, "Closed T-7.\n", "the answer alone on stdout");

    // The options went out; the forced choice by its wire name, then none.
    let requests = stub.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].body["tool_choice"], json!({"type": "function", "function": {"name": "chat-close_ticket"}}));
    assert_eq!(requests[1].body["tool_choice"], "none");
    assert_eq!((requests[0].body["temperature"].clone(), requests[0].body["seed"].clone()), (json!(0.0), json!(7)));
    // The second request answers the call with the approved run's result, not with the approval request.
    let tool_message = &requests[1].body["messages"][2];
    assert_eq!(tool_message["tool_call_id"], "call_1");
    assert_eq!(tool_message["content"], "\"closed T-7\"", "the result as JSON text");

    // The event log, one JSON line per event as it happened: the wait, then the approved call.
    let events: Vec<Value> = err.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let kinds: Vec<String> = events
        .iter()
        .map(|e| {
            format!("{} {}", e["event"].as_str().unwrap(), e["code"].as_str().or(e["reason"].as_str()).unwrap_or(""))
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "waiting ",
            "model_response ",
            "tool_requested ",
            "tool_observation approval_required",
            "run_finished after_observation",
            "tool_requested ",
            "tool_observation ",
            "waiting ",
            "model_response ",
            "run_finished model_finished"
        ],
        "{err}"
    );

    // The transcript replays: the same call comes back, and the run ends the same way.
    let (code, out, err) = keel(&[
        "chat",
        "--replay",
        transcript.to_str().unwrap(),
        "--approve",
        "chat.close_ticket",
        "Close ticket T-7.",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out, "Closed T-7.\n", "{out}");
    assert!(err.starts_with("replaying "), "a replay says so: {err}");
    assert!(
        err.contains(
            "→ chat.close_ticket {\"ticket\":\"T-7\"}\n← chat.close_ticket: needs an approval\n  \
             approved by --approve chat.close_ticket\n← chat.close_ticket: ok \"closed T-7\"\n"
        ),
        "{err}"
    );
    assert_eq!(closed("T-7"), 2, "the replayed call ran once more");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn without_an_approval_off_a_terminal_the_run_waits_and_nothing_runs() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let stub = runtime.block_on(StubServer::start()).unwrap();
    stub.respond(OPENAI_CHAT, StubResponse::json(&reply_with_call("T-8")));
    let url = format!("{}/v1", stub.url());
    let (code, out, err) = keel(&["chat", "--url", &url, "--model", "m", "Close ticket T-8."]);
    assert_eq!(code, 1, "{out}{err}");
    assert_eq!(out, "", "no answer");
    assert_eq!(
        err,
        "→ chat.close_ticket {\"ticket\":\"T-8\"}\n← chat.close_ticket: needs an approval\n\
         keel: a call needs an approval: run again with --approve NAME, or on a terminal to be asked\n"
    );
    assert_eq!(closed("T-8"), 0);
}

/// A long answer of many lines, streamed or not: on stdout once, whole, as the model wrote it; nothing else there.
#[test]
fn a_long_answer_is_printed_once_and_whole() {
    let answer: String = (1..=12).map(|i| format!("Line {i:02} of the answer, which goes on for a while.\n")).collect();
    assert!(answer.len() >= 600 && answer.lines().count() == 12);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let stub = runtime.block_on(StubServer::start()).unwrap();
    let whole = json!({"choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": answer}}]});
    stub.respond(OPENAI_CHAT, StubResponse::json(&whole));
    // Streamed in pieces of 37 characters, split wherever they fall (mid-word, mid-line).
    let chars: Vec<char> = answer.chars().collect();
    let mut sse = String::new();
    for piece in chars.chunks(37) {
        let delta = json!({"choices": [{"index": 0, "delta": {"content": piece.iter().collect::<String>()}}]});
        sse.push_str(&format!("data: {delta}\n\n"));
    }
    sse.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    stub.respond(OPENAI_CHAT, StubResponse::stream_text(sse, false));
    let url = format!("{}/v1", stub.url());
    for (how, extra) in [("whole", &[][..]), ("streamed", &["--stream"][..])] {
        let mut args = vec!["chat", "--url", &url, "--model", "m"];
        args.extend_from_slice(extra);
        args.push("Say a lot.");
        let (code, out, err) = keel(&args);
        assert_eq!(code, 0, "{how}: {out}{err}");
        assert_eq!(out, answer, "{how}: the answer once and whole");
        assert!(!err.contains("Line 01"), "{how}: not on stderr: {err}");
    }
}

#[test]
fn usage_errors_say_what_is_missing() {
    let (code, _, err) = keel(&["chat", "hello"]);
    assert_eq!(code, 2);
    assert!(err.contains("--url") && err.contains("--model"), "{err}");
}

/// `--api-key-env` names the variable that holds the key: the key goes out as `Authorization: Bearer` and appears
/// in nothing the command prints. The variable is one that cargo sets for every test process (`CARGO_PKG_NAME`),
/// so the test sets none: setting a variable would race the other tests' threads.
#[test]
fn the_api_key_comes_from_the_named_variable_and_is_never_printed() {
    let key = std::env::var("CARGO_PKG_NAME").expect("cargo sets CARGO_PKG_NAME when it runs a test");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let stub = runtime.block_on(StubServer::start()).unwrap();
    stub.respond(OPENAI_CHAT, StubResponse::json(&reply_with_text()));
    let url = format!("{}/v1", stub.url());
    let args = ["chat", "--url", &url, "--model", "m", "--api-key-env", "CARGO_PKG_NAME", "Hello."];
    let (code, out, err) = keel(&args);
    assert_eq!(code, 0, "{out}{err}");
    let requests = stub.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].authorization.as_deref(), Some(format!("Bearer {key}").as_str()));
    assert!(!out.contains("Bearer") && !err.contains("Bearer"), "{out}{err}");

    // A variable that is not set stops the command before any request, naming the variable.
    let (code, _, err) =
        keel(&["chat", "--url", &url, "--model", "m", "--api-key-env", "KEEL_SURELY_UNSET_9F3A", "Hi."]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--api-key-env KEEL_SURELY_UNSET_9F3A: the variable is not set"), "{err}");
    // A key over plain HTTP to a host that is not loopback is refused, and nothing is sent.
    let (code, _, err) =
        keel(&["chat", "--url", "http://192.0.2.1:8080/v1", "--model", "m", "--api-key-env", "CARGO_PKG_NAME", "Hi."]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("an API key is sent only over https://"), "{err}");
    assert_eq!(stub.requests().len(), 1);
}
