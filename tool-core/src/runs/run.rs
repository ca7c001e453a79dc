//! [`Run`]: the lifecycle of one agent run over many model turns, with its event log and stop rules.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::pending::{PendingCall, Resolution};
use crate::call::ToolCall;
use crate::deferral::{SEARCH_TOOL, Surfaced, found_by};
use crate::error::ErrorCode;
use crate::event::{Decision, EventKind, EventLog, EventSink, NotExecuted, Usage};
use crate::executor::CallOptions;
use crate::executor::flow::Executor;
use crate::registry::view::ToolView;
use crate::result::ErrorBody;
use crate::result::ToolResult;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

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
    usage: Option<Usage>,
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
    /// The tokens of the model turns logged so far ([`Run::record_model_response`]), summed; `None` until a turn
    /// reported some.
    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }
}

/// The call ids a run has seen, for its duplicate check: each is the id of a `tool_requested` event in the run's
/// log, which is append-only.
///
/// Call ids are chosen by the model, so a large set must not be open to collision flooding: past [`CallIds::FEW`]
/// ids they are copied into a `HashSet` with std's keyed SipHash. Below that, which covers most runs (a run's ids
/// are bounded by the calls it processes), the ids are not copied at all: the positions of their events are kept
/// inline and compared linearly, which costs less than hashing one id and allocates nothing.
#[derive(Debug, Default)]
struct CallIds {
    few: [usize; CallIds::FEW],
    len: usize,
    many: HashSet<String>,
}

impl CallIds {
    /// The most ids kept as event positions before they are copied into the set.
    const FEW: usize = 8;

    fn contains(&self, log: &EventLog, id: &str) -> bool {
        if self.many.is_empty() {
            self.few[..self.len].iter().any(|&at| requested_id(log, at) == id)
        } else {
            self.many.contains(id)
        }
    }

    /// Records the id of the `tool_requested` event at `at` in `log`; false if the run had seen it already.
    fn record(&mut self, log: &EventLog, at: usize) -> bool {
        let id = requested_id(log, at);
        if self.contains(log, id) {
            return false;
        }
        if self.many.is_empty() {
            if self.len < Self::FEW {
                self.few[self.len] = at;
                self.len += 1;
                return true;
            }
            self.many.extend(self.few.iter().map(|&k| requested_id(log, k).to_owned()));
            self.len = 0;
        }
        self.many.insert(id.to_owned())
    }
}

/// The call id of the `tool_requested` event at `at`.
fn requested_id(log: &EventLog, at: usize) -> &str {
    match &log.events()[at].kind {
        EventKind::ToolRequested { call_id, .. } => call_id,
        other => unreachable!("call ids are recorded from tool_requested events, not {other:?}"),
    }
}

/// How many calls of one batch may run at once ([`RunBuilder::concurrency`]).
///
/// Only parallel-safe calls overlap ([`Executor::parallel_safe`]: by default, calls of `read` tools); every other
/// call runs alone, in the model's order. The default is [`Concurrency::SEQUENTIAL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Concurrency {
    max_calls: usize,
    max_per_tool: usize,
}

impl Concurrency {
    /// One call at a time, in the model's order.
    pub const SEQUENTIAL: Concurrency = Concurrency { max_calls: 1, max_per_tool: 1 };

    /// Up to `max_calls` parallel-safe calls at once (at least 1), as many of them of one tool.
    pub fn new(max_calls: usize) -> Concurrency {
        let max_calls = max_calls.max(1);
        Concurrency { max_calls, max_per_tool: max_calls }
    }

    /// At most `max` calls of any one tool at once (at least 1).
    #[must_use]
    pub fn per_tool(mut self, max: usize) -> Concurrency {
        self.max_per_tool = max.max(1);
        self
    }

    /// The most calls at once.
    pub fn max_calls(&self) -> usize {
        self.max_calls
    }

    /// The most calls of one tool at once.
    pub fn max_per_tool(&self) -> usize {
        self.max_per_tool
    }
}

impl Default for Concurrency {
    fn default() -> Self {
        Concurrency::SEQUENTIAL
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
/// | `approval_required`, `approval_expired`, `approval_stale` | `needs_input`: a human must approve (again) |
/// | `insufficient_scope` | `needs_input`: the caller must be granted the scope (an OAuth step-up) |
/// | `approval_denied` | `continue`: the model reads why, and may do something else |
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
            Some("approval_required" | "approval_expired" | "approval_stale" | "insufficient_scope") => {
                Decision::NeedsInput
            }
            Some("approval_denied") => Decision::Continue,
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

/// The tools one batch may call, by registered name, when the batch is restricted
/// ([`Run::process_batch_allowed`]).
type Allowed<'a> = Option<&'a [&'a str]>;

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
/// # use keel_tools_core::{tool, Registry, Executor, ToolCall};
/// # use keel_tools_core::runs::Run;
/// # use keel_tools_core::events::Decision;
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
    /// Shared by every event of the run (each holds the same `Arc`).
    id: Arc<str>,
    executor: Executor,
    options: CallOptions,
    decider: Arc<dyn Decider>,
    stop: StopPolicy,
    concurrency: Concurrency,
    state: RunState,
    call_ids: CallIds,
    log: EventLog,
    sinks: Vec<Arc<dyn EventSink>>,
    terminal: Option<Decision>,
    /// Whether the executor's view defers tools ([`crate::deferral`]): then a deferred tool is callable once
    /// surfaced, and not before.
    defers: bool,
    surfaced: Surfaced,
    /// What the model is shown now, made at the first ask after each surfacing.
    shown: OnceLock<ToolView>,
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
        self.run.id = Arc::from(id.into());
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
    /// How many calls of one batch may run at once (default [`Concurrency::SEQUENTIAL`]).
    pub fn concurrency(mut self, concurrency: Concurrency) -> Self {
        self.run.concurrency = concurrency;
        self
    }
    /// The per-call options (tenant, approvals) used for every call of the run.
    pub fn options(mut self, options: CallOptions) -> Self {
        self.run.options = options;
        self
    }
    /// Deferred tools already surfaced, for a run made again from an earlier one's log
    /// ([`deferral::surfaced_in`](crate::deferral::surfaced_in)): they are shown and callable from the start. Logged as surfaced `via`
    /// `restored`.
    pub fn surfaced<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.run.surface(names, "restored", None);
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
    /// The events a new run's log has room for before it grows: a first turn of a few calls, and the end.
    const FIRST_EVENTS: usize = 8;

    /// A run over `executor` with the default id, decider, stop policy and options.
    pub fn new(executor: Executor) -> Run {
        Run {
            id: Arc::from(format!("run-{}", RUN_COUNTER.fetch_add(1, Ordering::Relaxed))),
            options: CallOptions::default(),
            decider: Arc::new(DefaultDecider),
            stop: StopPolicy::default(),
            concurrency: Concurrency::SEQUENTIAL,
            state: RunState::default(),
            call_ids: CallIds::default(),
            // Room for a first turn's events (two a call, and the end) is made here, not by the first call.
            log: EventLog::with_capacity(Run::FIRST_EVENTS),
            sinks: Vec::new(),
            terminal: None,
            defers: executor.view().has_deferred(),
            surfaced: Surfaced::new(),
            shown: OnceLock::new(),
            executor,
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
    /// Steps and failures.
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

    /// The deferred tools surfaced so far in this run ([`crate::deferral`]).
    pub fn surfaced(&self) -> &Surfaced {
        &self.surfaced
    }

    /// What the model is shown now, which is exactly what this run lets it call: the executor's view without the
    /// deferred tools not surfaced yet ([`ToolView::shown`]). The executor's view itself when it defers nothing.
    /// An agent loop sends this list each turn.
    pub fn shown(&self) -> &ToolView {
        self.shown.get_or_init(|| self.executor.view().shown(&self.surfaced))
    }

    /// Surfaces the deferred tools of the executor's view named in `names` (registered names; others, and those
    /// already surfaced, are passed over): shown and callable from now on. Logs them, with what surfaced them
    /// (`via`: `search_tools` for keel's search tool, a provider's name for its own tool search) and the call that
    /// did, and returns them.
    pub fn surface<I, S>(&mut self, names: I, via: &str, call_id: Option<Arc<str>>) -> Vec<String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let view = self.executor.view();
        let mut new = Vec::new();
        for name in names {
            let name = name.as_ref();
            if view.get(name).is_some_and(|d| d.deferred()) && self.surfaced.insert(name) {
                new.push(name.to_owned());
            }
        }
        if !new.is_empty() {
            self.shown = OnceLock::new();
            self.emit(EventKind::ToolsSurfaced { tools: new.clone(), via: via.to_owned(), call_id });
        }
        new
    }

    fn emit(&mut self, kind: EventKind) {
        let event = self.log.push(&self.id, kind);
        for s in &self.sinks {
            s.record(event);
        }
    }

    /// Logs that the model asked for a call; false if its id is not new to the run.
    fn requested(&mut self, call_id: Arc<str>, tool_name: Arc<str>) -> bool {
        self.emit(EventKind::ToolRequested { call_id, tool_name });
        self.call_ids.record(&self.log, self.log.events().len() - 1)
    }

    fn end(&mut self, terminal: Decision, reason: &str, not_executed: Vec<NotExecuted>) {
        self.terminal = Some(terminal);
        let steps = self.state.steps;
        let usage = self.state.usage;
        self.emit(EventKind::RunFinished { terminal, reason: reason.to_owned(), steps, not_executed, usage });
    }

    /// Processes the tool calls of one model response, stopping after a terminal decision.
    ///
    /// With the default [`Concurrency::SEQUENTIAL`] the calls run one after another, in the model's order. With
    /// more, consecutive parallel-safe calls ([`Executor::parallel_safe`]) overlap, within the caps; every other
    /// call runs alone, in its place. Either way the events, the results and the decisions come in the model's
    /// order, and after a terminal decision no further call starts: calls of the batch still running are cancelled
    /// through their context and reported with what they ended with (`cancelled`, or their result if they
    /// finished first), and the calls that never started are the batch's `not_executed`.
    pub async fn process_batch(&mut self, calls: Vec<ToolCall>) -> BatchOutcome {
        self.process(calls, None).await
    }

    /// [`Run::process_batch`] for one model turn that may call only the tools named in `allowed` (registered
    /// names): a call of any other tool is refused exactly as a call of a tool the view does not hold
    /// (`unknown_tool`, not executed, decided as such), though the tool is in the view and the model was shown it.
    ///
    /// This is how a turn whose tool choice allows a subset of the tools (OpenAI's `allowed_tools`, Gemini's
    /// `allowedFunctionNames`) is held to it: the request still lists every tool of the view, unchanged from turn
    /// to turn so that the provider's prompt cache holds, and the executor refuses what the turn did not allow.
    /// The restriction lasts for this batch only and adds to the run's own
    /// [`CallOptions::allowed_tools`](crate::executor::CallOptions::allowed_tools), if any.
    ///
    /// ```
    /// # use keel_tools_core::{tool, Registry, Executor, ToolCall};
    /// # use keel_tools_core::runs::Run;
    /// /// Reads the cards.
    /// #[tool(effect = "read", version = "1.0")]
    /// fn cards_read() -> Vec<String> { vec!["card-1".into()] }
    /// /// Reads the board.
    /// #[tool(effect = "read", version = "1.0")]
    /// fn board_read() -> String { "board".into() }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let view = Registry::from_inventory().unwrap().view().names(["cards_read", "board_read"]).build().unwrap();
    /// let mut run = Run::new(Executor::new(view).unwrap());
    /// let batch = run.process_batch_allowed(vec![
    ///     ToolCall::new("call-1", "cards_read", serde_json::json!({})),
    ///     ToolCall::new("call-2", "board_read", serde_json::json!({})),
    /// ], &["cards_read"]).await;
    /// assert!(batch.results[0].is_ok());
    /// assert_eq!(batch.results[1].code(), Some("unknown_tool"));
    /// assert!(!batch.results[1].executed);
    /// # });
    /// ```
    pub async fn process_batch_allowed<S: AsRef<str>>(&mut self, calls: Vec<ToolCall>, allowed: &[S]) -> BatchOutcome {
        let allowed: Vec<&str> = allowed.iter().map(AsRef::as_ref).collect();
        self.process(calls, Some(&allowed)).await
    }

    /// [`Run::process_batch`], with the batch's own allowed tools when it has them.
    async fn process(&mut self, calls: Vec<ToolCall>, allowed: Allowed<'_>) -> BatchOutcome {
        let mut batch = BatchOutcome {
            results: Vec::with_capacity(calls.len()),
            decision: Decision::Continue,
            not_executed: Vec::new(),
        };
        if let Some(terminal) = self.terminal {
            batch.decision = terminal;
            batch.not_executed = calls.iter().map(not_executed).collect();
            return batch;
        }
        if self.concurrency.max_calls == 1 {
            // Every call runs alone, in its place: no grouping needed.
            let mut calls = calls.into_iter();
            while let Some(call) = calls.next() {
                if let Some(stop) = self.run_one(call, allowed, &mut batch).await {
                    self.stop_batch(stop, calls.as_slice(), &mut batch);
                    break;
                }
            }
            return batch;
        }
        let mut calls: VecDeque<ToolCall> = calls.into();
        while let Some(group) = self.next_group(&mut calls, allowed) {
            let stop = if group.len() == 1 {
                let call = group.into_iter().next().expect("one call");
                self.run_one(call, allowed, &mut batch).await
            } else {
                self.run_concurrently(group, allowed, &mut batch).await
            };
            if let Some(stop) = stop {
                let (rest, more) = calls.as_slices();
                batch.not_executed.extend(rest.iter().map(not_executed));
                self.stop_batch(stop, more, &mut batch);
                break;
            }
        }
        batch
    }

    /// Ends the run after a terminal decision in a batch: `rest` (the calls never started) are not executed.
    fn stop_batch(
        &mut self,
        (decision, reason): (Decision, &'static str),
        rest: &[ToolCall],
        batch: &mut BatchOutcome,
    ) {
        batch.not_executed.extend(rest.iter().map(not_executed));
        batch.decision = decision;
        self.end(decision, reason, batch.not_executed.clone());
    }

    /// Resolves a call of this run that waited for an approval ([`PendingCall`]; see [`Executor::resume`]), as a
    /// batch of one, logged, counted and decided like any call. A run that ended `needs_input` (for this call,
    /// say) goes on, its log showing the wait; a run in a new process is built with the pending call's run id
    /// ([`RunBuilder::id`]) and resumes the same way. A run that ended otherwise runs nothing.
    pub async fn resume(&mut self, pending: &PendingCall, resolution: &Resolution) -> BatchOutcome {
        let mut batch = BatchOutcome { results: Vec::new(), decision: Decision::Continue, not_executed: Vec::new() };
        match self.terminal {
            None => {}
            Some(Decision::NeedsInput) => self.terminal = None,
            Some(terminal) => {
                batch.decision = terminal;
                batch.not_executed =
                    vec![NotExecuted { call_id: pending.call_id.clone(), tool_name: pending.tool_name.clone() }];
                return batch;
            }
        }
        // The id may be known already: the `approval_required` answer of this very call.
        let (call_id, tool_name): (Arc<str>, Arc<str>) =
            (pending.call_id.as_str().into(), pending.tool_name.as_str().into());
        self.requested(Arc::clone(&call_id), Arc::clone(&tool_name));
        batch.results.push(self.executor.resume(pending, resolution, &self.options).await);
        let decision = self.observe_last(&batch.results, None, (call_id, tool_name));
        batch.decision = decision;
        if decision.is_terminal() {
            self.end(decision, "after_observation", Vec::new());
        }
        batch
    }

    /// The next calls to run together: the longest run of parallel-safe calls with ids new to the run (up to the
    /// cap on calls), or the next call alone.
    fn next_group(&self, calls: &mut VecDeque<ToolCall>, allowed: Allowed<'_>) -> Option<Vec<ToolCall>> {
        let first = calls.pop_front()?;
        let mut group = vec![first];
        if self.concurrency.max_calls == 1 || !self.groupable(&group[0], &group[..0], allowed) {
            return Some(group);
        }
        while let Some(next) = calls.front() {
            if !self.groupable(next, &group, allowed) {
                break;
            }
            group.push(calls.pop_front().expect("a call"));
        }
        Some(group)
    }

    fn groupable(&self, call: &ToolCall, group: &[ToolCall], allowed: Allowed<'_>) -> bool {
        self.permits(call.name(), allowed)
            && self.executor.parallel_safe(call.name())
            && !self.call_ids.contains(&self.log, call.id())
            && !group.iter().any(|c| c.id() == call.id())
    }

    /// Runs one call in its place: requested, refused as a repeated id or executed, observed, decided.
    async fn run_one(
        &mut self,
        call: ToolCall,
        allowed: Allowed<'_>,
        batch: &mut BatchOutcome,
    ) -> Option<(Decision, &'static str)> {
        // The call's strings are shared by its events: its id copied once, a registered tool's name not at all.
        // The tool is looked up once, here, and the call made at the place found.
        let (at, tool_name) = self.find(call.name(), allowed);
        let call_id: Arc<str> = call.id().into();
        if !self.requested(Arc::clone(&call_id), Arc::clone(&tool_name)) {
            self.emit(EventKind::ToolRejected { call_id, tool_name, code: "duplicate_call_id".into() });
            return Some((Decision::Error, "duplicate_call_id"));
        }
        // The result goes to its place in the batch first, and is observed there (not moved again after).
        batch.results.push(self.executor.call_at(call, &self.options, at).await);
        let decision = self.observe_last(&batch.results, None, (call_id, tool_name));
        decision.is_terminal().then_some((decision, "after_observation"))
    }

    /// Whether a call of `name` may run in this batch: allowed by the run's options and by the batch's `allowed`.
    fn permits(&self, name: &str, allowed: Allowed<'_>) -> bool {
        self.options.permits(name) && allowed.is_none_or(|allowed| allowed.contains(&name)) && self.shows(name)
    }

    /// Whether the model has been shown the tool named `name`: it is not deferred, or it was surfaced.
    #[inline]
    fn shows(&self, name: &str) -> bool {
        !self.defers || self.surfaced.contains(name) || !self.executor.view().get(name).is_some_and(|d| d.deferred())
    }

    /// Where the tool named `name` is in the executor's view ([`Executor::find`]), or nowhere (`None`, and a name
    /// of its own) when the options or the batch do not allow it: its call is then answered as that of a tool the
    /// view does not hold.
    fn find(&self, name: &str, allowed: Allowed<'_>) -> (Option<usize>, Arc<str>) {
        if self.permits(name, allowed) { self.executor.find(name) } else { (None, Arc::from(name)) }
    }

    /// [`Run::observe`] for the result just pushed to a batch's `results`: every path pushes a result first and
    /// observes it in its place, so it is not moved again after.
    fn observe_last(
        &mut self,
        results: &[ToolResult],
        stopped: Option<Decision>,
        requested: (Arc<str>, Arc<str>),
    ) -> Decision {
        let result = results.last().unwrap_or_else(|| unreachable!("a result was just pushed"));
        self.observe(result, stopped, requested)
    }

    /// Counts one result, asks the decider (unless the batch has already stopped with `stopped`) and logs the
    /// observation under the strings of the call's request (`requested`); returns the decision.
    fn observe(&mut self, result: &ToolResult, stopped: Option<Decision>, requested: (Arc<str>, Arc<str>)) -> Decision {
        if result.executed {
            self.state.steps += 1;
        }
        if !result.is_ok() {
            *self.state.failures.entry(result.tool_name.clone()).or_insert(0) += 1;
            if matches!(result.code(), Some("retry" | "invalid_arguments")) {
                *self.state.retries.entry(result.tool_name.clone()).or_insert(0) += 1;
            }
        }
        let decision = stopped.unwrap_or_else(|| self.decider.decide(result, &self.state, &self.stop));
        // The result names the call as it was requested, but for an unknown name too long to echo whole.
        let (call_id, requested_name) = requested;
        let tool_name = if keel_tools_schema::text::same(&requested_name, &result.tool_name) {
            requested_name
        } else {
            result.tool_name.as_str().into()
        };
        let search_call = Arc::clone(&call_id);
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
        // What a search returned is shown from now on, and callable.
        if self.defers
            && result.is_ok()
            && result.tool_name == SEARCH_TOOL
            && let Some(data) = result.data()
        {
            let found = found_by(self.executor.view(), data);
            self.surface(found, SEARCH_TOOL, Some(search_call));
        }
        decision
    }

    /// Runs a group of parallel-safe calls with new ids, overlapping within the caps, and reports them in order.
    async fn run_concurrently(
        &mut self,
        group: Vec<ToolCall>,
        allowed: Allowed<'_>,
        batch: &mut BatchOutcome,
    ) -> Option<(Decision, &'static str)> {
        let n = group.len();
        let parent = self.options.cancellation_token().cloned();
        let tokens: Vec<CancellationToken> = (0..n)
            .map(|_| parent.as_ref().map_or_else(CancellationToken::new, CancellationToken::child_token))
            .collect();
        // Each tool is looked up once, here: its place for the call, its name for the events.
        let (places, names): (Vec<Option<usize>>, Vec<Arc<str>>) =
            group.iter().map(|c| self.find(c.name(), allowed)).unzip();
        let ids: Vec<Arc<str>> = group.iter().map(|c| c.id().into()).collect();
        let mut waiting: Vec<Option<ToolCall>> = group.into_iter().map(Some).collect();
        let mut done: Vec<Option<ToolResult>> = (0..n).map(|_| None).collect();
        let mut running: JoinSet<(usize, ToolResult)> = JoinSet::new();
        let mut tasks: HashMap<tokio::task::Id, usize> = HashMap::new();
        let mut per_tool: HashMap<&str, usize> = HashMap::new();
        let mut stopped: Option<Decision> = None;
        let mut next = 0;
        loop {
            // Report, in the model's order, every call that has ended; skip those that never started.
            while next < n {
                if stopped.is_some() && waiting[next].is_some() {
                    next += 1;
                    continue;
                }
                let Some(result) = done[next].take() else { break };
                self.requested(Arc::clone(&ids[next]), Arc::clone(&names[next]));
                batch.results.push(result);
                let requested = (Arc::clone(&ids[next]), Arc::clone(&names[next]));
                let decision = self.observe_last(&batch.results, stopped, requested);
                next += 1;
                if stopped.is_none() && decision.is_terminal() {
                    stopped = Some(decision);
                    tokens.iter().for_each(CancellationToken::cancel);
                    batch.not_executed.extend(
                        (0..n)
                            .filter(|&k| waiting[k].is_some())
                            .map(|k| NotExecuted { call_id: ids[k].to_string(), tool_name: names[k].to_string() }),
                    );
                }
            }
            // Start, in the model's order, every waiting call the caps allow, but none after a call that has ended
            // and is not yet decided (it waits for an earlier one): its decision may stop the batch.
            if stopped.is_none() {
                let undecided = done.iter().position(Option::is_some).unwrap_or(n);
                for k in 0..undecided {
                    if running.len() >= self.concurrency.max_calls {
                        break;
                    }
                    let busy = per_tool.get(&*names[k]).copied().unwrap_or(0);
                    if waiting[k].is_none() || busy >= self.concurrency.max_per_tool {
                        continue;
                    }
                    let call = waiting[k].take().expect("waiting");
                    *per_tool.entry(&*names[k]).or_insert(0) += 1;
                    let executor = self.executor.clone();
                    let options = self.options.clone().cancellation(tokens[k].clone());
                    let at = places[k];
                    let task = async move { (k, executor.call_at(call, &options, at).await) };
                    // The task runs where the batch's spans are: the `tracing` span and the OpenTelemetry context.
                    let task = tracing::Instrument::in_current_span(task);
                    #[cfg(feature = "otel")]
                    let task = opentelemetry::context::FutureExt::with_current_context(task);
                    let task = running.spawn(task);
                    tasks.insert(task.id(), k);
                }
            }
            if next == n {
                break;
            }
            let (k, result) = match running.join_next_with_id().await {
                Some(Ok((_, ended))) => ended,
                // The executor catches handler panics; a task ends otherwise only if the runtime aborted it, when
                // the handler may have run: `executed` stays true, as for a timeout.
                Some(Err(e)) => {
                    let k = tasks[&e.id()];
                    let error = ErrorBody::new(ErrorCode::ToolInternalError, "the call ended abnormally");
                    (k, ToolResult::failure(&*ids[k], &*names[k], None, true, error))
                }
                None => break,
            };
            *per_tool.get_mut(&*names[k]).expect("counted") -= 1;
            done[k] = Some(result);
        }
        stopped.map(|decision| (decision, "after_observation"))
    }

    /// Logs that the model answered turn `turn` with `calls` tool calls, and what it cost ([`EventKind::ModelResponse`]);
    /// for an agent loop, before it hands the calls to [`process_batch`](Run::process_batch).
    pub fn record_model_response(&mut self, turn: u32, calls: u32, usage: Option<Usage>) {
        if let Some(u) = usage {
            self.state.usage = Some(self.state.usage.unwrap_or_default() + u);
        }
        self.emit(EventKind::ModelResponse { turn, calls, usage });
    }

    /// Logs that a model request of turn `turn` failed with `error` and is tried again after `wait`
    /// ([`EventKind::ModelRetry`]).
    pub fn record_model_retry(&mut self, turn: u32, attempt: u32, reason: &str, wait: Duration, error: &str) {
        let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        self.emit(EventKind::ModelRetry { turn, attempt, reason: reason.to_owned(), wait_ms, error: error.to_owned() });
    }

    /// Ends the run from outside a batch (e.g. `Done` when the model answered without tool calls).
    /// Does nothing if the run has already ended.
    pub fn finish(&mut self, terminal: Decision, reason: &str) {
        if self.terminal.is_none() {
            self.end(terminal, reason, Vec::new());
        }
    }
}

fn not_executed(call: &ToolCall) -> NotExecuted {
    NotExecuted { call_id: call.id().to_owned(), tool_name: call.name().to_owned() }
}

#[cfg(test)]
mod tests {
    use super::{CallIds, EventKind, EventLog};

    #[test]
    fn call_ids_find_repeats_among_event_positions_and_in_the_set() {
        let mut log = EventLog::default();
        let mut ids = CallIds::default();
        let run: std::sync::Arc<str> = std::sync::Arc::from("run");
        let n = CallIds::FEW * 3;
        for i in 0..n {
            let id = format!("call-{i}");
            assert!(!ids.contains(&log, &id));
            log.push(&run, EventKind::ToolRequested { call_id: id.as_str().into(), tool_name: "t".into() });
            assert!(ids.record(&log, log.events().len() - 1), "{id} is new");
            assert!(ids.contains(&log, &id));
            // Every id so far, kept by position or (past `FEW`) in the set, is a repeat.
            for j in 0..=i {
                log.push(&run, EventKind::ToolRequested { call_id: format!("call-{j}").into(), tool_name: "t".into() });
                assert!(!ids.record(&log, log.events().len() - 1), "call-{j} is a repeat after {i}");
            }
        }
        assert_eq!(ids.many.len(), n);
        assert!(!ids.contains(&log, "call-x") && !ids.contains(&log, ""));
    }
}
