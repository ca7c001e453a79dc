//! What the server serves (the executor and its rendered `tools/list`), replacing it, and telling clients.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use keel_tools_core::Codec;
use keel_tools_core::{Executor, Provider, ToolView};
use rmcp::model::Tool;
use rmcp::service::SubscriptionSink;
use rmcp::{Peer, RoleServer};

use super::{DYNAMIC_LIST_TTL, InvalidToolEntry, McpServer, McpServerError};

/// How long one client may take to accept a `tools/list_changed`.
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(5);

/// One executor and its rendered `tools/list`: what the server serves until [`McpServer::update`] swaps it.
pub(super) struct Listing {
    pub(super) executor: Executor,
    /// The MCP codec of the executor's view: the entries served, and the replies.
    pub(super) codec: Codec,
    pub(super) tools: Vec<Tool>,
    pub(super) index: HashMap<String, usize>,
}

impl Listing {
    /// Renders the executor's view for MCP; every tool whose entry is not a valid MCP tool is reported at once.
    pub(super) fn new(executor: Executor) -> Result<Listing, McpServerError> {
        let view: &ToolView = executor.view();
        let codec = view.codec(Provider::Mcp);
        let mut problems = Vec::new();
        let mut tools = Vec::with_capacity(view.len());
        // Served exactly as the codec renders them (the SDK's `Tool` keeps every field keel writes).
        for (def, entry) in view.iter().zip(codec.tool_list().iter()) {
            match serde_json::from_value::<Tool>(entry.clone()) {
                Ok(tool) => tools.push(tool),
                Err(e) => problems.push(InvalidToolEntry { tool: def.name().to_owned(), source: Arc::new(e) }),
            }
        }
        if !problems.is_empty() {
            return Err(McpServerError { problems, other: Vec::new() });
        }
        let index = tools.iter().enumerate().map(|(i, t)| (t.name.to_string(), i)).collect();
        Ok(Listing { executor, codec, tools, index })
    }

    fn same_tools(&self, other: &Listing) -> bool {
        self.tools.len() == other.tools.len() && self.tools.iter().zip(&other.tools).all(|(a, b)| a == b)
    }

    /// The entries `principal` is listed: the tools its view holds and its scopes let it call, in name order.
    #[cfg(feature = "auth")]
    pub(super) fn visible<'a>(
        &'a self,
        view: &'a super::PrincipalView,
        principal: &'a crate::caller::Principal,
    ) -> impl Iterator<Item = &'a Tool> + 'a {
        self.tools
            .iter()
            .zip(self.executor.view().iter())
            .filter(|(_, def)| view.allows(def.name()) && def.allowed_with(&principal.scopes))
            .map(|(tool, _)| tool)
    }
}

/// Who a listener is: on a protected server, the principal that opened the session or the stream (`None` when the
/// server is not protected).
#[cfg(feature = "auth")]
pub(super) type Caller = Option<Arc<crate::caller::Principal>>;
/// Who a listener is: nobody in particular, without the `auth` feature.
#[cfg(not(feature = "auth"))]
pub(super) type Caller = ();

/// The clients to tell when the tool list changes.
#[derive(Default)]
pub(super) struct Listeners {
    /// Sessions that completed `initialize` (protocol revisions up to 2025-11-25): sent an unscoped notification.
    pub(super) sessions: Vec<(Peer<RoleServer>, Caller)>,
    /// `subscriptions/listen` streams that asked for tool-list changes (revision 2026-07-28 on), by a local id.
    pub(super) subscriptions: Vec<(u64, SubscriptionSink, Caller)>,
    pub(super) next_subscription: u64,
}

impl McpServer {
    /// Declares that this server's tools change at run time (a catalogue): `tools/list` answers carry
    /// [`DYNAMIC_LIST_TTL`] from now on, unless the builder set
    /// [`McpServerBuilder::list_ttl`](super::McpServerBuilder::list_ttl). [`McpServer::update`] does this itself.
    pub fn expect_changes(&self) {
        if !self.shared.list_ttl_explicit {
            self.shared.list_ttl_ms.store(duration_ms(DYNAMIC_LIST_TTL), Ordering::Relaxed);
        }
    }

    /// The `ttlMs` hint `tools/list` answers carry now.
    pub fn list_ttl(&self) -> Duration {
        Duration::from_millis(self.shared.list_ttl_ms.load(Ordering::Relaxed))
    }

    /// The current `tools/list` entries, in name order.
    pub fn tools(&self) -> Vec<Tool> {
        self.shared.listing().tools.clone()
    }

    /// The executor new calls go through.
    pub fn executor(&self) -> Executor {
        self.shared.listing().executor.clone()
    }

    /// Serves `executor` from now on, and tells every connected client when the tool list changed.
    ///
    /// The new view is rendered first: a tool that is not a valid MCP entry fails the update and changes nothing.
    /// Calls already running finish on the executor they started with. When the `tools/list` entries differ from
    /// the current ones (names, descriptions, schemas, annotations), every session sends
    /// `notifications/tools/list_changed`: sessions opened with `initialize` directly, and on protocol 2026-07-28
    /// the `subscriptions/listen` streams that asked for tool-list changes. Returns whether the list changed; the
    /// notifications have been handed to each session's transport when it returns.
    pub async fn update(&self, executor: Executor) -> Result<bool, McpServerError> {
        let listing = Arc::new(Listing::new(executor)?);
        self.expect_changes();
        let (changed, before) = {
            let mut current = self.shared.listing.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            let changed = !current.same_tools(&listing);
            let before = std::mem::replace(&mut *current, listing.clone());
            (changed, before)
        };
        if changed {
            self.notify(|caller| self.sees_a_change(caller, &before, &listing)).await;
        }
        Ok(changed)
    }

    /// Whether the client `caller` is listed something else in `after` than in `before`: on a protected server, its
    /// own tools (those of its view that its scopes let it call); otherwise, any change.
    #[cfg_attr(not(feature = "auth"), allow(unused_variables, clippy::unused_self))]
    fn sees_a_change(&self, caller: &Caller, before: &Listing, after: &Listing) -> bool {
        #[cfg(feature = "auth")]
        if let Some(principal) = caller {
            let view = self.shared.view_of(principal);
            return !before.visible(&view, principal).eq(after.visible(&view, principal));
        }
        true
    }

    /// Sends `notifications/tools/list_changed` to every connected client (see [`McpServer::update`]); sessions
    /// whose transport has closed are forgotten. Returns how many clients were sent the notification.
    ///
    /// [`McpServer::update`] itself tells a client of a protected server only when what that client is listed
    /// changed; this tells every client.
    pub async fn notify_tool_list_changed(&self) -> usize {
        self.notify(|_| true).await
    }

    /// Sends `notifications/tools/list_changed` to each connected client `to` picks.
    async fn notify(&self, to: impl Fn(&Caller) -> bool) -> usize {
        // Counted before the listeners are read: a stream acknowledged but not registered yet sees the count move
        // when it registers (see `McpSession::listen`).
        self.shared.tool_changes.fetch_add(1, Ordering::SeqCst);
        let (sessions, subscriptions) = {
            let mut listeners = self.shared.listeners();
            listeners.sessions.retain(|(p, _)| !p.is_transport_closed());
            let sessions: Vec<_> = listeners.sessions.iter().filter(|(_, c)| to(c)).map(|(p, _)| p.clone()).collect();
            let subscriptions: Vec<_> =
                listeners.subscriptions.iter().filter(|(_, _, c)| to(c)).map(|(_, s, _)| s.clone()).collect();
            (sessions, subscriptions)
        };
        // Every client at once, each within a bound: a stuck one holds up nobody else.
        let mut sends = tokio::task::JoinSet::new();
        for peer in sessions {
            sends.spawn(async move { delivered(peer.notify_tool_list_changed(), "session").await });
        }
        for sink in subscriptions {
            sends.spawn(async move { delivered(sink.notify_tool_list_changed(), "subscription").await });
        }
        let mut sent = 0;
        while let Some(delivered) = sends.join_next().await {
            sent += usize::from(delivered.unwrap_or(false));
        }
        sent
    }
}

pub(super) fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Whether one `tools/list_changed` reached its `to` (a session, a subscription) within [`NOTIFY_TIMEOUT`].
async fn delivered<E: std::fmt::Display>(
    send: impl std::future::Future<Output = Result<(), E>>,
    to: &'static str,
) -> bool {
    match tokio::time::timeout(NOTIFY_TIMEOUT, send).await {
        Ok(Ok(())) => true,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "tools/list_changed not delivered to a {to}");
            false
        }
        Err(_) => false,
    }
}
