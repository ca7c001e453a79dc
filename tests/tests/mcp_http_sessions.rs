//! A flood of `initialize` requests against the Streamable HTTP server: 100,000 of them over 8 keep-alive
//! connections, with the default session cap and no idle expiry, so that only the cap can bound what the server
//! keeps. Checks that exactly the cap's worth of sessions were opened and every other `initialize` got `503` with
//! `Retry-After` (no other status), that the process's peak RSS stays under 256 MiB, that every open session still
//! answers a call, and that deleting them frees every place. Prints the memory per idle session (run with
//! `--nocapture`). Listens on 127.0.0.1 only; bounded by a watchdog.

use std::time::{Duration, Instant};

use keel_tests::http::{RawClient, SESSION_REVISION, call_request};
use keel_tests::memory_kib;
use keel_tools_core::{Executor, Registry, tool};
use keel_tools_mcp::http::DEFAULT_MAX_SESSIONS;
use keel_tools_mcp::{HttpConfig, McpServer};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

const INITIALIZES: usize = 100_000;
const CONNECTIONS: usize = 8;
/// Peak resident memory allowed for the whole test process (server and clients).
const MAX_PEAK_RSS_KIB: u64 = 256 * 1024;

#[derive(Serialize, JsonSchema)]
struct Sum {
    sum: i64,
}

/// Adds two numbers.
#[tool(effect = "read", version = "1.0")]
fn fl_add(a: i64, b: i64) -> Sum {
    Sum { sum: a + b }
}

#[derive(Default)]
struct Tally {
    opened: Vec<String>,
    refused: usize,
    refused_without_retry_after: usize,
    other: Vec<String>,
}

#[test]
fn a_hundred_thousand_initializes_open_only_the_cap_and_refuse_the_rest() {
    // Peak RSS is the process's: the test runs in a process of its own.
    if !keel_tests::in_own_process() {
        return;
    }
    let watchdog = keel_tests::watchdog("initialize flood", Duration::from_secs(600));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let registry = Registry::from_inventory().unwrap();
    let executor = Executor::new(registry.view().names(["fl_add"]).build().unwrap()).unwrap();
    let server = McpServer::new(executor).unwrap();
    // No idle expiry: nothing but the cap may bound the sessions.
    let service = server.http_service(HttpConfig::default().session_idle_timeout(None));
    assert_eq!(service.max_sessions(), DEFAULT_MAX_SESSIONS);

    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().unwrap();
        assert!(addr.ip().is_loopback());
        let shutdown = tokio_util::sync::CancellationToken::new();
        let serving = {
            let (service, shutdown) = (service.clone(), shutdown.clone());
            tokio::spawn(async move { service.serve(listener, "/mcp", shutdown).await })
        };
        let rss_before = memory_kib().1;

        let began = Instant::now();
        let flooders: Vec<_> = (0..CONNECTIONS)
            .map(|c| {
                tokio::spawn(async move {
                    let mut client = RawClient::connect(addr, "/mcp").await.expect("connect");
                    let mut tally = Tally::default();
                    for i in (c..INITIALIZES).step_by(CONNECTIONS) {
                        let answer = client.initialize(&format!("flood-{i}")).await.expect("an answer");
                        match answer.status.as_u16() {
                            200 => match answer.session() {
                                Some(id) => tally.opened.push(id),
                                None => tally.other.push(format!("200 without a session: {answer:?}")),
                            },
                            503 => {
                                tally.refused += 1;
                                let retry = answer.headers.get("retry-after").and_then(|v| v.to_str().ok());
                                if retry.and_then(|r| r.parse::<u64>().ok()).is_none() {
                                    tally.refused_without_retry_after += 1;
                                }
                            }
                            _ => tally.other.push(format!("{answer:?}")),
                        }
                    }
                    tally
                })
            })
            .collect();
        let mut all = Tally::default();
        for f in flooders {
            let t = f.await.expect("a flooder panicked");
            all.opened.extend(t.opened);
            all.refused += t.refused;
            all.refused_without_retry_after += t.refused_without_retry_after;
            all.other.extend(t.other);
        }
        let flood_took = began.elapsed();
        let rss_after = memory_kib().1;

        assert!(all.other.is_empty(), "{} answers neither 200 nor 503, e.g. {:?}", all.other.len(), all.other.first());
        assert_eq!(all.opened.len(), DEFAULT_MAX_SESSIONS, "sessions opened");
        assert_eq!(all.refused, INITIALIZES - DEFAULT_MAX_SESSIONS, "initializes refused");
        assert_eq!(all.refused_without_retry_after, 0, "refusals without a Retry-After in seconds");
        let distinct: std::collections::HashSet<&String> = all.opened.iter().collect();
        assert_eq!(distinct.len(), all.opened.len(), "session ids are distinct");
        assert_eq!(service.sessions(), DEFAULT_MAX_SESSIONS);

        // Every open session still answers.
        let mut client = RawClient::connect(addr, "/mcp").await.expect("connect");
        for (i, session) in all.opened.iter().enumerate() {
            let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            let ack = client.post(Some(session), Some(SESSION_REVISION), &note).await.expect("initialized");
            assert_eq!(ack.status, 202, "{ack:?}");
            let body = call_request(1, "fl_add", json!({"a": i, "b": 1}), None);
            let answer = client.post(Some(session), Some(SESSION_REVISION), &body).await.expect("call");
            let result = answer.messages().last().cloned().unwrap_or_default();
            assert_eq!(result["result"]["structuredContent"], json!({"sum": i + 1}), "session {i}: {answer:?}");
        }
        let rss_used = memory_kib().1;

        // Deleting them frees every place.
        for session in &all.opened {
            let deleted = client.delete(session).await.expect("delete");
            assert!(deleted.status.is_success(), "{deleted:?}");
        }
        let closing = Instant::now();
        while service.sessions() > 0 && closing.elapsed() < Duration::from_secs(30) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(service.sessions(), 0, "sessions left after every one was deleted");
        let reopened = client.initialize("after").await.expect("answer");
        assert_eq!(reopened.status, 200, "a place is free again");

        let (peak, _) = memory_kib();
        let per_session = rss_after.saturating_sub(rss_before) as f64 / DEFAULT_MAX_SESSIONS as f64;
        eprintln!(
            "initialize flood: {INITIALIZES} initializes over {CONNECTIONS} connections in {flood_took:.2?} \
             ({:.0}/s): {} sessions opened, {} refused with 503; RSS before {} MiB, after the flood {} MiB \
             ({per_session:.1} KiB per idle session), after a call on each {} MiB, peak (VmHWM) {} MiB",
            INITIALIZES as f64 / flood_took.as_secs_f64(),
            all.opened.len(),
            all.refused,
            rss_before / 1024,
            rss_after / 1024,
            rss_used / 1024,
            peak / 1024,
        );
        assert!(peak < MAX_PEAK_RSS_KIB, "peak RSS {peak} KiB");

        shutdown.cancel();
        let served = tokio::time::timeout(Duration::from_secs(10), serving).await.expect("the server stops");
        assert!(served.expect("join").is_ok());
    });
    drop(watchdog);
}
