//! One `tools/call`, through the executor: its options, stream, client input, notifier and task.

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

impl McpSession {
    pub(super) async fn run_call(
        &self,
        mut request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let shared = &self.shared;
        let mut options = match &shared.call_options {
            Some(f) => f(&request, &context),
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
        let listing = shared.listing();
        let stateless_request = is_stateless(&context);
        let peer = context.peer.clone();
        let mut executor = &listing.executor;
        // On a protected server, the token's subject is the call's principal unless `call_options` named one,
        // its scopes are what the call was granted, and its view's tenant is the call's unless `call_options`
        // named one. A tool outside its view is called through an executor of no tool: refused as unknown.
        #[cfg(feature = "auth")]
        if let Some(principal) = crate::caller::principal(&context) {
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
            && !stateless_request
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
            && is_stateless(&context)
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
        // A session's level is the one its client set (`logging/setLevel`). A stateless request (protocol
        // 2026-07-28) has no session: it gets log messages only when its `_meta` asks for a level.
        let min_level = match context.meta.log_level() {
            Some(level) => mcp_level_rank(level),
            None if is_stateless(&context) => NO_LOGS,
            None => self.level.load(Ordering::Relaxed),
        };
        let notifier = Arc::new(PeerNotifier::new(context.peer.clone(), min_level, context.meta.get_progress_token()));
        options = options.notifier(notifier.clone());

        let arguments = Value::Object(request.arguments.take().unwrap_or_default());
        // A tool the server's rules allow runs approved for its arguments, without asking anyone.
        let approvals = &shared.approvals;
        let tool = executor.view().get(&request.name);
        options = approvals.pre_approve(tool.map(|d| &**d), &request.name, &arguments, options);
        // How the handler asks its client for input: directly in a session; through input-required results,
        // with the round's answers and sealed state, when stateless.
        let capabilities = context.client_capabilities().unwrap_or_default();
        // Whose a task of this call is, named as `tasks/get`, `tasks/update` and `tasks/cancel` name their asker.
        let owner = super::session::task_owner(&context);
        let mut call_id = context.id.to_string();
        let (direct, stateless): (Arc<dyn keel_tools_core::context::ClientInput>, _) = if is_stateless(&context) {
            let binding =
                crate::input::binding(options.get_tenant(), options.get_principal(), &request.name, &arguments);
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
            // idempotency key. The rounds of one call made for a principal are one call: each has the first
            // round's stream and call id (so its key), from the state sealed for that principal.
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
            // The person's answer to the approval the previous round asked for (never a handler's answer). One
            // to a question no sealed state records was not asked for, and is not taken.
            if approvals.elicits() && crate::input::supports(&capabilities, InputKind::Elicitation) {
                let answer = responses.remove(APPROVAL_INPUT_KEY);
                if round.approval == Some(ApprovalRound::Asked) {
                    match answer.as_ref().and_then(Answer::of) {
                        Some(Answer::Accept) => round.approval = Some(ApprovalRound::Accepted),
                        Some(refused) => {
                            let version = tool.map(|d| d.version());
                            let refused = approval::refusal(call_id, &request.name, version, refused);
                            return Ok(CallToolResponse::Complete(render::call_tool_result(&refused, &listing.codec)));
                        }
                        None => {}
                    }
                }
                if round.approval == Some(ApprovalRound::Accepted) {
                    options = options.approve(Approval::new(request.name.as_ref(), &arguments));
                }
            } else {
                round.approval = None;
            }
            let input = Arc::new(crate::input::StatelessInput::new(capabilities.clone(), round, responses));
            (input.clone(), Some((input, binding)))
        } else {
            if options.get_stream().is_none() {
                options = options.stream(self.stream.clone());
            }
            let input = crate::input::SessionInput { peer: context.peer.clone(), capabilities: capabilities.clone() };
            (Arc::new(input), None)
        };
        let call = ToolCall::new(call_id, request.name.to_string(), arguments);
        // The request's `_meta` moves into the scope: nothing below reads it from the context.
        let meta = std::mem::take(&mut context.meta);
        let request_ct = context.ct.clone();
        let scope = McpRequest { peer: context.peer, id: context.id, meta };
        #[cfg(feature = "otel")]
        let parent = crate::otel::extract(&scope.meta);

        let result = if as_task {
            // The call runs on its own task and token: once it becomes a task, it outlives this request.
            let (input, begun, bind) = crate::task::TaskCallInput::new(direct, capabilities);
            let input = Arc::new(input);
            let token = tokio_util::sync::CancellationToken::new();
            options = options.client_input(input.clone()).cancellation(token.clone());
            if task_start == TaskStart::Admission {
                let input = input.clone();
                options = options.on_admitted(move || {
                    keel_tools_core::context::ClientInput::begin_task(&*input);
                });
            }
            let whose = crate::task::stored::Whose {
                tenant: options.get_tenant().map(str::to_owned),
                principal: owner.clone(),
            };
            let executor = executor.clone();
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
                        let task = match &shared.stored_tasks {
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
                        return Ok(CallToolResponse::Task(rmcp::model::CreateTaskResult::new(task)));
                    }
                    // The client went away before the call became a task: it is cancelled, and ends soon.
                    () = &mut request_gone => token.cancel(),
                }
            };
            joined.map_err(|_| ErrorData::internal_error("the call ended abnormally", None))?
        } else {
            // In a session, a call that needs an approval is asked of the person there and then, when the server
            // elicits and the client can be asked.
            let ask = (approvals.elicits() && stateless.is_none() && direct.supports(InputKind::Elicitation))
                .then(|| (direct.clone(), request_ct.clone()));
            options = options.client_input(direct).cancellation(request_ct);
            let call = async {
                let result = executor.call_with(call, &options).await;
                match ask {
                    Some((input, cancelled)) => approval_asked(executor, result, &options, &*input, &cancelled).await,
                    None => result,
                }
            };
            #[cfg(feature = "otel")]
            let call = opentelemetry::context::FutureExt::with_context(call, parent);
            CURRENT.scope(scope, call).await
        };

        // Everything the handler sent goes out before the result (within a bound: a stuck peer cannot hold it).
        notifier.flush().await;

        // A search names the tools it found as the model calls them on the APIs that take no dots (wire names);
        // MCP lists them under their own names, so the answer does too.
        let mut result = result;
        if request.name == keel_tools_core::deferral::SEARCH_TOOL
            && let keel_tools_core::results::Outcome::Data(data) = &mut result.outcome
            && let Some(found) = data.get_mut("tools").and_then(Value::as_array_mut)
        {
            for tool in found {
                let name = tool.get("name").and_then(Value::as_str);
                if let Some(def) = name.and_then(|n| listing.executor.view().get_by_wire_name(n)) {
                    tool["name"] = Value::from(def.name());
                }
            }
        }
        // What a search returned is listed and callable in this session from now on; the client is told to list
        // again.
        if request.name == keel_tools_core::deferral::SEARCH_TOOL
            && result.is_ok()
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
        if result.code() == Some("unknown_tool") && !result.executed {
            let message = result.error().map(|e| e.message.clone()).unwrap_or_default();
            return Err(ErrorData::invalid_params(message, None));
        }
        // A stateless call that ended on a request for input (the handler propagated the input error) is answered
        // with what the protocol has for it: the requests and the sealed state, or `-32021`.
        if let Some((input, binding)) = stateless {
            // A call that needs an approval the person was not asked for yet: the approval is asked for in an
            // input-required result.
            if approvals.elicits()
                && input.approval().is_none_or(|a| a == ApprovalRound::Asked)
                && keel_tools_core::context::ClientInput::supports(&*input, InputKind::Elicitation)
                && let Some(wanted) = approval::wanted(&result)
            {
                input
                    .ask_approval(APPROVAL_INPUT_KEY, &wanted.question())
                    .map_err(|e| ErrorData::internal_error(e, None))?;
                let sealed = crate::input::seal(&shared.request_state, &input.next_round(), &binding)
                    .map_err(|reason| ErrorData::internal_error(reason, None))?;
                return Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
                    Some(input.take_pending()),
                    Some(sealed),
                )));
            }
            if result.code() == Some(InputError::Unsupported(InputKind::Sampling).code())
                && let Some(kind) = input.missing()
            {
                return Err(ErrorData::missing_required_client_capability(crate::input::required(kind)));
            }
            let pending = input.take_pending();
            if result.code() == Some(InputError::Pending.code()) && !pending.is_empty() {
                let sealed = crate::input::seal(&shared.request_state, &input.next_round(), &binding)
                    .map_err(|reason| ErrorData::internal_error(reason, None))?;
                return Ok(CallToolResponse::InputRequired(InputRequiredResult::new(Some(pending), Some(sealed))));
            }
        }
        Ok(CallToolResponse::Complete(render::call_tool_result(&result, &listing.codec)))
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
