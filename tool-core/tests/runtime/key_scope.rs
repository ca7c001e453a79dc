//! Idempotency keys given by callers without a tenant or principal never cross from one caller to another: an
//! anonymous caller's key is bound to its stream, or to the caller scope the host gives it.
//!
//! `cargo test -p keel-tools-core --test runtime -- key_scope::`

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_tools_core::definition::{Effect, ToolDefinition};
use keel_tools_core::executor::CallOptions;
use keel_tools_core::once::{Begin, EffectLedger, Lease, LedgerError, LedgerFuture, OnceFor};
use keel_tools_core::policy::{PolicyDecision, PolicyRequest};
use keel_tools_core::{Executor, Registry, ToolCall, ToolError, ToolResult};
use serde_json::{Value, json};

/// A ledger in memory: key → (fingerprint, the result once finished).
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

/// An executor with `note.send` (a write, allowed, running once through a ledger in memory), which returns the
/// note it sent; its runs counted in `runs`.
fn sender(runs: Arc<AtomicUsize>) -> Executor {
    let tool = ToolDefinition::builder("note.send")
        .description("Send a note.")
        .version("1.0")
        .effect(Effect::Write)
        .input_schema(json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}))
        .handler(move |args: Value, _ctx: keel_tools_core::CallContext| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ToolError>(json!({"sent": args["text"]}))
            }
        })
        .build()
        .unwrap();
    let registry = Registry::builder().without_inventory().tools([tool]).build().unwrap();
    Executor::builder(registry.view().build().unwrap())
        .policy(|_: &PolicyRequest<'_>| PolicyDecision::Allow)
        .exactly_once(Arc::new(Memory::default()), OnceFor::Writes)
        .exactly_once_wait(Duration::ZERO)
        .build()
        .unwrap()
}

fn send(id: &str, text: &str) -> ToolCall {
    ToolCall::new(id, "note.send", json!({"text": text}))
}

fn ran(r: &ToolResult) -> bool {
    r.is_ok() && r.executed && !r.replayed
}

#[tokio::test]
async fn anonymous_callers_never_meet_in_the_key_space() {
    let runs = Arc::new(AtomicUsize::new(0));
    let executor = sender(runs.clone());
    // Two callers with neither tenant nor principal, on two streams (two MCP sessions), choosing the same key.
    let alice = CallOptions::new().stream("session-a").idempotency_key("k-1");
    let mallory = CallOptions::new().stream("session-b").idempotency_key("k-1");

    let first = executor.call_with(send("1", "alice's secret"), &alice).await;
    assert!(ran(&first), "{first:?}");
    // The other caller neither reads the recorded result nor learns that the key exists.
    let replay = executor.call_with(send("1", "alice's secret"), &mallory).await;
    assert!(ran(&replay), "another caller's key replayed: {replay:?}");
    let prober = CallOptions::new().stream("session-c").idempotency_key("k-1");
    let probe = executor.call_with(send("2", "anything"), &prober).await;
    assert!(ran(&probe), "another caller's key probed: {probe:?}");

    // Nor can it claim a key first for a call of its own.
    let claimed = executor.call_with(send("3", "mallory's note"), &mallory.clone().idempotency_key("k-2")).await;
    assert!(ran(&claimed), "{claimed:?}");
    let own = executor.call_with(send("3", "alice's note"), &alice.clone().idempotency_key("k-2")).await;
    assert!(ran(&own), "a key claimed by another caller first: {own:?}");
    assert_eq!(own.data(), Some(&json!({"sent": "alice's note"})));

    // Within one caller's stream, the key still names one call: a retry is replayed.
    let retry = executor.call_with(send("9", "alice's secret"), &alice).await;
    assert!(retry.replayed && !retry.executed, "{retry:?}");
    assert_eq!(retry.data(), first.data());
    assert_eq!(runs.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn a_caller_scope_binds_keys_across_streams_and_keeps_scopes_apart() {
    let runs = Arc::new(AtomicUsize::new(0));
    let executor = sender(runs.clone());
    // A host whose callers have no principal scopes their keys (an MCP session's id, say).
    let alice = |stream: &str| CallOptions::new().stream(stream).caller_scope("scope-a").idempotency_key("k-1");
    let mallory = CallOptions::new().stream("s-1").caller_scope("scope-b").idempotency_key("k-1");

    let first = executor.call_with(send("1", "alice's secret"), &alice("s-1")).await;
    assert!(ran(&first), "{first:?}");
    // The same scope on another stream (another connection, another replica): the same call, replayed.
    let retry = executor.call_with(send("2", "alice's secret"), &alice("s-2")).await;
    assert!(retry.replayed && !retry.executed, "{retry:?}");
    assert_eq!(retry.data(), first.data());
    // Another scope, on the very stream of the first call: another call.
    let other = executor.call_with(send("1", "alice's secret"), &mallory).await;
    assert!(ran(&other), "another scope's key replayed: {other:?}");
    let prober = CallOptions::new().stream("s-1").caller_scope("scope-c").idempotency_key("k-1");
    let probe = executor.call_with(send("3", "anything"), &prober).await;
    assert!(ran(&probe), "another scope's key probed: {probe:?}");
    // A scope never names the keys of a stream spelled the same, nor of a principal.
    let as_stream = CallOptions::new().stream("scope-a").idempotency_key("k-1");
    assert!(ran(&executor.call_with(send("4", "alice's secret"), &as_stream).await));
    let as_principal = CallOptions::new().principal("scope-a").idempotency_key("k-1");
    assert!(ran(&executor.call_with(send("5", "alice's secret"), &as_principal).await));
    assert_eq!(runs.load(Ordering::SeqCst), 5);
    assert_eq!(alice("s-1").get_caller_scope(), Some("scope-a"));
}
