//! Strict mode chosen on the clients ([`Strict`]), over HTTP against the local stub: Anthropic's strict tool use
//! sent only when asked for and only for the tools that can take it, a strict-shaped call (a `null` for an optional
//! property left out) brought back to the canonical arguments before validation, OpenAI's strict mode turned off,
//! and `Strict::Required` refusing a turn with a tool that cannot be strict, naming it and why.

use std::collections::BTreeMap;

use keel_tools_agent::stub::{ANTHROPIC_MESSAGES, OPENAI_CHAT, StubResponse, StubServer};
use keel_tools_agent::{Agent, AgentError, AnthropicClient, Message, ModelError, OpenAiClient};
use keel_tools_core::events::Decision;
use keel_tools_core::runs::Run;
use keel_tools_core::{Executor, Registry, Strict, ToolResult, tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// Arguments of `strict.note`.
#[derive(Debug, Deserialize, JsonSchema)]
struct NoteArgs {
    /// The note.
    id: String,
    /// How many lines.
    #[serde(default)]
    lines: u32,
}

/// Reads a note.
#[tool(name = "strict.note", effect = "read", version = "1.0", tags = ["strict-test"])]
fn strict_note(args: NoteArgs) -> String {
    format!("{} ({} lines)", args.id, args.lines)
}

/// Labels a note: a map, which no strict mode takes.
#[tool(name = "strict.label", effect = "read", version = "1.0", tags = ["strict-test"])]
fn strict_label(labels: BTreeMap<String, String>) -> usize {
    labels.len()
}

fn new_run(only_note: bool) -> Run {
    let registry = Registry::from_inventory().unwrap();
    let view = if only_note {
        registry.view().names(["strict.note"]).build().unwrap()
    } else {
        registry.view().tag("strict-test").build().unwrap()
    };
    Run::new(Executor::new(view).unwrap())
}

fn tool_named<'a>(tools: &'a Value, name: &str, pointer: &str) -> &'a Value {
    tools
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t.pointer(pointer) == Some(&json!(name))))
        .unwrap_or_else(|| panic!("no {name} in {tools}"))
}

#[tokio::test]
async fn anthropic_strict_when_possible_and_a_null_for_an_optional_property_is_read_as_absent() {
    let stub = StubServer::start().await.unwrap();
    stub.respond(
        ANTHROPIC_MESSAGES,
        StubResponse::json(&json!({"type": "message", "role": "assistant", "stop_reason": "tool_use", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "strict-note", "input": {"id": "n-1", "lines": null}}
        ]})),
    );
    stub.respond(
        ANTHROPIC_MESSAGES,
        StubResponse::json(&json!({"type": "message", "role": "assistant", "stop_reason": "end_turn",
            "content": [{"type": "text", "text": "Read it."}]})),
    );
    let model = AnthropicClient::builder(stub.url(), "claude-test").strict(Strict::WhenPossible).build().unwrap();
    let mut run = new_run(false);
    let mut messages = vec![Message::user("Read n-1.")];
    let outcome = Agent::new(&model).run(&mut run, &mut messages).await.unwrap();
    assert_eq!(outcome.terminal, Decision::Done);
    let result: &ToolResult = messages
        .iter()
        .find_map(|m| match m {
            Message::Tool(r) => Some(r),
            _ => None,
        })
        .unwrap();
    assert!(result.is_ok(), "the strict-shaped null is an absent property: {result:?}");
    assert_eq!(result.data(), Some(&json!("n-1 (0 lines)")));

    let body = &stub.requests()[0].body;
    let note = tool_named(&body["tools"], "strict-note", "/name");
    assert_eq!(note["strict"], true);
    assert_eq!(note["input_schema"]["additionalProperties"], false);
    assert_eq!(note["input_schema"]["required"], json!(["id"]), "optional stays optional for Anthropic");
    let label = tool_named(&body["tools"], "strict-label", "/name");
    assert!(label.get("strict").is_none(), "a map cannot be strict: sent without");

    // Without the setting, nothing is strict.
    let stub = StubServer::start().await.unwrap();
    stub.respond(
        ANTHROPIC_MESSAGES,
        StubResponse::json(&json!({"type": "message", "role": "assistant", "stop_reason": "end_turn",
            "content": [{"type": "text", "text": "Hello."}]})),
    );
    let model = AnthropicClient::builder(stub.url(), "claude-test").build().unwrap();
    Agent::new(&model).run(&mut new_run(false), &mut vec![Message::user("Hi.")]).await.unwrap();
    let body = &stub.requests()[0].body;
    assert!(body["tools"].as_array().unwrap().iter().all(|t| t.get("strict").is_none()), "{}", body["tools"]);
}

#[tokio::test]
async fn required_refuses_a_turn_with_a_tool_that_cannot_be_strict_naming_it() {
    let stub = StubServer::start().await.unwrap();
    let anthropic = AnthropicClient::builder(stub.url(), "claude-test").strict(Strict::Required).build().unwrap();
    let openai =
        OpenAiClient::builder(format!("{}/v1", stub.url()), "gpt-test").strict(Strict::Required).build().unwrap();
    for (model, provider) in [(&anthropic as &dyn keel_tools_agent::ChatModel, "anthropic"), (&openai, "openai-chat")] {
        let err = Agent::new(model).run(&mut new_run(false), &mut vec![Message::user("Hi.")]).await.unwrap_err();
        let AgentError::Model { error: ModelError::Config { message, .. }, .. } = &err else { panic!("{err:?}") };
        assert!(message.contains(&format!("cannot be strict for {provider}")), "{message}");
        assert!(message.contains("`strict.label`: field `labels` is a map"), "{message}");
        assert!(!message.contains("`strict.note`"), "{message}");
    }
    assert!(stub.requests().is_empty(), "nothing was sent");

    // With only tools that can be strict, the turn goes.
    stub.respond(
        ANTHROPIC_MESSAGES,
        StubResponse::json(&json!({"type": "message", "role": "assistant", "stop_reason": "end_turn",
            "content": [{"type": "text", "text": "Hello."}]})),
    );
    Agent::new(&anthropic).run(&mut new_run(true), &mut vec![Message::user("Hi.")]).await.unwrap();
    assert_eq!(stub.requests()[0].body["tools"][0]["strict"], true);
}

#[tokio::test]
async fn openai_strict_off_sends_every_tool_loose() {
    let stub = StubServer::start().await.unwrap();
    stub.respond(
        OPENAI_CHAT,
        StubResponse::json(&json!({"choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Hello."}}]})),
    );
    stub.respond(
        OPENAI_CHAT,
        StubResponse::json(&json!({"choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Hello."}}]})),
    );
    let base = format!("{}/v1", stub.url());
    let auto = OpenAiClient::builder(base.clone(), "gpt-test").build().unwrap();
    let off = OpenAiClient::builder(base, "gpt-test").strict(Strict::Off).build().unwrap();
    for model in [&auto, &off] {
        Agent::new(model).run(&mut new_run(true), &mut vec![Message::user("Hi.")]).await.unwrap();
    }
    let requests = stub.requests();
    let (auto, off) = (&requests[0].body["tools"][0]["function"], &requests[1].body["tools"][0]["function"]);
    assert_eq!((auto["strict"].clone(), off["strict"].clone()), (json!(true), json!(false)));
    assert_eq!(auto["parameters"]["required"], json!(["id", "lines"]), "strict: every property required");
    assert_eq!(off["parameters"]["required"], json!(["id"]), "off: the canonical schema");
    assert_eq!(off["parameters"]["properties"]["lines"]["type"], "integer");
}
