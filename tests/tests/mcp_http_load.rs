//! Load over the wire: `keel_tools_mcp::McpServer::serve_http` on a loopback port, in process on the multi-threaded
//! runtime (2 workers), under 100 concurrent rmcp Streamable HTTP clients, each with its own session (protocol
//! 2025-11-25, the last revision with sessions) and two calls in flight, calling in a loop for `KEEL_HTTP_LOAD_SECS`
//! seconds (default 5; the first fifth is the warm-up).
//!
//! Every call carries its key, `(client, seq)`, in its arguments, and what it must end in follows from the key: ok
//! (async, inline, blocking-pool and slow handlers, approved `write` calls), the tool's own code (`not_found`),
//! `invalid_arguments`, `approval_required`, or an unknown tool (JSON-RPC `-32602`). The server keeps a ledger of
//! its own: every request the host's call-options hook sees, every handler run, and every answer the executor gives
//! inside the server (read from the executor's `tool_call` span, whose `outcome` is recorded while the request's
//! task still knows its session and JSON-RPC id). The test checks that the server saw each request exactly once, over
//! the session of the client that sent it, and answered it exactly once with the outcome its key plans; that no
//! answer the server gave was lost on the way (each reached its client within the call timeout); that every client
//! got its own answer (the result echoes the key) and the right one; that each handler that should run ran exactly
//! once for its key and none ran for a rejected call; that memory stays bounded (peak RSS, and RSS growth between the
//! end of the warm-up and the end of the load); and that every session is gone once its client closed (the server's
//! side of each has stopped, the server counts none in `notify_tool_list_changed`, which it counted all 100 in at the
//! end of the load, and the runtime is back to the tasks it had before any client connected). The figures
//! are printed (run with `--nocapture`). The test is bounded: it fails after its deadline instead of hanging, and
//! listens on 127.0.0.1 only.
//!
//! The full run, by hand (its figures are in docs/guide/src/security.md):
//! `KEEL_HTTP_LOAD_SECS=30 cargo test --release -p keel-tests --test load mcp_http_load -- --nocapture`

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use keel_tests::memory_kib;
use keel_tools_core::executor::CallOptions;
use keel_tools_core::{Approval, Executor, Registry, ToolError, tool};
use keel_tools_mcp::McpServer;
use keel_tools_mcp::rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, Implementation, InitializeRequestParams, ProtocolVersion,
};
use keel_tools_mcp::rmcp::service::{RequestContext, ServiceError};
use keel_tools_mcp::rmcp::transport::StreamableHttpClientTransport;
use keel_tools_mcp::rmcp::{ClientHandler, Peer, RoleServer, ServiceExt};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value, json};

const CLIENTS: usize = 100;
/// Calls each client keeps in flight at once, over its one session (the lanes of [`run_client`]).
const IN_FLIGHT: usize = 2;
/// Length of the load when `KEEL_HTTP_LOAD_SECS` is not set.
const DEFAULT_SECS: u64 = 5;
/// A call not answered within this gets no answer (counted as lost when the server's ledger says it answered).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How a client's report says that a call got no answer.
const NO_ANSWER: &str = "no answer";
/// How long the slow tool takes.
const SLOW: Duration = Duration::from_millis(25);
/// Highest `seq` a client may use (a bound on the ledgers).
const MAX_SEQ: u64 = 10_000_000;

/// Peak resident memory allowed for the test process (server and clients).
const MAX_PEAK_RSS_KIB: u64 = 256 * 1024;
/// RSS growth allowed between the end of the warm-up and the end of the load.
const MAX_RSS_GROWTH_KIB: u64 = 32 * 1024;

/// A session the server served: the client's handshake (compared by identity) and the server's peer.
type Session = (Arc<InitializeRequestParams>, Peer<RoleServer>);

/// What the server side observed, per client and `seq`.
struct Ledger {
    /// `tools/call` requests that reached the server (through the call-options hook, before the executor).
    requests: Vec<Mutex<Vec<u8>>>,
    /// Handler runs.
    runs: Vec<Mutex<Vec<u8>>>,
    /// Answers the executor gave inside the server (see [`Answers`]).
    answers: Vec<Mutex<Vec<u8>>>,
    /// Answers whose outcome was not the one their key plans: `client/seq: outcome`.
    wrong_outcomes: Mutex<Vec<String>>,
    /// The key of each request, by its client and JSON-RPC id (written by the call-options hook).
    keys: Mutex<HashMap<(u64, String), u64>>,
    /// Requests, runs or answers whose key was not a client's.
    stray: AtomicUsize,
    /// The session each client's calls came over (the first one seen).
    sessions: Vec<Mutex<Option<Session>>>,
    /// Calls that came over a session other than their client's first one, or one of another client.
    foreign_session: AtomicUsize,
}

fn ledger() -> &'static Ledger {
    static LEDGER: OnceLock<Ledger> = OnceLock::new();
    LEDGER.get_or_init(|| Ledger {
        requests: (0..CLIENTS).map(|_| Mutex::new(Vec::new())).collect(),
        runs: (0..CLIENTS).map(|_| Mutex::new(Vec::new())).collect(),
        answers: (0..CLIENTS).map(|_| Mutex::new(Vec::new())).collect(),
        wrong_outcomes: Mutex::new(Vec::new()),
        keys: Mutex::new(HashMap::new()),
        stray: AtomicUsize::new(0),
        sessions: (0..CLIENTS).map(|_| Mutex::new(None)).collect(),
        foreign_session: AtomicUsize::new(0),
    })
}

fn count(table: &[Mutex<Vec<u8>>], client: u64, seq: u64) {
    let slot = usize::try_from(client).ok().and_then(|c| table.get(c));
    match slot {
        Some(slot) if seq < MAX_SEQ => {
            let mut v = slot.lock().unwrap();
            let i = seq as usize;
            if v.len() <= i {
                v.resize(i + 1, 0);
            }
            v[i] = v[i].saturating_add(1);
        }
        _ => {
            ledger().stray.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[derive(Serialize, JsonSchema)]
struct Key {
    client: u32,
    seq: u64,
}

fn ran(client: u32, seq: u64) -> Key {
    count(&ledger().runs, u64::from(client), seq);
    Key { client, seq }
}

/// Echoes its key (async).
#[tool(effect = "read", version = "1.0")]
async fn hl_async(client: u32, seq: u64) -> Key {
    tokio::task::yield_now().await;
    ran(client, seq)
}

/// Echoes its key (inline).
#[tool(effect = "read", version = "1.0")]
fn hl_inline(client: u32, seq: u64) -> Key {
    ran(client, seq)
}

/// Echoes its key (blocking pool).
#[tool(effect = "read", version = "1.0", blocking = true)]
fn hl_blocking(client: u32, seq: u64) -> Key {
    ran(client, seq)
}

/// Echoes its key after a while.
#[tool(effect = "read", version = "1.0")]
async fn hl_slow(client: u32, seq: u64) -> Key {
    tokio::time::sleep(SLOW).await;
    ran(client, seq)
}

/// Always refuses, with its own code and the key in the details.
#[tool(effect = "read", version = "1.0")]
fn hl_refuse(client: u32, seq: u64) -> Result<Key, ToolError> {
    ran(client, seq);
    Err(keel_tools_core::tool_error!("not_found", "no record {client}/{seq}")
        .with_details(json!({"client": client, "seq": seq})))
}

/// Echoes its key (a write: runs only with an approval of its exact arguments).
#[tool(effect = "write", version = "1.0")]
fn hl_write(client: u32, seq: u64) -> Key {
    ran(client, seq)
}

const TOOLS: &[&str] = &["hl_async", "hl_inline", "hl_blocking", "hl_slow", "hl_refuse", "hl_write"];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    Ok,
    Code(&'static str),
    UnknownTool,
}

struct Planned {
    name: String,
    args: Map<String, Value>,
    expect: Expect,
    /// Handler runs this call must cause.
    runs: u8,
}

/// What call `seq` of `client` is, and what it must end in.
fn plan(client: u32, seq: u64) -> Planned {
    let key = json!({"client": client, "seq": seq});
    let (name, args, expect) = match seq % 10 {
        0 | 1 => ("hl_async".to_owned(), key, Expect::Ok),
        2 => ("hl_inline".to_owned(), key, Expect::Ok),
        3 => ("hl_blocking".to_owned(), key, Expect::Ok),
        4 => ("hl_slow".to_owned(), key, Expect::Ok),
        5 => ("hl_refuse".to_owned(), key, Expect::Code("not_found")),
        // A numeric string is not an integer.
        6 => (
            "hl_async".to_owned(),
            json!({"client": client, "seq": seq.to_string()}),
            Expect::Code("invalid_arguments"),
        ),
        // An invented key is refused.
        7 => (
            "hl_inline".to_owned(),
            json!({"client": client, "seq": seq, "admin": true}),
            Expect::Code("invalid_arguments"),
        ),
        8 => (format!("hl_async_{client}_{seq}"), key, Expect::UnknownTool),
        // The host approves every other write, for exactly its arguments; the others for different ones.
        _ if seq % 20 == 9 => ("hl_write".to_owned(), key, Expect::Ok),
        _ => ("hl_write".to_owned(), key, Expect::Code("approval_required")),
    };
    let runs = u8::from(matches!(expect, Expect::Ok | Expect::Code("not_found")));
    let Value::Object(args) = args else { unreachable!() };
    Planned { name, args, expect, runs }
}

/// The host's hook, run for every `tools/call` the server receives: records the request, its key under its JSON-RPC
/// id and its session, and grants the approvals of the plan.
fn call_options(request: &CallToolRequestParams, context: &RequestContext<RoleServer>) -> CallOptions {
    let peer = &context.peer;
    let args = request.arguments.as_ref();
    let client = args.and_then(|a| a.get("client")).and_then(Value::as_u64).unwrap_or(u64::MAX);
    let seq = args.and_then(|a| a.get("seq")).and_then(|s| s.as_u64().or_else(|| s.as_str()?.parse().ok()));
    count(&ledger().requests, client, seq.unwrap_or(u64::MAX));
    if let Some(seq) = seq {
        ledger().keys.lock().unwrap().insert((client, context.id.to_string()), seq);
    }

    // The session: the client's own (its handshake names it), and always the same one.
    let info = peer.peer_info();
    let own = info.as_ref().is_some_and(|i| i.client_info.name == format!("hl-client-{client}"));
    let slot = usize::try_from(client).ok().and_then(|c| ledger().sessions.get(c));
    match (own, info, slot) {
        (true, Some(info), Some(slot)) => {
            let mut slot = slot.lock().unwrap();
            match &*slot {
                None => *slot = Some((info, peer.clone())),
                Some((first, _)) if Arc::ptr_eq(first, &info) => {}
                Some(_) => {
                    ledger().foreign_session.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        _ => {
            ledger().foreign_session.fetch_add(1, Ordering::Relaxed);
        }
    }

    match seq {
        Some(seq) if request.name == "hl_write" => {
            let approved = if seq % 20 == 9 { seq } else { seq + 1 };
            CallOptions::new().approve(Approval::new("hl_write", &json!({"client": client, "seq": approved})))
        }
        _ => CallOptions::new(),
    }
}

/// The outcome planned for a call, as the executor's `tool_call` span names it.
fn planned_outcome(expect: Expect) -> &'static str {
    match expect {
        Expect::Ok => "ok",
        Expect::Code(code) => code,
        Expect::UnknownTool => "unknown_tool",
    }
}

/// The server's ledger of answers: a `tracing` layer that sees the executor's `tool_call` span (and nothing else) and,
/// when the span records its `outcome`, counts one answer for the request the server is serving on that task (its
/// session's client and its JSON-RPC id, from `keel_tools_mcp::current_request`, mapped to the key the call-options hook
/// recorded), and notes an outcome that is not the planned one.
struct Answers;

/// The `outcome` field of a span record.
#[derive(Default)]
struct Outcome(Option<String>);

impl tracing::field::Visit for Outcome {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "outcome" {
            self.0 = Some(value.to_owned());
        }
    }
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "outcome" {
            self.0 = Some(format!("{value:?}").trim_matches('"').to_owned());
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Answers {
    fn register_callsite(&self, metadata: &'static tracing::Metadata<'static>) -> tracing::subscriber::Interest {
        if metadata.is_span() && metadata.name() == "tool_call" {
            tracing::subscriber::Interest::always()
        } else {
            tracing::subscriber::Interest::never()
        }
    }

    fn enabled(&self, metadata: &tracing::Metadata<'_>, _: tracing_subscriber::layer::Context<'_, S>) -> bool {
        metadata.is_span() && metadata.name() == "tool_call"
    }

    fn on_record(
        &self,
        _: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut outcome = Outcome::default();
        values.record(&mut outcome);
        let Some(outcome) = outcome.0 else { return };
        let l = ledger();
        let key = keel_tools_mcp::current_request().and_then(|request| {
            let info = request.peer.peer_info()?;
            let client: u64 = info.client_info.name.strip_prefix("hl-client-")?.parse().ok()?;
            let seq = *l.keys.lock().unwrap().get(&(client, request.id.to_string()))?;
            Some((client, seq))
        });
        let Some((client, seq)) = key else {
            l.stray.fetch_add(1, Ordering::Relaxed);
            return;
        };
        count(&l.answers, client, seq);
        let planned = planned_outcome(plan(client as u32, seq).expect);
        if outcome != planned {
            l.wrong_outcomes.lock().unwrap().push(format!("{client}/{seq}: {outcome}, planned {planned}"));
        }
    }
}

/// keel's error object of a failed result: in `structuredContent` or, when the tool has an `outputSchema`, the
/// JSON text.
fn error_of(r: &CallToolResult) -> Value {
    if let Some(e) = r.structured_content.as_ref().and_then(|s| s.get("error")) {
        return e.clone();
    }
    let text = r.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).unwrap_or_default();
    serde_json::from_str::<Value>(&text).map(|v| v["error"].clone()).unwrap_or(Value::Null)
}

/// Whether an answer is the one `plan(client, seq)` must end in.
fn check(
    p: &Planned,
    client: u32,
    seq: u64,
    got: Result<Result<CallToolResult, ServiceError>, ()>,
) -> Result<(), String> {
    let key = json!({"client": client, "seq": seq});
    let r = match (p.expect, got) {
        (_, Err(())) => return Err(format!("{NO_ANSWER} within {CALL_TIMEOUT:?}")),
        (Expect::UnknownTool, Ok(Err(ServiceError::McpError(e)))) => {
            let named = e.message.contains(&format!("no tool named {:?}", p.name));
            return if e.code.0 == -32602 && named { Ok(()) } else { Err(format!("unknown tool answered {e:?}")) };
        }
        (_, Ok(Err(e))) => return Err(format!("error {e}")),
        (_, Ok(Ok(r))) => r,
    };
    match p.expect {
        Expect::Ok if r.is_error == Some(false) && r.structured_content.as_ref() == Some(&key) => Ok(()),
        Expect::Code(code) if r.is_error == Some(true) => {
            let e = error_of(&r);
            // The answer is this call's: the details name its key, or the argument it got wrong.
            let v = &e["details"]["violations"][0];
            let own = match code {
                "not_found" => e["details"] == key,
                "approval_required" => e["details"]["approve"]["arguments"] == key,
                _ if seq % 10 == 6 => v["pointer"] == "/seq" && v["found"] == json!(format!("{:?}", seq.to_string())),
                _ => v["pointer"] == "/admin",
            };
            if e["code"] == code && own { Ok(()) } else { Err(format!("expected {code}, got {e}")) }
        }
        _ => Err(format!("expected {:?}, got {}", p.expect, serde_json::to_string(&r).unwrap_or_default())),
    }
}

/// A client that names itself in its handshake.
#[derive(Clone)]
struct LoadClient(u32);

impl ClientHandler for LoadClient {
    fn get_info(&self) -> InitializeRequestParams {
        InitializeRequestParams::new(
            ClientCapabilities::default(),
            Implementation::new(format!("hl-client-{}", self.0), "0.1"),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }
}

/// What one client observed.
#[derive(Default)]
struct ClientReport {
    connected: bool,
    /// Calls issued (`seq` 0..issued).
    issued: u64,
    /// Per call: `seq`, latency in µs, and what was wrong with the answer.
    calls: Vec<(u64, u32, Option<String>)>,
}

/// Where the clients and the test meet: all connected (the load begins), all done calling (the test looks at the
/// open sessions), and then the clients close.
struct Gates {
    start: tokio::sync::Barrier,
    end: tokio::sync::Barrier,
    close: tokio::sync::Barrier,
}

/// Connects, waits for the others, calls until `stop`, waits for the others again and for the test, closes.
async fn run_client(c: u32, url: String, stop: Arc<AtomicBool>, gates: Arc<Gates>) -> ClientReport {
    let transport = StreamableHttpClientTransport::from_uri(url);
    let connected = LoadClient(c).serve(transport).await;
    gates.start.wait().await;
    let Ok(client) = connected else {
        gates.end.wait().await;
        gates.close.wait().await;
        return ClientReport::default();
    };
    let next = AtomicU64::new(0);
    let lane = || async {
        let mut calls = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let seq = next.fetch_add(1, Ordering::Relaxed);
            let p = plan(c, seq);
            let params = CallToolRequestParams::new(p.name.clone()).with_arguments(p.args.clone());
            let began = Instant::now();
            let got = tokio::time::timeout(CALL_TIMEOUT, client.peer().call_tool(params)).await.map_err(|_| ());
            let took = began.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
            calls.push((seq, took, check(&p, c, seq, got).err()));
        }
        calls
    };
    let (mut a, b) = tokio::join!(lane(), lane()); // IN_FLIGHT lanes
    a.extend(b);
    gates.end.wait().await;
    gates.close.wait().await;
    let _ = client.cancel().await;
    ClientReport { connected: true, issued: next.load(Ordering::Relaxed), calls: a }
}

/// Server sessions of the clients that are still open.
fn open_sessions() -> usize {
    ledger()
        .sessions
        .iter()
        .filter(|s| s.lock().unwrap().as_ref().is_some_and(|(_, peer)| !peer.is_transport_closed()))
        .count()
}

fn percentile(sorted: &[u32], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    Duration::from_micros(u64::from(sorted.get(at).copied().unwrap_or(0)))
}

struct Observed {
    reports: Vec<ClientReport>,
    wall: Duration,
    rss_after_warm: u64,
    rss_end_of_load: u64,
    open_at_end_of_load: usize,
    open_after_close: usize,
    /// Sessions the server itself counts (those it sends `tools/list_changed` to).
    server_sessions_at_end_of_load: usize,
    server_sessions_after_close: usize,
    close_took: Duration,
    tasks_idle: usize,
    tasks_after_close: usize,
}

#[test]
fn a_hundred_http_sessions_lose_and_duplicate_nothing() {
    // Peak RSS and the global `tracing` subscriber are the process's: the test runs in a process of its own.
    if !keel_tests::in_own_process() {
        return;
    }
    let secs: u64 = std::env::var("KEEL_HTTP_LOAD_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(DEFAULT_SECS);
    let duration = Duration::from_secs(secs.max(1));
    let warm_up = duration / 5;
    let deadline = duration + Duration::from_secs(120);

    // A hung runtime must fail the test, not the CI job.
    let watchdog = keel_tests::watchdog("HTTP load test", deadline + Duration::from_secs(30));
    // The server's ledger of answers (the only subscriber of this test binary; it enables no other span or event).
    {
        use tracing_subscriber::layer::SubscriberExt;
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Answers)).expect("one subscriber");
    }

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let registry = Registry::from_inventory().unwrap();
    let executor = Executor::new(registry.view().names(TOOLS.iter().copied()).build().unwrap()).unwrap();
    let server = McpServer::builder(executor).call_options(call_options).build().unwrap();

    let observed = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().unwrap();
        assert!(addr.ip().is_loopback());
        let shutdown = tokio_util::sync::CancellationToken::new();
        let serving = {
            let server = server.clone();
            let shutdown = shutdown.clone();
            tokio::spawn(async move { server.serve_http(listener, "/mcp", shutdown).await })
        };
        let metrics = tokio::runtime::Handle::current().metrics();
        let tasks_idle = metrics.num_alive_tasks();

        let observed = tokio::time::timeout(deadline, async {
            let url = format!("http://{addr}/mcp");
            let stop = Arc::new(AtomicBool::new(false));
            let gate = || tokio::sync::Barrier::new(CLIENTS + 1);
            let gates = Arc::new(Gates { start: gate(), end: gate(), close: gate() });
            let clients: Vec<_> = (0..CLIENTS as u32)
                .map(|c| tokio::spawn(run_client(c, url.clone(), stop.clone(), gates.clone())))
                .collect();
            gates.start.wait().await;
            let began = Instant::now();
            tokio::time::sleep(warm_up).await;
            let rss_after_warm = memory_kib().1;
            tokio::time::sleep(duration - warm_up).await;
            stop.store(true, Ordering::Relaxed);
            gates.end.wait().await;
            let wall = began.elapsed();
            let rss_end_of_load = memory_kib().1;
            let open_at_end_of_load = open_sessions();
            let server_sessions_at_end_of_load = server.notify_tool_list_changed().await;
            gates.close.wait().await;

            let mut reports = Vec::with_capacity(CLIENTS);
            for c in clients {
                reports.push(c.await.expect("a client task panicked"));
            }
            // Each client deleted its session on close: wait (within 10 s) for the server to let go of them.
            let closing = Instant::now();
            while open_sessions() > 0 && closing.elapsed() < Duration::from_secs(10) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let open_after_close = open_sessions();
            let close_took = closing.elapsed();
            let server_sessions_after_close = server.notify_tool_list_changed().await;
            while metrics.num_alive_tasks() > tasks_idle && closing.elapsed() < Duration::from_secs(10) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Observed {
                reports,
                wall,
                rss_after_warm,
                rss_end_of_load,
                open_at_end_of_load,
                open_after_close,
                server_sessions_at_end_of_load,
                server_sessions_after_close,
                close_took,
                tasks_idle,
                tasks_after_close: metrics.num_alive_tasks(),
            }
        })
        .await
        .expect("the HTTP load test did not finish in time");

        shutdown.cancel();
        let served = tokio::time::timeout(Duration::from_secs(10), serving).await.expect("the server stops");
        assert!(served.expect("join").is_ok());
        observed
    });
    let (peak, rss_end) = memory_kib();
    drop(watchdog);

    // Every client connected, every call got its own, right answer, once.
    let connected = observed.reports.iter().filter(|r| r.connected).count();
    assert_eq!(connected, CLIENTS, "clients that could not connect");
    let mut wrong = Vec::new();
    let mut latencies = Vec::new();
    // Latencies of the calls other than `hl_slow`, whose handler alone takes `SLOW`.
    let mut quick = Vec::new();
    // Loss is counted from the server's ledger: an answer the server gave that its client did not get in time.
    let l = ledger();
    let (mut lost, mut unanswered, mut duplicated) = (Vec::new(), Vec::new(), Vec::new());
    for (c, r) in observed.reports.iter().enumerate() {
        let answers = l.answers[c].lock().unwrap();
        let mut received = vec![false; r.issued as usize];
        for (seq, took, problem) in &r.calls {
            let i = *seq as usize;
            received[i] = !problem.as_ref().is_some_and(|p| p.starts_with(NO_ANSWER));
            latencies.push(*took);
            if seq % 10 != 4 {
                quick.push(*took);
            }
            if let Some(problem) = problem {
                wrong.push(format!("client {c} seq {seq}: {problem}"));
            }
        }
        assert!(answers.len() as u64 <= r.issued, "client {c}: the server answered keys never issued");
        for (seq, received) in received.iter().enumerate() {
            match answers.get(seq).copied().unwrap_or(0) {
                0 => unanswered.push(format!("{c}/{seq}")),
                1 if !received => lost.push(format!("{c}/{seq}")),
                1 => {}
                _ => duplicated.push(format!("{c}/{seq}")),
            }
        }
    }
    let first = |v: &[String]| v[..3.min(v.len())].to_vec();
    assert!(lost.is_empty(), "{} answers the server gave never reached their client: {:?}", lost.len(), first(&lost));
    assert!(unanswered.is_empty(), "{} calls the server never answered: {:?}", unanswered.len(), first(&unanswered));
    assert!(duplicated.is_empty(), "{} calls the server answered twice: {:?}", duplicated.len(), first(&duplicated));
    let wrong_outcomes = l.wrong_outcomes.lock().unwrap();
    assert!(wrong_outcomes.is_empty(), "{} answers not as planned: {:?}", wrong_outcomes.len(), first(&wrong_outcomes));
    assert!(wrong.is_empty(), "{} calls ended wrongly, e.g. {:?}", wrong.len(), first(&wrong));

    // The server saw each request once, over its client's own session, and ran each handler that should run once.
    assert_eq!(l.stray.load(Ordering::Relaxed), 0, "requests, runs or answers with a key of no client");
    assert_eq!(l.foreign_session.load(Ordering::Relaxed), 0, "calls over another session than their client's");
    let mut executed = 0usize;
    for (c, r) in observed.reports.iter().enumerate() {
        let requests = l.requests[c].lock().unwrap();
        let runs = l.runs[c].lock().unwrap();
        assert!(requests.len() as u64 <= r.issued && runs.len() as u64 <= r.issued, "client {c}: keys never issued");
        for seq in 0..r.issued {
            let i = seq as usize;
            let want = plan(c as u32, seq).runs;
            assert_eq!(requests.get(i).copied().unwrap_or(0), 1, "client {c} seq {seq}: requests the server saw");
            assert_eq!(runs.get(i).copied().unwrap_or(0), want, "client {c} seq {seq}: handler runs");
            executed += usize::from(want);
        }
    }

    let total: usize = observed.reports.iter().map(|r| r.calls.len()).sum();
    latencies.sort_unstable();
    quick.sort_unstable();
    eprintln!(
        "mcp http load: {CLIENTS} clients x {IN_FLIGHT} in flight for {:.1?} (warm-up {warm_up:?}): {total} calls \
         ({executed} executed), {:.0} calls/s; latency p50 {:?}, p99 {:?}, max {:?}; without the {SLOW:?} tool p50 {:?}, \
         p99 {:?}; RSS after warm-up {} MiB, end of \
         load {} MiB, after close {} MiB, growth {} KiB, peak (VmHWM) {} MiB; sessions open at end of load {}, after \
         close {} (in {:.2?}), counted by the server {} and {}; runtime tasks idle {}, after close {}",
        observed.wall,
        total as f64 / observed.wall.as_secs_f64(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        percentile(&latencies, 1.0),
        percentile(&quick, 0.5),
        percentile(&quick, 0.99),
        observed.rss_after_warm / 1024,
        observed.rss_end_of_load / 1024,
        rss_end / 1024,
        observed.rss_end_of_load.saturating_sub(observed.rss_after_warm),
        peak / 1024,
        observed.open_at_end_of_load,
        observed.open_after_close,
        observed.close_took,
        observed.server_sessions_at_end_of_load,
        observed.server_sessions_after_close,
        observed.tasks_idle,
        observed.tasks_after_close,
    );

    // Memory bounded; sessions freed once their clients closed.
    assert!(peak < MAX_PEAK_RSS_KIB, "peak RSS {peak} KiB");
    assert!(
        observed.rss_end_of_load.saturating_sub(observed.rss_after_warm) < MAX_RSS_GROWTH_KIB,
        "RSS grew from {} KiB to {} KiB",
        observed.rss_after_warm,
        observed.rss_end_of_load
    );
    assert_eq!(observed.open_at_end_of_load, CLIENTS, "sessions open while their clients were");
    assert_eq!(observed.open_after_close, 0, "sessions still open after their clients closed");
    assert_eq!(observed.server_sessions_at_end_of_load, CLIENTS, "sessions the server counted during the load");
    assert_eq!(observed.server_sessions_after_close, 0, "sessions the server counted after every client closed");
    assert!(
        observed.tasks_after_close <= observed.tasks_idle,
        "{} runtime tasks left after every client closed, {} before any connected",
        observed.tasks_after_close,
        observed.tasks_idle
    );
}
