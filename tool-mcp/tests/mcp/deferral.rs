//! Deferred tools over MCP (`keel_tools_core::deferral`), over real HTTP on loopback. In a session (2025-11-25):
//! `tools/list` shows the tools that are not deferred and `search_tools`; a call of a deferred tool no search of the
//! session surfaced is answered exactly as a call of a tool the server lacks and runs nothing; a search surfaces
//! what it returns for that session alone, which is told to list again. Without a session (2026-07-28): the deferred
//! tools are kept out of the list, found through the search.
//!
//! `cargo test -p keel-tools-mcp --features server,http --test mcp -- deferral::`

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{Era, Peer};
use keel_tools_core::deferral::SEARCH_TOOL;
use keel_tools_core::definition::{Effect, ToolDefinition};
use keel_tools_core::{Executor, ToolView};
use keel_tools_mcp::server::McpServer;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What ran.
static RAN: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn tool(name: &'static str, description: &'static str, deferred: bool) -> Arc<ToolDefinition> {
    let def = ToolDefinition::builder(name)
        .description(description)
        .version("1.0")
        .effect(Effect::Read)
        .input_schema(json!({"type": "object", "properties": {}}))
        .defer(deferred)
        .handler(move |_arguments: Value, _ctx| async move {
            RAN.lock().unwrap().push(name.to_owned());
            Ok(json!(format!("{name} done")))
        })
        .build()
        .unwrap();
    Arc::new(def)
}

async fn serve() -> (String, CancellationToken) {
    let view = ToolView::new(vec![
        tool("today", "Says which day it is.", false),
        tool("billing.invoice.refund", "Refund an invoice, fully or in part.", true),
        tool("billing.invoice.void", "Void an unpaid invoice.", true),
    ]);
    let server = McpServer::new(Executor::new(view.with_tool_search().unwrap()).unwrap()).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    let shutdown = stop.clone();
    tokio::spawn(async move { server.serve_http(listener, "/mcp", shutdown).await });
    (url, stop)
}

/// A session client that reports each `notifications/tools/list_changed`.
#[derive(Clone)]
struct Watcher(mpsc::UnboundedSender<()>);

impl rmcp::ClientHandler for Watcher {
    async fn on_tool_list_changed(&self, _: rmcp::service::NotificationContext<rmcp::RoleClient>) {
        let _ = self.0.send(());
    }
}

fn call(name: &str) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned()).with_arguments(serde_json::Map::new())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_listed_and_may_call_what_its_own_searches_surfaced() {
    let (url, stop) = serve().await;
    let (tx, mut changes) = mpsc::unbounded_channel();
    let alice = Watcher(tx).serve(StreamableHttpClientTransport::from_uri(url.clone())).await.unwrap();
    let (tx, mut other_changes) = mpsc::unbounded_channel();
    let bob = Watcher(tx).serve(StreamableHttpClientTransport::from_uri(url.clone())).await.unwrap();
    let names = |tools: Vec<rmcp::model::Tool>| tools.into_iter().map(|t| t.name.to_string()).collect::<Vec<_>>();
    assert_eq!(names(alice.peer().list_all_tools().await.unwrap()), [SEARCH_TOOL, "today"]);

    // Not surfaced: refused as a tool the server lacks would be.
    RAN.lock().unwrap().clear();
    let refused = alice.peer().call_tool(call("billing.invoice.refund")).await.unwrap_err();
    let missing = alice.peer().call_tool(call("billing.invoice.nothing")).await.unwrap_err();
    let text = |e: &rmcp::ServiceError| {
        e.to_string().replace("billing.invoice.refund", "X").replace("billing.invoice.nothing", "X")
    };
    assert_eq!(text(&refused), text(&missing));
    assert!(RAN.lock().unwrap().is_empty());

    // Alice searches: she is told to list again, and sees and may call what the search found; Bob is not.
    let mut search = call(SEARCH_TOOL);
    search.arguments = Some(json!({"query": "refund an invoice", "limit": 1}).as_object().unwrap().clone());
    let found = alice.peer().call_tool(search).await.unwrap();
    assert_eq!(found.structured_content.as_ref().unwrap()["tools"][0]["name"], "billing.invoice.refund");
    tokio::time::timeout(Duration::from_secs(10), changes.recv()).await.expect("told to list again");
    assert_eq!(names(alice.peer().list_all_tools().await.unwrap()), ["billing.invoice.refund", SEARCH_TOOL, "today"]);
    let paid = alice.peer().call_tool(call("billing.invoice.refund")).await.unwrap();
    assert_eq!(paid.is_error, Some(false));
    assert_eq!(*RAN.lock().unwrap(), ["billing.invoice.refund"]);
    assert!(alice.peer().call_tool(call("billing.invoice.void")).await.is_err(), "the other is still deferred");

    assert!(tokio::time::timeout(Duration::from_millis(300), other_changes.recv()).await.is_err(), "Bob is not told");
    assert_eq!(names(bob.peer().list_all_tools().await.unwrap()), [SEARCH_TOOL, "today"]);
    assert!(bob.peer().call_tool(call("billing.invoice.refund")).await.is_err(), "nor may Bob call it");
    for client in [alice, bob] {
        let _ = client.cancel().await;
    }
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_session_the_deferred_tools_are_found_through_the_search() {
    let (url, stop) = serve().await;
    let peer = Peer::new(&url, None, Era::Stateless);
    assert_eq!(peer.list(1).await, [SEARCH_TOOL, "today"]);
    let found = peer.call(2, SEARCH_TOOL, json!({"query": "void an invoice", "limit": 1})).await;
    assert_eq!(found.body["result"]["structuredContent"]["tools"][0]["name"], "billing.invoice.void", "{found:?}");
    assert_eq!(peer.list(3).await, [SEARCH_TOOL, "today"], "no session keeps what was found");
    stop.cancel();
}
