//! Remote MCP tools imported as keel tools (`keel_tools_mcp::client`): namespaced names, schemas from `tools/list`,
//! arguments validated locally before forwarding, results validated against `outputSchema`, one forwarder per
//! tool held by the registry.
//!
//! Peers:
//! - our own server (`keel_tools_mcp::McpServer`) over Streamable HTTP on a loopback port, and a misbehaving server
//!   written against rmcp directly, in process — always run;
//! - the example `examples/examples/conformance_server.rs`, spawned over stdio;
//! - the reference `@modelcontextprotocol/server-everything` (npm), spawned over stdio with `node`.
//!
//! The last two need files that `scripts/mcp-conformance.sh` prepares: the example binary
//! (`target/debug/examples/conformance_server`, or `KEEL_CONFORMANCE_SERVER`) and server-everything
//! (`target/ci-node/node_modules/@modelcontextprotocol/server-everything/dist/index.js`, or
//! `KEEL_SERVER_EVERYTHING`). Without them (or without `node`) the tests pass without running, and the test binary
//! ends with a line that names them, unless peers are required: `CI` set (to anything but `0` or `false`) or
//! `KEEL_REQUIRE_PEERS=1`, as `scripts/test-all.sh` and `scripts/mcp-conformance.sh` set it; then a missing peer
//! fails the test. To run them locally: `scripts/mcp-conformance.sh` (which runs them too), or after it once,
//! `cargo test -p keel-tests --test with_peers mcp_forwarder::`.

use std::borrow::Cow;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use keel_tools_core::content::{Content, ContentBlock};
use keel_tools_core::definition::Handler;
use keel_tools_core::definition::{Effect, Origin};
use keel_tools_core::executor::CallOptions;
use keel_tools_core::registry::RegistryProblem;
use keel_tools_core::{Approval, Executor, Registry, ToolCall, ToolError, ToolResult, tool};
use keel_tools_mcp::client::{Era, ImportProblem, RemoteServer, RemoteTools};
use keel_tools_mcp::names::NameMappingError;
use keel_tools_mcp::rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig, Tool,
};
use keel_tools_mcp::rmcp::service::RequestContext;
use keel_tools_mcp::rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use keel_tools_mcp::{Forwarder, McpServer};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

use keel_tests::peers::{CONFORMANCE_SERVER, NODE, PYTHON_MCP, Peer, SERVER_EVERYTHING};

// ---- The tools our own server serves (the "remote" side) ----

#[derive(Serialize, JsonSchema)]
struct Sum {
    sum: i64,
}

/// Echoes a message.
#[tool(effect = "read", version = "2.0")]
fn fw_echo(message: String) -> String {
    format!("remote: {message}")
}

/// Adds two integers.
#[tool(effect = "read", version = "2.0")]
fn fw_add(a: i64, b: i64) -> Sum {
    Sum { sum: a + b }
}

/// Looks up a record; none exists.
#[tool(effect = "read", version = "2.0")]
fn fw_lookup(id: String) -> Result<Sum, ToolError> {
    Err(keel_tools_core::tool_error!("not_found", "no record {id:?}").with_details(json!({"id": id})))
}

/// Deletes a record.
#[tool(effect = "destructive", version = "2.0")]
fn fw_delete(id: String) -> Sum {
    Sum { sum: id.len() as i64 }
}

/// Returns an image.
#[tool(effect = "read", version = "2.0")]
fn fw_image() -> Content {
    Content::text("a pixel").with(ContentBlock::image_bytes(&[0xff, 0, 0], "image/png"))
}

/// Fails internally.
#[tool(effect = "read", version = "2.0")]
fn fw_internal() -> Result<Sum, ToolError> {
    Err(ToolError::internal(std::io::Error::other("password=swordfish at /var/lib/remote")))
}

const REMOTE_TOOLS: &[&str] = &["fw_echo", "fw_add", "fw_lookup", "fw_delete", "fw_image", "fw_internal"];

// ---- Local tools whose names collide with remote ones ----

/// The local echo.
#[tool(effect = "read", version = "1.0")]
fn echo(message: String) -> String {
    format!("local: {message}")
}

/// The local add.
#[tool(effect = "read", version = "1.0")]
fn add_numbers(a: i64, b: i64) -> i64 {
    a - b
}

// ---- Helpers ----

pub(super) async fn bounded<F: Future<Output = ()>>(f: F) {
    tokio::time::timeout(Duration::from_secs(90), f).await.expect("test timed out");
}

/// The file a test needs: from `var`, else `default`. Missing: `None` (the test passes, and is named in the line
/// the test binary ends with), or a panic when peers are required ([`keel_tests::peers_required`]).
pub(super) fn prerequisite(var: &str, default: Option<PathBuf>, peer: &'static Peer) -> Option<PathBuf> {
    let path = std::env::var_os(var).map(PathBuf::from).or(default);
    match find_prerequisite(keel_tests::peers_required(), path, var, peer) {
        Ok(found) => Some(found),
        Err(message) => {
            keel_tests::missing_peer(peer, &message);
            None
        }
    }
}

/// The file at `path`, or why there is none; a panic instead when `required`.
fn find_prerequisite(required: bool, path: Option<PathBuf>, var: &str, peer: &Peer) -> Result<PathBuf, String> {
    if let Some(p) = path.as_ref().filter(|p| p.is_file()) {
        return Ok(p.clone());
    }
    let shown = path.map_or_else(|| "(unknown path)".to_owned(), |p| p.display().to_string());
    let message = format!("{} not found at {shown} (set {var}, or run {})", peer.what, peer.how);
    assert!(!required, "peers are required (CI or KEEL_REQUIRE_PEERS), so a missing one is a failure: {message}");
    Err(message)
}

/// A missing peer is a skip only when peers are not required; when they are, it fails the test.
#[test]
fn a_missing_peer_fails_when_peers_are_required() {
    let missing = Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("no-such-peer.js"));
    assert!(find_prerequisite(false, missing.clone(), "KEEL_X", &SERVER_EVERYTHING).is_err());
    let required = std::panic::catch_unwind(|| find_prerequisite(true, missing, "KEEL_X", &SERVER_EVERYTHING));
    assert!(required.is_err(), "a missing peer passed although peers are required");
    let present = Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"));
    assert_eq!(find_prerequisite(true, present.clone(), "KEEL_X", &SERVER_EVERYTHING).ok(), present);
}

pub(super) fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `target/<profile>/examples/conformance_server`, next to this test binary's `deps` directory.
fn example_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.join("examples").join(format!("conformance_server{}", std::env::consts::EXE_SUFFIX)))
}

fn node_available() -> bool {
    let ok = std::process::Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        keel_tests::missing_peer(&NODE, "`node --version` did not run");
    }
    ok
}

pub(super) async fn run(executor: &Executor, name: &str, args: Value) -> ToolResult {
    executor.call(ToolCall::new(format!("c-{name}"), name, args)).await
}

fn same_forwarder(registry: &Registry, remote: &RemoteTools, name: &str) -> bool {
    let Some(def) = registry.get(name) else { return false };
    let Handler::Dynamic(held) = def.handler() else { return false };
    let Some(forwarder) = remote.forwarder(name) else { return false };
    std::ptr::addr_eq(Arc::as_ptr(held), Arc::as_ptr(forwarder))
}

fn forwarder<'a>(remote: &'a RemoteTools, name: &str) -> &'a Forwarder {
    remote.forwarder(name).unwrap_or_else(|| panic!("no forwarder {name}"))
}

// ---- Our own server over Streamable HTTP ----

#[tokio::test(flavor = "multi_thread")]
async fn own_server_over_http() {
    bounded(async {
        let inventory = Registry::from_inventory().expect("registry");
        let served = Executor::new(inventory.view().names(REMOTE_TOOLS.iter().copied()).build().unwrap()).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let shutdown = tokio_util::sync::CancellationToken::new();
        let server = McpServer::new(served).unwrap();
        let serving = {
            let shutdown = shutdown.clone();
            tokio::spawn(async move { server.serve_http(listener, "/mcp", shutdown).await })
        };

        let own = RemoteServer::connect_http("own", &url).await.expect("connect");
        let remote = own.import_unpinned().await.expect("import");
        let names: Vec<&str> = remote.names().collect();
        assert_eq!(
            names,
            ["own.fw_add", "own.fw_delete", "own.fw_echo", "own.fw_image", "own.fw_internal", "own.fw_lookup"]
        );
        // Schemas come from the server's tools/list.
        let listed = own.list_tools().await.unwrap();
        let fw_add = listed.iter().find(|t| t.name == "fw_add").unwrap();
        let def = remote.definitions().iter().find(|d| d.name() == "own.fw_add").unwrap();
        assert_eq!(def.output_schema(), Some(&Value::Object((*fw_add.output_schema.clone().unwrap()).clone())));
        assert_eq!(def.version(), env!("CARGO_PKG_VERSION"), "the remote server's version");
        assert_eq!(def.effect(), Effect::Read);
        let delete = remote.definitions().iter().find(|d| d.name() == "own.fw_delete").unwrap();
        assert_eq!(delete.effect(), Effect::Destructive, "from destructiveHint");

        // The local `fw_echo` (served above) and the remote one coexist: namespaced, not overwritten.
        let registry = Registry::builder().tools(remote.definitions().iter().map(clone_def)).build().unwrap();
        assert!(matches!(registry.get("fw_echo").unwrap().origin(), Origin::Compiled { .. }));
        assert!(matches!(registry.get("own.fw_echo").unwrap().origin(), Origin::Dynamic { .. }));

        // One forwarder per tool, and it is the one the registry holds.
        for name in remote.names() {
            assert!(same_forwarder(&registry, &remote, name), "{name}: the registry holds another forwarder");
        }
        let ptrs: std::collections::HashSet<*const Forwarder> = remote.forwarders().values().map(Arc::as_ptr).collect();
        assert_eq!(ptrs.len(), remote.forwarders().len());

        let executor = Executor::new(registry.view().tag("mcp:own").build().unwrap()).unwrap();
        let local = Executor::new(registry.view().names(["fw_echo"]).build().unwrap()).unwrap();
        assert_eq!(run(&local, "fw_echo", json!({"message": "x"})).await.data(), Some(&json!("remote: x")));

        // ok
        let r = run(&executor, "own.fw_add", json!({"a": 1, "b": 2})).await;
        assert_eq!(r.data(), Some(&json!({"sum": 3})), "{r:?}");
        let add = forwarder(&remote, "own.fw_add");
        assert_eq!((add.calls(), add.failures(), add.origin()), (1, 0, "fw_add"));
        let r = run(&executor, "own.fw_echo", json!({"message": "hi"})).await;
        assert_eq!(r.data(), Some(&json!([{"type": "text", "text": "\"remote: hi\""}])), "content, as blocks");

        // Invalid arguments never leave the process.
        let r = run(&executor, "own.fw_add", json!({"a": "1", "b": 2})).await;
        assert_eq!(r.code(), Some("invalid_arguments"));
        assert!(!r.executed);
        assert_eq!(add.calls(), 1, "not forwarded");

        // Business error: the remote's code and details.
        let r = run(&executor, "own.fw_lookup", json!({"id": "r7"})).await;
        let e = r.error().unwrap();
        assert_eq!((e.code.as_str(), e.details.clone()), ("not_found", Some(json!({"id": "r7"}))));
        assert_eq!(forwarder(&remote, "own.fw_lookup").failures(), 1);

        // Local policy first: the destructive remote tool needs a local approval before anything is sent; with it,
        // the remote's own policy still applies.
        let r = run(&executor, "own.fw_delete", json!({"id": "a"})).await;
        assert_eq!(r.code(), Some("approval_required"));
        assert_eq!(forwarder(&remote, "own.fw_delete").calls(), 0);
        let options = CallOptions::new().approve(Approval::new("own.fw_delete", &json!({"id": "a"})));
        let r = executor.call_with(ToolCall::new("c", "own.fw_delete", json!({"id": "a"})), &options).await;
        assert_eq!(r.code(), Some("remote_approval_required"), "{r:?}");
        assert_eq!(forwarder(&remote, "own.fw_delete").calls(), 1);

        // Content passes through.
        let r = run(&executor, "own.fw_image", json!({})).await;
        assert_eq!(r.data().unwrap()[1]["type"], "image");
        assert_eq!(r.data().unwrap()[1]["data"], "/wAA");

        // The remote's internal error stays generic.
        let r = run(&executor, "own.fw_internal", json!({})).await;
        assert_eq!(r.code(), Some("remote_tool_internal_error"));
        let text = serde_json::to_string(&r).unwrap();
        assert!(!text.contains("swordfish") && !text.contains("/var/lib"), "{text}");

        // Served again over MCP, the imported content tool still answers with blocks.
        let again = McpServer::new(executor.clone()).unwrap();
        let (server_io, client_io) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            if let Ok(s) = again.serve(server_io).await {
                let _ = s.waiting().await;
            }
        });
        let client = ().serve(client_io).await.expect("client");
        let r = client
            .peer()
            .call_tool(CallToolRequestParams::new("own.fw_image").with_arguments(Default::default()))
            .await
            .unwrap();
        assert_eq!(r.content.len(), 2);
        assert!(r.content[1].as_image().is_some());
        let _ = client.cancel().await;

        own.close().await;
        let r = run(&executor, "own.fw_add", json!({"a": 1, "b": 2})).await;
        assert_eq!(r.code(), Some("tool_internal_error"), "a closed connection is an internal error");
        shutdown.cancel();
        let _ = serving.await;
    })
    .await;
}

/// Another definition with the same contract and the same forwarder (definitions are not `Clone`).
pub(super) fn clone_def(
    d: &keel_tools_core::definition::ToolDefinition,
) -> keel_tools_core::definition::ToolDefinition {
    d.renamed(d.name().to_owned()).expect("valid name")
}

// ---- A misbehaving server, in process ----

/// Lists the given tools and answers every call with `answer`.
#[derive(Clone)]
struct Scripted {
    tools: Vec<Tool>,
    answer: CallToolResult,
}

impl ServerHandler for Scripted {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.clone()))
    }

    async fn call_tool(
        &self,
        _: CallToolRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(CallToolResponse::Complete(self.answer.clone()))
    }
}

fn scripted_tool(name: &'static str, output: Option<Value>) -> Tool {
    let input = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
    let Value::Object(input) = input else { unreachable!() };
    let mut tool = Tool::new(Cow::Borrowed(name), "scripted", Arc::new(input));
    if let Some(Value::Object(o)) = output {
        tool.output_schema = Some(Arc::new(o));
    }
    tool
}

async fn connect_scripted(namespace: &str, server: Scripted) -> RemoteServer {
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        if let Ok(s) = server.serve(server_io).await {
            let _ = s.waiting().await;
        }
    });
    RemoteServer::connect(namespace, client_io).await.expect("connect")
}

#[tokio::test(flavor = "multi_thread")]
async fn remote_output_is_validated_against_its_output_schema() {
    bounded(async {
        let server = Scripted {
            tools: vec![scripted_tool(
                "countThings",
                Some(json!({"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]})),
            )],
            answer: CallToolResult::structured(json!({"count": "many"})),
        };
        let liar = connect_scripted("liar", server).await;
        // No annotations: `destructive` by MCP's defaults, unless the importer says otherwise.
        let cautious = liar.import_unpinned().await.expect("import");
        assert_eq!(cautious.definitions()[0].effect(), Effect::Destructive);
        let remote = liar.importer().effect("countThings", Effect::Read).import().await.expect("import");
        assert_eq!(remote.names().collect::<Vec<_>>(), ["liar.count_things"]);
        assert_eq!(forwarder(&remote, "liar.count_things").origin(), "countThings");
        let registry = Registry::builder().without_inventory().tools(remote.definitions().iter().map(clone_def));
        let executor = Executor::new(registry.build().unwrap().all().clone()).unwrap();
        let r = run(&executor, "liar.count_things", json!({"n": 1})).await;
        assert_eq!(r.code(), Some("invalid_tool_output"), "{r:?}");
        assert!(r.executed);
        assert_eq!(forwarder(&remote, "liar.count_things").calls(), 1);
    })
    .await;
}

/// A remote tool whose schema refers outside itself (to a loopback server that would answer with a valid schema and
/// counts every connection) is imported as listed but refused by the registry, and its reference is never fetched.
#[tokio::test(flavor = "multi_thread")]
async fn a_remote_schema_reference_is_never_fetched() {
    bounded(async {
        let host = keel_tests::schema_host::SchemaHost::start();
        let object = |a: Value| json!({"type": "object", "properties": {"a": a}});
        let mut refers_in = scripted_tool("refersIn", None);
        let Value::Object(input) = object(json!({"$ref": host.url("in.json")})) else { unreachable!() };
        refers_in.input_schema = Arc::new(input);
        let refers_out = scripted_tool("refersOut", Some(object(json!({"$ref": host.url("out.json")}))));
        let server = Scripted {
            tools: vec![refers_in, refers_out, scripted_tool("plain", None)],
            answer: CallToolResult::success(vec![]),
        };
        let refs = connect_scripted("refs", server).await;
        let remote = refs.import_unpinned().await.expect("import");
        // The registry compiles every schema: it refuses the two tools, each for its schema, and keeps none of them.
        let err = Registry::builder()
            .without_inventory()
            .tools(remote.definitions().iter().map(clone_def))
            .build()
            .expect_err("schemas that refer outside themselves");
        let mut refused: Vec<_> = err
            .problems()
            .iter()
            .map(|p| match p {
                RegistryProblem::Schema { name, .. } => name.as_str(),
                other => panic!("not a schema problem: {other:?}"),
            })
            .collect();
        refused.sort_unstable();
        assert_eq!(refused, ["refs.refers_in", "refs.refers_out"], "{err:?}");
        let plain = remote.definitions().iter().filter(|d| d.name() == "refs.plain").map(clone_def);
        assert!(Registry::builder().without_inventory().tools(plain).build().is_ok());
        refs.close().await;
        assert_eq!(host.connections(), 0, "a remote schema reference was fetched");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn colliding_and_unmappable_names_are_reported() {
    bounded(async {
        let server = Scripted {
            tools: vec![
                scripted_tool("get-thing", None),
                scripted_tool("get_thing", None),
                scripted_tool("getThing", None),
                scripted_tool("3d-model", None),
                scripted_tool("fine", None),
            ],
            answer: CallToolResult::success(vec![]),
        };
        let srv = connect_scripted("srv", server).await;
        let err = srv.import_unpinned().await.expect_err("collisions are errors");
        assert_eq!(err.problems().len(), 2, "{err}");
        assert!(err.problems().contains(&ImportProblem::Collision {
            name: "srv.get_thing".to_owned(),
            origins: vec!["get-thing".to_owned(), "getThing".to_owned(), "get_thing".to_owned()],
        }));
        assert!(err.problems().iter().any(|p| matches!(p, ImportProblem::Unmappable(NameMappingError::StartsWithDigit { origin, .. }) if origin == "3d-model")));
        let text = err.to_string();
        assert!(text.contains("get-thing") && text.contains("3d-model"), "{text}");

        let e = srv.importer().effect("nope", Effect::Read).import().await.expect_err("unknown override");
        assert!(e.problems().contains(&ImportProblem::UnknownOverride("nope".to_owned())));
        assert!(RemoteServer::connect("Bad.Name", tokio::io::duplex(64).0).await.is_err(), "invalid namespace");
    })
    .await;
}

// ---- The example binary over stdio ----

#[tokio::test(flavor = "multi_thread")]
async fn example_server_over_stdio() {
    let Some(bin) = prerequisite("KEEL_CONFORMANCE_SERVER", example_binary(), &CONFORMANCE_SERVER) else {
        return;
    };
    bounded(async {
        let mut cmd = tokio::process::Command::new(&bin);
        cmd.env("RUST_LOG", "off");
        let conformance = RemoteServer::connect_child("conformance", cmd).await.expect("connect");
        // keel's server answers `server/discover`: the forwarder speaks the stateless era to it.
        assert_eq!(conformance.protocol_version(), Some(keel_tools_mcp::rmcp::model::ProtocolVersion::V_2026_07_28));
        let remote = conformance.import_unpinned().await.expect("import");
        for name in
            ["conformance.add_numbers", "conformance.test_image_content", "conformance.json_schema_2020_12_tool"]
        {
            assert!(remote.forwarder(name).is_some(), "{name}");
        }
        // The local `add_numbers` and the remote one coexist.
        let registry = Registry::builder().tools(remote.definitions().iter().map(clone_def)).build().unwrap();
        let executor = Executor::new(
            registry
                .view()
                .names([
                    "add_numbers",
                    "conformance.add_numbers",
                    "conformance.test_image_content",
                    "conformance.lookup_note",
                    "conformance.test_sampling",
                ])
                .build()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(run(&executor, "add_numbers", json!({"a": 5, "b": 3})).await.data(), Some(&json!(2)));
        assert_eq!(
            run(&executor, "conformance.add_numbers", json!({"a": 5, "b": 3})).await.data(),
            Some(&json!({"sum": 8}))
        );
        assert!(same_forwarder(&registry, &remote, "conformance.add_numbers"));

        let r = run(&executor, "conformance.add_numbers", json!({"a": 5})).await;
        assert_eq!(r.code(), Some("invalid_arguments"));
        assert_eq!(forwarder(&remote, "conformance.add_numbers").calls(), 1, "rejected locally");

        let r = run(&executor, "conformance.test_image_content", json!({})).await;
        assert_eq!(r.data().unwrap()[0]["mimeType"], "image/png", "{r:?}");
        let r = run(&executor, "conformance.lookup_note", json!({"id": "n2"})).await;
        assert_eq!(r.code(), Some("not_found"));
        // This client declares no sampling capability; the remote tool says so.
        let r = run(&executor, "conformance.test_sampling", json!({"prompt": "hi"})).await;
        assert_eq!(r.code(), Some("client_capability_missing"), "{r:?}");
        conformance.close().await;
    })
    .await;
}

// ---- Both eras, against keel's own server and a server written with the Python SDK ----

/// Connects to `cmd` in `era` and checks the revision agreed.
async fn connect_era(namespace: &str, cmd: tokio::process::Command, era: Era, expected: &str) -> RemoteServer {
    let transport = keel_tools_mcp::rmcp::transport::TokioChildProcess::new(cmd).expect("spawn");
    let remote = RemoteServer::connect_with(namespace, transport, era).await.expect("connect");
    assert_eq!(remote.protocol_version().map(|v| v.as_str().to_owned()).as_deref(), Some(expected), "{era:?}");
    remote
}

#[tokio::test(flavor = "multi_thread")]
async fn both_eras_against_keels_own_server() {
    let Some(bin) = prerequisite("KEEL_CONFORMANCE_SERVER", example_binary(), &CONFORMANCE_SERVER) else {
        return;
    };
    bounded(async {
        for (era, expected) in [(Era::Session, "2025-11-25"), (Era::Stateless, "2026-07-28"), (Era::Auto, "2026-07-28")]
        {
            let mut cmd = tokio::process::Command::new(&bin);
            cmd.env("RUST_LOG", "off");
            let own = connect_era("own", cmd, era, expected).await;
            let remote = own.import_unpinned().await.expect("import");
            let registry = Registry::builder().tools(remote.definitions().iter().map(clone_def)).build().unwrap();
            let executor = Executor::new(registry.view().names(["own.add_numbers"]).build().unwrap()).unwrap();
            let r = run(&executor, "own.add_numbers", json!({"a": 2, "b": 40})).await;
            assert_eq!(r.data(), Some(&json!({"sum": 42})), "{era:?}: {r:?}");
            own.close().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn both_eras_against_a_python_sdk_server() {
    let default = workspace_root().join("target/ci-venv/bin/python");
    let Some(python) = prerequisite("KEEL_PYTHON_MCP", Some(default), &PYTHON_MCP) else {
        return;
    };
    let script = workspace_root().join("tests/mcp/python_server.py");
    bounded(async {
        for (era, expected) in [(Era::Session, "2025-11-25"), (Era::Auto, "2026-07-28")] {
            let mut cmd = tokio::process::Command::new(&python);
            cmd.arg(&script).stderr(std::process::Stdio::null());
            let py = connect_era("py", cmd, era, expected).await;
            let remote = py.import_unpinned().await.expect("import");
            let registry = Registry::builder().tools(remote.definitions().iter().map(clone_def)).build().unwrap();
            let executor = Executor::new(registry.view().names(["py.add", "py.shout"]).build().unwrap()).unwrap();
            let r = run(&executor, "py.add", json!({"a": 2, "b": 40})).await;
            assert_eq!(r.data(), Some(&json!({"result": 42})), "{era:?}: {r:?}");
            let r = run(&executor, "py.shout", json!({"text": "hi"})).await;
            assert!(r.data().is_some_and(|d| d.to_string().contains("HI")), "{era:?}: {r:?}");
            // Validated locally before anything is sent.
            let r = run(&executor, "py.add", json!({"a": "two"})).await;
            assert_eq!(r.code(), Some("invalid_arguments"), "{era:?}");
            assert_eq!(forwarder(&remote, "py.add").calls(), 1, "{era:?}: the invalid call was not forwarded");
            py.close().await;
        }
    })
    .await;
}

// ---- The reference server-everything over stdio ----

#[tokio::test(flavor = "multi_thread")]
async fn server_everything_over_stdio() {
    let default =
        workspace_root().join("target/ci-node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let Some(script) = prerequisite("KEEL_SERVER_EVERYTHING", Some(default), &SERVER_EVERYTHING) else {
        return;
    };
    if !node_available() {
        return;
    }
    bounded(async {
        let mut cmd = tokio::process::Command::new("node");
        cmd.arg(&script).arg("stdio");
        let everything = RemoteServer::connect_child("everything", cmd).await.expect("connect");
        // The pinned server-everything knows no `server/discover`: the forwarder fell back to `initialize`.
        assert_eq!(everything.protocol_version(), Some(keel_tools_mcp::rmcp::model::ProtocolVersion::V_2025_11_25));
        let listed = everything.list_tools().await.expect("tools/list");
        let remote = everything.import_unpinned().await.expect("import");
        assert_eq!(remote.names().count(), listed.len(), "every tool imported");
        for (name, origin) in [
            ("everything.echo", "echo"),
            ("everything.get_sum", "get-sum"),
            ("everything.get_tiny_image", "get-tiny-image"),
            ("everything.get_structured_content", "get-structured-content"),
        ] {
            assert_eq!(forwarder(&remote, name).origin(), origin);
        }

        // A local `echo` and the remote one coexist: namespaced, not overwritten.
        let registry = Registry::builder().tools(remote.definitions().iter().map(clone_def)).build().unwrap();
        assert!(matches!(registry.get("echo").unwrap().origin(), Origin::Compiled { .. }));
        assert!(same_forwarder(&registry, &remote, "everything.echo"));
        let read_only = registry.view().tag("mcp:everything").effects([Effect::Read]).build().unwrap();
        let executor = Executor::new(read_only.clone()).expect("every schema compiles");
        let local = Executor::new(registry.view().names(["echo"]).build().unwrap()).unwrap();
        assert_eq!(run(&local, "echo", json!({"message": "hi"})).await.data(), Some(&json!("local: hi")));

        let r = run(&executor, "everything.echo", json!({"message": "hi"})).await;
        assert_eq!(r.data(), Some(&json!([{"type": "text", "text": "Echo: hi"}])), "{r:?}");

        let r = run(&executor, "everything.get_sum", json!({"a": 2, "b": 3})).await;
        let text = r.data().and_then(|d| d[0]["text"].as_str()).unwrap_or_default().to_owned();
        assert!(text.contains('5'), "{r:?}");

        // Invalid arguments are caught locally, against the server's own schema.
        let r = run(&executor, "everything.get_sum", json!({"a": "two", "b": 3})).await;
        assert_eq!(r.code(), Some("invalid_arguments"));
        assert_eq!(r.error().unwrap().details.as_ref().unwrap()["violations"][0]["pointer"], "/a");
        assert_eq!(forwarder(&remote, "everything.get_sum").calls(), 1, "not forwarded");

        let r = run(&executor, "everything.get_tiny_image", json!({})).await;
        let blocks = r.data().cloned().unwrap_or_default();
        let image = blocks.as_array().and_then(|b| b.iter().find(|c| c["type"] == "image")).cloned();
        assert!(image.is_some_and(|i| i["mimeType"] == "image/png"), "{r:?}");

        // A tool with an outputSchema: structured data, validated against it.
        let r = run(&executor, "everything.get_structured_content", json!({"location": "Chicago"})).await;
        assert!(r.is_ok(), "{r:?}");
        assert!(r.data().is_some_and(Value::is_object), "{r:?}");
        let def = registry.get("everything.get_structured_content").unwrap();
        assert!(def.output_schema().is_some_and(|s| s["type"] == "object"));

        // Not read-only per its annotations: not in the read-only view, so not callable there.
        let r = run(&executor, "everything.toggle_simulated_logging", json!({})).await;
        assert_eq!(r.code(), Some("unknown_tool"));
        assert_eq!(registry.get("everything.toggle_simulated_logging").unwrap().effect(), Effect::Write);
        everything.close().await;
    })
    .await;
}

/// A stdio server slow to start (here, the first time only: as `npx -y` is while it downloads) answers
/// `server/discover` after the 10-second probe gave up and sent `initialize`; the connection starts it again and
/// connects, rather than failing on the late answer.
#[tokio::test(flavor = "multi_thread")]
async fn a_stdio_server_slow_to_start_the_first_time_is_connected() {
    let default = workspace_root().join("target/ci-venv/bin/python");
    let Some(python) = prerequisite("KEEL_PYTHON_MCP", Some(default), &PYTHON_MCP) else {
        return;
    };
    let marker = std::env::temp_dir().join(format!("keel-slow-start-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let script = workspace_root().join("tests/mcp/python_server.py");
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(r#"if [ ! -e "$1" ]; then touch "$1"; sleep 11; fi; exec "$2" "$3""#)
        .arg("sh")
        .args([marker.as_os_str(), python.as_os_str(), script.as_os_str()])
        .stderr(std::process::Stdio::null());
    bounded(async {
        let started = std::time::Instant::now();
        let py = RemoteServer::connect_child("py", cmd).await.expect("connects after starting the server again");
        assert!(started.elapsed() >= Duration::from_secs(10), "the first start was the slow one");
        let tools = py.list_tools().await.expect("tools/list");
        assert!(tools.iter().any(|t| t.name == "add"), "{tools:?}");
        py.close().await;
    })
    .await;
    let _ = std::fs::remove_file(&marker);
}
