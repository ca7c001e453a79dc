//! [`McpServerBuilder`]: a server's name, handler, keys and limits, then its listing rendered once.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use keel_tools_core::Executor;
use keel_tools_core::definition::TaskSupport;
use keel_tools_core::executor::CallOptions;
use keel_tools_core::tasks::{DEFAULT_KEEP_FOR, DEFAULT_POLL_INTERVAL, DEFAULT_TASK_LEASE, TaskStore};
use rmcp::model::{CallToolRequestParams, Implementation, RequestStateCodec, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};

use super::approval::ApprovalRules;
use super::error::OtherProblem;
use super::listing::duration_ms;
use super::{CallOptionsFn, DEFAULT_MAX_TASKS, Listeners, Listing, McpServer, McpServerError, STATIC_LIST_TTL, Shared};
use crate::compose::{NoRest, Rest, merge_capabilities};
use crate::task::stored::{AnyTaskStore, StoredTasks};

/// Builds an [`McpServer`]; see [`McpServer::builder`].
#[must_use]
pub struct McpServerBuilder {
    executor: Executor,
    name: String,
    version: String,
    title: Option<String>,
    instructions: Option<String>,
    call_options: Option<Arc<CallOptionsFn>>,
    approvals: ApprovalRules,
    #[cfg(feature = "auth")]
    principal_view: Option<Arc<super::PrincipalViewFn>>,
    rest: Arc<dyn Rest>,
    list_ttl: Option<Duration>,
    request_state: Option<RequestStateCodec>,
    request_state_key: Option<(String, Vec<u8>)>,
    previous_request_state_key: Option<(String, Vec<u8>)>,
    max_tasks: usize,
    task_store: Option<AnyTaskStore>,
    task_lease: Duration,
    task_keep_for: Duration,
}

impl McpServerBuilder {
    /// The server name reported in `initialize` (default `keel`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
    /// The server version reported in `initialize` (default: this crate's version).
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }
    /// A human-readable title reported in `initialize`.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }
    /// Instructions for the client's model, reported in `initialize`.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }
    /// Per-call options (tenant, principal, approvals) from the request; see [`CallOptionsFn`]. Default: none.
    ///
    /// The tenant and principal set here bind a `requestState` to its caller, and are part of every call's
    /// idempotency key. A stream set here replaces the one the server gives the call (see [the module](super)):
    /// set one only when it names the client's request stream at least as narrowly.
    pub fn call_options(
        mut self,
        f: impl Fn(&CallToolRequestParams, &RequestContext<RoleServer>) -> CallOptions + Send + Sync + 'static,
    ) -> Self {
        self.call_options = Some(Arc::new(f));
        self
    }

    /// What the server approves without asking, and whether it asks the person at the client for the rest of
    /// the calls that need an approval (`write` and `destructive` tools under the default policy); see
    /// [`ApprovalRules`]. Default: [`ApprovalRules::new`], nothing approved and nobody asked: such calls are
    /// answered `approval_required`.
    ///
    /// An approval [`call_options`](Self::call_options) gives a call stands beside these.
    pub fn approvals(mut self, rules: ApprovalRules) -> Self {
        self.approvals = rules;
        self
    }

    /// Maps each principal of a protected server (feature `auth`) to what it sees and runs for: a
    /// [`PrincipalView`](super::PrincipalView), its tenant and the tools it may call. Called on every
    /// `tools/list` and `tools/call` of a principal, so keep it cheap (look up values built once).
    ///
    /// - `tools/list` shows the principal exactly the tools it may call: the server's, in its view, whose scopes
    ///   its token was granted; the answer is marked private to it (`cacheScope: private`), in both protocol eras.
    /// - A `tools/call` of a tool outside its view is refused exactly as one of a tool the server lacks (JSON-RPC
    ///   `-32602`, the executor's `unknown_tool` message), before anything of it runs: the answer does not tell
    ///   the tool exists, and no scope challenge names it.
    /// - The view's tenant is the call's tenant, unless [`McpServerBuilder::call_options`] sets one.
    /// - [`McpServer::update`](super::McpServer::update) sends `notifications/tools/list_changed` only to the
    ///   clients whose own list changed. The notification names no tool: a principal learns what changed only by
    ///   listing again, where it sees its own tools.
    ///
    /// Requests without a principal (a server that is not protected) are not affected.
    #[cfg(feature = "auth")]
    pub fn principal_view(
        mut self,
        f: impl Fn(&crate::caller::Principal) -> super::PrincipalView + Send + Sync + 'static,
    ) -> Self {
        self.principal_view = Some(Arc::new(f));
        self
    }

    /// Serves everything that is not a tool with `handler`, a plain rmcp [`ServerHandler`]: prompts, resources,
    /// resource templates and subscriptions, completion, skills, custom requests and notifications, and the
    /// prompt and resource parts of `subscriptions/listen`. keel keeps the tools part.
    ///
    /// | request | answered by |
    /// |---|---|
    /// | `tools/list`, `tools/call`, `initialize`, `logging/setLevel`, `ping`, `server/discover` | keel |
    /// | `subscriptions/listen` | both: keel registers the stream for `tools/list_changed`, then runs the handler's `listen` for what its [`ServerHandler::accepted_subscription_filter`] accepted |
    /// | `notifications/initialized` | both: keel first |
    /// | everything else | the handler |
    ///
    /// The server's capabilities are the handler's [`ServerHandler::get_info`] (read once, here) with keel's
    /// `tools` (`listChanged: true`) and `logging` over them; the handler's `instructions` are used when the
    /// builder sets none. The handler's own `list_tools`, `call_tool`, `get_tool` and `initialize` are never
    /// called. One handler serves every session (it is shared, not cloned): keep per-session state in the
    /// request's [`RequestContext`].
    pub fn handler<H: ServerHandler>(mut self, handler: H) -> Self {
        self.rest = Arc::new(handler);
        self
    }

    /// The cache hint of `tools/list` answers (protocol 2026-07-28, SEP-2549: `ttlMs`, with `cacheScope:
    /// public`). Default: [`STATIC_LIST_TTL`], and [`DYNAMIC_LIST_TTL`](super::DYNAMIC_LIST_TTL) from the first
    /// [`McpServer::update`] on (or [`McpServer::expect_changes`]).
    pub fn list_ttl(mut self, ttl: Duration) -> Self {
        self.list_ttl = Some(ttl);
        self
    }

    /// The codec that seals the `requestState` of input-required results, for a keyring beyond
    /// [`McpServerBuilder::request_state_key`]'s current and previous keys (see [`RequestStateCodec`]). Setting
    /// both fails [`McpServerBuilder::build`].
    pub fn request_state_codec(mut self, codec: RequestStateCodec) -> Self {
        self.request_state = Some(codec);
        self
    }

    /// The key that seals the `requestState` of input-required results (protocol 2026-07-28: a stateless call
    /// that asks its client for input), and its id (1 to 255 bytes of UTF-8, sent with every state it seals).
    /// The key is at least 32 random bytes; keep it secret, out of the source.
    ///
    /// Default: a random key of this process, so that a retry must reach the process that answered the first
    /// round, and none survives a restart. Replicas behind one address are given the same key, so that any of
    /// them resumes any call.
    ///
    /// To rotate it, give every replica the new key here and the old one as
    /// [`McpServerBuilder::previous_request_state_key`]; once the old key's states have expired (15 minutes after
    /// the last replica stopped sealing with it), drop the old one. While replicas are updated one by one, a
    /// state sealed with the new key fails on a replica that does not hold it yet; to have no such failure,
    /// first give every replica the new key as the previous one (the old key still sealing), then swap the two.
    ///
    /// A key shorter than 32 bytes, or an id that is empty, too long or the previous key's, fails
    /// [`McpServerBuilder::build`].
    ///
    /// The key protects integrity only: a client can read a `requestState`, never forge or move it.
    pub fn request_state_key(mut self, id: impl Into<String>, key: impl Into<Vec<u8>>) -> Self {
        self.request_state_key = Some((id.into(), key.into()));
        self
    }

    /// A second key, during a rotation: states it sealed still open, none is sealed with it (the current key
    /// seals). Usually the key [`McpServerBuilder::request_state_key`] replaced. Needs a current key.
    pub fn previous_request_state_key(mut self, id: impl Into<String>, key: impl Into<Vec<u8>>) -> Self {
        self.previous_request_state_key = Some((id.into(), key.into()));
        self
    }

    /// How many calls may run as tasks at once (at least 1; default [`DEFAULT_MAX_TASKS`]).
    ///
    /// A call that would become a task (a task tool called by a client that runs tasks) takes a slot before it
    /// starts and frees it when its call ends, whether it became a task or was answered in the request. Past the
    /// cap, such a call is refused before anything of it runs, with the JSON-RPC error
    /// [`TOO_MANY_TASKS`](super::TOO_MANY_TASKS) and data
    /// `{"code": "too_many_tasks", "max_tasks": n, "retry_after_s": s}`; calls already admitted run on. A finished
    /// task's result stays readable with `tasks/get` and holds no slot.
    pub fn max_tasks(mut self, n: usize) -> Self {
        self.max_tasks = n.max(1);
        self
    }

    /// Keeps the server's tasks in `store`, shared by every replica of the server, instead of in this process
    /// (keel-tools-state's `SqliteTaskStore` for one machine, `PostgresTaskStore` for replicas; any
    /// [`TaskStore`]).
    ///
    /// - The replica that runs a call records its task there (`working`, owned under a lease of
    ///   [`task_lease`](Self::task_lease)), renews the lease every third of it, and records the call's end. A
    ///   task's input requests are kept there too: `input_required`, until a `tasks/update` answers them.
    /// - Every replica answers `tasks/get`, `tasks/update` and `tasks/cancel` from the store, so a client may reach
    ///   any of them. A cancel made on any replica fires the running call's cancellation token (from the store's
    ///   change feed, or at the latest at the owner's next heartbeat).
    /// - A task whose replica stopped (killed, cut off from the store) before the call ended is `lost` once its
    ///   lease expires, never `working` forever: `tasks/get` reads it `failed`, with the JSON-RPC error `-32603`
    ///   whose data has `code: "task_lost"`, and a status message saying the call may have run.
    /// - A task started for a principal is that principal's alone: another principal's `tasks/get`, `tasks/update`
    ///   or `tasks/cancel` is answered as for a task that does not exist.
    /// - Ended tasks are kept for [`task_keep_for`](Self::task_keep_for), then removed.
    /// - A store that cannot record a new task fails its call: the call is cancelled, and the request is answered
    ///   with `-32603` and `code: "state_unavailable"`.
    ///
    /// [`max_tasks`](Self::max_tasks) still caps the tasks each replica runs. A server with a task store declares
    /// the Tasks extension even while its view has no task tool (a catalogue's may gain one later).
    pub fn task_store<S: TaskStore + ?Sized + 'static>(mut self, store: Arc<S>) -> Self {
        self.task_store = Some(AnyTaskStore::new(store));
        self
    }

    /// How long the lease on a stored task lasts (default [`DEFAULT_TASK_LEASE`], 30 s): how long after its replica
    /// stops a task reads `lost`. The owner renews it every third of it. See [`task_store`](Self::task_store).
    pub fn task_lease(mut self, lease: Duration) -> Self {
        self.task_lease = lease;
        self
    }

    /// How long a stored task is kept after it ended (default [`DEFAULT_KEEP_FOR`], one hour): its `ttlMs`.
    pub fn task_keep_for(mut self, keep_for: Duration) -> Self {
        self.task_keep_for = keep_for;
        self
    }

    /// Renders the view's tools for MCP and builds the server. Every tool whose entry is not a valid MCP tool is
    /// reported at once.
    pub fn build(self) -> Result<McpServer, McpServerError> {
        let request_state =
            request_state_codec(self.request_state, self.request_state_key, self.previous_request_state_key)
                .map_err(|problem| McpServerError { problems: Vec::new(), other: vec![problem] })?;
        let listing = Listing::new(self.executor)?;
        let no_tools = keel_tools_core::Executor::new(keel_tools_core::ToolView::new(Vec::new()))
            .map_err(|e| McpServerError { problems: Vec::new(), other: vec![OtherProblem::from(e.to_string(), e)] })?;
        let rest_config = self.rest.get_info();
        let mut info = Implementation::new(self.name, self.version);
        info.title = self.title;
        // A server with a task store advertises tasks from the start: its tools may change (a catalogue), and the
        // capability is announced once.
        let tasks =
            self.task_store.is_some() || listing.executor.view().iter().any(|d| d.task_support() != TaskSupport::Never);
        let mut config = ServerConfig::new(merge_capabilities(&rest_config, tasks)).with_server_info(info);
        if let Some(instructions) = self.instructions.or(rest_config.instructions) {
            config = config.with_instructions(instructions);
        }
        Ok(McpServer {
            shared: Arc::new(Shared {
                listing: RwLock::new(Arc::new(listing)),
                config,
                call_options: self.call_options,
                approvals: self.approvals,
                #[cfg(feature = "auth")]
                principal_view: self.principal_view,
                no_tools,
                listeners: Mutex::new(Listeners::default()),
                rest: self.rest,
                list_ttl_ms: AtomicU64::new(duration_ms(self.list_ttl.unwrap_or(STATIC_LIST_TTL))),
                list_ttl_explicit: self.list_ttl.is_some(),
                request_state,
                tasks: rmcp::task_manager::TaskManager::new(),
                task_owners: Mutex::default(),
                stored_tasks: self
                    .task_store
                    .map(|store| StoredTasks::new(store, self.task_lease, self.task_keep_for, DEFAULT_POLL_INTERVAL)),
                task_slots: Arc::new(tokio::sync::Semaphore::new(self.max_tasks)),
                max_tasks: self.max_tasks,
                tool_changes: AtomicU64::new(0),
            }),
        })
    }
}

impl McpServer {
    /// A server with default settings over `executor`'s view.
    pub fn new(executor: Executor) -> Result<McpServer, McpServerError> {
        McpServer::builder(executor).build()
    }

    /// A builder for a server over `executor`'s view.
    pub fn builder(executor: Executor) -> McpServerBuilder {
        McpServerBuilder {
            executor,
            name: "keel".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            title: None,
            instructions: None,
            call_options: None,
            approvals: ApprovalRules::new(),
            #[cfg(feature = "auth")]
            principal_view: None,
            rest: Arc::new(NoRest),
            list_ttl: None,
            request_state: None,
            request_state_key: None,
            previous_request_state_key: None,
            max_tasks: DEFAULT_MAX_TASKS,
            task_store: None,
            task_lease: DEFAULT_TASK_LEASE,
            task_keep_for: DEFAULT_KEEP_FOR,
        }
    }
}

/// The `requestState` codec the builder was given: a codec, or a current key (and a previous one), or none (then a
/// fresh random key of this process's own).
fn request_state_codec(
    codec: Option<RequestStateCodec>,
    current: Option<(String, Vec<u8>)>,
    previous: Option<(String, Vec<u8>)>,
) -> Result<RequestStateCodec, OtherProblem> {
    match (codec, current, previous) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => Err(OtherProblem::new(
            "the requestState key is set twice: give either `request_state_codec` or `request_state_key`, not both",
        )),
        (Some(codec), None, None) => Ok(codec),
        (None, None, Some((id, _))) => Err(OtherProblem::new(format!(
            "`previous_request_state_key` (`{id}`) needs a current key: add `request_state_key`"
        ))),
        (None, None, None) => {
            let mut key = [0u8; RequestStateCodec::MIN_KEY_LENGTH];
            getrandom::fill(&mut key)
                .map_err(|e| OtherProblem::from(format!("no random key for the request state: {e}"), e))?;
            RequestStateCodec::try_new(key.to_vec()).map_err(|e| OtherProblem::from(e.to_string(), e))
        }
        (None, Some((id, key)), previous) => {
            for (id, key) in std::iter::once((&id, &key)).chain(previous.as_ref().map(|(i, k)| (i, k))) {
                if key.len() < RequestStateCodec::MIN_KEY_LENGTH {
                    return Err(OtherProblem::new(format!(
                        "the requestState key `{id}` has {} bytes; it needs at least {} (random bytes, the same on \
                         every replica)",
                        key.len(),
                        RequestStateCodec::MIN_KEY_LENGTH
                    )));
                }
            }
            if previous.as_ref().is_some_and(|(p, _)| *p == id) {
                return Err(OtherProblem::new(format!(
                    "the current and previous requestState keys have the same id `{id}`; give each its own"
                )));
            }
            let ring = std::iter::once((id.clone(), key)).chain(previous);
            RequestStateCodec::new_with_keyring(id.clone(), ring)
                .map_err(|e| OtherProblem::from(format!("the requestState key `{id}` cannot be used: {e}"), e))
        }
    }
}
