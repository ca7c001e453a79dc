//! Streamable HTTP serving (feature `http`).
//!
//! [`McpServer::serve_http`] answers MCP on one path (e.g. `/mcp`) of an already bound listener, with rmcp's
//! Streamable HTTP transport: sessions (`Mcp-Session-Id`) for clients of revisions up to 2025-11-25, stateless
//! requests for 2026-07-28, SSE streams for notifications and server requests, and the SDK's DNS-rebinding
//! protection (only `localhost`, `127.0.0.1` and `::1` are accepted as `Host` by default). Other paths answer 404.
//!
//! [`McpServer::http_service`] gives the same service with an [`HttpConfig`], to serve it
//! ([`McpHttpService::serve`]) or to mount it in any HTTP stack (it is a `tower::Service`).
//!
//! What the transport guarantees:
//! - **No stall.** Every accepted connection has `TCP_NODELAY` set, so a response written in several pieces (an
//!   SSE priming event, then the result) is not held back by Nagle's algorithm until the client's delayed ACK.
//! - **Calls run concurrently.** Each request of a session runs on its own task: a slow tool does not hold back a
//!   fast call of the same session. Each request's progress notifications and its result travel on that request's
//!   own stream, in the order they were sent. Log messages (`notifications/message`) travel on the session's
//!   standalone `GET` stream, where the SDK routes every notification that names no request.
//! - **Bounded sessions.** At most [`HttpConfig::max_sessions`] sessions are open at once (default
//!   [`DEFAULT_MAX_SESSIONS`]). Past the cap, an `initialize` is answered `503 Service Unavailable` with
//!   `Retry-After`, and the sessions already open keep working. A session with no traffic for
//!   [`HttpConfig::session_idle_timeout`] (default [`DEFAULT_SESSION_IDLE_TIMEOUT`]) is closed; its client gets
//!   `404` on its next request and starts a new session, as the protocol requires. Stateless (2026-07-28) requests
//!   hold no session and are never refused by the cap.

use std::cell::Cell;
use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_core::Stream;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body as HttpBody, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, LocalSessionManagerError};
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::server::{McpServer, McpSession};

/// How long open connections get to finish after shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The default cap on open sessions: about 50 MiB of session state at the measured ~50 KB per idle session, which
/// suits a small machine. See [`HttpConfig::max_sessions`].
pub const DEFAULT_MAX_SESSIONS: usize = 1024;

/// The default idle expiry of a session. See [`HttpConfig::session_idle_timeout`].
pub const DEFAULT_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// The default `Retry-After` of a refused `initialize`. See [`HttpConfig::retry_after`].
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(5);

/// The session header of the Streamable HTTP transport.
const SESSION_HEADER: &str = "mcp-session-id";

/// The response body type of the HTTP service.
pub type ResponseBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// How the Streamable HTTP server runs: the session limits, and the SDK's own settings (allowed hosts and origins,
/// body limit, SSE keep-alive).
///
/// ```
/// use std::time::Duration;
/// use tool_mcp::HttpConfig;
///
/// let config = HttpConfig::default()
///     .max_sessions(256)
///     .session_idle_timeout(Some(Duration::from_secs(60)))
///     .sdk(|c| c.with_allowed_hosts(["mcp.example.com"]));
/// # let _ = config;
/// ```
#[derive(Clone, Debug)]
#[must_use]
pub struct HttpConfig {
    sdk: StreamableHttpServerConfig,
    max_sessions: usize,
    idle_timeout: Option<Duration>,
    retry_after: Duration,
    health: Option<HealthRoute>,
}

/// What a health route answers: `200 OK` when healthy, else `503 Service Unavailable`; the body as JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthReport {
    /// Whether the server is healthy.
    pub healthy: bool,
    /// The JSON body.
    pub body: serde_json::Value,
}

type HealthFn = dyn Fn() -> HealthReport + Send + Sync;

/// A `GET` route that reports the server's health; see [`HttpConfig::health`].
#[derive(Clone)]
struct HealthRoute {
    path: Arc<str>,
    report: Arc<HealthFn>,
}

impl fmt::Debug for HealthRoute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HealthRoute").field("path", &self.path).finish_non_exhaustive()
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            sdk: StreamableHttpServerConfig::default(),
            max_sessions: DEFAULT_MAX_SESSIONS,
            idle_timeout: Some(DEFAULT_SESSION_IDLE_TIMEOUT),
            retry_after: DEFAULT_RETRY_AFTER,
            health: None,
        }
    }
}

impl HttpConfig {
    /// The most sessions open at once (default [`DEFAULT_MAX_SESSIONS`]). An `initialize` past the cap is answered
    /// `503` with `Retry-After`; `0` refuses every session (stateless requests are still served).
    pub fn max_sessions(mut self, max: usize) -> Self {
        self.max_sessions = max.min(Semaphore::MAX_PERMITS);
        self
    }

    /// How long a session may go without a request before it is closed (default
    /// [`DEFAULT_SESSION_IDLE_TIMEOUT`]); `None` keeps idle sessions until their client deletes them or the server
    /// stops, so that only the cap bounds them.
    pub fn session_idle_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// The `Retry-After` sent with a refused `initialize`, rounded up to whole seconds (default
    /// [`DEFAULT_RETRY_AFTER`]).
    pub fn retry_after(mut self, after: Duration) -> Self {
        self.retry_after = after;
        self
    }

    /// Answers `GET path` (e.g. `/health`) with `report()`, as JSON: `200 OK` when it says healthy, else
    /// `503 Service Unavailable`, so that a load balancer or an orchestrator can read it. Served by
    /// [`McpHttpService::serve`] beside the MCP path; `report` runs on each request and should be cheap.
    pub fn health(
        mut self,
        path: impl Into<String>,
        report: impl Fn() -> HealthReport + Send + Sync + 'static,
    ) -> Self {
        self.health = Some(HealthRoute { path: Arc::from(path.into()), report: Arc::new(report) });
        self
    }

    /// Changes the SDK's own settings: allowed hosts and origins, request body limit, SSE keep-alive and retry.
    /// Its `legacy_session_mode` decides whether sessions are offered at all; its cancellation token is replaced by
    /// [`McpHttpService::serve`]'s shutdown token.
    pub fn sdk(mut self, f: impl FnOnce(StreamableHttpServerConfig) -> StreamableHttpServerConfig) -> Self {
        self.sdk = f(self.sdk);
        self
    }

    /// The configured cap on open sessions.
    pub fn get_max_sessions(&self) -> usize {
        self.max_sessions
    }

    /// The configured idle expiry.
    pub fn get_session_idle_timeout(&self) -> Option<Duration> {
        self.idle_timeout
    }
}

tokio::task_local! {
    /// Set by [`Sessions::create_session`] when it refused a session for the cap, read by the request's
    /// [`McpHttpService::handle`] to answer 503 instead of the SDK's 500.
    static REFUSED: Cell<bool>;
}

/// Why the session manager could not serve a request.
#[derive(Debug)]
enum SessionsError {
    /// The cap on open sessions is reached.
    Full(usize),
    Sdk(LocalSessionManagerError),
}

impl fmt::Display for SessionsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionsError::Full(max) => write!(f, "the server has reached its limit of {max} open sessions"),
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
struct Sessions {
    inner: LocalSessionManager,
    permits: Arc<Semaphore>,
    held: Mutex<HashMap<SessionId, OwnedSemaphorePermit>>,
    max: usize,
}

impl Sessions {
    fn new(max: usize, idle_timeout: Option<Duration>, sse_retry: Option<Duration>) -> Sessions {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = idle_timeout;
        inner.session_config.sse_retry = sse_retry;
        Sessions { inner, permits: Arc::new(Semaphore::new(max)), held: Mutex::new(HashMap::new()), max }
    }

    fn open(&self) -> usize {
        self.max - self.permits.available_permits()
    }

    fn full(&self) -> bool {
        self.permits.available_permits() == 0
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, OwnedSemaphorePermit>> {
        self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn permit(&self) -> Result<OwnedSemaphorePermit, SessionsError> {
        self.permits.clone().try_acquire_owned().map_err(|_| {
            let _ = REFUSED.try_with(|r| r.set(true));
            SessionsError::Full(self.max)
        })
    }
}

impl SessionManager for Sessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let permit = self.permit()?;
        let (id, transport) = self.inner.create_session().await?;
        self.held().insert(id.clone(), permit);
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
        // A restored session (from an external session store) counts against the cap like a new one.
        let permit = self.permit()?;
        match self.inner.restore_session(id.clone()).await? {
            RestoreOutcome::Restored(transport) => {
                self.held().insert(id, permit);
                Ok(RestoreOutcome::Restored(transport))
            }
            other => Ok(other),
        }
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}

/// keel's Streamable HTTP service: rmcp's transport over an [`McpServer`], with the session cap and idle expiry of
/// its [`HttpConfig`]. Cheap to clone (clones share the sessions). Made by [`McpServer::http_service`]; serve it
/// with [`McpHttpService::serve`], or mount it in any HTTP stack as a `tower::Service` (it answers every path it
/// is given).
#[derive(Clone)]
pub struct McpHttpService {
    inner: StreamableHttpService<McpSession, Sessions>,
    sessions: Arc<Sessions>,
    retry_after: HeaderValue,
    health: Option<HealthRoute>,
}

impl fmt::Debug for McpHttpService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpHttpService")
            .field("sessions", &self.sessions.open())
            .field("max_sessions", &self.sessions.max)
            .finish_non_exhaustive()
    }
}

/// Only the `method` of a JSON-RPC message: enough to tell an `initialize` from any other request.
#[derive(serde::Deserialize)]
struct MethodOnly<'a> {
    #[serde(borrow)]
    method: Option<std::borrow::Cow<'a, str>>,
}

fn text_response(status: StatusCode, text: String) -> Response<ResponseBody> {
    response(status, "text/plain; charset=utf-8", text)
}

fn response(status: StatusCode, content_type: &'static str, body: String) -> Response<ResponseBody> {
    let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn health_response(report: &HealthReport) -> Response<ResponseBody> {
    let status = if report.healthy { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    response(status, "application/json", report.body.to_string())
}

fn not_found() -> Response<ResponseBody> {
    text_response(StatusCode::NOT_FOUND, "not found\n".to_owned())
}

impl McpServer {
    /// keel's Streamable HTTP service for this server (one [`McpSession`] per client session), with the limits of
    /// `config`. Serve it with [`McpHttpService::serve`] or mount it in any HTTP stack.
    pub fn http_service(&self, config: HttpConfig) -> McpHttpService {
        let server = self.clone();
        let sessions = Arc::new(Sessions::new(config.max_sessions, config.idle_timeout, config.sdk.sse_retry));
        let retry_after = config.retry_after.as_secs() + u64::from(config.retry_after.subsec_nanos() > 0);
        McpHttpService {
            inner: StreamableHttpService::new(move || Ok(server.session()), sessions.clone(), config.sdk),
            sessions,
            retry_after: HeaderValue::from(retry_after),
            health: config.health,
        }
    }

    /// Serves MCP over Streamable HTTP at `path` (e.g. `/mcp`) on `listener` until `shutdown` is cancelled, with
    /// the default [`HttpConfig`]. See [`McpHttpService::serve`].
    pub async fn serve_http(
        &self,
        listener: TcpListener,
        path: &str,
        shutdown: CancellationToken,
    ) -> std::io::Result<()> {
        self.http_service(HttpConfig::default()).serve(listener, path, shutdown).await
    }
}

impl McpHttpService {
    /// Sessions open now.
    pub fn sessions(&self) -> usize {
        self.sessions.open()
    }

    /// The cap on open sessions.
    pub fn max_sessions(&self) -> usize {
        self.sessions.max
    }

    /// Answers one HTTP request (on whatever path it came).
    pub async fn handle<B>(&self, request: Request<B>) -> Response<ResponseBody>
    where
        B: HttpBody + Send + 'static,
        B::Data: Send + 'static,
        B::Error: fmt::Display + std::error::Error + Send + Sync + 'static,
    {
        // A request without a session may be an `initialize`. When the cap is reached, look at its method before
        // the SDK does: an `initialize` is refused here, with no session made and nothing logged as an error.
        let may_open = request.method() == Method::POST && !request.headers().contains_key(SESSION_HEADER);
        if may_open && self.sessions.full() {
            let (parts, body) = request.into_parts();
            let max_body = self.inner.config.max_request_body_bytes;
            let body = match Limited::new(body, max_body).collect().await {
                Ok(collected) => collected.to_bytes(),
                Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                    return text_response(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        format!("Payload Too Large: request body exceeds {max_body} bytes"),
                    );
                }
                Err(e) => return text_response(StatusCode::BAD_REQUEST, format!("Bad Request: {e}")),
            };
            let initialize = serde_json::from_slice::<MethodOnly<'_>>(&body)
                .is_ok_and(|m| m.method.as_deref() == Some("initialize"));
            if initialize {
                return self.refused();
            }
            return self.handle_inner(Request::from_parts(parts, Full::new(body))).await;
        }
        self.handle_inner(request).await
    }

    async fn handle_inner<B>(&self, request: Request<B>) -> Response<ResponseBody>
    where
        B: HttpBody + Send + 'static,
        B::Data: Send + 'static,
        B::Error: fmt::Display,
    {
        let (response, refused) = REFUSED
            .scope(Cell::new(false), async {
                let response = self.inner.handle(request).await;
                (response, REFUSED.with(Cell::get))
            })
            .await;
        // Another `initialize` took the last slot between the check above and this one's.
        if refused { self.refused() } else { response }
    }

    fn refused(&self) -> Response<ResponseBody> {
        let mut response = text_response(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "Service Unavailable: the server has reached its limit of {} open sessions; retry later\n",
                self.sessions.max
            ),
        );
        response.headers_mut().insert(RETRY_AFTER, self.retry_after.clone());
        response
    }

    /// Serves this service at `path` (e.g. `/mcp`) on `listener` until `shutdown` is cancelled; other paths answer
    /// 404.
    ///
    /// Each connection runs on its own task (HTTP/1.1, keep-alive) with `TCP_NODELAY` set. On shutdown the listener
    /// closes, sessions and their SSE streams end, and open connections get a few seconds to finish.
    pub async fn serve(&self, listener: TcpListener, path: &str, shutdown: CancellationToken) -> std::io::Result<()> {
        let mut service = self.clone();
        service.inner.config.cancellation_token = shutdown.child_token();
        // Shared by every connection and request: cloning the service itself would copy the SDK's configuration.
        let service = Arc::new(service);
        let path: Arc<str> = Arc::from(path);
        loop {
            let (stream, peer) = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                accepted = listener.accept() => match accepted {
                    Ok(pair) => pair,
                    Err(e) => {
                        tracing::warn!(error = %e, "accepting an MCP HTTP connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            configure(&stream);
            let service = service.clone();
            let path = path.clone();
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                let handler = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let service = service.clone();
                    let on_path = req.uri().path() == &*path;
                    let health = match &service.health {
                        Some(h) if req.uri().path() == &*h.path && req.method() == Method::GET => {
                            Some(h.report.clone())
                        }
                        _ => None,
                    };
                    async move {
                        if let Some(report) = health {
                            return Ok::<_, Infallible>(health_response(&report()));
                        }
                        if on_path { Ok(service.handle(req).await) } else { Ok(not_found()) }
                    }
                });
                let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), handler);
                tokio::pin!(conn);
                let result = tokio::select! {
                    r = conn.as_mut() => r,
                    () = shutdown.cancelled() => {
                        conn.as_mut().graceful_shutdown();
                        match tokio::time::timeout(SHUTDOWN_GRACE, conn.as_mut()).await {
                            Ok(r) => r,
                            Err(_) => Ok(()),
                        }
                    }
                };
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "MCP HTTP connection ended with an error");
                }
            });
        }
    }
}

/// Socket options of an accepted connection: `TCP_NODELAY`, so that every write leaves at once.
fn configure(stream: &TcpStream) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "TCP_NODELAY could not be set on an MCP HTTP connection");
    }
}

impl<B> tower_service::Service<Request<B>> for McpHttpService
where
    B: HttpBody + Send + 'static,
    B::Data: Send + 'static,
    B::Error: fmt::Display + std::error::Error + Send + Sync + 'static,
{
    type Response = Response<ResponseBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let service = self.clone();
        Box::pin(async move { Ok(service.handle(request).await) })
    }
}
