//! What binds an MCP call to its caller:
//!
//! * the idempotency key: two sessions (Streamable HTTP, or stdio-like pipes) that send `tools/call` with the same
//!   JSON-RPC id get two keys, and a retry in one session under its id keeps its key; two stateless requests never
//!   share one; ids keel generates for a provider that sends none are keyed apart run by run;
//! * `requestState`: replayed under another tenant it fails `-32602` and no handler runs; it opens on another
//!   replica given the same key, and after a rotation that keeps the old key as the previous one;
//! * the task cap: past `max_tasks`, a call that would become a task is refused with a retry hint, while the
//!   admitted one completes.
//!
//! HTTP servers listen on 127.0.0.1 only.

#![allow(deprecated)] // Elicitation form results go through rmcp's deprecated-from-2026-07-28 types.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use keel_tests::http::{RawClient, SESSION_REVISION, STATELESS_REVISION, call_request};
use keel_tools_core::executor::CallOptions;
use keel_tools_core::runs::Run;
use keel_tools_core::{CallContext, Executor, Registry, ToolCall, ToolError, tool};
use keel_tools_mcp::rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ElicitRequestParams, ElicitResult, GetTaskParams,
    Implementation, InitializeRequestParams, ProtocolVersion,
};
use keel_tools_mcp::rmcp::service::{RequestContext, RunningService};
use keel_tools_mcp::rmcp::{ClientHandler, ErrorData, RoleClient, RoleServer, ServiceError};
use keel_tools_mcp::{HttpConfig, McpServer};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

/// A call's idempotency key, and the key of its first round (from its round state) when it had rounds.
#[derive(Serialize, JsonSchema)]
struct Keyed {
    key: String,
    call_id: String,
    first_round_key: Option<String>,
}

/// Returns its call's idempotency key.
#[tool(effect = "read", version = "1.0")]
fn bind_key(ctx: CallContext) -> Keyed {
    Keyed { key: ctx.idempotency_key().to_owned(), call_id: ctx.call_id().to_owned(), first_round_key: None }
}

static REPLAY_RUNS: AtomicUsize = AtomicUsize::new(0);
static REPLICA_RUNS: AtomicUsize = AtomicUsize::new(0);

/// Asks whether to go on, then returns its key (and its first round's); counts its runs in `REPLAY_RUNS`.
#[tool(effect = "read", version = "1.0")]
async fn bind_confirm(ctx: CallContext, what: String) -> Result<Keyed, ToolError> {
    REPLAY_RUNS.fetch_add(1, Ordering::SeqCst);
    confirm(ctx, what).await
}

/// As `bind_confirm`, counting its runs in `REPLICA_RUNS`.
#[tool(effect = "read", version = "1.0")]
async fn bind_replicated(ctx: CallContext, what: String) -> Result<Keyed, ToolError> {
    REPLICA_RUNS.fetch_add(1, Ordering::SeqCst);
    confirm(ctx, what).await
}

async fn confirm(ctx: CallContext, what: String) -> Result<Keyed, ToolError> {
    let first_round_key = match ctx.round_state() {
        Some(state) => state["key"].as_str().map(str::to_owned),
        None => {
            ctx.set_round_state(json!({"key": ctx.idempotency_key()}));
            None
        }
    };
    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
    ctx.elicit("ok", format!("Go on with {what}?"), schema).await?;
    Ok(Keyed { key: ctx.idempotency_key().to_owned(), call_id: ctx.call_id().to_owned(), first_round_key })
}

/// Sleeps, as a task when the client runs tasks.
#[tool(effect = "read", version = "1.0", task = "optional")]
async fn bind_slow(ms: u64) -> String {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    format!("slept {ms}")
}

const TOOLS: &[&str] = &["bind_key", "bind_confirm", "bind_replicated", "bind_slow"];

fn executor() -> Executor {
    let registry = Registry::from_inventory().expect("registry");
    Executor::new(registry.view().names(TOOLS.iter().copied()).build().expect("view")).expect("executor")
}

/// The tenant and principal a request names in its `x-tenant` and `x-principal` headers (a host would
/// authenticate them; the test trusts them).
fn from_headers(_: &CallToolRequestParams, context: &RequestContext<RoleServer>) -> CallOptions {
    let mut options = CallOptions::new();
    let parts = context.extensions.get::<hyper::http::request::Parts>();
    let header = |name: &str| parts.and_then(|p| p.headers.get(name)).and_then(|v| v.to_str().ok()).map(str::to_owned);
    if let Some(tenant) = header("x-tenant") {
        options = options.tenant(tenant);
    }
    if let Some(principal) = header("x-principal") {
        options = options.principal(principal);
    }
    options
}

async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), f).await.expect("test timed out")
}

/// Serves `server` over Streamable HTTP on a loopback port until the token is cancelled.
async fn serve_http(server: &McpServer) -> (SocketAddr, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let service = server.http_service(HttpConfig::default());
    let stop = shutdown.clone();
    tokio::spawn(async move { service.serve(listener, "/mcp", stop).await });
    (addr, shutdown)
}

/// The JSON-RPC response among an answer's messages.
fn response(messages: Vec<Value>) -> Value {
    messages.into_iter().rev().find(|m| m.get("result").is_some() || m.get("error").is_some()).unwrap_or_default()
}

/// The key a `bind_key` call answered with.
fn key_of(response: &Value) -> String {
    response["result"]["structuredContent"]["key"].as_str().unwrap_or_else(|| panic!("no key in {response}")).to_owned()
}

/// A `bind_key` call with JSON-RPC id `id` in `session`: the response.
async fn in_session(client: &mut RawClient, session: &str, id: u64) -> Value {
    let call = call_request(id, "bind_key", json!({}), None);
    let answer = client.post(Some(session), Some(SESSION_REVISION), &call).await.expect("tools/call");
    response(answer.messages())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_http_sessions_sending_the_same_jsonrpc_id_get_two_keys_and_a_retry_keeps_its_own() {
    within(async {
        let server = McpServer::new(executor()).expect("server");
        let (addr, shutdown) = serve_http(&server).await;
        let mut a = RawClient::connect(addr, "/mcp").await.expect("connect");
        let mut b = RawClient::connect(addr, "/mcp").await.expect("connect");
        let session_a = a.open_session("client-a").await.expect("session a");
        let session_b = b.open_session("client-b").await.expect("session b");
        let first_a = in_session(&mut a, &session_a, 7).await;
        let first_b = in_session(&mut b, &session_b, 7).await;
        assert_eq!((first_a["result"]["structuredContent"]["call_id"].as_str()), Some("7"), "{first_a}");
        assert_eq!(
            first_a["result"]["structuredContent"]["call_id"],
            first_b["result"]["structuredContent"]["call_id"]
        );
        assert_ne!(key_of(&first_a), key_of(&first_b), "two clients, one JSON-RPC id: two keys");
        // The same request again in session A: its key.
        let retry_a = in_session(&mut a, &session_a, 7).await;
        assert_eq!(key_of(&retry_a), key_of(&first_a), "a retry in its session keeps its key");

        // Stateless requests (2026-07-28) are streams of their own: the same id twice, two keys.
        let stateless = stateless_request(7, "bind_key", json!({}), None);
        let one = response(a.post_stateless(&stateless).await.expect("stateless").messages());
        let two = response(b.post_stateless(&stateless).await.expect("stateless").messages());
        assert_ne!(key_of(&one), key_of(&two), "two stateless requests never share a key");
        shutdown.cancel();
    })
    .await;
}

/// One stdio-like session: newline-delimited JSON-RPC over an in-process pipe, served by `McpServer::serve_io`.
struct Pipe {
    write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    lines: tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
}

impl Pipe {
    async fn open(server: &McpServer) -> Pipe {
        let (server_io, client_io) = tokio::io::duplex(1 << 16);
        let (server_read, server_write) = tokio::io::split(server_io);
        let server = server.clone();
        tokio::spawn(async move { server.serve_io(server_read, server_write).await });
        let (read, write) = tokio::io::split(client_io);
        let mut pipe = Pipe { write, lines: BufReader::new(read).lines() };
        let init = keel_tests::http::initialize_request("pipe");
        pipe.send(&init).await;
        pipe.answer().await;
        pipe.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        pipe
    }

    async fn send(&mut self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.write.write_all(line.as_bytes()).await.expect("write");
    }

    /// The next response (notifications are skipped).
    async fn answer(&mut self) -> Value {
        loop {
            let line = self.lines.next_line().await.expect("read").expect("the session ended");
            let message: Value = serde_json::from_str(&line).expect("JSON");
            if message.get("id").is_some() {
                return message;
            }
        }
    }

    async fn call(&mut self, id: u64) -> Value {
        self.send(&call_request(id, "bind_key", json!({}), None)).await;
        self.answer().await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stdio_sessions_sending_the_same_jsonrpc_id_get_two_keys_and_a_retry_keeps_its_own() {
    within(async {
        let server = McpServer::new(executor()).expect("server");
        let mut a = Pipe::open(&server).await;
        let mut b = Pipe::open(&server).await;
        let first_a = a.call(7).await;
        let first_b = b.call(7).await;
        assert_ne!(key_of(&first_a), key_of(&first_b), "two sessions, one JSON-RPC id: two keys");
        assert_eq!(key_of(&a.call(7).await), key_of(&first_a), "a retry in its session keeps its key");
        assert_ne!(key_of(&a.call(8).await), key_of(&first_a), "another id is another call");
    })
    .await;
}

/// A stateless `tools/call` whose client can answer elicitations, carrying `state` and its answers when given.
fn stateless_request(id: u64, tool: &str, arguments: Value, state: Option<&str>) -> Value {
    let mut params = json!({
        "name": tool, "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": STATELESS_REVISION,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
            "io.modelcontextprotocol/clientInfo": {"name": "binding", "version": "0.1"}
        }
    });
    if let Some(state) = state {
        params["requestState"] = json!(state);
        params["inputResponses"] = json!({"ok": {"action": "accept", "content": {"ok": true}}});
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

/// POSTs a stateless request with the caller's headers.
async fn post_as(client: &mut RawClient, who: &[(&str, &str)], body: &Value) -> Value {
    let mut headers = vec![("mcp-method", "tools/call"), ("mcp-name", body["params"]["name"].as_str().unwrap())];
    headers.extend_from_slice(who);
    let answer = client
        .request_with(hyper::Method::POST, None, Some(STATELESS_REVISION), &headers, Some(body))
        .await
        .expect("tools/call");
    response(answer.messages())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_state_replayed_under_another_tenant_fails_and_runs_nothing() {
    within(async {
        let server = McpServer::builder(executor()).call_options(from_headers).build().expect("server");
        let (addr, shutdown) = serve_http(&server).await;
        let mut client = RawClient::connect(addr, "/mcp").await.expect("connect");
        let acme = [("x-tenant", "acme")];
        let args = json!({"what": "the deploy"});

        let first = post_as(&mut client, &acme, &stateless_request(1, "bind_confirm", args.clone(), None)).await;
        let state = first["result"]["requestState"].as_str().unwrap_or_else(|| panic!("input required: {first}"));
        assert_eq!(REPLAY_RUNS.load(Ordering::SeqCst), 1);

        // Another tenant, or none: refused before the handler.
        for other in [&[("x-tenant", "globex")][..], &[][..], &[("x-tenant", "acme"), ("x-principal", "mallory")][..]] {
            let replay =
                post_as(&mut client, other, &stateless_request(2, "bind_confirm", args.clone(), Some(state))).await;
            assert_eq!(replay["error"]["code"], -32602, "{other:?}: {replay}");
            assert_eq!(REPLAY_RUNS.load(Ordering::SeqCst), 1, "{other:?}: no handler ran");
        }
        // The tenant it was issued to: the call goes on.
        let done = post_as(&mut client, &acme, &stateless_request(3, "bind_confirm", args.clone(), Some(state))).await;
        assert!(done["result"]["structuredContent"]["key"].is_string(), "{done}");
        assert_eq!(REPLAY_RUNS.load(Ordering::SeqCst), 2);

        // Made for a principal, the call's rounds are one call (its first round's stream and call id ride in the
        // state sealed for that principal): one call id, one key, whatever JSON-RPC id each round has. Without a
        // principal, each request is a stream of its own, even under the same JSON-RPC id.
        let alice = [("x-tenant", "acme"), ("x-principal", "alice")];
        let first = post_as(&mut client, &alice, &stateless_request(4, "bind_confirm", args.clone(), None)).await;
        let state = first["result"]["requestState"].as_str().expect("input required").to_owned();
        let done =
            post_as(&mut client, &alice, &stateless_request(5, "bind_confirm", args.clone(), Some(&state))).await;
        let keyed = &done["result"]["structuredContent"];
        assert_eq!((&keyed["first_round_key"], keyed["call_id"].as_str()), (&keyed["key"], Some("4")), "{done}");
        let first = post_as(&mut client, &acme, &stateless_request(6, "bind_confirm", args.clone(), None)).await;
        let state = first["result"]["requestState"].as_str().expect("input required").to_owned();
        let done = post_as(&mut client, &acme, &stateless_request(6, "bind_confirm", args, Some(&state))).await;
        let keyed = &done["result"]["structuredContent"];
        assert_ne!(keyed["first_round_key"], keyed["key"], "without a principal, rounds share no key: {done}");
        shutdown.cancel();
    })
    .await;
}

/// A client of protocol 2026-07-28 that answers every elicitation with `{"ok": true}`.
#[derive(Clone, Default)]
struct Client {
    tasks: bool,
}

impl ClientHandler for Client {
    fn get_info(&self) -> InitializeRequestParams {
        let mut capabilities = ClientCapabilities::builder().enable_elicitation().build();
        if self.tasks {
            capabilities.extensions = ClientCapabilities::builder().enable_tasks().build().extensions;
        }
        InitializeRequestParams::new(capabilities, Implementation::new("binding", "0.1"))
    }

    async fn create_elicitation(
        &self,
        _: ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(serde_json::from_value(json!({"action": "accept", "content": {"ok": true}})).expect("an ElicitResult"))
    }
}

async fn connect(server: &McpServer, client: Client) -> RunningService<RoleClient, Client> {
    keel_tests::mcp::connect(server, client, ProtocolVersion::V_2026_07_28).await
}

fn call(name: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned()).with_arguments(args.as_object().cloned().unwrap())
}

/// The first round of `bind_replicated` on `server`: its sealed state.
async fn first_round(server: &McpServer) -> String {
    let client = connect(server, Client::default()).await;
    let r = client.peer().call_tool_once(call("bind_replicated", json!({"what": "x"}))).await.expect("call");
    let _ = client.cancel().await;
    let CallToolResponse::InputRequired(r) = r else { panic!("expected input required: {r:?}") };
    r.request_state.expect("a sealed state")
}

/// The next round of `bind_replicated` on `server`, carrying `state`.
async fn next_round(server: &McpServer, state: &str) -> Result<CallToolResponse, ServiceError> {
    let client = connect(server, Client::default()).await;
    let mut retry = call("bind_replicated", json!({"what": "x"}));
    retry.request_state = Some(state.to_owned());
    retry.input_responses = Some([("ok".to_owned(), json!({"action": "accept", "content": {"ok": true}}))].into());
    let r = client.peer().call_tool_once(retry).await;
    let _ = client.cancel().await;
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_state_opens_on_every_replica_given_the_key_and_after_a_rotation() {
    within(async {
        const OLD: &[u8] = b"an old request-state key, 32 bytes or more";
        const NEW: &[u8] = b"a new request-state key, 32 bytes or more!";
        let replica = |keys: &[(&str, &[u8])]| {
            let mut builder = McpServer::builder(executor()).request_state_key(keys[0].0, keys[0].1);
            if let Some((id, key)) = keys.get(1) {
                builder = builder.previous_request_state_key(*id, *key);
            }
            builder.build().expect("server")
        };
        let one = replica(&[("k1", OLD)]);
        let two = replica(&[("k1", OLD)]);
        let state = first_round(&one).await;
        let done = next_round(&two, &state).await.expect("opens on the other replica");
        assert!(matches!(done, CallToolResponse::Complete(_)), "{done:?}");

        // Rotated: the new key seals, the previous one still opens.
        let rotated = replica(&[("k2", NEW), ("k1", OLD)]);
        let done = next_round(&rotated, &state).await.expect("opens after the rotation");
        assert!(matches!(done, CallToolResponse::Complete(_)), "{done:?}");
        let sealed_new = first_round(&rotated).await;
        assert!(matches!(next_round(&replica(&[("k2", NEW)]), &sealed_new).await, Ok(CallToolResponse::Complete(_))));
        // Without the key: refused. A default server's random key opens nothing of another's.
        let runs = REPLICA_RUNS.load(Ordering::SeqCst);
        for stranger in [replica(&[("k2", NEW)]), McpServer::new(executor()).expect("server")] {
            let err = next_round(&stranger, &state).await.expect_err("foreign key");
            assert!(matches!(err, ServiceError::McpError(ref e) if e.code.0 == -32602), "{err:?}");
        }
        assert_eq!(REPLICA_RUNS.load(Ordering::SeqCst), runs, "no handler ran for a state that failed");

        // Keys that cannot work fail the build, naming what to do.
        let short = McpServer::builder(executor()).request_state_key("k", b"short".to_vec()).build().unwrap_err();
        assert!(short.to_string().contains("at least 32"), "{short}");
        let alone = McpServer::builder(executor()).previous_request_state_key("k1", OLD).build().unwrap_err();
        assert!(alone.to_string().contains("needs a current key"), "{alone}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_tasks_a_task_call_is_refused_with_a_retry_hint_and_the_admitted_one_completes() {
    within(async {
        let server = McpServer::builder(executor()).max_tasks(1).build().expect("server");
        let client = connect(&server, Client { tasks: true }).await;
        let r = client.peer().call_tool_once(call("bind_slow", json!({"ms": 400}))).await.expect("call");
        let CallToolResponse::Task(first) = r else { panic!("expected a task: {r:?}") };

        let err = client.peer().call_tool_once(call("bind_slow", json!({"ms": 1}))).await.expect_err("full");
        let ServiceError::McpError(err) = err else { panic!("expected a JSON-RPC error: {err:?}") };
        assert_eq!(err.code.0, keel_tools_mcp::server::TOO_MANY_TASKS, "{err:?}");
        let data = err.data.clone().unwrap_or_default();
        assert_eq!((data["code"].as_str(), data["max_tasks"].as_u64()), (Some("too_many_tasks"), Some(1)), "{data}");
        assert!(data["retry_after_s"].as_u64().is_some_and(|s| s > 0), "{data}");

        // The admitted task runs on and completes; its slot is then free.
        let mut done = Value::Null;
        for _ in 0..500 {
            let got = client.peer().get_task(GetTaskParams::new(first.task.task_id.clone())).await.expect("get");
            done = serde_json::to_value(got).unwrap();
            if done["status"] == "completed" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(done["result"]["content"][0]["text"].as_str().is_some_and(|t| t.contains("slept 400")), "{done}");
        let mut again = Err(String::new());
        for _ in 0..100 {
            match client.peer().call_tool_once(call("bind_slow", json!({"ms": 1}))).await {
                Ok(CallToolResponse::Task(_)) => {
                    again = Ok(());
                    break;
                }
                other => again = Err(format!("{other:?}")),
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        again.expect("a finished task frees its slot");
        let _ = client.cancel().await;
    })
    .await;
}

/// The key `run` gives a `bind_key` call with the id keel generates for the first call of a conversation.
async fn generated_key(run: &mut Run) -> Value {
    let args = json!({});
    let call = ToolCall::new(ToolCall::generated_id(0, "bind_key", Some(&args)), "bind_key", args);
    let batch = run.process_batch(vec![call]).await;
    batch.results[0].data().map(|d| d["key"].clone()).expect("a key")
}

#[tokio::test]
async fn ids_keel_generates_are_keyed_apart_run_by_run() {
    let one = generated_key(&mut Run::new(executor())).await;
    let two = generated_key(&mut Run::new(executor())).await;
    assert_ne!(one, two, "two conversations, one generated id: two keys");
    // Options shared by two runs (a clone each) still key them apart; a named stream keys them alike.
    let shared = CallOptions::new().tenant("acme");
    let one = generated_key(&mut Run::builder(executor()).options(shared.clone()).build()).await;
    let two = generated_key(&mut Run::builder(executor()).options(shared.clone()).build()).await;
    assert_ne!(one, two);
    let named = shared.stream("conversation-41");
    let one = generated_key(&mut Run::builder(executor()).options(named.clone()).build()).await;
    let two = generated_key(&mut Run::builder(executor()).options(named).build()).await;
    assert_eq!(one, two, "a conversation resumed under its stream keeps its keys");
    // An id the host chose, with no stream, is keyed as it always was.
    let host = ToolCall::new("order-17", "bind_key", json!({}));
    let a = executor().call_with(host.clone(), &CallOptions::new()).await;
    let b = executor().call_with(host, &CallOptions::new()).await;
    assert_eq!(a.data().map(|d| &d["key"]), b.data().map(|d| &d["key"]));
}
