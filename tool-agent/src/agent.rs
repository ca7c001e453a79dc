//! [`Agent`]: the one loop every model goes through.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use keel_tools_core::events::{Decision, EventKind, NotExecuted, Usage};
use keel_tools_core::runs::Run;

use crate::model::{AssistantMessage, ChatModel, Message, Mode, ModelError, Turn};
use crate::options::ToolChoice;
use crate::retry::RetryPolicy;
use crate::stream_event::{StreamEvent, StreamSink};

/// The loop: ask the model, run its tool calls through the [`Run`], send the results back, until the model
/// answers without tool calls, the run's decider stops it, or the turn budget runs out.
///
/// The batch semantics come from the [`Run`]: the calls of one response are processed in order, a decision is
/// taken after each observation, a terminal decision (`error`, `needs_input`) stops the batch and the rest of it
/// is reported as not executed, steps count executed calls only, a repeated call id is a terminal error. The loop
/// adds the turns around it:
///
/// | what happens | terminal | `RunFinished.reason` |
/// |---|---|---|
/// | the model answers without tool calls | `done` | `model_finished` |
/// | a decision after an observation is not `continue` | that decision | `after_observation` (or `duplicate_call_id`) |
/// | `max_turns` model turns, each with tool calls | `error` | `max_turns` |
/// | the model cannot be reached or answers something malformed | `error` | `model_error` (and `Err`) |
///
/// The tools sent to the model are the run's executor view, so the model sees exactly what may run; with deferred
/// tools ([`keel_tools_core::deferral`]), the view without the deferred tools no search has surfaced yet
/// ([`Run::shown`]), turn by turn. A turn whose
/// [`ToolChoice`] allows a subset of the tools ([`ToolChoice::Allowed`], [`ToolChoice::allowed_tools`]) is held
/// to it: the loop asks the model for the turn's choice once ([`ChatModel::tool_choice`]), hands it to the
/// client with the turn, and runs the turn's calls with [`Run::process_batch_allowed`], so a call of a tool the
/// turn did not allow is refused as `unknown_tool` and never runs, though the tool is in the view.
///
/// A model request that fails in a way worth trying again (a 429, a 5xx, Anthropic's 529, a refused or reset
/// connection, a timeout) is retried as the [`RetryPolicy`] says, each retry logged as a `model_retry` event with
/// its reason and wait. Retrying a request never runs a call twice: a turn's calls run only after its whole answer
/// has arrived, and a failed request has none. Each answer is logged as a `model_response` event with the tokens
/// the provider counted ([`Usage`]); the run's total is in the [`AgentOutcome`].
///
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use keel_tools_agent::{Agent, Message, Replay};
/// use keel_tools_core::{Executor, Registry};
/// use keel_tools_core::events::Decision;
/// use keel_tools_core::runs::Run;
///
/// let replay = Replay::from_jsonl(r#"{"message": {"role": "assistant", "content": "Nothing to do."}}"#, "inline")
///     .unwrap();
/// let registry = Registry::builder().without_inventory().build().unwrap();
/// let mut run = Run::new(Executor::new(registry.all().clone()).unwrap());
/// let mut messages = vec![Message::user("Hello?")];
/// let outcome = Agent::new(&replay).run(&mut run, &mut messages).await.unwrap();
/// assert_eq!(outcome.terminal, Decision::Done);
/// assert_eq!(outcome.answer.as_deref(), Some("Nothing to do."));
/// # });
/// ```
#[derive(Clone)]
pub struct Agent<M> {
    model: M,
    max_turns: u32,
    retry: RetryPolicy,
    stream: Option<Arc<dyn StreamSink>>,
}

impl<M: fmt::Debug> fmt::Debug for Agent<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("model", &self.model)
            .field("max_turns", &self.max_turns)
            .field("retry", &self.retry)
            .field("stream", &self.stream.is_some())
            .finish()
    }
}

/// How a run through the loop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentOutcome {
    /// The run's terminal decision.
    pub terminal: Decision,
    /// Why: `model_finished`, `after_observation`, `duplicate_call_id`, `max_turns`.
    pub reason: String,
    /// The model's final text, when it finished (`terminal == done`).
    pub answer: Option<String>,
    /// Model turns taken.
    pub turns: u32,
    /// Executed tool calls.
    pub steps: u32,
    /// Calls the model asked for that never ran because the run stopped.
    pub not_executed: Vec<NotExecuted>,
    /// Whether the replies came from a model or a recording.
    pub mode: Mode,
    /// The tokens of every turn that reported them, summed.
    pub usage: Usage,
    /// Model requests retried in the whole run.
    pub retries: u32,
}

/// Why the loop could not go on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AgentError {
    /// The model failed on this turn; the run was finished with `error` (`model_error`).
    Model {
        /// The 1-based turn.
        turn: u32,
        /// What went wrong.
        error: ModelError,
    },
    /// The run had already ended before the loop started.
    RunEnded {
        /// Its terminal decision.
        terminal: Decision,
    },
}

impl fmt::Display for AgentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentError::Model { turn, error } => write!(f, "turn {turn}: {error}"),
            AgentError::RunEnded { terminal } => {
                write!(f, "the run has already ended ({terminal}); start a new run for a new question")
            }
        }
    }
}

impl std::error::Error for AgentError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AgentError::Model { error, .. } => Some(error),
            AgentError::RunEnded { .. } => None,
        }
    }
}

impl<M: ChatModel> Agent<M> {
    /// A loop over `model` with at most 8 model turns and the default [`RetryPolicy`].
    pub fn new(model: M) -> Agent<M> {
        Agent { model, max_turns: 8, retry: RetryPolicy::default(), stream: None }
    }

    /// Where the [`StreamEvent`]s go: a [`StreamEvent::Waiting`] before every model request, and the text and
    /// tool-call deltas of the clients that stream (their builders' `stream(true)`).
    #[must_use]
    pub fn on_stream(mut self, sink: impl StreamSink + 'static) -> Self {
        self.stream = Some(Arc::new(sink));
        self
    }

    /// How failed model requests are retried ([`RetryPolicy::none`] turns retries off).
    #[must_use]
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// The most model turns one run may take (at least 1).
    #[must_use]
    pub fn max_turns(mut self, turns: u32) -> Self {
        self.max_turns = turns.max(1);
        self
    }

    /// The model.
    pub fn model(&self) -> &M {
        &self.model
    }

    /// Runs the loop on `run`, starting from `messages` (system and user messages, usually) and appending every
    /// assistant message and tool result to it. The run's event log records every request, observation and
    /// decision, and ends with `run_finished`; on `Err` too, so the caller keeps the transcript and the log.
    pub async fn run(&self, run: &mut Run, messages: &mut Vec<Message>) -> Result<AgentOutcome, AgentError> {
        if let Some(terminal) = run.terminal() {
            return Err(AgentError::RunEnded { terminal });
        }
        let mode = self.model.mode();
        // The run's whole view, when it defers tools: a client whose API searches tools itself is sent it.
        let all = run.executor().view().clone();
        let deferred = all.has_deferred().then_some(&all);
        let mut not_executed = Vec::new();
        let mut answer = None;
        let mut turns = 0;
        let mut usage = Usage::default();
        let mut retries = 0;
        while run.terminal().is_none() {
            if turns == self.max_turns {
                run.finish(Decision::Error, "max_turns");
                break;
            }
            turns += 1;
            // What the model is shown this turn is what the run lets it call: with deferred tools, those surfaced
            // so far and no others.
            let view = run.shown().clone();
            // The turn's choice, settled once: the client sends it, and the turn's calls are held to it.
            let reply = match self.model.tool_choice(&Turn::new(messages, &view)) {
                Ok(choice) => {
                    let reply = self.turn(run, turns, messages, (&view, deferred), choice.as_ref(), &mut retries).await;
                    reply.map(|reply| (reply, choice))
                }
                Err(error) => Err(error),
            };
            let (reply, choice) = match reply {
                Ok(reply) => reply,
                Err(error) => {
                    tracing::warn!(run_id = run.id(), turn = turns, %error, "model turn failed");
                    run.finish(Decision::Error, "model_error");
                    return Err(AgentError::Model { turn: turns, error });
                }
            };
            // What the provider's own tool search loaded this turn is shown from now on, and callable.
            if deferred.is_some() {
                let loaded = crate::deferral::loaded_by_provider(&reply);
                let names = loaded.iter().filter_map(|w| all.get_by_wire_name(w).or_else(|| all.get(w)));
                let names: Vec<String> = names.map(|d| d.name().to_owned()).collect();
                run.surface(names, reply.format.provider().as_str(), None);
            }
            let calls_count = u32::try_from(reply.calls.len()).unwrap_or(u32::MAX);
            run.record_model_response(turns, calls_count, reply.usage);
            if let Some(u) = reply.usage {
                usage += u;
            }
            let calls = reply.calls.clone();
            if calls.is_empty() {
                answer = Some(reply.content.clone());
                messages.push(Message::Assistant(reply));
                run.finish(Decision::Done, "model_finished");
                break;
            }
            messages.push(Message::Assistant(reply));
            let batch = match choice.as_ref().and_then(ToolChoice::allowed_tools) {
                Some(allowed) => run.process_batch_allowed(calls, allowed).await,
                None => run.process_batch(calls).await,
            };
            messages.extend(batch.results.into_iter().map(Message::Tool));
            not_executed.extend(batch.not_executed);
        }
        let reason = run
            .log()
            .events()
            .iter()
            .rev()
            .find_map(|e| match &e.kind {
                EventKind::RunFinished { reason, .. } => Some(reason.clone()),
                _ => None,
            })
            .unwrap_or_default();
        Ok(AgentOutcome {
            terminal: run.terminal().unwrap_or(Decision::Error),
            reason,
            answer,
            turns,
            steps: run.state().steps(),
            not_executed,
            mode,
            usage,
            retries,
        })
    }

    /// One model turn, retried as the policy says; each retry is logged on `run` and counted in `retries`.
    async fn turn(
        &self,
        run: &mut Run,
        turn_number: u32,
        messages: &[Message],
        (view, deferred): (&keel_tools_core::ToolView, Option<&keel_tools_core::ToolView>),
        choice: Option<&ToolChoice>,
        retries: &mut u32,
    ) -> Result<AssistantMessage, ModelError> {
        let mut attempt = 0;
        let mut waited = Duration::ZERO;
        loop {
            let sink = self.stream.as_deref();
            if let Some(sink) = sink {
                sink.event(&StreamEvent::Waiting { turn: turn_number, attempt: attempt + 1 });
            }
            let mut turn = Turn::new(messages, view).with_choice(choice).with_deferred(deferred);
            if let Some(sink) = sink {
                turn = turn.with_stream(sink);
            }
            #[cfg(feature = "otel")]
            let reply = {
                use opentelemetry::context::FutureExt as _;
                let cx = crate::otel::start(&self.model);
                let reply = self.model.chat(turn).with_context(cx.clone()).await;
                crate::otel::end(&cx, &reply);
                reply
            };
            #[cfg(not(feature = "otel"))]
            let reply = self.model.chat(turn).await;
            let error = match reply {
                Ok(reply) => return Ok(reply),
                Err(error) => error,
            };
            let Some((reason, wait)) = self.retry.next(&error, attempt, waited) else {
                return Err(error);
            };
            attempt += 1;
            *retries += 1;
            tracing::info!(run_id = run.id(), turn = turn_number, attempt, %reason, wait_ms = wait.as_millis() as u64, %error, "retrying the model request");
            run.record_model_retry(turn_number, attempt, &reason, wait, &error.to_string());
            tokio::time::sleep(wait).await;
            waited += wait;
        }
    }
}

/// The transcript of a conversation, one line per message, headed by where the replies came from:
/// `mode: replay` / `origin: synthetic_script <file> ...` or `mode: live` / `origin: ollama qwen3 at ...`.
pub fn transcript(model: &dyn ChatModel, messages: &[Message]) -> Vec<String> {
    let mut lines = vec![format!("mode: {}", model.mode()), format!("origin: {}", model.label())];
    if model.mode() == Mode::Replay {
        lines.push("note: a replay shows how the harness handles these responses, not how a model behaves".into());
    }
    lines.extend(messages.iter().map(Message::display_line));
    lines
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_model_error_is_the_source_with_its_own() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let error = ModelError::Replay { line: 0, message: "cannot read s: gone".into(), source: Some(Arc::new(io)) };
        let e = AgentError::Model { turn: 3, error: error.clone() };
        assert_eq!(e.to_string(), "turn 3: replay script: cannot read s: gone");
        let model = e.source().and_then(|s| s.downcast_ref::<ModelError>()).expect("the ModelError");
        assert_eq!(model, &error);
        let io = model.source().and_then(|s| s.downcast_ref::<std::io::Error>()).expect("its io::Error");
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
        assert!(AgentError::RunEnded { terminal: Decision::Error }.source().is_none());
    }
}
