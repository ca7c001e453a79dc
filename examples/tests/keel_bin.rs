//! This repository's demo `keel` (`src/bin/keel-demo.rs`, over the example tools), run from the repository root
//! the way CI runs it.

use std::path::Path;
use std::process::Command;

fn keel(args: &[&str]) -> (i32, String, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root");
    let out = Command::new(env!("CARGO_BIN_EXE_keel-demo")).args(args).current_dir(root).output().expect("keel runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn lock_check_passes_on_the_committed_lock() {
    let (code, out, err) = keel(&["lock", "--check", "--strict"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.trim(), "keel.lock: 8 tool(s), the lock is current");
}

#[test]
fn list_format_ollama_is_ollama_schemas() {
    let (code, out, err) = keel(&["list", "--format", "ollama"]);
    assert_eq!(code, 0, "{err}");
    let printed: serde_json::Value = serde_json::from_str(&out).unwrap();
    let registry = keel_tools_core::Registry::from_inventory().unwrap();
    // This test binary links the same tools as `keel`.
    assert_eq!(printed, serde_json::Value::Array(registry.ollama_schemas().to_vec()));
    assert_eq!(registry.len(), 8);
}

#[test]
fn check_has_no_errors_on_the_demo_tools() {
    let (code, out, _) = keel(&["check"]);
    assert_eq!(code, 0, "{out}");
    let (code, _, _) = keel(&["check", "--deny-warnings"]);
    assert_eq!(code, 0);
}

keel_tools_core::link_tools!(examples);

/// `keel chat` on a terminal (a pseudo-terminal from util-linux's `script`): a call that needs an approval is
/// shown with its exact arguments, and what is typed at the prompt decides it.
#[test]
fn chat_asks_at_a_terminal_and_the_answer_decides() {
    use keel_tools_agent::stub::{OPENAI_CHAT, StubResponse, StubServer};
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root");
    for (typed, expected) in [("y", "TCK-001"), ("n", "approval_denied")] {
        let stub = runtime.block_on(StubServer::start()).unwrap();
        let call = serde_json::json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "create_ticket",
                "arguments": "{\"incident_id\": \"INC-001\", \"title\": \"checkout 502\"}"}}]}}]});
        stub.respond(OPENAI_CHAT, StubResponse::json(&call));
        let done = serde_json::json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "Done."}}]});
        stub.respond(OPENAI_CHAT, StubResponse::json(&done));
        let command = format!(
            "{} chat --url {}/v1 --model m 'Open a ticket for INC-001.'",
            env!("CARGO_BIN_EXE_keel-demo"),
            stub.url()
        );
        let mut child = Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .current_dir(root)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("util-linux `script` runs (it gives keel a terminal)");
        use std::io::Write as _;
        child.stdin.take().unwrap().write_all(format!("{typed}\n").as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
        assert!(text.contains("`create_ticket` 1.0 needs an approval"), "{text}");
        assert!(
            text.contains("\"title\": \"checkout 502\"") && text.contains("approve? [y/N]"),
            "the exact arguments: {text}"
        );
        assert!(text.contains("Done."), "the answer: {text}");
        let requests = stub.requests();
        assert_eq!(requests.len(), 2, "{text}");
        let reply = requests[1].body["messages"][2]["content"].as_str().unwrap_or_default().to_owned();
        assert!(reply.contains(expected), "typed {typed:?}: the model read {reply}");
    }
}

/// `keel chat --stream` on a terminal: events as lines for people (no JSON), a waiting indicator while the request
/// is out, and the answer's text as it streams.
#[test]
fn chat_on_a_terminal_waits_visibly_and_streams_the_text() {
    use keel_tools_agent::stub::{OPENAI_CHAT, StubResponse, StubServer};
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let stub = runtime.block_on(StubServer::start()).unwrap();
    let stream = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"INC-001 \"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"is open.\"},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    stub.respond(OPENAI_CHAT, StubResponse::stream_text(stream, false).delayed(std::time::Duration::from_millis(300)));
    let command = format!(
        "{} chat --url {}/v1 --model m --stream 'Look up INC-001.'",
        env!("CARGO_BIN_EXE_keel-demo"),
        stub.url()
    );
    let out = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("util-linux `script` runs (it gives keel a terminal)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("… waiting for the model (turn 1)"), "{text}");
    assert!(text.contains("INC-001 is open."), "{text}");
    assert_eq!(text.matches("INC-001 is open.").count(), 1, "the answer once: {text}");
    assert!(!text.contains("\"event\""), "no JSON on a terminal: {text}");
}

/// `keel chat` on a terminal, with an answer of 12 lines and over 600 characters, whole and streamed: the answer
/// appears once, whole, line for line (the terminal writes each newline as CR LF).
#[test]
fn chat_on_a_terminal_prints_a_long_answer_once_and_whole() {
    use keel_tools_agent::stub::{OPENAI_CHAT, StubResponse, StubServer};
    let answer: String = (1..=12).map(|i| format!("Line {i:02} of the answer, which goes on for a while.\n")).collect();
    assert!(answer.len() >= 600);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for stream in [false, true] {
        let stub = runtime.block_on(StubServer::start()).unwrap();
        let response = if stream {
            let mut sse = String::new();
            for line in answer.split_inclusive('\n') {
                let delta = serde_json::json!({"choices": [{"index": 0, "delta": {"content": line}}]});
                sse.push_str(&format!("data: {delta}\n\n"));
            }
            sse.push_str("data: [DONE]\n\n");
            StubResponse::stream_text(sse, false)
        } else {
            StubResponse::json(&serde_json::json!({"choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": answer}}]}))
        };
        stub.respond(OPENAI_CHAT, response);
        let command = format!(
            "{} chat --url {}/v1 --model m {} 'Say a lot.'",
            env!("CARGO_BIN_EXE_keel-demo"),
            stub.url(),
            if stream { "--stream" } else { "" }
        );
        let out = Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .stdin(std::process::Stdio::null())
            .output()
            .expect("util-linux `script` runs (it gives keel a terminal)");
        let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
        assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(text.matches(answer.as_str()).count(), 1, "stream {stream}: once and whole: {text}");
        assert_eq!(text.matches("Line 12").count(), 1, "stream {stream}: {text}");
    }
}
