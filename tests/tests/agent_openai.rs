//! The real OpenAI-compatible client, over HTTP, against a local stub that answers `/v1/chat/completions` from
//! recorded responses: wire names out and back, `arguments` as JSON text, `tool_call_id` on every result.

use examples::cards;
use keel_tools_agent::stub::{OPENAI_CHAT, StubResponse, StubServer};
use keel_tools_agent::{Agent, Message, OpenAiClient};
use keel_tools_core::Provider;
use keel_tools_core::events::Decision;
use keel_tools_core::runs::Run;
use serde_json::{Value, json};

// The card tool `cards.count` these tests add to the demo's card tools is declared once for the binary, in
// tests/tests/with_peers.rs.

const FIXTURE: &str = include_str!("../fixtures/agent/openai_cards.jsonl");

fn conversation() -> Vec<Message> {
    vec![Message::user("How many cards are still to do, and which?")]
}

#[tokio::test]
async fn wire_names_text_arguments_and_tool_call_ids() {
    let stub = StubServer::start().await.unwrap();
    stub.respond_jsonl(OPENAI_CHAT, FIXTURE).unwrap();
    let model = OpenAiClient::builder(format!("{}/v1", stub.url()), "qwen3:8b").api_key("test-key").build().unwrap();
    let mut run = Run::builder(cards::executor(cards::store(true))).decider(cards::bureau_decider).build();
    let view = run.executor().view().clone();
    assert!(view.contains("cards.count"), "the dotted tool is in the bureau's view");
    let mut messages = conversation();

    let outcome = Agent::new(&model).run(&mut run, &mut messages).await.unwrap();

    assert_eq!((outcome.terminal, outcome.reason.as_str()), (Decision::Done, "model_finished"));
    assert_eq!(outcome.answer.as_deref(), Some("One card is still to do: T-2 \"write the postmortem\"."));
    assert_eq!((outcome.turns, outcome.steps), (2, 2));

    let requests = stub.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(r.path, OPENAI_CHAT);
        assert_eq!(r.authorization.as_deref(), Some("Bearer test-key"));
        assert_eq!(r.body["model"], "qwen3:8b");
        // OpenAI's rendering of exactly the executor's view; the dotted name goes out as its wire name.
        assert_eq!(r.body["tools"], Value::Array(view.schemas(Provider::OpenAiChat).to_vec()));
    }
    let names: Vec<&str> =
        requests[0].body["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"cards-count") && !names.contains(&"cards.count"), "{names:?}");

    // The assistant message is echoed as received (wire names, JSON text), then one tool message per call.
    let sent = requests[1].body["messages"].as_array().unwrap();
    let recorded: Value = serde_json::from_str(FIXTURE.lines().next().unwrap()).unwrap();
    assert_eq!(sent[1], recorded["choices"][0]["message"]);
    assert_eq!(sent[2], json!({"role": "tool", "tool_call_id": "call_x1f3k9qa", "content": "1"}));
    assert_eq!(sent[3]["role"], "tool");
    assert_eq!(sent[3]["tool_call_id"], "call_p2m7d4zt");
    assert!(sent[3].get("tool_name").is_none(), "Chat Completions tool messages carry only tool_call_id");

    // Inside keel the call ran under its registered name.
    let Message::Tool(counted) = &messages[2] else { panic!("{:?}", messages[2]) };
    assert_eq!((counted.tool_name.as_str(), counted.call_id.as_str()), ("cards.count", "call_x1f3k9qa"));
    assert_eq!(counted.data(), Some(&json!(1)));
    let Message::Assistant(first) = &messages[1] else { panic!() };
    assert_eq!(first.calls[0].name(), "cards.count");
}

#[tokio::test]
async fn unparsable_arguments_are_answered_not_crashed_on() {
    let stub = StubServer::start().await.unwrap();
    stub.respond(
        OPENAI_CHAT,
        StubResponse::json(&json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "validate_task_card", "arguments": "{\"task_id\": "}}]},
            "finish_reason": "tool_calls"}]})),
    );
    stub.respond(
        OPENAI_CHAT,
        StubResponse::json(&json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "Sorry."}}]})),
    );
    let model = OpenAiClient::new(format!("{}/v1/", stub.url()), "m").unwrap();
    let mut run = Run::new(cards::executor(cards::store(true)));
    let mut messages = conversation();
    let outcome = Agent::new(&model).run(&mut run, &mut messages).await.unwrap();
    assert_eq!(outcome.terminal, Decision::Done);
    let tool_message = &stub.requests()[1].body["messages"][2];
    assert_eq!(tool_message["tool_call_id"], "call_1");
    let content: Value = serde_json::from_str(tool_message["content"].as_str().unwrap()).unwrap();
    assert_eq!(content["error"]["code"], "invalid_arguments");
    assert!(stub.requests()[0].authorization.is_none());
}

#[tokio::test]
async fn an_error_body_is_a_typed_error() {
    let stub = StubServer::start().await.unwrap();
    stub.respond(
        OPENAI_CHAT,
        StubResponse::raw(401, r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#),
    );
    let model = OpenAiClient::new(format!("{}/v1", stub.url()), "m").unwrap();
    let mut run = Run::new(cards::executor(cards::store(true)));
    let e = Agent::new(&model).run(&mut run, &mut conversation()).await.unwrap_err();
    assert!(e.to_string().ends_with("answered 401: Incorrect API key provided"), "{e}");
}
