//! The session manager: rmcp's in-memory one with a cap on open sessions, an owner per session, and the request
//! it serves in a task-local scope.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_core::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, LocalSessionManagerError};
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::admission::InFlight;
#[cfg(feature = "auth")]
use super::auth;

tokio::task_local! {
    /// The request the SDK is serving, as the session manager sees it.
    pub(super) static SCOPE: Scope;
}

/// What the session manager knows of the request it serves.
pub(super) struct Scope {
    /// Set by [`Sessions::create_session`] when it refused a session for the cap, read by the request's
    /// [`McpHttpService::handle_inner`](super::McpHttpService::handle_inner) to answer 503 instead of the SDK's 500.
    pub(super) refused: Cell<bool>,
    /// The principal whose request this is, on a protected server: a session it opens is its own.
    #[cfg(feature = "auth")]
    pub(super) principal: Option<Arc<auth::Principal>>,
}

impl Scope {
    /// The owner of a session this request opens: its principal's subject, or nobody on a server that is not
    /// protected.
    fn owner(&self) -> Option<Arc<str>> {
        #[cfg(feature = "auth")]
        if let Some(principal) = &self.principal {
            return Some(Arc::from(principal.subject.as_str()));
        }
        None
    }
}

/// Why the session manager could not serve a request.
#[derive(Debug)]
pub(super) enum SessionsError {
    /// The cap on open sessions is reached.
    Full(usize),
    /// A protected server was asked to open a session for a request of no principal.
    Unowned,
    Sdk(LocalSessionManagerError),
}

impl fmt::Display for SessionsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionsError::Full(max) => write!(f, "the server has reached its limit of {max} open sessions"),
            SessionsError::Unowned => f.write_str("a session of a protected server must belong to a principal"),
            SessionsError::Sdk(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for SessionsError {}

impl From<LocalSessionManagerError> for SessionsError {
    fn from(e: LocalSessionManagerError) -> Self {
        SessionsError::Sdk(e)
    }
}

/// rmcp's in-memory session manager with a cap: each session holds one permit of a semaphore from its creation
/// until it is closed (by its client's `DELETE`, by the idle expiry, or when its task ends).
///
/// Every session has its owner from its creation: on a protected server the principal whose request opened it,
/// on another nobody (by declaration: the server knows no principals). A protected server restores no session from
/// an external session store: the store keeps no owner, so the session could only be given to whoever presents
/// its id; its client is answered `404` and opens a new session, as the protocol has it do.
pub(super) struct Sessions {
    pub(super) inner: LocalSessionManager,
    pub(super) permits: Arc<Semaphore>,
    pub(super) held: Mutex<HashMap<SessionId, SessionSlot>>,
    pub(super) max: usize,
    /// Whether the server is protected: every session then belongs to a principal.
    pub(super) protected: bool,
}

/// What an open session holds: its place under the cap, and the count of its requests in flight.
pub(super) struct SessionSlot {
    pub(super) _permit: OwnedSemaphorePermit,
    pub(super) in_flight: Arc<InFlight>,
    /// The subject of the principal that opened the session, on a protected server; `None` on another.
    #[cfg_attr(not(feature = "auth"), allow(dead_code))]
    pub(super) owner: Option<Arc<str>>,
}

impl SessionSlot {
    fn new(permit: OwnedSemaphorePermit, owner: Option<Arc<str>>) -> SessionSlot {
        SessionSlot { _permit: permit, in_flight: Arc::default(), owner }
    }
}

impl Sessions {
    pub(super) fn new(
        max: usize,
        idle_timeout: Option<Duration>,
        sse_retry: Option<Duration>,
        protected: bool,
    ) -> Sessions {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = idle_timeout;
        inner.session_config.sse_retry = sse_retry;
        Sessions { inner, permits: Arc::new(Semaphore::new(max)), held: Mutex::new(HashMap::new()), max, protected }
    }

    pub(super) fn open(&self) -> usize {
        self.max - self.permits.available_permits()
    }

    pub(super) fn full(&self) -> bool {
        self.permits.available_permits() == 0
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, SessionSlot>> {
        self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The in-flight count of the open session `id`, if there is one.
    pub(super) fn in_flight(&self, id: &str) -> Option<Arc<InFlight>> {
        self.held().get(id).map(|slot| slot.in_flight.clone())
    }

    /// Whether the open session `id` belongs to the principal of subject `subject`; `None` for no session.
    #[cfg(feature = "auth")]
    pub(super) fn owned_by(&self, id: &str, subject: &str) -> Option<bool> {
        self.held().get(id).map(|slot| slot.owner.as_deref() == Some(subject))
    }

    /// The owner of a session the current request opens, or why it may not open one.
    fn owner(&self) -> Result<Option<Arc<str>>, SessionsError> {
        let owner = SCOPE.try_with(Scope::owner).ok().flatten();
        if self.protected && owner.is_none() {
            return Err(SessionsError::Unowned);
        }
        Ok(owner)
    }

    fn permit(&self) -> Result<OwnedSemaphorePermit, SessionsError> {
        self.permits.clone().try_acquire_owned().map_err(|_| {
            let _ = SCOPE.try_with(|scope| scope.refused.set(true));
            SessionsError::Full(self.max)
        })
    }
}

impl SessionManager for Sessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let owner = self.owner()?;
        let permit = self.permit()?;
        let (id, transport) = self.inner.create_session().await?;
        self.held().insert(id.clone(), SessionSlot::new(permit, owner));
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let closed = self.inner.close_session(id).await;
        // The permit goes back even if the SDK reported an error: the session is out of its map either way.
        self.held().remove(id);
        Ok(closed?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }

    async fn restore_session(&self, id: SessionId) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        // The store keeps no owner: on a protected server the session is not restored (its client gets 404).
        if self.protected {
            return Ok(RestoreOutcome::NotSupported);
        }
        // A restored session (from an external session store) counts against the cap like a new one.
        let owner = self.owner()?;
        let permit = self.permit()?;
        match self.inner.restore_session(id.clone()).await? {
            RestoreOutcome::Restored(transport) => {
                self.held().insert(id, SessionSlot::new(permit, owner));
                Ok(RestoreOutcome::Restored(transport))
            }
            other => Ok(other),
        }
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}
