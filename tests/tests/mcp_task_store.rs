//! MCP tasks kept in a task store (`McpServerBuilder::task_store`): two servers over one store are two replicas,
//! each test run against a SQLite file (`NAME::sqlite`) and a PostgreSQL database (`NAME::postgres`, in the cluster
//! of `KEEL_TEST_POSTGRES`; a failure with `CI` set when there is none).
//!
//! - a task started on one server is read, awaited and cancelled through the other; the cancel reaches the
//!   handler's cancellation token on the first;
//! - a task's input request is answered with `tasks/update` on the other server, and the task completes with it;
//! - a task whose server lost its store (as a replica that died) reads `failed` with `task_lost` once its lease
//!   expired, on the other server, and never `completed`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use keel_tools_core::content::Content;
use keel_tools_core::tasks::{NewTask, Task, TaskChange, TaskLease, TaskStore, Terminal, WaitFor};
use keel_tools_core::{CallContext, Executor, Registry, ToolError, tool};
use keel_tools_mcp::McpServer;
use keel_tools_mcp::rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ElicitRequestParams, ElicitResult,
    GetTaskParams, Implementation, InitializeRequestParams, ProtocolVersion, UpdateTaskParams,
};
use keel_tools_mcp::rmcp::service::{RequestContext, RunningService};
use keel_tools_mcp::rmcp::{ClientHandler, ErrorData, RoleClient};
use keel_tools_state::{DynTaskStore, StateError, StateFuture};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::state_db::{Db, both};

static STORED_CANCELLED: AtomicUsize = AtomicUsize::new(0);

/// Works `ms` milliseconds, or until cancelled (counted).
#[tool(effect = "read", version = "1.0", task = "optional")]
async fn stored_slow(ctx: CallContext, #[arg(description = "Milliseconds")] ms: u64) -> Result<Content, ToolError> {
    tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(ms)) => Ok(Content::text(format!("slept {ms}"))),
        () = ctx.cancellation().cancelled() => {
            STORED_CANCELLED.fetch_add(1, Ordering::SeqCst);
            Err(keel_tools_core::tool_error!("stopped", "stopped"))
        }
    }
}

/// Asks for a confirmation from inside its task.
#[tool(effect = "read", version = "1.0", task = "required")]
async fn stored_confirm(ctx: CallContext) -> Result<Content, ToolError> {
    let answer =
        ctx.elicit("ok", "Go on?", json!({"type": "object", "properties": {"ok": {"type": "boolean"}}})).await?;
    Ok(Content::text(format!("confirmed: {}", answer.accepted())))
}

/// Asks two questions at once from inside its task, and answers with both answers.
#[tool(effect = "read", version = "1.0", task = "required")]
async fn stored_two_questions(ctx: CallContext) -> Result<Content, ToolError> {
    let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}});
    let (first, last) = tokio::join!(
        ctx.elicit("first", "Your first name?", schema.clone()),
        ctx.elicit("last", "Your last name?", schema)
    );
    let name = |answer: &keel_tools_core::context::Elicitation| {
        answer.content.as_ref().and_then(|c| c.get("name")).and_then(Value::as_str).unwrap_or("?").to_owned()
    };
    Ok(Content::text(format!("{} {}", name(&first?), name(&last?))))
}

/// A 2026-07-28 client that runs tasks (and answers no elicitation itself: a task's questions go through
/// `tasks/update`).
#[derive(Clone, Default)]
struct TaskClient;

impl ClientHandler for TaskClient {
    fn get_info(&self) -> InitializeRequestParams {
        let mut capabilities = ClientCapabilities::builder().enable_elicitation().build();
        capabilities.extensions = ClientCapabilities::builder().enable_tasks().build().extensions;
        InitializeRequestParams::new(capabilities, Implementation::new("keel-test", "0.1"))
    }

    async fn create_elicitation(
        &self,
        _: ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Err(ErrorData::internal_error("this client answers through tasks/update only", None))
    }
}

type Client = RunningService<RoleClient, TaskClient>;

/// A server of the two tools over `store`, with a lease of `lease`.
fn server(store: Arc<DynTaskStore>, lease: Duration) -> McpServer {
    let registry = Registry::from_inventory().expect("registry");
    let view = registry.view().names(["stored_slow", "stored_confirm", "stored_two_questions"]).build().expect("view");
    McpServer::builder(Executor::new(view).expect("executor"))
        .task_lease(lease)
        .task_store(store)
        .build()
        .expect("server")
}

async fn connect(server: &McpServer) -> Client {
    keel_tests::mcp::connect(server, TaskClient, ProtocolVersion::V_2026_07_28).await
}

fn call(name: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned()).with_arguments(args.as_object().cloned().unwrap())
}

/// Starts a call that becomes a task; its id.
async fn start(client: &Client, name: &str, args: Value) -> String {
    match client.peer().call_tool_once(call(name, args)).await.expect("tools/call") {
        CallToolResponse::Task(created) => created.task.task_id,
        other => panic!("expected a task: {other:?}"),
    }
}

async fn status(client: &Client, id: &str) -> Value {
    serde_json::to_value(client.peer().get_task(GetTaskParams::new(id)).await.expect("tasks/get")).unwrap()
}

/// Polls until the task, as `tasks/get` shows it, is as `wanted` says (10 s at most); `what` names it for the
/// failure.
async fn until_seen(client: &Client, id: &str, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = status(client, id).await;
        if wanted(&got) {
            return got;
        }
        assert!(Instant::now() < deadline, "task {id} never {what}: {got}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls until the task has `wanted` status.
async fn until(client: &Client, id: &str, wanted: &str) -> Value {
    until_seen(client, id, &format!("reached {wanted}"), |got| got["status"] == wanted).await
}

/// Polls until the task asks for input with exactly the requests `keys`.
async fn until_asked(client: &Client, id: &str, keys: &[&str]) -> Value {
    let asks = |got: &Value| {
        let mut asked: Vec<&str> =
            got["inputRequests"].as_object().map_or(Vec::new(), |r| r.keys().map(String::as_str).collect());
        asked.sort_unstable();
        got["status"] == "input_required" && asked == keys
    };
    until_seen(client, id, &format!("asked for exactly {keys:?}"), asks).await
}

both!(a_task_is_read_answered_and_cancelled_through_another_server);
async fn a_task_is_read_answered_and_cancelled_through_another_server(db: Db) {
    let a = connect(&server(db.tasks(), Duration::from_secs(5))).await;
    let b = connect(&server(db.tasks(), Duration::from_secs(5))).await;

    // Started on A, its result read on B.
    let id = start(&a, "stored_slow", json!({"ms": 50})).await;
    let done = until(&b, &id, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "slept 50", "{done}");
    assert_eq!(done["pollIntervalMs"], 1000, "{done}");

    // Started on A, cancelled on B: A's handler sees its token fire, and both read it cancelled.
    let before = STORED_CANCELLED.load(Ordering::SeqCst);
    let id = start(&a, "stored_slow", json!({"ms": 20_000})).await;
    assert_eq!(status(&b, &id).await["status"], "working");
    b.peer().cancel_task(CancelTaskParams::new(id.clone())).await.expect("tasks/cancel");
    until(&a, &id, "cancelled").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while STORED_CANCELLED.load(Ordering::SeqCst) == before {
        assert!(Instant::now() < deadline, "the cancel on B never reached the handler on A");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The handler's own end does not overwrite the cancel.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(status(&b, &id).await["status"], "cancelled");

    // Input asked on A, answered on B; the task completes with the answer.
    let id = start(&a, "stored_confirm", json!({})).await;
    let waiting = until(&b, &id, "input_required").await;
    assert_eq!(waiting["inputRequests"]["ok"]["method"], "elicitation/create", "{waiting}");
    let answer = [("ok".to_owned(), json!({"action": "accept", "content": {"ok": true}}))];
    b.peer().update_task(UpdateTaskParams::new(id.clone(), answer.into())).await.expect("tasks/update");
    let done = until(&a, &id, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "confirmed: true", "{done}");

    // An id no server made is unknown on both.
    for client in [&a, &b] {
        let e = client.peer().get_task(GetTaskParams::new("no-such-task")).await.expect_err("unknown");
        assert!(e.to_string().contains("unknown task"), "{e}");
    }
    let _ = a.cancel().await;
    let _ = b.cancel().await;
}

both!(questions_asked_at_once_are_shown_together_and_answered_one_by_one);
async fn questions_asked_at_once_are_shown_together_and_answered_one_by_one(db: Db) {
    let a = connect(&server(db.tasks(), Duration::from_secs(5))).await;
    let b = connect(&server(db.tasks(), Duration::from_secs(5))).await;
    let id = start(&a, "stored_two_questions", json!({})).await;

    // Both questions are shown at once, on either server.
    let asked = until_asked(&b, &id, &["first", "last"]).await;
    assert_eq!(asked["inputRequests"]["last"]["method"], "elicitation/create", "{asked}");
    until_asked(&a, &id, &["first", "last"]).await;

    // One answered on B: the other stays asked, alone.
    let answer = [("last".to_owned(), json!({"action": "accept", "content": {"name": "Lovelace"}}))];
    b.peer().update_task(UpdateTaskParams::new(id.clone(), answer.into())).await.expect("tasks/update");
    until_asked(&b, &id, &["first"]).await;

    // An answer to no open question changes nothing; the other answered on A completes the task.
    let stray = [("middle".to_owned(), json!({"action": "accept", "content": {"name": "King"}}))];
    b.peer().update_task(UpdateTaskParams::new(id.clone(), stray.into())).await.expect("tasks/update");
    until_asked(&b, &id, &["first"]).await;
    let answer = [("first".to_owned(), json!({"action": "accept", "content": {"name": "Ada"}}))];
    a.peer().update_task(UpdateTaskParams::new(id.clone(), answer.into())).await.expect("tasks/update");
    let done = until(&b, &id, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "Ada Lovelace", "{done}");
    let _ = a.cancel().await;
    let _ = b.cancel().await;
}

both!(a_task_whose_server_lost_its_store_reads_lost_on_another);
async fn a_task_whose_server_lost_its_store_reads_lost_on_another(db: Db) {
    let cut = Arc::new(Cuttable { inner: db.tasks(), cut: AtomicBool::new(false) });
    let lease = Duration::from_millis(600);
    let a = connect(&server(cut.clone(), lease)).await;
    let b = connect(&server(db.tasks(), lease)).await;

    let id = start(&a, "stored_slow", json!({"ms": 3_000})).await;
    // Heartbeats keep it past its first lease.
    tokio::time::sleep(lease * 2).await;
    assert_eq!(status(&b, &id).await["status"], "working");

    // A can no longer reach the store, as a replica that died: within its lease (and a margin) the task is lost.
    cut.cut.store(true, Ordering::SeqCst);
    let cut_at = Instant::now();
    let lost = until(&b, &id, "failed").await;
    assert!(cut_at.elapsed() < lease + Duration::from_secs(2), "lost after {:?}", cut_at.elapsed());
    assert_eq!(lost["error"]["data"]["code"], "task_lost", "{lost}");
    assert_eq!(lost["error"]["code"], -32603, "{lost}");
    assert!(lost["statusMessage"].as_str().unwrap_or_default().contains("may have run"), "{lost}");

    // A's call ends later, and its store comes back: the task stays lost, never completed.
    cut.cut.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    assert_eq!(status(&b, &id).await["error"]["data"]["code"], "task_lost");
    let _ = a.cancel().await;
    let _ = b.cancel().await;
}

/// A task store that fails every operation while it is cut off.
struct Cuttable {
    inner: Arc<DynTaskStore>,
    cut: AtomicBool,
}

impl Cuttable {
    fn check(&self) -> Result<(), StateError> {
        if self.cut.load(Ordering::SeqCst) {
            Err(StateError::Unavailable { context: "test".into(), message: "cut off".into(), source: None })
        } else {
            Ok(())
        }
    }

    fn guard<'a, T: Send + 'a>(&'a self, f: impl FnOnce() -> StateFuture<'a, T> + Send + 'a) -> StateFuture<'a, T> {
        Box::pin(async move {
            self.check()?;
            f().await
        })
    }
}

impl TaskStore for Cuttable {
    type Error = StateError;

    fn create<'a>(&'a self, task: &'a NewTask) -> StateFuture<'a, (Task, TaskLease)> {
        self.guard(|| self.inner.create(task))
    }
    fn get<'a>(&'a self, id: &'a str) -> StateFuture<'a, Option<Task>> {
        self.guard(|| self.inner.get(id))
    }
    fn wait<'a>(&'a self, id: &'a str, until: WaitFor, timeout: Duration) -> StateFuture<'a, Option<Task>> {
        self.guard(move || self.inner.wait(id, until, timeout))
    }
    fn working<'a>(&'a self, lease: &'a TaskLease, message: Option<&'a str>) -> StateFuture<'a, Task> {
        self.guard(move || self.inner.working(lease, message))
    }
    fn input_required<'a>(&'a self, lease: &'a TaskLease, request: &'a Value) -> StateFuture<'a, Task> {
        self.guard(|| self.inner.input_required(lease, request))
    }
    fn answer<'a>(&'a self, id: &'a str, answer: &'a Value) -> StateFuture<'a, Task> {
        self.guard(|| self.inner.answer(id, answer))
    }
    fn take_answers<'a>(&'a self, lease: &'a TaskLease) -> StateFuture<'a, Vec<Value>> {
        self.guard(|| self.inner.take_answers(lease))
    }
    fn heartbeat<'a>(&'a self, lease: &'a TaskLease) -> StateFuture<'a, TaskLease> {
        self.guard(|| self.inner.heartbeat(lease))
    }
    fn finish<'a>(&'a self, lease: &'a TaskLease, outcome: Terminal) -> StateFuture<'a, Task> {
        self.guard(move || self.inner.finish(lease, outcome))
    }
    fn cancel<'a>(&'a self, id: &'a str) -> StateFuture<'a, Task> {
        self.guard(|| self.inner.cancel(id))
    }
    fn purge_expired(&self) -> StateFuture<'_, u64> {
        self.guard(|| self.inner.purge_expired())
    }
    fn changes(&self) -> broadcast::Receiver<TaskChange> {
        self.inner.changes()
    }
}
