//! Two MCP server replicas over one PostgreSQL catalogue: an edit made through one is served by the other, pushed
//! by `LISTEN`/`NOTIFY`.
//!
//! ```text
//! cargo run -p examples --example catalogue_replicas
//! ```
//!
//! The database: `KEEL_POSTGRES` (a libpq connection string or `postgresql://` URL of a server where the demo may
//! create and drop the database `keel_replicas_demo`), else `KEEL_TEST_POSTGRES`, else the demo starts a throwaway
//! cluster with `scripts/postgres.sh` (under `target/postgres`) and stops it at the end.
//!
//! 1. Two replica processes start (this binary, `replica` mode), each serving the catalogue's shared view over
//!    Streamable HTTP on its own loopback port, with `/health`.
//! 2. A row written through replica A is listed by replica B; B's delay is printed.
//! 3. The row is disabled through B; A stops listing it.
//! 4. Twenty edits alternate between the replicas; the propagation delay's median and 99th percentile are printed.
//! 5. Both health reports.
//!
//! `catalogue_replicas replica <name> <conninfo>` is one replica; `examples::replicas` documents its protocol.
//!
//! Each replica keeps its call state in the same database, shared with the others (keel-tools-state): its tasks
//! (`tasks/get`, `tasks/update` and `tasks/cancel` served by any replica; a task whose replica died reads
//! `task_lost` once its lease expired: `KEEL_TASK_LEASE_MS`, default 2000), the records that make its writes run
//! once per `_meta["keel/idempotencyKey"]` on any replica, and the calls that wait for an approval. The replicas
//! sign those pending calls with one shared key, so that any of them resumes a call another saved:
//! `KEEL_APPROVAL_KEY` (at least 32 random bytes) and, while rotating it, `KEEL_APPROVAL_PREVIOUS_KEY`; without
//! them, a public development key (never deploy it).
//!
//! The replicas seal the `requestState` of input-required results with one shared key, so that any of them
//! resumes a call another began: `KEEL_REQUEST_STATE_KEY` (`<id>:<key>`, the key at least 32 random bytes) and,
//! while rotating it, `KEEL_REQUEST_STATE_PREVIOUS_KEY`; without them, a public development key (never deploy
//! it).

use std::error::Error;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use examples::replicas::{Replica, now_us, quantile};
use keel_tools_catalog::postgres::PgConnector;
use keel_tools_catalog::{Catalog, CatalogServer, ToolRow};
use keel_tools_core::definition::Effect;
use keel_tools_core::executor::CallOptions;
use keel_tools_core::once::{EffectLedger, OnceFor};
use keel_tools_core::policy::{EffectPolicy, Policy, PolicyDecision, PolicyRequest};
use keel_tools_core::runs::{PendingCall, Resolution};
use keel_tools_core::{Executor, Registry, ToolCall};
use keel_tools_mcp::rmcp::ServiceExt;
use keel_tools_mcp::{HttpConfig, McpServer};
use keel_tools_state::{PostgresEffectStore, PostgresPendingStore, PostgresTaskStore};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::sync::CancellationToken;

keel_tools_core::link_tools!(examples);

/// The replicas' own tools: a slow call that is still running when a replica is killed, a task that works a while
/// (and stops when cancelled), a task that asks its client for input, a charge that runs once and records itself in
/// the database with its effect record, and a refund that waits for an approval.
pub mod replica_tools {
    use std::time::Duration;

    use keel_tools_core::content::Content;
    use keel_tools_core::{CallContext, State, ToolError, tool, tool_error};
    use keel_tools_state::PostgresEffectStore;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use serde_json::json;

    /// What a replica's tools share: its name, its effect records and a connection to the database they are in.
    /// The executor of every view the catalogue builds holds it (`ExecutorBuilder::state_arc`), and the tools take
    /// it as `State<ReplicaState>`.
    pub struct ReplicaState {
        /// The replica's name.
        pub name: String,
        /// The effect records every replica shares.
        pub effects: PostgresEffectStore,
        /// A connection to the same database, for the effects that are recorded with their effect record.
        pub db: tokio::sync::Mutex<tokio_postgres::Client>,
    }

    /// The table of the charges [`charge_order`] and [`refund_order`] make, one row per run of a handler.
    pub const CHARGES_TABLE: &str = "replica_charges";

    /// Creates [`CHARGES_TABLE`] if it is missing (under a lock, so that replicas starting together do not race).
    pub async fn create_charges_table(client: &mut tokio_postgres::Client) -> Result<(), tokio_postgres::Error> {
        let tx = client.transaction().await?;
        tx.batch_execute(&format!(
            "SELECT pg_advisory_xact_lock(7314); CREATE TABLE IF NOT EXISTS {CHARGES_TABLE} (id bigserial PRIMARY \
             KEY, order_id text NOT NULL, cents bigint NOT NULL, replica text NOT NULL, idempotency_key text NOT \
             NULL, at timestamptz NOT NULL DEFAULT now())"
        ))
        .await?;
        tx.commit().await
    }

    /// How long to wait.
    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    pub struct WaitArgs {
        /// Milliseconds, at most 10000.
        #[schemars(range(min = 0, max = 10000))]
        pub ms: u64,
    }

    /// How long was waited.
    #[derive(Debug, Serialize, JsonSchema)]
    pub struct Waited {
        /// Milliseconds.
        pub ms: u64,
    }

    /// Wait a while, then answer: a call that is still running when its replica stops.
    #[tool(effect = "read", version = "1.0")]
    pub async fn wait_a_while(args: WaitArgs) -> Result<Waited, ToolError> {
        tokio::time::sleep(Duration::from_millis(args.ms)).await;
        Ok(Waited { ms: args.ms })
    }

    /// What a task worked.
    #[derive(Debug, Serialize, JsonSchema)]
    pub struct Worked {
        /// Milliseconds.
        pub ms: u64,
        /// The replica that ran it.
        pub replica: String,
    }

    /// Work a while as a task, then answer; stops as soon as the task is cancelled.
    #[tool(effect = "read", version = "1.0", task = "optional")]
    pub async fn work_a_while(
        replica: State<ReplicaState>,
        ctx: CallContext,
        #[arg(description = "Milliseconds to work, at most 60000")] ms: u64,
    ) -> Result<Worked, ToolError> {
        let ms = ms.min(60_000);
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(ms)) => Ok(Worked { ms, replica: replica.name.clone() }),
            () = ctx.cancellation().cancelled() => {
                crate::emit(json!({
                    "event": "cancelled", "tool": "work_a_while", "call_id": ctx.call_id(),
                    "at_us": examples::replicas::now_us(),
                }));
                Err(tool_error!("stopped", "work_a_while was cancelled"))
            }
        }
    }

    /// Ask the user whose order this is, from inside the task, and answer with the name.
    #[tool(effect = "read", version = "1.0", task = "optional")]
    pub async fn ask_whose_order(
        replica: State<ReplicaState>,
        ctx: CallContext,
        #[arg(description = "The order")] order: String,
    ) -> Result<Content, ToolError> {
        let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
        let answer = ctx.elicit("owner", format!("Whose order is {order}?"), schema).await?;
        let name = answer.content.as_ref().and_then(|c| c.get("name")).and_then(|n| n.as_str()).unwrap_or("nobody");
        Ok(Content::text(format!("{order} belongs to {name} (asked by {})", replica.name)))
    }

    /// A charge made.
    #[derive(Debug, Serialize, JsonSchema)]
    pub struct Charged {
        /// The charge's row in the charges table.
        pub charge_id: i64,
        /// The order.
        pub order: String,
        /// The amount, in cents (negative for a refund).
        pub cents: i64,
        /// The replica whose handler made it.
        pub replica: String,
    }

    /// Records `cents` against `order` in the charges table, in one transaction with the call's effect record: both
    /// are committed, or neither.
    async fn record(
        replica: &ReplicaState,
        ctx: &CallContext,
        order: String,
        cents: i64,
    ) -> Result<Charged, ToolError> {
        let lease = ctx
            .effect_lease()
            .ok_or_else(|| ToolError::internal(std::io::Error::other("the tool does not run once: no effect lease")))?;
        let mut db = replica.db.lock().await;
        let tx = db.transaction().await.map_err(ToolError::internal)?;
        let row = tx
            .query_one(
                &format!(
                    "INSERT INTO {CHARGES_TABLE} (order_id, cents, replica, idempotency_key) VALUES ($1, $2, $3, $4) \
                     RETURNING id"
                ),
                &[&order, &cents, &replica.name, &ctx.idempotency_key()],
            )
            .await
            .map_err(ToolError::internal)?;
        let charged = Charged { charge_id: row.get(0), order, cents, replica: replica.name.clone() };
        let data = serde_json::to_value(&charged).map_err(ToolError::internal)?;
        // The executor's own record of the call then finds it done. A lost lease (another runner took the call
        // over) rolls the charge back: the transaction is dropped uncommitted.
        replica.effects.finish_in(&tx, lease, &data).await.map_err(ToolError::internal)?;
        tx.commit().await.map_err(ToolError::internal)?;
        Ok(charged)
    }

    /// Charge an order: runs once per idempotency key, on whichever replica, and a retry is answered with the
    /// charge made.
    #[tool(effect = "write", version = "1.0")]
    pub async fn charge_order(
        replica: State<ReplicaState>,
        ctx: CallContext,
        #[arg(description = "The order")] order: String,
        #[arg(description = "The amount, in cents")] cents: i64,
    ) -> Result<Charged, ToolError> {
        record(&replica, &ctx, order, cents).await
    }

    /// Refund an order: waits for a person's approval first.
    #[tool(effect = "destructive", version = "1.0")]
    pub async fn refund_order(
        replica: State<ReplicaState>,
        ctx: CallContext,
        #[arg(description = "The order")] order: String,
        #[arg(description = "The amount to refund, in cents")] cents: i64,
    ) -> Result<Charged, ToolError> {
        record(&replica, &ctx, order, -cents).await
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "keel_tools_catalog=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("replica") if args.len() == 4 => replica(&args[2], &args[3], false).await,
        Some("replica") if args.len() == 5 && args[4] == "--own-tools" => replica(&args[2], &args[3], true).await,
        Some(_) => Err("usage: catalogue_replicas [replica <name> <conninfo> [--own-tools]]".into()),
        None => demo().await,
    }
}

// ---- One replica ----

fn emit(event: Value) {
    println!("{event}");
}

/// The call state a replica keeps in the catalogue's database, shared with the other replicas.
struct CallState {
    tasks: PostgresTaskStore,
    effects: PostgresEffectStore,
    pending: PostgresPendingStore,
}

/// Connects the replica's call state (each store creating its table if it is missing).
async fn call_state(conninfo: &str) -> Result<CallState, Box<dyn Error>> {
    let conninfo = conninfo.to_owned();
    // Connecting blocks the calling thread: not one of the runtime's.
    let state = tokio::task::spawn_blocking(move || -> Result<CallState, keel_tools_state::StateError> {
        Ok(CallState {
            tasks: PostgresTaskStore::builder(conninfo.clone()).pool_size(2).connect_tasks()?,
            effects: PostgresEffectStore::builder(conninfo.clone()).pool_size(2).connect_effects()?,
            pending: PostgresPendingStore::builder(conninfo).pool_size(1).connect_pending()?,
        })
    })
    .await??;
    Ok(state)
}

/// The replicas' policy: `read` and `write` tools run; `destructive` ones wait for an approval of their exact
/// arguments (the default policy's rule).
fn policy(request: &PolicyRequest<'_>) -> PolicyDecision {
    match request.tool.effect() {
        Effect::Destructive => EffectPolicy.decide(request),
        _ => PolicyDecision::Allow,
    }
}

/// The replica's own tools that `--own-tools` serves: the tasks, the charge that runs once and the refund that
/// waits for an approval.
const OWN_TOOLS: [&str; 4] = ["work_a_while", "ask_whose_order", "charge_order", "refund_order"];

/// Puts a row for each of [`OWN_TOOLS`] the catalogue lacks, under the tool's own name.
async fn put_own_tools(catalog: &Catalog, registry: &Registry) -> Result<(), Box<dyn Error>> {
    let rows = catalog.rows_async().await?.value;
    let present = |name: &str| rows.iter().any(|r| r.row.as_ref().is_ok_and(|r| r.name == name && r.tenant.is_none()));
    for tool in OWN_TOOLS.into_iter().filter(|t| !present(t)) {
        let compiled = registry.get(tool).ok_or_else(|| format!("no compiled tool {tool:?}"))?;
        let row = ToolRow::local(tool, compiled.description(), compiled.input_schema().clone(), tool)
            .effect(compiled.effect());
        catalog.put_async(&row).await?;
    }
    Ok(())
}

async fn replica(name: &str, conninfo: &str, own_tools: bool) -> Result<(), Box<dyn Error>> {
    let registry = Registry::from_inventory()?;
    let state = call_state(conninfo).await?;
    let approval_key = examples::replicas::approval_key()?;
    let connector = PgConnector::new(conninfo, "keel-replica", Duration::from_secs(5))?;
    let mut db = connector.connect().await?;
    replica_tools::create_charges_table(&mut db).await?;
    let tools_state = Arc::new(replica_tools::ReplicaState {
        name: name.to_owned(),
        effects: state.effects.clone(),
        db: tokio::sync::Mutex::new(db),
    });
    let ledger: Arc<dyn EffectLedger> = Arc::new(state.effects.clone());
    let catalog = Catalog::builder(&registry)
        .allow_module("examples::status")
        .allow_module("catalogue_replicas::replica_tools")
        .executor(move |view| {
            Executor::builder(view)
                .policy(policy)
                .exactly_once(ledger.clone(), OnceFor::Writes)
                .approval_key(approval_key.clone())
                .state_arc(tools_state.clone())
                .build()
        })
        .connect_postgres(conninfo)
        .await?;
    // Before the server is built, so that its first view serves them.
    if own_tools {
        put_own_tools(&catalog, &registry).await?;
    }
    let server_name = name.to_owned();
    let (key, previous) = examples::replicas::request_state_keys()?;
    let task_lease = examples::replicas::task_lease()?;
    let tasks = Arc::new(state.tasks.clone());
    let server = CatalogServer::new(&catalog, None, |e| {
        let builder = McpServer::builder(e)
            .name(server_name)
            // The replicas serve one client, which retries through any of them with its own idempotency keys: its
            // key space is declared here (an anonymous caller's keys are otherwise its connection's alone).
            .call_options(|_, _| CallOptions::new().caller_scope("replica-client"))
            .request_state_key(key.0, key.1)
            .task_store(tasks)
            .task_lease(task_lease);
        match previous {
            Some((id, key)) => builder.previous_request_state_key(id, key),
            None => builder,
        }
        .build()
    })
    .await?;
    let stop = CancellationToken::new();
    let mut served = server.served();
    tokio::spawn(async move {
        loop {
            if let Some(token) = *served.borrow_and_update() {
                emit(json!({"event": "served", "generation": token.generation(), "at_us": now_us()}));
            }
            if served.changed().await.is_err() {
                return;
            }
        }
    });
    let following = server.follow(stop.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let serving = {
        let (server, stop) = (server.clone(), stop.clone());
        tokio::spawn(async move { server.serve_http(listener, "/mcp", HttpConfig::default(), stop).await })
    };
    emit(json!({"event": "listening", "url": format!("http://{addr}/mcp"), "health": format!("http://{addr}/health")}));

    // Writes, calls and approvals asked for on stdin, one JSON object per line, until stdin closes.
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await? {
        let Ok(command) = serde_json::from_str::<Value>(&line) else {
            emit(json!({"event": "error", "message": format!("not JSON: {line}")}));
            continue;
        };
        let name = command["name"].as_str().unwrap_or_default().to_owned();
        let op = command["op"].as_str().unwrap_or_default().to_owned();
        let result = match op.as_str() {
            "put" => {
                let tool = command["tool"].as_str().unwrap_or("get_service_status");
                let Some(compiled) = registry.get(tool) else {
                    emit(json!({"event": "error", "message": format!("no compiled tool {tool:?}")}));
                    continue;
                };
                let description = command["description"].as_str().unwrap_or(compiled.description());
                let row =
                    ToolRow::local(&name, description, compiled.input_schema().clone(), tool).effect(compiled.effect());
                catalog.put_async(&row).await.map(|v| v.token)
            }
            "set_enabled" => {
                let enabled = command["enabled"].as_bool().unwrap_or(true);
                catalog.set_enabled_async(&name, None, enabled).await.map(|v| v.token)
            }
            "remove" => catalog.remove_async(&name, None).await.map(|v| v.token),
            "call" => {
                call(&server, &state.pending, &command).await;
                continue;
            }
            "approve" => {
                approve(&server, &state.pending, command["key"].as_str().unwrap_or_default()).await;
                continue;
            }
            other => {
                emit(json!({"event": "error", "message": format!("unknown op {other:?}")}));
                continue;
            }
        };
        match result {
            Ok(token) => emit(json!({
                "event": "committed", "op": op, "name": name, "generation": token.generation(), "at_us": now_us(),
            })),
            Err(e) => emit(json!({"event": "error", "message": e.to_string()})),
        }
    }
    stop.cancel();
    let _ = following.await;
    let _ = serving.await;
    Ok(())
}

/// `op: call`: runs the call through the executor being served; a call stopped for an approval is saved to the
/// shared pending store (for a day), and its key emitted.
async fn call(server: &CatalogServer, pending: &PostgresPendingStore, command: &Value) {
    let id = command["id"].as_str().unwrap_or("call").to_owned();
    let tool = command["tool"].as_str().unwrap_or_default();
    let executor = server.server().executor();
    let result = executor.call(ToolCall::new(id.clone(), tool, command["arguments"].clone())).await;
    let key = match PendingCall::from_result(&executor, &result, Some("replicas"), Duration::from_secs(24 * 3600)) {
        None => None,
        Some(call) => match pending.save_async(&call).await {
            Ok(()) => Some(call.key()),
            Err(e) => {
                emit(json!({"event": "called", "id": id, "error": format!("saving the pending call: {e}")}));
                return;
            }
        },
    };
    emit(json!({"event": "called", "id": id, "result": result, "pending": key}));
}

/// `op: approve`: takes the pending call `key` from the shared store and resumes it, approved.
async fn approve(server: &CatalogServer, pending: &PostgresPendingStore, key: &str) {
    let taken = match pending.take_async(key).await {
        Ok(taken) => taken,
        Err(e) => {
            emit(json!({"event": "approved", "key": key, "error": format!("taking the pending call: {e}")}));
            return;
        }
    };
    let result = match taken {
        Some(call) => {
            let executor = server.server().executor();
            Some(executor.resume(&call, &Resolution::Approve, &CallOptions::new()).await)
        }
        None => None,
    };
    emit(json!({"event": "approved", "key": key, "result": result}));
}

// ---- The demo ----

/// The cluster the demo uses, and whether it started it.
fn cluster() -> Result<(String, Option<PathBuf>), Box<dyn Error>> {
    for var in ["KEEL_POSTGRES", "KEEL_TEST_POSTGRES"] {
        if let Some(v) = std::env::var(var).ok().filter(|v| !v.is_empty()) {
            return Ok((v, None));
        }
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    println!("No KEEL_POSTGRES: starting a throwaway cluster with scripts/postgres.sh (under target/postgres).");
    let out = std::process::Command::new("bash")
        .arg(root.join("scripts/postgres.sh"))
        .arg("start")
        .current_dir(&root)
        .stderr(std::process::Stdio::inherit())
        .output()?;
    if !out.status.success() {
        return Err("scripts/postgres.sh start failed (see above)".into());
    }
    let line = String::from_utf8_lossy(&out.stdout);
    let conninfo = line
        .lines()
        .find_map(|l| l.strip_prefix("export KEEL_TEST_POSTGRES='")?.strip_suffix('\'').map(str::to_owned))
        .ok_or("scripts/postgres.sh printed no connection string")?;
    Ok((conninfo, Some(root)))
}

async fn admin(conninfo: &str, sql: &str) -> Result<(), Box<dyn Error>> {
    let (client, connection) = tokio_postgres::connect(conninfo, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    client.batch_execute(sql).await?;
    Ok(())
}

async fn tool_names(url: &str) -> Result<Vec<String>, Box<dyn Error>> {
    let transport = keel_tools_mcp::rmcp::transport::StreamableHttpClientTransport::from_uri(url.to_owned());
    let client = ().serve(transport).await?;
    let mut names: Vec<String> = client.peer().list_all_tools().await?.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    let _ = client.cancel().await;
    Ok(names)
}

async fn demo() -> Result<(), Box<dyn Error>> {
    let (server_conninfo, started) = cluster()?;
    admin(&server_conninfo, "DROP DATABASE IF EXISTS keel_replicas_demo WITH (FORCE)").await?;
    admin(&server_conninfo, "CREATE DATABASE keel_replicas_demo").await?;
    let conninfo = format!("{server_conninfo} dbname=keel_replicas_demo");
    let result = run(&conninfo).await;
    let _ = admin(&server_conninfo, "DROP DATABASE IF EXISTS keel_replicas_demo WITH (FORCE)").await;
    if let Some(root) = started {
        let _ = std::process::Command::new("bash").arg(root.join("scripts/postgres.sh")).arg("stop").status();
    }
    result
}

async fn run(conninfo: &str) -> Result<(), Box<dyn Error>> {
    let exe = std::env::current_exe()?;
    println!("\n1. Two replicas over one PostgreSQL catalogue");
    let mut a = Replica::spawn(&exe, "replica-a", conninfo).await?;
    let mut b = Replica::spawn(&exe, "replica-b", conninfo).await?;
    println!("   replica-a: {} (pid {:?})", a.url, a.pid());
    println!("   replica-b: {} (pid {:?})", b.url, b.pid());

    println!("\n2. A row written through replica-a is served by replica-b");
    let c = a.put("service.status", "Report a service's status (written through replica-a).").await?;
    let seen = b.served_at_least(c.generation, Duration::from_secs(10)).await?;
    println!(
        "   committed generation {} through replica-a; replica-b served it {} µs later",
        c.generation,
        seen.saturating_sub(c.at_us)
    );
    println!("   replica-b lists: {:?}", tool_names(&b.url).await?);

    println!("\n3. Disabled through replica-b: replica-a stops listing it");
    let c = b.write(json!({"op": "set_enabled", "name": "service.status", "enabled": false})).await?;
    let seen = a.served_at_least(c.generation, Duration::from_secs(10)).await?;
    println!(
        "   committed generation {} through replica-b; replica-a served it {} µs later",
        c.generation,
        seen.saturating_sub(c.at_us)
    );
    println!("   replica-a lists: {:?}", tool_names(&a.url).await?);

    println!("\n4. Twenty edits, alternating");
    let mut delays = Vec::new();
    for i in 0..20 {
        let (writer, reader) = if i % 2 == 0 { (&mut a, &mut b) } else { (&mut b, &mut a) };
        let c = writer.put("service.status", &format!("Report a service's status (edit {i}).")).await?;
        let seen = reader.served_at_least(c.generation, Duration::from_secs(10)).await?;
        delays.push(seen.saturating_sub(c.at_us));
    }
    println!(
        "   propagation delay over {} edits: p50 {} µs, p99 {} µs",
        delays.len(),
        quantile(&mut delays, 0.5),
        quantile(&mut delays, 0.99)
    );

    println!("\n5. Health");
    for r in [&a, &b] {
        let (status, body) = examples::replicas::http_get(&r.health).await?;
        println!("   {}: {status} {body}", r.name);
    }
    a.kill().await;
    b.kill().await;
    Ok(())
}
