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
//! The replicas seal the `requestState` of input-required results with one shared key, so that any of them
//! resumes a call another began: `KEEL_REQUEST_STATE_KEY` (`<id>:<key>`, the key at least 32 random bytes) and,
//! while rotating it, `KEEL_REQUEST_STATE_PREVIOUS_KEY`; without them, a public development key (never deploy
//! it).

use std::error::Error;
use std::path::PathBuf;
use std::time::Duration;

use examples::replicas::{Replica, now_us, quantile};
use keel_tools_catalog::{Catalog, CatalogServer, ToolRow};
use keel_tools_core::Registry;
use keel_tools_mcp::rmcp::ServiceExt;
use keel_tools_mcp::{HttpConfig, McpServer};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::sync::CancellationToken;

keel_tools_core::link_tools!(examples);

/// A slow tool of the replicas' own, for calls that are still running when a replica is killed.
pub mod replica_tools {
    use keel_tools_core::{ToolError, tool};
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

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
        tokio::time::sleep(std::time::Duration::from_millis(args.ms)).await;
        Ok(Waited { ms: args.ms })
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
        Some("replica") if args.len() == 4 => replica(&args[2], &args[3]).await,
        Some(_) => Err("usage: catalogue_replicas [replica <name> <conninfo>]".into()),
        None => demo().await,
    }
}

// ---- One replica ----

fn emit(event: Value) {
    println!("{event}");
}

async fn replica(name: &str, conninfo: &str) -> Result<(), Box<dyn Error>> {
    let registry = Registry::from_inventory()?;
    let catalog = Catalog::builder(&registry)
        .allow_module("examples::status")
        .allow_module("catalogue_replicas::replica_tools")
        .connect_postgres(conninfo)
        .await?;
    let server_name = name.to_owned();
    let (key, previous) = examples::replicas::request_state_keys()?;
    let server = CatalogServer::new(&catalog, None, |e| {
        let builder = McpServer::builder(e).name(server_name).request_state_key(key.0, key.1);
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

    // Writes asked for on stdin, one JSON object per line, until stdin closes.
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
