//! Timeouts that do not hide side effects: each row of the table in docs/guide/src/security.md ("What a timeout says") is a test
//! here. Every tool is used by one test only, so its counter counts that test's runs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use keel_tools_core::executor::CallOptions;
use keel_tools_core::policy::PolicyDecision;
use keel_tools_core::results::HandlerState;
use keel_tools_core::{CallContext, Executor, Registry, ToolCall, ToolError, ToolResult, tool};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn executor(
    names: &[&str],
    configure: impl FnOnce(keel_tools_core::executor::ExecutorBuilder) -> keel_tools_core::executor::ExecutorBuilder,
) -> Executor {
    let view = Registry::from_inventory().unwrap().view().names(names.iter().copied()).build().unwrap();
    // The effect policy is not under test: every call is allowed.
    configure(Executor::builder(view).policy(|_: &keel_tools_core::policy::PolicyRequest<'_>| PolicyDecision::Allow))
        .build()
        .unwrap()
}

fn details(r: &ToolResult) -> &Value {
    r.error().and_then(|e| e.details.as_ref()).unwrap_or(&Value::Null)
}

/// Waits until `counter` reaches `n` (at most 5 s).
async fn eventually(counter: &AtomicUsize, n: usize) -> bool {
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if counter.load(Ordering::SeqCst) >= n {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

static BLOCKING_WRITES: AtomicUsize = AtomicUsize::new(0);

/// Writes once, after a slow step, on a blocking thread.
#[tool(effect = "write", version = "1.0", timeout_ms = 50, blocking = true)]
fn slow_blocking_write() -> String {
    std::thread::sleep(Duration::from_millis(300));
    BLOCKING_WRITES.fetch_add(1, Ordering::SeqCst);
    "written".into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_write_past_its_deadline_is_said_to_be_running_and_its_write_still_happens() {
    let ex = executor(&["slow_blocking_write"], |b| b);
    let r = ex.call(ToolCall::new("bw-1", "slow_blocking_write", json!({}))).await;
    assert_eq!(r.code(), Some("timeout"), "{r:?}");
    // The answer comes before the write, and says that it may still happen.
    assert_eq!(BLOCKING_WRITES.load(Ordering::SeqCst), 0);
    assert!(r.executed);
    assert_eq!(r.handler_state(), Some(HandlerState::Running), "{r:?}");
    assert_eq!(details(&r)["handler"], "running");
    assert_eq!(details(&r)["timeout_ms"], 50);
    assert!(r.error().unwrap().message.contains("may still be running"), "{r:?}");
    assert!(eventually(&BLOCKING_WRITES, 1).await, "the write happened after the answer, as the answer said");
}

static TWO_STEPS: AtomicUsize = AtomicUsize::new(0);

/// Writes in two steps, with a slow await between them.
#[tool(effect = "write", version = "1.0", timeout_ms = 50)]
async fn two_step_write() -> String {
    TWO_STEPS.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(200)).await;
    TWO_STEPS.fetch_add(1, Ordering::SeqCst);
    "both steps".into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_write_past_its_deadline_is_not_cut_between_its_steps() {
    let ex = executor(&["two_step_write"], |b| b);
    let r = ex.call(ToolCall::new("ts-1", "two_step_write", json!({}))).await;
    assert_eq!(r.code(), Some("timeout"), "{r:?}");
    assert_eq!(r.handler_state(), Some(HandlerState::Running));
    assert_eq!(TWO_STEPS.load(Ordering::SeqCst), 1, "answered between the steps");
    assert!(eventually(&TWO_STEPS, 2).await, "step 2 ran: the handler was not dropped at the deadline");
}

/// Finishes 150 ms past its 100 ms deadline.
#[tool(effect = "read", version = "1.0", timeout_ms = 100)]
async fn just_late() -> String {
    tokio::time::sleep(Duration::from_millis(250)).await;
    "late but here".into()
}

#[tokio::test]
async fn a_handler_that_finishes_within_the_grace_period_is_answered_with_its_result() {
    let ex = executor(&["just_late"], |b| b.timeout_grace(Duration::from_secs(5)));
    let r = ex.call(ToolCall::new("jl-1", "just_late", json!({}))).await;
    assert_eq!(r.data(), Some(&json!("late but here")), "{r:?}");
    // Without the grace period, the same handler is a timeout (and, still running, says so).
    let strict = executor(&["just_late"], |b| b.timeout_grace(Duration::ZERO));
    let r = strict.call(ToolCall::new("jl-2", "just_late", json!({}))).await;
    assert_eq!((r.code(), r.handler_state()), (Some("timeout"), Some(HandlerState::Running)), "{r:?}");
}

/// Waits for its context's cancellation and reports when it came.
#[tool(effect = "read", version = "1.0", timeout_ms = 100)]
async fn watches_cancellation(ctx: CallContext) -> Result<String, ToolError> {
    let started = Instant::now();
    tokio::select! {
        () = tokio::time::sleep(Duration::from_secs(10)) => Ok("never".into()),
        () = ctx.cancellation().cancelled() => {
            Err(keel_tools_core::tool_error!("stopped", "stopped after {} ms", started.elapsed().as_millis()))
        }
    }
}

#[tokio::test]
async fn at_the_deadline_the_context_is_cancelled_and_a_handler_that_stops_is_answered() {
    let ex = executor(&["watches_cancellation"], |b| b.timeout_grace(Duration::from_secs(5)));
    let started = Instant::now();
    let r = ex.call(ToolCall::new("wc-1", "watches_cancellation", json!({}))).await;
    // The handler saw the deadline, stopped, and its own answer reached the caller long before the grace ended.
    assert_eq!(r.code(), Some("stopped"), "{r:?}");
    assert!(r.executed);
    assert!(started.elapsed() < Duration::from_secs(4), "{:?}", started.elapsed());
}

static QUEUED_WRITES: AtomicUsize = AtomicUsize::new(0);
static HOLDING: AtomicUsize = AtomicUsize::new(0);

/// Holds the only blocking thread.
#[tool(effect = "read", version = "1.0", timeout_ms = 5000, blocking = true)]
fn hold_the_blocking_thread() -> String {
    HOLDING.fetch_add(1, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(400));
    "held".into()
}

/// Writes at once, when it gets a blocking thread.
#[tool(effect = "write", version = "1.0", timeout_ms = 50, blocking = true)]
fn queued_write() -> String {
    QUEUED_WRITES.fetch_add(1, Ordering::SeqCst);
    "written".into()
}

#[test]
fn a_blocking_handler_still_queued_at_its_deadline_never_runs_and_says_so() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let ex = executor(&["hold_the_blocking_thread", "queued_write"], |b| b);
        let holder = {
            let ex = ex.clone();
            tokio::spawn(async move { ex.call(ToolCall::new("hb-1", "hold_the_blocking_thread", json!({}))).await })
        };
        assert!(eventually(&HOLDING, 1).await, "the only blocking thread is taken");
        let r = ex.call(ToolCall::new("qw-1", "queued_write", json!({}))).await;
        assert_eq!(r.code(), Some("timeout"), "{r:?}");
        assert!(!r.executed, "{r:?}");
        assert_eq!(r.handler_state(), Some(HandlerState::NotStarted));
        assert!(r.error().unwrap().message.contains("will not run"), "{r:?}");
        assert!(holder.await.unwrap().is_ok());
        // The thread is free again: the abandoned write still does not run.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(QUEUED_WRITES.load(Ordering::SeqCst), 0);
    });
}

static INLINE_RUNS: AtomicUsize = AtomicUsize::new(0);

/// Runs on the caller's thread (inline, the default for a plain fn), well past its deadline.
#[tool(effect = "write", version = "1.0", timeout_ms = 20)]
fn inline_overrun() -> String {
    std::thread::sleep(Duration::from_millis(200));
    INLINE_RUNS.fetch_add(1, Ordering::SeqCst);
    "done".into()
}

#[tokio::test]
async fn a_handler_that_ends_past_the_grace_period_is_said_to_have_finished() {
    let ex = executor(&["inline_overrun"], |b| b);
    let r = ex.call(ToolCall::new("io-1", "inline_overrun", json!({}))).await;
    assert_eq!((r.code(), r.handler_state()), (Some("timeout"), Some(HandlerState::Finished)), "{r:?}");
    assert!(r.executed);
    assert_eq!(INLINE_RUNS.load(Ordering::SeqCst), 1, "its effects happened, as the answer says");
    assert!(r.error().unwrap().message.contains("its effects did happen"), "{r:?}");
}

/// A read without a declared timeout.
#[tool(effect = "read", version = "1.0")]
async fn undeclared_read() -> String {
    tokio::time::sleep(Duration::from_millis(300)).await;
    "read".into()
}

/// A write without a declared timeout.
#[tool(effect = "write", version = "1.0")]
async fn undeclared_write() -> String {
    tokio::time::sleep(Duration::from_millis(300)).await;
    "written".into()
}

#[tokio::test]
async fn writes_without_a_declared_timeout_get_the_longer_default() {
    let ex = executor(&["undeclared_read", "undeclared_write"], |b| {
        b.default_timeout(Duration::from_millis(50)).timeout_grace(Duration::ZERO)
    });
    let read = ex.call(ToolCall::new("ur-1", "undeclared_read", json!({}))).await;
    assert_eq!(read.code(), Some("timeout"), "{read:?}");
    assert_eq!(details(&read)["timeout_ms"], 50);
    // 120 s by default for writes and destructive tools.
    let write = ex.call(ToolCall::new("uw-1", "undeclared_write", json!({}))).await;
    assert!(write.is_ok(), "{write:?}");
    let short = executor(&["undeclared_write"], |b| {
        b.default_write_timeout(Duration::from_millis(50)).timeout_grace(Duration::ZERO)
    });
    let write = short.call(ToolCall::new("uw-2", "undeclared_write", json!({}))).await;
    assert_eq!(details(&write)["timeout_ms"], 50, "{write:?}");
}

/// Waits a little, then answers (not finished on its first poll).
#[tool(effect = "read", version = "1.0")]
async fn unbounded_wait() -> String {
    tokio::time::sleep(Duration::from_millis(20)).await;
    "waited".into()
}

/// Finishes on its first poll.
#[tool(effect = "read", version = "1.0")]
async fn at_once() -> String {
    "now".into()
}

#[tokio::test]
async fn timeouts_too_large_for_the_clock_mean_no_timeout() {
    let ex =
        executor(&["unbounded_wait", "at_once"], |b| b.default_timeout(Duration::MAX).timeout_grace(Duration::MAX));
    let r = ex.call(ToolCall::new("ub-1", "unbounded_wait", json!({}))).await;
    assert_eq!(r.data(), Some(&json!("waited")), "{r:?}");
    let r = ex.call(ToolCall::new("ub-2", "at_once", json!({}))).await;
    assert_eq!(r.data(), Some(&json!("now")), "{r:?}");
}

/// Returns its call's idempotency key, after `wait_ms`.
#[tool(effect = "read", version = "1.0", timeout_ms = 100)]
async fn key_of(wait_ms: u64, ctx: CallContext) -> String {
    tokio::time::sleep(Duration::from_millis(wait_ms)).await;
    ctx.idempotency_key().to_owned()
}

#[tokio::test]
async fn every_call_has_an_idempotency_key_stable_under_its_call_id() {
    let ex = executor(&["key_of"], |b| b.timeout_grace(Duration::ZERO));
    let key = |id: &'static str, tenant: Option<&'static str>, wait: u64| {
        let ex = ex.clone();
        async move {
            let options = match tenant {
                Some(t) => CallOptions::new().tenant(t),
                None => CallOptions::new(),
            };
            ex.call_with(ToolCall::new(id, "key_of", json!({"wait_ms": wait})), &options).await
        }
    };
    let first = key("k-1", Some("acme"), 0).await;
    let k = first.data().and_then(Value::as_str).unwrap().to_owned();
    assert!(k.starts_with("ik-") && k.len() == 35, "{k}");
    // The same call again (another spelling of its arguments included): the same key.
    assert_eq!(key("k-1", Some("acme"), 0).await.data(), first.data());
    // Another call id, or another tenant: another key.
    assert_ne!(key("k-2", Some("acme"), 0).await.data(), first.data());
    assert_ne!(key("k-1", Some("globex"), 0).await.data(), first.data());
    assert_ne!(key("k-1", None, 0).await.data(), first.data());
    // A timed-out attempt names its key, which is the one its handler saw.
    let late = key("k-1", Some("acme"), 300).await;
    assert_eq!(late.code(), Some("timeout"));
    assert_eq!(details(&late)["idempotency_key"], k);
}

static CANCELLED_STEPS: AtomicUsize = AtomicUsize::new(0);

/// Slow, and deaf to cancellation.
#[tool(effect = "write", version = "1.0", timeout_ms = 10000)]
async fn deaf_write() -> String {
    tokio::time::sleep(Duration::from_millis(200)).await;
    CANCELLED_STEPS.fetch_add(1, Ordering::SeqCst);
    "written".into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_caller_cancels_says_whether_its_handler_may_still_run() {
    let ex = executor(&["deaf_write"], |b| b.timeout_grace(Duration::from_millis(20)));
    let token = CancellationToken::new();
    let options = CallOptions::new().cancellation(token.clone());
    let cancel = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        token.cancel();
    });
    let r = ex.call_with(ToolCall::new("dw-1", "deaf_write", json!({})), &options).await;
    cancel.await.unwrap();
    assert_eq!((r.code(), r.handler_state()), (Some("cancelled"), Some(HandlerState::Running)), "{r:?}");
    assert!(r.executed);
    assert!(details(&r)["idempotency_key"].as_str().is_some_and(|k| k.starts_with("ik-")), "{r:?}");
    assert!(eventually(&CANCELLED_STEPS, 1).await);
}
