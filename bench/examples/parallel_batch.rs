//! The wall-clock gain of parallel tool calls: one batch of slow `read` calls (each waits `WAIT_MS`, as a call to a
//! remote service would) processed by a `Run` with `Concurrency::SEQUENTIAL`, and with `Concurrency::new(k)` for a
//! few `k`, interleaved round by round. Reports, per contender, the median batch time over the rounds and the
//! median over rounds of its ratio to the sequential batch of the same round.
//!
//! ```sh
//! cargo run --release -p keel-bench --features examples --example parallel_batch -- [ROUNDS] [CALLS] [WAIT_MS]
//! ```
//!
//! Defaults: 15 rounds, a batch of 8 calls, 20 ms each. Also times a batch of calls that return at once, to show
//! what the concurrent path costs when there is nothing to overlap.

use std::time::{Duration, Instant};

use keel_tools_core::runs::{Concurrency, Run, StopPolicy};
use keel_tools_core::{Executor, Registry, ToolCall, tool};
use serde_json::json;

/// Waits `ms` milliseconds, as a slow read would, and says so (with 0, returns at once: no timer).
#[tool(name = "bench.slow_read", effect = "read", version = "1.0")]
async fn slow_read(ms: u64) -> String {
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    format!("waited {ms} ms")
}

fn executor() -> Executor {
    let registry = Registry::from_inventory().expect("unique names");
    Executor::new(registry.view().names(["bench.slow_read"]).build().expect("the tool exists")).expect("it builds")
}

async fn batch(executor: &Executor, concurrency: Concurrency, calls: usize, ms: u64) -> Duration {
    let mut run = Run::builder(executor.clone())
        .concurrency(concurrency)
        .stop_policy(StopPolicy { max_steps: u32::MAX, max_retries: 1 })
        .build();
    let calls: Vec<ToolCall> =
        (0..calls).map(|i| ToolCall::new(format!("c{i}"), "bench.slow_read", json!({"ms": ms}))).collect();
    let began = Instant::now();
    let outcome = run.process_batch(calls).await;
    let took = began.elapsed();
    assert!(outcome.results.iter().all(|r| r.is_ok()), "every call succeeds");
    took
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>().expect("a number"));
    let rounds = args.next().unwrap_or(15) as usize;
    let calls = args.next().unwrap_or(8) as usize;
    let wait = args.next().unwrap_or(20);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let executor = executor();
    let contenders: Vec<(String, Concurrency)> = [1, 2, 4, calls]
        .into_iter()
        .map(|k| (if k == 1 { "sequential".to_owned() } else { format!("concurrency {k}") }, Concurrency::new(k)))
        .collect();
    for (label, ms) in [(format!("{calls} calls of {wait} ms"), wait), (format!("{calls} calls of 0 ms"), 0)] {
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
        let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
        runtime.block_on(async {
            for _ in 0..2 {
                for (_, c) in &contenders {
                    batch(&executor, *c, calls, ms).await;
                }
            }
            for _ in 0..rounds {
                let round: Vec<f64> = {
                    let mut r = Vec::new();
                    for (_, c) in &contenders {
                        r.push(batch(&executor, *c, calls, ms).await.as_secs_f64() * 1e3);
                    }
                    r
                };
                for (i, t) in round.iter().enumerate() {
                    times[i].push(*t);
                    ratios[i].push(t / round[0]);
                }
            }
        });
        println!("{label}, {rounds} rounds (median batch time, median ratio to sequential):");
        for (i, (name, _)) in contenders.iter().enumerate() {
            println!("  {name:<16} {:>9.3} ms  {:>6.3}x", median(times[i].clone()), median(ratios[i].clone()));
        }
    }
}
