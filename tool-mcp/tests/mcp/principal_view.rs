//! One hook maps each principal of a protected server to its tenant and its tools
//! (`McpServerBuilder::principal_view`), over real HTTP on loopback in both protocol eras: `tools/list` is exactly
//! the principal's allowlist (its view and its scopes), a call of a tool outside its view is answered exactly as
//! one of a tool the server lacks and runs nothing, and the view's tenant is the call's.
//!
//! `cargo test -p keel-tools-mcp --features auth --test mcp -- principal_view::`

use std::sync::Mutex;

use crate::common::{Era, Peer};
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
    let (url, _, stop) = serve_with_server().await;
    (url, stop)
}

/// [`serve`], and the server (to update it).
async fn serve_with_server() -> (String, McpServer, CancellationToken) {
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
    (url, server, stop)
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

/// A session client that reports each `notifications/tools/list_changed` on its channel.
#[derive(Clone)]
struct Watcher(tokio::sync::mpsc::UnboundedSender<()>);

impl rmcp::ClientHandler for Watcher {
    async fn on_tool_list_changed(&self, _: rmcp::service::NotificationContext<rmcp::RoleClient>) {
        let _ = self.0.send(());
    }
}

/// Opens a 2025-11-25 session with `token` (rmcp's client, which listens for notifications); the client, and where
/// its `tools/list_changed` notifications arrive.
async fn watch(
    url: &str,
    token: &str,
) -> (rmcp::service::RunningService<rmcp::RoleClient, Watcher>, tokio::sync::mpsc::UnboundedReceiver<()>) {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
    let client = Watcher(tx).serve(StreamableHttpClientTransport::from_config(config)).await.unwrap();
    (client, rx)
}

/// Whether a `tools/list_changed` arrives within `wait`.
async fn changed(rx: &mut tokio::sync::mpsc::UnboundedReceiver<()>, wait: std::time::Duration) -> bool {
    tokio::time::timeout(wait, rx.recv()).await.is_ok_and(|got| got.is_some())
}

/// `McpServer::update` tells a principal only when what it is listed changed: a tool leaving the server is news to
/// the principals who saw it, and to nobody else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_change_is_sent_only_to_the_principals_whose_list_changed() {
    use std::time::Duration;
    let _turn = ONE_AT_A_TIME.lock().await;
    let (url, server, stop) = serve_with_server().await;
    let (alice, mut to_alice) = watch(&url, "t-alice").await;
    let (bob, mut to_bob) = watch(&url, "t-bob").await;
    let (carol, mut to_carol) = watch(&url, "t-carol").await;
    let names = |c: &rmcp::service::RunningService<rmcp::RoleClient, Watcher>| {
        let c = c.peer().clone();
        async move {
            let tools = c.list_all_tools().await.unwrap();
            tools.into_iter().map(|t| t.name.to_string()).collect::<Vec<_>>()
        }
    };
    assert_eq!(names(&bob).await, ["pv.read"]);
    let registry = Registry::from_inventory().unwrap();

    // pv.export leaves: Alice and Carol saw it, Bob did not.
    let view = registry.view().names(["pv.read", "pv.refund"]).build().unwrap();
    assert!(server.update(Executor::new(view).unwrap()).await.unwrap(), "the server's list changed");
    assert!(changed(&mut to_alice, Duration::from_secs(10)).await, "Alice saw pv.export go");
    assert!(changed(&mut to_carol, Duration::from_secs(10)).await, "Carol saw pv.export go");
    assert!(!changed(&mut to_bob, Duration::from_millis(500)).await, "Bob's list is the same");
    assert_eq!(names(&carol).await, Vec::<String>::new());

    // pv.refund leaves: only Alice, who holds `billing`, was listed it (Bob's view holds it, his scopes do not).
    let view = registry.view().names(["pv.read"]).build().unwrap();
    assert!(server.update(Executor::new(view).unwrap()).await.unwrap());
    assert!(changed(&mut to_alice, Duration::from_secs(10)).await, "Alice saw pv.refund go");
    assert!(!changed(&mut to_bob, Duration::from_millis(500)).await, "Bob was never listed pv.refund");
    assert!(!changed(&mut to_carol, Duration::from_millis(100)).await, "nor was Carol");

    // An explicit notification still goes to everyone.
    assert_eq!(server.notify_tool_list_changed().await, 3);
    for (who, rx) in [("alice", &mut to_alice), ("bob", &mut to_bob), ("carol", &mut to_carol)] {
        assert!(changed(rx, Duration::from_secs(10)).await, "{who} told");
    }
    assert_eq!(names(&alice).await, ["pv.read"]);
    for client in [alice, bob, carol] {
        let _ = client.cancel().await;
    }
    stop.cancel();
}
