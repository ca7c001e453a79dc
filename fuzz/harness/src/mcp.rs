//! MCP message handling under arbitrary input: [`check_mcp`] opens one stdio session of an `McpServer` over the
//! harness's executor (`McpServer::serve_io` on an in-memory pipe), sends it the input line by line, then asks it
//! for `ping` and `tools/list`, and asserts what the server promises, whatever it was sent before.
//!
//! Input layout: the first byte selects the session's start. Bit 0 clear: a well-formed `initialize` (claiming the
//! protocol revision picked by bits 1–3 from [`REVISIONS`]) and `notifications/initialized` come first; bit 0
//! set: the input is the first thing the server reads. The rest is split at `\n`, and each part is sent as one line.
//!
//! Invariants, for every input:
//!
//! 1. the server never panics and the session ends when the client closes its side (no hang: a session that has
//!    not ended 20 s after the input was sent fails the check);
//! 2. everything the server writes is one JSON-RPC 2.0 message a line: a response (an `id` with exactly one of
//!    `result` and `error`) or a notification;
//! 3. a response's id is `null`, one of the checker's own, or an id the input sent; an error answering a line
//!    whose id cannot be read may have none (MCP 2026-07-28, "Error Responses");
//! 4. after the handshake, whatever the input held (a line over the server's limit is dropped), the session still
//!    answers: `ping` gets an empty result and `tools/list` lists exactly the view's tools, each answered once;
//! 5. a response to a `tools/call` of the input holds no file path, panic, Rust type path or serde/jsonschema
//!    wording ([`NEEDLES`](crate::NEEDLES)) that the input did not hold.

use std::collections::HashSet;
use std::time::Duration;

use keel_tools_mcp::McpServer;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::leaks::NEEDLES;
use crate::{Harness, VIEW, block_on};

/// The protocol revisions an `initialize` of the checker claims (bits 1–3 of the first byte, modulo the length).
pub const REVISIONS: [&str; 6] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28", "1999-01-01"];

/// The checker's own request ids (strings no seed uses).
const INIT_ID: &str = "keel-fuzz-initialize";
const PING_ID: &str = "keel-fuzz-ping";
const LIST_ID: &str = "keel-fuzz-list";

/// How long a session may take, from its start to its end, before the check fails as a hang.
const DEADLINE: Duration = Duration::from_secs(20);

/// What one session wrote, line by line, and how it ended.
#[derive(Debug)]
pub struct McpSession {
    /// Every line the server wrote, parsed.
    pub messages: Vec<Value>,
    /// Whether serving ended with an error (the session did not start, or its task failed).
    pub serve_error: Option<String>,
}

/// Runs one session on `data` and asserts the invariants above; returns what the server wrote.
pub fn check_mcp(data: &[u8]) -> Option<McpSession> {
    let (&mode, rest) = data.split_first()?;
    let handshake = mode & 1 == 0;
    let revision = REVISIONS[usize::from(mode >> 1 & 7) % REVISIONS.len()];
    let lines: Vec<&[u8]> = if rest.is_empty() { Vec::new() } else { rest.split(|&b| b == b'\n').collect() };
    let sent = Sent::of(&lines);
    let executor = Harness::get().executor.clone();

    let session = block_on(async move {
        tokio::time::timeout(DEADLINE, run(executor, handshake, revision, &lines))
            .await
            .unwrap_or_else(|_| panic!("the session did not end within {DEADLINE:?}; input: {}", show(data)))
    });

    let mut answered: Vec<&str> = Vec::new();
    for message in &session.messages {
        check_message(message, &sent, data);
        if let Some(id) = message.get("id").and_then(Value::as_str)
            && [INIT_ID, PING_ID, LIST_ID].contains(&id)
            && message.get("method").is_none()
        {
            answered.push(id);
        }
    }
    let started = handshake && answered.contains(&INIT_ID);
    if handshake {
        assert!(started, "the handshake was not answered; input: {}", show(data));
    }
    if started {
        for id in [PING_ID, LIST_ID] {
            let n = answered.iter().filter(|a| **a == id).count();
            assert_eq!(n, 1, "`{id}` answered {n} times after the input; input: {}", show(data));
        }
        let ping = find(&session.messages, PING_ID);
        assert_eq!(ping.get("result"), Some(&json!({})), "ping: {ping}; input: {}", show(data));
        let list = find(&session.messages, LIST_ID);
        let mut names: Vec<&str> = list
            .pointer("/result/tools")
            .and_then(Value::as_array)
            .unwrap_or_else(|| panic!("tools/list: {list}; input: {}", show(data)))
            .iter()
            .filter_map(|t| t.get("name").and_then(Value::as_str))
            .collect();
        names.sort_unstable();
        let mut view = VIEW.to_vec();
        view.sort_unstable();
        assert_eq!(names, view, "tools/list after the input; input: {}", show(data));
    }
    Some(session)
}

/// One session: the handshake (or not), the input's lines, then `ping` and `tools/list`; the client's side is closed
/// once both are answered or the server has closed its side.
async fn run(executor: keel_tools_core::Executor, handshake: bool, revision: &str, lines: &[&[u8]]) -> McpSession {
    let server = McpServer::new(executor).expect("the harness's view serves over MCP");
    let (client, server_io) = tokio::io::duplex(1 << 16);
    let (server_read, server_write) = tokio::io::split(server_io);
    let serving = tokio::spawn(async move { server.serve_io(server_read, server_write).await });
    let (client_read, mut client_write) = tokio::io::split(client);
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();

    let reader = async move {
        let mut done_tx = Some(done_tx);
        let mut pending = HashSet::from([PING_ID, LIST_ID]);
        let mut messages = Vec::new();
        let mut lines = BufReader::new(client_read).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("the server wrote a line that is not JSON ({e}): {line:?}"));
            if message.get("method").is_none()
                && let Some(id) = message.get("id").and_then(Value::as_str)
            {
                pending.remove(id);
            }
            messages.push(message);
            if pending.is_empty() {
                done_tx.take().map(|tx| tx.send(()));
            }
        }
        messages
    };
    let writer = async move {
        let mut out: Vec<u8> = Vec::new();
        if handshake {
            let init = json!({"jsonrpc": "2.0", "id": INIT_ID, "method": "initialize", "params": {
                "protocolVersion": revision, "capabilities": {}, "clientInfo": {"name": "keel-fuzz", "version": "0"}}});
            out.extend(format!("{init}\n").bytes());
            out.extend(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
            out.push(b'\n');
        }
        for line in lines {
            out.extend_from_slice(line);
            out.push(b'\n');
        }
        for (id, method) in [(PING_ID, "ping"), (LIST_ID, "tools/list")] {
            out.extend(format!("{}\n", json!({"jsonrpc": "2.0", "id": id, "method": method})).bytes());
        }
        // The server may stop reading (a line over its limit ends the session): a failed write is not a finding.
        let _ = client_write.write_all(&out).await;
        let _ = done_rx.await;
        let _ = client_write.shutdown().await;
        drop(client_write);
    };
    let (messages, ()) = tokio::join!(reader, writer);
    let serve_error = match serving.await {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(e) => panic!("the serving task failed: {e}"),
    };
    if let Some(e) = &serve_error {
        assert!(!e.contains("panic"), "serving ended with a panic: {e}");
    }
    McpSession { messages, serve_error }
}

/// What the input sent: every `id` of a JSON-RPC object (in a batch too), and the ids of its `tools/call`s.
struct Sent {
    ids: Vec<Value>,
    calls: Vec<Value>,
    strings: String,
}

impl Sent {
    fn of(lines: &[&[u8]]) -> Sent {
        let mut sent = Sent { ids: Vec::new(), calls: Vec::new(), strings: String::new() };
        for line in lines {
            sent.strings.push_str(&String::from_utf8_lossy(line));
            sent.strings.push('\n');
            // As the transport reads a line: a leading UTF-8 byte order mark is ignored (RFC 8259 §8.1).
            let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
            if let Ok(value) = serde_json::from_slice::<Value>(line) {
                sent.collect(&value);
            }
        }
        sent
    }

    fn collect(&mut self, value: &Value) {
        match value {
            Value::Array(items) => items.iter().for_each(|v| self.collect(v)),
            Value::Object(object) => {
                if let Some(id) = object.get("id") {
                    self.ids.push(id.clone());
                    if object.get("method").and_then(Value::as_str) == Some("tools/call") {
                        self.calls.push(id.clone());
                    }
                }
                for v in object.values() {
                    self.strings.push('\n');
                    decoded(v, &mut self.strings);
                }
            }
            _ => {}
        }
    }
}

/// Every string of `v` (keys too), decoded, one a line.
fn decoded(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Array(a) => a.iter().for_each(|v| decoded(v, out)),
        Value::Object(o) => {
            for (k, v) in o {
                out.push_str(k);
                out.push('\n');
                decoded(v, out);
            }
        }
        _ => {}
    }
}

fn check_message(message: &Value, sent: &Sent, data: &[u8]) {
    assert_eq!(message.get("jsonrpc"), Some(&json!("2.0")), "not JSON-RPC 2.0: {message}; input: {}", show(data));
    let Some(id) = message.get("id") else {
        // MCP 2026-07-28 (Error Responses): an error answering a message whose id cannot be read omits the id.
        let anonymous_error = message.get("error").is_some() && message.get("result").is_none();
        assert!(
            message.get("method").is_some() || anonymous_error,
            "neither a response nor a notification: {message}; input: {}",
            show(data)
        );
        return;
    };
    if message.get("method").is_some() {
        panic!("the server sent a request: {message}; input: {}", show(data));
    }
    let answers = usize::from(message.get("result").is_some()) + usize::from(message.get("error").is_some());
    assert_eq!(answers, 1, "a response needs one of `result` and `error`: {message}; input: {}", show(data));
    let own = id.as_str().is_some_and(|id| [INIT_ID, PING_ID, LIST_ID].contains(&id));
    assert!(
        id.is_null() || own || sent.ids.iter().any(|s| same_id(s, id)),
        "a response to an id that was never sent: {message}; input: {}",
        show(data)
    );
    if sent.calls.iter().any(|c| same_id(c, id)) {
        let text = message.to_string();
        let mut plain = String::new();
        decoded(message, &mut plain);
        for needle in NEEDLES {
            if (plain.contains(needle) || text.contains(needle)) && !sent.strings.contains(needle) {
                panic!("`{needle}` reached a tools/call response: {message}; input: {}", show(data));
            }
        }
    }
}

/// JSON-RPC ids compare as values; a number may come back as the same number in another form (`1.0` as `1`).
fn same_id(a: &Value, b: &Value) -> bool {
    a == b || matches!((a.as_f64(), b.as_f64()), (Some(x), Some(y)) if x == y)
}

fn find<'a>(messages: &'a [Value], id: &str) -> &'a Value {
    messages
        .iter()
        .find(|m| m.get("id").and_then(Value::as_str) == Some(id) && m.get("method").is_none())
        .expect("answered")
}

/// The input, readable and short.
fn show(data: &[u8]) -> String {
    let text = String::from_utf8_lossy(data);
    match text.char_indices().nth(2000) {
        Some((end, _)) => format!("{}… ({} bytes)", &text[..end], data.len()),
        None => text.into_owned(),
    }
}
