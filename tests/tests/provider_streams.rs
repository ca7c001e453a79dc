//! keel's recorded provider streams (`tests/fixtures/streams`, the bytes `keel chat --stream` is tested against in
//! `cli_chat_apis`) read by each provider's own Python SDK stream reader: `openai` (Chat Completions' and
//! Responses' streaming helpers), `anthropic` (`messages.stream`), `google-genai` (`generate_content_stream`) and
//! `ollama` (`chat(stream=True)`). The stub serves the fixtures; `tests/provider_sdks/streams.py` reads them and
//! prints what each SDK saw, which must be what keel reads from the same bytes: so the fixtures are checked
//! against the SDKs, not against keel.
//!
//! The SDKs live in the venv `target/provider-venv` (`scripts/provider-sdks.sh`); without it the test is skipped
//! and named, unless peers are required.

use std::path::Path;
use std::process::Command;

use keel_tools_agent::stub::{
    ANTHROPIC_MESSAGES, OLLAMA_CHAT, OPENAI_CHAT, OPENAI_RESPONSES, StubResponse, StubServer, gemini_stream,
};
use serde_json::{Value, json};

fn fixture(name: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(root.join("fixtures").join("streams").join(name)).expect("the fixture")
}

#[test]
fn the_providers_sdks_read_the_recorded_streams() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_path_buf();
    let python = root.join("target").join("provider-venv").join("bin").join("python");
    if !python.exists() {
        keel_tests::missing_peer(&keel_tests::peers::PROVIDER_SDKS, "the venv target/provider-venv is missing");
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let stub = runtime.block_on(StubServer::start()).unwrap();
    let serve = |path: &str, names: &[&str]| {
        for name in names {
            stub.respond(path, StubResponse::stream_text(fixture(name), name.ends_with(".ndjson")));
        }
    };
    serve(OPENAI_CHAT, &["openai-chat-call.sse", "openai-chat-text.sse", "openai-chat-error.sse"]);
    serve(OPENAI_RESPONSES, &["openai-responses-call.sse", "openai-responses-text.sse", "openai-responses-failed.sse"]);
    serve(ANTHROPIC_MESSAGES, &["anthropic-call.sse", "anthropic-text.sse", "anthropic-overloaded.sse"]);
    serve(&gemini_stream("m"), &["gemini-call.sse", "gemini-text.sse", "gemini-error.sse"]);
    serve(OLLAMA_CHAT, &["ollama-call.ndjson", "ollama-text.ndjson", "ollama-error.ndjson"]);

    let output = Command::new(&python)
        .arg(root.join("tests").join("provider_sdks").join("streams.py"))
        .arg(stub.url())
        .output()
        .expect("the reader starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the SDKs could not read the streams:\n{stdout}{stderr}");
    let seen: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));

    let call = |id: Value, name: &str, ticket: &str| json!([{"id": id, "name": name, "arguments": {"ticket": ticket}}]);
    let expected = json!({
        "openai-chat-call": {"text": "", "calls": call(json!("call_s1"), "apis-lookup_ticket", "T-51"),
                             "usage": [82, 17], "finish": "tool_calls"},
        "openai-chat-text": {"text": "T-51 is open.", "calls": [], "usage": [120, 6], "finish": "stop"},
        "openai-responses-call": {"text": "", "calls": call(json!("call_r1"), "apis-lookup_ticket", "T-52"),
                                  "usage": [291, 23], "finish": "completed"},
        "openai-responses-text": {"text": "T-52 is open.", "calls": [], "usage": [330, 7], "finish": "completed"},
        "anthropic-call": {"text": "Let me look.", "calls": call(json!("toolu_s1"), "apis-lookup_ticket", "T-53"),
                           "usage": [412, 57], "finish": "tool_use"},
        "anthropic-text": {"text": "T-53 is open.", "calls": [], "usage": [480, 8], "finish": "end_turn"},
        "gemini-call": {"text": "", "calls": call(Value::Null, "apis-lookup_ticket", "T-54"), "usage": [120, 12],
                        "finish": "STOP"},
        "gemini-text": {"text": "T-54 is open.", "calls": [], "usage": [150, 5], "finish": "STOP"},
        "ollama-call": {"text": "", "calls": call(Value::Null, "apis.lookup_ticket", "T-55"), "usage": [50, 10],
                        "finish": "stop"},
        "ollama-text": {"text": "T-55 is open.", "calls": [], "usage": [70, 5], "finish": "stop"},
    });
    for (name, want) in expected.as_object().unwrap() {
        assert_eq!(&seen[name], want, "{name}: what the SDK read");
    }
    // Each stream that breaks off with an error is an error to the SDK too, naming what the provider said.
    for (name, said) in [
        ("anthropic-overloaded", "overloaded_error"),
        ("openai-chat-error", "The server had an error"),
        ("openai-responses-failed", "response.completed"),
        ("gemini-error", "overloaded"),
        ("ollama-error", "unexpected EOF"),
    ] {
        let error = &seen[name];
        println!("{name}: {error}");
        assert!(error["error"].is_string(), "{name}: the SDK read it without an error: {error}");
        assert!(error["message"].as_str().is_some_and(|m| m.contains(said)), "{name}: {error}");
    }
    assert_eq!(stub.requests().len(), 15, "every fixture was read once");
}
