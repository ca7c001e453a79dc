//! MCP over Streamable HTTP against hostile clients, with the server's default settings unless a case says
//! otherwise: connections that never finish their headers, oversized headers, foreign origins, bodies past the
//! limit, and caps reached while admitted calls finish. Each case checks the status the client gets and that no
//! handler ran for what was refused.
//!
//! The binary's allocator (tests/tests/integration.rs) counts what each thread holds, so that a refused body can be
//! shown to be refused before it is parsed (as `limits_before_allocation.rs` does for the other entry points).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::StatusCode;
use keel_tests::http::{Answer, RawClient, SESSION_REVISION, call_request, initialize_request, stateless_call_request};
use keel_tools_core::{Executor, Registry, tool};
use keel_tools_mcp::{HealthReport, HttpConfig, McpHttpService, McpServer};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

// ---------------------------------------------------------------------------------------------------------------
// Tools that record each run under the label they were given, so a case can tell whether its handler ran.

static RAN: Mutex<Vec<String>> = Mutex::new(Vec::new());
static GATES: Mutex<Option<HashMap<String, Arc<Semaphore>>>> = Mutex::new(None);

fn ran(label: &str) -> usize {
    RAN.lock().unwrap().iter().filter(|l| *l == label).count()
}

/// The gate that `hh_held` calls labelled `label` wait at.
fn gate(label: &str) -> Arc<Semaphore> {
    GATES
        .lock()
        .unwrap()
        .get_or_insert_with(HashMap::new)
        .entry(label.to_owned())
        .or_insert_with(|| Arc::new(Semaphore::new(0)))
        .clone()
}

#[derive(Serialize, JsonSchema)]
struct Echoed {
    label: String,
}

/// Answers with its label.
#[tool(effect = "read", version = "1.0")]
fn hh_echo(label: String) -> Echoed {
    RAN.lock().unwrap().push(label.clone());
    Echoed { label }
}

/// Counts its items.
#[tool(effect = "read", version = "1.0")]
fn hh_items(label: String, items: Vec<Value>) -> usize {
    RAN.lock().unwrap().push(label);
    items.len()
}

/// Starts (recorded), then waits until the test opens its label's gate.
#[tool(effect = "read", version = "1.0")]
async fn hh_held(label: String) -> Echoed {
    RAN.lock().unwrap().push(label.clone());
    gate(&label).acquire().await.expect("gate open").forget();
    Echoed { label }
}

const TOOLS: &[&str] = &["hh_echo", "hh_items", "hh_held"];

fn server() -> McpServer {
    let registry = Registry::from_inventory().expect("registry");
    let executor = Executor::new(registry.view().names(TOOLS.iter().copied()).build().unwrap()).unwrap();
    McpServer::new(executor).expect("server")
}

/// Serves `service` on a loopback port until the returned token is cancelled.
async fn serve(service: McpHttpService) -> (SocketAddr, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move { service.serve(listener, "/mcp", stop).await });
    (addr, shutdown)
}

async fn with_deadline<F: std::future::Future>(limit: Duration, f: F) -> F::Output {
    tokio::time::timeout(limit, f).await.expect("the case finishes in time")
}

/// A TCP connection to `addr` from the loopback address `from` (127.0.0.0/8 is all loopback, so one machine can
/// be several clients).
async fn connect_from(from: &str, addr: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(from.parse::<IpAddr>().unwrap(), 0)).unwrap();
    socket.connect(addr).await.expect("connect")
}

/// Everything the server sends on `stream` until it closes it (or resets it), or `None` if it is still open after
/// `limit`.
async fn read_to_close(stream: &mut TcpStream, limit: Duration) -> Option<Vec<u8>> {
    let mut seen = Vec::new();
    let read = async {
        let mut buf = [0u8; 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(limit, read).await.ok().map(|()| seen)
}

/// The status code of a raw HTTP answer.
fn status_of(raw: &[u8]) -> Option<u16> {
    let text = std::str::from_utf8(raw.get(..12)?).ok()?;
    text.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}

/// The value of header `name` in a raw HTTP answer.
fn header_of(raw: &[u8], name: &str) -> Option<String> {
    let text = String::from_utf8_lossy(raw);
    let head = text.split("\r\n\r\n").next()?;
    head.lines().skip(1).find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
    })
}

/// The structured result of a call answered over a session or statelessly.
fn call_result(answer: &Answer) -> Value {
    let messages = answer.messages();
    let result = messages.iter().find(|m| m.get("id").is_some()).unwrap_or_else(|| panic!("no result: {answer:?}"));
    result["result"]["structuredContent"].clone()
}

fn assert_busy(answer: &Answer, status: u16) {
    assert_eq!(answer.status.as_u16(), status, "{answer:?}");
    let retry = answer.headers.get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    assert!(retry.is_some_and(|s| s > 0), "Retry-After in whole seconds: {answer:?}");
}

// ---------------------------------------------------------------------------------------------------------------
// Slow and malformed connections.

/// 1,000 connections send half a request head and stop, from their own address, while a normal client keeps
/// calling from another. With the default limits each of them is either refused at once (`429`, past the cap per
/// client address) or closed by the header timeout, and the normal client's calls all succeed meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_connections_that_never_finish_their_headers_are_closed_while_a_client_keeps_calling() {
    let _watchdog = keel_tests::watchdog("slow loris", Duration::from_secs(120));
    let (addr, shutdown) = serve(server().http_service(HttpConfig::default())).await;
    let began = Instant::now();
    let mut slow = tokio::task::JoinSet::new();
    for _ in 0..1000 {
        let mut stream = connect_from("127.0.0.2", addr).await;
        // Written by every client; a refused one may be closed before it is.
        let _ = stream.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty").await;
        slow.spawn(async move { read_to_close(&mut stream, Duration::from_secs(60)).await });
    }

    // The normal client calls until every slow connection has been dealt with.
    let calling = CancellationToken::new();
    let caller = {
        let calling = calling.clone();
        tokio::spawn(async move {
            let mut client = RawClient::connect(addr, "/mcp").await.expect("connect");
            let session = client.open_session("normal").await.expect("session");
            let mut calls = 0u32;
            while !calling.is_cancelled() {
                calls += 1;
                let label = format!("loris-normal-{calls}");
                let body = call_request(u64::from(calls), "hh_echo", json!({"label": label}), None);
                let answer = client.post(Some(&session), Some(SESSION_REVISION), &body).await.expect("call");
                assert_eq!(answer.status, 200, "{answer:?}");
                assert_eq!(call_result(&answer), json!({"label": label}));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            calls
        })
    };

    let outcomes = slow.join_all().await;
    let closed_after = began.elapsed();
    calling.cancel();
    let calls = caller.await.expect("the normal client never failed");

    let mut refused = 0;
    let mut timed_out = 0;
    for outcome in &outcomes {
        let seen = outcome.as_ref().expect("every slow connection is closed");
        if seen.is_empty() {
            timed_out += 1;
        } else {
            assert_eq!(status_of(seen), Some(429), "{}", String::from_utf8_lossy(seen));
            assert!(header_of(seen, "retry-after").is_some(), "{}", String::from_utf8_lossy(seen));
            refused += 1;
        }
    }
    assert_eq!(
        timed_out,
        keel_tools_mcp::http::DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
        "admitted up to the per-client cap"
    );
    assert_eq!(refused, 1000 - timed_out);
    assert!(
        closed_after >= keel_tools_mcp::http::DEFAULT_HEADER_READ_TIMEOUT,
        "the admitted ones were closed by the timeout, not before: {closed_after:?}"
    );
    assert!(calls >= 10, "the normal client kept calling: {calls} calls");
    shutdown.cancel();
}

/// A request head larger than the limit is answered `431` and never reaches a handler.
#[tokio::test]
async fn oversized_headers_are_answered_431_and_run_nothing() {
    let (addr, shutdown) = serve(server().http_service(HttpConfig::default())).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}).to_string();
    let filler = "a".repeat(40 * KIB);
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nX-Filler: {filler}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let _ = stream.write_all(request.as_bytes()).await;
    let seen = read_to_close(&mut stream, Duration::from_secs(30)).await.expect("closed");
    assert_eq!(status_of(&seen), Some(431), "{}", String::from_utf8_lossy(&seen));

    // A head just within the limit is served.
    let mut client = RawClient::connect(addr, "/mcp").await.unwrap();
    let filler = "a".repeat(16 * KIB);
    let answer = client
        .request_with(hyper::Method::POST, None, None, &[("x-filler", &filler)], Some(&initialize_request("big")))
        .await
        .unwrap();
    assert_eq!(answer.status, 200, "{answer:?}");
    shutdown.cancel();
}

// ---------------------------------------------------------------------------------------------------------------
// Origins and hosts.

/// A page of a foreign origin is refused (`403`) on every request, before any handler runs; a request without
/// `Origin` (a client that is not a browser) and one from a loopback page are served.
#[tokio::test]
async fn a_foreign_origin_is_refused_and_an_absent_or_loopback_one_is_served() {
    let (addr, shutdown) = serve(server().http_service(HttpConfig::default())).await;
    let mut client = RawClient::connect(addr, "/mcp").await.unwrap();
    let evil = [("origin", "http://evil.example")];

    let answer =
        client.request_with(hyper::Method::POST, None, None, &evil, Some(&initialize_request("evil"))).await.unwrap();
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{answer:?}");
    assert!(answer.session().is_none());

    let call = stateless_call_request(1, "hh_echo", json!({"label": "origin-evil"}));
    let mut headers = vec![("mcp-method", "tools/call"), ("mcp-name", "hh_echo")];
    headers.extend(evil);
    let answer = client
        .request_with(hyper::Method::POST, None, Some(keel_tests::http::STATELESS_REVISION), &headers, Some(&call))
        .await
        .unwrap();
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{answer:?}");
    assert_eq!(ran("origin-evil"), 0, "no handler ran");

    // Over a session opened without an Origin, a request that carries a foreign one is refused too.
    let session = client.open_session("plain").await.unwrap();
    let body = call_request(2, "hh_echo", json!({"label": "origin-evil-session"}), None);
    let answer = client
        .request_with(hyper::Method::POST, Some(&session), Some(SESSION_REVISION), &evil, Some(&body))
        .await
        .unwrap();
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{answer:?}");
    assert_eq!(ran("origin-evil-session"), 0);
    // The string `null` (a sandboxed page) is foreign too.
    let answer = client
        .request_with(hyper::Method::POST, Some(&session), Some(SESSION_REVISION), &[("origin", "null")], Some(&body))
        .await
        .unwrap();
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{answer:?}");

    // No Origin, and a loopback page on any port: served.
    let body = call_request(3, "hh_echo", json!({"label": "origin-none"}), None);
    let answer = client.post(Some(&session), Some(SESSION_REVISION), &body).await.unwrap();
    assert_eq!(call_result(&answer), json!({"label": "origin-none"}));
    let body = call_request(4, "hh_echo", json!({"label": "origin-loopback"}), None);
    let local = [("origin", "http://localhost:5173")];
    let answer = client
        .request_with(hyper::Method::POST, Some(&session), Some(SESSION_REVISION), &local, Some(&body))
        .await
        .unwrap();
    assert_eq!(call_result(&answer), json!({"label": "origin-loopback"}));
    shutdown.cancel();
}

/// A public host name in the `Host` allowlist does not re-open DNS rebinding: a page of another origin that
/// reaches the server under that name is still refused, and the configured origin is served.
#[tokio::test]
async fn a_public_host_keeps_origin_validation() {
    let config = HttpConfig::default().allowed_hosts(["mcp.example.com"]).allowed_origins(["https://app.example.com"]);
    let (addr, shutdown) = serve(server().http_service(config)).await;
    let mut client = RawClient::connect(addr, "/mcp").await.unwrap();
    let init = initialize_request("public");
    let host = ("host", "mcp.example.com");

    let answer = client.request_with(hyper::Method::POST, None, None, &[host], Some(&init)).await.unwrap();
    assert_eq!(answer.status, 200, "no Origin: {answer:?}");
    for origin in ["http://evil.example", "http://localhost:8080", "https://app.example.com:8443"] {
        let answer = client
            .request_with(hyper::Method::POST, None, None, &[host, ("origin", origin)], Some(&init))
            .await
            .unwrap();
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{origin}: {answer:?}");
    }
    let answer = client
        .request_with(hyper::Method::POST, None, None, &[host, ("origin", "https://app.example.com")], Some(&init))
        .await
        .unwrap();
    assert_eq!(answer.status, 200, "{answer:?}");
    // Loopback is no longer a host this server answers to.
    let answer = client.post(None, None, &init).await.unwrap();
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{answer:?}");
    shutdown.cancel();
}

// ---------------------------------------------------------------------------------------------------------------
// Bodies.

/// The most bytes this thread held at once while `f` ran, beyond what it held before.
async fn peak_during<F: std::future::Future>(f: F) -> (F::Output, usize) {
    let before = keel_tests::alloc::start();
    let out = f.await;
    (out, keel_tests::alloc::peak_since(before))
}

/// Sends `head` then `body` on one connection and reads the answer, while the body is still being written.
async fn send_raw(addr: SocketAddr, head: String, body: &[u8]) -> Vec<u8> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let writing = async {
        let _ = write.write_all(head.as_bytes()).await;
        for piece in body.chunks(64 * KIB) {
            if write.write_all(piece).await.is_err() {
                break;
            }
        }
    };
    let reading = async {
        let mut seen = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(30), read.read_to_end(&mut seen)).await;
        seen
    };
    let ((), seen) = tokio::join!(writing, reading);
    seen
}

/// A 2 MiB `tools/call` (twice the executor's argument limit) is answered `413` and runs nothing, whether its
/// length is declared or it comes chunked; and it is refused before it is parsed: the server thread never holds
/// more than the limit and the transport's buffers, a fraction of what parsing it would take.
// The current-thread runtime runs the server and the client on this thread, which is the one measured.
#[tokio::test(flavor = "current_thread")]
async fn a_body_past_the_limit_is_refused_before_it_is_parsed() {
    let service = server().http_service(HttpConfig::default());
    assert_eq!(
        service.max_body_bytes(),
        keel_tools_core::schema::Limits::DEFAULT.max_bytes,
        "the executor's argument limit"
    );
    let (addr, shutdown) = serve(service).await;

    // 2 MiB of small objects: parsed into a `Value`, each would be an allocation of its own.
    let items = vec![json!({"k": 1}); 2 * MIB / 8];
    let body = serde_json::to_vec(&stateless_call_request(1, "hh_items", json!({"label": "body-big", "items": items})))
        .unwrap();
    assert!(body.len() > 2 * MIB);
    drop(items);
    let head = |length: &str| {
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2026-07-28\r\n\
             Mcp-Method: tools/call\r\nMcp-Name: hh_items\r\n{length}\r\n\r\n"
        )
    };

    let (seen, peak) = peak_during(send_raw(addr, head(&format!("Content-Length: {}", body.len())), &body)).await;
    assert_eq!(status_of(&seen), Some(413), "{}", String::from_utf8_lossy(&seen));
    assert!(peak < 256 * KIB, "a declared length past the limit is refused unread: {peak} bytes held");

    let mut chunked = Vec::with_capacity(body.len() + 64 * KIB);
    for piece in body.chunks(16 * KIB) {
        chunked.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        chunked.extend_from_slice(piece);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let (seen, peak) = peak_during(send_raw(addr, head("Transfer-Encoding: chunked"), &chunked)).await;
    assert_eq!(status_of(&seen), Some(413), "{}", String::from_utf8_lossy(&seen));
    // Read up to the limit into one buffer, plus hyper's read buffer (up to 408 KiB, and more while it grows):
    // bounded whatever way the network splits the body.
    assert!(peak < 2 * MIB, "read up to the limit, never parsed: {peak} bytes held");
    // Parsing the limit's worth of this body would hold many times more.
    let within: Vec<u8> = serde_json::to_vec(&vec![json!({"k": 1}); MIB / 8]).unwrap();
    let (parsed, parsing) = keel_tests::alloc::peak_during(|| serde_json::from_slice::<serde_json::Value>(&within));
    drop(parsed.unwrap());
    assert!(peak * 4 < parsing, "{peak} bytes held while refusing; parsing {} bytes holds {parsing}", within.len());
    assert_eq!(ran("body-big"), 0, "no handler ran");

    // Within the limit, the same tool runs.
    let items = vec![json!({"k": 1}); 1000];
    let mut client = RawClient::connect(addr, "/mcp").await.unwrap();
    let answer = client
        .post_stateless(&stateless_call_request(2, "hh_items", json!({"label": "body-ok", "items": items})))
        .await;
    assert_eq!(answer.unwrap().status, 200);
    assert_eq!(ran("body-ok"), 1);
    shutdown.cancel();
}

// ---------------------------------------------------------------------------------------------------------------
// Caps reached while admitted work finishes.

/// Waits until `n` calls labelled `label` have started.
async fn started(label: &str, n: usize) {
    while ran(label) < n {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Past the cap of calls in flight on a session, one more is answered `429` with `Retry-After` and runs nothing,
/// while the client's notifications still go through and the admitted calls finish; once they have, calls are
/// admitted again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_cap_of_calls_in_a_session_a_call_gets_429_and_the_admitted_ones_finish() {
    with_deadline(Duration::from_secs(60), async {
        let (addr, shutdown) = serve(server().http_service(HttpConfig::default().max_calls_per_session(2))).await;
        let mut client = RawClient::connect(addr, "/mcp").await.unwrap();
        let session = client.open_session("busy").await.unwrap();
        let mut held = Vec::new();
        for id in 1..=2u64 {
            let session = session.clone();
            held.push(tokio::spawn(async move {
                let mut own = RawClient::connect(addr, "/mcp").await.unwrap();
                let body = call_request(id, "hh_held", json!({"label": "cap-session"}), None);
                own.post(Some(&session), Some(SESSION_REVISION), &body).await.unwrap()
            }));
        }
        started("cap-session", 2).await;

        let body = call_request(3, "hh_echo", json!({"label": "cap-session-over"}), None);
        let answer = client.post(Some(&session), Some(SESSION_REVISION), &body).await.unwrap();
        assert_busy(&answer, 429);
        assert_eq!(ran("cap-session-over"), 0, "no handler ran");
        // A notification is the client's, not a call: it is never refused.
        let note = json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"});
        let answer = client.post(Some(&session), Some(SESSION_REVISION), &note).await.unwrap();
        assert_eq!(answer.status, StatusCode::ACCEPTED, "{answer:?}");
        // Another session is not affected.
        let mut other = RawClient::connect(addr, "/mcp").await.unwrap();
        let second = other.open_session("other").await.unwrap();
        let body = call_request(1, "hh_echo", json!({"label": "cap-session-other"}), None);
        assert_eq!(
            call_result(&other.post(Some(&second), Some(SESSION_REVISION), &body).await.unwrap())["label"],
            "cap-session-other"
        );

        gate("cap-session").add_permits(2);
        for call in held {
            let answer = call.await.unwrap();
            assert_eq!(call_result(&answer), json!({"label": "cap-session"}), "the admitted calls finish");
        }
        let body = call_request(4, "hh_echo", json!({"label": "cap-session-after"}), None);
        let answer = client.post(Some(&session), Some(SESSION_REVISION), &body).await.unwrap();
        assert_eq!(call_result(&answer), json!({"label": "cap-session-after"}));
        shutdown.cancel();
    })
    .await;
}

/// A request sent in a session whose `_meta` names its revision is served without the session, so it takes a
/// stateless slot: with that cap full it is answered `503` and runs nothing, whether the key is written plainly or
/// with an escape (`\/`) that a search for the key's bytes would miss; a call of the session without it is served
/// in the session meanwhile, and once the cap frees, the escaped one is served too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_request_that_names_its_revision_takes_a_stateless_slot_however_the_key_is_written() {
    with_deadline(Duration::from_secs(60), async {
        let (addr, shutdown) = serve(server().http_service(HttpConfig::default().max_stateless_requests(1))).await;
        // The session first: `initialize` is a request without one.
        let mut client = RawClient::connect(addr, "/mcp").await.unwrap();
        let session = client.open_session("meta").await.unwrap();
        let held = tokio::spawn(async move {
            let mut own = RawClient::connect(addr, "/mcp").await.unwrap();
            own.post_stateless(&stateless_call_request(1, "hh_held", json!({"label": "meta-slot"}))).await.unwrap()
        });
        started("meta-slot", 1).await;

        // Its `_meta` names the revision its header names (rmcp refuses a request whose two differ).
        let named = |id: u64, label: &str| {
            let mut body = stateless_call_request(id, "hh_echo", json!({"label": label}));
            body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!(SESSION_REVISION);
            serde_json::to_string(&body).unwrap()
        };
        let plain = named(2, "meta-plain");
        let escaped = named(3, "meta-escaped")
            .replace("io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol\\/protocolVersion");
        assert!(escaped.contains(r"modelcontextprotocol\/protocolVersion"), "{escaped}");
        for (body, label) in [(&plain, "meta-plain"), (&escaped, "meta-escaped")] {
            let answer = client.post_bytes(Some(&session), Some(SESSION_REVISION), body.as_bytes()).await.unwrap();
            assert_busy(&answer, 503);
            assert_eq!(ran(label), 0, "{label}: no handler ran");
        }
        let body = call_request(4, "hh_echo", json!({"label": "meta-in-session"}), None);
        let answer = client.post(Some(&session), Some(SESSION_REVISION), &body).await.unwrap();
        assert_eq!(call_result(&answer), json!({"label": "meta-in-session"}), "the session's own slot is free");

        gate("meta-slot").add_permits(1);
        assert_eq!(call_result(&held.await.unwrap()), json!({"label": "meta-slot"}));
        let answer = client.post_bytes(Some(&session), Some(SESSION_REVISION), escaped.as_bytes()).await.unwrap();
        assert_eq!(ran("meta-escaped"), 1, "served once the stateless slot is free: {answer:?}");
        shutdown.cancel();
    })
    .await;
}

/// Past the cap of requests in flight without a session, one more is answered `503` with `Retry-After` and runs
/// nothing, and the admitted one finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_cap_of_stateless_requests_one_more_gets_503_and_the_admitted_one_finishes() {
    with_deadline(Duration::from_secs(60), async {
        let (addr, shutdown) = serve(server().http_service(HttpConfig::default().max_stateless_requests(1))).await;
        let held = tokio::spawn(async move {
            let mut own = RawClient::connect(addr, "/mcp").await.unwrap();
            own.post_stateless(&stateless_call_request(1, "hh_held", json!({"label": "cap-stateless"}))).await.unwrap()
        });
        started("cap-stateless", 1).await;
        let mut client = RawClient::connect(addr, "/mcp").await.unwrap();
        let answer = client
            .post_stateless(&stateless_call_request(2, "hh_echo", json!({"label": "cap-stateless-over"})))
            .await
            .unwrap();
        assert_busy(&answer, 503);
        assert_eq!(ran("cap-stateless-over"), 0);
        gate("cap-stateless").add_permits(1);
        assert_eq!(call_result(&held.await.unwrap()), json!({"label": "cap-stateless"}));
        let answer = client
            .post_stateless(&stateless_call_request(3, "hh_echo", json!({"label": "cap-stateless-after"})))
            .await
            .unwrap();
        assert_eq!(call_result(&answer), json!({"label": "cap-stateless-after"}));
        shutdown.cancel();
    })
    .await;
}

/// Past the cap per client address a connection is answered `429`, past the total cap `503`, both with
/// `Retry-After` and without their request being read; admitted connections keep working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_connection_caps_a_connection_is_refused_and_admitted_ones_keep_working() {
    with_deadline(Duration::from_secs(60), async {
        let config = HttpConfig::default().max_connections(3).max_connections_per_client(2);
        let (addr, shutdown) = serve(server().http_service(config)).await;
        let mut client = RawClient::connect(addr, "/mcp").await.unwrap();
        let session = client.open_session("admitted").await.unwrap();
        let _idle = [connect_from("127.0.0.2", addr).await, connect_from("127.0.0.2", addr).await];
        tokio::time::sleep(Duration::from_millis(100)).await;

        let request = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}";
        for (from, status) in [("127.0.0.2", 429), ("127.0.0.3", 503)] {
            let mut stream = connect_from(from, addr).await;
            let _ = stream.write_all(request.as_bytes()).await;
            let seen = read_to_close(&mut stream, Duration::from_secs(10)).await.expect("closed");
            assert_eq!(status_of(&seen), Some(status), "{from}: {}", String::from_utf8_lossy(&seen));
            assert!(header_of(&seen, "retry-after").is_some(), "{}", String::from_utf8_lossy(&seen));
        }
        let body = call_request(1, "hh_echo", json!({"label": "conn-admitted"}), None);
        let answer = client.post(Some(&session), Some(SESSION_REVISION), &body).await.unwrap();
        assert_eq!(call_result(&answer), json!({"label": "conn-admitted"}));
        shutdown.cancel();
    })
    .await;
}

// ---------------------------------------------------------------------------------------------------------------
// Health.

/// The health route says ok or degraded and nothing more, unless told to send its report.
#[tokio::test]
async fn the_health_route_shows_its_details_only_when_configured() {
    let report = || HealthReport {
        healthy: false,
        body: json!({"status": "degraded", "store": {"address": "db.internal:5432", "error": "connection refused"}}),
    };
    for (details, expected) in [
        (false, json!({"status": "degraded"})),
        (true, json!({"status": "degraded", "store": {"address": "db.internal:5432", "error": "connection refused"}})),
    ] {
        let config = HttpConfig::default().health("/health", report).health_details(details);
        let (addr, shutdown) = serve(server().http_service(config)).await;
        let (status, body) = keel_tests::http::get(&format!("http://{addr}/health")).await.unwrap();
        assert_eq!(status, 503);
        assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), expected);
        shutdown.cancel();
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Slow bodies.

/// 300 connections from one address send a whole head with `Content-Length: 1000`, then one byte of body, and
/// stop, while a normal client keeps calling over its session from another address. Each slow body holds a request
/// slot while it is read: the first `max_stateless_requests` are answered `408` at the body deadline and closed, the
/// rest `503` at once; the normal client is served throughout, and a stateless call is served once they are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_are_answered_408_at_the_deadline_while_a_client_keeps_calling() {
    const SLOW: usize = 300;
    let _watchdog = keel_tests::watchdog("slow bodies", Duration::from_secs(120));
    let (addr, shutdown) = serve(server().http_service(HttpConfig::default())).await;
    let mut client = RawClient::connect(addr, "/mcp").await.expect("connect");
    let session = client.open_session("normal").await.expect("session");

    let head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
                Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2026-07-28\r\n\
                Mcp-Method: tools/call\r\nMcp-Name: hh_echo\r\nContent-Length: 1000\r\n\r\n{";
    let mut slow = tokio::task::JoinSet::new();
    for _ in 0..SLOW {
        let mut stream = connect_from("127.0.0.2", addr).await;
        let _ = stream.write_all(head.as_bytes()).await;
        slow.spawn(async move { read_to_close(&mut stream, Duration::from_secs(40)).await });
    }

    let calling = CancellationToken::new();
    let caller = {
        let calling = calling.clone();
        tokio::spawn(async move {
            let mut calls = 0u32;
            while !calling.is_cancelled() {
                calls += 1;
                let label = format!("slow-body-normal-{calls}");
                let body = call_request(u64::from(calls), "hh_echo", json!({"label": label}), None);
                let answer = client.post(Some(&session), Some(SESSION_REVISION), &body).await.expect("call");
                assert_eq!(answer.status, 200, "{answer:?}");
                assert_eq!(call_result(&answer), json!({"label": label}));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (client, calls)
        })
    };

    let outcomes = slow.join_all().await;
    calling.cancel();
    let (mut client, calls) = caller.await.expect("the normal client never failed");
    let mut statuses: HashMap<Option<u16>, usize> = HashMap::new();
    for outcome in &outcomes {
        let seen = outcome.as_ref().expect("every slow connection is closed");
        *statuses.entry(status_of(seen)).or_default() += 1;
    }
    let held = keel_tools_mcp::http::DEFAULT_MAX_STATELESS_REQUESTS;
    assert_eq!(statuses.get(&Some(408)).copied(), Some(held), "held up to the stateless cap: {statuses:?}");
    assert_eq!(statuses.get(&Some(503)).copied(), Some(SLOW - held), "the rest refused at once: {statuses:?}");
    assert!(calls >= 10, "the normal client kept calling: {calls} calls");
    let answer = client
        .post_stateless(&stateless_call_request(1, "hh_echo", json!({"label": "slow-body-after"})))
        .await
        .unwrap();
    assert_eq!(call_result(&answer), json!({"label": "slow-body-after"}));
    assert_eq!(ran("slow-body-after"), 1);
    shutdown.cancel();
}

// ---------------------------------------------------------------------------------------------------------------
// The order of the checks.

/// A foreign `Origin` or `Host` is refused `403` before anything else is done: it spends none of its address's rate
/// budget (the local client's next requests are served), and a foreign request whose body never comes is answered
/// at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_origin_or_host_spends_no_rate_budget_and_is_refused_before_its_body() {
    with_deadline(Duration::from_secs(60), async {
        let quota = keel_tools_mcp::http::Quota::per_minute(std::num::NonZeroU32::new(2).unwrap());
        let config = HttpConfig::default().rate_limits(keel_tools_mcp::http::RateLimits::new().per_principal(quota));
        let (addr, shutdown) = serve(server().http_service(config)).await;
        let mut client = RawClient::connect(addr, "/mcp").await.unwrap();
        let call = |id: u64, label: &str| stateless_call_request(id, "hh_echo", json!({"label": label}));
        let foreign: [&[(&str, &str)]; 2] = [&[("origin", "http://evil.example")], &[("host", "evil.example")]];
        for (i, extra) in foreign.iter().enumerate() {
            for id in 0..4u64 {
                let mut headers = vec![("mcp-method", "tools/call"), ("mcp-name", "hh_echo")];
                headers.extend_from_slice(extra);
                let body = call(id, "order-foreign");
                let answer = client
                    .request_with(
                        hyper::Method::POST,
                        None,
                        Some(keel_tests::http::STATELESS_REVISION),
                        &headers,
                        Some(&body),
                    )
                    .await
                    .unwrap();
                assert_eq!(answer.status, StatusCode::FORBIDDEN, "foreign {i}, request {id}: {answer:?}");
            }
        }
        assert_eq!(ran("order-foreign"), 0);
        // The local client, from the same address, has its whole budget.
        for id in 1..=2u64 {
            let label = format!("order-local-{id}");
            let answer = client.post_stateless(&call(id, &label)).await.unwrap();
            assert_eq!(answer.status, 200, "{answer:?}");
            assert_eq!(call_result(&answer), json!({"label": label}));
        }

        // A foreign page's request whose body never comes is refused at once, not after the body deadline.
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://evil.example\r\n\
                    Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
                    Content-Length: 1000\r\n\r\n{";
        stream.write_all(head.as_bytes()).await.unwrap();
        let seen = read_to_close(&mut stream, Duration::from_secs(5)).await.expect("answered and closed at once");
        assert_eq!(status_of(&seen), Some(403), "{}", String::from_utf8_lossy(&seen));
        shutdown.cancel();
    })
    .await;
}

/// The health route and the protected resource metadata answer only the hosts and origins the MCP path answers.
#[tokio::test]
async fn a_foreign_host_or_origin_gets_403_on_health_and_metadata() {
    use keel_tools_mcp::http::auth::{ResourceServer, StaticTokens};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let healthy = || HealthReport { healthy: true, body: json!({"status": "ok"}) };
    let resource = ResourceServer::new(format!("http://{addr}/mcp"), StaticTokens::new());
    let service = server().http_service(HttpConfig::default().health("/health", healthy).auth(resource));
    let (metadata, _) = service.protected_resource_metadata().expect("metadata");
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move { service.serve(listener, "/mcp", stop).await });

    for path in ["/health", metadata.as_str()] {
        let get = |extra: &str| format!("GET {path} HTTP/1.1\r\n{extra}Connection: close\r\n\r\n");
        for (extra, status) in [
            ("Host: 127.0.0.1\r\n", 200),
            ("Host: evil.example\r\n", 403),
            ("Host: 127.0.0.1\r\nOrigin: http://evil.example\r\n", 403),
            ("Host: localhost\r\nOrigin: http://localhost:5173\r\n", 200),
        ] {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            stream.write_all(get(extra).as_bytes()).await.unwrap();
            let seen = read_to_close(&mut stream, Duration::from_secs(10)).await.expect("closed");
            assert_eq!(status_of(&seen), Some(status), "{path} with {extra:?}: {}", String::from_utf8_lossy(&seen));
        }
    }
    shutdown.cancel();
}

// ---------------------------------------------------------------------------------------------------------------
// Session headers.

/// A stateless request is held to the stateless cap whatever `Mcp-Session-Id` it carries: an unknown one, or the
/// id of a session that is open (a 2026-07-28 request is served statelessly either way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_header_does_not_take_a_stateless_request_past_the_cap() {
    with_deadline(Duration::from_secs(60), async {
        let (addr, shutdown) = serve(server().http_service(HttpConfig::default().max_stateless_requests(1))).await;
        let mut client = RawClient::connect(addr, "/mcp").await.unwrap();
        let session = client.open_session("open").await.unwrap();
        let held = tokio::spawn(async move {
            let mut own = RawClient::connect(addr, "/mcp").await.unwrap();
            own.post_stateless(&stateless_call_request(1, "hh_held", json!({"label": "cap-header"}))).await.unwrap()
        });
        started("cap-header", 1).await;
        let headers = [("mcp-method", "tools/call"), ("mcp-name", "hh_echo")];
        for id in ["no-such-session", session.as_str()] {
            let body = stateless_call_request(2, "hh_echo", json!({"label": "cap-header-over"}));
            let answer = client
                .request_with(
                    hyper::Method::POST,
                    Some(id),
                    Some(keel_tests::http::STATELESS_REVISION),
                    &headers,
                    Some(&body),
                )
                .await
                .unwrap();
            assert_busy(&answer, 503);
        }
        assert_eq!(ran("cap-header-over"), 0, "no handler ran");
        gate("cap-header").add_permits(1);
        assert_eq!(call_result(&held.await.unwrap()), json!({"label": "cap-header"}));
        // The session itself still takes calls.
        let body = call_request(3, "hh_echo", json!({"label": "cap-header-session"}), None);
        let answer = client.post(Some(&session), Some(SESSION_REVISION), &body).await.unwrap();
        assert_eq!(call_result(&answer), json!({"label": "cap-header-session"}));
        shutdown.cancel();
    })
    .await;
}

/// An `Mcp-Session-Id` that is not UTF-8 is answered `400`, and an `initialize` carrying one opens no session.
#[tokio::test]
async fn a_session_header_that_is_not_utf8_is_400_and_opens_no_session() {
    let service = server().http_service(HttpConfig::default());
    let (addr, shutdown) = serve(service.clone()).await;
    let body = serde_json::to_vec(&initialize_request("bytes")).unwrap();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\nMcp-Session-Id: ",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(b"\xff\xfe-session\r\n\r\n");
    request.extend_from_slice(&body);
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(&request).await.unwrap();
    let seen = read_to_close(&mut stream, Duration::from_secs(10)).await.expect("closed");
    assert_eq!(status_of(&seen), Some(400), "{}", String::from_utf8_lossy(&seen));
    assert!(header_of(&seen, "mcp-session-id").is_none(), "{}", String::from_utf8_lossy(&seen));
    assert_eq!(service.sessions(), 0, "no session was opened");
    shutdown.cancel();
}
