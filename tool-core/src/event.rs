//! The event log of a run: an append-only sequence of what was observed, each event tied to its call id.

use std::fmt;
use std::io::Write;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// What the run does after an observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Decision {
    /// Go on: the next call of the batch, or the next model turn.
    Continue,
    /// Stop and ask a human (missing information, an approval).
    NeedsInput,
    /// Stop: the run failed.
    Error,
    /// Stop: the run reached its goal.
    Done,
}

impl Decision {
    /// Whether the decision ends the run.
    pub fn is_terminal(self) -> bool {
        self != Decision::Continue
    }
    /// `continue`, `needs_input`, `error` or `done`.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Continue => "continue",
            Decision::NeedsInput => "needs_input",
            Decision::Error => "error",
            Decision::Done => "done",
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A call that was requested but not executed because the run had already stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotExecuted {
    /// The call id.
    pub call_id: String,
    /// The requested tool name.
    pub tool_name: String,
}

/// One entry of the event log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    /// The model asked for a call.
    ToolRequested {
        /// The call id (one string shared by the call's events).
        call_id: Arc<str>,
        /// The requested tool name (shared likewise).
        tool_name: Arc<str>,
    },
    /// A call was answered (executed or rejected by the executor) and the run decided what to do next.
    ToolObservation {
        /// The call id (one string shared by the call's events).
        call_id: Arc<str>,
        /// The tool name, as the result gives it (shared with the request's event when the two are the same).
        tool_name: Arc<str>,
        /// Whether the handler ran.
        executed: bool,
        /// Whether the call succeeded.
        ok: bool,
        /// The error code, if it failed.
        code: Option<String>,
        /// The error message, if it failed.
        error: Option<String>,
        /// Executed steps so far in this run.
        step: u32,
        /// What the run does next.
        decision: Decision,
    },
    /// A call was refused by the run itself (e.g. a repeated call id); it was not executed.
    ToolRejected {
        /// The call id (one string shared by the call's events).
        call_id: Arc<str>,
        /// The requested tool name (shared likewise).
        tool_name: Arc<str>,
        /// Why, e.g. `duplicate_call_id`.
        code: String,
    },
    /// The model answered one turn (logged by an agent loop, before the turn's calls are requested).
    ModelResponse {
        /// The 1-based model turn.
        turn: u32,
        /// How many tool calls the answer holds.
        calls: u32,
        /// The tokens the provider counted for this turn, when it reported them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    /// A model request failed in a way worth trying again, and the loop waits before it does. No call of the
    /// failed turn had run: a turn's calls run only once its whole answer has arrived.
    ModelRetry {
        /// The 1-based model turn.
        turn: u32,
        /// The 1-based retry about to be made.
        attempt: u32,
        /// Why, e.g. `status 429`, `status 529`, `connect`, `timeout`.
        reason: String,
        /// How long the loop waits before the retry.
        wait_ms: u64,
        /// The error that failed the request.
        error: String,
    },
    /// Deferred tools were surfaced: shown to the model, and callable from now on in this run
    /// ([`crate::deferral`]).
    ToolsSurfaced {
        /// The tools newly surfaced (registered names), in the order they were.
        tools: Vec<String>,
        /// What surfaced them: `search_tools` (keel's search tool), or a provider's own search (`anthropic`).
        via: String,
        /// The call of the search that surfaced them, when one did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<Arc<str>>,
    },
    /// The run ended.
    RunFinished {
        /// The terminal decision.
        terminal: Decision,
        /// Why it ended, e.g. `after_observation`, `duplicate_call_id`, `model_finished`, `max_steps`.
        reason: String,
        /// Executed calls in the whole run.
        steps: u32,
        /// Calls requested but never executed because the run had stopped.
        not_executed: Vec<NotExecuted>,
        /// The tokens of the run's model turns, summed, when an agent loop logged any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
}

/// The tokens a provider counted for one model turn, or summed over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens of the request (the prompt), cached ones included.
    pub input_tokens: u64,
    /// Tokens generated.
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache (part of `input_tokens`), when it reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
}

/// The sum of two counts; the cached count is kept when either reports one.
impl std::ops::Add for Usage {
    type Output = Usage;

    fn add(self, other: Usage) -> Usage {
        let cached = match (self.cached_input_tokens, other.cached_input_tokens) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        Usage {
            input_tokens: self.input_tokens + other.input_tokens,
            output_tokens: self.output_tokens + other.output_tokens,
            cached_input_tokens: cached,
        }
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        *self = *self + other;
    }
}

/// An event with its position in the log and its wall-clock time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// 0-based position in the run's log.
    pub seq: u64,
    /// Milliseconds since the Unix epoch (on Linux read from the coarse wall clock: within one tick, 4 ms on most
    /// kernels, of when the event was logged).
    pub at_ms: u64,
    /// The run this event belongs to (one string shared by the run's events).
    pub run_id: Arc<str>,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

impl Event {
    /// One human-readable line, e.g.
    /// `event: tool_observation | call_id: call-1 | tool: read_task_cards | execution: performed | ...`.
    pub fn display_line(&self) -> String {
        match &self.kind {
            EventKind::ToolRequested { call_id, tool_name } => {
                format!("event: tool_requested | call_id: {call_id} | tool: {tool_name}")
            }
            EventKind::ToolObservation { call_id, tool_name, executed, ok, code, error, decision, .. } => {
                let mut s = format!(
                    "event: tool_observation | call_id: {call_id} | tool: {tool_name} | execution: {} | outcome: {} | decision: {decision}",
                    if *executed { "performed" } else { "not performed" },
                    if *ok { "result".to_owned() } else { format!("tool error ({})", code.as_deref().unwrap_or("?")) },
                );
                if let Some(e) = error {
                    s.push_str(" | error: ");
                    s.push_str(e);
                }
                s
            }
            EventKind::ToolRejected { call_id, tool_name, code } => {
                format!("event: tool_rejected | call_id: {call_id} | tool: {tool_name} | code: {code}")
            }
            EventKind::ModelResponse { turn, calls, usage } => {
                let mut s = format!("event: model_response | turn: {turn} | calls: {calls}");
                if let Some(u) = usage {
                    s.push_str(&format!(" | tokens in: {} | tokens out: {}", u.input_tokens, u.output_tokens));
                    if let Some(c) = u.cached_input_tokens {
                        s.push_str(&format!(" | cached: {c}"));
                    }
                }
                s
            }
            EventKind::ModelRetry { turn, attempt, reason, wait_ms, error } => format!(
                "event: model_retry | turn: {turn} | attempt: {attempt} | reason: {reason} | wait: {wait_ms} ms | error: {error}"
            ),
            EventKind::ToolsSurfaced { tools, via, call_id } => {
                let mut s = format!("event: tools_surfaced | tools: {} | via: {via}", tools.join(", "));
                if let Some(id) = call_id {
                    s.push_str(&format!(" | call_id: {id}"));
                }
                s
            }
            EventKind::RunFinished { terminal, reason, steps, not_executed, usage } => {
                let mut s = format!("event: run_finished | terminal: {terminal} | reason: {reason} | steps: {steps}");
                if let Some(u) = usage {
                    s.push_str(&format!(" | tokens in: {} | tokens out: {}", u.input_tokens, u.output_tokens));
                }
                for n in not_executed {
                    s.push_str(&format!("\nnot executed: {} {}", n.call_id, n.tool_name));
                }
                s
            }
        }
    }
}

/// Receives each event as it is appended. Implementations must not panic; I/O errors are theirs to report.
pub trait EventSink: Send + Sync {
    /// Records one event.
    fn record(&self, event: &Event);
}

/// Writes each event as one JSON line.
pub struct JsonLinesWriter<W: Write + Send> {
    out: Mutex<W>,
}

impl<W: Write + Send> JsonLinesWriter<W> {
    /// Writes to `out` (a file, stdout, a `Vec<u8>`).
    pub fn new(out: W) -> Self {
        JsonLinesWriter { out: Mutex::new(out) }
    }
    /// Gives the writer back.
    pub fn into_inner(self) -> W {
        self.out.into_inner().unwrap_or_else(|p| p.into_inner())
    }
}

impl<W: Write + Send> EventSink for JsonLinesWriter<W> {
    fn record(&self, event: &Event) {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let res =
            serde_json::to_writer(&mut *out, event).map_err(std::io::Error::from).and_then(|()| out.write_all(b"\n"));
        if let Err(e) = res.and_then(|()| out.flush()) {
            tracing::warn!(error = %e, run_id = %event.run_id, "could not write an event to the JSON Lines log");
        }
    }
}

/// The event log of a run: an append-only sequence of what was observed, each event tied to its call id.
///
/// Events are what happened (a request, an observation and the decision after it, a rejection, the end of the run),
/// never the model's hidden reasoning. [`EventLog`] keeps them in memory; any [`EventSink`] (such as
/// [`JsonLinesWriter`]) receives each one as it is appended.
///
/// The in-memory log of one run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EventLog {
    events: Vec<Event>,
}

impl EventLog {
    /// The events in order.
    pub fn events(&self) -> &[Event] {
        &self.events
    }
    /// The events as JSON Lines.
    pub fn to_json_lines(&self) -> String {
        let mut s = String::new();
        for e in &self.events {
            if let Ok(line) = serde_json::to_string(e) {
                s.push_str(&line);
                s.push('\n');
            }
        }
        s
    }
    /// An empty log with room for `n` events.
    pub(crate) fn with_capacity(n: usize) -> EventLog {
        EventLog { events: Vec::with_capacity(n) }
    }
    pub(crate) fn push(&mut self, run_id: &Arc<str>, kind: EventKind) -> &Event {
        let at_ms = crate::clock::unix_ms();
        self.events.push(Event { seq: self.events.len() as u64, at_ms, run_id: Arc::clone(run_id), kind });
        self.events.last().unwrap_or_else(|| unreachable!("just pushed"))
    }
}
