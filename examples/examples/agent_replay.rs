//! The agent loop over the incident desk, driven by recorded model responses (no model server involved).
//!
//! ```text
//! cargo run -p examples --example agent_replay
//! ```
//!
//! The same loop runs against a live model by swapping the model: `OllamaClient::new("http://localhost:11434",
//! "qwen3")` or `OpenAiClient::builder("https://api.openai.com/v1", "gpt-4.1-mini").api_key(..)`.

use examples::desk;
use keel_tools_agent::{Agent, Message, Replay, transcript};
use keel_tools_core::Approval;
use keel_tools_core::executor::CallOptions;
use keel_tools_core::runs::Run;
use serde_json::json;

/// Recorded responses: a lookup and a ticket in one response, then a final answer.
const SCRIPT: &str = include_str!("../../tests/fixtures/agent/desk.jsonl");
const SOURCE: &str = "tests/fixtures/agent/desk.jsonl";
const QUESTION: &str = "Login keeps returning 502. Look at INC-001 and open a ticket for it.";

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "keel_tools_core=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();

    println!("== Run 1: no approvals. create_ticket is a `write` tool, so the run stops for a human.\n");
    let replay = Replay::from_jsonl(SCRIPT, SOURCE).expect("the script is valid JSON Lines");
    let mut run = Run::builder(desk::executor()).id("desk-1").build();
    let mut messages =
        vec![Message::system("You are the on-call assistant of the incident desk."), Message::user(QUESTION)];
    let outcome = Agent::new(&replay).max_turns(4).run(&mut run, &mut messages).await.expect("the replay is complete");
    print(&replay, &messages, &run, &outcome);

    println!("\n== Run 2: a human approved exactly the proposed ticket; the same recording runs to the end.\n");
    let approval =
        Approval::new("create_ticket", &json!({"incident_id": "INC-001", "title": "auth-api returns 502 on login"}));
    let replay = Replay::from_jsonl(SCRIPT, SOURCE).expect("the script is valid JSON Lines");
    let mut run = Run::builder(desk::executor()).id("desk-2").options(CallOptions::new().approve(approval)).build();
    let mut messages =
        vec![Message::system("You are the on-call assistant of the incident desk."), Message::user(QUESTION)];
    let outcome = Agent::new(&replay).max_turns(4).run(&mut run, &mut messages).await.expect("the replay is complete");
    print(&replay, &messages, &run, &outcome);
}

fn print(replay: &Replay, messages: &[Message], run: &Run, outcome: &keel_tools_agent::AgentOutcome) {
    for line in transcript(replay, messages) {
        println!("{line}");
    }
    println!();
    for event in run.log().events() {
        println!("{}", event.display_line());
    }
    println!(
        "\noutcome: {} ({}) after {} turn(s), {} executed call(s), mode: {}",
        outcome.terminal, outcome.reason, outcome.turns, outcome.steps, outcome.mode
    );
}
