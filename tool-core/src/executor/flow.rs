//! The [`Executor`] and its flow: every model-produced call goes through one fixed order.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::field::Empty;

use crate::call::ToolCall;
use crate::call_context::{CallContext, StateMap};
use crate::call_policy::{EffectPolicy, Policy, PolicyDecision, PolicyRequest};
use crate::codec::Codec;
use crate::failure::{FailureHook, trace_failure};
use crate::once::{Answered, Claim, Once};
use crate::registry::view::ToolView;
use crate::result::ToolResult;
use crate::tool_definition::{CompiledTool, Handler, ToolDefinition, compiled};
use keel_tools_schema::Limits;
use keel_tools_schema::validate::{check_limits, check_limits_scan};

use super::bodies::{
    Failed, approval_body, cancelled_body, denied_body, insufficient_scope_body, invalid_arguments_body,
    timed_out_body, unknown_tool, unreadable_arguments,
};
use super::handler::{Deadline, Fault, Ran, Running, Started, detach, run_inline, settle, start};
use super::index::NameIndex;
use super::{CallOptions, ExecutorBuilder, ExecutorError, TARGET};

pub(super) struct Inner {
    pub(super) view: ToolView,
    /// The view's tools by name, for the lookup of every call.
    pub(super) index: NameIndex,
    /// Each tool's deadline, in the view's order: its timeout (or its effect's default) and the grace period.
    pub(super) deadlines: Box<[Deadline]>,
    /// Each tool's name, in the view's order, shared by the events of a run's calls (see [`Executor::find`]).
    pub(super) names: Box<[Arc<str>]>,
    pub(super) state: Arc<StateMap>,
    /// Handed to handlers that never read their context (see `ToolDefinition::reads_context`).
    pub(super) unread_context: CallContext,
    /// The options of [`Executor::call`]: none.
    pub(super) no_options: CallOptions,
    pub(super) policy: Arc<dyn Policy>,
    pub(super) default_timeout: Duration,
    pub(super) limits: Limits,
    pub(super) output_limits: Limits,
    pub(super) on_failure: FailureHook,
    /// Whether the OpenTelemetry spans record arguments and results.
    #[cfg(feature = "otel")]
    pub(super) otel_content: bool,
    /// The ledger of the tools that run once, if any do.
    pub(super) once: Option<Once>,
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
    pub(super) inner: Arc<Inner>,
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
        let (executed, body) = match super::handler::outcome(caught) {
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
