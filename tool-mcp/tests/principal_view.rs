//! One hook maps each principal of a protected server to its tenant and its tools
//! (`McpServerBuilder::principal_view`), over real HTTP on loopback in both protocol eras: `tools/list` is exactly
//! the principal's allowlist (its view and its scopes), a call of a tool outside its view is answered exactly as
//! one of a tool the server lacks and runs nothing, and the view's tenant is the call's.
//!
//! `cargo test -p keel-tools-mcp --features auth --test principal_view`

mod common;

use std::sync::Mutex;

use common::{Era, Peer};
use keel_tools_core::{CallContext, Executor, Registry, ToolError, tool};
use keel_tools_mcp::http::HttpConfig;
use keel_tools_mcp::http::auth::{Principal, ResourceServer, StaticTokens};
use keel_tools_mcp::server::{McpServer, PrincipalView};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// What ran, as `tool@tenant`.
static RAN: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn record(tool: &str, ctx: &CallContext) -> String {
    let seen = format!("{tool}@{}", ctx.tenant().unwrap_or("none"));
    RAN.lock().unwrap().push(seen.clone());
    seen
}

/// Reads a ticket.
#[tool(name = "pv.read", effect = "read", version = "1.0")]
async fn pv_read(ctx: CallContext) -> Result<String, ToolError> {
    Ok(record("pv.read", &ctx))
}

/// Refunds an order: needs the `billing` scope.
#[tool(name = "pv.refund", effect = "read", version = "1.0", scopes = ["billing"])]
async fn pv_refund(ctx: CallContext) -> Result<String, ToolError> {
    Ok(record("pv.refund", &ctx))
}

/// Exports a report.
#[tool(name = "pv.export", effect = "read", version = "1.0")]
async fn pv_export(ctx: CallContext) -> Result<String, ToolError> {
    Ok(record("pv.export", &ctx))
}

const TOOLS: [&str; 3] = ["pv.export", "pv.read", "pv.refund"];

/// Three principals: Alice sees every tool and holds `billing`; Bob's view holds `pv.read` and `pv.refund` but
/// his token lacks `billing`; Carol's view holds `pv.export` (and a tool the server lacks), and her token lacks
/// `billing` too: her call of `pv.refund` is refused as unknown, not challenged for the scope. Each principal runs
/// for its own tenant.
async fn serve() -> (String, CancellationToken) {
    let tokens = StaticTokens::new()
        .token("t-alice", Principal::new("alice", ["billing"]))
        .token("t-bob", Principal::new("bob", Vec::<String>::new()))
        .token("t-carol", Principal::new("carol", Vec::<String>::new()));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let view = Registry::from_inventory().unwrap().view().names(TOOLS).build().unwrap();
    let executor = Executor::new(view.clone()).unwrap();
    let bob = PrincipalView::view(view.select().names(["pv.read", "pv.refund"]).build().unwrap()).tenant("globex");
    let server = McpServer::builder(executor)
        .principal_view(move |principal: &Principal| match principal.subject.as_str() {
            "alice" => PrincipalView::all().tenant("acme"),
            "bob" => bob.clone(),
            "carol" => PrincipalView::names(["pv.export", "pv.missing"]).tenant("initech"),
            _ => PrincipalView::none(),
        })
        .build()
        .unwrap();
    let service = server.http_service(HttpConfig::default().auth(ResourceServer::new(url.clone(), tokens)));
    let stop = CancellationToken::new();
    let shutdown = stop.clone();
    tokio::spawn(async move { service.serve(listener, "/mcp", shutdown).await });
    (url, stop)
}

/// The error a call of `tool` is answered with when the server lacks it.
fn unknown_tool_message(tool: &str) -> String {
    format!("no tool named {tool:?} is available; call one of the tools you were given, by its exact name")
}

/// The two eras' tests share [`RAN`]: one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn list_and_call(era: Era) {
    let _turn = ONE_AT_A_TIME.lock().await;
    let (url, stop) = serve().await;
    for (token, tenant, may_call) in [
        ("t-alice", "acme", &["pv.export", "pv.read", "pv.refund"][..]),
        ("t-bob", "globex", &["pv.read"][..]),
        ("t-carol", "initech", &["pv.export"][..]),
    ] {
        let mut peer = Peer::new(&url, Some(token), era);
        peer.open().await;
        assert_eq!(peer.list(1).await, may_call, "{era:?} {token}: the list is the allowlist");

        // A tool the server lacks: the reference for a tool outside the view.
        let missing = peer.call(2, "pv.missing", json!({})).await;
        assert_eq!(missing.status, 200, "{missing:?}");
        assert_eq!(missing.body["error"]["code"], -32602, "{missing:?}");
        assert_eq!(missing.body["error"]["message"], unknown_tool_message("pv.missing"), "{missing:?}");

        for (id, tool) in (3..).zip(TOOLS) {
            RAN.lock().unwrap().clear();
            let reply = peer.call(id, tool, json!({})).await;
            if may_call.contains(&tool) {
                assert_eq!(reply.status, 200, "{era:?} {token} {tool}: {reply:?}");
                let seen = format!("{tool}@{tenant}");
                assert_eq!(reply.call_text(), Some(Value::String(seen.clone())), "{era:?} {token} {tool}: {reply:?}");
                assert_eq!(*RAN.lock().unwrap(), [seen], "{era:?} {token} {tool}");
                continue;
            }
            assert!(RAN.lock().unwrap().is_empty(), "{era:?} {token} {tool}: nothing runs");
            if tool == "pv.refund" && token == "t-bob" {
                // In Bob's view, but his token lacks the scope: the scope challenge, as without a view.
                assert_eq!(reply.status, 403, "{era:?} {token} {tool}: {reply:?}");
                continue;
            }
            // Outside the view: answered exactly as a tool the server lacks (no scope challenge names it).
            assert_eq!(reply.status, missing.status, "{era:?} {token} {tool}: {reply:?}");
            let mut expected = missing.body.clone();
            expected["id"] = json!(id);
            expected["error"]["message"] = json!(unknown_tool_message(tool));
            assert_eq!(reply.body, expected, "{era:?} {token} {tool}");
        }
    }
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_principal_lists_and_calls_exactly_its_view_in_a_session() {
    list_and_call(Era::Session).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_principal_lists_and_calls_exactly_its_view_stateless() {
    list_and_call(Era::Stateless).await;
}

/// A tenant set by `call_options` wins over the view's; the view still decides what is listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_options_tenant_wins_over_the_views() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let tokens = StaticTokens::new().token("t-dave", Principal::new("dave", Vec::<String>::new()));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let view = Registry::from_inventory().unwrap().view().names(TOOLS).build().unwrap();
    let server = McpServer::builder(Executor::new(view).unwrap())
        .principal_view(|_: &Principal| PrincipalView::names(["pv.read"]).tenant("from-view"))
        .call_options(|_, _| keel_tools_core::executor::CallOptions::new().tenant("from-call-options"))
        .build()
        .unwrap();
    let service = server.http_service(HttpConfig::default().auth(ResourceServer::new(url.clone(), tokens)));
    let stop = CancellationToken::new();
    let shutdown = stop.clone();
    tokio::spawn(async move { service.serve(listener, "/mcp", shutdown).await });
    let peer = Peer::new(&url, Some("t-dave"), Era::Stateless);
    assert_eq!(peer.list(1).await, ["pv.read"]);
    RAN.lock().unwrap().clear();
    let reply = peer.call(2, "pv.read", json!({})).await;
    assert_eq!(reply.call_text(), Some(json!("pv.read@from-call-options")), "{reply:?}");
    let hidden = peer.call(3, "pv.export", json!({})).await;
    assert_eq!(hidden.body["error"]["message"], unknown_tool_message("pv.export"), "{hidden:?}");
    assert_eq!(*RAN.lock().unwrap(), ["pv.read@from-call-options"], "only the visible call ran");
    stop.cancel();
}
