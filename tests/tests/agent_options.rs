//! Request options on both clients, over HTTP against the local stub: the tool choice per turn (a named tool sent
//! as its wire name), temperature, seed and the most tokens, and what Ollama's `/api/chat` cannot do.

use examples::cards;
use keel_tools_agent::stub::{OLLAMA_CHAT, OPENAI_CHAT, StubServer};
use keel_tools_agent::{Agent, AgentError, ChoicePolicy, Message, ModelError, OllamaClient, OpenAiClient, ToolChoice};
use keel_tools_core::events::Decision;
use keel_tools_core::runs::Run;
use serde_json::json;

// The card tool `cards.count` these tests add to the demo's card tools is declared once for the binary, in
// tests/tests/with_peers.rs.

const OPENAI: &str = include_str!("../fixtures/agent/openai_cards.jsonl");
const OLLAMA: &str = include_str!("../fixtures/agent/ollama_cards.jsonl");

fn run() -> Run {
    Run::builder(cards::executor(cards::store(true))).decider(cards::bureau_decider).build()
}

fn conversation() -> Vec<Message> {
    vec![Message::user("How many cards are still to do, and which?")]
}

/// The bureau's dotted tool, whose wire name differs.
fn dotted_tool(run: &Run) -> String {
    assert!(run.executor().view().contains("cards.count"));
    "cards.count".to_owned()
}

#[tokio::test]
async fn openai_forces_the_first_turn_by_wire_name_and_leaves_the_next_to_the_model() {
    let stub = StubServer::start().await.unwrap();
    stub.respond_jsonl(OPENAI_CHAT, OPENAI).unwrap();
    let mut run = run();
    let forced = dotted_tool(&run);
    let model = OpenAiClient::builder(format!("{}/v1", stub.url()), "qwen3:8b")
        .choice_policy(ChoicePolicy::first_then(ToolChoice::tool(forced.clone()), ToolChoice::Auto))
        .temperature(0.0)
        .seed(1)
        .max_tokens(256)
        .field("temperature", 0.9)
        .build()
        .unwrap();
    let outcome = Agent::new(&model).run(&mut run, &mut conversation()).await.unwrap();
    assert_eq!(outcome.terminal, Decision::Done);
    let requests = stub.requests();
    assert_eq!(requests.len(), 2);
    let wire = keel_tools_core::name::to_wire(&forced);
    assert_ne!(wire, forced);
    assert_eq!(requests[0].body["tool_choice"], json!({"type": "function", "function": {"name": wire}}));
    assert_eq!(requests[1].body["tool_choice"], "auto");
    for r in &requests {
        // The option wins over the same field given by hand.
        assert_eq!((r.body["temperature"].clone(), r.body["seed"].clone()), (json!(0.0), json!(1)));
        assert_eq!(r.body["max_tokens"], 256);
    }
}

#[tokio::test]
async fn a_choice_naming_a_tool_the_turn_does_not_have_fails_before_any_request() {
    let stub = StubServer::start().await.unwrap();
    stub.respond_jsonl(OPENAI_CHAT, OPENAI).unwrap();
    let model = OpenAiClient::builder(format!("{}/v1", stub.url()), "qwen3:8b")
        .tool_choice(ToolChoice::tool("cards.shred"))
        .build()
        .unwrap();
    let err = Agent::new(&model).run(&mut run(), &mut conversation()).await.unwrap_err();
    let AgentError::Model { error: ModelError::Config { message, .. }, .. } = &err else { panic!("{err:?}") };
    assert!(message.contains("`cards.shred`, which is not among this turn's tools"), "{message}");
    assert!(stub.requests().is_empty(), "nothing was sent");
}

#[tokio::test]
async fn ollama_sends_the_options_and_none_leaves_the_tools_out() {
    let stub = StubServer::start().await.unwrap();
    stub.respond_jsonl(OLLAMA_CHAT, OLLAMA).unwrap();
    let model = OllamaClient::builder(stub.url(), "qwen3:8b")
        .option("num_ctx", 4096)
        .option("seed", 99)
        .temperature(0.2)
        .seed(7)
        .max_tokens(64)
        .choice_policy(ChoicePolicy::first_then(ToolChoice::Auto, ToolChoice::None))
        .build()
        .unwrap();
    let _ = Agent::new(&model).run(&mut run(), &mut conversation()).await.unwrap();
    let requests = stub.requests();
    assert!(requests.len() >= 2, "{}", requests.len());
    assert_eq!(requests[0].body["options"], json!({"num_ctx": 4096, "seed": 7, "temperature": 0.2, "num_predict": 64}));
    assert!(requests[0].body["tools"].is_array(), "the first turn has its tools");
    assert!(requests[1].body.get("tools").is_none(), "`none`: the turn is sent without tools");
}

#[tokio::test]
async fn ollama_cannot_force_a_call_and_says_where_it_can() {
    let stub = StubServer::start().await.unwrap();
    stub.respond_jsonl(OLLAMA_CHAT, OLLAMA).unwrap();
    let model = OllamaClient::builder(stub.url(), "qwen3:8b").tool_choice(ToolChoice::Required).build().unwrap();
    let err = Agent::new(&model).run(&mut run(), &mut conversation()).await.unwrap_err();
    let AgentError::Model { error: ModelError::Config { message, .. }, .. } = &err else { panic!("{err:?}") };
    assert!(message.contains("has no tool_choice") && message.contains("/v1"), "{message}");
    assert!(stub.requests().is_empty());
}
