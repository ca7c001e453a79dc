//! A write that runs once whose handler outlives its call (it ignores its cancellation and runs past its timeout
//! and its first lease), through the executor, against both databases.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use keel_tools_core::definition::{Effect, ToolDefinition};
use keel_tools_core::executor::CallOptions;
use keel_tools_core::once::{EffectLedger, OnceFor};
use keel_tools_core::policy::{PolicyDecision, PolicyRequest};
use keel_tools_core::{Executor, Registry, ToolCall, ToolError, ToolResult};
use keel_tools_state::{PostgresEffectStore, SqliteEffectStore};
use serde_json::{Value, json};

use crate::Db;

impl Db {
    /// The effect store as an executor's ledger: its own connection(s), as a replica's.
    fn ledger(&self) -> Arc<dyn EffectLedger> {
        match self {
            Db::Sqlite(path) => Arc::new(SqliteEffectStore::open(path).unwrap()),
            Db::Postgres { conninfo, prefix } => Arc::new(
                PostgresEffectStore::builder(conninfo).table(format!("{prefix}_effects")).connect_effects().unwrap(),
            ),
        }
    }
}

// ---- A handler that outlives its call ----

/// How long `payment.settle`'s handler works, whatever happens to its call.
const SETTLING: Duration = Duration::from_secs(8);

/// An executor with `payment.settle`: a write that runs once through `ledger`, with a timeout of 1 s (and the
/// default grace, a tenth of it), whose handler ignores its cancellation: it counts its start in `runs`, works for
/// [`SETTLING`] and returns its run's number. Its lease is the timeout and grace plus `LEASE_MARGIN` (6.1 s): the
/// handler outlives it.
fn settling(ledger: Arc<dyn EffectLedger>, runs: Arc<AtomicUsize>) -> Executor {
    let tool = ToolDefinition::builder("payment.settle")
        .description("Settle an order.")
        .version("1.0")
        .effect(Effect::Write)
        .timeout(Duration::from_secs(1))
        .input_schema(json!({"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}))
        .handler(move |_: Value, _ctx: keel_tools_core::CallContext| {
            let runs = runs.clone();
            async move {
                let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::time::sleep(SETTLING).await; // deaf to the call's cancellation
                Ok::<_, ToolError>(json!({"settled": true, "run": run}))
            }
        })
        .build()
        .unwrap();
    let registry = Registry::builder().without_inventory().tools([tool]).build().unwrap();
    Executor::builder(registry.view().build().unwrap())
        .policy(|_: &PolicyRequest<'_>| PolicyDecision::Allow)
        .exactly_once(ledger, OnceFor::Writes)
        .exactly_once_wait(Duration::from_millis(50))
        .build()
        .unwrap()
}

/// The hint of an `in_progress` answer (which must not have run), or `None` for any other answer.
fn in_progress(retry: &ToolResult) -> Option<Duration> {
    if retry.code() != Some("in_progress") {
        return None;
    }
    assert!(!retry.executed && !retry.replayed, "{retry:?}");
    let hint = retry.error().unwrap().details.as_ref().unwrap()["retry_after_ms"].as_u64().unwrap();
    Some(Duration::from_millis(hint))
}

both!(a_handler_that_outlives_its_timeout_and_lease_runs_once);
async fn a_handler_that_outlives_its_timeout_and_lease_runs_once(db: Db) {
    let runs = Arc::new(AtomicUsize::new(0));
    // Two replicas, each with its own connection(s) to the one database.
    let (first_replica, second_replica) = (settling(db.ledger(), runs.clone()), settling(db.ledger(), runs.clone()));
    let options = CallOptions::new().principal("alice").idempotency_key("settle-1");
    let call = |id: &str| ToolCall::new(id, "payment.settle", json!({"order": "o-1"}));
    let started = tokio::time::Instant::now();
    let first = first_replica.call_with(call("c1"), &options).await;
    assert_eq!((first.code(), first.executed), (Some("timeout"), true), "{first:?}");

    // A retry while the handler works is answered `in_progress`, on either replica, past the first lease's end
    // (6.1 s) too: the call does not run again.
    let during = second_replica.call_with(call("c2"), &options).await;
    let mut hint = in_progress(&during).unwrap_or_else(|| panic!("a retry while the handler works: {during:?}"));
    tokio::time::sleep_until(started + Duration::from_millis(6600)).await;
    let late = first_replica.call_with(call("c3"), &options).await;
    assert!(in_progress(&late).is_some(), "past the first lease, the handler still working: {late:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "{late:?}");

    // Retries at each hinted time: `in_progress` until the handler's result is recorded, then that result.
    let mut answers = 0;
    let replayed = loop {
        tokio::time::sleep(hint).await;
        let retry = second_replica.call_with(call(&format!("r{answers}")), &options).await;
        answers += 1;
        assert!(answers < 50, "no recorded result after {answers} retries: {retry:?}");
        match in_progress(&retry) {
            Some(next) => {
                assert!(started.elapsed() < SETTLING + Duration::from_secs(5), "{retry:?}");
                hint = next;
            }
            None => break retry,
        }
    };
    assert!(replayed.replayed && !replayed.executed, "{replayed:?}");
    assert_eq!(replayed.data(), Some(&json!({"settled": true, "run": 1})));
    assert!(started.elapsed() >= SETTLING, "the result is recorded when the handler ends");
    assert_eq!(runs.load(Ordering::SeqCst), 1, "one handler ran");
}
