//! Fault injection: handlers that panic, hang, block their thread, return the wrong shape or a 100 MB result.
//!
//! Each faulty call ends in its code (`tool_internal_error`, `timeout`, `invalid_tool_output`) with `executed:
//! true` and nothing internal in the result; the process survives; the executor stays responsive on the
//! multi-threaded runtime (quick calls made while the faults are in flight finish within [`RESPONSIVE`]); and a
//! run's event log holds exactly one `tool_observation` per call, whose `executed` and code match the result.
//!
//! Two tests pin edge cases of timeouts: an `async fn` that blocks its worker past its deadline is answered
//! `timeout` (not `ok`), and a blocking handler still queued behind a saturated pool when its call times out never
//! starts, and is reported `executed: false`. A last one makes calls outside any Tokio runtime: each is answered on
//! its first poll, and a handler that needs the runtime is refused before it starts.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use keel_tools_core::definition::ToolDefinition;
use keel_tools_core::events::{Decision, EventKind};
use keel_tools_core::runs::{Run, StopPolicy};
use keel_tools_core::{CallContext, Executor, Registry, ToolCall, ToolResult, tool};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

/// The bound on a quick call made while faulty calls are in flight.
const RESPONSIVE: Duration = Duration::from_millis(500);

/// The timeout the hanging and blocking tools declare.
const TIMEOUT: Duration = Duration::from_millis(100);

/// How long a blocking tool holds its thread (well past its timeout).
const BLOCK: Duration = Duration::from_millis(1500);

/// Handler starts per call id (each test uses ids of its own, so no other test can move a count).
fn starts() -> &'static Mutex<HashMap<String, usize>> {
    static STARTS: std::sync::OnceLock<Mutex<HashMap<String, usize>>> = std::sync::OnceLock::new();
    STARTS.get_or_init(Default::default)
}

fn started(ctx: &CallContext) {
    *starts().lock().unwrap().entry(ctx.call_id().to_owned()).or_default() += 1;
}

/// How many times a handler started for call `id`.
fn start_count(id: &str) -> usize {
    starts().lock().unwrap().get(id).copied().unwrap_or(0)
}

/// Panics on the blocking pool, with text that must stay in the logs.
#[tool(effect = "read", version = "1.0", blocking = true)]
fn panics_blocking(ctx: CallContext) -> String {
    started(&ctx);
    panic!("secret in /home/alice/src/db.rs:42: index out of bounds in core::slice");
}

/// Panics inside an async handler.
#[tool(effect = "read", version = "1.0")]
async fn panics_async(ctx: CallContext) -> String {
    started(&ctx);
    panic!("async secret at /etc/keel/config.toml");
}

/// Panics inline (a plain fn, which runs inline by default).
#[tool(effect = "read", version = "1.0")]
fn panics_inline(ctx: CallContext) -> String {
    started(&ctx);
    let v: Vec<u8> = Vec::new();
    format!("{}", v[ctx.call_id().len()])
}

/// Panics with a payload that is not a string.
#[tool(effect = "read", version = "1.0")]
async fn panics_with_payload(ctx: CallContext) -> String {
    started(&ctx);
    std::panic::panic_any(std::io::Error::other("io error as a panic payload"));
}

/// Sleeps far past its timeout.
#[tool(effect = "read", version = "1.0", timeout_ms = 100)]
async fn hangs(ctx: CallContext) -> String {
    started(&ctx);
    tokio::time::sleep(Duration::from_secs(3600)).await;
    "never".into()
}

/// Never completes and never looks at its cancellation.
#[tool(effect = "read", version = "1.0", timeout_ms = 100)]
async fn hangs_forever(ctx: CallContext) -> String {
    started(&ctx);
    std::future::pending::<String>().await
}

/// Blocks its blocking-pool thread far past its timeout.
#[tool(effect = "read", version = "1.0", timeout_ms = 100, blocking = true)]
fn blocks_pool_thread(ctx: CallContext) -> String {
    started(&ctx);
    std::thread::sleep(BLOCK);
    "late".into()
}

#[derive(Serialize, JsonSchema)]
struct Count {
    /// At least one.
    #[schemars(range(min = 1))]
    count: u32,
}

/// Returns a value its own result schema forbids.
#[tool(effect = "read", version = "1.0")]
fn wrong_output_shape(ctx: CallContext) -> Count {
    started(&ctx);
    Count { count: 0 }
}

/// Returns NaN where its schema says number (serialized as `null`).
#[tool(effect = "read", version = "1.0")]
fn not_a_number(ctx: CallContext) -> f64 {
    started(&ctx);
    f64::NAN
}

/// Returns a single 100 MB string.
#[tool(effect = "read", version = "1.0")]
async fn huge_string(ctx: CallContext) -> String {
    started(&ctx);
    "x".repeat(100 * 1024 * 1024)
}

/// Returns 100 MB as a million strings of 100 bytes (CPU-heavy: on the blocking pool).
#[tool(effect = "read", version = "1.0", blocking = true)]
fn huge_array(ctx: CallContext) -> Vec<String> {
    started(&ctx);
    vec!["y".repeat(100); 1_000_000]
}

/// Returns a value nested deeper than the output limit (128).
#[tool(effect = "read", version = "1.0")]
fn too_deep(ctx: CallContext) -> Value {
    started(&ctx);
    let mut v = json!(1);
    for _ in 0..200 {
        v = json!([v]);
    }
    v
}

/// A quick async call.
#[tool(effect = "read", version = "1.0")]
async fn quick_async(n: u32) -> u32 {
    n + 1
}

/// A quick call on the blocking pool.
#[tool(effect = "read", version = "1.0", blocking = true)]
fn quick_blocking(n: u32) -> u32 {
    n + 1
}

/// A dynamic tool whose result is not the declared object at all.
fn wrong_type() -> ToolDefinition {
    ToolDefinition::builder("fx.wrong_type")
        .description("Declares an object, returns a string.")
        .output_schema(json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}))
        .handler(|_args: Value, ctx: CallContext| async move {
            started(&ctx);
            Ok(json!("a string, not an object"))
        })
        .build()
        .unwrap()
}

/// A dynamic tool that panics while building its future.
fn panics_dynamic() -> ToolDefinition {
    ToolDefinition::builder("fx.panics")
        .description("Panics before returning a future.")
        .handler(|_args: Value, ctx: CallContext| -> std::future::Ready<Result<Value, keel_tools_core::ToolError>> {
            started(&ctx);
            panic!("dynamic secret std::sync::PoisonError at src/remote.rs:7");
        })
        .build()
        .unwrap()
}

/// Every faulty tool and the code its call must end in.
const FAULTS: [(&str, &str); 14] = [
    ("panics_blocking", "tool_internal_error"),
    ("panics_async", "tool_internal_error"),
    ("panics_inline", "tool_internal_error"),
    ("panics_with_payload", "tool_internal_error"),
    ("fx.panics", "tool_internal_error"),
    ("hangs", "timeout"),
    ("hangs_forever", "timeout"),
    ("blocks_pool_thread", "timeout"),
    ("wrong_output_shape", "invalid_tool_output"),
    ("not_a_number", "invalid_tool_output"),
    ("fx.wrong_type", "invalid_tool_output"),
    ("huge_string", "invalid_tool_output"),
    ("huge_array", "invalid_tool_output"),
    ("too_deep", "invalid_tool_output"),
];

fn executor() -> Executor {
    let registry = Registry::builder().tools([wrong_type(), panics_dynamic()]).build().unwrap();
    Executor::new(registry.all().clone()).unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn code(r: &ToolResult) -> Option<&str> {
    r.error().map(|e| e.code.as_str())
}

fn assert_no_internals(r: &ToolResult) {
    let text = serde_json::to_string(r).unwrap();
    assert!(text.len() < 2048, "{} bytes in a fault's result", text.len());
    for needle in ["panicked", "secret", "/home/", "/etc/", ".rs", "::", "index out of bounds", "io error", "Poison"] {
        assert!(!text.contains(needle), "{needle:?} leaked into {text}");
    }
}

/// Quick calls, one every few milliseconds, until `stop` is set; returns their count and the slowest latency.
async fn quick_calls(ex: Executor, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> (usize, Duration) {
    let mut n = 0u32;
    let mut slowest = Duration::ZERO;
    while !stop.load(Ordering::SeqCst) {
        let name = if n.is_multiple_of(2) { "quick_async" } else { "quick_blocking" };
        let started = Instant::now();
        let r = ex.call(ToolCall::new(format!("quick-{n}"), name, json!({"n": n}))).await;
        slowest = slowest.max(started.elapsed());
        assert_eq!(r.data(), Some(&json!(n + 1)), "{r:?}");
        n += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (n as usize, slowest)
}

/// All the faults at once, concurrently, and again one after another in a run; quick calls keep finishing within
/// the bound meanwhile; each fault ends in its code; the run's log has exactly one observation per call.
#[test]
fn every_fault_gets_its_code_and_the_executor_stays_responsive() {
    runtime().block_on(async {
        let ex = executor();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let quick = tokio::spawn(quick_calls(ex.clone(), stop.clone()));

        // Concurrently.
        let began = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        for (i, (name, expected)) in FAULTS.iter().enumerate() {
            let ex = ex.clone();
            set.spawn(async move {
                let started = Instant::now();
                let r = ex.call(ToolCall::new(format!("fault-{i}"), *name, json!({}))).await;
                (name, expected, r, started.elapsed())
            });
        }
        while let Some(joined) = set.join_next().await {
            let (name, expected, r, took) = joined.unwrap();
            assert_eq!(code(&r), Some(*expected), "{name}: {r:?}");
            assert!(r.executed, "{name} ran");
            assert_eq!(r.tool_version.as_deref(), Some("1.0"), "{name}");
            assert_no_internals(&r);
            if *expected == "timeout" {
                assert!(took < TIMEOUT + RESPONSIVE, "{name} answered after {took:?}");
            }
        }
        let concurrent = began.elapsed();

        // One after another, in a run that goes on after every failure.
        let mut run = Run::builder(ex.clone())
            .decider(|_: &ToolResult, _: &keel_tools_core::runs::RunState, _: &StopPolicy| Decision::Continue)
            .stop_policy(StopPolicy { max_steps: 100, max_retries: 100 })
            .build();
        let calls: Vec<ToolCall> = FAULTS
            .iter()
            .enumerate()
            .map(|(i, (name, _))| ToolCall::new(format!("run-{i}"), *name, json!({})))
            .chain([ToolCall::new("run-quick", "quick_async", json!({"n": 1}))])
            .collect();
        let batch = run.process_batch(calls).await;
        run.finish(Decision::Done, "model_finished");
        stop.store(true, Ordering::SeqCst);
        let (quick_count, slowest) = quick.await.unwrap();

        assert_eq!(batch.results.len(), FAULTS.len() + 1);
        assert!(batch.not_executed.is_empty());
        for ((name, expected), r) in FAULTS.iter().zip(&batch.results) {
            assert_eq!(code(r), Some(*expected), "{name} in the run: {r:?}");
            assert!(r.executed);
        }
        assert!(batch.results[FAULTS.len()].is_ok(), "the quick call after the faults");
        assert_event_log(&run, &batch.results);
        assert_eq!(run.state().steps() as usize, FAULTS.len() + 1, "every call ran its handler");

        eprintln!(
            "faults: {} faulty calls concurrently in {concurrent:?}; {quick_count} quick calls meanwhile, slowest \
             {slowest:?} (bound {RESPONSIVE:?}); peak RSS {} MiB",
            FAULTS.len(),
            peak_rss_kib() / 1024
        );
        assert!(quick_count >= 10, "only {quick_count} quick calls went through");
        assert!(slowest < RESPONSIVE, "a quick call took {slowest:?} while faults were in flight");
    });
    // Each faulty handler started exactly once for each of its two calls.
    for (i, (name, _)) in FAULTS.iter().enumerate() {
        for id in [format!("fault-{i}"), format!("run-{i}")] {
            assert_eq!(start_count(&id), 1, "{name} started {} times for call {id}", start_count(&id));
        }
    }
}

/// `VmHWM` of this process, in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|r| r.trim().split(' ').next()?.parse().ok())
        .unwrap_or(0)
}

/// Exactly one `tool_requested` and one `tool_observation` per call, whose `executed` and code are the result's;
/// one `run_finished`.
fn assert_event_log(run: &Run, results: &[ToolResult]) {
    let events = run.log().events();
    for r in results {
        let requested = events
            .iter()
            .filter(|e| matches!(&e.kind, EventKind::ToolRequested { call_id, .. } if **call_id == *r.call_id))
            .count();
        assert_eq!(requested, 1, "tool_requested events of {}", r.call_id);
        let observations: Vec<_> = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::ToolObservation { call_id, executed, ok, code, .. } if **call_id == *r.call_id => {
                    Some((*executed, *ok, code.clone()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(observations.len(), 1, "tool_observation events of {}: {observations:?}", r.call_id);
        let (executed, ok, code) = &observations[0];
        assert_eq!(*executed, r.executed, "{}", r.call_id);
        assert_eq!(*ok, r.is_ok(), "{}", r.call_id);
        assert_eq!(code.as_deref(), r.error().map(|e| e.code.as_str()), "{}", r.call_id);
    }
    let observations = events.iter().filter(|e| matches!(e.kind, EventKind::ToolObservation { .. })).count();
    assert_eq!(observations, results.len(), "one observation per call, no more");
    let finished = events.iter().filter(|e| matches!(e.kind, EventKind::RunFinished { .. })).count();
    assert_eq!(finished, 1);
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (0..events.len() as u64).collect::<Vec<_>>(), "sequence numbers are dense");
}

/// While 32 handlers hold blocking-pool threads long after their calls timed out, other blocking tools still get
/// a thread at once (the pool grows up to Tokio's default of 512 threads), and async calls are unaffected.
#[test]
fn stuck_blocking_handlers_do_not_starve_other_blocking_tools() {
    runtime().block_on(async {
        let ex = executor();
        let began = Instant::now();
        let stuck: Vec<_> = (0..32)
            .map(|i| {
                let ex = ex.clone();
                tokio::spawn(async move {
                    ex.call(ToolCall::new(format!("stuck-{i}"), "blocks_pool_thread", json!({}))).await
                })
            })
            .collect();
        for handle in stuck {
            let r = handle.await.unwrap();
            assert_eq!(code(&r), Some("timeout"), "{r:?}");
        }
        let timed_out_after = began.elapsed();
        assert!(timed_out_after < TIMEOUT + RESPONSIVE, "32 timeouts took {timed_out_after:?}");
        // The 32 threads are still sleeping (BLOCK is 1.5 s): other blocking tools must not queue behind them.
        assert!(began.elapsed() < BLOCK / 2);
        for (i, name) in ["quick_blocking", "quick_async", "quick_blocking", "quick_blocking"].iter().enumerate() {
            let started = Instant::now();
            let r = ex.call(ToolCall::new(format!("q-{i}"), *name, json!({"n": 1}))).await;
            assert!(r.is_ok(), "{r:?}");
            assert!(started.elapsed() < RESPONSIVE, "{name} took {:?} beside stuck handlers", started.elapsed());
        }
        eprintln!("blocking pool: 32 stuck handlers timed out in {timed_out_after:?}; other blocking tools unaffected");
    });
}

/// Records its starts (a stand-in for a side effect), on the blocking pool.
#[tool(effect = "read", version = "1.0", timeout_ms = 100, blocking = true)]
fn counts_starts(ctx: CallContext) -> u32 {
    started(&ctx);
    1
}

/// Holds a blocking-pool thread for 600 ms.
#[tool(effect = "read", version = "1.0", timeout_ms = 100, blocking = true)]
fn holds_a_thread() -> u32 {
    std::thread::sleep(Duration::from_millis(600));
    1
}

/// When the blocking pool is saturated, a blocking handler queued behind it times out without starting: it must
/// never start later (a side effect nobody would see a result for), and `executed` is `false`.
#[test]
fn a_queued_blocking_handler_never_starts_after_its_call_timed_out() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let ex = executor();
        let holders: Vec<_> = (0..2)
            .map(|i| {
                let ex = ex.clone();
                tokio::spawn(
                    async move { ex.call(ToolCall::new(format!("hold-{i}"), "holds_a_thread", json!({}))).await },
                )
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(20)).await;
        let r = ex.call(ToolCall::new("queued", "counts_starts", json!({}))).await;
        assert_eq!(code(&r), Some("timeout"));
        for h in holders {
            let _ = h.await;
        }
        // Let the queued closure run if it is going to.
        tokio::time::sleep(Duration::from_millis(800)).await;
        assert_eq!(start_count("queued"), 0, "the handler started after its call had been answered `timeout`");
        assert!(!r.executed, "`executed` is true for a handler that had not started when its call timed out");
    });
}

/// Blocks the runtime worker that polls it (a blocking call inside an `async fn`).
#[tool(effect = "read", version = "1.0", timeout_ms = 100)]
async fn blocks_worker_thread(ctx: CallContext) -> String {
    started(&ctx);
    std::thread::sleep(Duration::from_millis(800));
    "late".into()
}

/// An async handler that blocks the worker polling it: the other worker keeps serving quick calls within the bound.
#[test]
fn an_async_handler_blocking_its_worker_does_not_stall_other_calls() {
    runtime().block_on(async {
        let ex = executor();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let quick = tokio::spawn(quick_calls(ex.clone(), stop.clone()));
        tokio::time::sleep(Duration::from_millis(20)).await;
        let began = Instant::now();
        // One at a time: one of the two workers is blocked, the other must keep serving.
        let mut codes = Vec::new();
        for i in 0..2 {
            let ex = ex.clone();
            let blocker = tokio::spawn(async move {
                ex.call(ToolCall::new(format!("blocker-{i}"), "blocks_worker_thread", json!({}))).await
            });
            let r = blocker.await.unwrap();
            assert!(r.executed);
            assert_no_internals(&r);
            codes.push(code(&r).map(str::to_owned));
        }
        let took = began.elapsed();
        stop.store(true, Ordering::SeqCst);
        let (quick_count, slowest) = quick.await.unwrap();
        eprintln!(
            "worker-blocking handlers: 2 answered {codes:?} after {took:?} (timeout {TIMEOUT:?}); {quick_count} quick \
             calls meanwhile, slowest {slowest:?}"
        );
        assert!(quick_count >= 10, "only {quick_count} quick calls went through");
        assert!(slowest < RESPONSIVE, "a quick call took {slowest:?} while a worker was blocked");
        // Each blocker overran its 100 ms timeout by blocking for 800 ms: both are answered `timeout`.
        assert_eq!(codes, [Some("timeout".to_owned()), Some("timeout".to_owned())], "the blockers' codes");
    });
}

/// An `async fn` handler that blocks its thread past its timeout finishes before the timer can fire; its late
/// result must still be answered `timeout`, as for every other handler that overruns.
#[test]
fn an_async_handler_blocking_past_its_timeout_ends_in_timeout() {
    runtime().block_on(async {
        let ex = executor();
        let began = Instant::now();
        let r = ex.call(ToolCall::new("blocker", "blocks_worker_thread", json!({}))).await;
        assert!(r.executed);
        assert_eq!(code(&r), Some("timeout"), "after {:?}: {r:?}", began.elapsed());
    });
}

/// An inline handler (a plain fn without `blocking = true`) that overruns its timeout.
#[tool(effect = "read", version = "1.0", timeout_ms = 50)]
fn overruns_inline(ctx: CallContext) -> String {
    started(&ctx);
    std::thread::sleep(Duration::from_millis(200));
    "late".into()
}

/// An inline handler runs to completion on the caller's thread, so nothing can interrupt it; its late result is
/// still answered `timeout`, like every other handler's.
#[test]
fn an_inline_handler_past_its_timeout_ends_in_timeout() {
    runtime().block_on(async {
        let ex = executor();
        let began = Instant::now();
        let r = ex.call(ToolCall::new("inline-late", "overruns_inline", json!({}))).await;
        assert!(r.executed);
        assert_eq!(code(&r), Some("timeout"), "after {:?}: {r:?}", began.elapsed());
        assert_no_internals(&r);
    });
}

/// A quick inline handler: a plain fn that injects nothing.
#[tool(effect = "read", version = "1.0")]
fn quick_inline(n: u32) -> u32 {
    n + 1
}

/// Outside a Tokio runtime, every call is answered on its first poll and nothing panics: an inline handler runs;
/// a handler that needs the runtime (an `async fn`, the blocking pool) is refused before it starts, `executed:
/// false`, and the model hears nothing of why.
#[test]
fn outside_a_tokio_runtime_calls_are_answered_and_handlers_that_need_one_never_start() {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    let executor = executor();
    let call = |name: &str| {
        let fut = executor.call(ToolCall::new(format!("no-runtime-{name}"), name, json!({"n": 1})));
        match std::pin::pin!(fut).poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(r) => r,
            Poll::Pending => panic!("{name}: still pending outside a runtime"),
        }
    };
    let r = call("quick_inline");
    assert_eq!(r.data(), Some(&json!(2)), "{r:?}");
    for name in ["quick_async", "quick_blocking"] {
        let r = call(name);
        assert_eq!(code(&r), Some("tool_internal_error"), "{name}: {r:?}");
        assert!(!r.executed, "{name}: {r:?}");
        assert_no_internals(&r);
        assert!(!serde_json::to_string(&r).unwrap().contains("Tokio"), "{name}: {r:?}");
    }
}
