//! What a handler asks its client for, and tasks, in both MCP eras, driven by rmcp's client in process:
//!
//! * one handler (`ctx.elicit`, `ctx.sample`) asks a 2025-11-25 session directly, and answers a 2026-07-28
//!   stateless client with input-required results whose sealed `requestState` carries every answer so far;
//! * a tampered, foreign or expired state is refused before the handler runs; a missing capability is `-32021`;
//! * a task tool answers with a task once the call is admitted (a refused call is answered at once), takes its
//!   input through `tasks/update`, and `tasks/cancel` reaches the handler's cancellation token;
//! * `x-mcp-header` reaches MCP's listing and no other provider's.

#![allow(deprecated)] // Sampling is deprecated from protocol 2026-07-28 on, and still served.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use keel_tools_core::content::Content;
use keel_tools_core::{CallContext, Executor, Provider, Registry, ToolError, tool};
use keel_tools_mcp::McpServer;
use keel_tools_mcp::rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequestParams, ElicitResult, GetTaskParams, Implementation, InitializeRequestParams,
    ProtocolVersion, SamplingMessage, UpdateTaskParams,
};
use keel_tools_mcp::rmcp::service::{RequestContext, RunningService};
use keel_tools_mcp::rmcp::{ClientHandler, ErrorData, RoleClient, ServiceError};
use serde_json::{Value, json};

static ROUNDS: AtomicUsize = AtomicUsize::new(0);
static CANCELLED: AtomicUsize = AtomicUsize::new(0);

fn form(field: &str) -> Value {
    json!({"type": "object", "properties": {field: {"type": "string"}}, "required": [field]})
}

fn field(answer: &keel_tools_core::context::Elicitation, name: &str) -> String {
    answer.content.as_ref().and_then(|c| c.get(name)).and_then(Value::as_str).unwrap_or("?").to_owned()
}

/// Asks a name, then a colour, keeping a counter of its rounds in its round state.
#[tool(effect = "read", version = "1.0")]
async fn era_two_questions(ctx: CallContext, greeting: String) -> Result<Content, ToolError> {
    ROUNDS.fetch_add(1, Ordering::SeqCst);
    let round = ctx.round_state().and_then(|s| s["round"].as_u64()).unwrap_or(0);
    ctx.set_round_state(json!({"round": round + 1}));
    let name = ctx.elicit("name", "Your name?", form("name")).await?;
    let colour = ctx.elicit("colour", "Your colour?", form("colour")).await?;
    Ok(Content::text(format!("{greeting}, {} in {} (round {round})", field(&name, "name"), field(&colour, "colour"))))
}

/// Asks the client's LLM.
#[tool(effect = "read", version = "1.0")]
async fn era_sample(ctx: CallContext) -> Result<Content, ToolError> {
    let params = json!({"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5});
    let answer = ctx.sample("llm", params).await?;
    Ok(Content::text(answer.pointer("/content/text").and_then(Value::as_str).unwrap_or("?").to_owned()))
}

/// Works until cancelled (as a task), counting its cancellations.
#[tool(effect = "read", version = "1.0", task = "optional")]
async fn era_slow(ctx: CallContext, #[arg(description = "Milliseconds")] ms: u64) -> Result<Content, ToolError> {
    tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(ms)) => Ok(Content::text(format!("slept {ms}"))),
        () = ctx.cancellation().cancelled() => {
            CANCELLED.fetch_add(1, Ordering::SeqCst);
            Err(keel_tools_core::tool_error!("stopped", "stopped"))
        }
    }
}

/// Asks for a confirmation from inside its task.
#[tool(effect = "read", version = "1.0", task = "required")]
async fn era_confirm(ctx: CallContext) -> Result<Content, ToolError> {
    let answer =
        ctx.elicit("ok", "Go on?", json!({"type": "object", "properties": {"ok": {"type": "boolean"}}})).await?;
    Ok(Content::text(format!("confirmed: {}", answer.accepted())))
}

/// Mirrors `region` into the `Mcp-Param-Region` header.
#[tool(effect = "read", version = "1.0")]
fn era_region(#[arg(header = "Region")] region: String) -> String {
    region
}

const TOOLS: &[&str] = &["era_two_questions", "era_sample", "era_slow", "era_confirm", "era_region"];

/// A client that answers elicitations (`name` = Ada, `colour` = teal) and, when asked, sampling; it counts what
/// it was asked.
#[derive(Clone, Default)]
struct Client {
    sampling: bool,
    tasks: bool,
    asked: Arc<AtomicUsize>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> InitializeRequestParams {
        let mut capabilities = ClientCapabilities::builder().enable_elicitation().build();
        if self.sampling {
            capabilities.sampling = ClientCapabilities::builder().enable_sampling().build().sampling;
        }
        if self.tasks {
            capabilities.extensions = ClientCapabilities::builder().enable_tasks().build().extensions;
        }
        InitializeRequestParams::new(capabilities, Implementation::new("keel-test", "0.1"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let message = serde_json::to_value(&request).unwrap()["message"].as_str().unwrap_or_default().to_owned();
        let content = if message.contains("name") { json!({"name": "Ada"}) } else { json!({"colour": "teal"}) };
        Ok(serde_json::from_value(json!({"action": "accept", "content": content})).expect("an ElicitResult"))
    }

    async fn create_message(
        &self,
        _: CreateMessageRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Ok(CreateMessageResult::new(SamplingMessage::assistant_text("hello"), "test-model".to_owned()))
    }
}

fn server() -> McpServer {
    let registry = Registry::from_inventory().expect("registry");
    let executor =
        Executor::new(registry.view().names(TOOLS.iter().copied()).build().expect("view")).expect("executor");
    McpServer::new(executor).expect("server")
}

async fn connect(server: &McpServer, client: Client, version: ProtocolVersion) -> RunningService<RoleClient, Client> {
    keel_tests::mcp::connect(server, client, version).await
}

fn call(name: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned()).with_arguments(args.as_object().cloned().unwrap())
}

use keel_tests::mcp::text_of as text;

async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), f).await.expect("test timed out")
}

#[tokio::test(flavor = "multi_thread")]
async fn one_handler_asks_a_session_directly_and_a_stateless_client_through_rounds() {
    within(async {
        let server = server();
        // 2025-11-25: the session is asked twice, and the handler runs once.
        let session = Client::default();
        let asked = session.asked.clone();
        let client = connect(&server, session, ProtocolVersion::V_2025_11_25).await;
        let before = ROUNDS.load(Ordering::SeqCst);
        let r = client.peer().call_tool(call("era_two_questions", json!({"greeting": "Hi"}))).await.expect("call");
        assert_eq!(text(&r), "Hi, Ada in teal (round 0)");
        assert_eq!((asked.load(Ordering::SeqCst), ROUNDS.load(Ordering::SeqCst) - before), (2, 1));
        let _ = client.cancel().await;

        // 2026-07-28: three rounds, each answered by the client; the round state and the answers ride in the
        // sealed state.
        let stateless = Client::default();
        let client = connect(&server, stateless, ProtocolVersion::V_2026_07_28).await;
        let first =
            client.peer().call_tool_once(call("era_two_questions", json!({"greeting": "Hi"}))).await.expect("call");
        let CallToolResponse::InputRequired(first) = first else { panic!("expected input required: {first:?}") };
        let requests = first.input_requests.clone().unwrap_or_default();
        assert_eq!(requests.keys().collect::<Vec<_>>(), ["name"]);
        let state = first.request_state.clone().expect("a sealed state");

        // The state is bound to the call: other arguments, a changed byte, or no match are refused.
        let mut other = call("era_two_questions", json!({"greeting": "Hello"}));
        other.request_state = Some(state.clone());
        let err = client.peer().call_tool_once(other).await.expect_err("foreign state");
        assert!(matches!(err, ServiceError::McpError(ref e) if e.code.0 == -32602), "{err:?}");
        let mut tampered = call("era_two_questions", json!({"greeting": "Hi"}));
        let mut bytes = state.clone().into_bytes();
        let last = bytes.len() - 2;
        bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
        tampered.request_state = Some(String::from_utf8(bytes).unwrap());
        let err = client.peer().call_tool_once(tampered).await.expect_err("tampered state");
        assert!(matches!(err, ServiceError::McpError(ref e) if e.code.0 == -32602), "{err:?}");

        let mut second = call("era_two_questions", json!({"greeting": "Hi"}));
        second.request_state = Some(state);
        second.input_responses =
            Some([("name".to_owned(), json!({"action": "accept", "content": {"name": "Ada"}}))].into());
        let CallToolResponse::InputRequired(second) = client.peer().call_tool_once(second).await.expect("call") else {
            panic!("expected the second question")
        };
        assert_eq!(second.input_requests.clone().unwrap_or_default().keys().collect::<Vec<_>>(), ["colour"]);
        // The last round carries only the last answer: the first rides in the state.
        let mut third = call("era_two_questions", json!({"greeting": "Hi"}));
        third.request_state = second.request_state.clone();
        third.input_responses =
            Some([("colour".to_owned(), json!({"action": "accept", "content": {"colour": "teal"}}))].into());
        let CallToolResponse::Complete(done) = client.peer().call_tool_once(third).await.expect("call") else {
            panic!("expected the result")
        };
        assert_eq!(text(&done), "Hi, Ada in teal (round 2)");

        // rmcp's own driver gets there by itself.
        let r = client.call_tool(call("era_two_questions", json!({"greeting": "Yo"}))).await.expect("call");
        assert_eq!(text(&r), "Yo, Ada in teal (round 2)");
        let _ = client.cancel().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_capability_is_32021_when_stateless_and_the_tools_error_in_a_session() {
    within(async {
        let server = server();
        let client = connect(&server, Client::default(), ProtocolVersion::V_2026_07_28).await;
        let err = client.peer().call_tool_once(call("era_sample", json!({}))).await.expect_err("no sampling");
        assert!(matches!(err, ServiceError::McpError(ref e) if e.code.0 == -32021), "{err:?}");
        let _ = client.cancel().await;

        let client = connect(&server, Client::default(), ProtocolVersion::V_2025_11_25).await;
        let r = client.peer().call_tool(call("era_sample", json!({}))).await.expect("call");
        assert_eq!(r.is_error, Some(true));
        assert!(text(&r).contains("client_capability_missing"), "{}", text(&r));
        let _ = client.cancel().await;

        let client =
            connect(&server, Client { sampling: true, ..Client::default() }, ProtocolVersion::V_2025_11_25).await;
        let r = client.peer().call_tool(call("era_sample", json!({}))).await.expect("call");
        assert_eq!(text(&r), "hello");
        let _ = client.cancel().await;
    })
    .await;
}

async fn task_status(client: &RunningService<RoleClient, Client>, id: &str) -> Value {
    let got = client.peer().get_task(GetTaskParams::new(id)).await.expect("tasks/get");
    serde_json::to_value(got).unwrap()
}

async fn wait_status(client: &RunningService<RoleClient, Client>, id: &str, status: &str) -> Value {
    for _ in 0..300 {
        let got = task_status(client, id).await;
        if got["status"] == status {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("task {id} never reached {status}: {}", task_status(client, id).await)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_is_created_only_for_an_admitted_call_and_cancellation_reaches_the_handler() {
    within(async {
        let server = server();
        let tasks = Client { tasks: true, ..Client::default() };
        let client = connect(&server, tasks, ProtocolVersion::V_2026_07_28).await;
        assert!(client.peer_info().unwrap().capabilities.supports_tasks(), "the server declares tasks");

        // Refused before the handler (a wrong argument type): answered at once, no task.
        let r = client.peer().call_tool_once(call("era_slow", json!({"ms": "soon"}))).await.expect("call");
        let CallToolResponse::Complete(r) = r else { panic!("a refused call is answered in the request: {r:?}") };
        assert!(text(&r).contains("invalid_arguments"), "{}", text(&r));

        // Admitted: a task, whose result is the call's.
        let r = client.peer().call_tool_once(call("era_slow", json!({"ms": 50}))).await.expect("call");
        let CallToolResponse::Task(created) = r else { panic!("expected a task: {r:?}") };
        let done = wait_status(&client, &created.task.task_id, "completed").await;
        assert_eq!(done["result"]["content"][0]["text"], "slept 50", "{done}");

        // Cancelled: the handler sees its token fire.
        let before = CANCELLED.load(Ordering::SeqCst);
        let CallToolResponse::Task(created) =
            client.peer().call_tool_once(call("era_slow", json!({"ms": 20_000}))).await.expect("call")
        else {
            panic!("expected a task")
        };
        client.peer().cancel_task(CancelTaskParams::new(created.task.task_id.clone())).await.expect("tasks/cancel");
        wait_status(&client, &created.task.task_id, "cancelled").await;
        for _ in 0..200 {
            if CANCELLED.load(Ordering::SeqCst) > before {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(CANCELLED.load(Ordering::SeqCst), before + 1, "the handler saw the cancellation");

        // Input from inside a task: `input_required`, then `tasks/update`.
        let CallToolResponse::Task(created) =
            client.peer().call_tool_once(call("era_confirm", json!({}))).await.expect("call")
        else {
            panic!("expected a task")
        };
        let waiting = wait_status(&client, &created.task.task_id, "input_required").await;
        assert!(waiting["inputRequests"]["ok"].is_object(), "{waiting}");
        let answer = [("ok".to_owned(), json!({"action": "accept", "content": {"ok": true}}))];
        client
            .peer()
            .update_task(UpdateTaskParams::new(created.task.task_id.clone(), answer.into()))
            .await
            .expect("tasks/update");
        let done = wait_status(&client, &created.task.task_id, "completed").await;
        assert_eq!(done["result"]["content"][0]["text"], "confirmed: true", "{done}");
        let _ = client.cancel().await;

        // A task-required tool refuses a client without tasks.
        let client = connect(&server, Client::default(), ProtocolVersion::V_2026_07_28).await;
        let err = client.peer().call_tool_once(call("era_confirm", json!({}))).await.expect_err("needs tasks");
        assert!(matches!(err, ServiceError::McpError(ref e) if e.code.0 == -32021), "{err:?}");
        // An optional one is answered in the request.
        let r = client.peer().call_tool(call("era_slow", json!({"ms": 1}))).await.expect("call");
        assert_eq!(text(&r), "slept 1");
        let _ = client.cancel().await;
    })
    .await;
}

#[test]
fn mcp_header_annotations_reach_mcp_only() {
    let registry = Registry::from_inventory().expect("registry");
    let view = registry.view().names(["era_region"]).build().expect("view");
    let def = view.get("era_region").unwrap();
    assert_eq!(def.render(Provider::Mcp)["inputSchema"]["properties"]["region"]["x-mcp-header"], "Region");
    for provider in Provider::ALL.iter().copied().filter(|p| *p != Provider::Mcp) {
        assert!(!def.render(provider).to_string().contains("x-mcp-header"), "{provider:?}");
    }
}
