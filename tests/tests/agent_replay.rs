//! The replay model drives the same loop without a server, and says so.

use examples::{cards, desk};
use keel_tools_agent::stub::{OLLAMA_CHAT, StubServer};
use keel_tools_agent::{
    Agent, AgentError, ChatModel, Message, Mode, ModelError, OllamaClient, Replay, ReplayOrigin, transcript,
};
use keel_tools_core::Approval;
use keel_tools_core::events::Decision;
use keel_tools_core::executor::CallOptions;
use keel_tools_core::runs::Run;
use serde_json::json;

const CARDS: &str = include_str!("../fixtures/agent/ollama_cards.jsonl");
const DESK: &str = include_str!("../fixtures/agent/desk.jsonl");

fn cards_run() -> Run {
    Run::builder(cards::executor(cards::store(true))).decider(cards::bureau_decider).build()
}

fn events(run: &Run) -> Vec<String> {
    run.log().events().iter().map(|e| e.display_line()).collect()
}

#[tokio::test]
async fn replay_and_http_go_through_the_same_loop() {
    let replay = Replay::from_jsonl(CARDS, "ollama_cards.jsonl").unwrap();
    let mut replay_run = cards_run();
    let mut replayed = vec![Message::user("Which cards are open?")];
    let a = Agent::new(&replay).run(&mut replay_run, &mut replayed).await.unwrap();

    let stub = StubServer::start().await.unwrap();
    stub.respond_jsonl(OLLAMA_CHAT, CARDS).unwrap();
    let live = OllamaClient::new(stub.url(), "qwen3:8b").unwrap();
    let mut live_run = cards_run();
    let mut over_http = vec![Message::user("Which cards are open?")];
    let b = Agent::new(&live).run(&mut live_run, &mut over_http).await.unwrap();

    assert_eq!(a.mode, Mode::Replay);
    assert_eq!(b.mode, Mode::Live);
    assert_eq!(
        (a.terminal, &a.reason, &a.answer, a.turns, a.steps),
        (b.terminal, &b.reason, &b.answer, b.turns, b.steps)
    );
    assert_eq!(events(&replay_run), events(&live_run), "same ids, same observations, same decisions");
    let t_replay = transcript(&replay, &replayed);
    assert_eq!(
        t_replay[..3],
        [
            "mode: replay",
            "origin: synthetic_script ollama_cards.jsonl (2 responses; written by hand, not a model's output)",
            "note: a replay shows how the harness handles these responses, not how a model behaves",
        ]
    );
    assert_eq!(transcript(&live, &over_http)[0], "mode: live");
    // Message by message, the conversations are the same; only the mark differs.
    let replay_lines: Vec<String> = replayed.iter().map(Message::display_line).collect();
    let live_lines: Vec<String> = over_http.iter().map(|m| m.display_line().replace("(live)", "(replay)")).collect();
    assert_eq!(replay_lines, live_lines);
    assert_eq!(t_replay[3..], replay_lines[..]);

    // The replay saw exactly the executor's view on every turn.
    let seen = replay.seen();
    assert_eq!(seen.len(), 2);
    let view_names: Vec<String> = cards_run().executor().view().names().map(str::to_owned).collect();
    assert!(seen.iter().all(|t| t.tools == view_names));
    assert_eq!(seen[1].messages.len(), 4);
    assert_eq!(replay.remaining(), 0);
}

#[tokio::test]
async fn desk_write_needs_approval_then_runs_when_approved() {
    // Without an approval: the lookup runs, the ticket is refused before its handler, the run needs a human.
    let replay = Replay::from_jsonl(DESK, "desk.jsonl").unwrap();
    let mut run = Run::builder(desk::executor()).id("desk-1").build();
    let mut messages = vec![Message::user("Login returns 502. Look at INC-001 and open a ticket.")];
    let outcome = Agent::new(&replay).run(&mut run, &mut messages).await.unwrap();
    assert_eq!((outcome.terminal, outcome.reason.as_str()), (Decision::NeedsInput, "after_observation"));
    assert_eq!((outcome.turns, outcome.steps), (1, 1));
    let Message::Tool(ticket) = messages.last().unwrap() else { panic!() };
    assert_eq!(ticket.code(), Some("approval_required"));
    assert!(!ticket.executed);
    assert_eq!(replay.remaining(), 1, "no second turn after needs_input");

    // The human approves exactly the proposed arguments; a new run goes through.
    let args = json!({"incident_id": "INC-001", "title": "auth-api returns 502 on login"});
    let replay = Replay::from_jsonl(DESK, "desk.jsonl").unwrap();
    let mut run = Run::builder(desk::executor())
        .id("desk-2")
        .options(CallOptions::new().approve(Approval::new("create_ticket", &args)))
        .build();
    let mut messages = vec![Message::user("Login returns 502. Look at INC-001 and open a ticket.")];
    let outcome = Agent::new(&replay).run(&mut run, &mut messages).await.unwrap();
    assert_eq!((outcome.terminal, outcome.turns, outcome.steps), (Decision::Done, 2, 2));
    let Message::Tool(ticket) = &messages[3] else { panic!() };
    assert_eq!(ticket.data(), Some(&json!({"ticket_id": "TCK-001", "incident_id": "INC-001"})));
    let lines = transcript(&replay, &messages);
    assert_eq!(lines[0], "mode: replay");
    assert!(lines.last().unwrap().starts_with("assistant (replay): INC-001 is a high-severity"), "{lines:#?}");
}

#[tokio::test]
async fn an_exhausted_script_is_an_error_not_a_hang() {
    let replay =
        Replay::from_jsonl(DESK.lines().next().unwrap(), "first line").unwrap().with_origin(ReplayOrigin::Recorded);
    assert_eq!(replay.mode(), Mode::Replay);
    assert_eq!(replay.label(), "recorded first line (1 responses; captured from a model server earlier, replayed now)");
    let args = json!({"incident_id": "INC-001", "title": "auth-api returns 502 on login"});
    let mut run = Run::builder(desk::executor())
        .options(CallOptions::new().approve(Approval::new("create_ticket", &args)))
        .build();
    let e = Agent::new(&replay).run(&mut run, &mut vec![Message::user("go")]).await.unwrap_err();
    assert_eq!(e, AgentError::Model { turn: 2, error: ModelError::ReplayExhausted { turn: 2, responses: 1 } });
    assert_eq!(run.terminal(), Some(Decision::Error));
}

#[test]
fn a_bad_script_is_refused_when_loaded() {
    let e = Replay::from_jsonl("{\"message\": {}}\n\nnot json\n", "x").unwrap_err();
    assert!(
        matches!(&e, ModelError::Replay { line: 3, message, source: Some(_) } if message == "not JSON (column 2)"),
        "{e:?}"
    );
    let e = Replay::from_jsonl("{\"answer\": 42}", "x").unwrap_err();
    assert!(e.to_string().starts_with("replay script, line 1: not a response of a known API"), "{e}");
    assert!(Replay::from_file("no/such/file.jsonl").is_err());
}
