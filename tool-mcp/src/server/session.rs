//! One client session: the rmcp [`ServerHandler`] keel serves with.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use keel_tools_core::context::LogLevel;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, InitializeRequestParams, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ServerConfig, SetLevelRequestParams, SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};

use super::notifier::{level_rank, mcp_level_rank};
use super::{McpServer, Shared};

/// The rmcp [`ServerHandler`] of one client session.
#[derive(Clone)]
pub struct McpSession {
    pub(super) shared: Arc<Shared>,
    /// The stream of the session's calls (see [the module](super)).
    pub(super) stream: Arc<str>,
    pub(super) level: Arc<AtomicU8>,
    /// Whether the session's `initialize` has been answered (a second one is refused).
    initialized: Arc<AtomicBool>,
    /// For each `subscriptions/listen` being acknowledged, the tool-list change count when it was accepted.
    listens: Arc<Mutex<std::collections::VecDeque<u64>>>,
    /// The deferred tools a search surfaced in this session (`keel_tools_core::deferral`).
    pub(super) surfaced: Arc<Mutex<keel_tools_core::deferral::Surfaced>>,
}

impl fmt::Debug for McpSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpSession").field("level", &self.level.load(Ordering::Relaxed)).finish_non_exhaustive()
    }
}

impl McpServer {
    /// A handler for one client session (its own log level, and its own stream: an id no other session or request
    /// of any process has, that the idempotency keys of its calls are derived with). The HTTP transport makes one
    /// per session.
    pub fn session(&self) -> McpSession {
        McpSession {
            shared: self.shared.clone(),
            stream: format!("mcp-session/{}", stream_id()).into(),
            level: Arc::new(AtomicU8::new(level_rank(LogLevel::Info))),
            initialized: Arc::new(AtomicBool::new(false)),
            listens: Arc::new(Mutex::new(std::collections::VecDeque::new())),
            surfaced: Arc::default(),
        }
    }
}

/// The stream of a session or of a stateless request: 128 random bits drawn once per process (32 hex digits), then
/// a counter. Streams only need to differ, across processes too (replicas may share an idempotency store); they
/// are not secrets (a client reads its own in a `requestState`, which is signed), so one draw per process is
/// enough, and no request pays for a system call.
pub(super) fn stream_id() -> String {
    static PROCESS: OnceLock<String> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{}-{:x}", PROCESS.get_or_init(random_id), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// 128 random bits, as 32 hex digits.
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
        let ttl = self.shared.list_ttl_ms.load(Ordering::Relaxed);
        // Deferred tools are listed once a search surfaced them in this session; never without a session.
        if listing.executor.view().has_deferred() {
            let surfaced = self.surfaced.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
            let shown =
                |def: &keel_tools_core::definition::ToolDefinition| !def.deferred() || surfaced.contains(def.name());
            #[cfg(feature = "auth")]
            if let Some(principal) = crate::caller::principal(&_context) {
                let view = self.shared.view_of(principal);
                let tools: Vec<_> = listing
                    .tools
                    .iter()
                    .zip(listing.executor.view().iter())
                    .filter(|(_, def)| shown(def) && view.allows(def.name()) && def.allowed_with(&principal.scopes))
                    .map(|(tool, _)| tool.clone())
                    .collect();
                return Ok(ListToolsResult::with_all_items(tools)
                    .with_ttl_ms(ttl)
                    .with_cache_scope(CacheScope::Private));
            }
            let tools: Vec<_> = listing
                .tools
                .iter()
                .zip(listing.executor.view().iter())
                .filter(|(_, d)| shown(d))
                .map(|(t, _)| t.clone())
                .collect();
            return Ok(ListToolsResult::with_all_items(tools).with_ttl_ms(ttl).with_cache_scope(CacheScope::Private));
        }
        // On a protected server, a caller is shown exactly the tools its view holds and its scopes let it call, and
        // the answer is its own to cache.
        #[cfg(feature = "auth")]
        if let Some(principal) = crate::caller::principal(&_context) {
            let view = self.shared.view_of(principal);
            let tools: Vec<_> = listing.visible(&view, principal).cloned().collect();
            return Ok(ListToolsResult::with_all_items(tools).with_ttl_ms(ttl).with_cache_scope(CacheScope::Private));
        }
        Ok(ListToolsResult::with_all_items(listing.tools.clone()).with_ttl_ms(ttl).with_cache_scope(CacheScope::Public))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let listing = self.shared.listing();
        listing.index.get(name).and_then(|&i| listing.tools.get(i)).cloned()
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        {
            let mut listeners = self.shared.listeners();
            listeners.sessions.retain(|(p, _)| !p.is_transport_closed());
            #[cfg(feature = "auth")]
            let caller = crate::caller::shared(&context.extensions);
            #[cfg(not(feature = "auth"))]
            let caller = ();
            listeners.sessions.push((context.peer.clone(), caller));
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
            #[cfg(feature = "auth")]
            let caller = crate::caller::shared(&context.request_context().extensions);
            #[cfg(not(feature = "auth"))]
            let caller = ();
            listeners.subscriptions.push((id, context.sink().clone(), caller));
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
            self.shared.listeners().subscriptions.retain(|(i, _, _)| *i != id);
        }
        result
    }

    // Prompts, resources, completion, skills, custom requests and notifications: the rest's, as they are.
    crate::compose::rest_methods!(forward to shared.rest);

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Boxed: the call's state (the executor's future with the handler's) is large, and the SDK moves its request
        // future more than once (into its task, and within it); one allocation is cheaper than those copies.
        Box::pin(self.run_call(request, context)).await
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
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        let asker = task_owner(&context);
        let task = match &self.shared.stored_tasks {
            Some(stored) => stored.get(&request.task_id, asker.as_deref()).await?,
            None => {
                self.shared.visible_task(&request.task_id, asker.as_deref())?;
                self.shared.tasks.get_task(&request.task_id)?
            }
        };
        Ok(rmcp::model::GetTaskResult::new(task))
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let asker = task_owner(&context);
        match &self.shared.stored_tasks {
            Some(stored) => stored.update(&request.task_id, request.input_responses, asker.as_deref()).await,
            None => {
                self.shared.visible_task(&request.task_id, asker.as_deref())?;
                self.shared.tasks.update_task(&request.task_id, request.input_responses)
            }
        }
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let asker = task_owner(&context);
        match &self.shared.stored_tasks {
            Some(stored) => stored.cancel(&request.task_id, asker.as_deref()).await,
            None => {
                self.shared.visible_task(&request.task_id, asker.as_deref())?;
                self.shared.tasks.cancel_task(&request.task_id)
            }
        }
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [rmcp::model::ProtocolVersion]> {
        Cow::Borrowed(rmcp::model::ProtocolVersion::KNOWN_VERSIONS)
    }
}

/// Who a task belongs to, named the same way when a call becomes a task and when `tasks/get`, `tasks/update` and
/// `tasks/cancel` ask for it: on a protected server, the token's subject, so one principal's tasks are unknown to
/// every other asker. Tasks are of protocol 2026-07-28, which has no sessions: without a principal, a task is
/// anyone's who holds its id (128 random bits, the server's alone to draw).
pub(super) fn task_owner(context: &RequestContext<RoleServer>) -> Option<String> {
    #[cfg(feature = "auth")]
    {
        crate::caller::principal(context).map(|p| p.subject.clone())
    }
    #[cfg(not(feature = "auth"))]
    {
        let _ = context;
        None
    }
}

impl Shared {
    /// Records whose the in-process task `id` is; forgets the owners of tasks the task manager no longer holds
    /// once there are more owners than tasks may run at once.
    pub(super) fn own_task(&self, id: &str, owner: String) {
        let mut owners = self.task_owners.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if owners.len() >= self.max_tasks.max(64) {
            owners.retain(|id, _| self.tasks.get_task(id).is_ok());
        }
        owners.insert(id.to_owned(), owner);
    }

    /// `Ok` when `asker` may see the in-process task `id`; otherwise the error an unknown task gets, so that
    /// another client learns nothing of it.
    pub(super) fn visible_task(&self, id: &str, asker: Option<&str>) -> Result<(), ErrorData> {
        let owners = self.task_owners.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if crate::task::stored::may_see(owners.get(id).map(String::as_str), asker) {
            Ok(())
        } else {
            Err(crate::task::stored::unknown(id))
        }
    }
}
