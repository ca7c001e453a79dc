//! The real Ollama client, over HTTP, against a local stub that answers `/api/chat` from recorded responses.

use std::time::Duration;

use examples::cards;
use keel_tools_agent::stub::{OLLAMA_CHAT, StubResponse, StubServer};
use keel_tools_agent::{Agent, AgentError, Message, ModelError, OllamaClient, RetryPolicy};
use serde_json::{Value, json};

use keel_tools_core::events::{Decision, EventKind};
use keel_tools_core::runs::Run;

const FIXTURE: &str = include_str!("../fixtures/agent/ollama_cards.jsonl");

fn bureau_run() -> Run {
    Run::builder(cards::executor(cards::store(true))).id("ollama-e2e").decider(cards::bureau_decider).build()
}

fn conversation() -> Vec<Message> {
    vec![Message::system("You help the project bureau with its task cards."), Message::user("Which cards are open?")]
}

fn lines(run: &Run) -> Vec<String> {
    run.log().events().iter().map(|e| e.display_line()).collect()
}

fn last_reason(run: &Run) -> String {
    match &run.log().events().last().expect("events").kind {
        EventKind::RunFinished { reason, .. } => reason.clone(),
        other => panic!("the log does not end with run_finished: {other:?}"),
    }
}

#[tokio::test]
async fn two_calls_in_one_response_then_a_final_answer() {
    let stub = StubServer::start().await.unwrap();
    assert_eq!(stub.respond_jsonl(OLLAMA_CHAT, FIXTURE).unwrap(), 2);
    let model = OllamaClient::new(stub.url(), "qwen3:8b").unwrap();
    let mut run = bureau_run();
    let view = run.executor().view().clone();
    let mut messages = conversation();

    let outcome = Agent::new(&model).run(&mut run, &mut messages).await.unwrap();

    assert_eq!(outcome.terminal, Decision::Done);
    assert_eq!(outcome.reason, "model_finished");
    assert_eq!(
        outcome.answer.as_deref(),
        Some(
            "Two cards are open: T-1 \"rotate the db password\" (doing) and T-2 \"write the postmortem\" (todo). T-1 is a valid card."
        )
    );
    assert_eq!((outcome.turns, outcome.steps), (2, 2));
    assert!(outcome.not_executed.is_empty());
    assert_eq!(stub.remaining(OLLAMA_CHAT), 0);

    // What the client sent: two POSTs to /api/chat, each with exactly the view's ollama_schemas().
    let requests = stub.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", OLLAMA_CHAT));
        assert_eq!(r.body["model"], "qwen3:8b");
        assert_eq!(r.body["stream"], false);
        assert_eq!(r.body["tools"], Value::Array(view.ollama_schemas().to_vec()));
    }
    let first = requests[0].body["messages"].as_array().unwrap();
    assert_eq!(first.len(), 2);
    assert_eq!(first[1], json!({"role": "user", "content": "Which cards are open?"}));

    // The second request: the assistant's calls (with the generated ids filled in) and one tool message per call.
    let sent = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(sent.len(), 5, "{sent:#?}");
    let assistant = &sent[2];
    assert_eq!(assistant["role"], "assistant");
    let ids: Vec<&str> =
        assistant["tool_calls"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    assert!(ids.iter().all(|id| keel_tools_core::ToolCall::is_generated_id(id)), "{ids:?}");
    assert_eq!(
        assistant["tool_calls"][1]["function"],
        json!({"name": "validate_task_card", "arguments": {"task_id": "T-1"}})
    );
    let tool_messages = &sent[3..];
    for (m, (id, name)) in tool_messages.iter().zip(ids.iter().zip(["read_task_cards", "validate_task_card"])) {
        assert_eq!(m["role"], "tool");
        assert_eq!(m["tool_name"], name);
        assert_eq!(m["tool_call_id"], *id);
    }
    let cards_text: Value = serde_json::from_str(tool_messages[0]["content"].as_str().unwrap()).unwrap();
    assert_eq!(cards_text[0]["task_id"], "T-1");
    assert_eq!(tool_messages[1]["content"], "true");

    // The event log's lines, tied to the generated ids.
    assert_eq!(
        lines(&run),
        [
            "event: model_response | turn: 1 | calls: 2 | tokens in: 412 | tokens out: 58".to_owned(),
            format!("event: tool_requested | call_id: {} | tool: read_task_cards", ids[0]),
            format!(
                "event: tool_observation | call_id: {} | tool: read_task_cards | execution: performed | outcome: result | decision: continue",
                ids[0]
            ),
            format!("event: tool_requested | call_id: {} | tool: validate_task_card", ids[1]),
            format!(
                "event: tool_observation | call_id: {} | tool: validate_task_card | execution: performed | outcome: result | decision: continue",
                ids[1]
            ),
            "event: model_response | turn: 2 | calls: 0 | tokens in: 540 | tokens out: 41".to_owned(),
            "event: run_finished | terminal: done | reason: model_finished | steps: 2 | tokens in: 952 | tokens out: 99"
                .to_owned(),
        ]
    );

    // The transcript (the same messages, provider-neutral) is marked live.
    let transcript = keel_tools_agent::transcript(&model, &messages);
    assert_eq!(transcript[0], "mode: live");
    assert!(transcript.iter().any(|l| l.starts_with("assistant (live): tool calls: ")), "{transcript:#?}");
}

#[tokio::test]
async fn server_ids_are_kept() {
    let stub = StubServer::start().await.unwrap();
    stub.respond(
        OLLAMA_CHAT,
        StubResponse::json(&json!({"message": {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_srv_1", "function": {"index": 0, "name": "read_task_cards", "arguments": {}}}
        ]}, "done": true})),
    );
    stub.respond(OLLAMA_CHAT, StubResponse::json(&json!({"message": {"role": "assistant", "content": "done"}})));
    let model = OllamaClient::new(stub.url(), "m").unwrap();
    let mut run = bureau_run();
    let mut messages = conversation();
    Agent::new(&model).run(&mut run, &mut messages).await.unwrap();
    let sent = &stub.requests()[1].body["messages"];
    assert_eq!(sent[2]["tool_calls"][0]["id"], "call_srv_1");
    assert_eq!(sent[3]["tool_call_id"], "call_srv_1");
    assert_eq!(sent[3]["tool_name"], "read_task_cards");
}

#[tokio::test]
async fn a_terminal_decision_stops_the_batch_and_the_loop() {
    let stub = StubServer::start().await.unwrap();
    stub.respond(
        OLLAMA_CHAT,
        StubResponse::json(&json!({"message": {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "delete_everything", "arguments": {}}},
            {"function": {"name": "read_task_cards", "arguments": {}}}
        ]}, "done": true})),
    );
    let model = OllamaClient::new(stub.url(), "m").unwrap();
    let mut run = bureau_run();
    let mut messages = conversation();
    let outcome = Agent::new(&model).run(&mut run, &mut messages).await.unwrap();
    assert_eq!(outcome.terminal, Decision::Error);
    assert_eq!(outcome.reason, "after_observation");
    assert_eq!(outcome.steps, 0);
    assert_eq!(outcome.not_executed.len(), 1);
    assert_eq!(outcome.not_executed[0].tool_name, "read_task_cards");
    assert_eq!(stub.requests().len(), 1, "no further turn after a terminal decision");
    assert!(
        lines(&run)
            .last()
            .unwrap()
            .ends_with(&format!("not executed: {} read_task_cards", outcome.not_executed[0].call_id))
    );
}

#[tokio::test]
async fn the_turn_budget_ends_the_run() {
    let stub = StubServer::start().await.unwrap();
    let again = json!({"message": {"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": "read_task_cards", "arguments": {}}}
    ]}, "done": true});
    for _ in 0..3 {
        stub.respond(OLLAMA_CHAT, StubResponse::json(&again));
    }
    let model = OllamaClient::new(stub.url(), "m").unwrap();
    let mut run = Run::new(cards::executor(cards::store(true)));
    let mut messages = conversation();
    let outcome = Agent::new(&model).max_turns(2).run(&mut run, &mut messages).await.unwrap();
    assert_eq!((outcome.terminal, outcome.reason.as_str(), outcome.turns), (Decision::Error, "max_turns", 2));
    // The same call in two turns got two different ids (no duplicate_call_id).
    assert_eq!(outcome.steps, 2);
    assert_eq!(stub.remaining(OLLAMA_CHAT), 1);
}

async fn failing(response: StubResponse, timeout: Duration) -> (AgentError, Run) {
    let stub = StubServer::start().await.unwrap();
    stub.respond(OLLAMA_CHAT, response);
    let model = OllamaClient::builder(stub.url(), "m").timeout(timeout).build().unwrap();
    let mut run = bureau_run();
    let mut messages = conversation();
    // Retries off: each failure is seen as it is (retries have their own tests).
    let e = Agent::new(&model).retry(RetryPolicy::none()).run(&mut run, &mut messages).await.unwrap_err();
    (e, run)
}

#[tokio::test]
async fn http_failures_are_typed_errors() {
    let (e, run) = failing(
        StubResponse::raw(404, r#"{"error":"model \"m\" not found, try pulling it first"}"#),
        Duration::from_secs(5),
    )
    .await;
    match &e {
        AgentError::Model { turn: 1, error: ModelError::Status { status: 404, message, .. } } => {
            assert_eq!(message, "model \"m\" not found, try pulling it first")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(run.terminal(), Some(Decision::Error));
    assert_eq!(last_reason(&run), "model_error");

    let (e, _) = failing(StubResponse::raw(200, "<html>proxy error</html>"), Duration::from_secs(5)).await;
    assert!(matches!(e, AgentError::Model { error: ModelError::Malformed { .. }, .. }), "{e:?}");

    let (e, _) = failing(StubResponse::json(&json!({"done": true})), Duration::from_secs(5)).await;
    assert_eq!(e.to_string(), "turn 1: malformed model response: the response has no `message` object");

    let (e, _) = failing(
        StubResponse::json(&json!({"message": {}})).delayed(Duration::from_secs(3)),
        Duration::from_millis(300),
    )
    .await;
    assert!(matches!(e, AgentError::Model { error: ModelError::Timeout { .. }, .. }), "{e:?}");

    // Nothing listening.
    let url = {
        let stub = StubServer::start().await.unwrap();
        stub.url()
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let model = OllamaClient::builder(&url, "m").connect_timeout(Duration::from_secs(2)).build().unwrap();
    let mut run = bureau_run();
    let e = Agent::new(&model).run(&mut run, &mut conversation()).await.unwrap_err();
    assert!(matches!(e, AgentError::Model { error: ModelError::Connect { .. }, .. }), "{e:?}");

    // A finished run is not reused.
    let e = Agent::new(&model).run(&mut run, &mut conversation()).await.unwrap_err();
    assert_eq!(e, AgentError::RunEnded { terminal: Decision::Error });
}

#[tokio::test]
async fn a_response_over_the_size_limit_is_refused() {
    let stub = StubServer::start().await.unwrap();
    let big = "x".repeat(4096);
    stub.respond(OLLAMA_CHAT, StubResponse::json(&json!({"message": {"role": "assistant", "content": big}})));
    let model = OllamaClient::builder(stub.url(), "m").max_response_bytes(1024).build().unwrap();
    let mut run = bureau_run();
    let e = Agent::new(&model).run(&mut run, &mut conversation()).await.unwrap_err();
    assert!(matches!(e, AgentError::Model { error: ModelError::TooLarge { limit: 1024, .. }, .. }), "{e:?}");
}

#[test]
fn bad_configuration_is_an_error_value() {
    assert!(matches!(OllamaClient::new("localhost:11434", "m"), Err(ModelError::Config { .. })));
    assert!(matches!(OllamaClient::new("http://localhost:11434", " "), Err(ModelError::Config { .. })));
}
