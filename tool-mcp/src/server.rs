//! Serving a [`ToolView`](tool_core::ToolView) as an MCP server.
//!
//! [`McpServer`] wraps an [`Executor`](tool_core::Executor): `tools/list` is the executor's view rendered for MCP
//! ([`ToolView::schemas`](tool_core::ToolView::schemas)`(`[`Provider::Mcp`](tool_core::Provider::Mcp)`)`:
//! `inputSchema`, `outputSchema`, the four annotations), and `tools/call` runs through
//! [`Executor::call_with`](tool_core::Executor::call_with), so the fixed order (registered, arguments valid,
//! policy, handler, result valid) holds over the wire exactly as in process.
//!
//! | outcome | over MCP |
//! |---|---|
//! | unknown tool | JSON-RPC error `-32602` with the executor's `unknown_tool` message |
//! | `invalid_arguments`, `approval_required`, `policy_denied`, business errors, `tool_internal_error`, `timeout`, `invalid_tool_output` | `CallToolResult` with `isError: true`, the error as JSON text, and as `structuredContent` when the tool has no `outputSchema` |
//! | success | `structuredContent` (an object) and the same JSON as text; a [`Content`](tool_core::Content) tool's blocks as `content` |
//!
//! Each call's [`CallContext`](tool_core::CallContext) gets a [`Notifier`](tool_core::Notifier) bound to the session:
//! [`CallContext::log`](tool_core::CallContext::log) sends `notifications/message` at or above the level the client
//! chose with `logging/setLevel` (default `info`; a stateless request gets messages only when its `_meta` names a
//! level), and [`CallContext::progress`](tool_core::CallContext::progress) sends `notifications/progress` only when
//! the request carried a `progressToken`, with strictly increasing values. Notifications are sent in order and
//! flushed before the result. `notifications/cancelled`, an HTTP client that closes its connection and a closed
//! stdin (after rmcp's 5 s drain) cancel the call's context.
//!
//! # Both protocol eras
//!
//! Sessions (revisions up to 2025-11-25, `initialize`) and stateless requests (2026-07-28, `server/discover`, each
//! request with its own `_meta`) are served side by side, by every transport. What a handler asks its client
//! ([`CallContext::elicit`](tool_core::CallContext::elicit), `sample`, `roots`) is the same code in both: a
//! session is asked there and then; a stateless call is answered with an input-required result whose
//! `requestState` is sealed with the server's key ([`McpServerBuilder::request_state_key`]), carries every
//! answer so far and the handler's round state, and is bound to the tool, its canonical arguments, and the
//! call's tenant and principal (from [`McpServerBuilder::call_options`]) when it has them. The retry runs the
//! handler again from the start. A client that lacks the capability gets `-32021`; a state that fails
//! verification (altered, expired, or replayed for another call, tenant or principal), `-32602`, and no handler
//! runs. See [`tool_core::ClientInput`] for the contract a handler relies on.
//!
//! A `requestState` is integrity-protected and bound, but **readable by the client**: it is signed, not
//! encrypted. Never put a secret in a handler's round state
//! ([`CallContext::set_round_state`](tool_core::CallContext::set_round_state)) or in what it asks for.
//!
//! # Idempotency keys
//!
//! A JSON-RPC id is unique only within its session, so every `tools/call` is made on a stream of its own
//! ([`CallOptions::stream`]), which its [`CallContext::idempotency_key`](tool_core::CallContext::idempotency_key)
//! is derived with; two clients never share a key:
//!
//! | request | stream |
//! |---|---|
//! | in a session (`initialize`: stdio, Streamable HTTP, any transport) | the session's: a random 128-bit id made with its [`McpSession`], so a retry in the session under the same id keeps its key |
//! | stateless (2026-07-28) | a random one of its own: no two requests share a key, and a retry is not recognised; the rounds of one input-required call made for a principal are one call (the first round's stream and call id, carried in the `requestState` sealed for that principal), so they share its key |
//! | any, when [`McpServerBuilder::call_options`] sets a stream | that one |
//!
//! `tools/list` carries cache hints ([`STATIC_LIST_TTL`], [`DYNAMIC_LIST_TTL`], [`McpServerBuilder::list_ttl`]).
//!
//! # Tasks
//!
//! A tool declared `#[tool(task = "optional")]` (or `"required"`) runs as a task for a 2026-07-28 client that
//! declares the Tasks extension: the call is answered with the task once it is admitted (validation and policy
//! passed), and its result, output-validated, becomes the task's. `tasks/get`, `tasks/update` (answers to the
//! task's questions) and `tasks/cancel` (fires the call's cancellation token) are served. A business error
//! completes the task with `isError: true`; `tool_internal_error`, `invalid_tool_output`, `timeout` and
//! `cancelled` fail it with `-32603` and keel's code. `notifications/tasks` are not sent: rmcp 3.11 cannot route
//! them on `subscriptions/listen` (its filter has no task field), so clients poll `tasks/get`.
//!
//! At most [`McpServerBuilder::max_tasks`] calls run as tasks at once (default [`DEFAULT_MAX_TASKS`]); past it, a
//! call that would become a task is refused before its handler, with a retry hint.
//!
//! # Composition
//!
//! keel serves the tools part of a server: [`McpServerBuilder::handler`] takes a plain rmcp [`ServerHandler`] for
//! prompts, resources, completion and the rest.
//!
//! An `async` tool (or an inline plain `fn`) can still reach the client session itself through [`current_request`].
//!
//! The view can change while clients are connected: [`McpServer::update`] swaps the executor and, when the
//! `tools/list` entries differ, sends `notifications/tools/list_changed` to every session (the server advertises
//! `tools.listChanged: true`). Sessions opened with `initialize` get the notification directly; on protocol
//! 2026-07-28, clients ask for it with `subscriptions/listen` and get it on that stream. A catalogue whose rows
//! change at run time (`tool-catalog`) serves through this.
//!
//! Transports: stdio ([`McpServer::serve_stdio`]), any rmcp transport ([`McpServer::serve`]) and, with the `http`
//! feature, Streamable HTTP ([`McpServer::serve_http`]). Every protocol revision the SDK knows is supported.
//!
//! ```no_run
//! use tool_core::{Executor, Registry};
//! use tool_mcp::McpServer;
//!
//! # async fn serve() -> Result<(), Box<dyn std::error::Error>> {
//! let registry = Registry::from_inventory()?;
//! let executor = Executor::new(registry.view().tag("public").build()?)?;
//! McpServer::builder(executor).name("incident-desk").build()?.serve_stdio().await?;
//! # Ok(()) }
//! ```

// MCP logging (`logging/setLevel`, `notifications/message`) is deprecated by SEP-2577 from protocol 2026-07-28 on;
// peers on earlier revisions (every client today) still use it, so the server keeps supporting it.
#![allow(deprecated)]

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CancelledNotificationParam, CompleteRequestParams,
    CompleteResult, CustomNotification, CustomRequest, CustomResult, GetPromptRequestParams, GetPromptResponse,
    GetSkillRequestParams, GetSkillResult, InitializeRequestParams, InitializeResult, InputRequiredResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult,
    ReadResourceRequestParams, ReadResourceResponse, RequestId, RequestMetaObject, RequestStateCodec, ServerConfig,
    SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService, ServiceExt, SubscriptionContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::Value;
use tool_core::{CallOptions, InputError, InputKind, LogLevel, TaskStart, TaskSupport, ToolCall};

use crate::compose::Rest;
use crate::render;

mod builder;
mod error;
mod listing;
mod notifier;

pub use builder::McpServerBuilder;
pub use error::{InvalidToolEntry, McpServerError, ServeError};
use listing::{Listeners, Listing};
use notifier::{NO_LOGS, PeerNotifier, level_rank, mcp_level_rank};

/// How long clients may cache `tools/list` of a server whose tools are fixed (compiled views): five minutes.
pub const STATIC_LIST_TTL: Duration = Duration::from_secs(300);
/// How long clients may cache `tools/list` of a server whose tools change at run time (a catalogue, or any server
/// after [`McpServer::update`]): five seconds.
pub const DYNAMIC_LIST_TTL: Duration = Duration::from_secs(5);

/// Builds [`CallOptions`] (tenant, principal, approvals) for one `tools/call`, from the request and its context
/// (which carries the HTTP request parts under the `http` feature). The server adds the notifier, the
/// cancellation and, unless this sets one, the stream.
pub type CallOptionsFn = dyn Fn(&CallToolRequestParams, &RequestContext<RoleServer>) -> CallOptions + Send + Sync;

/// The default cap on calls running as tasks at once, sized for a small machine. See
/// [`McpServerBuilder::max_tasks`].
pub const DEFAULT_MAX_TASKS: usize = 256;

/// The JSON-RPC error code of a call refused because the server runs as many tasks as it may.
pub const TOO_MANY_TASKS: i32 = -32000;

/// When a call refused for want of a task slot is told to retry.
const TASK_RETRY_AFTER: Duration = Duration::from_secs(5);

struct Shared {
    listing: RwLock<Arc<Listing>>,
    /// What `initialize` and `server/discover` answer (the server's name and version among it).
    config: ServerConfig,
    call_options: Option<Arc<CallOptionsFn>>,
    listeners: Mutex<Listeners>,
    /// Everything but tools: the user's rmcp handler, or none.
    rest: Arc<dyn Rest>,
    /// The `ttlMs` hint of `tools/list` answers.
    list_ttl_ms: AtomicU64,
    /// Whether the builder set the hint (then [`McpServer::update`] leaves it alone).
    list_ttl_explicit: bool,
    /// Seals and opens the `requestState` of input-required results.
    request_state: RequestStateCodec,
    /// The calls running as tasks.
    tasks: rmcp::task_manager::TaskManager,
    /// One permit per call that may run as a task, held until the call ends.
    task_slots: Arc<tokio::sync::Semaphore>,
    max_tasks: usize,
    /// How many times `tools/list_changed` went out.
    tool_changes: AtomicU64,
}

impl Shared {
    fn listing(&self) -> Arc<Listing> {
        match self.listing.read() {
            Ok(l) => l.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn listeners(&self) -> std::sync::MutexGuard<'_, Listeners> {
        self.listeners.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// An MCP server over one executor (and so one view) at a time. Cheap to clone; each client session gets its own
/// [`McpSession`] (its own log level).
///
/// The executor can be replaced while clients are connected ([`McpServer::update`]): calls already running finish
/// on the executor they started with, later `tools/list` and `tools/call` requests see the new one, and every
/// connected client is sent `notifications/tools/list_changed` when the list differs. The server advertises
/// `tools.listChanged: true`.
#[derive(Clone)]
pub struct McpServer {
    shared: Arc<Shared>,
}

impl fmt::Debug for McpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let listing = self.shared.listing();
        f.debug_struct("McpServer")
            .field("name", &self.shared.config.server_info.name)
            .field("tools", &listing.tools.iter().map(|t| t.name.as_ref()).collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// A handler for one client session (its own log level, and its own stream: a random 128-bit id that the
    /// idempotency keys of its calls are derived with). The HTTP transport makes one per session.
    pub fn session(&self) -> McpSession {
        McpSession {
            shared: self.shared.clone(),
            stream: format!("mcp-session/{}", random_id()).into(),
            level: Arc::new(AtomicU8::new(level_rank(LogLevel::Info))),
            initialized: Arc::new(AtomicBool::new(false)),
            listens: Arc::new(Mutex::new(std::collections::VecDeque::new())),
        }
    }

    /// Serves one session over any rmcp transport; returns once the session is established.
    pub async fn serve<T, E, A>(
        &self,
        transport: T,
    ) -> Result<RunningService<RoleServer, McpSession>, rmcp::service::ServerInitializeError>
    where
        T: rmcp::transport::IntoTransport<RoleServer, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        self.session().serve(transport).await
    }

    /// Serves one session on this process's stdin/stdout until the client disconnects (see
    /// [`McpServer::serve_io`]).
    pub async fn serve_stdio(&self) -> Result<(), ServeError> {
        let (stdin, stdout) = rmcp::transport::stdio();
        self.serve_io(stdin, stdout).await
    }

    /// Serves one session of newline-delimited JSON-RPC (MCP's stdio transport) over `read` and `write` until the
    /// client disconnects.
    ///
    /// A line (one message) longer than the executor's argument limit plus 64 KiB for the envelope is dropped as
    /// it is read, before it is buffered whole or parsed: a client cannot make the server hold more than that for
    /// one message, and the session goes on.
    pub async fn serve_io<R, W>(&self, read: R, write: W) -> Result<(), ServeError>
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let max_line = self.executor().limits().max_bytes.saturating_add(STDIO_ENVELOPE);
        let transport =
            rmcp::transport::async_rw::AsyncRwTransport::new_server(read, write).with_max_line_length(max_line);
        let running = self.serve(transport).await.map_err(|e| ServeError::Initialize(Box::new(e)))?;
        running.waiting().await.map_err(ServeError::Session)?;
        Ok(())
    }
}

/// 128 random bits, as 32 hex digits: the stream of a session or of a stateless request.
fn random_id() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // Only uniqueness matters here: the process's keyed hasher, fresh keys for each call.
        use std::hash::BuildHasher as _;
        let hasher = std::collections::hash_map::RandomState::new();
        bytes[..8].copy_from_slice(&hasher.hash_one(0u8).to_le_bytes());
        bytes[8..].copy_from_slice(&hasher.hash_one(1u8).to_le_bytes());
    }
    bytes.iter().fold(String::with_capacity(32), |mut hex, b| {
        let _ = fmt::Write::write_fmt(&mut hex, format_args!("{b:02x}"));
        hex
    })
}

/// The refusal of a call that would become a task when `max` of them run already.
fn too_many_tasks(max: usize) -> ErrorData {
    let retry_after_s = TASK_RETRY_AFTER.as_secs();
    ErrorData::new(
        rmcp::model::ErrorCode(TOO_MANY_TASKS),
        format!("the server is running as many tasks as it may ({max}); retry in {retry_after_s} s"),
        Some(serde_json::json!({"code": "too_many_tasks", "max_tasks": max, "retry_after_s": retry_after_s})),
    )
}

/// What a stdio line may hold beyond the arguments: the JSON-RPC envelope, the tool name, `_meta`.
const STDIO_ENVELOPE: usize = 64 * 1024;

/// The rmcp [`ServerHandler`] of one client session.
#[derive(Clone)]
pub struct McpSession {
    shared: Arc<Shared>,
    /// The stream of the session's calls (see [the module](self)).
    stream: Arc<str>,
    level: Arc<AtomicU8>,
    /// Whether the session's `initialize` has been answered (a second one is refused).
    initialized: Arc<AtomicBool>,
    /// For each `subscriptions/listen` being acknowledged, the tool-list change count when it was accepted.
    listens: Arc<Mutex<std::collections::VecDeque<u64>>>,
}

impl fmt::Debug for McpSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpSession").field("level", &self.level.load(Ordering::Relaxed)).finish_non_exhaustive()
    }
}

/// Whether the request is on protocol 2026-07-28 or later, where requests carry their own `_meta` and there is no
/// session state (log level, capabilities from `initialize`).
pub(crate) fn is_stateless(context: &RequestContext<RoleServer>) -> bool {
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
    async fn run_call(
        &self,
        mut request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let shared = &self.shared;
        let mut options = match &shared.call_options {
            Some(f) => f(&request, &context),
            None => CallOptions::new(),
        };
        let listing = shared.listing();
        // A tool that may run as a task does so for a client that supports tasks; one that must refuses the others.
        let (task_support, task_start) = listing
            .executor
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
        // How the handler asks its client for input: directly in a session; through input-required results,
        // with the round's answers and sealed state, when stateless.
        let capabilities = context.client_capabilities().unwrap_or_default();
        let mut call_id = context.id.to_string();
        let (direct, stateless): (Arc<dyn tool_core::ClientInput>, _) = if is_stateless(&context) {
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
                    _ => crate::input::RoundCall { stream: format!("mcp-request/{}", random_id()), id: call_id },
                };
                options = options.stream(call.stream.as_str());
                call_id = call.id.clone();
                round.call = for_principal.then_some(call);
            } else {
                round.call = None;
            }
            let responses = request.input_responses.take().unwrap_or_default();
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
                    tool_core::ClientInput::begin_task(&*input);
                });
            }
            let executor = listing.executor.clone();
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
                        let task = self.begin_task(running, bind, token, listing.clone());
                        return Ok(CallToolResponse::Task(rmcp::model::CreateTaskResult::new(task)));
                    }
                    // The client went away before the call became a task: it is cancelled, and ends soon.
                    () = &mut request_gone => token.cancel(),
                }
            };
            joined.map_err(|_| ErrorData::internal_error("the call ended abnormally", None))?
        } else {
            options = options.client_input(direct).cancellation(request_ct);
            let call = listing.executor.call_with(call, &options);
            #[cfg(feature = "otel")]
            let call = opentelemetry::context::FutureExt::with_context(call, parent);
            CURRENT.scope(scope, call).await
        };

        // Everything the handler sent goes out before the result (within a bound: a stuck peer cannot hold it).
        notifier.flush().await;

        if result.code() == Some("unknown_tool") && !result.executed {
            let message = result.error().map(|e| e.message.clone()).unwrap_or_default();
            return Err(ErrorData::invalid_params(message, None));
        }
        // A stateless call that ended on a request for input (the handler propagated the input error) is answered
        // with what the protocol has for it: the requests and the sealed state, or `-32021`.
        if let Some((input, binding)) = stateless {
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
        running: tokio::task::JoinHandle<tool_core::ToolResult>,
        bind: tokio::sync::watch::Sender<Option<rmcp::task_manager::TaskContext>>,
        token: tokio_util::sync::CancellationToken,
        listing: Arc<Listing>,
    ) -> rmcp::model::Task {
        use rmcp::task_manager::{TaskExit, TaskOptions};
        self.shared.tasks.spawn(TaskOptions::default(), move |task| {
            Box::pin(async move {
                let _ = bind.send(Some(task.clone()));
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
        })
    }
}

impl ServerHandler for McpSession {
    fn get_info(&self) -> ServerConfig {
        // Asked for on every stateless request: built once.
        self.shared.config.clone()
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let listing = self.shared.listing();
        Ok(ListToolsResult::with_all_items(listing.tools.clone())
            .with_ttl_ms(self.shared.list_ttl_ms.load(Ordering::Relaxed))
            .with_cache_scope(CacheScope::Public))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let listing = self.shared.listing();
        listing.index.get(name).and_then(|&i| listing.tools.get(i)).cloned()
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        {
            let mut listeners = self.shared.listeners();
            listeners.sessions.retain(|p| !p.is_transport_closed());
            listeners.sessions.push(context.peer.clone());
        }
        self.shared.rest.on_initialized(context).await;
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        let mut accepted = self.shared.rest.accepted_subscription_filter(requested).unwrap_or_default();
        accepted.tools_list_changed = requested.tools_list_changed.filter(|&t| t);
        if accepted.tools_list_changed == Some(true) {
            let changes = self.shared.tool_changes.load(Ordering::SeqCst);
            self.listens.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push_back(changes);
        }
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let id = (context.accepted().tools_list_changed == Some(true)).then(|| {
            let mut listeners = self.shared.listeners();
            let id = listeners.next_subscription;
            listeners.next_subscription += 1;
            listeners.subscriptions.push((id, context.sink().clone()));
            id
        });
        // The SDK acknowledges the stream before it calls this, so a change can go out between the two (the client
        // may act on the acknowledgment at once): one that did is sent now. It may be sent twice; never lost.
        if id.is_some() {
            let accepted_at = self.listens.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop_front();
            if accepted_at.is_some_and(|at| self.shared.tool_changes.load(Ordering::SeqCst) > at)
                && let Err(e) = context.sink().notify_tool_list_changed().await
            {
                tracing::debug!(error = %e, "tools/list_changed not delivered to a new subscription");
            }
        }
        let mut rest_filter = context.accepted().clone();
        rest_filter.tools_list_changed = None;
        let result = if rest_filter == SubscriptionFilter::default() {
            context.cancelled().await;
            Ok(())
        } else {
            self.shared.rest.listen(context).await
        };
        if let Some(id) = id {
            self.shared.listeners().subscriptions.retain(|(i, _)| *i != id);
        }
        result
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        self.shared.rest.complete(request, context).await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        self.shared.rest.get_prompt(request, context).await
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.shared.rest.list_prompts(request, context).await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.shared.rest.list_resources(request, context).await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.shared.rest.list_resource_templates(request, context).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.shared.rest.read_resource(request, context).await
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared.rest.subscribe(request, context).await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared.rest.unsubscribe(request, context).await
    }

    async fn list_skills(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        self.shared.rest.list_skills(request, context).await
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        self.shared.rest.get_skill(request, context).await
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, ErrorData> {
        self.shared.rest.read_resource_directory(request, context).await
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        self.shared.rest.on_custom_request(request, context).await
    }

    async fn on_cancelled(&self, notification: CancelledNotificationParam, context: NotificationContext<RoleServer>) {
        self.shared.rest.on_cancelled(notification, context).await;
    }

    async fn on_progress(&self, notification: ProgressNotificationParam, context: NotificationContext<RoleServer>) {
        self.shared.rest.on_progress(notification, context).await;
    }

    async fn on_roots_list_changed(&self, context: NotificationContext<RoleServer>) {
        self.shared.rest.on_roots_list_changed(context).await;
    }

    async fn on_custom_notification(&self, notification: CustomNotification, context: NotificationContext<RoleServer>) {
        self.shared.rest.on_custom_notification(notification, context).await;
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.run_call(request, context).await
    }

    /// The session's one `initialize`. A second one is refused, and changes nothing: answering it would
    /// negotiate the session's revision again (and with a newer revision, methods of the one agreed, such as `ping`,
    /// would be gone mid-session).
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        if self.initialized.swap(true, Ordering::SeqCst) {
            return Err(ErrorData::invalid_request(
                "this session is already initialized: `initialize` is a session's first request, sent once",
                None,
            ));
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.level.store(mcp_level_rank(request.level), Ordering::Relaxed);
        Ok(())
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        Ok(rmcp::model::GetTaskResult::new(self.shared.tasks.get_task(&request.task_id)?))
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared.tasks.update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared.tasks.cancel_task(&request.task_id)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [rmcp::model::ProtocolVersion]> {
        Cow::Borrowed(rmcp::model::ProtocolVersion::KNOWN_VERSIONS)
    }
}
