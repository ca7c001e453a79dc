//! Load, in process: 100,000 calls across 1,000 concurrent tasks on the multi-threaded runtime (2 workers).
//!
//! The calls mix every handler kind (async, inline, blocking pool), approved and unapproved `write` calls, invalid
//! arguments and unknown names. Every call gets exactly one result, under its own id, with the code its kind
//! must end in and, when it ran, its own argument echoed back as its data; every handler that should run ran exactly
//! once for its call and no other handler ran; memory stays
//! bounded (peak RSS, and RSS growth between a warm-up round and the full round). The figures are printed (run
//! with `--nocapture` to see them). The test is bounded in time: it fails after [`DEADLINE`] instead of hanging.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use keel_tests::memory_kib;
use keel_tools_core::executor::CallOptions;
use keel_tools_core::{Approval, CallContext, Executor, Registry, ToolCall, ToolResult, tool};
use serde_json::json;

const TASKS: usize = 1_000;
const CALLS_PER_TASK: usize = 100;
const CALLS: usize = TASKS * CALLS_PER_TASK;

/// The whole test fails (rather than hangs) past this.
const DEADLINE: Duration = Duration::from_secs(300);

/// Peak resident memory allowed for the test process.
const MAX_PEAK_RSS_KIB: u64 = 1024 * 1024;

/// RSS growth allowed between the warm-up round and the end of the full round.
const MAX_RSS_GROWTH_KIB: u64 = 128 * 1024;

/// Handler runs per call index, and calls whose handler saw arguments that were not its own.
fn runs() -> &'static [AtomicU32] {
    static RUNS: OnceLock<Vec<AtomicU32>> = OnceLock::new();
    RUNS.get_or_init(|| (0..CALLS + WARM_UP).map(|_| AtomicU32::new(0)).collect())
}
static MISMATCHED: AtomicUsize = AtomicUsize::new(0);

const WARM_UP: usize = 10_000;

fn ran(ctx: &CallContext, i: u64) -> u64 {
    let index: usize = ctx.call_id().strip_prefix('c').and_then(|s| s.parse().ok()).unwrap_or(usize::MAX);
    if index as u64 != i {
        MISMATCHED.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(slot) = runs().get(index) {
        slot.fetch_add(1, Ordering::Relaxed);
    }
    i
}

/// An async handler.
#[tool(effect = "read", version = "1.0")]
async fn load_async(i: u64, ctx: CallContext) -> u64 {
    tokio::task::yield_now().await;
    ran(&ctx, i)
}

/// An inline handler.
#[tool(effect = "read", version = "1.0")]
fn load_inline(i: u64, ctx: CallContext) -> u64 {
    ran(&ctx, i)
}

/// A handler on the blocking pool.
#[tool(effect = "read", version = "1.0", blocking = true)]
fn load_blocking(i: u64, ctx: CallContext) -> u64 {
    ran(&ctx, i)
}

/// A write tool (needs an approval for its exact arguments).
#[tool(effect = "write", version = "1.0")]
fn load_write(i: u64, ctx: CallContext) -> u64 {
    ran(&ctx, i)
}

/// What call `i` is, and what it must end in (`None`: ok, handler ran once).
fn plan(i: usize) -> (ToolCall, CallOptions, Option<&'static str>) {
    let id = format!("c{i}");
    let n = i as u64;
    let args = json!({ "i": n });
    let none = CallOptions::new();
    match i % 10 {
        0..=3 => (ToolCall::new(id, "load_async", args), none, None),
        4 | 5 => (ToolCall::new(id, "load_inline", args), none, None),
        6 => (ToolCall::new(id, "load_blocking", args), none, None),
        7 => {
            let options = CallOptions::new().approve(Approval::new("load_write", &args));
            (ToolCall::from_json_text(id, "load_write", &args.to_string()), options, None)
        }
        8 => {
            // Approved for other arguments: refused.
            let options = CallOptions::new().approve(Approval::new("load_write", &json!({ "i": n + 1 })));
            (ToolCall::new(id, "load_write", args), options, Some("approval_required"))
        }
        _ if i % 20 == 9 => {
            (ToolCall::new(id, "load_async", json!({ "i": "not a number" })), none, Some("invalid_arguments"))
        }
        _ => (ToolCall::new(id, "load_everything", args), none, Some("unknown_tool")),
    }
}

/// What one round observed.
struct Round {
    wall: Duration,
    /// Per call index: how many results carried that call's id (a result under another call's id leaves one at 0
    /// and another at 2).
    results: Vec<u32>,
    /// Calls whose result did not end as planned (another call's id, code or data included).
    wrong: Vec<String>,
    latencies_us: Vec<u32>,
}

/// Runs calls `first..first + tasks * per_task` across `tasks` concurrent tasks.
async fn round(ex: &Executor, first: usize, tasks: usize, per_task: usize) -> Round {
    let began = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for t in 0..tasks {
        let ex = ex.clone();
        set.spawn(async move {
            let mut seen = Vec::with_capacity(per_task);
            for k in 0..per_task {
                let i = first + t * per_task + k;
                let (call, options, expected) = plan(i);
                let id = call.id().to_owned();
                let started = Instant::now();
                let r: ToolResult = ex.call_with(call, &options).await;
                let took = started.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
                // A call that runs answers with its own argument: the data is this call's, not another's.
                let echoed = expected.is_some() || r.data() == Some(&json!(i as u64));
                let ok = r.call_id == id && r.code() == expected && r.executed == expected.is_none() && echoed;
                seen.push((r.call_id, ok, took));
            }
            seen
        });
    }
    let mut results = vec![0u32; tasks * per_task];
    let mut wrong = Vec::new();
    let mut latencies_us = Vec::with_capacity(tasks * per_task);
    while let Some(joined) = set.join_next().await {
        for (call_id, ok, took) in joined.expect("a load task panicked") {
            match call_id.strip_prefix('c').and_then(|s| s.parse::<usize>().ok()) {
                Some(i) if (first..first + results.len()).contains(&i) => results[i - first] += 1,
                _ => wrong.push(format!("a result with a foreign call id {call_id:?}")),
            }
            if !ok {
                wrong.push(call_id);
            }
            latencies_us.push(took);
        }
    }
    Round { wall: began.elapsed(), results, wrong, latencies_us }
}

fn percentile(sorted: &[u32], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    Duration::from_micros(u64::from(sorted.get(at).copied().unwrap_or(0)))
}

#[test]
fn hundred_thousand_calls_across_a_thousand_tasks() {
    // Peak RSS is the process's: the test runs in a process of its own.
    if !keel_tests::in_own_process() {
        return;
    }
    // A hung runtime must fail the test, not the CI job.
    let watchdog = keel_tests::watchdog("load test", DEADLINE + Duration::from_secs(30));

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let registry = Registry::from_inventory().unwrap();
    let view = registry.view().names(["load_async", "load_inline", "load_blocking", "load_write"]).build().unwrap();
    let ex = Executor::new(view).unwrap();
    let (_, rss_start) = memory_kib();

    let (warm, full) = rt.block_on(async {
        tokio::time::timeout(DEADLINE, async {
            // Warm-up: 10,000 calls (ids c100000..c109999), to measure RSS growth against.
            let warm = round(&ex, CALLS, 100, WARM_UP / 100).await;
            let after_warm = memory_kib().1;
            let full = round(&ex, 0, TASKS, CALLS_PER_TASK).await;
            ((warm, after_warm), full)
        })
        .await
        .expect("the load test did not finish in time")
    });
    let (warm, rss_after_warm) = warm;
    let (peak, rss_end) = memory_kib();
    drop(watchdog);

    // Nothing lost, nothing duplicated, everything as planned.
    for (round_name, r) in [("warm-up", &warm), ("full", &full)] {
        let lost = r.results.iter().filter(|&&n| n == 0).count();
        let duplicated = r.results.iter().filter(|&&n| n > 1).count();
        assert_eq!((lost, duplicated), (0, 0), "{round_name}: calls without a result, calls with several");
        assert!(
            r.wrong.is_empty(),
            "{round_name}: {} calls ended wrongly, e.g. {:?}",
            r.wrong.len(),
            &r.wrong[..3.min(r.wrong.len())]
        );
    }
    assert_eq!(full.results.len(), CALLS);
    // Every handler that should run ran exactly once, for its own call; no other ran.
    for (i, slot) in runs().iter().enumerate() {
        let expected = u32::from(plan(i).2.is_none());
        assert_eq!(slot.load(Ordering::Relaxed), expected, "handler runs of call c{i}");
    }
    assert_eq!(MISMATCHED.load(Ordering::Relaxed), 0, "a handler saw another call's arguments");

    let mut sorted = full.latencies_us.clone();
    sorted.sort_unstable();
    let executed = (0..CALLS).filter(|&i| plan(i).2.is_none()).count();
    eprintln!(
        "load: {CALLS} calls ({executed} executed) across {TASKS} tasks on 2 workers in {:.2?} ({:.0} calls/s); \
         latency p50 {:?}, p99 {:?}, max {:?}; warm-up {WARM_UP} calls in {:.2?}; RSS start {} MiB, after warm-up {} \
         MiB, end {} MiB, peak (VmHWM) {} MiB",
        full.wall,
        CALLS as f64 / full.wall.as_secs_f64(),
        percentile(&sorted, 0.5),
        percentile(&sorted, 0.99),
        percentile(&sorted, 1.0),
        warm.wall,
        rss_start / 1024,
        rss_after_warm / 1024,
        rss_end / 1024,
        peak / 1024,
    );
    assert!(peak < MAX_PEAK_RSS_KIB, "peak RSS {peak} KiB");
    assert!(
        rss_end.saturating_sub(rss_after_warm) < MAX_RSS_GROWTH_KIB,
        "RSS grew from {rss_after_warm} KiB to {rss_end} KiB"
    );
}
