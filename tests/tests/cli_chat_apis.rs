//! `keel chat --api ...` against the local stub, once per API: each stub answers with that API's response bodies
//! as its reference documents them (a tool call, then text), and the run must call the tool once, send the result
//! back in that API's reply format, log each model turn with its tokens, and end `done`. Then the retry policy: a
//! 429 with `Retry-After`, a 529 `overloaded_error` and a 503 are retried with the waits they ask for, and no tool
//! runs twice.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use keel_tools_agent::stub::{
    ANTHROPIC_MESSAGES, OLLAMA_CHAT, OPENAI_CHAT, OPENAI_RESPONSES, RecordedRequest, StubResponse, StubServer,
    gemini_generate, gemini_stream,
};
use keel_tools_core::{ToolError, tool};
use serde_json::{Value, json};

/// The tickets looked up, in order.
static LOOKED_UP: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Look up a ticket.
#[tool(name = "apis.lookup_ticket", effect = "read", version = "1.0")]
async fn lookup_ticket(ticket: String) -> Result<String, ToolError> {
    LOOKED_UP.lock().unwrap().push(ticket.clone());
    Ok(format!("{ticket} is open"))
}

fn looked_up(ticket: &str) -> usize {
    LOOKED_UP.lock().unwrap().iter().filter(|t| *t == ticket).count()
}

/// Runs `keel` with `args`; a `chat` that names no `--events` logs JSON Lines on stderr, which these tests read.
fn keel(args: &[&str]) -> (u8, String, String) {
    let mut argv = vec!["keel"];
    argv.extend_from_slice(args);
    if args.first() == Some(&"chat") && !args.iter().any(|a| *a == "--events" || *a == "--quiet") {
        argv.splice(2..2, ["--events", "json"]);
    }
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = keel_tools_cli::Cli::new().run(argv, &mut out, &mut err);
    (code, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
}

/// The run's end as the JSON log says it: terminal decision, reason, steps; and the model turns it took.
fn finished(err: &str) -> (String, String, u64, usize) {
    let events = events(err);
    let last = events.iter().rev().find(|e| e["event"] == "run_finished").cloned().unwrap_or_default();
    let turns = events.iter().filter(|e| e["event"] == "model_response").count();
    let text = |k: &str| last[k].as_str().unwrap_or_default().to_owned();
    (text("terminal"), text("reason"), last["steps"].as_u64().unwrap_or(0), turns)
}

/// Done after two turns and one call, as the log says.
fn done_in_two_turns(err: &str) -> bool {
    finished(err) == ("done".to_owned(), "model_finished".to_owned(), 1, 2)
}

/// The events `keel chat` printed on stderr, one JSON object per line.
fn events(err: &str) -> Vec<Value> {
    err.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|e| e.get("event").is_some()).collect()
}

/// One API's case: the `--api` value, the base URL's suffix, the path served, the two responses, and what the
/// second request must hold.
struct Case {
    api: &'static str,
    base: &'static str,
    path: String,
    call: Value,
    text: Value,
    /// Checks both requests; `ticket` is the case's own.
    check: fn(&[RecordedRequest], &str),
    /// The first turn's tokens as the events must report them: input, output, cached.
    usage: (u64, u64, Option<u64>),
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            api: "openai",
            base: "/v1",
            path: OPENAI_CHAT.into(),
            call: json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1741569952, "model": "m",
                "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": null,
                    "message": {"role": "assistant", "content": null, "refusal": null, "tool_calls": [{
                        "id": "call_abc", "type": "function",
                        "function": {"name": "apis-lookup_ticket", "arguments": "{\"ticket\":\"T-31\"}"}}]}}],
                "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99,
                          "prompt_tokens_details": {"cached_tokens": 64}}}),
            text: json!({"id": "chatcmpl-2", "object": "chat.completion", "model": "m", "choices": [{"index": 0,
                "finish_reason": "stop", "message": {"role": "assistant", "content": "T-31 is open."}}],
                "usage": {"prompt_tokens": 120, "completion_tokens": 6, "total_tokens": 126}}),
            check: |r, _| {
                assert_eq!(r[0].body["tools"][0]["function"]["name"], "apis-lookup_ticket");
                assert_eq!(r[0].authorization, None, "no key over http:// unless named");
                let reply = &r[1].body["messages"][3];
                assert_eq!((reply["role"].as_str(), reply["tool_call_id"].as_str()), (Some("tool"), Some("call_abc")));
            },
            usage: (82, 17, Some(64)),
        },
        Case {
            api: "openai-responses",
            base: "/v1",
            path: OPENAI_RESPONSES.into(),
            call: json!({"id": "resp_1", "object": "response", "created_at": 1741476542, "status": "completed",
                "error": null, "incomplete_details": null, "model": "m", "output": [{"type": "function_call",
                    "id": "fc_1", "call_id": "call_r1", "name": "apis-lookup_ticket",
                    "arguments": "{\"ticket\":\"T-32\"}", "status": "completed"}],
                "usage": {"input_tokens": 291, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 23,
                          "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 314}}),
            text: json!({"id": "resp_2", "object": "response", "status": "completed", "error": null, "model": "m",
                "output": [{"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                    "content": [{"type": "output_text", "text": "T-32 is open.", "annotations": []}]}],
                "usage": {"input_tokens": 330, "output_tokens": 7, "total_tokens": 337}}),
            check: |r, _| {
                let tool = &r[0].body["tools"][0];
                assert_eq!(
                    (tool["type"].as_str(), tool["name"].as_str()),
                    (Some("function"), Some("apis-lookup_ticket"))
                );
                let input = r[1].body["input"].as_array().unwrap();
                assert_eq!(input[0], json!({"role": "system", "content": "Be brief."}));
                assert_eq!(input[1], json!({"role": "user", "content": "Look up T-32."}));
                assert_eq!(input[2]["id"], "fc_1", "the output item echoed");
                assert_eq!(input[3]["type"], "function_call_output");
                assert_eq!(input[3]["call_id"], "call_r1");
            },
            usage: (291, 23, Some(0)),
        },
        Case {
            api: "anthropic",
            base: "",
            path: ANTHROPIC_MESSAGES.into(),
            call: json!({"id": "msg_01", "type": "message", "role": "assistant", "model": "m", "content": [
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "toolu_01", "name": "apis-lookup_ticket", "input": {"ticket": "T-33"}}],
                "stop_reason": "tool_use", "stop_sequence": null,
                "usage": {"input_tokens": 400, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 12,
                          "output_tokens": 57}}),
            text: json!({"id": "msg_02", "type": "message", "role": "assistant", "model": "m",
                "content": [{"type": "text", "text": "T-33 is open."}], "stop_reason": "end_turn",
                "stop_sequence": null, "usage": {"input_tokens": 480, "output_tokens": 8}}),
            check: |r, _| {
                assert_eq!(r[0].header("anthropic-version"), Some("2023-06-01"));
                assert_eq!(r[0].body["system"], "Be brief.");
                assert_eq!(r[0].body["max_tokens"], 4096);
                assert_eq!(r[0].body["tools"][0]["name"], "apis-lookup_ticket");
                assert!(r[0].body["tools"][0]["input_schema"].is_object());
                let messages = r[1].body["messages"].as_array().unwrap();
                assert_eq!(messages.len(), 3, "user, assistant, the user message with the result");
                assert_eq!(messages[2]["content"][0]["type"], "tool_result");
                assert_eq!(messages[2]["content"][0]["tool_use_id"], "toolu_01");
            },
            usage: (412, 57, Some(12)),
        },
        Case {
            api: "gemini",
            base: "/v1beta",
            path: gemini_generate("m"),
            call: json!({"candidates": [{"content": {"role": "model", "parts": [
                    {"functionCall": {"name": "apis-lookup_ticket", "args": {"ticket": "T-34"}}}]},
                "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 120, "candidatesTokenCount": 12, "totalTokenCount": 132},
                "modelVersion": "m", "responseId": "r1"}),
            text: json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "T-34 is open."}]},
                "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 150, "candidatesTokenCount": 5, "totalTokenCount": 155}}),
            check: |r, _| {
                assert_eq!(r[0].body["systemInstruction"], json!({"parts": [{"text": "Be brief."}]}));
                assert_eq!(r[0].body["tools"][0]["functionDeclarations"][0]["name"], "apis-lookup_ticket");
                let contents = r[1].body["contents"].as_array().unwrap();
                assert_eq!(contents[0], json!({"role": "user", "parts": [{"text": "Look up T-34."}]}));
                assert_eq!(contents[1]["role"], "model");
                let response = &contents[2]["parts"][0]["functionResponse"];
                assert_eq!(response["name"], "apis-lookup_ticket");
                assert_eq!(response["response"], json!({"output": "T-34 is open"}));
                assert!(response.get("id").is_none(), "Gemini sent no id, so none goes back");
            },
            usage: (120, 12, None),
        },
        Case {
            api: "ollama",
            base: "",
            path: OLLAMA_CHAT.into(),
            call: json!({"model": "m", "created_at": "2025-10-01T00:00:00Z", "message": {"role": "assistant",
                "content": "", "tool_calls": [{"function": {"name": "apis.lookup_ticket",
                    "arguments": {"ticket": "T-35"}}}]},
                "done": true, "done_reason": "stop", "prompt_eval_count": 50, "eval_count": 10}),
            text: json!({"model": "m", "message": {"role": "assistant", "content": "T-35 is open."}, "done": true,
                "prompt_eval_count": 70, "eval_count": 5}),
            check: |r, _| {
                assert_eq!(r[0].body["stream"], false);
                let reply = &r[1].body["messages"][3];
                assert_eq!(
                    (reply["role"].as_str(), reply["tool_name"].as_str()),
                    (Some("tool"), Some("apis.lookup_ticket"))
                );
            },
            usage: (50, 10, None),
        },
    ]
}

#[test]
fn every_api_runs_a_tool_and_ends_done() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for (i, case) in cases().into_iter().enumerate() {
        let ticket = format!("T-3{}", i + 1);
        let stub = runtime.block_on(StubServer::start()).unwrap();
        stub.respond(&case.path, StubResponse::json(&case.call));
        stub.respond(&case.path, StubResponse::json(&case.text));
        let url = format!("{}{}", stub.url(), case.base);
        let prompt = format!("Look up {ticket}.");
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("apis-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let transcript = dir.join(format!("{}.jsonl", case.api));
        let transcript = transcript.to_str().unwrap();
        let (code, out, err) = keel(&[
            "chat",
            "--api",
            case.api,
            "--url",
            &url,
            "--model",
            "m",
            "--system",
            "Be brief.",
            "--transcript",
            transcript,
            &prompt,
        ]);
        assert_eq!(code, 0, "{}: {out}{err}", case.api);
        assert!(done_in_two_turns(&err), "{}: {err}", case.api);
        // The model's text on stdout, each once: the answer, after what it said with its call (Anthropic's case).
        let said = if case.api == "anthropic" { "Let me look.\n" } else { "" };
        assert_eq!(out, format!("{said}{ticket} is open.\n"), "{}: the model's text alone, whole, on stdout", case.api);
        assert_eq!(looked_up(&ticket), 1, "{}", case.api);
        let requests = stub.requests();
        assert_eq!(requests.len(), 2, "{}", case.api);
        assert!(requests.iter().all(|r| r.path == case.path), "{}", case.api);
        (case.check)(&requests, &ticket);

        let events = events(&err);
        let responses: Vec<&Value> = events.iter().filter(|e| e["event"] == "model_response").collect();
        assert_eq!(responses.len(), 2, "{}: {err}", case.api);
        assert_eq!((responses[0]["turn"].as_u64(), responses[0]["calls"].as_u64()), (Some(1), Some(1)));
        let (input, output, cached) = case.usage;
        let usage = &responses[0]["usage"];
        assert_eq!(
            (usage["input_tokens"].as_u64(), usage["output_tokens"].as_u64(), usage["cached_input_tokens"].as_u64()),
            (Some(input), Some(output), cached),
            "{}: {usage}",
            case.api
        );
        assert!(!events.iter().any(|e| e["event"] == "model_retry"), "{}", case.api);

        // The transcript, in the API's own response format, replays the same run.
        let (code, out, err) = keel(&["chat", "--replay", transcript, &prompt]);
        assert_eq!(code, 0, "{}: {out}{err}", case.api);
        assert!(done_in_two_turns(&err), "{}: {err}", case.api);
        assert_eq!(out, format!("{said}{ticket} is open.\n"), "{}: {out}", case.api);
        assert_eq!(looked_up(&ticket), 2, "{}", case.api);
    }
}

#[test]
fn keys_go_in_each_apis_own_header() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // CARGO_PKG_NAME is set for every test, to the name of this package: the key.
    let key = env!("CARGO_PKG_NAME");
    let bearer = format!("Bearer {key}");
    for (api, base, path, header, value) in [
        ("anthropic", "", ANTHROPIC_MESSAGES.to_owned(), "x-api-key", key),
        ("gemini", "/v1beta", gemini_generate("m"), "x-goog-api-key", key),
        ("openai-responses", "/v1", OPENAI_RESPONSES.to_owned(), "authorization", bearer.as_str()),
    ] {
        let stub = runtime.block_on(StubServer::start()).unwrap();
        stub.respond(&path, StubResponse::raw(401, r#"{"error": {"message": "invalid key"}}"#));
        let url = format!("{}{base}", stub.url());
        let (code, out, err) =
            keel(&["chat", "--api", api, "--url", &url, "--model", "m", "--api-key-env", "CARGO_PKG_NAME", "Hi."]);
        assert_eq!(code, 1, "{api}: {out}{err}");
        assert!(err.contains("answered 401: invalid key"), "{api}: {err}");
        assert!(!err.contains(key) && !out.contains(key), "{api}: the key is not printed");
        let requests = stub.requests();
        assert_eq!(requests.len(), 1, "{api}: a 401 is not retried");
        assert_eq!(requests[0].header(header), Some(value), "{api}");
    }
}

#[test]
fn a_seed_is_refused_where_the_api_has_none() {
    for api in ["anthropic", "openai-responses"] {
        let (code, _, err) =
            keel(&["chat", "--api", api, "--url", "http://127.0.0.1:9", "--model", "m", "--seed", "1", "Hi."]);
        assert_eq!(code, 2, "{api}: {err}");
        assert!(err.contains("takes no seed"), "{api}: {err}");
    }
}

/// A 429 with `Retry-After: 1`, then Anthropic's 529 `overloaded_error`, then the call; the tool runs; then a 503
/// with `retry-after-ms`, then the text. Each retry waits what was asked (the 529 names nothing: the second
/// backoff, 1 s less up to a quarter), the events say why, and the tool ran once.
#[test]
fn retries_wait_as_asked_and_never_run_a_tool_twice() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let stub = runtime.block_on(StubServer::start()).unwrap();
    let rate_limited = json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}});
    let overloaded = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    let path = ANTHROPIC_MESSAGES;
    stub.respond(path, StubResponse::raw(429, rate_limited.to_string()).header("retry-after", "1"));
    stub.respond(path, StubResponse::raw(529, overloaded.to_string()));
    let call = json!({"id": "msg_1", "type": "message", "role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_r", "name": "apis-lookup_ticket", "input": {"ticket": "T-40"}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}});
    stub.respond(path, StubResponse::json(&call));
    stub.respond(path, StubResponse::raw(503, "upstream unavailable").header("retry-after-ms", "200"));
    let text = json!({"id": "msg_2", "type": "message", "role": "assistant",
        "content": [{"type": "text", "text": "T-40 is open."}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 20, "output_tokens": 4}});
    stub.respond(path, StubResponse::json(&text));

    let started = Instant::now();
    let (code, out, err) = keel(&["chat", "--api", "anthropic", "--url", &stub.url(), "--model", "m", "Look up T-40."]);
    let elapsed = started.elapsed();
    assert_eq!(code, 0, "{out}{err}");
    assert!(done_in_two_turns(&err), "{err}");
    assert_eq!(out, "T-40 is open.\n", "{out}");
    assert_eq!(looked_up("T-40"), 1, "the call ran once, whatever was retried");
    assert_eq!(stub.requests().len(), 5);
    assert_eq!(stub.remaining(path), 0);

    let retries: Vec<Value> = events(&err).into_iter().filter(|e| e["event"] == "model_retry").collect();
    let summary: Vec<(u64, u64, &str)> = retries
        .iter()
        .map(|e| (e["turn"].as_u64().unwrap(), e["attempt"].as_u64().unwrap(), e["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(summary, [(1, 1, "status 429"), (1, 2, "status 529"), (2, 1, "status 503")], "{err}");
    let waits: Vec<u64> = retries.iter().map(|e| e["wait_ms"].as_u64().unwrap()).collect();
    assert_eq!(waits[0], 1000, "Retry-After: 1");
    assert!((750..=1000).contains(&waits[1]), "the second backoff, 1 s less up to a quarter: {waits:?}");
    assert_eq!(waits[2], 200, "retry-after-ms: 200");
    assert!(retries[1]["error"].as_str().unwrap().contains("529: Overloaded"), "{}", retries[1]);
    assert!(elapsed >= Duration::from_millis(waits.iter().sum::<u64>()), "{elapsed:?} {waits:?}");
}

#[test]
fn with_retries_off_the_first_failure_ends_the_run() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let stub = runtime.block_on(StubServer::start()).unwrap();
    stub.respond(OPENAI_CHAT, StubResponse::raw(429, r#"{"error": {"message": "slow down"}}"#));
    let url = format!("{}/v1", stub.url());
    let (code, _, err) = keel(&["chat", "--url", &url, "--model", "m", "--retries", "0", "Hi."]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("answered 429: slow down"), "{err}");
    assert_eq!(stub.requests().len(), 1);
    assert!(!events(&err).iter().any(|e| e["event"] == "model_retry"), "{err}");
}

/// One API's recorded streams (tests/fixtures/streams, written after each API's reference): a tool call, then text.
struct Streamed {
    api: &'static str,
    base: &'static str,
    path: String,
    call: &'static str,
    text: &'static str,
    json_lines: bool,
    ticket: &'static str,
    /// How the request asks for a stream.
    asks: fn(&RecordedRequest) -> bool,
}

fn streamed() -> Vec<Streamed> {
    let in_body = |r: &RecordedRequest| r.body["stream"] == true;
    vec![
        Streamed {
            api: "openai",
            base: "/v1",
            path: OPENAI_CHAT.into(),
            call: include_str!("../fixtures/streams/openai-chat-call.sse"),
            text: include_str!("../fixtures/streams/openai-chat-text.sse"),
            json_lines: false,
            ticket: "T-51",
            asks: |r| r.body["stream"] == true && r.body["stream_options"]["include_usage"] == true,
        },
        Streamed {
            api: "openai-responses",
            base: "/v1",
            path: OPENAI_RESPONSES.into(),
            call: include_str!("../fixtures/streams/openai-responses-call.sse"),
            text: include_str!("../fixtures/streams/openai-responses-text.sse"),
            json_lines: false,
            ticket: "T-52",
            asks: in_body,
        },
        Streamed {
            api: "anthropic",
            base: "",
            path: ANTHROPIC_MESSAGES.into(),
            call: include_str!("../fixtures/streams/anthropic-call.sse"),
            text: include_str!("../fixtures/streams/anthropic-text.sse"),
            json_lines: false,
            ticket: "T-53",
            asks: in_body,
        },
        Streamed {
            api: "gemini",
            base: "/v1beta",
            path: gemini_stream("m"),
            call: include_str!("../fixtures/streams/gemini-call.sse"),
            text: include_str!("../fixtures/streams/gemini-text.sse"),
            json_lines: false,
            ticket: "T-54",
            asks: |r| r.query.as_deref() == Some("alt=sse"),
        },
        Streamed {
            api: "ollama",
            base: "",
            path: OLLAMA_CHAT.into(),
            call: include_str!("../fixtures/streams/ollama-call.ndjson"),
            text: include_str!("../fixtures/streams/ollama-text.ndjson"),
            json_lines: true,
            ticket: "T-55",
            asks: in_body,
        },
    ]
}

#[test]
fn every_api_streams_a_tool_call_and_ends_done() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for case in streamed() {
        let stub = runtime.block_on(StubServer::start()).unwrap();
        stub.respond(&case.path, StubResponse::stream_text(case.call, case.json_lines));
        stub.respond(&case.path, StubResponse::stream_text(case.text, case.json_lines));
        let url = format!("{}{}", stub.url(), case.base);
        let prompt = format!("Look up {}.", case.ticket);
        let (code, out, err) = keel(&["chat", "--api", case.api, "--url", &url, "--model", "m", "--stream", &prompt]);
        assert_eq!(code, 0, "{}: {out}{err}", case.api);
        assert!(done_in_two_turns(&err), "{}: {err}", case.api);
        assert_eq!(looked_up(case.ticket), 1, "{}", case.api);
        let requests = stub.requests();
        assert_eq!(requests.len(), 2, "{}", case.api);
        assert!(requests.iter().all(|r| (case.asks)(r)), "{}: {:?}", case.api, requests[0]);
        assert!(
            requests[0].header("accept").is_some_and(|a| a.contains("event-stream") || a.contains("ndjson")),
            "{}",
            case.api
        );

        // The deltas, in order: the call starts under its registered name, its arguments grow, it is complete; a
        // tool runs after that only. Then the text of the second turn.
        let events = events(&err);
        let kinds: Vec<&str> = events.iter().map(|e| e["event"].as_str().unwrap()).collect();
        let started = kinds.iter().position(|k| *k == "call_started").expect("call_started");
        let complete = kinds.iter().position(|k| *k == "call_complete").expect("call_complete");
        let requested = kinds.iter().position(|k| *k == "tool_requested").expect("tool_requested");
        assert!(started < complete && complete < requested, "{}: {kinds:?}", case.api);
        assert_eq!(events[started]["name"], "apis.lookup_ticket", "{}", case.api);
        let arguments: String = events
            .iter()
            .filter(|e| e["event"] == "call_arguments_delta")
            .map(|e| e["delta"].as_str().unwrap())
            .collect();
        let arguments: Value = serde_json::from_str(&arguments).unwrap_or_else(|e| panic!("{}: {e}", case.api));
        assert_eq!(arguments, json!({"ticket": case.ticket}), "{}", case.api);
        let text: String = events
            .iter()
            .skip(requested)
            .filter(|e| e["event"] == "text_delta")
            .map(|e| e["delta"].as_str().unwrap())
            .collect();
        assert_eq!(text, format!("{} is open.", case.ticket), "{}", case.api);
        assert_eq!(kinds.iter().filter(|k| **k == "waiting").count(), 2, "{}", case.api);
        let usage = events.iter().find(|e| e["event"] == "model_response").map(|e| e["usage"].clone());
        assert!(usage.is_some_and(|u| u["input_tokens"].as_u64() > Some(0)), "{}: {err}", case.api);
    }
}

#[test]
fn a_stream_the_provider_breaks_off_as_overloaded_is_retried_and_nothing_runs_twice() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let stub = runtime.block_on(StubServer::start()).unwrap();
    let path = ANTHROPIC_MESSAGES;
    stub.respond(path, StubResponse::stream_text(include_str!("../fixtures/streams/anthropic-overloaded.sse"), false));
    let call = include_str!("../fixtures/streams/anthropic-call.sse").replace("T-5", "T-6");
    stub.respond(path, StubResponse::stream_text(call, false));
    // Cut short: no message_stop.
    let text = include_str!("../fixtures/streams/anthropic-text.sse");
    let cut = &text[..text.find("event: message_delta").unwrap()];
    stub.respond(path, StubResponse::stream_text(cut, false));
    stub.respond(path, StubResponse::stream_text(text.replace("T-53", "T-63"), false));
    let (code, out, err) =
        keel(&["chat", "--api", "anthropic", "--url", &stub.url(), "--model", "m", "--stream", "Look up T-63."]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(looked_up("T-63"), 1, "run once");
    let events = events(&err);
    let retries: Vec<(u64, &str)> = events
        .iter()
        .filter(|e| e["event"] == "model_retry")
        .map(|e| (e["turn"].as_u64().unwrap(), e["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(retries, [(1, "stream"), (2, "stream")], "{err}");
    let overloaded = events.iter().find(|e| e["event"] == "model_retry").unwrap();
    assert!(overloaded["error"].as_str().unwrap().contains("overloaded_error: Overloaded"), "{overloaded}");
    let waiting: Vec<u64> =
        events.iter().filter(|e| e["event"] == "waiting").map(|e| e["attempt"].as_u64().unwrap()).collect();
    assert_eq!(waiting, [1, 2, 1, 2]);
}

#[test]
fn text_events_print_the_stream_on_stdout() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let stub = runtime.block_on(StubServer::start()).unwrap();
    stub.respond(
        OPENAI_CHAT,
        StubResponse::stream_text(include_str!("../fixtures/streams/openai-chat-text.sse"), false),
    );
    let url = format!("{}/v1", stub.url());
    let (code, out, err) = keel(&["chat", "--url", &url, "--model", "m", "--stream", "--events", "text", "Hi."]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out, "T-51 is open.\n", "the text as it streamed, once");
    assert!(!err.contains('{'), "no JSON: {err}");
    let (code, out, err) = keel(&["chat", "--url", &url, "--model", "m", "--quiet", "Hi."]);
    assert_eq!(code, 1, "the stub has nothing left: {err}");
    assert_eq!(out, "");
    assert!(err.starts_with("keel: ") && err.lines().count() == 1, "the error alone: {err}");
}

/// A stream that breaks off with the provider's error: the run fails with what the provider said, and the request
/// is tried again only when the provider said the fault is its own (a server error, overloaded, unavailable).
#[test]
fn a_stream_that_breaks_off_with_an_error_fails_the_turn_and_is_retried_only_when_worth_it() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for (api, base, path, fixture, said, retried) in [
        ("openai", "/v1", OPENAI_CHAT.to_owned(), "openai-chat-error.sse", "The server had an error", true),
        (
            "openai-responses",
            "/v1",
            OPENAI_RESPONSES.to_owned(),
            "openai-responses-failed.sse",
            "failed to generate",
            true,
        ),
        ("anthropic", "", ANTHROPIC_MESSAGES.to_owned(), "anthropic-overloaded.sse", "overloaded_error", true),
        ("gemini", "/v1beta", gemini_stream("m"), "gemini-error.sse", "The model is overloaded", true),
        ("ollama", "", OLLAMA_CHAT.to_owned(), "ollama-error.ndjson", "unexpected EOF", false),
    ] {
        let stub = runtime.block_on(StubServer::start()).unwrap();
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/streams").join(fixture),
        )
        .unwrap();
        // The same error again for the retry, so that the run fails either way.
        for _ in 0..2 {
            stub.respond(&path, StubResponse::stream_text(text.clone(), fixture.ends_with(".ndjson")));
        }
        let url = format!("{}{base}", stub.url());
        let args = ["chat", "--api", api, "--url", &url, "--model", "m", "--stream", "--retries", "1", "Hi."];
        let (code, out, err) = keel(&args);
        assert_eq!(code, 1, "{api}: {out}{err}");
        assert!(err.contains("the streamed answer failed: ") && err.contains(said), "{api}: {err}");
        let requests = stub.requests().len();
        assert_eq!(requests, if retried { 2 } else { 1 }, "{api}: {err}");
        let retries = events(&err).iter().filter(|e| e["event"] == "model_retry" && e["reason"] == "stream").count();
        assert_eq!(retries, usize::from(retried), "{api}");
    }
}
