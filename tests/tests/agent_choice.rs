//! A tool choice that allows a subset of the tools ([`ToolChoice::Allowed`]), over HTTP against the local stub, on
//! every client: the request's form per API (the full tool list kept where the API has a form for the subset, the
//! list narrowed where it has none), and the agent holding the turn to the same subset: a call of a tool outside it
//! is refused `unknown_tool` and never runs, though the tool is in the view; a call inside it runs.

use examples::cards;
use keel_tools_agent::stub::{
    ANTHROPIC_MESSAGES, OLLAMA_CHAT, OPENAI_CHAT, OPENAI_RESPONSES, StubResponse, StubServer, gemini_generate,
};
use keel_tools_agent::{
    Agent, AgentError, AllowedMode, AnthropicClient, ChatModel, ChoicePolicy, GeminiClient, Message, ModelError,
    OllamaClient, OpenAiClient, ResponsesClient, ToolChoice,
};
use keel_tools_core::Provider;
use keel_tools_core::ToolResult;
use keel_tools_core::events::{Decision, EventKind};
use keel_tools_core::runs::{Decider, DefaultDecider, Run, RunState, StopPolicy};
use serde_json::{Value, json};

// `cards.count` is declared once for the binary, in tests/tests/with_peers.rs.

const OPENAI: &str = include_str!("../fixtures/agent/openai_cards.jsonl");

/// The default rules, but a refused tool lets the run go on, so that the next turn's request can be checked.
fn go_on(observation: &ToolResult, state: &RunState, stop: &StopPolicy) -> Decision {
    if observation.code() == Some("unknown_tool") {
        return Decision::Continue;
    }
    DefaultDecider.decide(observation, state, stop)
}

fn run() -> Run {
    Run::builder(cards::executor(cards::store(true))).decider(go_on).build()
}

fn conversation() -> Vec<Message> {
    vec![Message::user("How many cards are still to do, and which?")]
}

/// The first turn may call only `cards.count`; later turns any tool.
fn policy(mode: AllowedMode) -> ChoicePolicy {
    ChoicePolicy::first_then(ToolChoice::allowed(["cards.count"], mode), ToolChoice::Auto)
}

/// Runs the loop; checks that `cards.count` ran and `read_task_cards`, asked for in the same turn, was refused as
/// an unknown tool without running; returns the request bodies.
async fn run_and_check(model: &dyn ChatModel, stub: &StubServer) -> Vec<Value> {
    let mut run = run();
    assert!(run.executor().view().contains("read_task_cards"), "the refused tool is in the view");
    let mut messages = conversation();
    let outcome = Agent::new(model).run(&mut run, &mut messages).await.unwrap();
    assert_eq!(outcome.terminal, Decision::Done, "{outcome:?}");
    let results: Vec<&ToolResult> = messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2, "{results:#?}");
    assert_eq!(results[0].tool_name, "cards.count");
    assert!(results[0].is_ok() && results[0].executed, "{:?}", results[0]);
    assert_eq!(results[1].tool_name, "read_task_cards");
    assert_eq!(results[1].code(), Some("unknown_tool"));
    assert!(!results[1].executed);
    assert_eq!(outcome.steps, 1, "only the allowed call is a step");
    let refused = run.log().events().iter().any(|e| {
        matches!(&e.kind, EventKind::ToolObservation { tool_name, executed: false, code: Some(code), .. }
            if &**tool_name == "read_task_cards" && code == "unknown_tool")
    });
    assert!(refused, "the log shows the refusal");
    let requests = stub.requests();
    assert_eq!(requests.len(), 2);
    requests.into_iter().map(|r| r.body).collect()
}

/// The tool names of a request's `tools` at `pointer` of each entry.
fn names(tools: &Value, pointer: &str) -> Vec<String> {
    tools
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {tools}"))
        .iter()
        .map(|t| t.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn openai_chat_sends_allowed_tools_with_the_full_list_and_the_executor_holds_the_turn_to_them() {
    let stub = StubServer::start().await.unwrap();
    stub.respond_jsonl(OPENAI_CHAT, OPENAI).unwrap();
    let model = OpenAiClient::builder(format!("{}/v1", stub.url()), "gpt-test")
        .choice_policy(policy(AllowedMode::Required))
        .build()
        .unwrap();
    let bodies = run_and_check(&model, &stub).await;
    assert_eq!(
        bodies[0]["tool_choice"],
        json!({"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [
            {"type": "function", "function": {"name": "cards-count"}}
        ]}})
    );
    assert_eq!(bodies[1]["tool_choice"], "auto");
    assert_eq!(bodies[0]["tools"], bodies[1]["tools"], "the same list on both turns: the cache holds");
    assert!(names(&bodies[0]["tools"], "/function/name").contains(&"read_task_cards".to_owned()));
}

#[tokio::test]
async fn responses_sends_allowed_tools_with_the_full_list() {
    let stub = StubServer::start().await.unwrap();
    stub.respond(
        OPENAI_RESPONSES,
        StubResponse::json(&json!({"object": "response", "status": "completed", "output": [
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "cards-count",
             "arguments": "{\"status\":\"todo\"}"},
            {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "read_task_cards", "arguments": "{}"}
        ]})),
    );
    stub.respond(
        OPENAI_RESPONSES,
        StubResponse::json(&json!({"object": "response", "status": "completed", "output": [
            {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
             "content": [{"type": "output_text", "text": "One card is to do.", "annotations": []}]}
        ]})),
    );
    let model = ResponsesClient::builder(format!("{}/v1", stub.url()), "gpt-test")
        .choice_policy(policy(AllowedMode::Auto))
        .build()
        .unwrap();
    let bodies = run_and_check(&model, &stub).await;
    assert_eq!(
        bodies[0]["tool_choice"],
        json!({"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "cards-count"}]})
    );
    assert_eq!(bodies[0]["tools"], bodies[1]["tools"]);
}

#[tokio::test]
async fn gemini_sends_allowed_function_names_validated_for_auto_and_any_for_required() {
    for (mode, wire_mode) in [(AllowedMode::Auto, "VALIDATED"), (AllowedMode::Required, "ANY")] {
        let stub = StubServer::start().await.unwrap();
        let path = gemini_generate("gemini-test");
        stub.respond(
            &path,
            StubResponse::json(&json!({"candidates": [{"index": 0, "finishReason": "STOP", "content": {
            "role": "model", "parts": [
                {"functionCall": {"name": "cards-count", "args": {"status": "todo"}}},
                {"functionCall": {"name": "read_task_cards", "args": {}}}
            ]}}]})),
        );
        stub.respond(
            &path,
            StubResponse::json(&json!({"candidates": [{"index": 0, "finishReason": "STOP", "content": {
                "role": "model", "parts": [{"text": "One card is to do."}]}}]})),
        );
        let model = GeminiClient::builder(format!("{}/v1beta", stub.url()), "gemini-test")
            .choice_policy(policy(mode))
            .build()
            .unwrap();
        let bodies = run_and_check(&model, &stub).await;
        assert_eq!(
            bodies[0]["toolConfig"],
            json!({"functionCallingConfig": {"mode": wire_mode, "allowedFunctionNames": ["cards-count"]}})
        );
        assert_eq!(bodies[1]["toolConfig"], json!({"functionCallingConfig": {"mode": "AUTO"}}));
        assert_eq!(bodies[0]["tools"], bodies[1]["tools"]);
    }
}

#[tokio::test]
async fn anthropic_has_no_such_form_so_the_turn_is_sent_only_the_allowed_tools() {
    let stub = StubServer::start().await.unwrap();
    stub.respond(
        ANTHROPIC_MESSAGES,
        StubResponse::json(&json!({"type": "message", "role": "assistant", "stop_reason": "tool_use", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "cards-count", "input": {"status": "todo"}},
            {"type": "tool_use", "id": "toolu_2", "name": "read_task_cards", "input": {}}
        ]})),
    );
    stub.respond(
        ANTHROPIC_MESSAGES,
        StubResponse::json(&json!({"type": "message", "role": "assistant", "stop_reason": "end_turn",
            "content": [{"type": "text", "text": "One card is to do."}]})),
    );
    let model = AnthropicClient::builder(stub.url(), "claude-test")
        .choice_policy(policy(AllowedMode::Required))
        .build()
        .unwrap();
    let bodies = run_and_check(&model, &stub).await;
    assert_eq!(bodies[0]["tool_choice"], json!({"type": "any"}));
    assert_eq!(names(&bodies[0]["tools"], "/name"), ["cards-count"]);
    assert!(names(&bodies[1]["tools"], "/name").contains(&"read_task_cards".to_owned()));
    assert_eq!(bodies[1]["tool_choice"], json!({"type": "auto"}));
    let loss = ToolChoice::allowed(["cards.count"], AllowedMode::Required).loss(Provider::Anthropic).unwrap();
    assert_eq!((loss.tool.as_str(), loss.at.as_str()), ("*", "/tool_choice"));
}

#[tokio::test]
async fn ollama_narrows_the_list_for_auto_and_refuses_required() {
    let stub = StubServer::start().await.unwrap();
    stub.respond(
        OLLAMA_CHAT,
        StubResponse::json(&json!({"model": "m", "done": true, "message": {"role": "assistant", "content": "",
        "tool_calls": [
            {"function": {"name": "cards.count", "arguments": {"status": "todo"}}},
            {"function": {"name": "read_task_cards", "arguments": {}}}
        ]}})),
    );
    stub.respond(
        OLLAMA_CHAT,
        StubResponse::json(&json!({"model": "m", "done": true,
            "message": {"role": "assistant", "content": "One card is to do."}})),
    );
    let model = OllamaClient::builder(stub.url(), "qwen3").choice_policy(policy(AllowedMode::Auto)).build().unwrap();
    let bodies = run_and_check(&model, &stub).await;
    assert_eq!(names(&bodies[0]["tools"], "/function/name"), ["cards.count"]);
    assert!(names(&bodies[1]["tools"], "/function/name").len() > 1);
    assert!(ToolChoice::allowed(["cards.count"], AllowedMode::Auto).loss(Provider::Ollama).is_some());

    let model =
        OllamaClient::builder(stub.url(), "qwen3").choice_policy(policy(AllowedMode::Required)).build().unwrap();
    let err = Agent::new(&model).run(&mut run(), &mut conversation()).await.unwrap_err();
    let AgentError::Model { error: ModelError::Config { message, .. }, .. } = &err else { panic!("{err:?}") };
    assert!(message.contains("cannot be forced"), "{message}");
}

#[tokio::test]
async fn an_allowed_name_the_turn_does_not_have_or_no_name_at_all_fails_before_any_request() {
    let stub = StubServer::start().await.unwrap();
    let base = format!("{}/v1", stub.url());
    for (choice, expected) in [
        (ToolChoice::allowed(["cards.count", "cards.shred"], AllowedMode::Auto), "`cards.shred`, which is not among"),
        (ToolChoice::allowed(Vec::<String>::new(), AllowedMode::Auto), "allows no tool"),
    ] {
        let model = OpenAiClient::builder(base.clone(), "gpt-test").tool_choice(choice).build().unwrap();
        let err = Agent::new(&model).run(&mut run(), &mut conversation()).await.unwrap_err();
        let AgentError::Model { error: ModelError::Config { message, .. }, .. } = &err else { panic!("{err:?}") };
        assert!(message.contains(expected), "{message}");
    }
    assert!(stub.requests().is_empty(), "nothing was sent");
}
