//! The task-card bureau and its three batch scenarios.

use std::sync::Mutex;

use keel_tools_core::events::Decision;
use keel_tools_core::runs::{BatchOutcome, Decider, DefaultDecider, Run, RunState, StopPolicy};
use keel_tools_core::{Executor, Registry, State, ToolCall, ToolError, ToolResult, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The cards a bureau works on; `available: false` simulates the missing file.
#[derive(Debug)]
pub struct CardStore {
    /// Whether the card file can be read.
    pub available: bool,
    /// The cards.
    pub cards: Vec<TaskCard>,
    /// Ids validated so far.
    pub validated: Mutex<Vec<String>>,
}

/// One task card.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TaskCard {
    /// The card id.
    pub task_id: String,
    /// The card title.
    pub title: String,
    /// `todo`, `doing` or `done`.
    pub status: String,
}

fn cards_unavailable() -> ToolError {
    keel_tools_core::tool_error!("cards_unavailable", "the task cards are unavailable")
}

/// Read every task card of the bureau.
#[tool(effect = "read", version = "1.0", tags = ["cards"])]
pub fn read_task_cards(store: State<CardStore>) -> Result<Vec<TaskCard>, ToolError> {
    if !store.available {
        return Err(cards_unavailable());
    }
    Ok(store.cards.clone())
}

/// Check that a task card exists and is well formed.
#[tool(effect = "read", version = "1.0", tags = ["cards"])]
pub fn validate_task_card(
    store: State<CardStore>,
    #[arg(description = "The id of the card to check, e.g. T-1")] task_id: String,
) -> Result<bool, ToolError> {
    if !store.available {
        return Err(cards_unavailable());
    }
    if !store.cards.iter().any(|c| c.task_id == task_id) {
        return Err(keel_tools_core::tool_error!("card_not_found", "there is no card with that id")
            .with_details(json!({ "task_id": task_id })));
    }
    store.validated.lock().unwrap_or_else(|p| p.into_inner()).push(task_id);
    Ok(true)
}

/// Arguments of [`build_status_report`].
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReportArgs {
    /// Include done cards too.
    #[serde(default)]
    pub include_done: Option<bool>,
}

/// Build a status report from the cards.
#[tool(effect = "read", version = "1.0", tags = ["cards"])]
pub fn build_status_report(store: State<CardStore>, args: ReportArgs) -> Result<String, ToolError> {
    if !store.available {
        return Err(cards_unavailable());
    }
    let include_done = args.include_done.unwrap_or(false);
    let lines: Vec<String> = store
        .cards
        .iter()
        .filter(|c| include_done || c.status != "done")
        .map(|c| format!("{} [{}] {}", c.task_id, c.status, c.title))
        .collect();
    Ok(lines.join("\n"))
}

/// Propose a status change for a card; a human applies it.
#[tool(effect = "write", version = "1.0", tags = ["cards"])]
pub fn propose_status_update(task_id: String, status: String) -> String {
    format!("proposal: {task_id} -> {status}")
}

/// The bureau's decider: a card that does not exist needs a human; everything else follows the default rules.
pub fn bureau_decider(observation: &ToolResult, state: &RunState, stop: &StopPolicy) -> Decision {
    if observation.error().is_some_and(|e| e.code == "card_not_found") {
        return Decision::NeedsInput;
    }
    DefaultDecider.decide(observation, state, stop)
}

/// A store with two cards.
pub fn store(available: bool) -> CardStore {
    let card = |id: &str, title: &str, status: &str| TaskCard {
        task_id: id.into(),
        title: title.into(),
        status: status.into(),
    };
    CardStore {
        available,
        cards: vec![card("T-1", "rotate the db password", "doing"), card("T-2", "write the postmortem", "todo")],
        validated: Mutex::new(Vec::new()),
    }
}

/// An executor over the bureau's allowlist (the four card tools) with the given store.
pub fn executor(store: CardStore) -> Executor {
    let registry = Registry::from_inventory().expect("tool names are unique");
    let view = registry.view().tag("cards").build().expect("card tools are linked");
    Executor::builder(view).state(store).build().expect("card schemas compile")
}

/// One scenario: its name, the run (with its event log) and each batch outcome.
pub struct Scenario {
    /// `two-calls`, `stop-after-decision` or `missing-file`.
    pub name: &'static str,
    /// The finished run.
    pub run: Run,
    /// The outcome of each batch.
    pub batches: Vec<BatchOutcome>,
}

fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall::new(id, name, args)
}

/// The three batch scenarios, replayed from a fixed script (no model involved).
pub async fn scenarios() -> Vec<Scenario> {
    let mut out = Vec::new();

    // two-calls: one response with two calls; the second reports a missing card.
    let mut run = Run::builder(executor(store(true))).id("two-calls").decider(bureau_decider).build();
    let b = run
        .process_batch(vec![
            call("call-1", "read_task_cards", json!({})),
            call("call-2", "validate_task_card", json!({"task_id": "T-404"})),
        ])
        .await;
    out.push(Scenario { name: "two-calls", run, batches: vec![b] });

    // stop-after-decision: an unknown name first; the allowed call after it must not run.
    let mut run = Run::builder(executor(store(true))).id("stop-after-decision").decider(bureau_decider).build();
    let b = run
        .process_batch(vec![
            call("call-X", "delete_everything", json!({})),
            call("call-2", "read_task_cards", json!({})),
        ])
        .await;
    out.push(Scenario { name: "stop-after-decision", run, batches: vec![b] });

    // missing-file: the same read fails twice over two model turns; one retry is allowed.
    let mut run = Run::builder(executor(store(false))).id("missing-file").decider(bureau_decider).build();
    let b1 = run.process_batch(vec![call("call-1", "read_task_cards", json!({}))]).await;
    let b2 = run.process_batch(vec![call("call-2", "read_task_cards", json!({}))]).await;
    out.push(Scenario { name: "missing-file", run, batches: vec![b1, b2] });

    out
}
