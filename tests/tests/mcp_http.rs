//! MCP over Streamable HTTP at the transport level: socket options of both ends, calls of one session running
//! concurrently with their notifications in order, and the session cap and idle expiry. Nothing here asserts a
//! duration: each property is checked by what the peers observe (a socket option, which call finished while
//! another was held, what each stream carried, which status a request got).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use keel_tests::http::{RawClient, SESSION_REVISION, call_request, initialize_request, stateless_call_request};
use keel_tests::sockets::tcp_sockets;
use keel_tools_core::{CallContext, Executor, Registry, ToolCall, tool};
use keel_tools_mcp::rmcp::ServiceExt;
use keel_tools_mcp::rmcp::model::CallToolRequestParams;
use keel_tools_mcp::rmcp::transport::StreamableHttpClientTransport;
use keel_tools_mcp::{HttpConfig, McpHttpService, McpServer, RemoteServer};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;
use tokio::sync::{Barrier, Notify, Semaphore};

#[derive(Serialize, JsonSchema)]
struct Sum {
    sum: i64,
}

/// Adds two numbers.
#[tool(effect = "read", version = "1.0")]
fn hx_add(a: i64, b: i64) -> Sum {
    Sum { sum: a + b }
}

/// Signalled when `hx_held` has started; `hx_held` finishes once a permit is added here.
static HELD_STARTED: Notify = Notify::const_new();
static HELD_RELEASE: Semaphore = Semaphore::const_new(0);
static HELD_FINISHED: AtomicUsize = AtomicUsize::new(0);

#[derive(Serialize, JsonSchema)]
struct Label {
    label: String,
}

/// Waits until the test lets it finish.
#[tool(effect = "read", version = "1.0")]
async fn hx_held() -> Label {
    HELD_STARTED.notify_one();
    HELD_RELEASE.acquire().await.expect("semaphore open").forget();
    HELD_FINISHED.fetch_add(1, Ordering::SeqCst);
    Label { label: "released".to_owned() }
}

/// Both `hx_steps` calls meet here before they report, so their notifications interleave.
static STEPS_MEET: std::sync::LazyLock<Barrier> = std::sync::LazyLock::new(|| Barrier::new(2));
const STEPS: u32 = 20;

/// Reports `STEPS` steps of progress, yielding between them, then answers with its label.
#[tool(effect = "read", version = "1.0")]
async fn hx_steps(label: String, ctx: CallContext) -> Label {
    STEPS_MEET.wait().await;
    for i in 1..=STEPS {
        ctx.progress(f64::from(i), Some(f64::from(STEPS)), Some(&label));
        tokio::task::yield_now().await;
    }
    Label { label }
}

const TOOLS: &[&str] = &["hx_add", "hx_held", "hx_steps"];

fn server() -> McpServer {
    let registry = Registry::from_inventory().expect("registry");
    let executor = Executor::new(registry.view().names(TOOLS.iter().copied()).build().unwrap()).unwrap();
    McpServer::new(executor).expect("server")
}

/// Serves `service` on a loopback port until the returned token is cancelled.
async fn serve(service: McpHttpService) -> (std::net::SocketAddr, tokio_util::sync::CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().unwrap();
    assert!(addr.ip().is_loopback());
    let shutdown = tokio_util::sync::CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move { service.serve(listener, "/mcp", stop).await });
    (addr, shutdown)
}

fn with_deadline<F: std::future::Future>(f: F) -> tokio::time::Timeout<F> {
    tokio::time::timeout(Duration::from_secs(60), f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_ends_of_an_mcp_http_connection_have_tcp_nodelay() {
    with_deadline(async {
        let service = server().http_service(HttpConfig::default());
        let (addr, shutdown) = serve(service).await;

        // The server side: the socket it accepted for a client that did not ask for anything.
        let mut raw = RawClient::connect(addr, "/mcp").await.expect("connect");
        let session = raw.open_session("raw").await.expect("session");
        let body = call_request(1, "hx_add", json!({"a": 1, "b": 2}), None);
        let answer = raw.post(Some(&session), Some(SESSION_REVISION), &body).await.expect("call");
        assert_eq!(answer.status, 200);
        let sockets = tcp_sockets();
        let accepted: Vec<_> = sockets.iter().filter(|s| s.local == addr && s.peer == Some(raw.local)).collect();
        assert_eq!(accepted.len(), 1, "the server's socket of the raw connection, among {sockets:?}");
        assert!(accepted[0].nodelay, "TCP_NODELAY on the accepted socket: {:?}", accepted[0]);
        // The raw client itself did not set it: the check can tell the two apart.
        let ours: Vec<_> = sockets.iter().filter(|s| s.local == raw.local).collect();
        assert_eq!(ours.len(), 1);
        assert!(!ours[0].nodelay, "the raw client's own socket: {:?}", ours[0]);

        // The client side: keel's forwarder connection (reqwest), and the server's end of it.
        let remote = RemoteServer::connect_http("peer", &format!("http://{addr}/mcp")).await.expect("connect_http");
        let imported = remote.import_unpinned().await.expect("import");
        let registry = Registry::builder().tools(imported.into_definitions()).build().expect("registry");
        let executor = Executor::new(registry.view().names(["peer.hx_add"]).build().unwrap()).unwrap();
        let r = executor.call(ToolCall::new("c1", "peer.hx_add", json!({"a": 2, "b": 3}))).await;
        assert_eq!(r.data(), Some(&json!({"sum": 5})), "a call through the forwarder: {r:?}");
        let sockets = tcp_sockets();
        let clients: Vec<_> = sockets.iter().filter(|s| s.peer == Some(addr) && s.local != raw.local).collect();
        assert!(!clients.is_empty(), "the forwarder's connections, among {sockets:?}");
        assert!(clients.iter().all(|s| s.nodelay), "TCP_NODELAY on the forwarder's sockets: {clients:?}");
        let served: Vec<_> = sockets.iter().filter(|s| s.local == addr && s.peer.is_some()).collect();
        assert!(served.len() > 1 && served.iter().all(|s| s.nodelay), "every accepted socket: {served:?}");
        drop(remote);
        shutdown.cancel();
    })
    .await
    .expect("the test finishes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_call_does_not_hold_back_a_fast_call_of_the_same_session() {
    with_deadline(async {
        let (addr, shutdown) = serve(server().http_service(HttpConfig::default())).await;
        let transport = StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
        let client = Arc::new(().serve(transport).await.expect("handshake"));

        let held = {
            let client = client.clone();
            tokio::spawn(async move { client.peer().call_tool(CallToolRequestParams::new("hx_held")).await })
        };
        HELD_STARTED.notified().await;
        // The held call is running and will not finish until released. A call of the same session answers now.
        for i in 0..10 {
            let args = json!({"a": i, "b": 1}).as_object().cloned().unwrap();
            let r = client.peer().call_tool(CallToolRequestParams::new("hx_add").with_arguments(args)).await;
            assert_eq!(r.expect("fast call").structured_content, Some(json!({"sum": i + 1})));
        }
        assert_eq!(HELD_FINISHED.load(Ordering::SeqCst), 0, "the held call finished before it was released");
        assert!(!held.is_finished());

        HELD_RELEASE.add_permits(1);
        let r = held.await.expect("join").expect("held call");
        assert_eq!(r.structured_content, Some(json!({"label": "released"})));
        assert_eq!(HELD_FINISHED.load(Ordering::SeqCst), 1);
        shutdown.cancel();
    })
    .await
    .expect("the test finishes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_stream_carries_its_own_progress_in_order_then_its_result() {
    with_deadline(async {
        let (addr, shutdown) = serve(server().http_service(HttpConfig::default())).await;
        let mut setup = RawClient::connect(addr, "/mcp").await.expect("connect");
        let session = setup.open_session("steps").await.expect("session");

        // Two calls of one session, on two connections, in flight together (they meet inside the tool).
        let call = |id: u64, label: &'static str| {
            let session = session.clone();
            async move {
                let mut c = RawClient::connect(addr, "/mcp").await.expect("connect");
                let body = call_request(id, "hx_steps", json!({"label": label}), Some(label));
                c.post(Some(&session), Some(SESSION_REVISION), &body).await.expect("call")
            }
        };
        let (a, b) = tokio::join!(call(1, "a"), call(2, "b"));
        for (answer, id, label) in [(a, 1, "a"), (b, 2, "b")] {
            assert_eq!(answer.status, 200);
            let messages = answer.messages();
            let (last, notes) = messages.split_last().expect("messages");
            assert_eq!(last["id"], id, "the stream ends with its own result: {last}");
            assert_eq!(last["result"]["structuredContent"], json!({"label": label}));
            let progress: Vec<f64> = notes
                .iter()
                .map(|n| {
                    assert_eq!(n["method"], "notifications/progress", "only this call's progress: {n}");
                    assert_eq!(n["params"]["progressToken"], label, "another call's notification: {n}");
                    n["params"]["progress"].as_f64().unwrap()
                })
                .collect();
            let expected: Vec<f64> = (1..=STEPS).map(f64::from).collect();
            assert_eq!(progress, expected, "call {label}: every step, in order, before the result");
        }
        shutdown.cancel();
    })
    .await
    .expect("the test finishes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_session_cap_initialize_gets_503_and_open_sessions_keep_working() {
    with_deadline(async {
        let service = server().http_service(
            HttpConfig::default().max_sessions(3).session_idle_timeout(None).retry_after(Duration::from_millis(1500)),
        );
        assert_eq!(service.max_sessions(), 3);
        let (addr, shutdown) = serve(service.clone()).await;
        let mut c = RawClient::connect(addr, "/mcp").await.expect("connect");

        let mut open = Vec::new();
        for i in 0..3 {
            open.push(c.open_session(&format!("c{i}")).await.expect("a session under the cap"));
        }
        assert_eq!(service.sessions(), 3);
        for _ in 0..5 {
            let refused = c.initialize("late").await.expect("answer");
            assert_eq!(refused.status, 503, "{refused:?}");
            assert_eq!(refused.headers.get("retry-after").map(|v| v.to_str().unwrap()), Some("2"));
            assert!(refused.session().is_none());
            assert!(String::from_utf8_lossy(&refused.body).contains("limit of 3 open sessions"));
        }
        assert_eq!(service.sessions(), 3, "a refusal opens nothing");

        // The open sessions still answer; so do stateless requests, which hold no session.
        for (i, session) in open.iter().enumerate() {
            let body = call_request(7, "hx_add", json!({"a": i, "b": 10}), None);
            let answer = c.post(Some(session), Some(SESSION_REVISION), &body).await.expect("call");
            assert_eq!(answer.messages().last().unwrap()["result"]["structuredContent"], json!({"sum": i + 10}));
        }
        let body = stateless_call_request(8, "hx_add", json!({"a": 20, "b": 22}));
        let answer = c.post_stateless(&body).await.expect("stateless call");
        assert_eq!(answer.status, 200, "{answer:?}");
        assert_eq!(answer.messages().last().unwrap()["result"]["structuredContent"], json!({"sum": 42}));
        // A body that is no initialize is left to the SDK, which answers as it always does.
        let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        let answer = c.post(None, Some(SESSION_REVISION), &list).await.expect("answer");
        assert_ne!(answer.status, 503, "{answer:?}");

        // Closing a session frees its place.
        let deleted = c.delete(&open.remove(0)).await.expect("delete");
        assert!(deleted.status.is_success(), "{deleted:?}");
        assert_eq!(service.sessions(), 2);
        let again = c.initialize("again").await.expect("answer");
        assert_eq!(again.status, 200);
        assert!(again.session().is_some());
        assert_eq!(service.sessions(), 3);
        shutdown.cancel();
    })
    .await
    .expect("the test finishes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_expires_and_its_client_is_told_to_start_again() {
    with_deadline(async {
        let service = server()
            .http_service(HttpConfig::default().max_sessions(1).session_idle_timeout(Some(Duration::from_millis(300))));
        let (addr, shutdown) = serve(service.clone()).await;
        let mut c = RawClient::connect(addr, "/mcp").await.expect("connect");
        let session = c.open_session("idle").await.expect("session");
        assert_eq!(service.sessions(), 1);
        assert_eq!(c.initialize("second").await.expect("answer").status, 503);

        // Wait (bounded) for the expiry; no duration is asserted.
        while service.sessions() > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let body = call_request(1, "hx_add", json!({"a": 1, "b": 1}), None);
        let gone = c.post(Some(&session), Some(SESSION_REVISION), &body).await.expect("answer");
        assert_eq!(gone.status, 404, "an expired session is unknown: {gone:?}");
        let fresh = c.post(None, None, &initialize_request("again")).await.expect("answer");
        assert_eq!(fresh.status, 200, "its place is free again");
        shutdown.cancel();
    })
    .await
    .expect("the test finishes");
}

#[test]
fn default_limits_are_stated() {
    let config = HttpConfig::default();
    assert_eq!(config.get_max_sessions(), keel_tools_mcp::http::DEFAULT_MAX_SESSIONS);
    assert_eq!(config.get_session_idle_timeout(), Some(keel_tools_mcp::http::DEFAULT_SESSION_IDLE_TIMEOUT));
}
