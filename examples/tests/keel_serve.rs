//! `keel serve` of this repository's demo `keel` (the example tools), as an MCP host runs it: a child process
//! spoken to over stdio (an `initialize` session in raw JSON-RPC lines, and the stateless era through keel's MCP
//! client), and over Streamable HTTP.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use keel_tools_core::{Provider, Registry};
use keel_tools_mcp::RemoteServer;
use keel_tools_mcp::rmcp::model::ProtocolVersion;
use serde_json::{Value, json};

keel_tools_core::link_tools!(examples);

const WAIT: Duration = Duration::from_secs(60);

fn keel() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_keel-demo"));
    command.current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root"));
    command
}

/// A `keel serve --stdio` child and the JSON lines it writes.
struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Session {
    fn start(args: &[&str]) -> Session {
        let mut child = keel()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("keel runs");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Session { stdin: child.stdin.take(), child, lines }
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request and returns its response; every line on stdout must be JSON-RPC.
    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self.lines.recv_timeout(WAIT).unwrap_or_else(|e| panic!("no answer to {method}: {e}"));
            let message: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout not JSON ({e}): {line}"));
            assert_eq!(message["jsonrpc"], "2.0", "{line}");
            if message["id"] == id {
                return message;
            }
        }
    }

    fn call(&mut self, id: u64, name: &str, arguments: Value) -> Value {
        self.request(id, "tools/call", json!({"name": name, "arguments": arguments}))
    }

    /// Closes stdin (the host going away) and returns the exit code.
    fn close(&mut self) -> Option<i32> {
        drop(self.stdin.take());
        wait(&mut self.child)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait(child: &mut Child) -> Option<i32> {
    for _ in 0..(WAIT.as_millis() / 50) {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    panic!("keel serve did not end");
}

/// The error of a refused call: its keel code, from the `isError` result.
fn refusal(response: &Value) -> String {
    let result = &response["result"];
    assert_eq!(result["isError"], true, "{response}");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    let error: Value = serde_json::from_str(text).unwrap_or_else(|_| panic!("the error as JSON text: {response}"));
    error["error"]["code"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn stdio_session_lists_calls_and_refuses() {
    let mut session = Session::start(&["serve", "--stdio", "--tag", "incident"]);
    let init = session.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    assert_eq!(init["result"]["serverInfo"]["name"], "keel", "{init}");
    session.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    // The tools of the tag, as `keel list --format mcp --tag incident` renders them.
    let listed = session.request(2, "tools/list", json!({}));
    let tools = listed["result"]["tools"].as_array().unwrap_or_else(|| panic!("{listed}"));
    let registry = Registry::from_inventory().unwrap();
    let view = registry.view().tag("incident").build().unwrap();
    let expected = view.schemas(Provider::Mcp);
    assert_eq!(tools.len(), expected.len(), "{listed}");
    for (tool, want) in tools.iter().zip(expected) {
        assert_eq!(tool["name"], want["name"]);
        assert_eq!(tool["inputSchema"], want["inputSchema"], "{}", want["name"]);
    }
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"lookup_incident") && !names.contains(&"read_task_cards"), "{names:?}");

    let ok = session.call(3, "lookup_incident", json!({"incident_id": "INC-001"}));
    assert_ne!(ok["result"]["isError"], true, "{ok}");
    assert_eq!(ok["result"]["structuredContent"]["service"], "auth-api", "{ok}");

    let invalid = session.call(4, "lookup_incident", json!({"incident": "INC-001"}));
    assert_eq!(refusal(&invalid), "invalid_arguments");
    let unapproved = session.call(5, "create_ticket", json!({"incident_id": "INC-001", "title": "502"}));
    assert_eq!(refusal(&unapproved), "approval_required");
    // An unknown tool, and a tool outside the served tag, are JSON-RPC errors.
    for (id, name) in [(6, "nope"), (7, "read_task_cards")] {
        let unknown = session.call(id, name, json!({}));
        assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
        assert!(unknown["error"]["message"].as_str().unwrap_or_default().contains(name), "{unknown}");
    }

    assert_eq!(session.close(), Some(0), "stdin closed: keel serve ends cleanly");
}

#[tokio::test(flavor = "multi_thread")]
async fn stdio_stateless_era_through_the_client() {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_keel-demo"));
    command.args(["serve", "--stdio"]);
    let remote = tokio::time::timeout(WAIT, RemoteServer::connect_child("demo", command))
        .await
        .expect("connects in time")
        .expect("connects");
    assert_eq!(remote.protocol_version(), Some(ProtocolVersion::V_2026_07_28), "server/discover is answered");
    let tools = remote.list_tools().await.expect("tools/list");
    assert_eq!(tools.len(), Registry::from_inventory().unwrap().len());
    remote.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn http_lists_the_tools_and_ctrl_c_ends_it() {
    let mut child = keel()
        .args(["serve", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("keel runs");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let url = line.trim().rsplit(' ').next().unwrap_or_default().to_owned();
    assert!(url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"), "{line}");

    let remote = tokio::time::timeout(WAIT, RemoteServer::connect_http("demo", &url))
        .await
        .expect("connects in time")
        .expect("connects");
    let tools = remote.list_tools().await.expect("tools/list");
    let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    let registry = Registry::from_inventory().unwrap();
    let mut expected: Vec<String> = registry.names().map(str::to_owned).collect();
    expected.sort();
    assert_eq!(names, expected);
    remote.close().await;

    // Ctrl-C: the server stops accepting, closes its sessions and exits 0. Nothing was written to stdout.
    let interrupted = Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill runs");
    assert!(interrupted.success());
    assert_eq!(wait(&mut child), Some(0));
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    assert_eq!(out, "", "logs go to stderr");
}
