//! `keel_tools_mcp::McpServer` over the wire, driven by rmcp's client: the listing is the view, calls go through the
//! executor in its fixed order, and every outcome has its MCP form. In process (a duplex pipe) and over
//! Streamable HTTP on a loopback port; needs nothing installed.

#![allow(deprecated)] // MCP logging types (SEP-2577 deprecates them from protocol 2026-07-28 on).

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_tools_core::content::{Content, ContentBlock, EmbeddedResource};
use keel_tools_core::context::LogLevel;
use keel_tools_core::executor::CallOptions;
use keel_tools_core::{Approval, CallContext, Executor, Provider, Registry, ToolError, tool};
use keel_tools_mcp::McpServer;
use keel_tools_mcp::rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, Implementation, InitializeRequestParams, LoggingLevel,
    LoggingMessageNotificationParam, ProgressNotificationParam, SetLevelRequestParams,
};
use keel_tools_mcp::rmcp::service::{NotificationContext, RunningService, ServiceError};
use keel_tools_mcp::rmcp::{ClientHandler, RoleClient, ServiceExt};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

static DELETES: AtomicUsize = AtomicUsize::new(0);

const TOOLS: &[&str] =
    &["srv_add", "srv_echo", "srv_lookup", "srv_delete", "srv_fail", "srv_panic", "srv_chart", "srv_talk", "srv_count"];

#[derive(Serialize, JsonSchema)]
struct Sum {
    sum: i64,
}

/// Adds two integers.
#[tool(effect = "read", version = "1.2")]
fn srv_add(a: i64, b: i64) -> Sum {
    Sum { sum: a + b }
}

/// Echoes a string.
#[tool(effect = "read", version = "1.0")]
fn srv_echo(message: String) -> String {
    message
}

/// Looks up a record; only `r1` exists.
#[tool(effect = "read", version = "1.0")]
fn srv_lookup(id: String) -> Result<Sum, ToolError> {
    if id == "r1" { Ok(Sum { sum: 1 }) } else { Err(keel_tools_core::tool_error!("not_found", "no record {id:?}")) }
}

/// Deletes a record (destructive).
#[tool(effect = "destructive", version = "1.0")]
fn srv_delete(id: String, count: u32) -> Sum {
    if id == "x" {
        DELETES.fetch_add(1, Ordering::SeqCst);
    }
    Sum { sum: i64::from(count) + id.len() as i64 }
}

/// Fails internally.
#[tool(effect = "read", version = "1.0")]
fn srv_fail() -> Result<Sum, ToolError> {
    Err(ToolError::internal(std::io::Error::other("secret-token-42 in /srv/keel/config.toml")))
}

/// Panics.
#[tool(effect = "read", version = "1.0")]
fn srv_panic() -> Sum {
    panic!("panic text with /home/keel/secret")
}

/// Returns mixed MCP content.
#[tool(effect = "read", version = "1.0")]
fn srv_chart() -> Content {
    Content::text("chart:")
        .with(ContentBlock::image_bytes(&[1, 2, 3], "image/png"))
        .with(ContentBlock::audio("AAAA", "audio/wav"))
        .with(ContentBlock::resource(EmbeddedResource::text("keel://r", "text/plain", "body")))
        .with(ContentBlock::resource_link("keel://l", "link"))
}

/// Logs at every level it is given, then returns.
#[tool(effect = "read", version = "1.0")]
async fn srv_talk(ctx: CallContext) -> String {
    ctx.log(LogLevel::Debug, "debug message");
    ctx.log(LogLevel::Info, json!({"step": "info"}));
    ctx.log(LogLevel::Error, "error message");
    "talked".to_owned()
}

/// Counts to three with progress (and one repeated value, which must not be sent).
#[tool(effect = "read", version = "1.0")]
async fn srv_count(ctx: CallContext) -> String {
    for (i, p) in [1.0, 2.0, 2.0, 3.0].into_iter().enumerate() {
        ctx.progress(p, Some(3.0), Some(&format!("step {i}")));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    "counted".to_owned()
}

/// Waits up to 5 s for `n` log notifications (they are handled on the client's own tasks).
async fn wait_for_logs(recorder: &Recorder, n: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while recorder.logs.lock().unwrap().len() < n && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Records what the server sends besides responses.
#[derive(Clone, Default)]
struct Recorder {
    logs: Arc<Mutex<Vec<LoggingMessageNotificationParam>>>,
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Recorder {
    fn get_info(&self) -> InitializeRequestParams {
        InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("keel-test", "0.1"))
    }

    async fn on_logging_message(&self, params: LoggingMessageNotificationParam, _: NotificationContext<RoleClient>) {
        self.logs.lock().unwrap().push(params);
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _: NotificationContext<RoleClient>) {
        self.progress.lock().unwrap().push(params);
    }
}

fn executor() -> Executor {
    let registry = Registry::from_inventory().expect("registry");
    Executor::new(registry.view().names(TOOLS.iter().copied()).build().expect("view")).expect("executor")
}

/// Runs `f` with a client connected in process to a server over [`executor`], within 60 s.
async fn with_client<F, Fut>(server: McpServer, f: F)
where
    F: FnOnce(RunningService<RoleClient, Recorder>, Recorder) -> Fut,
    Fut: Future<Output = ()>,
{
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    let running = tokio::spawn(async move {
        let service = server.serve(server_io).await.expect("server handshake");
        let _ = service.waiting().await;
    });
    let recorder = Recorder::default();
    let client = recorder.clone().serve(client_io).await.expect("client handshake");
    tokio::time::timeout(Duration::from_secs(60), f(client, recorder)).await.expect("test timed out");
    running.abort();
}

async fn call(client: &RunningService<RoleClient, Recorder>, name: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else { panic!("arguments must be an object") };
    client.peer().call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(args)).await.expect("call")
}

/// keel's error object of a failed result: in `structuredContent` or, when the tool has an `outputSchema`, the
/// JSON text.
fn error_of(r: &CallToolResult) -> Value {
    if let Some(e) = r.structured_content.as_ref().and_then(|s| s.get("error")) {
        return e.clone();
    }
    let text = r.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).unwrap_or_default();
    serde_json::from_str::<Value>(&text).expect("error text is JSON")["error"].clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_list_is_the_views_mcp_rendering() {
    let executor = executor();
    let expected: Vec<Value> = executor.view().codec(Provider::Mcp).tools().to_vec();
    let server = McpServer::new(executor).expect("server");
    with_client(server, |client, _| async move {
        let tools = client.peer().list_all_tools().await.expect("tools/list");
        let listed: Vec<Value> = tools.iter().map(|t| serde_json::to_value(t).unwrap()).collect();
        // Exactly the codec's entries, every field, `Content` tools included.
        assert_eq!(listed, expected);
        for got in &listed {
            let a = &got["annotations"];
            for hint in ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] {
                assert!(a[hint].is_boolean(), "{} lacks {hint}", got["name"]);
            }
        }
        // A `Content` tool's result is served as blocks, so its entry has no outputSchema.
        let chart = listed.iter().find(|t| t["name"] == "srv_chart").unwrap();
        assert!(chart.get("outputSchema").is_none());
        let delete = listed.iter().find(|t| t["name"] == "srv_delete").unwrap();
        assert_eq!(delete["annotations"]["destructiveHint"], true);
        assert_eq!(delete["annotations"]["readOnlyHint"], false);
        let add = listed.iter().find(|t| t["name"] == "srv_add").unwrap();
        assert_eq!(add["outputSchema"]["type"], "object");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_outcome_has_its_mcp_form() {
    let server = McpServer::new(executor()).expect("server");
    with_client(server, |client, _| async move {
        // Success: structuredContent and the same JSON as text.
        let r = call(&client, "srv_add", json!({"a": 2, "b": 40})).await;
        assert_eq!(r.is_error, Some(false));
        assert_eq!(r.structured_content, Some(json!({"sum": 42})));
        assert_eq!(r.content[0].as_text().unwrap().text, r#"{"sum":42}"#);

        // A non-object result: text only.
        let r = call(&client, "srv_echo", json!({"message": "hi"})).await;
        assert_eq!(r.structured_content, None);
        assert_eq!(r.content[0].as_text().unwrap().text, r#""hi""#);

        // Unknown tool: JSON-RPC -32602 with the executor's message.
        let err = client
            .peer()
            .call_tool(CallToolRequestParams::new("srv_nope").with_arguments(Default::default()))
            .await
            .expect_err("unknown tool is a protocol error");
        let ServiceError::McpError(e) = err else { panic!("expected a JSON-RPC error, got {err:?}") };
        assert_eq!(e.code.0, -32602);
        assert!(e.message.contains("no tool named \"srv_nope\""), "{}", e.message);

        // Invalid arguments: isError, with the pointer; the handler never runs.
        let r = call(&client, "srv_add", json!({"a": "2", "b": 40})).await;
        assert_eq!(r.is_error, Some(true));
        let e = error_of(&r);
        assert_eq!(e["code"], "invalid_arguments");
        assert_eq!(e["details"]["violations"][0]["pointer"], "/a");
        // srv_add declares an outputSchema, so the error travels as text only.
        assert_eq!(r.structured_content, None);

        // The fixed order holds over the wire: invalid arguments are reported before the approval check.
        let r = call(&client, "srv_delete", json!({"id": "x", "count": -1})).await;
        assert_eq!(error_of(&r)["code"], "invalid_arguments");
        let r = call(&client, "srv_delete", json!({"id": "x", "count": 1})).await;
        let e = error_of(&r);
        assert_eq!(e["code"], "approval_required");
        assert_eq!(e["details"]["effect"], "destructive");
        assert_eq!(DELETES.load(Ordering::SeqCst), 0, "nothing ran without approval");

        // Business error: the tool's own code.
        let r = call(&client, "srv_lookup", json!({"id": "r9"})).await;
        assert_eq!(r.is_error, Some(true));
        assert_eq!(error_of(&r)["code"], "not_found");

        // Internal errors and panics: a generic message, no internals.
        for tool in ["srv_fail", "srv_panic"] {
            let r = call(&client, tool, json!({})).await;
            let wire = serde_json::to_string(&r).unwrap();
            assert_eq!(error_of(&r)["code"], "tool_internal_error", "{tool}");
            for secret in ["secret", "/srv/keel", "/home/keel", "config.toml", "panic text"] {
                assert!(!wire.contains(secret), "{tool} leaked {secret:?}: {wire}");
            }
        }

        // Content: the blocks, in order, no structuredContent.
        let r = call(&client, "srv_chart", json!({})).await;
        assert_eq!(r.is_error, Some(false));
        assert_eq!(r.structured_content, None);
        let kinds: Vec<Value> = r.content.iter().map(|c| serde_json::to_value(c).unwrap()["type"].clone()).collect();
        assert_eq!(
            kinds,
            vec![json!("text"), json!("image"), json!("audio"), json!("resource"), json!("resource_link")]
        );
        assert_eq!(r.content[1].as_image().unwrap().data, "AQID");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn approvals_come_from_the_host_not_the_client() {
    let server = McpServer::builder(executor())
        .call_options(|_request, _context| {
            // The host decides (here: one approval, bound to exact arguments); the client cannot approve.
            CallOptions::new().approve(Approval::new("srv_delete", &json!({"id": "keep", "count": 2})))
        })
        .build()
        .expect("server");
    with_client(server, |client, _| async move {
        let r = call(&client, "srv_delete", json!({"id": "keep", "count": 2})).await;
        assert_eq!(r.is_error, Some(false), "{r:?}");
        assert_eq!(r.structured_content, Some(json!({"sum": 6})));
        // Other arguments are not approved.
        let r = call(&client, "srv_delete", json!({"id": "keep", "count": 3})).await;
        assert_eq!(error_of(&r)["code"], "approval_required");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn logs_follow_set_level_and_progress_increases() {
    let server = McpServer::new(executor()).expect("server");
    with_client(server, |client, recorder| async move {
        // Default level: info.
        call(&client, "srv_talk", json!({})).await;
        // The client handles notifications on their own tasks: wait for them, and compare without order.
        wait_for_logs(&recorder, 2).await;
        let levels: Vec<LoggingLevel> = recorder.logs.lock().unwrap().iter().map(|l| l.level).collect();
        assert_eq!(levels.len(), 2, "{levels:?}");
        assert!(levels.contains(&LoggingLevel::Info) && levels.contains(&LoggingLevel::Error), "{levels:?}");
        {
            let logs = recorder.logs.lock().unwrap();
            let info = logs.iter().find(|l| l.level == LoggingLevel::Info).expect("an info log");
            assert_eq!(info.logger.as_deref(), Some("srv_talk"));
            assert_eq!(info.data, json!({"step": "info"}));
        }

        recorder.logs.lock().unwrap().clear();
        client.peer().set_level(SetLevelRequestParams::new(LoggingLevel::Debug)).await.expect("setLevel");
        call(&client, "srv_talk", json!({})).await;
        wait_for_logs(&recorder, 3).await;
        assert_eq!(recorder.logs.lock().unwrap().len(), 3);

        recorder.logs.lock().unwrap().clear();
        client.peer().set_level(SetLevelRequestParams::new(LoggingLevel::Critical)).await.expect("setLevel");
        call(&client, "srv_talk", json!({})).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(recorder.logs.lock().unwrap().is_empty());

        // With a token (rmcp's client puts its own on every request): strictly increasing, all delivered before
        // the result. (Without a token nothing is sent: tests/mcp/python_client.py checks that with a client that
        // only sends one on request.)
        let r = call(&client, "srv_count", json!({})).await;
        assert_eq!(r.is_error, Some(false));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while recorder.progress.lock().unwrap().len() < 3 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let progress = recorder.progress.lock().unwrap().clone();
        let mut values: Vec<f64> = progress.iter().map(|p| p.progress).collect();
        values.sort_by(f64::total_cmp);
        assert_eq!(values, vec![1.0, 2.0, 3.0]);
        assert!(progress.iter().all(|p| p.progress_token == progress[0].progress_token && p.total == Some(3.0)));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn streamable_http_on_loopback() {
    let server = McpServer::new(executor()).expect("server");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let serving = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move { server.serve_http(listener, "/mcp", shutdown).await })
    };
    let test = async {
        let url = format!("http://{addr}/mcp");
        let transport = keel_tools_mcp::rmcp::transport::StreamableHttpClientTransport::from_uri(url);
        let recorder = Recorder::default();
        let client = recorder.clone().serve(transport).await.expect("handshake");
        let tools = client.peer().list_all_tools().await.expect("tools/list");
        assert_eq!(tools.len(), TOOLS.len());
        let r = call(&client, "srv_add", json!({"a": 1, "b": 1})).await;
        assert_eq!(r.structured_content, Some(json!({"sum": 2})));
        // Notifications reach an HTTP client too.
        client.peer().set_level(SetLevelRequestParams::new(LoggingLevel::Debug)).await.expect("setLevel");
        call(&client, "srv_talk", json!({})).await;
        for _ in 0..50 {
            if recorder.logs.lock().unwrap().len() >= 3 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(recorder.logs.lock().unwrap().len(), 3);
        let _ = client.cancel().await;

        // Only the MCP path is served.
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut raw = tokio::net::TcpStream::connect(addr).await.expect("connect");
        raw.write_all(b"GET /other HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").await.unwrap();
        let mut response = String::new();
        raw.read_to_string(&mut response).await.unwrap();
        assert!(response.starts_with("HTTP/1.1 404"), "{response}");
    };
    tokio::time::timeout(Duration::from_secs(60), test).await.expect("test timed out");
    shutdown.cancel();
    let served = tokio::time::timeout(Duration::from_secs(10), serving).await.expect("server stops").expect("join");
    assert!(served.is_ok());
}

/// A client that speaks exactly one protocol revision.
#[derive(Clone)]
struct Versioned(keel_tools_mcp::rmcp::model::ProtocolVersion);

impl ClientHandler for Versioned {
    fn get_info(&self) -> InitializeRequestParams {
        InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("keel-test", "0.1"))
            .with_protocol_version(self.0.clone())
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_protocol_revision_of_the_sdk() {
    use keel_tools_mcp::rmcp::ClientLifecycleMode;
    use keel_tools_mcp::rmcp::model::ProtocolVersion;
    use keel_tools_mcp::rmcp::service::ClientServiceExt;

    let server = McpServer::new(executor()).expect("server");
    for version in ProtocolVersion::KNOWN_VERSIONS {
        let lifecycle = if version.has_initialize() {
            ClientLifecycleMode::Initialize
        } else {
            ClientLifecycleMode::Discover { preferred_versions: vec![version.clone()] }
        };
        let (server_io, client_io) = tokio::io::duplex(1 << 16);
        let session = server.clone();
        let running = tokio::spawn(async move {
            if let Ok(s) = session.serve(server_io).await {
                let _ = s.waiting().await;
            }
        });
        let test = async {
            let client = Versioned(version.clone()).serve_with_lifecycle(client_io, lifecycle).await.expect("connect");
            let negotiated = client.peer_info().map(|i| i.protocol_version.clone());
            assert_eq!(negotiated.as_ref(), Some(version), "negotiated revision");
            let tools = client.peer().list_all_tools().await.expect("tools/list");
            assert_eq!(tools.len(), TOOLS.len(), "{version}");
            let r = client
                .peer()
                .call_tool(
                    CallToolRequestParams::new("srv_add")
                        .with_arguments(json!({"a": 1, "b": 2}).as_object().cloned().unwrap()),
                )
                .await
                .expect("call");
            assert_eq!(r.structured_content, Some(json!({"sum": 3})), "{version}");
            let r = client
                .peer()
                .call_tool(
                    CallToolRequestParams::new("srv_lookup")
                        .with_arguments(json!({"id": "r9"}).as_object().cloned().unwrap()),
                )
                .await
                .expect("call");
            assert_eq!((r.is_error, error_of(&r)["code"].clone()), (Some(true), json!("not_found")), "{version}");
            let err = client
                .peer()
                .call_tool(CallToolRequestParams::new("srv_nope").with_arguments(Default::default()))
                .await
                .expect_err("unknown tool");
            assert!(matches!(err, ServiceError::McpError(ref e) if e.code.0 == -32602), "{version}: {err:?}");
            let _ = client.cancel().await;
        };
        tokio::time::timeout(Duration::from_secs(30), test).await.expect("test timed out");
        running.abort();
    }
}
