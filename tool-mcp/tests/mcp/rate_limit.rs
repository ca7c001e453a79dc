//! The MCP HTTP server's rate limits (`HttpConfig::rate_limits`), over real HTTP on loopback in both protocol eras:
//! per principal on a protected server, per tool, per client address on a server that is not protected; a request
//! past a limit is answered `429` with `Retry-After` and a JSON-RPC error carrying its id, runs nothing, opens no
//! session, and the same request passes once the `Retry-After` has gone by.
//!
//! `cargo test -p keel-tools-mcp --features auth --test mcp -- rate_limit::`

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::Duration;

use crate::common::{Era, Peer, Reply};
use keel_tools_core::{Executor, Registry, ToolError, tool};
use keel_tools_mcp::McpHttpService;
use keel_tools_mcp::http::auth::{Principal, ResourceServer, StaticTokens};
use keel_tools_mcp::http::{HttpConfig, Quota, RATE_LIMITED, RateLimits};
use keel_tools_mcp::server::McpServer;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// How many times each label was run, by either tool.
static RAN: Mutex<Option<HashMap<String, usize>>> = Mutex::new(None);

fn record(label: String) -> String {
    *RAN.lock().unwrap().get_or_insert_with(HashMap::new).entry(label.clone()).or_default() += 1;
    label
}

fn ran(label: &str) -> usize {
    RAN.lock().unwrap().as_ref().and_then(|m| m.get(label).copied()).unwrap_or(0)
}

/// A tool with a rate limit of its own.
#[tool(name = "rl.limited", effect = "read", version = "1.0")]
async fn rl_limited(label: String) -> Result<String, ToolError> {
    Ok(record(label))
}

/// A tool without one.
#[tool(name = "rl.free", effect = "read", version = "1.0")]
async fn rl_free(label: String) -> Result<String, ToolError> {
    Ok(record(label))
}

/// One request back each second, `burst` at once.
fn every_second(burst: u32) -> Quota {
    Quota::with_period(Duration::from_secs(1)).unwrap().burst(NonZeroU32::new(burst).unwrap())
}

/// Serves both tools with `limits`, protected by three fixed tokens (`t-alice`, `t-bob`, `t-carol`) or not at
/// all; the endpoint's URL and the service (to count its sessions).
async fn serve(limits: RateLimits, protected: bool) -> (String, McpHttpService, CancellationToken) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let view = Registry::from_inventory().unwrap().view().names(["rl.limited", "rl.free"]).build().unwrap();
    let server = McpServer::new(Executor::new(view).unwrap()).unwrap();
    let mut config = HttpConfig::default().rate_limits(limits);
    if protected {
        let tokens = StaticTokens::new()
            .token("t-alice", Principal::new("alice", Vec::<String>::new()))
            .token("t-bob", Principal::new("bob", Vec::<String>::new()))
            .token("t-carol", Principal::new("carol", Vec::<String>::new()));
        config = config.auth(ResourceServer::new(url.clone(), tokens));
    }
    let service = server.http_service(config);
    let stop = CancellationToken::new();
    let (serving, shutdown) = (service.clone(), stop.clone());
    tokio::spawn(async move { serving.serve(listener, "/mcp", shutdown).await });
    (url, service, stop)
}

/// A call that ran: `200` and the label echoed.
#[track_caller]
fn served(reply: &Reply, label: &str) {
    assert_eq!(reply.status, 200, "{label}: {reply:?}");
    assert_eq!(reply.call_text(), Some(json!(label)), "{label}: {reply:?}");
    assert_eq!(ran(label), 1, "{label} ran once");
}

/// A refusal of a rate limit: `429`, a `Retry-After` of whole seconds (at least 1), the JSON-RPC error with the
/// request's id; its seconds.
#[track_caller]
fn limited(reply: &Reply, id: u64, tool: Option<&str>) -> u64 {
    assert_eq!(reply.status, 429, "{reply:?}");
    let after = reply.retry_after_s().unwrap_or_else(|| panic!("a Retry-After of whole seconds: {reply:?}"));
    assert!((1..=2).contains(&after), "{reply:?}");
    assert_eq!(reply.body["jsonrpc"], "2.0", "{reply:?}");
    assert_eq!(reply.body["id"], json!(id), "{reply:?}");
    assert_eq!(reply.body["error"]["code"], json!(RATE_LIMITED), "{reply:?}");
    assert_eq!(reply.body["error"]["data"]["code"], "rate_limited", "{reply:?}");
    assert_eq!(reply.body["error"]["data"]["retry_after_s"], json!(after), "{reply:?}");
    assert_eq!(reply.body["error"]["data"].get("tool").and_then(Value::as_str), tool, "{reply:?}");
    after
}

/// Per principal: Alice's requests past her quota are refused and run nothing (a refused `initialize` opens no
/// session), Bob's are served, and Alice's pass again once her `Retry-After` has gone by.
async fn per_principal(era: Era) {
    let tag = format!("{era:?}-principal");
    let label = |what: &str| format!("{tag}-{what}");
    let (url, service, stop) = serve(RateLimits::new().per_principal(every_second(2)), true).await;
    let mut alice = Peer::new(&url, Some("t-alice"), era);
    let mut bob = Peer::new(&url, Some("t-bob"), era);
    // Two requests each: in a session, `initialize` and one call; stateless, two calls.
    if let Some(opened) = alice.open().await {
        assert_eq!(opened.status, 200, "{opened:?}");
    } else {
        served(&alice.call(1, "rl.free", json!({"label": label("alice-0")})).await, &label("alice-0"));
    }
    served(&alice.call(2, "rl.free", json!({"label": label("alice-1")})).await, &label("alice-1"));
    let refused = alice.call(3, "rl.free", json!({"label": label("alice-2")})).await;
    let after = limited(&refused, 3, None);
    assert_eq!(ran(&label("alice-2")), 0, "a refused call runs nothing");
    // A refused `initialize` opens no session.
    let sessions = service.sessions();
    let mut again = Peer::new(&url, Some("t-alice"), Era::Session);
    let reopened = again.open().await.unwrap();
    limited(&reopened, 0, None);
    assert!(reopened.session.is_none(), "{reopened:?}");
    assert_eq!(service.sessions(), sessions, "no session was made");

    bob.open().await;
    served(&bob.call(4, "rl.free", json!({"label": label("bob")})).await, &label("bob"));

    tokio::time::sleep(Duration::from_secs(after)).await;
    served(&alice.call(5, "rl.free", json!({"label": label("alice-3")})).await, &label("alice-3"));
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_past_its_quota_is_refused_and_another_is_served_in_a_session() {
    per_principal(Era::Session).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_past_its_quota_is_refused_and_another_is_served_stateless() {
    per_principal(Era::Stateless).await;
}

/// Per tool: the limited tool's second call is refused and runs nothing, the other tool is served as often as
/// asked, another principal's calls of the limited tool are counted apart, and the call passes once the
/// `Retry-After` has gone by.
async fn per_tool(era: Era) {
    let tag = format!("{era:?}-tool");
    let label = |what: &str| format!("{tag}-{what}");
    let (url, _service, stop) = serve(RateLimits::new().per_tool("rl.limited", every_second(1)), true).await;
    let mut alice = Peer::new(&url, Some("t-alice"), era);
    let mut carol = Peer::new(&url, Some("t-carol"), era);
    alice.open().await;
    carol.open().await;
    served(&alice.call(1, "rl.limited", json!({"label": label("alice-0")})).await, &label("alice-0"));
    let refused = alice.call(2, "rl.limited", json!({"label": label("alice-1")})).await;
    let after = limited(&refused, 2, Some("rl.limited"));
    assert_eq!(ran(&label("alice-1")), 0, "a refused call runs nothing");
    for i in 0..4 {
        let free = label(&format!("free-{i}"));
        served(&alice.call(10 + i, "rl.free", json!({"label": free})).await, &free);
    }
    served(&carol.call(3, "rl.limited", json!({"label": label("carol")})).await, &label("carol"));

    tokio::time::sleep(Duration::from_secs(after)).await;
    served(&alice.call(4, "rl.limited", json!({"label": label("alice-2")})).await, &label("alice-2"));
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tool_is_limited_per_principal_and_another_is_not_in_a_session() {
    per_tool(Era::Session).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tool_is_limited_per_principal_and_another_is_not_stateless() {
    per_tool(Era::Stateless).await;
}

/// A server that is not protected counts each client address apart: the second call from 127.0.0.1 is refused,
/// one from 127.0.0.2 is served; a request whose body is no JSON-RPC object is counted, and refused with `id: null`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_server_limits_each_client_address() {
    let (url, _service, stop) = serve(RateLimits::new().per_principal(every_second(1)), false).await;
    let here = Peer::from(&url, None, Era::Stateless, Some(IpAddr::from([127, 0, 0, 1])));
    let there = Peer::from(&url, None, Era::Stateless, Some(IpAddr::from([127, 0, 0, 2])));
    served(&here.call(1, "rl.free", json!({"label": "ip-here-0"})).await, "ip-here-0");
    let refused = here.call(2, "rl.free", json!({"label": "ip-here-1"})).await;
    limited(&refused, 2, None);
    assert_eq!(ran("ip-here-1"), 0);
    served(&there.call(3, "rl.free", json!({"label": "ip-there"})).await, "ip-there");

    let garbage = reqwest::Client::builder()
        .local_address(IpAddr::from([127, 0, 0, 2]))
        .build()
        .unwrap()
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body("[not json")
        .send()
        .await
        .unwrap();
    assert_eq!(garbage.status(), 429);
    let body: Value = garbage.json().await.unwrap();
    assert_eq!(body["id"], Value::Null, "{body}");
    assert_eq!(body["error"]["code"], json!(RATE_LIMITED), "{body}");
    stop.cancel();
}
