//! The figures of call state shared by replicas through PostgreSQL (keel-tools-state), in the cluster of
//! `KEEL_TEST_POSTGRES` (`bash scripts/postgres.sh start && . target/postgres/env`):
//!
//! 1. **Task status propagation.** Two `PostgresTaskStore`s, each with its own connections as two replicas have: the
//!    owner changes its task's status message, the other replica waits for the change (`TaskStore::wait`, woken by
//!    `NOTIFY`); the delay from before the owner's `UPDATE` to the reader's wake, p50 and p99 over `CHANGES` changes.
//! 2. **A cancel through another replica, over MCP.** Two `McpServer`s (2026-07-28, Tasks extension), each with a
//!    `PostgresTaskStore` of its own over one table, and an rmcp client on each: a task started through A, then
//!    `tasks/cancel` sent through B; the delay from before the request to the moment the handler running on A sees
//!    its cancellation token fire (B's `UPDATE`, the `NOTIFY`, A's change feed, A's token), p50 and p99 over
//!    `CHANGES` cancels.
//! 3. **Exactly-once calls/s.** A `write` tool called `CALLS` times, `CONCURRENCY` at a time, each call with a key of
//!    its own: through a plain executor, and through one built with
//!    `exactly_once(PostgresEffectStore, OnceFor::Writes)` (a claim and a record per call), interleaved round by
//!    round; the median of each over `ROUNDS` rounds, the per-round figures beside it.
//!
//! ```sh
//! cargo run --release -p keel-bench --features examples --example replica_state -- \
//!     [ROUNDS] [CALLS] [CONCURRENCY] [CHANGES]
//! ```
//!
//! Defaults: 5 rounds, 2000 calls, 16 at a time, 200 changes. Each run uses tables of its own (named with the process
//! id) and drops them at the end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_tools_core::executor::CallOptions;
use keel_tools_core::once::OnceFor;
use keel_tools_core::policy::{PolicyDecision, PolicyRequest};
use keel_tools_core::tasks::{NewTask, TaskStore, WaitFor};
use keel_tools_core::{CallContext, Executor, Registry, ToolCall, ToolError, tool};
use keel_tools_mcp::McpServer;
use keel_tools_mcp::rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, Implementation,
    InitializeRequestParams, ProtocolVersion,
};
use keel_tools_mcp::rmcp::service::{ClientServiceExt, RunningService};
use keel_tools_mcp::rmcp::{ClientHandler, ClientLifecycleMode, RoleClient};
use keel_tools_state::{PostgresEffectStore, PostgresTaskStore};
use serde_json::json;
use tokio::sync::mpsc;

/// Record a payment (the handler does nothing else: the figures are the executor's and the ledger's).
#[tool(name = "bench.charge", effect = "write", version = "1.0")]
fn charge(order: String, cents: u64) -> String {
    format!("charged {cents} for {order}")
}

/// Where [`work_until_cancelled`] reports the moment its cancellation token fired.
static CANCELLED_AT: std::sync::OnceLock<mpsc::UnboundedSender<Instant>> = std::sync::OnceLock::new();

/// Work until cancelled (a minute at most), and say when the cancel arrived.
#[tool(name = "bench.work", effect = "read", version = "1.0", task = "optional")]
async fn work_until_cancelled(ctx: CallContext) -> Result<String, ToolError> {
    tokio::select! {
        () = tokio::time::sleep(Duration::from_secs(60)) => Ok("worked".to_owned()),
        () = ctx.cancellation().cancelled() => {
            if let Some(tx) = CANCELLED_AT.get() {
                let _ = tx.send(Instant::now());
            }
            Err(keel_tools_core::tool_error!("stopped", "cancelled"))
        }
    }
}

/// A 2026-07-28 client that declares the Tasks extension.
#[derive(Clone, Default)]
struct TaskClient;

impl ClientHandler for TaskClient {
    fn get_info(&self) -> InitializeRequestParams {
        let mut capabilities = ClientCapabilities::default();
        capabilities.extensions = ClientCapabilities::builder().enable_tasks().build().extensions;
        InitializeRequestParams::new(capabilities, Implementation::new("keel-bench", "0.1"))
    }
}

/// A replica: a server of `bench.work` over a task store of its own (table `table`), and a client connected to it
/// over an in-memory pipe.
async fn replica(
    conninfo: &str,
    table: &str,
) -> Result<RunningService<RoleClient, TaskClient>, Box<dyn std::error::Error>> {
    let store = Arc::new(PostgresTaskStore::builder(conninfo).table(table).connect_tasks()?);
    let registry = Registry::from_inventory()?;
    let view = registry.view().names(["bench.work"]).build()?;
    let server = McpServer::builder(Executor::new(view)?).task_store(store).build()?;
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        if let Ok(s) = server.serve(server_io).await {
            let _ = s.waiting().await;
        }
    });
    let lifecycle = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    Ok(TaskClient.serve_with_lifecycle(client_io, lifecycle).await?)
}

fn executor(ledger: Option<Arc<PostgresEffectStore>>) -> Executor {
    let registry = Registry::from_inventory().expect("unique names");
    let view = registry.view().names(["bench.charge"]).build().expect("the tool exists");
    let mut builder = Executor::builder(view).policy(|_: &PolicyRequest<'_>| PolicyDecision::Allow);
    if let Some(ledger) = ledger {
        builder = builder.exactly_once(ledger, OnceFor::Writes);
    }
    builder.build().expect("it builds")
}

/// `calls` calls, `concurrency` at a time, keys `run-round-i`: calls per second.
async fn throughput(executor: &Executor, run: &str, calls: usize, concurrency: usize) -> f64 {
    let began = Instant::now();
    let mut workers = Vec::new();
    for w in 0..concurrency {
        let executor = executor.clone();
        let run = run.to_owned();
        workers.push(tokio::spawn(async move {
            let mut i = w;
            while i < calls {
                let call =
                    ToolCall::new(format!("c{i}"), "bench.charge", json!({"order": format!("o-{i}"), "cents": 42}));
                let options = CallOptions::new().idempotency_key(format!("{run}-{i}"));
                let result = executor.call_with(call, &options).await;
                assert!(result.is_ok(), "{result:?}");
                i += concurrency;
            }
        }));
    }
    for w in workers {
        w.await.expect("a worker");
    }
    calls as f64 / began.elapsed().as_secs_f64()
}

fn quantile(sorted: &[u128], q: f64) -> u128 {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().expect("a number")).collect();
    let rounds = args.first().copied().unwrap_or(5);
    let calls = args.get(1).copied().unwrap_or(2000);
    let concurrency = args.get(2).copied().unwrap_or(16);
    let changes = args.get(3).copied().unwrap_or(200);
    let conninfo = std::env::var("KEEL_TEST_POSTGRES")
        .map_err(|_| "KEEL_TEST_POSTGRES is not set: bash scripts/postgres.sh start && . target/postgres/env")?;
    let pid = std::process::id();
    let (task_table, effect_table) = (format!("bench_tasks_{pid}"), format!("bench_effects_{pid}"));

    // 1. Task status propagation between two replicas' stores.
    let owner = PostgresTaskStore::builder(&conninfo).table(&task_table).connect_tasks()?;
    let reader = Arc::new(PostgresTaskStore::builder(&conninfo).table(&task_table).connect_tasks()?);
    let (task, lease) =
        owner.create(&NewTask::new("propagation", "bench.charge").lease(Duration::from_secs(600))).await?;
    let mut version = task.version;
    let mut delays = Vec::with_capacity(changes);
    for i in 0..changes {
        let waiting = {
            let reader = reader.clone();
            tokio::spawn(async move {
                let seen = reader.wait("propagation", WaitFor::ChangedSince(version), Duration::from_secs(10)).await;
                (seen, Instant::now())
            })
        };
        // Let the reader reach its wait before the change.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let began = Instant::now();
        owner.working(&lease, Some(&format!("step {i}"))).await?;
        let (seen, woke) = waiting.await?;
        let seen = seen?.ok_or("the task is gone")?;
        assert_eq!(seen.version, version + 1, "the reader saw the change");
        version = seen.version;
        delays.push(woke.duration_since(began).as_micros());
    }
    delays.sort_unstable();
    println!(
        "task status propagation over {changes} changes: p50 {} µs, p99 {} µs (min {} µs, max {} µs)",
        quantile(&delays, 0.5),
        quantile(&delays, 0.99),
        delays[0],
        delays[delays.len() - 1]
    );

    // 2. A cancel through B reaching the handler on A.
    let (tx, mut cancelled_at) = mpsc::unbounded_channel();
    CANCELLED_AT.set(tx).expect("set once");
    let (a, b) = (replica(&conninfo, &task_table).await?, replica(&conninfo, &task_table).await?);
    let mut delays = Vec::with_capacity(changes);
    for _ in 0..changes {
        let call = CallToolRequestParams::new("bench.work").with_arguments(serde_json::Map::new());
        let CallToolResponse::Task(created) = a.peer().call_tool_once(call).await? else {
            return Err("the call did not become a task".into());
        };
        // Let the owner's change feed settle on the new task before the cancel.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let began = Instant::now();
        b.peer().cancel_task(CancelTaskParams::new(created.task.task_id)).await?;
        let seen = tokio::time::timeout(Duration::from_secs(10), cancelled_at.recv()).await?.ok_or("no handler")?;
        delays.push(seen.duration_since(began).as_micros());
    }
    delays.sort_unstable();
    println!(
        "a cancel through another replica's MCP server reaching the handler, over {changes} cancels: p50 {} µs, \
         p99 {} µs (min {} µs, max {} µs)",
        quantile(&delays, 0.5),
        quantile(&delays, 0.99),
        delays[0],
        delays[delays.len() - 1]
    );
    drop((a, b));

    // 3. Exactly-once against plain, interleaved.
    let ledger = Arc::new(PostgresEffectStore::builder(&conninfo).table(&effect_table).connect_effects()?);
    let plain = executor(None);
    let once = executor(Some(ledger));
    // Warm both (connections opened, statements prepared).
    throughput(&plain, "warm-plain", 200, concurrency).await;
    throughput(&once, "warm-once", 200, concurrency).await;
    let (mut plain_rates, mut once_rates) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        plain_rates.push(throughput(&plain, &format!("plain-{round}"), calls, concurrency).await);
        once_rates.push(throughput(&once, &format!("once-{round}"), calls, concurrency).await);
    }
    let show = |v: &[f64]| v.iter().map(|r| format!("{r:.0}")).collect::<Vec<_>>().join(", ");
    println!("plain write: median {:.0} calls/s (rounds: {})", median(&plain_rates), show(&plain_rates));
    println!(
        "exactly-once write (PostgreSQL ledger): median {:.0} calls/s (rounds: {})",
        median(&once_rates),
        show(&once_rates)
    );
    let ratios: Vec<f64> = plain_rates.iter().zip(&once_rates).map(|(p, o)| o / p).collect();
    println!("exactly-once / plain, per round: median {:.4} (rounds: {})", median(&ratios), {
        ratios.iter().map(|r| format!("{r:.4}")).collect::<Vec<_>>().join(", ")
    });
    println!("({calls} calls per round, {concurrency} at a time, {rounds} rounds)");

    let (client, connection) = tokio_postgres::connect(&conninfo, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    client
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS {task_table} CASCADE; DROP FUNCTION IF EXISTS {task_table}_notify(); \
             DROP TABLE IF EXISTS {effect_table}; \
             DELETE FROM keel_state_schema WHERE table_name IN ('{task_table}', '{effect_table}')"
        ))
        .await?;
    Ok(())
}
