//! One `tools/call`, through the executor: its options, stream, client input, notifier and task.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use keel_tools_core::context::{InputError, InputKind};
use keel_tools_core::definition::{TaskStart, TaskSupport};
use keel_tools_core::executor::CallOptions;
use keel_tools_core::{Approval, ToolCall};
use rmcp::model::{CallToolRequestParams, CallToolResponse, InputRequiredResult, RequestId, RequestMetaObject};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer};
use serde_json::Value;

use super::approval::{self, APPROVAL_INPUT_KEY, Answer};
use super::listing::Listing;
use super::notifier::{NO_LOGS, PeerNotifier, mcp_level_rank};
use super::session::stream_id;
use super::{McpSession, TOO_MANY_TASKS};
use crate::input::ApprovalRound;
use crate::render;

/// A session call's answer once its approval was asked for: `result` itself unless it is `approval_required`;
/// then the person is asked, and the call runs again approved for exactly the arguments they were shown
/// (`accept`), or is refused with `approval_denied` (`decline`, `cancel`). A client that fails to answer, or a
/// request cancelled while the person is asked, leaves `result` as it is.
async fn approval_asked(
    executor: &keel_tools_core::Executor,
    result: keel_tools_core::ToolResult,
    options: &CallOptions,
    input: &dyn keel_tools_core::context::ClientInput,
    cancelled: &tokio_util::sync::CancellationToken,
) -> keel_tools_core::ToolResult {
    let Some(wanted) = approval::wanted(&result) else { return result };
    let answer = tokio::select! {
        answer = input.request(APPROVAL_INPUT_KEY, wanted.question()) => answer,
        () = cancelled.cancelled() => return result,
    };
    let answer = match answer {
        Ok(answer) => Answer::of(&answer),
        Err(e) => {
            tracing::debug!(tool = wanted.tool, error = %e, "the client did not answer the approval");
            None
        }
    };
    match answer {
        Some(Answer::Accept) => {
            let (tool, arguments) = (wanted.tool.to_owned(), wanted.arguments.clone());
            let options = options.clone().approve(Approval::new(tool.as_str(), &arguments));
            executor.call_with(ToolCall::new(result.call_id, tool, arguments), &options).await
        }
        Some(refused) => {
            approval::refusal(result.call_id.as_str(), &result.tool_name, result.tool_version.as_deref(), refused)
        }
        None => result,
    }
}

/// When a call refused for want of a task slot is told to retry.
const TASK_RETRY_AFTER: Duration = Duration::from_secs(5);

/// The refusal of a call that would become a task when `max` of them run already.
/// The `_meta` key of a `tools/call` request that carries the client's idempotency key for the call.
pub const IDEMPOTENCY_KEY_META: &str = "keel/idempotencyKey";

/// The longest idempotency key a client may give, in bytes.
pub const MAX_IDEMPOTENCY_KEY: usize = 256;

fn too_many_tasks(max: usize) -> ErrorData {
    let retry_after_s = TASK_RETRY_AFTER.as_secs();
    ErrorData::new(
        rmcp::model::ErrorCode(TOO_MANY_TASKS),
        format!("the server is running as many tasks as it may ({max}); retry in {retry_after_s} s"),
        Some(serde_json::json!({"code": "too_many_tasks", "max_tasks": max, "retry_after_s": retry_after_s})),
    )
}

/// Whether the request is on protocol 2026-07-28 or later, where requests carry their own `_meta` and there is no
/// session state (log level, capabilities from `initialize`).
fn is_stateless(context: &RequestContext<RoleServer>) -> bool {
    context.protocol_version().is_some_and(|v| v.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str())
}

/// The MCP request a tool is serving: the client session's peer, the request id and `_meta`.
///
/// Available through [`current_request`] to a tool that runs on the request's task: an `async` tool, or a plain
/// `fn` (inline by default); not to a `blocking = true` tool, which runs on a blocking-pool thread.
#[derive(Clone, Debug)]
pub struct McpRequest {
    /// The client session: send it requests (sampling, elicitation) and notifications.
    pub peer: Peer<RoleServer>,
    /// The JSON-RPC id of the `tools/call` request.
    pub id: RequestId,
    /// The request's `_meta`.
    pub meta: RequestMetaObject,
}

tokio::task_local! {
    static CURRENT: McpRequest;
}

/// The MCP request the current task is serving, if it is an MCP `tools/call` (see [`McpRequest`]).
pub fn current_request() -> Option<McpRequest> {
    CURRENT.try_with(Clone::clone).ok()
}

/// Where a call runs, as its caller and its tool decide: the executor (the session's, or one of no tools for a tool
/// its caller may not call), whether the request is stateless, and whether the call runs as a task, holding a task
/// slot until it ends.
struct Gate<'a> {
    executor: &'a keel_tools_core::Executor,
    stateless: bool,
    as_task: bool,
    task_start: TaskStart,
    slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// A call about to run on a task of its own, as one that may become an MCP task.
struct Running {
    call: ToolCall,
    scope: McpRequest,
    options: CallOptions,
    request_ct: tokio_util::sync::CancellationToken,
    owner: Option<String>,
    #[cfg(feature = "otel")]
    parent: opentelemetry::Context,
}

/// How the handler asks its client for input: directly in a session; through input-required results in a
/// stateless request, with the round's input and the binding its state is sealed to.
struct Input {
    direct: Arc<dyn keel_tools_core::context::ClientInput>,
    stateless: Option<(Arc<crate::input::StatelessInput>, Vec<u8>)>,
    capabilities: rmcp::model::ClientCapabilities,
    /// The request's id, or the first round's for a call a principal makes over several stateless rounds.
    call_id: String,
}

impl McpSession {
    /// One `tools/call`, in named steps: its [options](Self::call_options), the [gate](Self::gate) (the caller's
    /// view, deferral, tasks), the [client input](Self::client_input), the [invocation](Self::invoke), and the
    /// [answer](Self::answer). Each step may end the call with an answer of its own.
    pub(super) async fn run_call(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let listing = self.shared.listing();
        let options = self.call_options(&request, &context)?;
        let (gate, options) = self.gate(&request, &context, &listing, options)?;
        // A session's level is the one its client set (`logging/setLevel`). A stateless request (protocol
        // 2026-07-28) has no session: it gets log messages only when its `_meta` asks for a level.
        let min_level = match context.meta.log_level() {
            Some(level) => mcp_level_rank(level),
            None if gate.stateless => NO_LOGS,
            None => self.level.load(Ordering::Relaxed),
        };
        let notifier = Arc::new(PeerNotifier::new(context.peer.clone(), min_level, context.meta.get_progress_token()));
        let options = options.notifier(notifier.clone());
        let arguments = Value::Object(request.arguments.take().unwrap_or_default());
        // A tool the server's rules allow runs approved for its arguments, without asking anyone.
        let tool = gate.executor.view().get(&request.name);
        let options = self.shared.approvals.pre_approve(tool.map(|d| &**d), &request.name, &arguments, options);
        let (input, options) = match self.client_input(&mut request, &context, &gate, &arguments, options)? {
            ControlFlow::Continue(input) => input,
            ControlFlow::Break(refused) => {
                return Ok(CallToolResponse::Complete(render::call_tool_result(&refused, &listing.codec)));
            }
        };
        let stateless_request = gate.stateless;
        let peer = context.peer.clone();
        let call = ToolCall::new(input.call_id.clone(), request.name.to_string(), arguments);
        let result = match self.invoke(&request, context, call, gate, &input, options, &listing).await? {
            ControlFlow::Continue(result) => result,
            ControlFlow::Break(task) => return Ok(task),
        };
        // Everything the handler sent goes out before the result (within a bound: a stuck peer cannot hold it).
        notifier.flush().await;
        self.answer(&request, result, input.stateless, stateless_request, &listing, &peer).await
    }

    /// The call's options: the server's `call_options`, and the client's idempotency key from `_meta`.
    fn call_options(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallOptions, ErrorData> {
        let mut options = match &self.shared.call_options {
            Some(f) => f(request, context),
            None => CallOptions::new(),
        };
        // The client's own idempotency key for the call, in `_meta`: a retry carrying it is the same call on any
        // session or replica (for a tool that runs once: see `ExecutorBuilder::exactly_once`).
        if options.get_idempotency_key().is_none()
            && let Some(key) = context.meta.get(IDEMPOTENCY_KEY_META)
        {
            match key.as_str() {
                Some(key) if !key.is_empty() && key.len() <= MAX_IDEMPOTENCY_KEY => {
                    options = options.idempotency_key(key);
                }
                _ => {
                    return Err(ErrorData::invalid_params(
                        format!(
                            "`_meta.{IDEMPOTENCY_KEY_META}` is a string of 1 to {MAX_IDEMPOTENCY_KEY} bytes that names \
                             one call"
                        ),
                        None,
                    ));
                }
            }
        }
        Ok(options)
    }

    /// Where the call runs: the executor its caller may call the tool on, and whether it runs as a task (with the
    /// slot it then holds).
    fn gate<'a>(
        &'a self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        listing: &'a Listing,
        #[cfg_attr(not(feature = "auth"), expect(unused_mut))] mut options: CallOptions,
    ) -> Result<(Gate<'a>, CallOptions), ErrorData> {
        let shared = &self.shared;
        let stateless = is_stateless(context);
        let mut executor = &listing.executor;
        // On a protected server, the token's subject is the call's principal unless `call_options` named one,
        // its scopes are what the call was granted, and its view's tenant is the call's unless `call_options`
        // named one. A tool outside its view is called through an executor of no tool: refused as unknown.
        #[cfg(feature = "auth")]
        if let Some(principal) = crate::caller::principal(context) {
            let view = shared.view_of(principal);
            if !view.allows(&request.name) {
                executor = &shared.no_tools;
            }
            if options.get_tenant().is_none()
                && let Some(tenant) = view.tenant_arc()
            {
                options = options.tenant(tenant);
            }
            if options.get_principal().is_none() {
                options = options.principal(principal.subject.as_str());
            }
            if options.get_granted_scopes().is_none() {
                options = options.granted_scopes(principal.scopes.iter().map(String::as_str));
            }
        }
        // A deferred tool no search of this session surfaced is refused as unknown, as it would be in a run. A
        // request without a session has no record of what it was shown: there a deferred tool is only kept out of
        // the list (see `McpServer::builder`).
        let deferred = executor.view().get(&request.name).is_some_and(|d| d.deferred());
        if deferred
            && !stateless
            && !self.surfaced.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(&request.name)
        {
            executor = &shared.no_tools;
        }
        // A tool that may run as a task does so for a client that supports tasks; one that must refuses the others.
        let (task_support, task_start) = executor
            .view()
            .get(&request.name)
            .map_or((TaskSupport::Never, TaskStart::Admission), |d| (d.task_support(), d.task_start()));
        // Tasks are the Tasks extension of protocol 2026-07-28: a session of an earlier revision gets its answer in
        // the call (a task-required tool refuses it).
        let as_task = task_support != TaskSupport::Never
            && stateless
            && context.client_capabilities().is_some_and(|c| c.supports_tasks());
        if task_support == TaskSupport::Required && !as_task {
            return Err(ErrorData::missing_required_client_capability(
                rmcp::model::ClientCapabilities::builder().enable_tasks().build(),
            ));
        }
        // A call that may become a task takes a slot before anything of it runs, and holds it until it ends.
        let slot = as_task
            .then(|| shared.task_slots.clone().try_acquire_owned())
            .transpose()
            .map_err(|_| too_many_tasks(shared.max_tasks))?;
        Ok((Gate { executor, stateless, as_task, task_start, slot }, options))
    }

    /// How the handler asks its client for input: directly in a session; in a stateless request, through
    /// input-required results, from the round's answers and sealed state. A person who refused the approval the
    /// previous round asked for ends the call here, with the refusal.
    fn client_input(
        &self,
        request: &mut CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        gate: &Gate<'_>,
        arguments: &Value,
        mut options: CallOptions,
    ) -> Result<ControlFlow<keel_tools_core::ToolResult, (Input, CallOptions)>, ErrorData> {
        let capabilities = context.client_capabilities().unwrap_or_default();
        let call_id = context.id.to_string();
        if !gate.stateless {
            if options.get_stream().is_none() {
                options = options.stream(self.stream.clone());
            }
            let input = crate::input::SessionInput { peer: context.peer.clone(), capabilities: capabilities.clone() };
            let input = Input { direct: Arc::new(input), stateless: None, capabilities, call_id };
            return Ok(ControlFlow::Continue((input, options)));
        }
        let shared = &self.shared;
        let binding = crate::input::binding(options.get_tenant(), options.get_principal(), &request.name, arguments);
        let mut round = match request.request_state.as_deref() {
            None => crate::input::RoundState::default(),
            Some(sealed) => crate::input::open(&shared.request_state, sealed, &binding).map_err(|reason| {
                ErrorData::invalid_params(
                    "requestState failed verification: it was altered, has expired, or belongs to another call",
                    Some(serde_json::json!({"reason": reason})),
                )
            })?,
        };
        // A stateless request is a stream of its own: a retry is not recognised, and no two requests share an
        // idempotency key. The rounds of one call made for a principal are one call: each has the first round's
        // stream and call id (so its key), from the state sealed for that principal.
        let mut call_id = call_id;
        if options.get_stream().is_none() {
            let for_principal = options.get_principal().is_some();
            let call = match round.call.take() {
                Some(call) if for_principal => call,
                _ => crate::input::RoundCall { stream: format!("mcp-request/{}", stream_id()), id: call_id },
            };
            options = options.stream(call.stream.as_str());
            call_id = call.id.clone();
            round.call = for_principal.then_some(call);
        } else {
            round.call = None;
        }
        let mut responses = request.input_responses.take().unwrap_or_default();
        // The person's answer to the approval the previous round asked for (never a handler's answer). One to a
        // question no sealed state records was not asked for, and is not taken.
        if shared.approvals.elicits() && crate::input::supports(&capabilities, InputKind::Elicitation) {
            let answer = responses.remove(APPROVAL_INPUT_KEY);
            if round.approval == Some(ApprovalRound::Asked) {
                match answer.as_ref().and_then(Answer::of) {
                    Some(Answer::Accept) => round.approval = Some(ApprovalRound::Accepted),
                    Some(refused) => {
                        let version = gate.executor.view().get(&request.name).map(|d| d.version());
                        let refused = approval::refusal(call_id, &request.name, version, refused);
                        return Ok(ControlFlow::Break(refused));
                    }
                    None => {}
                }
            }
            if round.approval == Some(ApprovalRound::Accepted) {
                options = options.approve(Approval::new(request.name.as_ref(), arguments));
            }
        } else {
            round.approval = None;
        }
        let input = Arc::new(crate::input::StatelessInput::new(capabilities.clone(), round, responses));
        let direct = input.clone();
        let input = Input { direct, stateless: Some((input, binding)), capabilities, call_id };
        Ok(ControlFlow::Continue((input, options)))
    }

    /// Runs the call: on its own task when it may become an MCP task ([`Self::invoke_as_task`]), else in this
    /// request, where a call that needs an approval is asked of the person there and then, when the server elicits
    /// and the client can be asked. The handler sees the request as [`current_request`].
    #[allow(clippy::too_many_arguments)]
    async fn invoke(
        &self,
        request: &CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
        call: ToolCall,
        gate: Gate<'_>,
        input: &Input,
        options: CallOptions,
        listing: &Arc<Listing>,
    ) -> Result<ControlFlow<CallToolResponse, keel_tools_core::ToolResult>, ErrorData> {
        // Whose a task of this call is, named as `tasks/get`, `tasks/update` and `tasks/cancel` name their asker.
        let owner = super::session::task_owner(&context);
        // The request's `_meta` moves into the scope: nothing below reads it from the context.
        let meta = std::mem::take(&mut context.meta);
        let request_ct = context.ct.clone();
        let scope = McpRequest { peer: context.peer, id: context.id, meta };
        #[cfg(feature = "otel")]
        let parent = crate::otel::extract(&scope.meta);
        if gate.as_task {
            let running = Running {
                call,
                scope,
                options,
                request_ct,
                owner,
                #[cfg(feature = "otel")]
                parent,
            };
            return self.invoke_as_task(request, gate, input, running, listing).await;
        }
        let executor = gate.executor;
        let ask = (self.shared.approvals.elicits()
            && input.stateless.is_none()
            && input.direct.supports(InputKind::Elicitation))
        .then(|| (input.direct.clone(), request_ct.clone()));
        let options = options.client_input(input.direct.clone()).cancellation(request_ct);
        let call = async {
            let result = executor.call_with(call, &options).await;
            match ask {
                Some((input, cancelled)) => approval_asked(executor, result, &options, &*input, &cancelled).await,
                None => result,
            }
        };
        #[cfg(feature = "otel")]
        let call = opentelemetry::context::FutureExt::with_context(call, parent);
        Ok(ControlFlow::Continue(CURRENT.scope(scope, call).await))
    }

    /// Runs a call that may become an MCP task on its own task and token (once it becomes a task, it outlives this
    /// request): its result when it ends before it begins a task, else the task.
    async fn invoke_as_task(
        &self,
        request: &CallToolRequestParams,
        gate: Gate<'_>,
        input: &Input,
        running: Running,
        listing: &Arc<Listing>,
    ) -> Result<ControlFlow<CallToolResponse, keel_tools_core::ToolResult>, ErrorData> {
        let Running {
            call,
            scope,
            mut options,
            request_ct,
            owner,
            #[cfg(feature = "otel")]
            parent,
        } = running;
        let (task_input, begun, bind) =
            crate::task::TaskCallInput::new(input.direct.clone(), input.capabilities.clone());
        let task_input = Arc::new(task_input);
        let token = tokio_util::sync::CancellationToken::new();
        options = options.client_input(task_input.clone()).cancellation(token.clone());
        if gate.task_start == TaskStart::Admission {
            options = options.on_admitted(move || {
                keel_tools_core::context::ClientInput::begin_task(&*task_input);
            });
        }
        let whose =
            crate::task::stored::Whose { tenant: options.get_tenant().map(str::to_owned), principal: owner.clone() };
        let (executor, slot) = (gate.executor.clone(), gate.slot);
        let call = async move {
            let _slot = slot;
            executor.call_with(call, &options).await
        };
        #[cfg(feature = "otel")]
        let call = opentelemetry::context::FutureExt::with_context(call, parent);
        let mut running = tokio::spawn(CURRENT.scope(scope, call));
        let mut begun = std::pin::pin!(begun);
        let mut request_gone = std::pin::pin!(request_ct.cancelled_owned());
        let joined = loop {
            tokio::select! {
                biased;
                joined = &mut running => break joined,
                Ok(()) = &mut begun => {
                    let task = match &self.shared.stored_tasks {
                        Some(stored) => {
                            let listing = listing.clone();
                            let outcome = async move {
                                match running.await {
                                    Ok(result) => crate::task::outcome(&result, &listing.codec),
                                    Err(_) => Err(rmcp::task_manager::TaskExit::Error(ErrorData::internal_error(
                                        "the call ended abnormally",
                                        None,
                                    ))),
                                }
                            };
                            stored.begin(&request.name, whose, outcome, &bind, token).await?
                        }
                        None => self.begin_task(running, bind, token, listing.clone(), owner),
                    };
                    return Ok(ControlFlow::Break(CallToolResponse::Task(rmcp::model::CreateTaskResult::new(task))));
                }
                // The client went away before the call became a task: it is cancelled, and ends soon.
                () = &mut request_gone => token.cancel(),
            }
        };
        joined.map(ControlFlow::Continue).map_err(|_| ErrorData::internal_error("the call ended abnormally", None))
    }

    /// The answer to a call that ran: a search's found tools as MCP names them, an unknown tool as the protocol's
    /// error, a stateless call that waits for input as an input-required result, else the result itself.
    async fn answer(
        &self,
        request: &CallToolRequestParams,
        mut result: keel_tools_core::ToolResult,
        stateless: Option<(Arc<crate::input::StatelessInput>, Vec<u8>)>,
        stateless_request: bool,
        listing: &Listing,
        peer: &Peer<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name == keel_tools_core::deferral::SEARCH_TOOL {
            self.searched(&mut result, stateless_request, listing, peer).await;
        }
        if result.code() == Some("unknown_tool") && !result.executed {
            let message = result.error().map(|e| e.message.clone()).unwrap_or_default();
            return Err(ErrorData::invalid_params(message, None));
        }
        if let Some((input, binding)) = stateless
            && let Some(answer) = self.input_required(&result, &input, &binding)?
        {
            return Ok(answer);
        }
        Ok(CallToolResponse::Complete(render::into_call_tool_result(result, &listing.codec)))
    }

    /// A search's result: the tools it found named as MCP lists them (under their own names, not the wire names of
    /// the APIs that take no dots) and, in a session, listed and callable from now on, the client told to list
    /// again.
    async fn searched(
        &self,
        result: &mut keel_tools_core::ToolResult,
        stateless_request: bool,
        listing: &Listing,
        peer: &Peer<RoleServer>,
    ) {
        if let keel_tools_core::results::Outcome::Data(data) = &mut result.outcome
            && let Some(found) = data.get_mut("tools").and_then(Value::as_array_mut)
        {
            for tool in found {
                let name = tool.get("name").and_then(Value::as_str);
                if let Some(def) = name.and_then(|n| listing.executor.view().get_by_wire_name(n)) {
                    tool["name"] = Value::from(def.name());
                }
            }
        }
        if result.is_ok()
            && !stateless_request
            && let Some(data) = result.data()
        {
            let found = keel_tools_core::deferral::found_by(listing.executor.view(), data);
            let new = {
                let mut surfaced = self.surfaced.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                found.iter().filter(|name| surfaced.insert(name)).count()
            };
            if new > 0 {
                let _ = peer.notify_tool_list_changed().await;
            }
        }
    }

    /// A stateless call that ended on a request for input (the handler propagated the input error), answered with
    /// what the protocol has for it: the requests and the sealed state, or `-32021`. `None` for any other result.
    fn input_required(
        &self,
        result: &keel_tools_core::ToolResult,
        input: &crate::input::StatelessInput,
        binding: &[u8],
    ) -> Result<Option<CallToolResponse>, ErrorData> {
        let shared = &self.shared;
        // A call that needs an approval the person was not asked for yet: the approval is asked for in an
        // input-required result.
        if shared.approvals.elicits()
            && input.approval().is_none_or(|a| a == ApprovalRound::Asked)
            && keel_tools_core::context::ClientInput::supports(input, InputKind::Elicitation)
            && let Some(wanted) = approval::wanted(result)
        {
            input
                .ask_approval(APPROVAL_INPUT_KEY, &wanted.question())
                .map_err(|e| ErrorData::internal_error(e, None))?;
            let sealed = crate::input::seal(&shared.request_state, &input.next_round(), binding)
                .map_err(|reason| ErrorData::internal_error(reason, None))?;
            let pending = input.take_pending();
            return Ok(Some(CallToolResponse::InputRequired(InputRequiredResult::new(Some(pending), Some(sealed)))));
        }
        if result.code() == Some(InputError::Unsupported(InputKind::Sampling).code())
            && let Some(kind) = input.missing()
        {
            return Err(ErrorData::missing_required_client_capability(crate::input::required(kind)));
        }
        let pending = input.take_pending();
        if result.code() == Some(InputError::Pending.code()) && !pending.is_empty() {
            let sealed = crate::input::seal(&shared.request_state, &input.next_round(), binding)
                .map_err(|reason| ErrorData::internal_error(reason, None))?;
            return Ok(Some(CallToolResponse::InputRequired(InputRequiredResult::new(Some(pending), Some(sealed)))));
        }
        Ok(None)
    }

    /// Makes a running call a task (see [`crate::task`]): its input requests go through `tasks/update` from now
    /// on, `tasks/cancel` cancels it, and its result becomes the task's.
    fn begin_task(
        &self,
        running: tokio::task::JoinHandle<keel_tools_core::ToolResult>,
        bind: tokio::sync::watch::Sender<Option<crate::task::Bound>>,
        token: tokio_util::sync::CancellationToken,
        listing: Arc<Listing>,
        owner: Option<String>,
    ) -> rmcp::model::Task {
        use rmcp::task_manager::{TaskExit, TaskOptions};
        let task = self.shared.tasks.spawn(TaskOptions::default(), move |task| {
            Box::pin(async move {
                let _ = bind.send(Some(crate::task::Bound::Local(task.clone())));
                tokio::select! {
                    joined = running => match joined {
                        Ok(result) => crate::task::outcome(&result, &listing.codec),
                        Err(_) => Err(TaskExit::Error(ErrorData::internal_error("the call ended abnormally", None))),
                    },
                    () = task.cancelled() => {
                        token.cancel();
                        Err(TaskExit::Cancelled)
                    }
                }
            })
        });
        if let Some(owner) = owner {
            self.shared.own_task(&task.task_id, owner);
        }
        task
    }
}
