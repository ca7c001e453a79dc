//! Cancellation reaches the handler: `notifications/cancelled` in a session, a closed stdio (after the SDK's 5 s
//! drain), and an HTTP client that closes its connection mid-call each cancel the call's `CallContext`. The
//! handler records what it saw.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use keel_tools_core::{CallContext, Executor, Registry, ToolError, tool};
use keel_tools_mcp::McpServer;
use keel_tools_mcp::rmcp::ServiceExt;
use keel_tools_mcp::rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// What each `cancel_wait` call saw, by its `label` argument: `started`, then `cancelled` or `finished`.
static SEEN: LazyLock<Mutex<HashMap<String, Vec<&'static str>>>> = LazyLock::new(Default::default);

fn saw(label: &str, what: &'static str) {
    SEEN.lock().unwrap().entry(label.to_owned()).or_default().push(what);
}

fn seen(label: &str) -> Vec<&'static str> {
    SEEN.lock().unwrap().get(label).cloned().unwrap_or_default()
}

/// Waits (up to 10 s) until `label`'s call saw `what`.
async fn wait_until(label: &str, what: &str) -> Vec<&'static str> {
    for _ in 0..1000 {
        if seen(label).contains(&what) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    seen(label)
}

/// Waits up to 20 s for its call to be cancelled.
#[tool(effect = "read", version = "1.0")]
async fn cancel_wait(ctx: CallContext, label: String) -> Result<String, ToolError> {
    saw(&label, "started");
    tokio::select! {
        () = ctx.cancellation().cancelled() => {
            saw(&label, "cancelled");
            Err(keel_tools_core::tool_error!("stopped", "stopped"))
        }
        () = tokio::time::sleep(Duration::from_secs(20)) => {
            saw(&label, "finished");
            Ok(label)
        }
    }
}

fn server() -> McpServer {
    let registry = Registry::from_inventory().expect("registry");
    McpServer::new(Executor::new(registry.view().names(["cancel_wait"]).build().expect("view")).expect("executor"))
        .expect("server")
}

fn request(id: u64, label: &str) -> String {
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                      "params": {"name": "cancel_wait", "arguments": {"label": label}}});
    format!("{call}\n")
}

async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), f).await.expect("test timed out")
}

#[tokio::test(flavor = "multi_thread")]
async fn notifications_cancelled_cancels_the_handler() {
    within(async {
        let (server_io, client_io) = tokio::io::duplex(1 << 16);
        let server = server();
        tokio::spawn(async move {
            if let Ok(s) = server.serve(server_io).await {
                let _ = s.waiting().await;
            }
        });
        let client = ().serve(client_io).await.expect("client");
        let args = json!({"label": "notified"}).as_object().cloned().unwrap();
        let peer = client.peer().clone();
        // Dropping the request's future sends `notifications/cancelled` for it.
        let call = tokio::spawn(async move {
            peer.call_tool(CallToolRequestParams::new("cancel_wait").with_arguments(args)).await
        });
        assert!(wait_until("notified", "started").await.contains(&"started"));
        call.abort();
        assert_eq!(wait_until("notified", "cancelled").await, ["started", "cancelled"]);
        let _ = client.cancel().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_closed_stdio_cancels_the_handler() {
    within(async {
        let (server_read, mut client_write) = tokio::io::duplex(1 << 16);
        let (mut client_read, server_write) = tokio::io::duplex(1 << 16);
        let server = server();
        let serving = tokio::spawn(async move { server.serve_io(server_read, server_write).await });
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
        client_write.write_all(format!("{init}\n").as_bytes()).await.unwrap();
        let mut lines = BufReader::new(&mut client_read).lines();
        let answer: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(answer["id"], 1, "{answer}");
        client_write.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n").await.unwrap();
        client_write.write_all(request(2, "stdio").as_bytes()).await.unwrap();
        assert!(wait_until("stdio", "started").await.contains(&"started"));
        // The client goes away: its end of stdin closes. The SDK first lets running calls finish for 5 s (a
        // client that closed stdin may still read stdout), then cancels them.
        drop(client_write);
        assert_eq!(wait_until("stdio", "cancelled").await, ["started", "cancelled"]);
        let _ = tokio::time::timeout(Duration::from_secs(10), serving).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_http_client_closing_its_connection_cancels_the_handler() {
    within(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().unwrap();
        let shutdown = tokio_util::sync::CancellationToken::new();
        let server = server();
        let stop = shutdown.clone();
        tokio::spawn(async move { server.serve_http(listener, "/mcp", stop).await });

        // A stateless (2026-07-28) call on its own connection, which the client then closes mid-call.
        let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "cancel_wait", "arguments": {"label": "http"},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {}
        }}})
        .to_string();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
             Mcp-Method: tools/call\r\nMcp-Name: cancel_wait\r\nContent-Length: {}\r\n\r\n",
            call.len()
        );
        let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
        conn.write_all(head.as_bytes()).await.unwrap();
        conn.write_all(call.as_bytes()).await.unwrap();
        let started = wait_until("http", "started").await;
        if !started.contains(&"started") {
            let mut answer = vec![0u8; 4096];
            let n = tokio::time::timeout(Duration::from_secs(2), conn.read(&mut answer))
                .await
                .map_or(0, |r| r.unwrap_or(0));
            panic!("the call did not start: {}", String::from_utf8_lossy(&answer[..n]));
        }
        drop(conn);
        assert_eq!(wait_until("http", "cancelled").await, ["started", "cancelled"]);
        shutdown.cancel();
    })
    .await;
}
