//! [`Run`]: the lifecycle of one agent run over many model turns, with its event log and stop rules.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::call::ToolCall;
use crate::event::{Decision, EventKind, EventLog, EventSink, NotExecuted};
use crate::executor::{CallOptions, Executor};
use crate::result::ToolResult;

/// Limits that end a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopPolicy {
    /// Executed calls allowed in one run (default 5).
    pub max_steps: u32,
    /// Failed attempts of one tool tolerated before the run stops with `error` (default 1: one retry). With
    /// [`DefaultDecider`], a tool's `retry` and `invalid_arguments` outcomes count against it as
    /// [`RunState::retries`], its other failures as [`RunState::failures`].
    pub max_retries: u32,
}

impl Default for StopPolicy {
    fn default() -> Self {
        StopPolicy { max_steps: 5, max_retries: 1 }
    }
}

/// What a decider sees of the run so far (already updated with the current observation).
#[derive(Debug, Clone, Default)]
pub struct RunState {
    steps: u32,
    failures: HashMap<String, u32>,
    retries: HashMap<String, u32>,
    call_ids: HashSet<String>,
}

impl RunState {
    /// Executed calls so far.
    pub fn steps(&self) -> u32 {
        self.steps
    }
    /// Failed calls of `tool` so far (executed or rejected).
    pub fn failures(&self, tool: &str) -> u32 {
        self.failures.get(tool).copied().unwrap_or(0)
    }
    /// Calls of `tool` so far that asked the model to call again differently: a handler's repair signal
    /// (`retry`, [`ToolError::retry`](crate::ToolError::retry)) or arguments that did not match
    /// (`invalid_arguments`). Each is also one of [`RunState::failures`].
    pub fn retries(&self, tool: &str) -> u32 {
        self.retries.get(tool).copied().unwrap_or(0)
    }
}

/// Decides, after each observation, whether the run goes on.
pub trait Decider: Send + Sync {
    /// The decision after `observation`; `state` already counts it.
    fn decide(&self, observation: &ToolResult, state: &RunState, stop: &StopPolicy) -> Decision;
}

impl<F> Decider for F
where
    F: Fn(&ToolResult, &RunState, &StopPolicy) -> Decision + Send + Sync,
{
    fn decide(&self, observation: &ToolResult, state: &RunState, stop: &StopPolicy) -> Decision {
        self(observation, state, stop)
    }
}

/// The default rules:
///
/// | observation | decision |
/// |---|---|
/// | `unknown_tool`, `policy_denied` | `error`: the model asked for something it may not have |
/// | `approval_required` | `needs_input`: a human must approve |
/// | `retry` or `invalid_arguments` of a tool that has now asked for more than `max_retries` repairs | `error` |
/// | any other failure of a tool that has now failed more than `max_retries` times | `error` |
/// | any other failure | `continue` (the model may repair and retry) |
/// | success, with `max_steps` reached | `error` (step budget exhausted) |
/// | success | `continue` |
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultDecider;

impl Decider for DefaultDecider {
    fn decide(&self, obs: &ToolResult, state: &RunState, stop: &StopPolicy) -> Decision {
        match obs.error().map(|e| e.code.as_str()) {
            Some("unknown_tool" | "policy_denied") => Decision::Error,
            Some("approval_required") => Decision::NeedsInput,
            Some("retry" | "invalid_arguments") if state.retries(&obs.tool_name) > stop.max_retries => Decision::Error,
            Some("retry" | "invalid_arguments") => Decision::Continue,
            Some(_) if state.failures(&obs.tool_name) > stop.max_retries => Decision::Error,
            Some(_) => Decision::Continue,
            None if state.steps >= stop.max_steps => Decision::Error,
            None => Decision::Continue,
        }
    }
}

/// What one batch produced.
#[derive(Debug, Clone)]
pub struct BatchOutcome {
    /// One result per processed call, in order (calls not executed after a stop have none).
    pub results: Vec<ToolResult>,
    /// The decision after the last processed call (`continue` when the whole batch went through).
    pub decision: Decision,
    /// Calls of this batch that were not processed because the run stopped.
    pub not_executed: Vec<NotExecuted>,
}

static RUN_COUNTER: AtomicU64 = AtomicU64::new(1);

/// [`Run`]: the lifecycle of one agent run over many model turns, with its event log and stop rules.
///
/// A model response may hold several tool calls (a batch). The run processes them in order through the
/// [`Executor`]; after each observation a [`Decider`] returns continue / needs_input / error / done. After a
/// terminal decision the rest of the batch is not executed and is reported as such (a second call in the same
/// response does not oblige the harness to go on). A repeated call id is a terminal error. Steps count executed
/// calls only: a call rejected before its handler is not a step.
///
/// ```
/// # use tool_core::{tool, Registry, Executor, ToolCall, Run, Decision};
/// /// Reads the task cards.
/// #[tool(effect = "read", version = "1.0")]
/// fn read_cards() -> Vec<String> { vec!["card-1".into()] }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let registry = Registry::from_inventory().unwrap();
/// let executor = Executor::new(registry.view().names(["read_cards"]).build().unwrap()).unwrap();
/// let mut run = Run::new(executor);
/// let batch = run.process_batch(vec![
///     ToolCall::new("call-X", "delete_everything", serde_json::json!({})),
///     ToolCall::new("call-2", "read_cards", serde_json::json!({})),
/// ]).await;
/// assert_eq!(batch.decision, Decision::Error);          // unknown tool: stop
/// assert_eq!(batch.not_executed[0].call_id, "call-2"); // the rest of the batch never ran
/// assert_eq!(run.state().steps(), 0);
/// # });
/// ```
///
/// One agent run: batches of calls, decisions, and the event log.
pub struct Run {
    id: String,
    executor: Executor,
    options: CallOptions,
    decider: Arc<dyn Decider>,
    stop: StopPolicy,
    state: RunState,
    log: EventLog,
    sinks: Vec<Arc<dyn EventSink>>,
    terminal: Option<Decision>,
}

impl fmt::Debug for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Run")
            .field("id", &self.id)
            .field("state", &self.state)
            .field("terminal", &self.terminal)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Run`]; see [`Run::builder`].
#[must_use]
pub struct RunBuilder {
    run: Run,
}

impl RunBuilder {
    /// The run id (default `run-N`).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.run.id = id.into();
        self
    }
    /// The decider (default [`DefaultDecider`]).
    pub fn decider(mut self, decider: impl Decider + 'static) -> Self {
        self.run.decider = Arc::new(decider);
        self
    }
    /// The stop policy (default [`StopPolicy::default`]).
    pub fn stop_policy(mut self, stop: StopPolicy) -> Self {
        self.run.stop = stop;
        self
    }
    /// The per-call options (tenant, approvals) used for every call of the run.
    pub fn options(mut self, options: CallOptions) -> Self {
        self.run.options = options;
        self
    }
    /// Adds a sink that receives every event as it is appended.
    pub fn sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.run.sinks.push(sink);
        self
    }
    /// The run.
    pub fn build(self) -> Run {
        self.run
    }
}

impl Run {
    /// A run over `executor` with the default id, decider, stop policy and options.
    pub fn new(executor: Executor) -> Run {
        Run {
            id: format!("run-{}", RUN_COUNTER.fetch_add(1, Ordering::Relaxed)),
            executor,
            options: CallOptions::default(),
            decider: Arc::new(DefaultDecider),
            stop: StopPolicy::default(),
            state: RunState::default(),
            log: EventLog::default(),
            sinks: Vec::new(),
            terminal: None,
        }
    }
    /// A builder for a run over `executor`.
    pub fn builder(executor: Executor) -> RunBuilder {
        RunBuilder { run: Run::new(executor) }
    }
    /// Replaces the per-call options mid-run (e.g. after a human granted an approval).
    pub fn set_options(&mut self, options: CallOptions) {
        self.options = options;
    }

    /// The run id.
    pub fn id(&self) -> &str {
        &self.id
    }
    /// The event log so far.
    pub fn log(&self) -> &EventLog {
        &self.log
    }
    /// Steps, failures and seen call ids.
    pub fn state(&self) -> &RunState {
        &self.state
    }
    /// The terminal decision, once the run has ended.
    pub fn terminal(&self) -> Option<Decision> {
        self.terminal
    }
    /// The executor.
    pub fn executor(&self) -> &Executor {
        &self.executor
    }

    fn emit(&mut self, kind: EventKind) {
        let event = self.log.push(&self.id, kind);
        for s in &self.sinks {
            s.record(event);
        }
    }

    fn end(&mut self, terminal: Decision, reason: &str, not_executed: Vec<NotExecuted>) {
        self.terminal = Some(terminal);
        let steps = self.state.steps;
        self.emit(EventKind::RunFinished { terminal, reason: reason.to_owned(), steps, not_executed });
    }

    /// Processes the tool calls of one model response, in order, stopping after a terminal decision.
    pub async fn process_batch(&mut self, calls: Vec<ToolCall>) -> BatchOutcome {
        let mut results = Vec::with_capacity(calls.len());
        let skipped = |rest: &mut dyn Iterator<Item = ToolCall>| -> Vec<NotExecuted> {
            rest.map(|c| NotExecuted { call_id: c.id().to_owned(), tool_name: c.name().to_owned() }).collect()
        };
        let mut calls = calls.into_iter();
        if let Some(terminal) = self.terminal {
            return BatchOutcome { results, decision: terminal, not_executed: skipped(&mut calls) };
        }
        while let Some(call) = calls.next() {
            let call_id = call.id().to_owned();
            let tool_name = call.name().to_owned();
            self.emit(EventKind::ToolRequested { call_id: call_id.clone(), tool_name: tool_name.clone() });
            if !self.state.call_ids.insert(call_id.clone()) {
                self.emit(EventKind::ToolRejected { call_id, tool_name, code: "duplicate_call_id".into() });
                let not_executed = skipped(&mut calls);
                self.end(Decision::Error, "duplicate_call_id", not_executed.clone());
                return BatchOutcome { results, decision: Decision::Error, not_executed };
            }
            let result = self.executor.call_with(call, &self.options).await;
            if result.executed {
                self.state.steps += 1;
            }
            if !result.is_ok() {
                *self.state.failures.entry(result.tool_name.clone()).or_insert(0) += 1;
                if matches!(result.code(), Some("retry" | "invalid_arguments")) {
                    *self.state.retries.entry(result.tool_name.clone()).or_insert(0) += 1;
                }
            }
            let decision = self.decider.decide(&result, &self.state, &self.stop);
            self.emit(EventKind::ToolObservation {
                call_id,
                tool_name,
                executed: result.executed,
                ok: result.is_ok(),
                code: result.error().map(|e| e.code.to_string()),
                error: result.error().map(|e| e.message.clone()),
                step: self.state.steps,
                decision,
            });
            results.push(result);
            if decision.is_terminal() {
                let not_executed = skipped(&mut calls);
                self.end(decision, "after_observation", not_executed.clone());
                return BatchOutcome { results, decision, not_executed };
            }
        }
        BatchOutcome { results, decision: Decision::Continue, not_executed: Vec::new() }
    }

    /// Ends the run from outside a batch (e.g. `Done` when the model answered without tool calls).
    /// Does nothing if the run has already ended.
    pub fn finish(&mut self, terminal: Decision, reason: &str) {
        if self.terminal.is_none() {
            self.end(terminal, reason, Vec::new());
        }
    }
}
