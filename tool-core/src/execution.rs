//! The [`Executor`]: every model-produced call goes through one fixed order.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::field::Empty;

use crate::call::ToolCall;
use crate::call_context::{CallContext, Notifier, StateMap};
use crate::call_policy::{Approval, Approvals, EffectPolicy, Policy, PolicyDecision, PolicyRequest};
use crate::codec::Codec;
use crate::effect::Effect;
use crate::failure::{FailureHook, InternalFailure, trace_failure};
use crate::input::ClientInput;
use crate::once::{Answered, Claim, EffectLedger, Once, OnceFor};
use crate::result::ToolResult;
use crate::tool_definition::{CompiledTool, Handler, ToolDefinition, compiled};
use crate::view::ToolView;
use keel_tools_schema::Limits;
use keel_tools_schema::validate::{check_limits, check_limits_scan};

mod bodies;
mod handler;
mod index;
use bodies::{
    Failed, approval_body, cancelled_body, denied_body, insufficient_scope_body, invalid_arguments_body,
    timed_out_body, unknown_tool, unreadable_arguments,
};
use handler::{Deadline, Fault, Ran, Running, Started, detach, run_inline, settle, start};
use index::NameIndex;

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

/// The target of the executor's `tracing` events, those its own files emit included.
const TARGET: &str = module_path!();

struct Inner {
    view: ToolView,
    /// The view's tools by name, for the lookup of every call.
    index: NameIndex,
    /// Each tool's deadline, in the view's order: its timeout (or its effect's default) and the grace period.
    deadlines: Box<[Deadline]>,
    /// Each tool's name, in the view's order, shared by the events of a run's calls (see [`Executor::find`]).
    names: Box<[Arc<str>]>,
    state: Arc<StateMap>,
    /// Handed to handlers that never read their context (see `ToolDefinition::reads_context`).
    unread_context: CallContext,
    /// The options of [`Executor::call`]: none.
    no_options: CallOptions,
    policy: Arc<dyn Policy>,
    default_timeout: Duration,
    limits: Limits,
    output_limits: Limits,
    on_failure: FailureHook,
    /// Whether the OpenTelemetry spans record arguments and results.
    #[cfg(feature = "otel")]
    otel_content: bool,
    /// The ledger of the tools that run once, if any do.
    once: Option<Once>,
}

/// The [`Executor`]: every model-produced call goes through one fixed order.
///
/// ```text
/// ToolCall ─▶ registered in this view, and allowed by the call's options? ──no──▶ unknown_tool
///                 │yes                                          (tool_version: null, executed: false)
///                 ▼
///             arguments valid against the schema the model saw? ──no──▶ invalid_arguments (JSON pointers)
///                 │yes
///                 ▼
///             the scopes the tool needs granted? ──no──▶ insufficient_scope
///                 │yes
///                 ▼
///             policy (effect / approval) ──no──▶ approval_required | policy_denied
///                 │allow
///                 ▼
///             a tool that runs once: its key claimed? ──no──▶ the recorded result (replayed: true)
///                 │yes (or not such a tool)                   | in_progress | idempotency_conflict
///                 ▼                                           | state_unavailable
///             handler (timeout, panic caught) ──▶ the tool's own code | tool_internal_error | timeout
///                 │ok
///                 ▼
///             result valid against the result schema? ──no──▶ invalid_tool_output
///                 │yes
///                 ▼
///             ok (a tool that runs once: the result recorded under its key)
/// ```
///
/// The order is the design: validating after the policy would let invalid arguments reach approval; running the
/// handler before validation would let them cause side effects; dropping the output check would let a broken
/// result into the next turn. Nothing internal (panic text, error chains, type names, paths) is put in a
/// [`ToolResult`]: the detail goes to a `tracing` event carrying the call id.
///
/// ```
/// # use keel_tools_core::{tool, Registry, Executor, ToolCall};
/// /// Adds two numbers.
/// #[tool(effect = "read", version = "1.0")]
/// fn add(a: i64, b: i64) -> i64 { a + b }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let registry = Registry::from_inventory().unwrap();
/// let executor = Executor::new(registry.view().names(["add"]).build().unwrap()).unwrap();
/// let result = executor.call(ToolCall::new("call-1", "add", serde_json::json!({"a": 2, "b": 3}))).await;
/// assert_eq!(result.data(), Some(&serde_json::json!(5)));
/// # });
/// ```
///
/// Runs calls against one [`ToolView`] in the fixed order. Cheap to clone; calls may run concurrently.
#[derive(Clone)]
pub struct Executor {
    inner: Arc<Inner>,
}

impl fmt::Debug for Executor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Executor")
            .field("view", &self.inner.view)
            .field("state", &self.inner.state)
            .field("default_timeout", &self.inner.default_timeout)
            .finish_non_exhaustive()
    }
}

/// Builds an [`Executor`]; see [`Executor::builder`].
#[must_use]
pub struct ExecutorBuilder {
    view: ToolView,
    state: StateMap,
    policy: Arc<dyn Policy>,
    default_timeout: Duration,
    default_write_timeout: Duration,
    timeout_grace: Option<Duration>,
    limits: Limits,
    output_limits: Limits,
    on_failure: FailureHook,
    #[cfg(feature = "otel")]
    otel_content: bool,
    once: Option<(Arc<dyn EffectLedger>, OnceFor)>,
    once_wait: Duration,
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
    /// The approval policy (default: [`EffectPolicy`]); any [`Policy`], a closure, or an `Arc<dyn Policy>` shared
    /// with other executors.
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

/// Per-call inputs that do not come from the model: whom the call is for (tenant, principal) and the stream of
/// requests it came on, approvals, cancellation, notifications.
///
/// ```
/// use keel_tools_core::{tool, CallContext, Executor, Registry, ToolCall};
/// use keel_tools_core::executor::{CallOptions, CancellationToken};
///
/// /// Says whom the call runs for.
/// #[tool(effect = "read", version = "1.0")]
/// fn whoami(ctx: CallContext) -> String {
///     ctx.tenant().unwrap_or("nobody").to_owned()
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let executor = Executor::new(Registry::from_inventory().unwrap().view().names(["whoami"]).build().unwrap()).unwrap();
/// let stop = CancellationToken::new(); // cancelling it cancels the call
/// let options = CallOptions::new().tenant("acme").cancellation(stop.clone());
/// let r = executor.call_with(ToolCall::new("c1", "whoami", serde_json::json!({})), &options).await;
/// assert_eq!(r.data(), Some(&serde_json::json!("acme")));
/// # });
/// ```
///
/// Cloning copies everything but one thing: a value and its clone are two streams for calls whose id keel generated
/// and that name no stream (see [`CallOptions::stream`]).
#[derive(Clone, Default)]
pub struct CallOptions {
    tenant: Option<Arc<str>>,
    principal: Option<Arc<str>>,
    stream: Option<Arc<str>>,
    unnamed_stream: UnnamedStream,
    approvals: Approvals,
    cancellation: Option<CancellationToken>,
    notifier: Option<Arc<dyn Notifier>>,
    input: Option<Arc<dyn ClientInput>>,
    admitted: Option<Arc<dyn Fn() + Send + Sync>>,
    granted_scopes: Option<Arc<[Arc<str>]>>,
    allowed_tools: Option<Arc<[Arc<str>]>>,
    given_key: Option<Arc<str>>,
    caller_scope: Option<Arc<str>>,
}

impl fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallOptions")
            .field("tenant", &self.tenant)
            .field("principal", &self.principal)
            .field("stream", &self.stream)
            .field("caller_scope", &self.caller_scope)
            .field("approvals", &self.approvals)
            .field("allowed_tools", &self.allowed_tools)
            .finish_non_exhaustive()
    }
}

impl CallOptions {
    /// No tenant, no principal, no stream, no approvals.
    pub fn new() -> CallOptions {
        CallOptions::default()
    }
    /// The tenant the call runs for.
    pub fn tenant(mut self, tenant: impl Into<Arc<str>>) -> Self {
        self.tenant = Some(tenant.into());
        self
    }
    /// Who the call is made for within its tenant: the authenticated user or client, as the host knows it
    /// ([`CallContext::principal`](crate::CallContext::principal)). Part of the call's idempotency key, and of
    /// what an MCP `requestState` is bound to.
    pub fn principal(mut self, principal: impl Into<Arc<str>>) -> Self {
        self.principal = Some(principal.into());
        self
    }
    /// The stream of requests the call came on: the scope within which its call id names one call (an MCP
    /// session, one conversation of an agent loop). Calls on two streams never share an idempotency key; a
    /// retry on the same stream under the same call id keeps its key. See
    /// [`CallContext::idempotency_key`](crate::CallContext::idempotency_key) for the whole rule.
    ///
    /// Every keel transport sets one. A host sets one for each conversation it drives itself, and stores it with
    /// the conversation to keep its keys across a restart. Without one, a call whose id the host chose is keyed
    /// by its tenant, principal, tool and call id (the host owns its ids), and a call whose id keel generated
    /// ([`ToolCall::is_generated_id`]: the provider sent none, and such ids repeat from one conversation to the
    /// next) is keyed to this `CallOptions` value: a key no call made with another value shares, not even with a
    /// clone of this one. A [`Run`](crate::runs::Run) makes its calls with its own value;
    /// [`Executor::call`] makes every call with the same one, so give it no generated ids of two conversations.
    pub fn stream(mut self, stream: impl Into<Arc<str>>) -> Self {
        self.stream = Some(stream.into());
        self
    }
    /// The caller's own idempotency key for the call (an HTTP `Idempotency-Key` header, an MCP request's
    /// `_meta` `keel/idempotencyKey`): the call's key is derived from it, the tool and whose keys it is among (its
    /// tenant, principal and [caller scope](CallOptions::caller_scope)), and not from its stream or call id, so
    /// that a retry made on another connection, by another replica, as the same caller is the same call. Two
    /// tenants, two principals or two caller scopes never share a key. Give it to one call only.
    ///
    /// A call with neither tenant, principal nor caller scope has no caller to bind its key to, and a key any
    /// anonymous caller could name would let one replay another's recorded result, learn which keys exist, or
    /// claim another's key first. Such a key is bound to the call's [stream](CallOptions::stream) instead (an MCP
    /// session): it names one call within that stream only, and a retry on another stream is another call. (With
    /// no stream either, it is bound to this `CallOptions` value, as a generated call id is.) A host whose callers
    /// are anonymous and must retry across connections gives each a caller scope it can trust.
    pub fn idempotency_key(mut self, key: impl Into<Arc<str>>) -> Self {
        self.given_key = Some(key.into());
        self
    }
    /// Whose idempotency keys the call's are, for a caller the host knows by neither tenant nor principal: an MCP
    /// session's id, a client id the host authenticated by other means. Part of the key derived from a caller's own
    /// key ([`CallOptions::idempotency_key`]), beside the tenant and principal: callers of two scopes never meet
    /// in the key space, and a retry in the same scope, on any stream or replica, is the same call. Without it,
    /// a call without tenant or principal has its key bound to its stream.
    pub fn caller_scope(mut self, scope: impl Into<Arc<str>>) -> Self {
        self.caller_scope = Some(scope.into());
        self
    }
    /// The scope set with [`CallOptions::caller_scope`], if any.
    pub fn get_caller_scope(&self) -> Option<&str> {
        self.caller_scope.as_deref()
    }
    /// The key given with [`CallOptions::idempotency_key`].
    pub fn get_idempotency_key(&self) -> Option<&str> {
        self.given_key.as_deref()
    }
    /// The tenant set with [`CallOptions::tenant`], if any.
    pub fn get_tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }
    /// The principal set with [`CallOptions::principal`], if any.
    pub fn get_principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }
    /// The OAuth scopes the caller was granted (by its access token): a tool that needs a scope not among them
    /// ([`ToolDefinition::scopes`]) is refused `insufficient_scope`, before the policy, and never runs. Without
    /// it (a host's own call, a transport without authentication) no scope is checked.
    pub fn granted_scopes(mut self, scopes: impl IntoIterator<Item = impl Into<Arc<str>>>) -> Self {
        self.granted_scopes = Some(scopes.into_iter().map(Into::into).collect());
        self
    }
    /// Only these tools of the view may be called: a call of any other is refused exactly as a call of a tool the
    /// view does not hold (`unknown_tool`, not executed), though the tool is in the view and the model may have been
    /// shown it. Without it every tool of the view may be called.
    ///
    /// For a restriction that holds for one model turn only, as an agent loop makes with a tool choice that allows
    /// a subset of the tools it shows (so that the list it sends, and the provider's prompt cache, stay the same),
    /// see [`Run::process_batch_allowed`](crate::runs::Run::process_batch_allowed).
    ///
    /// ```
    /// # use keel_tools_core::{tool, Executor, Registry, ToolCall};
    /// # use keel_tools_core::executor::CallOptions;
    /// /// Reads the weather.
    /// #[tool(effect = "read", version = "1.0")]
    /// fn weather_now(city: String) -> String { format!("sunny in {city}") }
    /// /// Reads the time.
    /// #[tool(effect = "read", version = "1.0")]
    /// fn time_now() -> String { "noon".into() }
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let view = Registry::from_inventory().unwrap().view().names(["weather_now", "time_now"]).build().unwrap();
    /// let executor = Executor::new(view).unwrap();
    /// let options = CallOptions::new().allowed_tools(["time_now"]);
    /// let refused = executor.call_with(ToolCall::new("c1", "weather_now", serde_json::json!({"city": "Oslo"})), &options).await;
    /// assert_eq!(refused.code(), Some("unknown_tool"));
    /// assert!(!refused.executed);
    /// let ran = executor.call_with(ToolCall::new("c2", "time_now", serde_json::json!({})), &options).await;
    /// assert!(ran.is_ok());
    /// # });
    /// ```
    pub fn allowed_tools(mut self, names: impl IntoIterator<Item = impl Into<Arc<str>>>) -> Self {
        self.allowed_tools = Some(names.into_iter().map(Into::into).collect());
        self
    }
    /// The tools set with [`CallOptions::allowed_tools`], if any.
    pub fn get_allowed_tools(&self) -> Option<&[Arc<str>]> {
        self.allowed_tools.as_deref()
    }
    /// Whether these options let a call name the tool `name` ([`CallOptions::allowed_tools`]).
    #[inline]
    pub(crate) fn permits(&self, name: &str) -> bool {
        self.allowed_tools.as_deref().is_none_or(|allowed| allowed.iter().any(|a| **a == *name))
    }
    /// The scopes set with [`CallOptions::granted_scopes`], if any.
    pub fn get_granted_scopes(&self) -> Option<&[Arc<str>]> {
        self.granted_scopes.as_deref()
    }
    /// The stream set with [`CallOptions::stream`], if any.
    pub fn get_stream(&self) -> Option<&str> {
        self.stream.as_deref()
    }
    /// Adds an approval for one tool and exact arguments.
    pub fn approve(mut self, approval: Approval) -> Self {
        self.approvals.grant(approval);
        self
    }
    /// Replaces the approvals.
    pub fn approvals(mut self, approvals: Approvals) -> Self {
        self.approvals = approvals;
        self
    }
    /// A parent cancellation token: cancelling it cancels the call.
    pub fn cancellation(mut self, token: CancellationToken) -> Self {
        self.cancellation = Some(token);
        self
    }
    /// Where the handler's log messages and progress go.
    pub fn notifier(mut self, notifier: Arc<dyn Notifier>) -> Self {
        self.notifier = Some(notifier);
        self
    }
    /// How the handler asks its client for input ([`CallContext::ask`](crate::CallContext::ask)); without it, a
    /// request fails with [`InputError::Unavailable`](crate::context::InputError::Unavailable).
    pub fn client_input(mut self, input: Arc<dyn ClientInput>) -> Self {
        self.input = Some(input);
        self
    }
    /// Called once the call has passed every check before its handler (registered, arguments valid, policy),
    /// just before the handler runs; never for a call refused before it. A transport uses it to answer its caller
    /// early, e.g. with an MCP task that the running call completes.
    pub fn on_admitted(mut self, f: impl Fn() + Send + Sync + 'static) -> Self {
        self.admitted = Some(Arc::new(f));
        self
    }
    /// The parent cancellation token, if one was given.
    pub(crate) fn cancellation_token(&self) -> Option<&CancellationToken> {
        self.cancellation.as_ref()
    }
    /// The stream a call's idempotency key is derived with: the one given, else for an id keel generated (which
    /// names a call only within its conversation) this value's own, else none.
    pub(crate) fn key_stream(&self, call_id: &str) -> Option<Arc<str>> {
        match &self.stream {
            Some(stream) => Some(stream.clone()),
            None if crate::call::is_generated_call_id(call_id) => {
                Some(format!("keel-unnamed-stream/{:032x}", self.unnamed_stream.0).into())
            }
            None => None,
        }
    }
    /// The idempotency key of a call of `tool` with `call_id` made with these options: the key its handler's
    /// context has ([`CallContext::idempotency_key`](crate::CallContext::idempotency_key)).
    pub(crate) fn key_for(&self, tool: &str, call_id: &str) -> String {
        if let Some(given) = &self.given_key {
            let (tenant, principal) = (self.tenant.as_deref(), self.principal.as_deref());
            let unnamed;
            let bound = match &self.caller_scope {
                Some(scope) => KeyBound::Scope(scope),
                // As keys were bound before caller scopes (version 3).
                None if tenant.is_some() || principal.is_some() => {
                    let scope = crate::call_context::KeyScope { tenant, principal, stream: None };
                    return crate::call_context::given_idempotency_key(scope, tool, given);
                }
                None => match &self.stream {
                    Some(stream) => KeyBound::Stream(stream),
                    None => {
                        unnamed = format!("keel-unnamed-stream/{:032x}", self.unnamed_stream.0);
                        KeyBound::Stream(&unnamed)
                    }
                },
            };
            return bound_given_key(tenant, principal, bound, tool, given);
        }
        let stream = self.key_stream(call_id);
        let scope = crate::call_context::KeyScope {
            tenant: self.tenant.as_deref(),
            principal: self.principal.as_deref(),
            stream: stream.as_deref(),
        };
        crate::call_context::idempotency_key(scope, tool, call_id)
    }
}

/// What a caller's own idempotency key is bound to besides its tenant and principal.
enum KeyBound<'a> {
    /// The caller's scope ([`CallOptions::caller_scope`]).
    Scope(&'a str),
    /// The call's stream, for a caller of no tenant, principal or scope.
    Stream(&'a str),
}

/// The key of a call whose caller gave its own key with a caller scope, or with neither tenant, principal nor
/// scope: version 4, the SHA-256 of the tenant and principal (each with whether it is there), the scope or the
/// stream (tagged, so that a scope never names a stream's keys), the tool and the given key, each part
/// length-prefixed, cut to 128 bits. Never equal to a key of versions 1 to 3.
fn bound_given_key(
    tenant: Option<&str>,
    principal: Option<&str>,
    bound: KeyBound<'_>,
    tool: &str,
    given: &str,
) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    let mut part = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    part(b"keel-idempotency-key-4");
    for who in [tenant, principal] {
        part(&[u8::from(who.is_some())]);
        part(who.unwrap_or("").as_bytes());
    }
    let (tag, bound) = match bound {
        KeyBound::Scope(scope) => (&b"scope"[..], scope),
        KeyBound::Stream(stream) => (&b"stream"[..], stream),
    };
    part(tag);
    part(bound.as_bytes());
    part(tool.as_bytes());
    part(given.as_bytes());
    let digest = h.finalize();
    let mut key = String::with_capacity(35);
    key.push_str("ik-");
    for b in &digest[..16] {
        use std::fmt::Write as _;
        let _ = write!(key, "{b:02x}");
    }
    key
}

/// The stream of the calls made with one [`CallOptions`] value that names none: random, and new for every value,
/// a clone included, so that two conversations never share it by accident. It needs no secrecy, only to differ:
/// the process's keyed hasher gives 128 bits without a system call.
struct UnnamedStream(u128);

impl Default for UnnamedStream {
    fn default() -> UnnamedStream {
        use std::hash::BuildHasher as _;
        let hasher = std::collections::hash_map::RandomState::new();
        UnnamedStream((u128::from(hasher.hash_one(0u8)) << 64) | u128::from(hasher.hash_one(1u8)))
    }
}

impl Clone for UnnamedStream {
    fn clone(&self) -> UnnamedStream {
        UnnamedStream::default()
    }
}

/// Where a call's tool is in the executor's view: to be looked up, or found by the caller already (`None`: the
/// view has no tool of that name).
#[derive(Debug, Clone, Copy)]
enum Place {
    Unsought,
    Found(Option<usize>),
}

impl Executor {
    /// An executor over `view` with the default policy and timeout.
    pub fn new(view: ToolView) -> Result<Executor, ExecutorError> {
        Executor::builder(view).build()
    }

    /// A builder for an executor over `view`.
    pub fn builder(view: ToolView) -> ExecutorBuilder {
        ExecutorBuilder {
            view,
            state: StateMap::new(),
            policy: Arc::new(EffectPolicy),
            default_timeout: Duration::from_secs(30),
            default_write_timeout: Duration::from_secs(120),
            timeout_grace: None,
            limits: Limits::default(),
            output_limits: Limits::OUTPUT_DEFAULT,
            on_failure: Arc::new(trace_failure),
            #[cfg(feature = "otel")]
            otel_content: false,
            once: None,
            once_wait: crate::once::DEFAULT_WAIT,
        }
    }

    /// The view this executor allows (and that the model was shown).
    pub fn view(&self) -> &ToolView {
        &self.inner.view
    }

    /// The shared state handed to handlers; [`ExecutorBuilder::approval_key`] keeps the pending calls' key there,
    /// under a type only `pending` can name.
    pub(crate) fn state_map(&self) -> &StateMap {
        &self.inner.state
    }

    /// Whether a call of `name` may overlap with other calls of one batch: the tool is in the view and the
    /// policy says it is parallel-safe ([`Policy::parallel_safe`]; by default, `read` tools). A name that is not
    /// in the view is not: its call is refused at once, alone, so that a stop it causes starts nothing after it.
    pub fn parallel_safe(&self, name: &str) -> bool {
        self.lookup(name).is_some_and(|(_, def)| self.inner.policy.parallel_safe(def))
    }

    /// The size and depth limits on arguments ([`ExecutorBuilder::limits`]).
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// The codec of `provider` for this executor's view, holding argument text to this executor's
    /// [`limits`](Executor::limits) before it is parsed.
    pub fn codec(&self, provider: crate::tool_schemas::Provider) -> Codec {
        self.inner.view.codec(provider).with_limits(self.inner.limits)
    }

    /// The position in the view and the definition of the tool named `name` (exact match), through the index.
    #[inline]
    fn lookup(&self, name: &str) -> Option<(usize, &ToolDefinition)> {
        let tools = self.inner.view.tools();
        self.inner.index.get(name, |i| tools[i].name()).map(|at| (at, &*tools[at]))
    }

    /// Where the tool named `name` is in the view (`None`: not registered), and the name as one shared string: the
    /// registered tool's own (no copy), else a new one. A run names a call's events with the string, and hands the
    /// place to [`Executor::call_at`], so that the call is not looked up twice.
    pub(crate) fn find(&self, name: &str) -> (Option<usize>, Arc<str>) {
        match self.lookup(name) {
            Some((at, _)) => (Some(at), Arc::clone(&self.inner.names[at])),
            None => (None, Arc::from(name)),
        }
    }

    /// Runs one call with no tenant and no approvals.
    ///
    /// The future is [`Executor::call_with`]'s, returned as it is (no wrapper to poll and move the result through).
    pub fn call(&self, call: ToolCall) -> impl Future<Output = ToolResult> + Send + '_ {
        self.call_with(call, &self.inner.no_options)
    }

    /// Runs one call in the fixed order. Never panics on any input; always returns exactly one result.
    ///
    /// Like an `async fn`, it does nothing until polled. Without the `otel` feature the future is that of the
    /// traced call, returned as it is.
    pub fn call_with<'a>(
        &'a self,
        call: ToolCall,
        options: &'a CallOptions,
    ) -> impl Future<Output = ToolResult> + Send + 'a {
        self.call_placed(call, options, Place::Unsought)
    }

    /// [`Executor::call_with`] for a call whose tool the caller has looked up already ([`Executor::find`]): `at`
    /// is its place in this executor's view, `None` for a name it does not have.
    pub(crate) fn call_at<'a>(
        &'a self,
        call: ToolCall,
        options: &'a CallOptions,
        at: Option<usize>,
    ) -> impl Future<Output = ToolResult> + Send + 'a {
        self.call_placed(call, options, Place::Found(at))
    }

    #[inline(always)]
    fn call_placed<'a>(
        &'a self,
        call: ToolCall,
        options: &'a CallOptions,
        place: Place,
    ) -> impl Future<Output = ToolResult> + Send + 'a {
        #[cfg(feature = "otel")]
        {
            use opentelemetry::context::FutureExt as _;
            async move {
                let content = self.inner.otel_content;
                let def = self.place(call.name(), place).map(|(_, d)| d);
                let arguments = if content { call.arguments().ok() } else { None };
                let cx = crate::otel::start(def, call.name(), call.id(), arguments);
                let result = self.call_traced(call, options, place).with_context(cx.clone()).await;
                crate::otel::end(&cx, &result, content);
                result
            }
        }
        #[cfg(not(feature = "otel"))]
        self.call_traced(call, options, place)
    }

    /// The place and definition of the tool named `name`, looked up unless `place` has it already.
    #[inline(always)]
    fn place(&self, name: &str, place: Place) -> Option<(usize, &ToolDefinition)> {
        match place {
            Place::Unsought => self.lookup(name),
            Place::Found(at) => at.map(|at| (at, &*self.inner.view.tools()[at])),
        }
    }
}

/// The fixed order: the call's traced future, and its steps. A step that ends the call hands back its failure
/// ([`Failed`], large); the steps are inlined into the call's future, and a boxed failure would allocate for every
/// call that fails.
#[expect(clippy::result_large_err, reason = "the steps are inlined; a boxed failure would allocate")]
impl Executor {
    /// [`Executor::call_with`] under its `tracing` span: the steps of the fixed order, one after another, each
    /// either handing the next what it needs or ending the call with its failure. The span is entered while the
    /// call's steps run here (an inline handler among them), and on every poll of a handler that is still pending,
    /// but never held across an `.await`; a disabled span (no subscriber interested) makes entering it and
    /// recording on it do nothing, and no clock is read for it.
    async fn call_traced(&self, call: ToolCall, options: &CallOptions, place: Place) -> ToolResult {
        let span = tracing::info_span!(
            "tool_call",
            call_id = %call.id(),
            tool_name = Empty,
            tool_version = Empty,
            effect = Empty,
            outcome = Empty,
            executed = Empty,
            duration_us = Empty,
        );
        let started = if span.is_disabled() { None } else { Some(Instant::now()) };
        let entered = span.enter();
        // The call's strings move into the result: the lookup is exact, so `name` equals the definition's name.
        let (call_id, name, arguments) = call.into_parts();

        // 1. Registered in this view, and allowed by the options?
        let Some((at, def)) = self.admit(&name, place, options, &span) else {
            return traced(&span, started, unknown_tool(call_id, name, &span));
        };
        let answer = Answer { span: &span, started, call_id, name, version: Some(def.version.clone()) };
        let call_id = answer.call_id.as_str();

        // 2. Arguments valid against the schema the model saw? JSON at all, then valid.
        let mut arguments = match arguments {
            Ok(arguments) => arguments,
            Err(e) => return answer.failure(Failed::before(unreadable_arguments(e))),
        };
        let compiled = match self.validate(def, call_id, &mut arguments) {
            Ok(compiled) => compiled,
            Err(failed) => return answer.failure(failed),
        };

        // 3. Allowed by the policy (effect, approvals)?
        if let Err(failed) = self.authorize(def, &mut arguments, options) {
            return answer.failure(failed);
        }

        // 3b. A tool that runs once: the key claimed in the ledger, or the call answered from its record (awaited
        // with the span left, as below).
        let (claimed, entered) = match self.inner.once.as_ref().and_then(|once| Some((once, once.leases[at]?))) {
            None => (None, entered),
            Some((once, lease)) => {
                drop(entered);
                let key = options.key_for(def.name(), call_id);
                let fingerprint = crate::once::fingerprint(def.name(), &arguments);
                let claim = once.claim(key, fingerprint, lease, options.cancellation.as_ref());
                match tracing::Instrument::instrument(claim, span.clone()).await {
                    Claim::Run(lease) => (Some((once, lease)), span.enter()),
                    Claim::Answer(answered) => {
                        let _entered = span.enter();
                        return answer.answered(answered);
                    }
                }
            }
        };
        // A handler that outlived the call: still running, or ended too late for it.
        let outlived: Option<Running>;
        let result = 'steps: {
            // 4. The handler, under a timeout, with panics caught. One that ran here did so under the span; one still
            // to be awaited is awaited with the span left (a guard held across an `.await` would stay entered while
            // other tasks run on this thread): its polls enter the span themselves.
            let lease = claimed.as_ref().map(|(_, lease)| lease);
            let ((outcome, left), _entered) = match self.invoke(at, def, call_id, arguments, options, lease) {
                Invoked::Ran(ran) => (ran, entered),
                Invoked::Started { begun, token } => {
                    drop(entered);
                    let ran = match begun {
                        Started::Ended(ran) => ran,
                        Started::Running(fut) => {
                            let (deadline, caller) = (&self.inner.deadlines[at], options.cancellation.as_ref());
                            settle(fut, deadline, token.as_ref(), caller, &span).await
                        }
                    };
                    let entered = span.enter();
                    // The call is over either way: a handler still running in the background sees cancellation.
                    if let Some(token) = token {
                        token.cancel();
                    }
                    (ran, entered)
                }
            };
            outlived = left;

            // 5. Business error, internal error, timeout?
            let value = match outcome {
                Ok(value) => value,
                Err(fault) => {
                    let failed = self.judge(at, def, call_id, fault, options);
                    break 'steps answer.failure(failed);
                }
            };

            // 6. The result valid against the result schema?
            if let Err(failed) = self.check_result(def, call_id, compiled, &value) {
                break 'steps answer.failure(failed);
            }

            // 7. Ok.
            answer.ok(value)
        };
        // 3b, again: what the call did, recorded (awaited with the span left). A handler that outlived its call
        // keeps the call's claim: its outcome is recorded when it ends, the lease renewed until then.
        match (claimed, outlived) {
            (None, None) => result,
            (None, Some(running)) => {
                detach(running, &result.call_id, &result.tool_name);
                result
            }
            (Some((once, lease)), None) => {
                once.settle(lease, &result).await;
                result
            }
            (Some((_, lease)), Some(running)) => {
                let call_id = result.call_id.clone();
                if running.has_ended() {
                    self.outlive(at, call_id, lease, running).await;
                } else {
                    let outliving = self.clone().outlive_owned(at, call_id, lease, running);
                    tokio::spawn(tracing::Instrument::instrument(outliving, span.clone()));
                }
                result
            }
        }
    }

    /// [`Executor::outlive`] on a clone of the executor, for a task of its own.
    async fn outlive_owned(self, at: usize, call_id: String, lease: crate::lease::Lease, running: Running) {
        self.outlive(at, call_id, lease, running).await;
    }

    /// Awaits a handler that outlived its call, the call's lease renewed meanwhile, and records its outcome as the
    /// call's: the steps after the handler's (5 and 6) judge what it returned, as they would have in time.
    async fn outlive(&self, at: usize, call_id: String, lease: crate::lease::Lease, mut running: Running) {
        let Some(once) = &self.inner.once else { return };
        let caught = match running.ended() {
            Some(caught) => caught,
            None => {
                let lease_for = once.leases[at].unwrap_or(crate::once::LEASE_MARGIN);
                once.outlive(&lease, lease_for, running).await
            }
        };
        let def = &*self.inner.view.tools()[at];
        let (executed, body) = match handler::outcome(caught) {
            Ok(value) => match compiled(def) {
                Ok(compiled) => match self.check_result(def, &call_id, compiled, &value) {
                    Ok(()) => {
                        let result =
                            ToolResult::success(call_id, def.name().to_owned(), Some(def.version.clone()), value);
                        tracing::warn!(target: TARGET, call_id = %result.call_id, tool_name = def.name(), "a tool handler ended after its call was answered; its outcome is recorded");
                        once.settle(lease, &result).await;
                        return;
                    }
                    Err(failed) => (failed.executed, failed.body),
                },
                Err(problem) => (true, self.uncompiled_body(def, &call_id, problem)),
            },
            Err(fault) => {
                let failed = self.judge(at, def, &call_id, fault, &self.inner.no_options);
                (failed.executed, failed.body)
            }
        };
        let result = ToolResult::failure(call_id, def.name().to_owned(), Some(def.version.clone()), executed, body);
        tracing::warn!(target: TARGET, call_id = %result.call_id, tool_name = def.name(), outcome = result.error().map_or("ok", |e| e.code.as_str()), "a tool handler ended after its call was answered; its outcome is recorded");
        once.settle(lease, &result).await;
    }

    /// Step 1: is the tool registered in this view, and not outside the options' allowed tools? Exact match only.
    /// Its place and definition, recorded on the call's span. A tool outside the allowed tools is answered as one
    /// the view does not hold.
    #[inline(always)]
    fn admit(
        &self,
        name: &str,
        place: Place,
        options: &CallOptions,
        span: &tracing::Span,
    ) -> Option<(usize, &ToolDefinition)> {
        let (at, def) = self.place(name, place)?;
        if !options.permits(name) {
            return None;
        }
        span.record("tool_name", def.name());
        span.record("tool_version", def.version());
        span.record("effect", def.effect().as_str());
        Some((at, def))
    }

    /// Step 2: are the arguments valid against the schema the model saw? Within the limits, then in their one
    /// canonical form (in place), then against the schema. The tool's compiled schemas (the result's is step 6's).
    #[inline(always)]
    fn validate<'d>(
        &self,
        def: &'d ToolDefinition,
        call_id: &str,
        arguments: &mut Value,
    ) -> Result<&'d CompiledTool, Failed> {
        let compiled = match compiled(def) {
            Ok(c) => c,
            // Unreachable: the build compiled every schema of the view.
            Err(problem) => return Err(Failed::before(self.uncompiled_body(def, call_id, problem))),
        };
        let may_hold_null = match check_limits_scan(arguments, &self.inner.limits) {
            Ok(may_hold_null) => may_hold_null,
            Err(v) => return Err(Failed::before(invalid_arguments_body(vec![v]))),
        };
        // One canonical form from here on (validation, policy, approvals, events, handler): the spellings of
        // "absent" (a strict-mode `null`, an `Option`'s `null`, a spelled-out default) are removed.
        def.canonical_arguments_known(arguments, may_hold_null);
        if !compiled.input.is_valid(arguments) {
            return Err(Failed::before(invalid_arguments_body(compiled.input.explain(arguments))));
        }
        Ok(compiled)
    }

    /// Step 3: does the policy allow the call, given the tool's effect and the caller's approvals? If approval is
    /// required, the arguments move into the result's details (what to approve).
    #[inline(always)]
    fn authorize(&self, def: &ToolDefinition, arguments: &mut Value, options: &CallOptions) -> Result<(), Failed> {
        if !def.scopes.is_empty()
            && let Some(granted) = &options.granted_scopes
            && let Some(missing) = def.scopes.iter().find(|needed| !granted.iter().any(|g| **g == **needed))
        {
            return Err(Failed::before(insufficient_scope_body(def, missing)));
        }
        let request =
            PolicyRequest { tool: def, arguments, tenant: options.tenant.as_deref(), approvals: &options.approvals };
        match self.inner.policy.decide(&request) {
            PolicyDecision::Allow => Ok(()),
            PolicyDecision::RequireApproval { reason } => {
                Err(Failed::before(approval_body(def, reason, std::mem::take(arguments))))
            }
            PolicyDecision::Deny { reason } => Err(Failed::before(denied_body(reason))),
        }
    }

    /// Step 4: the handler started, once the caller has heard that the call passed every check before it
    /// ([`CallOptions::on_admitted`]). A synchronous handler that injects nothing runs to its end here; any other
    /// is started, to be awaited ([`settle`]).
    #[inline(always)]
    fn invoke(
        &self,
        at: usize,
        def: &ToolDefinition,
        call_id: &str,
        arguments: Value,
        options: &CallOptions,
        lease: Option<&crate::lease::Lease>,
    ) -> Invoked {
        if let Some(admitted) = &options.admitted {
            admitted();
        }
        let deadline = self.inner.deadlines[at];
        let handler = def.handler();
        if let (Handler::Inline(f), false) = (handler, def.reads_context) {
            // Run here and now, on a context no one reads (borrowed: an inline handler never keeps its context).
            return Invoked::Ran(run_inline(*f, arguments, &self.inner.unread_context, deadline));
        }
        // A compiled `async fn` that injects nothing never reads its context, and nothing of it outlives the call:
        // it gets a shared one, and only the caller's cancellation (if any) is watched. Any other handler gets a
        // context of its own, with a token that is cancelled when the call is over.
        let (ctx, token) = if !def.reads_context && matches!(handler, Handler::Async(_)) {
            (self.inner.unread_context.clone(), None)
        } else {
            let token = match &options.cancellation {
                Some(parent) => parent.child_token(),
                None => CancellationToken::new(),
            };
            let mut ctx = CallContext::builder(call_id, def.name())
                .output_limits(self.inner.output_limits)
                .tenant(options.tenant.clone())
                .principal(options.principal.clone())
                .stream(options.key_stream(call_id))
                .cancellation(token.clone())
                .state(self.inner.state.clone())
                .notifier(options.notifier.clone())
                .client_input(options.input.clone())
                .effect_lease(lease.cloned());
            if options.given_key.is_some() {
                ctx = ctx.idempotency_key(options.key_for(def.name(), call_id));
            }
            let ctx = ctx.build();
            (ctx, Some(token))
        };
        Invoked::Started { begun: start(handler, call_id, arguments, ctx, deadline), token }
    }

    /// Step 5: a handler that ended without a value, judged: its own error (a business error, or an internal one),
    /// a panic, a timeout or a cancellation, each the call's failure. Arguments that pass the schema but not
    /// deserialization never reach the fn, nor do those of extractors that fail: not executed.
    #[inline(always)]
    fn judge(&self, at: usize, def: &ToolDefinition, call_id: &str, fault: Fault, options: &CallOptions) -> Failed {
        match fault {
            Fault::Error(err) => {
                let executed = !err.before_handler;
                Failed { executed, body: self.error_body(def, call_id, err) }
            }
            Fault::Panicked(panic) => Failed::after(self.panic_body(def, call_id, panic)),
            Fault::TimedOut(state) => {
                let timeout = self.inner.deadlines[at].timeout;
                Failed { executed: state.executed(), body: timed_out_body(options, def, call_id, state, timeout) }
            }
            Fault::Cancelled(state) => {
                Failed { executed: state.executed(), body: cancelled_body(options, def, call_id, state) }
            }
        }
    }

    /// Step 6: is the result within the output limits, and valid against the result schema? A compiled handler's
    /// result was held to the limits as it was serialised (`__private::output`).
    #[inline(always)]
    fn check_result(
        &self,
        def: &ToolDefinition,
        call_id: &str,
        compiled: &CompiledTool,
        value: &Value,
    ) -> Result<(), Failed> {
        if !def.output_within_limits
            && let Err(v) = check_limits(value, &self.inner.output_limits)
        {
            return Err(Failed::after(self.too_large(def, call_id, &v, &v.expected)));
        }
        if let Some(output) = &compiled.output
            && !output.is_valid(value)
        {
            return Err(Failed::after(self.invalid_output_body(def, call_id, output, value)));
        }
        Ok(())
    }
}

/// How step 4 left the handler: run to its end already, or started and to be awaited, with the call's own token
/// (`None`: the handler shares a context and watches only the caller's cancellation).
enum Invoked {
    Ran(Ran),
    Started { begun: Started, token: Option<CancellationToken> },
}

/// The answer of a call that passed step 1: its strings, moved into its result, and its span, on which the outcome
/// is recorded (`started`: when the call began; `None` for a disabled span).
struct Answer<'s> {
    span: &'s tracing::Span,
    started: Option<Instant>,
    call_id: String,
    name: String,
    version: Option<Cow<'static, str>>,
}

impl Answer<'_> {
    /// The handler's value, the call's result.
    #[inline(always)]
    fn ok(self, value: Value) -> ToolResult {
        traced(self.span, self.started, ToolResult::success(self.call_id, self.name, self.version, value))
    }

    /// A failure's result. Its body was built before the call's strings move in (it may borrow them); the result is
    /// put together out of line, so that the path of a call that succeeds stays short.
    #[cold]
    fn failure(self, f: Failed) -> ToolResult {
        traced(self.span, self.started, ToolResult::failure(self.call_id, self.name, self.version, f.executed, f.body))
    }

    /// The answer of a call that runs once and did not run now: the recorded outcome of its first run
    /// (`replayed`), or a refusal. Not executed either way.
    #[cold]
    fn answered(self, answered: Answered) -> ToolResult {
        let result = match answered {
            Answered::Replay(outcome) => {
                let mut result = match outcome {
                    crate::result::Outcome::Data(data) => {
                        ToolResult::success(self.call_id, self.name, self.version, data)
                    }
                    crate::result::Outcome::Error(error) => {
                        ToolResult::failure(self.call_id, self.name, self.version, false, error)
                    }
                };
                result.executed = false;
                result.replayed = true;
                result
            }
            Answered::Refused(body) => ToolResult::failure(self.call_id, self.name, self.version, false, body),
        };
        traced(self.span, self.started, result)
    }
}

/// Hands a finished call's result on, after recording its outcome on the call's span when the span is enabled
/// (`started` is when the call began; `None` for a disabled span).
#[inline(always)]
fn traced(span: &tracing::Span, started: Option<Instant>, result: ToolResult) -> ToolResult {
    if let Some(started) = started {
        record_outcome(span, started, &result);
    }
    result
}

#[inline(never)]
fn record_outcome(span: &tracing::Span, started: Instant, result: &ToolResult) {
    span.record("outcome", result.error().map_or("ok", |e| e.code.as_str()));
    span.record("executed", result.executed);
    span.record("duration_us", started.elapsed().as_micros() as u64);
}
