//! What the OpenTelemetry spans of feature `otel` cost per call: the same valid call, in rounds that alternate
//! between no tracer provider (the global no-op one) and an SDK provider exporting every span to an in-memory
//! exporter through a simple processor (each span exported as it ends), interleaved round by round. Reports the
//! median time per call of each and their median ratio within a round. The build without the feature is the
//! executor benchmark (`cargo bench -p keel-bench --bench executor`).
//!
//! ```sh
//! cargo run --release -p keel-bench --features otel --example otel_overhead -- [ROUNDS] [CALLS_PER_ROUND]
//! ```

use std::time::Instant;

use keel_tools_core::{Executor, Registry, ToolCall, tool};
use opentelemetry::global;
use opentelemetry::trace::noop::NoopTracerProvider;
use opentelemetry_sdk::trace::{InMemorySpanExporterBuilder, SdkTracerProvider};
use serde_json::json;

/// Look up one incident by its id.
#[tool(name = "bench.lookup", effect = "read", version = "1.0")]
fn lookup(incident_id: String) -> usize {
    incident_id.len()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>().expect("a number"));
    let rounds = args.next().unwrap_or(21);
    let calls = args.next().unwrap_or(20_000);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let registry = Registry::from_inventory().unwrap();
    let executor = Executor::new(registry.view().names(["bench.lookup"]).build().unwrap()).unwrap();
    let exporter = InMemorySpanExporterBuilder::new().build();
    let sdk = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
    let inputs: Vec<ToolCall> =
        (0..calls).map(|i| ToolCall::new(format!("c{i}"), "bench.lookup", json!({"incident_id": "INC-001"}))).collect();

    let time = |exporting: bool| -> f64 {
        if exporting {
            global::set_tracer_provider(sdk.clone());
        } else {
            global::set_tracer_provider(NoopTracerProvider::new());
        }
        let batch = inputs.clone();
        let began = Instant::now();
        runtime.block_on(async {
            for call in batch {
                let r = executor.call(call).await;
                assert!(r.is_ok());
            }
        });
        let per_call = began.elapsed().as_secs_f64() * 1e9 / calls as f64;
        exporter.reset();
        per_call
    };
    time(false);
    time(true);
    let (mut off, mut on, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let a = time(false);
        let b = time(true);
        off.push(a);
        on.push(b);
        ratio.push(b / a);
    }
    println!("{rounds} rounds of {calls} calls, median ns per call:");
    println!("  spans to the no-op provider        {:>8.0} ns", median(off));
    println!("  spans exported (in-memory, simple) {:>8.0} ns", median(on));
    println!("  ratio (same round)                 {:>8.2}x", median(ratio));
}
