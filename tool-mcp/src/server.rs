//! Serving a [`ToolView`](keel_tools_core::ToolView) as an MCP server.
//!
//! [`McpServer`] wraps an [`Executor`](keel_tools_core::Executor): `tools/list` is the executor's view rendered for MCP
//! ([`ToolView::schemas`](keel_tools_core::ToolView::schemas)`(`[`Provider::Mcp`](keel_tools_core::Provider::Mcp)`)`:
//! `inputSchema`, `outputSchema`, the four annotations), and `tools/call` runs through
//! [`Executor::call_with`](keel_tools_core::Executor::call_with), so the fixed order (registered, arguments valid,
//! policy, handler, result valid) holds over the wire exactly as in process.
//!
//! | outcome | over MCP |
//! |---|---|
//! | unknown tool | JSON-RPC error `-32602` with the executor's `unknown_tool` message |
//! | `invalid_arguments`, `approval_required`, `policy_denied`, business errors, `tool_internal_error`, `timeout`, `invalid_tool_output` | `CallToolResult` with `isError: true`, the error as JSON text, and as `structuredContent` when the tool has no `outputSchema` |
//! | success | `structuredContent` (an object) and the same JSON as text; a [`Content`](keel_tools_core::content::Content) tool's blocks as `content` |
//!
//! Each call's [`CallContext`](keel_tools_core::CallContext) gets a [`Notifier`](keel_tools_core::context::Notifier) bound to the
//! session: [`CallContext::log`](keel_tools_core::CallContext::log) sends `notifications/message` at or above the level the
//! client chose with `logging/setLevel` (default `info`; a stateless request gets messages only when its `_meta` names
//! a level), and [`CallContext::progress`](keel_tools_core::CallContext::progress) sends `notifications/progress` only when
//! the request carried a `progressToken`, with strictly increasing values. Notifications are sent in order and flushed
//! before the result. `notifications/cancelled`, an HTTP client that closes its connection and a closed stdin (after
//! rmcp's 5 s drain) cancel the call's context.
//!
//! # Both protocol eras
//!
//! Sessions (revisions up to 2025-11-25, `initialize`) and stateless requests (2026-07-28, `server/discover`, each
//! request with its own `_meta`) are served side by side, by every transport. What a handler asks its client
//! ([`CallContext::elicit`](keel_tools_core::CallContext::elicit), `sample`, `roots`) is the same code in both: a
//! session is asked there and then; a stateless call is answered with an input-required result whose
//! `requestState` is sealed with the server's key ([`McpServerBuilder::request_state_key`]), carries every
//! answer so far and the handler's round state, and is bound to the tool, its canonical arguments, and the
//! call's tenant and principal (from [`McpServerBuilder::call_options`]) when it has them. The retry runs the
//! handler again from the start. A client that lacks the capability gets `-32021`; a state that fails
//! verification (altered, expired, or replayed for another call, tenant or principal), `-32602`, and no handler
//! runs. See [`keel_tools_core::context::ClientInput`] for the contract a handler relies on.
//!
//! A `requestState` is integrity-protected and bound, but **readable by the client**: it is signed, not
//! encrypted. Never put a secret in a handler's round state
//! ([`CallContext::set_round_state`](keel_tools_core::CallContext::set_round_state)) or in what it asks for.
//!
//! # Approvals
//!
//! A call the executor stops with `approval_required` (a `write` or `destructive` tool, under the default policy)
//! is answered so unless the server is given [`ApprovalRules`] ([`McpServerBuilder::approvals`]): rules that approve
//! named tools, or every `write` tool, without asking; and elicitation, which asks the person at a client that
//! offers it to approve the call's exact arguments (in a session there and then, stateless through an input-required
//! round). Accepted, the call runs once with those arguments; declined, the model reads `approval_denied` and
//! nothing runs.
//!
//! # Idempotency keys
//!
//! A JSON-RPC id is unique only within its session, so every `tools/call` is made on a stream of its own
//! ([`CallOptions::stream`]), which its [`CallContext::idempotency_key`](keel_tools_core::CallContext::idempotency_key)
//! is derived with; two clients never share a key:
//!
//! | request | stream |
//! |---|---|
//! | in a session (`initialize`: stdio, Streamable HTTP, any transport) | the session's: an id made with its [`McpSession`], unique across processes (128 random bits per process and a counter), so a retry in the session under the same id keeps its key |
//! | stateless (2026-07-28) | one of its own: no two requests share a key, and a retry is not recognised; the rounds of one input-required call made for a principal are one call (the first round's stream and call id, carried in the `requestState` sealed for that principal), so they share its key |
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
//! Tasks live in this process, unless the server is given a [`TaskStore`](keel_tools_core::tasks::TaskStore)
//! ([`McpServerBuilder::task_store`]): then the replica that runs a call records its task there under a lease, and
//! every replica of the server answers `tasks/get`, `tasks/update` and `tasks/cancel` for it; a task whose replica
//! died reads `failed` with `task_lost` once its lease expired.
//!
//! # Composition
//!
//! keel serves the tools part of a server: [`McpServerBuilder::handler`] takes a plain rmcp
//! [`ServerHandler`](rmcp::ServerHandler) for prompts, resources, completion and the rest.
//!
//! An `async` tool (or an inline plain `fn`) can still reach the client session itself through [`current_request`].
//!
//! The view can change while clients are connected: [`McpServer::update`] swaps the executor and, when the
//! `tools/list` entries differ, sends `notifications/tools/list_changed` to every session (the server advertises
//! `tools.listChanged: true`). Sessions opened with `initialize` get the notification directly; on protocol
//! 2026-07-28, clients ask for it with `subscriptions/listen` and get it on that stream. A catalogue whose rows
//! change at run time (`keel-tools-catalog`) serves through this.
//!
//! Transports: stdio ([`McpServer::serve_stdio`]), any rmcp transport ([`McpServer::serve`]) and, with the `http`
//! feature, Streamable HTTP ([`McpServer::serve_http`]). Every protocol revision the SDK knows is supported.
//!
//! ```no_run
//! use keel_tools_core::{Executor, Registry};
//! use keel_tools_mcp::McpServer;
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

use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use keel_tools_core::executor::CallOptions;
use rmcp::RoleServer;
use rmcp::model::{CallToolRequestParams, RequestStateCodec, ServerConfig};
use rmcp::service::{RequestContext, RunningService, ServiceExt};

use crate::compose::Rest;

mod approval;
mod builder;
mod call;
mod error;
mod listing;
mod notifier;
mod session;
#[cfg(feature = "auth")]
mod view;

pub use approval::{APPROVAL_INPUT_KEY, ApprovalRules};
pub use builder::McpServerBuilder;
pub use call::{IDEMPOTENCY_KEY_META, MAX_IDEMPOTENCY_KEY, McpRequest, current_request};
pub use error::{InvalidToolEntry, McpServerError, ServeError};
use listing::{Listeners, Listing};
pub use session::McpSession;
#[cfg(feature = "auth")]
pub use view::{PrincipalView, PrincipalViewFn};

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

struct Shared {
    listing: RwLock<Arc<Listing>>,
    /// What `initialize` and `server/discover` answer (the server's name and version among it).
    config: ServerConfig,
    call_options: Option<Arc<CallOptionsFn>>,
    /// What is approved without asking, and whether the person is asked for the rest.
    approvals: ApprovalRules,
    /// What each principal sees and runs for, on a protected server.
    #[cfg(feature = "auth")]
    principal_view: Option<Arc<PrincipalViewFn>>,
    /// An executor of no tool: a call of a tool outside its principal's view, or of a deferred tool not surfaced
    /// in its session, goes through it, and so is refused exactly as a call of a tool the server lacks.
    no_tools: keel_tools_core::Executor,
    listeners: Mutex<Listeners>,
    /// Everything but tools: the user's rmcp handler, or none.
    rest: Arc<dyn Rest>,
    /// The `ttlMs` hint of `tools/list` answers.
    list_ttl_ms: AtomicU64,
    /// Whether the builder set the hint (then [`McpServer::update`] leaves it alone).
    list_ttl_explicit: bool,
    /// Seals and opens the `requestState` of input-required results.
    request_state: RequestStateCodec,
    /// The calls running as tasks, in this process.
    tasks: rmcp::task_manager::TaskManager,
    /// Whose each of those tasks is (see `session::task_owner`), by task id; a task without an entry is anyone's
    /// who holds its id.
    task_owners: Mutex<std::collections::HashMap<String, String>>,
    /// Or in a task store every replica shares ([`McpServerBuilder::task_store`]).
    stored_tasks: Option<crate::task::stored::StoredTasks>,
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
///
/// An executor whose view defers tools (`keel_tools_core::deferral`, with keel's `search_tools` added by
/// `ToolView::with_tool_search`) lists only the tools that are not deferred, and the search. In a session
/// (protocol 2025-11-25), what a search returns is listed and callable for that session from then on (the session
/// is sent `tools/list_changed`), and a call of a deferred tool no search of the session surfaced is refused exactly
/// as a call of a tool the server lacks. A request without a session (2026-07-28) carries no record of what its
/// client was shown: deferred tools stay out of its lists, and the search finds them, but a call of one by name is
/// not refused.
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

/// What a stdio line may hold beyond the arguments: the JSON-RPC envelope, the tool name, `_meta`.
const STDIO_ENVELOPE: usize = 64 * 1024;
