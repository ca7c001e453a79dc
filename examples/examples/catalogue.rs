//! The tool catalogue: a row in a database table becomes a callable tool.
//!
//! ```text
//! cargo run -p examples --example catalogue
//! ```
//!
//! 1. What the table stores: recipes (a name, a locator, schemas), never a function.
//! 2. A local row resolves to the very definition compiled into the binary (`Arc::ptr_eq` is true).
//! 3. A remote row resolves to a forwarder over a real MCP connection (to a server this demo starts on loopback),
//!    the same instance on every resolution; `incident.search` is `search_incidents` there.
//! 4. Four bad rows, written past the catalogue's own checks, are refused with their codes; nothing they name is
//!    looked up or run.

use std::error::Error;
use std::sync::Arc;

use keel_tools_catalog::{Catalog, Resolved, ToolRow};
use keel_tools_core::definition::Effect;
use keel_tools_core::{Executor, Registry, ToolCall};
use keel_tools_mcp::McpServer;
use serde_json::json;
use tokio_util::sync::CancellationToken;

keel_tools_core::link_tools!(examples);

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "keel_tools_core=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let registry = Registry::from_inventory()?;

    // The "remote" side: an MCP server (in this process, over Streamable HTTP on loopback) hosting
    // search_incidents. The catalogue reaches it only through its URL.
    let remote_view = registry.view().names(["search_incidents"]).build()?;
    let remote = McpServer::builder(Executor::new(remote_view)?).name("incident-search").build()?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let shutdown = CancellationToken::new();
    let serving = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move { remote.serve_http(listener, "/mcp", shutdown).await })
    };
    let endpoint = format!("http://{addr}/mcp");

    let dir = std::env::temp_dir().join(format!("keel-catalogue-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let db = dir.join("tools.db");
    let result = demo(&registry, &db, &endpoint, &addr.to_string()).await;

    shutdown.cancel();
    let _ = serving.await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn demo(registry: &Registry, db: &std::path::Path, endpoint: &str, addr: &str) -> Result<(), Box<dyn Error>> {
    let catalog = Catalog::builder(registry)
        .allow_module("examples::status")
        .allow_http_origin(format!("http://{addr}"))
        .open(db)?;

    let compiled = registry.get("get_service_status").ok_or("get_service_status is linked")?.clone();
    let local = ToolRow::local(
        "get_service_status",
        compiled.description(),
        compiled.input_schema().clone(),
        "examples::status::get_service_status",
    );
    let search = registry.get("search_incidents").ok_or("search_incidents is linked")?;
    let remote = ToolRow::remote(
        "incident.search",
        "Search recent incidents of one service, newest first.",
        json!({
            "type": "object",
            "properties": {
                "service": {"type": "string", "description": "The affected service, e.g. payments."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 20, "description": "At most this many."}
            },
            "required": ["service"]
        }),
        endpoint,
        "search_incidents",
    )
    .effect(Effect::Read)
    .output_schema(search.output_schema().cloned().unwrap_or_else(|| json!({"type": "object"})));
    catalog.put(&local)?;
    catalog.put(&remote)?;

    println!("== 1. What the table stores ({})\n", db.file_name().and_then(|n| n.to_str()).unwrap_or("tools.db"));
    let conn = rusqlite::Connection::open(db)?;
    let columns: Vec<String> = conn
        .prepare("SELECT name || ' ' || type FROM pragma_table_info('tools')")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    println!("  columns: {}\n", columns.join(", "));
    let mut stmt = conn.prepare("SELECT kind, name, locator, extra FROM tools ORDER BY rowid")?;
    let rows = stmt.query_map([], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?, r.get::<_, String>(3)?))
    })?;
    for row in rows {
        let (kind, name, locator, extra) = row?;
        println!("  [{kind:>6}] {name:<20} locator = {locator}   extra = {extra}");
    }
    println!("\n  No column holds a function: a function cannot be stored. Each row is a recipe for finding or");
    println!("  building a callable.");

    println!("\n== 2. The local row\n");
    let Resolved::Local { target, definition } = catalog.resolve(&local).await? else {
        return Err("the local row resolved to something else".into());
    };
    println!("  entrypoint:\n    {}", target.origin());
    println!(
        "  same definition as the one compiled in (Arc::ptr_eq with the registry's):\n    {}",
        Arc::ptr_eq(&target, &compiled)
    );
    println!("  the view serves that very definition:\n    {}", Arc::ptr_eq(&definition, &compiled));
    let view = catalog.shared_view().await?;
    let executor = view.executor()?;
    let r = executor.call(ToolCall::new("c1", "get_service_status", json!({"service_name": "auth-api"}))).await;
    println!("  call result:\n    {}", serde_json::to_string(&r.data())?);

    println!("\n== 3. The remote row\n");
    let Resolved::Remote { forwarder, definition } = catalog.resolve(&remote).await? else {
        return Err("the remote row resolved to something else".into());
    };
    println!("  entrypoint:\n    forwarder {:?} -> MCP tool {:?} at {endpoint}", forwarder.name(), forwarder.origin());
    let again = view.resolution("incident.search").ok_or("incident.search is in the view")?;
    let same = matches!(again, Resolved::Remote { forwarder: f, .. } if Arc::ptr_eq(f, &forwarder));
    println!("  the same forwarder instance on a second resolution:\n    {same}");
    println!(
        "  what the model sees (the row's schema; the forwarder alone takes any arguments):\n    {}",
        serde_json::to_string(&definition.render(keel_tools_core::Provider::Ollama)["function"]["parameters"])?
    );
    let r = executor.call(ToolCall::new("c2", "incident.search", json!({"service": "payments", "limit": 1}))).await;
    println!("  call over the MCP connection:\n    {}", serde_json::to_string(&r.data())?);
    println!("  calls sent by this forwarder: {}", forwarder.calls());
    let r = executor.call(ToolCall::new("c3", "incident.search", json!({"service": "payments", "limit": 99}))).await;
    println!(
        "  an argument outside the row's schema never leaves this process: {} (calls sent: {})",
        r.code().unwrap_or("ok"),
        forwarder.calls()
    );

    println!("\n== 4. Bad rows, written straight into the file (the write side lacked validation)\n");
    let bad = [
        ("out-of-bounds module", "path_join", "std::path::Path::join"),
        ("malformed", "status_typo", "examples::status:get_service_status"),
        ("missing function", "status_gone", "examples::status::no_such_function"),
        ("not callable", "status_module", "examples::status"),
    ];
    let schema = json!({"type": "object", "properties": {}}).to_string();
    for (_, name, locator) in bad {
        conn.execute(
            "INSERT INTO tools (name, description, input_schema, kind, locator, version, effect) \
             VALUES (?1, 'A bad row.', ?2, 'local', ?3, '1.0', 'read')",
            rusqlite::params![name, schema, locator],
        )?;
    }
    let view = catalog.shared_view().await?;
    for (label, name, locator) in bad {
        let code = view.problems().iter().find(|e| e.row().name == name).map_or("(accepted!)", |e| e.code());
        println!("  {label:<22} {locator:<40} -> refused: {code}");
    }
    println!("\n  The view still serves {:?}.", view.view().names().collect::<Vec<_>>());
    if let Some(e) = view.problems().iter().find(|e| e.code() == "target_missing") {
        println!("\n  What operators read for target_missing:\n    {e}");
    }
    let refused = catalog.put(&ToolRow::local("lambda", "Runs code.", json!({"type": "object"}), "__import__('os')"));
    println!(
        "\n  Through Catalog::put the same mistakes never reach the file: {}",
        refused.err().map_or_else(|| "accepted!".to_owned(), |e| e.code().to_owned())
    );
    Ok(())
}
