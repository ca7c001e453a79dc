//! The executor path against the floor and rmcp, the rejection paths, and the run/event-log overhead.
//!
//! Every contender runs on the same current-thread Tokio runtime (time enabled) through
//! `b.to_async(&rt).iter_batched(..)`: the whole measurement loop is one `block_on`, each iteration awaits one
//! call, and the per-call input (a `ToolCall`, rmcp's `CallToolRequestParams`, the floor's `Value`) is built in
//! the untimed setup from the same arguments. Outputs are dropped outside the timed region.
//!
//! ```sh
//! cargo bench -p keel-bench --bench executor -- --warm-up-time 1 --measurement-time 3
//! ```

use std::hint::black_box;
use std::sync::Arc;

use criterion::measurement::WallTime;
use criterion::{BatchSize, BenchmarkGroup, Criterion, criterion_group, criterion_main};
use keel_bench::fixture;
use keel_bench::floor;
use keel_bench::keel;
use keel_bench::rmcp_peer::RmcpHarness;
use keel_tools_core::events::JsonLinesWriter;
use keel_tools_core::runs::{Run, StopPolicy};
use keel_tools_core::{Executor, ToolCall};
use serde_json::Value;
use tokio::runtime::Runtime;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread().enable_time().enable_io().build().expect("a Tokio runtime")
}

fn object(v: &Value) -> serde_json::Map<String, Value> {
    v.as_object().expect("the fixture arguments are an object").clone()
}

/// Times `executor.call` of `name` with `args`; each iteration's `ToolCall` is built outside the timed region.
fn time_call(
    g: &mut BenchmarkGroup<'_, WallTime>,
    rt: &Runtime,
    label: &str,
    executor: &Executor,
    name: &str,
    args: &Value,
) {
    g.bench_function(label, |b| {
        b.to_async(rt).iter_batched(
            || ToolCall::new("call-1", name, args.clone()),
            |call| executor.call(call),
            BatchSize::SmallInput,
        )
    });
}

/// The valid call: floor, keel (inline, async) and rmcp, in one group.
fn valid_call(c: &mut Criterion) {
    let rt = runtime();
    let executor = keel::executor();
    let rmcp = rt.block_on(async { RmcpHarness::start() });
    let args = fixture::valid_arguments();
    let args_obj = object(&args);

    // Each contender answers the same call correctly before it is timed.
    rt.block_on(async {
        let floor = floor::dispatch("search_incidents", args.clone()).await.expect("floor answers");
        for name in ["search_incidents", "search_incidents_async", "search_incidents_blocking"] {
            let r = executor.call(ToolCall::new("call-1", name, args.clone())).await;
            assert!(r.is_ok(), "{name}: {r:?}");
            assert_eq!(r.data(), Some(&floor));
        }
        let r = rmcp.call(RmcpHarness::params("search_incidents", args_obj.clone())).await.expect("rmcp answers");
        match r {
            rmcp::model::CallToolResponse::Complete(r) => assert_eq!(r.structured_content.as_ref(), Some(&floor)),
            other => panic!("rmcp: {other:?}"),
        }
    });

    let mut g = c.benchmark_group("executor/valid_call");
    g.bench_function("floor (match + serde, no validation)", |b| {
        b.to_async(&rt).iter_batched(
            || args.clone(),
            |a| async move { floor::dispatch(black_box("search_incidents"), a).await },
            BatchSize::SmallInput,
        )
    });
    for (label, name) in
        [("keel inline (blocking = false)", "search_incidents"), ("keel async fn", "search_incidents_async")]
    {
        time_call(&mut g, &rt, label, &executor, name, &args);
    }
    g.bench_function("rmcp ToolRouter::call", |b| {
        b.to_async(&rt).iter_batched(
            || RmcpHarness::params("search_incidents", args_obj.clone()),
            |params| rmcp.call(params),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

/// A plain fn on the blocking pool (`blocking = true`) against the same fn inline. Its own group, run last: the
/// blocking pool's threads (kept alive between calls) and the cross-thread frees of the results they allocate slow
/// down whatever runs next to them.
fn blocking_pool(c: &mut Criterion) {
    let rt = runtime();
    let executor = keel::executor();
    let args = fixture::valid_arguments();
    let mut g = c.benchmark_group("executor/blocking_pool");
    for (label, name) in [
        ("keel inline (blocking = false)", "search_incidents"),
        ("keel blocking pool (blocking = true)", "search_incidents_blocking"),
    ] {
        time_call(&mut g, &rt, label, &executor, name, &args);
    }
    g.finish();
}

/// The rejection paths next to the valid call they are cheaper than.
fn rejections(c: &mut Criterion) {
    let rt = runtime();
    let executor = keel::executor();
    let valid = fixture::valid_arguments();
    let invalid = fixture::invalid_arguments();
    rt.block_on(async {
        for (name, args, code) in [
            ("no_such_tool", &valid, Some("unknown_tool")),
            ("search_incidents", &invalid, Some("invalid_arguments")),
            ("file_incident", &valid, Some("approval_required")),
            ("search_incidents", &valid, None),
        ] {
            let r = executor.call(ToolCall::new("call-1", name, args.clone())).await;
            assert_eq!(r.code(), code, "{r:?}");
        }
    });

    let mut g = c.benchmark_group("executor/rejections");
    for (label, name, args) in [
        ("valid call (inline)", "search_incidents", &valid),
        ("unknown_tool", "no_such_tool", &valid),
        ("invalid_arguments (1 violation)", "search_incidents", &invalid),
        ("approval_required", "file_incident", &valid),
    ] {
        time_call(&mut g, &rt, label, &executor, name, args);
    }
    g.finish();
}

/// A call through `Run::process_batch` (event log, decider, state) against the bare executor call.
fn run_overhead(c: &mut Criterion) {
    let rt = runtime();
    let executor = keel::executor();
    let args = fixture::valid_arguments();
    let stop = StopPolicy { max_steps: u32::MAX, max_retries: u32::MAX };

    let mut g = c.benchmark_group("executor/run_overhead");
    time_call(&mut g, &rt, "Executor::call", &executor, "search_incidents", &args);
    // A fresh run per call (made in the untimed setup), so every call is a run's first: the event log and the
    // seen-id set start empty, as for the first call of any run.
    g.bench_function("Run::process_batch (1 call, in-memory log)", |b| {
        b.to_async(&rt).iter_batched(
            || {
                (
                    Run::builder(executor.clone()).stop_policy(stop).build(),
                    vec![ToolCall::new("call-1", "search_incidents", args.clone())],
                )
            },
            |(mut run, batch)| async move {
                let outcome = run.process_batch(batch).await;
                (run, outcome)
            },
            BatchSize::SmallInput,
        )
    });
    g.bench_function("Run::process_batch (1 call, + JSON Lines sink to io::sink)", |b| {
        b.to_async(&rt).iter_batched(
            || {
                let sink = Arc::new(JsonLinesWriter::new(std::io::sink()));
                let run = Run::builder(executor.clone()).stop_policy(stop).sink(sink).build();
                (run, vec![ToolCall::new("call-1", "search_incidents", args.clone())])
            },
            |(mut run, batch)| async move {
                let outcome = run.process_batch(batch).await;
                (run, outcome)
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(std::time::Duration::from_secs(1)).measurement_time(std::time::Duration::from_secs(3));
    targets = valid_call, rejections, run_overhead, blocking_pool
}
criterion_main!(benches);
