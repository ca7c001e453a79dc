//! An MCP client made of keel's forwarders, in the form the official conformance suite runs a client in: it
//! connects to the server URL given as its last argument (`RemoteServer::http`, logging in with OAuth when the
//! server asks), imports the server's tools, and calls them through a keel `Executor`, as an agent would.
//!
//! ```text
//! cargo build -p examples --example conformance_client
//! npx @modelcontextprotocol/conformance@0.2.0-alpha.12 client \
//!     --command target/debug/examples/conformance_client --requirements 2026-07-28
//! ```
//!
//! What it reads from the suite's environment:
//! - `MCP_CONFORMANCE_PROTOCOL_VERSION`: `2026-07-28` speaks the stateless era, an earlier revision the
//!   `initialize` session; unset, the client probes (`Era::Auto`).
//! - `MCP_CONFORMANCE_CONTEXT` (JSON, optional): `client_id` and `client_secret` of a client registered with the
//!   authorization server beforehand, and `toolCalls` (`[{"name", "arguments"}]`) to make instead of calling
//!   every tool.
//!
//! Every tool it calls gets arguments that satisfy its input schema's required properties (the executor checks
//! them before anything is sent), and each call is approved explicitly, as a user would approve it. A call that
//! fails is reported on stderr; the client exits non-zero only when connecting, logging in or importing fails.
//! The server may ask for elicitation: the client accepts with the defaults of the requested schema. A tool named
//! `json_schema_echo` gets the input schema keel imported for the server's other tool (the suite checks that an
//! imported schema is kept verbatim).

use std::time::Duration;

use keel_tools_core::executor::CallOptions;
use keel_tools_core::{Approval, Executor, Registry, ToolCall};
use keel_tools_mcp::client::oauth::{AutoApprove, Login};
use keel_tools_mcp::client::{AcceptDefaults, Era, RemoteServer};
use serde_json::{Map, Value, json};

/// Where the authorization server sends the code back. The suite's authorization server approves without a
/// person and answers with a redirect to this address, which is never fetched.
const REDIRECT_URI: &str = "http://localhost:3000/callback";
/// This client's ID metadata document, for servers that accept one instead of a registration.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Context {
    #[serde(default, alias = "client_id")]
    client_id: Option<String>,
    #[serde(default, alias = "client_secret")]
    client_secret: Option<String>,
    #[serde(default, alias = "tool_calls")]
    tool_calls: Vec<PlannedCall>,
}

#[derive(Debug, serde::Deserialize)]
struct PlannedCall {
    name: String,
    #[serde(default)]
    arguments: Option<Map<String, Value>>,
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    // The suite gives a client 30 s; ending first keeps its report about this client, not about a timeout.
    match tokio::time::timeout(Duration::from_secs(25), run()).await {
        Ok(Ok(())) => {}
        Ok(Err(message)) => {
            eprintln!("conformance_client: {message}");
            std::process::exit(1);
        }
        Err(_) => {
            eprintln!("conformance_client: gave up after 25 s");
            std::process::exit(1);
        }
    }
}

async fn run() -> Result<(), String> {
    let url = std::env::args().nth(1).ok_or("usage: conformance_client SERVER_URL")?;
    let context: Context = match std::env::var("MCP_CONFORMANCE_CONTEXT") {
        Ok(text) => serde_json::from_str(&text).map_err(|e| format!("MCP_CONFORMANCE_CONTEXT: {e}"))?,
        Err(_) => Context::default(),
    };
    let era = match std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").as_deref() {
        Ok(v) if v >= "2026-07-28" => Era::Stateless,
        Ok(_) => Era::Session,
        Err(_) => Era::Auto,
    };

    let authorizer = AutoApprove::new().map_err(|e| e.to_string())?;
    let mut login = Login::new(REDIRECT_URI, authorizer)
        .client_name("keel conformance client")
        .client_metadata_url(CLIENT_METADATA_URL);
    if let Some(id) = &context.client_id {
        login = login.client(id.clone(), context.client_secret.clone());
    }
    let server = RemoteServer::http(&url)
        .era(era)
        .elicitation(AcceptDefaults)
        .login(login)
        .connect("remote")
        .await
        .map_err(|e| e.to_string())?;
    let tools = server.import_unpinned().await.map_err(|e| e.to_string())?;
    let registry = Registry::builder().tools(tools.into_definitions()).build().map_err(|e| e.to_string())?;
    let executor = Executor::new(registry.all().clone()).map_err(|e| e.to_string())?;

    let calls: Vec<(String, Value)> = if context.tool_calls.is_empty() {
        executor.view().iter().map(|def| (def.name().to_owned(), arguments_for(def.input_schema()))).collect()
    } else {
        context
            .tool_calls
            .iter()
            .map(|c| (format!("remote.{}", c.name), Value::Object(c.arguments.clone().unwrap_or_default())))
            .collect()
    };
    // The suite's check that an imported schema is kept verbatim (SEP-1613, SEP-2106): its echo tool is given
    // the input schema keel holds for the other tool, as the scenario asks.
    let echo = "remote.json_schema_echo";
    let focal = executor.view().iter().find(|def| def.name() != echo).map(|def| def.input_schema().clone());
    let calls = calls.into_iter().map(|(name, arguments)| match (&focal, name == echo) {
        (Some(schema), true) => (name, json!({ "schema": schema })),
        _ => (name, arguments),
    });
    for (i, (name, arguments)) in calls.enumerate() {
        let options = CallOptions::new().approve(Approval::new(name.clone(), &arguments));
        let result = executor.call_with(ToolCall::new(format!("call-{i}"), name.clone(), arguments), &options).await;
        if result.is_ok() {
            eprintln!("conformance_client: {name}: ok");
        } else {
            eprintln!("conformance_client: {name}: {}", result.to_json());
        }
    }
    server.close().await;
    Ok(())
}

/// Arguments that satisfy `schema`'s required properties: the default when the property has one, else the
/// first enum value, else a plain value of its type.
fn arguments_for(schema: &Value) -> Value {
    let mut arguments = Map::new();
    let properties = schema.get("properties").and_then(Value::as_object);
    let required = schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str);
    for name in required {
        let property = properties.and_then(|p| p.get(name)).cloned().unwrap_or(Value::Null);
        arguments.insert(name.to_owned(), value_for(&property));
    }
    Value::Object(arguments)
}

fn value_for(schema: &Value) -> Value {
    if let Some(default) = schema.get("default") {
        return default.clone();
    }
    if let Some(first) = schema.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
        return first.clone();
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("integer") => json!(1),
        Some("number") => json!(1.5),
        Some("boolean") => json!(true),
        Some("array") => json!([]),
        Some("object") => arguments_for(schema),
        Some("null") => Value::Null,
        _ => json!("test"),
    }
}
