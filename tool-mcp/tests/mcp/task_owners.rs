//! One principal's tasks are unknown to every other: over real HTTP on a protected server (protocol 2026-07-28,
//! where tasks live), Bob can neither read, answer nor cancel a task of Alice's, and is answered exactly as for a
//! task that does not exist; Alice still can. The owner is named the same way when the task is made and when it is
//! asked for (the token's subject), also when `call_options` names another principal for the call.
//!
//! `cargo test -p keel-tools-mcp --features auth --test mcp -- task_owners::`

use std::time::Duration;

use crate::common::{Era, Peer};
use keel_tools_core::executor::CallOptions;
use keel_tools_core::{CallContext, Executor, Registry, ToolError, tool};
use keel_tools_mcp::http::HttpConfig;
use keel_tools_mcp::http::auth::{Principal, ResourceServer, StaticTokens};
use keel_tools_mcp::rmcp::model::ClientCapabilities;
use keel_tools_mcp::server::McpServer;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Works until cancelled, as a task.
#[tool(name = "owned.wait", effect = "read", version = "1.0", task = "required")]
async fn owned_wait(ctx: CallContext) -> Result<String, ToolError> {
    tokio::select! {
        () = tokio::time::sleep(Duration::from_secs(30)) => Ok("waited".into()),
        () = ctx.cancellation().cancelled() => Err(keel_tools_core::tool_error!("stopped", "stopped")),
    }
}

async fn serve() -> (String, CancellationToken) {
    let tokens = StaticTokens::new()
        .token("t-alice", Principal::new("alice", Vec::<String>::new()))
        .token("t-bob", Principal::new("bob", Vec::<String>::new()));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let view = Registry::from_inventory().unwrap().view().names(["owned.wait"]).build().unwrap();
    // The application names one principal for every call: the task's owner is still the token's subject.
    let server = McpServer::builder(Executor::new(view).unwrap())
        .call_options(|_, _| CallOptions::new().principal("service-account"))
        .build()
        .unwrap();
    let service = server.http_service(HttpConfig::default().auth(ResourceServer::new(url.clone(), tokens)));
    let stop = CancellationToken::new();
    let shutdown = stop.clone();
    tokio::spawn(async move { service.serve(listener, "/mcp", shutdown).await });
    (url, stop)
}

/// The `_meta` of a stateless request from a client that supports tasks.
fn with_tasks(mut params: Value) -> Value {
    let capabilities = serde_json::to_value(ClientCapabilities::builder().enable_tasks().build()).unwrap();
    params["_meta"] = json!({"io.modelcontextprotocol/clientCapabilities": capabilities});
    params
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_principals_task_is_unknown_to_another() {
    let (url, stop) = serve().await;
    let alice = Peer::new(&url, Some("t-alice"), Era::Stateless);
    let bob = Peer::new(&url, Some("t-bob"), Era::Stateless);

    let created = alice.request(1, "tools/call", with_tasks(json!({"name": "owned.wait", "arguments": {}}))).await;
    assert_eq!(created.status, 200, "{created:?}");
    let id = created.body.pointer("/result/taskId").and_then(Value::as_str).unwrap_or_else(|| {
        panic!("a task: {created:?}");
    });
    let id = id.to_owned();

    // What a task that does not exist is answered.
    let none = bob.request(2, "tasks/get", with_tasks(json!({"taskId": "no-such-task"}))).await;
    assert_eq!(none.body["error"]["code"], -32602, "{none:?}");

    for (n, method, params) in [
        (3, "tasks/get", json!({"taskId": id})),
        (4, "tasks/update", json!({"taskId": id, "inputResponses": {}})),
        (5, "tasks/cancel", json!({"taskId": id})),
    ] {
        let reply = bob.request(n, method, with_tasks(params)).await;
        assert_eq!(reply.status, none.status, "{method}: {reply:?}");
        assert_eq!(reply.body["error"]["code"], -32602, "{method}: {reply:?}");
        assert_eq!(reply.body["error"]["message"], format!("unknown task: {id}"), "{method}: as for no task");
    }

    // Alice's task is still hers, and still running: Bob's cancel reached nothing.
    let hers = alice.request(6, "tasks/get", with_tasks(json!({"taskId": id}))).await;
    assert_eq!(hers.body["result"]["status"], "working", "{hers:?}");
    let cancelled = alice.request(7, "tasks/cancel", with_tasks(json!({"taskId": id}))).await;
    assert!(cancelled.body.get("error").is_none(), "{cancelled:?}");
    stop.cancel();
}
