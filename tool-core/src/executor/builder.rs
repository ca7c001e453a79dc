//! [`ExecutorBuilder`], and the [`ExecutorError`] of an executor that cannot be built.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use keel_tools_schema::Limits;

use super::handler::Deadline;
use super::index::NameIndex;
use super::{CallOptions, Executor, Inner};
use crate::call_context::{CallContext, StateMap};
use crate::call_policy::Policy;
use crate::effect::Effect;
use crate::failure::{FailureHook, InternalFailure};
use crate::once::{EffectLedger, Once, OnceFor};
use crate::registry::view::ToolView;
use crate::tool_definition::compiled;

/// One reason an executor could not be built, with the tool it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExecutorProblem {
    /// The tool's parameters cannot be mapped to arguments (e.g. `Args<T>` beside other arguments).
    Parameters {
        /// The tool.
        tool: String,
        /// What is wrong.
        problem: String,
    },
    /// An argument or result schema does not compile, or the arguments are not an object.
    Schema {
        /// The tool.
        tool: String,
        /// What is wrong.
        problem: String,
    },
    /// [`ExecutorBuilder::exactly_once`] names a tool the view does not hold, or a read tool.
    ExactlyOnce {
        /// The tool.
        tool: String,
        /// What is wrong.
        problem: String,
    },
    /// The tool takes `State<T>` (or an extractor needs a `T`) and the executor holds no `T`.
    MissingState {
        /// The tool.
        tool: String,
        /// The state's type, as `std::any::type_name` writes it.
        type_name: &'static str,
    },
}

impl ExecutorProblem {
    /// The tool the problem concerns.
    pub fn tool(&self) -> &str {
        match self {
            ExecutorProblem::Parameters { tool, .. }
            | ExecutorProblem::Schema { tool, .. }
            | ExecutorProblem::ExactlyOnce { tool, .. }
            | ExecutorProblem::MissingState { tool, .. } => tool,
        }
    }

    /// A stable code: `bad_parameters`, `bad_schema`, `bad_exactly_once` or `missing_state`.
    pub fn code(&self) -> &'static str {
        match self {
            ExecutorProblem::Parameters { .. } => "bad_parameters",
            ExecutorProblem::Schema { .. } => "bad_schema",
            ExecutorProblem::ExactlyOnce { .. } => "bad_exactly_once",
            ExecutorProblem::MissingState { .. } => "missing_state",
        }
    }
}

impl fmt::Display for ExecutorProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecutorProblem::Parameters { tool, problem }
            | ExecutorProblem::Schema { tool, problem }
            | ExecutorProblem::ExactlyOnce { tool, problem } => {
                write!(f, "tool `{tool}`: {problem}")
            }
            ExecutorProblem::MissingState { tool, type_name } => write!(
                f,
                "tool `{tool}`: it takes `State<{type_name}>`, but the executor holds no `{type_name}`; add it with \
                 `Executor::builder(view).state(value)`"
            ),
        }
    }
}

/// Why an executor could not be built: every problem found, each with its tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutorError {
    problems: Vec<ExecutorProblem>,
}

impl ExecutorError {
    /// The problems, in the view's order.
    pub fn problems(&self) -> &[ExecutorProblem] {
        &self.problems
    }
}

impl fmt::Display for ExecutorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the executor could not be built:")?;
        for p in &self.problems {
            write!(f, "\n- {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ExecutorError {}

/// Builds an [`Executor`]; see [`Executor::builder`].
#[must_use]
pub struct ExecutorBuilder {
    pub(super) view: ToolView,
    pub(super) state: StateMap,
    pub(super) policy: Arc<dyn Policy>,
    pub(super) default_timeout: Duration,
    pub(super) default_write_timeout: Duration,
    pub(super) timeout_grace: Option<Duration>,
    pub(super) limits: Limits,
    pub(super) output_limits: Limits,
    pub(super) on_failure: FailureHook,
    #[cfg(feature = "otel")]
    pub(super) otel_content: bool,
    pub(super) once: Option<(Arc<dyn EffectLedger>, OnceFor)>,
    pub(super) once_wait: Duration,
}

impl ExecutorBuilder {
    /// Calls of the tools `which` names run their handler once per idempotency key, on every replica that
    /// shares `ledger`: a retry is answered with the first run's result (`executed: false`, `replayed: true`).
    /// See [`crate::once`] for the rules. A tool `which` names that the view does not hold, or that is a `read`
    /// tool, fails the build.
    pub fn exactly_once(mut self, ledger: Arc<dyn EffectLedger>, which: OnceFor) -> Self {
        self.once = Some((ledger, which));
        self
    }
    /// How long a call that runs once waits for a duplicate that is running to finish before it answers
    /// `in_progress` (default [`crate::once::DEFAULT_WAIT`]).
    pub fn exactly_once_wait(mut self, wait: Duration) -> Self {
        self.once_wait = wait;
        self
    }
    /// Shared state handed to handlers that take `State<T>`.
    pub fn state<T: Send + Sync + 'static>(mut self, value: T) -> Self {
        self.state.insert(value);
        self
    }
    /// Whether each call's OpenTelemetry span records the arguments (`gen_ai.tool.call.arguments`) and the
    /// result (`gen_ai.tool.call.result`); off by default, since both may hold what the spans' readers should not
    /// see. Feature `otel`.
    #[cfg(feature = "otel")]
    pub fn otel_content(mut self, record: bool) -> Self {
        self.otel_content = record;
        self
    }
    /// Shared state already behind an [`Arc`], which the caller keeps too (handlers see it as `State<T>`).
    pub fn state_arc<T: Send + Sync + 'static>(mut self, value: Arc<T>) -> Self {
        self.state.insert_arc(value);
        self
    }
    /// The approval policy (default: [`EffectPolicy`](crate::policy::EffectPolicy)); any [`Policy`], a closure, or an
    /// `Arc<dyn Policy>` shared with other executors.
    pub fn policy(mut self, policy: impl Policy) -> Self {
        self.policy = Arc::new(policy);
        self
    }
    /// The timeout for `read` tools that declare none (default 30 s).
    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = timeout;
        self
    }
    /// The timeout for `write` and `destructive` tools that declare none (default 120 s): longer than a read's,
    /// because a side effect cut short by a timeout is the one the model cannot safely retry.
    pub fn default_write_timeout(mut self, timeout: Duration) -> Self {
        self.default_write_timeout = timeout;
        self
    }
    /// How long a handler may still finish after its deadline (default: a tenth of its timeout, at most 1 s, so a
    /// handler that ends just past its deadline is still answered). At the deadline the call's context
    /// is cancelled ([`CallContext::cancellation`]); a handler that returns within the grace period is answered
    /// as usual, its result included. One that has not is answered `timeout` and is not dropped: it keeps running
    /// to its end (its effects are not cut between two steps), and the result's details say so (`"handler":
    /// "running"`; see [`HandlerState`](crate::results::HandlerState)). A caller's cancellation is handled the same
    /// way.
    pub fn timeout_grace(mut self, grace: Duration) -> Self {
        self.timeout_grace = Some(grace);
        self
    }
    /// Size and depth limits on arguments (checked before schema validation).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
    /// Size and depth limits on results (default: depth 128, 8 MiB): a larger result is withheld as
    /// `invalid_tool_output` instead of flooding the model's context.
    pub fn output_limits(mut self, limits: Limits) -> Self {
        self.output_limits = limits;
        self
    }
    /// Where each internal failure goes: the call id, the tool and the whole error chain or panic text, which the
    /// model never sees. The default emits a `tracing` event at `ERROR` level (target `keel_tools_core::internal`).
    ///
    /// ```
    /// # use keel_tools_core::{tool, Executor, Registry, ToolCall};
    /// /// Always fails.
    /// #[tool(effect = "read", version = "1.0")]
    /// fn flaky() -> Result<String, std::io::Error> {
    ///     Err(std::io::Error::other("disk on fire"))
    /// }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    /// let log = seen.clone();
    /// let view = Registry::from_inventory().unwrap().view().names(["flaky"]).build().unwrap();
    /// let executor = Executor::builder(view)
    ///     .on_internal_failure(move |f| log.lock().unwrap().push(f.to_string()))
    ///     .build()
    ///     .unwrap();
    /// let r = executor.call(ToolCall::new("c1", "flaky", serde_json::json!({}))).await;
    /// assert_eq!(r.code(), Some("tool_internal_error"));
    /// assert_eq!(seen.lock().unwrap()[0], r#"call "c1" (tool `flaky`): error: disk on fire"#);
    /// # });
    /// ```
    pub fn on_internal_failure(mut self, hook: impl Fn(&InternalFailure<'_>) + Send + Sync + 'static) -> Self {
        self.on_failure = Arc::new(hook);
        self
    }
    /// Compiles every schema of the view, checks that the executor holds what every tool's extractors need (each
    /// `State<T>`), and builds the executor. Every problem is reported at once, with the tool named: after this,
    /// nothing that depends only on the configuration can fail a call.
    pub fn build(self) -> Result<Executor, ExecutorError> {
        let mut problems: Vec<ExecutorProblem> = Vec::new();
        for d in self.view.iter() {
            let tool = || d.name().to_owned();
            if let Some(p) = &d.problem {
                problems.push(ExecutorProblem::Parameters { tool: tool(), problem: p.clone() });
            }
            if let Err(e) = compiled(d) {
                problems.push(ExecutorProblem::Schema { tool: tool(), problem: e.to_owned() });
            }
            for type_name in d.requirements().missing_states(&self.state) {
                problems.push(ExecutorProblem::MissingState { tool: tool(), type_name });
            }
        }
        if let Some((_, OnceFor::Tools(names))) = &self.once {
            for name in names {
                match self.view.get(name) {
                    None => problems.push(ExecutorProblem::ExactlyOnce {
                        tool: name.clone(),
                        problem: "`exactly_once` names it, and the view holds no tool of that name".to_owned(),
                    }),
                    Some(d) if d.effect() == Effect::Read => problems.push(ExecutorProblem::ExactlyOnce {
                        tool: name.clone(),
                        problem: "`exactly_once` names it, and it is a read tool: it has no effect to do once"
                            .to_owned(),
                    }),
                    Some(_) => {}
                }
            }
        }
        if !problems.is_empty() {
            return Err(ExecutorError { problems });
        }
        let index = NameIndex::new(self.view.names());
        let deadlines: Box<[Deadline]> = self
            .view
            .iter()
            .map(|d| {
                let timeout = d.timeout().unwrap_or(match d.effect() {
                    Effect::Read => self.default_timeout,
                    Effect::Write | Effect::Destructive => self.default_write_timeout,
                });
                let grace = self.timeout_grace.unwrap_or_else(|| (timeout / 10).min(Duration::from_secs(1)));
                Deadline::new(timeout, grace)
            })
            .collect();
        let names = self.view.names().map(Arc::from).collect();
        let once = self.once.map(|(ledger, which)| {
            let leases = self
                .view
                .iter()
                .zip(&deadlines)
                .map(|(d, deadline)| {
                    let covered = match &which {
                        OnceFor::Writes => d.effect() != Effect::Read,
                        OnceFor::Tools(names) => names.iter().any(|n| n == d.name()),
                    };
                    covered.then(|| deadline.total().saturating_add(crate::once::LEASE_MARGIN))
                })
                .collect();
            Once { ledger, leases, wait: self.once_wait }
        });
        Ok(Executor {
            inner: Arc::new(Inner {
                view: self.view,
                index,
                deadlines,
                names,
                state: Arc::new(self.state),
                unread_context: CallContext::builder("", "").output_limits(self.output_limits).build(),
                no_options: CallOptions::default(),
                policy: self.policy,
                default_timeout: self.default_timeout,
                limits: self.limits,
                output_limits: self.output_limits,
                on_failure: self.on_failure,
                #[cfg(feature = "otel")]
                otel_content: self.otel_content,
                once,
            }),
        })
    }
}
