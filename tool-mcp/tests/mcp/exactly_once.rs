//! Calls that run once (`keel_tools_core::once`) over MCP, over real HTTP on loopback: two servers (replicas) whose
//! executors share one ledger. A `tools/call` whose `_meta` carries `keel/idempotencyKey` is the same call through
//! either replica, in either protocol era: its handler runs once, and the retry is answered with the recorded
//! result. A key that is not a string of 1 to 256 bytes is refused as invalid params.
//!
//! `cargo test -p keel-tools-mcp --features server,http --test mcp -- exactly_once::`

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{Era, Peer};
use keel_tools_core::definition::{Effect, ToolDefinition};
use keel_tools_core::once::{Begin, EffectLedger, Lease, LedgerError, LedgerFuture, OnceFor};
use keel_tools_core::policy::{PolicyDecision, PolicyRequest};
use keel_tools_core::{Executor, ToolView};
use keel_tools_mcp::server::{IDEMPOTENCY_KEY_META, McpServer};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// A ledger in memory, shared by the test's replicas: key → (fingerprint, the result once finished).
#[derive(Default)]
struct Memory {
    records: Mutex<HashMap<String, (String, Option<Value>)>>,
    leases: AtomicUsize,
}

impl EffectLedger for Memory {
    fn begin<'a>(&'a self, key: &'a str, fingerprint: &'a str, _: Duration) -> LedgerFuture<'a, Begin> {
        let mut records = self.records.lock().unwrap();
        let begun = match records.get(key) {
            None => {
                records.insert(key.to_owned(), (fingerprint.to_owned(), None));
                let token = self.leases.fetch_add(1, Ordering::SeqCst).to_string();
                Ok(Begin::Run(Lease::new(key, token, u64::MAX)))
            }
            Some((recorded, _)) if recorded != fingerprint => Err(LedgerError::Conflict { key: key.to_owned() }),
            Some((_, Some(result))) => Ok(Begin::Replay(result.clone())),
            Some((_, None)) => Ok(Begin::InProgress { lease_expires_at_ms: u64::MAX }),
        };
        Box::pin(async move { begun })
    }

    fn finish<'a>(&'a self, lease: &'a Lease, result: &'a Value) -> LedgerFuture<'a, ()> {
        if let Some(record) = self.records.lock().unwrap().get_mut(lease.key()) {
            record.1 = Some(result.clone());
        }
        Box::pin(async { Ok(()) })
    }

    fn abandon<'a>(&'a self, lease: &'a Lease) -> LedgerFuture<'a, ()> {
        self.records.lock().unwrap().remove(lease.key());
        Box::pin(async { Ok(()) })
    }
}

/// A replica: `refund` (a write, allowed), counting its runs in `runs`, running once through `ledger`.
async fn replica(ledger: Arc<Memory>, runs: Arc<AtomicUsize>) -> (String, CancellationToken) {
    let refund = ToolDefinition::builder("refund")
        .description("Refund an order.")
        .version("1.0")
        .effect(Effect::Write)
        .input_schema(json!({"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}))
        .handler(move |arguments: Value, _ctx| {
            let runs = runs.clone();
            async move {
                let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
                Ok(json!({"refunded": arguments["order"], "run": run}))
            }
        })
        .build()
        .unwrap();
    let executor = Executor::builder(ToolView::new(vec![Arc::new(refund)]))
        .policy(|_: &PolicyRequest<'_>| PolicyDecision::Allow)
        .exactly_once(ledger, OnceFor::Writes)
        .build()
        .unwrap();
    // One client, retrying through either replica with its own key: the replicas' operator declares that client's
    // key space (an anonymous caller's keys are its stream's alone, so a retry over another connection would be
    // another call).
    let server = McpServer::builder(executor)
        .call_options(|_, _| keel_tools_core::executor::CallOptions::new().caller_scope("the-one-client"))
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    let shutdown = stop.clone();
    tokio::spawn(async move { server.serve_http(listener, "/mcp", shutdown).await });
    (url, stop)
}

fn refund(order: &str, key: Value) -> Value {
    json!({"name": "refund", "arguments": {"order": order}, "_meta": {IDEMPOTENCY_KEY_META: key}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_retried_with_its_key_through_another_replica_runs_once() {
    let (ledger, runs) = (Arc::new(Memory::default()), Arc::new(AtomicUsize::new(0)));
    let (a, _stop_a) = replica(ledger.clone(), runs.clone()).await;
    let (b, _stop_b) = replica(ledger.clone(), runs.clone()).await;
    for (era, key) in [(Era::Stateless, "refund-o-1"), (Era::Session, "refund-o-2")] {
        let before = runs.load(Ordering::SeqCst);
        let mut to_a = Peer::new(&a, None, era);
        to_a.open().await;
        let mut to_b = Peer::new(&b, None, era);
        to_b.open().await;
        let first = to_a.request(1, "tools/call", refund(key, json!(key))).await;
        assert_eq!(first.status, 200, "{first:?}");
        // The retry: another replica, another request id (and, in a session, another session).
        let retry = to_b.request(9, "tools/call", refund(key, json!(key))).await;
        assert_eq!(retry.call_text(), first.call_text(), "{era:?}: {retry:?}");
        assert_eq!(retry.body["result"]["isError"], json!(false));
        assert_eq!(runs.load(Ordering::SeqCst), before + 1, "{era:?}: ran once");

        // Without a key, a call is named by its session (or request) and id: through another replica it is another
        // call, and runs again.
        let plain = json!({"name": "refund", "arguments": {"order": key}});
        to_a.request(2, "tools/call", plain.clone()).await;
        to_b.request(2, "tools/call", plain).await;
        assert_eq!(runs.load(Ordering::SeqCst), before + 3, "{era:?}: two requests without a key, two runs");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_is_not_a_short_string_is_refused_as_invalid_params() {
    let (ledger, runs) = (Arc::new(Memory::default()), Arc::new(AtomicUsize::new(0)));
    let (a, _stop) = replica(ledger, runs.clone()).await;
    let peer = Peer::new(&a, None, Era::Stateless);
    for bad in [json!(7), json!(""), json!("k".repeat(257)), json!({"key": "k"})] {
        let reply = peer.request(1, "tools/call", refund("o-1", bad.clone())).await;
        assert_eq!(reply.body["error"]["code"], json!(-32602), "{bad}: {reply:?}");
        assert!(reply.body["error"]["message"].as_str().unwrap().contains("keel/idempotencyKey"), "{reply:?}");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let fine = peer.request(2, "tools/call", refund("o-1", json!("k".repeat(256)))).await;
    assert_eq!(fine.body["result"]["isError"], json!(false), "{fine:?}");
}
