//! The examples a user copies (serve_tools, hosted_agent, catalogue_rows), each included here as a module and run
//! through its own functions: the MCP server over stdio and HTTP, reached with keel's MCP client; the agent against
//! the project's stub model server in both APIs; the catalogue in a fresh SQLite file.

use std::time::Duration;

use keel_tools::mcp::RemoteServer;
use keel_tools::{Executor, Registry, ToolCall};
use keel_tools_agent::stub::{ANTHROPIC_MESSAGES, OPENAI_CHAT, StubResponse, StubServer};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

#[allow(dead_code)]
#[path = "../examples/serve_tools.rs"]
mod serve_tools;

#[allow(dead_code)]
#[path = "../examples/hosted_agent.rs"]
mod hosted_agent;

#[allow(dead_code)]
#[path = "../examples/catalogue_rows.rs"]
mod catalogue_rows;

const WAIT: Duration = Duration::from_secs(60);

/// Lists `remote`'s tools, and counts words through a forwarder of its `count_words`.
async fn count_through(remote: RemoteServer) -> (Vec<String>, Value) {
    let mut names: Vec<String> = remote.list_tools().await.unwrap().into_iter().map(|t| t.name.to_string()).collect();
    names.sort();
    let imported = remote.import_unpinned().await.unwrap();
    let registry = Registry::builder().without_inventory().tools(imported.into_definitions()).build().unwrap();
    let executor = Executor::new(registry.all().clone()).unwrap();
    let r = executor.call(ToolCall::new("c1", "notes.count_words", json!({"text": "the quick brown fox"}))).await;
    (names, r.data().cloned().unwrap_or_else(|| r.to_json()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_tools_answers_over_stdio_and_http() {
    // stdio: the server's `serve_io`, as `--stdio` runs it on stdin and stdout.
    let server = serve_tools::server().unwrap();
    let (server_read, client_write) = tokio::io::duplex(1 << 16);
    let (client_read, server_write) = tokio::io::duplex(1 << 16);
    let serving = tokio::spawn(async move { server.serve_io(server_read, server_write).await });
    let remote = RemoteServer::connect("notes", (client_read, client_write)).await.unwrap();
    let (names, counted) = tokio::time::timeout(WAIT, count_through(remote)).await.unwrap();
    assert_eq!(names, ["add_note", "count_words"]);
    assert_eq!(counted, json!([{"type": "text", "text": "4"}]), "the result as MCP text content");
    serving.abort();

    // Streamable HTTP: the example's `serve_http`, as `--http ADDR` runs it.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    let serving = tokio::spawn(serve_tools::serve_http(serve_tools::server().unwrap(), listener, shutdown.clone()));
    let remote = RemoteServer::connect_http("notes", &url).await.unwrap();
    let (names, counted) = tokio::time::timeout(WAIT, count_through(remote)).await.unwrap();
    assert_eq!(names, ["add_note", "count_words"]);
    assert_eq!(counted, json!([{"type": "text", "text": "4"}]), "the result as MCP text content");
    shutdown.cancel();
    serving.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosted_agent_calls_the_tool_and_answers_in_both_apis() {
    let stub = StubServer::start().await.unwrap();
    let question = "How many words: \"the quick brown fox\"?";
    let arguments = json!({"text": "the quick brown fox"});

    stub.respond(
        OPENAI_CHAT,
        StubResponse::json(&json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "count_words_in", "arguments": arguments.to_string()}}]}}]})),
    );
    stub.respond(
        OPENAI_CHAT,
        StubResponse::json(&json!({"choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Four words."}}]})),
    );
    let model = hosted_agent::model(hosted_agent::Api::OpenAi, &format!("{}/v1", stub.url()), "m").unwrap();
    let (answer, called) = hosted_agent::ask(model.as_ref(), question).await.unwrap();
    assert_eq!((answer.as_str(), called), ("Four words.", vec!["count_words_in".to_owned()]));
    let requests = stub.requests();
    assert_eq!(requests[0].body["tools"][0]["function"]["name"], "count_words_in");
    assert_eq!(requests[1].body["messages"][2]["content"], "4", "the tool's result went back to the model");

    let usage = json!({"input_tokens": 10, "output_tokens": 5});
    stub.respond(
        ANTHROPIC_MESSAGES,
        StubResponse::json(&json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "count_words_in", "input": arguments}],
            "stop_reason": "tool_use", "usage": usage})),
    );
    stub.respond(
        ANTHROPIC_MESSAGES,
        StubResponse::json(&json!({"id": "msg_2", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": "Four words."}], "stop_reason": "end_turn", "usage": usage})),
    );
    let model = hosted_agent::model(hosted_agent::Api::Anthropic, &stub.url(), "m").unwrap();
    let (answer, called) = hosted_agent::ask(model.as_ref(), question).await.unwrap();
    assert_eq!((answer.as_str(), called), ("Four words.", vec!["count_words_in".to_owned()]));
    let last = stub.requests().last().unwrap().body.clone();
    let reply = &last["messages"][2]["content"][0];
    assert_eq!((reply["type"].as_str(), reply["tool_use_id"].as_str()), (Some("tool_result"), Some("toolu_1")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalogue_rows_serves_each_tenant_its_rows() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("catalogue-rows-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let seen = catalogue_rows::demo(&dir.join("tools.db")).await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        seen,
        [
            "row quote_freight refused: target_missing",
            "globex sees [\"quote_shipping\"]",
            "acme sees [\"quote_shipping\", \"quote_small_parcel\"]",
            "acme: 1200 g costs 620 cents",
            "acme: 5000 g refused: invalid_arguments",
            "acme sees [\"quote_shipping\"] once its row is disabled",
        ]
    );
}

/// The README's demo, `cargo run -p examples --example incident_desk`, runs to its end and prints what it says it
/// prints. Run as the binary `cargo test` builds (every example is built for the tests of its package).
#[test]
fn the_readme_demo_runs() {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/copyable_examples-<hash> -> target/<profile>/examples/incident_desk
    let demo = exe.parent().and_then(|deps| deps.parent()).unwrap().join("examples").join("incident_desk");
    assert!(
        demo.with_extension(std::env::consts::EXE_EXTENSION).exists(),
        "{} is not built: run `cargo test -p examples` (which builds the examples) or `cargo build -p examples \
         --example incident_desk`",
        demo.display()
    );
    let out = std::process::Command::new(&demo).env_remove("RUST_LOG").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the demo failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("== What the model sees: ollama_schemas() of the incident desk"), "{stdout}");
    for part in
        ["\n== The desk: four calls through one executor\n", "\n== The bureau: batches, decisions and the event log"]
    {
        assert!(stdout.contains(part), "{part:?} is missing:\n{stdout}");
    }
    assert!(stdout.contains("tools are compiled into this binary; each view above exposes only its own.)"), "{stdout}");
}
