//! keel's tools inside a user's own rmcp server: `McpServerBuilder::handler` takes a plain rmcp `ServerHandler` for
//! everything but tools. Checks that prompts and resources reach the handler, that tools stay keel's (the
//! handler's own tool methods are never called), that the capabilities are merged, that `subscriptions/listen`
//! serves both parts, and the cache hints and logging rules of protocol 2026-07-28. In process; needs nothing
//! installed.

#![allow(deprecated)] // MCP logging types (SEP-2577 deprecates them from protocol 2026-07-28 on).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_tools_core::context::LogLevel;
use keel_tools_core::{CallContext, Executor, Registry, tool};
use keel_tools_mcp::McpServer;
use keel_tools_mcp::rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, ClientCapabilities, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, Implementation, InitializeRequestParams, ListPromptsResult, ListToolsResult,
    LoggingMessageNotificationParam, PaginatedRequestParams, Prompt, PromptMessage, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ResourceContents, Role, ServerCapabilities,
    ServerConfig, ServerNotification, SubscriptionFilter, Tool,
};
use keel_tools_mcp::rmcp::service::{
    NotificationContext, RequestContext, RunningService, SubscriptionContext, SubscriptionSink,
};
use keel_tools_mcp::rmcp::{ClientHandler, ErrorData, RoleClient, RoleServer, ServerHandler};
use serde_json::json;

/// Adds two integers.
#[tool(effect = "read", version = "1.0")]
fn cmp_add(a: i64, b: i64) -> i64 {
    a + b
}

/// Logs one message, then answers.
#[tool(effect = "read", version = "1.0")]
async fn cmp_log(ctx: CallContext) -> String {
    ctx.log(LogLevel::Warning, "cmp_log ran");
    "logged".to_owned()
}

/// A plain rmcp handler: one prompt, one resource, prompt-list subscriptions, and tool methods that must never run.
#[derive(Default)]
struct Rest {
    tool_calls: AtomicUsize,
    prompt_streams: Mutex<Vec<SubscriptionSink>>,
}

impl ServerHandler for Rest {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_tools()
            .build();
        ServerConfig::new(capabilities).with_instructions("the handler's instructions")
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(ListPromptsResult::with_all_items(vec![Prompt::new("greet", Some("Says hello"), None)]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name != "greet" {
            return Err(ErrorData::invalid_params("no such prompt", None));
        }
        Ok(GetPromptResult::new(vec![PromptMessage::new_text(Role::User, "hello")]).into())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        Ok(ReadResourceResult::new(vec![ResourceContents::text("the text", request.uri)]).into())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.tool_calls.fetch_add(1, Ordering::SeqCst);
        let schema = json!({"type": "object"}).as_object().cloned().unwrap();
        Ok(ListToolsResult::with_all_items(vec![Tool::new("impostor", "must not be listed", schema)]))
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.tool_calls.fetch_add(1, Ordering::SeqCst);
        Err(ErrorData::internal_error("the handler's call_tool ran", None))
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.prompts_list_changed = requested.prompts_list_changed;
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        self.prompt_streams.lock().unwrap().push(context.sink().clone());
        context.cancelled().await;
        Ok(())
    }
}

fn executor(names: &[&str]) -> Executor {
    let registry = Registry::from_inventory().expect("registry");
    Executor::new(registry.view().names(names.iter().copied()).build().expect("view")).expect("executor")
}

/// Records log notifications.
#[derive(Clone, Default)]
struct Client {
    logs: Arc<Mutex<Vec<LoggingMessageNotificationParam>>>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> InitializeRequestParams {
        InitializeRequestParams::new(ClientCapabilities::default(), Implementation::new("keel-test", "0.1"))
    }

    async fn on_logging_message(&self, params: LoggingMessageNotificationParam, _: NotificationContext<RoleClient>) {
        self.logs.lock().unwrap().push(params);
    }
}

/// Connects a recording client in process, on `version`.
async fn connect(server: &McpServer, version: ProtocolVersion) -> (RunningService<RoleClient, Client>, Client) {
    let client = Client::default();
    (keel_tests::mcp::connect(server, client.clone(), version).await, client)
}

use keel_tests::mcp::text_of;

fn call(name: &str, args: serde_json::Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned()).with_arguments(args.as_object().cloned().unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn the_handler_serves_everything_but_tools_in_both_eras() {
    let rest = Arc::new(Rest::default());
    let server = McpServer::builder(executor(&["cmp_add", "cmp_log"])).handler(rest.clone()).build().expect("server");
    for version in [ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28] {
        let test = async {
            let (client, _) = connect(&server, version.clone()).await;
            let info = client.peer_info().expect("server info").clone();
            let caps = &info.capabilities;
            assert_eq!(caps.tools.as_ref().and_then(|t| t.list_changed), Some(true), "{version}: keel's tools");
            assert!(caps.prompts.is_some() && caps.resources.is_some(), "{version}: the handler's capabilities");
            assert!(caps.logging.is_some(), "{version}: keel's logging");
            assert_eq!(info.instructions.as_deref(), Some("the handler's instructions"));

            let tools = client.peer().list_all_tools().await.expect("tools/list");
            let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
            assert_eq!(names, ["cmp_add", "cmp_log"], "{version}: keel's tools, in name order");
            let r = client.peer().call_tool(call("cmp_add", json!({"a": 2, "b": 3}))).await.expect("call");
            assert_eq!(text_of(&r), "5", "{version}");
            let err = client.peer().call_tool(call("impostor", json!({}))).await.expect_err("not keel's tool");
            assert!(format!("{err:?}").contains("-32602"), "{version}: {err:?}");

            let prompts = client.peer().list_all_prompts().await.expect("prompts/list");
            assert_eq!(prompts.len(), 1);
            let prompt = client.peer().get_prompt(GetPromptRequestParams::new("greet")).await.expect("prompts/get");
            assert_eq!(prompt.messages.len(), 1);
            let read =
                client.peer().read_resource(ReadResourceRequestParams::new("test://a")).await.expect("resources/read");
            assert_eq!(read.contents.len(), 1);
            let _ = client.cancel().await;
        };
        tokio::time::timeout(Duration::from_secs(30), test).await.expect("test timed out");
    }
    assert_eq!(rest.tool_calls.load(Ordering::SeqCst), 0, "the handler's tool methods never run");
}

#[tokio::test(flavor = "multi_thread")]
async fn one_listen_stream_carries_keels_and_the_handlers_notifications() {
    let rest = Arc::new(Rest::default());
    let server = McpServer::builder(executor(&["cmp_add"])).handler(rest.clone()).build().expect("server");
    let test = async {
        let (client, _) = connect(&server, ProtocolVersion::V_2026_07_28).await;
        let filter = SubscriptionFilter::builder().tools_list_changed().prompts_list_changed().build();
        let mut stream = client.peer().listen(filter).await.expect("subscriptions/listen");
        assert_eq!(stream.acknowledged().tools_list_changed, Some(true));
        assert_eq!(stream.acknowledged().prompts_list_changed, Some(true));

        // keel's part: the view changes.
        assert!(server.update(executor(&["cmp_add", "cmp_log"])).await.expect("update"));
        let first = tokio::time::timeout(Duration::from_secs(5), stream.next()).await.expect("in time");
        assert!(matches!(first, Ok(Some(ServerNotification::ToolListChangedNotification(_)))), "{first:?}");

        // The handler's part, on the same stream.
        for _ in 0..100 {
            if !rest.prompt_streams.lock().unwrap().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let sink = rest.prompt_streams.lock().unwrap().first().cloned().expect("the handler's listen ran");
        sink.notify_prompt_list_changed().await.expect("notify");
        let second = tokio::time::timeout(Duration::from_secs(5), stream.next()).await.expect("in time");
        assert!(matches!(second, Ok(Some(ServerNotification::PromptListChangedNotification(_)))), "{second:?}");
        let _ = client.cancel().await;
    };
    tokio::time::timeout(Duration::from_secs(30), test).await.expect("test timed out");
}

#[tokio::test(flavor = "multi_thread")]
async fn tools_list_cache_hints_follow_whether_the_view_changes() {
    let server = McpServer::new(executor(&["cmp_add"])).expect("server");
    let test = async {
        let (client, _) = connect(&server, ProtocolVersion::V_2026_07_28).await;
        let listed = client.peer().list_tools(None).await.expect("tools/list");
        assert_eq!(listed.ttl_ms, Some(keel_tools_mcp::server::STATIC_LIST_TTL.as_millis() as u64));
        assert_eq!(listed.cache_scope, Some(CacheScope::Public));
        server.update(executor(&["cmp_add", "cmp_log"])).await.expect("update");
        assert_eq!(server.list_ttl(), keel_tools_mcp::server::DYNAMIC_LIST_TTL);
        let _ = client.cancel().await;
        let (client, _) = connect(&server, ProtocolVersion::V_2026_07_28).await;
        let listed = client.peer().list_tools(None).await.expect("tools/list");
        assert_eq!(listed.tools.len(), 2);
        assert_eq!(listed.ttl_ms, Some(keel_tools_mcp::server::DYNAMIC_LIST_TTL.as_millis() as u64));
        let _ = client.cancel().await;
    };
    tokio::time::timeout(Duration::from_secs(30), test).await.expect("test timed out");

    let fixed = McpServer::builder(executor(&["cmp_add"])).list_ttl(Duration::from_secs(42)).build().expect("server");
    fixed.update(executor(&["cmp_log"])).await.expect("update");
    assert_eq!(fixed.list_ttl(), Duration::from_secs(42), "an explicit hint stays");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stateless_request_gets_logs_only_when_its_meta_asks() {
    let server = McpServer::new(executor(&["cmp_log"])).expect("server");
    let test = async {
        // A session (2025-11-25): the session's level (default info) lets the warning through.
        let (client, recorder) = connect(&server, ProtocolVersion::V_2025_11_25).await;
        client.peer().call_tool(call("cmp_log", json!({}))).await.expect("call");
        for _ in 0..100 {
            if !recorder.logs.lock().unwrap().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(recorder.logs.lock().unwrap().len(), 1, "a session gets the log");
        let _ = client.cancel().await;

        // Stateless (2026-07-28), no `logLevel` in `_meta`: nothing.
        let (client, recorder) = connect(&server, ProtocolVersion::V_2026_07_28).await;
        let r = client.peer().call_tool(call("cmp_log", json!({}))).await.expect("call");
        assert_eq!(text_of(&r), "\"logged\"");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(recorder.logs.lock().unwrap().is_empty(), "no logs without logLevel");
        let _ = client.cancel().await;
    };
    tokio::time::timeout(Duration::from_secs(30), test).await.expect("test timed out");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_change_right_after_the_acknowledgment_is_not_lost() {
    // The SDK acknowledges a stream before keel registers it; a change in between is sent on registration.
    let server = McpServer::new(executor(&["cmp_add"])).expect("server");
    let test = async {
        let (client, _) = connect(&server, ProtocolVersion::V_2026_07_28).await;
        for round in 0..50 {
            let mut stream = client
                .peer()
                .listen(SubscriptionFilter::builder().tools_list_changed().build())
                .await
                .expect("subscriptions/listen");
            server.notify_tool_list_changed().await;
            let got = tokio::time::timeout(Duration::from_secs(5), stream.next()).await;
            assert!(
                matches!(got, Ok(Ok(Some(ServerNotification::ToolListChangedNotification(_))))),
                "round {round}: {got:?}"
            );
        }
        let _ = client.cancel().await;
    };
    tokio::time::timeout(Duration::from_secs(60), test).await.expect("test timed out");
}
