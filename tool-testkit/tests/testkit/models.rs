//! TestModel and ScriptedModel through the agent loop.

use keel_tools_agent::{Agent, AgentError, Message, ModelError, WireFormat};
use keel_tools_core::definition::{Effect, ToolDefinition};
use keel_tools_core::events::Decision;
use keel_tools_core::runs::Run;
use keel_tools_core::{Executor, Registry, ToolView, tool};
use keel_tools_testkit::{ScriptedModel, ScriptedTurn, TestModel};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// Searches the notes.
#[tool(name = "notes.search", effect = "read", version = "1.0")]
fn notes_search(query: String, #[arg(description = "At most this many")] limit: Option<u8>) -> Vec<String> {
    let n = usize::from(limit.unwrap_or(2)).min(2);
    (0..n).map(|i| format!("note {i} about {}", query.chars().count())).collect()
}

/// What to count.
#[derive(Debug, Deserialize, JsonSchema)]
struct CountArgs {
    /// The text.
    text: String,
}

/// Counts the words of a text.
#[tool(effect = "read", version = "1.0")]
fn word_count(args: CountArgs) -> usize {
    args.text.split_whitespace().count()
}

/// Closes a note.
#[tool(effect = "write", version = "1.0")]
fn close_note(note_id: String) -> String {
    format!("{note_id} closed")
}

fn view(names: &[&str]) -> ToolView {
    Registry::from_inventory().unwrap().view().names(names.iter().copied()).build().unwrap()
}

fn new_run(view: ToolView) -> Run {
    Run::new(Executor::new(view).unwrap())
}

#[tokio::test]
async fn the_test_model_calls_every_tool_then_answers_with_the_results() {
    let model = TestModel::new().seed(3);
    let mut run = new_run(view(&["notes.search", "word_count"]));
    let mut messages = vec![Message::user("Search and count.")];
    let outcome = Agent::new(&model).run(&mut run, &mut messages).await.unwrap();
    assert_eq!(outcome.terminal, Decision::Done);
    assert_eq!((outcome.turns, outcome.steps), (2, 2));
    let answer: Value = serde_json::from_str(outcome.answer.as_deref().unwrap()).unwrap();
    assert!(answer["notes.search"].is_array(), "{answer}");
    assert!(answer["word_count"].is_u64(), "{answer}");

    // Sent as OpenAI sends them: the wire name, arguments as JSON text; read back to the registered name.
    let sent = model.sent();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].format, WireFormat::OpenAiChat);
    let wire_names: Vec<&str> = sent[0].wire["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(wire_names, ["notes-search", "word_count"]);
    assert!(sent[0].wire["tool_calls"][0]["function"]["arguments"].is_string());
    let names: Vec<&str> = sent[0].calls.iter().map(|c| c.name()).collect();
    assert_eq!(names, ["notes.search", "word_count"]);
    assert!(sent[1].calls.is_empty());
    // What it was shown, turn by turn.
    let seen = model.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].tools, ["notes.search", "word_count"]);
    assert_eq!(seen[1].messages.len(), 4);
    assert!(model.notes().is_empty());
    assert!(keel_tools_agent::transcript(&model, &messages)[1].contains("test model (seed 3)"));
}

#[tokio::test]
async fn the_same_seed_sends_the_same_calls() {
    let arguments = |seed| async move {
        let model = TestModel::new().seed(seed);
        let mut run = new_run(view(&["notes.search", "word_count"]));
        Agent::new(&model).run(&mut run, &mut vec![Message::user("?")]).await.unwrap();
        model.sent()[0].calls.iter().map(|c| c.arguments().unwrap().clone()).collect::<Vec<_>>()
    };
    assert_eq!(arguments(7).await, arguments(7).await);
    let first = arguments(7).await;
    let mut others = Vec::new();
    for seed in 8..11 {
        others.push(arguments(seed).await);
    }
    assert!(others.iter().any(|o| *o != first), "other seeds give other arguments");
}

#[tokio::test]
async fn a_subset_a_final_text_and_ollamas_format() {
    let model = TestModel::new().tools(["word_count", "not_shown"]).final_text("All done.").format(WireFormat::Ollama);
    let mut run = new_run(view(&["notes.search", "word_count"]));
    let mut messages = vec![Message::user("Count.")];
    let outcome = Agent::new(&model).run(&mut run, &mut messages).await.unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("All done."));
    let sent = model.sent();
    assert_eq!(sent[0].calls.len(), 1);
    assert_eq!(sent[0].format, WireFormat::Ollama);
    assert_eq!(sent[0].wire["tool_calls"][0]["function"]["name"], "word_count");
    assert!(sent[0].wire["tool_calls"][0]["function"]["arguments"]["text"].is_string());
}

#[tokio::test]
async fn a_write_tool_stops_the_run_for_approval() {
    let model = TestModel::new();
    let mut run = new_run(view(&["close_note", "notes.search"]));
    let outcome = Agent::new(&model).run(&mut run, &mut vec![Message::user("Close it.")]).await.unwrap();
    // `close_note` comes first (name order) and needs an approval: the rest of the batch does not run.
    assert_eq!(outcome.terminal, Decision::NeedsInput);
    assert_eq!(outcome.not_executed.len(), 1);
}

#[tokio::test]
async fn without_tools_it_answers_at_once() {
    let model = TestModel::new();
    let mut run = new_run(view(&[]));
    let outcome = Agent::new(&model).run(&mut run, &mut vec![Message::user("Hi")]).await.unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("success (no tool calls)"));
}

#[tokio::test]
async fn a_schema_it_does_not_understand_is_called_with_an_empty_object_and_noted() {
    let odd = ToolDefinition::builder("odd")
        .description("Takes anything but a string.")
        .effect(Effect::Read)
        .input_schema(json!({"type": "object", "properties": {"x": {"not": {"type": "string"}}}, "required": ["x"]}))
        .handler(|_args: Value, _ctx| async { Ok(json!("ran")) })
        .build()
        .unwrap();
    let view = Registry::builder().without_inventory().tool(odd).build().unwrap().all().clone();
    let model = TestModel::new();
    let outcome = Agent::new(&model).run(&mut new_run(view), &mut vec![Message::user("?")]).await.unwrap();
    // `{}` lacks the required `x`: the executor refuses it, and the answer says so.
    assert_eq!(outcome.answer.as_deref(), Some(r#"{"odd":{"error":"invalid_arguments"}}"#));
    assert_eq!(model.sent()[0].calls[0].arguments().unwrap(), &json!({}));
    assert!(model.notes()[0].contains("`not`"), "{:?}", model.notes());
}

#[tokio::test]
async fn a_scripted_model_plays_its_turns() {
    let model = ScriptedModel::new()
        .turn(
            ScriptedTurn::new()
                .text("Searching.")
                .call("notes.search", json!({"query": "disk", "limit": 1}))
                .call_text("word_count", "{not json"),
        )
        .text("One note.");
    assert_eq!(model.remaining(), 2);
    let mut run = new_run(view(&["notes.search", "word_count"]));
    let mut messages = vec![Message::user("Find notes.")];
    let outcome = Agent::new(&model).run(&mut run, &mut messages).await.unwrap();
    assert_eq!((outcome.terminal, outcome.answer.as_deref()), (Decision::Done, Some("One note.")));
    assert_eq!(model.remaining(), 0);
    let results: Vec<_> = messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(results[0].data(), Some(&json!(["note 0 about 4"])));
    assert_eq!(results[1].code(), Some("invalid_arguments"));
    let sent = model.sent();
    assert_eq!(sent[0].content, "Searching.");
    assert_eq!(sent[0].wire["tool_calls"][0]["function"]["name"], "notes-search");
    assert_eq!(sent[0].wire["tool_calls"][1]["function"]["arguments"], "{not json");
}

#[tokio::test]
async fn an_unknown_tool_and_the_end_of_the_script() {
    let model = ScriptedModel::new().calls([("delete_everything", json!({}))]);
    let mut run = new_run(view(&["word_count"]));
    let mut messages = vec![Message::user("?")];
    let outcome = Agent::new(&model).run(&mut run, &mut messages).await.unwrap();
    assert_eq!(outcome.terminal, Decision::Error);
    assert!(matches!(&messages[2], Message::Tool(r) if r.code() == Some("unknown_tool")));

    let model = ScriptedModel::new().calls([("word_count", json!({"text": "a b"}))]);
    let mut run = new_run(view(&["word_count"]));
    let e = Agent::new(&model).run(&mut run, &mut vec![Message::user("?")]).await.unwrap_err();
    assert!(
        matches!(e, AgentError::Model { turn: 2, error: ModelError::ReplayExhausted { turn: 2, responses: 1 } }),
        "{e:?}"
    );
}
